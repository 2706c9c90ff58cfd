//! The driver: one task per run, running the agent and writing what it emits to the log.

use std::{
    fmt,
    panic::AssertUnwindSafe,
    sync::Arc,
    time::{Duration, Instant},
};

use futures_util::{FutureExt, StreamExt, TryFutureExt, future::BoxFuture};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::{
    Inner, Lease, LogError, Logged, LoggedEvent, LostRun, OnRunEnd, RunEnd, RunEnding, RunRecord,
    RunStatus, SENT_AHEAD, SavedThread,
    hub::Topic,
    quota::{Admitted, Limit},
    record::stamp,
    request::{Asked, kept, run_request, stored},
    takeover::{Progress, unanswered},
};
use crate::{
    BoxError,
    agui::{
        AguiOptions, Event, RunAgentInput,
        error::ConfigError,
        event::{BaseEvent, RunError},
        framing::{Framing, invalid_options},
    },
    context::{Checkpoint, Principal},
    id::{RunId, ThreadId},
    message::Message,
    run::{EarlierUsage, RunOutcome, RunRequest, StopReason},
    tool::CutOff,
    transport::{Channel, ChannelReceiver, OnDisconnect},
};

/// The most events one write carries.
const MAX_BATCH_EVENTS: usize = 4096;

/// The most bytes of events one write carries (past it, the one event that crossed it).
const MAX_BATCH_BYTES: usize = 1024 * 1024;

/// The code of a run refused because its request lacks turns of the thread.
const THREAD_CONFLICT: &str = "thread_conflict";

/// What a run resolves to: the agent's answer, or its panic.
type Resolving = BoxFuture<
    'static,
    Result<Result<RunOutcome, BoxError>, Box<dyn std::any::Any + Send + 'static>>,
>;

/// The events gathered for the run's next write. While one write is in flight the next batch
/// gathers what the agent sends meanwhile, up to its bounds; then the agent waits. A long answer
/// is therefore as many writes (commits, on a durable log) as the bounds cut it into. On a log
/// that [sends ahead](super::RunLog::sends_ahead), a batch also gathers for the log's window
/// before it is written, its events sent meanwhile.
#[derive(Default)]
struct Batch {
    events: Vec<LoggedEvent>,
    bytes: usize,
}

impl Batch {
    fn push(&mut self, event: LoggedEvent) {
        self.bytes += event.json().len();
        self.events.push(event);
    }

    /// Whether it may take another event.
    fn has_room(&self) -> bool {
        self.events.len() < MAX_BATCH_EVENTS && self.bytes < MAX_BATCH_BYTES
    }

    fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Its events, leaving it empty.
    fn take(&mut self) -> Vec<LoggedEvent> {
        self.bytes = 0;
        std::mem::take(&mut self.events)
    }
}

/// How a run ended, as [`RunSummary`] tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// The agent returned (cancelled runs too: [`StopReason::Cancelled`]).
    Finished(StopReason),
    /// The agent failed.
    Failed(String),
    /// The request was refused with this `RUN_ERROR` code.
    Refused(&'static str),
    /// The run's log could not be written: the run was stopped.
    LogFailed(String),
    /// Its viewer went away and the run was cancelled.
    Disconnected,
    /// Its viewer went away and the run went on without it, to this end.
    Detached(Box<Ended>),
    /// Its server drained and left it, unfinished, for another to continue
    /// ([`Runs::hand_over`](super::Runs::hand_over)).
    HandedOver,
}

impl Ended {
    /// Whether the run failed (the agent, or its log): what an operator is warned of.
    #[must_use]
    pub fn is_failure(&self) -> bool {
        match self {
            Self::Failed(_) | Self::LogFailed(_) => true,
            Self::Detached(end) => end.is_failure(),
            _ => false,
        }
    }
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Finished(stop) => write!(f, "finished ({stop:?})"),
            Self::Failed(error) => write!(f, "failed ({error})"),
            Self::Refused(code) => write!(f, "refused ({code})"),
            Self::LogFailed(error) => write!(f, "stopped: its log failed ({error})"),
            Self::Disconnected => f.pad("cancelled (client disconnected)"),
            Self::Detached(end) => write!(f, "{end}, after the client disconnected"),
            Self::HandedOver => f.pad("handed over to be continued elsewhere"),
        }
    }
}

