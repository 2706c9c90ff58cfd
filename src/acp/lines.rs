//! The ACP agent's wire: newline-delimited JSON-RPC over a byte stream (stdio for an editor,
//! [`pump`]), or whole messages (a WebSocket's text frames, [`exchange`]), read and written here
//! rather than by the SDK's `Stdio`, for reasons the SDK's reader cannot serve:
//!
//! - a line that is not UTF-8 ends the SDK's connection (its line reader fails, and the agent
//!   exits); here it is answered with a parse error and the next line is read;
//! - a request the SDK cannot parse (`params` not an object, no `jsonrpc`) is answered with
//!   `id: null`; here it is answered with its own id, when it has one;
//! - the SDK queues outgoing messages without bound; here the updates of prompt turns take room
//!   in an [`Outbox`] that the writer gives back once they are written, so a client that stops
//!   reading stops the model instead of filling memory;
//! - the SDK refuses every request that comes before its answer to `initialize`; a client may send
//!   `session/new` right behind `initialize` without waiting (JSON-RPC allows it), so here what
//!   follows an `initialize` is read only once its answer is written ([`Handshake`]).

use std::{
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    task::{Context, Poll},
};

use agent_client_protocol::{
    Channel, Error, RawJsonRpcId, RawJsonRpcMessage, RawJsonRpcResponse, TransportFrame,
    v1::schema::JsonRpcMessage,
};
use futures_channel::mpsc::{UnboundedReceiver, UnboundedSender};
use futures_util::{Sink, SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, BufReader};
use tokio_util::{
    bytes::BytesMut,
    codec::{Encoder, FramedWrite},
    sync::PollSemaphore,
};

/// The longest line read, in bytes (a prompt with embedded files can be large); a longer one is
/// answered with a parse error and skipped.
pub const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;

/// How many session updates may wait to be written before a turn waits for the client.
pub const MAX_QUEUED_UPDATES: usize = 1024;

/// Room for session updates between the turns that send them and the writer.
#[derive(Clone, Debug)]
pub(crate) struct Outbox {
    room: Arc<tokio::sync::Semaphore>,
    /// Updates sent with room taken, not yet written.
    held: Arc<AtomicUsize>,
}

