//! The ACP agent: a [`Service<RunRequest>`](crate::run::RunRequest) served to an editor over
//! the official SDK, each turn a run of the [run engine](crate::runs).

use std::{
    fmt,
    future::Future,
    sync::{Arc, OnceLock},
};

use agent_client_protocol::{
    Agent, ConnectTo, Error,
    v1::schema::{
        ArchiveSessionRequest, AuthenticateRequest, CancelNotification, CloseSessionRequest,
        DeleteSessionRequest, ForkSessionRequest, Implementation, InitializeRequest,
        ListSessionsRequest, LoadSessionRequest, NewSessionRequest, PromptCapabilities,
        PromptRequest, ResumeSessionRequest, SetSessionConfigOptionRequest, SetSessionModeRequest,
        SetSessionTitleRequest, UnarchiveSessionRequest,
    },
};
mod handlers;
mod mcp;
mod modes;
mod sessions;
mod turns;

use self::sessions::Sessions;
use super::{AcpApprover, approve::Editor, lines::Outbox, tool_call::Kinds};
use crate::{context::Principal, permission::Mode, run::RunService, runs::Runs, tool::ToolSpec};

struct Config {
    info: Implementation,
    prompt: PromptCapabilities,
    mode: Mode,
    kinds: Kinds,
    approver: Option<AcpApprover>,
    /// Whom the connection's sessions belong to.
    principal: Option<Principal>,
    reach: Reach,
}

/// Where the editor is, which decides how a turn reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// On this machine, the agent its child (stdio): the stack's [`AcpLayer`](super::AcpLayer)
    /// streams the turns and its [`AcpApprover`] asks; the MCP servers the editor names are
    /// started here, for its sessions.
    Local,
    /// Across the network (the server's `/acp`): a turn is read from the log, whichever instance
    /// runs it, and the approvals it waits for are its interrupts, asked as permissions and
    /// answered through the engine; the MCP servers the editor names are not started (they are
    /// on its machine, not this one).
    #[cfg_attr(not(feature = "acp-server"), allow(dead_code))]
    Remote,
}

struct Shared {
    runs: Runs,
    config: Config,
    sessions: Sessions,
    /// Room for the turns' updates, when this side writes the wire.
    outbox: Option<Outbox>,
    /// The editor, to ask about the calls a remote turn waits at.
    editor: OnceLock<Editor>,
}

/// An ACP agent around any `Service<RunRequest, Response = RunOutcome>`: editors (Zed, and any
/// ACP client) start sessions and prompt turns; each session is a thread of the
/// [run engine](crate::runs) and each turn one of its runs, begun, limited, logged, cancelled
/// and continued after a crash as every run is (see [`runs`](Self::runs)).
///
/// - `initialize` answers protocol version 1 with what is really routed: `loadSession`, the
///   prompt capabilities set here (image, audio and embedded context by default), and the
///   session capabilities `list`, `resume`, `delete`, `fork`, `archive`, `title` and `close`.
/// - `session/list`: the sessions of the agent's principal (everyone's for an operator or
///   without one), newest first, each with its directory, title (its first prompt's first line)
///   and date, filtered by `cwd`: every session the engine's log keeps, in pages of 50
///   (`nextCursor`). `session/resume` opens a session again without sending its history;
///   `session/delete` cancels its turn and forgets it, with its runs; `session/fork` (unstable
///   in ACP) makes a new session with a session's whole conversation, a fork of its thread
///   ([`Runs::fork_thread`](crate::runs::Runs::fork_thread)); `session/archive`,
///   `session/unarchive` and `session/set_title` (unstable too) archive and name its thread, for
///   every door's list, and `session/list` takes the `archived` filter.
/// - `session/new`, `session/load` (the conversation replayed as updates, and the commands,
///   before the answer: any thread the log keeps, from before a restart or begun through another
///   door, on a log that outlives the process ([`engine`](Self::engine))). With the `mcp` feature, the
///   request's `mcpServers` (stdio and http) are connected and lend their tools to the session
///   (as [`RunTools`](crate::tool::RunTools) in each turn's extensions); a server that fails fails the request.
///   `session/close`, `session/set_mode` and `session/set_config_option` (the modes `ask`, `auto`,
///   `read-only`, also offered as a `mode` config option, kept in sync and sent as
///   `current_mode_update` / `config_option_update`).
/// - `session/prompt` runs the service with the session's conversation and the turn's
///   [`Notifier`](crate::acp::Notifier) (its [`Sinks`](crate::context::Sinks)) and permission [`Mode`] (in its
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
pub struct AcpAgent {
    runs: Runs,
    config: Config,
}

impl AcpAgent {
    /// An agent serving `service`, named after this crate, in mode `ask`, its turns in an engine
    /// of its own on a bounded in-memory log ([`runs`](Self::runs) for another).
    pub fn new(service: impl RunService) -> Self {
        Self::runs(Runs::new(service))
    }

