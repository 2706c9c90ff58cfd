//! The Messages API's failures as [`ModelError`]s: the HTTP status, the error body
//! (`{"type": "error", "error": {"type", "message"}}`), `retry-after`.

use http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::model::{
    ModelError, ModelErrorKind,
    http::{ErrorBody, refused, stream_error},
};

/// A refusal of a prompt too long for the model (400 `invalid_request_error`).
fn is_context_length(message: &str) -> bool {
    let message = message.to_lowercase();
    ["prompt is too long", "context limit", "context window"]
        .iter()
        .any(|needle| message.contains(needle))
}

/// The kind of an error `type` (the API's own names), else of the status.
fn kind_of(error: &ErrorBody<'_>, status: Option<u16>) -> ModelErrorKind {
    match (error.field("type"), status) {
        (Some("rate_limit_error"), _) | (_, Some(429)) => ModelErrorKind::RateLimited,
        (Some("overloaded_error"), _) | (_, Some(529)) => ModelErrorKind::Overloaded,
        (Some("authentication_error" | "permission_error" | "billing_error"), _)
        | (_, Some(401..=403)) => ModelErrorKind::Auth,
        (Some("invalid_request_error"), _) | (_, Some(400))
            if is_context_length(&error.message) =>
        {
            ModelErrorKind::ContextLength
        }
        (Some("invalid_request_error" | "not_found_error" | "request_too_large"), _)
        | (_, Some(400 | 404 | 413)) => ModelErrorKind::InvalidRequest,
        (Some("api_error" | "timeout_error"), _) | (_, Some(408 | 500..=599)) => {
            ModelErrorKind::Transport
        }
        _ => ModelErrorKind::Other,
    }
}

/// A non-success answer: `status`, its headers and body.
pub(super) fn from_response(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> ModelError {
    refused(status, headers, body, &|error| {
        (kind_of(error, Some(status.as_u16())), None)
    })
}

/// An `error` event inside the stream (its `error` object).
pub(super) fn from_stream(error: &Value) -> ModelError {
    stream_error(error, &|error| (kind_of(error, None), None))
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

    fn body(kind: &str, message: &str) -> String {
        serde_json::json!({"type": "error", "error": {"type": kind, "message": message}})
            .to_string()
    }

    #[test]
    fn statuses_and_error_types_become_kinds() {
        let cases = [
            (429, "rate_limit_error", "slow", ModelErrorKind::RateLimited),
            (
                529,
                "overloaded_error",
                "Overloaded",
                ModelErrorKind::Overloaded,
            ),
            (
                401,
                "authentication_error",
                "invalid x-api-key",
                ModelErrorKind::Auth,
            ),
            (403, "permission_error", "no", ModelErrorKind::Auth),
            (
                400,
                "invalid_request_error",
                "prompt is too long: 208310 tokens > 200000 maximum",
                ModelErrorKind::ContextLength,
            ),
            (
                400,
                "invalid_request_error",
                "max_tokens: Field required",
                ModelErrorKind::InvalidRequest,
            ),
            (
                404,
                "not_found_error",
                "model: claude-x",
                ModelErrorKind::InvalidRequest,
            ),
            (
                500,
                "api_error",
                "Internal server error",
                ModelErrorKind::Transport,
            ),
            (418, "teapot_error", "?", ModelErrorKind::Other),
        ];
        for (status, kind, message, expected) in cases {
            let error = error(status, &[], &body(kind, message));
            assert_eq!(error.kind(), expected, "{status} {kind}");
            assert_eq!(error.message(), format!("HTTP {status}: {message}"));
        }
        assert_eq!(
            error(502, &[], "<html>bad gateway</html>").kind(),
            ModelErrorKind::Transport
        );
    }

    #[test]
    fn retry_after_is_kept() {
        let limited = error(
            429,
            &[("retry-after", "12")],
            &body("rate_limit_error", "x"),
        );
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(12)));
    }

    #[test]
    fn an_error_in_the_stream_is_typed_by_its_type() {
        let error = serde_json::json!({"type": "api_error", "message": "Internal server error"});
        assert_eq!(from_stream(&error).kind(), ModelErrorKind::Transport);
    }
}