impl Outbox {
    pub(crate) fn new(updates: usize) -> Self {
        Self {
            room: Arc::new(tokio::sync::Semaphore::new(updates)),
            held: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A handle for one sender to wait for room with.
    pub(crate) fn waiter(&self) -> PollSemaphore {
        PollSemaphore::new(Arc::clone(&self.room))
    }

    /// Takes room for one update, waiting while the client is behind.
    pub(crate) fn poll_reserve(
        &self,
        waiter: &mut PollSemaphore,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        match waiter.poll_acquire(cx) {
            Poll::Ready(Some(permit)) => {
                permit.forget();
                self.held.fetch_add(1, Ordering::AcqRel);
                Poll::Ready(())
            }
            Poll::Ready(None) => Poll::Ready(()),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Takes room for one update if there is some; an update that cannot wait goes anyway.
    pub(crate) fn reserve_now(&self) {
        if let Ok(permit) = self.room.try_acquire() {
            permit.forget();
            self.held.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// `updates` were written: their room is free again.
    fn written(&self, updates: usize) {
        let mut freed = 0;
        for _ in 0..updates {
            if self
                .held
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_sub(1))
                .is_ok()
            {
                freed += 1;
            }
        }
        self.room.add_permits(freed);
    }
}

/// The `initialize` request whose answer is not written yet: the reader holds the next frames
/// until the writer wrote it (or stopped writing).
#[derive(Default)]
struct Handshake {
    pending: std::sync::Mutex<Option<RawJsonRpcId>>,
    answered: tokio::sync::Notify,
}

impl Handshake {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<RawJsonRpcId>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes `frame` on its way to the SDK: an `initialize` request is now pending.
    fn reading(&self, frame: &TransportFrame) {
        if let TransportFrame::Single(RawJsonRpcMessage::Request(request)) = frame
            && &*request.method == "initialize"
        {
            *self.lock() = Some(request.id.clone());
        }
    }

    /// Waits until no `initialize` answer is pending.
    async fn settled(&self) {
        loop {
            let answered = self.answered.notified();
            if self.lock().is_none() {
                return;
            }
            answered.await;
        }
    }

    /// Notes `frame`, written: the answer to the pending `initialize`, perhaps.
    fn written(&self, frame: &TransportFrame) {
        let TransportFrame::Single(RawJsonRpcMessage::Response(
            RawJsonRpcResponse::Result { id, .. } | RawJsonRpcResponse::Error { id, .. },
        )) = frame
        else {
            return;
        };
        let mut pending = self.lock();
        if pending.as_ref() == Some(id) {
            *pending = None;
            drop(pending);
            self.answered.notify_waiters();
        }
    }

    /// Nothing more is written: nothing to wait for.
    fn close(&self) {
        *self.lock() = None;
        self.answered.notify_waiters();
    }
}

/// Connects `channel` (the SDK's end is its counterpart) to `reader` and `writer`, one message a
/// line: reads until the reader ends (then the SDK sees its input closed), writes until the SDK
/// and `answers` are done sending.
pub(crate) async fn pump<R, W>(
    channel: Channel,
    answers: UnboundedSender<TransportFrame>,
    reader: R,
    writer: W,
    outbox: Outbox,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    exchange(
        channel,
        answers,
        outbox,
        |inbox| read_lines(reader, inbox),
        FramedWrite::new(writer, LineEncoder),
    )
    .await
}

/// Connects `channel` to a transport of whole messages: `read` gives the client's messages to
/// the [`Inbox`] until the client is done, and the SDK's messages (and `answers`) go to
/// `outgoing`, each a message of JSON, flushed a batch at a time.
pub(crate) async fn exchange<F, O>(
    channel: Channel,
    answers: UnboundedSender<TransportFrame>,
    outbox: Outbox,
    read: impl FnOnce(Inbox) -> F,
    outgoing: O,
) -> std::io::Result<()>
where
    F: Future<Output = std::io::Result<()>>,
    O: Sink<String, Error = std::io::Error> + Unpin,
{
    let Channel { rx, tx, .. } = channel;
    let handshake = Arc::new(Handshake::default());
    let inbox = Inbox {
        to_sdk: tx,
        answers,
        handshake: Arc::clone(&handshake),
    };
    let (read, written) = tokio::join!(read(inbox), async {
        let written = write_frames(rx, outgoing, outbox, &handshake).await;
        handshake.close();
        written
    });
    read.and(written)
}

/// Where the client's messages go: to the SDK, or answered at once when malformed with an id.
pub(crate) struct Inbox {
    to_sdk: UnboundedSender<TransportFrame>,
    answers: UnboundedSender<TransportFrame>,
    handshake: Arc<Handshake>,
}

impl Inbox {
    /// Takes one message (a blank one is skipped): `false` once nobody reads any more.
    pub(crate) async fn message(&self, message: &[u8]) -> bool {
        match frame_of(message) {
            Some(frame) => self.frame(frame).await,
            None => true,
        }
    }

    /// Takes one frame; what follows an `initialize` waits for its answer to be written.
    async fn frame(&self, frame: TransportFrame) -> bool {
        let sent = match answer_with_id(&frame) {
            Some(answer) => self.answers.unbounded_send(answer),
            None => {
                self.handshake.reading(&frame);
                self.to_sdk.unbounded_send(frame)
            }
        };
        if sent.is_err() {
            return false;
        }
        self.handshake.settled().await;
        true
    }
}

/// Writes each message as one line.
struct LineEncoder;

impl Encoder<String> for LineEncoder {
    type Error = std::io::Error;

    fn encode(&mut self, line: String, out: &mut BytesMut) -> std::io::Result<()> {
        out.reserve(line.len() + 1);
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\n");
        Ok(())
    }
}

/// The room for a line that reading keeps between lines; a longer line's is given back once read.
const KEPT_LINE_BYTES: usize = 64 * 1024;

/// Reads lines into frames for the SDK; malformed requests with an id are answered here.
async fn read_lines<R: AsyncRead + Unpin>(reader: R, inbox: Inbox) -> std::io::Result<()> {
    let mut reader = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        let read = (&mut reader)
            .take(limit)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            return Ok(());
        }
        let long = line.len() > KEPT_LINE_BYTES;
        let delivered = if line.last() != Some(&b'\n') && line.len() > MAX_LINE_BYTES {
            skip_line(&mut reader).await?;
            inbox
                .frame(malformed(
                    String::new(),
                    Error::parse_error().data(
                        json!({"reason": format!("a line longer than {MAX_LINE_BYTES} bytes")}),
                    ),
                ))
                .await
        } else {
            inbox.message(&line).await
        };
        if long {
            // The frame holds what it needs: a long line's room is not kept for the next ones.
            line = Vec::new();
        }
        if !delivered {
            return Ok(());
        }
    }
}

/// The frame of one line (`None` for a blank one): a parse error when it is not UTF-8.
fn frame_of(line: &[u8]) -> Option<TransportFrame> {
    let text = line.trim_ascii();
    if text.is_empty() {
        return None;
    }
    Some(match std::str::from_utf8(text) {
        Ok(text) => TransportFrame::parse_json(text),
        Err(_) => malformed(
            String::from_utf8_lossy(text).into_owned(),
            Error::parse_error().data(json!({"reason": "the line is not UTF-8"})),
        ),
    })
}

/// One line through the reader's parsing and answering (for the fuzz target): an answer given
/// here carries the request's id.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_line(line: &[u8]) {
    let Some(frame) = frame_of(line) else {
        return;
    };
    if let Some(answer) = answer_with_id(&frame) {
        let answer: Value = serde_json::from_str(&answer.to_json().expect("an answer serializes"))
            .expect("an answer is JSON");
        assert!(
            answer["id"].is_string() || answer["id"].is_number(),
            "{answer}"
        );
        assert!(answer["error"]["code"].is_number(), "{answer}");
    }
}

fn malformed(raw: String, error: Error) -> TransportFrame {
    TransportFrame::Malformed { raw, error }
}

/// Discards the rest of an over-long line.
async fn skip_line<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> std::io::Result<()> {
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => {
                reader.consume(at + 1);
                return Ok(());
            }
            None => {
                let all = buffer.len();
                reader.consume(all);
            }
        }
    }
}

