use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use futures_core::Stream;
use pin_project_lite::pin_project;
use tower_service::Service;

use super::{Finding, ProcessRequest, ResponseStream, layer::Config, stream::Schedule};
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
        ResponseFuture {
            inner: self.inner.call(req),
            schedule,
        }
    }
}

pin_project! {
    /// Resolves to the model's stream, watched for whole messages.
    pub struct ResponseFuture<F, P> {
        #[pin]
        inner: F,
        schedule: Option<Schedule<P>>,
    }
}

impl<F, St, E, P> Future for ResponseFuture<F, P>
where
    F: Future<Output = Result<St, E>>,
{
    type Output = Result<ResponseStream<St, P>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let stream = ready!(this.inner.poll(cx))?;
        Poll::Ready(Ok(ResponseStream::new(stream, this.schedule.take())))
    }
}

impl<F, P> fmt::Debug for ResponseFuture<F, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
