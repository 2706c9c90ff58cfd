//! Response futures of [`Acp`](super::Acp).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use agent_client_protocol::v1::schema::{
    SessionUpdate, ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use pin_project_lite::pin_project;
use serde_json::Value;

use super::{UpdateEncoder, content::tool_content};
use crate::{
    id::ToolCallId,
    message::ContentPart,
    stream::{Outbox, TeeFuture},
    tool::{Progress, Started, ToolReply},
    transport::Transport,
};

/// The future of a wrapped model call: resolves to the model's stream, teed.
pub type ModelResponseFuture<F, T> = TeeFuture<F, T, UpdateEncoder, SessionUpdate>;

/// Where a tool call is in its life, as the editor was told.
#[derive(Debug)]
pub(crate) struct Lifecycle {
    pub(crate) id: ToolCallId,
    pub(crate) started: Started,
    pub(crate) progress: Progress,
    pub(crate) running: bool,
}

impl Lifecycle {
    fn update(&self, fields: ToolCallUpdateFields) -> SessionUpdate {
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(self.id.to_string(), fields))
    }

    fn status(&self, status: ToolCallStatus) -> SessionUpdate {
        self.update(ToolCallUpdateFields::new().status(status))
    }

    /// The final update: completed with the UI's copy of the result, or failed with why (a call
    /// that stopped at an interrupt did not run: it failed, saying so).
    fn finished<R: ToolReply, E: fmt::Display>(&self, output: &Result<R, E>) -> SessionUpdate {
        let (parts, failed) = match output {
            Ok(reply) => match reply.output() {
                Some(out) => (out.ui_content().to_vec(), out.is_error),
                None => (
                    reply
                        .interrupts()
                        .iter()
                        .map(|interrupt| ContentPart::text(interrupt.to_string()))
                        .collect(),
                    true,
                ),
            },
            Err(error) => (vec![ContentPart::text(error.to_string())], true),
        };
        let content = tool_content(&parts);
        let status = if failed {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        self.update(
            ToolCallUpdateFields::new()
                .status(status)
                .content(content)
                .raw_output(raw_output(&parts)),
        )
    }
}

/// The result as JSON: one JSON part as itself, one text part parsed if it is JSON, else the
/// text.
fn raw_output(parts: &[ContentPart]) -> Value {
    match parts {
        [ContentPart::Json { value }] => value.clone(),
        [ContentPart::Text { text }] => {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
        }
        parts => Value::String(crate::message::parts_to_text(parts)),
    }
}

pin_project! {
    /// The future of a wrapped tool call: the tool's own result, once the editor was told.
    ///
    /// The call goes `in_progress` when it really starts (after a permission layer let it run),
    /// then `completed` or `failed`; dropped before its end, it is marked `failed` without waiting.
    pub struct ToolResponseFuture<F, T>
    where
        F: Future,
        T: Transport<SessionUpdate>,
    {
        #[pin]
        inner: F,
        outbox: Outbox<T, SessionUpdate>,
        call: Lifecycle,
        output: Option<F::Output>,
        // The `tool_call` update is out: what the call asks of the editor comes after it.
        announced: bool,
        done: bool,
    }

    impl<F, T> PinnedDrop for ToolResponseFuture<F, T>
    where
        F: Future,
        T: Transport<SessionUpdate>,
    {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if *this.done {
                return;
            }
            if this.output.is_none() {
                let cancelled = this.call.update(
                    ToolCallUpdateFields::new()
                        .status(ToolCallStatus::Failed)
                        .content(vec![ToolCallContent::from("cancelled")]),
                );
                this.outbox.queue().push_back(cancelled);
            }
            this.outbox.send_now();
        }
    }
}

impl<F, T> ToolResponseFuture<F, T>
where
    F: Future,
    T: Transport<SessionUpdate>,
{
    pub(crate) fn new(inner: F, outbox: Outbox<T, SessionUpdate>, call: Lifecycle) -> Self {
        Self {
            inner,
            outbox,
            call,
            output: None,
            announced: false,
            done: false,
        }
    }
}

impl<F, R, E, T> Future for ToolResponseFuture<F, T>
where
    F: Future<Output = Result<R, E>>,
    R: ToolReply,
    E: fmt::Display,
    T: Transport<SessionUpdate>,
{
    type Output = Result<R, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if !*this.announced {
            // The editor hears of the call before anything the call asks of it (a permission
            // request), as ACP wants: a call is reported when the model makes it.
            ready!(this.outbox.poll_drain(cx));
            *this.announced = true;
        }
        if this.output.is_none() {
            // The inner call first: it is what lets a held call start.
            let polled = this.inner.poll(cx);
            if !this.call.running && this.call.started.poll_started(cx).is_ready() {
                this.call.running = true;
                this.outbox
                    .push(this.call.status(ToolCallStatus::InProgress));
            }
            match polled {
                Poll::Pending => {
                    // The latest progress, once the editor took what came before.
                    if this.outbox.is_empty()
                        && let Some(progress) = this.call.progress.poll_take(cx)
                    {
                        let text = match progress {
                            Value::String(text) => text,
                            other => other.to_string(),
                        };
                        this.outbox.push(
                            this.call
                                .update(ToolCallUpdateFields::new().content(vec![text.into()])),
                        );
                    }
                    let _ = this.outbox.poll_drain(cx);
                    return Poll::Pending;
                }
                Poll::Ready(output) => {
                    this.outbox.push(this.call.finished(&output));
                    *this.output = Some(output);
                }
            }
        }
        ready!(this.outbox.poll_flush(cx));
        *this.done = true;
        Poll::Ready(
            this.output
                .take()
                .expect("ToolResponseFuture polled after completion"),
        )
    }
}

impl<F: Future, T: Transport<SessionUpdate>> fmt::Debug for ToolResponseFuture<F, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolResponseFuture")
            .field("inner", &std::any::type_name::<F>())
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}
