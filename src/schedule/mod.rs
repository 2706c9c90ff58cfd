//! Schedules: runs begun at set times (a cron pattern in a time zone, or once at an instant),
//! each occurrence once across the instances on a store.
//!
//! A [`Schedule`] is a name and a [`Spec`]: when, what to ask (a prompt), on which thread (a
//! new thread for each occurrence, or one thread that each occurrence continues), as whom, and
//! what becomes of occurrences that fell while no instance was up ([`Missed`]). The
//! [`Scheduler`] keeps schedules in the run log's [`ScheduleBook`] and begins a run for each
//! occurrence: under a run id made of the schedule's name and the occurrence's time, so that
//! two instances that both see an occurrence begin one run between them, and the one that moves
//! the schedule on is the one whose update found the occurrence still there. A run so begun is
//! a run like any other: limited, logged, told to webhooks, followed with `GET /runs/{id}`.
//!
//! ```
//! use agent_tower::{
//!     agent::Agent, model::scripted::ScriptedModel, runs::Runs, tool::ToolRouter,
//!     schedule::{Schedule, Scheduler, Spec},
//! };
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let runs = Runs::new(Agent::new(ScriptedModel::new(), ToolRouter::new()));
//! let scheduler = Scheduler::new(runs);
//! let nightly = Schedule::new("nightly", Spec {
//!     cron: Some("0 3 * * *".to_owned()),
//!     time_zone: Some("Europe/Paris".to_owned()),
//!     ..Spec::prompt("Write the report of the day")
//! })
//! .unwrap();
//! scheduler.put(&nightly).await.unwrap();
//! let stop = tokio_util::sync::CancellationToken::new();
//! tokio::spawn(scheduler.run(stop.clone()));
//! # stop.cancel();
//! # }
//! ```

use std::{
    fmt,
    str::FromStr,
    time::{Duration, SystemTime},
};

use chrono::{DateTime, Timelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::{
    context::Principal,
    id::{RunId, ThreadId},
    message::Message,
    runs::{BeginError, LogError, Runs, ScheduleBook, ScheduleRecord},
};

/// What becomes of occurrences that fell while no instance was up to begin them (more than the
/// schedule's grace ago).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Missed {
    /// None of them runs; the schedule goes on from its next occurrence (the default).
    #[default]
    Skip,
    /// Each runs, the oldest first, as soon as an instance is up.
    MakeUp,
}

/// What a schedule says; its JSON (camelCase) is what `PUT /schedules/{name}` and
/// `serve --schedule` take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Spec {
    /// A cron pattern: five fields (minute, hour, day of month, month, day of week) or six (with
    /// seconds first), as Vixie cron reads them (`*/5 * * * *`, `0 9 * * MON-FRI`, `@daily`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The time zone the pattern is read in (an IANA name, `Europe/Paris`); UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Instead of a pattern, one instant (RFC 3339): a schedule that runs once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// What each run is asked: the user's message.
    pub prompt: String,
    /// The thread each run continues; a new thread for each run when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<ThreadId>,
    /// Whom the runs belong to (a principal's name); no one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// What becomes of occurrences missed while no instance was up.
    #[serde(default)]
    pub missed: Missed,
    /// How late an occurrence may be begun before it counts as missed (`1m` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace: Option<String>,
}

impl Spec {
    /// A spec that asks `prompt`, with no time yet (set [`cron`](Self::cron) or
    /// [`at`](Self::at)).
    #[must_use]
    pub fn prompt(prompt: impl Into<String>) -> Self {
        Self {
            cron: None,
            time_zone: None,
            at: None,
            prompt: prompt.into(),
            thread_id: None,
            principal: None,
            missed: Missed::Skip,
            grace: None,
        }
    }
}

/// A schedule that cannot be: why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSchedule(String);

impl fmt::Display for InvalidSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidSchedule {}

/// When a schedule's occurrences fall.
#[derive(Debug, Clone)]
enum When {
    Cron(Box<croner::Cron>, chrono_tz::Tz),
    Once(SystemTime),
}

/// A named [`Spec`], checked.
#[derive(Debug, Clone)]
pub struct Schedule {
    name: String,
    spec: Spec,
    when: When,
    grace: Duration,
}

