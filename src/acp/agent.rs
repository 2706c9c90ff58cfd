//! The ACP agent: a [`Service<RunRequest>`](crate::run::RunRequest) served to an editor over
//! the official SDK.

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use agent_client_protocol::{
    Agent, Client, ConnectTo, Error,
    schema::ProtocolVersion,
    v1::{
        ConnectionTo, Responder,
        schema::{
            self as acp, AgentCapabilities, AvailableCommand, AvailableCommandInput,
            AvailableCommandsUpdate, CancelNotification, CloseSessionRequest, CloseSessionResponse,
            ConfigOptionUpdate, ContentBlock, ContentChunk, CurrentModeUpdate, Implementation,
            InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
            McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities,
            PromptRequest, PromptResponse, SessionCapabilities, SessionCloseCapabilities,
            SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionId,
            SessionInfoUpdate, SessionMode, SessionModeState, SessionUpdate,
            SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
            SetSessionModeResponse, UnstructuredCommandInput,
        },
    },
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tower_service::Service;

use super::{AcpApprover, Notifier, content, history, lines::Outbox, tool_call::Kinds};
use crate::{
    BoxError,
    id::{MessageId, RunId},
    map_error::{AcpAnswer, AcpStopReason, acp_answer},
    message::Message,
    permission::Mode,
    run::{RunContext, RunOutcome, RunRequest},
    tool::{RunTools, ToolRouter, ToolSpec},
};

/// The session modes: id, name, description, and the permission [`Mode`] each one runs in.
const MODES: [(&str, &str, &str, Mode); 3] = [
    (
        "ask",
        "Ask",
        "Asks before every tool that writes.",
        Mode::Interactive,
    ),
    (
        "auto",
        "Auto",
        "Runs tools as the permission policy allows.",
        Mode::Agentic,
    ),
    (
        "read-only",
        "Read-only",
        "Refuses every tool that writes.",
        Mode::ReadOnly,
    ),
];

fn mode_id(mode: Mode) -> &'static str {
    MODES
        .iter()
        .find(|(.., m)| *m == mode)
        .map_or("auto", |(id, ..)| id)
}

fn mode_of(id: &str) -> Option<Mode> {
    MODES
        .iter()
        .find(|(m, ..)| *m == id)
        .map(|(.., mode)| *mode)
}

fn mode_state(mode: Mode) -> SessionModeState {
    let modes = MODES
        .iter()
        .map(|(id, name, description, _)| SessionMode::new(*id, *name).description(*description))
        .collect();
    SessionModeState::new(mode_id(mode), modes)
}

/// The `mode` config option: the same modes as `modes`, kept in sync.
fn config_options(mode: Mode) -> Vec<SessionConfigOption> {
    let options: Vec<_> = MODES
        .iter()
        .map(|(id, name, description, _)| {
            SessionConfigSelectOption::new(*id, *name).description(*description)
        })
        .collect();
    vec![
        SessionConfigOption::select("mode", "Mode", mode_id(mode), options)
            .category(SessionConfigOptionCategory::Mode),
    ]
}

fn commands() -> AvailableCommandsUpdate {
    AvailableCommandsUpdate::new(vec![
        AvailableCommand::new("mode", "Switch the session's mode: ask, auto or read-only.").input(
            AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(
                "ask | auto | read-only",
            )),
        ),
    ])
}

/// One editor session: its conversation and its mode.
#[derive(Debug)]
struct Session {
    messages: Vec<Message>,
    state: Option<Value>,
    mode: Mode,
    titled: bool,
    /// The running turn's cancellation.
    turn: Option<CancellationToken>,
    /// Closed sessions keep their history, for `session/load`.
    open: bool,
    /// The tools of the MCP servers the client gave for this session.
    tools: Option<ToolRouter>,
}

#[derive(Debug, Default)]
struct Sessions(Mutex<HashMap<String, Session>>);

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct Config {
    info: Implementation,
    prompt: PromptCapabilities,
    mode: Mode,
    kinds: Kinds,
    approver: Option<AcpApprover>,
    #[cfg(feature = "store")]
    store: Option<crate::store::RunStore>,
}

