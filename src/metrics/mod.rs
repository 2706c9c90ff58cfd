//! [`Metrics`]: what the run engine does, counted for Prometheus (the OpenMetrics text format,
//! encoded by the official `prometheus-client`).
//!
//! ```
//! use agent_tower::metrics::Metrics;
//!
//! let metrics = Metrics::new();
//! // Runs::observer(metrics.clone()) or AguiServer::metrics(metrics.clone()) feeds it;
//! // AguiServer serves it on `GET /metrics`.
//! let text = metrics.encode();
//! assert!(text.contains("# TYPE agent_tower_runs_started counter"));
//! assert!(text.ends_with("# EOF\n"));
//! ```
//!
//! | Metric | Type | Labels |
//! | --- | --- | --- |
//! | `agent_tower_runs_started_total` | counter | (a run continued after its server stopped counts again where it continues) |
//! | `agent_tower_runs_ended_total` | counter | `outcome` (`success`, `interrupted`, `cancelled`, `error`, `disconnected`, `stopped`, `handed_over`: left by a draining server for another to continue), `code` (the `RUN_ERROR` code, or empty) |
//! | `agent_tower_runs_recovered_total` | counter | `outcome` (`continued`: a run whose server stopped, continued here from its log; `lost`: ended with `run_lost`) |
//! | `agent_tower_runs_active` | gauge | |
//! | `agent_tower_run_events_total` | counter | |
//! | `agent_tower_run_first_event_seconds` | histogram | |
//! | `agent_tower_run_duration_seconds` | histogram | `outcome` |
//! | `agent_tower_model_tokens_total` | counter | `type` (`input`, `output`), `model` (as the provider named it; empty when it did not) |
//! | `agent_tower_model_cost_usd_total` | counter | `model` (what the models cost, in US dollars, given a [`CostLayer`](crate::model::cost::CostLayer)) |
//! | `agent_tower_model_calls_held_total`, `agent_tower_model_held_seconds_total` | counter | (calls a rate limit held for room, and how long; given as a [`ModelObserver`](crate::model::ModelObserver)) |
//! | `agent_tower_model_retries_total` | counter | `reason` (`rate_limited`, `overloaded`, `transport`, `timeout`: calls tried again before their first token) |
//! | `agent_tower_model_fallbacks_total` | counter | (models that failed before their first token, the next one asked) |
//! | `agent_tower_tool_calls_total` | counter | `tool`, `outcome` (`ok`, `error`: a result marked as an error, `failed`: no result, `interrupted`: waits for a decision) (counted by [`MetricsLayer`]) |
//! | `agent_tower_followers` | gauge | |
//! | `agent_tower_interrupts_pending` | gauge | (read from the run log when scraped) |
//! | `agent_tower_webhook_attempts_total` | counter | `outcome` (`delivered`, `retried`, `failed`: attempts to deliver a webhook, given as a [`Deliverer::observer`](crate::webhook::Deliverer::observer)) |
//! | `agent_tower_store_commit_seconds` | histogram | (a `RunStore`'s group commits, given [`store_commits`](Metrics::store_commits)) |
//! | `agent_tower_group_runs_ended_total` | counter | `group`, `outcome` (given [`PrincipalGroups`]) |
//! | `agent_tower_group_model_tokens_total` | counter | `group`, `type` (given [`PrincipalGroups`]) |
//! | `agent_tower_group_model_cost_usd_total` | counter | `group` (given [`PrincipalGroups`] and prices) |
//! | `agent_tower_http_requests_total` | counter | `route` (the route's template, `/runs/{run_id}/events`), `method`, `status` (counted by the server's routes) |
//! | `agent_tower_http_request_seconds` | histogram | `route`: time to the response's head (for a stream, to its first byte) |
//! | `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`, `process_threads`, `process_start_time_seconds` | counter, gauges | (the process's, read when scraped, where the platform has them) |
//!
//! Principals are not labels: anyone who signs in would add series. Runs and tokens are counted
//! per *group* of principals instead, the groups an operator names ([`Metrics::with_groups`]).

