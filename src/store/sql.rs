//! The store's SQL, the same on SQLite and PostgreSQL.

use std::{
    collections::HashSet,
    fmt,
    sync::{Arc, LazyLock, atomic::Ordering},
    time::{Duration, SystemTime},
};

use serde_json::Value;
use sqlx::{
    AnyPool, Row,
    any::{AnyPoolOptions, AnyRow},
};

use super::{
    InterruptRecord, InterruptStatus, Lease, LoggedEvent, NewRun, RunEnd, RunRecord, RunStatus,
    StartError, StoreError, ThreadRecord, args_hash, from_millis, millis, wake::Wakeups,
};
use crate::id::{InterruptId, RunId, ThreadId};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The channel PostgreSQL wake-ups go on; the payload is `seq:run_id`.
pub(super) const CHANNEL: &str = "agent_tower_events";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

struct Inner {
    /// Transactions go here: one connection on SQLite (one writer at a time anyway, and no
    /// lock upgrades to fail), a pool on PostgreSQL.
    writer: AnyPool,
    /// Reads (followers, listings).
    reader: AnyPool,
    backend: Backend,
    owner: String,
    wakeups: Wakeups,
    poll: Duration,
}

/// Threads, runs, event logs and interrupts; see the [module docs](super). Clones share the
/// connections.
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

fn text(row: &AnyRow, column: &str) -> Result<String, StoreError> {
    Ok(row.try_get::<String, _>(column)?)
}

fn number(row: &AnyRow, column: &str) -> Result<i64, StoreError> {
    Ok(row.try_get::<i64, _>(column)?)
}

fn json<T: serde::de::DeserializeOwned>(raw: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(raw).map_err(|e| StoreError::corrupt(format!("{what} ({e})")))
}

