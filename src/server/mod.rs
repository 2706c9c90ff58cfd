//! The AG-UI HTTP server: an axum [`Router`] that runs an agent per request and streams its events.
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
//!   events as `text/event-stream` (`data: <json>\n\n`, a `: ping` comment while the run is quiet)
//!   or, when the client prefers it, `application/x-ndjson`.
//! - `GET /ws`: the same over a WebSocket ([`ws`] module docs).
//! - `GET /health`: `{"status": "ok"}`.
//!
//! # Bad input
//!
//! Refused before anything streams, with a JSON body `{"error": {"code", "message", "field"?}}`:
//! wrong `Content-Type` → 415, a body over the limit (1 MiB by default) → 413, malformed JSON
//! → 400, JSON that is not a valid `RunAgentInput` → 422 naming the field, a thread that already
//! has an active run → 409 (or the run waits, with [`BusyThread::Queue`]).
//!
//! # Disconnects
//!
//! The run is driven by the response body. When the client goes away the body is dropped, and the
//! run is cancelled at once ([`OnDisconnect::Cancel`], the default) or moved to a task of its own
//! to finish without the client ([`OnDisconnect::Continue`]). A quiet run's disconnect is noticed
//! at the next keep-alive.
//!
//! # Durable mode
//!
//! With [`AguiServer::store`] (feature `store`), runs are kept in a
//! [`RunStore`](crate::store::RunStore): each run is written to its event log by a task of its
//! own and the response follows the log, so SSE events carry `id: {runId}:{seq}` and more routes
//! exist:
//!
//! - `GET /runs/{runId}/events`: the run's events after `Last-Event-ID` (or `?after=N`), then live
//!   until its end; `204` when an ended run has nothing left, `404` for an unknown run.
//! - `GET /threads/{threadId}`: the thread's conversation, state, runs and pending interrupts.
//! - `GET /interrupts?status=pending|resolved|all`: the review queue.
//! - `POST /interrupts/{id}/resolve` (`{"status"?, "payload"}`) and
//!   `POST /threads/{threadId}/resume` (`{"resume": [...]}`): answers out of band; the thread is
//!   resumed in a run nobody watches (`202` with its events URL), `409` when already resolved.
//!
//! A run that stops at an interrupt ends with `RUN_FINISHED{outcome: interrupt}`; the next run on
//! the thread must answer every pending interrupt in `resume[]` (see
//! [`agui::interrupt`](crate::agui::interrupt)), or it is refused with a `RUN_ERROR` whose code
//! says why. Only one run per thread is active, whichever instance serves it.
//!
//! # The agent
//!
//! Any `Service<RunRequest, Response = RunOutcome>` that emits AG-UI events to the run's
//! [`Channel`] transport, typically an [`Agent`](crate::agent::Agent) whose model, tools and
//! itself are wrapped in [`AguiLayer`](crate::agui::AguiLayer). Auth, rate limits, tracing: stack
//! any tower layer on the router.

mod demo;
#[cfg(feature = "store")]
mod durable;
mod error;
mod negotiate;
mod run;
mod threads;
pub mod ws;

use std::{convert::Infallible, fmt, future::Future, sync::Arc, time::Duration};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{
        IntoResponse, Response,
        sse::{Event as SseEvent, KeepAlive, Sse},
    },
    routing::{get, post},
};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tower_service::Service;

use self::run::{OnRunEnd, RunEvents, RunTracker};
pub use self::{
    demo::{ProductAgent, ScriptedAgent, interrupting_agent, product_agent, scripted_agent},
    error::Rejection,
    negotiate::Format,
    run::{RunEnd, RunSummary},
    threads::BusyThread,
};
use crate::{
    BoxError,
    agui::{Event, RunAgentInput},
    run::{RunOutcome, RunRequest},
    transport::{Channel, OnDisconnect},
};

/// The AG-UI router for `agent` with the default configuration.
pub fn router<A>(agent: A) -> Router
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    AguiServer::new(agent).into_router()
}

/// The AG-UI server's configuration; [`into_router`](AguiServer::into_router) builds the router.
#[must_use]
pub struct AguiServer<A> {
    agent: A,
    config: Config,
}

#[derive(Clone)]
struct Config {
    path: String,
    keep_alive: Duration,
    body_limit: usize,
    channel_capacity: usize,
    on_disconnect: OnDisconnect,
    busy_thread: BusyThread,
    allowed_origins: Vec<HeaderValue>,
    shutdown: CancellationToken,
    on_run_end: OnRunEnd,
    threads: threads::ActiveThreads,
    #[cfg(feature = "store")]
    durable: Option<durable::Durable>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("path", &self.path)
            .field("keep_alive", &self.keep_alive)
            .field("body_limit", &self.body_limit)
            .field("channel_capacity", &self.channel_capacity)
            .field("on_disconnect", &self.on_disconnect)
            .field("busy_thread", &self.busy_thread)
            .field("allowed_origins", &self.allowed_origins)
            .finish_non_exhaustive()
    }
}

