//! Taking a run request: start it, replay it, or refuse it.

use std::{fmt, sync::Arc, time::Duration};
use tokio::sync::OwnedSemaphorePermit;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::{
    BusyThread, FirstTurn, Inner, InterruptStatus, Interrupts, Limit, LogError, LoggedEvent,
    PrincipalUsage, RunStatus, Runs, Start, StartError, args_hash,
    driver::{Ended, Launch, RunSummary},
    quota::Admitted,
    request::kept,
};
use crate::{
    agui::{
        Event, RunAgentInput,
        event::{BaseEvent, RunError},
        framing::bare_start,
        input::{ResumeEntry, ResumeStatus},
        interrupt,
    },
    context::{Principal, RunContext},
    id::{InterruptId, RunId, ThreadId},
    message::Message,
};

/// How [`Runs::begin`] took a request; each is followed with [`Runs::follow`] from
/// [`from`](Begun::from).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Begun {
    /// A run started (or an interrupted run continued) on this instance.
    Started {
        /// The run.
        run_id: RunId,
        /// Its events follow this sequence number (0, or where an interrupted run stopped).
        from: u64,
        /// Cancels the run.
        cancel: CancellationToken,
    },
    /// The same request again: the run it started, replayed.
    Replayed {
        /// The run.
        run_id: RunId,
        /// The segment the request started follows this sequence number.
        from: u64,
    },
    /// Refused for its own reasons (its resume): recorded as a run of `RUN_STARTED` and
    /// `RUN_ERROR{code}`.
    Refused {
        /// The run.
        run_id: RunId,
        /// The `RUN_ERROR` code.
        code: &'static str,
        /// Why, in a sentence.
        message: String,
    },
}

impl Begun {
    /// The run to follow.
    #[must_use]
    pub fn run_id(&self) -> &RunId {
        match self {
            Self::Started { run_id, .. }
            | Self::Replayed { run_id, .. }
            | Self::Refused { run_id, .. } => run_id,
        }
    }

    /// Where to follow it from.
    #[must_use]
    pub fn from(&self) -> u64 {
        match self {
            Self::Started { from, .. } | Self::Replayed { from, .. } => *from,
            Self::Refused { .. } => 0,
        }
    }
}

/// Why [`Runs::begin`] took no run at all (nothing to follow).
#[derive(Debug)]
#[non_exhaustive]
pub enum BeginError {
    /// The thread has an active run (with [`BusyThread::Reject`]).
    Busy(ThreadId),
    /// A different request already used this run id (or another principal did).
    RunExists(RunId),
    /// The thread is another principal's: for the caller it does not exist.
    UnknownThread(ThreadId),
    /// The run log failed: the run may not have started, and nothing was streamed.
    Unavailable(LogError),
    /// The engine is shutting down.
    ShuttingDown,
    /// As many runs as the engine takes are live ([`Runs::max_live_runs`]); try again soon.
    Overloaded(usize),
    /// The caller reached one of its [limits](super::PrincipalLimits); try again after
    /// `retry_after`.
    Limited {
        /// Which.
        limit: Limit,
        /// How long until it may be tried again.
        retry_after: Duration,
    },
}

impl BeginError {
    /// A machine-readable code: `thread_busy`, `run_exists`, `unknown_thread`,
    /// `store_unavailable`, `shutting_down`, `overloaded`, or the [limit](Limit::code)'s.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Busy(_) => "thread_busy",
            Self::RunExists(_) => "run_exists",
            Self::UnknownThread(_) => "unknown_thread",
            Self::Unavailable(_) => super::STORE_UNAVAILABLE,
            Self::ShuttingDown => "shutting_down",
            Self::Overloaded(_) => "overloaded",
            Self::Limited { limit, .. } => limit.code(),
        }
    }
}

impl fmt::Display for BeginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Busy(thread) => write!(f, "thread `{thread}` already has an active run"),
            Self::RunExists(run) => write!(
                f,
                "run `{run}` exists already, started by a different request"
            ),
            Self::UnknownThread(thread) => write!(f, "no thread `{thread}`"),
            Self::Unavailable(_) => f.pad("the run log is unavailable; try again"),
            Self::ShuttingDown => f.pad("the server is shutting down"),
            Self::Limited { limit, retry_after } => write!(
                f,
                "{limit}; try again in {} s",
                retry_after.as_secs().max(1)
            ),
            Self::Overloaded(live) => {
                write!(
                    f,
                    "{live} runs are live, as many as are taken; try again soon"
                )
            }
        }
    }
}

