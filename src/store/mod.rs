//! [`RunStore`]: the [run log](crate::runs::RunLog) on SQLite (one file, the embedded default) or
//! PostgreSQL (several instances).
//!
//! The store is the truth; everything else is a hint. Writes go through one writer per
//! store that commits what all runs asked for meanwhile in one transaction (group commit: one
//! fsync for many runs), each run's part fenced by its ownership. Followers in this process are
//! woken by the engine after each write; other instances' writes arrive as PostgreSQL
//! `LISTEN/NOTIFY` hints, after which followers read the log.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::runs::{LoggedEvent, RunEnd, RunLog, RunStatus, Start};
//! use agent_tower::store::RunStore;
//!
//! # let dir = std::env::temp_dir().join(format!("agent-tower-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let store = RunStore::open(&format!("sqlite://{}", dir.join("runs.db").display())).await?;
//! let lease = store.start(&Start::new("thread-1".into(), "run-1".into())).await?;
//! let events = [LoggedEvent::from_json(1, r#"{"type":"RUN_STARTED","threadId":"thread-1","runId":"run-1"}"#)];
//! store.write(&lease, &events, Some(&RunEnd::new(RunStatus::Finished))).await?;
//!
//! // A reader joining later gets the whole log and the run's end.
//! let page = store.read(&"run-1".into(), 0, 100).await?.expect("a known run");
//! assert_eq!((page.events.len(), page.status), (1, RunStatus::Finished));
//! # Ok(()) }
//! ```
//!
//! # Backends
//!
//! [`RunStore::open`] takes `sqlite://path` (created if missing; WAL, `synchronous=FULL`, so an
//! acknowledged write survives a power loss) or `postgres://…`; the log in memory is
//! [`MemoryLog`](crate::runs::MemoryLog). The same portable SQL, with numbered parameters, runs
//! on both engines; the migrations in the crate's `migrations/` directory run on open. Reads go
//! through sqlx; the writer writes PostgreSQL through sqlx and SQLite through rusqlite, on a
//! thread of its own with cached statements, a whole group of writes in one hand-over instead
//! of two thread switches per statement.
//!
//! # Guarantees
//!
//! - **One active run per thread**: a unique index on running runs; a second start is refused
//!   ([`StartError::Busy`](crate::runs::StartError::Busy)) whichever instance tries.
//! - **Exactly one resume wins**: resolving an interrupt is a conditional update
//!   (`status = 'pending'` and not expired) in the same transaction as the run it starts.
//! - **Fencing**: a write for a run this instance no longer owns (another instance recovered it)
//!   fails with [`LogError::Fenced`]; nothing is written.
//! - **Liveness**: each instance keeps one row in `instances`, renewed by
//!   [`heartbeat`](crate::runs::RunLog::heartbeat); runs of instances whose row expired are
//!   [lost](crate::runs::RunLog::lost), and recovering one is a conditional update too, so that
//!   each is recovered once.
//! - **Bounded waits**: a connection is awaited at most 5 s and a group commit at most 10 s; a
//!   store that does not answer fails the writes (and the runs' followers end with
//!   `store_unavailable`) instead of hanging.

mod calls;
mod chunk;
mod conn;
mod file;
mod ledger;
mod listen;
mod outbox;
mod retention;
mod rows;
mod schedules;
mod schema;
mod sql;
mod threads;
mod writer;

use std::{
    fmt,
    sync::{Arc, PoisonError, RwLock},
    time::Duration,
};

pub use self::{file::backup, sql::RunStore};
use crate::runs::{Changed, LogError, OnChange};
pub use crate::runs::{
    Deleted, InvalidCursor, ThreadChange, ThreadCursor, ThreadPage, ThreadQuery, ThreadSummary,
};

/// A callback of [`RunStore::on_commit`].
type OnCommit = Arc<dyn Fn(Duration) + Send + Sync>;

