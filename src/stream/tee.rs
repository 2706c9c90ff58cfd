use std::{
    collections::VecDeque,
    fmt,
    pin::Pin,
    task::{Context, Poll},
};

use futures_core::Stream;
use pin_project_lite::pin_project;
use tokio_util::sync::CancellationToken;

use super::Outbox;
use crate::transport::{OnDisconnect, Transport};

/// How an observed stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// The stream finished normally (an item said so, or it returned `None`).
    Finished,
    /// An item was an error.
    Failed,
    /// The stream was dropped before its end.
    Cancelled,
}

/// A state machine turning stream items into wire events.
///
/// It writes into a queue the caller owns, so it allocates nothing per item beyond the events.
pub trait Encode<Item> {
    /// The wire event type.
    type Event;

    /// Encodes one item; returns `Some` when this item is known to end the stream, in which case
    /// [`end`](Encode::end) is called right after with that value.
    fn encode(&mut self, item: &Item, out: &mut VecDeque<Self::Event>) -> Option<End>;

    /// Closes whatever is open. Called exactly once per stream.
    fn end(&mut self, end: End, out: &mut VecDeque<Self::Event>);
}

pin_project! {
    /// A stream that tees every item to a transport; see the [module docs](super).
    #[must_use = "streams do nothing unless polled"]
    pub struct Tee<St, Sk, En>
    where
        St: Stream,
        Sk: Transport<En::Event>,
        En: Encode<St::Item>,
    {
        #[pin]
        inner: St,
        outbox: Outbox<Sk, En::Event>,
        // `Some` until `end` fired: taking it is what makes the end exactly-once.
        encoder: Option<En>,
        inner_done: bool,
    }

    impl<St, Sk, En> PinnedDrop for Tee<St, Sk, En>
    where
        St: Stream,
        Sk: Transport<En::Event>,
        En: Encode<St::Item>,
    {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(mut encoder) = this.encoder.take() {
                encoder.end(End::Cancelled, this.outbox.queue());
            }
            this.outbox.send_now();
        }
    }
}

