//! [`Ledger`]: where a [`BudgetLayer`](super::BudgetLayer) counts what was spent.
//!
//! The layer asks the ledger for the [`Balance`] of a step's [`Accounts`] before the model is
//! called, and [charges](Ledger::charge) the step's usage once it is reported. A charge is keyed
//! by its [`Step`]: charging a step again (a step redone after its instance stopped, by the
//! instance that continued the run) changes nothing, so nothing is counted twice.
//!
//! [`MemoryLedger`] counts in this process; a [`RunStore`](crate::store::RunStore) is a ledger
//! too, shared by every instance on it and kept across restarts.

use std::{
    collections::{HashMap, VecDeque},
    fmt,
    hash::Hash,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use futures_util::future::{BoxFuture, FutureExt, ready};

use crate::{BoxError, id::RunId, model::Cost};

/// What was spent: tokens (input and output) and dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Spent {
    /// Tokens, input and output.
    pub tokens: u64,
    /// Dollars (zero for a model without a price).
    pub cost: Cost,
}

impl Spent {
    /// `tokens` tokens that cost `cost`.
    #[must_use]
    pub fn new(tokens: u64, cost: Cost) -> Self {
        Self { tokens, cost }
    }

    pub(super) fn add(&mut self, other: Self) {
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.cost = self.cost + other.cost;
    }
}

/// What a model step is charged to: its run (a sub-agent's steps are its top-level run's:
/// see [`BilledRun`](super::BilledRun)) and its principal's day.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Accounts {
    /// The run whose budget the step counts against.
    pub run: RunId,
    /// The principal's name; `""` for runs of no principal (a server that authenticates
    /// nobody: one space, one day's budget, shared by all).
    pub principal: Arc<str>,
    /// The day (UTC), in days since 1970-01-01.
    pub day: u64,
}

impl Accounts {
    /// The accounts of `run`, of `principal` on `day`.
    #[must_use]
    pub fn new(run: RunId, principal: impl Into<Arc<str>>, day: u64) -> Self {
        Self {
            run,
            principal: principal.into(),
            day,
        }
    }
}

/// One model step: a turn of a run (the step's own run: a sub-agent's steps are keyed by the
/// sub-agent's run). Charged once, however often it is charged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Step {
    /// The run the step is a turn of.
    pub run: RunId,
    /// The turn, from 0 (a continued run's turns go on from the log's).
    pub turn: u32,
}

impl Step {
    /// The turn `turn` of `run`.
    #[must_use]
    pub fn new(run: RunId, turn: u32) -> Self {
        Self { run, turn }
    }
}

/// What the accounts of a step have spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Balance {
    /// By the run.
    pub run: Spent,
    /// By the principal today.
    pub day: Spent,
}

impl Balance {
    /// What a run spent, and its principal's day.
    #[must_use]
    pub fn new(run: Spent, day: Spent) -> Self {
        Self { run, day }
    }
}

/// Where spending is counted: read before a model step, charged after it.
///
/// What an implementation guarantees:
///
/// - **Once per step**: [`charge`](Ledger::charge) of a [`Step`] already charged changes
///   nothing (the first charge stands) and answers the balance as it is.
/// - **Read what was charged**: a [`balance`](Ledger::balance) begun after a charge returned
///   counts it (on every instance sharing the ledger).
///
/// Two steps admitted at once may together pass a limit; the next one is refused.
pub trait Ledger: fmt::Debug + Send + Sync + 'static {
    /// What `accounts` have spent.
    ///
    /// # Errors
    ///
    /// The ledger could not be read; the budget refuses the step (it fails closed).
    fn balance<'a>(&'a self, accounts: &'a Accounts) -> BoxFuture<'a, Result<Balance, BoxError>>;

    /// Charges `spent` for `step` to `accounts`, unless `step` was charged already; the balance
    /// after.
    ///
    /// # Errors
    ///
    /// The charge could not be recorded; the budget ends the run (it fails closed).
    fn charge<'a>(
        &'a self,
        step: &'a Step,
        accounts: &'a Accounts,
        spent: Spent,
    ) -> BoxFuture<'a, Result<Balance, BoxError>>;
}

impl<L: Ledger + ?Sized> Ledger for Arc<L> {
    fn balance<'a>(&'a self, accounts: &'a Accounts) -> BoxFuture<'a, Result<Balance, BoxError>> {
        (**self).balance(accounts)
    }

