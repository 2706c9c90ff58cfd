//! [`BudgetLayer`]: a cap on what a run, and a principal in a day, may spend on models.

mod ledger;

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
    time::{SystemTime, UNIX_EPOCH},
};

use futures_core::Stream;
use futures_util::future::BoxFuture;
use pin_project_lite::pin_project;
use tokio::task::JoinHandle;
use tower_layer::Layer;
use tower_service::Service;

pub use self::ledger::{Accounts, Balance, Ledger, MemoryLedger, Spent, Step};
use super::{Cost, ModelError, ModelErrorKind, ModelEvent, ModelRequest, ModelService, Usage};
use crate::{
    BoxError,
    context::{Principal, RunContext},
    id::RunId,
};

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

    /// Whether `spent` reached the limit.
    #[must_use]
    pub fn reached(self, spent: Spent) -> bool {
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

impl Spent {
    /// What `usage` spent.
    #[must_use]
    pub fn of(usage: &Usage) -> Self {
        Self::new(usage.total_tokens(), usage.cost.unwrap_or_default())
    }
}

/// The run a sub-agent's model steps are charged to: the top-level run whose tool call started
/// it (set by [`AgentTool`](crate::subagent::AgentTool) in the sub-agent's
/// [extensions](RunContext::extensions)), so that a run's budget counts its sub-agents' steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BilledRun(pub RunId);

impl BilledRun {
    /// The run the steps of a run started from `parent` are charged to: `parent`'s own.
    #[must_use]
    pub fn of(parent: &RunContext) -> Self {
        parent
            .extensions
            .get::<Self>()
            .cloned()
            .unwrap_or_else(|| Self(parent.run_id.clone()))
    }
}

/// Ends a run with `RUN_ERROR` code `budget_exceeded` at the model step whose usage reaches its
/// limit: per run (its sub-agents' steps included), and per principal per day (UTC). Runs of no
/// principal (a server that authenticates nobody) share one day's budget. A run (or a
/// principal's day) already at its limit is refused before the model is called. The usage that
/// crossed the limit still reaches the run's usage.
///
/// Spending is counted in a [`Ledger`], each step once (by its run and turn), read before the
/// model is called and charged when the step reports its usage. By default a [`MemoryLedger`]:
/// each instance of the layer (its clones share it) counts for itself, until the process exits.
/// With the store's ledger ([`ledger`](BudgetLayer::ledger) with a
/// [`RunStore`](crate::store::RunStore)) budgets hold across instances and restarts, and a step
/// redone by the instance that continued its run is not counted again. A ledger that cannot be
/// read refuses the step (it fails closed). A step whose usage may reach a limit waits for its
/// charge (one that fails ends the run); a step far from every limit goes on while its charge is
/// recorded (one that fails is logged).
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
    limits: Limits,
    ledger: Arc<dyn Ledger>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    per_run: Option<Limit>,
    per_principal_day: Option<Limit>,
}

impl Limits {
    fn is_none(self) -> bool {
        self.per_run.is_none() && self.per_principal_day.is_none()
    }

    /// The limit `balance` reached, as the error that ends the run.
    fn reached(self, balance: Balance) -> Option<ModelError> {
        if let Some(limit) = self.per_run.filter(|l| l.reached(balance.run)) {
            return Some(exceeded(format!("the run's budget of {limit} is spent")));
        }
        let limit = self.per_principal_day.filter(|l| l.reached(balance.day))?;
        Some(exceeded(format!("today's budget of {limit} is spent")))
    }
}

impl Default for BudgetLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl BudgetLayer {
    /// No limit yet, counted in a [`MemoryLedger`].
    #[must_use]
    pub fn new() -> Self {
        Self {
            limits: Limits::default(),
            ledger: Arc::new(MemoryLedger::new()),
        }
    }

    /// What one run may spend, its sub-agents' steps included.
    #[must_use]
    pub fn per_run(mut self, limit: Limit) -> Self {
        self.limits.per_run = Some(limit);
        self
    }

