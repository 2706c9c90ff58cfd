//! What an agent waits on at the edges of its steps: its run's events so far kept by the run's
//! log.

use std::sync::Arc;

use tokio::sync::{Notify, watch};

use crate::transport::SentCount;

/// The point an agent waits for before it acts on what a step decided (runs the step's calls,
/// asks the model for the next step): every event its run has sent so far kept by the run's log.
/// A run continued elsewhere after a crash then starts from the step it was in, never from one
/// before it: no finished step is asked of the model again, and no call runs that the log does
/// not know of.
///
/// The run engine ([`Runs`](crate::runs::Runs)) puts one in each run's
/// [`RunContext::extensions`](super::RunContext::extensions); a run without one (no engine) does
/// not wait. An agent of its own waits with [`reached`](Self::reached).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use agent_tower::{context::Checkpoint, transport::Channel};
/// use futures_util::SinkExt;
///
/// let (mut events, _rx) = Channel::<&str>::bounded(8);
/// let (kept, keeping) = tokio::sync::watch::channel(0);
/// let checkpoint = Checkpoint::new(events.sent_count(), keeping);
/// events.send("step finished").await.unwrap();
/// // The log keeps the event (the engine says so once its write commits)…
/// kept.send_replace(1);
/// // …and the agent goes on.
/// checkpoint.reached().await;
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Checkpoint {
    sent: SentCount,
    kept: watch::Receiver<u64>,
    /// Told when the agent waits, so that what it waits for is written now rather than when a
    /// window of writes ends.
    waiting: Option<Arc<Notify>>,
}

impl Checkpoint {
    /// A checkpoint of the run whose events `sent` counts, told by `kept` how many of them its log
    /// keeps.
    #[must_use]
    pub fn new(sent: SentCount, kept: watch::Receiver<u64>) -> Self {
        Self {
            sent,
            kept,
            waiting: None,
        }
    }

    /// The same checkpoint, telling `waiting` each time the agent waits at it.
    #[must_use]
    #[cfg(feature = "runs")]
    pub(crate) fn telling(mut self, waiting: Arc<Notify>) -> Self {
        self.waiting = Some(waiting);
        self
    }

    /// Waits until the run's log keeps every event the run has sent so far: at once when it
    /// does, and no longer once nobody keeps them (the run is being stopped).
    pub async fn reached(&self) {
        let sent = self.sent.get();
        let mut kept = self.kept.clone();
        if *kept.borrow() >= sent {
            return;
        }
        if let Some(waiting) = &self.waiting {
            waiting.notify_one();
        }
        // An error: the engine stopped keeping the run's events, and drops the run.
        let _ = kept.wait_for(|kept| *kept >= sent).await;
    }
}
