//! [`RunStore`]: opening, reading, and the [`RunLog`] implementation (writes go to the writer
//! task).

use std::{
    fmt,
    str::FromStr,
    sync::Arc,
    time::{Duration, SystemTime},
};

use futures_util::{FutureExt, future::BoxFuture};
use sqlx::{AnyPool, Row, any::AnyPoolOptions, sqlite::SqliteConnectOptions};
use tokio::sync::{mpsc, oneshot};

use super::{
    ACQUIRE_TIMEOUT, Backend, CHECKPOINT_EVERY, CommitLevel, Durability, Observers, PAGE_SIZE,
    StoreError, WAL_BACKSTOP, chunk,
    conn::Columns,
    rows::{
        INTERRUPT_COLUMNS, RUN_COLUMNS, interrupt_record, json, millis, number, run_record, seq,
        signed, text,
    },
    writer,
};
use crate::{
    id::{RunId, ThreadId},
    runs::{
        DurableLog, InterruptRecord, Interrupts, Lease, LogError, LoggedEvent, LostRun, OnChange,
        Page, PrincipalUsage, Recovered, Recovery, RunEnd, RunLog, RunRecord, SavedThread, Start,
        StartError, ThreadRecord,
    },
};

pub(super) struct Inner {
    /// Reads (followers, listings); writes go to the writer.
    reader: AnyPool,
    jobs: mpsc::Sender<writer::Job>,
    pub(super) backend: Backend,
    /// The SQLite file (none on PostgreSQL).
    pub(super) file: Option<std::path::PathBuf>,
    owner: String,
    observers: Arc<Observers>,
    /// The least free space of the disk holding a SQLite file for the store to be ready.
    min_free: std::sync::atomic::AtomicU64,
    /// The level the writer commits at.
    level: Arc<CommitLevel>,
}

/// The least free space of the disk holding a SQLite file, by default, for the store to be
/// [ready](RunLog::ready).
const MIN_FREE: u64 = 64 * 1024 * 1024;

/// The run log on SQLite or PostgreSQL; see the [module docs](super). Clones share the
/// connections and the writer.
#[derive(Clone)]
pub struct RunStore(Arc<Inner>);

impl fmt::Debug for RunStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunStore")
            .field("backend", &self.0.backend)
            .field("owner", &self.0.owner)
            .finish_non_exhaustive()
    }
}

/// A `sqlite:` URL gets `mode=rwc` (create if missing).
pub(super) fn normalize(url: &str) -> Result<(String, Backend), StoreError> {
    if url.starts_with("sqlite:") {
        let url = if url.contains('?') {
            url.to_owned()
        } else {
            format!("{url}?mode=rwc")
        };
        return Ok((url, Backend::Sqlite));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok((url.to_owned(), Backend::Postgres));
    }
    Err(StoreError::UnsupportedUrl(url.to_owned()))
}

/// Creates the SQLite file at `path`, if missing, readable by its owner only: it holds every
/// conversation. SQLite gives its `-wal` and `-shm` files the same permissions.
pub(super) fn create_private(path: &std::path::Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// `host:port/database` of a PostgreSQL URL, without user or password.
fn server_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    rest.split('?').next().unwrap_or(rest).to_owned()
}

/// One connection to the PostgreSQL server at `url`, opened and closed, so that an unreachable
/// server is reported with its cause (a pool only says it timed out), within the acquire timeout.
async fn reach(url: &str) -> Result<(), StoreError> {
    use sqlx::Connection;
    let unreachable = |source: Box<dyn std::error::Error + Send + Sync>| StoreError::Unreachable {
        server: server_of(url),
        source,
    };
    match tokio::time::timeout(ACQUIRE_TIMEOUT, sqlx::AnyConnection::connect(url)).await {
        Ok(Ok(connection)) => {
            let _ = connection.close().await;
            Ok(())
        }
        Ok(Err(error)) => Err(unreachable(Box::new(error))),
        Err(_) => Err(unreachable(
            format!("no answer within {} s", ACQUIRE_TIMEOUT.as_secs()).into(),
        )),
    }
}

