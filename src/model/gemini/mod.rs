//! [`Gemini`]: a model service streaming Google's Gemini API (`:streamGenerateContent`).
//!
//! Each call posts the conversation (`alt=sse`) and answers once the first event has arrived
//! (so that `tower::timeout` bounds the time to the first token, and a provider that stalls or
//! is overloaded before it is retried), with the stream of its events:
//!
//! | the API streams | event |
//! |---|---|
//! | a part's `text` | [`ModelEvent::TextDelta`] under the step's message id |
//! | a `thought` part's `text` (with [`Gemini::thinking`]) | [`ModelEvent::ReasoningDelta`] under `{message id}-thinking` |
//! | a `functionCall` part (whole) | [`ModelEvent::ToolCallStart`], [`ModelEvent::ToolCallArgs`], [`ModelEvent::ToolCallEnd`]; its `id`, else `{message id}-call-{n}` |
//! | a `functionCall` part's `thoughtSignature` | [`ModelEvent::ToolCallEncryptedValue`], after the call's start |
//! | `usageMetadata` (the last one) | [`ModelEvent::Usage`]: input (cached included), output (thoughts included), reasoning, cached |
//! | `finishReason`, then the end of the body | [`ModelEvent::Finish`]: `STOP` → stop (tool calls when it called), `MAX_TOKENS` → length, `SAFETY`, `RECITATION`, `PROHIBITED_CONTENT`… → content filter |
//! | `promptFeedback.blockReason` (the prompt blocked) | [`ModelEvent::Finish`]: content filter |
//!
//! Failures are [`ModelError`]s by the RPC status and HTTP status: `RESOURCE_EXHAUSTED`/429
//! [`RateLimited`](crate::model::ModelErrorKind::RateLimited) (its `RetryInfo.retryDelay` as the
//! retry hint), `UNAVAILABLE`/503 [`Overloaded`](crate::model::ModelErrorKind::Overloaded),
//! 401/403 and an invalid key [`Auth`](crate::model::ModelErrorKind::Auth), an input over the
//! token limit [`ContextLength`](crate::model::ModelErrorKind::ContextLength), other 400s and
//! 404 [`InvalidRequest`](crate::model::ModelErrorKind::InvalidRequest), 500/504
//! [`Transport`](crate::model::ModelErrorKind::Transport), a body that ends before a finish
//! reason [`StreamCut`](crate::model::ModelErrorKind::StreamCut), a function call the API
//! refused (`MALFORMED_FUNCTION_CALL`) [`Other`](crate::model::ModelErrorKind::Other).
//!
//! **Thought signatures.** With thinking on, a function call comes with the signature of the
//! thinking that led to it, which must go back with the call (Gemini 3 refuses a conversation
//! without it). It is kept on the call ([`ToolCallRequest`](crate::message::ToolCallRequest)'s
//! `encrypted_value`; AG-UI clients receive it as `REASONING_ENCRYPTED_VALUE` of subtype
//! `tool-call` and send it back on their tool call) and put back on the call's part. The
//! thoughts themselves are shown, not sent back.
//!
//! ```no_run
//! # async fn run() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::model::{ModelRequest, gemini::Gemini};
//! use agent_tower::{message::Message, context::RunContext};
//! use futures_util::StreamExt;
//! use tower::ServiceExt;
//!
//! let model = Gemini::new("gemini-2.5-flash").api_key_env("GEMINI_API_KEY");
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
//! [`ModelEvent::ToolCallStart`]: crate::model::ModelEvent::ToolCallStart
//! [`ModelEvent::ToolCallArgs`]: crate::model::ModelEvent::ToolCallArgs
//! [`ModelEvent::ToolCallEnd`]: crate::model::ModelEvent::ToolCallEnd
//! [`ModelEvent::ToolCallEncryptedValue`]: crate::model::ModelEvent::ToolCallEncryptedValue
//! [`ModelEvent::Usage`]: crate::model::ModelEvent::Usage
//! [`ModelEvent::Finish`]: crate::model::ModelEvent::Finish

mod error;
mod events;
#[cfg(feature = "fuzzing")]
pub(crate) use events::decode_sse;
mod request;

use std::{fmt, sync::Arc};

use super::{
    ModelError, ModelRequest,
    http::{Endpoint, KeyHeader, http_provider},
};

/// Where Google's Gemini API is (requests go to `{base}/models/{model}:streamGenerateContent`),
/// unless [`Gemini::base_url`] says otherwise.
pub const BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// What the request body is built from.
#[derive(Clone)]
struct Settings {
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
        let body = request::body(&self.settings, request);
        let path = format!(
            "/models/{}:streamGenerateContent?alt=sse",
            self.endpoint.model
        );
        let post = self.endpoint.post(&path)?.body(body.to_string());
        Ok((post, events::Decoder::new(request.run.message_id.clone())))
    }
}

/// A model service for Google's Gemini API; see the [module docs](self). Cheap to clone: clones
/// share one connection pool.
#[derive(Clone)]
pub struct Gemini(Arc<Config>);

impl Gemini {
    /// The model `model` (`gemini-2.5-flash`, …; a leading `models/` is fine) at [`BASE_URL`].
    pub fn new(model: impl Into<String>) -> Self {
        let model: String = model.into();
        let model = model.strip_prefix("models/").unwrap_or(&model).to_owned();
        // The provider's name is the OpenTelemetry GenAI convention's.
        let key = KeyHeader::Named("x-goog-api-key");
        Self(Arc::new(Config {
            endpoint: Endpoint::new("gcp.gemini", key, BASE_URL, model),
            settings: Settings {
                thinking_budget: None,
            },
        }))
    }

    /// Thinking shown as reasoning (`includeThoughts`), with at most `budget_tokens` of it per
    /// step.
    #[must_use]
    pub fn thinking(mut self, budget_tokens: u32) -> Self {
        self.config().settings.thinking_budget = Some(budget_tokens);
        self
    }
}

http_provider!(Gemini);

impl fmt::Debug for Gemini {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gemini")
            .field("endpoint", &self.0.endpoint)
            .field("thinking_budget", &self.0.settings.thinking_budget)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_model_named_with_its_resource_prefix_is_the_same_model() {
        assert_eq!(
            super::Gemini::new("models/gemini-2.5-flash").model(),
            "gemini-2.5-flash"
        );
    }
}