/// How far the store's commits go before it answers them, and so before the events they hold are
/// sent on ([`RunStore::durability`]). At the first two levels an event is in the database
/// before any client is sent it: they differ in what a crash of the *machine* may take back. At
/// [`Eager`](Durability::Eager) an event is sent first, and committed within [`COMMIT_WITHIN`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// On disk: a commit is answered once the database flushed it (SQLite `synchronous=FULL`,
    /// PostgreSQL's `synchronous_commit` as the server has it, `on` by default). No crash loses
    /// what was answered.
    #[default]
    Full,
    /// In the database, flushed within a short window: a commit is answered once the database has
    /// it, before it is flushed to disk (SQLite `synchronous=NORMAL`, its log flushed every
    /// [`FLUSH_EVERY`] with a checkpoint; PostgreSQL `synchronous_commit = off`, which the server
    /// flushes within three times its `wal_writer_delay`, 600 ms by default). A crash of the
    /// process (kill -9 included) loses nothing. A crash of the machine holding the SQLite file,
    /// or of the PostgreSQL server, may take back the commits of that last window: their runs
    /// are continued from the last step that stayed, so a client following one may be sent a
    /// step again (and its model called again), and a run's end a webhook was told of in that
    /// window is told again when the run ends again.
    Relaxed,
    /// Sent, then committed: a run's events go to its clients as the agent makes them, and into
    /// the database with the others of the same [`COMMIT_WITHIN`] window, committed as at
    /// [`Relaxed`](Durability::Relaxed). A run's end is still sent only once committed (a client
    /// that saw it may continue the thread at once), and a step's tool calls still run only
    /// once the step is committed. A crash of the process (kill -9 included) takes back what a
    /// run sent since its last commit: that window's events, and those of the commit in flight
    /// (at most [`SENT_AHEAD`](crate::runs::SENT_AHEAD) / 2 events). The run is continued from
    /// the last step committed, numbered after every event it could have sent, so that a client
    /// that re-joins from the last event it saw misses nothing of the continuation; it is sent
    /// the cut step again. A crash of the machine may take back what `Relaxed` says too.
    Eager,
}

/// The longest a commit of a SQLite store at the relaxed level waits to be flushed to disk (it
/// goes with the next checkpoint, which comes sooner while there are commits).
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// How often a SQLite store folds its write-ahead log into the file (a passive checkpoint), on
/// a connection of its own: the writer never does it, unless the log outgrows
/// [`WAL_BACKSTOP`] pages because the checkpoints fall behind.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

// The relaxed level's flush is the checkpoint.
const _: () = assert!(CHECKPOINT_EVERY.as_millis() <= FLUSH_EVERY.as_millis());

/// The pages of a SQLite store's write-ahead log at which its writer checkpoints it itself.
const WAL_BACKSTOP: u32 = 10_000;

/// The size of a new SQLite store's pages, in bytes (a file made before keeps its own). A commit
/// writes each page it changed whole, twice (to the log, then into the file), and most of a
/// run's pages are index leaves that gain an entry of a few dozen bytes: half the default 4 KiB
/// writes a quarter fewer bytes per short run, at the same runs per second.
const PAGE_SIZE: u32 = 2048;

/// How long a run's events sent at [`Durability::Eager`] wait to be committed, at most (unless
/// the commit before them takes longer): the window that commits them together.
pub const COMMIT_WITHIN: Duration = Duration::from_millis(20);

/// The level the writer commits at, shared with the store.
#[derive(Default)]
struct CommitLevel {
    relaxed: std::sync::atomic::AtomicBool,
    /// Events may be sent before their commit.
    eager: std::sync::atomic::AtomicBool,
    /// Commits not yet folded into the file (SQLite): the checkpoint's to fold, and to flush
    /// to disk at the relaxed level.
    unfolded: std::sync::atomic::AtomicBool,
}