/// Folds a SQLite store's write-ahead log into its file every [`CHECKPOINT_EVERY`] that saw a
/// commit, with a passive checkpoint (which syncs the log first: the relaxed level's flush, and
/// holds up no writer), until the store is dropped. On a connection of its own: the writer's
/// commits do not wait for it (`wal_autocheckpoint` is the writer's only past [`WAL_BACKSTOP`]
/// pages).
async fn checkpoints(store: std::sync::Weak<Inner>) {
    let mut every = tokio::time::interval(CHECKPOINT_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(store) = store.upgrade() else {
            return;
        };
        if !store
            .level
            .unfolded
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            continue;
        }
        let checkpoint = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)");
        if let Err(error) = checkpoint.execute(&store.reader).await {
            tracing::warn!(%error, "the store's log could not be folded into its file; trying again");
            store
                .level
                .unfolded
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The writer's own connection to the SQLite file at `path`: pages of [`PAGE_SIZE`] if the file
/// is new (it is opened before any other connection, so that nothing was written in it yet),
/// WAL, `synchronous=FULL` (a commit is on disk when it answers), and a lock held by another
/// process waited for as long as a commit may take.
fn open_writer(path: &std::path::Path) -> Result<rusqlite::Connection, rusqlite::Error> {
    let conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(super::COMMIT_TIMEOUT)?;
    conn.execute_batch(&format!(
        "PRAGMA page_size = {PAGE_SIZE}; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
         PRAGMA wal_autocheckpoint = {WAL_BACKSTOP};"
    ))?;
    Ok(conn)
}

impl RunStore {
    /// Opens (and migrates) the store at `url`: `sqlite://path` or `postgres://…`,
    /// and registers this instance (its first heartbeat, for 30 s).
    ///
    /// # Errors
    ///
    /// When the URL is not one of those, the database cannot be reached or a migration fails.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (url, backend) = normalize(url)?;
        let options = || {
            AnyPoolOptions::new()
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        if conn.backend_name() == "SQLite" {
                            sqlx::query("PRAGMA journal_mode = WAL")
                                .execute(&mut *conn)
                                .await?;
                            sqlx::query("PRAGMA synchronous = FULL")
                                .execute(&mut *conn)
                                .await?;
                        }
                        Ok(())
                    })
                })
        };
        let owner = format!("instance-{}", uuid::Uuid::now_v7());
        let observers = Arc::new(Observers::default());
        let level = Arc::new(CommitLevel::default());
        let mut file = None;
        let (reader, jobs) = match backend {
            Backend::Sqlite => {
                let path = SqliteConnectOptions::from_str(&url)?
                    .get_filename()
                    .to_owned();
                create_private(&path).map_err(|e| StoreError::Open {
                    path: path.clone(),
                    source: Box::new(e),
                })?;
                // The writer's connection first: a file that is not a database is refused
                // at once, where the pool would retry it until its timeout, and a new file
                // gets its page size before any other connection writes in it.
                let opened = open_writer(&path).map_err(|e| StoreError::Open {
                    path: path.clone(),
                    source: Box::new(e),
                })?;
                let reader = options().max_connections(4).connect(&url).await?;
                super::schema::migrate(&reader, Backend::Sqlite).await?;
                let jobs = writer::spawn(
                    writer::Target::Sqlite(opened),
                    owner.clone(),
                    observers.clone(),
                    level.clone(),
                )
                .map_err(|e| StoreError::Open {
                    path: path.clone(),
                    source: Box::new(e),
                })?;
                file = Some(path);
                (reader, jobs)
            }
            Backend::Postgres => {
                reach(&url).await?;
                // One writer connection: the writer task commits every run's writes in groups.
                let writer = options().max_connections(1).connect(&url).await?;
                super::schema::migrate(&writer, Backend::Postgres).await?;
                super::listen::forward(&url, owner.clone(), observers.clone()).await?;
                let jobs = writer::spawn(
                    writer::Target::Postgres(writer),
                    owner.clone(),
                    observers.clone(),
                    level.clone(),
                )
                .expect("a task spawns");
                (options().max_connections(16).connect(&url).await?, jobs)
            }
        };
        let store = Self(Arc::new(Inner {
            reader,
            jobs,
            backend,
            file,
            owner,
            observers,
            min_free: MIN_FREE.into(),
            level,
        }));
        if backend == Backend::Sqlite {
            tokio::spawn(checkpoints(Arc::downgrade(&store.0)));
        }
        store
            .heartbeat(Duration::from_secs(30))
            .await
            .map_err(|e| match e {
                LogError::Unavailable(e) => match e.downcast::<sqlx::Error>() {
                    Ok(e) => StoreError::Database(*e),
                    Err(e) => StoreError::Database(sqlx::Error::Protocol(e.to_string())),
                },
                other => StoreError::Database(sqlx::Error::Protocol(other.to_string())),
            })?;
        Ok(store)
    }

    /// The SQLite file (none on PostgreSQL).
    pub(super) fn file(&self) -> Option<&std::path::Path> {
        self.0.file.as_deref()
    }

    /// This instance's name in the `owner` column of the runs it writes.
    #[must_use]
    pub fn owner(&self) -> &str {
        &self.0.owner
    }

    /// How much free space the disk holding a SQLite store must have for the store to be
    /// [ready](RunLog::ready) (64 MiB by default): below it, `/ready` answers `503` before the
    /// disk is full and writes fail (a write that changes nothing, as readiness probes, may still
    /// succeed on a full disk). No effect on PostgreSQL, whose server refuses writes itself.
    pub fn min_free_disk(&self, bytes: u64) {
        self.0
            .min_free
            .store(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// How far a commit goes before the store answers it ([`Durability::Full`] by default): from
    /// now on, for every run. [`Durability::Relaxed`] answers once the database has a commit,
    /// before it is on disk, and says what a crash of the machine may then take back;
    /// [`Durability::Eager`] sends events before their commit, and says what a crash of the
    /// process may then take back.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
    /// use agent_tower::store::{Durability, RunStore};
    /// # let dir = std::env::temp_dir().join(format!("agent-tower-doc-relaxed-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let store = RunStore::open(&format!("sqlite://{}", dir.join("runs.db").display())).await?;
    /// store.durability(Durability::Relaxed);
    /// # Ok(()) }
    /// ```
    pub fn durability(&self, level: Durability) {
        self.0.level.set(level);
    }

    /// Calls `callback` with the time each group commit took (a group carries the writes of many
    /// runs, in one transaction); it replaces the one given before.
    ///
    /// ```
    /// # #[cfg(feature = "metrics")]
    /// # async fn wire(store: agent_tower::store::RunStore) {
    /// let metrics = agent_tower::metrics::Metrics::new();
    /// store.on_commit(metrics.store_commits());
    /// # }
    /// ```
    pub fn on_commit(&self, callback: impl Fn(Duration) + Send + Sync + 'static) {
        *self
            .0
            .observers
            .committed
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(callback));
    }

    /// The pool reads go through.
    pub(super) fn reader(&self) -> &AnyPool {
        &self.0.reader
    }

    /// Sends a job to the writer and waits for its answer.
    pub(super) async fn ask<T>(
        &self,
        job: impl FnOnce(oneshot::Sender<T>) -> writer::Job,
        gone: impl FnOnce() -> T,
    ) -> T {
        let (reply, answer) = oneshot::channel();
        if self.0.jobs.send(job(reply)).await.is_err() {
            return gone();
        }
        answer.await.unwrap_or_else(|_| gone())
    }

    /// The events of `run_id` after a takeover's gap that follows `after` (see
    /// `RunLog::recover`), up to `limit`; none when no event follows `after`.
    async fn events_past_gap(
        &self,
        run_id: &RunId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LoggedEvent>, LogError> {
        let next = sqlx::query(
            "SELECT first_seq FROM run_chunks \
             WHERE run_key = (SELECT run_key FROM runs WHERE run_id = $1) AND first_seq > $2 \
             ORDER BY first_seq LIMIT 1",
        )
        .bind(run_id.as_str())
        .bind(signed(after))
        .fetch_optional(&self.0.reader)
        .await?;
        match next {
            Some(next) => {
                let first = seq(number(&next, "first_seq")?);
                self.events_in(run_id, first - 1, limit).await
            }
            None => Ok(Vec::new()),
        }
    }

    /// The events `after + 1 ..= after + limit` of `run_id`.
    async fn events_in(
        &self,
        run_id: &RunId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LoggedEvent>, LogError> {
        // A chunk holds at most `MAX_EVENTS` consecutive events: the chunks that hold
        // `after + 1 ..= after + limit` start in `after - MAX_EVENTS + 2 ..= after + limit`.
        let limit = u64::try_from(limit).unwrap_or(u64::MAX);
        let rows = sqlx::query(
            "SELECT first_seq, last_seq, events FROM run_chunks \
             WHERE run_key = (SELECT run_key FROM runs WHERE run_id = $1) \
             AND first_seq > $2 AND first_seq <= $3 AND last_seq > $4 ORDER BY first_seq",
        )
        .bind(run_id.as_str())
        .bind(signed(after.saturating_sub(chunk::MAX_EVENTS)))
        .bind(signed(after.saturating_add(limit)))
        .bind(signed(after))
        .fetch_all(&self.0.reader)
        .await?;
        let mut events = Vec::new();
        for row in &rows {
            let (first, last) = (
                seq(number(row, "first_seq")?),
                seq(number(row, "last_seq")?),
            );
            let chunk = chunk::split(first, last, text(row, "events")?).ok_or_else(|| {
                LogError::Corrupt(format!("events {first}..={last} of run {run_id}"))
            })?;
            events.extend(
                chunk
                    .into_iter()
                    .filter(|e| e.seq > after && e.seq - after <= limit),
            );
        }
        Ok(events)
    }

    async fn run_record(&self, run_id: &RunId) -> Result<Option<RunRecord>, LogError> {
        sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1"))
            .bind(run_id.as_str())
            .fetch_optional(&self.0.reader)
            .await?
            .as_ref()
            .map(run_record)
            .transpose()
    }

    async fn thread_record(&self, thread_id: &ThreadId) -> Result<Option<ThreadRecord>, LogError> {
        let runs = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE thread_id = $1 ORDER BY created_at, run_id"
        ))
        .bind(thread_id.as_str())
        .fetch_all(&self.0.reader)
        .await?
        .iter()
        .map(run_record)
        .collect::<Result<Vec<_>, _>>()?;
        let saved =
            sqlx::query("SELECT messages, state, principal FROM threads WHERE thread_id = $1")
                .bind(thread_id.as_str())
                .fetch_optional(&self.0.reader)
                .await?;
        if saved.is_none() && runs.is_empty() {
            return Ok(None);
        }
        let (messages, state, kept_for) = match saved {
            Some(row) => {
                let state: Option<String> = row.try_get("state")?;
                (
                    json(&text(&row, "messages")?, "conversation")?,
                    state.map(|s| json(&s, "state")).transpose()?,
                    row.optional_text("principal")?,
                )
            }
            None => (Vec::new(), None, None),
        };
        // The runs of a thread all belong to its principal.
        let principal = match runs.first() {
            Some(run) => run.principal.clone(),
            None => kept_for,
        };
        Ok(Some(ThreadRecord {
            thread_id: thread_id.clone(),
            principal,
            messages,
            state,
            runs,
        }))
    }

    async fn interrupt_records(
        &self,
        filter: Interrupts<'_>,
    ) -> Result<Vec<InterruptRecord>, LogError> {
        let select = format!("SELECT {INTERRUPT_COLUMNS} FROM interrupts");
        let order = "ORDER BY created_at, interrupt_id";
        let query = match filter {
            Interrupts::All(None) => format!("{select} {order}"),
            Interrupts::All(Some(_)) => format!("{select} WHERE status = $1 {order}"),
            Interrupts::Id(_) => format!("{select} WHERE interrupt_id = $1"),
            Interrupts::PendingOf(_) => {
                format!("{select} WHERE thread_id = $1 AND status = 'pending' {order}")
            }
            Interrupts::ResolvedBy(_) => format!("{select} WHERE resolved_by_run = $1 {order}"),
        };
        let mut query = sqlx::query(&query);
        query = match filter {
            Interrupts::All(None) => query,
            Interrupts::All(Some(status)) => query.bind(status.as_str()),
            Interrupts::Id(id) => query.bind(id.as_str()),
            Interrupts::PendingOf(thread) => query.bind(thread.as_str()),
            Interrupts::ResolvedBy(run) => query.bind(run.as_str()),
        };
        query
            .fetch_all(&self.0.reader)
            .await?
            .iter()
            .map(interrupt_record)
            .collect()
    }

    async fn lost_runs(&self) -> Result<Vec<LostRun>, LogError> {
        let now = millis(SystemTime::now());
        sqlx::query(&format!(
            "SELECT {RUN_COLUMNS}, attempts FROM runs r WHERE r.status = 'running' \
             AND r.lease_expires_at <= $1 AND NOT EXISTS (SELECT 1 FROM instances i \
             WHERE i.owner = r.owner AND i.expires_at > $1)"
        ))
        .bind(now)
        .fetch_all(&self.0.reader)
        .await?
        .iter()
        .map(|row| {
            Ok(LostRun {
                record: run_record(row)?,
                attempts: u32::try_from(number(row, "attempts")?).unwrap_or(u32::MAX),
            })
        })
        .collect()
    }
}

