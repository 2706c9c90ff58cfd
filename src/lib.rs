//! The steps of an AI agent as [Tower](https://docs.rs/tower) services.
//!
//! A model call is a `Service<ModelRequest>` whose response is a stream of [`ModelEvent`]s; a tool
//! call is a `Service<ToolCall>`. Everything a frontend or an editor needs around them is a
//! [`Layer`](tower_layer::Layer): [`AguiLayer`](agui::AguiLayer) emits AG-UI 1.0 events while the
//! agent consumes the very same stream.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::agui::{AguiLayer, Event};
//! use agent_tower::model::{FinishReason, ModelEvent, ModelRequest};
//! use agent_tower::transport::Recording;
//! use futures_util::{stream, StreamExt};
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! // Any model service: here one that answers "Hello!" in two tokens.
//! let model = service_fn(|req: ModelRequest| async move {
//!     let id = req.run.message_id.clone();
//!     let text = |t: &str| Ok::<_, agent_tower::BoxError>(ModelEvent::TextDelta { message_id: id.clone(), delta: t.into() });
//!     Ok::<_, agent_tower::BoxError>(stream::iter([
//!         text("Hel"),
//!         text("lo!"),
//!         Ok(ModelEvent::Finish(FinishReason::Stop)),
//!     ]))
//! });
//!
//! // The UI's transport; a server would use a `transport::Channel` per run instead.
//! let ui = Recording::new();
//! let model = ServiceBuilder::new()
//!     .layer(AguiLayer::new().transport(ui.clone()))
//!     .service(model);
//!
//! // The agent consumes the model's events as they are...
//! let req = ModelRequest { messages: vec![], tools: Default::default(), options: Default::default(), run: Default::default() };
//! let events: Vec<_> = model.oneshot(req).await?.collect().await;
//! assert_eq!(events.len(), 3);
//!
//! // ...while the UI got them as AG-UI events.
//! let kinds: Vec<_> = ui.events().iter().map(Event::kind).collect();
//! assert_eq!(kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>(), [
//!     "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
//!     "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED",
//! ]);
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! - [`id`], [`delta`], [`message`], [`context`], [`model`], [`tool`], [`run`]: the protocol-neutral
//!   core types.
//! - [`stream`]: [`Tee`](stream::Tee), the stream wrapper that tees items to a transport.
//! - [`transport`]: where events go ([`Channel`](transport::Channel),
//!   [`Recording`](transport::Recording), [`Null`](transport::Null)).
//! - [`agent`]: the model ↔ tools loop, itself a `Service<RunRequest>`.
//! - [`agui`] (feature `agui`): AG-UI 1.0 wire events and [`AguiLayer`](agui::AguiLayer).
//! - [`map_error`] (feature `map-error`, part of `agui`): [`MapErrorLayer`](map_error::MapErrorLayer),
//!   error classes, RUN_ERROR codes and ACP stop reasons.
//! - [`permission`] (feature `permission`): [`PermissionLayer`](permission::PermissionLayer),
//!   policies and approvers (human in the loop).
//! - [`truncate`] (feature `truncate`): [`TruncateLayer`](truncate::TruncateLayer), bounded
//!   UI copies of tool results and split deltas.
//! - [`state`] (feature `state`): [`StateLayer`](state::StateLayer), shared state from tool
//!   arguments and results.
//! - [`post_process`] (feature `post-process`): [`PostProcessLayer`](post_process::PostProcessLayer),
//!   whole-message processing whose findings stream into the shared state.
//! - [`trace`] (feature `trace`): [`TraceLayer`](trace::TraceLayer), spans for runs, model calls
//!   and tool calls after the OpenTelemetry GenAI conventions.
//! - [`metrics`] (feature `metrics`): [`Metrics`](metrics::Metrics) for Prometheus and
//!   [`MetricsLayer`](metrics::MetricsLayer), tool calls counted.
//! - [`acp`] (feature `acp`): [`AcpLayer`](acp::AcpLayer), the same steps as ACP session updates
//!   for code editors, and [`AcpAgent`](acp::AcpAgent), any `Service<RunRequest>` served as an ACP
//!   agent.
//! - [`runs`] (feature `runs`): the run engine, [`Runs`](runs::Runs), and the run log it writes,
//!   [`RunLog`](runs::RunLog) ([`MemoryLog`](runs::MemoryLog) built in).
//! - [`server`] (feature `server`): the AG-UI HTTP/SSE and WebSocket server (axum), a thin mapping
//!   of HTTP onto [`Runs`](runs::Runs).
//! - [`store`] (feature `store`): [`RunStore`](store::RunStore), the run log on SQLite or
//!   PostgreSQL: runs and threads that outlive the process, several instances as one.
//! - `model::openai` (feature `openai`): a model service for any OpenAI-compatible
//!   chat-completions server; `tool::mcp` (feature `mcp`): MCP servers' tools as tool services.
//! - [`stack`] (feature `stack`): [`Stack`](stack::Stack), your model and tools in, the agent
//!   out with every layer above in its place.
//! - [`subagent`] (feature `subagent`): [`AgentTool`](subagent::AgentTool), an agent as a tool of
//!   another, its run shown as a sub-agent run.
//! - `tool::typed` (feature `typed-tools`): tools whose arguments are a Rust type, offered as its
//!   generated schema and parsed into it (checked against the whole schema with `schema-check`).
//! - [`demo`] (feature `demo`): the scripted model and the demo tools in a `Stack`, what the
//!   `agent-tower` command runs without a model.
//! - [`test_util`] (feature `test-util`): mocks and assertions for testing your own stacks.
//!
//! # The design
//!
//! - **A step is a service.** A model call is a `Service<ModelRequest>` answering a stream of
//!   events, a tool call a `Service<ToolCall>`, and the [agent](agent::Agent) loop between them a
//!   `Service<RunRequest>` ([`run::RunService`] once it can be driven in a task of its own).
//!   Providers, tools and whole agents are interchangeable behind those types.
//! - **A layer sees the whole step.** One layer owns the request, the response future and the
//!   response stream: it tees every token inside `poll_next` (no task, no buffer that can grow),
//!   and closes every start it emitted exactly once, on the end, an error or a drop. One concern
//!   per layer, one layer per directory; the futures of the layers that act once their inner
//!   service answers are written once.
//! - **Asking a person is an answer, not an error.** A
//!   [`PermissionLayer`](permission::PermissionLayer) that defers a decision answers
//!   [`ToolResponse::Interrupted`](tool::ToolResponse): the layers around it pass it through
//!   ([`ToolReply`](tool::ToolReply)), so no error mapping, retry or timeout can swallow it, and
//!   the agent ends the run with the interrupt; a later run brings the decision.
//! - **The run log is the spine.** [`Runs`](runs::Runs) drives each run in a task of its own and
//!   appends what it emits to a [`RunLog`](runs::RunLog); every transport (SSE, NDJSON, protobuf,
//!   WebSocket, a client re-joining with `Last-Event-ID`, your own) follows that log. The rules of
//!   a start (one active run per thread, the same request replayed, interrupts answered in
//!   `resume[]`) are one pure function, [`runs::rules::plan`]; a log is storage (in memory,
//!   SQLite, PostgreSQL) that applies the plan atomically, its indexes serving as guards.
//!   Whoever watches the engine (metrics) is an [observer](runs::RunObserver) it calls, not code
//!   inside it.
//! - **Protocols are edges.** AG-UI and ACP are layers, servers and bridges; each finds its own
//!   sink in the run's [`Sinks`](context::Sinks), and the core types name neither.
//!
//! [`ModelEvent`]: model::ModelEvent

