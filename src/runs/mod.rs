//! The run log as the spine: every run, whatever door brings it (AG-UI over HTTP or WebSocket,
//! an editor's turn through [`AcpAgent`](crate::acp::AcpAgent)), is started, driven and followed
//! here, without any HTTP; a door lends a run what lives only in its process (its live transport,
//! a session's tools) through [`Attach`].
//!
//! ```text
//! RunAgentInput ─► Runs::begin (busy thread, same request again, resume[] and its refusals)
//!                       │ start                                  ┌─ Runs::follow ─► SSE / NDJSON
//!                       ▼                                        │                 protobuf / WS
//!                 driver task: the agent ─► events ─► RunLog ────┘                 your transport
//!                                                  (memory | SQLite | PostgreSQL)
//! ```
//!
//! - [`Runs::begin`] takes a `RunAgentInput` and starts its run in a task of its own (the
//!   driver), replays it (the same request again), or refuses it (a `RUN_ERROR` with a code,
//!   recorded as a run so that it reads like any other).
//! - The driver runs the agent, gathers what it emits into batches and appends them to the
//!   [`RunLog`] (group commit: a batch gathers while the previous one is written), then ends the
//!   run there: its status, the thread's conversation and state, the interrupts it stopped at.
//! - **The engine writes the run's own events**, whatever service it drives: one `RUN_STARTED`
//!   an attempt, first, and exactly one terminal event, last. An agent wrapped in a run-level
//!   [`AguiLayer`](crate::agui::AguiLayer) writes them itself (with its options); any other, a
//!   bare [`Agent`](crate::agent::Agent) included, is opened by the engine and closed from the
//!   [`RunOutcome`] it returns. A second `RUN_STARTED`, and anything after the end, are not logged.
//! - [`Runs::follow`] is a run's events after any point, then as they are logged: what a client
//!   re-joining with `Last-Event-ID` reads, and what every transport sends. Nothing about
//!   durability depends on the transport.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::agui::{AguiLayer, RunAgentInput};
//! use agent_tower::{agent::Agent, model::scripted::ScriptedModel, tool::ToolRouter};
//! use agent_tower::runs::{Begun, Runs};
//! use futures_util::StreamExt;
//! use tower::Layer;
//!
//! let agui = AguiLayer::new();
//! let agent = agui.layer(Agent::new(agui.layer(ScriptedModel::new()), agui.layer(ToolRouter::new())));
//! let runs = Runs::new(agent); // a bounded in-memory log; `.log(store)` for SQLite or PostgreSQL
//!
//! let hello = agent_tower::message::Message::user("hello");
//! let hello = agent_tower::agui::input::Message::from_domain(&hello).unwrap();
//! let input = RunAgentInput::new("thread".into(), "run-1".into(), vec![hello]);
//! let begun = runs.begin(input.clone()).await?;
//! assert!(matches!(begun, Begun::Started { .. }));
//! let events: Vec<_> = runs.follow(begun.run_id().clone(), 0).collect().await;
//! assert_eq!(events.first().map(|e| e.seq), Some(1));
//! assert!(events.last().unwrap().is_terminal());
//!
//! // The same request again: the same run, replayed with its own ids.
//! let again = runs.begin(input).await?;
//! assert!(matches!(again, Begun::Replayed { .. }));
//! let replayed: Vec<_> = runs.follow(again.run_id().clone(), again.from()).collect().await;
//! assert_eq!(replayed, events);
//! # Ok(()) }
//! ```
//!
//! # The rules of a start
//!
//! Written once, in [`rules::plan`]; every [`RunLog`] applies them atomically.
//!
//! - **One active run per thread**, enforced by the log whichever instance starts it: a second
//!   run is refused ([`BeginError::Busy`]), waits ([`BusyThread::Queue`]) or stops the active
//!   one first ([`BusyThread::Interrupt`]); per run with [`Runs::begin_busy`].
//! - **The same request again** (same `runId`, same body) replays the stored run (the segment it
//!   started) under its own ids; a different request under a taken `runId` is refused
//!   ([`BeginError::RunExists`]).
//! - **Interrupts**: a run that stopped at interrupts ([`RunOutcome::interrupts`]) leaves them
//!   pending; the next run on the thread must answer every one in `resume[]`, each at most once.
//!   It continues the stored conversation, and each decision applies to the very call it was
//!   asked about (an approval of changed arguments is refused to the model). Refusals are
//!   `RUN_ERROR`s whose code says why: `interrupts_pending`, `resume_incomplete`,
//!   `unknown_interrupt`, `interrupt_expired`, `interrupt_already_resolved` (also for the same
//!   resume under a new `runId`: it never replays another run's events), `resume_invalid`.
//! - **A resume under the interrupted run's own `runId`** (the shape CopilotKit sends) continues
//!   that run: its log goes on after the interrupt with a new `RUN_STARTED` under the same id.
//! - **Runs survive their instance**: a run whose instance died (its lease ran out) or
//!   [handed it over](Runs::hand_over) is continued, under the same id, by whichever instance
//!   recovers it first (this one, restarted, on SQLite): the conversation is rebuilt from its log
//!   up to the last completed step, completed steps are not asked of the model again nor completed
//!   tool calls run again, and the cut step is done again. The log goes on after a `CUSTOM`
//!   [`TAKEOVER`] event, the ends of what the cut step left open and a `MESSAGES_SNAPSHOT`, with
//!   exactly one terminal event in all. A call that [may have run](crate::tool::ToolCall::may_have_run)
//!   runs again only if its tool allows it ([`Rerun`](crate::tool::Rerun)). After
//!   [`max_attempts`](Runs::max_attempts), or for a run whose request was not kept (a log that
//!   is not [durable](RunLog::durable) keeps only what a resume needs), the run ends with a
//!   `RUN_ERROR` (`run_lost`).
//! - **Answers are decisions**: a resume entry is parsed once into a
//!   [`Decision`](crate::permission::Decision) (a malformed one, or an interrupt answered twice,
//!   is `resume_invalid`), and the log keeps the decision.
//! - **A failing log** ends the followers of this process's runs with a `RUN_ERROR` of their own
//!   (code `store_unavailable`, [`STORE_UNAVAILABLE`]) as soon as a write fails; a run that
//!   cannot be started is refused ([`BeginError::Unavailable`]) before anything streams.
//! - **Cancellation-safe**: a caller that goes away at any point of [`Runs::begin`] leaves either
//!   no run or a run that is driven to its end.
//!
//! # Watching
//!
//! [`Runs::on_run_end`] is called once per run (a log line by default); a [`RunObserver`]
//! ([`Runs::observer`]; [`Metrics`](crate::metrics::Metrics) is one) is told of every run's
//! start, writes, end and followers.
//!
//! # Liveness
//!
//! Each instance renews its ownership of all its runs with one heartbeat every third of the
//! [lease](Runs::lease), not a write per run; a sweeper ([`Runs::sweep`], started by the first
//! `begin` and by the server's router, stopped by the [shutdown token](Runs::shutdown_token))
//! recovers the runs of instances that stopped beating. Followers wait for wake-ups, never poll.

