//! Listing threads (newest first), naming, archiving and deleting them: what every
//! [`RunLog`](super::RunLog) answers.

use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

use super::{fork::ForkedFrom, pages::ThreadCursor};
use crate::id::ThreadId;

/// Which threads [`RunLog::threads`](super::RunLog::threads) lists, newest first (by when their
/// conversation last changed).
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct ThreadQuery<'a> {
    /// Only this principal's (`None`: everyone's).
    pub principal: Option<&'a str>,
    /// Only editors' sessions (threads with a workspace), in this directory when `workspace`
    /// names one.
    pub sessions: bool,
    /// Only those working in this directory.
    pub workspace: Option<&'a str>,
    /// Archived ones (`Some(true)`), the others (`Some(false)`), or both (`None`).
    pub archived: Option<bool>,
    /// Only those whose title holds this text (letters of either case; an empty text selects
    /// every thread).
    pub search: Option<&'a str>,
    /// Only this thread (how a follower of the list reads a changed thread's listing).
    pub thread: Option<&'a ThreadId>,
    /// Only the forks of this thread (its branches).
    pub forks_of: Option<&'a ThreadId>,
    /// After this point of an earlier page.
    pub after: Option<&'a ThreadCursor>,
    /// At most this many (at least 1, at most 1,000).
    pub limit: usize,
}

impl<'a> ThreadQuery<'a> {
    /// The first `limit` threads, everyone's, archived or not, with a workspace or none.
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

    /// Only editors' sessions, those working in `workspace` when it is `Some`.
    #[must_use]
    pub fn sessions(mut self, workspace: Option<&'a str>) -> Self {
        self.sessions = true;
        self.workspace = workspace;
        self
    }

    /// Archived ones (`Some(true)`), the others (`Some(false)`), or both (`None`).
    #[must_use]
    pub fn archived(mut self, archived: Option<bool>) -> Self {
        self.archived = archived;
        self
    }

    /// Only those whose title holds `text`, in letters of either case.
    #[must_use]
    pub fn search(mut self, text: Option<&'a str>) -> Self {
        self.search = text;
        self
    }

    /// Only `thread`, if the rest of the query selects it.
    #[must_use]
    pub fn thread(mut self, thread: &'a ThreadId) -> Self {
        self.thread = Some(thread);
        self
    }

    /// Only the forks of `thread`.
    #[must_use]
    pub fn forks_of(mut self, thread: &'a ThreadId) -> Self {
        self.forks_of = Some(thread);
        self
    }

    /// After `cursor` (`None`: from the newest).
    #[must_use]
    pub fn after(mut self, cursor: Option<&'a ThreadCursor>) -> Self {
        self.after = cursor;
        self
    }

    /// Whether a thread of `title` and `archived` is one this query selects (what a backend
    /// that filters in memory asks).
    pub(crate) fn selects(&self, title: Option<&str>, archived: bool) -> bool {
        self.archived.is_none_or(|wanted| wanted == archived)
            && self.search.is_none_or(|text| {
                text.is_empty()
                    || title
                        .is_some_and(|title| title.to_lowercase().contains(&text.to_lowercase()))
            })
    }
}

/// One listed thread.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ThreadSummary {
    /// The thread.
    pub thread_id: ThreadId,
    /// Whom it belongs to.
    pub principal: Option<String>,
    /// The name it was given, else the first line of its first prompt.
    pub title: Option<String>,
    /// Whether it is archived (kept, out of the everyday list).
    pub archived: bool,
    /// The directory it works in (an editor's session).
    pub workspace: Option<String>,
    /// When its conversation last changed.
    pub updated_at: SystemTime,
    /// The thread it is a fork of, and where.
    pub forked_from: Option<ForkedFrom>,
}

/// A change to a thread's listing, for [`RunLog::change_thread`](super::RunLog::change_thread):
/// what is `None` stays as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadChange {
    /// A name (`Some(Some(..))`), or back to the first line of its first prompt
    /// (`Some(None)`).
    pub name: Option<Option<String>>,
    /// A name for a thread nobody named (a model's title): kept only while the thread has no
    /// name, so that it never replaces one a person gave, even a moment before.
    pub suggested_name: Option<String>,
    /// Archived or not.
    pub archived: Option<bool>,
}

impl ThreadChange {
    /// No change.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The thread is called `name` (`None`: by the first line of its first prompt again).
    #[must_use]
    pub fn name(mut self, name: Option<String>) -> Self {
        self.name = Some(name);
        self
    }

    /// The thread is called `name` unless it has a name already (see
    /// [`suggested_name`](Self::suggested_name)).
    #[must_use]
    pub fn suggested_name(mut self, name: String) -> Self {
        self.suggested_name = Some(name);
        self
    }

