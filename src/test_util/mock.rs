use std::{
    collections::VecDeque,
    fmt,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use futures_core::Stream;
use tower_service::Service;

use crate::{
    id::{MessageId, ToolCallId},
    model::{FinishReason, ModelError, ModelErrorKind, ModelEvent, ModelRequest, Usage},
};

/// One scripted item of a [`MockModel`] reply.
///
/// Text and reasoning are written under ids derived from the step's message id, which is only
/// known when the model is called.
#[derive(Debug)]
#[non_exhaustive]
pub enum MockItem {
    /// A text delta of the step's message.
    Text(String),
    /// A reasoning delta (message id: the step's id plus `-reasoning`).
    Reasoning(String),
    /// Any event, as is.
    Event(ModelEvent),
    /// The stream fails here.
    Error(ModelError),
    /// The stream never yields again (for timeouts and cancellation).
    Pending,
}

impl MockItem {
    /// A text delta.
    pub fn text(text: &str) -> Self {
        Self::Text(text.to_owned())
    }

    /// A reasoning delta.
    pub fn reasoning(text: &str) -> Self {
        Self::Reasoning(text.to_owned())
    }

    /// `ToolCallStart`.
    pub fn tool_start(id: &str, name: &str) -> Self {
        Self::Event(ModelEvent::ToolCallStart {
            id: ToolCallId::from(id),
            name: name.to_owned(),
        })
    }

    /// `ToolCallArgs`.
    pub fn tool_args(id: &str, delta: &str) -> Self {
        Self::Event(ModelEvent::ToolCallArgs {
            id: ToolCallId::from(id),
            delta: delta.into(),
        })
    }

    /// `ToolCallEnd`.
    pub fn tool_end(id: &str) -> Self {
        Self::Event(ModelEvent::ToolCallEnd {
            id: ToolCallId::from(id),
        })
    }

    /// A whole tool call: start, the arguments in one delta, end.
    pub fn tool_call(id: &str, name: &str, arguments: &str) -> [Self; 3] {
        [
            Self::tool_start(id, name),
            Self::tool_args(id, arguments),
            Self::tool_end(id),
        ]
    }

    /// A model turn that makes one whole tool call and finishes for it (`Finish(ToolCalls)`).
    pub fn turn_calling(id: &str, name: &str, arguments: &str) -> Vec<Self> {
        let mut turn = Vec::from(Self::tool_call(id, name, arguments));
        turn.push(Self::tool_calls());
        turn
    }

    /// Usage.
    pub fn usage(input_tokens: u64, output_tokens: u64) -> Self {
        Self::Event(ModelEvent::Usage(Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        }))
    }

    /// `Finish(Stop)`.
    pub fn stop() -> Self {
        Self::Event(ModelEvent::Finish(FinishReason::Stop))
    }

    /// `Finish(ToolCalls)`.
    pub fn tool_calls() -> Self {
        Self::Event(ModelEvent::Finish(FinishReason::ToolCalls))
    }

    /// An error of `kind`.
    pub fn error(kind: ModelErrorKind, message: &str) -> Self {
        Self::Error(ModelError::new(kind, message))
    }
}

/// A model that replays one scripted reply per call and records its requests.
///
/// A call with no reply left fails with a [`ModelError`] of kind
/// [`Other`](ModelErrorKind::Other). Clones share the replies and the record.
#[derive(Clone, Default)]
pub struct MockModel {
    replies: Arc<Mutex<VecDeque<Vec<MockItem>>>>,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl MockModel {
    /// A model answering call `n` with `replies[n]`.
    pub fn new(replies: impl IntoIterator<Item = Vec<MockItem>>) -> Self {
        Self {
            replies: Arc::new(Mutex::new(replies.into_iter().collect())),
            requests: Arc::default(),
        }
    }

    /// Every request received so far.
    #[must_use]
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl fmt::Debug for MockModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MockModel")
            .field(
                "replies_left",
                &self
                    .replies
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .len(),
            )
            .finish()
    }
}

impl Service<ModelRequest> for MockModel {
    type Response = MockStream;
    type Error = ModelError;
    type Future = std::future::Ready<Result<MockStream, ModelError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let message_id = req.run.message_id.clone();
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(req);
        let reply = self
            .replies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        std::future::ready(match reply {
            Some(items) => Ok(MockStream {
                reasoning_id: MessageId::from(format!("{message_id}-reasoning")),
                message_id,
                items: items.into(),
            }),
            None => Err(ModelError::new(
                ModelErrorKind::Other,
                "MockModel has no reply left",
            )),
        })
    }
}

/// The stream of one [`MockModel`] reply.
#[derive(Debug)]
pub struct MockStream {
    message_id: MessageId,
    reasoning_id: MessageId,
    items: VecDeque<MockItem>,
}

impl Stream for MockStream {
    type Item = Result<ModelEvent, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = match self.items.pop_front() {
            None => return Poll::Ready(None),
            Some(MockItem::Pending) => {
                self.items.push_front(MockItem::Pending);
                return Poll::Pending;
            }
            Some(MockItem::Text(delta)) => Ok(ModelEvent::TextDelta {
                message_id: self.message_id.clone(),
                delta: delta.into(),
            }),
            Some(MockItem::Reasoning(delta)) => Ok(ModelEvent::ReasoningDelta {
                message_id: self.reasoning_id.clone(),
                delta: delta.into(),
            }),
            Some(MockItem::Event(event)) => Ok(event),
            Some(MockItem::Error(error)) => Err(error),
        };
        Poll::Ready(Some(item))
    }
}