/// What the engine knows of a run when it ends; given to the `on_run_end` callback.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The thread.
    pub thread_id: ThreadId,
    /// The run.
    pub run_id: RunId,
    /// Who started it (`None`: nobody authenticated).
    pub principal: Option<String>,
    /// Events the run wrote to its log (this attempt).
    pub events: u64,
    /// Which attempt ended, from 1 (a run continued after its server stopped: 2 and up).
    pub attempt: u32,
    /// From the start to the end.
    pub duration: Duration,
    /// How it ended.
    pub end: Ended,
    /// The code of the `RUN_ERROR` it ended with, if it did.
    pub code: Option<String>,
}

pub(super) fn log_run_end() -> OnRunEnd {
    Arc::new(|run: &RunSummary| {
        macro_rules! line {
            ($level:ident) => {
                tracing::$level!(
                    thread_id = %run.thread_id,
                    run_id = %run.run_id,
                    principal = run.principal.as_deref().unwrap_or_default(),
                    events = run.events,
                    attempt = run.attempt,
                    duration_ms = run.duration.as_millis() as u64,
                    outcome = %run.end,
                    code = run.code.as_deref().unwrap_or_default(),
                    "run ended"
                )
            };
        }
        if run.end.is_failure() {
            line!(warn);
        } else {
            line!(info);
        }
    })
}

/// A run this instance holds the lease of, to drive.
pub(super) struct Launch {
    pub(super) lease: Lease,
    /// The request (for a continuation: without messages; the thread's conversation is used).
    pub(super) input: RunAgentInput,
    /// Whether it applies decisions (continues the thread's stored conversation).
    pub(super) continues: bool,
    /// Which attempt this is, from 1.
    pub(super) attempts: u32,
    /// Who started it (a run taken over after a crash: whom it belongs to).
    pub(super) principal: Option<Principal>,
    /// What it had done before its server stopped, when this attempt continues it.
    pub(super) takeover: Option<Progress>,
    /// What the door that began it lends it in this process.
    pub(super) attach: Option<super::Attach>,
    /// Its place among the live runs, held until it ends.
    pub(super) _permit: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Its place among its principal's live runs, held until it ends.
    pub(super) _admitted: Option<Admitted>,
}

impl Inner {
    /// `summary`'s run ended: it is reported.
    pub(super) fn ended(&self, summary: &RunSummary) {
        self.config.observer.on_end(summary);
        (self.config.on_run_end)(summary);
    }

    /// Drives `launch` in a task of its own; returns the run's cancellation token. Followers in
    /// this process read the run's events from memory from now on.
    pub(super) fn launch(self: &Arc<Self>, launch: Launch) -> CancellationToken {
        self.config.observer.on_start();
        let cancel = self.config.shutdown.child_token();
        let topic = self.hub.watch(&launch.lease.run_id);
        topic.drive(launch.lease.last_seq, cancel.clone());
        self.hub.wake_thread(&launch.lease.thread_id);
        let driver = Driver {
            next_seq: launch.lease.last_seq + 1,
            ahead: self.log.sends_ahead(),
            sent: launch.lease.last_seq,
            committed: launch.lease.last_seq,
            lease: Arc::new(launch.lease.clone()),
            inner: self.clone(),
            topic,
            cancel: cancel.clone(),
            launch,
            started: Instant::now(),
            logged: 0,
            received: 0,
            code: None,
            ending: None,
            taken: (0, 0),
            terminal: false,
            unbilled: 0,
            opening: None,
            first: false,
        };
        self.drivers.spawn(driver.run());
        cancel
    }

    /// Makes sure a start whose outcome is unknown (the log failed while writing it) does not
    /// leave a run running: once the log answers, such a run is recovered like a lost one.
    pub(super) fn settle_start(self: &Arc<Self>, start: &super::Start) {
        let now = std::time::SystemTime::now();
        self.settle(LostRun {
            record: RunRecord {
                run_id: start.run_id.clone(),
                thread_id: start.thread_id.clone(),
                status: RunStatus::Running,
                owner: self.log.owner().to_owned(),
                // Not known here: the log's record has it.
                principal: None,
                last_seq: 0,
                created_at: now,
                updated_at: now,
                request: start.request.clone(),
            },
            // It never ran: a retry is its first attempt.
            attempts: 0,
        });
    }
}

