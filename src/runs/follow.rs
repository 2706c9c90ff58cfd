//! [`Follow`]: a run's events after a point, then as they are logged, until the run's end.

use std::{
    collections::VecDeque,
    fmt,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use futures_core::Stream;
use futures_util::{FutureExt, future::BoxFuture};
use tokio_util::sync::CancellationToken;

use super::{
    Hub, LoggedEvent, RunLog, RunObserver, RunStatus,
    hub::{TailRead, Topic, Unfollowed},
};
use crate::{
    agui::{
        Event,
        event::{BaseEvent, RunError},
    },
    id::RunId,
    transport::OnDisconnect,
};

/// How many events one read takes.
const PAGE: usize = 512;

/// The `RUN_ERROR` code a follower ends with when the run's log cannot be read or written.
pub const STORE_UNAVAILABLE: &str = "store_unavailable";

/// The name of the `CUSTOM` event a follower ends with when its instance stops while the run
/// goes on (handed over to another instance, or driven by one): not the run's end. Its value
/// says where to re-join it: `{"runId", "lastEventId"}`, the `Last-Event-ID` of the last event
/// this follower yielded, for `GET /runs/{runId}/events` on any instance.
pub const REJOIN: &str = "agent_tower.rejoin";

/// The events of one run after a sequence number, then the events logged later, until the run
/// has ended and its log is read to the end (at once for an unknown run). Made by
/// [`Runs::follow`](super::Runs::follow).
///
/// A follower of a run driven by this process reads the run's recent events from memory; others
/// read the log. It never polls: it waits for wake-ups (this process's writes, another instance's
/// through the log's notifications).
///
/// It never fails: when the log cannot be read, or the run's log could not be written, the
/// follower ends with a `RUN_ERROR` of its own (code `store_unavailable`, sequence number 0: it
/// is not in the log). So does the follower of a run whose instance is gone and that no instance
/// could end in the log (the log takes no writes): once the run has been lost for two leases.
///
/// When its instance stops while the run goes on elsewhere (the engine [handed its runs
/// over](super::Runs::hand_over)), it ends at once after what it has read, with a [`REJOIN`]
/// event (sequence number 0) instead of a terminal one: a response following it ends cleanly,
/// and its client re-joins the run on another instance.
pub struct Follow {
    log: Arc<dyn RunLog>,
    topic: Arc<Topic>,
    run_id: RunId,
    after: u64,
    buffered: VecDeque<LoggedEvent>,
    /// A `RUN_FINISHED` at interrupts, held until the follower knows whether the run went on
    /// under its own id (the answer to its interrupts): then neither it nor the next
    /// `RUN_STARTED` is yielded, and a replay reads one run.
    held: Option<LoggedEvent>,
    next: Option<BoxFuture<'static, Step>>,
    done: bool,
    /// When this follower is the run's viewer: the grace period after which the run is
    /// cancelled once nobody follows it (`None`: it goes on).
    on_drop: Option<Option<Duration>>,
    /// Told when this follower comes and goes.
    observer: Arc<dyn RunObserver>,
    /// The engine's lease: a run lost for twice as long is given up.
    lease: Duration,
    /// Fired when this instance stops following runs (they go on elsewhere).
    stopping: CancellationToken,
}

/// What one step of following found.
enum Step {
    Events(Vec<LoggedEvent>),
    End,
    Failed(String),
    /// This instance stops; the run goes on elsewhere.
    Elsewhere,
}

impl Follow {
    pub(crate) fn new(
        log: Arc<dyn RunLog>,
        hub: &Hub,
        observer: Arc<dyn RunObserver>,
        run_id: RunId,
        after: u64,
    ) -> Self {
        observer.on_follower(true);
        let topic = hub.watch(&run_id);
        topic.follower_joined();
        Self {
            topic,
            log,
            run_id,
            after,
            buffered: VecDeque::new(),
            held: None,
            next: None,
            done: false,
            on_drop: None,
            observer,
            lease: Duration::from_secs(30),
            stopping: CancellationToken::new(),
        }
    }

    /// Ends this follower (with a [`REJOIN`] event) once `stopping` fires: its instance stops
    /// and the run goes on elsewhere.
    pub(crate) fn until(mut self, stopping: CancellationToken) -> Self {
        self.stopping = stopping;
        self
    }

    /// How long a run's owner may be silent (the engine's lease): a run lost for twice as long,
    /// that no instance could end, is given up.
    pub(crate) fn patience(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Makes this follower the run's viewer (its client started the run). When it is dropped
    /// before the run's end (the client went away), [`OnDisconnect::Continue`] lets the run go
    /// on, and [`OnDisconnect::Cancel`] cancels it once nobody has followed it for `grace`: a
    /// client that re-joins within it (a reloaded page, on this instance or, with a shared log,
    /// on another) keeps it going, and the grace starts again when the last follower leaves.
    /// A zero `grace` cancels the run at once, even while others follow it (they watch; the
    /// client that started it stopped it). The run's [summary](super::RunSummary) says
    /// whether its viewer left.
    #[must_use]
    pub fn viewer(mut self, on_drop: OnDisconnect, grace: Duration) -> Self {
        self.on_drop = Some(match on_drop {
            OnDisconnect::Cancel => Some(grace),
            OnDisconnect::Continue => None,
        });
        self
    }

    /// The run it follows.
    #[must_use]
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The sequence number of the last event yielded (where a re-join would start).
    #[must_use]
    pub fn position(&self) -> u64 {
        self.after
    }

    fn end(&mut self) {
        self.done = true;
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        let viewer = if self.done { None } else { self.on_drop };
        if let Some(unfollowed) = self.topic.follower_left(viewer) {
            cancel_unless_rejoined(
                self.topic.clone(),
                self.log.clone(),
                self.run_id.clone(),
                unfollowed,
            );
        }
        self.observer.on_follower(false);
    }
}

/// Cancels a run nobody follows here once `unfollowed.grace` has passed, unless somebody
/// followed it again meanwhile, here or on another instance (the log knows). Outside a tokio
/// runtime, or with no grace, at once.
fn cancel_unless_rejoined(
    topic: Arc<Topic>,
    log: Arc<dyn RunLog>,
    run: RunId,
    unfollowed: Unfollowed,
) {
    let runtime = match tokio::runtime::Handle::try_current() {
        Ok(runtime) if !unfollowed.grace.is_zero() => runtime,
        _ => {
            topic.cancel();
            return;
        }
    };
    runtime.spawn(async move {
        loop {
            tokio::time::sleep(unfollowed.grace).await;
            if !topic.still_unfollowed(unfollowed) {
                return;
            }
            let elsewhere = match log.durable() {
                Some(durable) => durable.followed_elsewhere(&run).await,
                None => Ok(false),
            };
            match elsewhere {
                Ok(true) => continue,
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(run_id = %run, %error, "could not learn whether another instance follows an unfollowed run: it is cancelled");
                }
            }
            if topic.still_unfollowed(unfollowed) {
                tracing::info!(run_id = %run, grace = %humantime::format_duration(unfollowed.grace), "nobody followed the run after its client left: it is cancelled");
                topic.cancel();
            }
            return;
        }
    });
}

/// The next events of `run` after `after`, waiting for them while the run runs. While it waits
/// on the log, it looks every third of a `lease` whether the run was lost (its instance gone);
/// lost for two leases without any instance ending it, the run is given up.
async fn step(
    log: Arc<dyn RunLog>,
    topic: Arc<Topic>,
    run: RunId,
    after: u64,
    (lease, stopping): (Duration, CancellationToken),
) -> Step {
    let mut lost_since: Option<tokio::time::Instant> = None;
    loop {
        // Registered before reading: a write after the read still wakes us.
        let woken = topic.notified();
        let mut woken = std::pin::pin!(woken);
        woken.as_mut().enable();
        match topic.read(after, PAGE) {
            TailRead::Events(events) if !events.is_empty() => return Step::Events(events),
            TailRead::Events(_) | TailRead::Log => {}
            TailRead::Wait if stopping.is_cancelled() => return Step::Elsewhere,
            TailRead::Wait => {
                tokio::select! {
                    () = woken => {}
                    () = stopping.cancelled() => {}
                }
                continue;
            }
            TailRead::Ended => return Step::End,
            TailRead::Failed(why) => return Step::Failed(why),
        }
        match log.read(&run, after, PAGE).await {
            Err(error) => return Step::Failed(error.to_string()),
            Ok(None) => return Step::End,
            Ok(Some(page)) if !page.events.is_empty() => return Step::Events(page.events),
            Ok(Some(page)) if page.status != RunStatus::Running => {
                if page.last_seq <= after {
                    return Step::End;
                }
                // Ended with events committed after our read: read them.
            }
            Ok(Some(_)) if stopping.is_cancelled() => return Step::Elsewhere,
            Ok(Some(_)) => {
                tokio::select! {
                    () = woken.as_mut() => {}
                    () = stopping.cancelled() => {}
                    () = tokio::time::sleep(lease / 3) => {
                        match log.lost().await {
                            Ok(lost) if lost.iter().any(|l| l.record.run_id == run) => {
                                let since = *lost_since.get_or_insert_with(tokio::time::Instant::now);
                                if since.elapsed() >= 2 * lease {
                                    return Step::Failed(
                                        "the run's instance is gone and no instance could end it"
                                            .to_owned(),
                                    );
                                }
                            }
                            Ok(_) => lost_since = None,
                            Err(error) => return Step::Failed(error.to_string()),
                        }
                    }
                }
            }
        }
    }
}

/// The event a follower ends with when its instance stops while the run goes on: where to
/// re-join it.
fn elsewhere(run: &RunId, after: u64) -> LoggedEvent {
    LoggedEvent::new(
        0,
        Event::from(crate::agui::event::Custom {
            name: REJOIN.to_owned(),
            value: serde_json::json!({
                "runId": run,
                "lastEventId": format!("{run}:{after}"),
            }),
            subagent_run_id: None,
            base: BaseEvent::default(),
        }),
    )
}

/// The `RUN_ERROR` a follower ends with when the run's log fails.
fn unavailable(run: &RunId, why: &str) -> LoggedEvent {
    tracing::warn!(run_id = %run, reason = %why, "a run's log failed: its followers end");
    LoggedEvent::new(
        0,
        Event::from(RunError {
            message: "the run log is unavailable: the run cannot go on".to_owned(),
            code: Some(STORE_UNAVAILABLE.to_owned()),
            usage: None,
            base: BaseEvent::default(),
        }),
    )
}

impl Stream for Follow {
    type Item = LoggedEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<LoggedEvent>> {
        let this = &mut *self;
        loop {
            if let Some(event) = this.buffered.pop_front() {
                this.after = event.seq.max(this.after);
                match this.held.take() {
                    // The run went on under its id: one run, not two.
                    Some(_) if event.is_start() => continue,
                    Some(held) => {
                        this.buffered.push_front(event);
                        return Poll::Ready(Some(held));
                    }
                    None if event.is_interrupted_end() => {
                        this.held = Some(event);
                        continue;
                    }
                    None => return Poll::Ready(Some(event)),
                }
            }
            if this.done {
                return Poll::Ready(this.held.take());
            }
            let next = this.next.get_or_insert_with(|| {
                step(
                    this.log.clone(),
                    this.topic.clone(),
                    this.run_id.clone(),
                    this.after,
                    (this.lease, this.stopping.clone()),
                )
                .boxed()
            });
            let step = futures_core::ready!(next.as_mut().poll(cx));
            this.next = None;
            match step {
                Step::Events(events) => this.buffered.extend(events),
                Step::End => this.end(),
                Step::Failed(why) => {
                    this.buffered.push_back(unavailable(&this.run_id, &why));
                    this.end();
                }
                Step::Elsewhere => {
                    // Not the run's end, but this follower's: its viewer's leaving is no reason
                    // to cancel the run.
                    let held = this.held.take();
                    let at = held.as_ref().map_or(this.after, |held| held.seq - 1);
                    this.buffered.push_back(elsewhere(&this.run_id, at));
                    this.done = true;
                }
            }
        }
    }
}

impl fmt::Debug for Follow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Follow")
            .field("run_id", &self.run_id)
            .field("after", &self.after)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
