//! The run log's contract ([`RunLog`]) and what it stores.

use std::{
    fmt,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use serde_json::Value;

use super::Hub;
use crate::{
    BoxError,
    agui::Event,
    id::{InterruptId, RunId, ThreadId, ToolCallId},
    message::Message,
    run::Interrupt,
};

/// Where runs, their events, threads and interrupts are kept: the spine every run goes through.
///
/// Implemented by [`MemoryLog`](super::MemoryLog) (bounded, this process only) and, with the
/// feature `store`, by `RunStore` (SQLite, PostgreSQL). [`Runs`](super::Runs) is the only
/// writer: it starts runs, appends their events in order, ends them, and follows them.
///
/// What an implementation guarantees:
///
/// - **Atomic starts**: [`start`](RunLog::start) checks and writes everything in one step
///   (one active run per thread; the thread's pending interrupts all answered, each resolved at
///   most once), so that whichever instance tries, exactly one start wins.
/// - **Fencing**: a [`write`](RunLog::write) succeeds only while the run is running, owned by
///   this instance, and its log ends right before the first event written; otherwise
///   [`LogError::Fenced`] and nothing is written.
/// - **Durable before visible**: what [`read`](RunLog::read) returns was committed; a write that
///   returned `Ok` survives a crash of the process (for a durable backend).
/// - **Liveness**: [`heartbeat`](RunLog::heartbeat) keeps this instance's runs owned;
///   [`lost`](RunLog::lost) lists the running runs of instances that stopped beating.
///
/// [`hub`](RunLog::hub) is how followers in this process are woken: the writer wakes them after
/// each write, and a backend that several instances share forwards their writes to it
/// (PostgreSQL `LISTEN/NOTIFY`).
pub trait RunLog: fmt::Debug + Send + Sync + 'static {
    /// Starts the run `start` asks for (or continues an interrupted one: see [`Start`]).
    ///
    /// # Errors
    ///
    /// See [`StartError`]; nothing is written on error.
    fn start<'a>(&'a self, start: &'a Start) -> BoxFuture<'a, Result<Lease, StartError>>;

    /// Appends `events` (numbered right after the log's last event) and, with `end`, ends the
    /// run: its status, the thread's conversation and state, the interrupts it stopped at; all in
    /// one transaction.
    ///
    /// # Errors
    ///
    /// [`LogError::Fenced`] when the run is no longer this instance's to write; failures of the
    /// backend.
    fn write<'a>(
        &'a self,
        lease: &'a Lease,
        events: &'a [LoggedEvent],
        end: Option<&'a RunEnd>,
    ) -> BoxFuture<'a, Result<(), LogError>>;

    /// Records a run that was refused, with its events (`RUN_STARTED`, `RUN_ERROR`), so that it
    /// reads like any other; the thread is not affected.
    ///
    /// # Errors
    ///
    /// [`StartError::Exists`] when the run id is taken; failures of the backend.
    fn refuse<'a>(
        &'a self,
        start: &'a Start,
        events: &'a [LoggedEvent],
    ) -> BoxFuture<'a, Result<(), StartError>>;

    /// Up to `limit` events of `run` after sequence number `after`, with the run's status; `None`
    /// for an unknown run.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn read<'a>(
        &'a self,
        run: &'a RunId,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Option<Page>, LogError>>;

    /// The wake-ups of this process's followers.
    fn hub(&self) -> &Hub;

    /// This instance's name in the runs it writes.
    fn owner(&self) -> &str;

    /// A run, if it exists.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn run<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<Option<RunRecord>, LogError>>;

    /// A thread's conversation, state and runs, if it has any.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Option<ThreadRecord>, LogError>>;

    /// Keeps `messages` and `state` as the thread's conversation (for agents that do not go
    /// through runs, such as an ACP session).
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn save_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
        messages: &'a [Message],
        state: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), LogError>>;

    /// Interrupts, oldest first: those `filter` selects.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn interrupts<'a>(
        &'a self,
        filter: Interrupts<'a>,
    ) -> BoxFuture<'a, Result<Vec<InterruptRecord>, LogError>>;

    /// Renews this instance's ownership of its runs for `lease`.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn heartbeat(&self, lease: Duration) -> BoxFuture<'_, Result<(), LogError>>;

    /// Whether the log can take runs now: a cheap round trip to its backend, for readiness
    /// probes. The default (a log in this process) always can.
    ///
    /// # Errors
    ///
    /// When the backend does not answer.
    fn ready(&self) -> BoxFuture<'_, Result<(), LogError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Reports to `metrics` what the log measures of itself (a store: its commits). Nothing by
    /// default.
    #[cfg(feature = "metrics")]
    fn observe(&self, metrics: &crate::metrics::Metrics) {
        let _ = metrics;
    }

    /// The running runs whose owner stopped beating (it died), with what a retry needs.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn lost(&self) -> BoxFuture<'_, Result<Vec<LostRun>, LogError>>;

    /// Ends the segment of a lost run (still running, owned by `lost.record.owner`) with
    /// `terminal`, appended after the log's last event whatever its sequence number; with
    /// `retry`, this instance takes the run over (it stays running, a new segment follows) and
    /// gets its lease, else the run fails. `None` when the run was no longer the owner's (another
    /// instance recovered it first).
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn recover<'a>(
        &'a self,
        lost: &'a LostRun,
        terminal: &'a LoggedEvent,
        retry: bool,
    ) -> BoxFuture<'a, Result<Option<Recovered>, LogError>>;
}

