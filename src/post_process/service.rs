use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use futures_core::Stream;
use tower_service::Service;

use super::{Finding, ProcessRequest, ResponseStream, layer::Config, stream::Schedule};
use crate::stream::wrap::{Wrap, response_future};
use crate::{
    BoxError,
    model::{ModelRequest, ModelService},
    run::ContextEntry,
};

/// A model wrapped by [`PostProcessLayer`](super::PostProcessLayer).
pub struct PostProcess<S, P> {
    inner: S,
    processor: P,
    config: Arc<Config>,
}

impl<S, P> PostProcess<S, P> {
    pub(crate) fn new(inner: S, processor: P, config: Arc<Config>) -> Self {
        Self {
            inner,
            processor,
            config,
        }
    }

    crate::inner_service!();
}

impl<S: Clone, P: Clone> Clone for PostProcess<S, P> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            processor: self.processor.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S: fmt::Debug, P> fmt::Debug for PostProcess<S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostProcess")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S, P, St> Service<ModelRequest> for PostProcess<S, P>
where
    S: ModelService,
    P: Service<ProcessRequest, Response = St> + Clone + Send + 'static,
    P::Error: Into<BoxError>,
    P::Future: Send + 'static,
    St: Stream<Item = Finding> + Send + 'static,
{
    type Response = ResponseStream<S::Events, P>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, P>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let ext = &req.run.extensions;
        let schedule = match (&req.run.state, &req.run.background) {
            (Some(state), Some(background)) => Some(Schedule {
                processor: self.processor.clone(),
                config: self.config.clone(),
                state: state.clone(),
                background: background.clone(),
                context: ext
                    .get::<Arc<[ContextEntry]>>()
                    .cloned()
                    .unwrap_or_else(|| Arc::new([])),
            }),
            _ => None,
        };
        ResponseFuture::new(self.inner.call(req), WatchMessages(schedule))
    }
}

/// Watches the model's stream for whole messages.
pub(crate) struct WatchMessages<P>(Option<Schedule<P>>);

impl<St, E, P> Wrap<St, E> for WatchMessages<P> {
    type Output = Result<ResponseStream<St, P>, E>;

    fn wrap(self, result: Result<St, E>) -> Self::Output {
        result.map(|stream| ResponseStream::new(stream, self.0))
    }
}

response_future! {
    /// Resolves to the model's stream, watched for whole messages.
    pub struct ResponseFuture<F, P> = WatchMessages<P>;
    impl<F, St, E, P> Future for ResponseFuture<F, P>
    where [F: Future<Output = Result<St, E>>]
    { type Output = Result<ResponseStream<St, P>, E>; }
}