/// How late an occurrence may be begun by default.
const GRACE: Duration = Duration::from_secs(60);

impl Schedule {
    /// The schedule `name` (letters, digits, `_`, `-` and `.`, at most 64) says `spec`.
    ///
    /// # Errors
    ///
    /// A name, a pattern, a time zone, an instant or a grace that cannot be; neither or both of
    /// a pattern and an instant; an empty prompt.
    pub fn new(name: impl Into<String>, spec: Spec) -> Result<Self, InvalidSchedule> {
        let name = name.into();
        let fail = |why: String| Err(InvalidSchedule(format!("schedule `{name}`: {why}")));
        let named = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !named {
            return fail("a name is letters, digits, `_`, `-` and `.`, at most 64".to_owned());
        }
        if spec.prompt.trim().is_empty() {
            return fail("its prompt is empty".to_owned());
        }
        let when = match (&spec.cron, &spec.at) {
            (Some(pattern), None) => {
                let cron = match croner::Cron::from_str(pattern) {
                    Ok(cron) => cron,
                    Err(error) => return fail(format!("the cron pattern `{pattern}`: {error}")),
                };
                let zone = match spec.time_zone.as_deref().map(chrono_tz::Tz::from_str) {
                    None => chrono_tz::Tz::UTC,
                    Some(Ok(zone)) => zone,
                    Some(Err(_)) => {
                        return fail(format!(
                            "unknown time zone `{}` (an IANA name: `Europe/Paris`)",
                            spec.time_zone.as_deref().unwrap_or_default()
                        ));
                    }
                };
                When::Cron(Box::new(cron), zone)
            }
            (None, Some(at)) => match DateTime::parse_from_rfc3339(at).map(SystemTime::from) {
                Ok(at) => When::Once(at),
                Err(_) => return fail(format!("`at` is not an RFC 3339 instant: `{at}`")),
            },
            _ => return fail("give either `cron` or `at`".to_owned()),
        };
        if spec.at.is_some() && spec.time_zone.is_some() {
            return fail("`timeZone` goes with `cron`; `at` carries its own offset".to_owned());
        }
        let grace = match spec.grace.as_deref().map(humantime::parse_duration) {
            None => GRACE,
            Some(Ok(grace)) => grace,
            Some(Err(error)) => return fail(format!("its grace: {error}")),
        };
        Ok(Self {
            name,
            spec,
            when,
            grace,
        })
    }

    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it says.
    #[must_use]
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Its first occurrence after `time` (none: a schedule that ran once, or a pattern that
    /// never matches again).
    #[must_use]
    pub fn next_after(&self, time: SystemTime) -> Option<SystemTime> {
        match &self.when {
            When::Once(at) => (*at > time).then_some(*at),
            When::Cron(cron, zone) => {
                let from = DateTime::<Utc>::from(time).with_timezone(zone);
                let next = cron.find_next_occurrence(&from, false).ok()?;
                // On the second the pattern names (the search keeps the start's fraction).
                let next = next.with_nanosecond(0)?;
                Some(SystemTime::from(next.with_timezone(&Utc)))
            }
        }
    }

    /// Its first occurrence for a schedule kept at `now`: a pattern's next, or its instant, even
    /// past (then it is due at once, and begun or skipped as [`Missed`] says of it).
    #[must_use]
    pub fn first(&self, now: SystemTime) -> Option<SystemTime> {
        match &self.when {
            When::Once(at) => Some(*at),
            When::Cron(..) => self.next_after(now),
        }
    }

    /// The schedule a log kept.
    ///
    /// # Errors
    ///
    /// A spec this version cannot read.
    pub fn from_record(record: &ScheduleRecord) -> Result<Self, InvalidSchedule> {
        let spec = serde_json::from_value(record.spec.clone())
            .map_err(|error| InvalidSchedule(format!("schedule `{}`: {error}", record.name)))?;
        Self::new(record.name.clone(), spec)
    }

    /// The run id of the occurrence at `at`: the same on every instance.
    fn run_id(&self, at: SystemTime) -> RunId {
        let millis = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis());
        RunId::from(format!("{}-{millis}", self.name))
    }
}