impl std::error::Error for BeginError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Unavailable(e) => Some(e),
            _ => None,
        }
    }
}

/// Why an answer given out of band ([`Runs::resolve`], [`Runs::resume_thread`]) started no run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ResumeError {
    /// No interrupt has this id.
    UnknownInterrupt(InterruptId),
    /// No run has this id, for this principal.
    UnknownRun(RunId),
    /// The thread has no pending interrupt.
    NothingToResume(ThreadId),
    /// The answer is malformed (no entries, a payload that is not the response schema's).
    Invalid(String),
    /// Refused for the interrupts' own reasons (resolved already, expired, incomplete, not this
    /// thread's), with the `RUN_ERROR` code the same resume would get.
    Refused {
        /// The code.
        code: &'static str,
        /// Why, in a sentence.
        message: String,
    },
    /// No run could be taken.
    Begin(BeginError),
}

impl ResumeError {
    /// A machine-readable code.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownInterrupt(_) => "unknown_interrupt",
            Self::UnknownRun(_) => "unknown_run",
            Self::NothingToResume(_) => "nothing_to_resume",
            Self::Invalid(_) => "resume_invalid",
            Self::Refused { code, .. } => code,
            Self::Begin(error) => error.code(),
        }
    }
}

impl fmt::Display for ResumeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownInterrupt(id) => write!(f, "no interrupt `{id}`"),
            Self::UnknownRun(id) => write!(f, "no run `{id}`"),
            Self::NothingToResume(thread) => {
                write!(
                    f,
                    "thread `{thread}` has no interrupt waiting for a decision"
                )
            }
            Self::Invalid(why) => write!(f, "invalid resume: {why}"),
            Self::Refused { message, .. } => f.pad(message),
            Self::Begin(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for ResumeError {}

/// The run an answer given out of band started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// The thread resumed.
    pub thread_id: ThreadId,
    /// The run that applies the answer (nobody watches it: follow it with [`Runs::follow`]).
    pub run_id: RunId,
}

/// What the door that begins a run lends it in its own process, applied to the run's context
/// before the agent gets it: its live transport, the tools and settings of its session. The log
/// does not keep it: an attempt that continues the run after this process stopped runs without
/// it, as the run's request alone asks.
#[derive(Clone)]
pub struct Attach(Arc<dyn Fn(&mut RunContext) + Send + Sync>);

impl Attach {
    /// `attach`, called once on the run's context (once per start: a run queued behind a busy
    /// thread starts once).
    pub fn new(attach: impl Fn(&mut RunContext) + Send + Sync + 'static) -> Self {
        Self(Arc::new(attach))
    }

    pub(super) fn apply(&self, run: &mut RunContext) {
        (self.0)(run);
    }
}

impl fmt::Debug for Attach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Attach")
    }
}

/// A request, checked and ready for the log.
#[derive(Debug, Clone)]
struct Prepared {
    input: RunAgentInput,
    start: Start,
    /// Why its resume cannot be applied (a malformed payload).
    invalid: Option<String>,
    /// What its door lends it in this process.
    attach: Option<Attach>,
}

/// The key of a [`ResumeEntry`]'s `metadata` that names who answered the interrupt: the name of
/// the principal whose run brought the answer, or who answered it out of band
/// ([`Runs::resolve`]). The engine writes it (a client's own is replaced), so a run's log says who
/// decided each call; with no principal (a server that authenticates nobody) it names no one.
pub const ANSWERED_BY: &str = "answeredBy";

/// Names `by` as who answered each of `resume`'s entries (see [`ANSWERED_BY`]).
fn sign(resume: Option<&mut [ResumeEntry]>, by: Option<&Principal>) {
    for entry in resume.into_iter().flatten() {
        let metadata = entry
            .metadata
            .get_or_insert_with(|| Value::Object(Map::new()));
        let Some(fields) = metadata.as_object_mut() else {
            // Not an object: it says nothing of who answered; it is kept as it is.
            continue;
        };
        match by {
            Some(by) => {
                fields.insert(ANSWERED_BY.to_owned(), Value::from(by.name()));
            }
            None => {
                fields.remove(ANSWERED_BY);
            }
        }
        if fields.is_empty() {
            entry.metadata = None;
        }
    }
}

