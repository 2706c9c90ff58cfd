//! [`RunStore`]: threads, runs, each run's event log and pending interrupts, on SQLite (one file,
//! the embedded default) or PostgreSQL (several instances), through sqlx.
//!
//! The store is the truth; everything else is a hint. A run is written by one owner at a time
//! (a lease, renewed with every append; an expired lease fences the old owner out), its events
//! are appended in batches, each committed before anyone can read it, and readers
//! [`follow`](RunStore::follow) the log by sequence number, woken by the writer in the same
//! process, by PostgreSQL `LISTEN/NOTIFY` across instances, and by a poll when a wake-up was
//! missed.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::store::{NewRun, RunEnd, RunStatus, RunStore};
//! use futures_util::TryStreamExt;
//!
//! let store = RunStore::open("memory").await?;
//! let lease = store.start_run(&NewRun::new("thread-1".into(), "run-1".into()), &[]).await?;
//! store.append(&lease, &[r#"{"type":"RUN_STARTED"}"#.to_owned()]).await?;
//! store
//!     .finish(&lease, &[r#"{"type":"RUN_FINISHED"}"#.to_owned()], &RunEnd::new(RunStatus::Finished))
//!     .await?;
//!
//! // A reader joining later gets the whole log, then the stream ends.
//! let events: Vec<_> = store.follow("run-1".into(), 0).try_collect().await?;
//! assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
//! # Ok(()) }
//! ```
//!
//! # Backends
//!
//! [`RunStore::open`] takes `memory` (SQLite in memory: tests, demos), `sqlite://path` (created
//! if missing; WAL, `synchronous=FULL`, so an acknowledged write survives a power loss) or
//! `postgres://…`. The same portable SQL runs on both engines (sqlx's `Any` driver, numbered
//! parameters); the migrations in the crate's `migrations/` directory run on open.
//!
//! # Guarantees
//!
//! - **One active run per thread**: a unique index on running runs; a second start is refused
//!   ([`StartError::Busy`]) whichever instance tries.
//! - **Exactly one resume wins**: resolving an interrupt is a conditional update
//!   (`status = 'pending'` and not expired) in the same transaction as the run it starts.
//! - **Fencing**: an append from an owner whose lease was taken over fails with
//!   [`StoreError::Fenced`]; nothing is written.
//! - **Recovery**: [`close_expired`](RunStore::close_expired) ends runs whose owner died (lease
//!   expired) with a terminal event in their log, so a reader always sees an end. Pending
//!   interrupts are left as they are.

mod follow;
mod sql;
mod wake;

use std::{
    fmt,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde_json::Value;

pub use self::follow::Follow;
pub use self::sql::RunStore;
use crate::{
    id::{InterruptId, RunId, ThreadId, ToolCallId},
    message::Message,
    run::Interrupt,
};

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunStatus {
    /// Its owner is writing it.
    Running,
    /// It ended normally.
    Finished,
    /// It ended at interrupts that wait for a decision.
    Interrupted,
    /// It was cancelled.
    Cancelled,
    /// It failed, or its owner died.
    Failed,
}

impl RunStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Interrupted => "interrupted",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }

    pub(crate) fn parse(s: &str) -> Result<Self, StoreError> {
        Ok(match s {
            "running" => Self::Running,
            "finished" => Self::Finished,
            "interrupted" => Self::Interrupted,
            "cancelled" => Self::Cancelled,
            "failed" => Self::Failed,
            other => return Err(StoreError::corrupt(format!("run status `{other}`"))),
        })
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Where an interrupt is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InterruptStatus {
    /// Waiting for a decision.
    Pending,
    /// Decided; a run applied (or applies) the decision.
    Resolved,
}

impl InterruptStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Resolved => "resolved",
        }
    }

    pub(crate) fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "pending" => Ok(Self::Pending),
            "resolved" => Ok(Self::Resolved),
            other => Err(StoreError::corrupt(format!("interrupt status `{other}`"))),
        }
    }
}

/// A run, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// The run.
    pub run_id: RunId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// Where it is.
    pub status: RunStatus,
    /// The instance writing it (or that wrote it last).
    pub owner: String,
    /// The sequence number of its last logged event (0: none yet).
    pub last_seq: u64,
    /// When it started.
    pub created_at: SystemTime,
    /// When it last changed.
    pub updated_at: SystemTime,
}

/// One logged event: its sequence number in the run (from 1) and its JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedEvent {
    /// Position in the run's log, from 1.
    pub seq: u64,
    /// The event, as JSON.
    pub json: String,
}

/// A pending or resolved interrupt, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct InterruptRecord {
    /// The interrupt.
    pub id: InterruptId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// The run that stopped at it.
    pub run_id: RunId,
    /// The call waiting.
    pub tool_call_id: ToolCallId,
    /// The tool.
    pub tool_name: String,
    /// The call's arguments.
    pub arguments: Value,
    /// SHA-256 of the arguments' canonical JSON: a decision is bound to exactly these.
    pub args_hash: String,
    /// When the run stopped.
    pub created_at: SystemTime,
    /// When it can no longer be resumed.
    pub expires_at: SystemTime,
    /// Where it is.
    pub status: InterruptStatus,
    /// The answer that resolved it (the resume entry's JSON).
    pub resolution: Option<Value>,
    /// The run that applies the answer.
    pub resolved_by_run: Option<RunId>,
}

/// A thread's conversation and state, and its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRecord {
    /// The thread.
    pub thread_id: ThreadId,
    /// The conversation after its last run.
    pub messages: Vec<Message>,
    /// The state after its last run.
    pub state: Option<Value>,
    /// Its runs, oldest first.
    pub runs: Vec<RunRecord>,
}

