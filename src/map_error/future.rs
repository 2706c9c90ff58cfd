//! Response futures of [`MapError`](super::MapError).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;

use super::{ClassifyError, Mapper, ResponseStream};
use crate::{
    BoxError,
    tool::{ToolOutput, ToolReply},
};

pin_project! {
    /// An agent's result, its error classified.
    pub struct RunResponseFuture<F, C> {
        #[pin]
        inner: F,
        mapper: Arc<Mapper<C>>,
    }
}

impl<F, C> RunResponseFuture<F, C> {
    pub(crate) fn new(inner: F, mapper: Arc<Mapper<C>>) -> Self {
        Self { inner, mapper }
    }
}

impl<F, T, E, C> Future for RunResponseFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    C: ClassifyError,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        Poll::Ready(ready!(this.inner.poll(cx)).map_err(|e| this.mapper.classified(e.into())))
    }
}

impl<F, C> fmt::Debug for RunResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunResponseFuture").finish_non_exhaustive()
    }
}

pin_project! {
    /// A model's stream whose call error and item errors are classified.
    pub struct ModelResponseFuture<F, C> {
        #[pin]
        inner: F,
        mapper: Option<Arc<Mapper<C>>>,
    }
}

impl<F, C> ModelResponseFuture<F, C> {
    pub(crate) fn new(inner: F, mapper: Arc<Mapper<C>>) -> Self {
        Self {
            inner,
            mapper: Some(mapper),
        }
    }
}

impl<F, St, E, C> Future for ModelResponseFuture<F, C>
where
    F: Future<Output = Result<St, E>>,
    E: Into<BoxError>,
    C: ClassifyError,
{
    type Output = Result<ResponseStream<St, C>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let mapper = this
            .mapper
            .take()
            .expect("ModelResponseFuture polled after completion");
        Poll::Ready(match result {
            Ok(stream) => Ok(ResponseStream::new(stream, mapper)),
            Err(error) => Err(mapper.classified(error.into())),
        })
    }
}

impl<F, C> fmt::Debug for ModelResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelResponseFuture")
            .finish_non_exhaustive()
    }
}

pin_project! {
    /// A tool's answer; a failure becomes an error result the model reads (an interrupt is an
    /// answer, and stays one).
    pub struct ToolResponseFuture<F, C> {
        #[pin]
        inner: F,
        mapper: Arc<Mapper<C>>,
    }
}

impl<F, C> ToolResponseFuture<F, C> {
    pub(crate) fn new(inner: F, mapper: Arc<Mapper<C>>) -> Self {
        Self { inner, mapper }
    }
}

impl<F, R, E, C> Future for ToolResponseFuture<F, C>
where
    F: Future<Output = Result<R, E>>,
    R: ToolReply,
    E: Into<BoxError>,
    C: ClassifyError,
{
    type Output = Result<R, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        Poll::Ready(Ok(match ready!(this.inner.poll(cx)) {
            Ok(output) => output,
            Err(error) => {
                let class = this.mapper.classifier.classify(&*error.into());
                let (_, message) = class.run_error(this.mapper.detail);
                R::from(ToolOutput::error(message))
            }
        }))
    }
}

impl<F, C> fmt::Debug for ToolResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolResponseFuture").finish_non_exhaustive()
    }
}
