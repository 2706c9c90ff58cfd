//! Response futures of [`Truncate`](super::Truncate).

use std::sync::Arc;

use super::{ResponseStream, bound, layer::Config};
use crate::{
    stream::wrap::{Wrap, response_future},
    tool::ToolReply,
};

/// Splits the large deltas of the model's stream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SplitDeltas(pub(crate) usize);

impl<St, E> Wrap<St, E> for SplitDeltas {
    type Output = Result<ResponseStream<St>, E>;

    fn wrap(self, result: Result<St, E>) -> Self::Output {
        result.map(|stream| ResponseStream::new(stream, self.0))
    }
}

response_future! {
    /// Resolves to the model's stream with large deltas split.
    pub struct ModelResponseFuture<F> = SplitDeltas;
    impl<F, St, E> Future for ModelResponseFuture<F>
    where [F: Future<Output = Result<St, E>>]
    { type Output = Result<ResponseStream<St>, E>; }
}

/// Gives a tool's result a bounded display copy when it is too large.
pub(crate) struct Bound(pub(crate) Arc<Config>);

impl<R: ToolReply, E> Wrap<R, E> for Bound {
    type Output = Result<R, E>;

    fn wrap(self, result: Result<R, E>) -> Self::Output {
        let mut reply = result?;
        if let Some(output) = reply.output_mut() {
            bound(output, &self.0);
        }
        Ok(reply)
    }
}

response_future! {
    /// Resolves to the tool's result, with a bounded display copy when it is too large.
    pub struct ToolResponseFuture<F> = Bound;
    impl<F, R, E> Future for ToolResponseFuture<F>
    where [F: Future<Output = Result<R, E>>, R: ToolReply]
    { type Output = Result<R, E>; }
}
