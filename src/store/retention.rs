//! Retention: the runs that ended before a time deleted, a few at a time, between the runs' own
//! writes ([`RunStore::prune`]).

use std::time::SystemTime;

use sqlx::Row as _;

use super::{RunStore, rows::millis, writer::Job};
use crate::{id::RunId, runs::LogError};

/// How many runs one group commit deletes at most: a prune never holds the writer for long.
const BATCH: usize = 100;

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
        let cutoff = millis(before);
        let mut pruned = 0;
        loop {
            let found = sqlx::query(
                "SELECT run_id FROM runs WHERE status <> 'running' AND updated_at < $1 \
                 AND run_id NOT IN (SELECT run_id FROM interrupts WHERE status = 'pending') \
                 LIMIT $2",
            )
            .bind(cutoff)
            .bind(PASS)
            .fetch_all(self.reader())
            .await?;
            let found: Vec<RunId> = found
                .iter()
                .map(|row| row.try_get::<String, _>(0).map(RunId::from))
                .collect::<Result<_, _>>()?;
            let mut this_pass = 0;
            for batch in found.chunks(BATCH) {
                this_pass += self
                    .ask(
                        |reply| Job::Prune {
                            runs: batch.to_vec(),
                            before: cutoff,
                            reply,
                        },
                        || Err(LogError::unavailable("the store's writer stopped")),
                    )
                    .await?;
            }
            pruned += this_pass;
            // A short look found every run there was; one that deleted nothing would find the
            // same runs again (they were resumed meanwhile).
            if found.len() < PASS as usize || this_pass == 0 {
                return Ok(pruned);
            }
        }
    }
}
