//! [`MemoryLog`]: the run log of one process, bounded.

use std::{
    collections::{HashMap, VecDeque},
    fmt,
    sync::{Mutex, MutexGuard, PoisonError},
    time::{Duration, SystemTime},
};

use futures_util::{FutureExt, future::BoxFuture};
use serde_json::Value;

use super::{
    Deleted, ForkedFrom, InterruptRecord, InterruptStatus, Interrupts, Lease, LogError,
    LoggedEvent, LostRun, Page, Recovered, RunEnd, RunLog, RunPage, RunQuery, RunRecord, RunStatus,
    SavedThread, Start, StartError, ThreadChange, ThreadPage, ThreadQuery, ThreadRecord,
    ThreadSummary,
    pages::newest_first,
    rules::{self, Begins, ExistingRun, Thread, ThreadView},
};
use crate::{
    id::{InterruptId, RunId, ThreadId},
    message::Message,
};

/// The owner of every run of a memory log.
const OWNER: &str = "this-process";

/// A [`RunLog`] in this process's memory: everything [`Runs`](super::Runs) does (interrupts,
/// idempotent replays, re-joins) works, until the process exits.
///
/// It is bounded: it keeps at most [`max_runs`](MemoryLog::max_runs) ended runs and
/// [`max_bytes`](MemoryLog::max_bytes) of events, forgetting the oldest ended runs first (a
/// re-join of a forgotten run finds nothing; a thread's pending interrupts and its conversation
/// are kept as long as they are pending). A running run that would take the log past its bytes is
/// refused more events ([`LogError::Full`]); its end is always written.
///
/// ```
/// use agent_tower::runs::{MemoryLog, RunLog, Start};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let log = MemoryLog::new().max_runs(1_000);
/// let lease = log.start(&Start::new("thread".into(), "run".into())).await.unwrap();
/// assert_eq!(lease.last_seq, 0);
/// assert!(log.start(&Start::new("thread".into(), "other".into())).await.is_err(), "busy thread");
/// # }
/// ```
pub struct MemoryLog {
    state: Mutex<State>,
    max_runs: usize,
    max_bytes: usize,
}

#[derive(Default)]
struct State {
    threads: HashMap<ThreadId, ThreadEntry>,
    runs: HashMap<RunId, RunEntry>,
    interrupts: HashMap<InterruptId, InterruptRecord>,
    /// Ended runs, oldest first: the order they are forgotten in.
    ended: VecDeque<RunId>,
    /// The bytes of every kept event.
    bytes: usize,
    /// The notices of ended runs.
    notices: super::notice::KeptNotices,
    schedules: super::book::KeptSchedules,
}

#[derive(Default)]
struct ThreadEntry {
    /// The principal it belongs to (set with its first run).
    principal: Option<String>,
    messages: Vec<Message>,
    state: Option<Value>,
    saved: bool,
    runs: Vec<RunId>,
    active: Option<RunId>,
    /// The directory it works in (an editor's session).
    workspace: Option<String>,
    /// When its conversation last changed.
    updated_at: Option<SystemTime>,
    /// The name it was given.
    name: Option<String>,
    archived: bool,
    /// The thread it is a fork of.
    forked_from: Option<ForkedFrom>,
}

impl ThreadEntry {
    /// Whether the thread is known: it has runs or a kept conversation.
    fn exists(&self) -> bool {
        !self.runs.is_empty() || self.saved
    }

    /// How the thread `id` is listed.
    fn summary(&self, id: &ThreadId) -> ThreadSummary {
        ThreadSummary {
            thread_id: id.clone(),
            principal: self.principal.clone(),
            title: self
                .name
                .clone()
                .or_else(|| crate::message::title(&self.messages)),
            archived: self.archived,
            workspace: self.workspace.clone(),
            updated_at: self.updated_at.unwrap_or(std::time::UNIX_EPOCH),
            forked_from: self.forked_from.clone(),
        }
    }
}

struct RunEntry {
    record: RunRecord,
    events: Vec<LoggedEvent>,
    bytes: usize,
    request_hash: String,
    segment_start: u64,
}

/// A new run of `start`, belonging to `principal`, with nothing logged yet.
fn run_record(
    start: &Start,
    status: RunStatus,
    principal: Option<String>,
    now: SystemTime,
) -> RunRecord {
    RunRecord {
        run_id: start.run_id.clone(),
        thread_id: start.thread_id.clone(),
        status,
        owner: OWNER.to_owned(),
        principal,
        last_seq: 0,
        created_at: now,
        updated_at: now,
        request: None,
    }
}