/// Which interrupts [`RunLog::interrupts`] lists.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Interrupts<'a> {
    /// All, or those with a status.
    All(Option<InterruptStatus>),
    /// The one with this id.
    Id(&'a InterruptId),
    /// A thread's pending ones.
    PendingOf(&'a ThreadId),
    /// Those a run resolved (the decisions it applies).
    ResolvedBy(&'a RunId),
}

/// One event of a run's log: its place (from 1) and its AG-UI JSON, serialized once for every
/// follower and every store (a follower sending protobuf parses it back).
///
/// Events that are not in the log (a follower's own `RUN_ERROR` when the log cannot be read) have
/// sequence number 0.
#[derive(Clone, PartialEq)]
pub struct LoggedEvent {
    /// Position in the run's log, from 1 (0: not logged).
    pub seq: u64,
    json: Bytes,
}

impl LoggedEvent {
    /// `event` at `seq`, serialized once for every follower.
    #[must_use]
    pub fn new(seq: u64, event: Event) -> Self {
        Self::of(seq, &event)
    }

    /// `event` at `seq`: its JSON in one allocation of its exact size (serialized into a buffer
    /// this thread reuses, then copied).
    pub(crate) fn of(seq: u64, event: &Event) -> Self {
        thread_local! {
            static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        /// A buffer that grew past this (a large snapshot) is not kept.
        const KEPT: usize = 64 * 1024;
        let json = BUFFER.with(|buffer| {
            let Ok(mut buffer) = buffer.try_borrow_mut() else {
                // Serializing an event serialized another (a custom `Serialize` of a value).
                return Bytes::from(serde_json::to_vec(event).expect("AG-UI events serialize"));
            };
            buffer.clear();
            serde_json::to_writer(&mut *buffer, event).expect("AG-UI events serialize");
            let json = Bytes::copy_from_slice(&buffer);
            if buffer.capacity() > KEPT {
                *buffer = Vec::new();
            }
            json
        });
        Self { seq, json }
    }

    /// An event read back from a log as its JSON.
    #[must_use]
    pub fn from_json(seq: u64, json: impl Into<Bytes>) -> Self {
        Self {
            seq,
            json: json.into(),
        }
    }

    /// The event's JSON, as it is sent.
    #[must_use]
    pub fn json(&self) -> &Bytes {
        &self.json
    }

    /// The event's JSON as text.
    #[must_use]
    pub fn json_str(&self) -> &str {
        std::str::from_utf8(&self.json).unwrap_or_default()
    }

    /// The typed event, parsed from the JSON.
    ///
    /// # Errors
    ///
    /// When the logged JSON is not an AG-UI event.
    pub fn event(&self) -> Result<Event, LogError> {
        serde_json::from_slice(&self.json)
            .map_err(|e| LogError::Corrupt(format!("logged event ({e})")))
    }

    /// The same event at `seq`.
    #[must_use]
    pub fn with_seq(mut self, seq: u64) -> Self {
        self.seq = seq;
        self
    }

    /// Whether it ends a run segment (`RUN_FINISHED`, `RUN_ERROR`).
    #[must_use]
    pub fn is_terminal(&self) -> bool {
        self.json.starts_with(br#"{"type":"RUN_FINISHED""#)
            || self.json.starts_with(br#"{"type":"RUN_ERROR""#)
    }
}

impl fmt::Debug for LoggedEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoggedEvent")
            .field("seq", &self.seq)
            .field("json", &self.json_str())
            .finish()
    }
}

/// What one [`RunLog::read`] found.
#[derive(Debug, Clone)]
pub struct Page {
    /// The events, in order.
    pub events: Vec<LoggedEvent>,
    /// The run's status when read.
    pub status: RunStatus,
    /// The sequence number of the run's last event when read.
    pub last_seq: u64,
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunStatus {
    /// Its owner is writing it.
    Running,
    /// It ended normally.
    Finished,
    /// It ended at interrupts that wait for a decision.
    Interrupted,
    /// It was cancelled.
    Cancelled,
    /// It failed, was refused, or its owner died.
    Failed,
}

impl RunStatus {
    /// Its name, as stored.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Interrupted => "interrupted",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }

    /// The status named `s`.
    ///
    /// # Errors
    ///
    /// [`LogError::Corrupt`] for a name no status has.
    pub fn parse(s: &str) -> Result<Self, LogError> {
        Ok(match s {
            "running" => Self::Running,
            "finished" => Self::Finished,
            "interrupted" => Self::Interrupted,
            "cancelled" => Self::Cancelled,
            "failed" => Self::Failed,
            other => return Err(LogError::Corrupt(format!("run status `{other}`"))),
        })
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Where an interrupt is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InterruptStatus {
    /// Waiting for a decision.
    Pending,
    /// Decided; a run applied (or applies) the decision.
    Resolved,
}

impl InterruptStatus {
    /// Its name, as stored.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Resolved => "resolved",
        }
    }

    /// The status named `s`.
    ///
    /// # Errors
    ///
    /// [`LogError::Corrupt`] for a name no status has.
    pub fn parse(s: &str) -> Result<Self, LogError> {
        match s {
            "pending" => Ok(Self::Pending),
            "resolved" => Ok(Self::Resolved),
            other => Err(LogError::Corrupt(format!("interrupt status `{other}`"))),
        }
    }
}

/// A run, as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// The run.
    pub run_id: RunId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// Where it is.
    pub status: RunStatus,
    /// The instance writing it (or that wrote it last).
    pub owner: String,
    /// The sequence number of its last logged event (0: none yet).
    pub last_seq: u64,
    /// When it started.
    pub created_at: SystemTime,
    /// When it last changed.
    pub updated_at: SystemTime,
    /// What it was asked, without the conversation (tools, context, forwarded properties): kept
    /// for runs that resume interrupts or stop at them, so that a retry or an answer given out of
    /// band runs with them.
    pub request: Option<Value>,
}

/// A pending or resolved interrupt, as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct InterruptRecord {
    /// The interrupt.
    pub id: InterruptId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// The run that stopped at it.
    pub run_id: RunId,
    /// The call waiting.
    pub tool_call_id: ToolCallId,
    /// The tool.
    pub tool_name: String,
    /// The call's arguments.
    pub arguments: Value,
    /// SHA-256 of the arguments' canonical JSON: a decision is bound to exactly these.
    pub args_hash: String,
    /// When the run stopped.
    pub created_at: SystemTime,
    /// When it can no longer be resumed.
    pub expires_at: SystemTime,
    /// Where it is.
    pub status: InterruptStatus,
    /// The answer that resolved it (`{"status", "payload"}` of the resume entry).
    pub resolution: Option<Value>,
    /// The run that applies the answer.
    pub resolved_by_run: Option<RunId>,
}

/// A thread's conversation and state, and its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRecord {
    /// The thread.
    pub thread_id: ThreadId,
    /// The conversation after its last run.
    pub messages: Vec<Message>,
    /// The state after its last run.
    pub state: Option<Value>,
    /// Its runs, oldest first.
    pub runs: Vec<RunRecord>,
}

/// A run to start: a new one, or, when `run_id` names a run that stopped at interrupts and
/// `resume` answers them, that run continued under the same id (the shape CopilotKit sends).
#[derive(Debug, Clone)]
pub struct Start {
    /// Its thread.
    pub thread_id: ThreadId,
    /// The run.
    pub run_id: RunId,
    /// What identifies the request: the same request sent again has the same hash.
    pub request_hash: String,
    /// Answers to the thread's pending interrupts: the interrupt, and the answer's JSON
    /// (compared when the same answer comes twice).
    pub resume: Vec<(InterruptId, Value)>,
    /// What a retry of the run needs besides the thread's conversation (the request without its
    /// messages): kept with runs that resume interrupts, so that an approval outlives a crash.
    pub request: Option<Value>,
}

impl Start {
    /// A new run with nothing to resume.
    #[must_use]
    pub fn new(thread_id: ThreadId, run_id: RunId) -> Self {
        Self {
            thread_id,
            run_id,
            request_hash: String::new(),
            resume: Vec::new(),
            request: None,
        }
    }
}

/// The right to write a run, from [`RunLog::start`] or [`RunLog::recover`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run_id: RunId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// The sequence number of the log's last event when the lease was taken: the run's events
    /// follow it.
    pub last_seq: u64,
}

