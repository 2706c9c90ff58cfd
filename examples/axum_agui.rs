//! Mounting the AG-UI router inside an existing axum app, behind a bearer-token check.
//!
//! ```text
//! AGENT_TOKEN=secret cargo run --example axum_agui --features server
//! curl -N localhost:3000/agent -H 'authorization: Bearer secret' \
//!      -H 'content-type: application/json' \
//!      -d '{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":"hi"}]}'
//! ```
//!
//! The app keeps its own routes (`GET /api/hello`); the agent lives under `/agent`, and only those
//! routes require the token. Any tower layer stacks the same way: rate limits, tracing, timeouts.

use std::sync::Arc;

use agent_tower::{
    BoxError, agent::Agent, agui::AguiLayer, model::scripted::ScriptedModel, server::AguiServer,
    tool::demo::demo_tools,
};
use axum::{
    Router,
    extract::Request,
    http::{StatusCode, header},
    middleware::{self, Next},
    response::Response,
    routing::get,
};
use tower::Layer;

/// Lets a request through only with `Authorization: Bearer <token>`.
async fn require_bearer(
    token: Arc<str>,
    request: Request,
    next: Next,
) -> Result<Response, StatusCode> {
    let authorized = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .is_some_and(|given| given == &*token);
    if authorized {
        Ok(next.run(request).await)
    } else {
        Err(StatusCode::UNAUTHORIZED)
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let token: Arc<str> = std::env::var("AGENT_TOKEN")
        .map_err(|_| "set AGENT_TOKEN to the bearer token clients must send")?
        .into();

    let agui = AguiLayer::new();
    let tools = demo_tools();
    let agent = agui.layer(
        Agent::new(agui.layer(ScriptedModel::new()), agui.layer(tools.clone()))
            .tool_specs(tools.specs()),
    );
    let agent_routes = AguiServer::new(agent)
        .allow_origins(["http://localhost:5173"])?
        .into_router()
        .layer(middleware::from_fn(move |request, next| {
            require_bearer(token.clone(), request, next)
        }));

    let app = Router::new()
        .route(
            "/api/hello",
            get(|| async { "hello from the existing app" }),
        )
        .nest("/agent", agent_routes);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
