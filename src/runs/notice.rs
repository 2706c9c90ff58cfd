//! Notices: what a run's end tells the world beyond its followers (a webhook's message), kept
//! in the same write as the end, and handed out from the log's [`Outbox`] until each is
//! delivered or given up.
//!
//! The engine asks its [`Notify`] which notices an end leaves ([`Runs::notify`]); the log keeps
//! them with the end, so that an end never loses its notices and no notice exists without its
//! end, whatever stops the process in between. A deliverer [claims](Outbox::claim) the notices
//! that are due, for a while (another instance, or this one restarted, claims them again once
//! that while is over), and [settles](Outbox::settle) each: delivered, to be tried again later, or
//! given up. A notice may so be delivered more than once; its [`id`](Notice::id) is the same
//! every time, for the receiver to see it twice.

use std::time::{Duration, SystemTime};

use futures_util::future::BoxFuture;

#[cfg(doc)]
use super::Runs;
use super::{LogError, RunStatus};
use crate::{
    agui::RunAgentInput,
    id::{RunId, ThreadId},
    tool::Interrupt,
};

/// A message to deliver once a run's end is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Unique, and the same at every attempt: what a receiver knows a second delivery by.
    pub id: String,
    /// The run whose end it tells.
    pub run_id: RunId,
    /// Where it goes.
    pub url: String,
    /// What it tells, such as `run.finished` (the body says it too).
    pub kind: String,
    /// Its body, delivered as is.
    pub body: String,
}

impl Notice {
    /// Its URL as operators and logs are shown it: without its query (or fragment), which may
    /// carry a token.
    #[must_use]
    pub fn shown_url(&self) -> &str {
        self.url.split(['?', '#']).next().unwrap_or_default()
    }
}

/// Where a notice stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoticeStatus {
    /// Not delivered yet: due at its next attempt.
    Pending,
    /// Delivered.
    Delivered,
    /// Given up after its last attempt.
    Failed,
}

impl NoticeStatus {
    /// How the log spells it: `pending`, `delivered`, `failed`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    /// The status `text` spells, if any.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "pending" => Self::Pending,
            "delivered" => Self::Delivered,
            "failed" => Self::Failed,
            _ => return None,
        })
    }
}

/// A notice claimed for delivery by [`Outbox::claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The notice.
    pub notice: Notice,
    /// Which attempt this is, from 1.
    pub attempt: u32,
}

/// What became of an attempt to deliver a claimed notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settle {
    /// It was delivered.
    Delivered,
    /// It was not; it is tried again at `at`.
    Retry {
        /// When.
        at: SystemTime,
        /// What went wrong this time.
        error: String,
    },
    /// It was not, and is given up.
    Failed {
        /// What went wrong the last time.
        error: String,
    },
}

/// A notice as the log keeps it, for an operator to see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeRecord {
    /// The notice.
    pub notice: Notice,
    /// Where it stands.
    pub status: NoticeStatus,
    /// How many attempts were begun.
    pub attempts: u32,
    /// When its run's end was kept.
    pub created_at: SystemTime,
    /// When it was last settled.
    pub updated_at: SystemTime,
    /// What went wrong at the last attempt that failed.
    pub last_error: Option<String>,
}

impl NoticeRecord {
    /// How operators are shown it (`GET /webhooks`, `agent-tower webhooks`): `{"id", "runId",
    /// "type", "url", "status", "attempts", "createdAt", "updatedAt", "lastError"}`, its URL
    /// without its query (which may carry a token), times in RFC 3339.
    #[must_use]
    pub fn json(&self) -> serde_json::Value {
        let notice = &self.notice;
        serde_json::json!({
            "id": notice.id,
            "runId": notice.run_id,
            "type": notice.kind,
            "url": notice.shown_url(),
            "status": self.status.as_str(),
            "attempts": self.attempts,
            "createdAt": super::book::rfc3339(self.created_at),
            "updatedAt": super::book::rfc3339(self.updated_at),
            "lastError": self.last_error,
        })
    }
}

/// The notices of a log: claimed for delivery, settled, listed. A log that keeps notices says
/// so with [`RunLog::outbox`](super::RunLog::outbox).
pub trait Outbox: Send + Sync {
    /// Up to `max` pending notices that are due and that nobody holds, the oldest first, held by
    /// this instance for `hold` (then they are anyone's to claim again), each attempt counted.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn claim(&self, max: usize, hold: Duration) -> BoxFuture<'_, Result<Vec<Claimed>, LogError>>;

    /// Records what became of the claimed notice `id`.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn settle<'a>(&'a self, id: &'a str, settle: &'a Settle)
    -> BoxFuture<'a, Result<(), LogError>>;

