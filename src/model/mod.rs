//! Model calls as services: [`ModelRequest`] in, a stream of [`ModelEvent`]s out.
//!
//! A model service is any `tower::Service<ModelRequest>` whose response is a
//! `Stream<Item = Result<ModelEvent, E>>`. The
//! [`ModelService`] trait is an alias for exactly that, to keep bounds readable; it is implemented
//! for every such service and never needs to be implemented by hand.
//!
//! Every delta carries the id of what it belongs to, so reasoning, text and several tool calls can
//! interleave in one stream.
//!
//! ```
//! use agent_tower::model::{FinishReason, ModelEvent, ModelRequest, ModelService};
//! use futures_util::stream;
//! use tower::service_fn;
//!
//! // A model that always answers "hi" under the step's message id.
//! let model = service_fn(|req: ModelRequest| async move {
//!     let id = req.run.message_id.clone();
//!     Ok::<_, std::convert::Infallible>(stream::iter([
//!         Ok::<_, std::convert::Infallible>(ModelEvent::TextDelta { message_id: id, delta: "hi".into() }),
//!         Ok(ModelEvent::Finish(FinishReason::Stop)),
//!     ]))
//! });
//! fn is_model<M: ModelService>(_: &M) {}
//! is_model(&model);
//! ```

mod admit;
#[cfg(feature = "anthropic")]
#[cfg_attr(docsrs, doc(cfg(feature = "anthropic")))]
pub mod anthropic;
pub mod budget;
pub mod cost;
pub mod fallback;
#[cfg(feature = "gemini")]
#[cfg_attr(docsrs, doc(cfg(feature = "gemini")))]
pub mod gemini;
#[cfg(any(feature = "openai", feature = "anthropic", feature = "gemini"))]
mod http;
mod idle;
mod observe;
#[cfg(feature = "openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "openai")))]
pub mod openai;
pub mod rate_limit;
mod retry;
pub mod scripted;

pub use admit::{AdmitFuture, WrapEvents};
pub use cost::Cost;
pub use idle::{IdleFuture, IdleStream, IdleTimeout, IdleTimeoutLayer};
pub use observe::ModelObserver;
pub(crate) use observe::Observer;
pub use retry::{ModelCallError, RetryPolicy};

use std::{error::Error as StdError, fmt, time::Duration};

use futures_core::Stream;
use serde::{Deserialize, Serialize};
use tower_service::Service;

use crate::{
    BoxError,
    context::RunContext,
    delta::Delta,
    id::{MessageId, ToolCallId},
    message::Message,
    tool::ToolSpec,
};

/// One call to a model.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call (shared by every step of a run).
    pub tools: std::sync::Arc<[ToolSpec]>,
    /// Sampling options.
    pub options: ModelOptions,
    /// The run this step belongs to; `run.message_id` is the id of the message this step writes.
    pub run: RunContext,
}

/// Sampling options a provider may honour.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ModelOptions {
    /// Upper bound on the tokens of the answer.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
}

/// What a model streams. Protocol-neutral; every delta says what it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A piece of the visible answer.
    TextDelta {
        /// The message the text belongs to.
        message_id: MessageId,
        /// The new text.
        delta: Delta,
    },
    /// A piece of the model's reasoning.
    ReasoningDelta {
        /// The reasoning message the text belongs to.
        message_id: MessageId,
        /// The new text.
        delta: Delta,
    },
    /// An opaque value the provider needs back with a reasoning message: Anthropic's thinking
    /// signature, or its redacted thinking. It is kept on the message
    /// ([`Message::Reasoning`]'s `encrypted_value`), sent to AG-UI clients as
    /// `REASONING_ENCRYPTED_VALUE` and accepted back from them.
    ReasoningEncryptedValue {
        /// The reasoning message it belongs to.
        message_id: MessageId,
        /// The value, as the provider gave it.
        value: String,
    },
    /// The model starts a tool call.
    ToolCallStart {
        /// The call's id.
        id: ToolCallId,
        /// The tool's name.
        name: String,
    },
    /// A piece of a tool call's JSON arguments.
    ToolCallArgs {
        /// The call's id.
        id: ToolCallId,
        /// The new fragment of JSON text.
        delta: Delta,
    },
    /// An opaque value the provider needs back with a tool call (Gemini's thought signature).
    /// It is kept on the call ([`ToolCallRequest`](crate::message::ToolCallRequest)'s
    /// `encrypted_value`), sent to AG-UI clients as `REASONING_ENCRYPTED_VALUE` (subtype
    /// `tool-call`) and accepted back from them.
    ToolCallEncryptedValue {
        /// The call's id.
        id: ToolCallId,
        /// The value, as the provider gave it.
        value: String,
    },
    /// A tool call's arguments are complete.
    ToolCallEnd {
        /// The call's id.
        id: ToolCallId,
    },
    /// Token counts for this step.
    Usage(Usage),
    /// The model is done with this step.
    Finish(FinishReason),
}

