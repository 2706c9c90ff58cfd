//! Work a run finishes before it ends, driven by the agent.

use std::{
    fmt,
    future::Future,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use futures_util::{StreamExt, future::BoxFuture, stream::FuturesUnordered, task::AtomicWaker};

/// Work that belongs to a run but not to one step (post-processing a message, say): layers put it
/// here; the agent drives it alongside the loop and waits for it, up to a timeout, before the run
/// ends. The run's own is [`RunContext::background`](super::RunContext::background).
#[derive(Clone, Default)]
pub struct Background(Arc<Inner>);

#[derive(Default)]
struct Inner {
    incoming: Mutex<Vec<BoxFuture<'static, ()>>>,
    waker: AtomicWaker,
}

impl Background {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds work; it starts at the driver's next poll.
    pub fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        self.0
            .incoming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::pin(work));
        self.0.waker.wake();
    }
}

impl fmt::Debug for Background {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Background").finish_non_exhaustive()
    }
}

/// The driver side: owns the running work (so work may spawn more without a deadlock).
#[derive(Default)]
pub(crate) struct Driver {
    running: FuturesUnordered<BoxFuture<'static, ()>>,
}

impl Driver {
    /// Whether no work runs or waits to start.
    fn is_idle(&self, background: &Background) -> bool {
        self.running.is_empty()
            && background
                .0
                .incoming
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
    }

    /// Polls every piece of work; `Ready` when none is left.
    pub(crate) fn poll(&mut self, background: &Background, cx: &mut Context<'_>) -> Poll<()> {
        background.0.waker.register(cx.waker());
        loop {
            let incoming = std::mem::take(
                &mut *background
                    .0
                    .incoming
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            self.running.extend(incoming);
            match self.running.poll_next_unpin(cx) {
                Poll::Ready(Some(())) => continue,
                Poll::Ready(None) => {
                    let more = !background
                        .0
                        .incoming
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .is_empty();
                    if more {
                        continue;
                    }
                    return Poll::Ready(());
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("running", &self.running.len())
            .finish()
    }
}

/// Drives `run` and `background` together; once `run` is done, drives what is left of the
/// background for at most `grace`, then drops it.
pub(crate) async fn with_background<F: Future>(
    run: F,
    background: &Background,
    grace: std::time::Duration,
) -> F::Output {
    let mut driver = Driver::default();
    let mut run = std::pin::pin!(run);
    let output = std::future::poll_fn(|cx| {
        let _ = driver.poll(background, cx);
        run.as_mut().poll(cx)
    })
    .await;
    if !driver.is_idle(background) {
        let rest = std::future::poll_fn(|cx| driver.poll(background, cx));
        if tokio::time::timeout(grace, rest).await.is_err() {
            tracing::warn!(?grace, "background work of the run timed out");
        }
    }
    output
}

#[cfg(test)]
mod tests {
    use std::{
        sync::atomic::{AtomicUsize, Ordering},
        time::Duration,
    };

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_run_waits_for_its_work_which_may_spawn_more() {
        let background = Background::new();
        let done = Arc::new(AtomicUsize::new(0));
        let (spawner, counter) = (background.clone(), done.clone());
        let run = async move {
            let inner = (spawner.clone(), counter.clone());
            spawner.spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                inner.1.fetch_add(1, Ordering::SeqCst);
                let counter = inner.1.clone();
                inner.0.spawn(async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                });
            });
            "run output"
        };
        let output = with_background(run, &background, Duration::from_secs(30)).await;
        assert_eq!(output, "run output");
        assert_eq!(
            done.load(Ordering::SeqCst),
            2,
            "both pieces of work ran before the end"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn work_past_the_grace_period_is_dropped() {
        let background = Background::new();
        let started = tokio::time::Instant::now();
        let spawner = background.clone();
        let run = async move {
            spawner.spawn(std::future::pending());
        };
        with_background(run, &background, Duration::from_secs(5)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }
}
