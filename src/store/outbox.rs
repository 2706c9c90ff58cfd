//! The store as an [`Outbox`]: runs' notices in `notices`, kept in the transaction of their run's
//! end, claimed for a while by the instance that attempts them (another claims them once that
//! while is over), settled by it.

use std::time::{Duration, SystemTime};

use futures_util::future::BoxFuture;

use super::{
    RunStore,
    conn::{Arg, Columns, Conn, DbError},
    rows::{from_millis, millis},
    sql,
    writer::{self, Failure},
};
use crate::id::RunId;
use crate::runs::{Claimed, LogError, Notice, NoticeRecord, NoticeStatus, Outbox, Settle};

/// A notice due at `$1` that nobody holds.
const DUE: &str = "status = 'pending' AND next_at <= $1 AND held_until <= $1";

/// The columns a notice is read back from.
const COLUMNS: &str = "notice_id, run_id, url, kind, body, status, attempts, created_at, \
    updated_at, last_error";

/// Keeps `notices`, due at once, in the writer's transaction of their run's end.
pub(super) async fn keep(
    tx: &mut impl Conn,
    notices: &[Notice],
    now: SystemTime,
) -> Result<(), DbError> {
    for notice in notices {
        tx.execute(
            "INSERT INTO notices (notice_id, run_id, url, kind, body, status, attempts, next_at, \
             held_until, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6, $6, $6) ON CONFLICT DO NOTHING",
            &[
                Arg::from(notice.id.as_str()),
                Arg::from(notice.run_id.as_str()),
                Arg::from(notice.url.as_str()),
                Arg::from(notice.kind.as_str()),
                Arg::from(notice.body.as_str()),
                Arg::from(millis(now)),
            ],
        )
        .await?;
    }
    Ok(())
}

/// Claims up to `max` notices due at `now` that nobody holds (the longest due first; a run's
/// in the order its end left them), for `hold`, in the writer's transaction. On PostgreSQL, an instance whose claim meets another's committed first skips
/// the rows it took: the update's conditions are checked again on the rows as they are then.
pub(super) async fn claim(
    tx: &mut impl Conn,
    max: usize,
    hold: Duration,
    now: SystemTime,
) -> Result<Vec<Claimed>, Failure> {
    let (now, until) = (millis(now), millis(now + hold));
    let rows = tx
        .fetch(
            &format!(
                "UPDATE notices SET held_until = $2, attempts = attempts + 1 \
                 WHERE notice_id IN (SELECT notice_id FROM notices WHERE {DUE} \
                 ORDER BY next_at, notice_id LIMIT $3) AND {DUE} RETURNING {COLUMNS}, next_at"
            ),
            &[
                Arg::from(now),
                Arg::from(until),
                Arg::from(i64::try_from(max).unwrap_or(i64::MAX)),
            ],
        )
        .await?;
    let mut claimed = rows
        .iter()
        .map(|row| {
            let record = record(row)?;
            Ok((
                (row.number("next_at")?, record.notice.id.clone()),
                Claimed {
                    notice: record.notice,
                    attempt: record.attempts,
                },
            ))
        })
        .collect::<Result<Vec<_>, LogError>>()?;
    claimed.sort_by(|(a, _), (b, _)| a.cmp(b));
    Ok(claimed.into_iter().map(|(_, claimed)| claimed).collect())
}

/// Records what became of the attempt at notice `id`, in the writer's transaction.
pub(super) async fn settle(
    tx: &mut impl Conn,
    id: &str,
    settle: &Settle,
    now: SystemTime,
) -> Result<(), DbError> {
    let (status, next_at, error) = match settle {
        Settle::Delivered => (NoticeStatus::Delivered, now, None),
        Settle::Retry { at, error } => (NoticeStatus::Pending, *at, Some(error.as_str())),
        Settle::Failed { error } => (NoticeStatus::Failed, now, Some(error.as_str())),
    };
    tx.execute(
        "UPDATE notices SET status = $2, next_at = $3, held_until = $4, updated_at = $4, \
         last_error = COALESCE($5, last_error) WHERE notice_id = $1 AND status = 'pending'",
        &[
            Arg::from(id),
            Arg::from(status.as_str()),
            Arg::from(millis(next_at)),
            Arg::from(millis(now)),
            Arg::from(error),
        ],
    )
    .await?;
    Ok(())
}

fn record(row: &impl Columns) -> Result<NoticeRecord, LogError> {
    let status = row.text("status")?;
    Ok(NoticeRecord {
        notice: Notice {
            id: row.text("notice_id")?,
            run_id: RunId::from(row.text("run_id")?),
            url: row.text("url")?,
            kind: row.text("kind")?,
            body: row.text("body")?,
        },
        status: NoticeStatus::parse(&status)
            .ok_or_else(|| LogError::Corrupt(format!("a notice's status `{status}`")))?,
        attempts: u32::try_from(row.number("attempts")?).unwrap_or(u32::MAX),
        created_at: from_millis(row.number("created_at")?),
        updated_at: from_millis(row.number("updated_at")?),
        last_error: row.optional_text("last_error")?,
    })
}

/// Notices that every instance on the store delivers, kept with their runs' ends (see
/// [`Outbox`]).
impl Outbox for RunStore {
    fn claim(&self, max: usize, hold: Duration) -> BoxFuture<'_, Result<Vec<Claimed>, LogError>> {
        Box::pin(async move {
            // Read first: a claim is a write, and an idle outbox is looked at every second.
            let sql = format!("SELECT notice_id FROM notices WHERE {DUE} LIMIT 1");
            let due = sqlx::query(&sql)
                .bind(millis(SystemTime::now()))
                .fetch_optional(self.reader())
                .await?;
            if due.is_none() {
                return Ok(Vec::new());
            }
            self.ask(
                move |reply| writer::Job::ClaimNotices { max, hold, reply },
                sql::closed,
            )
            .await
        })
    }

    fn settle<'a>(
        &'a self,
        id: &'a str,
        settle: &'a Settle,
    ) -> BoxFuture<'a, Result<(), LogError>> {
        Box::pin(self.ask(
            move |reply| writer::Job::SettleNotice {
                id: id.to_owned(),
                settle: settle.clone(),
                reply,
            },
            sql::closed,
        ))
    }

    fn notices<'a>(
        &'a self,
        run: Option<&'a RunId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<NoticeRecord>, LogError>> {
        Box::pin(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let order = "ORDER BY created_at DESC, notice_id DESC";
            let rows = match run {
                Some(run) => {
                    let sql =
                        format!("SELECT {COLUMNS} FROM notices WHERE run_id = $1 {order} LIMIT $2");
                    sqlx::query(&sql)
                        .bind(run.as_str())
                        .bind(limit)
                        .fetch_all(self.reader())
                        .await?
                }
                None => {
                    let sql = format!("SELECT {COLUMNS} FROM notices {order} LIMIT $1");
                    sqlx::query(&sql)
                        .bind(limit)
                        .fetch_all(self.reader())
                        .await?
                }
            };
            rows.iter().map(record).collect()
        })
    }
}