    /// Up to `limit` notices, the newest first; with `run`, that run's only.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn notices<'a>(
        &'a self,
        run: Option<&'a RunId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<NoticeRecord>, LogError>>;
}

/// A run's end, as a [`Notify`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct RunEnding<'a> {
    /// The run.
    pub run_id: &'a RunId,
    /// Its thread.
    pub thread_id: &'a ThreadId,
    /// Whose it is.
    pub principal: Option<&'a str>,
    /// How it ended.
    pub status: RunStatus,
    /// The sequence number of its terminal event: one end of a run has one.
    pub seq: u64,
    /// What it was asked (`None`: a run lost with its request, which was not kept).
    pub input: Option<&'a RunAgentInput>,
    /// The code and message of its `RUN_ERROR`, when it failed.
    pub error: Option<(&'a str, &'a str)>,
    /// The interrupts it stopped at, when it waits for a person.
    pub interrupts: &'a [Interrupt],
}

/// Which notices a run's end leaves: a webhook's messages, say. Set with [`Runs::notify`].
pub trait Notify: Send + Sync + 'static {
    /// Whether a run may be asked as `input` says (a webhook it names, say): the reason it
    /// may not, which refuses the run before its agent runs.
    ///
    /// # Errors
    ///
    /// Why the request is refused.
    fn check(&self, input: &RunAgentInput) -> Result<(), String>;

    /// The notices `ending` leaves (none: it tells nothing).
    fn notices(&self, ending: &RunEnding<'_>) -> Vec<Notice>;
}

/// The notices of a [`MemoryLog`](super::MemoryLog), in the order their ends were kept; at most
/// [`KEPT`](Self::KEPT), those settled forgotten first.
#[derive(Debug, Default)]
pub(super) struct KeptNotices {
    notices: std::collections::VecDeque<KeptNotice>,
}

#[derive(Debug)]
struct KeptNotice {
    record: NoticeRecord,
    /// When it is due.
    next_at: SystemTime,
    /// Until when an attempt holds it.
    held_until: SystemTime,
}

impl KeptNotices {
    /// The most notices kept.
    const KEPT: usize = 10_000;

    /// Keeps `notices`, of an end kept `now`.
    pub(super) fn keep(&mut self, notices: &[Notice], now: SystemTime) {
        for notice in notices {
            if self.notices.len() >= Self::KEPT {
                let settled = self
                    .notices
                    .iter()
                    .position(|kept| kept.record.status != NoticeStatus::Pending);
                if let Some(at) = settled {
                    self.notices.remove(at);
                } else if let Some(oldest) = self.notices.pop_front() {
                    tracing::warn!(
                        notice = %oldest.record.notice.id,
                        "the memory log forgot an undelivered notice: {} are pending",
                        Self::KEPT
                    );
                }
            }
            self.notices.push_back(KeptNotice {
                record: NoticeRecord {
                    notice: notice.clone(),
                    status: NoticeStatus::Pending,
                    attempts: 0,
                    created_at: now,
                    updated_at: now,
                    last_error: None,
                },
                next_at: now,
                held_until: now,
            });
        }
    }

    pub(super) fn claim(&mut self, max: usize, hold: Duration, now: SystemTime) -> Vec<Claimed> {
        self.notices
            .iter_mut()
            .filter(|kept| {
                kept.record.status == NoticeStatus::Pending
                    && kept.next_at <= now
                    && kept.held_until <= now
            })
            .take(max)
            .map(|kept| {
                kept.held_until = now + hold;
                kept.record.attempts += 1;
                Claimed {
                    notice: kept.record.notice.clone(),
                    attempt: kept.record.attempts,
                }
            })
            .collect()
    }

    pub(super) fn settle(&mut self, id: &str, settle: &Settle, now: SystemTime) {
        let Some(kept) = self.notices.iter_mut().find(|k| k.record.notice.id == id) else {
            return;
        };
        let record = &mut kept.record;
        record.updated_at = now;
        kept.held_until = now;
        match settle {
            Settle::Delivered => record.status = NoticeStatus::Delivered,
            Settle::Retry { at, error } => {
                kept.next_at = *at;
                record.last_error = Some(error.clone());
            }
            Settle::Failed { error } => {
                record.status = NoticeStatus::Failed;
                record.last_error = Some(error.clone());
            }
        }
    }

    pub(super) fn list(&self, run: Option<&RunId>, limit: usize) -> Vec<NoticeRecord> {
        self.notices
            .iter()
            .rev()
            .filter(|kept| run.is_none_or(|run| &kept.record.notice.run_id == run))
            .take(limit)
            .map(|kept| kept.record.clone())
            .collect()
    }
}