pub(super) fn closed<T>() -> Result<T, LogError> {
    Err(LogError::unavailable("the store's writer stopped"))
}

impl RunLog for RunStore {
    fn start<'a>(&'a self, start: &'a Start) -> BoxFuture<'a, Result<Lease, StartError>> {
        self.ask(
            move |reply| writer::Job::Start {
                start: start.clone(),
                reply,
            },
            || closed().map_err(StartError::Log),
        )
        .boxed()
    }

    fn write<'a>(
        &'a self,
        lease: &'a Lease,
        events: &'a [LoggedEvent],
        end: Option<&'a RunEnd>,
    ) -> BoxFuture<'a, Result<(), LogError>> {
        self.ask(
            move |reply| writer::Job::Write {
                lease: lease.clone(),
                events: events.to_vec(),
                end: end.cloned(),
                reply,
            },
            closed,
        )
        .boxed()
    }

    fn refuse<'a>(
        &'a self,
        start: &'a Start,
        events: &'a [LoggedEvent],
    ) -> BoxFuture<'a, Result<(), StartError>> {
        self.ask(
            move |reply| writer::Job::Refuse {
                start: start.clone(),
                events: events.to_vec(),
                reply,
            },
            || closed().map_err(StartError::Log),
        )
        .boxed()
    }

    fn read<'a>(
        &'a self,
        run: &'a RunId,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Option<Page>, LogError>> {
        async move {
            let mut events = self.events_in(run, after, limit).await?;
            // Read after the events: an end read here covers every event committed before it.
            let Some(record) = self.run_record(run).await? else {
                return Ok(None);
            };
            if events.is_empty() && record.last_seq > after {
                events = self.events_past_gap(run, after, limit).await?;
            }
            Ok(Some(Page {
                events,
                status: record.status,
                last_seq: record.last_seq,
            }))
        }
        .boxed()
    }

    fn owner(&self) -> &str {
        &self.0.owner
    }

    fn run<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<Option<RunRecord>, LogError>> {
        self.run_record(run).boxed()
    }

    fn thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Option<ThreadRecord>, LogError>> {
        self.thread_record(thread).boxed()
    }

    fn save_thread<'a>(&'a self, saved: SavedThread<'a>) -> BoxFuture<'a, Result<(), LogError>> {
        self.ask(
            move |reply| writer::Job::SaveThread {
                thread: saved.thread.clone(),
                principal: saved.principal.map(str::to_owned),
                messages: saved.messages.to_vec(),
                state: saved.state.cloned(),
                workspace: saved.workspace.map(str::to_owned),
                forked_from: saved.forked_from.cloned(),
                reply,
            },
            closed,
        )
        .boxed()
    }

    fn threads<'a>(
        &'a self,
        query: &'a crate::runs::ThreadQuery<'a>,
    ) -> BoxFuture<'a, Result<crate::runs::ThreadPage, LogError>> {
        self.list_threads(query).boxed()
    }

    fn runs<'a>(
        &'a self,
        query: &'a crate::runs::RunQuery<'a>,
    ) -> BoxFuture<'a, Result<crate::runs::RunPage, LogError>> {
        self.list_runs(query).boxed()
    }

    fn change_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
        change: &'a crate::runs::ThreadChange,
    ) -> BoxFuture<'a, Result<Option<crate::runs::ThreadSummary>, LogError>> {
        self.change(thread, change).boxed()
    }

    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<crate::runs::Deleted, LogError>> {
        self.remove_thread(thread).boxed()
    }

    fn interrupts<'a>(
        &'a self,
        filter: Interrupts<'a>,
    ) -> BoxFuture<'a, Result<Vec<InterruptRecord>, LogError>> {
        self.interrupt_records(filter).boxed()
    }

    fn heartbeat(&self, lease: Duration) -> BoxFuture<'_, Result<(), LogError>> {
        self.ask(move |reply| writer::Job::Heartbeat { lease, reply }, closed)
            .boxed()
    }

    fn lost(&self) -> BoxFuture<'_, Result<Vec<LostRun>, LogError>> {
        self.lost_runs().boxed()
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), LogError>> {
        async move {
            if let Some(file) = self.file() {
                let min = self.0.min_free.load(std::sync::atomic::Ordering::Relaxed);
                super::file::has_room(file, min)?;
            }
            // A write, not a read: a write lock another process holds refuses runs while reads
            // still answer.
            self.ask(|reply| writer::Job::Probe { reply }, closed).await
        }
        .boxed()
    }

    fn durable(&self) -> Option<&dyn DurableLog> {
        Some(self)
    }

    fn recover<'a>(
        &'a self,
        lost: &'a LostRun,
        events: &'a [LoggedEvent],
        recovery: Recovery<'a>,
    ) -> BoxFuture<'a, Result<Option<Recovered>, LogError>> {
        let end = match recovery {
            Recovery::Take => None,
            Recovery::End(end) => Some(end.clone()),
        };
        self.ask(
            move |reply| writer::Job::Recover {
                lost: lost.clone(),
                events: events.to_vec(),
                end,
                reply,
            },
            closed,
        )
        .boxed()
    }

    fn sends_ahead(&self) -> Option<Duration> {
        self.0.level.sends_ahead()
    }

    fn outbox(&self) -> Option<&dyn crate::runs::Outbox> {
        Some(self)
    }

    fn schedules(&self) -> Option<&dyn crate::runs::ScheduleBook> {
        Some(self)
    }
}

