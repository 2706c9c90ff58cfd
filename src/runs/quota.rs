//! What one principal may use of an engine: live runs, runs a minute, log bytes a day.

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::context::Principal;

/// What each principal may use of an engine ([`Runs::per_principal`](super::Runs::per_principal));
/// nothing is limited by default. Operators, and servers that authenticate nobody, are limited
/// only by the engine's own caps. On a log that instances share (a store), a run begins against
/// what the log says of the principal's runs on every instance
/// ([`DurableLog::principal_usage`](super::DurableLog::principal_usage)), so the limits hold
/// across instances and restarts (two runs begun at the same instant on two instances may both
/// take the last place); in memory, each instance counts for itself.
///
/// ```
/// use agent_tower::runs::PrincipalLimits;
///
/// let limits = PrincipalLimits::new()
///     .live_runs(4)
///     .runs_per_minute(60)
///     .log_bytes_per_day(256 * 1024 * 1024);
/// # let _ = limits;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrincipalLimits {
    /// Runs live at once.
    pub live_runs: Option<usize>,
    /// Runs begun per minute (a fixed window from the first of them).
    pub runs_per_minute: Option<u32>,
    /// Bytes of events logged per day (UTC), the runs of the day together; a run that goes past
    /// it is stopped with `RUN_ERROR{code: "quota_exceeded"}`.
    pub log_bytes_per_day: Option<u64>,
}

impl PrincipalLimits {
    /// No limit.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `runs` live at once.
    #[must_use]
    pub fn live_runs(mut self, runs: usize) -> Self {
        self.live_runs = Some(runs);
        self
    }

    /// At most `runs` begun a minute.
    #[must_use]
    pub fn runs_per_minute(mut self, runs: u32) -> Self {
        self.runs_per_minute = Some(runs);
        self
    }

    /// At most `bytes` of events logged a day.
    #[must_use]
    pub fn log_bytes_per_day(mut self, bytes: u64) -> Self {
        self.log_bytes_per_day = Some(bytes);
        self
    }

    fn is_none(self) -> bool {
        self == Self::default()
    }
}

/// Which limit a principal reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`PrincipalLimits::live_runs`].
    LiveRuns,
    /// [`PrincipalLimits::runs_per_minute`].
    RunsPerMinute,
    /// [`PrincipalLimits::log_bytes_per_day`].
    LogBytesPerDay,
}

impl Limit {
    /// A machine-readable code: `too_many_live_runs`, `rate_limited`, `quota_exceeded`.
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            Self::LiveRuns => "too_many_live_runs",
            Self::RunsPerMinute => "rate_limited",
            Self::LogBytesPerDay => "quota_exceeded",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Self::LiveRuns => "as many runs live as a principal may have",
            Self::RunsPerMinute => "as many runs this minute as a principal may begin",
            Self::LogBytesPerDay => "as many bytes logged today as a principal may log",
        })
    }
}

/// What a principal's runs use, as a log that instances share tells it
/// ([`DurableLog::principal_usage`](super::DurableLog::principal_usage)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrincipalUsage {
    /// Its runs running now.
    pub live: usize,
    /// Its runs begun in the last minute.
    pub begun_last_minute: u32,
    /// When the first of those began (ms since the epoch).
    pub first_of_minute: Option<i64>,
    /// The bytes logged by its runs begun today (UTC).
    pub log_bytes_today: u64,
}

impl PrincipalUsage {
    /// `live` runs, `begun_last_minute` of them begun since `first_of_minute`, and
    /// `log_bytes_today`.
    #[must_use]
    pub fn new(
        live: usize,
        begun_last_minute: u32,
        first_of_minute: Option<i64>,
        log_bytes_today: u64,
    ) -> Self {
        Self {
            live,
            begun_last_minute,
            first_of_minute,
            log_bytes_today,
        }
    }
}

/// How many principals' counts are kept before the idle ones are forgotten.
const KEPT: usize = 10_000;

const MINUTE: Duration = Duration::from_secs(60);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// The counts of the principals of one engine.
#[derive(Default)]
pub(crate) struct Quotas {
    limits: PrincipalLimits,
    usage: Mutex<HashMap<Arc<str>, Usage>>,
}

#[derive(Debug, Clone, Copy)]
struct Usage {
    live: usize,
    /// When the current minute's window began, and the runs begun in it.
    minute: (Instant, u32),
    /// The day (since the epoch) and the bytes logged in it.
    day: (u64, u64),
}

/// A run counted among its principal's live runs until it is dropped.
pub(crate) struct Admitted {
    quotas: Arc<Quotas>,
    principal: Arc<str>,
}

