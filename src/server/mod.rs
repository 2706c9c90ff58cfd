//! The AG-UI HTTP server: an axum [`Router`] that maps HTTP onto the run engine
//! ([`Runs`]): every route starts runs through it or follows its log.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> std::io::Result<()> {
//! use agent_tower::{agent::Agent, agui::AguiLayer, model::scripted::ScriptedModel, server, tool::ToolRouter};
//! use tower::Layer;
//!
//! let agui = AguiLayer::new();
//! let agent = agui.layer(Agent::new(agui.layer(ScriptedModel::new()), agui.layer(ToolRouter::new())));
//! let app = server::router(agent);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! # Routes
//!
//! - `POST /` (see [`AguiServer::path`]): a `RunAgentInput` JSON body; the answer streams the run's
//!   events as `text/event-stream` (`id: {runId}:{seq}` and `data: <json>` per event, a `: ping`
//!   comment while the run is quiet) or, when the client prefers it, `application/x-ndjson` or
//!   AG-UI protobuf (feature `proto`).
//! - `GET /ws`: the same over a WebSocket ([`ws`] module docs).
//! - `GET /runs/{runId}/events`: the run's events after `Last-Event-ID` (or `?after=N`), then live
//!   until its end; `204` when an ended run has nothing left, `404` for an unknown run.
//! - `POST /runs/{runId}/cancel`: cancels the run, whichever instance of the server drives it
//!   (its principal's or an operator's token); `202` while it stops (every follower gets its
//!   end), `200` with the status of a run that already ended, `404` for an unknown run
//!   ([`Runs::cancel`]).
//! - `GET /threads/{threadId}`: the thread's conversation, state, runs, pending interrupts, and
//!   branches (the thread it was forked from, the caller's forks of it).
//! - `GET /threads` (a page, or followed live), `PATCH` and `DELETE /threads/{threadId}` (name,
//!   archive, delete), `POST /threads/{threadId}/fork` (a new thread with the conversation up to
//!   a message): the caller's thread list.
//! - `GET /budget` (with [`AguiServer::budget`]): what the caller spent today and may still
//!   spend; with `?runId=`, what one of its runs spent.
//! - `GET /interrupts?status=pending|resolved|all`: the review queue.
//! - `GET /webhooks?runId=…&limit=…`: the webhooks of runs' ends, delivered or not (operators).
//! - `GET /schedules`, `GET`/`PUT`/`DELETE /schedules/{name}` (feature `schedules`; operators):
//!   runs begun on schedule, where a `Scheduler` runs.
//! - `POST /interrupts/{id}/resolve` (`{"status"?, "payload"}`) and
//!   `POST /threads/{threadId}/resume` (`{"resume": [...]}`): answers out of band; the thread is
//!   resumed in a run nobody watches (`202` with its events URL).
//! - `GET /health`: `{"status": "ok"}`.
//! - `POST|GET|DELETE /mcp` (feature `mcp-server`, [`AguiServer::mcp`]): the agent as a tool of
//!   MCP clients; see [MCP](#mcp).
//! - `GET|POST|DELETE /acp` (feature `acp-server`, [`AguiServer::acp`]): editors over ACP, on a
//!   WebSocket or Streamable HTTP; see [ACP](#acp).
//!
//! Every transport follows the same run log (in memory by default, SQLite or PostgreSQL with
//! [`Runs::log`] and [`AguiServer::with_runs`]): a run started over HTTP can be re-joined over HTTP after a dropped
//! connection, runs over the WebSocket are logged like the others, and the rules of a start
//! (busy thread, the same request again, `resume[]` and its refusals) are the engine's, the same
//! everywhere; see [`runs`](crate::runs).
//!
//! # Bad input
//!
//! Refused before anything streams, with a JSON body `{"error": {"code", "message", "field"?}}`:
//! wrong `Content-Type` → 415, a body over the limit (1 MiB by default) → 413, a body not sent
//! within the body timeout (30 s) → 408, malformed JSON → 400, JSON that is not a valid
//! `RunAgentInput` (or more messages than allowed, 1,000 by default) → 422 naming the field, an
//! unknown route or method → 404 or 405, a missing or unknown token ([`AguiServer::auth`]) → 401,
//! a token without the route's scope → 403, a thread that already
//! has an active run → 409 `thread_busy` (or the run waits, with [`BusyThread::Queue`]), a run id
//! a different request used → 409 `run_exists`, a log that cannot take the run → 503
//! `store_unavailable`. A refusal of the run's own (its `resume[]`) is a `200` whose stream is
//! `RUN_STARTED` and a `RUN_ERROR` with the code; so is a run whose messages lack user turns the
//! thread holds (`thread_conflict`, after a `MESSAGES_SNAPSHOT` of the thread: a client's stale
//! copy never erases them).
//!
//! # MCP
//!
//! With [`AguiServer::mcp`], `/mcp` speaks MCP's Streamable HTTP (protocol `2026-07-28`, and the
//! earlier generation through `initialize`): one tool, the agent, whose input is
//! `{"prompt", "threadId"?}` and whose answer is the agent's last message with `{"answer",
//! "threadId", "runId"}`. Each call is a run of the caller, begun and followed through the
//! engine like a web run (the same tokens, ownership, limits, cancel); progress is told while it
//! goes, and an approval it waits for is asked of the client's person (elicitation: within the
//! call, or as `input_required` on `2026-07-28`, whose retry continues the run). A client that
//! cannot elicit gets an error result; the approval waits on the thread for another door.
//!
//! # ACP
//!
//! With [`AguiServer::acp`], editors reach the agent across the network at `/acp`, over both
//! bindings of ACP's remote transport (a WebSocket: one JSON-RPC message per text frame;
//! Streamable HTTP: `POST` for the client's messages, `GET` streams for the agent's, `DELETE`):
//! the protocol `agent-tower acp` speaks on its stdio. A connection's sessions are its caller's
//! threads, each prompt one of its runs through the engine (the same tokens, ownership, limits,
//! cancel and takeover as a web run), and what the editor is shown of a turn is read from the
//! log. An approval the run waits for is asked as `session/request_permission`; the run goes on
//! with the answer, and when the connection goes first the approval waits on the thread for any
//! door. A dropped connection does not stop its turns; `session/load` on the next one shows
//! them.
//!
//! # A2A
//!
//! With [`AguiServer::a2a`], other agents reach the agent over A2A 1.0: the Agent Card at
//! `/.well-known/agent-card.json` (public), and at `/a2a` the JSON-RPC binding (`POST /a2a`) and
//! the HTTP+JSON one (`POST /a2a/message:send`, `POST /a2a/message:stream`, `GET /a2a/tasks`,
//! `GET /a2a/tasks/{id}`, `POST /a2a/tasks/{id}:cancel`, `POST /a2a/tasks/{id}:subscribe`). A
//! task is a run and a context a thread, begun and followed through the engine as the caller's;
//! an approval the run waits for is `TASK_STATE_INPUT_REQUIRED`, answered by a message with the
//! task's id (or through any other door). Push notifications are not offered.
//!
//! # Disconnects
//!
//! Runs are driven by a task of their own and the response follows the log. When the client that
//! started a run goes away (a quiet run's disconnect is noticed at the next keep-alive), that is
//! its Stop: the run is cancelled ([`OnDisconnect::Cancel`], the default), as a plain AG-UI
//! client's Stop only closes the connection. A client that can re-join a run says so when it
//! starts it, with the header `Prefer: rejoin` (RFC 7240; answered with `Preference-Applied:
//! rejoin`): its run goes on for a grace period ([`AguiServer::rejoin_grace`], 30 s by default),
//! so that its reloaded page can re-join it with `GET /runs/{id}/events` and `Last-Event-ID`;
//! once nobody has followed it for that long, on any instance, it is cancelled. Such a client
//! stops a run with `POST /runs/{id}/cancel`. With [`OnDisconnect::Continue`] every run goes on.
//!
//! # Busy threads
//!
//! A run on a thread that has one running is refused (`409 thread_busy`), waits, or stops the
//! running one first, as the engine's [`Runs::busy_thread`] says; a client chooses for its own
//! run with `Prefer: busy-thread=reject`, `=queue`, `=interrupt` or `=rollback` (answered with
//! `Preference-Applied`; [`Runs::begin_busy`]). An interrupted run ends `cancelled` for everyone
//! following it, its thread keeping what it said (a rolled-back one: not its prompt nor anything it
//! said), and the new run starts once it ended, whichever instance drove it.
//!
//! # The agent
//!
//! Any `Service<RunRequest, Response = RunOutcome>` that emits AG-UI events to the run's sink
//! ([`Sinks`](crate::context::Sinks)), typically an [`Agent`](crate::agent::Agent) whose
//! model, tools and itself are wrapped in [`AguiLayer`](crate::agui::AguiLayer). A run that
//! stops at interrupts ends with `RUN_FINISHED{outcome: interrupt}` and the next run on the thread
//! must answer them in `resume[]`. Bearer tokens: [`AguiServer::auth`]. Rate limits, tracing:
//! stack any tower layer on the router. Serve it with [`Connections`] (or [`serve`]), which bounds
//! every connection in time and number where `axum::serve` does not.

