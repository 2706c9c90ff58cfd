//! [`AguiTools`]: the results of the remote agent's calls, and the answers to its interrupts.

use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use tower_service::Service;

use super::AguiBridge;
use crate::{
    permission::StepDecisions,
    tool::{ToolCall, ToolError, ToolErrorKind, ToolOutput},
};

crate::bridge::side! {
    /// The tool side of an [`AguiBridge`]: see the [module](super).
    AguiTools(AguiBridge)
}

impl Service<ToolCall> for AguiTools {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let bridge = self.bridge.clone();
        Box::pin(async move {
            let thread = &call.run.thread_id;
            let remote = bridge.remote(thread);
            let id = call.id.to_string();
            let interrupts = remote.take_interrupts(Some(&id));
            if !interrupts.is_empty() {
                // The first call of the step to run answers every interrupt of the remote run.
                let Some(StepDecisions(decisions)) = call.run.extensions.get::<StepDecisions>()
                else {
                    return Err(ToolError::new(
                        ToolErrorKind::Failed,
                        "the AG-UI agent waits for a decision about this call, and none was \
                         made (is a PermissionLayer with `Policy::ask_if(bridge.interrupted())` \
                         in front of these tools?)",
                    ));
                };
                bridge.resume(
                    &remote,
                    thread,
                    &interrupts,
                    &super::decided(decisions, &remote),
                );
            }
            loop {
                let changed = remote_changed(&remote);
                if let Some(result) = remote.result(&id) {
                    return result.map_err(|why| ToolError::new(ToolErrorKind::Failed, why));
                }
                tokio::select! {
                    () = changed => {}
                    () = call.run.cancel.cancelled() => {
                        return Err(ToolError::new(ToolErrorKind::Cancelled, "the run was cancelled"));
                    }
                }
            }
        })
    }
}

fn remote_changed(remote: &super::Remote) -> tokio::sync::futures::Notified<'_> {
    use crate::bridge::Turn;
    remote.changed().notified()
}