    /// An agent whose turns are runs of `runs`: its log, limits, lease and busy-thread rule are
    /// the turns' (a server sharing that log sees, follows and cancels them).
    pub fn runs(runs: Runs) -> Self {
        Self {
            runs,
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
                principal: None,
                reach: Reach::Local,
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

    /// The principal the connection's client is (an editor on stdio: the user of the machine):
    /// its sessions belong to it, its turns run for it
    /// ([`RunContext::principal`](crate::context::RunContext::principal)), and a session of
    /// another principal kept in the [log](Self::engine) is unknown to it. Without one (the
    /// default), sessions belong to nobody and every client may load every session.
    #[must_use]
    pub fn principal(mut self, principal: Principal) -> Self {
        self.config.principal = Some(principal);
        self
    }

    /// An agent for an editor across the network (see [`Reach::Remote`]).
    #[cfg(feature = "acp-server")]
    #[must_use]
    pub(crate) fn remote(mut self) -> Self {
        self.config.reach = Reach::Remote;
        self
    }

    /// Configures the engine the turns run on: its [log](Runs::log) (a `RunStore` keeps the
    /// sessions, so `session/load` and `session/list` find them after a restart, and a server on
    /// the same store sees, follows and cancels their turns), its limits, its lease.
    ///
    /// ```
    /// # #[cfg(feature = "store")]
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
    /// use agent_tower::{demo, runs::PrincipalLimits, store::RunStore};
    ///
    /// let path = std::env::temp_dir().join("agent-tower-doc-acp-engine.db");
    /// let store = RunStore::open(&format!("sqlite://{}", path.display())).await?;
    /// let agent = demo::scripted()
    ///     .acp_agent()
    ///     .engine(|runs| runs.log(store).per_principal(PrincipalLimits::new().live_runs(2)));
    /// # drop(agent); Ok(()) }
    /// # #[cfg(not(feature = "store"))] fn main() {}
    /// ```
    #[must_use]
    pub fn engine(mut self, configure: impl FnOnce(Runs) -> Runs) -> Self {
        self.runs = configure(self.runs);
        self
    }
}

impl fmt::Debug for AcpAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpAgent")
            .field("info", &self.config.info)
            .field("mode", &self.config.mode)
            .finish_non_exhaustive()
    }
}

impl AcpAgent {
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
        self.serve_wire(|channel, answers, outbox| {
            super::lines::pump(channel, answers, reader, writer, outbox)
        })
        .await
    }

    /// Serves one client over a transport of whole messages (a WebSocket's text frames): `read`
    /// gives the client's messages to its [`Inbox`](super::lines::Inbox) until the client is
    /// done, and the agent's go to `outgoing`; hardened and bounded as
    /// [`serve_io`](Self::serve_io) is.
    #[cfg(feature = "acp-server")]
    pub(crate) async fn serve_messages<F, O>(
        self,
        read: impl FnOnce(super::lines::Inbox) -> F,
        outgoing: O,
    ) -> Result<(), Error>
    where
        F: Future<Output = std::io::Result<()>>,
        O: futures_util::Sink<String, Error = std::io::Error> + Unpin,
    {
        self.serve_wire(|channel, answers, outbox| {
            super::lines::exchange(channel, answers, outbox, read, outgoing)
        })
        .await
    }

    /// Serves one client over the wire `pump` runs between the SDK's end of a channel and the
    /// client, with an [`Outbox`] that bounds the turns' updates.
    async fn serve_wire<F>(
        self,
        pump: impl FnOnce(
            agent_client_protocol::Channel,
            futures_channel::mpsc::UnboundedSender<agent_client_protocol::TransportFrame>,
            Outbox,
        ) -> F,
    ) -> Result<(), Error>
    where
        F: Future<Output = std::io::Result<()>>,
    {
        let (wire, sdk) = agent_client_protocol::Channel::duplex();
        let answers = sdk.tx.clone();
        let outbox = Outbox::new(super::MAX_QUEUED_UPDATES);
        let (served, pumped) = tokio::join!(
            self.serve_with(sdk, Some(outbox.clone())),
            pump(wire, answers, outbox),
        );
        served?;
        pumped.map_err(Error::into_internal_error)
    }

    async fn serve_with(
        self,
        transport: impl ConnectTo<Agent> + 'static,
        outbox: Option<Outbox>,
    ) -> Result<(), Error> {
        if self.config.reach == Reach::Local {
            // Runs of this log that an instance left unfinished are continued here (a remote
            // editor's agent is a server's, whose engine does it).
            self.runs.sweep();
        }
        let shared = Arc::new(Shared {
            runs: self.runs,
            config: self.config,
            sessions: Sessions::default(),
            outbox,
            editor: OnceLock::new(),
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
                async |req: AuthenticateRequest, responder, _cx| {
                    handlers::authenticate(req, responder)
                },
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
            .on_receive_request(
                handler!(shared, |req: ListSessionsRequest, responder, cx| {
                    shared.list(req, responder, &cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: ResumeSessionRequest, responder, cx| {
                    shared.resume(req, responder, &cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: DeleteSessionRequest, responder, cx| {
                    shared.delete(req, responder, &cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: ForkSessionRequest, responder, cx| {
                    shared.fork(req, responder, cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: ArchiveSessionRequest, responder, cx| {
                    shared.archive(req, responder, &cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: UnarchiveSessionRequest, responder, cx| {
                    shared.unarchive(req, responder, &cx)
                }),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                handler!(shared, |req: SetSessionTitleRequest, responder, cx| {
                    shared.set_title(req, responder, &cx)
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
