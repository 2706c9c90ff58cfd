//! An ACP agent for code editors (Zed, any ACP client), in a program of your own: your model,
//! your typed tool, the editor asked before the tool writes.
//!
//! ```text
//! cargo build --example acp_agent --features "stack openai typed-tools"
//! # then, in Zed's settings: "agent_servers": {"notes": {"command": "target/debug/examples/acp_agent"}}
//! ```

use std::sync::{Arc, Mutex};

use agent_tower::{
    BoxError,
    model::openai::OpenAi,
    permission::{Action, Policy},
    stack::Stack,
    tool::{
        ToolKind, ToolRouter,
        typed::{JsonSchema, TypedTool},
    },
};
use serde::Deserialize;

/// A note to keep.
#[derive(Deserialize, JsonSchema)]
struct Note {
    /// What to remember.
    text: String,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let notes = Arc::new(Mutex::new(Vec::<String>::new()));
    let keep = TypedTool::from_fn("keep_note", "Keeps a note for later.", move |note: Note| {
        let notes = notes.clone();
        async move {
            let mut notes = notes.lock().map_err(|_| "the notes are unusable")?;
            notes.push(note.text);
            Ok::<_, BoxError>(format!("{} notes kept", notes.len()))
        }
    })
    .kind(ToolKind::Edit);
    let model = OpenAi::new("http://127.0.0.1:11434/v1", "qwen3:0.6b");
    // Logs go to stderr: stdout is the editor's.
    Stack::new(model, ToolRouter::new().tool(keep))
        .instructions("You keep the user's notes.")
        .policy(Policy::new().rule("keep_note", Action::Ask))
        .acp_agent()
        .serve_io(tokio::io::stdin(), tokio::io::stdout())
        .await?;
    Ok(())
}
