use std::{
    fmt,
    sync::{Arc, OnceLock},
    task::{Context, Poll},
    time::Duration,
};

use agent_client_protocol::{
    Client,
    v1::{
        ConnectionTo,
        schema::{
            ClientCapabilities, CreateElicitationRequest, ElicitationAction, ElicitationFormMode,
            ElicitationPropertySchema, ElicitationSchema, ElicitationSessionScope,
            PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
            RequestPermissionRequest, ToolCallUpdate, ToolCallUpdateFields,
        },
    },
};
use futures_util::{FutureExt, future::BoxFuture};
use serde_json::Value;
use tower_service::Service;

use super::tool_call::{acp_kind, title};
use crate::{
    BoxError,
    permission::{Decision, Decisions, PendingCall, PermissionRequest, Question},
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

/// The options offered for a [`Question`] asked as a permission: each is answered on its own.
const ANSWERS: [(&str, &str, PermissionOptionKind); 2] = [
    ("allow_once", "Yes", PermissionOptionKind::AllowOnce),
    ("reject_once", "No", PermissionOptionKind::RejectOnce),
];

/// An editor to ask, through its connection: permissions, and forms where it shows them.
pub(crate) struct Editor {
    connection: ConnectionTo<Client>,
    /// Whether the client shows forms (`elicitation.form` among its capabilities).
    forms: bool,
}

#[derive(Default)]
struct Inner {
    client: OnceLock<Editor>,
}

/// An [`Approve`](crate::permission::Approve)r that asks the editor: `session/request_permission`
/// for each call, with the options allow once, always allow, reject, always reject (in that
/// order).
///
/// - "Always" answers are [`Decision::ApproveAlways`] and [`Decision::RejectAlways`]: the
///   [`PermissionLayer`](crate::permission::PermissionLayer) decides later calls of that tool in
///   that session without asking.
/// - A `cancelled` outcome cancels the turn (the client answers so once the user cancelled).
/// - A [`Question`] is asked as a form (`elicitation/create`, tied to the session and the call)
///   when the client supports forms: the question's schema when it has one that a form can show,
///   else an empty form to accept or decline. Accepted with content, it is
///   [`Decision::Edit`] with that content; accepted, [`Decision::Approve`]; declined,
///   [`Decision::Reject`]; cancelled, [`Decision::Cancel`]. A client without forms is asked a
///   permission with the question as its title and the options yes and no.
/// - A request the turn no longer waits for (the turn was cancelled) stays open 2 s for the
///   client's answer (after `session/cancel` an ACP client answers `cancelled` itself), and only
///   then is withdrawn with `$/cancel_request`.
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

    /// Asks through `connection` from now on, as a client of these `capabilities` can be asked
    /// (the first connection wins).
    pub fn connect(&self, connection: ConnectionTo<Client>, capabilities: &ClientCapabilities) {
        let _ = self.0.client.set(Editor::new(connection, capabilities));
    }

    async fn decide(self, request: PermissionRequest) -> Result<Decisions, BoxError> {
        let session = request.thread_id.to_string();
        let mut decisions = Decisions::all(Decision::Cancel);
        for call in request.calls {
            let decision = self.client()?.decide(&session, &call).await?;
            let cancel = decision == Decision::Cancel;
            decisions = decisions.with(call.id.clone(), decision);
            if cancel {
                // The rest of the turn is cancelled with it (the default above).
                break;
            }
        }
        Ok(decisions)
    }

    fn client(&self) -> Result<&Editor, BoxError> {
        Ok(self
            .0
            .client
            .get()
            .ok_or("the ACP approver has no connection")?)
    }
}

impl Editor {
    /// The editor at the other end of `connection`, a client of these `capabilities`.
    pub(crate) fn new(connection: ConnectionTo<Client>, capabilities: &ClientCapabilities) -> Self {
        let forms = capabilities
            .elicitation
            .as_ref()
            .is_some_and(|elicitation| elicitation.form.is_some());
        Self { connection, forms }
    }

    /// What the person decides about `call` of `session`: a [`Question`] asked as one, any
    /// other call as a permission with the options allow once, always allow, reject, always
    /// reject.
    pub(crate) async fn decide(
        &self,
        session: &str,
        call: &PendingCall,
    ) -> Result<Decision, BoxError> {
        match Question::of(&call.name, &call.arguments) {
            Some(question) => self.answer(session, call, &question).await,
            None => self.ask(session, call).await,
        }
    }

    async fn ask(&self, session: &str, call: &PendingCall) -> Result<Decision, BoxError> {
        let chosen = self.permission(session, call, &OPTIONS).await?;
        Ok(match chosen.as_deref() {
            None => Decision::Cancel,
            Some("allow_once") => Decision::Approve,
            Some("allow_always") => Decision::ApproveAlways,
            Some("reject_once") => Decision::Reject(declined(call)),
            Some("reject_always") => Decision::RejectAlways(declined(call)),
            Some(other) => {
                return Err(format!("the client chose an unknown option `{other}`").into());
            }
        })
    }