mod groups;
mod process;

pub use groups::{InvalidGroup, PrincipalGroups};

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use crate::{
    run::{RunRequest, StopReason},
    runs::{Ended, Logged, RunObserver, RunSummary},
    stream::wrap::{Wrap, response_future},
};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

/// How a run ended, as the `outcome` label says it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Outcome {
    Success,
    Interrupted,
    Cancelled,
    Error,
    Disconnected,
    /// Its log failed, or another instance took it over.
    Stopped,
    /// A draining instance left it for another to continue.
    HandedOver,
}

impl Outcome {
    /// The outcome of a run that ended so (`failed`: a `RUN_ERROR` ended it).
    fn of(end: &Ended, failed: bool) -> Self {
        match end {
            Ended::Detached(end) => Self::of(end, failed),
            Ended::Disconnected => Self::Disconnected,
            Ended::LogFailed(_) => Self::Stopped,
            Ended::HandedOver => Self::HandedOver,
            Ended::Failed(_) | Ended::Refused(_) => Self::Error,
            _ if failed => Self::Error,
            Ended::Finished(StopReason::Interrupted) => Self::Interrupted,
            Ended::Finished(StopReason::Cancelled) => Self::Cancelled,
            Ended::Finished(_) => Self::Success,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Interrupted => "interrupted",
            Self::Cancelled => "cancelled",
            Self::Error => "error",
            Self::Disconnected => "disconnected",
            Self::Stopped => "stopped",
            Self::HandedOver => "handed_over",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndLabels {
    outcome: &'static str,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabel {
    r#type: &'static str,
    model: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabel {
    model: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupEndLabels {
    group: Arc<str>,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupTokenLabels {
    group: Arc<str>,
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabel {
    group: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: Arc<str>,
    outcome: &'static str,
}

#[cfg(feature = "server")]
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    route: String,
    method: String,
    status: u16,
}

#[cfg(feature = "server")]
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabel {
    route: String,
}

/// The most distinct tool names counted; calls of others count under `other` (a model can
/// name any tool: the label set must stay bounded).
const MAX_TOOLS: usize = 256;

/// The most distinct model names counted; others count under `other` (a provider names its
/// model in each answer: the label set must stay bounded).
const MAX_MODELS: usize = 64;

/// Label values named by others (a model names tools, a provider its model): each its own until
/// `max` have one, the rest `other`, so that the label set stays bounded.
struct BoundedNames {
    max: usize,
    names: Mutex<HashSet<Arc<str>>>,
}

impl BoundedNames {
    fn new(max: usize) -> Self {
        Self {
            max,
            names: Mutex::default(),
        }
    }

    /// The label of `name`.
    fn label(&self, name: &str) -> Arc<str> {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = names.get(name) {
            return known.clone();
        }
        if names.len() >= self.max {
            return Arc::from("other");
        }
        let label: Arc<str> = Arc::from(name);
        names.insert(label.clone());
        label
    }
}

struct Inner {
    registry: Registry,
    started: Counter,
    ended: Family<EndLabels, Counter>,
    recovered: Family<OutcomeLabel, Counter>,
    active: Gauge,
    events: Counter,
    first_event: Histogram,
    duration: Family<OutcomeLabel, Histogram>,
    tokens: Family<TokenLabel, Counter>,
    cost: Family<ModelLabel, Counter<f64, std::sync::atomic::AtomicU64>>,
    models: BoundedNames,
    held: Counter,
    held_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    retries: Family<ReasonLabel, Counter>,
    fallbacks: Counter,
    tools: Family<ToolLabel, Counter>,
    tool_names: BoundedNames,
    followers: Gauge,
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pending: Gauge,
    commits: Histogram,
    #[cfg_attr(not(feature = "webhooks"), allow(dead_code))]
    webhooks: Family<OutcomeLabel, Counter>,
    groups: PrincipalGroups,
    group_ended: Family<GroupEndLabels, Counter>,
    group_tokens: Family<GroupTokenLabels, Counter>,
    group_cost: Family<GroupLabel, Counter<f64, std::sync::atomic::AtomicU64>>,
    #[cfg(feature = "server")]
    http_requests: Family<HttpLabels, Counter>,
    #[cfg(feature = "server")]
    http_seconds: Family<RouteLabel, Histogram>,
}

/// Counters, gauges and histograms of runs, shared by the engine that feeds them and the
/// endpoint that serves them. Clones share the same metrics.
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn seconds() -> Histogram {
    // 1 ms to about 9 minutes.
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

impl Metrics {
    /// Every metric at zero, registered under the prefix `agent_tower`.
    #[must_use]
    pub fn new() -> Self {
        Self::with_groups(PrincipalGroups::new())
    }

    /// [`new`](Self::new), and runs and tokens counted per group of principals.
    ///
    /// ```
    /// use agent_tower::metrics::{Metrics, PrincipalGroups};
    ///
    /// let groups = PrincipalGroups::new()
    ///     .group("support", ["alice", "bob"])?
    ///     .group("research", ["carol"])?;
    /// let metrics = Metrics::with_groups(groups);
    /// // Given to `Runs::observer`, it counts each run that ends under its principal's group.
    /// # let _ = metrics;
    /// # Ok::<(), agent_tower::metrics::InvalidGroup>(())
    /// ```
    #[must_use]
    pub fn with_groups(groups: PrincipalGroups) -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("agent_tower");
        let started = Counter::default();
        let ended = Family::<EndLabels, Counter>::default();
        let recovered = Family::<OutcomeLabel, Counter>::default();
        let active = Gauge::default();
        let events = Counter::default();
        let first_event = seconds();
        let duration =
            Family::<OutcomeLabel, Histogram>::new_with_constructor(seconds as fn() -> Histogram);
        let tokens = Family::<TokenLabel, Counter>::default();
        let cost = Family::<ModelLabel, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        let held = Counter::default();
        let held_seconds = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        let retries = Family::<ReasonLabel, Counter>::default();
        let fallbacks = Counter::default();
        let tools = Family::<ToolLabel, Counter>::default();
        let followers = Gauge::default();
        let pending = Gauge::default();
        let commits = seconds();
        let webhooks = Family::<OutcomeLabel, Counter>::default();
        registry.register("runs_started", "Runs started", started.clone());
        registry.register(
            "runs_ended",
            "Runs ended, by outcome and RUN_ERROR code",
            ended.clone(),
        );
        registry.register(
            "runs_recovered",
            "Runs whose server stopped, continued here or ended as lost",
            recovered.clone(),
        );
        registry.register("runs_active", "Runs being driven now", active.clone());
        registry.register("run_events", "Events written to run logs", events.clone());
        registry.register(
            "run_first_event_seconds",
            "Time from a run's start to its first event written after RUN_STARTED",
            first_event.clone(),
        );
        registry.register(
            "run_duration_seconds",
            "Run duration, by outcome",
            duration.clone(),
        );
        registry.register(
            "model_tokens",
            "Model tokens used, by type and model",
            tokens.clone(),
        );
        registry.register(
            "model_cost_usd",
            "What the models cost, in US dollars, by model",
            cost.clone(),
        );
        registry.register(
            "model_calls_held",
            "Model calls a rate limit held for room",
            held.clone(),
        );
        registry.register(
            "model_held_seconds",
            "Time model calls waited for room under a rate limit",
            held_seconds.clone(),
        );
        registry.register(
            "model_retries",
            "Model calls tried again before their first token, by reason",
            retries.clone(),
        );
        registry.register(
            "model_fallbacks",
            "Models that failed before their first token, the next one asked",
            fallbacks.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls, by tool and outcome",
            tools.clone(),
        );
        registry.register(
            "followers",
            "Clients following a run's events",
            followers.clone(),
        );
        registry.register(
            "store_commit_seconds",
            "Time to commit one group of run log writes to the store",
            commits.clone(),
        );
        registry.register(
            "webhook_attempts",
            "Attempts to deliver a webhook, by outcome",
            webhooks.clone(),
        );
        registry.register(
            "interrupts_pending",
            "Interrupts waiting for an answer (read from the run log when scraped)",
            pending.clone(),
        );
        let group_ended = Family::<GroupEndLabels, Counter>::default();
        let group_tokens = Family::<GroupTokenLabels, Counter>::default();
        let group_cost =
            Family::<GroupLabel, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        if !groups.is_empty() {
            registry.register(
                "group_model_cost_usd",
                "What the models cost, in US dollars, by group of principals",
                group_cost.clone(),
            );
            registry.register(
                "group_runs_ended",
                "Runs ended, by group of principals and outcome",
                group_ended.clone(),
            );
            registry.register(
                "group_model_tokens",
                "Model tokens used, by group of principals and type",
                group_tokens.clone(),
            );
        }
        #[cfg(feature = "server")]
        let (http_requests, http_seconds) = {
            let requests = Family::<HttpLabels, Counter>::default();
            let seconds =
                Family::<RouteLabel, Histogram>::new_with_constructor(seconds as fn() -> Histogram);
            registry.register(
                "http_requests",
                "HTTP requests answered, by route, method and status",
                requests.clone(),
            );
            registry.register(
                "http_request_seconds",
                "Time to a response's head, by route",
                seconds.clone(),
            );
            (requests, seconds)
        };
        root.register_collector(Box::new(process::ProcessCollector));
        Self(Arc::new(Inner {
            registry: root,
            started,
            ended,
            recovered,
            active,
            events,
            first_event,
            duration,
            tokens,
            cost,
            models: BoundedNames::new(MAX_MODELS),
            held,
            held_seconds,
            retries,
            fallbacks,
            tools,
            tool_names: BoundedNames::new(MAX_TOOLS),
            followers,
            pending,
            commits,
            webhooks,
            groups,
            group_ended,
            group_tokens,
            group_cost,
            #[cfg(feature = "server")]
            http_requests,
            #[cfg(feature = "server")]
            http_seconds,
        }))
    }

    /// The metrics in the OpenMetrics text format (`application/openmetrics-text`).
    #[must_use]
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.0.registry)
            .expect("writing to a String does not fail");
        text
    }

    /// A request answered on `route` (a route's template) with `status`, its head ready after
    /// `took`.
    #[cfg(feature = "server")]
    pub(crate) fn http_request(&self, route: &str, method: &str, status: u16, took: Duration) {
        let labels = HttpLabels {
            route: route.to_owned(),
            method: method.to_owned(),
            status,
        };
        self.0.http_requests.get_or_create(&labels).inc();
        let route = RouteLabel {
            route: labels.route,
        };
        self.0
            .http_seconds
            .get_or_create(&route)
            .observe(took.as_secs_f64());
    }

    fn tool_call(&self, tool: &str, outcome: &'static str) {
        let label = ToolLabel {
            tool: self.0.tool_names.label(tool),
            outcome,
        };
        self.0.tools.get_or_create(&label).inc();
    }

    fn usage(&self, usage: Option<&[crate::agui::event::TokenUsage]>, principal: Option<&str>) {
        let group = (!self.0.groups.is_empty()).then(|| self.0.groups.of(principal));
        for usage in usage.unwrap_or_default() {
            let model = self
                .0
                .models
                .label(usage.model.as_deref().unwrap_or_default());
            if let Some(cost) = usage.cost {
                let label = ModelLabel {
                    model: model.clone(),
                };
                self.0.cost.get_or_create(&label).inc_by(cost.usd());
                if let Some(group) = &group {
                    let label = GroupLabel {
                        group: group.clone(),
                    };
                    self.0.group_cost.get_or_create(&label).inc_by(cost.usd());
                }
            }
            for (kind, tokens) in [
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
            ] {
                let Some(tokens) = tokens else { continue };
                let label = TokenLabel {
                    r#type: kind,
                    model: model.clone(),
                };
                self.0.tokens.get_or_create(&label).inc_by(tokens);
                if let Some(group) = &group {
                    let labels = GroupTokenLabels {
                        group: group.clone(),
                        r#type: kind,
                    };
                    self.0.group_tokens.get_or_create(&labels).inc_by(tokens);
                }
            }
        }
    }

    /// A callback for [`RunStore::on_commit`](crate::store::RunStore::on_commit): the store's
    /// group commits, timed in `agent_tower_store_commit_seconds`.
    pub fn store_commits(&self) -> impl Fn(Duration) + Send + Sync + 'static {
        let metrics = self.clone();
        move |took| metrics.0.commits.observe(took.as_secs_f64())
    }

    /// A callback for [`Deliverer::observer`](crate::webhook::Deliverer::observer): webhook
    /// attempts counted in `agent_tower_webhook_attempts_total` by outcome.
    #[cfg(feature = "webhooks")]
    pub fn webhooks(&self) -> impl Fn(crate::webhook::Attempt) + Send + Sync + 'static {
        let metrics = self.clone();
        move |attempt| {
            let outcome = attempt.as_str();
            metrics
                .0
                .webhooks
                .get_or_create(&OutcomeLabel { outcome })
                .inc();
        }
    }

    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn set_pending_interrupts(&self, pending: usize) {
        self.0
            .pending
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
    }
}

/// The engine's runs, counted.
impl RunObserver for Metrics {
    fn on_start(&self) {
        self.0.started.inc();
        self.0.active.inc();
    }

    fn on_request(&self, request: &mut RunRequest) {
        // For the layers that count what happens inside the run (`MetricsLayer`).
        request.run.extensions.insert(self.clone());
    }

    fn on_logged(&self, logged: &Logged<'_>) {
        if let Some(elapsed) = logged.first {
            self.0.first_event.observe(elapsed.as_secs_f64());
        }
        self.usage(logged.usage, logged.principal);
        self.0.events.inc_by(logged.events);
    }

    fn on_end(&self, summary: &RunSummary) {
        if matches!(summary.end, Ended::Refused(_)) {
            // Refused at its start: it was never launched.
            self.on_start();
        }
        self.0.active.dec();
        let outcome = Outcome::of(&summary.end, summary.code.is_some()).as_str();
        self.0
            .ended
            .get_or_create(&EndLabels {
                outcome,
                code: summary.code.clone().unwrap_or_default(),
            })
            .inc();
        self.0
            .duration
            .get_or_create(&OutcomeLabel { outcome })
            .observe(summary.duration.as_secs_f64());
        if !self.0.groups.is_empty() {
            let group = self.0.groups.of(summary.principal.as_deref());
            let labels = GroupEndLabels { group, outcome };
            self.0.group_ended.get_or_create(&labels).inc();
        }
    }

    fn on_follower(&self, joined: bool) {
        if joined {
            self.0.followers.inc();
        } else {
            self.0.followers.dec();
        }
    }

    fn on_recovered(&self, continued: bool) {
        let outcome = if continued { "continued" } else { "lost" };
        self.0
            .recovered
            .get_or_create(&OutcomeLabel { outcome })
            .inc();
    }
}

/// Counts tool calls by tool and outcome in the [`Metrics`] of the run they belong to (the run
/// engine's [observer](crate::runs::Runs::observer) puts them in each run's context);
/// calls of runs without metrics pass uncounted.
///
/// ```
/// use agent_tower::{metrics::MetricsLayer, tool::ToolRouter};
/// use tower::Layer;
///
/// let tools = MetricsLayer::new().layer(ToolRouter::new());
/// # let _ = tools;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct MetricsLayer {
    _priv: (),
}

impl MetricsLayer {
    /// The layer.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

impl<S> tower_layer::Layer<S> for MetricsLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Counted { inner }
    }
}

