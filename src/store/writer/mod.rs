//! The writer (a task for PostgreSQL, a thread for SQLite): every write of the store, from every run, committed in groups.
//!
//! Jobs queue while a group commits; the next group takes all of them (up to [`MAX_GROUP`]) into
//! one transaction: one commit, one fsync, for many runs. A job whose checks refuse it (a start
//! on a busy thread, say) is rolled back alone, to a savepoint; a failing group fails all its
//! jobs, which then fail their runs.

use std::{
    sync::{Arc, LazyLock, atomic::Ordering},
    time::{Duration, SystemTime},
};

use futures_util::FutureExt;
use serde_json::Value;
use sqlx::AnyPool;
use tokio::sync::{mpsc, oneshot};

mod batch;
mod values;

use values::Values;

use super::{
    Backend, CANCEL, CHANNEL, COMMIT_TIMEOUT, CommitLevel, Deleted, LISTED, Observers, RELEASED,
    THREAD, calls,
    chunk::{self, Chunk},
    conn::{Arg, Columns, Conn, DbError, Row, Sqlite},
    ledger, outbox,
    rows::{INTERRUPT_COLUMNS, decision_text, interrupt_record, millis, number, seq, signed, text},
    schedules,
};
use crate::{
    id::{MessageId, RunId, ThreadId},
    message::Message,
    model::{
        budget::{Accounts, Balance, Spent, Step},
        rate_limit::MinuteLimits,
    },
    runs::{
        Claimed, ForkedFrom, InterruptRecord, Lease, LogError, LoggedEvent, LostRun, Recovered,
        RunEnd, RunStatus, SavedThread, Settle, Start, StartError, ThreadChange, args_hash,
        rules::{self, Begins, ExistingRun, Thread, ThreadView},
    },
};

/// The most bytes of one notification's payload (PostgreSQL's limit is 8000).
const NOTIFY_BYTES: usize = 7900;

/// A new run, running (see [`Writer::insert_run`] for its parameters).
const INSERT_RUN: &str = "INSERT INTO runs (run_id, thread_id, status, owner, lease_expires_at, \
    last_seq, created_at, updated_at, request_hash, request, segment_start, attempts, principal) \
    VALUES ($1, $2, 'running', $3, 0, 0, $4, $4, $5, $6, 0, 1, $7) ON CONFLICT DO NOTHING";

/// The most jobs one transaction carries.
const MAX_GROUP: usize = 256;

/// How many jobs may wait for the writer before callers wait to queue theirs.
const QUEUE: usize = 1024;

/// One write, with where its answer goes.
pub(super) enum Job {
    Start {
        start: Start,
        reply: oneshot::Sender<Result<Lease, StartError>>,
    },
    Write {
        lease: Lease,
        events: Vec<LoggedEvent>,
        end: Option<RunEnd>,
        reply: oneshot::Sender<Result<(), LogError>>,
    },
    Refuse {
        start: Start,
        events: Vec<LoggedEvent>,
        reply: oneshot::Sender<Result<(), StartError>>,
    },
    SaveThread {
        thread: ThreadId,
        principal: Option<String>,
        messages: Vec<Message>,
        state: Option<Value>,
        workspace: Option<String>,
        forked_from: Option<ForkedFrom>,
        reply: oneshot::Sender<Result<(), LogError>>,
    },
    Heartbeat {
        lease: Duration,
        reply: oneshot::Sender<Result<(), LogError>>,
    },
    /// A write that changes nothing, committed as any other: whether the log takes writes.
    Probe {
        reply: oneshot::Sender<Result<(), LogError>>,
    },
    RequestCancel {
        run: RunId,
        reply: oneshot::Sender<Result<bool, LogError>>,
    },
    Followed {
        runs: Vec<RunId>,
        lease: Duration,
        reply: oneshot::Sender<Result<(), LogError>>,
    },
    DeleteThread {
        thread: ThreadId,
        reply: oneshot::Sender<Result<Deleted, LogError>>,
    },
    /// Names, renames or archives a thread: whether there is such a thread.
    ChangeThread {
        thread: ThreadId,
        change: ThreadChange,
        reply: oneshot::Sender<Result<bool, LogError>>,
    },
    /// Deletes the runs (or threads) of `ids` that are still prunable at `before` (ms).
    Prune {
        what: Prunable,
        ids: Vec<String>,
        before: i64,
        reply: oneshot::Sender<Result<u64, LogError>>,
    },
    /// This instance gives up its running runs: its heartbeat expires now.
    Release {
        reply: oneshot::Sender<Result<(), LogError>>,
    },
    /// Continues a lost run here (no end), or ends it so.
    Recover {
        lost: LostRun,
        events: Vec<LoggedEvent>,
        end: Option<RunEnd>,
        reply: oneshot::Sender<Result<Option<Recovered>, LogError>>,
    },
    /// Claims notices that are due, for a while.
    ClaimNotices {
        max: usize,
        hold: Duration,
        reply: oneshot::Sender<Result<Vec<Claimed>, LogError>>,
    },
    /// A schedule kept, moved on or forgotten: whether one changed.
    Schedule {
        change: schedules::Change,
        reply: oneshot::Sender<Result<bool, LogError>>,
    },
    /// What became of an attempt at a notice.
    SettleNotice {
        id: String,
        settle: Settle,
        reply: oneshot::Sender<Result<(), LogError>>,
    },
    /// Counts a call to a model if its last minute leaves room: else how long until it may.
    AdmitCall {
        model: String,
        limits: MinuteLimits,
        reply: oneshot::Sender<Result<Option<Duration>, LogError>>,
    },
    /// Counts the tokens a call to a model used.
    UsedTokens {
        model: String,
        tokens: u64,
        reply: oneshot::Sender<Result<(), LogError>>,
    },
    /// Charges a model step's spending to its accounts, once: the balance after.
    Charge {
        step: Step,
        accounts: Accounts,
        spent: Spent,
        reply: oneshot::Sender<Result<Balance, LogError>>,
    },
}

/// What the writer knows.
struct Writer {
    backend: Backend,
    owner: String,
    /// Told how long each commit took.
    observers: Arc<Observers>,
    /// The level it commits at.
    level: Arc<CommitLevel>,
}

/// Where the writer writes.
pub(super) enum Target {
    /// A PostgreSQL pool of one connection; the writer is a task.
    Postgres(AnyPool),
    /// A SQLite database; the writer is a thread with a connection of its own.
    Sqlite(rusqlite::Connection),
}

