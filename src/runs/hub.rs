//! Where the writers of this process's runs meet their followers: wake-ups, and the recent
//! events of the runs this process drives (so that following a live run reads memory, not the
//! log): committed ones, or, for a log that [sends ahead](super::RunLog::sends_ahead), the ones
//! taken for the next commit too.

use std::{
    collections::{HashMap, VecDeque},
    fmt,
    sync::{Arc, Mutex, MutexGuard, PoisonError, Weak},
    time::Duration,
};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::LoggedEvent;
use crate::id::{RunId, ThreadId};

/// How many recent events of a live run stay in memory for its followers; a follower further
/// behind reads the log.
const TAIL: usize = 4096;

/// The runs someone writes or follows in this process, each with its wake-up and, while this
/// process drives it, its recent events. Wake-ups are hints: a follower reads (the tail or the
/// log) after each one. Clones share the same hub.
#[derive(Clone, Default)]
pub(crate) struct Hub {
    runs: Arc<Mutex<HashMap<RunId, Weak<Topic>>>>,
    /// The threads someone waits on for their next run.
    threads: Arc<Mutex<HashMap<ThreadId, Weak<Notify>>>>,
}

/// One run's wake-up and tail.
#[derive(Default)]
pub(crate) struct Topic {
    notify: Notify,
    live: Mutex<Option<Tail>>,
    /// The viewer that started the run went away before its end.
    viewer_left: std::sync::atomic::AtomicBool,
    followers: Mutex<Followers>,
}

/// A run's followers in this process, and how long the run may go on without any.
#[derive(Default)]
struct Followers {
    count: usize,
    /// Set when the viewer left with a grace period: the run is cancelled once nobody has
    /// followed it for that long.
    grace: Option<Duration>,
    /// Bumped each time the last follower leaves: a wait for a re-join started before a later
    /// one is stale.
    generation: u64,
}

/// The last follower of a run driven here left after its viewer did: unless somebody follows it
/// again within `grace`, it is cancelled. Checked with [`Topic::still_unfollowed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unfollowed {
    pub(crate) grace: Duration,
    generation: u64,
}

