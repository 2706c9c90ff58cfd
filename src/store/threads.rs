//! Listing threads (an editor's sessions, newest first) and deleting them.

use std::{fmt, str::FromStr, time::SystemTime};

use super::{
    RunStore,
    conn::Columns,
    rows::{from_millis, number, text},
    writer,
};
use crate::{id::ThreadId, runs::LogError};

/// Which threads [`RunStore::threads`] lists: those with a workspace (an editor's sessions),
/// newest first.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct ThreadQuery<'a> {
    /// Only this principal's (`None`: everyone's).
    pub principal: Option<&'a str>,
    /// Only those working in this directory.
    pub workspace: Option<&'a str>,
    /// After this point of an earlier page.
    pub after: Option<&'a ThreadCursor>,
    /// At most this many (at least 1, at most 1,000).
    pub limit: usize,
}

impl<'a> ThreadQuery<'a> {
    /// The first `limit` threads, everyone's, in any workspace.
    #[must_use]
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// Only `principal`'s (`None`: everyone's).
    #[must_use]
    pub fn principal(mut self, principal: Option<&'a str>) -> Self {
        self.principal = principal;
        self
    }

    /// Only those working in `workspace` (`None`: any).
    #[must_use]
    pub fn workspace(mut self, workspace: Option<&'a str>) -> Self {
        self.workspace = workspace;
        self
    }

    /// After `cursor` (`None`: from the newest).
    #[must_use]
    pub fn after(mut self, cursor: Option<&'a ThreadCursor>) -> Self {
        self.after = cursor;
        self
    }
}

/// One listed thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSummary {
    /// The thread.
    pub thread_id: ThreadId,
    /// Whom it belongs to.
    pub principal: Option<String>,
    /// The first line of its first prompt.
    pub title: Option<String>,
    /// The directory it works in.
    pub workspace: String,
    /// When its conversation last changed.
    pub updated_at: SystemTime,
}

/// A page of threads, and where the next one starts (`None`: this was the last).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadPage {
    /// The threads, newest first.
    pub threads: Vec<ThreadSummary>,
    /// Where the next page starts.
    pub next: Option<ThreadCursor>,
}

/// A point in the list of threads: the last one of a page. Written and read as opaque text
/// (`"{updated_at}:{thread_id}"`) for clients to send back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadCursor {
    updated_at: i64,
    thread_id: String,
}

impl fmt::Display for ThreadCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.updated_at, self.thread_id)
    }
}

/// A cursor that is not one [`ThreadPage::next`] gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidCursor;

impl fmt::Display for InvalidCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a cursor of this list")
    }
}

impl std::error::Error for InvalidCursor {}

impl FromStr for ThreadCursor {
    type Err = InvalidCursor;

    fn from_str(text: &str) -> Result<Self, InvalidCursor> {
        let (updated_at, thread_id) = text.split_once(':').ok_or(InvalidCursor)?;
        Ok(Self {
            updated_at: updated_at.parse().map_err(|_| InvalidCursor)?,
            thread_id: thread_id.to_owned(),
        })
    }
}

/// What [`RunStore::delete_thread`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Deleted {
    /// The thread, its runs, their events and its interrupts are gone.
    Deleted,
    /// A run of the thread is running: nothing was deleted.
    Busy,
    /// There is no such thread.
    Unknown,
}

impl RunStore {
    /// The threads `query` selects.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    pub async fn threads(&self, query: &ThreadQuery<'_>) -> Result<ThreadPage, LogError> {
        let limit = query.limit.clamp(1, 1_000);
        let mut sql = String::from(
            "SELECT thread_id, principal, title, workspace, updated_at FROM threads \
             WHERE workspace IS NOT NULL",
        );
        let mut n = 0;
        let mut param = |sql: &mut String, clause: &str| {
            n += 1;
            sql.push_str(&clause.replace('?', &format!("${n}")));
        };
        if query.principal.is_some() {
            param(&mut sql, " AND principal = ?");
        }
        if query.workspace.is_some() {
            param(&mut sql, " AND workspace = ?");
        }
        if query.after.is_some() {
            param(&mut sql, " AND (updated_at < ?");
            param(&mut sql, " OR (updated_at = ?");
            param(&mut sql, " AND thread_id < ?))");
        }
        sql.push_str(&format!(
            " ORDER BY updated_at DESC, thread_id DESC LIMIT {}",
            limit + 1
        ));
        let mut select = sqlx::query(&sql);
        if let Some(principal) = query.principal {
            select = select.bind(principal);
        }
        if let Some(workspace) = query.workspace {
            select = select.bind(workspace);
        }
        if let Some(after) = query.after {
            select = select
                .bind(after.updated_at)
                .bind(after.updated_at)
                .bind(after.thread_id.as_str());
        }
        let rows = select.fetch_all(self.reader()).await?;
        let mut threads = Vec::with_capacity(rows.len().min(limit));
        let mut next = None;
        for row in rows.iter().take(limit) {
            let updated_at = number(row, "updated_at")?;
            let thread_id = text(row, "thread_id")?;
            next = Some(ThreadCursor {
                updated_at,
                thread_id: thread_id.clone(),
            });
            threads.push(ThreadSummary {
                thread_id: ThreadId::from(thread_id.as_str()),
                principal: row.optional_text("principal")?,
                title: row.optional_text("title")?,
                workspace: text(row, "workspace")?,
                updated_at: from_millis(updated_at),
            });
        }
        let more = rows.len() > limit;
        Ok(ThreadPage {
            threads,
            next: next.filter(|_| more),
        })
    }

    /// Deletes `thread` with its runs, their events and its interrupts, unless one of its runs
    /// is running.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    pub async fn delete_thread(&self, thread: &ThreadId) -> Result<Deleted, LogError> {
        self.ask(
            |reply| writer::Job::DeleteThread {
                thread: thread.clone(),
                reply,
            },
            || Err(LogError::unavailable("the store's writer stopped")),
        )
        .await
    }
}