fn prepare(input: RunAgentInput, principal: Option<Principal>, durable: bool) -> Prepared {
    let resume = input.resume.as_deref().unwrap_or_default();
    let mut invalid = None;
    let mut answers = Vec::with_capacity(resume.len());
    for entry in resume {
        let id = InterruptId::from(entry.interrupt_id.as_str());
        let problem = match interrupt::decision(entry) {
            _ if answers.iter().any(|(answered, _)| answered == &id) => {
                Some("it is answered twice".to_owned())
            }
            Ok(decision) => {
                answers.push((id, decision));
                None
            }
            Err(why) => Some(why.to_string()),
        };
        if let Some(why) = problem {
            invalid.get_or_insert_with(|| {
                format!("the answer to interrupt `{}`: {why}", entry.interrupt_id)
            });
        }
    }
    let as_json = serde_json::to_value(&input).unwrap_or(Value::Null);
    let request_hash = args_hash(&as_json);
    // What a server continuing the run after this one stopped needs (a run that applies
    // decisions: its conversation is the thread's); a log that ends with this process keeps
    // only that.
    let continues = !resume.is_empty();
    let request = match (continues, durable) {
        (true, _) => Some(kept(&input)),
        (false, true) => Some(as_json),
        (false, false) => None,
    };
    // A conversation nothing has answered yet may be its thread's first: if it is, the start
    // keeps it (and lists the thread) in its own write.
    let unanswered = !input.messages.iter().any(|message| {
        matches!(
            message,
            crate::agui::input::Message::Assistant { .. }
                | crate::agui::input::Message::Tool { .. }
        )
    });
    let first_turn = (!continues && unanswered).then(|| FirstTurn {
        messages: (input.messages.iter())
            .filter_map(crate::agui::input::Message::to_domain)
            .collect(),
        state: input.state.clone(),
    });
    Prepared {
        start: Start {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            request_hash,
            resume: answers,
            request,
            principal,
            first_turn,
        },
        input,
        invalid,
        attach: None,
    }
}

/// The answer to a request whose run id is taken: the run the same request started, replayed
/// from where that request's segment begins; a different request is refused.
fn taken(run: RunId, same: bool, from: u64) -> Result<Begun, NotTaken> {
    if same {
        Ok(Begun::Replayed { run_id: run, from })
    } else {
        Err(NotTaken::Error(BeginError::RunExists(run)))
    }
}

/// How one attempt at starting went, when it took no run.
enum NotTaken {
    Busy(ThreadId, Option<RunId>),
    /// Refused and, as asked, not recorded.
    Refused(&'static str, String),
    Error(BeginError),
}

/// What the run of `record` was asked (its tools, context and properties), as the log keeps it,
/// for `run` of `thread`; a request of nothing else when it keeps none (the conversation of a run
/// that applies answers is its thread's anyway).
fn asked_of(record: Option<&super::RunRecord>, thread: ThreadId, run: RunId) -> RunAgentInput {
    let mut input = record
        .and_then(|record| record.request.clone())
        .and_then(|request| serde_json::from_value::<RunAgentInput>(request).ok())
        .unwrap_or_else(|| RunAgentInput::new(thread.clone(), run.clone(), Vec::new()));
    input.thread_id = thread;
    input.run_id = run;
    input
}

/// An answer's start, as [`Runs::resume_thread`] and [`Runs::continue_run`] tell it: refusals
/// are errors, with their codes.
fn answered(taken: Result<Begun, NotTaken>) -> Result<Begun, ResumeError> {
    match taken {
        Ok(begun) => Ok(begun),
        Err(NotTaken::Refused("resume_invalid", message)) => Err(ResumeError::Invalid(message)),
        Err(NotTaken::Refused(code, message)) => Err(ResumeError::Refused { code, message }),
        Err(NotTaken::Busy(thread, _)) => Err(ResumeError::Begin(BeginError::Busy(thread))),
        Err(NotTaken::Error(error)) => Err(ResumeError::Begin(error)),
    }
}

impl Runs {
    /// Takes a run request: starts its run on this instance, replays it (the same request
    /// again), or refuses it with a `RUN_ERROR` recorded as its run; see the
    /// [rules](super#the-rules-of-a-start).
    ///
    /// Cancellation-safe: dropping the future leaves either no run or a run driven to its end.
    ///
    /// # Errors
    ///
    /// See [`BeginError`]: when there is nothing to follow.
    pub async fn begin(&self, input: RunAgentInput) -> Result<Begun, BeginError> {
        self.begin_as(None, input).await
    }

