//! A server with a real model and a typed tool, in one file: any AG-UI client (CopilotKit, the
//! official `@ag-ui/client`, `curl`) can talk to it.
//!
//! ```text
//! OPENAI_API_KEY=… cargo run --example server --features "server stack openai typed-tools"
//! ```

use agent_tower::{
    BoxError,
    model::openai::OpenAi,
    stack::Stack,
    tool::{
        ToolRouter,
        typed::{JsonSchema, TypedTool},
    },
};
use serde::Deserialize;

/// A city.
#[derive(Deserialize, JsonSchema)]
struct City {
    /// Its name, such as "Oslo".
    name: String,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // The model is offered `weather`'s schema; arguments that do not fit it never reach the tool.
    let weather = TypedTool::from_fn(
        "weather",
        "Today's weather in a city.",
        |city: City| async move { Ok::<_, BoxError>(format!("Sunny and 21 °C in {}.", city.name)) },
    );
    let model =
        OpenAi::new("https://api.openai.com/v1", "gpt-4.1-mini").api_key_env("OPENAI_API_KEY");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
    println!("AG-UI on http://{}/", listener.local_addr()?);
    Stack::new(model, ToolRouter::new().tool(weather))
        .instructions("You tell people the weather. Answer in one sentence.")
        .server() // GET /capabilities declares its tools
        .serve(listener, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
