use std::{
    collections::VecDeque,
    fmt,
    pin::Pin,
    task::{Context, Poll, ready},
};

use tokio_util::sync::CancellationToken;

use crate::transport::{OnDisconnect, Route, Transport};

/// A queue of wire events in front of a transport, with the run's disconnect policy.
///
/// The one-slot algorithm of `futures::stream::Forward`, generalised to a small queue: the owner
/// pushes the events one step produced, then drains them with [`poll_drain`](Outbox::poll_drain)
/// before doing more work. When the transport closes, the outbox applies [`OnDisconnect`] once and
/// from then on drops events.
pub struct Outbox<Sk, Ev> {
    sink: Option<Sk>,
    queue: VecDeque<Ev>,
    on_disconnect: OnDisconnect,
    cancel: CancellationToken,
}

impl<Sk, Ev> Outbox<Sk, Ev>
where
    Sk: Transport<Ev>,
{
    /// An outbox in front of `sink`; `None` makes every event vanish (no transport for this run).
    pub fn new(sink: Option<Sk>, on_disconnect: OnDisconnect, cancel: CancellationToken) -> Self {
        Self {
            sink,
            queue: VecDeque::new(),
            on_disconnect,
            cancel,
        }
    }

    /// Whether events still go somewhere: there is a transport, and it has not closed.
    #[must_use]
    pub fn is_connected(&self) -> bool {
        self.sink.is_some()
    }

    /// The queue, for an encoder to push into.
    pub fn queue(&mut self) -> &mut VecDeque<Ev> {
        &mut self.queue
    }

    /// Queues one event.
    pub fn push(&mut self, event: Ev) {
        if self.sink.is_some() {
            self.queue.push_back(event);
        }
    }

    /// Whether events still wait for the transport.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Gives the queue's room back once it is empty: for an outbox that sends a few events
    /// around a long wait (a run's start and end), not for one that sends an event per token.
    pub fn release(&mut self) {
        if self.queue.is_empty() && self.queue.capacity() > 0 {
            self.queue = VecDeque::new();
        }
    }

    /// Sends queued events while the transport accepts them.
    ///
    /// `Pending` when the transport is not ready (the waker is registered); `Ready` when the queue
    /// is empty, including after the transport closed (the policy was applied and the events
    /// dropped).
    pub fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(sink) = self.sink.as_mut() else {
            self.queue.clear();
            return Poll::Ready(());
        };
        while !self.queue.is_empty() {
            let sent = match ready!(Pin::new(&mut *sink).poll_ready(cx)) {
                Ok(()) => {
                    let event = self.queue.pop_front().expect("queue is not empty");
                    Pin::new(&mut *sink).start_send(event)
                }
                Err(closed) => Err(closed),
            };
            if sent.is_err() {
                self.disconnected();
                return Poll::Ready(());
            }
        }
        Poll::Ready(())
    }

    /// Drains, then flushes the transport.
    pub fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        ready!(self.poll_drain(cx));
        if let Some(sink) = self.sink.as_mut()
            && ready!(Pin::new(sink).poll_flush(cx)).is_err()
        {
            self.disconnected();
        }
        Poll::Ready(())
    }

    /// Delivers everything queued without waiting (see
    /// [`Transport::send_now`]): the path for `Drop`.
    pub fn send_now(&mut self) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        for event in self.queue.drain(..) {
            if sink.send_now(event).is_err() {
                break;
            }
        }
    }

    fn disconnected(&mut self) {
        tracing::debug!(policy = ?self.on_disconnect, "transport closed");
        self.sink = None;
        self.queue.clear();
        if self.on_disconnect == OnDisconnect::Cancel {
            self.cancel.cancel();
        }
    }
}

impl<R, L, Ev> Outbox<Route<R, L>, Ev>
where
    R: Transport<Ev> + Clone,
    L: Transport<Ev> + Clone,
{
    /// The outbox of one step of `run`: its own sink `own` (one of its
    /// [`Sinks`](crate::context::Sinks)) if it has one, else `fallback` (a layer's default); the run's
    /// own [`OnDisconnect`] if it brought one, else `on_disconnect`.
    pub fn for_run(
        run: &crate::context::RunContext,
        own: Option<&R>,
        fallback: Option<&L>,
        on_disconnect: OnDisconnect,
    ) -> Self {
        Self::new(
            Route::of(own, fallback),
            run.sinks.on_disconnect.unwrap_or(on_disconnect),
            run.cancel.clone(),
        )
    }
}

impl<Sk, Ev> fmt::Debug for Outbox<Sk, Ev> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox")
            .field("connected", &self.sink.is_some())
            .field("queued", &self.queue.len())
            .field("on_disconnect", &self.on_disconnect)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll};

    use futures_util::task::noop_waker_ref;

    use super::*;
    use crate::transport::Recording;

    #[test]
    fn release_gives_the_room_back_only_once_everything_is_sent() {
        let ui = Recording::new();
        let mut outbox = Outbox::new(
            Some(ui.clone()),
            OnDisconnect::Cancel,
            CancellationToken::new(),
        );
        outbox.push(1);
        outbox.push(2);
        outbox.release();
        assert_eq!(outbox.queue.len(), 2, "queued events are kept");
        let mut cx = Context::from_waker(noop_waker_ref());
        assert_eq!(outbox.poll_drain(&mut cx), Poll::Ready(()));
        assert!(outbox.queue.capacity() > 0);
        outbox.release();
        assert_eq!(outbox.queue.capacity(), 0);
        assert_eq!(ui.events(), [1, 2]);
    }
}