struct Shared<S> {
    service: S,
    config: Config,
    sessions: Sessions,
    /// Room for the turns' updates, when this side writes the wire.
    outbox: Option<Outbox>,
}

/// An ACP agent around any `Service<RunRequest, Response = RunOutcome>`: editors (Zed, and any
/// ACP client) start sessions and prompt turns; each turn is one call of the service.
///
/// - `initialize` answers protocol version 1 with what is really routed: `loadSession`, the
///   prompt capabilities set here (image, audio and embedded context by default), `session/close`.
/// - `session/new`, `session/load` (the conversation replayed as updates, and the commands, before the answer; with
///   a [`store`](Self::store), sessions from before a restart too). With the `mcp` feature, the
///   request's `mcpServers` (stdio and http) are connected and lend their tools to the session
///   (as [`RunTools`] in each turn's extensions); a server that fails fails the request.
///   `session/close`, `session/set_mode` and `session/set_config_option` (the modes `ask`, `auto`,
///   `read-only`, also offered as a `mode` config option, kept in sync and sent as
///   `current_mode_update` / `config_option_update`).
/// - `session/prompt` runs the service with the session's conversation and the turn's
///   [`Notifier`] (its [`Sinks::acp`](crate::run::Sinks::acp)) and permission [`Mode`] (in its
///   extensions), so that an
///   [`AcpLayer`](super::AcpLayer) in the stack streams the turn and a
///   [`PermissionLayer`](crate::permission::PermissionLayer) asks in the session's mode. The
///   first prompt titles the session (`session_info_update`); `/mode <id>` switches mode without
///   a model call.
/// - `session/cancel` cancels the turn: the prompt is answered `cancelled` (a result, never an
///   error), and no update of that turn is sent after the answer.
///
/// Handlers only decode, spawn the turn and answer: nothing waits for the client on the
/// connection's dispatch loop.
///
/// ```no_run
/// # async fn run() -> Result<(), agent_client_protocol::Error> {
/// use agent_tower::acp::{AcpAgent, AcpApprover, AcpLayer};
/// use agent_tower::agent::Agent;
/// use agent_tower::model::scripted::ScriptedModel;
/// use agent_tower::permission::{PermissionLayer, Policy};
/// use agent_tower::tool::demo::demo_tools;
/// use tower::Layer;
///
/// let tools = demo_tools();
/// let approver = AcpApprover::new();
/// let acp = AcpLayer::new().tools(&tools.specs());
/// let tool_stack = acp.layer(
///     PermissionLayer::new(Policy::new().tools(&tools.specs()), approver.clone()).layer(tools.clone()),
/// );
/// let agent = Agent::new(acp.layer(ScriptedModel::new()), tool_stack).tool_specs(tools.specs());
/// AcpAgent::new(agent)
///     .approver(approver)
///     .serve(agent_client_protocol::Stdio::new())
///     .await
/// # }
/// ```
pub struct AcpAgent<S> {
    service: S,
    config: Config,
}

impl<S> AcpAgent<S> {
    /// An agent serving `service`, named after this crate, in mode `ask`.
    pub fn new(service: S) -> Self {
        Self {
            service,
            config: Config {
                info: Implementation::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
                    .title("agent-tower"),
                prompt: PromptCapabilities::new()
                    .image(true)
                    .audio(true)
                    .embedded_context(true),
                mode: Mode::Interactive,
                kinds: Kinds::default(),
                approver: None,
                #[cfg(feature = "store")]
                store: None,
            },
        }
    }

    /// The `agentInfo` of `initialize`.
    #[must_use]
    pub fn info(mut self, name: &str, version: &str, title: &str) -> Self {
        self.config.info = Implementation::new(name, version).title(title.to_owned());
        self
    }

    /// The prompt content the agent accepts besides text and resource links; prompts with other
    /// blocks are refused with invalid params.
    #[must_use]
    pub fn prompt_capabilities(mut self, capabilities: PromptCapabilities) -> Self {
        self.config.prompt = capabilities;
        self
    }

    /// The mode new sessions start in (default [`Mode::Interactive`], the mode `ask`).
    #[must_use]
    pub fn default_mode(mut self, mode: Mode) -> Self {
        self.config.mode = mode;
        self
    }

