use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower_service::Service;

use super::{
    AguiOptions, Event, ModelEncoder, ResponseStream,
    event::{BaseEvent, RunError, RunStarted},
    future,
    layer::Config,
};
use crate::{
    BoxError,
    context::{Extensions, ForwardedProps, RunContext},
    id::MessageId,
    model::{ModelRequest, ModelService},
    run::{RunOutcome, RunRequest},
    stream::Outbox,
    tool::{Progress, ToolCall, ToolReply},
    transport::{Channel, Route, Transport},
};

/// A service wrapped by [`AguiLayer`](super::AguiLayer).
///
/// It is a `Service<ModelRequest>` around a model, a `Service<ToolCall>` around a tool and a
/// `Service<RunRequest>` around an agent; each adds the AG-UI events of its level.
pub struct Agui<S, T> {
    inner: S,
    transport: Option<T>,
    config: Arc<Config>,
}

impl<S, T> Agui<S, T> {
    pub(crate) fn new(inner: S, transport: Option<T>, config: Arc<Config>) -> Self {
        Self {
            inner,
            transport,
            config,
        }
    }

    crate::inner_service!();
}

/// Where one run's events go: its own AG-UI sink, else the layer's transport.
type Sink<T> = Route<Channel<Event>, T>;

impl<S, T> Agui<S, T>
where
    T: Transport<Event> + Clone + Send + Sync + 'static,
{
    /// The run's own sink if it brought one, else the layer's transport; the run's own
    /// [`OnDisconnect`](crate::transport::OnDisconnect) if it brought one, else the layer's.
    fn outbox(&self, run: &RunContext) -> Outbox<Sink<T>, Event> {
        Outbox::for_run(
            run,
            run.sinks.get::<Channel<Event>>(),
            self.transport.as_ref(),
            self.config.on_disconnect,
        )
    }
}

impl<S: Clone, T: Clone> Clone for Agui<S, T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            transport: self.transport.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S: fmt::Debug, T> fmt::Debug for Agui<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agui")
            .field("inner", &self.inner)
            .field("transport", &std::any::type_name::<T>())
            .field("config", &self.config)
            .finish()
    }
}

impl<S, T> Service<ModelRequest> for Agui<S, T>
where
    S: ModelService,
    T: Transport<Event> + Clone + Send + Sync + 'static,
{
    type Response = ResponseStream<S::Events, Sink<T>>;
    type Error = S::Error;
    type Future = future::ModelResponseFuture<S::Future, Sink<T>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let mut outbox = self.outbox(&req.run);
        let step_name = format!("turn {}", req.run.turn);
        let (encoder, opening) = ModelEncoder::start(
            step_name,
            req.run.message_id.clone(),
            self.config.predictions.clone(),
            req.run.state.clone(),
        );
        outbox.push(opening);
        future::ModelResponseFuture::new(self.inner.call(req), outbox, encoder)
    }
}

impl<S, T> Service<ToolCall> for Agui<S, T>
where
    S: Service<ToolCall>,
    S::Response: ToolReply,
    S::Error: fmt::Display + 'static,
    T: Transport<Event> + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = future::ToolResponseFuture<S::Future, Sink<T>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut call: ToolCall) -> Self::Future {
        let options = AguiOptions::resolve(&self.config.options, &call.run.extensions);
        let mut outbox = self.outbox(&call.run);
        let activity = options.activities().then(|| {
            // The tool may report progress: it becomes deltas of the activity.
            let progress = Progress::new();
            call.run.extensions.insert(progress.clone());
            let mut activity = future::ToolActivity::new(MessageId::new(), &call, progress);
            outbox.push(activity.snapshot("running"));
            activity
        });
        let result = future::ToolResult {
            tool_call_id: call.id.clone(),
            message_id: call.run.message_id.clone(),
            emit: options.tool_results(),
            state: call.run.state.clone(),
        };
        future::ToolResponseFuture::new(self.inner.call(call), outbox, result, activity)
    }
}

