//! [`AcpTools`]: lets the bridged agent run the calls it started, and waits for their results.

use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use tower_service::Service;

use super::{AcpBridge, turn::Verdict};
use crate::{
    bridge::Turn,
    permission::{Decision, Resolutions, StepDecisions},
    tool::{ToolCall, ToolError, ToolErrorKind, ToolOutput},
};

crate::bridge::side! {
    /// The tool side of an [`AcpBridge`]: see the [module](super).
    AcpTools(AcpBridge)
}

/// A run cancelled while the agent works on its call: its turn is cancelled at once.
fn cancelled(session: &dyn Turn) -> ToolError {
    session.cancel();
    ToolError::new(ToolErrorKind::Cancelled, "the run was cancelled")
}

/// How long the agent has, after a restart, to make an approved call again.
const REPLAY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The call made again by the agent in a new turn, and its result.
///
/// The agent's call counts as the approved one when it has the same name (or title) and
/// arguments (in any order); its permission request is then allowed. When the agent makes
/// another call first, the approval is not used for it: the approved call's result says so, and
/// the other call reaches the run as a new one (asked about as any). When the agent makes no call
/// within [`REPLAY_TIMEOUT`], or ends its turn without one, its turn is cancelled and the
/// approved call fails.
async fn replay(bridge: &AcpBridge, call: &ToolCall) -> Result<ToolOutput, ToolError> {
    let failed = |why: String| ToolError::new(ToolErrorKind::Failed, why);
    let session = bridge
        .session(&call.run.thread_id)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let approved = call.id.to_string();
    let prompt = super::replay_prompt(&call.name, &call.arguments);
    let expect = (call.name.clone(), call.arguments.clone(), approved.clone());
    bridge.prompt(&session, prompt, Some(expect)).await;
    let deadline = tokio::time::sleep(REPLAY_TIMEOUT);
    tokio::pin!(deadline);
    loop {
        let changed = session.changed.notified();
        let made = session.replayed(&approved);
        match &made {
            Some(id) => {
                if let Some(result) = session.result(id) {
                    return result.map_err(failed);
                }
            }
            None => {
                if let Some(other) = session.made_instead() {
                    return Ok(ToolOutput::error(format!(
                        "after a restart the agent did not make the approved call of `{}` again: \
                         it made `{other}` instead, which is not approved by this approval",
                        call.name
                    )));
                }
                if session.has_ended() {
                    return Err(failed(format!(
                        "the agent did not make the approved call of `{}` again after a restart",
                        call.name
                    )));
                }
            }
        }
        tokio::select! {
            () = changed => {}
            () = call.run.cancel.cancelled() => return Err(cancelled(session.as_ref())),
            () = &mut deadline, if made.is_none() => {
                session.cancel();
                return Err(failed(format!(
                    "the agent did not make the approved call of `{}` again within {} of a \
                     restart",
                    call.name,
                    humantime::format_duration(REPLAY_TIMEOUT)
                )));
            }
        }
    }
}

/// How the person allowed `call`: "always" is passed on to the agent, which knows what its own
/// "allow always" covers (the permission layer also remembers it, for the call's title).
fn allowed(call: &ToolCall) -> Verdict {
    let decided = call
        .run
        .extensions
        .get::<StepDecisions>()
        .map(|StepDecisions(decisions)| decisions.get(&call.id))
        .or_else(|| {
            call.run
                .extensions
                .get::<Resolutions>()
                .and_then(|resolutions| resolutions.get(&call.id))
        });
    match decided {
        Some(Decision::ApproveAlways) => Verdict::AllowAlways,
        _ => Verdict::Allow,
    }
}

impl Service<ToolCall> for AcpTools {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let bridge = self.bridge.clone();
        Box::pin(async move {
            let id = call.id.to_string();
            let session = match bridge.existing_session(&call.run.thread_id) {
                Some(session) if session.knows(&id) => session,
                // Approved after this bridge (and its agent) started again: the agent's turn
                // that asked is gone; a new one makes the call again.
                _ => return replay(&bridge, &call).await,
            };
            if session
                .proposed(&id)
                .is_some_and(|proposed| proposed != call.arguments)
            {
                session.decide(&id, Verdict::Reject);
                return Ok(ToolOutput::error(
                    "the agent runs its own tools and cannot take edited arguments: the call was \
                     refused; ask it again with the arguments you want",
                ));
            }
            session.decide(&id, allowed(&call));
            loop {
                let changed = session.changed.notified();
                if let Some(result) = session.result(&id) {
                    return result.map_err(|why| ToolError::new(ToolErrorKind::Failed, why));
                }
                tokio::select! {
                    () = changed => {}
                    () = call.run.cancel.cancelled() => return Err(cancelled(session.as_ref())),
                }
            }
        })
    }
}