/// The service of [`MetricsLayer`].
#[derive(Debug, Clone)]
pub struct Counted<S> {
    inner: S,
}

impl<S> tower_service::Service<crate::tool::ToolCall> for Counted<S>
where
    S: tower_service::Service<crate::tool::ToolCall>,
    S::Response: crate::tool::ToolReply,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = CountedFuture<S::Future>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: crate::tool::ToolCall) -> Self::Future {
        let counted = call
            .run
            .extensions
            .get::<Metrics>()
            .map(|metrics| (metrics.clone(), call.name.clone()));
        CountedFuture::new(self.inner.call(call), Count(counted))
    }
}

/// Counts a tool call once it answered, in the metrics of its run.
pub(crate) struct Count(Option<(Metrics, String)>);

impl<R: crate::tool::ToolReply, E> Wrap<R, E> for Count {
    type Output = Result<R, E>;

    fn wrap(self, result: Result<R, E>) -> Self::Output {
        if let Some((metrics, tool)) = self.0 {
            let outcome = match result.as_ref().map(|reply| reply.output()) {
                Ok(Some(out)) if out.is_error => "error",
                Ok(Some(_)) => "ok",
                Ok(None) => "interrupted",
                Err(_) => "failed",
            };
            metrics.tool_call(&tool, outcome);
        }
        result
    }
}

