//! Listing threads (an editor's sessions, newest first) and deleting them.

use super::{
    RunStore,
    conn::Columns,
    rows::{from_millis, number, text},
    writer,
};
use crate::{
    id::ThreadId,
    runs::{Deleted, LogError, ThreadCursor, ThreadPage, ThreadQuery, ThreadSummary},
};

impl RunStore {
    /// The threads `query` selects.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    pub(super) async fn list_threads(
        &self,
        query: &ThreadQuery<'_>,
    ) -> Result<ThreadPage, LogError> {
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
    pub(super) async fn remove_thread(&self, thread: &ThreadId) -> Result<Deleted, LogError> {
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