/// One run being driven.
struct Driver {
    inner: Arc<Inner>,
    lease: Arc<Lease>,
    topic: Arc<Topic>,
    cancel: CancellationToken,
    launch: Launch,
    started: Instant,
    /// The sequence number the next event gets.
    next_seq: u64,
    /// How long a batch gathers before it is written, its events sent meanwhile, when the log
    /// [sends ahead](super::RunLog::sends_ahead).
    ahead: Option<Duration>,
    /// The sequence number of the last event given to followers.
    sent: u64,
    /// The sequence number of the last event committed.
    committed: u64,
    /// Events written by this attempt.
    logged: u64,
    /// Events of the agent read from its channel by this attempt.
    received: u64,
    /// The code of the `RUN_ERROR` written, if one was.
    code: Option<String>,
    /// The terminal event taken and not yet logged: its `RUN_ERROR` code and token usage.
    ending: Option<Ending>,
    /// Events and bytes of JSON this attempt took.
    taken: (u64, u64),
    /// Whether the last event taken ends the run's segment.
    terminal: bool,
    /// Bytes taken and not yet counted against its principal's day.
    unbilled: u64,
    /// The run's opening as the engine writes it, until the agent's first event: an agent that
    /// writes its own `RUN_STARTED` (a run-level [`AguiLayer`](crate::agui::AguiLayer)) opens
    /// the run itself, any other is preceded by this. `None` once the run has opened, and for an
    /// attempt that continues it: a `RUN_STARTED` of the agent's is then not logged.
    opening: Option<Vec<Event>>,
    /// Whether this run is its thread's first (asked what began the thread), which a title
    /// model names once it answered.
    first: bool,
}

/// How many bytes of a run's events are counted against its principal's day at once.
const BILLED: u64 = 64 * 1024;

type Write = BoxFuture<'static, (Vec<LoggedEvent>, Result<(), LogError>)>;

/// What a run's terminal event says that the driver reports once it is logged.
struct Ending {
    code: Option<String>,
    /// A `RUN_ERROR`'s message.
    message: Option<String>,
    usage: Option<Vec<crate::agui::event::TokenUsage>>,
}

impl Ending {
    fn of(event: &Event) -> Option<Self> {
        let (code, message, usage) = match event {
            Event::RunFinished(finished) => (None, None, &finished.usage),
            Event::RunError(error) => (
                error.code.clone(),
                Some(error.message.clone()),
                &error.usage,
            ),
            _ => return None,
        };
        Some(Self {
            code,
            message,
            usage: usage.as_deref().map(<[_]>::to_vec),
        })
    }
}