/// Starts the writer of `target`; it ends when every sender is gone.
pub(super) fn spawn(
    target: Target,
    owner: String,
    observers: Arc<Observers>,
    level: Arc<CommitLevel>,
) -> std::io::Result<mpsc::Sender<Job>> {
    let (jobs, mut queue) = mpsc::channel(QUEUE);
    match target {
        Target::Postgres(pool) => {
            let writer = Writer {
                backend: Backend::Postgres,
                owner,
                observers,
                level,
            };
            tokio::spawn(async move {
                let mut group = Vec::with_capacity(MAX_GROUP);
                while queue.recv_many(&mut group, MAX_GROUP).await > 0 {
                    writer
                        .commit_postgres(&pool, std::mem::take(&mut group))
                        .await;
                }
            });
        }
        Target::Sqlite(conn) => {
            let writer = Writer {
                backend: Backend::Sqlite,
                owner,
                observers,
                level,
            };
            let mut conn = Sqlite::new(conn);
            // The level the connection commits at (`synchronous=FULL` as opened).
            let mut relaxed = false;
            std::thread::Builder::new()
                .name("agent-tower-sqlite-writer".into())
                .spawn(move || {
                    let mut group = Vec::with_capacity(MAX_GROUP);
                    while let Some(job) = queue.blocking_recv() {
                        group.push(job);
                        while group.len() < MAX_GROUP {
                            match queue.try_recv() {
                                Ok(job) => group.push(job),
                                Err(_) => break,
                            }
                        }
                        if writer.level.relaxed() != relaxed {
                            relaxed = !relaxed;
                            let pragma = if relaxed { "NORMAL" } else { "FULL" };
                            let set = format!("PRAGMA synchronous = {pragma}");
                            if let Err(error) = conn.batch(&set) {
                                relaxed = !relaxed;
                                tracing::warn!(%error, "the store's durability could not change");
                            }
                        }
                        writer.commit_sqlite(&mut conn, std::mem::take(&mut group));
                        writer.level.unfolded.store(true, Ordering::Relaxed);
                    }
                })?;
        }
    }
    Ok(jobs)
}

/// A job done inside the group's transaction, waiting for the commit to answer.
enum Done {
    Start(
        oneshot::Sender<Result<Lease, StartError>>,
        Result<Lease, StartError>,
    ),
    Unit(oneshot::Sender<Result<(), LogError>>, Result<(), LogError>),
    Flag(
        oneshot::Sender<Result<bool, LogError>>,
        Result<bool, LogError>,
    ),
    Deleted(
        oneshot::Sender<Result<Deleted, LogError>>,
        Result<Deleted, LogError>,
    ),
    Count(
        oneshot::Sender<Result<u64, LogError>>,
        Result<u64, LogError>,
    ),
    Refuse(
        oneshot::Sender<Result<(), StartError>>,
        Result<(), StartError>,
    ),
    Recover(
        oneshot::Sender<Result<Option<Recovered>, LogError>>,
        Result<Option<Recovered>, LogError>,
    ),
    Balance(
        oneshot::Sender<Result<Balance, LogError>>,
        Result<Balance, LogError>,
    ),
    Wait(
        oneshot::Sender<Result<Option<Duration>, LogError>>,
        Result<Option<Duration>, LogError>,
    ),
    Claimed(
        oneshot::Sender<Result<Vec<Claimed>, LogError>>,
        Result<Vec<Claimed>, LogError>,
    ),
}

impl Done {
    /// Sends the answer; a job that succeeded inside a transaction that did not commit gets
    /// `failed` instead.
    fn answer(self, failed: Option<&str>) {
        let fail = |why: &str| LogError::unavailable(why.to_owned());
        // A caller that went away does not care: sending may fail.
        match (self, failed) {
            (Self::Start(reply, Ok(_)), Some(why)) => {
                let _ = reply.send(Err(StartError::Log(fail(why))));
            }
            (Self::Start(reply, result), _) => {
                let _ = reply.send(result);
            }
            (Self::Unit(reply, Ok(())), Some(why)) => {
                let _ = reply.send(Err(fail(why)));
            }
            (Self::Unit(reply, result), _) => {
                let _ = reply.send(result);
            }
            (Self::Flag(reply, Ok(_)), Some(why)) => {
                let _ = reply.send(Err(fail(why)));
            }
            (Self::Flag(reply, result), _) => {
                let _ = reply.send(result);
            }
            (Self::Deleted(reply, Ok(_)), Some(why)) => {
                let _ = reply.send(Err(fail(why)));
            }
            (Self::Deleted(reply, result), _) => {
                let _ = reply.send(result);
            }
            (Self::Count(reply, Ok(_)), Some(why)) => {
                let _ = reply.send(Err(fail(why)));
            }
            (Self::Count(reply, result), _) => {
                let _ = reply.send(result);
            }
            (Self::Refuse(reply, Ok(())), Some(why)) => {
                let _ = reply.send(Err(StartError::Log(fail(why))));
            }
            (Self::Refuse(reply, result), _) => {
                let _ = reply.send(result);
            }
            (Self::Recover(reply, Ok(_)), Some(why)) => {
                let _ = reply.send(Err(fail(why)));
            }
            (Self::Recover(reply, result), _) => {
                let _ = reply.send(result);
            }
            (Self::Balance(reply, Ok(_)), Some(why)) => {
                let _ = reply.send(Err(fail(why)));
            }
            (Self::Balance(reply, result), _) => {
                let _ = reply.send(result);
            }
            (Self::Wait(reply, Ok(_)), Some(why)) => {
                let _ = reply.send(Err(fail(why)));
            }
            (Self::Wait(reply, result), _) => {
                let _ = reply.send(result);
            }
            (Self::Claimed(reply, Ok(_)), Some(why)) => {
                let _ = reply.send(Err(fail(why)));
            }
            (Self::Claimed(reply, result), _) => {
                let _ = reply.send(result);
            }
        }
    }

    fn succeeded(&self) -> bool {
        match self {
            Self::Start(_, r) => r.is_ok(),
            Self::Unit(_, r) => r.is_ok(),
            Self::Flag(_, r) => r.is_ok(),
            Self::Deleted(_, r) => r.is_ok(),
            Self::Count(_, r) => r.is_ok(),
            Self::Refuse(_, r) => r.is_ok(),
            Self::Recover(_, r) => r.is_ok(),
            Self::Balance(_, r) => r.is_ok(),
            Self::Wait(_, r) => r.is_ok(),
            Self::Claimed(_, r) => r.is_ok(),
        }
    }
}

/// What a group's jobs leave for its end: their events, inserted together, and what other
/// instances are told at commit.
#[derive(Default)]
struct Effects {
    /// The events of every write of the group.
    chunks: Vec<Chunk>,
    /// The runs whose logs changed, with their last sequence number.
    changed: Vec<(RunId, u64)>,
    /// The runs whose cancellation was asked for, for the instances that drive them.
    cancels: Vec<RunId>,
    /// The threads a run started on.
    threads: Vec<ThreadId>,
    /// The threads whose listing changed, with whom each belongs to.
    listed: Vec<(ThreadId, Option<String>)>,
}

impl Effects {
    /// `events` of `lease`'s run were written; the run `ended` with them (its thread was kept).
    fn logged(&mut self, lease: &Lease, events: &[LoggedEvent], ended: bool) {
        let run = &lease.run_id;
        let last = events.last().map_or(0, |e| e.seq);
        self.changed.push((run.clone(), last));
        chunk::cut(run, events, &mut self.chunks);
        if ended {
            let listed = (lease.thread_id.clone(), lease.principal.clone());
            self.listed.push(listed);
        }
    }
}

