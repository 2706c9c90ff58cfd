//! [`Fallback`]: model services tried in turn, the next when one fails before its first token.

use std::{
    error::Error as StdError,
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;
use tower::{ServiceExt, util::Oneshot};
use tower_service::Service;

use super::{ModelObserver, ModelRequest, ModelService, Observer, worth_another_try};
use crate::BoxError;

/// Tries its model services in order: when one fails before its first token with an error worth
/// another try (rate limited, overloaded, unreachable, a server error, timed out), the next one
/// gets the same request. Any other failure (refused credentials, a prompt too long, a spent
/// budget) is the answer, as is the last service's failure.
///
/// A provider answers once its first event is there, so no client has seen anything of a
/// failed attempt. Which model answered is in the step's usage (its `provider` and `model`,
/// an entry of its own in the run's usage) and so in the `chat` span's `gen_ai.response.model`;
/// each fallback is logged.
///
/// Put each model's own retries and timeout inside it, and the fallback around them:
///
/// ```
/// use std::time::Duration;
/// use agent_tower::model::{
///     BoxModel, RetryPolicy, anthropic::Anthropic, boxed, fallback::Fallback, openai::OpenAi,
/// };
/// use tower::ServiceBuilder;
///
/// let bounded = |model: BoxModel| -> BoxModel {
///     boxed(
///         ServiceBuilder::new()
///             .retry(RetryPolicy::new(1))
///             .timeout(Duration::from_secs(30))
///             .service(model),
///     )
/// };
/// let model = Fallback::new([
///     bounded(boxed(OpenAi::new("https://api.openai.com/v1", "gpt-4.1-mini"))),
///     bounded(boxed(Anthropic::new("claude-haiku-4-5"))),
/// ]);
/// # let _ = model;
/// ```
#[derive(Debug, Clone)]
pub struct Fallback<S> {
    models: Vec<S>,
    observer: Observer,
}

impl<S> Fallback<S> {
    /// `models`, tried in this order.
    ///
    /// # Panics
    ///
    /// When `models` is empty: there is nothing to try.
    pub fn new(models: impl IntoIterator<Item = S>) -> Self {
        let models: Vec<S> = models.into_iter().collect();
        assert!(!models.is_empty(), "a fallback needs at least one model");
        Self {
            models,
            observer: Observer::default(),
        }
    }

    /// Tells `observer` of each model it falls back from.
    #[must_use]
    pub fn observer(mut self, observer: impl ModelObserver) -> Self {
        self.observer = Observer::new(observer);
        self
    }

    /// The models, in order.
    #[must_use]
    pub fn models(&self) -> &[S] {
        &self.models
    }
}

impl<S> Service<ModelRequest> for Fallback<S>
where
    S: ModelService + Clone,
    S::Error: Into<BoxError>,
{
    type Response = S::Events;
    type Error = BoxError;
    type Future = ResponseFuture<S>;

    /// Always ready: each model's readiness is waited for when its turn comes.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: ModelRequest) -> Self::Future {
        let mut models = self.models.clone().into_iter();
        let first = models.next().expect("a fallback has at least one model");
        ResponseFuture {
            asking: first.oneshot(request.clone()),
            request,
            next: models,
            at: 0,
            observer: self.observer.clone(),
        }
    }
}

pin_project! {
    /// The answer of the first model of a [`Fallback`] that answers, or the failure that ended
    /// the tries.
    pub struct ResponseFuture<S>
    where
        S: Service<ModelRequest>,
    {
        #[pin]
        asking: Oneshot<S, ModelRequest>,
        request: ModelRequest,
        next: std::vec::IntoIter<S>,
        at: usize,
        observer: Observer,
    }
}

impl<S> Future for ResponseFuture<S>
where
    S: Service<ModelRequest>,
    S::Error: Into<BoxError>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let error: BoxError = match ready!(this.asking.as_mut().poll(cx)) {
                Ok(events) => return Poll::Ready(Ok(events)),
                Err(error) => error.into(),
            };
            if !worth_another_try(error.as_ref() as &(dyn StdError + 'static)) {
                return Poll::Ready(Err(error));
            }
            let Some(model) = this.next.next() else {
                return Poll::Ready(Err(error));
            };
            tracing::warn!(
                failed = *this.at,
                next = *this.at + 1,
                error = %error,
                "the model failed before its first token; the next one is asked"
            );
            this.observer.fell_back();
            *this.at += 1;
            this.asking.set(model.oneshot(this.request.clone()));
        }
    }
}

impl<S: Service<ModelRequest>> fmt::Debug for ResponseFuture<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("at", &self.at)
            .field("left", &self.next.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use futures_util::StreamExt;

    use super::*;
    use crate::model::{
        BoxModel, FinishReason, ModelError, ModelErrorKind, ModelEvent, Usage, boxed, test_request,
    };

    /// A model that fails with `kind` when given one, else answers with usage naming `name`;
    /// counting its calls.
    fn model(
        name: &'static str,
        kind: Option<ModelErrorKind>,
        calls: Arc<AtomicUsize>,
    ) -> BoxModel {
        boxed(tower::service_fn(move |_: ModelRequest| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if let Some(kind) = kind {
                    return Err(ModelError::new(kind, "no"));
                }
                let usage = Usage {
                    output_tokens: 1,
                    model: Some(name.to_owned()),
                    ..Usage::default()
                };
                Ok(futures_util::stream::iter([
                    Ok::<_, ModelError>(ModelEvent::Usage(usage)),
                    Ok(ModelEvent::Finish(FinishReason::Stop)),
                ]))
            }
        }))
    }

    async fn answered_by(fallback: Fallback<BoxModel>) -> Result<String, BoxError> {
        let events: Vec<_> = fallback.oneshot(test_request()).await?.collect().await;
        match &events[0] {
            Ok(ModelEvent::Usage(usage)) => Ok(usage.model.clone().unwrap()),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn an_overloaded_model_falls_back_and_a_refusal_does_not() {
        let calls = Arc::new(AtomicUsize::new(0));
        let overloaded = model("a", Some(ModelErrorKind::Overloaded), calls.clone());
        let second = model("b", None, calls.clone());
        let fallback = Fallback::new([overloaded.clone(), second.clone()]);
        assert_eq!(answered_by(fallback).await.unwrap(), "b");
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        let auth = model("a", Some(ModelErrorKind::Auth), calls.clone());
        let error = answered_by(Fallback::new([auth, second.clone()]))
            .await
            .unwrap_err();
        let error = error.downcast_ref::<ModelError>().unwrap();
        assert_eq!(
            error.kind(),
            ModelErrorKind::Auth,
            "not worth another model"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3, "the second was not asked");

        let error = answered_by(Fallback::new([overloaded.clone(), overloaded]))
            .await
            .unwrap_err();
        let error = error.downcast_ref::<ModelError>().unwrap();
        assert_eq!(
            error.kind(),
            ModelErrorKind::Overloaded,
            "the last one's failure"
        );
    }
}
