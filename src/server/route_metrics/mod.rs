//! [`RouteMetricsLayer`]: the requests a router's routes answered, counted by route, method and
//! status.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
    time::Instant,
};

use axum::{extract::MatchedPath, extract::Request, response::Response};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

use crate::metrics::Metrics;

/// Counts each request a route answers in `agent_tower_http_requests_total` (labels `route`:
/// the route's template such as `/runs/{run_id}/events`, never the path itself; `method`;
/// `status`) and times it to its response's head in `agent_tower_http_request_seconds`.
///
/// Apply it with [`Router::route_layer`](axum::Router::route_layer): it reads the template axum
/// matched. Requests that match no route are not counted (anyone could add series with them).
/// `AguiServer::metrics` applies it to the server's routes.
///
/// ```
/// use agent_tower::{metrics::Metrics, server::RouteMetricsLayer};
/// use axum::{Router, routing::get};
///
/// let metrics = Metrics::new();
/// let app: Router = Router::new()
///     .route("/items/{id}", get(|| async { "an item" }))
///     .route_layer(RouteMetricsLayer::new(metrics.clone()));
/// ```
#[derive(Debug, Clone)]
pub struct RouteMetricsLayer {
    metrics: Metrics,
}

impl RouteMetricsLayer {
    /// Counts into `metrics`.
    #[must_use]
    pub fn new(metrics: Metrics) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for RouteMetricsLayer {
    type Service = RouteMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RouteMetrics {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service of [`RouteMetricsLayer`].
#[derive(Debug, Clone)]
pub struct RouteMetrics<S> {
    inner: S,
    metrics: Metrics,
}

impl<S> RouteMetrics<S> {
    crate::inner_service!();
}

impl<S> Service<Request> for RouteMetrics<S>
where
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = RouteMetricsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let counted = request
            .extensions()
            .get::<MatchedPath>()
            .map(|route| Counted {
                route: route.as_str().to_owned(),
                method: request.method().as_str().to_owned(),
                metrics: self.metrics.clone(),
                started: Instant::now(),
            });
        RouteMetricsFuture {
            answered: self.inner.call(request),
            counted,
        }
    }
}

/// What a request is counted under once it is answered.
#[derive(Debug)]
struct Counted {
    route: String,
    method: String,
    metrics: Metrics,
    started: Instant,
}

pin_project! {
    /// The route's response, counted once its head is there.
    #[derive(Debug)]
    pub struct RouteMetricsFuture<F> {
        #[pin]
        answered: F,
        counted: Option<Counted>,
    }
}

impl<F, E> Future for RouteMetricsFuture<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let output = ready!(this.answered.poll(cx));
        if let (Some(counted), Ok(response)) = (this.counted.take(), &output) {
            let status = response.status().as_u16();
            (counted.metrics).http_request(
                &counted.route,
                &counted.method,
                status,
                counted.started.elapsed(),
            );
        }
        Poll::Ready(output)
    }
}