impl Writer {
    /// Commits `group` in one transaction of PostgreSQL and answers each job.
    async fn commit_postgres(&self, pool: &AnyPool, group: Vec<Job>) {
        let started = std::time::Instant::now();
        let mut done = Vec::with_capacity(group.len());
        let committed = tokio::time::timeout(COMMIT_TIMEOUT, async {
            let mut tx = pool.begin().await?;
            if self.level.relaxed() {
                // This transaction's commit is answered before the server flushes it.
                sqlx::query("SET LOCAL synchronous_commit = off")
                    .execute(&mut *tx)
                    .await?;
            }
            self.run(&mut tx, group, &mut done).await?;
            if done.iter().any(Done::succeeded) {
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            Ok::<_, DbError>(())
        })
        .await;
        let failed = match committed {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(format!("the store failed: {error}")),
            Err(_) => Some(format!(
                "the store did not commit within {} s",
                COMMIT_TIMEOUT.as_secs()
            )),
        };
        self.observers.committed(started.elapsed());
        answer(done, failed);
    }

    /// Commits `group` in one transaction of SQLite and answers each job. The connection's
    /// answers are ready at once: the jobs' futures complete when first polled.
    fn commit_sqlite(&self, conn: &mut Sqlite, group: Vec<Job>) {
        let started = std::time::Instant::now();
        let mut done = Vec::with_capacity(group.len());
        let committed = conn.batch("BEGIN IMMEDIATE").and_then(|()| {
            let ran = self
                .run(conn, group, &mut done)
                .now_or_never()
                .unwrap_or_else(|| unreachable!("SQLite's answers are ready at once"));
            let end = if ran.is_ok() && done.iter().any(Done::succeeded) {
                "COMMIT"
            } else {
                "ROLLBACK"
            };
            ran.and(conn.batch(end))
        });
        let failed = committed.err().map(|error| {
            // A transaction left open by a failed commit is rolled back; failing again changes
            // nothing.
            let _ = conn.batch("ROLLBACK");
            format!("the store failed: {error}")
        });
        self.observers.committed(started.elapsed());
        answer(done, failed);
    }

    /// Runs `group` in `tx`'s transaction, each job's answer in `done`; the caller commits.
    async fn run(
        &self,
        tx: &mut impl Conn,
        group: Vec<Job>,
        done: &mut Vec<Done>,
    ) -> Result<(), DbError> {
        let now = SystemTime::now();
        let mut effects = Effects::default();
        let group = match self.backend {
            Backend::Postgres => self.batch(tx, group, now, done, &mut effects).await?,
            Backend::Sqlite => group,
        };
        for job in group {
            let (answer, error) = match job {
                Job::Start { start, reply } => {
                    // PostgreSQL's plain starts were the batch's: those left plan with the view.
                    let plain = match self.backend {
                        Backend::Sqlite => self.start_plain(tx, &start, now).await,
                        Backend::Postgres => Ok(None),
                    };
                    let started = match plain {
                        Ok(Some(lease)) => Ok(lease),
                        Ok(None) => self.start(tx, &start, now).await,
                        Err(error) => Err(error),
                    };
                    if started.is_ok() {
                        effects.threads.push(start.thread_id.clone());
                    }
                    let (result, error) = split(started);
                    (Done::Start(reply, result), error)
                }
                Job::Refuse {
                    start,
                    events,
                    reply,
                } => {
                    let (result, error) = split(self.refuse(tx, &start, &events, now).await);
                    (Done::Refuse(reply, result), error)
                }
                Job::Write {
                    lease,
                    events,
                    end,
                    reply,
                } => {
                    let written = self.write(tx, &lease, &events, end.as_ref(), now).await;
                    if written.is_ok() {
                        effects.logged(&lease, &events, end.is_some());
                    }
                    let (result, error) = split(written);
                    (Done::Unit(reply, result.map_err(log_error)), error)
                }
                Job::SaveThread {
                    thread,
                    principal,
                    messages,
                    state,
                    workspace,
                    forked_from,
                    reply,
                } => {
                    let saved = SavedThread::new(&thread, &messages)
                        .principal(principal.as_deref())
                        .state(state.as_ref())
                        .workspace(workspace.as_deref())
                        .forked_from(forked_from.as_ref());
                    let saved = save_thread(tx, &saved, now).await;
                    let (result, error) = split(saved);
                    (Done::Unit(reply, result.map_err(log_error)), error)
                }
                Job::RequestCancel { run, reply } => {
                    let asked = tx
                        .execute(
                            "UPDATE runs SET cancel_requested = 1 \
                             WHERE run_id = $1 AND status = 'running'",
                            &[Arg::from(run.as_str())],
                        )
                        .await
                        .map(|rows| rows > 0)
                        .map_err(Failure::Store);
                    if matches!(asked, Ok(true)) {
                        effects.cancels.push(run);
                    }
                    let (result, error) = split(asked);
                    (Done::Flag(reply, result.map_err(log_error)), error)
                }
                Job::Followed { runs, lease, reply } => {
                    let (result, error) = split(followed(tx, &runs, now + lease).await);
                    (Done::Unit(reply, result.map_err(log_error)), error)
                }
                Job::DeleteThread { thread, reply } => {
                    let deleted = delete_thread(tx, &thread).await;
                    if let Ok((Deleted::Deleted, principal)) = &deleted {
                        effects.listed.push((thread.clone(), principal.clone()));
                    }
                    let (result, error) = split(deleted.map(|(deleted, _)| deleted));
                    (Done::Deleted(reply, result.map_err(log_error)), error)
                }
                Job::ChangeThread {
                    thread,
                    change,
                    reply,
                } => {
                    let changed = change_thread(tx, &thread, &change).await;
                    if let Ok(Some(principal)) = &changed {
                        effects.listed.push((thread.clone(), principal.clone()));
                    }
                    let (result, error) = split(changed.map(|changed| changed.is_some()));
                    (Done::Flag(reply, result.map_err(log_error)), error)
                }
                Job::Prune {
                    what,
                    ids,
                    before,
                    reply,
                } => {
                    let (result, error) = split(prune(tx, what, &ids, before).await);
                    (Done::Count(reply, result.map_err(log_error)), error)
                }
                Job::Probe { reply } => {
                    let probed = tx
                        .execute(
                            "UPDATE instances SET expires_at = expires_at WHERE owner = $1",
                            &[Arg::from(&self.owner)],
                        )
                        .await
                        .map(|_| ())
                        .map_err(Failure::Store);
                    let (result, error) = split(probed);
                    (Done::Unit(reply, result.map_err(log_error)), error)
                }
                Job::Release { reply } => {
                    let released = self.release(tx).await.map_err(Failure::Store);
                    let (result, error) = split(released);
                    (Done::Unit(reply, result.map_err(log_error)), error)
                }
                Job::Heartbeat { lease, reply } => {
                    let (result, error) = split(self.heartbeat(tx, lease, now).await);
                    (Done::Unit(reply, result.map_err(log_error)), error)
                }
                Job::Recover {
                    lost,
                    events,
                    end,
                    reply,
                } => {
                    let recovered = self.recover(tx, &lost, &events, end.as_ref(), now).await;
                    if let Ok(Some(recovered)) = &recovered
                        && let Some(last) = recovered.events.last()
                    {
                        effects.changed.push((lost.record.run_id.clone(), last.seq));
                        if recovered.lease.is_some() {
                            effects.threads.push(lost.record.thread_id.clone());
                        }
                    }
                    let (result, error) = split(recovered);
                    (Done::Recover(reply, result.map_err(log_error)), error)
                }
                Job::AdmitCall {
                    model,
                    limits,
                    reply,
                } => {
                    let (result, error) = split(calls::admit(tx, &model, limits, now).await);
                    (Done::Wait(reply, result.map_err(log_error)), error)
                }
                Job::UsedTokens {
                    model,
                    tokens,
                    reply,
                } => {
                    let used = calls::used(tx, &model, tokens, now).await;
                    let (result, error) = split(used.map_err(Failure::Store));
                    (Done::Unit(reply, result.map_err(log_error)), error)
                }
                Job::Charge {
                    step,
                    accounts,
                    spent,
                    reply,
                } => {
                    let charged = ledger::charge(tx, &step, &accounts, spent).await;
                    let (result, error) = split(charged);
                    (Done::Balance(reply, result.map_err(log_error)), error)
                }
                Job::ClaimNotices { max, hold, reply } => {
                    let (result, error) = split(outbox::claim(tx, max, hold, now).await);
                    (Done::Claimed(reply, result.map_err(log_error)), error)
                }
                Job::Schedule { change, reply } => {
                    let changed = schedules::change(tx, &change, now).await;
                    let (result, error) = split(changed.map_err(Failure::Store));
                    (Done::Flag(reply, result.map_err(log_error)), error)
                }
                Job::SettleNotice { id, settle, reply } => {
                    let settled = outbox::settle(tx, &id, &settle, now).await;
                    let (result, error) = split(settled.map_err(Failure::Store));
                    (Done::Unit(reply, result.map_err(log_error)), error)
                }
            };
            done.push(answer);
            if let Some(error) = error {
                return Err(error);
            }
        }
        insert_chunks(tx, &effects.chunks).await?;
        self.notify(tx, &effects).await
    }

    /// Inserts `start`'s run, running, belonging to `principal`, with `sql` (parameters: run,
    /// thread, owner, time, request hash, request, principal); the rows written.
    async fn insert_run(
        &self,
        tx: &mut impl Conn,
        sql: &str,
        start: &Start,
        principal: Option<&str>,
        now: SystemTime,
    ) -> Result<u64, DbError> {
        let request = start.request.as_ref().map(Value::to_string);
        tx.execute(
            sql,
            &[
                Arg::from(start.run_id.as_str()),
                Arg::from(start.thread_id.as_str()),
                Arg::from(&self.owner),
                Arg::from(millis(now)),
                Arg::from(&start.request_hash),
                Arg::from(request.as_deref()),
                Arg::from(principal),
            ],
        )
        .await
    }

    /// SQLite's common start, in one statement and no savepoint: a new run with nothing to
    /// resume, on a thread with no active run, no pending interrupt and no principal but the
    /// caller, which is what the rules plan for the empty view; the insert holds only when the
    /// log's view is that empty one. `None` when it is not (nothing is written):
    /// [`start`](Self::start) then plans with the view. (PostgreSQL's plain starts are a group's
    /// batch, see [`batch`].)
    async fn start_plain(
        &self,
        tx: &mut impl Conn,
        start: &Start,
        now: SystemTime,
    ) -> Result<Option<Lease>, Failure> {
        if !start.resume.is_empty() {
            return Ok(None);
        }
        let plan = rules::plan(start, &ThreadView::default(), now).map_err(Failure::Refused)?;
        // The guards of the empty view: no run under this id and no active run on the thread
        // (the primary key and the unique index of running runs: `ON CONFLICT DO NOTHING`), no
        // pending interrupt, no run or conversation of the thread that is not the caller's (the
        // runs of a thread all belong to its principal: one of them tells). This connection is
        // the only writer: those checks can be part of the insert.
        let sql = "INSERT INTO runs (run_id, thread_id, status, owner, lease_expires_at, last_seq, \
             created_at, updated_at, request_hash, request, segment_start, attempts, principal) \
             SELECT $1, $2, 'running', $3, 0, 0, $4, $4, $5, $6, 0, 1, $7 \
             WHERE NOT EXISTS \
             (SELECT 1 FROM interrupts WHERE thread_id = $2 AND status = 'pending') \
             AND NOT EXISTS (SELECT 1 FROM (SELECT principal FROM runs WHERE thread_id = $2 \
             LIMIT 1) WHERE principal IS NOT $7) \
             AND NOT EXISTS (SELECT 1 FROM threads WHERE thread_id = $2 AND principal IS NOT $7) \
             ON CONFLICT DO NOTHING";
        let inserted = self
            .insert_run(tx, sql, start, plan.principal.as_deref(), now)
            .await;
        match inserted {
            Ok(1) => Ok(Some(self.lease(tx, start, &plan, now).await?)),
            Ok(_) => Ok(None),
            Err(e) if e.is_unique_violation() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The lease of the run `start` began under `plan`, the thread made with its first turn if
    /// the run is its first (see [`Start::first_turn`]).
    async fn lease(
        &self,
        tx: &mut impl Conn,
        start: &Start,
        plan: &rules::Plan,
        now: SystemTime,
    ) -> Result<Lease, DbError> {
        let mut lease = plan.lease(start);
        let begins_new = plan.begins == Begins::New;
        let Some(turn) = start.first_turn.as_ref().filter(|_| begins_new) else {
            return Ok(lease);
        };
        let other = tx
            .fetch(
                "SELECT 1 AS other FROM runs WHERE thread_id = $1 AND run_id <> $2 \
                 UNION ALL SELECT 1 FROM threads WHERE thread_id = $1 LIMIT 1",
                &[
                    Arg::from(start.thread_id.as_str()),
                    Arg::from(start.run_id.as_str()),
                ],
            )
            .await?;
        let saved = SavedThread::new(&start.thread_id, &turn.messages)
            .principal(lease.principal.as_deref())
            .state(turn.state.as_ref());
        // A conversation that cannot be kept as text is left to the run (which says why).
        if let (None, Ok(row)) = (first(other), ThreadRow::new(saved)) {
            THREADS.execute(tx, &[], &row.args(now)).await?;
            lease.made_thread = true;
        }
        Ok(lease)
    }

    /// What the rules read of the log for `start`.
    async fn view(&self, tx: &mut impl Conn, start: &Start) -> Result<ThreadView, Failure> {
        let run = first(
            tx.fetch(
                "SELECT status, principal, request_hash, segment_start, last_seq FROM runs \
                 WHERE run_id = $1",
                &[Arg::from(start.run_id.as_str())],
            )
            .await?,
        )
        .map(|row| {
            Ok::<_, LogError>(ExistingRun {
                status: RunStatus::parse(&text(&row, "status")?)?,
                principal: row.optional_text("principal")?,
                request_hash: text(&row, "request_hash")?,
                segment_start: seq(number(&row, "segment_start")?),
                last_seq: seq(number(&row, "last_seq")?),
            })
        })
        .transpose()?;
        let active = first(
            tx.fetch(
                "SELECT run_id FROM runs WHERE thread_id = $1 AND status = 'running'",
                &[Arg::from(start.thread_id.as_str())],
            )
            .await?,
        )
        .map(|row| text(&row, "run_id").map(RunId::from))
        .transpose()?;
        Ok(ThreadView {
            thread: self.thread(tx, &start.thread_id).await?,
            run,
            active,
            interrupts: self.interrupts(tx, start).await?,
        })
    }

    /// Whether the log has `thread` (a run, or a kept conversation), and whose it is (the runs
    /// of a thread all belong to its principal: one of them tells).
    async fn thread(&self, tx: &mut impl Conn, thread: &ThreadId) -> Result<Thread, Failure> {
        for sql in [
            "SELECT principal FROM runs WHERE thread_id = $1 LIMIT 1",
            "SELECT principal FROM threads WHERE thread_id = $1",
        ] {
            if let Some(row) = first(tx.fetch(sql, &[Arg::from(thread.as_str())]).await?) {
                return Ok(Thread::Of(row.optional_text("principal")?));
            }
        }
        Ok(Thread::New)
    }

    /// The interrupts the rules read for `start`: its thread's pending ones, and those it answers.
    async fn interrupts(
        &self,
        tx: &mut impl Conn,
        start: &Start,
    ) -> Result<Vec<InterruptRecord>, Failure> {
        let mut sql = format!(
            "SELECT {INTERRUPT_COLUMNS} FROM interrupts WHERE (thread_id = $1 AND status = 'pending')"
        );
        let mut args = vec![Arg::from(start.thread_id.as_str())];
        for (n, (id, _)) in start.resume.iter().enumerate() {
            sql.push_str(&format!(" OR interrupt_id = ${}", n + 2));
            args.push(Arg::from(id.as_str()));
        }
        Ok(tx
            .fetch(&sql, &args)
            .await?
            .iter()
            .map(interrupt_record)
            .collect::<Result<_, _>>()?)
    }

    /// See [`RunLog::start`](crate::runs::RunLog::start): the plan of the rules for the log's
    /// view, written in a savepoint, rolled back when refused.
    async fn start(
        &self,
        tx: &mut impl Conn,
        start: &Start,
        now: SystemTime,
    ) -> Result<Lease, Failure> {
        savepoint(tx).await?;
        let claimed = self.claim(tx, start, now).await;
        if let Err(Failure::Store(error)) = claimed {
            // The group fails: nothing to roll back to.
            return Err(Failure::Store(error));
        }
        end_savepoint(tx, matches!(claimed, Ok(Ok(_)))).await?;
        match claimed? {
            Ok(lease) => Ok(lease),
            Err(Guarded) => Err(self.explain(tx, start, now).await),
        }
    }

    /// The plan of the rules for the log's view, written; [`Guarded`] when a guard found that
    /// another writer got in between.
    async fn claim(
        &self,
        tx: &mut impl Conn,
        start: &Start,
        now: SystemTime,
    ) -> Result<Result<Lease, Guarded>, Failure> {
        let view = self.view(tx, start).await?;
        let plan = rules::plan(start, &view, now).map_err(Failure::Refused)?;
        let request = start.request.as_ref().map(Value::to_string);
        let claimed = match plan.begins {
            Begins::Continue { .. } => {
                tx.execute(
                    "UPDATE runs SET status = 'running', owner = $1, lease_expires_at = 0, \
                     request_hash = $2, request = $3, segment_start = last_seq, attempts = 1, \
                     cancel_requested = 0, \
                     updated_at = $4 WHERE run_id = $5 AND status = 'interrupted'",
                    &[
                        Arg::from(&self.owner),
                        Arg::from(&start.request_hash),
                        Arg::from(request.as_deref()),
                        Arg::from(millis(now)),
                        Arg::from(start.run_id.as_str()),
                    ],
                )
                .await
            }
            Begins::New => {
                self.insert_run(tx, INSERT_RUN, start, plan.principal.as_deref(), now)
                    .await
            }
        };
        match claimed {
            Ok(1) => {}
            // The run id, or the thread's place of its active run, was taken meanwhile.
            Ok(_) => return Ok(Err(Guarded)),
            Err(e) if e.is_unique_violation() => return Ok(Err(Guarded)),
            Err(e) => return Err(e.into()),
        }
        if self.backend == Backend::Postgres {
            // An interrupt of a run that ended between the view and the claim is seen now: the
            // claim waited for that run's end.
            let view = ThreadView {
                interrupts: self.interrupts(tx, start).await?,
                ..view
            };
            rules::plan(start, &view, now).map_err(Failure::Refused)?;
        }
        for (id, decision) in &start.resume {
            let resolved = tx
                .execute(
                    "UPDATE interrupts SET status = 'resolved', resolution = $1, \
                     resolved_by_run = $2, resolved_at = $3 \
                     WHERE interrupt_id = $4 AND status = 'pending' AND expires_at > $3",
                    &[
                        Arg::from(&decision_text(decision)),
                        Arg::from(start.run_id.as_str()),
                        Arg::from(millis(now)),
                        Arg::from(id.as_str()),
                    ],
                )
                .await?;
            if resolved == 0 {
                // Another start resolved it meanwhile.
                return Ok(Err(Guarded));
            }
        }
        Ok(Ok(self.lease(tx, start, &plan, now).await?))
    }

    /// Why a start whose guard failed (another writer got in between) is refused: the rules
    /// for the view as it is now.
    async fn explain(&self, tx: &mut impl Conn, start: &Start, now: SystemTime) -> Failure {
        match self.view(tx, start).await {
            Ok(view) => Failure::Refused(rules::plan(start, &view, now).err().unwrap_or(
                // What got in between is gone again: the start may be tried again.
                StartError::Busy {
                    thread: start.thread_id.clone(),
                    active: view.active,
                },
            )),
            Err(failure) => failure,
        }
    }

    /// See [`RunLog::refuse`](crate::runs::RunLog::refuse): recorded unless the rules refuse it.
    async fn refuse(
        &self,
        tx: &mut impl Conn,
        start: &Start,
        events: &[LoggedEvent],
        now: SystemTime,
    ) -> Result<(), Failure> {
        let view = self.view(tx, start).await?;
        let principal = rules::refusal(start, &view).map_err(Failure::Refused)?;
        let inserted = tx
            .execute(
                "INSERT INTO runs (run_id, thread_id, status, owner, lease_expires_at, last_seq, \
             created_at, updated_at, request_hash, segment_start, attempts, principal) \
             VALUES ($1, $2, 'failed', $3, 0, $4, $5, $5, $6, 0, 1, $7) ON CONFLICT DO NOTHING",
                &[
                    Arg::from(start.run_id.as_str()),
                    Arg::from(start.thread_id.as_str()),
                    Arg::from(&self.owner),
                    Arg::from(signed(events.last().map_or(0, |e| e.seq))),
                    Arg::from(millis(now)),
                    Arg::from(&start.request_hash),
                    Arg::from(principal.as_deref()),
                ],
            )
            .await?;
        if inserted == 0 {
            // The primary key held: another writer took the id meanwhile, as the rules say now
            // (unless that run is gone again, when the id is as good as taken for this refusal).
            let view = self.view(tx, start).await?;
            return Err(Failure::Refused(
                rules::refusal(start, &view)
                    .err()
                    .unwrap_or(StartError::Exists {
                        run: start.run_id.clone(),
                        same: false,
                        from: 0,
                    }),
            ));
        }
        let mut chunks = Vec::new();
        chunk::cut(&start.run_id, events, &mut chunks);
        insert_chunks(tx, &chunks).await?;
        Ok(())
    }

    /// See [`RunLog::write`](crate::runs::RunLog::write).
    async fn write(
        &self,
        tx: &mut impl Conn,
        lease: &Lease,
        events: &[LoggedEvent],
        end: Option<&RunEnd>,
        now: SystemTime,
    ) -> Result<(), Failure> {
        let status = end.map_or(RunStatus::Running, |end| end.status);
        let request = end
            .and_then(|end| end.request.as_ref())
            .map(Value::to_string);
        // Fenced to the owner, a running run, and (with events) the log's end.
        let fenced = tx
            .execute(
                "UPDATE runs SET status = $1, last_seq = COALESCE($2, last_seq), updated_at = $3, \
             request = CASE WHEN $1 = 'running' THEN request ELSE $4 END, \
             log_bytes = log_bytes + $8 \
             WHERE run_id = $5 AND owner = $6 \
             AND status = 'running' AND ($7 IS NULL OR last_seq = $7)",
                &[
                    Arg::from(status.as_str()),
                    Arg::from(events.last().map(|e| signed(e.seq))),
                    Arg::from(millis(now)),
                    Arg::from(request.as_deref()),
                    Arg::from(lease.run_id.as_str()),
                    Arg::from(&self.owner),
                    Arg::from(events.first().map(|e| signed(e.seq - 1))),
                    Arg::from(logged_bytes(events)),
                ],
            )
            .await?;
        if fenced == 0 {
            return Err(LogError::Fenced(lease.run_id.clone()).into());
        }
        // Its events go in with the group's.
        if let Some(end) = end {
            if let Some(messages) = &end.messages {
                let thread = SavedThread::new(&lease.thread_id, messages)
                    .principal(lease.principal.as_deref())
                    .state(end.state.as_ref());
                save_thread(tx, &thread, now).await?;
            }
            keep_end(tx, lease, end, now).await?;
        }
        Ok(())
    }

    /// See [`RunLog::heartbeat`](crate::runs::RunLog::heartbeat).
    async fn heartbeat(
        &self,
        tx: &mut impl Conn,
        lease: Duration,
        now: SystemTime,
    ) -> Result<(), Failure> {
        tx.execute(
            "INSERT INTO instances (owner, expires_at) VALUES ($1, $2) \
             ON CONFLICT (owner) DO UPDATE SET expires_at = excluded.expires_at",
            &[Arg::from(&self.owner), Arg::from(millis(now + lease))],
        )
        .await?;
        // Instances gone for a day with nothing left running are forgotten.
        tx.execute(
            "DELETE FROM instances WHERE expires_at < $1 AND NOT EXISTS \
             (SELECT 1 FROM runs WHERE runs.owner = instances.owner AND runs.status = 'running')",
            &[Arg::from(millis(now) - 24 * 3600 * 1000)],
        )
        .await?;
        Ok(())
    }

    /// See [`DurableLog::release`](crate::runs::DurableLog::release): this instance's heartbeat expires
    /// now, and the other instances (PostgreSQL) are told to look for lost runs.
    async fn release(&self, tx: &mut impl Conn) -> Result<(), DbError> {
        tx.execute(
            "UPDATE instances SET expires_at = 0 WHERE owner = $1",
            &[Arg::from(&self.owner)],
        )
        .await?;
        if self.backend == Backend::Postgres {
            tx.execute(
                "SELECT pg_notify($1, $2)",
                &[
                    Arg::from(CHANNEL),
                    Arg::from(format!("{RELEASED}:{}\n", self.owner).as_str()),
                ],
            )
            .await?;
        }
        Ok(())
    }

    /// See [`RunLog::recover`](crate::runs::RunLog::recover).
    async fn recover(
        &self,
        tx: &mut impl Conn,
        lost: &LostRun,
        events: &[LoggedEvent],
        end: Option<&RunEnd>,
        now: SystemTime,
    ) -> Result<Option<Recovered>, Failure> {
        let run = &lost.record.run_id;
        // How far its log's numbers go: past those its owner may have sent without committing
        // them (left unused), then its events.
        let advance = crate::runs::SENT_AHEAD + events.len() as u64;
        let mut args = vec![
            Arg::from(&self.owner),
            Arg::from(millis(now)),
            Arg::from(run.as_str()),
            Arg::from(&lost.record.owner),
            Arg::from(signed(advance)),
            Arg::from(signed(lost.record.last_seq)),
        ];
        let sql = match end {
            None => {
                "UPDATE runs SET owner = $1, last_seq = last_seq + $5, \
                 attempts = attempts + 1, lease_expires_at = 0, updated_at = $2 \
                 WHERE run_id = $3 AND status = 'running' AND owner = $4 AND last_seq = $6 \
                 RETURNING last_seq, principal"
            }
            Some(end) => {
                args.push(Arg::from(end.status.as_str()));
                "UPDATE runs SET status = $7, owner = $1, last_seq = last_seq + $5, \
                 request = NULL, updated_at = $2 \
                 WHERE run_id = $3 AND status = 'running' AND owner = $4 AND last_seq = $6 \
                 RETURNING last_seq, principal"
            }
        };
        let taken = first(tx.fetch(sql, &args).await?);
        let Some(row) = taken else {
            return Ok(None);
        };
        let last = seq(number(&row, "last_seq")?);
        let principal = row.optional_text("principal")?;
        let events: Vec<LoggedEvent> = events
            .iter()
            .zip(last - events.len() as u64 + 1..)
            .map(|(event, at)| event.clone().with_seq(at))
            .collect();
        let mut chunks = Vec::new();
        chunk::cut(run, &events, &mut chunks);
        insert_chunks(tx, &chunks).await?;
        if let Some(end) = end {
            outbox::keep(tx, &end.notices, now).await?;
        }
        Ok(Some(Recovered {
            events,
            lease: end.is_none().then(|| Lease {
                run_id: run.clone(),
                thread_id: lost.record.thread_id.clone(),
                principal,
                last_seq: last,
                made_thread: false,
            }),
        }))
    }

    /// Tells other instances (PostgreSQL) what `effects` the group had: the runs whose logs
    /// changed, the runs asked to be cancelled, the threads runs started on, the threads whose
    /// listing changed; delivered at commit, to every instance listening; one notification for
    /// many (a line `seq:run`, `cancel:run`, `thread:thread` or `listed:[..]` each, as many as
    /// fit in a payload), so a group costs one round trip, not one per run.
    async fn notify(&self, tx: &mut impl Conn, effects: &Effects) -> Result<(), DbError> {
        if self.backend != Backend::Postgres {
            return Ok(());
        }
        let Effects {
            changed,
            cancels,
            threads,
            listed,
            ..
        } = effects;
        let listed = listed.iter().map(|(thread, principal)| {
            let listed = (&self.owner, thread.as_str(), principal.as_deref());
            let listed = serde_json::to_string(&listed).unwrap_or_default();
            format!("{LISTED}:{listed}\n")
        });
        // A run id too long for a payload is left out: its remote followers are not woken (a
        // cancellation waits for the heartbeat), and the group's commit does not fail for it.
        let lines: Vec<String> = changed
            .iter()
            .map(|(run, last)| format!("{last}:{run}\n"))
            .chain(cancels.iter().map(|run| format!("{CANCEL}:{run}\n")))
            .chain(threads.iter().map(|thread| format!("{THREAD}:{thread}\n")))
            .chain(listed)
            .filter(|line| line.len() <= NOTIFY_BYTES)
            .collect();
        let mut payload = String::new();
        for (i, line) in lines.iter().enumerate() {
            payload.push_str(line);
            let full = lines
                .get(i + 1)
                .is_none_or(|next| payload.len() + next.len() > NOTIFY_BYTES);
            if full {
                tx.execute(
                    "SELECT pg_notify($1, $2)",
                    &[Arg::from(CHANNEL), Arg::from(&std::mem::take(&mut payload))],
                )
                .await?;
            }
        }
        Ok(())
    }
}

/// A job's failure inside the group: a refusal of the job alone, or an error of the store that
/// fails the whole group.
#[derive(Debug)]
pub(super) enum Failure {
    Refused(StartError),
    Store(DbError),
}

/// A guard of the log (a unique index, a conditional update) found that another writer got in
/// between the view a plan was made for and its writes.
#[derive(Debug)]
struct Guarded;

impl From<DbError> for Failure {
    fn from(e: DbError) -> Self {
        Self::Store(e)
    }
}

impl From<LogError> for Failure {
    fn from(e: LogError) -> Self {
        Self::Refused(StartError::Log(e))
    }
}

/// A job's answer, and the error of the store that fails its group, if any.
fn split<T>(result: Result<T, Failure>) -> (Result<T, StartError>, Option<DbError>) {
    match result {
        Ok(value) => (Ok(value), None),
        Err(Failure::Refused(error)) => (Err(error), None),
        Err(Failure::Store(error)) => (
            Err(StartError::Log(LogError::unavailable(error.to_string()))),
            Some(error),
        ),
    }
}

/// The answer of a job that is not a start.
fn log_error(error: StartError) -> LogError {
    match error {
        StartError::Log(error) => error,
        other => LogError::unavailable(other.to_string()),
    }
}

/// The bytes `events` log, as a principal's day counts them
/// ([`PrincipalLimits::log_bytes_per_day`](crate::runs::PrincipalLimits::log_bytes_per_day)).
pub(super) fn logged_bytes(events: &[LoggedEvent]) -> i64 {
    signed(events.iter().map(|e| e.json().len() as u64).sum())
}

/// Opens the savepoint of one job.
async fn savepoint(tx: &mut impl Conn) -> Result<(), DbError> {
    tx.execute("SAVEPOINT job", &[]).await.map(drop)
}

/// Ends a job's savepoint: kept when the job succeeded, rolled back when it was refused.
async fn end_savepoint(tx: &mut impl Conn, keep: bool) -> Result<(), DbError> {
    if !keep {
        tx.execute("ROLLBACK TO SAVEPOINT job", &[]).await?;
    }
    tx.execute("RELEASE SAVEPOINT job", &[]).await.map(drop)
}

/// Answers the jobs of a group; `failed` says why it did not commit.
fn answer(done: Vec<Done>, failed: Option<String>) {
    if let Some(why) = &failed {
        tracing::error!(reason = %why, jobs = done.len(), "a group of writes failed");
    }
    for job in done {
        job.answer(failed.as_deref());
    }
}

/// The first of `rows`.
fn first(rows: Vec<Row>) -> Option<Row> {
    rows.into_iter().next()
}

/// Runs' chunks of events, each under its run's key. A run that is not in the log has none: its
/// chunk is refused (the key is `NOT NULL`) rather than dropped.
static CHUNKS: LazyLock<Values> = LazyLock::new(|| {
    Values::new(
        "INSERT INTO run_chunks (run_key, first_seq, last_seq, events) \
         SELECT runs.run_key, v.column2, v.column3, v.column4 FROM (VALUES {rows}) AS v \
         LEFT JOIN runs ON runs.run_id = v.column1",
        0,
        4,
    )
});

/// Inserts `chunks` (of any runs, each in the log) into the logs.
async fn insert_chunks(tx: &mut impl Conn, chunks: &[Chunk]) -> Result<(), DbError> {
    let mut rows = Vec::with_capacity(4 * chunks.len());
    for chunk in chunks {
        rows.extend([
            Arg::from(chunk.run.as_str()),
            Arg::from(signed(chunk.first)),
            Arg::from(signed(chunk.last)),
            Arg::from(chunk.events.as_str()),
        ]);
    }
    CHUNKS.execute(tx, &[], &rows).await.map(drop)
}

/// Keeps what `end` of `lease`'s run leaves beside its row: the notices it tells, the
/// interrupts it waits on.
async fn keep_end(
    tx: &mut impl Conn,
    lease: &Lease,
    end: &RunEnd,
    now: SystemTime,
) -> Result<(), DbError> {
    outbox::keep(tx, &end.notices, now).await?;
    for interrupt in &end.interrupts {
        tx.execute(
            "INSERT INTO interrupts (interrupt_id, thread_id, run_id, tool_call_id, \
             tool_name, arguments, args_hash, created_at, expires_at, status) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending')",
            &[
                Arg::from(interrupt.id.as_str()),
                Arg::from(lease.thread_id.as_str()),
                Arg::from(lease.run_id.as_str()),
                Arg::from(interrupt.tool_call_id.as_str()),
                Arg::from(interrupt.tool_name.as_str()),
                Arg::from(&interrupt.arguments.to_string()),
                Arg::from(&args_hash(&interrupt.arguments)),
                Arg::from(millis(now)),
                Arg::from(millis(interrupt.expires_at)),
            ],
        )
        .await?;
    }
    Ok(())
}

/// See [`DurableLog::followed`](crate::runs::DurableLog::followed).
async fn followed(tx: &mut impl Conn, runs: &[RunId], until: SystemTime) -> Result<(), Failure> {
    for run in runs {
        tx.execute(
            "UPDATE runs SET followed_until = $1 WHERE run_id = $2 AND status = 'running'",
            &[Arg::from(millis(until)), Arg::from(run.as_str())],
        )
        .await?;
    }
    Ok(())
}

/// Deletes `thread` with everything of it, unless one of its runs is running.
async fn delete_thread(
    tx: &mut impl Conn,
    thread: &ThreadId,
) -> Result<(Deleted, Option<String>), Failure> {
    let principal = thread_principal(tx, thread).await?.flatten();
    let id = [Arg::from(thread.as_str())];
    let running = tx
        .fetch(
            "SELECT run_id FROM runs WHERE thread_id = $1 AND status = 'running'",
            &id,
        )
        .await?;
    if !running.is_empty() {
        return Ok((Deleted::Busy, principal));
    }
    tx.execute(
        "DELETE FROM run_chunks WHERE run_key IN (SELECT run_key FROM runs WHERE thread_id = $1)",
        &id,
    )
    .await?;
    tx.execute("DELETE FROM interrupts WHERE thread_id = $1", &id)
        .await?;
    tx.execute(
        "DELETE FROM notices WHERE run_id IN (SELECT run_id FROM runs WHERE thread_id = $1)",
        &id,
    )
    .await?;
    let runs = tx
        .execute("DELETE FROM runs WHERE thread_id = $1", &id)
        .await?;
    let threads = tx
        .execute("DELETE FROM threads WHERE thread_id = $1", &id)
        .await?;
    let deleted = if runs + threads > 0 {
        Deleted::Deleted
    } else {
        Deleted::Unknown
    };
    Ok((deleted, principal))
}

/// Names, renames or archives `thread`: whom it belongs to (`None`: there is no such thread).
async fn change_thread(
    tx: &mut impl Conn,
    thread: &ThreadId,
    change: &ThreadChange,
) -> Result<Option<Option<String>>, Failure> {
    let Some(principal) = thread_principal(tx, thread).await? else {
        return Ok(None);
    };
    let mut sql = String::from("UPDATE threads SET thread_id = thread_id");
    let mut args = vec![Arg::from(thread.as_str())];
    if let Some(name) = &change.name {
        args.push(Arg::from(name.as_deref()));
        sql.push_str(&format!(", name = ${}", args.len()));
    } else if let Some(name) = &change.suggested_name {
        args.push(Arg::from(name.as_str()));
        sql.push_str(&format!(", name = COALESCE(name, ${})", args.len()));
    }
    if let Some(archived) = change.archived {
        args.push(Arg::from(i64::from(archived)));
        sql.push_str(&format!(", archived = ${}", args.len()));
    }
    sql.push_str(" WHERE thread_id = $1");
    tx.execute(&sql, &args).await?;
    Ok(Some(principal))
}

/// Whom `thread` belongs to, if the store keeps it (`Some(None)`: no one).
async fn thread_principal(
    tx: &mut impl Conn,
    thread: &ThreadId,
) -> Result<Option<Option<String>>, Failure> {
    let rows = tx
        .fetch(
            "SELECT principal FROM threads WHERE thread_id = $1",
            &[Arg::from(thread.as_str())],
        )
        .await?;
    rows.first()
        .map(|row| row.optional_text("principal"))
        .transpose()
        .map_err(Failure::from)
}

/// What a prune deletes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Prunable {
    /// Runs that ended before the time and wait for no decision: their events, their decided
    /// interrupts, their rows.
    Runs,
    /// Threads not updated since the time, none of whose runs runs or waits for a decision:
    /// their conversation and everything left of their runs.
    Threads,
}

impl Prunable {
    /// The query of the prunable ones among `$2…`, as of `$1` (ms).
    fn query(self, ids: &str) -> String {
        match self {
            Self::Runs => format!(
                "SELECT run_id FROM runs WHERE run_id IN ({ids}) AND status <> 'running' \
                 AND updated_at < $1 AND run_id NOT IN \
                 (SELECT run_id FROM interrupts WHERE status = 'pending')"
            ),
            Self::Threads => format!(
                "SELECT thread_id FROM threads WHERE thread_id IN ({ids}) AND updated_at < $1 \
                 AND thread_id NOT IN (SELECT thread_id FROM runs WHERE status = 'running') \
                 AND thread_id NOT IN (SELECT thread_id FROM interrupts WHERE status = 'pending')"
            ),
        }
    }
}

/// Deletes the runs or threads of `ids` that are prunable at `before` (ms), as a view taken
/// earlier found them: one resumed or written since is kept. The number deleted.
async fn prune(
    tx: &mut impl Conn,
    what: Prunable,
    ids: &[String],
    before: i64,
) -> Result<u64, Failure> {
    if ids.is_empty() {
        return Ok(0);
    }
    let numbers: Vec<String> = (2..ids.len() + 2).map(|n| format!("${n}")).collect();
    let prunable = what.query(&numbers.join(", "));
    let mut args = vec![Arg::from(before)];
    args.extend(ids.iter().map(|id| Arg::from(id.as_str())));
    // What was spent counts for its day's budget, whatever is pruned: a day gone by no more.
    let day_pruned = before.div_euclid(86_400_000);
    let statements = match what {
        Prunable::Runs => vec![
            format!("DELETE FROM spending WHERE day < {day_pruned} AND billed_run IN ({prunable})"),
            format!(
                "DELETE FROM run_chunks WHERE run_key IN \
                 (SELECT run_key FROM runs WHERE run_id IN ({prunable}))"
            ),
            format!("DELETE FROM interrupts WHERE run_id IN ({prunable})"),
            format!("DELETE FROM notices WHERE run_id IN ({prunable})"),
            format!("DELETE FROM runs WHERE run_id IN ({prunable})"),
        ],
        Prunable::Threads => vec![
            format!(
                "DELETE FROM spending WHERE day < {day_pruned} AND billed_run IN \
                 (SELECT run_id FROM runs WHERE thread_id IN ({prunable}))"
            ),
            format!(
                "DELETE FROM run_chunks WHERE run_key IN \
                 (SELECT run_key FROM runs WHERE thread_id IN ({prunable}))"
            ),
            format!("DELETE FROM interrupts WHERE thread_id IN ({prunable})"),
            format!(
                "DELETE FROM notices WHERE run_id IN \
                 (SELECT run_id FROM runs WHERE thread_id IN ({prunable}))"
            ),
            format!("DELETE FROM runs WHERE thread_id IN ({prunable})"),
            format!("DELETE FROM threads WHERE thread_id IN ({prunable})"),
        ],
    };
    let mut deleted = 0;
    for statement in &statements {
        deleted = tx.execute(statement, &args).await?;
    }
    // The last statement deletes the rows counted.
    Ok(deleted)
}

/// Conversations kept, titled by their first prompt; a thread's principal is the one it was
/// first kept with, its workspace the last one given. One statement keeps a thread once at most.
static THREADS: LazyLock<Values> = LazyLock::new(|| {
    Values::new(
        "INSERT INTO threads (thread_id, messages, state, updated_at, principal, title, workspace) \
         VALUES {rows} ON CONFLICT (thread_id) DO UPDATE SET \
         messages = excluded.messages, state = excluded.state, updated_at = excluded.updated_at, \
         title = excluded.title, workspace = COALESCE(excluded.workspace, threads.workspace)",
        0,
        7,
    )
});

/// A row of [`THREADS`]: what of `saved` is stored as text.
struct ThreadRow<'s> {
    saved: SavedThread<'s>,
    messages: String,
    state: Option<String>,
    title: Option<String>,
}

impl<'s> ThreadRow<'s> {
    fn new(saved: SavedThread<'s>) -> Result<Self, LogError> {
        Ok(Self {
            saved,
            messages: serde_json::to_string(saved.messages)
                .map_err(|e| LogError::Corrupt(format!("conversation ({e})")))?,
            state: saved.state.map(Value::to_string),
            title: crate::message::title(saved.messages),
        })
    }