impl<S, T> Service<RunRequest> for Agui<S, T>
where
    S: Service<RunRequest, Response = RunOutcome>,
    S::Error: Into<BoxError>,
    T: Transport<Event> + Clone + Send + Sync + 'static,
{
    type Response = RunOutcome;
    type Error = BoxError;
    type Future = future::RunResponseFuture<S::Future, Sink<T>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut req: RunRequest) -> Self::Future {
        let mut outbox = self.outbox(&req.run);
        let options = match run_options(&self.config.options, &req.run.extensions) {
            Ok(options) => options,
            Err(error) => {
                outbox.push(
                    RunError {
                        message: error.to_string(),
                        code: Some("invalid_options".to_owned()),
                        usage: None,
                        base: BaseEvent::default(),
                    }
                    .into(),
                );
                return future::RunResponseFuture::rejected(
                    outbox,
                    crate::run::InvalidRequest::new(error).into(),
                );
            }
        };
        let ids = future::RunIds {
            thread_id: options
                .thread_id
                .clone()
                .unwrap_or_else(|| req.run.thread_id.clone()),
            run_id: options
                .run_id
                .clone()
                .unwrap_or_else(|| req.run.run_id.clone()),
            protocol: req
                .run
                .extensions
                .get::<super::input::ClientProtocol>()
                .copied()
                .unwrap_or_default(),
        };
        outbox.push(
            RunStarted {
                thread_id: ids.thread_id.clone(),
                run_id: ids.run_id.clone(),
                parent_run_id: None,
                input: Some(Box::new(answered(&ids, &req.messages))),
                protocol_version: Some(super::PROTOCOL_VERSION.to_owned()),
                base: BaseEvent::default(),
            }
            .into(),
        );
        if let Some(state) = req
            .state
            .as_ref()
            .filter(|_| options.state_snapshots().initial())
        {
            outbox.push(Event::state_snapshot(state.clone()));
        }
        // The run's state, shared with the agent and its tools; its changes go out as deltas.
        let shared = req.run.shared_state(req.state.as_ref());
        let span = tracing::info_span!(
            "agui.run",
            thread_id = %ids.thread_id,
            run_id = %ids.run_id,
        );
        req.run.extensions.insert(options.clone());
        future::RunResponseFuture::new(self.inner.call(req), outbox, ids, options, shared, span)
    }
}

/// What `RUN_STARTED` echoes of the run's input: the messages the run answers, those after the
/// conversation's last assistant message (the new user turn, the results of client tools), so
/// that a client that follows the run from its start (a reloaded page re-joining it) shows what
/// it answers. The conversation before them is the thread's, and is not sent again: a run's log
/// grows with its own input only.
fn answered(ids: &future::RunIds, messages: &[crate::message::Message]) -> super::RunAgentInput {
    let from = messages
        .iter()
        .rposition(|message| matches!(message, crate::message::Message::Assistant { .. }))
        .map_or(0, |last| last + 1);
    let echoed = messages[from..]
        .iter()
        .filter_map(super::input::Message::from_domain)
        .collect();
    let mut input = super::RunAgentInput::new(ids.thread_id.clone(), ids.run_id.clone(), echoed);
    input.protocol_version = None;
    input
}

/// The run's options: its context's over the request's (`forwardedProps.agui`) over the layer's.
fn run_options(
    layer: &AguiOptions,
    extensions: &Extensions,
) -> Result<AguiOptions, super::error::ConfigError> {
    let requested = match extensions
        .get::<ForwardedProps>()
        .and_then(|props| props.0.get("agui"))
    {
        Some(value) => serde_json::from_value::<AguiOptions>(value.clone())
            .map_err(|e| super::error::ConfigError::new(format!("forwardedProps.agui: {e}")))?,
        None => AguiOptions::default(),
    };
    let options = match extensions.get::<AguiOptions>() {
        Some(run) => run.clone().or(&requested.or(layer)),
        None => requested.or(layer),
    };
    options.validate()?;
    Ok(options)
}
