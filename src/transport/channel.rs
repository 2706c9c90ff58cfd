use std::{
    fmt,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use futures_core::Stream;
use futures_sink::Sink;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::PollSemaphore;

use super::{Transport, error::TransportClosed};

type Slot<E> = (E, Option<OwnedSemaphorePermit>);

/// The sending half of a bounded event channel; clone it for each layer of a run.
///
/// The bound counts events sent through the [`Sink`] half: `poll_ready` waits until the receiver
/// has taken an event when `capacity` are in flight. [`Transport::send_now`] bypasses the bound
/// (see the [module docs](super)).
///
/// # Clone
///
/// A clone starts *unready*: readiness (a reserved slot) belongs to the instance that polled for it,
/// as with tower's `ConcurrencyLimit`.
pub struct Channel<E> {
    tx: mpsc::UnboundedSender<Slot<E>>,
    slots: PollSemaphore,
    reserved: Option<OwnedSemaphorePermit>,
}

/// The receiving half of a [`Channel`]: a [`Stream`] of events.
///
/// Dropping it closes the channel; senders then see [`TransportClosed`].
pub struct ChannelReceiver<E> {
    rx: mpsc::UnboundedReceiver<Slot<E>>,
    slots: Arc<Semaphore>,
}

impl<E> Channel<E> {
    /// A channel that holds at most `capacity` events sent through the [`Sink`] half.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0.
    #[must_use]
    pub fn bounded(capacity: usize) -> (Self, ChannelReceiver<E>) {
        assert!(
            capacity > 0,
            "a channel transport needs a capacity of at least 1"
        );
        let (tx, rx) = mpsc::unbounded_channel();
        let slots = Arc::new(Semaphore::new(capacity));
        (
            Self {
                tx,
                slots: PollSemaphore::new(slots.clone()),
                reserved: None,
            },
            ChannelReceiver { rx, slots },
        )
    }

    /// Whether the receiver is gone.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl<E> Clone for Channel<E> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            slots: self.slots.clone(),
            reserved: None,
        }
    }
}

impl<E> fmt::Debug for Channel<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("closed", &self.tx.is_closed())
            .field("ready", &self.reserved.is_some())
            .finish()
    }
}

impl<E> Sink<E> for Channel<E> {
    type Error = TransportClosed;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.tx.is_closed() {
            return Poll::Ready(Err(TransportClosed::new()));
        }
        if self.reserved.is_none() {
            match ready!(self.slots.poll_acquire(cx)) {
                Some(permit) => self.reserved = Some(permit),
                None => return Poll::Ready(Err(TransportClosed::new())),
            }
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(mut self: Pin<&mut Self>, item: E) -> Result<(), Self::Error> {
        let permit = self
            .reserved
            .take()
            .expect("Channel::start_send called without poll_ready first");
        self.tx
            .send((item, Some(permit)))
            .map_err(|_| TransportClosed::new())
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Result<(), Self::Error>> {
        self.reserved = None;
        Poll::Ready(Ok(()))
    }
}

impl<E> Transport<E> for Channel<E> {
    fn send_now(&mut self, event: E) -> Result<(), TransportClosed> {
        self.tx
            .send((event, None))
            .map_err(|_| TransportClosed::new())
    }
}

impl<E> ChannelReceiver<E> {
    /// The next event, or `None` once every sender is gone and the channel is empty.
    pub async fn recv(&mut self) -> Option<E> {
        self.rx.recv().await.map(|(event, _slot)| event)
    }

    /// The next event if one is already there, without waiting.
    pub fn try_recv(&mut self) -> Option<E> {
        self.rx.try_recv().ok().map(|(event, _slot)| event)
    }

    /// Closes the channel: senders see [`TransportClosed`], events already sent can still be
    /// received.
    pub fn close(&mut self) {
        self.slots.close();
        self.rx.close();
    }
}

impl<E> Stream for ChannelReceiver<E> {
    type Item = E;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<E>> {
        self.rx
            .poll_recv(cx)
            .map(|slot| slot.map(|(event, _slot)| event))
    }
}

impl<E> Drop for ChannelReceiver<E> {
    fn drop(&mut self) {
        // Wake senders waiting for a slot so they see the channel closed.
        self.slots.close();
    }
}

impl<E> fmt::Debug for ChannelReceiver<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelReceiver")
            .field("queued", &self.rx.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::{SinkExt, StreamExt};
    use tokio_test::{assert_pending, assert_ready, task};

    #[tokio::test]
    async fn a_full_channel_back_pressures_the_sender() {
        let (mut tx, mut rx) = Channel::bounded(1);
        tx.send(1).await.unwrap();
        let mut second = task::spawn(tx.send(2));
        assert_pending!(second.poll());
        assert_eq!(rx.next().await, Some(1));
        assert!(second.is_woken());
        assert_ready!(second.poll()).unwrap();
        assert_eq!(rx.next().await, Some(2));
    }

    #[tokio::test]
    async fn send_now_bypasses_the_bound() {
        let (mut tx, mut rx) = Channel::bounded(1);
        tx.send(1).await.unwrap();
        tx.send_now(2).unwrap();
        assert_eq!(rx.next().await, Some(1));
        assert_eq!(rx.next().await, Some(2));
    }

    #[tokio::test]
    async fn dropping_the_receiver_wakes_and_fails_a_waiting_sender() {
        let (mut tx, rx) = Channel::bounded(1);
        tx.send(1).await.unwrap();
        let mut waiting = task::spawn(tx.send(2));
        assert_pending!(waiting.poll());
        drop(rx);
        assert!(waiting.is_woken());
        assert_eq!(assert_ready!(waiting.poll()), Err(TransportClosed::new()));
    }
}