    /// [`begin`](Self::begin) for `principal` (`None`: everyone, a server that authenticates
    /// nobody): a new thread becomes theirs, another principal's thread or run does not exist
    /// for them ([`BeginError::UnknownThread`], [`BeginError::RunExists`]), and the run's
    /// context names them ([`RunContext::principal`](crate::context::RunContext::principal)).
    ///
    /// # Errors
    ///
    /// See [`BeginError`].
    pub async fn begin_as(
        &self,
        principal: Option<Principal>,
        input: RunAgentInput,
    ) -> Result<Begun, BeginError> {
        self.begin_with(principal, input, None).await
    }

    /// [`begin_as`](Self::begin_as), the run's context in this process completed by `attach`
    /// (a door's live transport and its session's tools and settings; see [`Attach`]).
    ///
    /// # Errors
    ///
    /// See [`BeginError`].
    pub async fn begin_with(
        &self,
        principal: Option<Principal>,
        input: RunAgentInput,
        attach: Option<Attach>,
    ) -> Result<Begun, BeginError> {
        let busy = self.inner.config.busy_thread;
        self.begin_taking(principal, input, attach, busy).await
    }

    /// [`begin_as`](Self::begin_as), with a busy thread handled as `busy` says rather than as
    /// the engine's [`busy_thread`](Self::busy_thread) setting: a client's choice for its own
    /// run (over HTTP, `Prefer: busy-thread=…`).
    ///
    /// # Errors
    ///
    /// See [`BeginError`].
    pub async fn begin_busy(
        &self,
        principal: Option<Principal>,
        input: RunAgentInput,
        busy: BusyThread,
    ) -> Result<Begun, BeginError> {
        self.begin_taking(principal, input, None, busy).await
    }

    /// A begin: the run taken, its refusal recorded, a busy thread handled as `busy` says.
    async fn begin_taking(
        &self,
        principal: Option<Principal>,
        mut input: RunAgentInput,
        attach: Option<Attach>,
        busy: BusyThread,
    ) -> Result<Begun, BeginError> {
        sign(input.resume.as_deref_mut(), principal.as_ref());
        match self.take(input, principal, attach, busy, true).await {
            Ok(begun) => Ok(begun),
            Err(NotTaken::Error(error)) => Err(error),
            Err(NotTaken::Busy(thread, _)) => Err(BeginError::Busy(thread)),
            Err(NotTaken::Refused(..)) => unreachable!("refusals are recorded"),
        }
    }

    /// Answers one interrupt out of band, as `answered_by` (an operator, say; `None`: no one
    /// named, a server that authenticates nobody): its thread is resumed in a run nobody watches
    /// (follow it with [`Runs::follow`]), whose `RUN_STARTED` names who answered (see
    /// [`ANSWERED_BY`]).
    ///
    /// # Errors
    ///
    /// See [`ResumeError`]: the interrupt is unknown, resolved already, expired, or the thread has
    /// other pending interrupts; or no run could be taken.
    pub async fn resolve(
        &self,
        answered_by: Option<&Principal>,
        interrupt: &InterruptId,
        status: ResumeStatus,
        payload: Option<Value>,
    ) -> Result<Resumed, ResumeError> {
        let record = self
            .inner
            .log
            .interrupts(Interrupts::Id(interrupt))
            .await
            .map_err(|e| ResumeError::Begin(BeginError::Unavailable(e)))?
            .into_iter()
            .next()
            .ok_or_else(|| ResumeError::UnknownInterrupt(interrupt.clone()))?;
        if record.status == InterruptStatus::Resolved {
            return Err(ResumeError::Refused {
                code: "interrupt_already_resolved",
                message: StartError::AlreadyResolved {
                    id: record.id,
                    by_run: record.resolved_by_run.unwrap_or(record.run_id),
                }
                .to_string(),
            });
        }
        let entry = ResumeEntry {
            interrupt_id: interrupt.to_string(),
            status,
            payload,
            metadata: None,
        };
        self.resume_thread(answered_by, record.thread_id, vec![entry])
            .await
    }

