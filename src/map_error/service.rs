use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower_service::Service;

use super::{ClassifyError, Mapper, ResponseStream, future};
use crate::{
    BoxError,
    model::{ModelRequest, ModelService},
    run::{RunOutcome, RunRequest},
    tool::{ToolCall, ToolReply},
};

/// A service wrapped by [`MapErrorLayer`](super::MapErrorLayer).
pub struct MapError<S, C> {
    inner: S,
    mapper: Arc<Mapper<C>>,
}

impl<S, C> MapError<S, C> {
    pub(crate) fn new(inner: S, mapper: Arc<Mapper<C>>) -> Self {
        Self { inner, mapper }
    }

    crate::inner_service!();
}

impl<S: Clone, C> Clone for MapError<S, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            mapper: self.mapper.clone(),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for MapError<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MapError")
            .field("inner", &self.inner)
            .field("mapper", &self.mapper)
            .finish()
    }
}

impl<S, C> Service<RunRequest> for MapError<S, C>
where
    S: Service<RunRequest, Response = RunOutcome>,
    S::Error: Into<BoxError>,
    C: ClassifyError,
{
    type Response = RunOutcome;
    type Error = BoxError;
    type Future = future::RunResponseFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|e| self.mapper.classified(e.into()))
    }

    fn call(&mut self, req: RunRequest) -> Self::Future {
        future::RunResponseFuture::new(
            self.inner.call(req),
            future::ClassifyRun(self.mapper.clone()),
        )
    }
}

impl<S, C> Service<ModelRequest> for MapError<S, C>
where
    S: ModelService,
    S::Error: Into<BoxError>,
    S::StreamError: Into<BoxError>,
    C: ClassifyError,
{
    type Response = ResponseStream<S::Events, C>;
    type Error = BoxError;
    type Future = future::ModelResponseFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|e| self.mapper.classified(e.into()))
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        future::ModelResponseFuture::new(
            self.inner.call(req),
            future::ClassifyStream(self.mapper.clone()),
        )
    }
}

impl<S, C> Service<ToolCall> for MapError<S, C>
where
    S: Service<ToolCall>,
    S::Response: ToolReply,
    S::Error: Into<BoxError>,
    C: ClassifyError,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = future::ToolResponseFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|e| self.mapper.classified(e.into()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        future::ToolResponseFuture::new(
            self.inner.call(call),
            future::FailureAsResult(self.mapper.clone()),
        )
    }
}