impl CommitLevel {
    fn relaxed(&self) -> bool {
        self.relaxed.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn set(&self, level: Durability) {
        let ordering = std::sync::atomic::Ordering::Relaxed;
        self.relaxed.store(level != Durability::Full, ordering);
        self.eager.store(level == Durability::Eager, ordering);
    }

    /// How long an event may be sent before its commit, when it may be.
    fn sends_ahead(&self) -> Option<Duration> {
        let eager = self.eager.load(std::sync::atomic::Ordering::Relaxed);
        eager.then_some(COMMIT_WITHIN)
    }
}

/// Whom the store tells of what it sees: other instances' writes, its own commits.
#[derive(Default)]
struct Observers {
    changed: RwLock<Vec<OnChange>>,
    committed: RwLock<Option<OnCommit>>,
}

impl Observers {
    fn changed(&self, change: Changed<'_>) {
        for callback in self
            .changed
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            callback(change);
        }
    }

    fn committed(&self, took: Duration) {
        if let Some(callback) = &*self
            .committed
            .read()
            .unwrap_or_else(PoisonError::into_inner)
        {
            callback(took);
        }
    }
}

/// The store could not be opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed.
    Database(sqlx::Error),
    /// The URL names no backend this store knows.
    UnsupportedUrl(String),
    /// The SQLite file could not be opened for writing.
    Open {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The SQLite file could not be checkpointed, or copied.
    File {
        /// What was done: `checkpoint`, `back up`.
        action: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The store's schema is newer than this binary knows: a later release wrote it.
    NewerSchema {
        /// The store's schema version (its last migration's).
        found: i64,
        /// The latest version this binary knows.
        known: i64,
    },
    /// The PostgreSQL server did not answer, or refused the connection.
    Unreachable {
        /// Where it was looked for: host, port and database, without credentials.
        server: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Database(e) => write!(f, "the run store failed: {e}"),
            Self::UnsupportedUrl(url) => write!(
                f,
                "unsupported store `{url}`: use `sqlite://path` or `postgres://…` (the log in \
                 memory is `runs::MemoryLog`)"
            ),
            Self::Open { path, source } => write!(
                f,
                "the run store could not open {} for writing: {source}",
                path.display()
            ),
            Self::Unreachable { server, source } => {
                write!(f, "cannot reach the PostgreSQL server {server}: {source}")
            }
            Self::File {
                action,
                path,
                source,
            } => write!(f, "could not {action} {}: {source}", path.display()),
            Self::NewerSchema { found, known } => write!(
                f,
                "the run store's schema (version {found}) is newer than this binary knows \
                 ({known}): a later release wrote it; run that release (or a newer one), or \
                 restore a backup taken before the upgrade"
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Database(e) => Some(e),
            Self::UnsupportedUrl(_) | Self::NewerSchema { .. } => None,
            Self::Open { source, .. }
            | Self::Unreachable { source, .. }
            | Self::File { source, .. } => Some(&**source),
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

impl From<sqlx::Error> for LogError {
    fn from(e: sqlx::Error) -> Self {
        Self::Unavailable(Box::new(e))
    }
}

/// How long a connection is awaited.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one group commit may take before its writes fail.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The channel PostgreSQL wake-ups go on; the payload is `seq:run_id`.
const CHANNEL: &str = "agent_tower_events";

/// What a notification line `cancel:run` starts with: the run's cancellation was asked for (an
/// instance that does not know it reads a run whose log changed, and only wakes its followers).
const CANCEL: &str = "cancel";

/// What a notification line `thread:thread` starts with: a run of the thread started (a
/// client waiting on the thread for its next run follows it).
const THREAD: &str = "thread";

/// What a notification line `listed:["owner","thread","principal"]` starts with: a thread's
/// listing changed (a run of it ended; it was kept, named, archived or deleted), told by the
/// instance `owner` (which does not tell itself again).
const LISTED: &str = "listed";

/// What a notification line `released:owner` starts with: a draining instance released its
/// runs (the others look for lost runs at once).
const RELEASED: &str = "released";

/// What the writer and the readers share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}