#![warn(
    missing_debug_implementations,
    missing_docs,
    rust_2018_idioms,
    clippy::todo,
    clippy::dbg_macro,
    clippy::await_holding_lock,
    clippy::unimplemented,
    clippy::mem_forget,
    clippy::unused_self,
    clippy::needless_borrow
)]
#![deny(unreachable_pub)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// `get_ref`, `get_mut` and `into_inner` of a service that wraps its inner service `S` in a field
/// `inner`, inside that service's `impl` block.
macro_rules! inner_service {
    () => {
        /// The wrapped service.
        pub fn get_ref(&self) -> &S {
            &self.inner
        }

        /// The wrapped service, mutably.
        pub fn get_mut(&mut self) -> &mut S {
            &mut self.inner
        }

        /// Unwraps the service.
        pub fn into_inner(self) -> S {
            self.inner
        }
    };
}
pub(crate) use inner_service;

/// A named future around a boxed one (boxed once per run or call, never per token): the
/// struct, its `Future` impl resolving to `$output`, and a `Debug` that names it.
macro_rules! boxed_future {
    ($(#[$doc:meta])* pub struct $name:ident -> $output:ty;) => {
        $(#[$doc])*
        pub struct $name(
            ::std::pin::Pin<Box<dyn ::std::future::Future<Output = $output> + Send>>,
        );

        impl ::std::future::Future for $name {
            type Output = $output;

            fn poll(
                mut self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<Self::Output> {
                ::std::future::Future::poll(self.0.as_mut(), cx)
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }
    };
}
pub(crate) use boxed_future;

pub mod agent;
pub mod context;
pub mod delta;
pub mod id;
pub mod message;
pub mod model;
pub mod run;
pub mod stream;
pub mod tool;
pub mod transport;

#[cfg(feature = "a2a-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "a2a-client")))]
pub mod a2a;
#[cfg(feature = "acp")]
#[cfg_attr(docsrs, doc(cfg(feature = "acp")))]
pub mod acp;
#[cfg(feature = "agui")]
#[cfg_attr(docsrs, doc(cfg(feature = "agui")))]
pub mod agui;
#[cfg(any(
    feature = "acp-client",
    feature = "agui-client",
    feature = "a2a-client"
))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(
        feature = "acp-client",
        feature = "agui-client",
        feature = "a2a-client"
    )))
)]
pub mod bridge;
#[cfg(any(feature = "acp-client", feature = "mcp"))]
mod child;
#[cfg(feature = "demo")]
#[cfg_attr(docsrs, doc(cfg(feature = "demo")))]
pub mod demo;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

