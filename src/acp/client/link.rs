//! The bridged agent's process and its connection, started again when the agent exits.
//!
//! [`start`] spawns the agent (an allow-listed environment, its own process group) and opens the
//! ACP connection over its stdio, or opens a remote agent's WebSocket; `initialize`s it and,
//! when its command names a method, `authenticate`s. [`supervise`] waits for the agent to exit and starts it again with back-off
//! (1 s, doubling to 60 s; back to 1 s once it ran for a minute), publishing each state as a
//! [`Link`]: runs get `agent_unavailable` while it is down, and the sessions of the agent that
//! exited end with `agent_exited`.

use std::{sync::Arc, time::Duration};

use agent_client_protocol::{
    Agent, ByteStreams, Client, ConnectTo,
    schema::ProtocolVersion,
    v1::{
        ConnectionTo,
        schema::{
            self as acp, AuthenticateRequest, InitializeRequest, RequestPermissionRequest,
            SessionNotification,
        },
    },
};
use tokio::sync::watch;
use tokio_util::{
    compat::{Compat, TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt},
    sync::CancellationToken,
};

use super::{AcpCommand, Routes, Target};
use crate::acp::lines::{Inbox, Outbox, exchange};
use crate::bridge::{BridgeError, BridgeErrorKind};

/// The agent as the bridge sees it now.
pub(super) type Link = crate::child::Link<Arc<Connection>>;

/// The connection of `link`, or why there is none.
pub(super) fn connection(link: &Link) -> Result<Arc<Connection>, BridgeError> {
    link.up("the ACP agent")
        .map_err(|why| BridgeError::new(BridgeErrorKind::AgentUnavailable, why))
}

/// A running agent's connection and the sessions opened on it.
pub(super) struct Connection {
    pub(super) connection: ConnectionTo<Agent>,
    pub(super) routes: Arc<Routes>,
    /// Fires once the agent exited (its sessions are ended first).
    pub(super) closed: CancellationToken,
    /// The authentication methods the agent offers, for the error that says one is needed.
    pub(super) auth_methods: Vec<acp::AuthMethod>,
}

/// The agent's refusal of `request`, as a bridge error: `auth_required` when it asks for an
/// authentication (naming the methods it offers, `methods`), `protocol_error` when it says the
/// request is malformed or unknown to it, `agent_error` otherwise.
pub(super) fn refused(
    request: &str,
    error: &agent_client_protocol::Error,
    methods: &[acp::AuthMethod],
) -> BridgeError {
    use acp::ErrorCode as Code;
    if is_gone(error) {
        return BridgeError::new(
            BridgeErrorKind::AgentExited,
            format!("the ACP agent exited before answering `{request}`"),
        );
    }
    let code = acp::ErrorCode::from(i32::from(error.code));
    let kind = match code {
        Code::AuthRequired => BridgeErrorKind::AuthRequired,
        Code::ParseError | Code::InvalidRequest | Code::MethodNotFound | Code::InvalidParams => {
            BridgeErrorKind::ProtocolError
        }
        _ => BridgeErrorKind::AgentError,
    };
    let mut message = format!("the ACP agent refused `{request}`: {error}");
    if kind == BridgeErrorKind::AuthRequired {
        let offered: Vec<String> = methods
            .iter()
            .map(|method| format!("`{}` ({})", method.id(), method.name()))
            .collect();
        if offered.is_empty() {
            message.push_str("; it offers no authentication method");
        } else {
            message.push_str(&format!(
                "; name one of its authentication methods ({}) with AcpCommand::authenticate \
                 (--agent-auth)",
                offered.join(", ")
            ));
        }
    }
    BridgeError::new(kind, message)
}

/// Whether `error` is the connection's end (the request will never be answered), not the
/// agent's answer.
pub(super) fn is_gone(error: &agent_client_protocol::Error) -> bool {
    agent_client_protocol::is_incoming_transport_closed(error)
        || agent_client_protocol::is_connection_terminated(error)
}

/// Back-off between starts: from [`RESTART_MIN`] doubling to [`RESTART_MAX`]; back to the
/// start once the agent ran for [`RESTART_MAX`].
impl crate::child::Supervised for Arc<Connection> {
    fn closed(&self) -> impl std::future::Future<Output = ()> + Send {
        let closed = self.closed.clone();
        async move { closed.cancelled().await }
    }
}

/// Watches the agent: when it exits, starts it again (with back-off) until `stop` fires,
/// publishing each state on `link`.
pub(super) async fn supervise(
    command: AcpCommand,
    current: Arc<Connection>,
    link: watch::Sender<Link>,
    stop: CancellationToken,
) {
    let restart = || {
        let (command, stop) = (command.clone(), stop.clone());
        async move {
            start(&command, &stop)
                .await
                .map_err(|error| error.to_string())
        }
    };
    crate::child::supervise(
        "the ACP agent".to_owned(),
        current,
        restart,
        link,
        stop.clone(),
    )
    .await;
}

