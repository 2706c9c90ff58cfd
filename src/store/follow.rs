//! Following a run's log: what was missed, then what comes, until the run's end.

use std::{
    collections::VecDeque,
    fmt,
    pin::Pin,
    task::{Context, Poll},
};

use futures_core::Stream;
use futures_util::{FutureExt, future::BoxFuture};

use super::{LoggedEvent, RunStatus, RunStore, StoreError};
use crate::id::RunId;

/// How many events one read of the log takes.
const PAGE: u32 = 256;

/// The events of a run after a sequence number, as they are committed; ends after the run's
/// last event once the run has ended (or at once, for an unknown run). Made by
/// [`RunStore::follow`].
pub struct Follow {
    buffered: VecDeque<LoggedEvent>,
    next: Option<BoxFuture<'static, Result<Page, StoreError>>>,
    store: RunStore,
    run_id: RunId,
    after: u64,
}

/// What one step of following found.
enum Page {
    Events(Vec<LoggedEvent>),
    End,
}

impl RunStore {
    /// The events of `run_id` after `after` (0: from the start), then the events appended
    /// later, until the run has ended and its log is read to the end.
    ///
    /// Wake-ups come from this process's appends, from other instances (PostgreSQL), and from
    /// a timer (the [`poll_interval`](RunStore::poll_interval)) in case one was missed.
    #[must_use]
    pub fn follow(&self, run_id: RunId, after: u64) -> Follow {
        Follow {
            buffered: VecDeque::new(),
            next: None,
            store: self.clone(),
            run_id,
            after,
        }
    }

    /// One step: the next page, waiting for it if the run still runs.
    async fn next_page(self, run_id: RunId, after: u64) -> Result<Page, StoreError> {
        let notify = self.wakeups().watch(&run_id);
        loop {
            // Registered before reading: an append after the read still wakes us.
            let woken = notify.notified();
            let mut woken = std::pin::pin!(woken);
            woken.as_mut().enable();
            let events = self.events_after(&run_id, after, PAGE).await?;
            if !events.is_empty() {
                return Ok(Page::Events(events));
            }
            match self.run(&run_id).await? {
                None => return Ok(Page::End),
                Some(run) if run.status != RunStatus::Running && run.last_seq <= after => {
                    return Ok(Page::End);
                }
                // Ended with events left (committed after our read), or still running.
                Some(run) if run.status != RunStatus::Running => continue,
                Some(_) => {}
            }
            let _ = tokio::time::timeout(self.poll(), woken).await;
        }
    }
}

impl Stream for Follow {
    type Item = Result<LoggedEvent, StoreError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(event) = this.buffered.pop_front() {
                this.after = event.seq;
                return Poll::Ready(Some(Ok(event)));
            }
            let next = this.next.get_or_insert_with(|| {
                this.store
                    .clone()
                    .next_page(this.run_id.clone(), this.after)
                    .boxed()
            });
            let page = futures_core::ready!(next.as_mut().poll(cx));
            this.next = None;
            match page {
                Ok(Page::Events(events)) => this.buffered.extend(events),
                Ok(Page::End) => return Poll::Ready(None),
                Err(error) => return Poll::Ready(Some(Err(error))),
            }
        }
    }
}

impl fmt::Debug for Follow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Follow")
            .field("run_id", &self.run_id)
            .field("after", &self.after)
            .finish_non_exhaustive()
    }
}
