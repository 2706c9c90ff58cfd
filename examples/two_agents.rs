//! Two agents, one the tool of the other: the lead answers people and hands research to a
//! researcher with tools of its own. An AG-UI client sees the researcher's work as a sub-agent
//! run (`SUBAGENT_STARTED`, its events tagged with `subagentRunId`, `SUBAGENT_FINISHED`).
//!
//! ```text
//! OPENAI_API_KEY=… cargo run --example two_agents --features "server stack subagent openai"
//! ```

use agent_tower::{
    BoxError, model::openai::OpenAi, server::AguiServer, stack::Stack, subagent::AgentTool,
    tool::ToolRouter, tool::demo::demo_tools,
};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let model =
        OpenAi::new("https://api.openai.com/v1", "gpt-4.1-mini").api_key_env("OPENAI_API_KEY");
    let researcher = Stack::new(model.clone(), demo_tools())
        .instructions("You research what you are asked with your tools and answer with facts only.")
        .build();
    let lead = Stack::new(
        model,
        ToolRouter::new().tool(AgentTool::new(
            "researcher",
            "Researches a question with tools and answers with facts.",
            researcher,
        )),
    )
    .instructions("You answer people; hand anything that needs research to the researcher.")
    .build();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
    println!("AG-UI on http://{}/", listener.local_addr()?);
    AguiServer::new(lead)
        .serve(listener, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