/// The recent events of a run driven here that its followers may be sent, and how it stands.
struct Tail {
    /// The events, the last one at `last`.
    events: VecDeque<LoggedEvent>,
    /// The sequence number of the last event.
    last: u64,
    end: Option<TailEnd>,
    cancel: CancellationToken,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum TailEnd {
    Ended,
    Failed(String),
}

/// What a follower finds in a live run's tail.
#[derive(Debug)]
pub(crate) enum TailRead {
    /// Events after the follower's place.
    Events(Vec<LoggedEvent>),
    /// Nothing yet: wait for a wake-up.
    Wait,
    /// The run ended and the follower has read it all.
    Ended,
    /// The run's log could not be written: nothing more will come.
    Failed(String),
    /// The follower is behind the tail (or the run is not driven here): read the log.
    Log,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The value of `key` in `map`, shared by everyone holding it while one does (made when nobody
/// does); the entries nobody holds are dropped now and then, so the map stays bounded by what is
/// held.
fn shared<K, V>(map: &Mutex<HashMap<K, Weak<V>>>, key: &K) -> Arc<V>
where
    K: Clone + Eq + std::hash::Hash,
    V: Default,
{
    let mut map = lock(map);
    if let Some(value) = map.get(key).and_then(Weak::upgrade) {
        return value;
    }
    if map.len() >= 64 && map.len().is_power_of_two() {
        map.retain(|_, weak| weak.strong_count() > 0);
    }
    let value = Arc::new(V::default());
    map.insert(key.clone(), Arc::downgrade(&value));
    value
}

impl Hub {
    /// A hub with nobody in it.
    #[must_use]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The topic of `run` (shared by everyone watching it while one does).
    #[must_use]
    pub(crate) fn watch(&self, run: &RunId) -> Arc<Topic> {
        shared(&self.runs, run)
    }

    fn topic(&self, run: &RunId) -> Option<Arc<Topic>> {
        lock(&self.runs).get(run).and_then(Weak::upgrade)
    }

    /// Wakes `run`'s followers: its log may have grown or its run ended (another instance wrote
    /// it).
    pub(crate) fn wake(&self, run: &RunId) {
        if let Some(topic) = self.topic(run) {
            topic.notify.notify_waiters();
        }
    }

    /// Wakes every follower and everyone waiting on a thread: wake-ups may have been missed (a
    /// lost notification connection).
    pub(crate) fn wake_all(&self) {
        let topics: Vec<_> = lock(&self.runs)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for topic in topics {
            topic.notify.notify_waiters();
        }
        let threads: Vec<_> = lock(&self.threads)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for thread in threads {
            thread.notify_waiters();
        }
    }

    /// Cancels `run` if this process drives it; `false` otherwise.
    pub(crate) fn cancel(&self, run: &RunId) -> bool {
        let Some(topic) = self.topic(run) else {
            return false;
        };
        let cancel = lock(&topic.live).as_ref().map(|tail| tail.cancel.clone());
        cancel.inspect(CancellationToken::cancel).is_some()
    }

    /// Whether this process drives `run` and it has not ended.
    #[must_use]
    pub(crate) fn is_driven(&self, run: &RunId) -> bool {
        self.topic(run).is_some_and(|topic| topic.is_running_here())
    }

    /// How many runs are driven here now.
    #[must_use]
    pub(crate) fn driven(&self) -> usize {
        lock(&self.runs)
            .values()
            .filter(|weak| weak.upgrade().is_some_and(|topic| topic.is_running_here()))
            .count()
    }

    /// The runs followed here that another instance drives (or nobody: ended runs too), so that
    /// their owner knows somebody still follows them.
    #[must_use]
    pub(crate) fn followed_not_driven(&self) -> Vec<RunId> {
        lock(&self.runs)
            .iter()
            .filter(|(_, weak)| {
                weak.upgrade().is_some_and(|topic| {
                    lock(&topic.followers).count > 0 && lock(&topic.live).is_none()
                })
            })
            .map(|(run, _)| run.clone())
            .collect()
    }

    /// The wake-up of `thread`'s runs: it fires when a run of the thread starts (here, or on
    /// another instance that tells the log's listeners). Shared by everyone waiting on it.
    #[must_use]
    #[cfg(feature = "server")]
    pub(crate) fn watch_thread(&self, thread: &ThreadId) -> Arc<Notify> {
        shared(&self.threads, thread)
    }

    /// A run of `thread` started: whoever waits on the thread looks at it again.
    pub(crate) fn wake_thread(&self, thread: &ThreadId) {
        if let Some(notify) = lock(&self.threads).get(thread).and_then(Weak::upgrade) {
            notify.notify_waiters();
        }
    }

    /// The number of runs watched or driven here.
    #[must_use]
    pub(crate) fn len(&self) -> usize {
        lock(&self.runs)
            .values()
            .filter(|weak| weak.strong_count() > 0)
            .count()
    }
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub").field("runs", &self.len()).finish()
    }
}

impl Topic {
    /// Resolves at the next wake-up; enable it (or poll it once) before reading, so that a
    /// wake-up that comes while reading is not missed.
    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    /// Marks the run as driven here from `last` (its log's last event), cancelled by `cancel`.
    pub(crate) fn drive(&self, last: u64, cancel: CancellationToken) {
        self.viewer_left
            .store(false, std::sync::atomic::Ordering::Release);
        lock(&self.followers).grace = None;
        *lock(&self.live) = Some(Tail {
            events: VecDeque::new(),
            last,
            end: None,
            cancel,
        });
    }

    /// `events` may be sent to followers (committed, or sent ahead of their commit): keeps them
    /// for followers and wakes them (with none: wakes them, the log has more).
    pub(crate) fn publish(&self, events: &[LoggedEvent]) {
        if let Some(tail) = lock(&self.live).as_mut() {
            for event in events {
                tail.last = event.seq;
                tail.events.push_back(event.clone());
            }
            let excess = tail.events.len().saturating_sub(TAIL);
            tail.events.drain(..excess);
        }
        self.notify.notify_waiters();
    }

    /// The run's last events are committed: followers end once they read them.
    pub(crate) fn ended(&self) {
        self.end(TailEnd::Ended);
    }

    /// The run's log cannot be written: followers end without waiting for more.
    pub(crate) fn failed(&self, why: String) {
        self.end(TailEnd::Failed(why));
    }

    /// A follower of the run came, in this process.
    pub(crate) fn follower_joined(&self) {
        lock(&self.followers).count += 1;
    }

