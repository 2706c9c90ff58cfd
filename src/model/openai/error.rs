//! Provider failures as [`ModelError`]s: the HTTP status, the error body (OpenAI's, llama.cpp's,
//! vLLM's and Ollama's shapes), `retry-after`.

use http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::model::{
    ModelError, ModelErrorKind,
    http::{ErrorBody, refused, stream_error},
};

fn is_context_length(error: &ErrorBody<'_>) -> bool {
    if error.field("code") == Some("context_length_exceeded")
        || error.field("type") == Some("exceed_context_size_error")
    {
        return true;
    }
    let message = error.message.to_lowercase();
    [
        "context length",
        "context_length",
        "maximum context",
        "context window",
        "available context",
        "too many tokens",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// A non-success answer: `status`, its headers and body.
pub(super) fn from_response(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> ModelError {
    let classify = |error: &ErrorBody<'_>| {
        let kind = match status.as_u16() {
            429 if error.field("code") == Some("insufficient_quota") => ModelErrorKind::Auth,
            429 => ModelErrorKind::RateLimited,
            401 | 403 => ModelErrorKind::Auth,
            400 | 404 | 413 | 422 if is_context_length(error) => ModelErrorKind::ContextLength,
            400 | 404 | 413 | 422 => ModelErrorKind::InvalidRequest,
            408 | 500..=599 => ModelErrorKind::Transport,
            _ => ModelErrorKind::Other,
        };
        (kind, None)
    };
    refused(status, headers, body, &classify)
}

/// An error the server sent inside the stream (`data: {"error": …}`).
pub(super) fn from_stream(body: &Value) -> ModelError {
    let classify = |error: &ErrorBody<'_>| {
        let kind = if is_context_length(error) {
            ModelErrorKind::ContextLength
        } else {
            ModelErrorKind::Other
        };
        (kind, None)
    };
    stream_error(body, &classify)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn error(status: u16, headers: &[(&'static str, &str)], body: &str) -> ModelError {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, value.parse().unwrap());
        }
        from_response(StatusCode::from_u16(status).unwrap(), &map, body.as_bytes())
    }

    #[test]
    fn statuses_and_bodies_become_kinds() {
        let cases = [
            (
                429,
                r#"{"error": {"message": "slow down"}}"#,
                ModelErrorKind::RateLimited,
            ),
            (
                429,
                r#"{"error": {"code": "insufficient_quota", "message": "pay"}}"#,
                ModelErrorKind::Auth,
            ),
            (
                401,
                r#"{"error": {"message": "bad key"}}"#,
                ModelErrorKind::Auth,
            ),
            (
                400,
                r#"{"error": {"code": "context_length_exceeded", "message": "too long"}}"#,
                ModelErrorKind::ContextLength,
            ),
            (
                400,
                r#"{"error": {"code": 400, "type": "exceed_context_size_error", "message": "the request exceeds the available context size"}}"#,
                ModelErrorKind::ContextLength,
            ),
            (
                400,
                r#"{"object": "error", "message": "This model's maximum context length is 2048 tokens", "code": 400}"#,
                ModelErrorKind::ContextLength,
            ),
            (
                400,
                r#"{"error": "model 'x' not found"}"#,
                ModelErrorKind::InvalidRequest,
            ),
            (503, "upstream down", ModelErrorKind::Transport),
            (418, "teapot", ModelErrorKind::Other),
        ];
        for (status, body, kind) in cases {
            assert_eq!(error(status, &[], body).kind(), kind, "{status} {body}");
        }
        let ollama = error(404, &[], r#"{"error": "model 'x' not found"}"#);
        assert_eq!(ollama.message(), "HTTP 404: model 'x' not found");
    }

    #[test]
    fn retry_after_in_seconds_or_milliseconds() {
        let seconds = error(429, &[("retry-after", "7")], "{}");
        assert_eq!(seconds.retry_after(), Some(Duration::from_secs(7)));
        let millis = error(
            429,
            &[("retry-after-ms", "250"), ("retry-after", "1")],
            "{}",
        );
        assert_eq!(millis.retry_after(), Some(Duration::from_millis(250)));
        assert_eq!(
            error(429, &[("retry-after", "soon")], "{}").retry_after(),
            None
        );
    }
}
