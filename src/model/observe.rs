//! [`ModelObserver`]: what the model layers tell of the calls they hold back, try again or send
//! to another model, for an operator's metrics ([`Metrics`](crate::metrics::Metrics) is one).

use std::{fmt, sync::Arc, time::Duration};

/// Told by [`RateLimitLayer`](super::rate_limit::RateLimitLayer) of the calls it held,
/// [`RetryPolicy`](super::RetryPolicy) of the calls it tries again and
/// [`Fallback`](super::fallback::Fallback) of the models it falls back from. Each layer also
/// logs them. Every method does nothing by default.
pub trait ModelObserver: Send + Sync + 'static {
    /// A call waited `waited` for room under a rate limit before it was sent.
    fn held(&self, waited: Duration) {
        let _ = waited;
    }

    /// A call failed before its first token, for `reason` (a [kind](super::ModelErrorKind)'s
    /// name, `rate_limited`, `transport`…, or `timeout`), and is tried again.
    fn retried(&self, reason: &'static str) {
        let _ = reason;
    }

    /// A model failed before its first token, and the next one is asked.
    fn fell_back(&self) {}
}

/// A layer's observer, if it has one.
#[derive(Clone, Default)]
pub(crate) struct Observer(Option<Arc<dyn ModelObserver>>);

impl Observer {
    pub(crate) fn new(observer: impl ModelObserver) -> Self {
        Self(Some(Arc::new(observer)))
    }

    pub(crate) fn held(&self, waited: Duration) {
        if let Some(observer) = &self.0 {
            observer.held(waited);
        }
    }

    pub(crate) fn retried(&self, reason: &'static str) {
        if let Some(observer) = &self.0 {
            observer.retried(reason);
        }
    }

    pub(crate) fn fell_back(&self) {
        if let Some(observer) = &self.0 {
            observer.fell_back();
        }
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Observer(Some(..))"
        } else {
            "Observer(None)"
        })
    }
}