/// How often the book is looked at for occurrences due.
const POLL: Duration = Duration::from_millis(500);
/// The most occurrences one instance begins in a look.
const PER_LOOK: usize = 64;

/// Begins the runs of the schedules a run log keeps (see the [module](self)).
pub struct Scheduler {
    runs: Runs,
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler").finish_non_exhaustive()
    }
}

impl Scheduler {
    /// Begins `runs`' scheduled runs.
    ///
    /// # Panics
    ///
    /// When the engine's log keeps no schedules ([`RunLog::schedules`]; a
    /// [`MemoryLog`](crate::runs::MemoryLog) and a `RunStore` do).
    ///
    /// [`RunLog::schedules`]: crate::runs::RunLog::schedules
    #[must_use]
    pub fn new(runs: Runs) -> Self {
        assert!(
            runs.run_log().schedules().is_some(),
            "Scheduler::new: the run log keeps no schedules"
        );
        Self { runs }
    }

    fn book(&self) -> &dyn ScheduleBook {
        self.runs
            .run_log()
            .schedules()
            .expect("checked at construction")
    }

    /// Keeps `schedule` in the log: a new one due at its next occurrence; a known one with the
    /// same spec as it was (what fell due while no instance was up stays due).
    ///
    /// # Errors
    ///
    /// Failures of the log.
    pub async fn put(&self, schedule: &Schedule) -> Result<(), LogError> {
        let spec = serde_json::to_value(&schedule.spec).unwrap_or(Value::Null);
        self.book()
            .put(&ScheduleRecord {
                name: schedule.name.clone(),
                spec,
                next_at: schedule.first(SystemTime::now()),
                last: None,
            })
            .await
    }