#[cfg(feature = "a2a-server")]
mod a2a;
mod access;
#[cfg(feature = "acp-server")]
mod acp;
mod auth;
mod error;
mod guard;
mod hydrate;
#[cfg(feature = "mcp-server")]
mod mcp;
mod negotiate;
mod refuse;
mod respond;
#[cfg(feature = "metrics")]
mod route_metrics;
mod routes;
#[cfg(feature = "schedules")]
mod schedules;
mod threads;
#[cfg(feature = "fuzzing")]
pub(crate) use routes::parse_answers;
pub mod page;
mod serve;
pub mod ws;

use std::{fmt, future::Future, sync::Arc, time::Duration};

use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderName, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use tokio_util::sync::CancellationToken;

#[cfg(feature = "jwt")]
#[cfg_attr(docsrs, doc(cfg(feature = "jwt")))]
pub use self::auth::{Jwt, JwtError};
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use self::route_metrics::{RouteMetrics, RouteMetricsFuture, RouteMetricsLayer};
pub use self::{
    access::{AccessLog, AccessLogFuture, AccessLogLayer},
    auth::{
        AuthError, Authenticate, BearerAuth, BearerAuthFuture, BearerAuthLayer, BearerTokens,
        Identity, MIN_TOKEN_BYTES, Scope, TokenExpiry, USER_HEADER,
    },
    error::Rejection,
    guard::{BrowserGuard, BrowserGuardLayer},
    negotiate::Format,
    serve::Connections,
};
pub use crate::runs::{BusyThread, Ended, RunSummary};
use crate::{
    BoxError,
    agui::{
        RunAgentInput,
        capabilities::{self, Capabilities},
    },
    context::Principal,
    run::RunService,
    runs::{BeginError, Begun, Runs},
    transport::OnDisconnect,
};

/// The AG-UI router for `agent` with the default configuration.
pub fn router(agent: impl RunService) -> Router {
    AguiServer::new(agent).into_router()
}

/// How long a run whose client went away waits to be re-joined, by default.
const DEFAULT_REJOIN_GRACE: Duration = Duration::from_secs(30);

/// The AG-UI server's configuration; [`into_router`](AguiServer::into_router) builds the router.
#[must_use]
pub struct AguiServer {
    runs: Runs,
    config: Config,
}

