//! The store's schema version: the migrations in the crate's `migrations/` directory, applied on
//! open, and a refusal of a store whose schema is newer than this binary knows.
//!
//! A migration is portable SQL, the same on SQLite and PostgreSQL, except in sections where the
//! two must differ (a table's integer key, say): a line `-- [sqlite]` or `-- [postgres]` begins
//! SQL for that database alone, `-- [both]` ends it. Each database runs the file without the
//! other's sections; the checksum recorded is the whole file's, as sqlx reads the directory.

use std::borrow::Cow;

use futures_util::future::BoxFuture;
use sqlx::{
    AnyPool,
    error::BoxDynError,
    migrate::{Migration, MigrationSource, MigrationType, Migrator},
};

use super::{Backend, StoreError};

/// The files of `migrations/`, each `<version>_<description>.sql`, embedded in the binary.
/// sqlx's `migrate!` macro would read the directory at build time, but it brings sqlx's
/// compile-time query checker along: a second sqlx with both database drivers and a second
/// SQLite built for the compiler, in every build of the crate. A test checks that this list is
/// the directory's.
macro_rules! embedded {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!("../../migrations/", $file, ".sql")))),*]
    };
}

const MIGRATIONS: &[(&str, &str)] = embedded![
    "20261123000001_runs",
    "20261124000001_spine",
    "20261125000001_chunks",
    "20261125000002_running_index",
    "20261126000001_principals",
    "20261126000002_cancel",
    "20261126000003_thread_listing",
    "20261126000004_followed",
    "20261129000001_thread_names",
    "20261129000002_run_listing",
    "20261130000001_thread_forks",
    "20261201000001_spending",
    "20261201000002_principal_usage",
    "20261201000003_model_calls",
    "20261202000001_notices",
    "20261202000002_schedules",
    "20261203000001_run_keys",
    "20261204000001_fork_index",
];

/// The embedded migrations for one database, as sqlx reads a directory of them (the same
/// versions, descriptions and checksums, so that stores migrated by either agree).
#[derive(Debug)]
struct Embedded(Backend);

impl Embedded {
    fn migrations(self) -> impl Iterator<Item = Migration> {
        MIGRATIONS.iter().map(move |(file, sql)| {
            let (version, description) = file.split_once('_').expect("`<version>_<description>`");
            let whole = Migration::new(
                version.parse().expect("a migration's version is a number"),
                Cow::Owned(description.replace('_', " ")),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                sql.starts_with("-- no-transaction"),
            );
            Migration {
                sql: for_backend(sql, self.0),
                ..whole
            }
        })
    }
}

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async move { Ok(self.migrations().collect()) })
    }
}

/// `sql` as `backend` runs it: without the lines of the other database's sections (blank, so
/// that an error's line number is the file's). A file without sections is borrowed whole.
fn for_backend(sql: &'static str, backend: Backend) -> Cow<'static, str> {
    if !sql.lines().any(|line| section(line).is_some()) {
        return Cow::Borrowed(sql);
    }
    let mut kept = String::with_capacity(sql.len());
    let mut mine = true;
    for line in sql.lines() {
        if let Some(only) = section(line) {
            mine = only.is_none_or(|only| only == backend);
        } else if mine {
            kept.push_str(line);
        }
        kept.push('\n');
    }
    Cow::Owned(kept)
}

/// A section's opening line: `Some(Some(backend))` for one database's SQL, `Some(None)` for
/// both; `None` for any other line.
fn section(line: &str) -> Option<Option<Backend>> {
    match line.trim_end() {
        "-- [sqlite]" => Some(Some(Backend::Sqlite)),
        "-- [postgres]" => Some(Some(Backend::Postgres)),
        "-- [both]" => Some(None),
        _ => None,
    }
}

/// The latest schema version this binary knows (its last migration's; the versions are the same
/// for both databases).
pub(super) fn known() -> i64 {
    Embedded(Backend::Sqlite)
        .migrations()
        .map(|m| m.version)
        .max()
        .unwrap_or(0)
}

/// The store's schema version: its last applied migration (0 for a new store).
async fn found(pool: &AnyPool, backend: Backend) -> Result<i64, StoreError> {
    let listed = match backend {
        Backend::Sqlite => {
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'"
        }
        Backend::Postgres => {
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name = '_sqlx_migrations'"
        }
    };
    let (tables,): (i64,) = sqlx::query_as(listed).fetch_one(pool).await?;
    if tables == 0 {
        return Ok(0);
    }
    let (version,): (Option<i64>,) =
        sqlx::query_as("SELECT MAX(version) FROM _sqlx_migrations WHERE success = TRUE")
            .fetch_one(pool)
            .await?;
    Ok(version.unwrap_or(0))
}

/// Brings the schema of the store behind `pool` to this binary's version: refused when the
/// store's is newer (written by a later release), migrated (and logged) when it is older.
pub(super) async fn migrate(pool: &AnyPool, backend: Backend) -> Result<(), StoreError> {
    let (found, known) = (found(pool, backend).await?, known());
    if found > known {
        return Err(StoreError::NewerSchema { found, known });
    }
    Migrator::new(Embedded(backend)).await?.run(pool).await?;
    if found != known {
        tracing::info!(from = found, to = known, "the store's schema was migrated");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded migrations are what sqlx reads from `migrations/` (every file, with the same
    /// versions, descriptions and checksums), so a file added there and not here fails.
    #[tokio::test]
    async fn the_embedded_migrations_are_the_directory_as_sqlx_reads_it() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let read = Migrator::new(dir).await.unwrap();
        let embedded = Migrator::new(Embedded(Backend::Postgres)).await.unwrap();
        let summary = |migrator: &Migrator| {
            migrator
                .iter()
                .map(|m| {
                    (
                        m.version,
                        m.description.to_string(),
                        m.checksum.to_vec(),
                        m.no_tx,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(summary(&embedded), summary(&read));
        assert_eq!(read.iter().count(), MIGRATIONS.len());
        assert_eq!(known(), read.iter().map(|m| m.version).max().unwrap());
    }

    /// Each database runs its own sections and the lines of both, each at its line in the file.
    #[test]
    fn a_database_runs_its_own_sections_and_the_shared_lines() {
        let sql = "A;\n-- [sqlite]\nS;\n-- [postgres]\nP;\n-- [both]\nB;\n";
        assert_eq!(for_backend(sql, Backend::Sqlite), "A;\n\nS;\n\n\n\nB;\n");
        assert_eq!(for_backend(sql, Backend::Postgres), "A;\n\n\n\nP;\n\nB;\n");
        assert!(matches!(
            for_backend("A;\n-- [mysql]\n", Backend::Sqlite),
            Cow::Borrowed("A;\n-- [mysql]\n")
        ));
    }
}
