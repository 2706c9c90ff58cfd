use std::{
    collections::VecDeque,
    fmt,
    pin::Pin,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll, ready},
};

use futures_core::Stream;
use futures_sink::Sink;
use futures_util::task::AtomicWaker;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::PollSemaphore;

use super::{Transport, error::TransportClosed};

/// A queue that grew past this many events is given back once it is empty again.
const KEPT_QUEUE: usize = 32;

/// What the halves share: the queue (each event with whether it holds a slot of the bound), and
/// who is still there.
///
/// A queue of its own rather than tokio's `mpsc`: that one allocates its slots 32 at a time
/// whatever is sent (10 KiB for a run of AG-UI events that is waiting on its model), where this
/// one holds what is in flight and gives a burst's room back.
struct Shared<E> {
    queue: Mutex<VecDeque<(E, bool)>>,
    /// The receiver closed the channel or is gone.
    closed: AtomicBool,
    senders: AtomicUsize,
    receiver: AtomicWaker,
    /// The events sent so far.
    sent: SentCount,
}

impl<E> Shared<E> {
    fn queue(&self) -> MutexGuard<'_, VecDeque<(E, bool)>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, event: E, holds_slot: bool) -> Result<(), TransportClosed> {
        if self.closed.load(Ordering::Acquire) {
            return Err(TransportClosed::new());
        }
        let mut queue = self.queue();
        queue.push_back((event, holds_slot));
        // Counted with the queue held: whoever reads the count finds the event queued.
        self.sent.0.fetch_add(1, Ordering::Release);
        drop(queue);
        self.receiver.wake();
        Ok(())
    }
}

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
    shared: Arc<Shared<E>>,
    slots: PollSemaphore,
    reserved: Option<OwnedSemaphorePermit>,
}

/// The receiving half of a [`Channel`]: a [`Stream`] of events.
///
/// Dropping it closes the channel; senders then see [`TransportClosed`].
pub struct ChannelReceiver<E> {
    shared: Arc<Shared<E>>,
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
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            closed: AtomicBool::new(false),
            senders: AtomicUsize::new(1),
            receiver: AtomicWaker::new(),
            sent: SentCount::default(),
        });
        let slots = Arc::new(Semaphore::new(capacity));
        (
            Self {
                shared: shared.clone(),
                slots: PollSemaphore::new(slots.clone()),
                reserved: None,
            },
            ChannelReceiver { shared, slots },
        )
    }

    /// Whether the receiver is gone.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// How many events this channel's senders (every clone) have sent so far.
    #[must_use]
    pub fn sent_count(&self) -> SentCount {
        self.shared.sent.clone()
    }
}

/// How many events a [`Channel`]'s senders have sent so far, read as it grows (what a
/// [`Checkpoint`](crate::context::Checkpoint) waits to see kept).
#[derive(Debug, Clone, Default)]
pub struct SentCount(Arc<AtomicU64>);

impl SentCount {
    /// The events sent so far.
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

impl<E> Clone for Channel<E> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: self.shared.clone(),
            slots: self.slots.clone(),
            reserved: None,
        }
    }
}

impl<E> Drop for Channel<E> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last sender: the receiver ends once it has read what is queued.
            self.shared.receiver.wake();
        }
    }
}

impl<E> fmt::Debug for Channel<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("closed", &self.is_closed())
            .field("ready", &self.reserved.is_some())
            .finish()
    }
}

impl<E> Sink<E> for Channel<E> {
    type Error = TransportClosed;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.is_closed() {
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
        self.shared.push(item, true)?;
        // The receiver gives the slot back when it takes the event.
        permit.forget();
        Ok(())
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
        self.shared.push(event, false)
    }
}

impl<E> ChannelReceiver<E> {
    /// How many events the channel's senders have sent so far.
    #[must_use]
    pub fn sent_count(&self) -> SentCount {
        self.shared.sent.clone()
    }

    /// The next event, or `None` once every sender is gone and the channel is empty.
    pub async fn recv(&mut self) -> Option<E> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// The next event if one is already there, without waiting.
    pub fn try_recv(&mut self) -> Option<E> {
        let mut queue = self.shared.queue();
        let (event, holds_slot) = queue.pop_front()?;
        if queue.is_empty() && queue.capacity() > KEPT_QUEUE {
            *queue = VecDeque::new();
        }
        drop(queue);
        if holds_slot {
            self.slots.add_permits(1);
        }
        Some(event)
    }

    /// Closes the channel: senders see [`TransportClosed`], events already sent can still be
    /// received.
    pub fn close(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.slots.close();
    }
}

impl<E> Stream for ChannelReceiver<E> {
    type Item = E;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<E>> {
        if let Some(event) = self.try_recv() {
            return Poll::Ready(Some(event));
        }
        self.shared.receiver.register(cx.waker());
        // Again after registering: a send or a last drop in between has woken us.
        if let Some(event) = self.try_recv() {
            return Poll::Ready(Some(event));
        }
        if self.shared.senders.load(Ordering::Acquire) == 0 {
            return Poll::Ready(self.try_recv());
        }
        Poll::Pending
    }
}

impl<E> Drop for ChannelReceiver<E> {
    fn drop(&mut self) {
        // Wake senders waiting for a slot so they see the channel closed; what is queued goes.
        self.close();
        let queued = std::mem::take(&mut *self.shared.queue());
        drop(queued);
    }
}

impl<E> fmt::Debug for ChannelReceiver<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelReceiver")
            .field("queued", &self.shared.queue().len())
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
    async fn the_receiver_ends_after_what_was_sent_once_every_sender_is_gone() {
        let (mut tx, mut rx) = Channel::bounded(4);
        let mut other = tx.clone();
        tx.send(1).await.unwrap();
        other.send(2).await.unwrap();
        drop(tx);
        let mut next = task::spawn(rx.next());
        assert_eq!(assert_ready!(next.poll()), Some(1));
        drop(next);
        assert_eq!(rx.next().await, Some(2));
        let mut end = task::spawn(rx.next());
        assert_pending!(end.poll());
        drop(other);
        assert!(end.is_woken());
        assert_eq!(assert_ready!(end.poll()), None);
    }

    #[tokio::test]
    async fn a_burst_gives_its_room_back_once_read() {
        let (mut tx, mut rx) = Channel::bounded(1000);
        for n in 0..500 {
            tx.send(n).await.unwrap();
        }
        assert!(rx.shared.queue().capacity() >= 500);
        for n in 0..500 {
            assert_eq!(rx.next().await, Some(n));
        }
        assert_eq!(rx.shared.queue().capacity(), 0);
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
