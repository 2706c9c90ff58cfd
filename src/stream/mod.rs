//! Observing a stream without owning it: [`Tee`] and the [`Outbox`] it sends through.
//!
//! [`Tee`] wraps any stream, yields every item unchanged to its consumer, and turns each item into
//! wire events with an [`Encode`] state machine; the events go to a
//! [`Transport`](crate::transport::Transport) from inside `poll_next`, with no task and no extra
//! channel hop. The AG-UI and ACP layers are a `Tee` with their own encoder.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::collections::VecDeque;
//! use agent_tower::stream::{Encode, End, Tee};
//! use agent_tower::transport::{OnDisconnect, Recording};
//! use futures_util::{stream, StreamExt};
//! use tokio_util::sync::CancellationToken;
//!
//! // Announce every number, and say how the stream ended.
//! struct Announce;
//! impl Encode<u32> for Announce {
//!     type Event = String;
//!     fn encode(&mut self, n: &u32, out: &mut VecDeque<String>) -> Option<End> {
//!         out.push_back(format!("saw {n}"));
//!         None
//!     }
//!     fn end(&mut self, end: End, out: &mut VecDeque<String>) {
//!         out.push_back(format!("{end:?}"));
//!     }
//! }
//!
//! let ui = Recording::new();
//! let tee = Tee::new(stream::iter([1, 2]), Some(ui.clone()), Announce, OnDisconnect::Cancel, CancellationToken::new());
//! assert_eq!(tee.collect::<Vec<_>>().await, vec![1, 2]);
//! assert_eq!(ui.events(), ["saw 1", "saw 2", "Finished"]);
//! # }
//! ```
//!
//! # When the encoder is called
//!
//! - [`Encode::encode`] for every item, before the item is yielded, as long as the outbox has a
//!   transport (a run without one, or whose transport closed, encodes nothing more).
//! - [`Encode::end`] exactly once: as soon as `encode` reports that an item ends the stream
//!   (a model's finish event, an error), else when the inner stream returns `None`
//!   ([`End::Finished`]), else when the `Tee` is dropped ([`End::Cancelled`]).
//!
//! # Back-pressure
//!
//! Events of one item are queued; before the next item is pulled from the inner stream the queue
//! is drained into the transport (the `Forward` algorithm). A transport that is not ready makes
//! the `Tee` return `Pending`, so a slow client slows the model instead of growing a buffer.

mod future;
mod outbox;
mod tee;
pub(crate) mod wrap;

pub use self::{
    future::TeeFuture,
    outbox::Outbox,
    tee::{Encode, End, Tee},
};
