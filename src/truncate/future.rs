//! Response futures of [`Truncate`](super::Truncate).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;

use super::{ResponseStream, bound, layer::Config};
use crate::tool::ToolReply;

pin_project! {
    /// Resolves to the model's stream with large deltas split.
    pub struct ModelResponseFuture<F> {
        #[pin]
        inner: F,
        max_delta: usize,
    }
}

impl<F> ModelResponseFuture<F> {
    pub(crate) fn new(inner: F, max_delta: usize) -> Self {
        Self { inner, max_delta }
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
        Poll::Ready(Ok(ResponseStream::new(stream, *this.max_delta)))
    }
}

impl<F> fmt::Debug for ModelResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelResponseFuture")
            .field("max_delta", &self.max_delta)
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// Resolves to the tool's result, with a bounded display copy when it is too large.
    pub struct ToolResponseFuture<F> {
        #[pin]
        inner: F,
        config: Arc<Config>,
    }
}

impl<F> ToolResponseFuture<F> {
    pub(crate) fn new(inner: F, config: Arc<Config>) -> Self {
        Self { inner, config }
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
        let mut reply = ready!(this.inner.poll(cx))?;
        if let Some(output) = reply.output_mut() {
            bound(output, this.config);
        }
        Poll::Ready(Ok(reply))
    }
}

impl<F> fmt::Debug for ToolResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolResponseFuture")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