    /// Answers interrupts of `thread` out of band, as `answered_by`: the thread is resumed in a
    /// run nobody watches (see [`resolve`](Self::resolve)).
    ///
    /// # Errors
    ///
    /// See [`ResumeError`].
    pub async fn resume_thread(
        &self,
        answered_by: Option<&Principal>,
        thread: ThreadId,
        mut resume: Vec<ResumeEntry>,
    ) -> Result<Resumed, ResumeError> {
        sign(Some(&mut resume), answered_by);
        if resume.is_empty() {
            return Err(ResumeError::Invalid(
                "`resume` must answer the thread's pending interrupts".to_owned(),
            ));
        }
        let pending = self
            .inner
            .log
            .interrupts(Interrupts::PendingOf(&thread))
            .await
            .map_err(|e| ResumeError::Begin(BeginError::Unavailable(e)))?;
        let Some(asked) = pending.first() else {
            return Err(ResumeError::NothingToResume(thread));
        };
        let interrupted = self
            .inner
            .log
            .run(&asked.run_id)
            .await
            .map_err(|e| ResumeError::Begin(BeginError::Unavailable(e)))?;
        let mut input = asked_of(interrupted.as_ref(), thread.clone(), RunId::new());
        input.resume = Some(resume);
        let busy = self.inner.config.busy_thread;
        let begun = answered(self.take(input, None, None, busy, false).await)?;
        Ok(Resumed {
            thread_id: thread,
            run_id: begun.run_id().clone(),
        })
    }

    /// Continues `run`, which stopped at interrupts, with `resume`, answers to every one of them,
    /// as `principal`, under the run's own id: its log goes on after the interrupts (follow it
    /// from [`Begun::from`]). What the door of a task that waits for a person (an MCP tool call,
    /// an A2A task) does with the answers it gets; the run is asked what it was first asked (its
    /// tools, context and properties, as the log keeps them), its conversation the thread's.
    ///
    /// # Errors
    ///
    /// [`ResumeError::UnknownRun`] for a run the log does not know or `principal` may not use;
    /// the refusals of [`resume_thread`](Self::resume_thread) otherwise.
    pub async fn continue_run(
        &self,
        principal: Option<Principal>,
        run: &RunId,
        resume: Vec<ResumeEntry>,
    ) -> Result<Begun, ResumeError> {
        let record = self
            .inner
            .log
            .run(run)
            .await
            .map_err(|e| ResumeError::Begin(BeginError::Unavailable(e)))?
            .filter(|record| super::rules::may_use(principal.as_ref(), record.principal.as_deref()))
            .ok_or_else(|| ResumeError::UnknownRun(run.clone()))?;
        if resume.is_empty() {
            return Err(ResumeError::Invalid(
                "`resume` must answer the run's pending interrupts".to_owned(),
            ));
        }
        let mut input = asked_of(Some(&record), record.thread_id.clone(), run.clone());
        let mut resume = resume;
        sign(Some(&mut resume), principal.as_ref());
        input.resume = Some(resume);
        let busy = self.inner.config.busy_thread;
        answered(self.take(input, principal, None, busy, false).await)
    }

    /// The request of a new turn of `thread` for `principal`: the conversation and state the log
    /// keeps for the thread, then `message`, under a new run id; a thread the log does not know
    /// begins with `message`. What a door that keeps no conversation of its own (an editor's
    /// session, an MCP tool call, an A2A message) asks the engine to run.
    ///
    /// # Errors
    ///
    /// [`BeginError::UnknownThread`] for a thread of another principal;
    /// [`BeginError::Unavailable`] when the log fails.
    pub async fn next_turn(
        &self,
        principal: Option<&Principal>,
        thread: ThreadId,
        message: Message,
    ) -> Result<RunAgentInput, BeginError> {
        let record = self
            .inner
            .log
            .thread(&thread)
            .await
            .map_err(BeginError::Unavailable)?;
        let (mut messages, state) = match record {
            Some(record) if !super::rules::may_use(principal, record.principal.as_deref()) => {
                return Err(BeginError::UnknownThread(thread));
            }
            Some(record) => (record.messages, record.state),
            None => (Vec::new(), None),
        };
        messages.push(message);
        let messages = messages
            .iter()
            .filter_map(crate::agui::input::Message::from_domain)
            .collect();
        let mut input = RunAgentInput::new(thread, RunId::new(), messages);
        input.state = state;
        Ok(input)
    }