/// What `events` take once kept: their JSON and their place in the run's list.
fn size(events: &[LoggedEvent]) -> usize {
    events
        .iter()
        .map(|e| e.json().len() + std::mem::size_of::<LoggedEvent>())
        .sum()
}

/// `events` as kept: their JSON only. The typed events (many times the size of their JSON)
/// serve this process's live followers, which read the engine's tail of them, not the log.
fn kept(events: &[LoggedEvent]) -> impl Iterator<Item = LoggedEvent> + '_ {
    events
        .iter()
        .map(|e| LoggedEvent::from_json(e.seq, e.json().clone()))
}

impl MemoryLog {
    /// A log keeping up to 10,000 ended runs and 256 MiB of events.
    #[must_use]
    pub fn new() -> Self {
        Self {
            state: Mutex::default(),
            max_runs: 10_000,
            max_bytes: 256 * 1024 * 1024,
        }
    }

    /// How many ended runs are kept (at least 1).
    #[must_use]
    pub fn max_runs(mut self, runs: usize) -> Self {
        self.max_runs = runs.max(1);
        self
    }

    /// How many bytes of events are kept, all runs together.
    #[must_use]
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for MemoryLog {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("MemoryLog")
            .field("runs", &state.runs.len())
            .field("bytes", &state.bytes)
            .field("max_runs", &self.max_runs)
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

impl State {
    /// What the rules of a start read here.
    fn view(&self, start: &Start) -> ThreadView {
        let answered = |id: &InterruptId| start.resume.iter().any(|(answer, _)| answer == id);
        let thread = self
            .threads
            .get(&start.thread_id)
            .filter(|thread| thread.exists());
        ThreadView {
            thread: thread.map_or(Thread::New, |thread| Thread::Of(thread.principal.clone())),
            run: self.runs.get(&start.run_id).map(|run| ExistingRun {
                status: run.record.status,
                principal: run.record.principal.clone(),
                request_hash: run.request_hash.clone(),
                segment_start: run.segment_start,
                last_seq: run.record.last_seq,
            }),
            active: thread.and_then(|thread| thread.active.clone()),
            interrupts: self
                .interrupts
                .values()
                .filter(|i| {
                    (i.thread_id == start.thread_id && i.status == InterruptStatus::Pending)
                        || answered(&i.id)
                })
                .cloned()
                .collect(),
        }
    }

    /// Starts `start` if the rules let it: the plan written under the lock.
    fn start(&mut self, start: &Start, now: SystemTime) -> Result<Lease, StartError> {
        let view = self.view(start);
        let plan = rules::plan(start, &view, now)?;
        for (id, decision) in &start.resume {
            if let Some(record) = self.interrupts.get_mut(id) {
                record.status = InterruptStatus::Resolved;
                record.resolution = Some(decision.clone());
                record.resolved_by_run = Some(start.run_id.clone());
            }
        }
        let mut lease = plan.lease(start);
        match plan.begins {
            Begins::Continue { .. } => {
                let run = self
                    .runs
                    .get_mut(&start.run_id)
                    .expect("a continued run is in the view");
                run.record.status = RunStatus::Running;
                run.record.owner = OWNER.to_owned();
                run.record.updated_at = now;
                run.request_hash.clone_from(&start.request_hash);
                run.record.request.clone_from(&start.request);
                run.segment_start = lease.last_seq;
                self.ended.retain(|id| id != &start.run_id);
            }
            Begins::New => {
                let mut record =
                    run_record(start, RunStatus::Running, lease.principal.clone(), now);
                record.request.clone_from(&start.request);
                self.add_run(start, record, Vec::new());
            }
        }
        let thread = self.threads.entry(start.thread_id.clone()).or_default();
        thread.active = Some(start.run_id.clone());
        if let Some(first) = start
            .first_turn
            .as_ref()
            .filter(|_| view.thread == Thread::New)
        {
            // Its first run: the thread is kept, and listed, from the start.
            thread.principal.clone_from(&lease.principal);
            thread.messages.clone_from(&first.messages);
            thread.state.clone_from(&first.state);
            thread.saved = true;
            thread.updated_at = Some(now);
            lease.made_thread = true;
        }
        Ok(lease)
    }

    /// Adds a new run of `start`'s thread, with its events; the thread is its principal's.
    fn add_run(&mut self, start: &Start, record: RunRecord, events: Vec<LoggedEvent>) {
        let bytes = size(&events);
        let thread = self.threads.entry(start.thread_id.clone()).or_default();
        if !thread.exists() {
            thread.principal.clone_from(&record.principal);
        }
        thread.runs.push(start.run_id.clone());
        self.bytes += bytes;
        self.runs.insert(
            start.run_id.clone(),
            RunEntry {
                record,
                events,
                bytes,
                request_hash: start.request_hash.clone(),
                segment_start: 0,
            },
        );
    }

    fn write(
        &mut self,
        lease: &Lease,
        events: &[LoggedEvent],
        end: Option<&RunEnd>,
        max_bytes: usize,
        now: SystemTime,
    ) -> Result<(), LogError> {
        let fenced = || LogError::Fenced(lease.run_id.clone());
        let run = self.runs.get(&lease.run_id).ok_or_else(fenced)?;
        let follows = events
            .first()
            .is_none_or(|first| first.seq == run.record.last_seq + 1);
        if run.record.status != RunStatus::Running || !follows {
            return Err(fenced());
        }
        let bytes = size(events);
        if end.is_none() && self.bytes + bytes > max_bytes {
            // Room is made by forgetting ended runs, the newest too.
            self.evict(usize::MAX, max_bytes.saturating_sub(bytes), 0);
        }
        if end.is_none() && self.bytes + bytes > max_bytes {
            return Err(LogError::Full(format!(
                "the live runs' events take {} of the {max_bytes} bytes kept",
                self.bytes
            )));
        }
        let run = self.runs.get_mut(&lease.run_id).ok_or_else(fenced)?;
        run.events.extend(kept(events));
        run.bytes += bytes;
        run.record.last_seq = run.events.last().map_or(run.record.last_seq, |e| e.seq);
        run.record.updated_at = now;
        self.bytes += bytes;
        let Some(end) = end else {
            return Ok(());
        };
        run.record.status = end.status;
        // What it was asked is kept past its end only for an interrupted run.
        run.record.request.clone_from(&end.request);
        let thread = self.threads.entry(lease.thread_id.clone()).or_default();
        if thread.active.as_ref() == Some(&lease.run_id) {
            thread.active = None;
        }
        if let Some(messages) = &end.messages {
            thread.messages.clone_from(messages);
            thread.state.clone_from(&end.state);
            thread.saved = true;
            thread.updated_at = Some(now);
        }
        self.notices.keep(&end.notices, now);
        for interrupt in &end.interrupts {
            self.interrupts.insert(
                interrupt.id.clone(),
                InterruptRecord::pending(interrupt, &lease.thread_id, &lease.run_id, now),
            );
        }
        self.ended.push_back(lease.run_id.clone());
        Ok(())
    }

    /// Forgets the oldest ended runs until the bounds hold, keeping the `keep` newest (a run that
    /// just ended is still being read by its followers).
    fn evict(&mut self, max_runs: usize, max_bytes: usize, keep: usize) {
        while self.ended.len() > max_runs.max(keep)
            || (self.bytes > max_bytes && self.ended.len() > keep)
        {
            let Some(id) = self.ended.pop_front() else {
                return;
            };
            let Some(run) = self.runs.remove(&id) else {
                continue;
            };
            self.bytes -= run.bytes;
            self.interrupts.retain(|_, i| {
                i.status == InterruptStatus::Pending
                    || (i.run_id != id && self.runs.contains_key(&i.run_id))
            });
            let thread_id = run.record.thread_id;
            let forget = self.threads.get_mut(&thread_id).is_some_and(|thread| {
                thread.runs.retain(|r| r != &id);
                thread.runs.is_empty() && thread.active.is_none()
            }) && !self
                .interrupts
                .values()
                .any(|i| i.thread_id == thread_id && i.status == InterruptStatus::Pending);
            if forget {
                self.threads.remove(&thread_id);
            }
        }
    }

    fn interrupts(&self, filter: Interrupts<'_>) -> Vec<InterruptRecord> {
        let mut list: Vec<InterruptRecord> = self
            .interrupts
            .values()
            .filter(|i| match filter {
                Interrupts::All(status) => status.is_none_or(|s| i.status == s),
                Interrupts::Id(id) => &i.id == id,
                Interrupts::PendingOf(thread) => {
                    &i.thread_id == thread && i.status == InterruptStatus::Pending
                }
                Interrupts::ResolvedBy(run) => i.resolved_by_run.as_ref() == Some(run),
            })
            .cloned()
            .collect();
        list.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        list
    }
}

impl RunLog for MemoryLog {
    fn start<'a>(&'a self, start: &'a Start) -> BoxFuture<'a, Result<Lease, StartError>> {
        let started = self.lock().start(start, SystemTime::now());
        std::future::ready(started).boxed()
    }

    fn write<'a>(
        &'a self,
        lease: &'a Lease,
        events: &'a [LoggedEvent],
        end: Option<&'a RunEnd>,
    ) -> BoxFuture<'a, Result<(), LogError>> {
        let mut state = self.lock();
        let written = state.write(lease, events, end, self.max_bytes, SystemTime::now());
        if written.is_ok() && end.is_some() {
            state.evict(self.max_runs, self.max_bytes, 1);
        }
        std::future::ready(written).boxed()
    }