impl Driver {
    async fn run(mut self) {
        let (tx, mut rx) = Channel::<Event>::bounded(self.inner.config.channel_capacity);
        // How many of the agent's events the log keeps: what its checkpoint waits on; and when
        // the agent waits there (what it waits for is written without waiting for its window).
        let keeping = tokio::sync::watch::Sender::new(0);
        let waiting = Arc::new(tokio::sync::Notify::new());
        let mut batch = Batch::default();
        // In a block of its own: the request is not kept beside the run that consumes it, for
        // as long as the run lasts.
        let (mut run, framing) = {
            let request = if self.lease.made_thread {
                Ok(Asked::first_turn(&self.launch.input))
            } else {
                run_request(&*self.inner.log, &self.launch.input, self.launch.continues).await
            };
            let (mut req, stale) = match request {
                Ok(asked) => {
                    if asked.first && asked.stale.is_none() {
                        self.first = true;
                        self.list_new_thread(&asked.request).await;
                    }
                    (asked.request, asked.stale)
                }
                Err(error) => return self.abandon(error),
            };
            if let Some(attach) = &self.launch.attach {
                attach.apply(&mut req.run);
            }
            req.run.sinks.insert(tx);
            // The agent acts on a step once the log keeps it (see `Checkpoint`).
            req.run.extensions.insert(
                Checkpoint::new(rx.sent_count(), keeping.subscribe()).telling(waiting.clone()),
            );
            // The driver reads every event: the run never loses its sink to a viewer leaving.
            req.run.sinks.on_disconnect = Some(OnDisconnect::Continue);
            req.run.cancel = self.cancel.clone();
            req.run.principal = self.launch.principal.clone();
            self.inner.config.observer.on_request(&mut req);
            // The engine writes the run's own events for an agent that writes none; a request
            // for options they cannot have is refused before the agent runs.
            let framing = Framing::of(&AguiOptions::default(), &req.run).and_then(|framing| {
                // What its end is to tell (a webhook) is asked before it runs.
                match &self.inner.config.notify {
                    Some(notify) => notify.check(&self.launch.input).map_err(ConfigError::new),
                    None => Ok(()),
                }
                .map(|()| framing)
            });
            match framing {
                Ok(framing) => {
                    if let Some(progress) = self.launch.takeover.take() {
                        self.continue_from(&mut req, progress);
                    } else {
                        self.opening = Some(framing.opening(&req).collect());
                    }
                    let run = match stale {
                        Some(conversation) => self.refuse_stale(&mut batch, conversation),
                        None => {
                            let agent = self.inner.agent.clone();
                            AssertUnwindSafe(agent.oneshot(req).map_err(Into::into))
                                .catch_unwind()
                                .boxed()
                        }
                    };
                    (Some(run), Some(framing))
                }
                Err(error) => {
                    self.take(&mut batch, invalid_options(&error));
                    let refused: BoxError = crate::run::InvalidRequest::new(error).into();
                    (
                        Some(futures_util::future::ready(Ok(Err(refused))).boxed()),
                        None,
                    )
                }
            }
        };

        let mut result: Option<Result<RunOutcome, BoxError>> = None;
        let mut writing: Option<Write> = None;
        // The agent's events the write in flight keeps, with those before it.
        let mut writing_kept = 0;
        let mut closed = false;
        // Why the run was stopped before its end, and the code its end says it with.
        let mut full: Option<(&str, String)> = None;
        let handing_over = self.inner.handing_over.clone();
        let mut handed = false;
        // When the batch gathering, sent ahead, is due to be written.
        let mut window: Option<tokio::time::Instant> = None;
        loop {
            if handed && writing.is_none() && (self.ahead.is_none() || batch.is_empty()) {
                // What was not written is done again where the run continues (what was sent
                // was written first).
                return self.handed_over();
            }
            // Once the run has resolved, what is left goes out with its end, in one write.
            if result.is_some() && writing.is_none() {
                break;
            }
            let due = match self.ahead {
                None => !handed,
                Some(_) if batch.is_empty() => {
                    window = None;
                    false
                }
                // A batch sent ahead is written once its window is over (or the agent waits for
                // it), or at once when it is full or the run is handed over.
                Some(gather) => {
                    let now = tokio::time::Instant::now();
                    let over = *window.get_or_insert(now + gather) <= now;
                    over || handed || !self.may_take(&batch)
                }
            };
            if writing.is_none() && !batch.is_empty() && due {
                writing = Some(self.write(batch.take(), None));
                writing_kept = self.received;
                window = None;
            }
            tokio::select! {
                waited = window_over(window.filter(|_| writing.is_none()), &waiting),
                    if self.ahead.is_some() => {
                    if waited {
                        // The agent waits for its events to be kept: its window is over.
                        window = Some(tokio::time::Instant::now());
                    }
                }
                () = handing_over.cancelled(), if run.is_some() => {
                    // Dropped unfinished: whatever it says of its end is not logged.
                    run = None;
                    handed = true;
                }
                done = async { run.as_mut().expect("guarded").await }, if run.is_some() => {
                    result = Some(done.unwrap_or_else(|_| Err("the agent panicked".into())));
                    // Dropping the agent's future drops its senders: the channel ends after
                    // what it sent.
                    run = None;
                }
                event = rx.next(), if !closed && run.is_some() && self.may_take(&batch) => {
                    self.received += u64::from(event.is_some());
                    match event {
                        Some(event) if full.is_none() => {
                            if let Err(stopped) = self.take_all_bounded(&mut batch, event, &mut rx) {
                                self.cancel.cancel();
                                full = Some(stopped);
                            }
                            self.send_ahead(&batch);
                        }
                        Some(_) => {}
                        None => closed = true,
                    }
                }
                (events, written) = async { writing.as_mut().expect("guarded").await }, if writing.is_some() => {
                    writing = None;
                    match written {
                        Ok(()) => {
                            self.logged(&events);
                            keeping.send_replace(writing_kept);
                        }
                        Err(LogError::Full(why)) if self.unsent(&events).len() == events.len() => {
                            // Nothing more fits: the run is stopped and ends with the reason,
                            // right after what was logged. (Events sent ahead cannot be taken
                            // back so: their run is settled, as for any other failed write.)
                            self.cancel.cancel();
                            full = Some(("log_full", format!("the run was stopped: {why}")));
                            batch.take();
                            self.next_seq = events.first().map_or(self.next_seq, |e| e.seq);
                        }
                        Err(error) => return self.abandon(error),
                    }
                }
            }
        }
        while let Some(event) = rx.try_recv() {
            if full.is_none()
                && let Err(stopped) = self.take_bounded(&mut batch, event)
            {
                full = Some(stopped);
            }
        }
        // An agent that emitted nothing: the run opens here, then ends.
        for event in self.opening.take().into_iter().flatten() {
            self.take(&mut batch, event);
        }
        let result = result.expect("the loop ends when the run has resolved");
        let mut end = end_of(&result);
        if end.status == RunStatus::Interrupted {
            // An answer given out of band continues the run with what it was asked.
            end.request = Some(kept(&self.launch.input));
        }
        if let Some((code, why)) = full {
            if code == "log_full" {
                batch.take();
            }
            end = RunEnd::new(RunStatus::Failed);
            self.terminal = false;
            let error = run_error(code, why);
            self.take(&mut batch, error);
        } else if !self.terminal {
            // The agent wrote no end of its own: the engine writes it.
            match &result {
                Ok(_) => {
                    for event in framing.iter().flat_map(|framing| framing.closing(&result)) {
                        self.take(&mut batch, event);
                    }
                }
                Err(error) => {
                    let (code, message) = crate::map_error::run_error(error.as_ref());
                    let error = run_error(code.as_deref().unwrap_or("run_failed"), message);
                    self.take(&mut batch, error);
                }
            }
        }
        self.notices(&mut end);
        let (events, written) = self.write(batch.take(), Some(end)).await;
        match written {
            Ok(()) => {
                self.logged(&events);
                self.topic.ended();
                let lease = &self.lease;
                (self.inner.listing).changed(&lease.thread_id, lease.principal.as_deref());
                if let (Some(titles), true, Ok(outcome)) =
                    (&self.inner.config.titles, self.first, &result)
                    && outcome.stop != StopReason::Cancelled
                {
                    titles.name(
                        self.inner.log.clone(),
                        self.inner.listing.clone(),
                        lease.thread_id.clone(),
                        self.launch.principal.clone(),
                        &outcome.messages,
                    );
                }
                let ended = match result {
                    Ok(outcome) => Ended::Finished(outcome.stop),
                    Err(error) => Ended::Failed(error.to_string()),
                };
                let ended = match ended {
                    _ if !self.topic.was_left() => ended,
                    Ended::Finished(StopReason::Cancelled) => Ended::Disconnected,
                    other => Ended::Detached(Box::new(other)),
                };
                self.summary(ended);
            }
            Err(error) => self.abandon(error),
        }
    }