#[derive(Debug, Clone)]
struct Config {
    path: String,
    keep_alive: Duration,
    body_limit: usize,
    body_timeout: Duration,
    max_messages: usize,
    on_disconnect: OnDisconnect,
    rejoin_grace: Duration,
    /// Also the allowed origins of CORS.
    guard: BrowserGuardLayer,
    auth: Option<BearerAuthLayer>,
    access_log: bool,
    dev_page: bool,
    /// Whether the agent is offered to MCP clients at `/mcp`.
    #[cfg(feature = "mcp-server")]
    mcp: bool,
    /// Whether the agent is offered to A2A agents (the card, `/a2a`).
    #[cfg(feature = "a2a-server")]
    a2a: bool,
    /// Whether editors reach the agent over ACP at `/acp`.
    #[cfg(feature = "acp-server")]
    acp: bool,
    /// What `GET /capabilities` declares besides the server's transports.
    capabilities: Capabilities,
    /// What else `/ready` asks (a bridged agent running, say).
    readiness: Option<Readiness>,
    /// The budgets `GET /budget` reads.
    budget: Option<crate::model::budget::BudgetLayer>,
    /// Served on `GET /metrics`, fed by the engine.
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::Metrics>,
}

impl fmt::Debug for AguiServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AguiServer")
            .field("runs", &self.runs)
            .field("config", &self.config)
            .finish()
    }
}

impl AguiServer {
    /// A server for `agent` on an engine with its defaults ([`Runs::new`]: runs in a bounded
    /// in-memory log, a second run on a busy thread refused): path `/`, keep-alive every 15 s,
    /// 1 MiB bodies sent within 30 s, 1,000 messages per request, runs cancelled 30 s after the
    /// client that started them went away unless somebody re-joined them, CORS off.
    pub fn new(agent: impl RunService) -> Self {
        Self::with_runs(Runs::new(agent))
    }

    /// A server for an engine configured (and perhaps shared) elsewhere: what the engine does
    /// with runs (the run log, busy threads, bounds, the lease, shutdown, `on_run_end`) is set on
    /// [`Runs`]; the server sets how HTTP maps onto it.
    ///
    /// ```
    /// use agent_tower::{runs::{BusyThread, Runs}, server::AguiServer};
    /// # use agent_tower::{agent::Agent, agui::AguiLayer, model::scripted::ScriptedModel, tool::ToolRouter};
    /// # use tower::Layer;
    /// # let agui = AguiLayer::new();
    /// # let agent = agui.layer(Agent::new(agui.layer(ScriptedModel::new()), agui.layer(ToolRouter::new())));
    /// let runs = Runs::new(agent).busy_thread(BusyThread::Queue).max_live_runs(1_000);
    /// let server = AguiServer::with_runs(runs).body_limit(256 * 1024);
    /// # let _ = server;
    /// ```
    pub fn with_runs(runs: Runs) -> Self {
        Self {
            runs,
            config: Config {
                path: "/".to_owned(),
                keep_alive: Duration::from_secs(15),
                body_limit: 1024 * 1024,
                body_timeout: Duration::from_secs(30),
                max_messages: 1_000,
                on_disconnect: OnDisconnect::Cancel,
                rejoin_grace: DEFAULT_REJOIN_GRACE,
                guard: BrowserGuardLayer::new(),
                auth: None,
                access_log: false,
                dev_page: false,
                #[cfg(feature = "mcp-server")]
                mcp: false,
                #[cfg(feature = "a2a-server")]
                a2a: false,
                #[cfg(feature = "acp-server")]
                acp: false,
                capabilities: Capabilities::default(),
                readiness: None,
                budget: None,
                #[cfg(feature = "metrics")]
                metrics: None,
            },
        }
    }

    /// The run engine (to begin or follow runs besides HTTP).
    #[must_use]
    pub fn runs(&self) -> &Runs {
        &self.runs
    }