impl<A> fmt::Debug for AguiServer<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AguiServer")
            .field("agent", &std::any::type_name::<A>())
            .field("config", &self.config)
            .finish()
    }
}

impl<A> AguiServer<A>
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    /// A server for `agent`: path `/`, keep-alive every 15 s, 1 MiB bodies, runs cancelled on
    /// disconnect, a second run on a busy thread refused, CORS off.
    pub fn new(agent: A) -> Self {
        Self {
            agent,
            config: Config {
                path: "/".to_owned(),
                keep_alive: Duration::from_secs(15),
                body_limit: 1024 * 1024,
                channel_capacity: 256,
                on_disconnect: OnDisconnect::Cancel,
                busy_thread: BusyThread::Reject,
                allowed_origins: Vec::new(),
                shutdown: CancellationToken::new(),
                on_run_end: run::log_run_end(),
                threads: threads::ActiveThreads::default(),
                #[cfg(feature = "store")]
                durable: None,
            },
        }
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

    /// How many events may wait for a slow client before the run is held back (default 256).
    ///
    /// # Panics
    ///
    /// If `events` is 0.
    pub fn channel_capacity(mut self, events: usize) -> Self {
        assert!(events > 0, "the channel capacity must be at least 1");
        self.config.channel_capacity = events;
        self
    }

    /// What happens to a run whose client went away (default: cancel it).
    pub fn on_disconnect(mut self, policy: OnDisconnect) -> Self {
        self.config.on_disconnect = policy;
        self
    }

    /// What happens to a run on a thread that already has an active run (default: 409).
    pub fn busy_thread(mut self, policy: BusyThread) -> Self {
        self.config.busy_thread = policy;
        self
    }

    /// Allows browsers on these origins to call the server (CORS; off by default). Credentials
    /// are never allowed, so no origin can be a wildcard with credentials.
    ///
    /// # Errors
    ///
    /// When an origin is not a valid header value, or is `*`.
    pub fn allow_origins<I, O>(mut self, origins: I) -> Result<Self, BoxError>
    where
        I: IntoIterator<Item = O>,
        O: AsRef<str>,
    {
        for origin in origins {
            let origin = origin.as_ref();
            if origin == "*" {
                return Err("list the allowed origins; `*` is not accepted".into());
            }
            self.config
                .allowed_origins
                .push(HeaderValue::from_str(origin)?);
        }
        Ok(self)
    }

    /// Every run's cancellation token is a child of `token`: cancelling it (on shutdown) ends
    /// every active run with a terminal event.
    pub fn shutdown_token(mut self, token: CancellationToken) -> Self {
        self.config.shutdown = token;
        self
    }

    /// Called once per run when it ends (default: one `tracing` line at INFO).
    pub fn on_run_end<F>(mut self, callback: F) -> Self
    where
        F: Fn(&RunSummary) + Send + Sync + 'static,
    {
        self.config.on_run_end = Arc::new(callback);
        self
    }

    /// Makes runs durable: each run is written to `store` by a task of its own (a client
    /// leaving never loses it), SSE events carry `id: {runId}:{seq}`, and the routes of the
    /// [durable mode](self#durable-mode) are added. Runs left running by an instance that died
    /// are closed with a `RUN_ERROR` (`run_lost`) when their lease expires.
    #[cfg(feature = "store")]
    #[cfg_attr(docsrs, doc(cfg(feature = "store")))]
    pub fn store(mut self, store: crate::store::RunStore) -> Self {
        self.config.durable = Some(durable::Durable {
            store,
            lease: Duration::from_secs(30),
        });
        self
    }

    /// How long a durable run's owner may stay silent before the run counts as lost (default
    /// 30 s; renewed every third of it). Only with [`store`](Self::store).
    #[cfg(feature = "store")]
    #[cfg_attr(docsrs, doc(cfg(feature = "store")))]
    pub fn lease(mut self, lease: Duration) -> Self {
        if let Some(durable) = self.config.durable.as_mut() {
            durable.lease = lease;
        }
        self
    }

    /// The router. In durable mode, it also starts (on the current tokio runtime) the sweeper
    /// that closes lost runs, until the [shutdown token](Self::shutdown_token) fires.
    pub fn into_router(self) -> Router {
        let state = Arc::new(Server {
            agent: self.agent,
            config: self.config,
        });
        let router = Router::new()
            .route(&state.config.path, post(post_run::<A>))
            .route("/ws", get(ws::upgrade::<A>))
            .route(
                "/health",
                get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }),
            );
        #[cfg(feature = "store")]
        let router = match &state.config.durable {
            Some(durable) => {
                durable::sweep(
                    durable.store.clone(),
                    durable.lease,
                    state.config.shutdown.clone(),
                );
                router.merge(durable::routes::<A>())
            }
            None => router,
        };
        let cors = cors(&state.config.allowed_origins);
        let router = router.with_state(state);
        match cors {
            Some(cors) => router.layer(cors),
            None => router,
        }
    }
}

