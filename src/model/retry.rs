//! [`RetryPolicy`]: `tower::retry` for model calls, before the first token only.

use std::{error::Error as StdError, time::Duration};

use futures_util::future::BoxFuture;
use tower::retry::Policy;

use super::{ModelError, ModelObserver, ModelRequest, Observer};
use crate::BoxError;

/// Retries a model call that failed with a retryable [`ModelError`] (rate limited, transport) or
/// timed out (`tower::timeout`), waiting the provider's `retry-after` when it gave one (at most
/// `max_wait`), else an exponential backoff from 250 ms.
///
/// A model service answers with its stream once the provider accepted the call, so the call's
/// error always comes before the first token: `Retry` never replays a stream that already
/// reached the UI. Errors inside the stream are not retried.
///
/// ```
/// use std::time::Duration;
/// use agent_tower::model::{RetryPolicy, scripted::ScriptedModel};
/// use tower::ServiceBuilder;
///
/// let model = ServiceBuilder::new()
///     .retry(RetryPolicy::new(3))
///     .timeout(Duration::from_secs(30)) // until the provider answers
///     .service(ScriptedModel::new());
/// # let _ = model;
/// ```
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    retries_left: u32,
    backoff: Duration,
    max_wait: Duration,
    observer: Observer,
}

impl RetryPolicy {
    /// At most `retries` retries of one call; waits of at most 30 s.
    #[must_use]
    pub fn new(retries: u32) -> Self {
        Self {
            retries_left: retries,
            backoff: Duration::from_millis(250),
            max_wait: Duration::from_secs(30),
            observer: Observer::default(),
        }
    }

    /// Tells `observer` of each call tried again.
    #[must_use]
    pub fn observer(mut self, observer: impl ModelObserver) -> Self {
        self.observer = Observer::new(observer);
        self
    }

    /// The longest wait before a retry, whatever the provider asks.
    #[must_use]
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// How long to wait before retrying after `error`; `None` when it is not worth a retry.
    fn wait(&mut self, error: &(dyn StdError + 'static)) -> Option<Duration> {
        if self.retries_left == 0 {
            return None;
        }
        let (reason, hint) = if let Some(error) = error.downcast_ref::<ModelError>() {
            if !error.kind().is_retryable() {
                return None;
            }
            (error.kind().as_str(), error.retry_after())
        } else if error.is::<tower::timeout::error::Elapsed>() {
            ("timeout", None)
        } else {
            return None;
        };
        self.retries_left -= 1;
        let wait = hint.unwrap_or(self.backoff).min(self.max_wait);
        self.backoff = (self.backoff * 2).min(self.max_wait);
        tracing::warn!(
            reason,
            %error,
            wait_ms = wait.as_millis(),
            "the model call failed before its first token; it is tried again"
        );
        self.observer.retried(reason);
        Some(wait)
    }
}

fn sleep(wait: Duration) -> BoxFuture<'static, ()> {
    Box::pin(tokio::time::sleep(wait))
}

/// The errors a model call can fail with, seen as `dyn Error` by [`RetryPolicy`]: a bare
/// provider's [`ModelError`], or the [`BoxError`] of a stack (after `tower::timeout`). Sealed:
/// it names what the policy reads, it is not an extension point.
pub trait ModelCallError: sealed::Sealed {
    /// This error as a trait object.
    fn as_dyn(&self) -> &(dyn StdError + 'static);
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::ModelError {}
    impl Sealed for super::BoxError {}
}

impl ModelCallError for ModelError {
    fn as_dyn(&self) -> &(dyn StdError + 'static) {
        self
    }
}

impl ModelCallError for BoxError {
    fn as_dyn(&self) -> &(dyn StdError + 'static) {
        self.as_ref()
    }
}

impl<Res, E: ModelCallError> Policy<ModelRequest, Res, E> for RetryPolicy {
    type Future = BoxFuture<'static, ()>;

    fn retry(
        &mut self,
        _request: &mut ModelRequest,
        result: &mut Result<Res, E>,
    ) -> Option<Self::Future> {
        let error = result.as_ref().err()?;
        self.wait(error.as_dyn()).map(sleep)
    }

    fn clone_request(&mut self, request: &ModelRequest) -> Option<ModelRequest> {
        Some(request.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelErrorKind;

    #[test]
    fn retryable_errors_wait_then_give_up() {
        let mut policy = RetryPolicy::new(2).max_wait(Duration::from_secs(5));
        let limited = ModelError::new(ModelErrorKind::RateLimited, "slow down")
            .with_retry_after(Duration::from_secs(60));
        assert_eq!(policy.wait(&limited), Some(Duration::from_secs(5)));
        let elapsed = tower::timeout::error::Elapsed::new();
        assert_eq!(policy.wait(&elapsed), Some(Duration::from_millis(500)));
        assert_eq!(policy.wait(&limited), None, "no retries left");

        let mut policy = RetryPolicy::new(2);
        let auth = ModelError::new(ModelErrorKind::Auth, "bad key");
        assert_eq!(policy.wait(&auth), None);
        let cut = ModelError::new(ModelErrorKind::StreamCut, "cut");
        assert_eq!(policy.wait(&cut), None);
    }
}
