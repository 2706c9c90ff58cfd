//! The connection the writer's jobs run on, the same SQL for both backends: PostgreSQL through
//! sqlx, in the group's transaction; SQLite through rusqlite, on the writer's own thread.
//!
//! Why not sqlx for SQLite's writes: sqlx runs each SQLite statement on a worker thread and
//! hands it over through channels, two thread switches per statement, and binds parameters by
//! name (a scan of the statement's names per parameter). A group commit of many runs is many
//! statements; on its own thread, rusqlite runs the whole group with cached statements, one
//! hand-over per group.

use std::{collections::HashMap, fmt};

use futures_util::future::{BoxFuture, FutureExt, ready};
use sqlx::{
    Any, Row as _, Transaction,
    any::{AnyRow, AnyTypeInfoKind},
};

use crate::runs::LogError;

/// A parameter of a statement. Nulls are typed: PostgreSQL must know what a `NULL` is.
#[derive(Debug, Clone, Copy)]
pub(super) enum Arg<'a> {
    Text(Option<&'a str>),
    Int(Option<i64>),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(s: &'a str) -> Self {
        Self::Text(Some(s))
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(s: &'a String) -> Self {
        Self::Text(Some(s))
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(s: Option<&'a str>) -> Self {
        Self::Text(s)
    }
}

impl From<i64> for Arg<'_> {
    fn from(n: i64) -> Self {
        Self::Int(Some(n))
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(n: Option<i64>) -> Self {
        Self::Int(n)
    }
}

/// A value read.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Null,
    Int(i64),
    Text(String),
}

/// A row read, by column name.
#[derive(Debug, Default)]
pub(super) struct Row(Vec<(String, Value)>);

impl Row {
    fn value(&self, column: &str) -> Result<&Value, LogError> {
        self.0
            .iter()
            .find(|(name, _)| name == column)
            .map(|(_, value)| value)
            .ok_or_else(|| LogError::Corrupt(format!("no column `{column}`")))
    }
}

/// What the readers and the writer read from a row, whichever driver read it.
pub(super) trait Columns {
    /// A text column that is never `NULL`.
    fn text(&self, column: &str) -> Result<String, LogError> {
        self.optional_text(column)?
            .ok_or_else(|| LogError::Corrupt(format!("`{column}` is NULL")))
    }

    /// A text column.
    fn optional_text(&self, column: &str) -> Result<Option<String>, LogError>;

    /// An integer column that is never `NULL`.
    fn number(&self, column: &str) -> Result<i64, LogError>;

    /// An integer column.
    fn optional_number(&self, column: &str) -> Result<Option<i64>, LogError>;
}

impl Columns for Row {
    fn optional_text(&self, column: &str) -> Result<Option<String>, LogError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            Value::Text(s) => Ok(Some(s.clone())),
            Value::Int(_) => Err(LogError::Corrupt(format!("`{column}` is not text"))),
        }
    }

    fn number(&self, column: &str) -> Result<i64, LogError> {
        self.optional_number(column)?
            .ok_or_else(|| LogError::Corrupt(format!("`{column}` is not an integer")))
    }

    fn optional_number(&self, column: &str) -> Result<Option<i64>, LogError> {
        match self.value(column)? {
            Value::Int(n) => Ok(Some(*n)),
            Value::Null => Ok(None),
            Value::Text(_) => Err(LogError::Corrupt(format!("`{column}` is not an integer"))),
        }
    }
}

impl Columns for AnyRow {
    fn optional_text(&self, column: &str) -> Result<Option<String>, LogError> {
        Ok(self.try_get::<Option<String>, _>(column)?)
    }

    fn number(&self, column: &str) -> Result<i64, LogError> {
        Ok(self.try_get::<i64, _>(column)?)
    }

    fn optional_number(&self, column: &str) -> Result<Option<i64>, LogError> {
        Ok(self.try_get::<Option<i64>, _>(column)?)
    }
}

/// An error of either driver.
#[derive(Debug)]
pub(super) enum DbError {
    Sqlx(sqlx::Error),
    Sqlite(rusqlite::Error),
}

impl DbError {
    /// Whether a unique index refused the write.
    pub(super) fn is_unique_violation(&self) -> bool {
        match self {
            Self::Sqlx(sqlx::Error::Database(e)) => e.is_unique_violation(),
            Self::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                    || e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            }
            _ => false,
        }
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlx(e) => e.fmt(f),
            Self::Sqlite(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DbError {}

impl From<sqlx::Error> for DbError {
    fn from(e: sqlx::Error) -> Self {
        Self::Sqlx(e)
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sqlite(e)
    }
}

/// A connection in a transaction. SQL is written with `$1`, `$2`… parameters.
pub(super) trait Conn {
    /// Runs `sql`; the number of rows it changed.
    fn execute<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg<'a>],
    ) -> BoxFuture<'a, Result<u64, DbError>>;

    /// Runs `sql`; the rows it returned.
    fn fetch<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg<'a>],
    ) -> BoxFuture<'a, Result<Vec<Row>, DbError>>;
}

fn sqlx_query<'a>(
    sql: &'a str,
    args: &'a [Arg<'a>],
) -> sqlx::query::Query<'a, Any, sqlx::any::AnyArguments<'a>> {
    args.iter().fold(sqlx::query(sql), |query, arg| match *arg {
        Arg::Text(s) => query.bind(s),
        Arg::Int(n) => query.bind(n),
    })
}