#[cfg(feature = "map-error")]
#[cfg_attr(docsrs, doc(cfg(feature = "map-error")))]
pub mod map_error;

#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;

#[cfg(feature = "trace")]
#[cfg_attr(docsrs, doc(cfg(feature = "trace")))]
pub mod trace;

#[cfg(feature = "permission")]
#[cfg_attr(docsrs, doc(cfg(feature = "permission")))]
pub mod permission;

#[cfg(feature = "runs")]
#[cfg_attr(docsrs, doc(cfg(feature = "runs")))]
pub mod runs;

#[cfg(feature = "schedules")]
#[cfg_attr(docsrs, doc(cfg(feature = "schedules")))]
pub mod schedule;
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod server;

#[cfg(feature = "store")]
#[cfg_attr(docsrs, doc(cfg(feature = "store")))]
pub mod store;

#[cfg(feature = "test-util")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-util")))]
pub mod test_util;

#[cfg(feature = "truncate")]
#[cfg_attr(docsrs, doc(cfg(feature = "truncate")))]
pub mod truncate;

#[cfg(feature = "stack")]
#[cfg_attr(docsrs, doc(cfg(feature = "stack")))]
pub mod stack;
#[cfg(feature = "subagent")]
#[cfg_attr(docsrs, doc(cfg(feature = "subagent")))]
pub mod subagent;
#[cfg(feature = "webhooks")]
#[cfg_attr(docsrs, doc(cfg(feature = "webhooks")))]
pub mod webhook;

#[cfg(feature = "state")]
#[cfg_attr(docsrs, doc(cfg(feature = "state")))]
pub mod state;

#[cfg(feature = "post-process")]
#[cfg_attr(docsrs, doc(cfg(feature = "post-process")))]
pub mod post_process;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The guides' code, compiled as the README's is.
#[cfg(doctest)]
mod guides {
    macro_rules! guide {
        ($($name:ident = $file:literal),* $(,)?) => {
            $(#[doc = include_str!(concat!("../docs/", $file))] struct $name;)*
        };
    }
    guide! {
        YourAgent = "your-agent.md",
        Layers = "layers.md",
        ModelsAndTools = "models-and-tools.md",
        RunLog = "run-log.md",
        Sessions = "sessions.md",
        CopilotKit = "copilotkit.md",
        Browser = "browser.md",
        Editors = "editors.md",
        Bridges = "bridges.md",
        Security = "security.md",
        ManyUsers = "many-users.md",
        Operating = "operating.md",
        Deploying = "deploying.md",
        Performance = "performance.md",
    }
}

/// An error of any kind, as tower uses it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
