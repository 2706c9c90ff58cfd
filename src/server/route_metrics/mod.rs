//! [`RouteMetricsLayer`]: the requests a router's routes answered, counted by route, method and
//! status.

use std::{
    task::{Context, Poll},
    time::Instant,
};

use axum::{extract::MatchedPath, extract::Request, response::Response};
use futures_util::future::BoxFuture;
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
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let route = request
            .extensions()
            .get::<MatchedPath>()
            .map(|route| route.as_str().to_owned());
        let method = request.method().as_str().to_owned();
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let answered = self.inner.call(request);
        Box::pin(async move {
            let output = answered.await;
            if let (Some(route), Ok(response)) = (route, &output) {
                let status = response.status().as_u16();
                metrics.http_request(&route, &method, status, started.elapsed());
            }
            output
        })
    }
}