    /// A follower of the run went away (before the run's end, or it would not matter). `viewer`
    /// when it was the run's viewer (the client that started it), with the grace period after
    /// which a run nobody follows is cancelled, if it is to be. When this leaves a run driven
    /// here with no follower after its viewer left with a grace period, what to wait for. A
    /// viewer that leaves with no grace stopped the run (a plain client's Stop): it is to be
    /// cancelled at once, however many others follow it.
    pub(crate) fn follower_left(&self, viewer: Option<Option<Duration>>) -> Option<Unfollowed> {
        let mut followers = lock(&self.followers);
        followers.count = followers.count.saturating_sub(1);
        let mut stopped = false;
        if let Some(grace) = viewer {
            self.viewer_left
                .store(true, std::sync::atomic::Ordering::Release);
            followers.grace = grace;
            stopped = grace == Some(Duration::ZERO);
        }
        if followers.count > 0 && !stopped || !self.is_running_here() {
            return None;
        }
        let grace = followers.grace?;
        followers.generation += 1;
        Some(Unfollowed {
            grace,
            generation: followers.generation,
        })
    }

    /// Whether nobody followed the run here since `unfollowed` and it still runs here.
    pub(crate) fn still_unfollowed(&self, unfollowed: Unfollowed) -> bool {
        let followers = lock(&self.followers);
        followers.count == 0
            && followers.generation == unfollowed.generation
            && self.is_running_here()
    }

    /// Cancels the run if this process drives it.
    pub(crate) fn cancel(&self) {
        if let Some(tail) = lock(&self.live).as_ref() {
            tail.cancel.cancel();
        }
    }

    fn is_running_here(&self) -> bool {
        lock(&self.live)
            .as_ref()
            .is_some_and(|tail| tail.end.is_none())
    }

    /// Whether the viewer that started the run went away before its end.
    pub(crate) fn was_left(&self) -> bool {
        self.viewer_left.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The run is no longer driven here (another instance took it over): followers read the log.
    pub(crate) fn released(&self) {
        *lock(&self.live) = None;
        self.notify.notify_waiters();
    }

    fn end(&self, end: TailEnd) {
        if let Some(tail) = lock(&self.live).as_mut() {
            tail.end.get_or_insert(end);
        }
        self.notify.notify_waiters();
    }

    /// What a follower that read up to `after` finds, at most `limit` events.
    pub(crate) fn read(&self, after: u64, limit: usize) -> TailRead {
        let live = lock(&self.live);
        let Some(tail) = live.as_ref() else {
            return TailRead::Log;
        };
        if after < tail.last {
            let first = tail.events.front().map_or(tail.last + 1, |e| e.seq);
            if after + 1 < first {
                return TailRead::Log;
            }
            let skip = usize::try_from(after + 1 - first).unwrap_or(usize::MAX);
            return TailRead::Events(tail.events.iter().skip(skip).take(limit).cloned().collect());
        }
        match &tail.end {
            None => TailRead::Wait,
            Some(TailEnd::Ended) => TailRead::Ended,
            Some(TailEnd::Failed(why)) => TailRead::Failed(why.clone()),
        }
    }
}

impl fmt::Debug for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let live = lock(&self.live);
        f.debug_struct("Topic")
            .field("driven_here", &live.is_some())
            .field("last", &live.as_ref().map(|tail| tail.last))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64) -> LoggedEvent {
        LoggedEvent::from_json(seq, format!(r#"{{"n":{seq}}}"#))
    }

    #[test]
    fn a_follower_reads_the_tail_then_the_end() {
        let hub = Hub::new();
        let run = RunId::from("r");
        let topic = hub.watch(&run);
        assert!(
            matches!(topic.read(0, 10), TailRead::Log),
            "not driven here"
        );
        topic.drive(2, CancellationToken::new());
        assert!(matches!(topic.read(2, 10), TailRead::Wait));
        topic.publish(&[event(3), event(4)]);
        let TailRead::Events(events) = topic.read(3, 10) else {
            panic!("events")
        };
        assert_eq!(events, [event(4)]);
        assert!(
            matches!(topic.read(1, 10), TailRead::Log),
            "behind the tail"
        );
        topic.ended();
        assert!(matches!(topic.read(4, 10), TailRead::Ended));
        assert!(hub.cancel(&run));
        drop(topic);
        assert!(!hub.cancel(&run), "forgotten once nobody holds it");
        assert_eq!(hub.len(), 0);
    }

    #[test]
    fn the_tail_is_bounded() {
        let topic = Topic::default();
        topic.drive(0, CancellationToken::new());
        let events: Vec<_> = (1..=TAIL as u64 + 10).map(event).collect();
        topic.publish(&events);
        assert!(matches!(topic.read(5, 10), TailRead::Log));
        let TailRead::Events(last) = topic.read(TAIL as u64 + 9, 10) else {
            panic!("events")
        };
        assert_eq!(last, [event(TAIL as u64 + 10)]);
    }
}
