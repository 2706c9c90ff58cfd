use std::{
    fmt,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
};

use agent_client_protocol::{
    Client,
    v1::{
        ConnectionTo,
        schema::{SessionId, SessionNotification, SessionUpdate},
    },
};
use futures_sink::Sink;
use tokio_util::sync::PollSemaphore;

use super::lines::Outbox;

use crate::transport::{Transport, error::TransportClosed};

/// The [`Transport`] of one ACP prompt turn: each [`SessionUpdate`] becomes a `session/update`
/// notification for the session, in order.
///
/// The turn closes it right before it answers `session/prompt`, so that nothing of the turn
/// reaches the client after the answer (the ACP cancellation contract); a closed notifier
/// refuses events like a client that went away.
///
/// The SDK queues outgoing messages without bound. Served with
/// [`AcpAgent::serve_io`](super::AcpAgent::serve_io) (as `agent-tower acp` is), the notifier is
/// ready only while fewer than [`MAX_QUEUED_UPDATES`](super::MAX_QUEUED_UPDATES) updates wait to
/// be written: a client that stops reading holds the turn back instead of filling memory.
/// Otherwise it is always ready.
pub struct Notifier {
    connection: ConnectionTo<Client>,
    session: SessionId,
    open: Arc<AtomicBool>,
    outbox: Option<(Outbox, PollSemaphore)>,
    /// Room taken by `poll_ready` for the next `start_send`.
    reserved: bool,
}

impl Clone for Notifier {
    fn clone(&self) -> Self {
        Self {
            connection: self.connection.clone(),
            session: self.session.clone(),
            open: Arc::clone(&self.open),
            outbox: self
                .outbox
                .as_ref()
                .map(|(outbox, _)| (outbox.clone(), outbox.waiter())),
            reserved: false,
        }
    }
}

impl Notifier {
    /// A notifier for `session` on `connection`.
    #[must_use]
    pub fn new(connection: ConnectionTo<Client>, session: SessionId) -> Self {
        Self {
            connection,
            session,
            open: Arc::new(AtomicBool::new(true)),
            outbox: None,
            reserved: false,
        }
    }

    /// Waits for room in `outbox` before each update.
    pub(crate) fn outbox(mut self, outbox: Option<&Outbox>) -> Self {
        self.outbox = outbox.map(|outbox| (outbox.clone(), outbox.waiter()));
        self
    }

    /// The session it notifies.
    #[must_use]
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// Sends one update now.
    ///
    /// # Errors
    ///
    /// When the notifier is closed or the connection is gone.
    pub fn notify(&self, update: SessionUpdate) -> Result<(), TransportClosed> {
        if !self.is_open() {
            return Err(TransportClosed::new());
        }
        if let Some((outbox, _)) = &self.outbox {
            outbox.reserve_now();
        }
        self.send(update)
    }

    fn send(&self, update: SessionUpdate) -> Result<(), TransportClosed> {
        self.connection
            .send_notification(SessionNotification::new(self.session.clone(), update))
            .map_err(|_| TransportClosed::new())
    }

    /// Refuses every later update (this clone and every other).
    pub fn close(&self) {
        self.open.store(false, Ordering::Release);
    }

    /// Whether updates still go out.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier")
            .field("session", &self.session)
            .field("open", &self.is_open())
            .finish_non_exhaustive()
    }
}

impl Sink<SessionUpdate> for Notifier {
    type Error = TransportClosed;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let this = self.get_mut();
        if !this.is_open() {
            return Poll::Ready(Err(TransportClosed::new()));
        }
        if let (Some((outbox, waiter)), false) = (&mut this.outbox, this.reserved) {
            std::task::ready!(outbox.poll_reserve(waiter, cx));
            this.reserved = true;
        }
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, update: SessionUpdate) -> Result<(), Self::Error> {
        let this = self.get_mut();
        if std::mem::take(&mut this.reserved) {
            if !this.is_open() {
                return Err(TransportClosed::new());
            }
            this.send(update)
        } else {
            this.notify(update)
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.close();
        Poll::Ready(Ok(()))
    }
}

impl Transport<SessionUpdate> for Notifier {
    fn send_now(&mut self, update: SessionUpdate) -> Result<(), TransportClosed> {
        self.notify(update)
    }
}
