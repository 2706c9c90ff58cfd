//! `GET /threads/{threadId}/events`: a thread as an AG-UI event stream, for a client that
//! connects to it (a reloaded page, a second screen): the conversation, the state and the
//! interrupts it waits on, then the run in flight, if any, from its start to its end.
//!
//! With no run in flight: `RUN_STARTED`, `MESSAGES_SNAPSHOT`, `STATE_SNAPSHOT` (when the
//! thread has a state) and `RUN_FINISHED` under the id of the thread's last run, whose outcome
//! is `interrupt` with the interrupts still pending (as the run that stopped at them sent them),
//! else `success`. With a run in flight: that run's logged events from its start, following it
//! to its end; its `RUN_STARTED`'s input and a `MESSAGES_SNAPSHOT` after it carry the whole
//! conversation in order (the thread's, then what the run answers). Events that are not in the
//! log carry no SSE id.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    pin::Pin,
    task::{Context, Poll},
};

use futures_core::Stream;

use crate::{
    agui::{
        Event,
        event::{BaseEvent, MessagesSnapshot, RunFinished, RunFinishedOutcome, RunStarted},
        input::{Message, RunAgentInput},
    },
    id::{InterruptId, RunId, ThreadId},
    runs::{Follow, LoggedEvent, RunRecord, ThreadRecord},
};

/// The events of a thread with no run in flight; `last_end` is the terminal event its last run
/// logged (the interrupts it stopped at), `pending` the interrupts that still wait.
pub(super) fn ended(
    thread: &ThreadRecord,
    last_end: Option<&LoggedEvent>,
    pending: &HashSet<InterruptId>,
) -> VecDeque<LoggedEvent> {
    let run_id = thread
        .runs
        .last()
        .map_or_else(|| crate::id::RunId::from("none"), |run| run.run_id.clone());
    let mut events = VecDeque::new();
    events.push_back(unlogged(Event::from(RunStarted {
        thread_id: thread.thread_id.clone(),
        run_id: run_id.clone(),
        parent_run_id: None,
        input: None,
        protocol_version: Some(crate::agui::PROTOCOL_VERSION.to_owned()),
        base: BaseEvent::default(),
    })));
    events.push_back(unlogged(Event::messages_snapshot(&thread.messages)));
    if let Some(state) = &thread.state {
        events.push_back(unlogged(Event::state_snapshot(state.clone())));
    }
    let waiting: Vec<_> = last_end
        .and_then(|end| end.event().ok())
        .and_then(|end| match end {
            Event::RunFinished(RunFinished {
                outcome: Some(RunFinishedOutcome::Interrupt { interrupts }),
                ..
            }) => Some(interrupts),
            _ => None,
        })
        .into_iter()
        .flatten()
        .filter(|interrupt| pending.contains(interrupt.id.as_str()))
        .collect();
    let outcome = if waiting.is_empty() {
        RunFinishedOutcome::Success {
            pending_tool_call_ids: None,
        }
    } else {
        RunFinishedOutcome::Interrupt {
            interrupts: waiting,
        }
    };
    events.push_back(unlogged(Event::from(RunFinished {
        thread_id: thread.thread_id.clone(),
        run_id,
        result: None,
        outcome: Some(outcome),
        usage: None,
        base: BaseEvent::default(),
    })));
    events
}

/// The run of `thread` in flight, if any.
pub(super) fn in_flight(thread: &ThreadRecord) -> Option<&RunRecord> {
    thread
        .runs
        .iter()
        .rev()
        .find(|run| run.status == crate::runs::RunStatus::Running)
}

/// What a thread stream shows first: the thread with no run in flight ([`ended`]), or its run
/// in flight ([`Joined`]).
pub(super) enum First {
    /// The events of [`ended`].
    Ended(VecDeque<LoggedEvent>),
    /// The run in flight.
    Joined(Box<Joined>),
}

/// The events of `thread` (its record as read, `first` made of it), then with `follow` its later
/// runs as they start, each from where the stream left it; `runs` follows them.
pub(super) fn stream(
    runs: crate::runs::Runs,
    thread: &ThreadRecord,
    first: First,
    follow: bool,
) -> impl Stream<Item = LoggedEvent> + Send + Unpin + 'static {
    // How far each run is shown: the ended ones to their end, the one in flight as followed.
    let mut shown: HashMap<RunId, u64> = thread
        .runs
        .iter()
        .map(|run| (run.run_id.clone(), run.last_seq))
        .collect();
    if let First::Joined(joined) = &first {
        shown.remove(joined.run_id());
    }
    let state = Shown {
        runs,
        thread: thread.thread_id.clone(),
        shown,
        part: Some(Part::First(first)),
        follow,
        failed: false,
    };
    Box::pin(futures_util::stream::unfold(
        state,
        |mut state| async move {
            let event = state.next().await?;
            Some((event, state))
        },
    ))
}

/// The state of a thread stream.
struct Shown {
    runs: crate::runs::Runs,
    thread: ThreadId,
    shown: HashMap<RunId, u64>,
    part: Option<Part>,
    follow: bool,
    failed: bool,
}

enum Part {
    First(First),
    /// A later run, followed.
    Later(Follow),
}

