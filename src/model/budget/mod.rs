//! [`BudgetLayer`]: a cap on what a run, and a principal in a day, may spend on models.

use std::{
    collections::{HashMap, VecDeque},
    fmt,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, ready},
    time::{SystemTime, UNIX_EPOCH},
};

use futures_core::Stream;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::{
    Cost, ModelError, ModelErrorKind, ModelEvent, ModelRequest, ModelService, Usage, WrapEvents,
};
use crate::{BoxError, id::RunId};

/// How much may be spent: dollars (the usage's [cost](Usage::cost), from a
/// [`CostLayer`](super::cost::CostLayer) inside this one) or tokens (input and output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// At most this cost.
    Cost(Cost),
    /// At most this many tokens.
    Tokens(u64),
}

impl Limit {
    /// At most `usd` US dollars.
    #[must_use]
    pub fn usd(usd: f64) -> Self {
        Self::Cost(Cost::from_usd(usd))
    }

    /// At most `tokens` tokens.
    #[must_use]
    pub fn tokens(tokens: u64) -> Self {
        Self::Tokens(tokens)
    }

    fn reached(self, spent: &Spent) -> bool {
        match self {
            Self::Cost(limit) => spent.cost >= limit,
            Self::Tokens(limit) => spent.tokens >= limit,
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cost(cost) => cost.fmt(f),
            Self::Tokens(tokens) => write!(f, "{tokens} tokens"),
        }
    }
}

/// What was spent.
#[derive(Debug, Clone, Copy, Default)]
struct Spent {
    tokens: u64,
    cost: Cost,
}

impl Spent {
    fn add(&mut self, usage: &Usage) {
        self.tokens = self.tokens.saturating_add(usage.total_tokens());
        self.cost = self.cost + usage.cost.unwrap_or_default();
    }
}

/// The most runs, and principals' days, whose spending is remembered (the oldest forgotten
/// first): memory stays bounded however many runs go through.
const REMEMBERED: usize = 10_000;

/// Spending by key, the oldest key forgotten past [`REMEMBERED`].
#[derive(Debug)]
struct Ledger<K> {
    spent: HashMap<K, Spent>,
    order: VecDeque<K>,
}

impl<K: std::hash::Hash + Eq + Clone> Ledger<K> {
    fn new() -> Self {
        Self {
            spent: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn get(&self, key: &K) -> Spent {
        self.spent.get(key).copied().unwrap_or_default()
    }

    fn add(&mut self, key: &K, usage: &Usage) -> Spent {
        if !self.spent.contains_key(key) {
            if self.order.len() >= REMEMBERED
                && let Some(oldest) = self.order.pop_front()
            {
                self.spent.remove(&oldest);
            }
            self.order.push_back(key.clone());
        }
        let spent = self.spent.entry(key.clone()).or_default();
        spent.add(usage);
        *spent
    }
}

#[derive(Debug)]
struct Ledgers {
    runs: Ledger<RunId>,
    /// By principal and day (UTC, days since 1970).
    days: Ledger<(Arc<str>, u64)>,
}

/// Ends a run with `RUN_ERROR` code `budget_exceeded` at the model step whose usage reaches its
/// limit: per run, and per principal per day (UTC) for runs that have a principal. A run (or a
/// principal's day) already at its limit is refused before the model is called. The usage that
/// crossed the limit still reaches the run's usage.
///
/// Spending is kept in memory, per instance of the layer (its clones share it), for the last
/// 10,000 runs and principals' days.
///
/// ```
/// use agent_tower::model::{
///     budget::{BudgetLayer, Limit},
///     cost::{CostLayer, PriceTable},
///     scripted::ScriptedModel,
/// };
/// use tower::ServiceBuilder;
///
/// let model = ServiceBuilder::new()
///     .layer(BudgetLayer::new().per_run(Limit::usd(0.50)).per_principal_per_day(Limit::usd(5.0)))
///     .layer(CostLayer::new(PriceTable::published()))
///     .service(ScriptedModel::new());
/// # let _ = model;
/// ```
#[derive(Debug, Clone)]
pub struct BudgetLayer {
    per_run: Option<Limit>,
    per_principal_day: Option<Limit>,
    ledgers: Arc<Mutex<Ledgers>>,
}

impl Default for BudgetLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl BudgetLayer {
    /// No limit yet.
    #[must_use]
    pub fn new() -> Self {
        Self {
            per_run: None,
            per_principal_day: None,
            ledgers: Arc::new(Mutex::new(Ledgers {
                runs: Ledger::new(),
                days: Ledger::new(),
            })),
        }
    }

    /// What one run may spend.
    #[must_use]
    pub fn per_run(mut self, limit: Limit) -> Self {
        self.per_run = Some(limit);
        self
    }

    /// What one principal's runs may spend in a day (UTC). Runs of no principal (a server that
    /// authenticates nobody: one space shared by all) share one day's budget.
    #[must_use]
    pub fn per_principal_per_day(mut self, limit: Limit) -> Self {
        self.per_principal_day = Some(limit);
        self
    }

    fn ledgers(&self) -> MutexGuard<'_, Ledgers> {
        self.ledgers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The budget a request is charged to.
    fn account(&self, request: &ModelRequest) -> Account {
        // No principal is named "": the runs of none share the space of that name.
        let principal = request.run.principal.as_ref().map_or("", |p| p.name());
        Account {
            budget: self.clone(),
            run: request.run.run_id.clone(),
            day: (Arc::from(principal), today()),
        }
    }
}

fn today() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400)
}