impl Quotas {
    pub(crate) fn new(limits: PrincipalLimits) -> Self {
        Self {
            limits,
            usage: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Usage>> {
        self.usage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The name `principal`'s usage is counted under, if it is limited at all.
    fn counted(&self, principal: Option<&Principal>) -> Option<Arc<str>> {
        let principal = principal.filter(|p| !p.is_operator() && !self.limits.is_none())?;
        Some(principal.name().into())
    }

    /// The principal whose usage a log shared by instances is asked, and the times it is asked
    /// about (a minute ago, the day's start, in ms): `None` when `principal` is not limited.
    pub(crate) fn to_ask(&self, principal: Option<&Principal>) -> Option<(Arc<str>, i64, i64)> {
        let name = self.counted(principal)?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let day_began = Duration::from_secs(now.as_secs() - now.as_secs() % DAY.as_secs());
        Some((name, ms(now.saturating_sub(MINUTE)), ms(day_began)))
    }

    /// Counts a run `principal` begins now; refused when a limit is reached, with how long to
    /// wait before trying again. With `stored`, what a log shared by instances says of the
    /// principal's runs on all of them is what the limits are checked against.
    pub(crate) fn admit(
        self: &Arc<Self>,
        principal: Option<&Principal>,
        now: Instant,
        stored: Option<PrincipalUsage>,
    ) -> Result<Option<Admitted>, (Limit, Duration)> {
        let Some(name) = self.counted(principal) else {
            return Ok(None);
        };
        let today = day(SystemTime::now());
        let mut usage = self.lock();
        if usage.len() >= KEPT && !usage.contains_key(&name) {
            usage.retain(|_, u| u.live > 0 || now.duration_since(u.minute.0) < MINUTE);
        }
        let entry = usage.entry(name.clone()).or_insert(Usage {
            live: 0,
            minute: (now, 0),
            day: (today, 0),
        });
        if now.duration_since(entry.minute.0) >= MINUTE {
            entry.minute = (now, 0);
        }
        if entry.day.0 != today {
            entry.day = (today, 0);
        }
        // The log counts this instance's runs with the others': it is the count, and the day's
        // bytes go on from it.
        let (live, minute, minute_left) = match stored {
            Some(stored) => {
                entry.day.1 = entry.day.1.max(stored.log_bytes_today);
                let since = stored.first_of_minute.map_or(Duration::ZERO, |first| {
                    let now = SystemTime::now().duration_since(UNIX_EPOCH);
                    let first = Duration::from_millis(u64::try_from(first).unwrap_or(0));
                    now.unwrap_or_default().saturating_sub(first)
                });
                (
                    stored.live,
                    stored.begun_last_minute,
                    MINUTE.saturating_sub(since),
                )
            }
            None => (
                entry.live,
                entry.minute.1,
                MINUTE - now.duration_since(entry.minute.0),
            ),
        };
        let limits = self.limits;
        if limits.live_runs.is_some_and(|max| live >= max) {
            // A run's end frees a place: try again soon.
            return Err((Limit::LiveRuns, Duration::from_secs(1)));
        }
        if limits.runs_per_minute.is_some_and(|max| minute >= max) {
            return Err((Limit::RunsPerMinute, minute_left));
        }
        if limits
            .log_bytes_per_day
            .is_some_and(|max| entry.day.1 >= max)
        {
            return Err((Limit::LogBytesPerDay, until_tomorrow(SystemTime::now())));
        }
        entry.live += 1;
        entry.minute.1 += 1;
        Ok(Some(Admitted {
            quotas: self.clone(),
            principal: name,
        }))
    }

    /// Counts `bytes` logged for `principal` today; `false` once that takes it past its day's
    /// bytes.
    pub(crate) fn log(&self, principal: Option<&Principal>, bytes: u64) -> bool {
        let (Some(name), Some(max)) = (self.counted(principal), self.limits.log_bytes_per_day)
        else {
            return true;
        };
        let today = day(SystemTime::now());
        let mut usage = self.lock();
        let Some(entry) = usage.get_mut(&name) else {
            return true;
        };
        if entry.day.0 != today {
            entry.day = (today, 0);
        }
        entry.day.1 = entry.day.1.saturating_add(bytes);
        entry.day.1 <= max
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(usage) = self.quotas.lock().get_mut(&self.principal) {
            usage.live = usage.live.saturating_sub(1);
        }
    }
}

impl fmt::Debug for Quotas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quotas")
            .field("limits", &self.limits)
            .field("principals", &self.lock().len())
            .finish()
    }
}

/// The day (UTC) `time` is in, counted from the epoch.
fn day(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / DAY.as_secs())
}