/// How a run ends: its status, the conversation and state to keep for the thread, the interrupts
/// it stopped at.
#[derive(Debug, Clone)]
pub struct RunEnd {
    /// The final status.
    pub status: RunStatus,
    /// The conversation to keep for the thread (none: the thread's is unchanged).
    pub messages: Option<Vec<Message>>,
    /// The state to keep for the thread.
    pub state: Option<Value>,
    /// The interrupts the run stopped at, kept as pending.
    pub interrupts: Vec<Interrupt>,
    /// What the run was asked (see [`RunRecord::request`]), to keep with it.
    pub request: Option<Value>,
}

impl RunEnd {
    /// An end with `status` and nothing to keep.
    #[must_use]
    pub fn new(status: RunStatus) -> Self {
        Self {
            status,
            messages: None,
            state: None,
            interrupts: Vec::new(),
            request: None,
        }
    }
}

/// A running run whose owner died, from [`RunLog::lost`].
#[derive(Debug, Clone)]
pub struct LostRun {
    /// The run, as logged (with its request, if it was kept).
    pub record: RunRecord,
    /// How many times it was started already.
    pub attempts: u32,
}

/// What [`RunLog::recover`] did.
#[derive(Debug, Clone)]
pub struct Recovered {
    /// The terminal event, at its place in the log.
    pub terminal: LoggedEvent,
    /// The run's lease, when this instance took it over to run it again.
    pub lease: Option<Lease>,
}

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
    /// the others (a busy thread, a taken run id, a failing log).
    #[must_use]
    pub fn code(&self) -> Option<&'static str> {
        Some(match self {
            Self::InterruptsPending(_) => "interrupts_pending",
            Self::ResumeMissing(_) => "resume_incomplete",
            Self::UnknownInterrupt(_) => "unknown_interrupt",
            Self::Expired(_) => "interrupt_expired",
            Self::AlreadyResolved { .. } => "interrupt_already_resolved",
            Self::Busy { .. } | Self::Exists { .. } | Self::Log(_) => return None,
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

/// SHA-256 (hex) of `value`'s canonical JSON (object keys sorted at every level).
///
/// The canonical text is written straight into the digest: no sorted copy of the value, no
/// string of it.
#[must_use]
pub fn args_hash(value: &Value) -> String {
    use serde::{Serialize, Serializer, ser::SerializeMap};
    use sha2::{Digest, Sha256};

    /// `value` with its objects' keys in order.
    struct Canonical<'a>(&'a Value);

    impl Serialize for Canonical<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            match self.0 {
                Value::Object(map) => {
                    let mut entries: Vec<_> = map.iter().collect();
                    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                    let mut out = serializer.serialize_map(Some(entries.len()))?;
                    for (key, value) in entries {
                        out.serialize_entry(key, &Canonical(value))?;
                    }
                    out.end()
                }
                Value::Array(items) => serializer.collect_seq(items.iter().map(Canonical)),
                other => other.serialize(serializer),
            }
        }
    }

    /// What is written goes into the digest.
    struct Digesting(Sha256);

    impl std::io::Write for Digesting {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.update(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    let mut digest = Digesting(Sha256::new());
    serde_json::to_writer(&mut digest, &Canonical(value)).expect("a JSON value serializes");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    digest
        .0
        .finalize()
        .iter()
        .flat_map(|byte| [HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xf)]])
        .map(char::from)
        .collect()
}

