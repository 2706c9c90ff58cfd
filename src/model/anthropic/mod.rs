//! [`Anthropic`]: a model service streaming Anthropic's Messages API (`/v1/messages`), with
//! extended thinking kept and sent back.
//!
//! Each call posts the conversation with `stream: true` and answers once the first event has
//! arrived (so that `tower::timeout` bounds the time to the first token, and a provider that
//! stalls or is overloaded before it is retried), with the stream of its events:
//!
//! | the API streams | event |
//! |---|---|
//! | a `text` block's `text_delta`s | [`ModelEvent::TextDelta`] under the step's message id |
//! | a `thinking` block's `thinking_delta`s | [`ModelEvent::ReasoningDelta`] under `{message id}-thinking-{block index}` |
//! | its `signature_delta`, at the block's end | [`ModelEvent::ReasoningEncryptedValue`] |
//! | a `redacted_thinking` block | [`ModelEvent::ReasoningEncryptedValue`] (its data, sealed) |
//! | a `tool_use` block, its `input_json_delta`s, its end | [`ModelEvent::ToolCallStart`], [`ModelEvent::ToolCallArgs`]…, [`ModelEvent::ToolCallEnd`] |
//! | `message_start` and `message_delta` usage | one [`ModelEvent::Usage`] at the end: input (cached included), output, cache read and write |
//! | `message_delta.stop_reason`, then `message_stop` | [`ModelEvent::Finish`]: `end_turn` → stop, `max_tokens` → length, `tool_use` → tool calls, `refusal` → content filter |
//!
//! **Thinking round trip.** A thinking block's signature must go back to the API with the
//! block, or the next request of a tool-using turn fails. The signature is kept on the reasoning
//! message ([`Message::Reasoning`](crate::message::Message::Reasoning)'s `encrypted_value`; AG-UI
//! clients receive it as `REASONING_ENCRYPTED_VALUE` and send it back on their reasoning
//! message), and each request puts a step's signed thinking blocks first in its assistant turn.
//! Reasoning without a signature (another provider's) is not sent.
//!
//! Failures are [`ModelError`]s by the API's error `type` and status: `rate_limit_error`/429
//! [`RateLimited`](crate::model::ModelErrorKind::RateLimited) (with `retry-after`), `overloaded_error`/529
//! [`Overloaded`](crate::model::ModelErrorKind::Overloaded) (both retryable, in the response or in the
//! stream), 401/403 [`Auth`](crate::model::ModelErrorKind::Auth), "prompt is too long"
//! [`ContextLength`](crate::model::ModelErrorKind::ContextLength), other 400s
//! [`InvalidRequest`](crate::model::ModelErrorKind::InvalidRequest), `api_error`/5xx
//! [`Transport`](crate::model::ModelErrorKind::Transport), a stream that ends before `message_stop`
//! [`StreamCut`](crate::model::ModelErrorKind::StreamCut). A tool call cut off mid-arguments never gets its
//! [`ToolCallEnd`](crate::model::ModelEvent::ToolCallEnd).
//!
//! ```no_run
//! # async fn run() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::model::{ModelRequest, anthropic::Anthropic};
//! use agent_tower::{message::Message, context::RunContext};
//! use futures_util::StreamExt;
//! use tower::ServiceExt;
//!
//! let model = Anthropic::new("claude-sonnet-4-5")
//!     .api_key_env("ANTHROPIC_API_KEY")
//!     .thinking(4096);
//! let request = ModelRequest {
//!     messages: vec![Message::user("Say hi.")],
//!     tools: Default::default(),
//!     options: Default::default(),
//!     run: RunContext::new("thread".into(), "run".into()),
//! };
//! let mut events = model.oneshot(request).await?;
//! while let Some(event) = events.next().await {
//!     println!("{:?}", event?);
//! }
//! # Ok(()) }
//! ```
//!
//! [`ModelEvent::TextDelta`]: crate::model::ModelEvent::TextDelta
//! [`ModelEvent::ReasoningDelta`]: crate::model::ModelEvent::ReasoningDelta
//! [`ModelEvent::ReasoningEncryptedValue`]: crate::model::ModelEvent::ReasoningEncryptedValue
//! [`ModelEvent::ToolCallStart`]: crate::model::ModelEvent::ToolCallStart
//! [`ModelEvent::ToolCallArgs`]: crate::model::ModelEvent::ToolCallArgs
//! [`ModelEvent::ToolCallEnd`]: crate::model::ModelEvent::ToolCallEnd
//! [`ModelEvent::Usage`]: crate::model::ModelEvent::Usage
//! [`ModelEvent::Finish`]: crate::model::ModelEvent::Finish

mod error;
mod events;
#[cfg(feature = "fuzzing")]
pub(crate) use events::decode_sse;
mod request;
mod thinking;

use std::{fmt, sync::Arc};

use super::{
    ModelError, ModelRequest,
    http::{Endpoint, KeyHeader, http_provider},
};

/// Where Anthropic's API is (requests go to `{base}/messages`), unless [`Anthropic::base_url`]
/// says otherwise.
pub const BASE_URL: &str = "https://api.anthropic.com/v1";

/// The API version every request names (`anthropic-version`).
const VERSION: &str = "2023-06-01";

/// What the request body is built from.
#[derive(Clone)]
struct Settings {
    /// `max_tokens` when the request's options do not say (the API requires one).
    max_tokens: u32,
    thinking_budget: Option<u32>,
}

#[derive(Clone)]
struct Config {
    endpoint: Endpoint,
    settings: Settings,
}

impl Config {
    /// The call's request, and the decoder of its answer.
    fn request(
        &self,
        request: &ModelRequest,
    ) -> Result<(reqwest::RequestBuilder, events::Decoder), ModelError> {
        let body = request::body(&self.endpoint.model, &self.settings, request);
        let post = self
            .endpoint
            .post("/messages")?
            .header("anthropic-version", VERSION)
            .body(body.to_string());
        Ok((post, events::Decoder::new(request.run.message_id.clone())))
    }
}

/// A model service for Anthropic's Messages API; see the [module docs](self). Cheap to clone:
/// clones share one connection pool.
#[derive(Clone)]
pub struct Anthropic(Arc<Config>);

impl Anthropic {
    /// The model `model` (`claude-sonnet-4-5`, …) at [`BASE_URL`].
    pub fn new(model: impl Into<String>) -> Self {
        let key = KeyHeader::Named("x-api-key");
        Self(Arc::new(Config {
            endpoint: Endpoint::new("anthropic", key, BASE_URL, model.into()),
            settings: Settings {
                max_tokens: 8192,
                thinking_budget: None,
            },
        }))
    }

    /// Extended thinking, with at most `budget_tokens` of thinking per step (the API's minimum
    /// is 1,024; the step's `max_tokens` must be larger). The temperature is then not sent: the
    /// API takes only its own with thinking.
    #[must_use]
    pub fn thinking(mut self, budget_tokens: u32) -> Self {
        self.config().settings.thinking_budget = Some(budget_tokens);
        self
    }

    /// `max_tokens` for requests whose options set none; default 8,192.
    #[must_use]
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.config().settings.max_tokens = max_tokens;
        self
    }
}

http_provider!(Anthropic);

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anthropic")
            .field("endpoint", &self.0.endpoint)
            .field("thinking_budget", &self.0.settings.thinking_budget)
            .finish_non_exhaustive()
    }
}