/// How long until the next day (UTC) begins.
fn until_tomorrow(now: SystemTime) -> Duration {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    DAY - Duration::from_secs(since.as_secs() % DAY.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Principal {
        Principal::user("alice").unwrap()
    }

    #[test]
    fn a_principal_is_refused_past_its_live_runs_until_one_ends() {
        let quotas = Arc::new(Quotas::new(PrincipalLimits::new().live_runs(2)));
        let now = Instant::now();
        let first = quotas.admit(Some(&alice()), now, None).unwrap();
        let _second = quotas.admit(Some(&alice()), now, None).unwrap();
        let refused = quotas
            .admit(Some(&alice()), now, None)
            .err()
            .map(|(limit, _)| limit);
        assert_eq!(refused, Some(Limit::LiveRuns));
        let bob = Principal::user("bob").unwrap();
        assert!(
            quotas.admit(Some(&bob), now, None).is_ok(),
            "bob's own count"
        );
        let ops = Principal::operator("ops").unwrap();
        assert!(
            quotas.admit(Some(&ops), now, None).unwrap().is_none(),
            "operators are not counted"
        );
        assert!(
            quotas.admit(None, now, None).unwrap().is_none(),
            "nor is a server without principals"
        );
        drop(first);
        assert!(quotas.admit(Some(&alice()), now, None).is_ok());
    }

    #[test]
    fn runs_a_minute_come_back_when_the_minute_is_over() {
        let quotas = Arc::new(Quotas::new(PrincipalLimits::new().runs_per_minute(2)));
        let start = Instant::now();
        for _ in 0..2 {
            drop(quotas.admit(Some(&alice()), start, None).unwrap());
        }
        let (limit, wait) = quotas.admit(Some(&alice()), start, None).err().unwrap();
        assert_eq!((limit, wait), (Limit::RunsPerMinute, MINUTE));
        let later = start + Duration::from_secs(45);
        let (_, wait) = quotas.admit(Some(&alice()), later, None).err().unwrap();
        assert_eq!(wait, Duration::from_secs(15));
        assert!(quotas.admit(Some(&alice()), start + MINUTE, None).is_ok());
    }

    #[test]
    fn logged_bytes_past_the_day_stop_runs_and_refuse_new_ones() {
        let quotas = Arc::new(Quotas::new(PrincipalLimits::new().log_bytes_per_day(1_000)));
        let now = Instant::now();
        let run = quotas.admit(Some(&alice()), now, None).unwrap();
        assert!(quotas.log(Some(&alice()), 600));
        assert!(!quotas.log(Some(&alice()), 600), "past the day's bytes");
        drop(run);
        let (limit, wait) = quotas.admit(Some(&alice()), now, None).err().unwrap();
        assert_eq!(limit, Limit::LogBytesPerDay);
        assert!(wait <= DAY && wait > Duration::ZERO);
        assert!(quotas.log(None, u64::MAX), "no principal, no quota");
    }

    #[test]
    fn what_the_shared_log_counts_is_what_a_run_begins_against() {
        let limits = PrincipalLimits::new()
            .live_runs(1)
            .runs_per_minute(3)
            .log_bytes_per_day(1_000);
        let quotas = Arc::new(Quotas::new(limits));
        let now = Instant::now();
        let ms = |ago: u64| {
            let at = SystemTime::now() - Duration::from_secs(ago);
            i64::try_from(at.duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap()
        };
        // A run live on another instance holds the place this instance has free.
        let elsewhere = PrincipalUsage::new(1, 1, Some(ms(10)), 0);
        let refused = quotas.admit(Some(&alice()), now, Some(elsewhere)).err();
        assert_eq!(refused.map(|(limit, _)| limit), Some(Limit::LiveRuns));
        // Three begun in the minute, the first 45 s ago: room again in about 15 s.
        let minute = PrincipalUsage::new(0, 3, Some(ms(45)), 0);
        let (limit, wait) = quotas
            .admit(Some(&alice()), now, Some(minute))
            .err()
            .unwrap();
        assert_eq!(limit, Limit::RunsPerMinute);
        assert!(
            wait <= Duration::from_secs(16) && wait >= Duration::from_secs(14),
            "{wait:?}"
        );
        // The day's bytes go on from the log's.
        let bytes = PrincipalUsage::new(0, 0, None, 900);
        let run = quotas.admit(Some(&alice()), now, Some(bytes)).unwrap();
        assert!(
            !quotas.log(Some(&alice()), 200),
            "900 logged elsewhere, 200 here"
        );
        drop(run);
        assert!(quotas.admit(Some(&alice()), now, Some(bytes)).is_err());
    }

    #[test]
    fn the_day_ends_at_midnight_utc() {
        let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
        assert_eq!(
            until_tomorrow(at(DAY.as_secs() * 3 + 3_600)),
            DAY - Duration::from_secs(3_600)
        );
        assert_eq!(day(at(DAY.as_secs() * 3 - 1)), 2);
        assert_eq!(day(at(DAY.as_secs() * 3)), 3);
    }
}
