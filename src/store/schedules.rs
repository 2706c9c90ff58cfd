//! The store as a [`ScheduleBook`]: schedules in `schedules`, each occurrence taken by the one
//! instance whose update moved its `next_at` on from the time it read.

use std::time::SystemTime;

use futures_util::future::BoxFuture;

use super::{
    RunStore,
    conn::{Arg, Columns, Conn, DbError},
    rows::{from_millis, millis},
    sql, writer,
};
use crate::{
    id::RunId,
    runs::{LogError, ScheduleBook, ScheduleRecord},
};

/// What a write to the schedules does.
#[derive(Debug)]
pub(super) enum Change {
    Put(ScheduleRecord),
    Advance {
        name: String,
        from: SystemTime,
        to: Option<SystemTime>,
        run: Option<RunId>,
    },
    Remove(String),
}

/// Does `change` in the writer's transaction: whether it changed a schedule.
pub(super) async fn change(
    tx: &mut impl Conn,
    change: &Change,
    now: SystemTime,
) -> Result<bool, DbError> {
    let changed = match change {
        Change::Put(schedule) => {
            let spec = schedule.spec.to_string();
            tx.execute(
                "INSERT INTO schedules (name, spec, next_at, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, \
                 next_at = CASE WHEN schedules.spec = excluded.spec THEN schedules.next_at \
                 ELSE excluded.next_at END, updated_at = excluded.updated_at",
                &[
                    Arg::from(schedule.name.as_str()),
                    Arg::from(spec.as_str()),
                    Arg::from(schedule.next_at.map(millis)),
                    Arg::from(millis(now)),
                ],
            )
            .await?
        }
        Change::Advance {
            name,
            from,
            to,
            run,
        } => {
            tx.execute(
                "UPDATE schedules SET next_at = $3, last_at = $2, last_run = $4, updated_at = $5 \
                 WHERE name = $1 AND next_at = $2",
                &[
                    Arg::from(name.as_str()),
                    Arg::from(millis(*from)),
                    Arg::from(to.map(millis)),
                    Arg::from(run.as_ref().map(RunId::as_str)),
                    Arg::from(millis(now)),
                ],
            )
            .await?
        }
        Change::Remove(name) => {
            tx.execute(
                "DELETE FROM schedules WHERE name = $1",
                &[Arg::from(name.as_str())],
            )
            .await?
        }
    };
    Ok(changed > 0)
}

fn record(row: &impl Columns) -> Result<ScheduleRecord, LogError> {
    let spec = row.text("spec")?;
    let at = |column: &str| -> Result<Option<SystemTime>, LogError> {
        Ok(row.optional_number(column)?.map(from_millis))
    };
    Ok(ScheduleRecord {
        name: row.text("name")?,
        spec: serde_json::from_str(&spec)
            .map_err(|e| LogError::Corrupt(format!("a schedule's spec: {e}")))?,
        next_at: at("next_at")?,
        last: at("last_at")?.map(|last| {
            let run = row
                .optional_text("last_run")
                .ok()
                .flatten()
                .map(RunId::from);
            (last, run)
        }),
    })
}

const COLUMNS: &str = "name, spec, next_at, last_at, last_run";

/// Schedules every instance on the store shares (see [`ScheduleBook`]).
impl ScheduleBook for RunStore {
    fn put<'a>(&'a self, schedule: &'a ScheduleRecord) -> BoxFuture<'a, Result<(), LogError>> {
        Box::pin(async move {
            self.ask(
                |reply| writer::Job::Schedule {
                    change: Change::Put(schedule.clone()),
                    reply,
                },
                sql::closed,
            )
            .await
            .map(drop)
        })
    }

    fn due(
        &self,
        now: SystemTime,
        max: usize,
    ) -> BoxFuture<'_, Result<Vec<ScheduleRecord>, LogError>> {
        Box::pin(async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM schedules WHERE next_at IS NOT NULL AND next_at <= $1 \
                 ORDER BY next_at, name LIMIT $2"
            );
            let rows = sqlx::query(&sql)
                .bind(millis(now))
                .bind(i64::try_from(max).unwrap_or(i64::MAX))
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(record).collect()
        })
    }

    fn advance<'a>(
        &'a self,
        name: &'a str,
        from: SystemTime,
        to: Option<SystemTime>,
        run: Option<&'a RunId>,
    ) -> BoxFuture<'a, Result<bool, LogError>> {
        Box::pin(self.ask(
            move |reply| writer::Job::Schedule {
                change: Change::Advance {
                    name: name.to_owned(),
                    from,
                    to,
                    run: run.cloned(),
                },
                reply,
            },
            sql::closed,
        ))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<ScheduleRecord>, LogError>> {
        Box::pin(async move {
            let sql = format!("SELECT {COLUMNS} FROM schedules ORDER BY name");
            let rows = sqlx::query(&sql).fetch_all(self.reader()).await?;
            rows.iter().map(record).collect()
        })
    }

    fn remove<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<bool, LogError>> {
        Box::pin(self.ask(
            move |reply| writer::Job::Schedule {
                change: Change::Remove(name.to_owned()),
                reply,
            },
            sql::closed,
        ))
    }
}
