//! [`IdleTimeoutLayer`]: a model stream that goes quiet for too long fails.

use std::{
    pin::Pin,
    task::{Context, Poll, ready},
    time::Duration,
};

use futures_core::Stream;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::{ModelError, ModelErrorKind, ModelEvent, ModelRequest, ModelService};
use crate::{
    BoxError,
    stream::wrap::{Wrap, response_future},
};

/// Fails a model's stream with a [`ModelErrorKind::Timeout`] error when no event comes for
/// `idle` (a provider that stalls before its first token or mid-answer). `tower::timeout` bounds the wait for the provider
/// to answer; this bounds every wait after it. The stream's error becomes a [`BoxError`].
///
/// ```
/// use std::time::Duration;
/// use agent_tower::model::{IdleTimeoutLayer, scripted::ScriptedModel};
/// use tower::ServiceBuilder;
///
/// let model = ServiceBuilder::new()
///     .layer(IdleTimeoutLayer::new(Duration::from_secs(60)))
///     .service(ScriptedModel::new());
/// # let _ = model;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct IdleTimeoutLayer {
    idle: Duration,
}

impl IdleTimeoutLayer {
    /// Streams fail after `idle` without an event.
    #[must_use]
    pub fn new(idle: Duration) -> Self {
        Self { idle }
    }
}

impl<S> Layer<S> for IdleTimeoutLayer {
    type Service = IdleTimeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdleTimeout {
            inner,
            idle: self.idle,
        }
    }
}

/// The service of [`IdleTimeoutLayer`].
#[derive(Debug, Clone)]
pub struct IdleTimeout<S> {
    inner: S,
    idle: Duration,
}

impl<S> IdleTimeout<S> {
    crate::inner_service!();
}

impl<S> Service<ModelRequest> for IdleTimeout<S>
where
    S: ModelService,
    S::StreamError: Into<BoxError>,
{
    type Response = IdleStream<S::Events>;
    type Error = S::Error;
    type Future = IdleFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: ModelRequest) -> Self::Future {
        IdleFuture::new(self.inner.call(request), Silence(self.idle))
    }
}

/// Ends the model's stream after a silence this long.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Silence(Duration);

impl<St, E> Wrap<St, E> for Silence {
    type Output = Result<IdleStream<St>, E>;

    fn wrap(self, result: Result<St, E>) -> Self::Output {
        result.map(|stream| IdleStream {
            inner: stream,
            sleep: tokio::time::sleep(self.0),
            idle: self.0,
            done: false,
        })
    }
}

response_future! {
    /// The future of [`IdleTimeout`].
    pub struct IdleFuture<F> = Silence;
    impl<F, St, E> Future for IdleFuture<F>
    where [F: Future<Output = Result<St, E>>]
    { type Output = Result<IdleStream<St>, E>; }
}

pin_project! {
    /// A model stream that fails after a silence; see [`IdleTimeoutLayer`].
    #[derive(Debug)]
    pub struct IdleStream<St> {
        #[pin]
        inner: St,
        #[pin]
        sleep: tokio::time::Sleep,
        idle: Duration,
        done: bool,
    }
}

impl<St, E> Stream for IdleStream<St>
where
    St: Stream<Item = Result<ModelEvent, E>>,
    E: Into<BoxError>,
{
    type Item = Result<ModelEvent, BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = this.inner.poll_next(cx) {
            let deadline = tokio::time::Instant::now() + *this.idle;
            this.sleep.as_mut().reset(deadline);
            *this.done = item.is_none();
            return Poll::Ready(item.map(|event| event.map_err(Into::into)));
        }
        ready!(this.sleep.poll(cx));
        *this.done = true;
        let error = ModelError::new(
            ModelErrorKind::Timeout,
            format!("the model sent nothing for {:?}", this.idle),
        );
        Poll::Ready(Some(Err(error.into())))
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::{id::MessageId, model::test_request as request};

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_stalls_fails_after_the_silence() {
        let model = service_fn(|_: ModelRequest| async {
            let first = futures_util::stream::iter([Ok::<_, ModelError>(ModelEvent::TextDelta {
                message_id: MessageId::from("m"),
                delta: "hi".into(),
            })]);
            Ok::<_, ModelError>(first.chain(futures_util::stream::pending()))
        });
        let model = IdleTimeoutLayer::new(Duration::from_secs(5)).layer(model);
        let events: Vec<_> = model.oneshot(request()).await.unwrap().collect().await;
        assert_eq!(events.len(), 2);
        assert!(events[0].is_ok());
        let error = events[1].as_ref().unwrap_err();
        let error = error.downcast_ref::<ModelError>().unwrap();
        assert_eq!(error.kind(), ModelErrorKind::Timeout);
    }
}