mod begin;
mod book;
mod driver;
mod error;
mod follow;
mod fork;
mod hub;
mod log;
mod memory;
mod notice;
mod observe;
mod pages;
mod quota;
mod record;
mod request;
mod rollback;
pub mod rules;
mod sweep;
mod takeover;
mod threads;
mod titles;

use std::{
    fmt,
    sync::{Arc, atomic::AtomicBool},
    time::Duration,
};

use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::run::{BoxRunService, RunService};

#[cfg(feature = "a2a-server")]
pub(crate) use self::log::each_event;
#[cfg(any(feature = "a2a-server", feature = "mcp-server"))]
pub(crate) use self::log::{last_event, pending_of};
#[cfg(feature = "store")]
pub(crate) use self::pages::page_end;
pub use self::{
    begin::{ANSWERED_BY, Attach, BeginError, Begun, ResumeError, Resumed},
    book::{ScheduleBook, ScheduleRecord},
    driver::{Ended, RunSummary},
    error::{LogError, StartError},
    follow::{Follow, REJOIN, STORE_UNAVAILABLE},
    fork::{Fork, ForkAt, ForkError, ForkedFrom},
    log::{Changed, DurableLog, Interrupts, OnChange, Recovery, RunLog, SENT_AHEAD},
    memory::MemoryLog,
    notice::{Claimed, Notice, NoticeRecord, NoticeStatus, Notify, Outbox, RunEnding, Settle},
    observe::{Logged, RunObserver},
    pages::{Cursor, InvalidCursor, RunCursor, RunPage, RunQuery, ThreadCursor},
    quota::{Limit, PrincipalLimits, PrincipalUsage},
    record::{
        FirstTurn, InterruptRecord, InterruptStatus, Lease, LoggedEvent, LostRun, Page, Recovered,
        RunEnd, RunRecord, RunStatus, SavedThread, Start, ThreadRecord,
    },
    takeover::TAKEOVER,
    threads::{
        Deleted, InvalidTitle, ListChange, ListChanges, MAX_TITLE, ThreadChange, ThreadPage,
        ThreadQuery, ThreadSummary, thread_name,
    },
};
pub(crate) use self::{hub::Hub, record::args_hash};
#[cfg(doc)]
use crate::run::RunOutcome;

