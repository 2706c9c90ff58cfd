//! The Gemini API's failures as [`ModelError`]s: the HTTP status, the error body
//! (`{"error": {"code", "message", "status", "details"}}`, Google's RPC shape), the retry delay.

use std::time::Duration;

use http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::model::{
    ModelError, ModelErrorKind,
    http::{ErrorBody, refused, stream_error},
};

/// `RetryInfo.retryDelay` among the error's details (`"37s"`).
fn retry_delay(error: &ErrorBody<'_>) -> Option<Duration> {
    error
        .error
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find_map(|detail| detail.get("retryDelay").and_then(Value::as_str))
        .and_then(|delay| delay.strip_suffix('s')?.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// The kind of an RPC status (the API's own names), else of the HTTP status; and the retry delay.
fn classify(error: &ErrorBody<'_>, code: Option<u16>) -> (ModelErrorKind, Option<Duration>) {
    let lower = error.message.to_lowercase();
    let kind = match (error.field("status"), code) {
        (Some("RESOURCE_EXHAUSTED"), _) | (_, Some(429)) => ModelErrorKind::RateLimited,
        (Some("UNAVAILABLE"), _) | (_, Some(503)) => ModelErrorKind::Overloaded,
        (Some("UNAUTHENTICATED" | "PERMISSION_DENIED"), _) | (_, Some(401 | 403)) => {
            ModelErrorKind::Auth
        }
        // An invalid key is a 400 INVALID_ARGUMENT.
        _ if lower.contains("api key not valid") || lower.contains("api_key_invalid") => {
            ModelErrorKind::Auth
        }
        (Some("INVALID_ARGUMENT" | "FAILED_PRECONDITION"), _) | (_, Some(400))
            if lower.contains("token count") || lower.contains("maximum number of tokens") =>
        {
            ModelErrorKind::ContextLength
        }
        (Some("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "NOT_FOUND"), _)
        | (_, Some(400 | 404)) => ModelErrorKind::InvalidRequest,
        (Some("INTERNAL" | "DEADLINE_EXCEEDED"), _) | (_, Some(408 | 500..=599)) => {
            ModelErrorKind::Transport
        }
        _ => ModelErrorKind::Other,
    };
    (kind, retry_delay(error))
}

/// A non-success answer: `status`, its headers and body.
pub(super) fn from_response(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> ModelError {
    refused(status, headers, body, &|error| {
        classify(error, Some(status.as_u16()))
    })
}

/// An error sent inside the stream (`data: {"error": …}`), its HTTP code in `code`.
pub(super) fn from_stream(body: &Value) -> ModelError {
    let code = body
        .get("error")
        .unwrap_or(body)
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok());
    stream_error(body, &|error| classify(error, code))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(status: u16, body: &str) -> ModelError {
        from_response(
            StatusCode::from_u16(status).unwrap(),
            &HeaderMap::new(),
            body.as_bytes(),
        )
    }

    fn rpc(code: u16, status: &str, message: &str) -> String {
        serde_json::json!({"error": {"code": code, "message": message, "status": status}})
            .to_string()
    }

    #[test]
    fn rpc_statuses_become_kinds() {
        let cases = [
            (
                429,
                "RESOURCE_EXHAUSTED",
                "Quota exceeded",
                ModelErrorKind::RateLimited,
            ),
            (
                503,
                "UNAVAILABLE",
                "The model is overloaded.",
                ModelErrorKind::Overloaded,
            ),
            (403, "PERMISSION_DENIED", "denied", ModelErrorKind::Auth),
            (
                400,
                "INVALID_ARGUMENT",
                "API key not valid. Please pass a valid API key.",
                ModelErrorKind::Auth,
            ),
            (
                400,
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                ModelErrorKind::ContextLength,
            ),
            (
                400,
                "INVALID_ARGUMENT",
                "bad schema",
                ModelErrorKind::InvalidRequest,
            ),
            (
                404,
                "NOT_FOUND",
                "models/x is not found",
                ModelErrorKind::InvalidRequest,
            ),
            (500, "INTERNAL", "oops", ModelErrorKind::Transport),
        ];
        for (code, status, message, kind) in cases {
            let error = error(code, &rpc(code, status, message));
            assert_eq!(error.kind(), kind, "{status}");
            assert_eq!(error.message(), format!("HTTP {code}: {message}"));
        }
    }

    #[test]
    fn the_retry_delay_of_a_quota_error_is_its_retry_after() {
        let body = serde_json::json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
            "message": "Quota exceeded", "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}});
        let limited = error(429, &body.to_string());
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(37)));
    }
}