    /// The thread is archived, or no longer.
    #[must_use]
    pub fn archived(mut self, archived: bool) -> Self {
        self.archived = Some(archived);
        self
    }
}

/// The longest name a thread may be given, in characters.
pub const MAX_TITLE: usize = 200;

/// Why a name cannot be a thread's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidTitle {
    /// Nothing but white space.
    Empty,
    /// Longer than [`MAX_TITLE`] characters.
    TooLong,
    /// With control characters (a line break, say).
    ControlCharacters,
}

impl std::fmt::Display for InvalidTitle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty => f.write_str("an empty title"),
            Self::TooLong => write!(f, "a title longer than {MAX_TITLE} characters"),
            Self::ControlCharacters => f.write_str("a title with control characters"),
        }
    }
}

impl std::error::Error for InvalidTitle {}

/// `title`, trimmed, as a thread's name (what every door a client names a thread through
/// accepts), or why it cannot be one.
///
/// # Errors
///
/// [`InvalidTitle`].
pub fn thread_name(title: &str) -> Result<String, InvalidTitle> {
    let title = title.trim();
    if title.is_empty() {
        Err(InvalidTitle::Empty)
    } else if title.chars().count() > MAX_TITLE {
        Err(InvalidTitle::TooLong)
    } else if title.chars().any(char::is_control) {
        Err(InvalidTitle::ControlCharacters)
    } else {
        Ok(title.to_owned())
    }
}

/// A page of threads, and where the next one starts (`None`: this was the last).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadPage {
    /// The threads, newest first.
    pub threads: Vec<ThreadSummary>,
    /// Where the next page starts.
    pub next: Option<ThreadCursor>,
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

/// A change of the thread list, for those who follow it live ([`Runs::list_changes`](super::Runs::list_changes)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListChange {
    /// The listing of this thread of this principal changed: it was kept (a run ended), named,
    /// archived or deleted. Its listing is read again (none: it was deleted).
    Thread {
        /// The thread.
        thread_id: ThreadId,
        /// Whom it belongs to.
        principal: Option<String>,
    },
    /// Changes may have been missed (a follower fell behind, a notification connection was
    /// lost): the list is read again.
    Any,
}

/// How many changes a slow follower may fall behind before it is told [`ListChange::Any`].
const LIST_CHANGES: usize = 256;

/// Where the thread list's changes are told, in this process.
#[derive(Debug, Clone)]
pub(crate) struct Listing(tokio::sync::broadcast::Sender<ListChange>);

impl Default for Listing {
    fn default() -> Self {
        Self(tokio::sync::broadcast::channel(LIST_CHANGES).0)
    }
}

impl Listing {
    /// Tells every follower that `thread` of `principal` changed.
    pub(crate) fn changed(&self, thread_id: &ThreadId, principal: Option<&str>) {
        // No follower (the usual case at a run's end): nothing to make, nobody to tell.
        if self.0.receiver_count() == 0 {
            return;
        }
        let _ = self.0.send(ListChange::Thread {
            thread_id: thread_id.clone(),
            principal: principal.map(str::to_owned),
        });
    }

    /// Tells every follower that anything may have changed.
    pub(crate) fn any(&self) {
        let _ = self.0.send(ListChange::Any);
    }

    /// The changes from now on, until one of `stopping` fires.
    pub(crate) fn follow(&self, stopping: [CancellationToken; 2]) -> ListChanges {
        ListChanges {
            changes: self.0.subscribe(),
            stopping,
        }
    }
}

/// The thread list's changes from now on, as [`Runs::list_changes`](super::Runs::list_changes)
/// tells them.
#[derive(Debug)]
pub struct ListChanges {
    changes: tokio::sync::broadcast::Receiver<ListChange>,
    /// The engine's shutdown and drain.
    stopping: [CancellationToken; 2],
}

impl ListChanges {
    /// The next change; [`ListChange::Any`] after changes this follower fell too far behind to
    /// be told one by one; `None` once the engine stops (its followers end, and follow another
    /// instance).
    pub async fn next(&mut self) -> Option<ListChange> {
        use tokio::sync::broadcast::error::RecvError;
        let [shutdown, draining] = &self.stopping;
        let change = tokio::select! {
            () = shutdown.cancelled() => return None,
            () = draining.cancelled() => return None,
            change = self.changes.recv() => change,
        };
        Some(match change {
            Ok(change) => change,
            Err(RecvError::Lagged(_)) => ListChange::Any,
            // The engine keeps its sender for as long as it runs.
            Err(RecvError::Closed) => return None,
        })
    }
}
