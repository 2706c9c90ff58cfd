//! [`AcpModel`]: the bridged agent's turn, a step at a time.

use std::{
    collections::VecDeque,
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use agent_client_protocol::v1::schema::StopReason;
use futures_util::{StreamExt, future::BoxFuture, stream};
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use super::{
    AcpBridge,
    turn::{End, Session, Update},
};
use crate::{
    BoxError,
    id::MessageId,
    message::Message,
    model::{BoxModelStream, FinishReason, ModelError, ModelErrorKind, ModelEvent, ModelRequest},
};

/// The model side of an [`AcpBridge`]: see the [module](super).
#[derive(Clone)]
pub struct AcpModel {
    bridge: AcpBridge,
}

impl AcpModel {
    pub(super) fn new(bridge: AcpBridge) -> Self {
        Self { bridge }
    }
}

impl fmt::Debug for AcpModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpModel")
            .field("bridge", &self.bridge)
            .finish()
    }
}

impl Service<ModelRequest> for AcpModel {
    type Response = BoxModelStream;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<BoxModelStream, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let bridge = self.bridge.clone();
        Box::pin(async move {
            if bridge.is_closed() {
                return Err(ModelError::new(ModelErrorKind::Transport, super::exited()).into());
            }
            let (session, new_session) = bridge
                .session(&req.run.thread_id)
                .await
                .map_err(|e| ModelError::new(ModelErrorKind::Transport, e.to_string()))?;
            let after_tools = matches!(req.messages.last(), Some(Message::Tool { .. }));
            if session.is_open() && after_tools {
                // The turn goes on; calls the run did not make are refused.
                session.reject_undecided();
            } else {
                bridge.prompt(&session, &req.messages, new_session).await;
            }
            let step = Step {
                bridge,
                session,
                message_id: req.run.message_id.clone(),
                reasoning_id: MessageId::from(format!("{}-reasoning", req.run.message_id)),
                cancel: req.run.cancel.clone(),
                cancel_sent: false,
                queued: VecDeque::new(),
                held: None,
                done: false,
            };
            Ok(Box::pin(stream::unfold(step, Step::next).fuse()) as BoxModelStream)
        })
    }
}

/// One step's reading of the turn.
struct Step {
    bridge: AcpBridge,
    session: Arc<Session>,
    message_id: MessageId,
    reasoning_id: MessageId,
    cancel: CancellationToken,
    cancel_sent: bool,
    queued: VecDeque<ModelEvent>,
    /// A tool call read, held until the agent shows whether it asks permission for it.
    held: Option<(String, String, serde_json::Value)>,
    done: bool,
}

type Item = Result<ModelEvent, BoxError>;

impl Step {
    async fn next(mut self) -> Option<(Item, Self)> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Some((Ok(event), self));
            }
            if self.done {
                return None;
            }
            let session = self.session.clone();
            let changed = session.changed.notified();
            if let Some((id, ..)) = &self.held {
                if session.is_settled(id) {
                    let (id, name, arguments) = self.held.take().expect("held");
                    return Some((Ok(self.tool_call(id, name, arguments)), self));
                }
                self.wait(&session, changed).await;
                continue;
            }
            match session.next() {
                Some(Ok(update)) => {
                    if let Some(event) = self.event(update) {
                        return Some((Ok(event), self));
                    }
                }
                Some(Err(End::Stopped(reason))) => {
                    self.done = true;
                    self.queued.push_back(ModelEvent::Finish(finish(reason)));
                }
                Some(Err(End::Failed(why))) => {
                    self.done = true;
                    let error = ModelError::new(ModelErrorKind::Transport, why);
                    return Some((Err(error.into()), self));
                }
                None => self.wait(&session, changed).await,
            }
        }
    }

    /// Until the session changes; a cancelled run cancels the turn (which the agent then ends
    /// with `cancelled`).
    async fn wait(&mut self, session: &Session, changed: tokio::sync::futures::Notified<'_>) {
        let cancel = self.cancel.clone();
        let cancelled = tokio::select! {
            () = changed => false,
            () = cancel.cancelled(), if !self.cancel_sent => true,
        };
        if cancelled {
            self.cancel_sent = true;
            self.bridge.cancel(&session.id);
        }
    }

    /// The event of `update` (a tool call is held: see [`Self::tool_call`]).
    fn event(&mut self, update: Update) -> Option<ModelEvent> {
        match update {
            Update::Text(text) if !text.is_empty() => Some(ModelEvent::TextDelta {
                message_id: self.message_id.clone(),
                delta: text.into(),
            }),
            Update::Thought(text) if !text.is_empty() => Some(ModelEvent::ReasoningDelta {
                message_id: self.reasoning_id.clone(),
                delta: text.into(),
            }),
            Update::Text(_) | Update::Thought(_) => None,
            Update::ToolCall {
                id,
                name,
                arguments,
            } => {
                self.held = Some((id, name, arguments));
                None
            }
        }
    }

    /// The events of a tool call the agent started; it ends the step.
    fn tool_call(&mut self, id: String, name: String, arguments: serde_json::Value) -> ModelEvent {
        let id = crate::id::ToolCallId::from(id);
        self.done = true;
        self.queued.extend([
            ModelEvent::ToolCallArgs {
                id: id.clone(),
                delta: arguments.to_string().into(),
            },
            ModelEvent::ToolCallEnd { id: id.clone() },
            ModelEvent::Finish(FinishReason::ToolCalls),
        ]);
        ModelEvent::ToolCallStart { id, name }
    }
}

fn finish(reason: StopReason) -> FinishReason {
    match reason {
        StopReason::MaxTokens | StopReason::MaxTurnRequests => FinishReason::Length,
        StopReason::Refusal => FinishReason::ContentFilter,
        _ => FinishReason::Stop,
    }
}