    fn charge<'a>(
        &'a self,
        step: &'a Step,
        accounts: &'a Accounts,
        spent: Spent,
    ) -> BoxFuture<'a, Result<Balance, BoxError>> {
        (**self).charge(step, accounts, spent)
    }
}

/// The most runs, principals' days and steps remembered by a [`MemoryLedger`] (the oldest
/// forgotten first): memory stays bounded however many runs go through.
pub(super) const REMEMBERED: usize = 10_000;

/// A ledger in this process: each instance counts for itself, and a restart starts from
/// nothing. Bounded: the last 10,000 runs, principals' days and steps are remembered. For
/// budgets that hold across instances and restarts, use the store's
/// ([`RunStore`](crate::store::RunStore)).
#[derive(Debug, Clone, Default)]
pub struct MemoryLedger {
    books: Arc<Mutex<Books>>,
}

#[derive(Debug, Default)]
struct Books {
    runs: Remembered<RunId, Spent>,
    days: Remembered<(Arc<str>, u64), Spent>,
    steps: Remembered<Step, ()>,
}

impl MemoryLedger {
    /// An empty ledger.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn balance_now(books: &mut Books, accounts: &Accounts) -> Balance {
        Balance {
            run: books.runs.get(&accounts.run).copied().unwrap_or_default(),
            day: books
                .days
                .get(&(accounts.principal.clone(), accounts.day))
                .copied()
                .unwrap_or_default(),
        }
    }
}

impl Ledger for MemoryLedger {
    fn balance<'a>(&'a self, accounts: &'a Accounts) -> BoxFuture<'a, Result<Balance, BoxError>> {
        ready(Ok(Self::balance_now(&mut self.books(), accounts))).boxed()
    }

    fn charge<'a>(
        &'a self,
        step: &'a Step,
        accounts: &'a Accounts,
        spent: Spent,
    ) -> BoxFuture<'a, Result<Balance, BoxError>> {
        let mut books = self.books();
        if books.steps.get(step).is_none() {
            books.steps.entry(step.clone());
            books.runs.entry(accounts.run.clone()).add(spent);
            let day = (accounts.principal.clone(), accounts.day);
            books.days.entry(day).add(spent);
        }
        ready(Ok(Self::balance_now(&mut books, accounts))).boxed()
    }
}

/// Values by key, the oldest key forgotten past [`REMEMBERED`].
#[derive(Debug)]
struct Remembered<K, V> {
    values: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K, V> Default for Remembered<K, V> {
    fn default() -> Self {
        Self {
            values: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Default> Remembered<K, V> {
    fn get(&self, key: &K) -> Option<&V> {
        self.values.get(key)
    }

    fn entry(&mut self, key: K) -> &mut V {
        if !self.values.contains_key(&key) {
            if self.order.len() >= REMEMBERED
                && let Some(oldest) = self.order.pop_front()
            {
                self.values.remove(&oldest);
            }
            self.order.push_back(key.clone());
        }
        self.values.entry(key).or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accounts(run: &str) -> Accounts {
        Accounts::new(RunId::from(run), "alice", 20_000)
    }

    #[tokio::test]
    async fn a_step_is_charged_once_however_often_it_is_charged() {
        let ledger = MemoryLedger::new();
        let step = Step::new(RunId::from("r1"), 0);
        let spent = Spent::new(100, Cost::from_usd(0.01));
        for _ in 0..2 {
            let balance = ledger.charge(&step, &accounts("r1"), spent).await.unwrap();
            assert_eq!((balance.run, balance.day), (spent, spent));
        }
        let next = Step::new(RunId::from("r1"), 1);
        let balance = ledger.charge(&next, &accounts("r1"), spent).await.unwrap();
        assert_eq!(balance.run.tokens, 200);
        let other = ledger.balance(&accounts("r2")).await.unwrap();
        assert_eq!(
            (other.run.tokens, other.day.tokens),
            (0, 200),
            "another run of the same principal's day"
        );
    }

    #[test]
    fn the_ledger_forgets_the_oldest_past_its_bound() {
        let mut runs: Remembered<usize, Spent> = Remembered::default();
        for run in 0..=REMEMBERED {
            runs.entry(run).add(Spent::new(1, Cost::ZERO));
        }
        assert_eq!(runs.values.len(), REMEMBERED);
        assert!(runs.get(&0).is_none(), "the oldest is forgotten");
        assert_eq!(runs.get(&REMEMBERED).map(|s| s.tokens), Some(1));
    }
}