    /// What one principal's runs may spend in a day (UTC). Runs of no principal (a server that
    /// authenticates nobody: one space shared by all) share one day's budget.
    #[must_use]
    pub fn per_principal_per_day(mut self, limit: Limit) -> Self {
        self.limits.per_principal_day = Some(limit);
        self
    }

    /// Counts in `ledger` instead of this layer's own [`MemoryLedger`].
    #[must_use]
    pub fn ledger(mut self, ledger: impl Ledger) -> Self {
        self.ledger = Arc::new(ledger);
        self
    }

    /// Whether a principal's day has a limit.
    #[must_use]
    pub fn has_daily_limit(&self) -> bool {
        self.limits.per_principal_day.is_some()
    }

    /// What `principal` spent today (`None`: the runs of no principal) and, given `run`, what
    /// that run spent (its sub-agents' steps included), each with its limit.
    ///
    /// # Errors
    ///
    /// The ledger could not be read.
    pub async fn left(
        &self,
        principal: Option<&Principal>,
        run: Option<&RunId>,
    ) -> Result<Left, BoxError> {
        // No run has an empty id: without one, the run's part is nothing.
        let asked = run.cloned().unwrap_or_else(|| RunId::from(""));
        let balance = self.ledger.balance(&accounts(principal, asked)).await?;
        Ok(Left {
            run: run.map(|_| Remaining::of(self.limits.per_run, balance.run)),
            day: Remaining::of(self.limits.per_principal_day, balance.day),
        })
    }

    /// What a request is charged to.
    fn account(&self, request: &ModelRequest) -> Account {
        Account {
            limits: self.limits,
            ledger: self.ledger.clone(),
            accounts: accounts(
                request.run.principal.as_ref(),
                BilledRun::of(&request.run).0,
            ),
            step: Step::new(request.run.run_id.clone(), request.run.turn),
            known: None,
        }
    }
}

/// The accounts of `run` and of `principal`'s day, today.
fn accounts(principal: Option<&Principal>, run: RunId) -> Accounts {
    // No principal is named "": the runs of none share the space of that name.
    let principal = principal.map_or("", Principal::name);
    Accounts::new(run, principal, today())
}

/// What is left of a run's budget and of its principal's day's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Left {
    /// Of the run's budget, when a run was asked about.
    pub run: Option<Remaining>,
    /// Of the principal's day's budget.
    pub day: Remaining,
}

/// What was spent against one budget, and its limit, if there is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Remaining {
    /// Spent so far.
    pub spent: Spent,
    /// The limit (`None`: unlimited).
    pub limit: Option<Limit>,
}

impl Remaining {
    fn of(limit: Option<Limit>, spent: Spent) -> Self {
        Self { spent, limit }
    }

    /// Whether the limit is reached: the next step is refused.
    #[must_use]
    pub fn is_spent(&self) -> bool {
        self.limit.is_some_and(|limit| limit.reached(self.spent))
    }

