use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower_service::Service;

use super::{future, layer::Config};
use crate::{
    model::{ModelRequest, ModelService},
    tool::{ToolCall, ToolReply},
};

/// A service wrapped by [`TruncateLayer`](super::TruncateLayer): a model whose large deltas are
/// split, or a tool whose large results get a bounded [`display`](crate::tool::ToolOutput::display) copy.
pub struct Truncate<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> Truncate<S> {
    pub(crate) fn new(inner: S, config: Arc<Config>) -> Self {
        Self { inner, config }
    }

    crate::inner_service!();
}

impl<S: Clone> Clone for Truncate<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for Truncate<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Truncate")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

impl<S> Service<ModelRequest> for Truncate<S>
where
    S: ModelService,
{
    type Response = super::ResponseStream<S::Events>;
    type Error = S::Error;
    type Future = future::ModelResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        future::ModelResponseFuture::new(
            self.inner.call(req),
            future::SplitDeltas(self.config.max_delta),
        )
    }
}

impl<S> Service<ToolCall> for Truncate<S>
where
    S: Service<ToolCall>,
    S::Response: ToolReply,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = future::ToolResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        future::ToolResponseFuture::new(self.inner.call(call), future::Bound(self.config.clone()))
    }
}
