//! The run log's contract: [`RunLog`].

use std::{fmt, sync::Arc, time::Duration};

use futures_util::future::BoxFuture;

use super::{
    Deleted, InterruptRecord, InterruptStatus, Lease, LogError, LoggedEvent, LostRun, Outbox, Page,
    PrincipalUsage, Recovered, RunEnd, RunPage, RunQuery, RunRecord, SavedThread, ScheduleBook,
    Start, StartError, ThreadChange, ThreadPage, ThreadQuery, ThreadRecord, ThreadSummary,
};
use crate::id::{InterruptId, RunId, ThreadId};

/// The interrupts `run` stopped at that still wait for an answer (what a door shows its
/// client as the questions of its task).
///
/// # Errors
///
/// Failures of the backend.
#[cfg(any(feature = "a2a-server", feature = "mcp-server"))]
pub(crate) async fn pending_of(
    log: &dyn RunLog,
    run: &RunRecord,
) -> Result<Vec<InterruptRecord>, LogError> {
    let mut pending = log
        .interrupts(Interrupts::PendingOf(&run.thread_id))
        .await?;
    pending.retain(|interrupt| interrupt.run_id == run.run_id);
    Ok(pending)
}

/// Every event `run` logged so far, in order, to `visit` (read a page at a time).
///
/// # Errors
///
/// Failures of the backend, and `visit`'s.
pub(crate) async fn each_event(
    log: &dyn RunLog,
    run: &RunId,
    mut visit: impl FnMut(&LoggedEvent) -> Result<(), LogError>,
) -> Result<(), LogError> {
    const PAGE: usize = 1_000;
    let mut after = 0;
    while let Some(page) = log.read(run, after, PAGE).await? {
        let Some(last) = page.events.last() else {
            break;
        };
        after = last.seq;
        for event in &page.events {
            visit(event)?;
        }
        if after >= page.last_seq {
            break;
        }
    }
    Ok(())
}

/// The last event `run` logged: its end, once it ended (what a door reads a failure from).
///
/// # Errors
///
/// Failures of the backend.
#[cfg(any(feature = "a2a-server", feature = "mcp-server"))]
pub(crate) async fn last_event(
    log: &dyn RunLog,
    run: &RunRecord,
) -> Result<Option<LoggedEvent>, LogError> {
    let page = log
        .read(&run.run_id, run.last_seq.saturating_sub(1), 1)
        .await?;
    Ok(page.and_then(|page| page.events.into_iter().next()))
}

