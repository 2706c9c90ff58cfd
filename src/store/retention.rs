//! Retention: the runs that ended before a time ([`RunStore::prune`]) and the threads idle since
//! ([`RunStore::prune_threads`]) deleted, a few at a time, between the runs' own writes.

use std::time::SystemTime;

use sqlx::Row as _;

use super::{
    RunStore,
    rows::millis,
    writer::{Job, Prunable},
};
use crate::runs::LogError;

/// How many runs one group commit deletes at most: a prune never holds the writer for long.
const BATCH: usize = 100;

/// The least pause between two groups of a prune.
const PAUSE: std::time::Duration = std::time::Duration::from_millis(5);

/// How many runs one look at the log finds to delete.
const PASS: i64 = 10_000;

impl RunStore {
    /// Deletes the runs that ended before `before` (their events, their decided interrupts,
    /// their rows), in groups of 100 between the runs' own writes. Kept: running runs, runs
    /// that wait for a decision, and the threads (their latest conversation). Returns how many
    /// runs were deleted.
    ///
    /// `agent-tower serve --retain-runs 30d` calls it every hour; `agent-tower prune` once. On
    /// SQLite the file does not shrink: the space is reused (`VACUUM` returns it, with the
    /// servers stopped); on PostgreSQL autovacuum reclaims it.
    ///
    /// # Errors
    ///
    /// When the store cannot be read or written.
    pub async fn prune(&self, before: SystemTime) -> Result<u64, LogError> {
        self.prune_all(
            Prunable::Runs,
            "SELECT run_id FROM runs WHERE status <> 'running' AND updated_at < $1 \
             AND run_id NOT IN (SELECT run_id FROM interrupts WHERE status = 'pending') \
             LIMIT $2",
            before,
        )
        .await
    }

    /// Deletes the threads not updated since `before` (their conversation, their state and
    /// everything left of their runs), in groups of 100 between the runs' own writes. Kept: a
    /// thread with a run running or waiting for a decision. Returns how many threads were
    /// deleted. `agent-tower serve --retain-threads 90d` calls it every hour.
    ///
    /// # Errors
    ///
    /// When the store cannot be read or written.
    pub async fn prune_threads(&self, before: SystemTime) -> Result<u64, LogError> {
        self.prune_all(
            Prunable::Threads,
            "SELECT thread_id FROM threads WHERE updated_at < $1 \
             AND thread_id NOT IN (SELECT thread_id FROM runs WHERE status = 'running') \
             AND thread_id NOT IN (SELECT thread_id FROM interrupts WHERE status = 'pending') \
             LIMIT $2",
            before,
        )
        .await
    }

    /// Finds what `find` lists as prunable at `before`, a pass at a time, and deletes it in
    /// groups through the writer.
    async fn prune_all(
        &self,
        what: Prunable,
        find: &str,
        before: SystemTime,
    ) -> Result<u64, LogError> {
        let cutoff = millis(before);
        let mut pruned = 0;
        loop {
            let found = sqlx::query(find)
                .bind(cutoff)
                .bind(PASS)
                .fetch_all(self.reader())
                .await?;
            let found: Vec<String> = found
                .iter()
                .map(|row| row.try_get::<String, _>(0))
                .collect::<Result<_, _>>()?;
            let mut this_pass = 0;
            for batch in found.chunks(BATCH) {
                // Paced: the writer spends at most half its time deleting, and the runs' own
                // writes go between (a prune of 110,000 runs unpaced took the p99 of a run's
                // first event from 3 ms to 207 ms, docs/performance.md).
                let started = tokio::time::Instant::now();
                this_pass += self
                    .ask(
                        |reply| Job::Prune {
                            what,
                            ids: batch.to_vec(),
                            before: cutoff,
                            reply,
                        },
                        || Err(LogError::unavailable("the store's writer stopped")),
                    )
                    .await?;
                tokio::time::sleep(started.elapsed().max(PAUSE)).await;
            }
            pruned += this_pass;
            // A short look found everything there was; one that deleted nothing would find the
            // same again (resumed or written meanwhile).
            if found.len() < PASS as usize || this_pass == 0 {
                return Ok(pruned);
            }
        }
    }
}
