use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use agent_client_protocol::v1::schema::SessionUpdate;
use tower_service::Service;

use super::{
    Notifier, UpdateEncoder, future,
    layer::Config,
    tool_call::{announced, plan},
};
use crate::{
    context::RunContext,
    model::{ModelRequest, ModelService},
    stream::Outbox,
    tool::{Progress, Started, ToolCall, ToolReply},
    transport::{Route, Transport},
};

/// A service wrapped by [`AcpLayer`](super::AcpLayer).
///
/// It is a `Service<ModelRequest>` around a model and a `Service<ToolCall>` around a tool; each
/// sends the session updates of its level.
pub struct Acp<S, T> {
    inner: S,
    transport: Option<T>,
    config: Arc<Config>,
}

impl<S, T> Acp<S, T> {
    pub(crate) fn new(inner: S, transport: Option<T>, config: Arc<Config>) -> Self {
        Self {
            inner,
            transport,
            config,
        }
    }

    crate::inner_service!();
}

/// Where one turn's updates go: its own notifier, else the layer's transport.
type Sink<T> = Route<Notifier, T>;

impl<S, T> Acp<S, T>
where
    T: Transport<SessionUpdate> + Clone + Send + Sync + 'static,
{
    /// The turn's own notifier if it brought one, else the layer's transport.
    fn outbox(&self, run: &RunContext) -> Outbox<Sink<T>, SessionUpdate> {
        Outbox::for_run(
            run,
            run.sinks.get::<Notifier>(),
            self.transport.as_ref(),
            self.config.on_disconnect,
        )
    }
}

impl<S: Clone, T: Clone> Clone for Acp<S, T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            transport: self.transport.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S: fmt::Debug, T> fmt::Debug for Acp<S, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acp")
            .field("inner", &self.inner)
            .field("transport", &std::any::type_name::<T>())
            .field("config", &self.config)
            .finish()
    }
}

impl<S, T> Service<ModelRequest> for Acp<S, T>
where
    S: ModelService,
    T: Transport<SessionUpdate> + Clone + Send + Sync + 'static,
{
    type Response = super::ResponseStream<S::Events, Sink<T>>;
    type Error = S::Error;
    type Future = future::ModelResponseFuture<S::Future, Sink<T>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let outbox = self.outbox(&req.run);
        let session_cost = req.run.extensions.get().cloned().unwrap_or_default();
        let encoder = UpdateEncoder::new(self.config.context_window, session_cost);
        future::ModelResponseFuture::new(self.inner.call(req), outbox, encoder)
    }
}

impl<S, T> Service<ToolCall> for Acp<S, T>
where
    S: Service<ToolCall>,
    S::Response: ToolReply,
    S::Error: fmt::Display,
    T: Transport<SessionUpdate> + Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = future::ToolResponseFuture<S::Future, Sink<T>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut call: ToolCall) -> Self::Future {
        let mut outbox = self.outbox(&call.run);
        let kind = self.config.kinds.of_call(&call);
        outbox.push(SessionUpdate::ToolCall(announced(
            call.id.to_string(),
            &call.name,
            kind,
            call.arguments.clone(),
        )));
        if let Some(plan) = plan(&call.name, &call.arguments) {
            outbox.push(SessionUpdate::Plan(plan));
        }
        // Inner layers say when the call really runs, and the tool may report progress.
        let started = Started::new();
        let progress = Progress::new();
        call.run.extensions.insert(started.clone());
        call.run.extensions.insert(progress.clone());
        let lifecycle = future::Lifecycle {
            id: call.id.clone(),
            started,
            progress,
            running: false,
        };
        future::ToolResponseFuture::new(self.inner.call(call), outbox, lifecycle)
    }
}
