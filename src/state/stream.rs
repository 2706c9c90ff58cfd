use std::{
    fmt,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use futures_core::Stream;
use pin_project_lite::pin_project;

use super::Hooks;
use crate::{context::SharedState, id::ToolCallId, model::ModelEvent};

/// A tool call whose arguments are streaming, for a tool with a `from_args` hook.
#[derive(Debug)]
struct Watched {
    id: ToolCallId,
    tool: String,
    arguments: String,
}

pin_project! {
    /// A model stream, passed through unchanged, that runs `from_args` hooks on complete calls.
    #[must_use = "streams do nothing unless polled"]
    pub struct ResponseStream<St> {
        #[pin]
        inner: St,
        hooks: Option<(Arc<Hooks>, SharedState)>,
        watched: Vec<Watched>,
    }
}

impl<St> ResponseStream<St> {
    pub(crate) fn new(inner: St, hooks: Option<(Arc<Hooks>, SharedState)>) -> Self {
        Self {
            inner,
            hooks,
            watched: Vec::new(),
        }
    }
}

impl<St, E> Stream for ResponseStream<St>
where
    St: Stream<Item = Result<ModelEvent, E>>,
{
    type Item = Result<ModelEvent, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let item = this.inner.poll_next(cx);
        let (Some((hooks, state)), Poll::Ready(Some(Ok(event)))) = (this.hooks.as_ref(), &item)
        else {
            return item;
        };
        match event {
            ModelEvent::ToolCallStart { id, name } if hooks.from_args.contains_key(name) => {
                this.watched.push(Watched {
                    id: id.clone(),
                    tool: name.clone(),
                    arguments: String::new(),
                });
            }
            ModelEvent::ToolCallArgs { id, delta } => {
                if let Some(call) = this.watched.iter_mut().find(|c| &c.id == id) {
                    call.arguments.push_str(delta);
                }
            }
            ModelEvent::ToolCallEnd { id } => {
                if let Some(at) = this.watched.iter().position(|c| &c.id == id) {
                    let call = this.watched.swap_remove(at);
                    let parsed = serde_json::from_str(&call.arguments);
                    if let (Ok(arguments), Some(hook)) = (parsed, hooks.from_args.get(&call.tool)) {
                        state.update(|state| hook(&arguments, state));
                    }
                }
            }
            _ => {}
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<St> fmt::Debug for ResponseStream<St> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseStream")
            .field("watched", &self.watched)
            .finish_non_exhaustive()
    }
}