/// Milliseconds since the Unix epoch, as logs store times.
#[must_use]
pub fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The time `ms` milliseconds after the Unix epoch.
#[must_use]
pub fn from_millis(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_ignores_key_order_but_not_values() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": null}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": {"x": null, "y": [1, 2]}, "b": 1}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"a": {"x": null, "y": [2, 1]}, "b": 1}"#).unwrap();
        assert_eq!(args_hash(&a), args_hash(&b));
        assert_ne!(args_hash(&a), args_hash(&c));
        assert_eq!(args_hash(&a).len(), 64);
    }

    #[test]
    fn the_hash_is_the_sha_256_of_the_sorted_compact_json() {
        // Stored hashes must keep matching: the bytes hashed are `{"a":…,"b":…}`, keys sorted at
        // every level, as `Value`'s compact text; the digest in lower-case hex.
        let value: Value =
            serde_json::from_str(r#"{"b": [1, {"d": "x\n\u00e9", "c": null}], "a": 1.5}"#).unwrap();
        assert_eq!(
            args_hash(&value),
            // `python3 -c 'import json,hashlib; print(hashlib.sha256(json.dumps(v, sort_keys=True,
            // separators=(",",":"), ensure_ascii=False).encode()).hexdigest())'` of the same value
            "d615c68294850c03dbbf4cf334fb8715baacf7a6d20ddb1215bf3f203428e758"
        );
    }

    #[test]
    fn terminal_events_are_known_typed_and_as_json() {
        use crate::agui::event::{BaseEvent, RunError};
        let error = Event::from(RunError {
            message: "x".into(),
            code: None,
            usage: None,
            base: BaseEvent::default(),
        });
        let typed = LoggedEvent::new(1, error);
        assert!(typed.is_terminal());
        assert!(LoggedEvent::from_json(1, typed.json().clone()).is_terminal());
        assert!(!LoggedEvent::from_json(2, r#"{"type":"RUN_STARTED"}"#).is_terminal());
    }
}