    /// Its parameters, kept at `now`.
    fn args(&self, now: SystemTime) -> [Arg<'_>; 7] {
        [
            Arg::from(self.saved.thread.as_str()),
            Arg::from(&self.messages),
            Arg::from(self.state.as_deref()),
            Arg::from(millis(now)),
            Arg::from(self.saved.principal),
            Arg::from(self.title.as_deref()),
            Arg::from(self.saved.workspace),
        ]
    }
}

/// Keeps `saved` (see [`THREADS`]).
async fn save_thread(
    tx: &mut impl Conn,
    saved: &SavedThread<'_>,
    now: SystemTime,
) -> Result<(), Failure> {
    let row = ThreadRow::new(*saved)?;
    THREADS.execute(tx, &[], &row.args(now)).await?;
    if let Some(from) = saved.forked_from {
        // Where a thread came from is set once, when it is new: a fork is a new thread.
        tx.execute(
            "UPDATE threads SET forked_from = $2, forked_at = $3 \
             WHERE thread_id = $1 AND forked_from IS NULL",
            &[
                Arg::from(saved.thread.as_str()),
                Arg::from(from.thread_id.as_str()),
                Arg::from(from.message_id.as_ref().map(MessageId::as_str)),
            ],
        )
        .await?;
    }
    Ok(())
}