impl<St, Sk, En> Tee<St, Sk, En>
where
    St: Stream,
    Sk: Transport<En::Event>,
    En: Encode<St::Item>,
{
    /// Tees `inner` to `sink` (no sink: items pass through, and the encoder is never called).
    ///
    /// When the sink closes, `on_disconnect` decides whether `cancel` is cancelled.
    pub fn new(
        inner: St,
        sink: Option<Sk>,
        encoder: En,
        on_disconnect: OnDisconnect,
        cancel: CancellationToken,
    ) -> Self {
        Self::with_outbox(inner, Outbox::new(sink, on_disconnect, cancel), encoder)
    }

    /// Tees `inner` through an outbox that may already hold events (a step's opening events).
    ///
    /// An outbox with no transport encodes nothing: a layer whose protocol this run does not
    /// speak costs a branch per item.
    pub fn with_outbox(inner: St, outbox: Outbox<Sk, En::Event>, encoder: En) -> Self {
        let encoder = outbox.is_connected().then_some(encoder);
        Self {
            inner,
            outbox,
            encoder,
            inner_done: false,
        }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &St {
        &self.inner
    }
}

impl<St, Sk, En> Stream for Tee<St, Sk, En>
where
    St: Stream,
    Sk: Transport<En::Event>,
    En: Encode<St::Item>,
{
    type Item = St::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        if this.encoder.is_none() && !this.outbox.is_connected() {
            // No transport (a run of another protocol), or it closed: a pass-through.
            if *this.inner_done {
                return Poll::Ready(None);
            }
            let next = this.inner.as_mut().poll_next(cx);
            *this.inner_done = matches!(next, Poll::Ready(None));
            return next;
        }
        loop {
            // Drain before pulling: a transport that is not ready holds the model back.
            if this.outbox.poll_drain(cx).is_pending() {
                return Poll::Pending;
            }
            if *this.inner_done {
                return this.outbox.poll_flush(cx).map(|()| None);
            }
            match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(item)) => {
                    if let Some(encoder) = this.encoder.as_mut()
                        && let Some(end) = encoder.encode(&item, this.outbox.queue())
                    {
                        encoder.end(end, this.outbox.queue());
                        *this.encoder = None;
                    }
                    // Deliver what the transport takes right now; the rest goes before the next
                    // pull.
                    let _ = this.outbox.poll_drain(cx);
                    if !this.outbox.is_connected() {
                        // The transport closed: nothing more is encoded for it.
                        *this.encoder = None;
                    }
                    return Poll::Ready(Some(item));
                }
                Poll::Ready(None) => {
                    *this.inner_done = true;
                    if let Some(mut encoder) = this.encoder.take() {
                        encoder.end(End::Finished, this.outbox.queue());
                    }
                }
                Poll::Pending => {
                    let _ = this.outbox.poll_flush(cx);
                    return Poll::Pending;
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<St, Sk, En> fmt::Debug for Tee<St, Sk, En>
where
    St: Stream,
    Sk: Transport<En::Event>,
    En: Encode<St::Item>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tee")
            .field("inner", &std::any::type_name::<St>())
            .field("outbox", &self.outbox)
            .field("ended", &self.encoder.is_none())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Channel, Recording};
    use futures_util::{StreamExt, stream};
    use tokio_test::{assert_pending, assert_ready, task};

    #[derive(Debug)]
    struct Log;
    impl Encode<Result<u32, ()>> for Log {
        type Event = String;
        fn encode(&mut self, item: &Result<u32, ()>, out: &mut VecDeque<String>) -> Option<End> {
            match item {
                Ok(n) => {
                    out.push_back(n.to_string());
                    None
                }
                Err(()) => Some(End::Failed),
            }
        }
        fn end(&mut self, end: End, out: &mut VecDeque<String>) {
            out.push_back(format!("{end:?}"));
        }
    }

    fn tee<St: Stream<Item = Result<u32, ()>>, Sk: Transport<String>>(
        inner: St,
        sink: Sk,
        on_disconnect: OnDisconnect,
        cancel: CancellationToken,
    ) -> Tee<St, Sk, Log> {
        Tee::new(inner, Some(sink), Log, on_disconnect, cancel)
    }

    #[tokio::test]
    async fn finished_fires_once_at_the_end() {
        let rec = Recording::new();
        let out: Vec<_> = tee(
            stream::iter([Ok(1), Ok(2)]),
            rec.clone(),
            OnDisconnect::Cancel,
            CancellationToken::new(),
        )
        .collect()
        .await;
        assert_eq!(out, vec![Ok(1), Ok(2)]);
        assert_eq!(rec.events(), ["1", "2", "Finished"]);
    }

    #[tokio::test]
    async fn failed_fires_at_the_error_item_and_never_again() {
        let rec = Recording::new();
        let out: Vec<_> = tee(
            stream::iter([Ok(1), Err(()), Ok(3)]),
            rec.clone(),
            OnDisconnect::Cancel,
            CancellationToken::new(),
        )
        .collect()
        .await;
        assert_eq!(out.len(), 3, "items pass through unchanged");
        assert_eq!(rec.events(), ["1", "Failed"]);
    }

    /// Counts what it is asked to encode.
    struct Counting(std::sync::Arc<std::sync::atomic::AtomicUsize>);
    impl Encode<Result<u32, ()>> for Counting {
        type Event = String;
        fn encode(&mut self, _: &Result<u32, ()>, out: &mut VecDeque<String>) -> Option<End> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            out.push_back("event".to_owned());
            None
        }
        fn end(&mut self, _: End, _: &mut VecDeque<String>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn nothing_is_encoded_without_a_transport_or_once_it_closed() {
        use std::sync::{Arc, atomic::AtomicUsize, atomic::Ordering};

        let calls = Arc::new(AtomicUsize::new(0));
        let without = Tee::new(
            stream::iter([Ok(1), Ok(2)]),
            None::<Recording<String>>,
            Counting(calls.clone()),
            OnDisconnect::Continue,
            CancellationToken::new(),
        );
        assert_eq!(without.collect::<Vec<_>>().await, [Ok(1), Ok(2)]);
        assert_eq!(calls.load(Ordering::Relaxed), 0);

        let (tx, rx) = Channel::<String>::bounded(4);
        drop(rx);
        let closed = Tee::new(
            stream::iter([Ok(1), Ok(2), Ok(3)]),
            Some(tx),
            Counting(calls.clone()),
            OnDisconnect::Continue,
            CancellationToken::new(),
        );
        assert_eq!(closed.collect::<Vec<_>>().await.len(), 3);
        assert_eq!(
            calls.load(Ordering::Relaxed),
            1,
            "the first item found it closed"
        );
    }

    #[tokio::test]
    async fn drop_mid_stream_fires_cancelled() {
        let rec = Recording::new();
        let mut t = tee(
            stream::iter([Ok(1), Ok(2)]).chain(stream::pending()),
            rec.clone(),
            OnDisconnect::Cancel,
            CancellationToken::new(),
        );
        assert_eq!(t.next().await, Some(Ok(1)));
        drop(t);
        assert_eq!(rec.events(), ["1", "Cancelled"]);
    }

    #[tokio::test]
    async fn a_full_transport_back_pressures_the_stream() {
        let (tx, mut rx) = Channel::bounded(1);
        let mut t = task::spawn(tee(
            stream::iter([Ok(1), Ok(2), Ok(3)]),
            tx,
            OnDisconnect::Cancel,
            CancellationToken::new(),
        ));
        // "1" fills the channel; item 1 is yielded, "2" is queued and item 2 still yielded (one
        // slot), then the tee refuses to pull item 3 until the client reads.
        assert_eq!(assert_ready!(t.poll_next()), Some(Ok(1)));
        assert_eq!(assert_ready!(t.poll_next()), Some(Ok(2)));
        assert_pending!(t.poll_next());
        assert_eq!(rx.recv().await.as_deref(), Some("1"));
        assert!(t.is_woken());
        assert_eq!(assert_ready!(t.poll_next()), Some(Ok(3)));
    }

    #[tokio::test]
    async fn disconnect_cancels_the_run_by_default() {
        let rec = Recording::new();
        rec.disconnect();
        let cancel = CancellationToken::new();
        let out: Vec<_> = tee(
            stream::iter([Ok(1), Ok(2)]),
            rec.clone(),
            OnDisconnect::Cancel,
            cancel.clone(),
        )
        .collect()
        .await;
        assert_eq!(out.len(), 2, "the consumer still gets every item");
        assert!(cancel.is_cancelled());
    }

    #[tokio::test]
    async fn disconnect_with_continue_keeps_the_run_going() {
        let rec = Recording::new();
        rec.disconnect();
        let cancel = CancellationToken::new();
        let out: Vec<_> = tee(
            stream::iter([Ok(1), Ok(2)]),
            rec,
            OnDisconnect::Continue,
            cancel.clone(),
        )
        .collect()
        .await;
        assert_eq!(out.len(), 2);
        assert!(!cancel.is_cancelled());
    }
}
