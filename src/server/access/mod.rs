//! [`AccessLogLayer`]: one log line per request, when its response head is ready.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
    time::Instant,
};

use axum::{
    extract::Request,
    http::{Method, StatusCode},
    response::Response,
};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use crate::context::Principal;

/// Logs one line per request at INFO (WARN for a 5xx): `method`, `path` (never the query: it may
/// carry secrets), `status` and `duration_ms`, when the response head is ready (for a stream: its
/// time to first byte).
///
/// tower-http's `TraceLayer` does more: it opens a span per request and wraps the response body
/// to enter that span on every frame. An event stream has one frame per event, and at INFO that
/// cost about 10 % of the runs a server answers per second (100-event runs at 50 clients); the
/// line needs none of it.
///
/// ```
/// use agent_tower::server::AccessLogLayer;
/// use axum::{Router, routing::get};
///
/// let app: Router = Router::new().route("/", get(|| async { "hi" })).layer(AccessLogLayer::new());
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct AccessLogLayer {
    _priv: (),
}

impl AccessLogLayer {
    /// The layer.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

impl<S> Layer<S> for AccessLogLayer {
    type Service = AccessLog<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AccessLog { inner }
    }
}

/// The service of [`AccessLogLayer`].
#[derive(Debug, Clone)]
pub struct AccessLog<S> {
    inner: S,
}

impl<S> AccessLog<S> {
    crate::inner_service!();
}

impl<S> Service<Request> for AccessLog<S>
where
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = AccessLogFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        AccessLogFuture {
            inner: self.inner.call(request),
            method,
            path,
            started: Instant::now(),
        }
    }
}

pin_project! {
    /// The future of [`AccessLog`].
    pub struct AccessLogFuture<F> {
        #[pin]
        inner: F,
        method: Method,
        path: String,
        started: Instant,
    }
}

impl<F, E> Future for AccessLogFuture<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let output = ready!(this.inner.poll(cx));
        let status = output
            .as_ref()
            .map_or(StatusCode::INTERNAL_SERVER_ERROR, Response::status);
        let duration_ms = u64::try_from(this.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (method, path, code) = (this.method.as_str(), this.path.as_str(), status.as_u16());
        // The authentication layer inside says whom it let through.
        let principal = output
            .as_ref()
            .ok()
            .and_then(|response| response.extensions().get::<Principal>())
            .map(Principal::name)
            .unwrap_or_default();
        macro_rules! answered {
            ($level:ident) => {
                tracing::$level!(
                    method,
                    path,
                    status = code,
                    principal,
                    duration_ms,
                    "answered"
                )
            };
        }
        if status.is_server_error() {
            answered!(warn);
        } else {
            answered!(info);
        }
        Poll::Ready(output)
    }
}