impl<S> Layer<S> for BudgetLayer {
    type Service = Budget<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Budget {
            inner,
            budget: self.clone(),
        }
    }
}

/// The service of [`BudgetLayer`].
#[derive(Debug, Clone)]
pub struct Budget<S> {
    inner: S,
    budget: BudgetLayer,
}

impl<S> Budget<S> {
    crate::inner_service!();
}

/// What one request is counted against: its run's budget and its principal's day's.
#[derive(Debug, Clone)]
pub struct Account {
    budget: BudgetLayer,
    run: RunId,
    /// The principal's name (`""`: no principal) and the day.
    day: (Arc<str>, u64),
}

impl Account {
    /// The limit this account has reached, if any; with `usage` added first when given.
    fn reached(&self, usage: Option<&Usage>) -> Option<ModelError> {
        let mut ledgers = self.budget.ledgers();
        let run = match usage {
            Some(usage) => ledgers.runs.add(&self.run, usage),
            None => ledgers.runs.get(&self.run),
        };
        let day = match usage {
            Some(usage) => ledgers.days.add(&self.day, usage),
            None => ledgers.days.get(&self.day),
        };
        drop(ledgers);
        if let Some(limit) = self.budget.per_run.filter(|l| l.reached(&run)) {
            return Some(exceeded(format!("the run's budget of {limit} is spent")));
        }
        let limit = self.budget.per_principal_day.filter(|l| l.reached(&day))?;
        Some(exceeded(format!("today's budget of {limit} is spent")))
    }
}

fn exceeded(message: String) -> ModelError {
    ModelError::new(ModelErrorKind::BudgetExceeded, message)
}

impl<S> Service<ModelRequest> for Budget<S>
where
    S: ModelService,
    S::Error: Into<BoxError>,
{
    type Response = BudgetStream<S::Events>;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: ModelRequest) -> Self::Future {
        let account = self.budget.account(&request);
        // A spent budget is refused before the model sees the request.
        if let Some(error) = account.reached(None) {
            return future::ResponseFuture::refused(error);
        }
        future::ResponseFuture::admitted(self.inner.call(request), account)
    }
}

pub mod future {
    //! The response future of [`Budget`](super::Budget).

    /// The model's stream, followed against the budget; or the refusal of a request whose
    /// budget is spent.
    pub type ResponseFuture<F> = crate::model::AdmitFuture<F, super::Account>;
}

impl<St> WrapEvents<St> for Account {
    type Stream = BudgetStream<St>;

    fn wrap(self, events: St) -> Self::Stream {
        BudgetStream {
            inner: events,
            account: Some(self),
            over: None,
        }
    }
}

pin_project! {
    /// A model stream that ends with a [`BudgetExceeded`](ModelErrorKind::BudgetExceeded) error
    /// after the usage that reaches its limit; see [`BudgetLayer`].
    #[derive(Debug)]
    pub struct BudgetStream<St> {
        #[pin]
        inner: St,
        account: Option<Account>,
        over: Option<ModelError>,
    }
}