    fn refuse<'a>(
        &'a self,
        start: &'a Start,
        events: &'a [LoggedEvent],
    ) -> BoxFuture<'a, Result<(), StartError>> {
        let mut state = self.lock();
        let refused = match rules::refusal(start, &state.view(start)) {
            Err(refused) => Err(refused),
            Ok(principal) => {
                let mut record = run_record(start, RunStatus::Failed, principal, SystemTime::now());
                record.last_seq = events.last().map_or(0, |e| e.seq);
                state.add_run(start, record, kept(events).collect());
                state.ended.push_back(start.run_id.clone());
                state.evict(self.max_runs, self.max_bytes, 1);
                Ok(())
            }
        };
        std::future::ready(refused).boxed()
    }

    fn read<'a>(
        &'a self,
        run: &'a RunId,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Option<Page>, LogError>> {
        let page = self.lock().runs.get(run).map(|run| {
            let from = usize::try_from(after).unwrap_or(usize::MAX);
            Page {
                events: run.events.iter().skip(from).take(limit).cloned().collect(),
                status: run.record.status,
                last_seq: run.record.last_seq,
            }
        });
        std::future::ready(Ok(page)).boxed()
    }

    fn owner(&self) -> &str {
        OWNER
    }

    fn run<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<Option<RunRecord>, LogError>> {
        let record = self.lock().runs.get(run).map(|run| run.record.clone());
        std::future::ready(Ok(record)).boxed()
    }

    fn thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Option<ThreadRecord>, LogError>> {
        let state = self.lock();
        let record = state.threads.get(thread).map(|entry| {
            let mut runs: Vec<RunRecord> = entry
                .runs
                .iter()
                .filter_map(|id| state.runs.get(id).map(|run| run.record.clone()))
                .collect();
            runs.sort_by(|a, b| (a.created_at, &a.run_id).cmp(&(b.created_at, &b.run_id)));
            ThreadRecord {
                thread_id: thread.clone(),
                principal: entry.principal.clone(),
                messages: entry.messages.clone(),
                state: entry.state.clone(),
                runs,
            }
        });
        let record = record.filter(|t| !t.runs.is_empty() || state.threads[thread].saved);
        std::future::ready(Ok(record)).boxed()
    }

    fn save_thread<'a>(&'a self, saved: SavedThread<'a>) -> BoxFuture<'a, Result<(), LogError>> {
        let mut log = self.lock();
        let entry = log.threads.entry(saved.thread.clone()).or_default();
        if !entry.exists() {
            entry.principal = saved.principal.map(str::to_owned);
            entry.forked_from = saved.forked_from.cloned();
        }
        entry.messages = saved.messages.to_vec();
        entry.state = saved.state.cloned();
        entry.saved = true;
        entry.updated_at = Some(SystemTime::now());
        if let Some(workspace) = saved.workspace {
            entry.workspace = Some(workspace.to_owned());
        }
        std::future::ready(Ok(())).boxed()
    }

    fn threads<'a>(
        &'a self,
        query: &'a ThreadQuery<'a>,
    ) -> BoxFuture<'a, Result<ThreadPage, LogError>> {
        let limit = query.limit.clamp(1, 1_000);
        let state = self.lock();
        let listed: Vec<ThreadSummary> = state
            .threads
            .iter()
            .filter(|(id, thread)| thread.saved && query.thread.is_none_or(|only| only == *id))
            .filter(|(_, thread)| {
                query.forks_of.is_none_or(|of| {
                    thread
                        .forked_from
                        .as_ref()
                        .is_some_and(|from| &from.thread_id == of)
                })
            })
            .filter(|(_, thread)| {
                query
                    .principal
                    .is_none_or(|p| thread.principal.as_deref() == Some(p))
                    && (!query.sessions || thread.workspace.is_some())
                    && query
                        .workspace
                        .is_none_or(|w| thread.workspace.as_deref() == Some(w))
            })
            .map(|(id, thread)| thread.summary(id))
            .filter(|thread| {
                query.selects(thread.title.as_deref(), thread.archived)
                    && query
                        .after
                        .is_none_or(|after| after.precedes(thread.updated_at, &thread.thread_id))
            })
            .collect();
        let (listed, next) = newest_first(listed, limit, |thread| {
            (thread.updated_at, &thread.thread_id)
        });
        std::future::ready(Ok(ThreadPage {
            threads: listed,
            next,
        }))
        .boxed()
    }

    fn runs<'a>(&'a self, query: &'a RunQuery<'a>) -> BoxFuture<'a, Result<RunPage, LogError>> {
        let limit = query.limit.clamp(1, 1_000);
        let state = self.lock();
        let matching = state.runs.values().map(|run| &run.record);
        let total = matching.clone().filter(|run| query.matches(run)).count() as u64;
        let listed = matching.filter(|run| query.selects(run)).cloned().collect();
        let (runs, next) = newest_first(listed, limit, |run| (run.updated_at, &run.run_id));
        std::future::ready(Ok(RunPage { runs, next, total })).boxed()
    }

    fn change_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
        change: &'a ThreadChange,
    ) -> BoxFuture<'a, Result<Option<ThreadSummary>, LogError>> {
        let mut state = self.lock();
        let changed = state
            .threads
            .get_mut(thread)
            .filter(|entry| entry.exists())
            .map(|entry| {
                if let Some(name) = &change.name {
                    entry.name.clone_from(name);
                }
                if let Some(name) = &change.suggested_name {
                    entry.name.get_or_insert_with(|| name.clone());
                }
                if let Some(archived) = change.archived {
                    entry.archived = archived;
                }
                entry.summary(thread)
            });
        std::future::ready(Ok(changed)).boxed()
    }

    fn delete_thread<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<Deleted, LogError>> {
        let mut state = self.lock();
        let deleted = match state.threads.get(thread) {
            Some(entry) if entry.active.is_some() => Deleted::Busy,
            Some(entry) if entry.exists() => {
                let entry = state.threads.remove(thread).expect("the thread is here");
                for run in &entry.runs {
                    if let Some(run) = state.runs.remove(run) {
                        state.bytes -= run.bytes;
                    }
                }
                state.ended.retain(|run| !entry.runs.contains(run));
                state.interrupts.retain(|_, i| &i.thread_id != thread);
                Deleted::Deleted
            }
            _ => Deleted::Unknown,
        };
        std::future::ready(Ok(deleted)).boxed()
    }

    fn interrupts<'a>(
        &'a self,
        filter: Interrupts<'a>,
    ) -> BoxFuture<'a, Result<Vec<InterruptRecord>, LogError>> {
        let list = self.lock().interrupts(filter);
        std::future::ready(Ok(list)).boxed()
    }

    fn heartbeat(&self, _lease: Duration) -> BoxFuture<'_, Result<(), LogError>> {
        // Nobody else writes this log: its runs are never anyone else's to recover.
        std::future::ready(Ok(())).boxed()
    }

    /// None: a memory log ends with this process, and no other process reads it.
    fn durable(&self) -> Option<&dyn super::DurableLog> {
        None
    }

    fn lost(&self) -> BoxFuture<'_, Result<Vec<LostRun>, LogError>> {
        std::future::ready(Ok(Vec::new())).boxed()
    }

    fn recover<'a>(
        &'a self,
        _lost: &'a LostRun,
        _events: &'a [LoggedEvent],
        _recovery: super::Recovery<'a>,
    ) -> BoxFuture<'a, Result<Option<Recovered>, LogError>> {
        // Its runs end with this process: there is never another instance to continue them.
        std::future::ready(Ok(None)).boxed()
    }

    fn outbox(&self) -> Option<&dyn super::Outbox> {
        Some(self)
    }

    fn schedules(&self) -> Option<&dyn super::ScheduleBook> {
        Some(self)
    }
}