    /// What may still be spent, in the limit's unit (`None`: no limit).
    #[must_use]
    pub fn left(&self) -> Option<Limit> {
        self.limit.map(|limit| match limit {
            Limit::Cost(cost) => Limit::Cost(Cost::from_nano_usd(
                cost.nano_usd().saturating_sub(self.spent.cost.nano_usd()),
            )),
            Limit::Tokens(tokens) => Limit::Tokens(tokens.saturating_sub(self.spent.tokens)),
        })
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

/// What one request is counted against: its run's budget and its principal's day's, in the
/// ledger, as its step.
#[derive(Debug, Clone)]
struct Account {
    limits: Limits,
    ledger: Arc<dyn Ledger>,
    accounts: Accounts,
    step: Step,
    /// The balance read before the step, with what the step reported since (`None`: not read,
    /// there is no limit).
    known: Option<Balance>,
}

impl Account {
    /// The balance of the accounts, read before the step: an error when they reached a limit
    /// (or the ledger cannot be read: it fails closed); `None` with no limit (nothing is read).
    async fn check(self) -> Result<Option<Balance>, ModelError> {
        if self.limits.is_none() {
            return Ok(None);
        }
        let balance = self
            .ledger
            .balance(&self.accounts)
            .await
            .map_err(|error| unreadable(&error))?;
        match self.limits.reached(balance) {
            Some(refused) => Err(refused),
            None => Ok(Some(balance)),
        }
    }

    /// Whether the step's `usage` may take the accounts to a limit: then the run waits for the
    /// ledger's word (the charge's balance counts every instance's steps); else the charge is
    /// recorded while the stream goes on. Counts `usage` in what is known.
    fn may_reach_a_limit(&mut self, usage: Spent) -> bool {
        if self.limits.is_none() {
            return false;
        }
        let Some(known) = &mut self.known else {
            return true;
        };
        known.run.add(usage);
        known.day.add(usage);
        self.limits.reached(*known).is_some()
    }

    /// Charges `usage` for the step; the limit it reached, if any (a charge that fails ends the
    /// run, unless there is no limit to keep).
    async fn charge(self, usage: Spent) -> Option<ModelError> {
        match self.ledger.charge(&self.step, &self.accounts, usage).await {
            Ok(balance) => self.limits.reached(balance),
            Err(error) if self.limits.is_none() => {
                tracing::warn!(%error, "the budget's ledger failed: a step's spending was not recorded");
                None
            }
            Err(error) => Some(unreadable(&error)),
        }
    }
}

fn exceeded(message: String) -> ModelError {
    ModelError::new(ModelErrorKind::BudgetExceeded, message)
}

/// The error of a step whose budget's ledger failed.
fn unreadable(error: &BoxError) -> ModelError {
    tracing::error!(error = %error, "the budget's ledger failed");
    ModelError::new(
        ModelErrorKind::Other,
        format!("the budget's ledger failed: {error}"),
    )
}

impl<S> Service<ModelRequest> for Budget<S>
where
    S: ModelService + Clone,
    S::Error: Into<BoxError>,
{
    type Response = BudgetStream<S::Events>;
    type Error = BoxError;
    type Future = future::ResponseFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: ModelRequest) -> Self::Future {
        // The readied service goes with the request; a clone takes its place.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let account = self.budget.account(&request);
        future::ResponseFuture::new(inner, request, account)
    }
}

pub mod future {
    //! The response future of [`Budget`].

    use super::*;

    pin_project! {
        /// Reads the budget's ledger, then calls the model (or refuses the request, the model
        /// never seeing it) and follows its stream against the budget.
        pub struct ResponseFuture<S: Service<ModelRequest>> {
            #[pin]
            state: State<S>,
        }
    }

    pin_project! {
        #[project = StateProj]
        enum State<S: Service<ModelRequest>> {
            Checking {
                checked: BoxFuture<'static, Result<Option<Balance>, ModelError>>,
                call: Option<(S, ModelRequest, Account)>,
            },
            Calling { #[pin] inner: S::Future, account: Option<Account> },
        }
    }

    impl<S: Service<ModelRequest>> ResponseFuture<S> {
        pub(super) fn new(inner: S, request: ModelRequest, account: Account) -> Self {
            let checked = Box::pin(account.clone().check());
            Self {
                state: State::Checking {
                    checked,
                    call: Some((inner, request, account)),
                },
            }
        }
    }

    impl<S> Future for ResponseFuture<S>
    where
        S: ModelService,
        S::Error: Into<BoxError>,
    {
        type Output = Result<BudgetStream<S::Events>, BoxError>;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            loop {
                match self.as_mut().project().state.project() {
                    StateProj::Checking { checked, call } => {
                        let checked = ready!(checked.as_mut().poll(cx));
                        let (mut inner, request, mut account) =
                            call.take().expect("ResponseFuture polled after completion");
                        account.known = checked?;
                        let inner = inner.call(request);
                        self.as_mut().project().state.set(State::Calling {
                            inner,
                            account: Some(account),
                        });
                    }
                    StateProj::Calling { inner, account } => {
                        let events = ready!(inner.poll(cx)).map_err(Into::into)?;
                        let account = account
                            .take()
                            .expect("ResponseFuture polled after completion");
                        return Poll::Ready(Ok(BudgetStream {
                            inner: events,
                            account: Some(account),
                            charging: None,
                        }));
                    }
                }
            }
        }
    }