    /// Where runs are posted (default `/`).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.config.path = path.into();
        self
    }

    /// How long a run may stay quiet before a `: ping` comment is sent (default 15 s).
    pub fn keep_alive(mut self, every: Duration) -> Self {
        self.config.keep_alive = every;
        self
    }

    /// The largest accepted body, in bytes (default 1 MiB).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.config.body_limit = bytes;
        self
    }

    /// How long a client may take to send a whole request body (default 30 s); past it the
    /// request is answered `408 request_timeout`.
    ///
    /// # Panics
    ///
    /// If `timeout` is zero.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        assert!(!timeout.is_zero(), "the body timeout must not be zero");
        self.config.body_timeout = timeout;
        self
    }

    /// The most messages one request may carry (default 1,000); more is refused with `422
    /// invalid_input` naming `messages`.
    pub fn max_messages(mut self, messages: usize) -> Self {
        self.config.max_messages = messages;
        self
    }

    /// What happens to a run whose client went away (default: [`OnDisconnect::Cancel`], once
    /// nobody has re-joined it for the [re-join grace](AguiServer::rejoin_grace)).
    pub fn on_disconnect(mut self, policy: OnDisconnect) -> Self {
        self.config.on_disconnect = policy;
        self
    }

    /// What the agent declares it supports, served by `GET /capabilities` (AG-UI 1.0
    /// `AgentCapabilities`) with the server's transports (SSE, WebSocket, protobuf with the
    /// feature `proto`, streams resumed with `Last-Event-ID`); a category declared here replaces
    /// the server's. [`Stack::capabilities`](crate::stack::Stack::capabilities) derives them
    /// from a stack, and [`Stack::server`](crate::stack::Stack::server) serves it with them.
    pub fn capabilities(mut self, capabilities: Capabilities) -> Self {
        self.config.capabilities = capabilities;
        self
    }

    /// Makes `/ready` also ask `check`: while it says [`NotReady`], `/ready` answers 503 with its
    /// status and message (public: say nothing secret). For what runs need besides the run log,
    /// such as a bridged agent that is running.
    ///
    /// ```
    /// use agent_tower::server::{AguiServer, NotReady};
    /// # use agent_tower::{agent::Agent, agui::AguiLayer, model::scripted::ScriptedModel, tool::ToolRouter};
    /// # use tower::Layer;
    /// # let agui = AguiLayer::new();
    /// # let agent = agui.layer(Agent::new(agui.layer(ScriptedModel::new()), agui.layer(ToolRouter::new())));
    /// let maintenance = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    /// let flag = maintenance.clone();
    /// let server = AguiServer::new(agent).ready_unless(move || {
    ///     flag.load(std::sync::atomic::Ordering::Relaxed)
    ///         .then(|| NotReady::new("maintenance", "back soon"))
    /// });
    /// # let _ = server;
    /// ```
    pub fn ready_unless(
        mut self,
        check: impl Fn() -> Option<NotReady> + Send + Sync + 'static,
    ) -> Self {
        self.config.readiness = Some(Readiness(Arc::new(check)));
        self
    }

    /// How long a run whose client went away waits for somebody to follow it again (a reloaded
    /// page re-joining it, on this instance or another) before it is cancelled (default 30 s;
    /// zero: at once), when that client said it can re-join (`Prefer: rejoin`; the run of a
    /// client that did not is cancelled at once: going away is its Stop). Stop a run at once
    /// with `POST /runs/{id}/cancel`. Only with [`OnDisconnect::Cancel`].
    pub fn rejoin_grace(mut self, grace: Duration) -> Self {
        self.config.rejoin_grace = grace;
        self
    }

    /// Allows browsers on these origins to call the server (CORS; off by default), and to start
    /// runs and open WebSockets ([`BrowserGuardLayer`]: other pages may not). Credentials are
    /// never allowed, so no origin can be a wildcard with credentials.
    ///
    /// # Errors
    ///
    /// When an origin is not a valid header value, or is `*`.
    pub fn allow_origins<I, O>(mut self, origins: I) -> Result<Self, BoxError>
    where
        I: IntoIterator<Item = O>,
        O: AsRef<str>,
    {
        self.config.guard = self.config.guard.allow_origins(origins)?;
        Ok(self)
    }

    /// Also answers to these host names (`Host`, without port); by default only to the loopback
    /// names, so that a DNS-rebinding page cannot reach a server on the user's machine
    /// ([`BrowserGuardLayer`]).
    ///
    /// # Errors
    ///
    /// When a name is not a host name.
    pub fn allow_hosts<I, H>(mut self, hosts: I) -> Result<Self, BoxError>
    where
        I: IntoIterator<Item = H>,
        H: AsRef<str>,
    {
        self.config.guard = self.config.guard.allow_hosts(hosts)?;
        Ok(self)
    }

    /// Answers to any `Host`: for a server behind a proxy or on a public address, reached by
    /// names it cannot list.
    pub fn allow_any_host(mut self) -> Self {
        self.config.guard = self.config.guard.allow_any_host();
        self
    }

    /// Requires a bearer token on every route but `/health` and `/ready` ([`BearerAuthLayer`],
    /// inside CORS so that preflights are answered): a [`Scope::Run`] token to start and follow
    /// runs, a [`Scope::Operator`] token for `/threads` and `/interrupts` (reading threads and the
    /// review queue, answering interrupts out of band).
    pub fn auth(mut self, tokens: BearerTokens) -> Self {
        self.config.auth = Some(match self.config.auth.take() {
            // The schemes added before stay, after these tokens.
            Some(layer) => BearerAuthLayer::new(tokens).schemes_of(layer),
            None => BearerAuthLayer::new(tokens),
        });
        self
    }

    /// Also accepts the tokens `scheme` knows ([`Authenticate`]: a [`Jwt`] verifier, your own),
    /// with [`auth`](Self::auth)'s rules for routes and scopes.
    pub fn authenticate(mut self, scheme: impl Authenticate) -> Self {
        let layer = self
            .config
            .auth
            .take()
            .unwrap_or_else(|| BearerAuthLayer::new(BearerTokens::new()));
        self.config.auth = Some(layer.scheme(scheme));
        self
    }

    /// Takes the principal `from` (named by one way in) as `to` (named by another), on purpose;
    /// see [`BearerAuthLayer::alias`]. After [`auth`](Self::auth) or
    /// [`authenticate`](Self::authenticate).
    ///
    /// # Errors
    ///
    /// As [`BearerAuthLayer::alias`]; and without authentication (no principal to alias).
    pub fn principal_alias(mut self, from: &str, to: &str) -> Result<Self, BoxError> {
        let layer = self.config.auth.take().ok_or(
            "no authentication yet: there are no principals to alias (call `auth` or \
             `authenticate` first)",
        )?;
        self.config.auth = Some(layer.alias(from, to)?);
        Ok(self)
    }

    /// Logs one line per request ([`AccessLogLayer`]): method, path (never the query), status and
    /// duration in ms, refusals by the guard and the auth included (off by default).
    pub fn access_log(mut self, on: bool) -> Self {
        self.config.access_log = on;
        self
    }

    /// Counts runs, events, tokens, tool calls, followers and the requests of each route
    /// ([`RouteMetricsLayer`]) in `metrics` (the engine's [observer](Runs::observer) from now
    /// on), served on `GET /metrics` in the OpenMetrics text
    /// format for Prometheus (an operator route under [`auth`](Self::auth)).
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.runs = self.runs.observer(metrics.clone());
        self.config.metrics = Some(metrics);
        self
    }

    /// Answers `GET /budget` from `budget` (the layer the agent's model is under, or a clone of
    /// it): what the caller spent today and may still spend, and, with `?runId=`, what one of
    /// its runs spent; `404 no_budget` without one.
    pub fn budget(mut self, budget: crate::model::budget::BudgetLayer) -> Self {
        self.config.budget = Some(budget);
        self
    }

    /// Serves the [development page](page) at `GET /` to browsers (default off): a chat with this
    /// server over AG-UI, with its tool calls, state, interrupts and events, embedded in the
    /// binary. It and its two files are public; the runs it starts need a token as any other.
    pub fn dev_page(mut self, on: bool) -> Self {
        self.config.dev_page = on;
        self
    }

    /// Offers the agent to MCP clients at `/mcp` (default off): one tool, named and described
    /// after the [capabilities](Self::capabilities)' identity, whose calls are runs of the
    /// caller, on both protocol generations; see [`mcp`](self#mcp).
    #[cfg(feature = "mcp-server")]
    #[cfg_attr(docsrs, doc(cfg(feature = "mcp-server")))]
    pub fn mcp(mut self, on: bool) -> Self {
        self.config.mcp = on;
        self
    }

    /// Offers the agent to other agents over A2A 1.0 (default off): the Agent Card at
    /// `/.well-known/agent-card.json` (named and described after the
    /// [capabilities](Self::capabilities)' identity) and the JSON-RPC and HTTP+JSON bindings at
    /// `/a2a`, each task a run of the caller; see [A2A](self#a2a).
    #[cfg(feature = "a2a-server")]
    #[cfg_attr(docsrs, doc(cfg(feature = "a2a-server")))]
    pub fn a2a(mut self, on: bool) -> Self {
        self.config.a2a = on;
        self
    }

    /// Lets editors reach the agent over ACP at `/acp` (default off): the WebSocket and
    /// Streamable HTTP bindings of ACP's remote transport, each connection's sessions the
    /// caller's threads and each prompt one of its runs; see [ACP](self#acp).
    #[cfg(feature = "acp-server")]
    #[cfg_attr(docsrs, doc(cfg(feature = "acp-server")))]
    pub fn acp(mut self, on: bool) -> Self {
        self.config.acp = on;
        self
    }

    /// Serves the [router](Self::into_router) on `listener` with the default [`Connections`]
    /// until `shutdown` resolves, then ends every run in flight (each gets its terminal event,
    /// through the engine's [shutdown token](Runs::shutdown)) and waits for the responses to end.
    ///
    /// ```no_run
    /// # #[tokio::main] async fn main() -> std::io::Result<()> {
    /// use agent_tower::{demo, server::AguiServer};
    ///
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
    /// AguiServer::new(demo::scripted().build())
    ///     .serve(listener, async { let _ = tokio::signal::ctrl_c().await; })
    ///     .await
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// When serving fails.
    pub async fn serve<F>(
        self,
        listener: tokio::net::TcpListener,
        shutdown: F,
    ) -> std::io::Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let runs = self.runs.shutdown().clone();
        serve(listener, self.into_router(), runs, shutdown).await
    }

    /// The router; it starts the engine's sweeper (on the current tokio runtime) until the
    /// engine's [shutdown token](Runs::shutdown_token) fires.
    pub fn into_router(self) -> Router {
        self.runs.sweep();
        let state = Arc::new(Server {
            runs: self.runs,
            config: self.config,
        });
        let router = Router::new()
            .route(&state.config.path, post(post_run))
            .route("/ws", get(ws::upgrade))
            .route(
                "/health",
                get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }),
            )
            .route("/ready", get(ready))
            .route("/capabilities", get(capabilities))
            .merge(routes::routes())
            .merge(threads::routes());
        #[cfg(feature = "schedules")]
        let router = router.merge(schedules::routes());
        let router = if state.config.dev_page {
            router.merge(page::routes(&state.config.path))
        } else {
            router
        }
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed);
        #[cfg(feature = "mcp-server")]
        let router = if state.config.mcp {
            let identity = state.config.capabilities.identity.as_ref();
            let door = mcp::service(state.runs.clone(), identity, state.config.body_limit);
            router.route_service("/mcp", door)
        } else {
            router
        };
        #[cfg(feature = "acp-server")]
        let router = if state.config.acp {
            router.route("/acp", acp::route())
        } else {
            router
        };
        #[cfg(feature = "a2a-server")]
        let router = if state.config.a2a {
            let identity = state.config.capabilities.identity.as_ref();
            let authenticated = state.config.auth.is_some();
            let limit = state.config.body_limit;
            router.merge(a2a::routes(
                state.runs.clone(),
                identity,
                authenticated,
                limit,
            ))
        } else {
            router
        };
        #[cfg(feature = "metrics")]
        let router = match &state.config.metrics {
            Some(counted) => router
                .route("/metrics", get(metrics))
                .route_layer(RouteMetricsLayer::new(counted.clone())),
            None => router,
        };
        let cors = cors(state.config.guard.origins());
        let guard = state.config.guard.clone();
        let auth = state.config.auth.clone();
        let access_log = state.config.access_log;
        let mut router = router.with_state(state);
        if let Some(tokens) = auth {
            router = router.layer(tokens.scope_of(route_scope));
        }
        let router = match cors {
            Some(cors) => router.layer(cors),
            None => router,
        }
        .layer(guard);
        if access_log {
            router.layer(AccessLogLayer::new())
        } else {
            router
        }
    }
}

