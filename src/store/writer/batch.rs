//! PostgreSQL: the jobs every run sends (its start, its writes, its end) done for the whole group
//! in a few statements over all their rows.
//!
//! Each statement is a round trip to the server, and the writer waits for each before the next:
//! one statement per row made a group of `n` runs cost `n` round trips per kind of job, and the
//! writer, not the database, was the limit. A group's writes are one fenced `UPDATE … FROM
//! (VALUES …)`, its ended runs' conversations one upsert; its plain starts (a new run that
//! resumes nothing) one `INSERT … ON CONFLICT DO NOTHING` and one read of the guards the insert
//! cannot hold. What a batch cannot decide (a start whose run or thread is taken, a second job
//! of one run in the group) is left to the jobs run one by one, as on SQLite, where a statement
//! costs no round trip.
//!
//! The jobs of a group were sent concurrently; doing its writes before its starts is one of
//! their orders.

use std::{collections::HashSet, sync::LazyLock, time::SystemTime};

use serde_json::Value;
use tokio::sync::oneshot;

use super::{
    Done, Effects, Job, THREADS, ThreadRow, Writer, keep_end, logged_bytes, split, values::Values,
};
use crate::{
    runs::{
        Lease, LogError, LoggedEvent, RunEnd, RunStatus, SavedThread, Start, StartError,
        rules::{self, Plan, ThreadView},
    },
    store::{
        conn::{Arg, Columns, Conn, DbError},
        rows::{millis, signed},
    },
};

/// Writes, each fenced to the owner (`$2`), a running run and, with events, the log's end.
static WRITES: LazyLock<Values> = LazyLock::new(|| {
    Values::new(
        "UPDATE runs SET status = v.status, last_seq = COALESCE(v.last_seq, runs.last_seq), \
         updated_at = $1, \
         request = CASE WHEN v.status = 'running' THEN runs.request ELSE v.request END, \
         log_bytes = runs.log_bytes + v.log_bytes \
         FROM (VALUES {rows}) AS v (run_id, status, last_seq, request, previous, log_bytes) \
         WHERE runs.run_id = v.run_id AND runs.owner = $2 AND runs.status = 'running' \
         AND (v.previous IS NULL OR runs.last_seq = v.previous) \
         RETURNING runs.run_id",
        2,
        6,
    )
});

/// New runs, running, owned by `$1` since `$2`; those a unique index refuses are left out.
static STARTS: LazyLock<Values> = LazyLock::new(|| {
    Values::new(
        "INSERT INTO runs (run_id, thread_id, status, owner, lease_expires_at, last_seq, \
         created_at, updated_at, request_hash, request, segment_start, attempts, principal) \
         SELECT v.run_id, v.thread_id, 'running', $1, 0, 0, $2, $2, v.request_hash, v.request, \
         0, 1, v.principal \
         FROM (VALUES {rows}) AS v (run_id, thread_id, request_hash, request, principal) \
         ON CONFLICT DO NOTHING RETURNING run_id",
        2,
        5,
    )
});

/// The new runs whose thread, read after their insert, is not the empty one their plan was
/// made for: it waits for a decision, or belongs to another principal. Read after the insert:
/// an interrupt of a run that ended while the insert waited for it is seen.
static GUARDS: LazyLock<Values> = LazyLock::new(|| {
    Values::new(
        "SELECT v.run_id FROM (VALUES {rows}) AS v (run_id, thread_id, principal) \
         WHERE EXISTS (SELECT 1 FROM interrupts i WHERE i.thread_id = v.thread_id \
         AND i.status = 'pending') \
         OR EXISTS (SELECT 1 FROM (SELECT r.principal FROM runs r WHERE r.thread_id = v.thread_id \
         AND r.run_id <> v.run_id LIMIT 1) p WHERE p.principal IS DISTINCT FROM v.principal) \
         OR EXISTS (SELECT 1 FROM threads t WHERE t.thread_id = v.thread_id \
         AND t.principal IS DISTINCT FROM v.principal)",
        0,
        3,
    )
});

/// A write of the group.
struct Write {
    lease: Lease,
    events: Vec<LoggedEvent>,
    end: Option<RunEnd>,
    reply: oneshot::Sender<Result<(), LogError>>,
}

/// A plain start of the group, with the plan of the rules for an empty thread.
struct Plain {
    start: Start,
    plan: Plan,
    reply: oneshot::Sender<Result<Lease, StartError>>,
}

impl Writer {
    /// Does the group's writes and plain starts in batches (see the module); the jobs left, in
    /// their order, to be run one by one.
    pub(super) async fn batch(
        &self,
        tx: &mut impl Conn,
        group: Vec<Job>,
        now: SystemTime,
        done: &mut Vec<Done>,
        effects: &mut Effects,
    ) -> Result<Vec<Job>, DbError> {
        let (mut writes, mut starts, mut rest) = (Vec::new(), Vec::new(), Vec::new());
        // A run or a thread twice in a batch would be decided once for both jobs.
        let (mut runs, mut threads) = (HashSet::new(), HashSet::new());
        for job in group {
            match job {
                Job::Write {
                    lease,
                    events,
                    end,
                    reply,
                } if runs.insert(lease.run_id.clone())
                    && (end.as_ref().is_none_or(|end| end.messages.is_none())
                        || threads.insert(lease.thread_id.clone())) =>
                {
                    writes.push(Write {
                        lease,
                        events,
                        end,
                        reply,
                    });
                }
                Job::Start { start, reply }
                    if start.resume.is_empty()
                        && runs.insert(start.run_id.clone())
                        && threads.insert(start.thread_id.clone()) =>
                {
                    match rules::plan(&start, &ThreadView::default(), now) {
                        Ok(plan) => starts.push(Plain { start, plan, reply }),
                        Err(refused) => done.push(Done::Start(reply, Err(refused))),
                    }
                }
                other => rest.push(other),
            }
        }
        self.write_all(tx, writes, now, done, effects).await?;
        self.start_all(tx, starts, now, done, effects).await?;
        Ok(rest)
    }

