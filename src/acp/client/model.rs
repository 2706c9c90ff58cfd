//! [`AcpModel`]: the bridged agent's turn, a step at a time.

use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use tower_service::Service;

use super::AcpBridge;
use crate::{
    BoxError,
    message::Message,
    model::{BoxModelStream, ModelRequest},
};

crate::bridge::side! {
    /// The model side of an [`AcpBridge`]: see the [module](super).
    AcpModel(AcpBridge)
}

impl Service<ModelRequest> for AcpModel {
    type Response = BoxModelStream;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<BoxModelStream, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let bridge = self.bridge.clone();
        Box::pin(async move {
            let session = bridge.session(&req.run.thread_id).await?;
            let after_tools = matches!(req.messages.last(), Some(Message::Tool { .. }));
            if session.is_open() && after_tools {
                // The turn goes on; calls the run did not make are refused.
                session.reject_undecided();
            } else {
                let prompt = super::prompt_of(&session.sent, &req.messages);
                bridge.prompt(&session, prompt, None).await;
            }
            let taken = crate::bridge::call_ids(&req.messages);
            Ok(crate::bridge::steps(session, &req.run, taken))
        })
    }
}