/// What to do with a run on a thread that already has an active run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BusyThread {
    /// Refuse it ([`BeginError::Busy`]; `409 Conflict` over HTTP).
    #[default]
    Reject,
    /// Wait until the active run ends, then start.
    Queue,
    /// Cancel the active run (whichever instance drives it, as [`Runs::cancel`] does), then
    /// start once it ended: a second message stops the answer to the first, which the thread
    /// keeps as far as it went.
    Interrupt,
    /// Cancel the active run as [`Interrupt`](Self::Interrupt) does, and leave out what it
    /// added to the thread: the new run goes on from the conversation before it (its prompt and
    /// what it answered are not kept, whatever the client's copy holds). A run that continued
    /// the stored conversation (one answering an interrupt) added no prompt of its own: what it
    /// answered is left out, the rest is kept.
    Rollback,
}

/// Called once per run when it ends.
pub(crate) type OnRunEnd = Arc<dyn Fn(&RunSummary) + Send + Sync>;

/// The run engine: starts, drives and follows runs through a [`RunLog`]; see the
/// [module docs](self). Clones share the same engine.
pub struct Runs {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    agent: BoxRunService,
    log: Arc<dyn RunLog>,
    /// Where this engine's writers meet its followers.
    hub: Hub,
    /// Where the thread list's changes are told.
    listing: threads::Listing,
    config: Config,
    /// Whether the sweeper was started.
    sweeping: Arc<AtomicBool>,
    /// The tasks driving this engine's runs.
    drivers: TaskTracker,
    /// Fired when this engine drains: it takes over no run of another instance any more.
    draining: CancellationToken,
    /// Fired when it hands its runs over: their drivers stop without an end.
    handing_over: CancellationToken,
    /// Wakes the sweeper before its next tick (another instance released its runs).
    sweep_now: Arc<tokio::sync::Notify>,
}

#[derive(Clone)]
struct Config {
    busy_thread: BusyThread,
    channel_capacity: usize,
    lease: Duration,
    shutdown: CancellationToken,
    on_run_end: OnRunEnd,
    max_attempts: u32,
    max_run: RunBounds,
    /// Permits of live runs, `max_live` in all.
    live: Arc<tokio::sync::Semaphore>,
    max_live: usize,
    /// What each principal may use.
    quotas: Arc<quota::Quotas>,
    observer: Arc<dyn RunObserver>,
    /// The model that names new threads, if one does.
    titles: Option<titles::TitleModel>,
    /// Which notices runs' ends leave, if any.
    notify: Option<Arc<dyn Notify>>,
}

