//! The store as a [`CallWindow`]: a model's calls and tokens of the last minute in
//! `model_calls`, so that the rate limits of every instance on the store count together.

use std::time::{Duration, SystemTime};

use futures_util::future::BoxFuture;

use super::{
    RunStore,
    conn::{Arg, Columns, Conn, DbError},
    rows::millis,
    sql,
    writer::{self, Failure},
};
use crate::{
    BoxError,
    model::rate_limit::{CallWindow, MinuteLimits},
    runs::LogError,
};

/// A minute, in ms.
const MINUTE_MS: i64 = 60_000;

/// Counts a call to `model` at `now` if the last minute leaves room under `limits`: `None`;
/// else how long until its oldest call leaves the minute. In the writer's transaction.
pub(super) async fn admit(
    tx: &mut impl Conn,
    model: &str,
    limits: MinuteLimits,
    now: SystemTime,
) -> Result<Option<Duration>, Failure> {
    let now = millis(now);
    tx.execute(
        "DELETE FROM model_calls WHERE model = $1 AND at <= $2",
        &[Arg::from(model), Arg::from(now - MINUTE_MS)],
    )
    .await?;
    let rows = tx
        .fetch(
            "SELECT CAST(COALESCE(SUM(requests), 0) AS BIGINT) AS requests, \
             CAST(COALESCE(SUM(tokens), 0) AS BIGINT) AS tokens, \
             CAST(COALESCE(MIN(at), 0) AS BIGINT) AS oldest \
             FROM model_calls WHERE model = $1",
            &[Arg::from(model)],
        )
        .await?;
    let row = rows
        .first()
        .ok_or_else(|| LogError::Corrupt("no sums of model_calls".to_owned()))?;
    let (requests, tokens, oldest) = (
        row.number("requests")?,
        row.number("tokens")?,
        row.number("oldest")?,
    );
    let full = limits
        .requests
        .is_some_and(|limit| requests >= i64::from(limit))
        || limits
            .tokens
            .is_some_and(|limit| tokens >= i64::try_from(limit).unwrap_or(i64::MAX));
    if full {
        let left = (oldest + MINUTE_MS - now).max(1);
        return Ok(Some(Duration::from_millis(left.unsigned_abs())));
    }
    tx.execute(
        "INSERT INTO model_calls (model, at, requests, tokens) VALUES ($1, $2, 1, 0)",
        &[Arg::from(model), Arg::from(now)],
    )
    .await?;
    Ok(None)
}

/// Counts `tokens` a call to `model` used at `now`. In the writer's transaction.
pub(super) async fn used(
    tx: &mut impl Conn,
    model: &str,
    tokens: u64,
    now: SystemTime,
) -> Result<(), DbError> {
    tx.execute(
        "INSERT INTO model_calls (model, at, requests, tokens) VALUES ($1, $2, 0, $3)",
        &[
            Arg::from(model),
            Arg::from(millis(now)),
            Arg::from(super::rows::signed(tokens)),
        ],
    )
    .await
    .map(drop)
}

/// Rate limits that hold for every instance on the store; see
/// [`RateLimitLayer::shared`](crate::model::rate_limit::RateLimitLayer::shared). Instances
/// count by their own clocks: keep them in time (NTP).
impl CallWindow for RunStore {
    fn admit<'a>(
        &'a self,
        model: &'a str,
        limits: MinuteLimits,
    ) -> BoxFuture<'a, Result<Option<Duration>, BoxError>> {
        Box::pin(async move {
            let answer = self
                .ask(
                    |reply| writer::Job::AdmitCall {
                        model: model.to_owned(),
                        limits,
                        reply,
                    },
                    sql::closed,
                )
                .await;
            Ok(answer?)
        })
    }

    fn used<'a>(&'a self, model: &'a str, tokens: u64) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            let answer = self
                .ask(
                    |reply| writer::Job::UsedTokens {
                        model: model.to_owned(),
                        tokens,
                        reply,
                    },
                    sql::closed,
                )
                .await;
            Ok(answer?)
        })
    }
}