impl<St, E> Stream for BudgetStream<St>
where
    St: Stream<Item = Result<ModelEvent, E>>,
    E: Into<BoxError>,
{
    type Item = Result<ModelEvent, BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        if let Some(error) = this.over.take() {
            *this.account = None;
            return Poll::Ready(Some(Err(error.into())));
        }
        let Some(account) = this.account.as_ref() else {
            return Poll::Ready(None);
        };
        let item = ready!(this.inner.poll_next(cx));
        if let Some(Ok(ModelEvent::Usage(usage))) = &item {
            *this.over = account.reached(Some(usage));
        }
        Poll::Ready(item.map(|item| item.map_err(Into::into)))
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use tower::ServiceExt;

    use super::*;
    use crate::{
        context::Principal,
        model::{BoxModel, FinishReason, boxed, test_request},
    };

    /// A model whose every step uses 100 tokens and costs a cent.
    fn model() -> BoxModel {
        boxed(tower::service_fn(|_: ModelRequest| async {
            let usage = Usage {
                input_tokens: 60,
                output_tokens: 40,
                cost: Some(Cost::from_usd(0.01)),
                ..Usage::default()
            };
            Ok::<_, ModelError>(futures_util::stream::iter([
                Ok::<_, ModelError>(ModelEvent::Usage(usage)),
                Ok(ModelEvent::Finish(FinishReason::Stop)),
            ]))
        }))
    }

    fn request(run: &str, principal: &str) -> ModelRequest {
        let mut request = test_request();
        request.run.run_id = RunId::from(run);
        request.run.principal = Some(Principal::user(principal).unwrap());
        request
    }

    /// The step's events, or the call's failure.
    async fn step<S>(
        budget: &S,
        request: ModelRequest,
    ) -> Result<Vec<Result<ModelEvent, BoxError>>, BoxError>
    where
        S: Service<ModelRequest, Error = BoxError> + Clone,
        S::Response: Stream<Item = Result<ModelEvent, BoxError>>,
    {
        Ok(budget.clone().oneshot(request).await?.collect().await)
    }

    fn kind(error: &BoxError) -> ModelErrorKind {
        error.downcast_ref::<ModelError>().unwrap().kind()
    }

    #[tokio::test]
    async fn the_step_that_reaches_the_runs_limit_ends_it_and_the_next_is_refused() {
        let budget = BudgetLayer::new()
            .per_run(Limit::tokens(250))
            .layer(model());
        for _ in 0..2 {
            let events = step(&budget, request("r1", "alice")).await.unwrap();
            assert!(events.iter().all(Result::is_ok), "200 of 250 tokens");
        }
        let events = step(&budget, request("r1", "alice")).await.unwrap();
        assert!(
            matches!(events[0], Ok(ModelEvent::Usage(_))),
            "the usage still counts"
        );
        assert_eq!(events.len(), 2, "the finish never comes: {events:?}");
        assert_eq!(
            kind(events[1].as_ref().unwrap_err()),
            ModelErrorKind::BudgetExceeded
        );
        let refused = step(&budget, request("r1", "alice")).await.unwrap_err();
        assert_eq!(kind(&refused), ModelErrorKind::BudgetExceeded);
        assert!(
            step(&budget, request("r2", "alice")).await.is_ok(),
            "another run"
        );
    }

    #[tokio::test]
    async fn a_principals_runs_share_the_days_budget() {
        let budget = BudgetLayer::new()
            .per_principal_per_day(Limit::usd(0.02))
            .layer(model());
        step(&budget, request("r1", "alice")).await.unwrap();
        let events = step(&budget, request("r2", "alice")).await.unwrap();
        let error = events.last().unwrap().as_ref().unwrap_err();
        assert_eq!(kind(error), ModelErrorKind::BudgetExceeded);
        assert!(
            error.to_string().contains("today's budget of $0.020000"),
            "{error}"
        );
        let refused = step(&budget, request("r3", "alice")).await.unwrap_err();
        assert_eq!(kind(&refused), ModelErrorKind::BudgetExceeded);
        let bob = step(&budget, request("r4", "bob")).await.unwrap();
        assert!(bob.iter().all(Result::is_ok), "bob's day is his own");
    }

    #[tokio::test]
    async fn runs_of_no_principal_share_one_days_budget() {
        let budget = BudgetLayer::new()
            .per_principal_per_day(Limit::usd(0.02))
            .layer(model());
        let nobodys = |run: &str| {
            let mut request = request(run, "alice");
            request.run.principal = None;
            request
        };
        step(&budget, nobodys("r1")).await.unwrap();
        let events = step(&budget, nobodys("r2")).await.unwrap();
        let error = events.last().unwrap().as_ref().unwrap_err();
        assert_eq!(kind(error), ModelErrorKind::BudgetExceeded);
        let refused = step(&budget, nobodys("r3")).await.unwrap_err();
        assert_eq!(kind(&refused), ModelErrorKind::BudgetExceeded);
        let alice = step(&budget, request("r4", "alice")).await.unwrap();
        assert!(alice.iter().all(Result::is_ok), "alice's day is her own");
    }

    #[test]
    fn the_ledger_forgets_the_oldest_past_its_bound() {
        let mut ledger = Ledger::new();
        let usage = Usage {
            output_tokens: 1,
            ..Usage::default()
        };
        for run in 0..=REMEMBERED {
            ledger.add(&run, &usage);
        }
        assert_eq!(ledger.spent.len(), REMEMBERED);
        assert_eq!(ledger.get(&0).tokens, 0, "the oldest is forgotten");
        assert_eq!(ledger.get(&REMEMBERED).tokens, 1);
    }
}