/// Why a model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The output token limit was reached.
    Length,
    /// The model wants its tool calls run.
    ToolCalls,
    /// The provider refused or filtered the answer.
    ContentFilter,
}

/// Token counts of one provider and model, and what they cost; summed over a run by the agent.
///
/// `input_tokens` and `output_tokens` are totals; `reasoning_tokens` is a part of the output,
/// `cached_input_tokens` and `cache_write_input_tokens` parts of the input (AG-UI's accounting).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Answer tokens.
    pub output_tokens: u64,
    /// Reasoning tokens, when the provider reports them.
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens served from a cache, when the provider reports them.
    pub cached_input_tokens: Option<u64>,
    /// Prompt tokens written to a cache (Anthropic's `cache_creation_input_tokens`), when the
    /// provider reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_input_tokens: Option<u64>,
    /// What these tokens cost, when a [`CostLayer`](cost::CostLayer) knows the model's prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// The provider that answered (`openai`, `anthropic`, `gcp.gemini`), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model that answered, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Usage {
    /// Input plus output tokens.
    #[must_use]
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Adds another step's counts and cost to these. The sum names a provider and a model only
    /// while every step it counts named the same.
    pub fn add(&mut self, other: &Usage) {
        if self.is_empty() {
            self.provider.clone_from(&other.provider);
            self.model.clone_from(&other.model);
        } else {
            if self.provider != other.provider {
                self.provider = None;
            }
            if self.model != other.model {
                self.model = None;
            }
        }
        self.cost = match (self.cost, other.cost) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        fn add_opt(a: &mut Option<u64>, b: Option<u64>) {
            if let Some(b) = b {
                *a = Some(a.unwrap_or(0) + b);
            }
        }
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        add_opt(&mut self.reasoning_tokens, other.reasoning_tokens);
        add_opt(&mut self.cached_input_tokens, other.cached_input_tokens);
        add_opt(
            &mut self.cache_write_input_tokens,
            other.cache_write_input_tokens,
        );
    }

    /// Whether nothing was counted.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Whether `other` counts the same provider and model.
    #[must_use]
    pub fn same_model(&self, other: &Usage) -> bool {
        self.provider == other.provider && self.model == other.model
    }
}

/// What kind of failure a model call had. Classifiers match on this, never on messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The provider asked us to slow down (HTTP 429).
    RateLimited,
    /// The provider is overloaded (Anthropic's 529 and `overloaded_error`, Gemini's 503).
    Overloaded,
    /// The conversation does not fit the model's context window.
    ContextLength,
    /// The credentials were refused.
    Auth,
    /// The provider rejected the request as malformed.
    InvalidRequest,
    /// The provider refused to answer.
    Refusal,
    /// The connection failed or the provider had a server error.
    Transport,
    /// The stream ended before the provider said it was done.
    StreamCut,
    /// The model went silent for too long (an [idle timeout](IdleTimeoutLayer)).
    Timeout,
    /// A spending limit was reached ([`BudgetLayer`](budget::BudgetLayer)).
    BudgetExceeded,
    /// Anything else.
    Other,
}

