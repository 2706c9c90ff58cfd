//! What the HTTP providers share: posting a streamed call and reading its refusal, decoding its
//! server-sent events into [`ModelEvent`]s, answering only once the first event is there, and
//! logging a failed call without its secrets.

use std::{collections::VecDeque, fmt, pin::Pin, time::Duration};

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_core::Stream;
use futures_util::StreamExt;
use http::{HeaderMap, StatusCode, header};
use serde_json::Value;

use super::{BoxModelStream, ModelError, ModelErrorKind, ModelEvent};

/// The longest provider message kept in an error.
const MAX_MESSAGE: usize = 500;

/// Turns one provider's server-sent events into model events.
pub(crate) trait Decode: Send + 'static {
    /// What says a stream is complete (`[DONE]`, `message_stop`), for the error of a cut one.
    const LAST: &'static str;

    /// One event's `data:`; `Ok(true)` when it was the last.
    fn data(&mut self, data: &str, out: &mut VecDeque<ModelEvent>) -> Result<bool, ModelError>;

    /// The body ended before an event said it was the last: the events that end the answer, or
    /// why it is incomplete. By default the stream was cut.
    fn body_ended(&mut self, _out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        Err(ModelError::new(
            ModelErrorKind::StreamCut,
            format!("the provider's stream ended before {}", Self::LAST),
        ))
    }
}

/// An error for a stream the provider sent that cannot be read.
pub(crate) fn unreadable(what: impl fmt::Display) -> ModelError {
    ModelError::new(
        ModelErrorKind::Other,
        format!("the provider sent an unreadable stream: {what}"),
    )
}

/// `message`, cut to [`MAX_MESSAGE`] bytes on a character boundary.
pub(crate) fn shorten(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// `retry-after-ms` (OpenAI), else `retry-after` in seconds.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = |name: &str, scale: f64| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s / scale))
    };
    seconds("retry-after-ms", 1000.0).or_else(|| seconds("retry-after", 1.0))
}

/// A provider's error body, wherever the provider put its parts: its `error` object (or the body
/// itself) and its message.
pub(crate) struct ErrorBody<'a> {
    /// The `error` object, or the whole body.
    pub(crate) error: &'a Value,
    /// The message for people.
    pub(crate) message: String,
}

impl<'a> ErrorBody<'a> {
    pub(crate) fn of(body: &'a Value) -> Self {
        let error = body.get("error").unwrap_or(body);
        let message = match error {
            Value::String(message) => message.clone(),
            _ => error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| body.to_string(), str::to_owned),
        };
        Self { error, message }
    }

    /// A text field of the error object (`code`, `type`, `status`…).
    pub(crate) fn field(&self, name: &str) -> Option<&'a str> {
        self.error.get(name).and_then(Value::as_str)
    }
}

/// What a provider reads in an error: its kind, and a retry hint the body gives.
pub(crate) type Classify<'f> = &'f dyn Fn(&ErrorBody<'_>) -> (ModelErrorKind, Option<Duration>);

/// A refused call: its body parsed (or taken as text), the kind and hint `classify` reads in it,
/// the message `HTTP {status}: {message}`, and the headers' `retry-after` when the body gave no
/// hint.
pub(crate) fn refused(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    classify: Classify<'_>,
) -> ModelError {
    let parsed: Value = serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
    let described = ErrorBody::of(&parsed);
    let (kind, hint) = classify(&described);
    let message = shorten(format!("HTTP {}: {}", status.as_u16(), described.message));
    match hint.or_else(|| retry_after(headers)) {
        Some(after) => ModelError::new(kind, message).with_retry_after(after),
        None => ModelError::new(kind, message),
    }
}

/// An error a provider sent inside its stream, read by `classify`.
pub(crate) fn stream_error(body: &Value, classify: Classify<'_>) -> ModelError {
    let described = ErrorBody::of(body);
    let (kind, hint) = classify(&described);
    let error = ModelError::new(kind, shorten(described.message));
    match hint {
        Some(after) => error.with_retry_after(after),
        None => error,
    }
}

/// A provider's refusal of a call: its status, headers and body as a [`ModelError`].
pub(crate) type Refusal = fn(StatusCode, &HeaderMap, &[u8]) -> ModelError;

/// How a provider takes its key.
#[derive(Debug, Clone, Copy)]
// With one provider's feature alone, the other way is never taken.
#[cfg_attr(
    not(all(feature = "openai", any(feature = "anthropic", feature = "gemini"))),
    allow(dead_code)
)]
pub(crate) enum KeyHeader {
    /// `Authorization: Bearer …`.
    Bearer,
    /// A header of its own (`x-api-key`).
    Named(&'static str),
}

/// Where a provider is: what its calls go to, with which key, and what its logs say.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) client: reqwest::Client,
    /// The URL the provider's paths start from.
    pub(crate) base_url: String,
    /// The model's name, as sent to the provider.
    pub(crate) model: String,
    /// The provider's name in usage and traces (`gen_ai.provider.name`).
    pub(crate) provider: &'static str,
    /// The key sent with every call; never logged.
    pub(crate) key: Option<String>,
    key_header: KeyHeader,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    pub(crate) fn new(
        provider: &'static str,
        key_header: KeyHeader,
        base_url: &str,
        model: String,
    ) -> Self {
        Self {
            client: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            model,
            provider,
            key: None,
            key_header,
        }
    }