    /// The group's writes: fenced in one statement; the conversations of the runs they end kept
    /// in another.
    async fn write_all(
        &self,
        tx: &mut impl Conn,
        writes: Vec<Write>,
        now: SystemTime,
        done: &mut Vec<Done>,
        effects: &mut Effects,
    ) -> Result<(), DbError> {
        if writes.is_empty() {
            return Ok(());
        }
        let requests: Vec<Option<String>> = writes
            .iter()
            .map(|w| w.end.as_ref()?.request.as_ref().map(Value::to_string))
            .collect();
        let mut rows = Vec::with_capacity(6 * writes.len());
        for (write, request) in writes.iter().zip(&requests) {
            let status = write
                .end
                .as_ref()
                .map_or(RunStatus::Running, |end| end.status);
            rows.extend([
                Arg::from(write.lease.run_id.as_str()),
                Arg::from(status.as_str()),
                Arg::from(write.events.last().map(|e| signed(e.seq))),
                Arg::from(request.as_deref()),
                Arg::from(write.events.first().map(|e| signed(e.seq - 1))),
                Arg::from(logged_bytes(&write.events)),
            ]);
        }
        let shared = [Arg::from(millis(now)), Arg::from(&self.owner)];
        let fenced = returned(WRITES.fetch(tx, &shared, &rows).await?);
        // The conversations of the runs ended, one statement for all (a thread is once in it).
        let mut kept = Vec::new();
        let mut unkept = Vec::new();
        for write in &writes {
            let Some(end) = write
                .end
                .as_ref()
                .filter(|_| fenced.contains(write.lease.run_id.as_str()))
            else {
                continue;
            };
            if let Some(messages) = &end.messages {
                let thread = SavedThread::new(&write.lease.thread_id, messages)
                    .principal(write.lease.principal.as_deref())
                    .state(end.state.as_ref());
                match ThreadRow::new(thread) {
                    Ok(row) => kept.push(row),
                    Err(error) => unkept.push((write.lease.run_id.clone(), error)),
                }
            }
        }
        let rows: Vec<Arg<'_>> = kept.iter().flat_map(|row| row.args(now)).collect();
        THREADS.execute(tx, &[], &rows).await?;
        for write in writes {
            let run = &write.lease.run_id;
            let written = if let Some(at) = unkept.iter().position(|(r, _)| r == run) {
                Err(unkept.swap_remove(at).1)
            } else if fenced.contains(run.as_str()) {
                if let Some(end) = &write.end {
                    keep_end(tx, &write.lease, end, now).await?;
                }
                effects.logged(&write.lease, &write.events, write.end.is_some());
                Ok(())
            } else {
                Err(LogError::Fenced(write.lease.run_id.clone()))
            };
            done.push(Done::Unit(write.reply, written));
        }
        Ok(())
    }

    /// The group's plain starts: inserted in one statement, their guards read in another; a
    /// start either refuses is left to [`start`](Writer::start), which plans with the thread's
    /// view.
    async fn start_all(
        &self,
        tx: &mut impl Conn,
        starts: Vec<Plain>,
        now: SystemTime,
        done: &mut Vec<Done>,
        effects: &mut Effects,
    ) -> Result<(), DbError> {
        if starts.is_empty() {
            return Ok(());
        }
        let requests: Vec<Option<String>> = starts
            .iter()
            .map(|s| s.start.request.as_ref().map(Value::to_string))
            .collect();
        let mut rows = Vec::with_capacity(5 * starts.len());
        for (plain, request) in starts.iter().zip(&requests) {
            rows.extend([
                Arg::from(plain.start.run_id.as_str()),
                Arg::from(plain.start.thread_id.as_str()),
                Arg::from(&plain.start.request_hash),
                Arg::from(request.as_deref()),
                Arg::from(plain.plan.principal.as_deref()),
            ]);
        }
        let shared = [Arg::from(&self.owner), Arg::from(millis(now))];
        let inserted = returned(STARTS.fetch(tx, &shared, &rows).await?);
        let mut rows = Vec::with_capacity(3 * inserted.len());
        for plain in &starts {
            if inserted.contains(plain.start.run_id.as_str()) {
                rows.extend([
                    Arg::from(plain.start.run_id.as_str()),
                    Arg::from(plain.start.thread_id.as_str()),
                    Arg::from(plain.plan.principal.as_deref()),
                ]);
            }
        }
        let guarded = returned(GUARDS.fetch(tx, &[], &rows).await?);
        for run in &guarded {
            tx.execute(
                "DELETE FROM runs WHERE run_id = $1",
                &[Arg::from(run.as_str())],
            )
            .await?;
        }
        for Plain { start, plan, reply } in starts {
            let run = start.run_id.as_str();
            let started = if inserted.contains(run) && !guarded.contains(run) {
                Ok(self.lease(tx, &start, &plan, now).await?)
            } else {
                self.start(tx, &start, now).await
            };
            if started.is_ok() {
                effects.threads.push(start.thread_id.clone());
            }
            let (result, error) = split(started);
            done.push(Done::Start(reply, result));
            if let Some(error) = error {
                return Err(error);
            }
        }
        Ok(())
    }
}

/// The run ids of `rows` (a `RETURNING run_id`, a `SELECT run_id`).
fn returned(rows: Vec<crate::store::conn::Row>) -> HashSet<String> {
    rows.iter()
        .filter_map(|row| row.optional_text("run_id").ok().flatten())
        .collect()
}