impl Shown {
    /// Notes a follower's own end (its log failed: a terminal event not in the log; or this
    /// instance stops: the run goes on elsewhere), which ends the stream: the client connects
    /// again.
    fn seen(&mut self, event: LoggedEvent) -> LoggedEvent {
        self.failed |= event.is_rejoin() || event.seq == 0 && event.is_terminal();
        event
    }

    async fn next(&mut self) -> Option<LoggedEvent> {
        use futures_util::StreamExt;
        loop {
            match self.part.as_mut() {
                Some(Part::First(First::Ended(events))) => match events.pop_front() {
                    Some(event) => return Some(event),
                    None => self.part = None,
                },
                Some(Part::First(First::Joined(joined))) => match joined.next().await {
                    Some(event) => return Some(self.seen(event)),
                    None => {
                        let (run, at) = (joined.run_id().clone(), joined.follow.position());
                        self.shown.insert(run, at);
                        self.part = None;
                    }
                },
                Some(Part::Later(follow)) => match follow.next().await {
                    // Not the first part's: no SSE id (see the module).
                    Some(event) => return Some(self.seen(event).with_seq(0)),
                    None => {
                        self.shown
                            .insert(follow.run_id().clone(), follow.position());
                        self.part = None;
                    }
                },
                // A log that failed ends the stream (the client connects again).
                None if !self.follow || self.failed => return None,
                None => {
                    let next = next_run(&self.runs, &self.thread, &self.shown).await?;
                    self.part = Some(Part::Later(next));
                }
            }
        }
    }
}

/// The next run of `thread` with events `shown` does not cover, once there is one, followed
/// from there; `None` when the thread is gone or its log fails (the client connects again).
async fn next_run(
    runs: &crate::runs::Runs,
    thread: &ThreadId,
    shown: &HashMap<RunId, u64>,
) -> Option<Follow> {
    let wake = runs.watch_thread(thread);
    // A run never shown, a run that went on (answered under its own id), or one with events
    // not shown yet.
    let unseen = |run: &RunRecord| match shown.get(&run.run_id) {
        None => true,
        Some(&at) => run.status == crate::runs::RunStatus::Running || run.last_seq > at,
    };
    let shown = |run: &RunRecord| shown.get(&run.run_id).copied().unwrap_or(0);
    loop {
        // Registered before reading: a run that starts after the read still wakes us.
        let woken = wake.notified();
        let mut woken = std::pin::pin!(woken);
        woken.as_mut().enable();
        let record = runs.run_log().thread(thread).await.ok()??;
        if let Some(run) = record.runs.iter().find(|run| unseen(run)) {
            return Some(runs.rejoin(run.run_id.clone(), shown(run)).await);
        }
        woken.await;
    }
}

/// A run in flight followed from its start, the thread's conversation given after its
/// `RUN_STARTED`.
pub(super) struct Joined {
    follow: Follow,
    conversation: Option<Vec<Message>>,
    queued: Option<LoggedEvent>,
}

impl Joined {
    /// `follow` (from the run's start) for a client that knows nothing of `thread`.
    pub(super) fn new(follow: Follow, thread: &ThreadRecord) -> Self {
        Self {
            follow,
            conversation: Some(conversation(thread)),
            queued: None,
        }
    }

    pub(super) fn run_id(&self) -> &crate::id::RunId {
        self.follow.run_id()
    }
}

impl Stream for Joined {
    type Item = LoggedEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<LoggedEvent>> {
        let this = &mut *self;
        if let Some(queued) = this.queued.take() {
            return Poll::Ready(Some(queued));
        }
        let event = futures_core::ready!(Pin::new(&mut this.follow).poll_next(cx));
        let Some(event) = event else {
            return Poll::Ready(None);
        };
        let Some(mut messages) = this.conversation.take() else {
            return Poll::Ready(Some(event));
        };
        let Ok(Event::RunStarted(mut started)) = event.event() else {
            this.queued = Some(snapshot(messages));
            return Poll::Ready(Some(event));
        };
        // The run's first event: what it answers joins the conversation, after it. The client
        // adds a `RUN_STARTED`'s input messages it does not hold, in their order, and a snapshot
        // keeps the order of those it holds: so the input carries the whole conversation, in
        // order, lest a client that holds nothing put the run's question before its history.
        let known: HashSet<_> = messages.iter().map(|m| m.id().clone()).collect();
        let mut input = started.input.take().unwrap_or_else(|| {
            let (thread, run) = (started.thread_id.clone(), started.run_id.clone());
            Box::new(RunAgentInput::new(thread, run, Vec::new()))
        });
        let answered = std::mem::take(&mut input.messages);
        messages.extend(
            answered
                .into_iter()
                .filter(|message| !known.contains(message.id())),
        );
        input.messages = messages.clone();
        started.input = Some(input);
        this.queued = Some(snapshot(messages));
        Poll::Ready(Some(LoggedEvent::new(event.seq, Event::from(started))))
    }
}

/// The thread's conversation as AG-UI messages.
fn conversation(thread: &ThreadRecord) -> Vec<Message> {
    Message::conversation(&thread.messages)
}

fn snapshot(messages: Vec<Message>) -> LoggedEvent {
    unlogged(Event::from(MessagesSnapshot {
        messages,
        base: BaseEvent::default(),
    }))
}

/// An event that is not in the log (sequence number 0: no SSE id).
fn unlogged(event: Event) -> LoggedEvent {
    LoggedEvent::new(0, event)
}
