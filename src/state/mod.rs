//! State from tool calls: [`StateLayer`] sets the run's [`SharedState`] from a tool's arguments
//! (as soon as they are complete, before the tool runs: an optimistic UI) and from its result.
//!
//! Put it inside [`AguiLayer`](crate::agui::AguiLayer), around the model and around the tools:
//! the emitting layer then sends the change as a `STATE_DELTA` right after the call's
//! `TOOL_CALL_END` (arguments) or `TOOL_CALL_RESULT` (result).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::agent::Agent;
//! use agent_tower::agui::{AguiLayer, Event};
//! use agent_tower::message::Message;
//! use agent_tower::run::RunRequest;
//! use agent_tower::state::StateLayer;
//! use agent_tower::test_util::{MockItem, MockModel, Recording};
//! use agent_tower::tool::{ToolCall, ToolOutput, ToolRouter, ToolSpec};
//! use tower::{service_fn, Layer, ServiceBuilder, ServiceExt};
//!
//! let save = service_fn(|_: ToolCall| async { Ok::<_, std::convert::Infallible>(ToolOutput::text("saved")) });
//! let tools = ToolRouter::new().route(ToolSpec::new("write_document", "Writes the document."), save);
//! let state = StateLayer::new()
//!     .from_args("write_document", |args, state| state["document"] = args["text"].clone())
//!     .from_result("write_document", |_args, _out, state| state["saved"] = true.into());
//!
//! let mut call = Vec::from(MockItem::tool_call("c1", "write_document", r#"{"text": "Hello"}"#));
//! call.push(MockItem::tool_calls());
//! let model = MockModel::new([call, vec![MockItem::text("Done."), MockItem::stop()]]);
//!
//! let ui = Recording::new();
//! let agui = AguiLayer::new().transport(ui.clone()).predict_state("write_document", "text", "document");
//! let model = ServiceBuilder::new().layer(agui.clone()).layer(state.clone()).service(model);
//! let tools = ServiceBuilder::new().layer(agui.clone()).layer(state).service(tools);
//! let outcome = agui.layer(Agent::new(model, tools)).oneshot(RunRequest::new(vec![Message::user("write")])).await?;
//!
//! assert_eq!(outcome.state, Some(serde_json::json!({"document": "Hello", "saved": true})));
//! let kinds: Vec<_> = ui.events().iter().map(|e| e.kind().as_str()).collect();
//! let at = |kind| kinds.iter().position(|k| *k == kind).unwrap();
//! assert!(at("CUSTOM") < at("TOOL_CALL_START"), "PredictState first");
//! assert_eq!(at("STATE_DELTA"), at("TOOL_CALL_END") + 1, "optimistic: right after the arguments");
//! # Ok(()) }
//! ```
//!
//! # When it acts
//!
//! - `from_args`: when the model stream yields a call's `ToolCallEnd` and its arguments parse as
//!   JSON; before the agent runs the tool.
//! - `from_result`: when the tool's call resolves with a result (not an error).
//!
//! Hooks are synchronous and cheap: they run once per call, never per token. A run without a
//! [`SharedState`] (a service used outside an agent) is left alone.
//!
//! [`SharedState`]: crate::context::SharedState

pub mod future;
mod stream;

use std::{
    collections::HashMap,
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use serde_json::Value;
use tower_layer::Layer;
use tower_service::Service;

pub use self::stream::ResponseStream;
use crate::{
    model::{ModelRequest, ModelService},
    tool::{ToolCall, ToolOutput, ToolReply},
};

type FromArgs = Arc<dyn Fn(&Value, &mut Value) + Send + Sync>;
type FromResult = Arc<dyn Fn(&Value, &ToolOutput, &mut Value) + Send + Sync>;

#[derive(Default, Clone)]
pub(crate) struct Hooks {
    from_args: HashMap<String, FromArgs>,
    from_result: HashMap<String, FromResult>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("from_args", &self.from_args.keys().collect::<Vec<_>>())
            .field("from_result", &self.from_result.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Sets shared state from tool calls; see the [module docs](self).
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct StateLayer {
    hooks: Arc<Hooks>,
}

impl StateLayer {
    /// No hooks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// When a call of `tool` has its whole arguments: `hook(arguments, &mut state)`.
    pub fn from_args<F>(mut self, tool: &str, hook: F) -> Self
    where
        F: Fn(&Value, &mut Value) + Send + Sync + 'static,
    {
        self.hooks_mut()
            .from_args
            .insert(tool.to_owned(), Arc::new(hook));
        self
    }

    /// When a call of `tool` returns: `hook(arguments, &result, &mut state)`.
    pub fn from_result<F>(mut self, tool: &str, hook: F) -> Self
    where
        F: Fn(&Value, &ToolOutput, &mut Value) + Send + Sync + 'static,
    {
        self.hooks_mut()
            .from_result
            .insert(tool.to_owned(), Arc::new(hook));
        self
    }

    fn hooks_mut(&mut self) -> &mut Hooks {
        // Copy on write: a layer configured after it was cloned changes only itself.
        Arc::make_mut(&mut self.hooks)
    }
}

impl<S> Layer<S> for StateLayer {
    type Service = State<S>;

    fn layer(&self, inner: S) -> Self::Service {
        State {
            inner,
            hooks: self.hooks.clone(),
        }
    }
}

/// A service wrapped by [`StateLayer`].
#[derive(Clone, Debug)]
pub struct State<S> {
    inner: S,
    hooks: Arc<Hooks>,
}

impl<S> State<S> {
    crate::inner_service!();
}

impl<S> Service<ModelRequest> for State<S>
where
    S: ModelService,
{
    type Response = ResponseStream<S::Events>;
    type Error = S::Error;
    type Future = future::ModelResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let state = req.run.state.clone();
        let hooks = (!self.hooks.from_args.is_empty())
            .then(|| state.map(|state| (self.hooks.clone(), state)))
            .flatten();
        future::ModelResponseFuture::new(self.inner.call(req), future::WatchArguments(hooks))
    }
}

impl<S> Service<ToolCall> for State<S>
where
    S: Service<ToolCall>,
    S::Response: ToolReply,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = future::ToolResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let hook = self.hooks.from_result.get(&call.name).cloned();
        let state = call.run.state.clone();
        let pending = hook
            .zip(state)
            .map(|(hook, state)| (hook, state, call.arguments.clone()));
        future::ToolResponseFuture::new(self.inner.call(call), future::FromResultHook(pending))
    }
}
