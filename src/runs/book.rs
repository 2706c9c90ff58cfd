//! Schedules as a log keeps them: [`ScheduleBook`], where each schedule's next occurrence is
//! taken by one instance only.
//!
//! What a schedule says (its cron pattern, its prompt) is the scheduler's to read (see
//! `agent_tower::schedule`, feature `schedules`); the log keeps it as JSON beside the time of its
//! next occurrence, which an instance [advances](ScheduleBook::advance) only from the time it
//! read: of the instances that read one occurrence, one advances it.

use std::time::SystemTime;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::LogError;
use crate::id::RunId;

/// A schedule as the log keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRecord {
    /// Its name: unique.
    pub name: String,
    /// What it says, as its scheduler writes it.
    pub spec: Value,
    /// When its next occurrence falls; `None` when it has no more.
    pub next_at: Option<SystemTime>,
    /// The last occurrence taken, and the run begun for it (none when it was skipped).
    pub last: Option<(SystemTime, Option<RunId>)>,
}

impl ScheduleRecord {
    /// How operators are shown it (`GET /schedules`, `agent-tower schedules`): `{"name", "spec",
    /// "nextAt", "lastAt", "lastRunId"}`, times in RFC 3339.
    #[must_use]
    pub fn json(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "spec": self.spec,
            "nextAt": self.next_at.map(rfc3339),
            "lastAt": self.last.as_ref().map(|(at, _)| rfc3339(*at)),
            "lastRunId": self.last.as_ref().and_then(|(_, run)| run.as_ref()),
        })
    }
}

/// `time` in RFC 3339, to the millisecond, in UTC.
pub(super) fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

/// Where a log keeps schedules; see [`RunLog::schedules`](super::RunLog::schedules).
pub trait ScheduleBook: Send + Sync {
    /// Keeps `schedule`: a new one as it is; one known by its name with its spec replaced and,
    /// only when the spec changed, its next occurrence (an instance starting again with the same
    /// schedules leaves what was due due).
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn put<'a>(&'a self, schedule: &'a ScheduleRecord) -> BoxFuture<'a, Result<(), LogError>>;

    /// Up to `max` schedules whose next occurrence falls at or before `now`, the earliest first.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn due(
        &self,
        now: SystemTime,
        max: usize,
    ) -> BoxFuture<'_, Result<Vec<ScheduleRecord>, LogError>>;

    /// Moves `name`'s next occurrence from `from` to `to` (`None`: no more), recording `from` as
    /// taken with `run`, if it still falls at `from`: whether this call moved it (another
    /// instance did otherwise).
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn advance<'a>(
        &'a self,
        name: &'a str,
        from: SystemTime,
        to: Option<SystemTime>,
        run: Option<&'a RunId>,
    ) -> BoxFuture<'a, Result<bool, LogError>>;

    /// Every schedule, by name.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn list(&self) -> BoxFuture<'_, Result<Vec<ScheduleRecord>, LogError>>;

    /// Forgets `name`: whether there was such a schedule.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn remove<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<bool, LogError>>;
}

/// The schedules of a [`MemoryLog`](super::MemoryLog), by name.
#[derive(Debug, Default)]
pub(super) struct KeptSchedules {
    schedules: std::collections::BTreeMap<String, ScheduleRecord>,
}

impl KeptSchedules {
    /// The most schedules kept.
    const KEPT: usize = 10_000;

    pub(super) fn put(&mut self, schedule: &ScheduleRecord) -> Result<(), LogError> {
        if self.schedules.len() >= Self::KEPT && !self.schedules.contains_key(&schedule.name) {
            return Err(LogError::Full(format!(
                "the memory log keeps at most {} schedules",
                Self::KEPT
            )));
        }
        match self.schedules.get_mut(&schedule.name) {
            Some(kept) if kept.spec == schedule.spec => {}
            Some(kept) => {
                kept.spec.clone_from(&schedule.spec);
                kept.next_at = schedule.next_at;
            }
            None => {
                self.schedules
                    .insert(schedule.name.clone(), schedule.clone());
            }
        }
        Ok(())
    }

    pub(super) fn due(&self, now: SystemTime, max: usize) -> Vec<ScheduleRecord> {
        let mut due: Vec<ScheduleRecord> = self
            .schedules
            .values()
            .filter(|s| s.next_at.is_some_and(|at| at <= now))
            .cloned()
            .collect();
        due.sort_by_key(|s| s.next_at);
        due.truncate(max);
        due
    }

    pub(super) fn advance(
        &mut self,
        name: &str,
        from: SystemTime,
        to: Option<SystemTime>,
        run: Option<&RunId>,
    ) -> bool {
        match self.schedules.get_mut(name) {
            Some(kept) if kept.next_at == Some(from) => {
                kept.next_at = to;
                kept.last = Some((from, run.cloned()));
                true
            }
            _ => false,
        }
    }

    pub(super) fn list(&self) -> Vec<ScheduleRecord> {
        self.schedules.values().cloned().collect()
    }

    pub(super) fn remove(&mut self, name: &str) -> bool {
        self.schedules.remove(name).is_some()
    }
}