/// How many runs may be live at once by default.
const DEFAULT_MAX_LIVE: usize = 10_000;

/// How much one run may log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunBounds {
    pub(crate) events: u64,
    pub(crate) bytes: u64,
}

impl Runs {
    /// An engine running `agent`, its runs in a bounded [`MemoryLog`]. Busy threads are refused,
    /// the lease is 30 s, a run gets at most 3 attempts. The engine keeps the agent with its type
    /// erased ([`boxed`](crate::run::boxed)): it is compiled once, whatever the agent.
    pub fn new(agent: impl RunService) -> Self {
        Self {
            inner: Arc::new(Inner {
                agent: crate::run::boxed(agent),
                log: Arc::new(MemoryLog::new()),
                hub: Hub::new(),
                listing: threads::Listing::default(),
                config: Config {
                    busy_thread: BusyThread::Reject,
                    channel_capacity: 256,
                    lease: Duration::from_secs(30),
                    shutdown: CancellationToken::new(),
                    on_run_end: driver::log_run_end(),
                    max_attempts: 3,
                    max_run: RunBounds {
                        events: 500_000,
                        bytes: 64 * 1024 * 1024,
                    },
                    live: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_LIVE)),
                    max_live: DEFAULT_MAX_LIVE,
                    quotas: Arc::default(),
                    observer: Arc::new(()),
                    titles: None,
                    notify: None,
                },
                sweeping: Arc::new(AtomicBool::new(false)),
                drivers: TaskTracker::new(),
                draining: CancellationToken::new(),
                handing_over: CancellationToken::new(),
                sweep_now: Arc::default(),
            }),
        }
    }

    fn inner_mut(&mut self) -> &mut Inner {
        Arc::make_mut(&mut self.inner)
    }

    /// Keeps runs in `log` (a `RunStore` for SQLite or PostgreSQL, your own [`RunLog`]); the
    /// followers of runs other instances write to it are woken by its
    /// [changes](DurableLog::on_change).
    ///
    /// # Panics
    ///
    /// When the engine [notifies](Self::notify) and `log` keeps no notices.
    #[must_use]
    pub fn log(mut self, log: impl RunLog) -> Self {
        assert!(
            self.inner.config.notify.is_none() || log.outbox().is_some(),
            "Runs::log: the engine notifies, and this log keeps no notices"
        );
        let (hub, sweep_now) = (self.inner.hub.clone(), self.inner.sweep_now.clone());
        let listing = self.inner.listing.clone();
        if let Some(durable) = log.durable() {
            durable.on_change(Arc::new(move |changed| match changed {
                Changed::Run(run) => hub.wake(run),
                Changed::CancelRequested(run) => {
                    hub.cancel(run);
                }
                Changed::ThreadStarted(thread) => hub.wake_thread(thread),
                Changed::ThreadListed(thread, principal) => listing.changed(thread, principal),
                Changed::Released => sweep_now.notify_one(),
                Changed::Any => {
                    hub.wake_all();
                    listing.any();
                }
            }));
        }
        self.inner_mut().log = Arc::new(log);
        self
    }

    /// Names each new thread with `model` once its first run has answered: a title of a few
    /// words from the first prompt and the answer, which the thread takes unless someone named
    /// it meanwhile (by default a thread is listed under the first line of its first prompt).
    /// The model is asked after the run's end, as the thread's principal (its budgets count
    /// the call), bounded to 30 s and a line; a failure leaves the first line, and is logged.
    ///
    /// ```
    /// use agent_tower::{agent::Agent, model::{boxed, scripted::ScriptedModel}, runs::Runs, tool::ToolRouter};
    ///
    /// let runs = Runs::new(Agent::new(ScriptedModel::new(), ToolRouter::new()))
    ///     .title_model(boxed(ScriptedModel::new()));
    /// # let _ = runs;
    /// ```
    #[must_use]
    pub fn title_model(mut self, model: crate::model::BoxModel) -> Self {
        self.inner_mut().config.titles = Some(titles::TitleModel::new(model));
        self
    }

    /// Which notices runs' ends leave (a webhook's messages: see
    /// `agent_tower::webhook::Webhooks`, feature `webhooks`), kept with each end in the log and
    /// delivered from its [`Outbox`]. A request that `notify` refuses (a webhook it does not
    /// allow, say) ends at once with `RUN_ERROR{code: "invalid_options"}`.
    ///
    /// # Panics
    ///
    /// When the log keeps no notices ([`RunLog::outbox`]; a [`MemoryLog`] and a `RunStore`
    /// do): set such a log first.
    #[must_use]
    pub fn notify(mut self, notify: impl Notify) -> Self {
        assert!(
            self.inner.log.outbox().is_some(),
            "Runs::notify: the run log keeps no notices"
        );
        self.inner_mut().config.notify = Some(Arc::new(notify));
        self
    }

    /// What happens to a run on a thread that already has an active run (default: refused).
    #[must_use]
    pub fn busy_thread(mut self, policy: BusyThread) -> Self {
        self.inner_mut().config.busy_thread = policy;
        self
    }

    /// How many events a run may emit before its driver takes them (default 256): the run is
    /// held back while that many wait.
    ///
    /// # Panics
    ///
    /// If `events` is 0.
    #[must_use]
    pub fn channel_capacity(mut self, events: usize) -> Self {
        assert!(events > 0, "the channel capacity must be at least 1");
        self.inner_mut().config.channel_capacity = events;
        self
    }

    /// How long this instance may stay silent before its runs count as lost (default 30 s;
    /// renewed every third of it, one heartbeat for all its runs).
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.inner_mut().config.lease = lease.max(Duration::from_millis(30));
        self
    }

    /// Every run's cancellation token is a child of `token`: cancelling it (on shutdown) ends
    /// every active run with a terminal event, stops the sweeper, and refuses new runs.
    #[must_use]
    pub fn shutdown_token(mut self, token: CancellationToken) -> Self {
        self.inner_mut().config.shutdown = token;
        self
    }

    /// Drains this engine: it takes over no other instance's run any more, lets its own runs go
    /// on for up to `within`, then, on a [durable](RunLog::durable) log, hands those still
    /// running over instead of ending them: their drivers stop without an end and the log
    /// [releases](DurableLog::release) them, for another instance (or this one, restarted) to
    /// continue at once. Every follower here of a run that goes on elsewhere then ends with a
    /// [`REJOIN`] event, so that responses end cleanly and their clients re-join elsewhere. On a
    /// log that ends with this process, runs are cancelled at once (each gets its terminal
    /// event). The number of runs handed over.
    ///
    /// Call it once the server stopped taking requests (on SIGTERM), then exit.
    ///
    /// # Errors
    ///
    /// When the log could not release the runs: they are continued elsewhere once this
    /// instance's lease runs out.
    pub async fn hand_over(&self, within: Duration) -> Result<usize, LogError> {
        let inner = &self.inner;
        inner.draining.cancel();
        inner.drivers.close();
        let Some(durable) = inner.log.durable() else {
            // Nothing survives this process: each run ends now, with its terminal event.
            inner.config.shutdown.cancel();
            let _ = tokio::time::timeout(within, inner.drivers.wait()).await;
            return Ok(0);
        };
        if tokio::time::timeout(within, inner.drivers.wait())
            .await
            .is_ok()
        {
            // Followers of runs other instances drive end here: their clients re-join there.
            inner.handing_over.cancel();
            return Ok(0);
        }
        let left = inner.hub.driven();
        inner.handing_over.cancel();
        inner.drivers.wait().await;
        durable.release().await?;
        tracing::info!(
            runs = left,
            "runs in flight handed over to be continued elsewhere"
        );
        Ok(left)
    }

    /// The [shutdown token](Self::shutdown_token): cancel it to end every active run.
    #[must_use]
    pub fn shutdown(&self) -> &CancellationToken {
        &self.inner.config.shutdown
    }

    /// Tells `observer` of every run's start, writes, end and followers (a
    /// [`Metrics`](crate::metrics::Metrics) counts them for Prometheus; a pair `(a, b)` tells
    /// both).
    #[must_use]
    pub fn observer(mut self, observer: impl RunObserver) -> Self {
        self.inner_mut().config.observer = Arc::new(observer);
        self
    }

    /// Called once per run when it ends (default: one `tracing` line at INFO).
    #[must_use]
    pub fn on_run_end<F>(mut self, callback: F) -> Self
    where
        F: Fn(&RunSummary) + Send + Sync + 'static,
    {
        self.inner_mut().config.on_run_end = Arc::new(callback);
        self
    }

    /// How many attempts a run gets in all when its instance dies, drains or its log fails
    /// before its end: each continues it from its log (default 3, at least 1); then it ends with
    /// `run_lost`.
    #[must_use]
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.inner_mut().config.max_attempts = attempts.max(1);
        self
    }

    /// The most runs live at once (default 10,000); one more is refused with
    /// [`BeginError::Overloaded`] (the server answers `503` with `Retry-After`).
    #[must_use]
    pub fn max_live_runs(mut self, runs: usize) -> Self {
        let config = &mut self.inner_mut().config;
        config.live = Arc::new(tokio::sync::Semaphore::new(runs));
        config.max_live = runs;
        self
    }

    /// What each principal may use (live runs, runs a minute, log bytes a day; none limited by
    /// default): past a limit, a run is refused ([`BeginError::Limited`], `429` over HTTP) or, for
    /// the bytes of the day, stopped with `RUN_ERROR{code: "quota_exceeded"}`. The engine's own
    /// caps ([`max_live_runs`](Self::max_live_runs), [`max_run`](Self::max_run)) still hold.
    #[must_use]
    pub fn per_principal(mut self, limits: PrincipalLimits) -> Self {
        self.inner_mut().config.quotas = Arc::new(quota::Quotas::new(limits));
        self
    }

    /// The most events, and bytes of their JSON, one run may log (default 500,000 and 64 MiB):
    /// past either, the run is stopped and ends with `RUN_ERROR{code: "run_too_large"}`.
    #[must_use]
    pub fn max_run(mut self, events: u64, bytes: u64) -> Self {
        self.inner_mut().config.max_run = RunBounds { events, bytes };
        self
    }

    /// The run log: threads, runs and interrupts, to list and read.
    #[must_use]
    pub fn run_log(&self) -> &Arc<dyn RunLog> {
        &self.inner.log
    }

    /// Whether the engine is stopping (its [shutdown token](Self::shutdown_token) fired, or it
    /// [drains](Self::hand_over)): it takes no new run.
    #[must_use]
    pub fn is_stopping(&self) -> bool {
        self.inner.config.shutdown.is_cancelled() || self.inner.draining.is_cancelled()
    }

    /// The events of `run` after `after` (0: from the start), then those logged later, until
    /// the run has ended and its log is read to the end.
    #[must_use]
    pub fn follow(&self, run: RunId, after: u64) -> Follow {
        let inner = &self.inner;
        Follow::new(
            inner.log.clone(),
            &inner.hub,
            inner.config.observer.clone(),
            run,
            after,
        )
        .patience(inner.config.lease)
        .until(inner.handing_over.clone())
    }

    /// The wake-up of `thread`: it fires when one of its runs starts, here or on another instance.
    #[cfg(feature = "server")]
    pub(crate) fn watch_thread(&self, thread: &crate::id::ThreadId) -> Arc<tokio::sync::Notify> {
        self.inner.hub.watch_thread(thread)
    }

    /// [Follows](Runs::follow) `run` as a client that re-joins it (a reloaded page): when
    /// another instance may drive it, the log records that it is followed from here (renewed at
    /// every heartbeat) before this returns, so that its owner does not cancel it as abandoned
    /// (see [`Follow::viewer`]). A log that fails to record it is logged, not fatal.
    pub async fn rejoin(&self, run: RunId, after: u64) -> Follow {
        let inner = &self.inner;
        if !inner.hub.is_driven(&run)
            && let Some(durable) = inner.log.durable()
            && let Err(error) = durable
                .followed(std::slice::from_ref(&run), inner.config.lease)
                .await
        {
            tracing::warn!(run_id = %run, %error, "could not record that a run is followed here");
        }
        self.follow(run, after)
    }

    /// The thread list's changes from now on, until the engine stops: each thread kept (a run of
    /// it ended), named, archived or deleted, through this engine or, on a log shared by
    /// instances (PostgreSQL), through another. Follow them before reading the list, so that
    /// nothing changed between the two goes unseen.
    #[must_use]
    pub fn list_changes(&self) -> ListChanges {
        let stopping = [&self.inner.config.shutdown, &self.inner.draining];
        self.inner
            .listing
            .follow(stopping.map(CancellationToken::clone))
    }

    /// Names, renames or archives `thread` ([`RunLog::change_thread`]), and tells the thread
    /// list's followers.
    ///
    /// # Errors
    ///
    /// Failures of the log.
    pub async fn change_thread(
        &self,
        thread: &ThreadId,
        change: &ThreadChange,
    ) -> Result<Option<ThreadSummary>, LogError> {
        let changed = self.inner.log.change_thread(thread, change).await?;
        if let Some(summary) = &changed {
            let principal = summary.principal.as_deref();
            self.inner.listing.changed(thread, principal);
        }
        Ok(changed)
    }

    /// Deletes `thread` ([`RunLog::delete_thread`]), and tells the thread list's followers.
    ///
    /// # Errors
    ///
    /// Failures of the log.
    pub async fn delete_thread(&self, thread: &ThreadId) -> Result<Deleted, LogError> {
        let owner = self
            .inner
            .log
            .thread(thread)
            .await?
            .and_then(|t| t.principal);
        let deleted = self.inner.log.delete_thread(thread).await?;
        if deleted == Deleted::Deleted {
            self.inner.listing.changed(thread, owner.as_deref());
        }
        Ok(deleted)
    }

    /// Cancels `run`, whichever instance drives it: at once when it is this one, else through
    /// the log ([`DurableLog::request_cancel`]: the instance that drives it cancels it when the log
    /// tells it, at the latest at its next heartbeat, a third of the [lease](Runs::lease)). The
    /// run ends `cancelled` for every follower. Asking again, or for a run that ended, changes
    /// nothing.
    ///
    /// # Errors
    ///
    /// When the run is not driven here and the log fails.
    pub async fn cancel(&self, run: &RunId) -> Result<Cancel, LogError> {
        if self.inner.hub.cancel(run) {
            return Ok(Cancel::Cancelled);
        }
        let requested = match self.inner.log.durable() {
            Some(durable) => durable.request_cancel(run).await?,
            None => false,
        };
        Ok(if requested {
            Cancel::Requested
        } else {
            Cancel::NotRunning
        })
    }
}

/// What [`Runs::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cancel {
    /// The run is driven here: it is cancelled.
    Cancelled,
    /// The run is driven by another instance: it was asked, through the log.
    Requested,
    /// The run is not running (it ended, or there is no such run): nothing was done.
    NotRunning,
}

use crate::id::{RunId, ThreadId};

impl Clone for Runs {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl fmt::Debug for Runs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runs")
            .field("log", &self.inner.log)
            .field("busy_thread", &self.inner.config.busy_thread)
            .field("lease", &self.inner.config.lease)
            .finish_non_exhaustive()
    }
}