/// The most events a run may have sent and not committed, when its log
/// [sends ahead](RunLog::sends_ahead): the numbers a takeover leaves unused after the last
/// committed event, so that every number a client was given stays the one event it saw or none.
pub const SENT_AHEAD: u64 = 16_384;

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
///   returned `Ok` survives a crash of the process (for a durable backend). The engine sends
///   a run's events to its followers once committed, unless the log
///   [sends ahead](RunLog::sends_ahead).
/// - **Liveness**: [`heartbeat`](RunLog::heartbeat) keeps this instance's runs owned;
///   [`lost`](RunLog::lost) lists the running runs of instances that stopped beating.
///
/// The rules of a start (which runs may start, which interrupts they answer) are not the log's:
/// a backend loads a [`ThreadView`](super::rules::ThreadView) inside its own atomic section,
/// asks [`rules::plan`](super::rules::plan), and writes the plan, its unique indexes and
/// conditional updates serving as guards against other writers.
///
/// Followers in this process are woken by the engine after each of its writes; a backend that
/// several instances share tells the engine of the others' writes through
/// [`on_change`](DurableLog::on_change) (PostgreSQL `LISTEN/NOTIFY`).
///
/// A log that outlives its process says so with [`durable`](RunLog::durable), and answers then
/// what the instances sharing it need of one another ([`DurableLog`]): none of it has a
/// default, so that a backend cannot forget a part and silently lose cross-instance cancel or
/// re-join. Only [`ready`](RunLog::ready) (a log in this process is always ready),
/// [`outbox`](RunLog::outbox) and [`schedules`](RunLog::schedules) (a log may keep no notices
/// and no schedules) have one.
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
    /// for an unknown run. A run's numbers are consecutive but for the gap a takeover leaves (see
    /// [`recover`](RunLog::recover)): a page may stop there, short of `limit`; its events are
    /// none only when the log has none after `after`.
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

    /// Keeps a thread's conversation and state, before any run (an editor's new session, with
    /// its workspace); see [`SavedThread`].
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn save_thread<'a>(&'a self, saved: SavedThread<'a>) -> BoxFuture<'a, Result<(), LogError>>;

    /// The threads `query` selects, newest first, in pages.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn threads<'a>(
        &'a self,
        query: &'a ThreadQuery<'a>,
    ) -> BoxFuture<'a, Result<ThreadPage, LogError>>;

    /// The runs `query` selects, the most recently changed first, in pages.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn runs<'a>(&'a self, query: &'a RunQuery<'a>) -> BoxFuture<'a, Result<RunPage, LogError>>;

    /// Names, renames or archives `thread` (see [`ThreadChange`]); its listing after the
    /// change, `None` when there is no such thread. When its conversation last changed stays
    /// as it was: a renamed thread keeps its place in the list.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn change_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
        change: &'a ThreadChange,
    ) -> BoxFuture<'a, Result<Option<ThreadSummary>, LogError>>;

    /// Deletes `thread` with its runs, their events and its interrupts, unless one of its runs
    /// is running.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Deleted, LogError>>;

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

    /// Whether the log can take runs now, for readiness probes: a cheap write to its backend
    /// (a read would answer while a full disk or another process's write lock refuses every
    /// run). The default (a log in this process) always can.
    ///
    /// # Errors
    ///
    /// When the backend does not answer.
    fn ready(&self) -> BoxFuture<'_, Result<(), LogError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// The running runs whose owner stopped beating (it died), with what a retry needs.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn lost(&self) -> BoxFuture<'_, Result<Vec<LostRun>, LogError>>;

    /// Appends `events` to a lost run if it is still running, still owned by
    /// `lost.record.owner`, and its log still ends at `lost.record.last_seq`; `None` otherwise
    /// (another instance recovered it first, or its owner was not dead and wrote more). They are
    /// numbered from `last_seq + SENT_AHEAD + 1`: its owner may have sent events it did not
    /// commit (see [`sends_ahead`](RunLog::sends_ahead)), at most [`SENT_AHEAD`] of them, and a
    /// client that saw one re-joins after it; those numbers are never used.
    ///
    /// With [`Recovery::Take`], this instance takes the run over: it stays running in the same
    /// segment (the events continue it), its attempts count one more, and this instance gets
    /// its lease. With [`Recovery::End`], the run ends as that end says (its notices kept with
    /// it): `events` end with its terminal event.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn recover<'a>(
        &'a self,
        lost: &'a LostRun,
        events: &'a [LoggedEvent],
        recovery: Recovery<'a>,
    ) -> BoxFuture<'a, Result<Option<Recovered>, LogError>>;

    /// How long the engine may send a run's events before they are committed: `None` (the
    /// default) when an event is sent once the log has it; `Some(window)` when it may be sent
    /// first, and is committed with the others of that window (a `RunStore` at the durability
    /// `Eager`). A run's end is sent once
    /// committed either way. A log that says `Some` numbers a takeover's events as
    /// [`recover`](RunLog::recover) says.
    fn sends_ahead(&self) -> Option<Duration> {
        None
    }

    /// Where the notices of its runs' ends wait for delivery (see [`Outbox`]); `None` (the
    /// default) for a log that keeps none: an engine that [notifies](super::Runs::notify) then
    /// refuses to start.
    fn outbox(&self) -> Option<&dyn Outbox> {
        None
    }

    /// Where the log keeps schedules (see [`ScheduleBook`]); `None` (the default) for a log that
    /// keeps none.
    fn schedules(&self) -> Option<&dyn ScheduleBook> {
        None
    }

    /// What this log does as one that outlives this process and that other processes may share
    /// (a store: SQLite, PostgreSQL): `None` for a log that ends with this process and that no
    /// other reads (a [`MemoryLog`](super::MemoryLog)). Then every run's request is kept while it
    /// runs, so that another instance, or this one restarted, can continue it; a drain hands runs
    /// over; cancel and re-join reach runs another instance drives.
    fn durable(&self) -> Option<&dyn DurableLog>;
}

