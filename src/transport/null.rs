use std::{
    pin::Pin,
    task::{Context, Poll},
};

use futures_sink::Sink;

use super::{Transport, error::TransportClosed};

/// A transport that accepts and drops every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct Null;

impl<E> Sink<E> for Null {
    type Error = TransportClosed;

    fn poll_ready(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, _item: E) -> Result<(), Self::Error> {
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
}

impl<E> Transport<E> for Null {
    fn send_now(&mut self, _event: E) -> Result<(), TransportClosed> {
        Ok(())
    }
}