/// The scope each route needs: none for the probes, [`Scope::Operator`] for the threads and the
/// review queue, [`Scope::Run`] for the rest.
fn route_scope(request: &Request) -> Option<Scope> {
    let path = request.uri().path();
    let page = request.method() == axum::http::Method::GET
        && (path == "/" || path.starts_with(page::ASSETS));
    // The Agent Card is public, as A2A discovery asks; what it leads to is not.
    let card = path == "/.well-known/agent-card.json";
    if path == "/health" || path == "/ready" || page || card {
        None
    } else if path == "/interrupts"
        || path == "/webhooks"
        || path == "/schedules"
        || path.starts_with("/schedules/")
        || path == "/metrics"
        || path.starts_with("/interrupts/")
        || (path.starts_with("/threads/") && path.ends_with("/resume"))
    {
        Some(Scope::Operator)
    } else {
        // Runs and threads: a principal's own (see `runs::rules::may_use`).
        Some(Scope::Run)
    }
}

/// `GET /capabilities`: what the agent declares, with the server's transports.
async fn capabilities(State(server): State<Arc<Server>>) -> Response {
    let transports = Capabilities {
        transport: Some(capabilities::Transport {
            streaming: Some(true),
            websocket: Some(true),
            http_binary: Some(cfg!(feature = "proto")),
            push_notifications: None,
            resumable: Some(true),
        }),
        ..Capabilities::default()
    };
    axum::Json(transports.merge(server.config.capabilities.clone())).into_response()
}

