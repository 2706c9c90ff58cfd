//! [`OpenAi`]: a model service streaming any OpenAI-compatible `/v1/chat/completions` endpoint
//! (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter).
//!
//! Each call posts the conversation with `stream: true` and `stream_options.include_usage`, and
//! answers once the first event has arrived (so that `tower::timeout` bounds the time to the
//! first token, and a provider that stalls before it is retried), with the stream of its events:
//!
//! | the provider streams | event |
//! |---|---|
//! | `delta.content` (and `delta.refusal`) | [`ModelEvent::TextDelta`] under the step's message id |
//! | `delta.reasoning_content` / `delta.reasoning` | [`ModelEvent::ReasoningDelta`] under `{message id}-reasoning` |
//! | `delta.tool_calls[]`, fragments keyed by `index` (id and name on the first) | [`ModelEvent::ToolCallStart`], [`ModelEvent::ToolCallArgs`]…, [`ModelEvent::ToolCallEnd`] at the finish |
//! | `usage` | [`ModelEvent::Usage`] |
//! | `finish_reason`, then `[DONE]` | [`ModelEvent::Finish`]: `stop`, `length`, `tool_calls`, `content_filter` |
//!
//! Failures are [`ModelError`]s whose [`kind`](crate::model::ModelError::kind) the error-mapping layer and
//! retry policies understand: 429 is [`RateLimited`](crate::model::ModelErrorKind::RateLimited) (with
//! `retry-after`), 401/403 [`Auth`](crate::model::ModelErrorKind::Auth), a context-length 400
//! [`ContextLength`](crate::model::ModelErrorKind::ContextLength), 5xx and unreachable servers
//! [`Transport`](crate::model::ModelErrorKind::Transport) (retryable), a stream that ends without `[DONE]`
//! [`StreamCut`](crate::model::ModelErrorKind::StreamCut) (a cut before the first event is
//! [`Transport`](crate::model::ModelErrorKind::Transport)). The call fails before any event is streamed, so
//! retrying the call ([`model::RetryPolicy`](crate::model::RetryPolicy)) never repeats tokens.
//!
//! ```no_run
//! # async fn run() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::model::{ModelRequest, openai::OpenAi};
//! use agent_tower::{message::Message, context::RunContext};
//! use futures_util::StreamExt;
//! use tower::ServiceExt;
//!
//! let model = OpenAi::new("http://127.0.0.1:11434/v1", "qwen3:0.6b").api_key_env("OPENAI_API_KEY");
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

#[derive(Clone)]
struct Config {
    endpoint: Endpoint,
}

impl Config {
    /// The call's request, and the decoder of its answer.
    fn request(
        &self,
        request: &ModelRequest,
    ) -> Result<(reqwest::RequestBuilder, events::Decoder), ModelError> {
        let body = request::body(&self.endpoint.model, request);
        let post = self
            .endpoint
            .post("/chat/completions")?
            .body(body.to_string());
        Ok((post, events::Decoder::new(request.run.message_id.clone())))
    }
}

/// A model service for an OpenAI-compatible chat-completions endpoint; see the
/// [module docs](self). Cheap to clone: clones share one connection pool.
#[derive(Clone)]
pub struct OpenAi(Arc<Config>);

impl OpenAi {
    /// The model `model` at `base_url`, the URL the provider's paths start from (`…/v1`):
    /// `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1` (Ollama),
    /// `http://127.0.0.1:8080/v1` (llama.cpp).
    pub fn new(base_url: &str, model: impl Into<String>) -> Self {
        Self(Arc::new(Config {
            endpoint: Endpoint::new("openai", KeyHeader::Bearer, base_url, model.into()),
        }))
    }
}

http_provider!(OpenAi);

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OpenAi").field(&self.0.endpoint).finish()
    }
}
