use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower_service::Service;

use super::{
    AguiOptions, Event, ModelEncoder, ResponseStream,
    framing::{Framing, invalid_options},
    future,
    layer::Config,
};
use crate::{
    BoxError,
    context::RunContext,
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
        let framing = match Framing::of(&self.config.options, &req.run) {
            Ok(framing) => framing,
            Err(error) => {
                outbox.push(invalid_options(&error));
                return future::RunResponseFuture::rejected(
                    outbox,
                    crate::run::InvalidRequest::new(error).into(),
                );
            }
        };
        for event in framing.opening(&req) {
            outbox.push(event);
        }
        // The run's state, shared with the agent and its tools; its changes go out as deltas.
        let shared = req.run.shared_state(req.state.as_ref());
        let span = tracing::info_span!(
            "agui.run",
            thread_id = %framing.ids.thread_id,
            run_id = %framing.ids.run_id,
        );
        req.run.extensions.insert(framing.options.clone());
        future::RunResponseFuture::new(self.inner.call(req), outbox, framing, shared, span)
    }
}