impl DurableLog for RunStore {
    fn request_cancel<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<bool, LogError>> {
        self.ask(
            move |reply| writer::Job::RequestCancel {
                run: run.clone(),
                reply,
            },
            closed,
        )
        .boxed()
    }

    fn followed<'a>(
        &'a self,
        runs: &'a [RunId],
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), LogError>> {
        // Only PostgreSQL is shared with other instances: a SQLite file's runs are all driven
        // by the process that writes it.
        if self.0.backend != Backend::Postgres || runs.is_empty() {
            return Box::pin(std::future::ready(Ok(())));
        }
        self.ask(
            move |reply| writer::Job::Followed {
                runs: runs.to_vec(),
                lease,
                reply,
            },
            closed,
        )
        .boxed()
    }

    fn followed_elsewhere<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<bool, LogError>> {
        async move {
            if self.0.backend != Backend::Postgres {
                return Ok(false);
            }
            let row = sqlx::query("SELECT followed_until FROM runs WHERE run_id = $1")
                .bind(run.as_str())
                .fetch_optional(&self.0.reader)
                .await?;
            let Some(row) = row else {
                return Ok(false);
            };
            Ok(number(&row, "followed_until")? > millis(SystemTime::now()))
        }
        .boxed()
    }

    fn cancels_requested(&self) -> BoxFuture<'_, Result<Vec<RunId>, LogError>> {
        async move {
            let rows = sqlx::query(
                "SELECT run_id FROM runs WHERE owner = $1 AND status = 'running' \
                 AND cancel_requested = 1",
            )
            .bind(self.0.owner.as_str())
            .fetch_all(&self.0.reader)
            .await?;
            rows.iter()
                .map(|row| Ok(RunId::from(text(row, "run_id")?.as_str())))
                .collect()
        }
        .boxed()
    }

    fn principal_usage<'a>(
        &'a self,
        principal: &'a str,
        minute_ago: i64,
        day_began: i64,
    ) -> BoxFuture<'a, Result<PrincipalUsage, LogError>> {
        async move {
            // A run's `updated_at` is never before its `created_at`: the index of a principal's
            // runs by `updated_at` finds those begun since a time.
            let row = sqlx::query(
                "SELECT \
                 (SELECT COUNT(*) FROM runs WHERE principal = $1 AND status = 'running') AS live, \
                 (SELECT COUNT(*) FROM runs WHERE principal = $1 AND updated_at >= $2 \
                    AND created_at >= $2) AS minute, \
                 (SELECT MIN(created_at) FROM runs WHERE principal = $1 AND updated_at >= $2 \
                    AND created_at >= $2) AS first_of_minute, \
                 (SELECT CAST(COALESCE(SUM(log_bytes), 0) AS BIGINT) FROM runs \
                    WHERE principal = $1 AND updated_at >= $3 AND created_at >= $3) AS bytes",
            )
            .bind(principal)
            .bind(minute_ago)
            .bind(day_began)
            .fetch_one(&self.0.reader)
            .await?;
            let count = |column| number(&row, column).map(seq);
            let first: Option<i64> = row.try_get("first_of_minute")?;
            Ok(PrincipalUsage::new(
                usize::try_from(count("live")?).unwrap_or(usize::MAX),
                u32::try_from(count("minute")?).unwrap_or(u32::MAX),
                first,
                count("bytes")?,
            ))
        }
        .boxed()
    }

    fn release(&self) -> BoxFuture<'_, Result<(), LogError>> {
        self.ask(|reply| writer::Job::Release { reply }, closed)
            .boxed()
    }

    fn on_change(&self, changed: OnChange) {
        // Only PostgreSQL is shared with other instances; a SQLite file has one writer.
        self.0
            .observers
            .changed
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(changed);
    }
}
