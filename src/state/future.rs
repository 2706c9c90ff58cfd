//! Response futures of [`State`](super::State).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;
use serde_json::Value;

use super::{FromResult, Hooks, ResponseStream};
use crate::{context::SharedState, tool::ToolReply};

pin_project! {
    /// Resolves to the model's stream, watched for complete tool arguments.
    pub struct ModelResponseFuture<F> {
        #[pin]
        inner: F,
        hooks: Option<(Arc<Hooks>, SharedState)>,
    }
}

impl<F> ModelResponseFuture<F> {
    pub(crate) fn new(inner: F, hooks: Option<(Arc<Hooks>, SharedState)>) -> Self {
        Self { inner, hooks }
    }
}

impl<F, St, E> Future for ModelResponseFuture<F>
where
    F: Future<Output = Result<St, E>>,
{
    type Output = Result<ResponseStream<St>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let stream = ready!(this.inner.poll(cx))?;
        Poll::Ready(Ok(ResponseStream::new(stream, this.hooks.take())))
    }
}

impl<F> fmt::Debug for ModelResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelResponseFuture")
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// Resolves to the tool's result, after its `from_result` hook changed the state.
    pub struct ToolResponseFuture<F> {
        #[pin]
        inner: F,
        pending: Option<(FromResult, SharedState, Value)>,
    }
}

impl<F> ToolResponseFuture<F> {
    pub(crate) fn new(inner: F, pending: Option<(FromResult, SharedState, Value)>) -> Self {
        Self { inner, pending }
    }
}

impl<F, R, E> Future for ToolResponseFuture<F>
where
    F: Future<Output = Result<R, E>>,
    R: ToolReply,
{
    type Output = Result<R, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let reply = ready!(this.inner.poll(cx))?;
        // A call that stopped at an interrupt has no result to take the state from.
        if let (Some(output), Some((hook, state, arguments))) =
            (reply.output(), this.pending.take())
        {
            state.update(|state| hook(&arguments, output, state));
        }
        Poll::Ready(Ok(reply))
    }
}

impl<F> fmt::Debug for ToolResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolResponseFuture").finish_non_exhaustive()
    }
}