    /// This attempt continues the run from `progress`: the agent is asked the conversation of
    /// the completed steps (it redoes the step that was cut off, under that step's turn, and runs
    /// the calls that have no result, those that
    /// [may have run](crate::tool::ToolCall::may_have_run) as their tools allow). Clients were
    /// shown that conversation by the takeover's [bridge](Progress::bridge).
    fn continue_from(&mut self, req: &mut RunRequest, progress: Progress) {
        req.messages.extend(progress.messages);
        if progress.state.is_some() {
            req.state = progress.state;
        }
        req.run.turn = progress.turns;
        // Its usage counts the steps it had done.
        req.run.extensions.insert(EarlierUsage(progress.usage));
        let cut = unanswered(&req.messages);
        req.run.extensions.insert(CutOff(Arc::new(cut)));
        // The run started long ago: the agent's own `RUN_STARTED` is not logged again.
        self.opening = None;
    }

    /// Keeps a new thread's conversation as this, its first run, is asked it: the thread is in
    /// its principal's list from the run's start, titled by its first prompt, and the run's end
    /// keeps what it became. A log that fails to keep it lists it at the run's end instead.
    async fn list_new_thread(&self, req: &RunRequest) {
        let lease = &self.lease;
        let principal = lease.principal.as_deref();
        let saved = SavedThread::new(&lease.thread_id, &req.messages)
            .principal(principal)
            .state(req.state.as_ref());
        // Kept by its start already, or now.
        let kept = if lease.made_thread {
            Ok(())
        } else {
            self.inner.log.save_thread(saved).await
        };
        match kept {
            Ok(()) => self.inner.listing.changed(&lease.thread_id, principal),
            Err(error) => {
                tracing::warn!(thread_id = %lease.thread_id, %error, "a new thread was not listed at its first run's start");
            }
        }
    }

