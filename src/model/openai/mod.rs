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

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use tower_service::Service;

use super::{BoxModelStream, ModelError, ModelRequest, http::Endpoint};

#[derive(Clone)]
struct Config {
    endpoint: Endpoint,
    /// `{base_url}/chat/completions`.
    url: String,
    api_key: Option<String>,
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
        let endpoint = Endpoint::new("openai", base_url, model.into());
        Self(Arc::new(Config {
            url: format!("{}/chat/completions", endpoint.base_url),
            endpoint,
            api_key: None,
        }))
    }

    fn config(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.0)
    }

    /// The bearer token sent with every request. It is never logged nor shown by `Debug`.
    #[must_use]
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.config().api_key = Some(key.into());
        self
    }

    /// The bearer token from the environment variable `var`, if it is set and not empty.
    #[must_use]
    pub fn api_key_env(self, var: &str) -> Self {
        match std::env::var(var) {
            Ok(key) if !key.is_empty() => self.api_key(key),
            _ => self,
        }
    }

    /// The HTTP client (proxies, TLS roots, connect timeout…); default `reqwest::Client::new()`.
    #[must_use]
    pub fn client(mut self, client: reqwest::Client) -> Self {
        self.config().endpoint.client = client;
        self
    }

    /// The model's name, as sent to the provider.
    #[must_use]
    pub fn model(&self) -> &str {
        &self.0.endpoint.model
    }
}

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAi")
            .field("base_url", &self.0.endpoint.base_url)
            .field("model", &self.0.endpoint.model)
            .field("api_key", &self.0.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Service<ModelRequest> for OpenAi {
    type Response = BoxModelStream<ModelError>;
    type Error = ModelError;
    type Future = BoxFuture<'static, Result<Self::Response, ModelError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: ModelRequest) -> Self::Future {
        let config = self.0.clone();
        Box::pin(async move {
            let body = request::body(&config.endpoint.model, &request);
            let mut post = config
                .endpoint
                .client
                .post(&config.url)
                .body(body.to_string());
            if let Some(key) = &config.api_key {
                post = post.bearer_auth(key);
            }
            let decoder = events::Decoder::new(request.run.message_id.clone());
            config
                .endpoint
                .answer(post, error::from_response, decoder)
                .await
        })
    }
}
