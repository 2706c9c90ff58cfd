//! Listing threads and runs (the most recently changed first); naming, archiving and deleting
//! threads.

use super::{
    RunStore,
    conn::Columns,
    rows::{RUN_COLUMNS, from_millis, millis, number, run_record, text},
    writer,
};
use crate::{
    id::{MessageId, ThreadId},
    runs::{
        Deleted, ForkedFrom, LogError, RunPage, RunQuery, ThreadChange, ThreadPage, ThreadQuery,
        ThreadSummary, page_end,
    },
};

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// `sql`, with the parameters of `query`'s filters bound, in the order `list_runs` writes them.
fn bind_filters<'q>(mut sql: AnyQuery<'q>, query: &RunQuery<'_>) -> AnyQuery<'q> {
    if let Some(principal) = query.principal {
        sql = sql.bind(principal.to_owned());
    }
    if let Some(thread) = query.thread {
        sql = sql.bind(thread.to_string());
    }
    if let Some(status) = query.status {
        sql = sql.bind(status.as_str());
    }
    if let Some(time) = query.changed_after {
        sql = sql.bind(millis(time));
    }
    sql
}

/// How a thread is listed: its name, else its title (the first line of its first prompt).
const SUMMARY: &str = "SELECT thread_id, principal, COALESCE(name, title) AS title, archived, workspace, updated_at, \
     forked_from, forked_at FROM threads";

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
        let mut sql = format!("{SUMMARY} WHERE 1 = 1");
        let mut n = 0;
        let mut param = |sql: &mut String, clause: &str| {
            n += 1;
            sql.push_str(&clause.replace('?', &format!("${n}")));
        };
        if query.sessions {
            sql.push_str(" AND workspace IS NOT NULL");
        }
        if query.thread.is_some() {
            param(&mut sql, " AND thread_id = ?");
        }
        if query.forks_of.is_some() {
            param(&mut sql, " AND forked_from = ?");
        }
        if query.principal.is_some() {
            param(&mut sql, " AND principal = ?");
        }
        if query.workspace.is_some() {
            param(&mut sql, " AND workspace = ?");
        }
        if query.archived.is_some() {
            param(&mut sql, " AND archived = ?");
        }
        let search = query.search.filter(|text| !text.is_empty()).map(like);
        if search.is_some() {
            param(
                &mut sql,
                " AND LOWER(COALESCE(name, title)) LIKE ? ESCAPE '\\'",
            );
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
        if let Some(thread) = query.thread {
            select = select.bind(thread.as_str());
        }
        if let Some(forked) = query.forks_of {
            select = select.bind(forked.as_str());
        }
        if let Some(principal) = query.principal {
            select = select.bind(principal);
        }
        if let Some(workspace) = query.workspace {
            select = select.bind(workspace);
        }
        if let Some(archived) = query.archived {
            select = select.bind(i64::from(archived));
        }
        if let Some(search) = search {
            select = select.bind(search);
        }
        if let Some(after) = query.after {
            select = select
                .bind(after.updated_at)
                .bind(after.updated_at)
                .bind(after.id.as_str());
        }
        let rows = select.fetch_all(self.reader()).await?;
        let mut threads = rows.iter().map(summary).collect::<Result<Vec<_>, _>>()?;
        let next = page_end(&mut threads, limit, |t| (t.updated_at, &t.thread_id));
        Ok(ThreadPage { threads, next })
    }

    /// The runs `query` selects.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    pub(super) async fn list_runs(&self, query: &RunQuery<'_>) -> Result<RunPage, LogError> {
        let limit = query.limit.clamp(1, 1_000);
        let mut filters = String::new();
        let mut n = 0;
        let mut param = |sql: &mut String, clause: &str| {
            n += 1;
            sql.push_str(&clause.replace('?', &format!("${n}")));
        };
        for (given, clause) in [
            (query.principal.is_some(), " AND principal = ?"),
            (query.thread.is_some(), " AND thread_id = ?"),
            (query.status.is_some(), " AND status = ?"),
            (query.changed_after.is_some(), " AND updated_at > ?"),
        ] {
            if given {
                param(&mut filters, clause);
            }
        }
        let count = format!("SELECT COUNT(*) AS n FROM runs WHERE 1 = 1{filters}");
        let total = bind_filters(sqlx::query(&count), query)
            .fetch_one(self.reader())
            .await?;
        let total = u64::try_from(number(&total, "n")?).unwrap_or_default();
        let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE 1 = 1{filters}");
        if query.after.is_some() {
            param(&mut sql, " AND (updated_at < ?");
            param(&mut sql, " OR (updated_at = ?");
            param(&mut sql, " AND run_id < ?))");
        }
        sql.push_str(&format!(
            " ORDER BY updated_at DESC, run_id DESC LIMIT {}",
            limit + 1
        ));
        let mut select = bind_filters(sqlx::query(&sql), query);
        if let Some(after) = query.after {
            select = select
                .bind(after.updated_at)
                .bind(after.updated_at)
                .bind(after.id.clone());
        }
        let rows = select.fetch_all(self.reader()).await?;
        let mut runs = rows.iter().map(run_record).collect::<Result<Vec<_>, _>>()?;
        let next = page_end(&mut runs, limit, |run| (run.updated_at, &run.run_id));
        Ok(RunPage { runs, next, total })
    }

    /// Names, renames or archives `thread`; its listing after the change.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    pub(super) async fn change(
        &self,
        thread: &ThreadId,
        change: &ThreadChange,
    ) -> Result<Option<ThreadSummary>, LogError> {
        let changed = self
            .ask(
                |reply| writer::Job::ChangeThread {
                    thread: thread.clone(),
                    change: change.clone(),
                    reply,
                },
                || Err(LogError::unavailable("the store's writer stopped")),
            )
            .await?;
        if !changed {
            return Ok(None);
        }
        let row = sqlx::query(&format!("{SUMMARY} WHERE thread_id = $1"))
            .bind(thread.as_str())
            .fetch_optional(self.reader())
            .await?;
        row.as_ref().map(summary).transpose()
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

/// A row of [`SUMMARY`].
fn summary(row: &sqlx::any::AnyRow) -> Result<ThreadSummary, LogError> {
    Ok(ThreadSummary {
        thread_id: ThreadId::from(text(row, "thread_id")?.as_str()),
        principal: row.optional_text("principal")?,
        title: row.optional_text("title")?,
        archived: number(row, "archived")? != 0,
        workspace: row.optional_text("workspace")?,
        updated_at: from_millis(number(row, "updated_at")?),
        forked_from: match row.optional_text("forked_from")? {
            Some(thread) => Some(ForkedFrom::new(
                ThreadId::from(thread),
                row.optional_text("forked_at")?.map(MessageId::from),
            )),
            None => None,
        },
    })
}

/// The `LIKE` pattern of titles holding `text` in letters of either case (its `%`, `_` and `\`
/// taken as themselves).
fn like(text: &str) -> String {
    let mut pattern = String::from("%");
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}
