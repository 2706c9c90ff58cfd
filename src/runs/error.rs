//! What goes wrong in the run log, and why a start is refused.

use std::fmt;

use crate::{
    BoxError,
    id::{InterruptId, RunId, ThreadId},
};

/// A failure of the run log.
#[derive(Debug)]
#[non_exhaustive]
pub enum LogError {
    /// The backend failed or cannot be reached.
    Unavailable(BoxError),
    /// The run is no longer this instance's to write (it ended, or another instance took it
    /// over): nothing was written.
    Fenced(RunId),
    /// The log holds something it cannot read.
    Corrupt(String),
    /// The log is full (a bounded in-memory log whose live runs hold all it may keep).
    Full(String),
}

impl LogError {
    /// The backend failed with `error`.
    pub fn unavailable(error: impl Into<BoxError>) -> Self {
        Self::Unavailable(error.into())
    }
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unavailable(e) => write!(f, "the run log is unavailable: {e}"),
            Self::Fenced(run) => write!(f, "run `{run}` is no longer owned by this instance"),
            Self::Corrupt(what) => write!(f, "the run log holds an unreadable {what}"),
            Self::Full(why) => write!(f, "the run log is full: {why}"),
        }
    }
}

impl std::error::Error for LogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Unavailable(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

/// Why a run could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The thread has an active run (`active`, when known).
    Busy {
        /// The thread.
        thread: ThreadId,
        /// Its active run.
        active: Option<RunId>,
    },
    /// A run with this id exists. `same`: it was started by the same request (same hash), and
    /// its latest segment starts after event `from`.
    Exists {
        /// The run.
        run: RunId,
        /// Whether the same request started it.
        same: bool,
        /// Where the segment the request started begins (events after this one).
        from: u64,
    },
    /// The thread belongs to another principal: for the caller it does not exist.
    UnknownThread(ThreadId),
    /// The thread has pending interrupts and the run resolves none of them.
    InterruptsPending(Vec<InterruptId>),
    /// The run resolves some of the thread's pending interrupts, not all.
    ResumeMissing(Vec<InterruptId>),
    /// No pending or resolved interrupt of this thread has this id.
    UnknownInterrupt(InterruptId),
    /// The interrupt expired.
    Expired(InterruptId),
    /// The interrupt was resolved already, by `by_run`.
    AlreadyResolved {
        /// The interrupt.
        id: InterruptId,
        /// The run that applies the first answer.
        by_run: RunId,
    },
    /// The log failed.
    Log(LogError),
}

impl StartError {
    /// The `RUN_ERROR` code of a start refused for the run's own reasons (its resume), `None` for
    /// the others (a busy thread, a taken run id, another principal's thread, a failing log).
    #[must_use]
    pub fn code(&self) -> Option<&'static str> {
        Some(match self {
            Self::InterruptsPending(_) => "interrupts_pending",
            Self::ResumeMissing(_) => "resume_incomplete",
            Self::UnknownInterrupt(_) => "unknown_interrupt",
            Self::Expired(_) => "interrupt_expired",
            Self::AlreadyResolved { .. } => "interrupt_already_resolved",
            Self::Busy { .. } | Self::Exists { .. } | Self::UnknownThread(_) | Self::Log(_) => {
                return None;
            }
        })
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |ids: &[InterruptId]| {
            ids.iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Self::Busy { thread, .. } => write!(f, "thread `{thread}` already has an active run"),
            Self::Exists { run, .. } => write!(f, "run `{run}` exists already"),
            Self::UnknownThread(thread) => write!(f, "no thread `{thread}`"),
            Self::InterruptsPending(ids) => write!(
                f,
                "the thread waits for decisions on interrupts {}: resume them",
                list(ids)
            ),
            Self::ResumeMissing(ids) => {
                write!(f, "the resume does not cover interrupts {}", list(ids))
            }
            Self::UnknownInterrupt(id) => write!(f, "interrupt `{id}` is unknown on this thread"),
            Self::Expired(id) => write!(f, "interrupt `{id}` expired"),
            Self::AlreadyResolved { id, by_run } => {
                write!(
                    f,
                    "interrupt `{id}` was resolved already, by run `{by_run}`"
                )
            }
            Self::Log(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Log(e) => Some(e),
            _ => None,
        }
    }
}

impl From<LogError> for StartError {
    fn from(e: LogError) -> Self {
        Self::Log(e)
    }
}