response_future! {
    /// The future of [`Counted`].
    pub struct CountedFuture<F> = Count;
    impl<F, R, E> Future for CountedFuture<F>
    where [F: Future<Output = Result<R, E>>, R: crate::tool::ToolReply]
    { type Output = Result<R, E>; }
}

/// Counts what the model layers tell: calls held by a rate limit, tried again, or sent to the
/// next model (give it to `RateLimitLayer::observer`, `RetryPolicy::observer`,
/// `Fallback::observer`).
impl crate::model::ModelObserver for Metrics {
    fn held(&self, waited: Duration) {
        self.0.held.inc();
        self.0.held_seconds.inc_by(waited.as_secs_f64());
    }

    fn retried(&self, reason: &'static str) {
        self.0.retries.get_or_create(&ReasonLabel { reason }).inc();
    }

    fn fell_back(&self) {
        self.0.fallbacks.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agui::event::TokenUsage;

    /// The value of the series whose line starts with `series` in `text`.
    fn value(text: &str, series: &str) -> Option<u64> {
        text.lines()
            .find_map(|line| line.strip_prefix(series))
            .and_then(|rest| rest.trim().parse().ok())
    }

    /// A run of `principal` that used 7 output tokens, observed from its start to its end.
    fn one_run(metrics: &Metrics, principal: Option<&str>) {
        let usage = [TokenUsage {
            output_tokens: Some(7),
            cost: Some(crate::model::Cost::from_usd(0.25)),
            model: Some("m1".to_owned()),
            ..TokenUsage::default()
        }];
        metrics.on_start();
        metrics.on_logged(&Logged {
            events: 3,
            first: None,
            usage: Some(&usage),
            principal,
        });
        metrics.on_end(&RunSummary {
            thread_id: "t".into(),
            run_id: "r".into(),
            principal: principal.map(str::to_owned),
            events: 3,
            attempt: 1,
            duration: Duration::from_millis(5),
            end: Ended::Finished(StopReason::EndTurn),
            code: None,
        });
    }

    #[test]
    fn runs_and_tokens_count_by_group_of_principals() {
        let groups = PrincipalGroups::new()
            .group("support", ["alice", "bob"])
            .unwrap();
        let metrics = Metrics::with_groups(groups);
        for principal in [Some("alice"), Some("bob"), Some("eve"), None] {
            one_run(&metrics, principal);
        }
        let text = metrics.encode();
        let ended = |group| {
            value(
                &text,
                &format!(
                    "agent_tower_group_runs_ended_total{{group=\"{group}\",outcome=\"success\"}}"
                ),
            )
        };
        assert_eq!(
            [ended("support"), ended("other"), ended("none")],
            [Some(2), Some(1), Some(1)],
            "{text}"
        );
        let cost = text
            .lines()
            .find_map(|line| line.strip_prefix("agent_tower_model_cost_usd_total{model=\"m1\"} "))
            .and_then(|value| value.parse::<f64>().ok());
        assert_eq!(cost, Some(1.0), "four runs of $0.25: {text}");
        let support = text
            .lines()
            .find_map(|line| {
                line.strip_prefix("agent_tower_group_model_cost_usd_total{group=\"support\"} ")
            })
            .and_then(|value| value.parse::<f64>().ok());
        assert_eq!(support, Some(0.5), "alice's and bob's: {text}");
        let tokens = "agent_tower_group_model_tokens_total{group=\"support\",type=\"output\"}";
        assert_eq!(value(&text, tokens), Some(14), "{text}");
        assert!(!text.contains("alice"), "principals are not labels: {text}");
    }

    #[cfg(feature = "webhooks")]
    #[test]
    fn webhook_attempts_are_counted_by_outcome() {
        use crate::webhook::Attempt;
        let metrics = Metrics::new();
        let observe = metrics.webhooks();
        for attempt in [
            Attempt::Retried,
            Attempt::Retried,
            Attempt::Delivered,
            Attempt::Failed,
        ] {
            observe(attempt);
        }
        let text = metrics.encode();
        let attempts =
            |outcome| format!("agent_tower_webhook_attempts_total{{outcome=\"{outcome}\"}} ");
        assert_eq!(value(&text, &attempts("retried")), Some(2), "{text}");
        assert_eq!(value(&text, &attempts("delivered")), Some(1), "{text}");
        assert_eq!(value(&text, &attempts("failed")), Some(1), "{text}");
    }

    #[test]
    fn held_retried_and_fallen_back_calls_are_counted_and_models_are_labels_up_to_a_bound() {
        use crate::model::ModelObserver;
        let metrics = Metrics::new();
        metrics.held(Duration::from_millis(1500));
        metrics.held(Duration::from_millis(500));
        metrics.retried("timeout");
        metrics.retried("rate_limited");
        metrics.retried("timeout");
        metrics.fell_back();
        let text = metrics.encode();
        assert_eq!(
            value(&text, "agent_tower_model_calls_held_total "),
            Some(2),
            "{text}"
        );
        assert!(
            text.contains("agent_tower_model_held_seconds_total 2.0"),
            "{text}"
        );
        let retries = |reason| format!("agent_tower_model_retries_total{{reason=\"{reason}\"}} ");
        assert_eq!(value(&text, &retries("timeout")), Some(2), "{text}");
        assert_eq!(value(&text, &retries("rate_limited")), Some(1), "{text}");
        assert_eq!(
            value(&text, "agent_tower_model_fallbacks_total "),
            Some(1),
            "{text}"
        );

        for n in 0..=MAX_MODELS {
            let usage = [TokenUsage {
                input_tokens: Some(1),
                model: Some(format!("model-{n}")),
                ..TokenUsage::default()
            }];
            metrics.usage(Some(&usage), None);
        }
        let text = metrics.encode();
        let input = |model: &str| {
            format!("agent_tower_model_tokens_total{{type=\"input\",model=\"{model}\"}} ")
        };
        assert_eq!(value(&text, &input("model-0")), Some(1), "{text}");
        assert_eq!(
            value(&text, &input("other")),
            Some(1),
            "past the bound: {text}"
        );
        assert_eq!(value(&text, &input(&format!("model-{MAX_MODELS}"))), None);
    }

    #[test]
    fn without_groups_there_are_no_group_families() {
        let metrics = Metrics::new();
        one_run(&metrics, Some("alice"));
        let text = metrics.encode();
        assert!(text.contains("agent_tower_runs_ended_total"), "{text}");
        assert!(!text.contains("agent_tower_group_"), "{text}");
    }
}