impl ModelErrorKind {
    /// Whether trying the same request again may succeed.
    #[must_use]
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::RateLimited | Self::Overloaded | Self::Transport)
    }

    /// A stable snake_case name, used in error codes.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RateLimited => "rate_limited",
            Self::Overloaded => "overloaded",
            Self::ContextLength => "context_length",
            Self::Auth => "auth",
            Self::InvalidRequest => "invalid_request",
            Self::Refusal => "refusal",
            Self::Transport => "transport",
            Self::StreamCut => "stream_cut",
            Self::Timeout => "timeout",
            Self::BudgetExceeded => "budget_exceeded",
            Self::Other => "model_error",
        }
    }
}

/// A failed model call or stream.
#[derive(Debug)]
pub struct ModelError {
    kind: ModelErrorKind,
    message: String,
    retry_after: Option<Duration>,
    source: Option<BoxError>,
}

impl ModelError {
    /// An error of `kind` with a message for people.
    pub fn new(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
            source: None,
        }
    }

    /// Attaches the provider's retry hint.
    #[must_use]
    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// Attaches the underlying cause.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The kind of failure.
    #[must_use]
    pub fn kind(&self) -> ModelErrorKind {
        self.kind
    }

    /// The message for people.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// How long the provider asked us to wait before retrying.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl StdError for ModelError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// An alias for `Service<ModelRequest>` whose response is a stream of
/// `Result<ModelEvent, StreamError>`.
///
/// Implemented for every such service; use it in bounds: `fn run<M: ModelService>(model: M)`.
/// `M::Events` is the stream type, `M::StreamError` its error type.
///
/// The stream's error is a type of its own, not the service's `Error`: tower middleware such as
/// `Timeout` or `Retry` turn the service's error into a `BoxError` but leave the stream as it is,
/// and `Timeout<M>` must stay a model service.
pub trait ModelService: Service<ModelRequest, Response = <Self as ModelService>::Events> {
    /// The stream of events the service answers with.
    type Events: Stream<Item = Result<ModelEvent, <Self as ModelService>::StreamError>>;
    /// The error of the stream's items.
    type StreamError;
}

impl<S, St, E> ModelService for S
where
    S: Service<ModelRequest, Response = St>,
    St: Stream<Item = Result<ModelEvent, E>>,
{
    type Events = St;
    type StreamError = E;
}

/// A boxed model stream, for providers that box at their own edge.
pub type BoxModelStream<E = BoxError> =
    std::pin::Pin<Box<dyn Stream<Item = Result<ModelEvent, E>> + Send + 'static>>;

/// A model service whose type is erased: for a model chosen at run time (`--model`).
pub type BoxModel = tower::util::BoxCloneSyncService<ModelRequest, BoxModelStream, BoxError>;

/// Erases `model`'s type: its errors and its stream's errors boxed, its stream boxed.
///
/// ```
/// use agent_tower::model::{BoxModel, boxed, scripted::ScriptedModel};
///
/// let model: BoxModel = boxed(ScriptedModel::new());
/// # let _ = model;
/// ```
pub fn boxed<M>(model: M) -> BoxModel
where
    M: ModelService + Clone + Send + Sync + 'static,
    M::Error: Into<BoxError>,
    M::Future: Send + 'static,
    M::Events: Send + 'static,
    M::StreamError: Into<BoxError>,
{
    use futures_util::StreamExt;
    use tower::ServiceExt;
    fn erase<St, E>(events: St) -> BoxModelStream
    where
        St: Stream<Item = Result<ModelEvent, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        Box::pin(events.map(|event| event.map_err(Into::into)))
    }
    tower::util::BoxCloneSyncService::new(model.map_err(Into::into).map_response(erase))
}

/// Whether a model call that failed with `error` may succeed if tried again, by the same model
/// or another: a retryable [`ModelError`] or a `tower::timeout` anywhere in its causes.
pub(crate) fn worth_another_try(error: &(dyn StdError + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(model) = error.downcast_ref::<ModelError>() {
            return model.kind().is_retryable();
        }
        if error.is::<tower::timeout::error::Elapsed>() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// A request of one empty conversation, for the model layers' tests.
#[cfg(test)]
pub(crate) fn test_request() -> ModelRequest {
    ModelRequest {
        messages: Vec::new(),
        tools: Default::default(),
        options: ModelOptions::default(),
        run: RunContext::new("t".into(), "r".into()),
    }
}