/// The error response to a malformed request that names its id (a number or a string): the SDK
/// would answer it with `id: null`, which the client cannot match to its request.
fn answer_with_id(frame: &TransportFrame) -> Option<TransportFrame> {
    let TransportFrame::Malformed { raw, error } = frame else {
        return None;
    };
    let value: Value = serde_json::from_str(raw).ok()?;
    let object = value.as_object()?;
    let id = object
        .get("id")
        .filter(|id| id.is_string() || id.is_number())?;
    object.get("method")?;
    let answer = json!({"jsonrpc": "2.0", "id": id, "error": error});
    Some(TransportFrame::parse_json(&answer.to_string()))
}

/// Whether a frame is a session update (the frames the outbox makes room for).
fn is_update(frame: &TransportFrame) -> bool {
    matches!(
        frame,
        TransportFrame::Single(RawJsonRpcMessage::Notification(notification))
            if &*notification.method == "session/update"
    )
}

/// `frame` as one message of JSON, on one line.
///
/// A message is serialized where it lies: the SDK's own `TransportFrame::to_json` serializes a
/// deep copy of it (its `params` map cloned for every frame, then dropped), which was a fifth
/// of the agent's instructions per session update. The bytes are the same.
fn encode(frame: &TransportFrame) -> std::io::Result<String> {
    let json = match frame {
        TransportFrame::Single(RawJsonRpcMessage::Notification(message)) => {
            serde_json::to_string(&JsonRpcMessage::wrap(message))
        }
        TransportFrame::Single(RawJsonRpcMessage::Request(message)) => {
            serde_json::to_string(&JsonRpcMessage::wrap(message))
        }
        TransportFrame::Single(RawJsonRpcMessage::Response(message)) => {
            serde_json::to_string(&JsonRpcMessage::wrap(message))
        }
        other => {
            let json = other.to_json().map_err(std::io::Error::other)?;
            // A malformed value kept for a relay may span lines; one frame is one line.
            return Ok(json.replace(['\r', '\n'], " "));
        }
    };
    json.map_err(std::io::Error::other)
}

