//! A lead agent with a researcher, served from a durable store.

use std::{convert::Infallible, time::Duration};

use agent_tower::{
    model::scripted::ScriptedModel,
    permission::{Action, InterruptApprover, Policy},
    stack::Stack,
    subagent::AgentTool,
    tool::{ToolCall, ToolOutput, ToolRouter, ToolSpec},
};
use tower::service_fn;

/// A durable server on the store at `url` (its development page on): the scripted lead, which
/// asks before its own `publish`, and its `researcher` (the demo agent), which asks before
/// `remember`; both ask by interrupting the run. Its base URL ends with `/`.
pub async fn server(url: &str) -> String {
    let asks = || InterruptApprover::new(Duration::from_secs(600));
    let researcher = agent_tower::demo::scripted()
        .policy(agent_tower::demo::policy())
        .approver(asks())
        .build();
    let lead = Stack::new(
        ScriptedModel::new(),
        ToolRouter::new()
            .tool(AgentTool::new(
                "researcher",
                "Does what it is told.",
                researcher,
            ))
            .route(
                ToolSpec::new("publish", "Publishes a title."),
                service_fn(|_: ToolCall| async {
                    Ok::<_, Infallible>(ToolOutput::text("published"))
                }),
            ),
    )
    .policy(Policy::new().rule("publish", Action::Ask))
    .approver(asks())
    .build();
    let store = agent_tower::store::RunStore::open(url).await.unwrap();
    let router =
        agent_tower::server::AguiServer::with_runs(agent_tower::runs::Runs::new(lead).log(store))
            .dev_page(true)
            .into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}
