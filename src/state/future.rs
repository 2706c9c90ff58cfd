//! Response futures of [`State`](super::State).

use std::sync::Arc;

use serde_json::Value;

use super::{FromResult, Hooks, ResponseStream};
use crate::{
    context::SharedState,
    stream::wrap::{Wrap, response_future},
    tool::ToolReply,
};

/// Watches the model's stream for complete tool arguments.
pub(crate) struct WatchArguments(pub(crate) Option<(Arc<Hooks>, SharedState)>);

impl<St, E> Wrap<St, E> for WatchArguments {
    type Output = Result<ResponseStream<St>, E>;

    fn wrap(self, result: Result<St, E>) -> Self::Output {
        result.map(|stream| ResponseStream::new(stream, self.0))
    }
}

response_future! {
    /// Resolves to the model's stream, watched for complete tool arguments.
    pub struct ModelResponseFuture<F> = WatchArguments;
    impl<F, St, E> Future for ModelResponseFuture<F>
    where [F: Future<Output = Result<St, E>>]
    { type Output = Result<ResponseStream<St>, E>; }
}

/// The state hook of a tool's result, with the state and the call's arguments.
pub(crate) struct FromResultHook(pub(crate) Option<(FromResult, SharedState, Value)>);

impl<R: ToolReply, E> Wrap<R, E> for FromResultHook {
    type Output = Result<R, E>;

    fn wrap(self, result: Result<R, E>) -> Self::Output {
        let reply = result?;
        // A call that stopped at an interrupt has no result to take the state from.
        if let (Some(output), Some((hook, state, arguments))) = (reply.output(), self.0) {
            state.update(|state| hook(&arguments, output, state));
        }
        Ok(reply)
    }
}

response_future! {
    /// Resolves to the tool's result, after its `from_result` hook changed the state.
    pub struct ToolResponseFuture<F> = FromResultHook;
    impl<F, R, E> Future for ToolResponseFuture<F>
    where [F: Future<Output = Result<R, E>>, R: ToolReply]
    { type Output = Result<R, E>; }
}