    /// Refuses a run whose request lacks turns of the thread's `conversation` (a client's stale
    /// copy): its opening, the thread's conversation for the client to refresh from, and a
    /// `RUN_ERROR` `thread_conflict`; the thread is not changed. What the run resolves to.
    fn refuse_stale(&mut self, batch: &mut Batch, conversation: Vec<Message>) -> Resolving {
        for event in self.opening.take().into_iter().flatten() {
            self.take(batch, event);
        }
        self.take(batch, Event::messages_snapshot(&conversation));
        let why = "the thread has turns this request does not carry (another client continued \
                   it): the run was not started; the client's conversation is the thread's \
                   again, send the message again";
        self.take(batch, run_error(THREAD_CONFLICT, why.to_owned()));
        let refused: BoxError = crate::run::InvalidRequest::new(why).into();
        futures_util::future::ready(Ok(Err(refused))).boxed()
    }

    /// Takes one event of the agent into the batch, unless it would take the run past its
    /// bounds: then why.
    ///
    /// The run's own events are the engine's to keep right: one `RUN_STARTED` an attempt (the
    /// agent's if it is its first event, else the engine's opening before that event), and
    /// nothing after the run's end.
    fn take_bounded(
        &mut self,
        batch: &mut Batch,
        event: Event,
    ) -> Result<(), (&'static str, String)> {
        if self.terminal {
            return Ok(());
        }
        match (&event, self.opening.take()) {
            (Event::RunStarted(_), None) => return Ok(()),
            (Event::RunStarted(_), Some(_)) | (_, None) => {}
            (_, Some(opening)) => {
                for event in opening {
                    self.take_one(batch, event)?;
                }
            }
        }
        self.take_one(batch, event)
    }

    /// Takes one event into the batch, unless it would take the run past its bounds.
    fn take_one(
        &mut self,
        batch: &mut Batch,
        mut event: Event,
    ) -> Result<(), (&'static str, String)> {
        let bounds = self.inner.config.max_run;
        stamp(&mut event);
        let logged = LoggedEvent::of(self.next_seq, &event);
        let size = logged.json().len() as u64;
        let (events, bytes) = (self.taken.0 + 1, self.taken.1 + size);
        if events > bounds.events || bytes > bounds.bytes {
            return Err((
                "run_too_large",
                format!(
                    "the run was stopped at {} events ({} bytes): a run may log at most {} \
                     events and {} bytes",
                    self.taken.0, self.taken.1, bounds.events, bounds.bytes
                ),
            ));
        }
        // Its principal's bytes of the day are counted a slice at a time, not per event.
        self.unbilled += size;
        if self.unbilled >= BILLED {
            let within =
                (self.inner.config.quotas).log(self.launch.principal.as_ref(), self.unbilled);
            self.unbilled = 0;
            if !within {
                return Err((
                    Limit::LogBytesPerDay.code(),
                    format!("the run was stopped: {}", Limit::LogBytesPerDay),
                ));
            }
        }
        self.taken = (events, bytes);
        self.push(batch, logged, &event);
        Ok(())
    }