    /// The same provider at `base_url`.
    pub(crate) fn at(&mut self, base_url: &str) {
        self.base_url = base_url.trim_end_matches('/').to_owned();
    }

    /// A POST to `{base_url}{path}` with the key, or why the key cannot be sent.
    pub(crate) fn post(&self, path: &str) -> Result<reqwest::RequestBuilder, ModelError> {
        let post = self.client.post(format!("{}{path}", self.base_url));
        let Some(key) = &self.key else {
            return Ok(post);
        };
        let mut value = match self.key_header {
            KeyHeader::Bearer => http::HeaderValue::try_from(format!("Bearer {key}")),
            KeyHeader::Named(_) => http::HeaderValue::from_str(key),
        }
        .map_err(|_| {
            ModelError::new(
                ModelErrorKind::Auth,
                "the API key cannot be sent: it is not a valid header value",
            )
        })?;
        value.set_sensitive(true);
        Ok(match self.key_header {
            KeyHeader::Bearer => post.header(header::AUTHORIZATION, value),
            KeyHeader::Named(name) => post.header(name, value),
        })
    }

    /// Sends `post` and answers with the stream of its events once the first one is there,
    /// so that a provider that fails or stalls before it fails the *call*: `tower::timeout`
    /// bounds the time to the first event and a retry repeats nothing the client saw.
    pub(crate) async fn answer(
        &self,
        post: reqwest::RequestBuilder,
        refused: Refusal,
        decoder: impl Decode,
    ) -> Result<BoxModelStream<ModelError>, ModelError> {
        let answered = async {
            let post = post
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "text/event-stream");
            let again = post.try_clone();
            let mut response = post.send().await;
            // A request the server never answered (a kept-alive connection it had closed, as
            // llama.cpp's server does after each streamed answer) goes once more, on a new
            // connection: nothing of it was seen, whatever retry policy is around the model.
            if let (Err(error), Some(again)) = (&response, again)
                && unanswered(error)
            {
                response = again.send().await;
            }
            let response = response.map_err(|e| {
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
                return Err(refused(status, &headers, &body));
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
                     support streaming?",
                ));
            }
            let body = response
                .bytes_stream()
                .map(|piece| piece.map_err(reqwest::Error::without_url));
            let (provider, model) = (self.provider, self.model.clone());
            let named = events(body, decoder).map(move |mut event| {
                // Usage says who answered: the model as it was asked for, which prices know.
                if let Ok(ModelEvent::Usage(usage)) = &mut event {
                    usage.provider.get_or_insert_with(|| provider.to_owned());
                    usage.model.get_or_insert_with(|| model.clone());
                }
                event
            });
            first_event(Box::pin(named)).await
        };
        answered.await.inspect_err(|error| self.failed(error))
    }

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
}

/// Whether `error` left the request unanswered: no connection, or one closed before any
/// response (not a timeout, which a retry policy around the model decides on).
fn unanswered(error: &reqwest::Error) -> bool {
    (error.is_connect() || error.is_request()) && !error.is_timeout() && error.status().is_none()
}