    /// Rolls back `active`, which has ended ([`BusyThread::Rollback`]): what it added is left
    /// out of its thread, and out of the client's copy in `prepared`, prepared again.
    async fn rolled_back(
        &self,
        prepared: &Prepared,
        active: &RunId,
        durable: bool,
    ) -> Result<Arc<Prepared>, LogError> {
        let added = super::rollback::roll_back(&*self.inner.log, active).await?;
        let mut input = prepared.input.clone();
        input.messages.retain(|m| !added.contains(m.id()));
        let principal = prepared.start.principal.clone();
        Ok(Arc::new(Prepared {
            attach: prepared.attach.clone(),
            ..prepare(input, principal, durable)
        }))
    }

    /// What a log that instances share says `principal`'s runs use, when it is limited.
    async fn principal_usage(
        &self,
        principal: Option<&Principal>,
    ) -> Result<Option<PrincipalUsage>, LogError> {
        let (Some(durable), Some((name, minute_ago, day_began))) = (
            self.inner.log.durable(),
            self.inner.config.quotas.to_ask(principal),
        ) else {
            return Ok(None);
        };
        durable
            .principal_usage(&name, minute_ago, day_began)
            .await
            .map(Some)
    }

    /// Starts, replays or refuses `input` (recording refusals when `record`), a busy thread
    /// handled as `busy` says.
    async fn take(
        &self,
        input: RunAgentInput,
        principal: Option<Principal>,
        attach: Option<Attach>,
        busy: BusyThread,
        record: bool,
    ) -> Result<Begun, NotTaken> {
        if self.is_stopping() {
            return Err(NotTaken::Error(BeginError::ShuttingDown));
        }
        self.sweep();
        let durable = self.inner.log.durable().is_some();
        let mut prepared = Arc::new(Prepared {
            attach,
            ..prepare(input, principal, durable)
        });
        loop {
            // The start and what it implies (the driver's task, the recorded refusal) run in a
            // task of their own: a caller that goes away cannot cut them in half.
            let (inner, attempt) = (self.inner.clone(), prepared.clone());
            // A live run holds its permit until it ends.
            let permit = self
                .inner
                .config
                .live
                .clone()
                .try_acquire_owned()
                .map_err(|_| NotTaken::Error(BeginError::Overloaded(self.inner.config.max_live)))?;
            let everywhere = self
                .principal_usage(prepared.start.principal.as_ref())
                .await
                .map_err(|error| NotTaken::Error(BeginError::Unavailable(error)))?;
            let admitted = (self.inner.config.quotas)
                .admit(
                    prepared.start.principal.as_ref(),
                    std::time::Instant::now(),
                    everywhere,
                )
                .map_err(|(limit, retry_after)| {
                    NotTaken::Error(BeginError::Limited { limit, retry_after })
                })?;
            let taken =
                tokio::spawn(
                    async move { inner.try_start(&attempt, record, (permit, admitted)).await },
                )
                .await
                .unwrap_or_else(|join| {
                    Err(NotTaken::Error(BeginError::Unavailable(
                        LogError::unavailable(format!("the start failed: {join}")),
                    )))
                });
            match taken {
                Err(NotTaken::Busy(_, active)) if busy != BusyThread::Reject => {
                    if let Some(active) = active {
                        let unavailable = |e| NotTaken::Error(BeginError::Unavailable(e));
                        if matches!(busy, BusyThread::Interrupt | BusyThread::Rollback) {
                            self.cancel(&active).await.map_err(unavailable)?;
                        }
                        self.inner.until_ended(&active).await.map_err(unavailable)?;
                        if busy == BusyThread::Rollback {
                            prepared = self
                                .rolled_back(&prepared, &active, durable)
                                .await
                                .map_err(unavailable)?;
                        }
                    }
                }
                taken => return taken,
            }
        }
    }
}

impl Inner {
    /// One attempt: the log's start, then the run's driver, or the refusal.
    async fn try_start(
        self: &Arc<Self>,
        prepared: &Prepared,
        record: bool,
        (permit, admitted): (OwnedSemaphorePermit, Option<Admitted>),
    ) -> Result<Begun, NotTaken> {
        let start = &prepared.start;
        if let Some(why) = &prepared.invalid {
            return self
                .refuse(prepared, "resume_invalid", why.clone(), record)
                .await;
        }
        match self.log.start(start).await {
            Ok(lease) => {
                if let Some(operator) = start
                    .principal
                    .as_ref()
                    .filter(|p| p.is_operator() && lease.principal.as_deref() != Some(p.name()))
                {
                    tracing::info!(
                        operator = operator.name(),
                        owner = lease.principal.as_deref().unwrap_or_default(),
                        thread_id = %lease.thread_id,
                        run_id = %lease.run_id,
                        "an operator runs on another principal's thread"
                    );
                }
                let from = lease.last_seq;
                let cancel = self.launch(Launch {
                    lease,
                    input: prepared.input.clone(),
                    continues: !start.resume.is_empty(),
                    attempts: 1,
                    principal: start.principal.clone(),
                    takeover: None,
                    attach: prepared.attach.clone(),
                    _permit: Some(permit),
                    _admitted: admitted,
                });
                Ok(Begun::Started {
                    run_id: start.run_id.clone(),
                    from,
                    cancel,
                })
            }
            Err(StartError::Exists { run, same, from }) => taken(run, same, from),
            Err(StartError::UnknownThread(thread)) => {
                Err(NotTaken::Error(BeginError::UnknownThread(thread)))
            }
            Err(StartError::Busy { thread, active }) => Err(NotTaken::Busy(thread, active)),
            Err(StartError::Log(error)) => {
                // The start may have been written before the failure: make sure such a run
                // ends (or runs again, if it applies decisions) once the log answers.
                self.settle_start(start);
                Err(NotTaken::Error(BeginError::Unavailable(error)))
            }
            Err(refused) => {
                let code = refused.code().unwrap_or("run_refused");
                self.refuse(prepared, code, refused.to_string(), record)
                    .await
            }
        }
    }