    /// Takes `first` and every event already waiting in `rx` into the batch, up to its bound:
    /// the agent's future is polled again only once the room it had is empty, so that one poll
    /// of it makes a channel's worth of events rather than one.
    fn take_all_bounded(
        &mut self,
        batch: &mut Batch,
        first: Event,
        rx: &mut ChannelReceiver<Event>,
    ) -> Result<(), (&'static str, String)> {
        self.take_bounded(batch, first)?;
        while batch.has_room() {
            let Some(event) = rx.try_recv() else {
                break;
            };
            self.received += 1;
            self.take_bounded(batch, event)?;
        }
        Ok(())
    }

    /// Takes one event of the run into the batch being gathered.
    fn take(&mut self, batch: &mut Batch, mut event: Event) {
        stamp(&mut event);
        let logged = LoggedEvent::of(self.next_seq, &event);
        self.push(batch, logged, &event);
    }

    fn push(&mut self, batch: &mut Batch, logged: LoggedEvent, event: &Event) {
        let ending = Ending::of(event);
        self.terminal = ending.is_some();
        if ending.is_some() {
            self.ending = ending;
        }
        batch.push(logged);
        self.next_seq += 1;
    }

    /// The notices `end` leaves, by the engine's [`Notify`](super::Notify); the terminal
    /// event is the last one taken.
    fn notices(&self, end: &mut RunEnd) {
        let Some(notify) = &self.inner.config.notify else {
            return;
        };
        let ending = self.ending.as_ref();
        let error = ending.and_then(|ending| {
            Some((
                ending.code.as_deref().unwrap_or("run_failed"),
                ending.message.as_deref()?,
            ))
        });
        end.notices = notify.notices(&RunEnding {
            run_id: &self.lease.run_id,
            thread_id: &self.lease.thread_id,
            principal: self.lease.principal.as_deref(),
            status: end.status,
            seq: self.next_seq - 1,
            input: Some(&self.launch.input),
            error,
            interrupts: &end.interrupts,
        });
    }

    fn write(&self, events: Vec<LoggedEvent>, end: Option<RunEnd>) -> Write {
        let (log, lease) = (self.inner.log.clone(), self.lease.clone());
        async move {
            let written = log.write(&lease, &events, end.as_ref()).await;
            (events, written)
        }
        .boxed()
    }

    /// Whether the batch may take more of the agent's events: it has room, and a run that sends
    /// ahead has sent fewer than half of [`SENT_AHEAD`] uncommitted events (one batch more stays
    /// within it).
    fn may_take(&self, batch: &Batch) -> bool {
        let uncommitted = self.next_seq - 1 - self.committed;
        batch.has_room() && (self.ahead.is_none() || uncommitted < SENT_AHEAD / 2)
    }

    /// Gives followers the events of `batch` not sent yet, before their commit, when the log
    /// sends ahead: all but a run's end, which is sent once committed (a client that saw it may
    /// start the thread's next run).
    fn send_ahead(&mut self, batch: &Batch) {
        if self.ahead.is_none() {
            return;
        }
        let mut events = self.unsent(&batch.events);
        if let [before @ .., last] = events
            && last.is_terminal()
        {
            events = before;
        }
        if let Some(last) = events.last() {
            self.sent = last.seq;
            self.topic.publish(events);
        }
    }

    /// `events` are committed: followers here read them from memory (those sent ahead, already).
    fn logged(&mut self, events: &[LoggedEvent]) {
        // A batch holding the terminal event ends with it.
        let ending = events
            .last()
            .filter(|last| last.is_terminal())
            .and(self.ending.as_ref());
        self.inner.config.observer.on_logged(&Logged {
            events: events.len() as u64,
            first: (self.logged == 0).then(|| self.started.elapsed()),
            usage: ending.and_then(|ending| ending.usage.as_deref()),
            principal: self.launch.principal.as_ref().map(Principal::name),
        });
        if let Some(ending) = ending {
            self.code.clone_from(&ending.code);
        }
        self.logged += events.len() as u64;
        if let Some(last) = events.last() {
            self.committed = last.seq;
        }
        let unsent = self.unsent(events);
        self.sent = self.sent.max(self.committed);
        // With none left to send, followers behind the memory's tail are woken to read the log.
        self.topic.publish(unsent);
    }

