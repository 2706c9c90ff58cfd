//! AG-UI 1.0: wire events ([`Event`]), the request body ([`RunAgentInput`]) and [`AguiLayer`].
//!
//! One layer, three levels. [`AguiLayer`] wraps
//!
//! - a **model** service (`Service<ModelRequest>`): its event stream is teed into
//!   `STEP_STARTED`, `TEXT_MESSAGE_*`, `REASONING_*`, `TOOL_CALL_START/ARGS/END`, `STEP_FINISHED`;
//! - a **tool** service (`Service<ToolCall>`): its result becomes `TOOL_CALL_RESULT` under the
//!   tool message's id (and `ACTIVITY_SNAPSHOT`s while it runs, if enabled);
//! - an **agent** (`Service<RunRequest>`): `RUN_STARTED` first, `STATE_SNAPSHOT`s as configured,
//!   `MESSAGES_SNAPSHOT` and exactly one `RUN_FINISHED` or `RUN_ERROR` last.
//!
//! ```text
//!  RunRequest ──► Agui<Agent> ──────────────────────────────► RUN_STARTED … RUN_FINISHED
//!                   └─ Agent loop
//!                        ├─ Agui<model> ─ Tee ─► model stream ─► TEXT_MESSAGE_* / TOOL_CALL_*
//!                        └─ Agui<tools> ─► ToolRouter ─► tools ─► TOOL_CALL_RESULT
//! ```
//!
//! Events go to the run's own sink, a [`Channel`](crate::transport::Channel)`<Event>` in its
//! [`Sinks`](crate::context::Sinks) (a server sets a fresh one for each run), else to the
//! layer's default transport.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::agent::Agent;
//! use agent_tower::agui::{AguiLayer, Event, EventType};
//! use agent_tower::message::Message;
//! use agent_tower::model::scripted::ScriptedModel;
//! use agent_tower::run::RunRequest;
//! use agent_tower::tool::ToolRouter;
//! use agent_tower::transport::Channel;
//! use futures_util::StreamExt;
//! use tower::{Layer, ServiceExt};
//!
//! let agui = AguiLayer::new();
//! let agent = agui.layer(Agent::new(agui.layer(ScriptedModel::new()), agui.layer(ToolRouter::new())));
//!
//! // One run, one channel: what an SSE response body would read.
//! let (tx, rx) = Channel::<Event>::bounded(64);
//! let mut req = RunRequest::new(vec![Message::user("hello")]);
//! req.run.sinks.insert(tx);
//! let outcome = agent.oneshot(req).await?;
//!
//! let events: Vec<Event> = rx.collect().await;
//! assert_eq!(events.first().map(Event::kind), Some(EventType::RunStarted));
//! assert_eq!(events.last().map(Event::kind), Some(EventType::RunFinished));
//! assert_eq!(outcome.messages.len(), 2);
//! # Ok(()) }
//! ```
//!
//! # When events fire
//!
//! - `STEP_STARTED` when the model's response future resolves (a call that fails before
//!   streaming has no step); `TEXT_MESSAGE_START` lazily, at the first text delta.
//! - Every `*_START` gets its `*_END` when the model says it is finished, when its stream fails,
//!   ends, or is dropped (timeout, cancellation, client gone): whichever comes first, once.
//! - `TOOL_CALL_RESULT` when the tool's future resolves, for results and errors alike.
//! - The terminal event when the agent's future resolves, or `RUN_FINISHED` with a `cancelled`
//!   outcome when it is dropped unfinished.
//!
//! # Back-pressure
//!
//! Events are sent through the transport's `Sink` half: a client that reads slowly holds the
//! model stream back. Only the closing events of a dropped stream bypass the bound.

pub mod capabilities;
#[cfg(feature = "agui-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "agui-client")))]
pub mod client;
pub mod event;
pub(crate) mod framing;
pub mod future;
pub mod input;
pub mod interrupt;
mod layer;
#[cfg(feature = "proto")]
#[cfg_attr(docsrs, doc(cfg(feature = "proto")))]
pub mod proto;
mod service;
mod stream;

pub use self::{
    event::{Event, EventType},
    input::RunAgentInput,
    layer::{AguiLayer, AguiOptions, Prediction, StateSnapshots, error},
    service::Agui,
    stream::{ModelEncoder, ResponseStream},
};

/// The AG-UI protocol version this module speaks.
pub const PROTOCOL_VERSION: &str = "1.0";