/// `url` as it may be logged: without user, password or query (a provider's key may sit in any).
pub(crate) fn shown(url: &str) -> String {
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

/// `events` once its first item is there: an error first is the call's error (a stream cut
/// before any event is a transport failure, worth a retry), else the stream, whole.
async fn first_event(
    mut events: BoxModelStream<ModelError>,
) -> Result<BoxModelStream<ModelError>, ModelError> {
    match events.next().await {
        Some(Ok(first)) => Ok(Box::pin(
            futures_util::stream::once(async { Ok(first) }).chain(events),
        )),
        Some(Err(error)) if error.kind() == ModelErrorKind::StreamCut => Err(ModelError::new(
            ModelErrorKind::Transport,
            "the provider's stream ended before its first event",
        )
        .with_source(error)),
        Some(Err(error)) => Err(error),
        None => Ok(Box::pin(futures_util::stream::empty())),
    }
}

type Sse = Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<crate::BoxError>>> + Send>>;

struct State<D> {
    sse: Sse,
    decoder: D,
    queue: VecDeque<ModelEvent>,
    /// What ends the stream once the queue is empty: `None` for a clean end.
    end: Option<Option<ModelError>>,
}

/// The events of a response body: every server-sent event decoded, whatever its byte
/// boundaries; a body that ends before its last event is what the decoder says it is (by
/// default [`ModelErrorKind::StreamCut`]), never a silent success.
pub(crate) fn events<E, D: Decode>(
    body: impl Stream<Item = Result<Bytes, E>> + Send + 'static,
    decoder: D,
) -> impl Stream<Item = Result<ModelEvent, ModelError>> + Send + 'static
where
    E: std::error::Error + Send + Sync + 'static,
{
    let state = State {
        sse: Box::pin(
            body.map(|piece| piece.map_err(|e| Box::new(e) as crate::BoxError))
                .eventsource(),
        ),
        decoder,
        queue: VecDeque::new(),
        end: None,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.queue.pop_front() {
                return Some((Ok(event), state));
            }
            match state.end.take() {
                Some(Some(error)) => {
                    state.end = Some(None);
                    return Some((Err(error), state));
                }
                Some(None) => return None,
                None => {}
            }
            let outcome = match state.sse.next().await {
                Some(Ok(event)) => match state.decoder.data(&event.data, &mut state.queue) {
                    Ok(false) => continue,
                    Ok(true) => Ok(()),
                    Err(error) => Err(error),
                },
                Some(Err(EventStreamError::Transport(error))) => Err(ModelError::new(
                    ModelErrorKind::StreamCut,
                    "the provider's stream broke off",
                )
                .with_source(error)),
                Some(Err(EventStreamError::Utf8(error))) => Err(unreadable(error)),
                Some(Err(EventStreamError::Parser(error))) => Err(unreadable(error)),
                None => state.decoder.body_ended(&mut state.queue),
            };
            state.end = Some(outcome.err());
        }
    })
}

/// What a stream of these `data:` payloads gives, as [`events`] gives it: the events, then the
/// error that ends it, if one does.
#[cfg(test)]
pub(crate) fn decoded(
    mut decoder: impl Decode,
    payloads: &[&str],
) -> (Vec<ModelEvent>, Option<ModelError>) {
    let mut out = VecDeque::new();
    for payload in payloads {
        match decoder.data(payload, &mut out) {
            Ok(false) => {}
            Ok(true) => return (out.into(), None),
            Err(error) => return (out.into(), Some(error)),
        }
    }
    let error = decoder.body_ended(&mut out).err();
    (out.into(), error)
}

/// [`decoded`]'s events, or its error.
#[cfg(test)]
pub(crate) fn decode_all(
    decoder: impl Decode,
    payloads: &[&str],
) -> Result<Vec<ModelEvent>, ModelError> {
    match decoded(decoder, payloads) {
        (events, None) => Ok(events),
        (_, Some(error)) => Err(error),
    }
}

