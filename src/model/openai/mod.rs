//! [`OpenAi`]: a model service streaming any OpenAI-compatible `/v1/chat/completions` endpoint
//! (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter).
//!
//! Each call posts the conversation with `stream: true` and `stream_options.include_usage`, and
//! answers as soon as the response's headers arrive, with the stream of its events:
//!
//! | the provider streams | event |
//! |---|---|
//! | `delta.content` (and `delta.refusal`) | [`ModelEvent::TextDelta`] under the step's message id |
//! | `delta.reasoning_content` / `delta.reasoning` | [`ModelEvent::ReasoningDelta`] under `{message id}-reasoning` |
//! | `delta.tool_calls[]`, fragments keyed by `index` (id and name on the first) | [`ModelEvent::ToolCallStart`], [`ModelEvent::ToolCallArgs`]…, [`ModelEvent::ToolCallEnd`] at the finish |
//! | `usage` | [`ModelEvent::Usage`] |
//! | `finish_reason`, then `[DONE]` | [`ModelEvent::Finish`]: `stop`, `length`, `tool_calls`, `content_filter` |
//!
//! Failures are [`ModelError`]s whose [`kind`](ModelError::kind) the error-mapping layer and
//! retry policies understand: 429 is [`RateLimited`](ModelErrorKind::RateLimited) (with
//! `retry-after`), 401/403 [`Auth`](ModelErrorKind::Auth), a context-length 400
//! [`ContextLength`](ModelErrorKind::ContextLength), 5xx and unreachable servers
//! [`Transport`](ModelErrorKind::Transport) (retryable), a stream that ends without `[DONE]`
//! [`StreamCut`](ModelErrorKind::StreamCut). The call fails before any event is streamed, so
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

use futures_util::{StreamExt, future::BoxFuture};
use http::header;
use tower_service::Service;

use super::{BoxModelStream, ModelError, ModelErrorKind, ModelRequest};

#[derive(Clone)]
struct Config {
    client: reqwest::Client,
    base_url: String,
    endpoint: String,
    model: String,
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
        let base_url = base_url.trim_end_matches('/').to_owned();
        Self(Arc::new(Config {
            client: reqwest::Client::new(),
            endpoint: format!("{base_url}/chat/completions"),
            base_url,
            model: model.into(),
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
        self.config().client = client;
        self
    }

    /// The model's name, as sent to the provider.
    #[must_use]
    pub fn model(&self) -> &str {
        &self.0.model
    }
}

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAi")
            .field("base_url", &self.0.base_url)
            .field("model", &self.0.model)
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
            config
                .answer(request)
                .await
                .inspect_err(|error| config.failed(error))
        })
    }
}

impl Config {
    /// Says in the log that a call failed: where it went (the base URL without credentials or
    /// query) and why, with the causes; never the key.
    fn failed(&self, error: &ModelError) {
        let mut cause = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(inner) = source {
            cause.push_str(": ");
            cause.push_str(&inner.to_string());
            source = inner.source();
        }
        tracing::warn!(
            base_url = %shown(&self.base_url),
            model = %self.model,
            kind = ?error.kind(),
            cause,
            "the model call failed"
        );
    }

    /// The provider's stream for `request`, or why there is none.
    async fn answer(
        &self,
        request: ModelRequest,
    ) -> Result<BoxModelStream<ModelError>, ModelError> {
        let body = request::body(&self.model, &request);
        let mut post = self
            .client
            .post(&self.endpoint)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "text/event-stream")
            .body(body.to_string());
        if let Some(key) = &self.api_key {
            post = post.bearer_auth(key);
        }
        let response = post.send().await.map_err(|e| {
            ModelError::new(
                ModelErrorKind::Transport,
                "the provider could not be reached",
            )
            .with_source(e.without_url())
        })?;
        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let body = response.bytes().await.unwrap_or_default();
            return Err(error::from_response(status, &headers, &body));
        }
        let streamed = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_none_or(|v| v.starts_with("text/event-stream"));
        if !streamed {
            return Err(ModelError::new(
                ModelErrorKind::InvalidRequest,
                "the provider answered without streaming (not text/event-stream): does it \
                     support `stream: true`?",
            ));
        }
        let decoder = events::Decoder::new(request.run.message_id.clone());
        let events: BoxModelStream<ModelError> = Box::pin(events::events(
            response
                .bytes_stream()
                .map(|piece| piece.map_err(reqwest::Error::without_url)),
            decoder,
        ));
        Ok(events)
    }
}

/// `url` as it may be logged: without user, password or query (a provider's key may sit in any).
fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.to_string()
        }
        Err(_) => "(not a URL)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_logged_url_has_no_credentials_nor_query() {
        assert_eq!(
            super::shown("https://user:secret@api.example.com/v1?key=secret"),
            "https://api.example.com/v1"
        );
        assert_eq!(super::shown("not a url"), "(not a URL)");
    }
}
