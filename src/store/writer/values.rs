//! Statements over many rows: a `VALUES` list of the rows of many jobs, one round trip for all
//! of them instead of one per row.
//!
//! The text of such a statement depends on how many rows it carries. To prepare few statements,
//! rows go in statements of 1, 2, 4 … [`MAX_ROWS`] rows: any number of rows is a few of those,
//! and each text is prepared once per connection.

use super::super::conn::{Arg, Conn, DbError, Row};

/// The most rows one statement carries.
const MAX_ROWS: usize = 32;

/// One statement over a `VALUES` list of rows, in its sizes.
pub(super) struct Values {
    /// Parameters of each row.
    columns: usize,
    /// Parameters shared by all rows (`$1…`), numbered before the rows'.
    shared: usize,
    /// The statement for 1, 2, 4 … [`MAX_ROWS`] rows.
    sizes: Vec<String>,
}

impl Values {
    /// `sql` with `{rows}` standing for the rows: `($s+1, …, $s+columns), (…)`, where `s` is the
    /// number of `shared` parameters that every size of the statement takes first.
    pub(super) fn new(sql: &str, shared: usize, columns: usize) -> Self {
        let sizes =
            std::iter::successors(Some(1), |rows| (rows * 2 <= MAX_ROWS).then_some(rows * 2))
                .map(|rows| sql.replace("{rows}", &list(shared, columns, rows)))
                .collect();
        Self {
            columns,
            shared,
            sizes,
        }
    }

    /// Runs the statement over `rows` (each [`columns`](Self::new) parameters, one after the
    /// other) in as few statements as their number takes; the rows changed.
    pub(super) async fn execute(
        &self,
        tx: &mut impl Conn,
        shared: &[Arg<'_>],
        rows: &[Arg<'_>],
    ) -> Result<u64, DbError> {
        let mut changed = 0;
        for (sql, args) in self.pieces(shared, rows) {
            changed += tx.execute(sql, &args).await?;
        }
        Ok(changed)
    }

    /// Runs the statement over `rows`, as [`execute`](Self::execute); the rows it returned.
    pub(super) async fn fetch(
        &self,
        tx: &mut impl Conn,
        shared: &[Arg<'_>],
        rows: &[Arg<'_>],
    ) -> Result<Vec<Row>, DbError> {
        let mut read = Vec::new();
        for (sql, args) in self.pieces(shared, rows) {
            read.extend(tx.fetch(sql, &args).await?);
        }
        Ok(read)
    }

    /// The statements `rows` take, each with its parameters.
    fn pieces<'s, 'r, 'a>(
        &'s self,
        shared: &'r [Arg<'a>],
        rows: &'r [Arg<'a>],
    ) -> impl Iterator<Item = (&'s str, Vec<Arg<'a>>)> + 'r
    where
        's: 'r,
    {
        debug_assert_eq!(shared.len(), self.shared);
        debug_assert_eq!(rows.len() % self.columns, 0);
        let mut rest = rows;
        std::iter::from_fn(move || {
            let left = rest.len() / self.columns;
            if left == 0 {
                return None;
            }
            // The largest size that fits what is left.
            let index = (usize::BITS - 1 - left.min(MAX_ROWS).leading_zeros()) as usize;
            let (these, tail) = rest.split_at((1 << index) * self.columns);
            rest = tail;
            Some((self.sizes[index].as_str(), [shared, these].concat()))
        })
    }
}

/// `($s+1, …), (…)`: `rows` rows of `columns` parameters numbered after `shared`.
fn list(shared: usize, columns: usize, rows: usize) -> String {
    (0..rows)
        .map(|row| {
            let first = shared + row * columns + 1;
            let params: Vec<String> = (first..first + columns).map(|n| format!("${n}")).collect();
            format!("({})", params.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt as _;

    use super::*;
    use crate::store::conn::{Columns, Sqlite};

    #[test]
    fn rows_are_numbered_after_the_shared_parameters() {
        assert_eq!(list(2, 3, 2), "($3, $4, $5), ($6, $7, $8)");
        let values = Values::new("INSERT INTO t VALUES {rows}", 0, 1);
        assert_eq!(values.sizes.len(), 6);
        assert_eq!(values.sizes[1], "INSERT INTO t VALUES ($1), ($2)");
    }

    #[test]
    fn any_number_of_rows_is_written_and_read_in_the_sizes() {
        let mut conn = Sqlite::new(rusqlite::Connection::open_in_memory().unwrap());
        conn.batch("CREATE TABLE t (k INTEGER, tag TEXT)").unwrap();
        let insert = Values::new(
            "INSERT INTO t (k, tag) SELECT column1, $1 FROM (VALUES {rows})",
            1,
            1,
        );
        let select = Values::new(
            "SELECT v.column1 AS k FROM (VALUES {rows}) AS v \
             WHERE EXISTS (SELECT 1 FROM t WHERE t.k = v.column1 AND t.tag = $1)",
            1,
            1,
        );
        for n in [1_i64, 5, 32, 33, 100] {
            conn.batch("DELETE FROM t").unwrap();
            let keys: Vec<Arg<'_>> = (0..n).map(Arg::from).collect();
            let tag = [Arg::from("tag")];
            let changed = insert.execute(&mut conn, &tag, &keys).now_or_never();
            assert_eq!(changed.unwrap().unwrap(), n as u64);
            let asked: Vec<Arg<'_>> = (0..n + 3).map(Arg::from).collect();
            let rows = select.fetch(&mut conn, &tag, &asked).now_or_never();
            let found: Vec<i64> = rows
                .unwrap()
                .unwrap()
                .iter()
                .map(|row| row.number("k").unwrap())
                .collect();
            assert_eq!(found, (0..n).collect::<Vec<_>>());
        }
    }
}