/// The events of a body that arrives in `pieces` (for tests and the fuzz targets).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn decode_pieces(
    pieces: &[&[u8]],
    decoder: impl Decode,
) -> Result<Vec<ModelEvent>, ModelError> {
    use futures_util::FutureExt;
    let body = futures_util::stream::iter(
        pieces
            .iter()
            .map(|piece| Ok::<_, std::io::Error>(Bytes::copy_from_slice(piece)))
            .collect::<Vec<_>>(),
    );
    events(body, decoder)
        .collect::<Vec<_>>()
        .now_or_never()
        .expect("every piece is ready")
        .into_iter()
        .collect()
}

/// The builder methods every HTTP provider shares (`api_key`, `api_key_env`, `client`) and its
/// `Service<ModelRequest>`, for a provider `$provider(Arc<Config>)` whose module has `error::
/// from_response` and whose `Config` has an `endpoint: Endpoint` and
/// `fn request(&self, &ModelRequest) -> Result<(RequestBuilder, impl Decode), ModelError>`.
macro_rules! http_provider {
    ($provider:ident) => {
        impl $provider {
            fn config(&mut self) -> &mut Config {
                std::sync::Arc::make_mut(&mut self.0)
            }

            /// The API key sent with every request. It is never logged nor shown by `Debug`.
            #[must_use]
            pub fn api_key(mut self, key: impl Into<String>) -> Self {
                self.config().endpoint.key = Some(key.into());
                self
            }

            /// The key from the environment variable `var`, if it is set and not empty.
            #[must_use]
            pub fn api_key_env(self, var: &str) -> Self {
                match std::env::var(var) {
                    Ok(key) if !key.is_empty() => self.api_key(key),
                    _ => self,
                }
            }

            /// The HTTP client (proxies, TLS roots, connect timeout…); default
            /// `reqwest::Client::new()`.
            #[must_use]
            pub fn client(mut self, client: reqwest::Client) -> Self {
                self.config().endpoint.client = client;
                self
            }

            /// The URL the API's paths start from instead of its own: a proxy, a gateway, a
            /// local server replaying recorded answers.
            #[must_use]
            pub fn base_url(mut self, base_url: &str) -> Self {
                self.config().endpoint.at(base_url);
                self
            }

            /// The model's name, as sent to the API.
            #[must_use]
            pub fn model(&self) -> &str {
                &self.0.endpoint.model
            }
        }

        impl tower_service::Service<$crate::model::ModelRequest> for $provider {
            type Response = $crate::model::BoxModelStream<$crate::model::ModelError>;
            type Error = $crate::model::ModelError;
            type Future =
                futures_util::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

            fn poll_ready(
                &mut self,
                _cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Result<(), Self::Error>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn call(&mut self, request: $crate::model::ModelRequest) -> Self::Future {
                let config = self.0.clone();
                Box::pin(async move {
                    let (post, decoder) = config.request(&request)?;
                    config
                        .endpoint
                        .answer(post, error::from_response, decoder)
                        .await
                })
            }
        }
    };
}
pub(crate) use http_provider;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_url_has_no_credentials_nor_query() {
        assert_eq!(
            shown("https://user:secret@api.example.com/v1?key=secret"),
            "https://api.example.com/v1"
        );
        assert_eq!(shown("not a url"), "(not a URL)");
    }

    #[test]
    fn long_messages_are_cut_on_a_character() {
        let cut = shorten("é".repeat(400));
        assert!(cut.len() <= MAX_MESSAGE + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }

    fn events_of(items: Vec<Result<ModelEvent, ModelError>>) -> BoxModelStream<ModelError> {
        Box::pin(futures_util::stream::iter(items))
    }

    #[tokio::test]
    async fn the_call_waits_for_the_first_event_and_fails_with_an_error_before_it() {
        let stop = || ModelEvent::Finish(super::super::FinishReason::Stop);
        let stream = first_event(events_of(vec![Ok(stop())])).await.unwrap();
        assert_eq!(stream.collect::<Vec<_>>().await.len(), 1);

        let cut = ModelError::new(ModelErrorKind::StreamCut, "cut");
        let error = first_event(events_of(vec![Err(cut)])).await.err().unwrap();
        assert_eq!(error.kind(), ModelErrorKind::Transport, "retryable");

        let auth = ModelError::new(ModelErrorKind::Auth, "no");
        let error = first_event(events_of(vec![Err(auth), Ok(stop())]))
            .await
            .err()
            .unwrap();
        assert_eq!(error.kind(), ModelErrorKind::Auth);
    }
}