/// An `AnyRow` as a [`Row`].
fn any_row(row: &AnyRow) -> Result<Row, sqlx::Error> {
    use sqlx::{Column as _, TypeInfo as _};
    let mut values = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let kind = column.type_info().kind();
        let value = match kind {
            AnyTypeInfoKind::Null => Value::Null,
            AnyTypeInfoKind::SmallInt | AnyTypeInfoKind::Integer | AnyTypeInfoKind::BigInt => row
                .try_get::<Option<i64>, _>(i)?
                .map_or(Value::Null, Value::Int),
            _ if column.type_info().is_null() => Value::Null,
            _ => row
                .try_get::<Option<String>, _>(i)?
                .map_or(Value::Null, Value::Text),
        };
        values.push((column.name().to_owned(), value));
    }
    Ok(Row(values))
}

impl Conn for Transaction<'_, Any> {
    fn execute<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg<'a>],
    ) -> BoxFuture<'a, Result<u64, DbError>> {
        async move {
            Ok(sqlx_query(sql, args)
                .execute(&mut **self)
                .await?
                .rows_affected())
        }
        .boxed()
    }

    fn fetch<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg<'a>],
    ) -> BoxFuture<'a, Result<Vec<Row>, DbError>> {
        async move {
            let rows = sqlx_query(sql, args).fetch_all(&mut **self).await?;
            Ok(rows.iter().map(any_row).collect::<Result<_, _>>()?)
        }
        .boxed()
    }
}

/// A SQLite connection of the writer's thread; its answers are ready at once.
pub(super) struct Sqlite {
    conn: rusqlite::Connection,
    /// The statements' SQL with `?N` for `$N`, by their text.
    translated: HashMap<String, String>,
}

impl Sqlite {
    pub(super) fn new(conn: rusqlite::Connection) -> Self {
        Self {
            conn,
            translated: HashMap::new(),
        }
    }

    pub(super) fn batch(&self, sql: &str) -> Result<(), DbError> {
        Ok(self.conn.execute_batch(sql)?)
    }

    /// `sql` prepared (once per text) with `args` bound.
    fn bound(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<rusqlite::CachedStatement<'_>, DbError> {
        if !self.translated.contains_key(sql) {
            // SQLite numbers `$N` parameters in the order they first appear; `?N` is number N.
            self.translated
                .insert(sql.to_owned(), sql.replace('$', "?"));
        }
        let mut statement = self.conn.prepare_cached(&self.translated[sql])?;
        for (i, arg) in args.iter().enumerate() {
            match *arg {
                Arg::Text(s) => statement.raw_bind_parameter(i + 1, s)?,
                Arg::Int(n) => statement.raw_bind_parameter(i + 1, n)?,
            }
        }
        Ok(statement)
    }

    fn run(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, DbError> {
        let mut statement = self.bound(sql, args)?;
        let changed = statement.raw_execute()?;
        Ok(changed as u64)
    }

    fn rows(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<Row>, DbError> {
        let mut statement = self.bound(sql, args)?;
        let names: Vec<String> = statement
            .column_names()
            .iter()
            .map(|n| (*n).to_owned())
            .collect();
        let mut rows = statement.raw_query();
        let mut read = Vec::new();
        while let Some(row) = rows.next()? {
            let mut values = Vec::with_capacity(names.len());
            for (i, name) in names.iter().enumerate() {
                use rusqlite::types::ValueRef;
                let value = match row.get_ref(i)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(n) => Value::Int(n),
                    ValueRef::Real(x) => Value::Text(x.to_string()),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        Value::Text(String::from_utf8_lossy(t).into_owned())
                    }
                };
                values.push((name.clone(), value));
            }
            read.push(Row(values));
        }
        Ok(read)
    }
}

impl Conn for Sqlite {
    fn execute<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg<'a>],
    ) -> BoxFuture<'a, Result<u64, DbError>> {
        ready(self.run(sql, args)).boxed()
    }

    fn fetch<'a>(
        &'a mut self,
        sql: &'a str,
        args: &'a [Arg<'a>],
    ) -> BoxFuture<'a, Result<Vec<Row>, DbError>> {
        ready(self.rows(sql, args)).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_parameters_are_numbered_as_written_not_as_they_appear() {
        let mut conn = Sqlite::new(rusqlite::Connection::open_in_memory().unwrap());
        let rows = conn
            .rows(
                "SELECT $2 AS b, $1 AS a, $2 AS c",
                &["one".into(), 2.into()],
            )
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].text("a").unwrap(), "one");
        assert_eq!(rows[0].number("b").unwrap(), 2);
        assert_eq!(rows[0].number("c").unwrap(), 2);
    }

    #[test]
    fn a_unique_violation_is_told_apart() {
        let mut conn = Sqlite::new(rusqlite::Connection::open_in_memory().unwrap());
        conn.batch("CREATE TABLE t (k TEXT PRIMARY KEY)").unwrap();
        conn.run("INSERT INTO t (k) VALUES ($1)", &["a".into()])
            .unwrap();
        let error = conn
            .run("INSERT INTO t (k) VALUES ($1)", &["a".into()])
            .unwrap_err();
        assert!(error.is_unique_violation(), "{error}");
        let error = conn.run("INSERT INTO nope VALUES (1)", &[]).unwrap_err();
        assert!(!error.is_unique_violation(), "{error}");
    }
}
