use std::{
    fmt,
    pin::Pin,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
};

use futures_sink::Sink;

use super::{Transport, error::TransportClosed};

/// A transport that keeps every event; clones share the same record.
///
/// [`disconnect`](Recording::disconnect) makes it behave like a client that went away, to test
/// [`OnDisconnect`](super::OnDisconnect).
///
/// ```
/// use agent_tower::transport::{Recording, Transport};
///
/// let mut rec = Recording::new();
/// rec.send_now(1).unwrap();
/// rec.disconnect();
/// assert!(rec.send_now(2).is_err());
/// assert_eq!(rec.events(), vec![1]);
/// ```
pub struct Recording<E> {
    shared: Arc<Shared<E>>,
}

struct Shared<E> {
    events: Mutex<Vec<E>>,
    closed: AtomicBool,
}

impl<E> Recording<E> {
    /// An empty record.
    #[must_use]
    pub fn new() -> Self {
        Self {
            shared: Arc::new(Shared {
                events: Mutex::new(Vec::new()),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// Refuses every later event, as a transport whose client left.
    pub fn disconnect(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
    }

    /// Takes the events recorded so far.
    #[must_use]
    pub fn take(&self) -> Vec<E> {
        std::mem::take(&mut *self.lock())
    }

    /// How many events were recorded so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing was recorded yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<E>> {
        self.shared
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, event: E) -> Result<(), TransportClosed> {
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(TransportClosed::new());
        }
        self.lock().push(event);
        Ok(())
    }
}

impl<E: Clone> Recording<E> {
    /// A copy of the events recorded so far.
    #[must_use]
    pub fn events(&self) -> Vec<E> {
        self.lock().clone()
    }
}

impl<E> Default for Recording<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> Clone for Recording<E> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<E> fmt::Debug for Recording<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recording")
            .field("events", &self.len())
            .field("closed", &self.shared.closed.load(Ordering::SeqCst))
            .finish()
    }
}

impl<E> Sink<E> for Recording<E> {
    type Error = TransportClosed;

    fn poll_ready(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.shared.closed.load(Ordering::SeqCst) {
            Poll::Ready(Err(TransportClosed::new()))
        } else {
            Poll::Ready(Ok(()))
        }
    }

    fn start_send(self: Pin<&mut Self>, item: E) -> Result<(), Self::Error> {
        self.push(item)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
}

impl<E> Transport<E> for Recording<E> {
    fn send_now(&mut self, event: E) -> Result<(), TransportClosed> {
        self.push(event)
    }
}
