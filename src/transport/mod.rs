//! Where a run's events go: [`Transport`], a [`Sink`] of wire events, and its implementations.
//!
//! - [`Channel`]: a bounded channel; the SSE body or the ACP notifier reads the other end.
//! - [`Recording`]: keeps every event in memory (tests, replay).
//! - [`Null`]: drops everything.
//!
//! Emission is fail-safe: a closed transport never fails the agent. What happens then is a policy,
//! [`OnDisconnect`].
//!
//! # Back-pressure and the drop path
//!
//! Layers send through the [`Sink`] half, waiting for `poll_ready`, so a slow client slows the
//! model down instead of making the server buffer without bound. The one exception is
//! [`Transport::send_now`]: when a stream is dropped mid-way (the client went away, a timeout
//! fired) its closing events (`*_END`) can't wait for capacity, so they bypass the bound. They are
//! few (one per open message or tool call), which keeps the channel bounded in practice.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use agent_tower::transport::Channel;
//! use futures_util::{SinkExt, StreamExt};
//!
//! let (mut tx, mut rx) = Channel::bounded(1);
//! tx.send("hello").await.unwrap();
//! assert_eq!(rx.next().await, Some("hello"));
//! # }
//! ```

mod channel;
mod null;
mod recording;
mod route;

use futures_sink::Sink;

pub use self::{
    channel::{Channel, ChannelReceiver, SentCount},
    null::Null,
    recording::Recording,
    route::Route,
};

/// A sink of wire events for one or many runs.
///
/// Implemented by [`Channel`], [`Recording`] and [`Null`]; wrap any other [`Sink`] in
/// [`SinkTransport`].
pub trait Transport<E>: Sink<E, Error = error::TransportClosed> + Unpin {
    /// Delivers `event` without waiting, even past the transport's bound.
    ///
    /// Used only where waiting is impossible: in `Drop`, to close what a dropped stream left open.
    fn send_now(&mut self, event: E) -> Result<(), error::TransportClosed>;
}

/// What a layer does when the run's transport is closed (the client went away).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum OnDisconnect {
    /// Cancel the run's [`CancellationToken`](tokio_util::sync::CancellationToken): nobody is
    /// listening, stop spending tokens.
    #[default]
    Cancel,
    /// Keep the agent going without the UI (for example when the run's result is stored and the
    /// client can come back for it).
    Continue,
}

/// Adapts any [`Sink`] into a [`Transport`]; [`Transport::send_now`] succeeds only if the sink is
/// ready at once.
#[derive(Debug, Clone)]
pub struct SinkTransport<S>(pub S);

impl<S, E> Sink<E> for SinkTransport<S>
where
    S: Sink<E> + Unpin,
{
    type Error = error::TransportClosed;

    fn poll_ready(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::pin::Pin::new(&mut self.0)
            .poll_ready(cx)
            .map_err(|_| error::TransportClosed::new())
    }

    fn start_send(mut self: std::pin::Pin<&mut Self>, item: E) -> Result<(), Self::Error> {
        std::pin::Pin::new(&mut self.0)
            .start_send(item)
            .map_err(|_| error::TransportClosed::new())
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::pin::Pin::new(&mut self.0)
            .poll_flush(cx)
            .map_err(|_| error::TransportClosed::new())
    }

    fn poll_close(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::pin::Pin::new(&mut self.0)
            .poll_close(cx)
            .map_err(|_| error::TransportClosed::new())
    }
}

impl<S, E> Transport<E> for SinkTransport<S>
where
    S: Sink<E> + Unpin,
{
    fn send_now(&mut self, event: E) -> Result<(), error::TransportClosed> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut sink = std::pin::Pin::new(&mut self.0);
        match sink.as_mut().poll_ready(&mut cx) {
            std::task::Poll::Ready(Ok(())) => sink
                .start_send(event)
                .map_err(|_| error::TransportClosed::new()),
            _ => Err(error::TransportClosed::new()),
        }
    }
}

/// Transport errors.
pub mod error {
    use std::fmt;

    /// The transport's other end is gone.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TransportClosed(());

    impl TransportClosed {
        pub(crate) fn new() -> Self {
            Self(())
        }
    }

    impl fmt::Display for TransportClosed {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.pad("transport closed")
        }
    }

    impl std::error::Error for TransportClosed {}
}
