//! [`TraceLayer`]: a `tracing` span for each run, model call and tool call, named and attributed
//! after the OpenTelemetry GenAI semantic conventions, for `tracing-opentelemetry` (or any
//! `tracing` subscriber) to export.
//!
//! | Span (`otel.name`) | Around | Attributes |
//! | --- | --- | --- |
//! | `invoke_agent {agent}` | the run service | `gen_ai.operation.name`, `gen_ai.agent.name`, `gen_ai.conversation.id` (the thread), `agent_tower.run.id`, `gen_ai.usage.*`, `gen_ai.response.finish_reasons` (the stop reason) |
//! | `chat {model}` | each model call, until its stream ends | `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.response.model` (the model that answered: a fallback's may differ), `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`, `gen_ai.response.finish_reasons`, `agent_tower.cost_usd` (with a [`CostLayer`](crate::model::cost::CostLayer)), `agent_tower.time_to_first_token_ms` |
//! | `execute_tool {tool}` | each tool call | `gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.tool.call.id` |
//!
//! Every span is a child of its run's, through the run's context (not the task's current span),
//! so that model and tool calls are attributed to their run wherever they are polled. A failure
//! sets `otel.status_code = "ERROR"` and `error.type` to its [`ErrorKind`](crate::map_error::ErrorKind) code (`timeout`,
//! `rate_limited`, …); a tool result marked as an error sets `error.type = "tool_error"`. No
//! message content is recorded unless [`record_content`](TraceLayer::record_content) is on.
//!
//! ```
//! use agent_tower::{agent::Agent, model::scripted::ScriptedModel, tool::ToolRouter, trace::TraceLayer};
//! use tower::Layer;
//!
//! let trace = TraceLayer::new().agent_name("support").model("scripted");
//! let agent = trace.layer(Agent::new(trace.layer(ScriptedModel::new()), trace.layer(ToolRouter::new())));
//! # let _ = agent;
//! ```

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
    time::Instant,
};

use futures_core::Stream;
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;
use tracing::{Span, field::Empty};

use crate::{
    BoxError,
    context::{Principal, RunContext},
    map_error::{ClassifyError, DefaultClassifier},
    model::{ModelEvent, ModelRequest, ModelService},
    run::{RunOutcome, RunRequest},
    stream::wrap::{Wrap, response_future},
    tool::{ToolCall, ToolOutput, ToolResponse},
};

/// The most bytes of content recorded on a span when content is recorded.
const MAX_CONTENT_BYTES: usize = 16 * 1024;

#[derive(Debug, Clone)]
struct Config {
    agent: String,
    model: String,
    provider: String,
    content: bool,
}

/// Spans for runs, model calls and tool calls; see the [module](self).
#[derive(Debug, Clone)]
pub struct TraceLayer {
    config: Arc<Config>,
}

impl Default for TraceLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl TraceLayer {
    /// Spans for the agent `agent-tower`, of an unnamed model, without content.
    #[must_use]
    pub fn new() -> Self {
        Self {
            config: Arc::new(Config {
                agent: env!("CARGO_PKG_NAME").to_owned(),
                model: "unknown".to_owned(),
                provider: "unknown".to_owned(),
                content: false,
            }),
        }
    }

