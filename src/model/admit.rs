//! [`AdmitFuture`]: the response future of a model layer that lets a request through to the
//! model or refuses it before the model sees it ([`RateLimit`](super::rate_limit::RateLimit),
//! [`Budget`](super::budget::Budget)).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;

use super::ModelError;
use crate::BoxError;

/// How a layer that let a request through follows the model's stream `St`.
pub trait WrapEvents<St> {
    /// The stream the layer answers with.
    type Stream;

    /// `events`, followed by the layer.
    fn wrap(self, events: St) -> Self::Stream;
}

pin_project! {
    /// The model's answer to a request a layer let through, its stream wrapped by `W`; or the
    /// layer's refusal, without the model having seen the request.
    pub struct AdmitFuture<F, W> {
        #[pin]
        state: State<F, W>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, W> {
        Admitted { #[pin] inner: F, wrap: Option<W> },
        Refused { error: Option<ModelError> },
    }
}

impl<F, W> AdmitFuture<F, W> {
    /// The model's answer `inner`, to be wrapped by `wrap`.
    pub(crate) fn admitted(inner: F, wrap: W) -> Self {
        Self {
            state: State::Admitted {
                inner,
                wrap: Some(wrap),
            },
        }
    }

    /// A refusal: the request fails with `error`.
    pub(crate) fn refused(error: ModelError) -> Self {
        Self {
            state: State::Refused { error: Some(error) },
        }
    }
}

impl<F, St, E, W> Future for AdmitFuture<F, W>
where
    F: Future<Output = Result<St, E>>,
    E: Into<BoxError>,
    W: WrapEvents<St>,
{
    type Output = Result<W::Stream, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Admitted { inner, wrap } => {
                let events = ready!(inner.poll(cx)).map_err(Into::into)?;
                let wrap = wrap.take().expect("AdmitFuture polled after completion");
                Poll::Ready(Ok(wrap.wrap(events)))
            }
            StateProj::Refused { error } => Poll::Ready(Err(error
                .take()
                .expect("AdmitFuture polled after completion")
                .into())),
        }
    }
}

impl<F, W> fmt::Debug for AdmitFuture<F, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Admitted { .. } => "admitted",
            State::Refused { .. } => "refused",
        };
        f.debug_struct("AdmitFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
