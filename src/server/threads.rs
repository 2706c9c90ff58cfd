//! One active run per thread.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use tokio::sync::OwnedMutexGuard;

use crate::id::ThreadId;

/// What to do with a run on a thread that already has an active run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum BusyThread {
    /// Answer `409 Conflict`.
    #[default]
    Reject,
    /// Wait until the active run ends, then start.
    Queue,
}

type Locks = Arc<Mutex<HashMap<ThreadId, Arc<tokio::sync::Mutex<()>>>>>;

/// The threads with an active run.
#[derive(Debug, Clone, Default)]
pub(crate) struct ActiveThreads {
    locks: Locks,
}

/// Held for as long as a run is active; releasing it lets the thread's next run start.
#[derive(Debug)]
pub(crate) struct ThreadGuard {
    lock: Option<OwnedMutexGuard<()>>,
    thread_id: ThreadId,
    locks: Locks,
}

impl ActiveThreads {
    fn lock_of(&self, thread_id: &ThreadId) -> Arc<tokio::sync::Mutex<()>> {
        self.locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(thread_id.clone())
            .or_default()
            .clone()
    }

    fn guard(&self, thread_id: ThreadId, lock: OwnedMutexGuard<()>) -> ThreadGuard {
        ThreadGuard {
            lock: Some(lock),
            thread_id,
            locks: self.locks.clone(),
        }
    }

    /// The thread's guard, or `None` if a run is active on it.
    pub(crate) fn try_start(&self, thread_id: &ThreadId) -> Option<ThreadGuard> {
        let lock = self.lock_of(thread_id).try_lock_owned().ok();
        match lock {
            Some(lock) => Some(self.guard(thread_id.clone(), lock)),
            None => {
                self.forget_if_unused(thread_id);
                None
            }
        }
    }

    /// The thread's guard, once the active run (if any) has ended.
    pub(crate) async fn start(&self, thread_id: &ThreadId) -> ThreadGuard {
        let lock = self.lock_of(thread_id).lock_owned().await;
        self.guard(thread_id.clone(), lock)
    }

    fn forget_if_unused(&self, thread_id: &ThreadId) {
        forget_if_unused(&self.locks, thread_id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.locks.lock().unwrap().len()
    }
}

fn forget_if_unused(locks: &Locks, thread_id: &ThreadId) {
    let mut locks = locks.lock().unwrap_or_else(PoisonError::into_inner);
    // Every holder and waiter owns a clone; only the map's own reference left means unused.
    if locks
        .get(thread_id)
        .is_some_and(|lock| Arc::strong_count(lock) == 1)
    {
        locks.remove(thread_id);
    }
}

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        drop(self.lock.take());
        forget_if_unused(&self.locks, &self.thread_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_run_per_thread_and_no_leak() {
        let threads = ActiveThreads::default();
        let a = ThreadId::from("a");
        let guard = threads.try_start(&a).unwrap();
        assert!(threads.try_start(&a).is_none());
        assert!(threads.try_start(&ThreadId::from("b")).is_some());
        let mut queued = tokio_test::task::spawn(threads.start(&a));
        tokio_test::assert_pending!(queued.poll());
        drop(guard);
        let next = tokio_test::assert_ready!(queued.poll());
        drop(next);
        drop(queued);
        assert_eq!(threads.len(), 0, "finished threads are forgotten");
    }
}
