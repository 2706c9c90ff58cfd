use std::{
    fmt,
    sync::{Arc, OnceLock},
    task::{Context, Poll},
};

use agent_client_protocol::{
    Client,
    v1::{
        ConnectionTo,
        schema::{
            PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
            RequestPermissionRequest, ToolCallUpdate, ToolCallUpdateFields,
        },
    },
};
use futures_util::{FutureExt, future::BoxFuture};
use tower_service::Service;

use super::tool_call::{acp_kind, title};
use crate::{
    BoxError,
    permission::{Decision, Decisions, PendingCall, PermissionRequest},
};

/// The options offered for every call, in this order: clients and test kits that answer on their
/// own pick the first.
const OPTIONS: [(&str, &str, PermissionOptionKind); 4] = [
    ("allow_once", "Allow", PermissionOptionKind::AllowOnce),
    (
        "allow_always",
        "Always allow",
        PermissionOptionKind::AllowAlways,
    ),
    ("reject_once", "Reject", PermissionOptionKind::RejectOnce),
    (
        "reject_always",
        "Always reject",
        PermissionOptionKind::RejectAlways,
    ),
];

#[derive(Default)]
struct Inner {
    connection: OnceLock<ConnectionTo<Client>>,
}

/// An [`Approve`](crate::permission::Approve)r that asks the editor: `session/request_permission`
/// for each call, with the options allow once, always allow, reject, always reject (in that
/// order).
///
/// - "Always" answers are [`Decision::ApproveAlways`] and [`Decision::RejectAlways`]: the
///   [`PermissionLayer`](crate::permission::PermissionLayer) decides later calls of that tool in
///   that session without asking.
/// - A `cancelled` outcome cancels the turn (the client answers so once the user cancelled).
/// - The session is the request's thread id: the ACP agent runs each session's turns on the
///   thread of the session's id.
///
/// The approver is created before the connection exists (the tool stack is built first) and
/// learns the connection from the [ACP agent](super::AcpAgent) it is given to; until then, and
/// after the client is gone, it fails, which fails the call.
#[derive(Clone, Default)]
pub struct AcpApprover(Arc<Inner>);

impl AcpApprover {
    /// An approver with no connection yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks through `connection` from now on (the first connection wins).
    pub fn connect(&self, connection: ConnectionTo<Client>) {
        let _ = self.0.connection.set(connection);
    }

    async fn decide(self, request: PermissionRequest) -> Result<Decisions, BoxError> {
        let session = request.thread_id.to_string();
        let mut decisions = Decisions::all(Decision::Cancel);
        for call in request.calls {
            let decision = self.ask(&session, &call).await?;
            let cancel = decision == Decision::Cancel;
            decisions = decisions.with(call.id.clone(), decision);
            if cancel {
                // The rest of the turn is cancelled with it (the default above).
                break;
            }
        }
        Ok(decisions)
    }

    async fn ask(&self, session: &str, call: &PendingCall) -> Result<Decision, BoxError> {
        let connection = self
            .0
            .connection
            .get()
            .ok_or("the ACP approver has no connection")?;
        let tool_call = ToolCallUpdate::new(
            call.id.to_string(),
            ToolCallUpdateFields::new()
                .title(title(&call.name, &call.arguments))
                .kind(acp_kind(call.kind))
                .raw_input(call.arguments.clone()),
        );
        let options = OPTIONS
            .iter()
            .map(|(id, name, kind)| PermissionOption::new(*id, *name, *kind))
            .collect();
        let answer = connection
            .send_request(RequestPermissionRequest::new(
                session.to_owned(),
                tool_call,
                options,
            ))
            .block_task()
            .await?;
        let chosen = match answer.outcome {
            RequestPermissionOutcome::Selected(selected) => selected.option_id.0,
            _ => return Ok(Decision::Cancel),
        };
        Ok(match &*chosen {
            "allow_once" => Decision::Approve,
            "allow_always" => Decision::ApproveAlways,
            "reject_once" => Decision::Reject(declined(call)),
            "reject_always" => Decision::RejectAlways(declined(call)),
            other => return Err(format!("the client chose an unknown option `{other}`").into()),
        })
    }
}

fn declined(call: &PendingCall) -> String {
    format!("the user declined `{}` in the editor", call.name)
}

impl fmt::Debug for AcpApprover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpApprover")
            .field("connected", &self.0.connection.get().is_some())
            .finish()
    }
}

impl Service<PermissionRequest> for AcpApprover {
    type Response = Decisions;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Decisions, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: PermissionRequest) -> Self::Future {
        self.clone().decide(request).boxed()
    }
}