    /// Begins the occurrences that fall due until `stop` fires.
    pub async fn run(self, stop: CancellationToken) {
        loop {
            // A draining instance begins nothing: the others do.
            if !self.runs.is_stopping()
                && let Err(error) = self.look(SystemTime::now()).await
            {
                tracing::warn!(%error, "could not read the schedules due");
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Begins, or skips, what is due at `now`.
    async fn look(&self, now: SystemTime) -> Result<(), LogError> {
        for record in self.book().due(now, PER_LOOK).await? {
            let schedule = match Schedule::from_record(&record) {
                Ok(schedule) => schedule,
                Err(error) => {
                    tracing::warn!(%error, "a schedule this version cannot read is left as it is");
                    continue;
                }
            };
            let mut due = record.next_at;
            // A schedule that makes up for what it missed catches up here, an occurrence at a
            // time.
            for _ in 0..PER_LOOK {
                let Some(at) = due.filter(|at| *at <= now) else {
                    break;
                };
                match self.occur(&schedule, at, now).await {
                    Ok(next) => due = next,
                    Err(error) => {
                        tracing::warn!(schedule = schedule.name, %error, "a scheduled run was not begun; it is tried again");
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// The occurrence of `schedule` at `at`, seen at `now`: begun (or skipped as missed), and the
    /// schedule moved on: its next occurrence when this instance moved it (`None`: another did,
    /// or there is none).
    async fn occur(
        &self,
        schedule: &Schedule,
        at: SystemTime,
        now: SystemTime,
    ) -> Result<Option<SystemTime>, BeginError> {
        let late = now.duration_since(at).unwrap_or_default();
        if late > schedule.grace && schedule.spec.missed == Missed::Skip {
            let next = schedule.next_after(now);
            let moved = (self.book())
                .advance(&schedule.name, at, next, None)
                .await
                .map_err(BeginError::Unavailable)?;
            if moved {
                tracing::info!(
                    schedule = schedule.name,
                    late = %humantime::format_duration(Duration::from_secs(late.as_secs())),
                    "skipped what a schedule missed while no instance was up"
                );
            }
            return Ok(next.filter(|_| moved));
        }
        let run = schedule.run_id(at);
        let principal = match schedule.spec.principal.as_deref().map(Principal::user) {
            None => None,
            Some(Ok(principal)) => Some(principal),
            Some(Err(error)) => {
                tracing::warn!(schedule = schedule.name, %error, "a schedule's principal cannot be");
                None
            }
        };
        let thread = (schedule.spec.thread_id.clone())
            .unwrap_or_else(|| ThreadId::from(run.as_str().to_owned()));
        let mut input = (self.runs)
            .next_turn(
                principal.as_ref(),
                thread,
                Message::user(schedule.spec.prompt.clone()),
            )
            .await?;
        input.run_id = run.clone();
        match self.runs.begin_as(principal, input).await {
            // Begun here, or by another instance that saw the same occurrence.
            Ok(_) | Err(BeginError::RunExists(_)) => {}
            Err(error) => return Err(error),
        }
        let next = schedule.next_after(at);
        let moved = (self.book())
            .advance(&schedule.name, at, next, Some(&run))
            .await
            .map_err(BeginError::Unavailable)?;
        if moved {
            tracing::info!(schedule = schedule.name, run_id = %run, "began a scheduled run");
        }
        Ok(next.filter(|_| moved))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SystemTime {
        SystemTime::from(DateTime::parse_from_rfc3339(text).unwrap())
    }

    fn cron(pattern: &str, zone: Option<&str>) -> Schedule {
        let spec = Spec {
            cron: Some(pattern.to_owned()),
            time_zone: zone.map(str::to_owned),
            ..Spec::prompt("hello")
        };
        Schedule::new("s", spec).unwrap()
    }

    #[test]
    fn occurrences_fall_on_the_patterns_seconds_in_its_time_zone() {
        // 09:00 on weekdays in Paris is 08:00 UTC in winter; after Friday comes Monday.
        let weekdays = cron("0 9 * * MON-FRI", Some("Europe/Paris"));
        let friday = at("2026-12-04T08:00:00.250Z");
        assert_eq!(
            weekdays.next_after(friday),
            Some(at("2026-12-07T08:00:00Z"))
        );
        // Six fields: seconds first; whole seconds whatever the start's fraction.
        let every_two = cron("*/2 * * * * *", None);
        let start = at("2026-12-04T08:00:01.700Z");
        assert_eq!(
            every_two.next_after(start),
            Some(at("2026-12-04T08:00:02Z"))
        );
        let once = Schedule::new(
            "o",
            Spec {
                at: Some("2026-12-24T18:00:00+01:00".to_owned()),
                ..Spec::prompt("hello")
            },
        )
        .unwrap();
        assert_eq!(once.next_after(friday), Some(at("2026-12-24T17:00:00Z")));
        assert_eq!(once.next_after(at("2026-12-25T00:00:00Z")), None);
        // Kept after its instant, it is due at once (to run or be skipped as missed).
        let christmas = at("2026-12-25T00:00:00Z");
        assert_eq!(once.first(christmas), Some(at("2026-12-24T17:00:00Z")));
        assert_eq!(weekdays.first(friday), weekdays.next_after(friday));
    }

    #[test]
    fn a_schedule_that_cannot_be_says_why() {
        let refused = |name: &str, spec: Spec| Schedule::new(name, spec).unwrap_err().to_string();
        let with = |cron: &str| Spec {
            cron: Some(cron.to_owned()),
            ..Spec::prompt("hello")
        };
        assert!(refused("s", with("61 * * * *")).contains("the cron pattern `61 * * * *`"));
        let zoned = Spec {
            time_zone: Some("Mars/Olympus".to_owned()),
            ..with("0 9 * * *")
        };
        assert!(refused("s", zoned).contains("unknown time zone `Mars/Olympus`"));
        assert!(refused("s", Spec::prompt("hello")).contains("either `cron` or `at`"));
        assert!(refused("a b", with("0 9 * * *")).contains("a name is letters"));
        assert!(
            refused(
                "s",
                Spec {
                    prompt: " ".to_owned(),
                    ..with("0 9 * * *")
                }
            )
            .contains("prompt is empty")
        );
        let spec: Result<Spec, _> =
            serde_json::from_str(r#"{"cron": "* * * * *", "prompt": "x", "zone": "UTC"}"#);
        assert!(
            spec.unwrap_err()
                .to_string()
                .contains("unknown field `zone`")
        );
    }
}