    /// The events of `events` (in order) not given to followers yet.
    fn unsent<'a>(&self, events: &'a [LoggedEvent]) -> &'a [LoggedEvent] {
        let from = events.partition_point(|e| e.seq <= self.sent);
        &events[from..]
    }

    /// The run ended here: its place among the live runs is free, then it is reported.
    fn summary(&mut self, end: Ended) {
        // What is left of its bytes counts for its principal's day.
        (self.inner.config.quotas).log(self.launch.principal.as_ref(), self.unbilled);
        self.unbilled = 0;
        drop(self.launch._permit.take());
        drop(self.launch._admitted.take());
        self.inner.ended(&RunSummary {
            thread_id: self.lease.thread_id.clone(),
            run_id: self.lease.run_id.clone(),
            principal: self.launch.principal.as_ref().map(|p| p.name().to_owned()),
            events: self.logged,
            attempt: self.launch.attempts,
            duration: self.started.elapsed(),
            end,
            code: self.code.take(),
        });
    }

    /// The run was handed over: it stops here without an end, its followers here read the log.
    fn handed_over(mut self) {
        self.topic.released();
        self.summary(Ended::HandedOver);
    }

    /// The log refused a write: the run stops here, its followers here end, and the run is
    /// settled once the log answers again (ended, or run again if it applies decisions).
    fn abandon(mut self, error: LogError) {
        self.cancel.cancel();
        if let LogError::Fenced(_) = error {
            // Another instance took the run over (this one was thought dead): its followers
            // read the log from now on.
            tracing::warn!(run_id = %self.lease.run_id, "the run was taken over by another instance");
            self.topic.released();
            self.summary(Ended::LogFailed(error.to_string()));
            return;
        }
        tracing::error!(run_id = %self.lease.run_id, %error, "the run's log cannot be written: the run is stopped");
        self.topic.failed(error.to_string());
        self.summary(Ended::LogFailed(error.to_string()));
        let now = std::time::SystemTime::now();
        let lost = LostRun {
            record: RunRecord {
                run_id: self.lease.run_id.clone(),
                thread_id: self.lease.thread_id.clone(),
                status: RunStatus::Running,
                owner: self.inner.log.owner().to_owned(),
                principal: self.lease.principal.clone(),
                last_seq: self.next_seq - 1,
                created_at: now,
                updated_at: now,
                request: Some(stored(&self.launch.input, self.launch.continues)),
            },
            attempts: self.launch.attempts,
        };
        self.inner.settle(lost);
    }
}

/// Resolves once `window` is over (`false`; never without one) or the agent waits at its
/// checkpoint, told by `waiting` (`true`).
async fn window_over(window: Option<tokio::time::Instant>, waiting: &tokio::sync::Notify) -> bool {
    let over = async {
        match window {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = over => false,
        () = waiting.notified() => true,
    }
}

/// How the log ends a run that returned `result`.
fn end_of(result: &Result<RunOutcome, BoxError>) -> RunEnd {
    match result {
        Ok(outcome) => {
            let status = match outcome.stop {
                StopReason::Interrupted => RunStatus::Interrupted,
                StopReason::Cancelled => RunStatus::Cancelled,
                _ => RunStatus::Finished,
            };
            let mut end = RunEnd::new(status);
            end.messages = Some(outcome.messages.clone());
            end.state.clone_from(&outcome.state);
            end.interrupts.clone_from(&outcome.interrupts);
            end
        }
        Err(_) => RunEnd::new(RunStatus::Failed),
    }
}

/// A `RUN_ERROR` with `code`.
pub(super) fn run_error(code: &str, message: String) -> Event {
    Event::from(RunError {
        message,
        code: Some(code.to_owned()),
        usage: None,
        base: BaseEvent::default(),
    })
}
