//! Errors answered before a run starts: a status and a JSON body, never a stream.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde::Serialize;

/// A request the server refuses, with the status and a JSON body
/// `{"error": {"code", "message", "field"?}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    status: StatusCode,
    code: &'static str,
    message: String,
    field: Option<String>,
    retry_after: Option<u32>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Detail<'a>,
}

#[derive(Serialize)]
struct Detail<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

impl Rejection {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
        }
    }

    /// Tells the client to try again after `seconds` (`Retry-After`).
    pub(crate) fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    pub(crate) fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// One log line saying a run was refused, with the code (at WARN when the server is at
    /// fault: the log or the limits).
    pub(crate) fn log_refused_run(&self) {
        if self.status.is_server_error() {
            tracing::warn!(code = self.code, status = self.status.as_u16(), reason = %self.message, "run refused");
        } else {
            tracing::info!(code = self.code, status = self.status.as_u16(), reason = %self.message, "run refused");
        }
    }

    /// The HTTP status.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The machine-readable code.
    #[must_use]
    pub fn code(&self) -> &str {
        self.code
    }

    /// Why, in a sentence.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let body = Body {
            error: Detail {
                code: self.code,
                message: &self.message,
                field: self.field.as_deref(),
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

impl From<axum::extract::rejection::PathRejection> for Rejection {
    fn from(rejection: axum::extract::rejection::PathRejection) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            rejection.body_text(),
        )
    }
}

impl From<axum::extract::rejection::QueryRejection> for Rejection {
    fn from(rejection: axum::extract::rejection::QueryRejection) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            rejection.body_text(),
        )
    }
}

/// The answer to a path no route serves.
pub(crate) async fn not_found(uri: axum::http::Uri) -> Rejection {
    Rejection::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route for `{}`", uri.path()),
    )
}

/// The answer to a method the route does not serve.
pub(crate) async fn method_not_allowed(method: axum::http::Method) -> Rejection {
    Rejection::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("this route does not serve `{method}`"),
    )
}