fn cors(origins: &[HeaderValue]) -> Option<tower_http::cors::CorsLayer> {
    use tower_http::cors::{AllowOrigin, CorsLayer};
    (!origins.is_empty()).then(|| {
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins.iter().cloned()))
            .allow_methods([axum::http::Method::GET, axum::http::Method::POST])
            .allow_headers([header::CONTENT_TYPE, header::ACCEPT, header::AUTHORIZATION])
            .allow_credentials(false)
    })
}

pub(crate) struct Server<A> {
    agent: A,
    config: Config,
}

impl<A> Server<A>
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    /// Validates an input and starts its run, or refuses it.
    pub(crate) async fn start(&self, input: RunAgentInput) -> Result<RunEvents, Rejection> {
        let thread = match self.config.busy_thread {
            BusyThread::Reject => {
                self.config
                    .threads
                    .try_start(&input.thread_id)
                    .ok_or_else(|| {
                        Rejection::new(
                            StatusCode::CONFLICT,
                            "thread_busy",
                            format!("thread `{}` already has an active run", input.thread_id),
                        )
                    })?
            }
            BusyThread::Queue => self.config.threads.start(&input.thread_id).await,
        };
        let mut req = input.to_run_request();
        req.run.cancel = self.config.shutdown.child_token();
        let (tx, rx) = Channel::<Event>::bounded(self.config.channel_capacity);
        req.run.sinks.agui = Some(tx);
        req.run.sinks.on_disconnect = Some(self.config.on_disconnect);
        let cancel = req.run.cancel.clone();
        let tracker = RunTracker::new(
            req.run.thread_id.clone(),
            req.run.run_id.clone(),
            self.config.on_run_end.clone(),
            Some(thread),
        );
        let run: run::RunFuture = Box::pin(self.agent.clone().oneshot(req));
        Ok(RunEvents::new(
            run,
            rx,
            cancel,
            self.config.on_disconnect,
            tracker,
        ))
    }
}

/// Parses and checks a `RunAgentInput`: 400 for malformed JSON, 422 naming the bad field.
pub(crate) fn parse_input(body: &[u8]) -> Result<RunAgentInput, Rejection> {
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
        let problem = if value.is_empty() {
            "must not be empty"
        } else if value.chars().any(char::is_control) {
            "must not contain control characters"
        } else {
            continue;
        };
        return Err(Rejection::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!("invalid RunAgentInput at `{field}`: {problem}"),
        )
        .field(field));
    }
    Ok(input)
}

async fn post_run<A>(State(server): State<Arc<Server<A>>>, request: Request) -> Response
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    match accept_run(&server, request).await {
        Ok(response) => response,
        Err(rejection) => rejection.into_response(),
    }
}

async fn accept_run<A>(server: &Server<A>, request: Request) -> Result<Response, Rejection>
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    let headers = request.headers();
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(Rejection::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be `application/json`",
        ));
    }
    let format = Format::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let limit = server.config.body_limit;
    let body = axum::body::to_bytes(request.into_body(), limit)
        .await
        .map_err(|_| {
            Rejection::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the body is over the limit of {limit} bytes"),
            )
        })?;
    let input = parse_input(&body)?;
    #[cfg(feature = "store")]
    if let Some(durable) = &server.config.durable {
        return server.start_durable(durable, input, format).await;
    }
    let events = server.start(input).await?;
    Ok(match format {
        Format::Sse => sse_response(
            events.map(|event| SseEvent::default().json_data(&event)),
            server.config.keep_alive,
        ),
        Format::Ndjson => binary_response(
            format,
            events.map(|event| {
                let mut line = serde_json::to_vec(&event).expect("events serialize");
                line.push(b'\n');
                Ok::<_, Infallible>(Bytes::from(line))
            }),
        ),
        #[cfg(feature = "proto")]
        Format::Proto => binary_response(
            format,
            events.map(|event| {
                let mut frame = Vec::new();
                crate::agui::proto::encode_framed(&event, &mut frame);
                Ok::<_, Infallible>(Bytes::from(frame))
            }),
        ),
    })
}

fn stream_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers
}

/// An SSE response of `frames`, with `: ping` comments while they are quiet.
pub(crate) fn sse_response<S, E>(frames: S, keep_alive: Duration) -> Response
where
    S: futures_core::Stream<Item = Result<SseEvent, E>> + Send + 'static,
    E: Into<BoxError>,
{
    let keep_alive = KeepAlive::new().interval(keep_alive).text("ping");
    (stream_headers(), Sse::new(frames).keep_alive(keep_alive)).into_response()
}

/// A streamed response of `format`'s content type.
pub(crate) fn binary_response<S, E>(format: Format, chunks: S) -> Response
where
    S: futures_core::Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<BoxError>,
{
    let mut headers = stream_headers();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    (headers, Body::from_stream(chunks)).into_response()
}

/// Runs the router until `shutdown` resolves, then cancels every active run (each gets its
/// terminal event) and waits for the responses to end.
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
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            runs.cancel();
        })
        .await
}