/// A run to start.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// Its thread.
    pub thread_id: ThreadId,
    /// The run.
    pub run_id: RunId,
    /// How long the lease lasts without a renewal (default 30 s).
    pub lease: Duration,
}

impl NewRun {
    /// A run with a 30 s lease.
    #[must_use]
    pub fn new(thread_id: ThreadId, run_id: RunId) -> Self {
        Self {
            thread_id,
            run_id,
            lease: Duration::from_secs(30),
        }
    }

    /// The lease's length.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
}

/// The right to write a run: whoever holds it appends, renews and finishes.
#[derive(Debug)]
pub struct Lease {
    pub(crate) run_id: RunId,
    pub(crate) thread_id: ThreadId,
    pub(crate) owner: String,
    pub(crate) length: Duration,
    pub(crate) last_seq: std::sync::atomic::AtomicU64,
}

impl Lease {
    /// The run.
    #[must_use]
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The run's thread.
    #[must_use]
    pub fn thread_id(&self) -> &ThreadId {
        &self.thread_id
    }

    /// How long the lease lasts without a renewal.
    #[must_use]
    pub fn length(&self) -> Duration {
        self.length
    }

    /// The sequence number of the last event written.
    #[must_use]
    pub fn last_seq(&self) -> u64 {
        self.last_seq.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// How a run ends: its status, the conversation and state to keep for the thread, the interrupts
/// it stopped at.
#[derive(Debug, Clone)]
pub struct RunEnd {
    /// The final status.
    pub status: RunStatus,
    /// The conversation to keep for the thread (none: the thread's is unchanged).
    pub messages: Option<Vec<Message>>,
    /// The state to keep for the thread.
    pub state: Option<Value>,
    /// The interrupts the run stopped at, stored as pending.
    pub interrupts: Vec<Interrupt>,
}

impl RunEnd {
    /// An end with `status` and nothing to keep.
    #[must_use]
    pub fn new(status: RunStatus) -> Self {
        Self {
            status,
            messages: None,
            state: None,
            interrupts: Vec::new(),
        }
    }
}

/// A store failure.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed.
    Database(sqlx::Error),
    /// The lease was lost (it expired and the run was closed): nothing was written.
    Fenced(RunId),
    /// The store holds something it cannot read.
    Corrupt(String),
    /// The URL names no backend this store knows.
    UnsupportedUrl(String),
}

impl StoreError {
    fn corrupt(what: String) -> Self {
        Self::Corrupt(what)
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Database(e) => write!(f, "the run store failed: {e}"),
            Self::Fenced(run) => write!(f, "run `{run}` is no longer owned by this instance"),
            Self::Corrupt(what) => write!(f, "the run store holds an unreadable {what}"),
            Self::UnsupportedUrl(url) => write!(
                f,
                "unsupported store `{url}`: use `memory`, `sqlite://path` or `postgres://…`"
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Database(e) => Some(e),
            _ => None,
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        Self::Database(e)
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Self::Database(sqlx::Error::Migrate(Box::new(e)))
    }
}

/// Why a run could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The thread has an active run.
    Busy(ThreadId),
    /// A run with this id exists.
    RunExists(RunId),
    /// The thread has pending interrupts and the run resolves none of them.
    InterruptsPending(Vec<InterruptId>),
    /// The run resolves some of the thread's pending interrupts, not all.
    ResumeMissing(Vec<InterruptId>),
    /// No pending or resolved interrupt of this thread has this id.
    UnknownInterrupt(InterruptId),
    /// The interrupt expired.
    Expired(InterruptId),
    /// The interrupt was resolved already, by `by_run`; `same` when with the same answer.
    AlreadyResolved {
        /// The interrupt.
        id: InterruptId,
        /// The run that applies the first answer.
        by_run: RunId,
        /// Whether the first answer is the one given now.
        same: bool,
    },
    /// The store failed.
    Store(StoreError),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |ids: &[InterruptId]| {
            ids.iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Self::Busy(thread) => write!(f, "thread `{thread}` already has an active run"),
            Self::RunExists(run) => write!(f, "run `{run}` exists already"),
            Self::InterruptsPending(ids) => write!(
                f,
                "the thread waits for decisions on interrupts {}: resume them",
                list(ids)
            ),
            Self::ResumeMissing(ids) => {
                write!(f, "the resume does not cover interrupts {}", list(ids))
            }
            Self::UnknownInterrupt(id) => write!(f, "interrupt `{id}` is unknown on this thread"),
            Self::Expired(id) => write!(f, "interrupt `{id}` expired"),
            Self::AlreadyResolved { id, by_run, .. } => {
                write!(
                    f,
                    "interrupt `{id}` was resolved already, by run `{by_run}`"
                )
            }
            Self::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StoreError> for StartError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl From<sqlx::Error> for StartError {
    fn from(e: sqlx::Error) -> Self {
        Self::Store(e.into())
    }
}

/// SHA-256 (hex) of `value`'s canonical JSON (object keys sorted at every level).
#[must_use]
pub fn args_hash(value: &Value) -> String {
    use sha2::{Digest, Sha256};
    fn canonical(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), canonical(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
            other => other.clone(),
        }
    }
    let digest = Sha256::digest(canonical(value).to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) fn from_millis(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_ignores_key_order_but_not_values() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": null}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": {"x": null, "y": [1, 2]}, "b": 1}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"a": {"x": null, "y": [2, 1]}, "b": 1}"#).unwrap();
        assert_eq!(args_hash(&a), args_hash(&b));
        assert_ne!(args_hash(&a), args_hash(&c));
        assert_eq!(args_hash(&a).len(), 64);
    }
}