    /// The agent's name (`gen_ai.agent.name`).
    #[must_use]
    pub fn agent_name(mut self, name: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.config).agent = name.into();
        self
    }

    /// The model's name (`gen_ai.request.model`).
    #[must_use]
    pub fn model(mut self, name: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.config).model = name.into();
        self
    }

    /// The provider's name (`gen_ai.provider.name`: `openai`, …).
    #[must_use]
    pub fn provider(mut self, name: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.config).provider = name.into();
        self
    }

    /// Also records what users and models said: the last input message on each `chat` span
    /// (`gen_ai.input.messages`) and the tool arguments on each `execute_tool` span
    /// (`gen_ai.tool.call.arguments`), at most 16 KiB each. Off by default: content may be
    /// personal or secret.
    #[must_use]
    pub fn record_content(mut self, on: bool) -> Self {
        Arc::make_mut(&mut self.config).content = on;
        self
    }
}

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Trace {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service of [`TraceLayer`], for run, model and tool services.
#[derive(Debug, Clone)]
pub struct Trace<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S> Trace<S> {
    crate::inner_service!();
}

/// The run's span, kept in its context for the spans of its calls.
#[derive(Clone)]
struct RunSpan(Span);

/// The parent of a call's span: its run's span, else the current one.
fn parent(run: &RunContext) -> Option<tracing::Id> {
    match run.extensions.get::<RunSpan>() {
        Some(RunSpan(span)) => span.id(),
        None => Span::current().id(),
    }
}

fn clipped(text: String) -> String {
    if text.len() <= MAX_CONTENT_BYTES {
        return text;
    }
    let mut end = MAX_CONTENT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Marks `span` failed with the class of `error`.
fn record_error(span: &Span, error: &(dyn std::error::Error + 'static)) {
    let class = DefaultClassifier::default().classify(error);
    span.record("otel.status_code", "ERROR");
    span.record("error.type", class.kind.code());
}

impl<S> Service<RunRequest> for Trace<S>
where
    S: Service<RunRequest, Response = RunOutcome>,
    S::Error: Into<BoxError>,
{
    type Response = RunOutcome;
    type Error = BoxError;
    type Future = TraceFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: RunRequest) -> Self::Future {
        let span = tracing::info_span!(
            target: "agent_tower::trace",
            parent: None,
            "invoke_agent",
            otel.name = %format_args!("invoke_agent {}", self.config.agent),
            otel.kind = "internal",
            otel.status_code = Empty,
            error.type = Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %self.config.agent,
            gen_ai.conversation.id = %request.run.thread_id,
            agent_tower.run.id = %request.run.run_id,
            enduser.id = request.run.principal.as_ref().map(Principal::name),
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.response.finish_reasons = Empty,
        );
        request.run.extensions.insert(RunSpan(span.clone()));
        TraceFuture::new(self.inner.call(request), Record(span))
    }
}

impl<S> Service<ToolCall> for Trace<S>
where
    S: Service<ToolCall>,
    S::Response: Traced,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = TraceFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let span = tracing::info_span!(
            target: "agent_tower::trace",
            parent: parent(&call.run),
            "execute_tool",
            otel.name = %format_args!("execute_tool {}", call.name),
            otel.kind = "internal",
            otel.status_code = Empty,
            error.type = Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %call.name,
            gen_ai.tool.call.id = %call.id,
            gen_ai.tool.call.arguments = Empty,
        );
        if self.config.content {
            span.record(
                "gen_ai.tool.call.arguments",
                clipped(call.arguments.to_string()).as_str(),
            );
        }
        TraceFuture::new(self.inner.call(call), Record(span))
    }
}

impl<S> Service<ModelRequest> for Trace<S>
where
    S: ModelService,
    S::Error: Into<BoxError>,
    S::StreamError: Into<BoxError>,
{
    type Response = ChatStream<S::Events>;
    type Error = BoxError;
    type Future = ChatFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: ModelRequest) -> Self::Future {
        let config = &self.config;
        let span = tracing::info_span!(
            target: "agent_tower::trace",
            parent: parent(&request.run),
            "chat",
            otel.name = %format_args!("chat {}", config.model),
            otel.kind = "client",
            otel.status_code = Empty,
            error.type = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = %config.provider,
            gen_ai.request.model = %config.model,
            gen_ai.response.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.response.finish_reasons = Empty,
            agent_tower.cost_usd = Empty,
            agent_tower.time_to_first_token_ms = Empty,
            gen_ai.input.messages = Empty,
        );
        if config.content
            && let Some(last) = request.messages.last()
        {
            span.record("gen_ai.input.messages", clipped(last.text()).as_str());
        }
        ChatFuture::new(
            self.inner.call(request),
            Chat {
                span,
                started: Instant::now(),
            },
        )
    }
}

/// What a finished call says on its span.
pub trait Traced {
    /// Records what `self` says on `span`.
    fn record(&self, span: &Span);
}

