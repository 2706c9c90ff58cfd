use std::{
    pin::Pin,
    task::{Context, Poll},
};

use futures_sink::Sink;

use super::{Transport, error::TransportClosed};

/// The transport a layer sends one run's events to: the run's own sink (from its
/// [`Sinks`](crate::context::Sinks)), else the layer's default.
#[derive(Debug, Clone)]
pub enum Route<R, L> {
    /// The run's own sink.
    Run(R),
    /// The layer's default transport.
    Layer(L),
}

impl<R, L> Route<R, L> {
    /// The run's sink if it has one, else the layer's default; neither: `None`.
    #[must_use]
    pub fn of(run: Option<&R>, layer: Option<&L>) -> Option<Self>
    where
        R: Clone,
        L: Clone,
    {
        match (run, layer) {
            (Some(run), _) => Some(Self::Run(run.clone())),
            (None, Some(layer)) => Some(Self::Layer(layer.clone())),
            (None, None) => None,
        }
    }
}

macro_rules! both {
    ($self:expr, $sink:ident => $body:expr) => {
        match $self.get_mut() {
            Route::Run($sink) => $body,
            Route::Layer($sink) => $body,
        }
    };
}

impl<R, L, E> Sink<E> for Route<R, L>
where
    R: Transport<E>,
    L: Transport<E>,
{
    type Error = TransportClosed;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        both!(self, sink => Pin::new(sink).poll_ready(cx))
    }

    fn start_send(self: Pin<&mut Self>, item: E) -> Result<(), Self::Error> {
        both!(self, sink => Pin::new(sink).start_send(item))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        both!(self, sink => Pin::new(sink).poll_flush(cx))
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        both!(self, sink => Pin::new(sink).poll_close(cx))
    }
}

impl<R, L, E> Transport<E> for Route<R, L>
where
    R: Transport<E>,
    L: Transport<E>,
{
    fn send_now(&mut self, event: E) -> Result<(), TransportClosed> {
        match self {
            Self::Run(sink) => sink.send_now(event),
            Self::Layer(sink) => sink.send_now(event),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Recording;

    #[test]
    fn the_run_sink_wins_over_the_layer_default() {
        let (run, layer) = (Recording::new(), Recording::new());
        let mut route = Route::of(Some(&run), Some(&layer)).unwrap();
        route.send_now(1).unwrap();
        let mut fallback = Route::<Recording<i32>, _>::of(None, Some(&layer)).unwrap();
        fallback.send_now(2).unwrap();
        assert_eq!((run.events(), layer.events()), (vec![1], vec![2]));
        assert!(Route::<Recording<i32>, Recording<i32>>::of(None, None).is_none());
    }
}
