use futures_core::Stream;

use super::{
    Encode, Outbox, Tee,
    wrap::{Wrap, response_future},
};
use crate::transport::Transport;

/// Tees the inner stream through an outbox that may already hold the step's opening events.
pub(crate) struct TeeStart<Sk, En, Ev> {
    outbox: Outbox<Sk, Ev>,
    encoder: En,
}

impl<St, E, Sk, En> Wrap<St, E> for TeeStart<Sk, En, En::Event>
where
    St: Stream,
    En: Encode<St::Item>,
    Sk: Transport<En::Event>,
{
    type Output = Result<Tee<St, Sk, En>, E>;

    fn wrap(self, result: Result<St, E>) -> Self::Output {
        result.map(|stream| Tee::with_outbox(stream, self.outbox, self.encoder))
    }
}

response_future! {
    @own_new
    /// The future of a service whose response is a stream: resolves to that stream, teed through
    /// an outbox that may already hold the step's opening events.
    ///
    /// A call that fails before its stream exists sends nothing: the step never started.
    pub struct TeeFuture<F, Sk, En, Ev> = TeeStart<Sk, En, Ev>;
    impl<F, St, E, Sk, En> Future for TeeFuture<F, Sk, En, En::Event>
    where [
        F: Future<Output = Result<St, E>>,
        St: Stream,
        En: Encode<St::Item>,
        Sk: Transport<En::Event>,
    ]
    { type Output = Result<Tee<St, Sk, En>, E>; }
}

impl<F, Sk, En, Ev> TeeFuture<F, Sk, En, Ev> {
    /// Tees the stream `inner` resolves to through `outbox`, encoded by `encoder`.
    pub fn new(inner: F, outbox: Outbox<Sk, Ev>, encoder: En) -> Self {
        Self::wrapping(inner, TeeStart { outbox, encoder })
    }
}
