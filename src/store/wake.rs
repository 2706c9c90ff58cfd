//! Wake-ups for followers: hints that a run's log grew. Never the truth: a follower reads the
//! log after every wake-up, and on a timer in case one was missed.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError, Weak},
};

use tokio::sync::Notify;

use super::{StoreError, sql::CHANNEL};
use crate::id::RunId;

type Waiters = Arc<Mutex<HashMap<RunId, Weak<Notify>>>>;

/// The runs someone follows in this process, each with a [`Notify`].
#[derive(Debug, Clone, Default)]
pub(super) struct Wakeups(Waiters);

impl Wakeups {
    /// The notifier of `run_id`'s followers (shared by every follower of the run while one
    /// lives).
    pub(super) fn watch(&self, run_id: &RunId) -> Arc<Notify> {
        let mut waiters = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(notify) = waiters.get(run_id).and_then(Weak::upgrade) {
            return notify;
        }
        waiters.retain(|_, weak| weak.strong_count() > 0);
        let notify = Arc::new(Notify::new());
        waiters.insert(run_id.clone(), Arc::downgrade(&notify));
        notify
    }

    /// Tells `run_id`'s followers, if any, that its log grew.
    pub(super) fn wake(&self, run_id: &RunId) {
        let notify = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .and_then(Weak::upgrade);
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }

    /// Forwards PostgreSQL notifications (other instances' appends) to this process's
    /// followers, for as long as the process runs. The listener reconnects by itself; what it
    /// misses meanwhile the followers' timers catch.
    pub(super) async fn listen(&self, url: &str) -> Result<(), StoreError> {
        let mut listener = sqlx::postgres::PgListener::connect(url).await?;
        listener.listen(CHANNEL).await?;
        // Ends at the first notification after the store is gone.
        let waiters = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            loop {
                match listener.recv().await {
                    Ok(notification) => {
                        let Some(waiters) = waiters.upgrade() else {
                            return;
                        };
                        if let Some((_, run)) = notification.payload().split_once(':') {
                            Wakeups(waiters).wake(&RunId::from(run));
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "store notifications interrupted");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(())
    }
}
