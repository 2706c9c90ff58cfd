//! Lists read in pages, the most recently changed first: threads ([`RunLog::threads`]) and runs
//! ([`RunLog::runs`]), and the cursors that say where the next page starts.

use std::{fmt, marker::PhantomData, str::FromStr, time::SystemTime};

#[cfg(doc)]
use super::RunLog;
use super::{RunRecord, RunStatus};
use crate::id::{RunId, ThreadId};

/// A point in a list of `Of`s (threads, runs), newest first: the last item of a page. Written and
/// read as opaque text (`"{updated_at}:{id}"`) for clients to send back.
pub struct Cursor<Of> {
    /// When the item last changed, in milliseconds since the Unix epoch.
    pub(crate) updated_at: i64,
    pub(crate) id: String,
    of: PhantomData<fn() -> Of>,
}

/// A point in the list of threads.
pub type ThreadCursor = Cursor<ThreadId>;
/// A point in the list of runs.
pub type RunCursor = Cursor<RunId>;

impl<Of: AsRef<str>> Cursor<Of> {
    /// The point of `id`, changed last at `updated_at`.
    pub(crate) fn at(updated_at: SystemTime, id: &Of) -> Self {
        Self {
            updated_at: millis(updated_at),
            id: id.as_ref().to_owned(),
            of: PhantomData,
        }
    }

    /// Whether an item of `updated_at` and `id` comes after this point (newest first).
    pub(crate) fn precedes(&self, updated_at: SystemTime, id: &Of) -> bool {
        let at = millis(updated_at);
        at < self.updated_at || (at == self.updated_at && id.as_ref() < self.id.as_str())
    }
}

impl<Of> Clone for Cursor<Of> {
    fn clone(&self) -> Self {
        Self {
            updated_at: self.updated_at,
            id: self.id.clone(),
            of: PhantomData,
        }
    }
}

impl<Of> PartialEq for Cursor<Of> {
    fn eq(&self, other: &Self) -> bool {
        (self.updated_at, &self.id) == (other.updated_at, &other.id)
    }
}

impl<Of> Eq for Cursor<Of> {}

impl<Of> fmt::Debug for Cursor<Of> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Cursor").field(&self.to_string()).finish()
    }
}

impl<Of> fmt::Display for Cursor<Of> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.updated_at, self.id)
    }
}

impl<Of> FromStr for Cursor<Of> {
    type Err = InvalidCursor;

    fn from_str(text: &str) -> Result<Self, InvalidCursor> {
        let (updated_at, id) = text.split_once(':').ok_or(InvalidCursor)?;
        Ok(Self {
            updated_at: updated_at.parse().map_err(|_| InvalidCursor)?,
            id: id.to_owned(),
            of: PhantomData,
        })
    }
}

/// A cursor that is not one a page gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidCursor;

impl fmt::Display for InvalidCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a cursor of this list")
    }
}

impl std::error::Error for InvalidCursor {}

/// The first page of `items` (at most `limit`, newest first by `point`, the id breaking ties),
/// and the cursor of the next page when there are more: how a backend that lists in memory pages.
pub(crate) fn newest_first<T, Of: AsRef<str>>(
    mut items: Vec<T>,
    limit: usize,
    point: impl Fn(&T) -> (SystemTime, &Of),
) -> (Vec<T>, Option<Cursor<Of>>) {
    items.sort_by(|a, b| {
        let key = |item: &T| {
            let (at, id) = point(item);
            (millis(at), id.as_ref().to_owned())
        };
        key(b).cmp(&key(a))
    });
    let next = page_end(&mut items, limit, &point);
    (items, next)
}

/// Cuts `items` (read one past `limit`) to `limit`; the cursor after the last one kept when more
/// were read.
pub(crate) fn page_end<T, Of: AsRef<str>>(
    items: &mut Vec<T>,
    limit: usize,
    point: impl Fn(&T) -> (SystemTime, &Of),
) -> Option<Cursor<Of>> {
    let more = items.len() > limit;
    items.truncate(limit);
    items.last().filter(|_| more).map(|last| {
        let (at, id) = point(last);
        Cursor::at(at, id)
    })
}

/// `time` in milliseconds since the Unix epoch.
pub(crate) fn millis(time: SystemTime) -> i64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Which runs [`RunLog::runs`] lists, the most recently changed first: what a door listing a
/// principal's tasks (A2A `ListTasks`) asks.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct RunQuery<'a> {
    /// Only this principal's (`None`: everyone's).
    pub principal: Option<&'a str>,
    /// Only this thread's.
    pub thread: Option<&'a ThreadId>,
    /// Only those in this status.
    pub status: Option<RunStatus>,
    /// Only those changed after this time.
    pub changed_after: Option<SystemTime>,
    /// After this point of an earlier page.
    pub after: Option<&'a RunCursor>,
    /// At most this many (at least 1, at most 1,000).
    pub limit: usize,
}

impl<'a> RunQuery<'a> {
    /// The first `limit` runs, everyone's.
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

    /// Only `thread`'s runs (`None`: every thread's).
    #[must_use]
    pub fn thread(mut self, thread: Option<&'a ThreadId>) -> Self {
        self.thread = thread;
        self
    }

    /// Only runs in `status` (`None`: in any).
    #[must_use]
    pub fn status(mut self, status: Option<RunStatus>) -> Self {
        self.status = status;
        self
    }

    /// Only runs changed after `time` (`None`: whenever).
    #[must_use]
    pub fn changed_after(mut self, time: Option<SystemTime>) -> Self {
        self.changed_after = time;
        self
    }

    /// After `cursor` (`None`: from the newest).
    #[must_use]
    pub fn after(mut self, cursor: Option<&'a RunCursor>) -> Self {
        self.after = cursor;
        self
    }

    /// Whether `run` is one this query selects, on any page (what a backend that filters in
    /// memory asks).
    pub(crate) fn matches(&self, run: &RunRecord) -> bool {
        self.principal
            .is_none_or(|p| run.principal.as_deref() == Some(p))
            && self.thread.is_none_or(|t| *t == run.thread_id)
            && self.status.is_none_or(|s| s == run.status)
            && self
                .changed_after
                .is_none_or(|time| millis(run.updated_at) > millis(time))
    }

    /// Whether `run` is one this query selects on its page.
    pub(crate) fn selects(&self, run: &RunRecord) -> bool {
        self.matches(run)
            && self
                .after
                .is_none_or(|after| after.precedes(run.updated_at, &run.run_id))
    }
}

/// A page of runs, and where the next one starts (`None`: this was the last).
#[derive(Debug, Clone, PartialEq)]
pub struct RunPage {
    /// The runs, the most recently changed first.
    pub runs: Vec<RunRecord>,
    /// Where the next page starts.
    pub next: Option<RunCursor>,
    /// How many runs the query selects on all pages.
    pub total: u64,
}
