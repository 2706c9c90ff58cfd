//! What the HTTP providers share: posting a streamed call and reading its refusal, decoding its
//! server-sent events into [`ModelEvent`]s, answering only once the first event is there, and
//! logging a failed call without its secrets.

use std::{collections::VecDeque, fmt, pin::Pin, time::Duration};

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_core::Stream;
use futures_util::StreamExt;
use http::{HeaderMap, StatusCode, header};

use super::{BoxModelStream, ModelError, ModelErrorKind, ModelEvent};

/// The longest provider message kept in an error.
const MAX_MESSAGE: usize = 500;

/// Turns one provider's server-sent events into model events.
pub(crate) trait Decode: Send + 'static {
    /// One event of the stream; `Ok(true)` when it was the last (`[DONE]`, `message_stop`).
    fn event(&mut self, event: &Event, out: &mut VecDeque<ModelEvent>) -> Result<bool, ModelError>;

    /// The body ended before an event said it was the last: the events that end the answer, or
    /// why it is incomplete. By default the stream was cut.
    fn body_ended(&mut self, _out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        Err(ModelError::new(
            ModelErrorKind::StreamCut,
            "the provider's stream ended before its last event",
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

/// `error` with the provider's `retry-after`, when it sent one.
pub(crate) fn with_retry_after(error: ModelError, headers: &HeaderMap) -> ModelError {
    match retry_after(headers) {
        Some(after) => error.with_retry_after(after),
        None => error,
    }
}

/// `key` as a header value marked sensitive (never shown by `Debug`, kept out of HTTP/2 header
/// compression), or why it cannot be sent.
pub(crate) fn secret_header(key: &str) -> Result<http::HeaderValue, ModelError> {
    let mut value = http::HeaderValue::from_str(key).map_err(|_| {
        ModelError::new(
            ModelErrorKind::Auth,
            "the API key cannot be sent: it is not a valid header value",
        )
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// A provider's refusal of a call: its status, headers and body as a [`ModelError`].
pub(crate) type Refusal = fn(StatusCode, &HeaderMap, &[u8]) -> ModelError;

/// Where a provider is: what its calls go to and what its logs say.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) client: reqwest::Client,
    /// The URL the provider's paths start from.
    pub(crate) base_url: String,
    /// The model's name, as sent to the provider.
    pub(crate) model: String,
    /// The provider's name in usage and traces (`gen_ai.provider.name`).
    pub(crate) provider: &'static str,
}

impl Endpoint {
    pub(crate) fn new(provider: &'static str, base_url: &str, model: String) -> Self {
        Self {
            client: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            model,
            provider,
        }
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
            let response = post
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "text/event-stream")
                .send()
                .await
                .map_err(|e| {
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
                Some(Ok(event)) => match state.decoder.event(&event, &mut state.queue) {
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