/// Schedules kept in memory, for this process alone.
impl super::ScheduleBook for MemoryLog {
    fn put<'a>(
        &'a self,
        schedule: &'a super::ScheduleRecord,
    ) -> BoxFuture<'a, Result<(), LogError>> {
        std::future::ready(self.lock().schedules.put(schedule)).boxed()
    }

    fn due(
        &self,
        now: SystemTime,
        max: usize,
    ) -> BoxFuture<'_, Result<Vec<super::ScheduleRecord>, LogError>> {
        std::future::ready(Ok(self.lock().schedules.due(now, max))).boxed()
    }

    fn advance<'a>(
        &'a self,
        name: &'a str,
        from: SystemTime,
        to: Option<SystemTime>,
        run: Option<&'a RunId>,
    ) -> BoxFuture<'a, Result<bool, LogError>> {
        let moved = self.lock().schedules.advance(name, from, to, run);
        std::future::ready(Ok(moved)).boxed()
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<super::ScheduleRecord>, LogError>> {
        std::future::ready(Ok(self.lock().schedules.list())).boxed()
    }

    fn remove<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<bool, LogError>> {
        std::future::ready(Ok(self.lock().schedules.remove(name))).boxed()
    }
}

/// Notices kept in memory: delivered while this process lives (it gives up those pending when
/// it exits, as it does its runs).
impl super::Outbox for MemoryLog {
    fn claim(
        &self,
        max: usize,
        hold: Duration,
    ) -> BoxFuture<'_, Result<Vec<super::Claimed>, LogError>> {
        let claimed = self.lock().notices.claim(max, hold, SystemTime::now());
        std::future::ready(Ok(claimed)).boxed()
    }

    fn settle<'a>(
        &'a self,
        id: &'a str,
        settle: &'a super::Settle,
    ) -> BoxFuture<'a, Result<(), LogError>> {
        self.lock().notices.settle(id, settle, SystemTime::now());
        std::future::ready(Ok(())).boxed()
    }

    fn notices<'a>(
        &'a self,
        run: Option<&'a RunId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<super::NoticeRecord>, LogError>> {
        std::future::ready(Ok(self.lock().notices.list(run, limit))).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(from: u64, n: u64) -> Vec<LoggedEvent> {
        (from..from + n)
            .map(|seq| LoggedEvent::from_json(seq, format!(r#"{{"n":{seq},"pad":"0123456789"}}"#)))
            .collect()
    }

    async fn finished_run(log: &MemoryLog, run: &str, n: u64) {
        let lease = log
            .start(&Start::new(format!("t-{run}").into(), run.into()))
            .await
            .unwrap();
        log.write(
            &lease,
            &events(1, n),
            Some(&RunEnd::new(RunStatus::Finished)),
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn the_oldest_ended_runs_are_forgotten_first() {
        let log = MemoryLog::new().max_runs(2);
        for run in ["a", "b", "c"] {
            finished_run(&log, run, 3).await;
        }
        assert!(log.run(&"a".into()).await.unwrap().is_none(), "forgotten");
        assert!(log.thread(&"t-a".into()).await.unwrap().is_none());
        for run in ["b", "c"] {
            let page = log.read(&run.into(), 1, 10).await.unwrap().unwrap();
            assert_eq!(page.events, events(2, 2));
        }
    }

    #[tokio::test]
    async fn ended_runs_make_room_then_a_live_run_past_the_bytes_may_only_end() {
        let one = size(&events(1, 1));
        let log = MemoryLog::new().max_bytes(one * 2);
        finished_run(&log, "old", 2).await;
        let lease = log
            .start(&Start::new("t".into(), "live".into()))
            .await
            .unwrap();
        log.write(&lease, &events(1, 2), None).await.unwrap();
        assert!(
            log.run(&"old".into()).await.unwrap().is_none(),
            "room was made"
        );
        let full = log.write(&lease, &events(3, 1), None).await;
        assert!(matches!(full, Err(LogError::Full(_))), "{full:?}");
        log.write(&lease, &events(3, 1), Some(&RunEnd::new(RunStatus::Failed)))
            .await
            .unwrap();
        let page = log.read(&"live".into(), 0, 10).await.unwrap().unwrap();
        assert_eq!(
            page.last_seq, 3,
            "the newest ended run is kept for its followers"
        );
    }

    #[tokio::test]
    async fn a_write_that_does_not_follow_the_log_is_fenced() {
        let log = MemoryLog::new();
        let lease = log
            .start(&Start::new("t".into(), "r".into()))
            .await
            .unwrap();
        let gap = log.write(&lease, &events(2, 1), None).await;
        assert!(matches!(gap, Err(LogError::Fenced(_))));
        log.write(
            &lease,
            &events(1, 1),
            Some(&RunEnd::new(RunStatus::Finished)),
        )
        .await
        .unwrap();
        let late = log.write(&lease, &events(2, 1), None).await;
        assert!(matches!(late, Err(LogError::Fenced(_))), "ended");
    }
}