/// Starts the agent of `command` and opens its connection: `initialize` (within the command's
/// start timeout), then `authenticate` when the command names a method. Whatever fails, the
/// agent is stopped. `stop` ends the connection (and the agent) later.
pub(super) async fn start(
    command: &AcpCommand,
    stop: &CancellationToken,
) -> Result<Arc<Connection>, BridgeError> {
    let unavailable = |why: String| BridgeError::new(BridgeErrorKind::AgentUnavailable, why);
    let routes = Arc::new(Routes::default());
    let closed = CancellationToken::new();
    // This start's own end: `stop`, or a failure before the agent is up.
    let ended = stop.child_token();
    let (ready, connected) = tokio::sync::oneshot::channel();
    match &command.target {
        Target::Spawn { program, args } => {
            let (group, transport) = spawn(command, program, args)?;
            tokio::spawn(connect(
                Some(group),
                transport,
                routes.clone(),
                ready,
                closed.clone(),
                ended.clone(),
            ));
        }
        Target::Dial { url, token } => {
            let transport = dial(url, token.as_deref(), command.start_timeout).await?;
            tokio::spawn(connect(
                None,
                transport,
                routes.clone(),
                ready,
                closed.clone(),
                ended.clone(),
            ));
        }
    }
    let failed = |error: BridgeError| {
        ended.cancel();
        error
    };
    let Ok(connection) = connected.await else {
        return Err(failed(unavailable(
            "the ACP agent's connection could not be opened".to_owned(),
        )));
    };
    let within = |what: &'static str| {
        let closed = closed.clone();
        let timeout = command.start_timeout;
        async move {
            tokio::select! {
                () = closed.cancelled() => BridgeError::new(
                    BridgeErrorKind::AgentExited,
                    format!("the ACP agent exited before answering `{what}`"),
                ),
                () = tokio::time::sleep(timeout) => unavailable(format!(
                    "the ACP agent did not answer `{what}` within {}",
                    humantime::format_duration(timeout)
                )),
            }
        }
    };
    let init = connection
        .send_request(InitializeRequest::new(ProtocolVersion::V1))
        .block_task();
    let initialized = tokio::select! {
        answer = init => answer.map_err(|e| failed(BridgeError::new(
            BridgeErrorKind::ProtocolError,
            format!("the ACP agent refused `initialize`: {e}"),
        )))?,
        error = within("initialize") => return Err(failed(error)),
    };
    let link = Arc::new(Connection {
        connection,
        routes,
        closed: closed.clone(),
        auth_methods: initialized.auth_methods,
    });
    if let Some(method) = &command.auth_method {
        if !link
            .auth_methods
            .iter()
            .any(|m| m.id().0.as_ref() == method)
        {
            let offered: Vec<String> = link
                .auth_methods
                .iter()
                .map(|m| format!("`{}`", m.id()))
                .collect();
            return Err(failed(BridgeError::new(
                BridgeErrorKind::AuthRequired,
                format!(
                    "the ACP agent offers no authentication method `{method}` (it offers: {})",
                    if offered.is_empty() {
                        "none".to_owned()
                    } else {
                        offered.join(", ")
                    }
                ),
            )));
        }
        let authenticate = link
            .connection
            .send_request(AuthenticateRequest::new(method.clone()))
            .block_task();
        tokio::select! {
            answer = authenticate => {
                answer.map_err(|e| failed(BridgeError::new(
                    BridgeErrorKind::AuthRequired,
                    format!("the ACP agent refused `authenticate` with `{method}`: {e}"),
                )))?;
            }
            error = within("authenticate") => return Err(failed(error)),
        }
    }
    Ok(link)
}

/// Starts `program` with `args` as `command` says (its environment, its own process group) and
/// opens its stdio.
fn spawn(
    command: &AcpCommand,
    program: &std::path::Path,
    args: &[String],
) -> Result<(Group, Stdio), BridgeError> {
    let unavailable = |why: String| BridgeError::new(BridgeErrorKind::AgentUnavailable, why);
    let mut process = crate::child::command(program, args, &command.inherit, &command.env);
    process
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // Its own process group, killed whole: agents are often started through a launcher
    // (`npx …`, `uvx …`) whose child is the agent.
    #[cfg(unix)]
    process.process_group(0);
    let mut child = process
        .spawn()
        .map_err(|e| unavailable(format!("the ACP agent could not be started: {e}")))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(unavailable(
            "the ACP agent's stdio could not be opened".to_owned(),
        ));
    };
    crate::child::log_stderr("acp".to_owned(), stderr);
    Ok((
        Group(child),
        ByteStreams::new(stdin.compat_write(), stdout.compat()),
    ))
}

/// A child's stdio, as the SDK reads and writes it.
type Stdio = ByteStreams<Compat<tokio::process::ChildStdin>, Compat<tokio::process::ChildStdout>>;