impl Traced for RunOutcome {
    fn record(&self, span: &Span) {
        span.record("gen_ai.usage.input_tokens", self.usage.input_tokens);
        span.record("gen_ai.usage.output_tokens", self.usage.output_tokens);
        span.record(
            "gen_ai.response.finish_reasons",
            format!("{:?}", self.stop).as_str(),
        );
    }
}

impl Traced for ToolOutput {
    fn record(&self, span: &Span) {
        if self.is_error {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", "tool_error");
        }
    }
}

/// A call that stopped at an interrupt did not run and did not fail: its span records nothing
/// more.
impl Traced for ToolResponse {
    fn record(&self, span: &Span) {
        if let Self::Output(output) = self {
            output.record(span);
        }
    }
}

/// Records a run's or a tool call's end on its span.
pub(crate) struct Record(Span);

impl<T: Traced, E: Into<BoxError>> Wrap<T, E> for Record {
    type Output = Result<T, BoxError>;

    fn wrap(self, result: Result<T, E>) -> Self::Output {
        match result {
            Ok(value) => {
                value.record(&self.0);
                Ok(value)
            }
            Err(error) => {
                let error = error.into();
                record_error(&self.0, error.as_ref());
                Err(error)
            }
        }
    }
}

response_future! {
    /// The future of a traced run or tool call: its span ends with it.
    pub struct TraceFuture<F> = Record;
    impl<F, T, E> Future for TraceFuture<F>
    where [F: Future<Output = Result<T, E>>, T: Traced, E: Into<BoxError>]
    { type Output = Result<T, BoxError>; }
}

/// Carries a model call's span on into its stream.
pub(crate) struct Chat {
    span: Span,
    started: Instant,
}

impl<St, E: Into<BoxError>> Wrap<St, E> for Chat {
    type Output = Result<ChatStream<St>, BoxError>;

    fn wrap(self, result: Result<St, E>) -> Self::Output {
        match result {
            Ok(events) => Ok(ChatStream {
                inner: events,
                span: self.span,
                started: self.started,
                first: false,
            }),
            Err(error) => {
                let error = error.into();
                record_error(&self.span, error.as_ref());
                Err(error)
            }
        }
    }
}

response_future! {
    /// The future of a traced model call: the span goes on with its stream.
    pub struct ChatFuture<F> = Chat;
    impl<F, St, E> Future for ChatFuture<F>
    where [F: Future<Output = Result<St, E>>, E: Into<BoxError>]
    { type Output = Result<ChatStream<St>, BoxError>; }
}

pin_project! {
    /// A traced model stream: its span records the first token's time, the usage and the
    /// finish reason, and ends when the stream is dropped.
    pub struct ChatStream<St> {
        #[pin]
        inner: St,
        span: Span,
        started: Instant,
        first: bool,
    }
}

impl<St, E> Stream for ChatStream<St>
where
    St: Stream<Item = Result<ModelEvent, E>>,
    E: Into<BoxError>,
{
    type Item = Result<ModelEvent, BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let item = ready!(this.inner.poll_next(cx));
        Poll::Ready(item.map(|item| match item {
            Ok(event) => {
                match &event {
                    ModelEvent::Usage(usage) => {
                        this.span
                            .record("gen_ai.usage.input_tokens", usage.input_tokens);
                        this.span
                            .record("gen_ai.usage.output_tokens", usage.output_tokens);
                        if let Some(model) = &usage.model {
                            this.span.record("gen_ai.response.model", model.as_str());
                        }
                        if let Some(cost) = usage.cost {
                            this.span.record("agent_tower.cost_usd", cost.usd());
                        }
                    }
                    ModelEvent::Finish(reason) => {
                        this.span.record(
                            "gen_ai.response.finish_reasons",
                            format!("{reason:?}").as_str(),
                        );
                    }
                    _ if !*this.first => {
                        *this.first = true;
                        let ms = this.started.elapsed().as_secs_f64() * 1000.0;
                        this.span.record("agent_tower.time_to_first_token_ms", ms);
                    }
                    _ => {}
                }
                Ok(event)
            }
            Err(error) => {
                let error = error.into();
                record_error(this.span, error.as_ref());
                Err(error)
            }
        }))
    }
}