/// Why the server does not take runs now, for `/ready` (see [`AguiServer::ready_unless`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    status: String,
    message: String,
}

impl NotReady {
    /// A `status` (a snake_case word, `status` in `/ready`'s body) and a message for operators.
    pub fn new(status: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status: status.into(),
            message: message.into(),
        }
    }
}

/// A check of [`AguiServer::ready_unless`].
#[derive(Clone)]
struct Readiness(Arc<dyn Fn() -> Option<NotReady> + Send + Sync>);

impl fmt::Debug for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Readiness(..)")
    }
}

/// How long `/ready` waits for the run log.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// `/ready`: 200 when runs are taken, 503 while the server stops, a [readiness
/// check](AguiServer::ready_unless) says no, or its log does not answer (within 2 s); `/health`
/// stays a liveness check.
async fn ready(State(server): State<Arc<Server>>) -> Response {
    use axum::http::StatusCode;
    let unready = |status: &str, message: String| {
        let body = serde_json::json!({"status": status, "message": message});
        (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
    };
    if server.runs.is_stopping() {
        return unready("draining", "the server is stopping".to_owned());
    }
    if let Some(not) = server
        .config
        .readiness
        .as_ref()
        .and_then(|Readiness(check)| check())
    {
        return unready(&not.status, not.message);
    }
    match tokio::time::timeout(READY_TIMEOUT, server.runs.run_log().ready()).await {
        Ok(Ok(())) => axum::Json(serde_json::json!({"status": "ready"})).into_response(),
        Ok(Err(error)) => {
            // Public (no token needed): the cause is logged, not sent.
            tracing::warn!(%error, "not ready: the run log failed");
            unready("store_unavailable", "the run log failed".to_owned())
        }
        Err(_) => unready(
            "store_unavailable",
            format!(
                "the run log did not answer within {} s",
                READY_TIMEOUT.as_secs()
            ),
        ),
    }
}

/// `/metrics`: the engine's metrics, with the pending interrupts read from the run log.
#[cfg(feature = "metrics")]
async fn metrics(State(server): State<Arc<Server>>) -> Response {
    let Some(metrics) = &server.config.metrics else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let pending = server
        .runs
        .run_log()
        .interrupts(crate::runs::Interrupts::All(Some(
            crate::runs::InterruptStatus::Pending,
        )));
    match tokio::time::timeout(READY_TIMEOUT, pending).await {
        Ok(Ok(pending)) => metrics.set_pending_interrupts(pending.len()),
        Ok(Err(error)) => {
            tracing::warn!(%error, "metrics: the pending interrupts could not be read")
        }
        Err(_) => tracing::warn!("metrics: the run log did not answer for the pending interrupts"),
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
        .into_response()
}

fn cors(origins: &[HeaderValue]) -> Option<tower_http::cors::CorsLayer> {
    use tower_http::cors::{AllowOrigin, CorsLayer};
    (!origins.is_empty()).then(|| {
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins.iter().cloned()))
            .allow_methods([
                axum::http::Method::GET,
                axum::http::Method::POST,
                axum::http::Method::PATCH,
                axum::http::Method::DELETE,
            ])
            .allow_headers([
                header::CONTENT_TYPE,
                header::ACCEPT,
                header::AUTHORIZATION,
                axum::http::HeaderName::from_static("last-event-id"),
                PREFER,
            ])
            .expose_headers([PREFERENCE_APPLIED, BUDGET_LEFT])
            .allow_credentials(false)
    })
}

pub(crate) struct Server {
    runs: Runs,
    config: Config,
}

impl Server {
    /// A request's whole body: `413 payload_too_large` over the limit, `408 request_timeout`
    /// when the client takes longer than the body timeout to send it.
    pub(crate) async fn read_body(
        &self,
        body: axum::body::Body,
    ) -> Result<axum::body::Bytes, Rejection> {
        let limit = self.config.body_limit;
        let timeout = self.config.body_timeout;
        match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(_)) => Err(Rejection::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the body is over the limit of {limit} bytes"),
            )),
            Err(_) => Err(Rejection::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                format!(
                    "the body was not sent within {}",
                    humantime::format_duration(timeout)
                ),
            )),
        }
    }

    /// A `RunAgentInput` from a body, checked against this server's limits.
    pub(crate) fn parse_input(&self, body: &[u8]) -> Result<RunAgentInput, Rejection> {
        parse_input(body, self.config.max_messages)
    }

    /// Takes `input` through the engine; what to follow, and from where, or why not. The run of
    /// a client that can re-join it waits the re-join grace when that client goes away; any
    /// other is cancelled at once.
    pub(crate) async fn begin(
        &self,
        principal: Option<Principal>,
        input: RunAgentInput,
        prefer: Prefer,
    ) -> Result<crate::runs::Follow, Rejection> {
        let begun = self.start(principal, input, prefer).await?;
        let rejoin = prefer.rejoin;
        let follow = self.runs.follow(begun.run_id().clone(), begun.from());
        Ok(match begun {
            Begun::Started { .. } => {
                let grace = match rejoin {
                    Rejoin::Can => self.config.rejoin_grace,
                    Rejoin::Cannot => Duration::ZERO,
                };
                follow.viewer(self.config.on_disconnect, grace)
            }
            _ => follow,
        })
    }

    /// Takes `input`'s run, as `prefer` asks on a busy thread: started with no one watching it
    /// (a run nobody watches goes on to its end).
    async fn start(
        &self,
        principal: Option<Principal>,
        input: RunAgentInput,
        prefer: Prefer,
    ) -> Result<Begun, Rejection> {
        match prefer.busy {
            Some(busy) => self.runs.begin_busy(principal, input, busy).await,
            None => self.runs.begin_as(principal, input).await,
        }
        .map_err(begin_rejection)
    }
}