    impl<S: Service<ModelRequest>> fmt::Debug for ResponseFuture<S> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let state = match &self.state {
                State::Checking { .. } => "checking",
                State::Calling { .. } => "calling",
            };
            f.debug_struct("ResponseFuture")
                .field("state", &state)
                .finish_non_exhaustive()
        }
    }
}

/// A charge on its way to the ledger: answered at once (a ledger in memory), or a task of its
/// own, so that it is recorded even if the stream is dropped meanwhile.
#[derive(Debug)]
enum Charging {
    Done(Option<ModelError>),
    Task(JoinHandle<Option<ModelError>>),
}

pin_project! {
    /// A model stream that ends with a [`BudgetExceeded`](ModelErrorKind::BudgetExceeded) error
    /// after the usage that reaches its limit; see [`BudgetLayer`].
    #[derive(Debug)]
    pub struct BudgetStream<St> {
        #[pin]
        inner: St,
        account: Option<Account>,
        charging: Option<Charging>,
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
        // The usage charged last is settled before anything else is let through.
        let over = match this.charging {
            Some(Charging::Done(over)) => over.take(),
            Some(Charging::Task(task)) => match ready!(Pin::new(task).poll(cx)) {
                Ok(over) => over,
                Err(error) => Some(unreadable(&error.into())),
            },
            None => None,
        };
        *this.charging = None;
        if let Some(error) = over {
            *this.account = None;
            return Poll::Ready(Some(Err(error.into())));
        }
        let Some(account) = this.account.as_mut() else {
            return Poll::Ready(None);
        };
        let item = ready!(this.inner.poll_next(cx));
        if let Some(Ok(ModelEvent::Usage(usage))) = &item {
            let spent = Spent::of(usage);
            let settled_first = account.may_reach_a_limit(spent);
            let mut charge = Box::pin(account.clone().charge(spent));
            *this.charging = match (charge.as_mut().poll(cx), settled_first) {
                (Poll::Ready(over), _) => Some(Charging::Done(over)),
                (Poll::Pending, true) => Some(Charging::Task(tokio::spawn(charge))),
                // Far from every limit: recorded while the stream goes on.
                (Poll::Pending, false) => {
                    tokio::spawn(charge);
                    None
                }
            };
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
        turn(run, principal, 0)
    }

    /// The request of the `turn`th step of `run`.
    fn turn(run: &str, principal: &str, turn: u32) -> ModelRequest {
        let mut request = test_request();
        request.run.run_id = RunId::from(run);
        request.run.turn = turn;
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
        for n in 0..2 {
            let events = step(&budget, turn("r1", "alice", n)).await.unwrap();
            assert!(events.iter().all(Result::is_ok), "200 of 250 tokens");
        }
        let events = step(&budget, turn("r1", "alice", 2)).await.unwrap();
        assert!(
            matches!(events[0], Ok(ModelEvent::Usage(_))),
            "the usage still counts"
        );
        assert_eq!(events.len(), 2, "the finish never comes: {events:?}");
        assert_eq!(
            kind(events[1].as_ref().unwrap_err()),
            ModelErrorKind::BudgetExceeded
        );
        let refused = step(&budget, turn("r1", "alice", 3)).await.unwrap_err();
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

    #[tokio::test]
    async fn a_step_redone_is_charged_once() {
        let budget = BudgetLayer::new()
            .per_run(Limit::tokens(250))
            .layer(model());
        // The step in flight when its instance stopped, redone by the one that continued the
        // run: the same turn of the same run.
        for _ in 0..3 {
            let events = step(&budget, turn("r1", "alice", 0)).await.unwrap();
            assert!(events.iter().all(Result::is_ok), "100 of 250 tokens");
        }
        let events = step(&budget, turn("r1", "alice", 1)).await.unwrap();
        assert!(events.iter().all(Result::is_ok), "200 of 250 tokens");
    }

    #[tokio::test]
    async fn a_sub_agents_steps_count_against_the_run_that_started_it() {
        let layer = BudgetLayer::new().per_run(Limit::tokens(150));
        let budget = layer.clone().layer(model());
        let parent = turn("lead", "alice", 0);
        step(&budget, parent.clone()).await.unwrap();
        let mut sub = turn("researcher", "alice", 0);
        sub.run.extensions.insert(BilledRun::of(&parent.run));
        let events = step(&budget, sub).await.unwrap();
        let error = events.last().unwrap().as_ref().unwrap_err();
        assert!(
            error.to_string().contains("the run's budget of 150 tokens"),
            "{error}"
        );
        let alice = parent.run.principal.as_ref();
        let left = layer.left(alice, Some(&parent.run.run_id)).await.unwrap();
        let run = left.run.unwrap();
        assert_eq!(run.spent.tokens, 200);
        assert!(run.is_spent());
        assert_eq!(run.left(), Some(Limit::tokens(0)));
        assert_eq!(left.day.spent.tokens, 200);
        assert_eq!((left.day.limit, left.day.left()), (None, None));
    }

    /// A ledger that answers only after a turn of the runtime, or fails.
    #[derive(Debug, Default)]
    struct Remote {
        books: MemoryLedger,
        down: std::sync::atomic::AtomicBool,
    }

    impl Remote {
        async fn answer<T>(
            &self,
            answer: BoxFuture<'_, Result<T, BoxError>>,
        ) -> Result<T, BoxError> {
            tokio::task::yield_now().await;
            if self.down.load(std::sync::atomic::Ordering::SeqCst) {
                return Err("the store is down".into());
            }
            answer.await
        }
    }

    impl Ledger for Remote {
        fn balance<'a>(
            &'a self,
            accounts: &'a Accounts,
        ) -> BoxFuture<'a, Result<Balance, BoxError>> {
            Box::pin(self.answer(self.books.balance(accounts)))
        }

        fn charge<'a>(
            &'a self,
            step: &'a Step,
            accounts: &'a Accounts,
            spent: Spent,
        ) -> BoxFuture<'a, Result<Balance, BoxError>> {
            Box::pin(self.answer(self.books.charge(step, accounts, spent)))
        }
    }

    #[tokio::test]
    async fn a_charge_is_recorded_even_if_the_stream_is_dropped_and_a_failing_ledger_refuses() {
        let remote = Arc::new(Remote::default());
        let layer = BudgetLayer::new()
            .per_principal_per_day(Limit::tokens(150))
            .ledger(remote.clone());
        let budget = layer.clone().layer(model());
        let mut events = budget
            .clone()
            .oneshot(request("r1", "alice"))
            .await
            .unwrap();
        assert!(matches!(
            events.next().await,
            Some(Ok(ModelEvent::Usage(_)))
        ));
        drop(events);
        // The charge goes on by itself.
        let mut spent = 0;
        while spent == 0 {
            tokio::task::yield_now().await;
            let alice = request("r2", "alice").run.principal;
            spent = layer
                .left(alice.as_ref(), None)
                .await
                .unwrap()
                .day
                .spent
                .tokens;
        }
        assert_eq!(spent, 100);
        let events = step(&budget, request("r2", "alice")).await.unwrap();
        assert_eq!(
            kind(events.last().unwrap().as_ref().unwrap_err()),
            ModelErrorKind::BudgetExceeded,
            "200 of 150 tokens"
        );
        remote.down.store(true, std::sync::atomic::Ordering::SeqCst);
        let refused = step(&budget, request("r3", "bob")).await.unwrap_err();
        assert_eq!(kind(&refused), ModelErrorKind::Other);
        assert!(
            refused.to_string().contains("the store is down"),
            "{refused}"
        );
    }
}
