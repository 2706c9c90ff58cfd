//! The store's schema version: the migrations in the crate's `migrations/` directory, applied on
//! open, and a refusal of a store whose schema is newer than this binary knows.

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
];

/// The embedded migrations, as sqlx reads a directory of them (the same versions, descriptions
/// and checksums, so that stores migrated by either agree).
#[derive(Debug)]
struct Embedded;

impl Embedded {
    fn migrations() -> impl Iterator<Item = Migration> {
        MIGRATIONS.iter().map(|(file, sql)| {
            let (version, description) = file.split_once('_').expect("`<version>_<description>`");
            Migration::new(
                version.parse().expect("a migration's version is a number"),
                Cow::Owned(description.replace('_', " ")),
                MigrationType::Simple,
                Cow::Borrowed(sql),
                sql.starts_with("-- no-transaction"),
            )
        })
    }
}

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async { Ok(Self::migrations().collect()) })
    }
}

/// The latest schema version this binary knows (its last migration's).
pub(super) fn known() -> i64 {
    Embedded::migrations().map(|m| m.version).max().unwrap_or(0)
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
    Migrator::new(Embedded).await?.run(pool).await?;
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
        let embedded = Migrator::new(Embedded).await.unwrap();
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
}