    /// Refuses `prepared` with `code`: recorded as a run of `RUN_STARTED` and `RUN_ERROR` (when
    /// `record`), or returned.
    async fn refuse(
        &self,
        prepared: &Prepared,
        code: &'static str,
        message: String,
        record: bool,
    ) -> Result<Begun, NotTaken> {
        if !record {
            return Err(NotTaken::Refused(code, message));
        }
        let start = &prepared.start;
        let events = [
            LoggedEvent::stamped(1, bare_start(&start.thread_id, &start.run_id)),
            LoggedEvent::stamped(
                2,
                Event::from(RunError {
                    message: message.clone(),
                    code: Some(code.to_owned()),
                    usage: None,
                    base: BaseEvent::default(),
                }),
            ),
        ];
        match self.log.refuse(start, &events).await {
            Ok(()) => {
                self.hub.wake(&start.run_id);
                self.ended(&RunSummary {
                    thread_id: start.thread_id.clone(),
                    run_id: start.run_id.clone(),
                    principal: start.principal.as_ref().map(|p| p.name().to_owned()),
                    events: 2,
                    attempt: 1,
                    duration: Duration::ZERO,
                    end: Ended::Refused(code),
                    code: Some(code.to_owned()),
                });
                Ok(Begun::Refused {
                    run_id: start.run_id.clone(),
                    code,
                    message,
                })
            }
            Err(StartError::Exists { run, same, from }) => taken(run, same, from),
            Err(StartError::UnknownThread(thread)) => {
                Err(NotTaken::Error(BeginError::UnknownThread(thread)))
            }
            Err(StartError::Log(error)) => Err(NotTaken::Error(BeginError::Unavailable(error))),
            Err(other) => Err(NotTaken::Error(BeginError::Unavailable(
                LogError::unavailable(other.to_string()),
            ))),
        }
    }

    /// Waits until `run` is no longer running.
    async fn until_ended(&self, run: &RunId) -> Result<(), LogError> {
        let topic = self.hub.watch(run);
        // A run another instance drives ends without a word here on a log that does not tell
        // (SQLite shared by two processes): it is read again at the heartbeat's pace.
        let pace = self.config.lease / 3;
        loop {
            let woken = topic.notified();
            let mut woken = std::pin::pin!(woken);
            woken.as_mut().enable();
            match self.log.run(run).await? {
                Some(record) if record.status == RunStatus::Running => {
                    let _ = tokio::time::timeout(pace, woken).await;
                }
                _ => return Ok(()),
            }
        }
    }
}
