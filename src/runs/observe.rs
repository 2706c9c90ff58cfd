//! [`RunObserver`]: what the engine tells whoever watches its runs (metrics, audit, your own).

use std::time::Duration;

use super::RunSummary;
use crate::{agui::event::TokenUsage, run::RunRequest};

/// Called by the engine as its runs go, one method per event, each a no-op by default (as
/// tower-http's `on_request` / `on_response` / `on_failure` callbacks are). Set with
/// [`Runs::observer`](super::Runs::observer); [`Metrics`](crate::metrics::Metrics) is one.
///
/// The calls are made on the engine's tasks, between its writes: keep them short (count, send
/// to a channel), never block.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use agent_tower::runs::{Logged, RunObserver, RunSummary};
///
/// /// Counts the events the engine logs.
/// #[derive(Default)]
/// struct Events(AtomicU64);
///
/// impl RunObserver for Events {
///     fn on_logged(&self, logged: &Logged<'_>) {
///         self.0.fetch_add(logged.events, Ordering::Relaxed);
///     }
/// }
/// ```
pub trait RunObserver: Send + Sync + 'static {
    /// A run is launched on this instance: a new one, a continuation, or one run again after its
    /// instance died.
    fn on_start(&self) {}

    /// The request of a run about to be given to the agent: an observer may put itself in its
    /// extensions for the layers inside the run that report to it (as
    /// [`MetricsLayer`](crate::metrics::MetricsLayer) finds its metrics).
    fn on_request(&self, request: &mut RunRequest) {
        let _ = request;
    }

    /// Events of a run were written to its log.
    fn on_logged(&self, logged: &Logged<'_>) {
        let _ = logged;
    }

    /// A run ended, refused ones included (they were never started).
    fn on_end(&self, summary: &RunSummary) {
        let _ = summary;
    }

    /// A client started (`true`) or stopped (`false`) following a run's events.
    fn on_follower(&self, joined: bool) {
        let _ = joined;
    }

    /// A run whose server stopped was recovered here: `continued` from its log, or ended
    /// (`run_lost`: it could not be continued).
    fn on_recovered(&self, continued: bool) {
        let _ = continued;
    }
}

/// What one write of a run's events did, for [`RunObserver::on_logged`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Logged<'a> {
    /// How many events were written.
    pub events: u64,
    /// For the run's first write, how long after its start it was taken: the time to its first
    /// event.
    pub first: Option<Duration>,
    /// The token usage its terminal event reports, when the write holds it.
    pub usage: Option<&'a [TokenUsage]>,
    /// The name of the principal the run belongs to (`None`: made without authentication).
    pub principal: Option<&'a str>,
}

/// Observes nothing.
impl RunObserver for () {}

/// Both observe, the first first.
impl<A: RunObserver, B: RunObserver> RunObserver for (A, B) {
    fn on_start(&self) {
        self.0.on_start();
        self.1.on_start();
    }

    fn on_request(&self, request: &mut RunRequest) {
        self.0.on_request(request);
        self.1.on_request(request);
    }

    fn on_logged(&self, logged: &Logged<'_>) {
        self.0.on_logged(logged);
        self.1.on_logged(logged);
    }

    fn on_end(&self, summary: &RunSummary) {
        self.0.on_end(summary);
        self.1.on_end(summary);
    }

    fn on_follower(&self, joined: bool) {
        self.0.on_follower(joined);
        self.1.on_follower(joined);
    }

    fn on_recovered(&self, continued: bool) {
        self.0.on_recovered(continued);
        self.1.on_recovered(continued);
    }
}
