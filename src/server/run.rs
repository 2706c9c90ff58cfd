//! A run driven by the response body that streams its events.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use futures_core::Stream;
use tokio_util::sync::CancellationToken;

use super::threads::ThreadGuard;
use crate::{
    BoxError,
    agui::Event,
    id::{RunId, ThreadId},
    run::{RunOutcome, StopReason},
    transport::{ChannelReceiver, OnDisconnect},
};

/// How a run served over HTTP or WebSocket ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunEnd {
    /// The agent returned.
    Finished(StopReason),
    /// The agent failed.
    Failed(String),
    /// The client went away and the run was cancelled.
    Disconnected,
    /// The client went away and the run went on without it, to this end.
    Detached(Box<RunEnd>),
}

impl fmt::Display for RunEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Finished(stop) => write!(f, "finished ({stop:?})"),
            Self::Failed(error) => write!(f, "failed ({error})"),
            Self::Disconnected => f.pad("cancelled (client disconnected)"),
            Self::Detached(end) => write!(f, "{end}, after the client disconnected"),
        }
    }
}

/// What the server knows of a run when it ends; given to the `on_run_end` callback.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// The thread.
    pub thread_id: ThreadId,
    /// The run.
    pub run_id: RunId,
    /// Events delivered to the client.
    pub events: u64,
    /// From the request to the end.
    pub duration: Duration,
    /// How it ended.
    pub end: RunEnd,
}

pub(crate) type OnRunEnd = Arc<dyn Fn(&RunSummary) + Send + Sync>;

pub(crate) fn log_run_end() -> OnRunEnd {
    Arc::new(|run: &RunSummary| {
        tracing::info!(
            thread_id = %run.thread_id,
            run_id = %run.run_id,
            events = run.events,
            duration_ms = run.duration.as_millis() as u64,
            outcome = %run.end,
            "run ended"
        );
    })
}

pub(crate) type RunFuture = Pin<Box<dyn Future<Output = Result<RunOutcome, BoxError>> + Send>>;

/// Bookkeeping shared by the HTTP body and the WebSocket loop.
pub(crate) struct RunTracker {
    thread_id: ThreadId,
    run_id: RunId,
    started: Instant,
    events: u64,
    on_end: Option<OnRunEnd>,
    _thread: Option<ThreadGuard>,
}

impl RunTracker {
    pub(crate) fn new(
        thread_id: ThreadId,
        run_id: RunId,
        on_end: OnRunEnd,
        thread: Option<ThreadGuard>,
    ) -> Self {
        Self {
            thread_id,
            run_id,
            started: Instant::now(),
            events: 0,
            on_end: Some(on_end),
            _thread: thread,
        }
    }

    pub(crate) fn ended(&mut self, end: RunEnd) {
        if let Some(on_end) = self.on_end.take() {
            on_end(&RunSummary {
                thread_id: self.thread_id.clone(),
                run_id: self.run_id.clone(),
                events: self.events,
                duration: self.started.elapsed(),
                end,
            });
        }
    }
}

fn end_of(result: &Result<RunOutcome, BoxError>) -> RunEnd {
    match result {
        Ok(outcome) => RunEnd::Finished(outcome.stop),
        Err(error) => RunEnd::Failed(error.to_string()),
    }
}

/// The events of one run, driving the run as they are read.
///
/// The run makes progress only while the stream is polled (no task per run): reading an event
/// frees a slot of the run's channel, which lets the run produce the next one. When the stream is
/// dropped before the run ended (the client went away), [`OnDisconnect::Cancel`] cancels and
/// drops the run right away; [`OnDisconnect::Continue`] moves it to a task of its own.
pub(crate) struct RunEvents {
    run: Option<RunFuture>,
    end: Option<RunEnd>,
    events: ChannelReceiver<Event>,
    cancel: CancellationToken,
    on_disconnect: OnDisconnect,
    tracker: Option<RunTracker>,
}

impl RunEvents {
    pub(crate) fn new(
        run: RunFuture,
        events: ChannelReceiver<Event>,
        cancel: CancellationToken,
        on_disconnect: OnDisconnect,
        tracker: RunTracker,
    ) -> Self {
        Self {
            run: Some(run),
            end: None,
            events,
            cancel,
            on_disconnect,
            tracker: Some(tracker),
        }
    }

    /// The run's cancellation token (a client's cancel message fires it).
    pub(crate) fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }
}

impl Stream for RunEvents {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let this = &mut *self;
        if let Some(run) = this.run.as_mut() {
            if let Poll::Ready(result) = run.as_mut().poll(cx) {
                this.end = Some(end_of(&result));
                // Dropping the run drops the last senders: the channel ends after its events.
                this.run = None;
            }
        }
        // Once the run has resolved, everything it sent is in the channel: drain it and end,
        // whoever else may still hold a sender.
        let next = if this.run.is_none() {
            Poll::Ready(this.events.try_recv())
        } else {
            Pin::new(&mut this.events).poll_next(cx)
        };
        match next {
            Poll::Ready(Some(event)) => {
                if let Some(tracker) = this.tracker.as_mut() {
                    tracker.events += 1;
                }
                Poll::Ready(Some(event))
            }
            Poll::Ready(None) => {
                if let Some(mut tracker) = this.tracker.take() {
                    let end = this.end.take().unwrap_or(RunEnd::Disconnected);
                    tracker.ended(end);
                }
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for RunEvents {
    fn drop(&mut self) {
        let Some(mut tracker) = self.tracker.take() else {
            return;
        };
        match (self.run.take(), self.end.take()) {
            (None, end) => tracker.ended(end.unwrap_or(RunEnd::Disconnected)),
            (Some(run), _) if self.on_disconnect == OnDisconnect::Continue => {
                // The channel closes with this stream: the run's layers see it closed and go on.
                tokio::spawn(async move {
                    let end = end_of(&run.await);
                    tracker.ended(RunEnd::Detached(Box::new(end)));
                });
            }
            (Some(run), _) => {
                self.cancel.cancel();
                drop(run);
                tracker.ended(RunEnd::Disconnected);
            }
        }
    }
}

impl fmt::Debug for RunEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunEvents")
            .field("running", &self.run.is_some())
            .field("on_disconnect", &self.on_disconnect)
            .finish_non_exhaustive()
    }
}
