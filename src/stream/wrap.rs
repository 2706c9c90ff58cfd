//! The response future of a layer that does something with its inner service's result once it
//! comes (wraps the model's stream, bounds a tool's result, classifies an error), written once:
//! it resolves to what a [`Wrap`] makes of the inner result. Each such layer's public response
//! future is a [`response_future!`] around it.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;

/// What a layer makes of its inner service's result (its own stream around the inner one, a
/// changed result, its own error). Taken once, when the inner future resolves.
pub(crate) trait Wrap<St, E> {
    /// What the layer's response future resolves to.
    type Output;

    /// The layer's result for the inner `result`.
    fn wrap(self, result: Result<St, E>) -> Self::Output;
}

pin_project! {
    /// Resolves to `wrap` applied to what `inner` resolves to.
    pub(crate) struct WrapFuture<F, W> {
        #[pin]
        inner: F,
        wrap: Option<W>,
    }
}

impl<F, W> WrapFuture<F, W> {
    pub(crate) fn new(inner: F, wrap: W) -> Self {
        Self {
            inner,
            wrap: Some(wrap),
        }
    }
}

impl<F, St, E, W> Future for WrapFuture<F, W>
where
    F: Future<Output = Result<St, E>>,
    W: Wrap<St, E>,
{
    type Output = W::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = ready!(this.inner.poll(cx));
        let wrap = this
            .wrap
            .take()
            .expect("a response future polled after completion");
        Poll::Ready(wrap.wrap(result))
    }
}

/// A public response future around a [`WrapFuture`] (as tower's `opaque_future!` is around a
/// combinator): the struct, `Debug`, `Future` with the output and bounds its users read, and a
/// `new(inner, wrap)` (unless the first token is `@own_new`: the caller writes its own, with
/// `Self::wrapping`). The inner future's type parameter is `F`.
macro_rules! response_future {
    (
        $(#[$attr:meta])*
        pub struct $name:ident<$($param:ident),+> = $wrap:ty;
        $($rest:tt)*
    ) => {
        $crate::stream::wrap::response_future! {
            @own_new
            $(#[$attr])*
            pub struct $name<$($param),+> = $wrap;
            $($rest)*
        }

        impl<$($param),+> $name<$($param),+> {
            pub(crate) fn new(inner: F, wrap: $wrap) -> Self {
                Self::wrapping(inner, wrap)
            }
        }
    };
    (
        @own_new
        $(#[$attr:meta])*
        pub struct $name:ident<$($param:ident),+> = $wrap:ty;
        impl<$($var:ident),+> Future for $self:ty
        where [$($bound:tt)*]
        { type Output = $output:ty; }
    ) => {
        pin_project_lite::pin_project! {
            $(#[$attr])*
            pub struct $name<$($param),+> {
                #[pin]
                inner: $crate::stream::wrap::WrapFuture<F, $wrap>,
            }
        }

        impl<$($param),+> $name<$($param),+> {
            fn wrapping(inner: F, wrap: $wrap) -> Self {
                Self {
                    inner: $crate::stream::wrap::WrapFuture::new(inner, wrap),
                }
            }
        }

        impl<$($param),+> ::std::fmt::Debug for $name<$($param),+> {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }

        impl<$($var),+> ::std::future::Future for $self
        where
            $($bound)*
        {
            type Output = $output;

            fn poll(
                self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<Self::Output> {
                self.project().inner.poll(cx)
            }
        }
    };
}

pub(crate) use response_future;
