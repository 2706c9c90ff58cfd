//! The SQLite file: its write-ahead log folded into it ([`RunStore::checkpoint`]), a copy
//! taken while it is in use ([`backup`]), and the room left on its disk.

use std::{path::Path, str::FromStr};

use sqlx::sqlite::SqliteConnectOptions;

use super::{
    Backend, COMMIT_TIMEOUT, RunStore, StoreError,
    sql::{create_private, normalize},
};

impl RunStore {
    /// Folds the write-ahead log into the database file and empties it (SQLite's
    /// `wal_checkpoint(TRUNCATE)`), so that the file alone holds every run: what a clean stop
    /// does (`agent-tower serve` calls it once its last run ended). Nothing to do on PostgreSQL.
    ///
    /// # Errors
    ///
    /// When the file cannot be opened, or other connections keep the log in use for longer
    /// than a commit may take.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        let Some(path) = self.file().map(Path::to_owned) else {
            return Ok(());
        };
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| StoreError::File {
            action: "checkpoint",
            path: path.clone(),
            source,
        };
        let file = path.clone();
        let busy = tokio::task::spawn_blocking(move || {
            let conn = rusqlite::Connection::open(&file)?;
            conn.busy_timeout(COMMIT_TIMEOUT)?;
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                row.get::<_, i64>(0)
            })
        })
        .await
        .map_err(|e| failed(e.into()))?
        .map_err(|e| failed(e.into()))?;
        if busy != 0 {
            return Err(failed("the log is still in use".into()));
        }
        Ok(())
    }
}

/// Copies the SQLite store at `url` (`sqlite://path`) to `to`, a new file readable by its owner
/// only, while servers go on using the store: `VACUUM INTO`, a consistent snapshot (every
/// committed run, nothing half-written), compacted. Returns the copy's size in bytes.
///
/// To restore, stop the servers and put the copy in the store's place, without the store's old
/// `-wal` and `-shm` files. A PostgreSQL store is backed up with `pg_dump`.
///
/// # Errors
///
/// When `url` is not a SQLite store, `to` exists already, or the copy fails.
pub async fn backup(url: &str, to: &Path) -> Result<u64, StoreError> {
    let failed = |source: Box<dyn std::error::Error + Send + Sync>| StoreError::File {
        action: "back up",
        path: to.to_owned(),
        source,
    };
    let (url, backend) = normalize(url)?;
    if backend != Backend::Sqlite {
        return Err(failed(
            "a PostgreSQL store is backed up with pg_dump (see docs/deploying.md)".into(),
        ));
    }
    let from = SqliteConnectOptions::from_str(&url)?
        .get_filename()
        .to_owned();
    if !from.exists() {
        return Err(failed(
            format!("there is no store at {}", from.display()).into(),
        ));
    }
    if to.exists() {
        return Err(failed("the file exists already".into()));
    }
    create_private(to).map_err(|e| failed(e.into()))?;
    let into = to.to_owned();
    let copied = tokio::task::spawn_blocking(move || {
        let conn = rusqlite::Connection::open_with_flags(
            &from,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )?;
        conn.busy_timeout(COMMIT_TIMEOUT)?;
        conn.execute("VACUUM INTO ?1", [into.to_string_lossy()])
    })
    .await
    .map_err(|e| failed(e.into()))
    .and_then(|copied| copied.map_err(|e| failed(e.into())));
    if let Err(error) = copied {
        let _ = std::fs::remove_file(to);
        return Err(error);
    }
    Ok(std::fs::metadata(to).map_err(|e| failed(e.into()))?.len())
}

/// Whether the disk holding `file` has `min` bytes free (for the store's user: what is kept for
/// the superuser does not count); an error saying how little it has otherwise. Where free space
/// cannot be read (not a Unix), there is room.
pub(super) fn has_room(file: &Path, min: u64) -> Result<(), crate::runs::LogError> {
    #[cfg(unix)]
    {
        let dir = file.parent().filter(|d| !d.as_os_str().is_empty());
        let stats = rustix::fs::statvfs(dir.unwrap_or(Path::new(".")))
            .map_err(|e| crate::runs::LogError::unavailable(format!("the store's disk: {e}")))?;
        let free = stats.f_bavail.saturating_mul(stats.f_frsize);
        if free < min {
            return Err(crate::runs::LogError::unavailable(format!(
                "the disk holding the store has {free} bytes free, less than the {min} it keeps \
                 free"
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = (file, min);
    Ok(())
}
