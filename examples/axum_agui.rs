//! Mounting the AG-UI router inside an existing axum app, behind a bearer-token check.
//!
//! ```text
//! AGENT_TOKEN=a-long-random-secret cargo run --example axum_agui --features server,stack
//! curl -N localhost:3000/agent -H 'authorization: Bearer a-long-random-secret' \
//!      -H 'content-type: application/json' \
//!      -d '{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":"hi"}]}'
//! ```
//!
//! The app keeps its own routes (`GET /api/hello`); the agent lives under `/agent`, and only those
//! routes require the token (`AguiServer::auth`, a `BearerAuthLayer` inside CORS). Any tower layer
//! stacks the same way: rate limits, tracing, timeouts.

use agent_tower::{
    BoxError,
    model::scripted::ScriptedModel,
    server::{AguiServer, BearerTokens, Scope},
    stack::Stack,
    tool::demo::demo_tools,
};
use axum::{Router, routing::get};

/// The existing app with the agent under `/agent`: runs need `token`, and a page on
/// `http://localhost:5173` may call them (its CORS preflights are answered without a token, as
/// browsers send none).
pub fn app(token: &str) -> Result<Router, BoxError> {
    let agent = Stack::new(ScriptedModel::new(), demo_tools()).build();
    let agent_routes = AguiServer::new(agent)
        .allow_origins(["http://localhost:5173"])?
        .auth(BearerTokens::new().add(Scope::Run, token)?)
        .into_router();

    Ok(Router::new()
        .route(
            "/api/hello",
            get(|| async { "hello from the existing app" }),
        )
        .nest("/agent", agent_routes))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let token = std::env::var("AGENT_TOKEN")
        .map_err(|_| "set AGENT_TOKEN to the bearer token clients must send")?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app(&token)?).await?;
    Ok(())
}