    /// Learns the kinds of these tools, for calls replayed by `session/load`.
    #[must_use]
    pub fn tools(mut self, specs: &[ToolSpec]) -> Self {
        self.config.kinds.learn(specs);
        self
    }

    /// The approver of the stack's permission layer: it asks through this agent's connection and
    /// forgets a session's "always" answers when the session closes.
    #[must_use]
    pub fn approver(mut self, approver: AcpApprover) -> Self {
        self.config.approver = Some(approver);
        self
    }

    /// Keeps every session's conversation and state in `store` (the session id is the thread
    /// id), so `session/load` finds sessions after a restart: each session is written when it
    /// is created and after every turn, before the turn's answer. A session loaded from the
    /// store starts in the default mode.
    #[cfg(feature = "store")]
    #[must_use]
    pub fn store(mut self, store: crate::store::RunStore) -> Self {
        self.config.store = Some(store);
        self
    }
}

impl<S> fmt::Debug for AcpAgent<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpAgent")
            .field("service", &std::any::type_name::<S>())
            .field("info", &self.config.info)
            .field("mode", &self.config.mode)
            .finish_non_exhaustive()
    }
}

impl<S> AcpAgent<S>
where
    S: Service<RunRequest, Response = RunOutcome> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError> + Send,
    S::Future: Send,
{
    /// Serves one client over `transport` (`agent_client_protocol::Stdio::new()` for an editor,
    /// one end of `agent_client_protocol::Channel::duplex()` in tests) until it disconnects.
    ///
    /// # Errors
    ///
    /// When the connection fails.
    pub async fn serve(self, transport: impl ConnectTo<Agent> + 'static) -> Result<(), Error> {
        self.serve_with(transport, None).await
    }

    /// Serves one client over newline-delimited JSON-RPC on `reader` and `writer` (stdin and
    /// stdout for an editor: `serve_io(tokio::io::stdin(), tokio::io::stdout())`) until the
    /// reader ends, hardened where the SDK's `Stdio` is not: a line that is not UTF-8 or not
    /// JSON-RPC is answered with an error (with the request's id when it has one) and the next
    /// line is read; lines are bounded ([`MAX_LINE_BYTES`](super::MAX_LINE_BYTES)); and a turn
    /// waits while [`MAX_QUEUED_UPDATES`](super::MAX_QUEUED_UPDATES) of its updates are not yet
    /// written, so a client that stops reading holds the model back instead of filling memory.
    ///
    /// # Errors
    ///
    /// When the connection fails, or reading or writing does.
    pub async fn serve_io<R, W>(self, reader: R, writer: W) -> Result<(), Error>
    where
        R: tokio::io::AsyncRead + Unpin,
        W: tokio::io::AsyncWrite + Unpin,
    {
        let (wire, sdk) = agent_client_protocol::Channel::duplex();
        let answers = sdk.tx.clone();
        let outbox = Outbox::new(super::MAX_QUEUED_UPDATES);
        let (served, pumped) = tokio::join!(
            self.serve_with(sdk, Some(outbox.clone())),
            super::lines::pump(wire, answers, reader, writer, outbox),
        );
        served?;
        pumped.map_err(Error::into_internal_error)
    }

    async fn serve_with(
        self,
        transport: impl ConnectTo<Agent> + 'static,
        outbox: Option<Outbox>,
    ) -> Result<(), Error> {
        let shared = Arc::new(Shared {
            service: self.service,
            config: self.config,
            sessions: Sessions::default(),
            outbox,
        });
        Agent
            .v1()
            .name("agent-tower")
            .on_receive_request(
                handler!(shared, |req: InitializeRequest, responder, cx| {
                    shared.initialize(req, responder, cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: NewSessionRequest, responder, cx| {
                    shared.new_session(req, responder, cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: LoadSessionRequest, responder, cx| {
                    shared.load(req, responder, cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: SetSessionModeRequest, responder, cx| {
                    shared.set_mode(req, responder, cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: SetSessionConfigOptionRequest,
                                  responder,
                                  cx| {
                    shared.set_config_option(req, responder, cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: PromptRequest, responder, cx| {
                    shared.prompt(req, responder, cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: CloseSessionRequest, responder, _cx| {
                    shared.close(req, responder)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                handler!(shared, |req: CancelNotification, _cx| {
                    shared.cancel(&req.session_id);
                    Ok(())
                }),
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_to(transport)
            .await
    }
}

/// A handler closure owning its own handle on the agent's shared state.
macro_rules! handler {
    ($shared:ident, |$($arg:ident $(: $ty:ty)?),*| $body:block) => {{
        let $shared = $shared.clone();
        async move |$($arg $(: $ty)?),*| $body
    }};
}
use handler;

fn not_found(session: &SessionId) -> Error {
    acp::Error::session_not_found(session.clone()).into()
}

/// The tools of a session's MCP servers (`None` when it has none).
#[cfg(feature = "mcp")]
async fn connect_mcp(servers: &[acp::McpServer]) -> Result<Option<ToolRouter>, Error> {
    use crate::tool::mcp::{McpConnection, McpServer};
    if servers.is_empty() {
        return Ok(None);
    }
    // Tool names are `{server}__{tool}`: the server's name keeps what every provider accepts.
    let name = |name: &str| -> String {
        name.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let servers = servers
        .iter()
        .map(|server| match server {
            acp::McpServer::Stdio(stdio) => Ok(McpServer::Stdio {
                name: name(&stdio.name),
                command: stdio.command.display().to_string(),
                args: stdio.args.clone(),
                env: stdio
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone()))
                    .collect(),
            }),
            acp::McpServer::Http(http) => Ok(McpServer::Http {
                name: name(&http.name),
                url: http.url.clone(),
                headers: http
                    .headers
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect(),
            }),
            _ => Err(Error::invalid_params().data(json!({
                "reason": "MCP servers over stdio and http are supported, not this one",
            }))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let tools = McpConnection::tools_of(&servers).await.map_err(|error| {
        tracing::warn!(%error, "an MCP server of the session failed");
        Error::internal_error().data(json!({"reason": error.to_string()}))
    })?;
    Ok(Some(tools))
}

/// Without the `mcp` feature, a session's MCP servers are not connected.
#[cfg(not(feature = "mcp"))]
#[allow(clippy::unused_async)]
async fn connect_mcp(servers: &[acp::McpServer]) -> Result<Option<ToolRouter>, Error> {
    if !servers.is_empty() {
        tracing::warn!(
            count = servers.len(),
            "MCP servers from the client are not connected (feature `mcp` is off)"
        );
    }
    Ok(None)
}

/// The internal error a session's store failure is answered with (the cause is logged).
#[cfg(feature = "store")]
fn store_failed(session: &SessionId, error: &crate::runs::LogError) -> Error {
    tracing::error!(%session, %error, "the session store failed");
    Error::internal_error().data(json!({"reason": "the session store is unavailable"}))
}

fn notify(cx: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate) {
    if let Err(error) = cx.send_notification(acp::SessionNotification::new(session.clone(), update))
    {
        tracing::debug!(%error, "client gone");
    }
}

impl<S> Shared<S>
where
    S: Service<RunRequest, Response = RunOutcome> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError> + Send,
    S::Future: Send,
{
    fn initialize(
        &self,
        req: InitializeRequest,
        responder: Responder<InitializeResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        tracing::info!(
            requested = req.protocol_version.as_u16(),
            client = ?req.client_info.as_ref().map(|c| &c.name),
            "initialize"
        );
        if let Some(approver) = &self.config.approver {
            approver.connect(cx);
        }
        // One version is spoken: the requested one if it is it, else it is the latest.
        responder.respond(
            InitializeResponse::new(ProtocolVersion::LATEST)
                .agent_capabilities(
                    AgentCapabilities::new()
                        .load_session(true)
                        .prompt_capabilities(self.config.prompt.clone())
                        .mcp_capabilities(McpCapabilities::new().http(cfg!(feature = "mcp")))
                        .session_capabilities(
                            SessionCapabilities::new().close(SessionCloseCapabilities::new()),
                        ),
                )
                .agent_info(self.config.info.clone()),
        )
    }

    fn new_session(
        self: &Arc<Self>,
        req: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let id = SessionId::new(RunId::new().to_string());
        let mode = self.config.mode;
        let shared = self.clone();
        cx.clone().spawn(async move {
            let tools = match connect_mcp(&req.mcp_servers).await {
                Ok(tools) => tools,
                Err(error) => return responder.respond_with_error(error),
            };
            shared.sessions.lock().insert(
                id.to_string(),
                Session {
                    messages: Vec::new(),
                    state: None,
                    mode,
                    titled: false,
                    turn: None,
                    open: true,
                    tools,
                },
            );
            if let Err(error) = shared.persist(&id).await {
                shared.sessions.lock().remove(&*id.0);
                return responder.respond_with_error(error);
            }
            responder.respond(
                NewSessionResponse::new(id.clone())
                    .modes(mode_state(mode))
                    .config_options(config_options(mode)),
            )?;
            notify(&cx, &id, SessionUpdate::AvailableCommandsUpdate(commands()));
            Ok(())
        })
    }

    /// Writes the session's conversation and state to the store, if there is one.
    #[cfg_attr(not(feature = "store"), allow(clippy::unused_async, unused_variables))]
    async fn persist(&self, session: &SessionId) -> Result<(), Error> {
        #[cfg(feature = "store")]
        if let Some(store) = &self.config.store {
            let Some((messages, state)) = self
                .sessions
                .lock()
                .get(&*session.0)
                .map(|s| (s.messages.clone(), s.state.clone()))
            else {
                return Ok(());
            };
            let thread = crate::id::ThreadId::from(&*session.0);
            crate::runs::RunLog::save_thread(store, &thread, &messages, state.as_ref())
                .await
                .map_err(|error| store_failed(session, &error))?;
        }
        Ok(())
    }

    /// Brings a session the store knows (from before a restart) back into memory, closed;
    /// `false` when no store knows it.
    #[cfg_attr(not(feature = "store"), allow(clippy::unused_async, unused_variables))]
    async fn restore(&self, session: &SessionId) -> Result<bool, Error> {
        #[cfg(feature = "store")]
        if let Some(store) = &self.config.store {
            let thread = crate::id::ThreadId::from(&*session.0);
            let Some(record) = crate::runs::RunLog::thread(store, &thread)
                .await
                .map_err(|error| store_failed(session, &error))?
            else {
                return Ok(false);
            };
            self.sessions
                .lock()
                .entry(session.to_string())
                .or_insert_with(|| Session {
                    titled: !record.messages.is_empty(),
                    messages: record.messages,
                    state: record.state,
                    mode: self.config.mode,
                    turn: None,
                    open: false,
                    tools: None,
                });
            return Ok(true);
        }
        Ok(false)
    }

    fn load(
        self: &Arc<Self>,
        req: LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let known = self.sessions.lock().contains_key(&*req.session_id.0);
        if known && req.mcp_servers.is_empty() {
            return self.replay(&req, responder, &cx);
        }
        // Not in memory (the store may have it, from before a restart), or MCP servers to
        // connect first.
        let shared = self.clone();
        cx.clone().spawn(async move {
            match shared.restore(&req.session_id).await {
                Ok(true) => {}
                Ok(false) if known => {}
                Ok(false) => return responder.respond_with_error(not_found(&req.session_id)),
                Err(error) => return responder.respond_with_error(error),
            }
            let tools = match connect_mcp(&req.mcp_servers).await {
                Ok(tools) => tools,
                Err(error) => return responder.respond_with_error(error),
            };
            if let Some(session) = shared.sessions.lock().get_mut(&*req.session_id.0) {
                session.tools = tools;
            }
            shared.replay(&req, responder, &cx)
        })
    }

    /// Reopens a known session: its conversation as updates, then the answer.
    fn replay(
        &self,
        req: &LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let (replay, mode) = {
            let mut sessions = self.sessions.lock();
            let Some(session) = sessions.get_mut(&*req.session_id.0) else {
                return responder.respond_with_error(not_found(&req.session_id));
            };
            session.open = true;
            (
                history::replay(&session.messages, &self.config.kinds),
                session.mode,
            )
        };
        // Everything the load sends goes out before the answer (the conversation, then the
        // commands): a client that stops reading at the answer has the whole session.
        for update in replay {
            notify(cx, &req.session_id, update);
        }
        notify(
            cx,
            &req.session_id,
            SessionUpdate::AvailableCommandsUpdate(commands()),
        );
        responder.respond(
            LoadSessionResponse::new()
                .modes(mode_state(mode))
                .config_options(config_options(mode)),
        )
    }

    /// Sets the session's mode and tells the client, in both vocabularies.
    fn switch_mode(
        &self,
        session: &SessionId,
        id: &str,
        cx: &ConnectionTo<Client>,
    ) -> Result<Mode, Error> {
        let mode = mode_of(id).ok_or_else(|| {
            Error::invalid_params().data(json!({
                "modeId": id,
                "reason": "unknown mode; one of ask, auto, read-only",
            }))
        })?;
        match self.sessions.lock().get_mut(&*session.0) {
            Some(s) if s.open => s.mode = mode,
            _ => return Err(not_found(session)),
        }
        notify(
            cx,
            session,
            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode_id(mode))),
        );
        notify(
            cx,
            session,
            SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(config_options(mode))),
        );
        Ok(mode)
    }

    fn set_mode(
        &self,
        req: SetSessionModeRequest,
        responder: Responder<SetSessionModeResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let switched = self.switch_mode(&req.session_id, &req.mode_id.0, &cx);
        responder.respond_with_result(switched.map(|_| SetSessionModeResponse::new()))
    }

    fn set_config_option(
        &self,
        req: SetSessionConfigOptionRequest,
        responder: Responder<SetSessionConfigOptionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let switched = match (&*req.config_id.0, req.value.as_value_id()) {
            ("mode", Some(value)) => self.switch_mode(&req.session_id, &value.0, &cx),
            (config, _) => Err(Error::invalid_params()
                .data(json!({"configId": config, "reason": "unknown option or value"}))),
        };
        responder.respond_with_result(
            switched.map(|mode| SetSessionConfigOptionResponse::new(config_options(mode))),
        )
    }

    fn close(
        &self,
        req: CloseSessionRequest,
        responder: Responder<CloseSessionResponse>,
    ) -> Result<(), Error> {
        let closed = match self.sessions.lock().get_mut(&*req.session_id.0) {
            Some(session) => {
                // Closing cancels the running turn, as `session/cancel` would.
                if let Some(turn) = session.turn.take() {
                    turn.cancel();
                }
                session.open = false;
                true
            }
            None => false,
        };
        if !closed {
            return responder.respond_with_error(not_found(&req.session_id));
        }
        if let Some(approver) = &self.config.approver {
            approver.forget(&req.session_id.0);
        }
        responder.respond(CloseSessionResponse::new())
    }

    fn cancel(&self, session: &SessionId) {
        if let Some(turn) = self
            .sessions
            .lock()
            .get(&*session.0)
            .and_then(|s| s.turn.as_ref())
        {
            tracing::info!(%session, "cancel");
            turn.cancel();
        }
    }

    fn prompt(
        self: &Arc<Self>,
        req: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        if let Some(block) = req
            .prompt
            .iter()
            .find(|block| !content::allowed(&self.config.prompt, block))
        {
            return responder.respond_with_error(Error::invalid_params().data(json!({
                "reason": format!(
                    "the prompt has content this agent does not accept (needs the `{}` prompt capability)",
                    content::needs(block).unwrap_or("unknown")
                ),
            })));
        }
        let parts = content::to_parts(&req.prompt);
        let text = crate::message::parts_to_text(&parts);
        if let Some(command) = text.trim().strip_prefix("/mode") {
            let answer = self
                .switch_mode(&req.session_id, command.trim(), &cx)
                .map(|mode| {
                    notify(
                        &cx,
                        &req.session_id,
                        SessionUpdate::AgentMessageChunk(
                            ContentChunk::new(ContentBlock::from(format!(
                                "Mode: {}.",
                                mode_id(mode)
                            )))
                            .message_id(MessageId::new().as_ref()),
                        ),
                    );
                    PromptResponse::new(acp::StopReason::EndTurn)
                });
            return responder.respond_with_result(answer);
        }

        let cancel = CancellationToken::new();
        let (mut messages, state, mode, title, tools) = {
            let mut sessions = self.sessions.lock();
            let session = match sessions.get_mut(&*req.session_id.0) {
                Some(session) if session.open => session,
                _ => return responder.respond_with_error(not_found(&req.session_id)),
            };
            if session.turn.is_some() {
                return responder.respond_with_error(Error::invalid_request().data(json!({
                    "reason": "a prompt is already running in this session",
                })));
            }
            session.turn = Some(cancel.clone());
            let title = !std::mem::replace(&mut session.titled, true);
            (
                session.messages.clone(),
                session.state.clone(),
                session.mode,
                title.then(|| session_title(&text)),
                session.tools.clone(),
            )
        };
        if let Some(title) = title {
            notify(
                &cx,
                &req.session_id,
                SessionUpdate::SessionInfoUpdate(SessionInfoUpdate::new().title(title)),
            );
        }
        messages.push(Message::User {
            id: MessageId::new(),
            content: parts,
        });

        let notifier =
            Notifier::new(cx.clone(), req.session_id.clone()).outbox(self.outbox.as_ref());
        let mut run = RunContext::new(req.session_id.0.as_ref().into(), RunId::new());
        run.cancel = cancel.clone();
        run.sinks.acp = Some(notifier.clone());
        run.extensions.insert(mode);
        if let Some(tools) = tools {
            run.extensions.insert(RunTools(tools));
        }
        let mut request = RunRequest::new(messages.clone());
        request.state = state;
        request.run = run;

        let shared = self.clone();
        let session = req.session_id;
        cx.spawn(async move {
            let result = shared
                .service
                .clone()
                .oneshot(request)
                .await
                .map_err(Into::into);
            let answer = shared.end_turn(&session, messages, &cancel, result);
            // Kept before it is answered: an answered turn survives a restart.
            if let Err(error) = shared.persist(&session).await {
                tracing::error!(%session, ?error, "the turn could not be kept in the store");
            }
            // Nothing of this turn reaches the client after its answer.
            notifier.close();
            if let Err(error) = responder.respond_with_result(answer) {
                tracing::debug!(%error, "the prompt's answer could not be sent");
            }
            Ok(())
        })
    }

    /// Keeps what the turn produced and says how it ended.
    fn end_turn(
        &self,
        session: &SessionId,
        asked: Vec<Message>,
        cancel: &CancellationToken,
        result: Result<RunOutcome, BoxError>,
    ) -> Result<PromptResponse, Error> {
        let mut sessions = self.sessions.lock();
        let entry = sessions.get_mut(&*session.0);
        let answer = match result {
            Ok(outcome) => {
                if let Some(entry) = entry {
                    entry.messages = outcome.messages;
                    entry.state = outcome.state;
                    entry.turn = None;
                }
                Ok(AcpStopReason::from(outcome.stop))
            }
            Err(error) => {
                if let Some(entry) = entry {
                    entry.messages = asked;
                    entry.turn = None;
                }
                match acp_answer(error.as_ref()) {
                    AcpAnswer::Stop(reason) => Ok(reason),
                    AcpAnswer::Error {
                        code,
                        message,
                        kind,
                    } => {
                        tracing::warn!(%error, "prompt failed");
                        let code = i32::try_from(code).unwrap_or(-32603);
                        Err(Error::new(code, message).data(json!({ "kind": kind })))
                    }
                }
            }
        };
        drop(sessions);
        // A cancelled turn answers `cancelled`, whatever the model or a tool made of it.
        if cancel.is_cancelled() {
            return Ok(PromptResponse::new(acp::StopReason::Cancelled));
        }
        answer.map(|reason| PromptResponse::new(stop_reason(reason)))
    }
}

fn stop_reason(reason: AcpStopReason) -> acp::StopReason {
    match reason {
        AcpStopReason::EndTurn => acp::StopReason::EndTurn,
        AcpStopReason::MaxTokens => acp::StopReason::MaxTokens,
        AcpStopReason::MaxTurnRequests => acp::StopReason::MaxTurnRequests,
        AcpStopReason::Refusal => acp::StopReason::Refusal,
        AcpStopReason::Cancelled => acp::StopReason::Cancelled,
    }
}

/// A session's title: the first line of its first prompt, at most 80 characters.
fn session_title(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("New session")
        .trim();
    match line.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}
