//! Listing threads (an editor's sessions, newest first) and deleting them: what every
//! [`RunLog`](super::RunLog) answers.

use std::{fmt, str::FromStr, time::SystemTime};

use crate::id::ThreadId;

/// Which threads [`RunLog::threads`](super::RunLog::threads) lists: those with a workspace (an editor's sessions),
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
    /// When the thread last changed, in milliseconds since the Unix epoch.
    pub(crate) updated_at: i64,
    pub(crate) thread_id: String,
}

impl ThreadCursor {
    /// The point of `thread`, changed last at `updated_at`.
    pub(crate) fn at(updated_at: SystemTime, thread_id: &ThreadId) -> Self {
        Self {
            updated_at: millis(updated_at),
            thread_id: thread_id.to_string(),
        }
    }

    /// Whether a thread of `updated_at` and `thread_id` comes after this point (newest first).
    pub(crate) fn precedes(&self, updated_at: SystemTime, thread_id: &ThreadId) -> bool {
        let at = millis(updated_at);
        at < self.updated_at
            || (at == self.updated_at && thread_id.as_ref() < self.thread_id.as_str())
    }
}

/// `time` in milliseconds since the Unix epoch.
pub(crate) fn millis(time: SystemTime) -> i64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
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

/// What [`RunLog::delete_thread`](super::RunLog::delete_thread) did.
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
