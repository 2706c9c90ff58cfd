//! The store as a [`Ledger`]: what each model step spent, one row per step in `spending`, summed
//! by run and by principal's day when a budget asks.

use futures_util::future::BoxFuture;

use super::{
    RunStore,
    conn::{Arg, Columns, Conn},
    rows::signed,
    sql,
    writer::{self, Failure},
};
use crate::{
    BoxError,
    model::{
        Cost,
        budget::{Accounts, Balance, Ledger, Spent, Step},
    },
    runs::LogError,
};

/// What a run (`$1`) and a principal's day (`$2`, `$3`) spent.
const BALANCE: &str = "SELECT \
    (SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT) FROM spending WHERE billed_run = $1) \
        AS run_tokens, \
    (SELECT CAST(COALESCE(SUM(nano_usd), 0) AS BIGINT) FROM spending WHERE billed_run = $1) \
        AS run_nano_usd, \
    (SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT) FROM spending \
        WHERE principal = $2 AND day = $3) AS day_tokens, \
    (SELECT CAST(COALESCE(SUM(nano_usd), 0) AS BIGINT) FROM spending \
        WHERE principal = $2 AND day = $3) AS day_nano_usd";

/// A step's spending, unless the step was charged already.
const CHARGE: &str = "INSERT INTO spending \
    (run_id, turn, billed_run, principal, day, tokens, nano_usd) \
    VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (run_id, turn) DO NOTHING";

fn balance(row: &impl Columns) -> Result<Balance, LogError> {
    let spent = |tokens: &str, nano_usd: &str| -> Result<Spent, LogError> {
        let unsigned = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(Spent::new(
            unsigned(row.number(tokens)?),
            Cost::from_nano_usd(unsigned(row.number(nano_usd)?)),
        ))
    };
    Ok(Balance::new(
        spent("run_tokens", "run_nano_usd")?,
        spent("day_tokens", "day_nano_usd")?,
    ))
}

/// Charges `spent` for `step` (once) in the writer's transaction; the balance after.
pub(super) async fn charge(
    tx: &mut impl Conn,
    step: &Step,
    accounts: &Accounts,
    spent: Spent,
) -> Result<Balance, Failure> {
    let day = signed(accounts.day);
    tx.execute(
        CHARGE,
        &[
            Arg::from(step.run.as_str()),
            Arg::from(i64::from(step.turn)),
            Arg::from(accounts.run.as_str()),
            Arg::from(&*accounts.principal),
            Arg::from(day),
            Arg::from(signed(spent.tokens)),
            Arg::from(signed(spent.cost.nano_usd())),
        ],
    )
    .await?;
    let rows = tx
        .fetch(
            BALANCE,
            &[
                Arg::from(accounts.run.as_str()),
                Arg::from(&*accounts.principal),
                Arg::from(day),
            ],
        )
        .await?;
    Ok(rows.first().map_or(Ok(Balance::default()), balance)?)
}

/// Budgets that hold across every instance on the store and across restarts; see
/// [`BudgetLayer::ledger`](crate::model::budget::BudgetLayer::ledger).
impl Ledger for RunStore {
    fn balance<'a>(&'a self, accounts: &'a Accounts) -> BoxFuture<'a, Result<Balance, BoxError>> {
        Box::pin(async move {
            let row = sqlx::query(BALANCE)
                .bind(accounts.run.as_str())
                .bind(&*accounts.principal)
                .bind(signed(accounts.day))
                .fetch_one(self.reader())
                .await
                .map_err(LogError::from)?;
            Ok(balance(&row)?)
        })
    }

    fn charge<'a>(
        &'a self,
        step: &'a Step,
        accounts: &'a Accounts,
        spent: Spent,
    ) -> BoxFuture<'a, Result<Balance, BoxError>> {
        Box::pin(async move {
            let charged = self
                .ask(
                    |reply| writer::Job::Charge {
                        step: step.clone(),
                        accounts: accounts.clone(),
                        spent,
                        reply,
                    },
                    sql::closed,
                )
                .await;
            Ok(charged?)
        })
    }
}