/// Opens the WebSocket of the agent at `url` (with the bearer `token`), within `timeout`, and
/// carries its text frames to and from the SDK's end of a channel, which it returns: the frames
/// are read and written as the agent's own connections are (malformed requests answered with
/// their id).
async fn dial(
    url: &str,
    token: Option<&str>,
    timeout: Duration,
) -> Result<agent_client_protocol::Channel, BridgeError> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::{
        self, Message, client::IntoClientRequest, http::header::AUTHORIZATION,
    };
    let unavailable = |why: String| BridgeError::new(BridgeErrorKind::AgentUnavailable, why);
    let mut request = url
        .into_client_request()
        .map_err(|e| unavailable(format!("the ACP agent's URL `{url}`: {e}")))?;
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().map_err(|_| {
            BridgeError::new(
                BridgeErrorKind::AuthRequired,
                "the ACP agent's token is not a header value",
            )
        })?;
        request.headers_mut().insert(AUTHORIZATION, value);
    }
    let socket = match tokio::time::timeout(timeout, tokio_tungstenite::connect_async(request))
        .await
    {
        Ok(Ok((socket, _))) => socket,
        Ok(Err(tungstenite::Error::Http(response)))
            if matches!(response.status().as_u16(), 401 | 403) =>
        {
            return Err(BridgeError::new(
                BridgeErrorKind::AuthRequired,
                format!(
                    "the ACP agent at {url} refused the connection ({}): its token is missing or wrong",
                    response.status()
                ),
            ));
        }
        Ok(Err(error)) => {
            return Err(unavailable(format!(
                "the ACP agent at {url} could not be reached: {error}"
            )));
        }
        Err(_) => {
            return Err(unavailable(format!(
                "the ACP agent at {url} did not answer within {}",
                humantime::format_duration(timeout)
            )));
        }
    };
    let (wire, sdk) = agent_client_protocol::Channel::duplex();
    let answers = sdk.tx.clone();
    tokio::spawn(async move {
        let (sink, mut incoming) = socket.split();
        let outgoing = sink
            .sink_map_err(std::io::Error::other)
            .with(|text: String| std::future::ready(Ok::<_, std::io::Error>(Message::text(text))));
        let read = |inbox: Inbox| async move {
            while let Some(Ok(message)) = incoming.next().await {
                match message {
                    Message::Text(text) if !inbox.message(text.as_bytes()).await => break,
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            Ok(())
        };
        let outbox = Outbox::new(crate::acp::MAX_QUEUED_UPDATES);
        if let Err(error) = exchange(wire, answers, outbox, read, outgoing).await {
            tracing::debug!(%error, "the ACP agent's WebSocket ended");
        }
    });
    Ok(sdk)
}

/// The agent's process group: killed whole when dropped (the connection task ended, or the
/// runtime went down with it).
struct Group(tokio::process::Child);

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .0
            .id()
            .and_then(|pid| rustix::process::Pid::from_raw(pid.cast_signed()))
        {
            let _gone = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _gone = self.0.start_kill();
    }
}

/// How long an agent whose connection closed has to exit before it is killed.
pub(super) const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Runs the connection: routes the agent's updates and permission requests to their sessions,
/// until the agent exits or `stop` fires; then ends every session (saying how the agent exited)
/// and kills what is left of its process group.
async fn connect(
    child: Option<Group>,
    transport: impl ConnectTo<Client> + 'static,
    routes: Arc<Routes>,
    ready: tokio::sync::oneshot::Sender<ConnectionTo<Agent>>,
    closed: CancellationToken,
    stop: CancellationToken,
) {
    let updates = routes.clone();
    let asks = routes.clone();
    let result = Client
        .v1()
        .name("agent-tower")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                if let Some(session) = updates.get(&notification.session_id) {
                    super::route(&session, notification.update);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                match asks.get(&request.session_id) {
                    Some(session) => session.ask(
                        &request.tool_call.tool_call_id.to_string(),
                        request.options,
                        responder,
                    ),
                    None => responder.respond(acp::RequestPermissionResponse::new(
                        acp::RequestPermissionOutcome::Cancelled,
                    ))?,
                }
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async |connection: ConnectionTo<Agent>| {
            let _ = ready.send(connection.clone());
            tokio::select! {
                () = connection.incoming_closed() => {}
                () = stop.cancelled() => {}
            }
            Ok(())
        })
        .await;
    if let Err(error) = result {
        tracing::warn!(%error, "the ACP agent's connection ended");
    }
    let why = match child {
        // Its stdout closed: it exits (or is made to).
        Some(mut child) => match tokio::time::timeout(EXIT_GRACE, child.0.wait()).await {
            Ok(Ok(status)) => format!("the ACP agent exited ({status})"),
            _ => "the ACP agent closed its connection".to_owned(),
        },
        None => "the remote ACP agent closed the connection".to_owned(),
    };
    if !stop.is_cancelled() {
        tracing::warn!("{why}");
    }
    routes.end_all(&BridgeError::new(BridgeErrorKind::AgentExited, why));
    closed.cancel();
}
