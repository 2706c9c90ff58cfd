//! The store's schema version: the migrations in the crate's `migrations/` directory, applied on
//! open, and a refusal of a store whose schema is newer than this binary knows.

use sqlx::AnyPool;

use super::{Backend, StoreError};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The latest schema version this binary knows (its last migration's).
pub(super) fn known() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
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
    MIGRATOR.run(pool).await?;
    if found != known {
        tracing::info!(from = found, to = known, "the store's schema was migrated");
    }
    Ok(())
}
