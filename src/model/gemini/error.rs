//! The Gemini API's failures as [`ModelError`]s: the HTTP status, the error body
//! (`{"error": {"code", "message", "status", "details"}}`, Google's RPC shape), the retry delay.

use std::time::Duration;

use http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::model::{
    ModelError, ModelErrorKind,
    http::{shorten, with_retry_after},
};

/// The error's RPC `status`, message and `RetryInfo.retryDelay`, wherever the body put them.
fn describe(body: &Value) -> (Option<&str>, String, Option<Duration>) {
    let error = body.get("error").unwrap_or(body);
    let status = error.get("status").and_then(Value::as_str);
    let message = match error {
        Value::String(message) => message.clone(),
        _ => error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| body.to_string(), str::to_owned),
    };
    let delay = error
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find_map(|detail| detail.get("retryDelay").and_then(Value::as_str))
        .and_then(|delay| delay.strip_suffix('s')?.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64);
    (status, message, delay)
}

/// The kind of an RPC status (the API's own names), else of the HTTP status.
fn kind_of(status: Option<&str>, code: Option<u16>, message: &str) -> ModelErrorKind {
    let lower = message.to_lowercase();
    match (status, code) {
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
    }
}

fn error(
    status: Option<&str>,
    code: Option<u16>,
    message: String,
    delay: Option<Duration>,
) -> ModelError {
    let kind = kind_of(status, code, &message);
    let message = match code {
        Some(code) => shorten(format!("HTTP {code}: {message}")),
        None => shorten(message),
    };
    let error = ModelError::new(kind, message);
    match delay {
        Some(delay) => error.with_retry_after(delay),
        None => error,
    }
}

/// A non-success answer: `status`, its headers and body.
pub(super) fn from_response(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> ModelError {
    let parsed: Value = serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
    let (rpc, message, delay) = describe(&parsed);
    let error = error(rpc, Some(status.as_u16()), message, delay);
    if error.retry_after().is_some() {
        error
    } else {
        with_retry_after(error, headers)
    }
}

/// An error sent inside the stream (`data: {"error": …}`).
pub(super) fn from_stream(body: &Value) -> ModelError {
    let (rpc, message, delay) = describe(body);
    let code = body
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok());
    error(rpc, code, message, delay)
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
