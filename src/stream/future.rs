use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use futures_core::Stream;
use pin_project_lite::pin_project;

use super::{Encode, Outbox, Tee};
use crate::transport::Transport;

pin_project! {
    /// The future of a service whose response is a stream: resolves to that stream, teed through
    /// an outbox that may already hold the step's opening events.
    ///
    /// A call that fails before its stream exists sends nothing: the step never started.
    pub struct TeeFuture<F, Sk, En, Ev> {
        #[pin]
        inner: F,
        start: Option<(Outbox<Sk, Ev>, En)>,
    }
}

impl<F, Sk, En, Ev> TeeFuture<F, Sk, En, Ev> {
    /// Tees the stream `inner` resolves to through `outbox`, encoded by `encoder`.
    pub fn new(inner: F, outbox: Outbox<Sk, Ev>, encoder: En) -> Self {
        Self {
            inner,
            start: Some((outbox, encoder)),
        }
    }
}

impl<F, St, E, Sk, En> Future for TeeFuture<F, Sk, En, En::Event>
where
    F: Future<Output = Result<St, E>>,
    St: Stream,
    En: Encode<St::Item>,
    Sk: Transport<En::Event>,
{
    type Output = Result<Tee<St, Sk, En>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let stream = ready!(this.inner.poll(cx))?;
        let (outbox, encoder) = this
            .start
            .take()
            .expect("TeeFuture polled after completion");
        Poll::Ready(Ok(Tee::with_outbox(stream, outbox, encoder)))
    }
}

impl<F, Sk, En, Ev> fmt::Debug for TeeFuture<F, Sk, En, Ev> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TeeFuture")
            .field("inner", &std::any::type_name::<F>())
            .finish_non_exhaustive()
    }
}