/// Sends the SDK's frames, a batch of whatever is ready at a time, and gives the updates' room
/// back once they are flushed.
async fn write_frames<O: Sink<String, Error = std::io::Error> + Unpin>(
    mut frames: UnboundedReceiver<TransportFrame>,
    mut outgoing: O,
    outbox: Outbox,
    handshake: &Handshake,
) -> std::io::Result<()> {
    const BATCH: usize = 64;
    while let Some(first) = frames.next().await {
        let mut updates = 0;
        let mut next = Some(first);
        let mut batched = 0;
        while let Some(frame) = next.take() {
            outgoing.feed(encode(&frame)?).await?;
            updates += usize::from(is_update(&frame));
            batched += 1;
            if batched < BATCH {
                next = frames.try_recv().ok();
            }
            handshake.written(&frame);
        }
        outgoing.flush().await?;
        outbox.written(updates);
    }
    outgoing.close().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_written_as_the_sdk_writes_it_on_one_line() {
        let frames = [
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a \"quoted\"\nline é 🙂"}}}}"#,
            r#"{"jsonrpc":"2.0","method":"exit"}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s","options":[]}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"m","params":[1,2]}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"bad","data":{"k":1}}}"#,
        ]
        .into_iter()
        .map(TransportFrame::parse_json)
        .chain([malformed(
            "{\"a\":\r\n1}".to_owned(),
            Error::parse_error(),
        )]);
        for frame in frames {
            let sdk = frame.to_json().unwrap().replace(['\r', '\n'], " ");
            assert_eq!(encode(&frame).unwrap(), sdk, "{frame:?}");
        }
    }

    #[test]
    fn malformed_requests_are_answered_with_their_id() {
        let answer = |line: &str| {
            answer_with_id(&TransportFrame::parse_json(line))
                .and_then(|frame| frame.to_json().ok())
                .map(|json| serde_json::from_str::<Value>(&json).unwrap())
        };
        let bad_params = answer(r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":"x"}"#)
            .expect("answered here");
        assert_eq!(bad_params["id"], 2);
        assert_eq!(bad_params["error"]["code"], -32600);
        let no_version = answer(r#"{"id":"a","method":"initialize","params":{}}"#).unwrap();
        assert_eq!(no_version["id"], "a");
        assert_eq!(
            answer("{not json"),
            None,
            "no id to answer: the SDK's `id: null`"
        );
        assert_eq!(
            answer(r#"{"id":3,"result":"x"}"#),
            None,
            "a response is not answered"
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{}}"#),
            None,
            "a well-formed request is the SDK's"
        );
    }

    #[tokio::test]
    async fn room_comes_back_once_updates_are_written() {
        let outbox = Outbox::new(2);
        let mut waiter = outbox.waiter();
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(outbox.poll_reserve(&mut waiter, &mut cx).is_ready());
        assert!(outbox.poll_reserve(&mut waiter, &mut cx).is_ready());
        assert!(outbox.poll_reserve(&mut waiter, &mut cx).is_pending());
        outbox.written(1);
        assert!(outbox.poll_reserve(&mut waiter, &mut cx).is_ready());
        // Updates sent without room (another sender's) give back nothing they did not take.
        outbox.written(5);
        assert_eq!(outbox.room.available_permits(), 2);
    }
}
