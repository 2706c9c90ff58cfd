//! Serving the router on a listener, with every connection bounded in time and number.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum::Router;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::Semaphore,
    time::{Instant, Sleep},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// How connections are served: how long a client may take to send a request head (and how long
/// an idle keep-alive connection stays open), how long a write to it may stay blocked, and how
/// many connections are open at once.
///
/// `axum::serve` bounds none of these: a client that opens connections and sends nothing, sends
/// its head a byte at a time, or stops reading a stream, holds a connection (and a run's
/// follower) for ever.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> std::io::Result<()> {
/// use std::time::Duration;
/// use agent_tower::{demo, server::Connections};
/// use tokio_util::sync::CancellationToken;
///
/// let agent = demo::scripted().build();
/// let runs = CancellationToken::new();
/// let engine = agent_tower::runs::Runs::new(agent).shutdown_token(runs.clone());
/// let router = agent_tower::server::AguiServer::with_runs(engine).into_router();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
/// Connections::new()
///     .header_timeout(Duration::from_secs(5))
///     .serve(listener, router, runs, async { let _ = tokio::signal::ctrl_c().await; })
///     .await
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Connections {
    header_timeout: Duration,
    write_timeout: Duration,
    max_connections: usize,
}

impl Default for Connections {
    fn default() -> Self {
        Self::new()
    }
}

impl Connections {
    /// Request heads within 10 s (also the most an idle keep-alive connection stays open),
    /// writes unblocked within 30 s, at most 20,000 connections.
    pub fn new() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            max_connections: 20_000,
        }
    }

    /// How long a client may take to send a whole request head, counted from when the
    /// connection is ready for one: an idle keep-alive connection is closed after it too.
    ///
    /// # Panics
    ///
    /// If `timeout` is zero.
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        assert!(!timeout.is_zero(), "the header timeout must not be zero");
        self.header_timeout = timeout;
        self
    }

    /// How long a write may stay blocked (the client stopped reading) before the connection is
    /// closed, which ends its response as a disconnect does.
    ///
    /// # Panics
    ///
    /// If `timeout` is zero.
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        assert!(!timeout.is_zero(), "the write timeout must not be zero");
        self.write_timeout = timeout;
        self
    }

    /// The most connections open at once; past it, new ones wait in the listener's backlog.
    ///
    /// # Panics
    ///
    /// If `connections` is 0.
    pub fn max_connections(mut self, connections: usize) -> Self {
        assert!(connections > 0, "at least one connection must be allowed");
        self.max_connections = connections;
        self
    }

    /// Serves `router` on `listener` (each connection with `TCP_NODELAY`: an event goes out as
    /// soon as it is written) until `shutdown` resolves; then stops accepting, cancels `runs`
    /// (every active run gets its terminal event) and waits for the open responses to end.
    ///
    /// # Errors
    ///
    /// None today: a failed accept is logged and retried after a pause.
    pub async fn serve<F>(
        self,
        listener: TcpListener,
        router: Router,
        runs: CancellationToken,
        shutdown: F,
    ) -> io::Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stopping = CancellationToken::new();
        tokio::spawn({
            let stopping = stopping.clone();
            async move {
                shutdown.await;
                stopping.cancel();
            }
        });
        let permits = Arc::new(Semaphore::new(self.max_connections));
        let tracker = TaskTracker::new();
        loop {
            let accepted = tokio::select! {
                () = stopping.cancelled() => break,
                accepted = accept(&listener, &permits) => accepted,
            };
            let Some((stream, permit)) = accepted else {
                continue;
            };
            let connection = self.connection(stream, permit, router.clone(), stopping.clone());
            tracker.spawn(connection);
        }
        drop(listener);
        runs.cancel();
        tracker.close();
        tracker.wait().await;
        Ok(())
    }

    /// Serves one connection until it ends, or ends it gracefully once `stopping` fires.
    fn connection(
        &self,
        stream: TcpStream,
        permit: tokio::sync::OwnedSemaphorePermit,
        router: Router,
        stopping: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY on a connection");
        }
        let io = TokioIo::new(WriteTimeout::new(stream, self.write_timeout));
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout);
        async move {
            // Its place among the open connections, held until it ends.
            let _permit = permit;
            // Made in place: the task holds one copy of the connection's state.
            let mut connection = std::pin::pin!(
                http.serve_connection(io, TowerToHyperService::new(router))
                    .with_upgrades()
            );
            tokio::select! {
                result = connection.as_mut() => return log_end(result),
                () = stopping.cancelled() => connection.as_mut().graceful_shutdown(),
            }
            log_end(connection.await);
        }
    }
}

fn log_end(result: Result<(), hyper::Error>) {
    if let Err(error) = result {
        tracing::debug!(%error, "a connection ended with an error");
    }
}

/// The next connection once one may be open; `None` after a failed accept (logged, and retried
/// after a pause: the usual failure is running out of file descriptors).
async fn accept(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
) -> Option<(TcpStream, tokio::sync::OwnedSemaphorePermit)> {
    let permit = Arc::clone(permits).acquire_owned().await.ok()?;
    match listener.accept().await {
        Ok((stream, _)) => Some((stream, permit)),
        Err(error) => {
            tracing::warn!(%error, "accepting a connection failed");
            tokio::time::sleep(Duration::from_millis(50)).await;
            None
        }
    }
}

/// A connection whose writes fail with `TimedOut` once one stays blocked for `timeout`.
struct WriteTimeout<IO> {
    io: IO,
    timeout: Duration,
    /// Armed when a write is blocked; made on the first block only.
    blocked: Option<Pin<Box<Sleep>>>,
    armed: bool,
}

impl<IO> WriteTimeout<IO> {
    fn new(io: IO, timeout: Duration) -> Self {
        Self {
            io,
            timeout,
            blocked: None,
            armed: false,
        }
    }

    /// The answer to a write attempt: progress disarms the timer, a block arms it, and a block
    /// past the timeout is an error.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.armed = false;
            return poll;
        }
        let deadline = Instant::now() + self.timeout;
        let sleep = self
            .blocked
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if !self.armed {
            sleep.as_mut().reset(deadline);
            self.armed = true;
        }
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read for the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for WriteTimeout<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_blocked_past_the_timeout_fails_and_progress_resets_it() {
        let (near, mut far) = tokio::io::duplex(16);
        let mut io = WriteTimeout::new(near, Duration::from_secs(30));
        io.write_all(&[0; 16]).await.unwrap();
        // The pipe is full: the next write blocks until the far end reads.
        let blocked = tokio::spawn(async move {
            let result = io.write_all(&[1; 8]).await;
            (result, io)
        });
        tokio::time::sleep(Duration::from_secs(20)).await;
        let mut buf = [0; 16];
        tokio::io::AsyncReadExt::read_exact(&mut far, &mut buf)
            .await
            .unwrap();
        let (result, mut io) = blocked.await.unwrap();
        result.expect("read within the timeout: the write went through");
        io.write_all(&[2; 8]).await.unwrap();
        let error = io.write_all(&[3; 8]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    }
}