/// Whether the client that starts a run can re-join it after it went away (a reloaded page),
/// as it says with `Prefer: rejoin` (RFC 7240): then the run waits for it; otherwise going away
/// is the client's Stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rejoin {
    /// The client asked for `rejoin`.
    Can,
    /// A plain client.
    Cannot,
}

impl Rejoin {
    /// The preference token.
    const TOKEN: &str = "rejoin";

    /// What the `Prefer` headers of a request say (a preference is a token, maybe with
    /// parameters after `;`, in a comma-separated list).
    pub(crate) fn asked(headers: &axum::http::HeaderMap) -> Self {
        let asked = preferences(headers).any(|(token, _)| token.eq_ignore_ascii_case(Self::TOKEN));
        if asked { Self::Can } else { Self::Cannot }
    }

    /// Says in `response` that the preference was applied (`Preference-Applied: rejoin`).
    fn applied(self, response: &mut Response) {
        if self == Self::Can {
            response
                .headers_mut()
                .insert(PREFERENCE_APPLIED, HeaderValue::from_static(Self::TOKEN));
        }
    }
}

/// What a client that starts a run prefers (RFC 7240's `Prefer`): whether it re-joins its run
/// (`rejoin`), what its run does on a busy thread (`busy-thread=reject|queue|interrupt|rollback`,
/// in place of the server's setting), and whether it waits for the run's events at all
/// (`respond-async`: a background run, answered `202` at once). A preference the server does not
/// know is ignored, as the RFC asks; `Preference-Applied` says which were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Prefer {
    pub(crate) rejoin: Rejoin,
    pub(crate) busy: Option<BusyThread>,
    pub(crate) background: bool,
}

impl Prefer {
    /// The background preference's token (RFC 7240).
    const ASYNC: &str = "respond-async";

    /// The busy-thread preference's token.
    const BUSY: &str = "busy-thread";

    /// Each busy-thread preference a client may give: its value, and what the engine does.
    const BUSY_VALUES: [(&str, BusyThread, &str); 4] = [
        ("reject", BusyThread::Reject, "busy-thread=reject"),
        ("queue", BusyThread::Queue, "busy-thread=queue"),
        ("interrupt", BusyThread::Interrupt, "busy-thread=interrupt"),
        ("rollback", BusyThread::Rollback, "busy-thread=rollback"),
    ];

    /// What the `Prefer` headers of a request say.
    pub(crate) fn asked(headers: &axum::http::HeaderMap) -> Self {
        let busy = preferences(headers).find_map(|(token, value)| {
            if !token.eq_ignore_ascii_case(Self::BUSY) {
                return None;
            }
            let value = value?;
            Self::BUSY_VALUES
                .iter()
                .find(|(name, ..)| name.eq_ignore_ascii_case(value))
                .map(|(_, busy, _)| *busy)
        });
        Self {
            rejoin: Rejoin::asked(headers),
            busy,
            background: preferences(headers)
                .any(|(token, _)| token.eq_ignore_ascii_case(Self::ASYNC)),
        }
    }

    /// Says in `response` which preferences were applied.
    fn applied(self, response: &mut Response) {
        self.rejoin.applied(response);
        let applied = Self::BUSY_VALUES
            .iter()
            .find(|(_, busy, _)| Some(*busy) == self.busy);
        if let Some((_, _, preference)) = applied {
            response
                .headers_mut()
                .append(PREFERENCE_APPLIED, HeaderValue::from_static(preference));
        }
        if self.background {
            response
                .headers_mut()
                .append(PREFERENCE_APPLIED, HeaderValue::from_static(Self::ASYNC));
        }
    }
}

/// The preferences of a request's `Prefer` headers: each token, and its value (unquoted) if it
/// has one (RFC 7240: a comma-separated list, each preference maybe with parameters after `;`).
fn preferences(headers: &axum::http::HeaderMap) -> impl Iterator<Item = (&str, Option<&str>)> {
    headers
        .get_all(PREFER)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|preference| preference.split(';').next())
        .map(|preference| match preference.split_once('=') {
            Some((token, value)) => (token.trim(), Some(value.trim().trim_matches('"'))),
            None => (preference.trim(), None),
        })
}

/// RFC 7240's request header.
const PREFER: axum::http::HeaderName = axum::http::HeaderName::from_static("prefer");
/// RFC 7240's response header.
const PREFERENCE_APPLIED: axum::http::HeaderName =
    axum::http::HeaderName::from_static("preference-applied");

