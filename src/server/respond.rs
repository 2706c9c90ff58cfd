//! A run's events as a streamed HTTP response, in each format.
//!
//! Every format frames the follower's events itself, as many as are ready into one chunk of
//! body: a burst of tokens is one write, one frame of the body, one allocation, and a quiet run
//! holds no buffer.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Response},
};
use bytes::{BufMut, BytesMut};
use futures_core::Stream;
use tokio::time::{Instant, Sleep};

use super::Format;
use crate::{
    id::RunId,
    runs::{Follow, LoggedEvent},
};

/// The most bytes one chunk gathers before it is sent (a larger single event is sent whole).
const MAX_CHUNK: usize = 64 * 1024;

/// The SSE comment sent while a run is quiet.
const PING: &[u8] = b": ping\n\n";

/// The events `follow` yields, in `format`: SSE events carry `id: {runId}:{seq}` (events that
/// are not in the log, such as a follower's own `RUN_ERROR`, carry none), and `: ping` comments
/// go out while the run is quiet.
pub(super) fn events(follow: Follow, format: Format, keep_alive: Duration) -> Response {
    let run = follow.run_id().clone();
    stream(follow, &run, format, keep_alive)
}

/// The events of `run` that `events` yields (some of them perhaps not in its log), as
/// [`events`] sends them.
pub(super) fn stream<S>(events: S, run: &RunId, format: Format, keep_alive: Duration) -> Response
where
    S: Stream<Item = LoggedEvent> + Send + Unpin + 'static,
{
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    let framing = match format {
        Format::Sse => Framing::sse(run),
        Format::Ndjson => Framing::Ndjson,
        #[cfg(feature = "proto")]
        Format::Proto => Framing::Proto,
    };
    let keep_alive = matches!(framing, Framing::Sse(_)).then(|| KeepAlive::new(keep_alive));
    let chunks = Chunks {
        events,
        framing,
        keep_alive,
        done: false,
    };
    (headers, Body::from_stream(chunks)).into_response()
}

/// How one event is written.
enum Framing {
    /// `id: {run}:{seq}\ndata: {json}\n\n` (the id line only for logged events), with
    /// `id: {run}:` made once.
    Sse(Box<[u8]>),
    /// `{json}\n`.
    Ndjson,
    /// A length-prefixed protobuf message.
    #[cfg(feature = "proto")]
    Proto,
}

impl Framing {
    /// SSE for the events of `run`.
    fn sse(run: &RunId) -> Self {
        Self::Sse(format!("id: {run}:").into_bytes().into_boxed_slice())
    }

    /// Appends `event`, framed, to `out`.
    fn write(&self, event: &LoggedEvent, out: &mut BytesMut) {
        let json = event.json().as_ref();
        match self {
            Self::Sse(id) => {
                let mut seq = itoa::Buffer::new();
                let seq = seq.format(event.seq);
                let id_line = if event.seq == 0 {
                    0
                } else {
                    id.len() + seq.len() + 1
                };
                // `data: ` and a line end per line, and the empty line: exact for one line.
                out.reserve(id_line + json.len() + 8);
                if event.seq != 0 {
                    out.put_slice(id);
                    out.put_slice(seq.as_bytes());
                    out.put_u8(b'\n');
                }
                if json.contains(&b'\n') {
                    // Our JSON is one line; JSON read back from elsewhere might not be.
                    for line in json.split(|&b| b == b'\n') {
                        out.put_slice(b"data: ");
                        out.put_slice(line.strip_suffix(b"\r").unwrap_or(line));
                        out.put_u8(b'\n');
                    }
                    out.put_u8(b'\n');
                } else {
                    out.put_slice(b"data: ");
                    out.put_slice(json.strip_suffix(b"\r").unwrap_or(json));
                    out.put_slice(b"\n\n");
                }
            }
            Self::Ndjson => {
                out.reserve(json.len() + 1);
                out.put_slice(json);
                out.put_u8(b'\n');
            }
            #[cfg(feature = "proto")]
            Self::Proto => proto(event, out),
        }
    }
}

/// One event as a length-prefixed protobuf frame; an event the log holds as JSON it cannot read
/// is skipped (and logged).
#[cfg(feature = "proto")]
fn proto(event: &LoggedEvent, out: &mut BytesMut) {
    match event.event() {
        Ok(typed) => {
            let mut frame = Vec::new();
            crate::agui::proto::encode_framed(&typed, &mut frame);
            out.extend_from_slice(&frame);
        }
        Err(error) => {
            tracing::error!(seq = event.seq, %error, "a logged event could not be sent as protobuf");
        }
    }
}

/// The keep-alive of an SSE stream: a ping once the stream was quiet for `every`.
///
/// Sending does not touch the timer: it only notes when it sent, and a timer that fires early
/// is moved to the end of the quiet interval then.
struct KeepAlive {
    every: Duration,
    sent: Instant,
    timer: Pin<Box<Sleep>>,
}

impl KeepAlive {
    fn new(every: Duration) -> Self {
        Self {
            every,
            sent: Instant::now(),
            timer: Box::pin(tokio::time::sleep(every)),
        }
    }

    /// Ready when a ping is due.
    fn poll_due(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            futures_core::ready!(self.timer.as_mut().poll(cx));
            let due = self.sent + self.every;
            if due <= self.timer.deadline() {
                self.sent = self.timer.deadline();
                self.timer.as_mut().reset(self.sent + self.every);
                return Poll::Ready(());
            }
            self.timer.as_mut().reset(due);
        }
    }
}

/// The body: chunks of framed events.
struct Chunks<S> {
    events: S,
    framing: Framing,
    keep_alive: Option<KeepAlive>,
    done: bool,
}

impl<S> Stream for Chunks<S>
where
    S: Stream<Item = LoggedEvent> + Unpin,
{
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let mut chunk = BytesMut::new();
        while !this.done && chunk.len() < MAX_CHUNK {
            match Pin::new(&mut this.events).poll_next(cx) {
                Poll::Ready(Some(event)) => this.framing.write(&event, &mut chunk),
                Poll::Ready(None) => this.done = true,
                Poll::Pending => break,
            }
        }
        if !chunk.is_empty() {
            if let Some(keep_alive) = &mut this.keep_alive {
                keep_alive.sent = Instant::now();
            }
            return Poll::Ready(Some(Ok(chunk.freeze())));
        }
        if this.done {
            return Poll::Ready(None);
        }
        match &mut this.keep_alive {
            Some(keep_alive) => keep_alive
                .poll_due(cx)
                .map(|()| Some(Ok(Bytes::from_static(PING)))),
            None => Poll::Pending,
        }
    }
}