/// What [`RunLog::recover`] does with a lost run.
#[derive(Debug, Clone, Copy)]
pub enum Recovery<'a> {
    /// This instance continues it.
    Take,
    /// It ends so (a run that cannot be continued).
    End(&'a RunEnd),
}

/// What a [`RunLog`] that outlives its process, and that several instances may share, must
/// answer ([`RunLog::durable`]): handing runs over, and cancel, re-join and wake-ups across the
/// instances. Nothing here has a default: a backend shared by instances that forgot one would
/// silently lose cross-instance cancel or re-join.
pub trait DurableLog: Send + Sync {
    /// Asks whichever instance drives `run` to cancel it: the request is recorded with the run,
    /// and that instance learns it from a [change](DurableLog::on_change)
    /// ([`Changed::CancelRequested`]) or from [`cancels_requested`](DurableLog::cancels_requested).
    /// `false` when the run is not running (it ended, or there is no such run).
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn request_cancel<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<bool, LogError>>;

    /// The running runs of this instance whose cancellation was
    /// [requested](DurableLog::request_cancel); the engine reads them at every heartbeat, in case a
    /// notification was missed.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn cancels_requested(&self) -> BoxFuture<'_, Result<Vec<RunId>, LogError>>;

    /// Records that `runs`, which this instance follows but does not drive, are followed until
    /// `lease` from now, so that the instance driving one does not cancel it as abandoned
    /// ([`Follow::viewer`](super::Follow::viewer)); the engine renews it at every heartbeat while
    /// they are followed. Runs that ended are left alone.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn followed<'a>(
        &'a self,
        runs: &'a [RunId],
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), LogError>>;

    /// Whether another instance [follows](DurableLog::followed) `run` now.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn followed_elsewhere<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<bool, LogError>>;

    /// Calls `changed` for every change another writer makes to the log (another instance sharing
    /// it), for as long as the log lives: the engine wakes the followers of those runs.
    fn on_change(&self, changed: OnChange);

    /// What `principal`'s runs use now, on every instance: its running runs, those begun since
    /// `minute_ago` (ms since the epoch), and the bytes logged by those begun since `day_began`
    /// (ms): what [`PrincipalLimits`](super::PrincipalLimits) are checked against when a run
    /// begins, so that they hold across instances and restarts.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn principal_usage<'a>(
        &'a self,
        principal: &'a str,
        minute_ago: i64,
        day_began: i64,
    ) -> BoxFuture<'a, Result<PrincipalUsage, LogError>>;

    /// Gives up this instance's runs that are still running, for another instance (or this one
    /// restarted) to continue as soon as it looks for [lost](RunLog::lost) runs: what a
    /// draining instance does with the runs it could not finish.
    ///
    /// # Errors
    ///
    /// Failures of the backend.
    fn release(&self) -> BoxFuture<'_, Result<(), LogError>>;
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

/// What another writer changed in a run log, for [`DurableLog::on_change`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Changed<'a> {
    /// This run's log grew, or the run ended.
    Run(&'a RunId),
    /// Another instance asked for this run to be cancelled ([`DurableLog::request_cancel`]).
    CancelRequested(&'a RunId),
    /// A run of this thread started on another instance.
    ThreadStarted(&'a ThreadId),
    /// Another instance kept, named, archived or deleted this thread of this principal: its
    /// listing changed.
    ThreadListed(&'a ThreadId, Option<&'a str>),
    /// Another instance [released](DurableLog::release) its runs: they wait to be continued.
    Released,
    /// Changes may have been missed (a notification connection was lost): anything may have
    /// changed.
    Any,
}

/// A callback of [`DurableLog::on_change`].
pub type OnChange = Arc<dyn Fn(Changed<'_>) + Send + Sync>;