    /// Asks `question`: a form where the client shows forms, else a permission.
    async fn answer(
        &self,
        session: &str,
        call: &PendingCall,
        question: &Question,
    ) -> Result<Decision, BoxError> {
        if !self.forms {
            let chosen = self.permission(session, call, &ANSWERS).await?;
            return Ok(match chosen.as_deref() {
                None => Decision::Cancel,
                Some("allow_once") => Decision::Approve,
                Some("reject_once") => Decision::Reject(SAID_NO.to_owned()),
                Some(other) => {
                    return Err(format!("the client chose an unknown option `{other}`").into());
                }
            });
        }
        let schema = question.schema.as_ref().and_then(form);
        let asked = schema.is_some();
        let scope = ElicitationSessionScope::new(session.to_owned()).tool_call_id(
            agent_client_protocol::v1::schema::ToolCallId::new(call.id.to_string()),
        );
        let request = self.connection.send_request(CreateElicitationRequest::new(
            ElicitationFormMode::new(scope, schema.unwrap_or_default()),
            question.message.clone(),
        ));
        let answer = answered_or_withdrawn(request.block_task()).await?;
        Ok(match answer.action {
            ElicitationAction::Accept(accepted) => match accepted.content {
                Some(content) if asked => Decision::Edit(serde_json::to_value(content)?),
                _ => Decision::Approve,
            },
            ElicitationAction::Decline => Decision::Reject(SAID_NO.to_owned()),
            _ => Decision::Cancel,
        })
    }

    /// Asks a permission for `call` with `options`: the option chosen, `None` when cancelled.
    async fn permission(
        &self,
        session: &str,
        call: &PendingCall,
        options: &[(&'static str, &'static str, PermissionOptionKind)],
    ) -> Result<Option<String>, BoxError> {
        let tool_call = ToolCallUpdate::new(
            call.id.to_string(),
            ToolCallUpdateFields::new()
                .title(title(&call.name, &call.arguments))
                .kind(acp_kind(call.kind))
                .raw_input(call.arguments.clone()),
        );
        let options = options
            .iter()
            .map(|(id, name, kind)| PermissionOption::new(*id, *name, *kind))
            .collect();
        let request = self.connection.send_request(RequestPermissionRequest::new(
            session.to_owned(),
            tool_call,
            options,
        ));
        let answer = answered_or_withdrawn(request.block_task()).await?;
        Ok(match answer.outcome {
            RequestPermissionOutcome::Selected(selected) => Some(selected.option_id.0.to_string()),
            _ => None,
        })
    }
}

/// `schema` as a form, when a form can show it: an object of plain fields (text, numbers,
/// yes/no, choices).
fn form(schema: &Value) -> Option<ElicitationSchema> {
    let form: ElicitationSchema = serde_json::from_value(schema.clone()).ok()?;
    let plain = form
        .properties
        .values()
        .all(|property| !matches!(property, ElicitationPropertySchema::Other(_)));
    (plain && !form.properties.is_empty()).then_some(form)
}

/// How long a request the turn no longer waits for stays open for the client's answer before it
/// is withdrawn (`$/cancel_request`).
const WITHDRAW_AFTER: Duration = Duration::from_secs(2);

/// The client's answer to `request`.
///
/// When the turn stops waiting (it was cancelled), the request stays open a while: after
/// `session/cancel` an ACP client answers the turn's pending requests itself (`cancelled`), and
/// a `$/cancel_request` sent meanwhile would cross that answer. One still unanswered after
/// [`WITHDRAW_AFTER`] (the turn ended another way: the session closed or deleted) is withdrawn.
async fn answered_or_withdrawn<T: Send + 'static>(
    request: impl Future<Output = Result<T, agent_client_protocol::Error>> + Send + 'static,
) -> Result<T, BoxError> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut request = std::pin::pin!(request);
        let mut answer = answer;
        tokio::select! {
            result = &mut request => {
                let _ = answer.send(result);
                return;
            }
            () = answer.closed() => {}
        }
        // Dropping the request after the wait withdraws it, if it is still open.
        let _ = tokio::time::timeout(WITHDRAW_AFTER, request).await;
    });
    Ok(answered
        .await
        .map_err(|_| "the permission request was dropped")??)
}

/// The feedback of a question answered no.
const SAID_NO: &str = "the user said no in the editor";

fn declined(call: &PendingCall) -> String {
    format!("the user declined `{}` in the editor", call.name)
}

impl fmt::Debug for AcpApprover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpApprover")
            .field("connected", &self.0.client.get().is_some())
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