/// The HTTP answer to a request the engine took no run for.
pub(crate) fn begin_rejection(error: BeginError) -> Rejection {
    let status = match error {
        BeginError::Busy(_) | BeginError::RunExists(_) => StatusCode::CONFLICT,
        BeginError::UnknownThread(_) => StatusCode::NOT_FOUND,
        BeginError::Unavailable(ref cause) => {
            tracing::error!(error = %cause, "the run log failed: a run was refused");
            StatusCode::SERVICE_UNAVAILABLE
        }
        BeginError::Overloaded(_) => {
            return Rejection::new(
                StatusCode::SERVICE_UNAVAILABLE,
                error.code(),
                error.to_string(),
            )
            .retry_after(1);
        }
        BeginError::Limited { retry_after, .. } => {
            let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
            return Rejection::new(
                StatusCode::TOO_MANY_REQUESTS,
                error.code(),
                error.to_string(),
            )
            .retry_after(u32::try_from(seconds.max(1)).unwrap_or(u32::MAX));
        }
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    Rejection::new(status, error.code(), error.to_string())
}

/// The longest thread or run id accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// What is wrong with a thread or run id, if anything: empty, over [`MAX_ID_BYTES`], or with
/// control characters (ids are copied into every SSE `id:` line and every row of the log).
pub(crate) fn id_problem(id: &str) -> Option<String> {
    if id.is_empty() {
        Some("must not be empty".to_owned())
    } else if id.len() > MAX_ID_BYTES {
        Some(format!(
            "must be at most {MAX_ID_BYTES} bytes (it has {})",
            id.len()
        ))
    } else if id.chars().any(char::is_control) {
        Some("must not contain control characters".to_owned())
    } else {
        None
    }
}

/// Parses and checks a `RunAgentInput`: 400 for malformed JSON, 422 naming the bad field.
pub(crate) fn parse_input(body: &[u8], max_messages: usize) -> Result<RunAgentInput, Rejection> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        Rejection::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("malformed JSON: {e}"),
        )
    })?;
    let input: RunAgentInput = serde_path_to_error::deserialize(value).map_err(|e| {
        let mut field = e.path().to_string();
        // serde reports a missing field at its parent: name the field itself.
        let missing = e.inner().to_string();
        if let Some(name) = missing
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
        {
            field = if field == "." {
                name.to_owned()
            } else {
                format!("{field}.{name}")
            };
        }
        Rejection::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!("invalid RunAgentInput at `{field}`: {}", e.inner()),
        )
        .field(field)
    })?;
    for (field, value) in [
        ("threadId", input.thread_id.as_str()),
        ("runId", input.run_id.as_str()),
    ] {
        if let Some(problem) = id_problem(value) {
            return Err(Rejection::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_input",
                format!("invalid RunAgentInput at `{field}`: {problem}"),
            )
            .field(field));
        }
    }
    if input.messages.len() > max_messages {
        return Err(Rejection::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!(
                "invalid RunAgentInput at `messages`: at most {max_messages} messages per \
                 request (it has {})",
                input.messages.len()
            ),
        )
        .field("messages"));
    }
    Ok(input)
}

async fn post_run(State(server): State<Arc<Server>>, request: Request) -> Response {
    match accept_run(&server, request).await {
        Ok(response) => response,
        Err(rejection) => {
            rejection.log_refused_run();
            rejection.into_response()
        }
    }
}

async fn accept_run(server: &Server, request: Request) -> Result<Response, Rejection> {
    let headers = request.headers();
    require_json(headers)?;
    let format = Format::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let prefer = Prefer::asked(headers);
    let principal = request.extensions().get::<Principal>().cloned();
    let body = server.read_body(request.into_body()).await?;
    let input = server.parse_input(&body)?;
    let left = server.budget_left(principal.as_ref()).await;
    let mut response = if prefer.background {
        let thread_id = input.thread_id.clone();
        background(server.start(principal, input, prefer).await?, &thread_id)?
    } else {
        let events = server.begin(principal, input, prefer).await?;
        respond::events(events, format, server.config.keep_alive)
    };
    prefer.applied(&mut response);
    if let Some(left) = left {
        response.headers_mut().insert(BUDGET_LEFT, left);
    }
    Ok(response)
}

/// The header of a run's answer saying what was left of its principal's day's budget when it
/// began: `tokens=N` or `usd=X` (with [`AguiServer::budget`] and a daily limit).
const BUDGET_LEFT: HeaderName = HeaderName::from_static("agent-tower-budget-left");

impl Server {
    /// What is left of `principal`'s day's budget, as [`BUDGET_LEFT`] says it; `None` without a
    /// daily limit, or when the ledger cannot be read (the run's model step will say why).
    async fn budget_left(&self, principal: Option<&Principal>) -> Option<HeaderValue> {
        let budget = self
            .config
            .budget
            .as_ref()
            .filter(|b| b.has_daily_limit())?;
        let left = budget.left(principal, None).await.ok()?.day.left()?;
        let value = match left {
            crate::model::budget::Limit::Tokens(tokens) => format!("tokens={tokens}"),
            crate::model::budget::Limit::Cost(cost) => format!("usd={:.6}", cost.usd()),
        };
        HeaderValue::from_str(&value).ok()
    }
}

/// The answer to a run begun in the background (`Prefer: respond-async`): `202` at once, with
/// where to read its status (`Location: /runs/{runId}`) and follow its events; a request the
/// engine refused for its own reasons (a resume of interrupts already answered) is refused here
/// too, as the out-of-band answers are.
fn background(begun: Begun, thread_id: &crate::id::ThreadId) -> Result<Response, Rejection> {
    if let Begun::Refused { code, message, .. } = begun {
        return Err(Rejection::new(StatusCode::CONFLICT, code, message));
    }
    let run_id = begun.run_id();
    let location = format!("/runs/{run_id}");
    let mut response = (
        StatusCode::ACCEPTED,
        axum::Json(serde_json::json!({
            "threadId": thread_id,
            "runId": run_id,
            "run": location,
            "events": format!("{location}/events"),
        })),
    )
        .into_response();
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// `415 unsupported_media_type` unless the body is declared `application/json` (a page may send
/// `text/plain` to any site without asking first; never JSON).
pub(crate) fn require_json(headers: &axum::http::HeaderMap) -> Result<(), Rejection> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if is_json {
        Ok(())
    } else {
        Err(Rejection::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be `application/json`",
        ))
    }
}

/// `listener`, with `TCP_NODELAY` set on every connection it accepts: an event goes out as soon as
/// it is written. Without it, a small frame written after the response head waits for the client
/// to acknowledge the head, which clients delay (40 ms on Linux): the first event of every run
/// whose events come after its head (a durable run's come after their commit) arrives 40 ms late.
pub fn nodelay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|connection| {
        if let Err(error) = connection.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY on a connection");
        }
    })
}

/// Runs the router on `listener` with the default [`Connections`] until `shutdown` resolves,
/// then cancels every active run (each gets its terminal event) and waits for the responses to
/// end.
///
/// # Errors
///
/// When serving fails.
pub async fn serve<F>(
    listener: tokio::net::TcpListener,
    router: Router,
    runs: CancellationToken,
    shutdown: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    Connections::new()
        .serve(listener, router, runs, shutdown)
        .await
}