fn seq(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

const RUN_COLUMNS: &str = "run_id, thread_id, status, owner, last_seq, created_at, updated_at";

fn run_record(row: &AnyRow) -> Result<RunRecord, StoreError> {
    Ok(RunRecord {
        run_id: text(row, "run_id")?.into(),
        thread_id: text(row, "thread_id")?.into(),
        status: RunStatus::parse(&text(row, "status")?)?,
        owner: text(row, "owner")?,
        last_seq: seq(number(row, "last_seq")?),
        created_at: from_millis(number(row, "created_at")?),
        updated_at: from_millis(number(row, "updated_at")?),
    })
}

const INTERRUPT_COLUMNS: &str = "interrupt_id, thread_id, run_id, tool_call_id, tool_name, \
     arguments, args_hash, created_at, expires_at, status, resolution, resolved_by_run";

fn interrupt_record(row: &AnyRow) -> Result<InterruptRecord, StoreError> {
    let resolution: Option<String> = row.try_get("resolution")?;
    let resolved_by: Option<String> = row.try_get("resolved_by_run")?;
    Ok(InterruptRecord {
        id: text(row, "interrupt_id")?.into(),
        thread_id: text(row, "thread_id")?.into(),
        run_id: text(row, "run_id")?.into(),
        tool_call_id: text(row, "tool_call_id")?.into(),
        tool_name: text(row, "tool_name")?,
        arguments: json(&text(row, "arguments")?, "interrupt's arguments")?,
        args_hash: text(row, "args_hash")?,
        created_at: from_millis(number(row, "created_at")?),
        expires_at: from_millis(number(row, "expires_at")?),
        status: InterruptStatus::parse(&text(row, "status")?)?,
        resolution: resolution
            .map(|r| json(&r, "interrupt's resolution"))
            .transpose()?,
        resolved_by_run: resolved_by.map(RunId::from),
    })
}

/// `memory` → SQLite in memory; a `sqlite:` URL gets `mode=rwc` (create if missing).
fn normalize(url: &str) -> Result<(String, Backend), StoreError> {
    if url == "memory" || url == "sqlite::memory:" {
        return Ok(("sqlite::memory:".to_owned(), Backend::Sqlite));
    }
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

impl RunStore {
    /// Opens (and migrates) the store at `url`: `memory`, `sqlite://path` or `postgres://…`.
    ///
    /// # Errors
    ///
    /// When the URL is not one of those, the database cannot be reached or a migration fails.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (url, backend) = normalize(url)?;
        let memory = url == "sqlite::memory:";
        let options = || {
            AnyPoolOptions::new().after_connect(move |conn, _| {
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
        let (writer, reader) = match backend {
            Backend::Sqlite if memory => {
                // One connection holds the database: it must never close.
                let pool = options()
                    .max_connections(1)
                    .min_connections(1)
                    .idle_timeout(None)
                    .max_lifetime(None)
                    .connect(&url)
                    .await?;
                (pool.clone(), pool)
            }
            Backend::Sqlite => {
                let writer = options().max_connections(1).connect(&url).await?;
                let reader = options().max_connections(4).connect(&url).await?;
                (writer, reader)
            }
            Backend::Postgres => {
                let pool = options().max_connections(16).connect(&url).await?;
                (pool.clone(), pool)
            }
        };
        MIGRATOR.run(&writer).await?;
        let wakeups = Wakeups::default();
        if backend == Backend::Postgres {
            wakeups.listen(&url).await?;
        }
        Ok(Self(Arc::new(Inner {
            writer,
            reader,
            backend,
            owner: format!("instance-{}", uuid::Uuid::now_v7()),
            wakeups,
            poll: Duration::from_secs(1),
        })))
    }

    /// This instance's name in the `owner` column of the runs it writes.
    #[must_use]
    pub fn owner(&self) -> &str {
        &self.0.owner
    }

    /// How often a follower looks at the log when no wake-up came (default 1 s).
    #[must_use]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.poll = every;
        }
        self
    }

    pub(super) fn poll(&self) -> Duration {
        self.0.poll
    }

    pub(super) fn wakeups(&self) -> &Wakeups {
        &self.0.wakeups
    }

    /// Starts a run: the thread must have no active run, and `resume` (interrupt id, the
    /// answer's JSON) must answer every pending interrupt of the thread, each still pending and
    /// not expired. All of it in one transaction: exactly one start wins.
    ///
    /// # Errors
    ///
    /// See [`StartError`]; nothing is written on error.
    pub async fn start_run(
        &self,
        run: &NewRun,
        resume: &[(InterruptId, Value)],
    ) -> Result<Lease, StartError> {
        let now = SystemTime::now();
        let mut tx = self.0.writer.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO runs (run_id, thread_id, status, owner, lease_expires_at, last_seq, \
             created_at, updated_at) VALUES ($1, $2, 'running', $3, $4, 0, $5, $5) \
             ON CONFLICT DO NOTHING",
        )
        .bind(run.run_id.as_str())
        .bind(run.thread_id.as_str())
        .bind(self.owner())
        .bind(millis(now + run.lease))
        .bind(millis(now))
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 0 {
            let exists = sqlx::query("SELECT 1 FROM runs WHERE run_id = $1")
                .bind(run.run_id.as_str())
                .fetch_optional(&mut *tx)
                .await?;
            return Err(match exists {
                Some(_) => StartError::RunExists(run.run_id.clone()),
                None => StartError::Busy(run.thread_id.clone()),
            });
        }
        let pending: HashSet<InterruptId> = sqlx::query(
            "SELECT interrupt_id FROM interrupts WHERE thread_id = $1 AND status = 'pending'",
        )
        .bind(run.thread_id.as_str())
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| text(row, "interrupt_id").map(InterruptId::from))
        .collect::<Result<_, _>>()?;
        for (id, answer) in resume {
            let row = sqlx::query(&format!(
                "SELECT {INTERRUPT_COLUMNS} FROM interrupts WHERE interrupt_id = $1"
            ))
            .bind(id.as_str())
            .fetch_optional(&mut *tx)
            .await?;
            let record = match row.as_ref().map(interrupt_record).transpose()? {
                Some(record) if record.thread_id == run.thread_id => record,
                _ => return Err(StartError::UnknownInterrupt(id.clone())),
            };
            if record.status == InterruptStatus::Resolved {
                return Err(StartError::AlreadyResolved {
                    id: id.clone(),
                    by_run: record
                        .resolved_by_run
                        .unwrap_or_else(|| record.run_id.clone()),
                    same: record.resolution.as_ref() == Some(answer),
                });
            }
            if record.expires_at <= now {
                return Err(StartError::Expired(id.clone()));
            }
            let resolved = sqlx::query(
                "UPDATE interrupts SET status = 'resolved', resolution = $1, \
                 resolved_by_run = $2, resolved_at = $3 \
                 WHERE interrupt_id = $4 AND status = 'pending' AND expires_at > $3",
            )
            .bind(answer.to_string())
            .bind(run.run_id.as_str())
            .bind(millis(now))
            .bind(id.as_str())
            .execute(&mut *tx)
            .await?;
            if resolved.rows_affected() == 0 {
                return Err(StartError::AlreadyResolved {
                    id: id.clone(),
                    by_run: record.run_id.clone(),
                    same: false,
                });
            }
        }
        let answered: HashSet<&InterruptId> = resume.iter().map(|(id, _)| id).collect();
        let mut missing: Vec<InterruptId> = pending
            .iter()
            .filter(|id| !answered.contains(id))
            .cloned()
            .collect();
        missing.sort();
        if !missing.is_empty() {
            return Err(if resume.is_empty() {
                StartError::InterruptsPending(missing)
            } else {
                StartError::ResumeMissing(missing)
            });
        }
        tx.commit().await?;
        Ok(Lease {
            run_id: run.run_id.clone(),
            thread_id: run.thread_id.clone(),
            owner: self.owner().to_owned(),
            length: run.lease,
            last_seq: 0.into(),
        })
    }

    /// Records a run that was refused (a bad resume, say) with its events, so that it can be
    /// read like any other. The thread's active run, if any, is not affected.
    ///
    /// # Errors
    ///
    /// When the store fails, or the run id is taken.
    pub async fn record_refused(
        &self,
        thread_id: &ThreadId,
        run_id: &RunId,
        events: &[String],
    ) -> Result<(), StoreError> {
        let now = millis(SystemTime::now());
        let mut tx = self.0.writer.begin().await?;
        sqlx::query(
            "INSERT INTO runs (run_id, thread_id, status, owner, lease_expires_at, last_seq, \
             created_at, updated_at) VALUES ($1, $2, 'failed', $3, $4, $5, $4, $4)",
        )
        .bind(run_id.as_str())
        .bind(thread_id.as_str())
        .bind(self.owner())
        .bind(now)
        .bind(signed(events.len() as u64))
        .execute(&mut *tx)
        .await?;
        insert_events(&mut tx, run_id, 0, events).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Appends events to the run's log (one transaction) and renews the lease.
    ///
    /// # Errors
    ///
    /// [`StoreError::Fenced`] when the lease was lost (nothing written); database failures.
    pub async fn append(&self, lease: &Lease, events: &[String]) -> Result<u64, StoreError> {
        self.write(lease, events, None).await
    }

    /// Renews the lease without writing events.
    ///
    /// # Errors
    ///
    /// As [`append`](Self::append).
    pub async fn renew(&self, lease: &Lease) -> Result<(), StoreError> {
        self.write(lease, &[], None).await.map(|_| ())
    }

    /// Appends the run's last events and ends it: its status, the thread's conversation and
    /// state, its interrupts (pending), in one transaction.
    ///
    /// # Errors
    ///
    /// As [`append`](Self::append).
    pub async fn finish(
        &self,
        lease: &Lease,
        events: &[String],
        end: &RunEnd,
    ) -> Result<u64, StoreError> {
        self.write(lease, events, Some(end)).await
    }

    async fn write(
        &self,
        lease: &Lease,
        events: &[String],
        end: Option<&RunEnd>,
    ) -> Result<u64, StoreError> {
        let now = SystemTime::now();
        let first = lease.last_seq.load(Ordering::Acquire);
        let last = first + events.len() as u64;
        let status = end.map_or(RunStatus::Running, |end| end.status);
        let mut tx = self.0.writer.begin().await?;
        let fenced = sqlx::query(
            "UPDATE runs SET status = $1, last_seq = $2, lease_expires_at = $3, updated_at = $4 \
             WHERE run_id = $5 AND owner = $6 AND status = 'running' AND last_seq = $7",
        )
        .bind(status.as_str())
        .bind(signed(last))
        .bind(millis(now + lease.length))
        .bind(millis(now))
        .bind(lease.run_id.as_str())
        .bind(lease.owner.as_str())
        .bind(signed(first))
        .execute(&mut *tx)
        .await?;
        if fenced.rows_affected() == 0 {
            return Err(StoreError::Fenced(lease.run_id.clone()));
        }
        insert_events(&mut tx, &lease.run_id, first, events).await?;
        if let Some(end) = end {
            if let Some(messages) = &end.messages {
                let messages = serde_json::to_string(messages)
                    .map_err(|e| StoreError::corrupt(format!("conversation ({e})")))?;
                save_thread(
                    &mut tx,
                    &lease.thread_id,
                    &messages,
                    end.state.as_ref(),
                    now,
                )
                .await?;
            }
            for interrupt in &end.interrupts {
                sqlx::query(
                    "INSERT INTO interrupts (interrupt_id, thread_id, run_id, tool_call_id, \
                     tool_name, arguments, args_hash, created_at, expires_at, status) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending')",
                )
                .bind(interrupt.id.as_str())
                .bind(lease.thread_id.as_str())
                .bind(lease.run_id.as_str())
                .bind(interrupt.tool_call_id.as_str())
                .bind(interrupt.tool_name.as_str())
                .bind(interrupt.arguments.to_string())
                .bind(args_hash(&interrupt.arguments))
                .bind(millis(now))
                .bind(millis(interrupt.expires_at))
                .execute(&mut *tx)
                .await?;
            }
        }
        if !events.is_empty() {
            self.notify(&mut tx, &lease.run_id, last).await?;
        }
        tx.commit().await?;
        lease.last_seq.store(last, Ordering::Release);
        if !events.is_empty() || end.is_some() {
            self.0.wakeups.wake(&lease.run_id);
        }
        Ok(last)
    }

    /// Tells other instances (PostgreSQL) that `run_id`'s log reaches `last`: delivered at
    /// commit, to every instance listening.
    async fn notify(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        run_id: &RunId,
        last: u64,
    ) -> Result<(), StoreError> {
        if self.0.backend == Backend::Postgres {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(format!("{last}:{run_id}"))
                .execute(&mut **tx)
                .await?;
        }
        Ok(())
    }

    /// The events of `run_id` after sequence number `after`, at most `limit`, in order.
    ///
    /// # Errors
    ///
    /// When the store fails.
    pub async fn events_after(
        &self,
        run_id: &RunId,
        after: u64,
        limit: u32,
    ) -> Result<Vec<LoggedEvent>, StoreError> {
        sqlx::query(
            "SELECT seq, event FROM run_events WHERE run_id = $1 AND seq > $2 \
             ORDER BY seq LIMIT $3",
        )
        .bind(run_id.as_str())
        .bind(signed(after))
        .bind(i64::from(limit))
        .fetch_all(&self.0.reader)
        .await?
        .iter()
        .map(|row| {
            Ok(LoggedEvent {
                seq: seq(number(row, "seq")?),
                json: text(row, "event")?,
            })
        })
        .collect()
    }

    /// The run, if it exists.
    ///
    /// # Errors
    ///
    /// When the store fails.
    pub async fn run(&self, run_id: &RunId) -> Result<Option<RunRecord>, StoreError> {
        sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1"))
            .bind(run_id.as_str())
            .fetch_optional(&self.0.reader)
            .await?
            .as_ref()
            .map(run_record)
            .transpose()
    }

    /// The thread's conversation, state and runs, if it has any.
    ///
    /// # Errors
    ///
    /// When the store fails.
    pub async fn thread(&self, thread_id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        let runs = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE thread_id = $1 ORDER BY created_at, run_id"
        ))
        .bind(thread_id.as_str())
        .fetch_all(&self.0.reader)
        .await?
        .iter()
        .map(run_record)
        .collect::<Result<Vec<_>, _>>()?;
        let saved = sqlx::query("SELECT messages, state FROM threads WHERE thread_id = $1")
            .bind(thread_id.as_str())
            .fetch_optional(&self.0.reader)
            .await?;
        if saved.is_none() && runs.is_empty() {
            return Ok(None);
        }
        let (messages, state) = match saved {
            Some(row) => {
                let state: Option<String> = row.try_get("state")?;
                (
                    json(&text(&row, "messages")?, "conversation")?,
                    state.map(|s| json(&s, "state")).transpose()?,
                )
            }
            None => (Vec::new(), None),
        };
        Ok(Some(ThreadRecord {
            thread_id: thread_id.clone(),
            messages,
            state,
            runs,
        }))
    }

    /// Keeps `messages` and `state` as the thread's conversation (for agents that do not go
    /// through runs, such as an ACP session).
    ///
    /// # Errors
    ///
    /// When the store fails.
    pub async fn save_thread(
        &self,
        thread_id: &ThreadId,
        messages: &[crate::message::Message],
        state: Option<&Value>,
    ) -> Result<(), StoreError> {
        let messages = serde_json::to_string(messages)
            .map_err(|e| StoreError::corrupt(format!("conversation ({e})")))?;
        let mut tx = self.0.writer.begin().await?;
        save_thread(&mut tx, thread_id, &messages, state, SystemTime::now()).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Interrupts, oldest first: all, or those with `status`.
    ///
    /// # Errors
    ///
    /// When the store fails.
    pub async fn interrupts(
        &self,
        status: Option<InterruptStatus>,
    ) -> Result<Vec<InterruptRecord>, StoreError> {
        let query = match status {
            Some(_) => format!(
                "SELECT {INTERRUPT_COLUMNS} FROM interrupts WHERE status = $1 \
                 ORDER BY created_at, interrupt_id"
            ),
            None => format!(
                "SELECT {INTERRUPT_COLUMNS} FROM interrupts ORDER BY created_at, interrupt_id"
            ),
        };
        let mut query = sqlx::query(&query);
        if let Some(status) = status {
            query = query.bind(status.as_str());
        }
        query
            .fetch_all(&self.0.reader)
            .await?
            .iter()
            .map(interrupt_record)
            .collect()
    }

    /// The interrupts of a thread that wait for a decision.
    ///
    /// # Errors
    ///
    /// When the store fails.
    pub async fn pending_interrupts(
        &self,
        thread_id: &ThreadId,
    ) -> Result<Vec<InterruptRecord>, StoreError> {
        sqlx::query(&format!(
            "SELECT {INTERRUPT_COLUMNS} FROM interrupts WHERE thread_id = $1 \
             AND status = 'pending' ORDER BY created_at, interrupt_id"
        ))
        .bind(thread_id.as_str())
        .fetch_all(&self.0.reader)
        .await?
        .iter()
        .map(interrupt_record)
        .collect()
    }

    /// One interrupt.
    ///
    /// # Errors
    ///
    /// When the store fails.
    pub async fn interrupt(&self, id: &InterruptId) -> Result<Option<InterruptRecord>, StoreError> {
        sqlx::query(&format!(
            "SELECT {INTERRUPT_COLUMNS} FROM interrupts WHERE interrupt_id = $1"
        ))
        .bind(id.as_str())
        .fetch_optional(&self.0.reader)
        .await?
        .as_ref()
        .map(interrupt_record)
        .transpose()
    }

    /// Ends every run whose lease expired (its owner died) with the event `terminal(run)` at
    /// the end of its log and status failed; returns them. Interrupts are not touched. Safe to
    /// call from several instances at once: each run is closed once.
    ///
    /// # Errors
    ///
    /// When the store fails.
    pub async fn close_expired(
        &self,
        terminal: impl Fn(&RunRecord) -> String,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let now = millis(SystemTime::now());
        let expired = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE status = 'running' AND lease_expires_at <= $1"
        ))
        .bind(now)
        .fetch_all(&self.0.writer)
        .await?
        .iter()
        .map(run_record)
        .collect::<Result<Vec<_>, _>>()?;
        let mut closed = Vec::new();
        for run in expired {
            let mut tx = self.0.writer.begin().await?;
            let last = run.last_seq + 1;
            let taken = sqlx::query(
                "UPDATE runs SET status = 'failed', last_seq = $1, updated_at = $2 \
                 WHERE run_id = $3 AND status = 'running' AND last_seq = $4 \
                 AND lease_expires_at <= $2",
            )
            .bind(signed(last))
            .bind(now)
            .bind(run.run_id.as_str())
            .bind(signed(run.last_seq))
            .execute(&mut *tx)
            .await?;
            if taken.rows_affected() == 0 {
                continue;
            }
            insert_events(&mut tx, &run.run_id, run.last_seq, &[terminal(&run)]).await?;
            self.notify(&mut tx, &run.run_id, last).await?;
            tx.commit().await?;
            self.0.wakeups.wake(&run.run_id);
            closed.push(RunRecord {
                status: RunStatus::Failed,
                last_seq: last,
                ..run
            });
        }
        Ok(closed)
    }
}

