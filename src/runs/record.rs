//! What the run log keeps: runs, their events, threads and interrupts, and what a start or an end
//! writes.

use std::{fmt, time::SystemTime};

use bytes::Bytes;
use serde_json::Value;

#[cfg(doc)]
use super::RunLog;
use super::{LogError, fork::ForkedFrom};
use crate::{
    agui::Event,
    context::Principal,
    id::{InterruptId, RunId, ThreadId, ToolCallId},
    message::Message,
    permission::Decision,
    tool::Interrupt,
};

/// Stamps `event` with the time it is logged (its `timestamp`, milliseconds since the Unix
/// epoch), unless it has one (a bridged agent's own) or is a stream's fragment
/// ([`Event::is_fragment`]): every other event of a run's log says when it happened, which is what
/// a timeline of the run is drawn from, while the fragments, most of a run's events, stay as
/// small and as cheap to write as they were.
pub(crate) fn stamp(event: &mut Event) {
    if event.is_fragment() {
        return;
    }
    if let Some(base) = event.base_mut().filter(|base| base.timestamp.is_none()) {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        base.timestamp = Some(u64::try_from(now.as_millis()).unwrap_or(u64::MAX));
    }
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
                let mut json = Vec::new();
                event.write_json(&mut json).expect("AG-UI events serialize");
                return Bytes::from(json);
            };
            buffer.clear();
            event
                .write_json(&mut buffer)
                .expect("AG-UI events serialize");
            let json = Bytes::copy_from_slice(&buffer);
            if buffer.capacity() > KEPT {
                *buffer = Vec::new();
            }
            json
        });
        Self { seq, json }
    }

    /// `event` at `seq`, [stamped](stamp) with the time it is logged.
    pub(crate) fn stamped(seq: u64, mut event: Event) -> Self {
        stamp(&mut event);
        Self::of(seq, &event)
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

    /// Whether it starts a run segment (`RUN_STARTED`).
    #[must_use]
    pub fn is_start(&self) -> bool {
        self.json.starts_with(br#"{"type":"RUN_STARTED""#)
    }

    /// Whether it ends a run segment at interrupts (`RUN_FINISHED` with an `interrupt` outcome):
    /// a run answered under its own id goes on after it.
    #[must_use]
    pub fn is_interrupted_end(&self) -> bool {
        self.json.starts_with(br#"{"type":"RUN_FINISHED""#)
            && matches!(
                self.event(),
                Ok(Event::RunFinished(crate::agui::event::RunFinished {
                    outcome: Some(crate::agui::event::RunFinishedOutcome::Interrupt { .. }),
                    ..
                }))
            )
    }

    /// Whether it is a follower's [`REJOIN`](super::REJOIN) notice (its instance stopped; the run
    /// goes on elsewhere): not in the log, not the run's end.
    #[must_use]
    pub fn is_rejoin(&self) -> bool {
        self.seq == 0
            && self.json.starts_with(br#"{"type":"CUSTOM""#)
            && matches!(self.event(), Ok(Event::Custom(notice)) if notice.name == super::REJOIN)
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
    /// The principal it belongs to, its thread's (`None`: made without authentication).
    pub principal: Option<String>,
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
    /// The decision that resolved it.
    pub resolution: Option<Decision>,
    /// The run that applies the answer.
    pub resolved_by_run: Option<RunId>,
}

impl InterruptRecord {
    /// `interrupt`, pending: what a log keeps of an interrupt `run` stopped at, at `now`.
    #[must_use]
    pub fn pending(
        interrupt: &Interrupt,
        thread_id: &ThreadId,
        run_id: &RunId,
        now: SystemTime,
    ) -> Self {
        Self {
            id: interrupt.id.clone(),
            thread_id: thread_id.clone(),
            run_id: run_id.clone(),
            tool_call_id: interrupt.tool_call_id.clone(),
            tool_name: interrupt.tool_name.clone(),
            arguments: interrupt.arguments.clone(),
            args_hash: args_hash(&interrupt.arguments),
            created_at: now,
            expires_at: interrupt.expires_at,
            status: InterruptStatus::Pending,
            resolution: None,
            resolved_by_run: None,
        }
    }
}

/// A conversation to keep with [`RunLog::save_thread`]: the thread, its messages, and what goes
/// with them.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct SavedThread<'a> {
    /// The thread.
    pub thread: &'a ThreadId,
    /// Whom a thread new to the log belongs to (whom an existing thread belongs to does not
    /// change).
    pub principal: Option<&'a str>,
    /// Its conversation.
    pub messages: &'a [Message],
    /// Its state.
    pub state: Option<&'a Value>,
    /// The directory it works in (an editor's session); kept when `None`.
    pub workspace: Option<&'a str>,
    /// The thread it is a fork of, for a thread new to the log (a kept thread's stays).
    pub forked_from: Option<&'a ForkedFrom>,
}

impl<'a> SavedThread<'a> {
    /// `messages` as `thread`'s conversation, with no state, principal or workspace.
    #[must_use]
    pub fn new(thread: &'a ThreadId, messages: &'a [Message]) -> Self {
        Self {
            thread,
            principal: None,
            messages,
            state: None,
            workspace: None,
            forked_from: None,
        }
    }

    /// Whom a new thread belongs to.
    #[must_use]
    pub fn principal(mut self, principal: Option<&'a str>) -> Self {
        self.principal = principal;
        self
    }

    /// The thread's state.
    #[must_use]
    pub fn state(mut self, state: Option<&'a Value>) -> Self {
        self.state = state;
        self
    }

    /// The directory the thread works in.
    #[must_use]
    pub fn workspace(mut self, workspace: Option<&'a str>) -> Self {
        self.workspace = workspace;
        self
    }

    /// The thread it is a fork of.
    #[must_use]
    pub fn forked_from(mut self, forked_from: Option<&'a ForkedFrom>) -> Self {
        self.forked_from = forked_from;
        self
    }
}

/// A thread's conversation and state, and its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRecord {
    /// The thread.
    pub thread_id: ThreadId,
    /// The principal it belongs to (`None`: made without authentication).
    pub principal: Option<String>,
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
    /// Answers to the thread's pending interrupts: the interrupt, and the decision.
    pub resume: Vec<(InterruptId, Decision)>,
    /// What a retry of the run needs besides the thread's conversation (the request without its
    /// messages): kept with runs that resume interrupts, so that an approval outlives a crash.
    pub request: Option<Value>,
    /// Who asks (`None`: a server that authenticates nobody): a new thread becomes theirs, and
    /// another principal's thread is not theirs to use.
    pub principal: Option<Principal>,
    /// The conversation to keep if the run is its thread's first (the log has no other run and
    /// no conversation of the thread): the start then keeps it, and the thread is listed, in the
    /// same write, which [`Lease::made_thread`] tells. A log may leave it to the run.
    pub first_turn: Option<FirstTurn>,
}

impl Start {
    /// A new run with nothing to resume, asked by nobody in particular.
    #[must_use]
    pub fn new(thread_id: ThreadId, run_id: RunId) -> Self {
        Self {
            thread_id,
            run_id,
            request_hash: String::new(),
            resume: Vec::new(),
            request: None,
            principal: None,
            first_turn: None,
        }
    }
}

/// What a thread's first run is asked: its conversation and state (see [`Start::first_turn`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FirstTurn {
    /// The conversation.
    pub messages: Vec<Message>,
    /// The state.
    pub state: Option<Value>,
}

/// The right to write a run, from [`RunLog::start`] or [`RunLog::recover`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run_id: RunId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// The principal the run and its thread belong to.
    pub principal: Option<String>,
    /// The sequence number of the log's last event when the lease was taken: the run's events
    /// follow it.
    pub last_seq: u64,
    /// Whether the start made the run's thread, keeping its [`Start::first_turn`]: the log
    /// had nothing else of the thread, and it is listed.
    pub made_thread: bool,
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
    /// What its end tells beyond its followers (a webhook's messages), kept with it for its
    /// log's [`Outbox`](super::Outbox) to deliver.
    pub notices: Vec<super::Notice>,
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
            notices: Vec::new(),
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
    /// The events appended, numbered.
    pub events: Vec<LoggedEvent>,
    /// The run's lease, when this instance took it over to continue it.
    pub lease: Option<Lease>,
}

/// SHA-256 (hex) of `value`'s canonical JSON (object keys sorted at every level).
///
/// The canonical text is written straight into the digest: no sorted copy of the value, no
/// string of it.
#[must_use]
pub(crate) fn args_hash(value: &Value) -> String {
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