/// The most rows one `INSERT` carries: well under every engine's parameter limit.
const MAX_ROWS: usize = 256;

/// `INSERT INTO run_events … VALUES` with `rows` rows.
fn insert_sql(rows: usize) -> String {
    let mut sql = String::from("INSERT INTO run_events (run_id, seq, event) VALUES ");
    for i in 0..rows {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!("($1, ${}, ${})", 2 * i + 2, 2 * i + 3));
    }
    sql
}

/// The statements for 1, 2, 4 … [`MAX_ROWS`] rows: a batch of any size is written with a few
/// of them, so the connection prepares each once instead of one statement per batch size.
static INSERTS: LazyLock<Vec<String>> = LazyLock::new(|| {
    std::iter::successors(Some(1), |rows| (rows * 2 <= MAX_ROWS).then_some(rows * 2))
        .map(insert_sql)
        .collect()
});

async fn insert_events(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &RunId,
    after: u64,
    events: &[String],
) -> Result<(), StoreError> {
    let mut rest = events;
    let mut seq = after;
    while !rest.is_empty() {
        // The largest statement that fits what is left.
        let index = (usize::BITS - 1 - rest.len().min(MAX_ROWS).leading_zeros()) as usize;
        let (chunk, tail) = rest.split_at(1 << index);
        let mut query = sqlx::query(&INSERTS[index]).bind(run_id.as_str());
        for event in chunk {
            seq += 1;
            query = query.bind(signed(seq)).bind(event.as_str());
        }
        query.execute(&mut **tx).await?;
        rest = tail;
    }
    Ok(())
}

async fn save_thread(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    thread_id: &ThreadId,
    messages: &str,
    state: Option<&Value>,
    now: SystemTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO threads (thread_id, messages, state, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (thread_id) DO UPDATE SET messages = excluded.messages, \
         state = excluded.state, updated_at = excluded.updated_at",
    )
    .bind(thread_id.as_str())
    .bind(messages)
    .bind(state.map(Value::to_string))
    .bind(millis(now))
    .execute(&mut **tx)
    .await?;
    Ok(())
}
