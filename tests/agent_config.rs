//! The command as your agent: the config file's `[agent]` table (instructions, model, tools,
//! rules) for `agent-tower serve`, with the reference MCP server and a recording provider. The
//! built binary.

use crate::support;
use crate::support::json_logs;
use crate::support::replay;

use json_logs::JsonLogged;
use serde_json::{Value, json};

/// `text` as a config file of its own.
fn config(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("agent-tower-agent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The events of a run of one user message.
async fn run(base: &str, thread: &str, text: &str) -> Vec<Value> {
    support::user_run(base, thread, text).await
}

fn outcome(events: &[Value]) -> &Value {
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_FINISHED", "{events:?}");
    &end["outcome"]["type"]
}

fn result(events: &[Value]) -> String {
    events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT")
        .map(|e| e["content"].to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn rules_and_annotations_decide_which_mcp_calls_are_asked_about() {
    let everything = support::mcp_everything().await;
    let file = config(
        "rules.toml",
        &format!(
            r#"
log-format = "json"

[agent]
mcp = ["ev=node {} stdio"]
deny = ["ev__echo"]
ask = ["ev__get-sum"]

[serve]
addr = "127.0.0.1:0"
store = "memory"
"#,
            everything
        ),
    );
    let mut server = JsonLogged::start(&["--config", &file, "serve"], &[]);
    let base = server.base().await;

    // Not read-only (its server marks it not destructive), named by no rule: asked about.
    let write = run(&base, "write", "ev__toggle-simulated-logging {}").await;
    assert_eq!(outcome(&write), "interrupt", "{write:?}");
    assert!(
        !write.iter().any(|e| e["type"] == "TOOL_CALL_RESULT"),
        "{write:?}"
    );

    // Marked read-only: runs.
    let read = run(&base, "read", "ev__get-env {}").await;
    assert_eq!(outcome(&read), "success", "{read:?}");
    assert!(result(&read).contains("PATH"), "{read:?}");

    // Read-only, but a rule asks.
    let asked = run(&base, "asked", r#"ev__get-sum {"a": 1, "b": 2}"#).await;
    assert_eq!(outcome(&asked), "interrupt", "{asked:?}");

    // Denied: the model is told, the tool does not run.
    let denied = run(&base, "denied", r#"ev__echo {"message": "hi"}"#).await;
    assert_eq!(outcome(&denied), "success", "{denied:?}");
    let refusal = result(&denied);
    assert!(!refusal.contains("Echo: hi"), "{refusal}");
    assert!(
        refusal.contains("does not allow calling `ev__echo`"),
        "{refusal}"
    );
    server.kill().await;
}

#[tokio::test]
async fn the_agents_instructions_reach_the_model_and_demo_tools_stay_off() {
    let (base_url, mut received) =
        replay::serve(vec![replay::Fixture::load("plain.sse")], 64).await;
    let instructions = config(
        "instructions.md",
        "You are Kestrel, the support agent of Example Ltd.\nAnswer in one sentence.",
    );
    let file = config(
        "instructions.toml",
        &format!(
            r#"
log-format = "json"

[agent]
model = "openai:smollm2"
base-url = "{base_url}"
api-key-env = "AGENT_TOWER_TEST_UNSET_KEY"
instructions-file = "{instructions}"

[serve]
addr = "127.0.0.1:0"
store = "memory"
"#
        ),
    );
    let mut server = JsonLogged::start(&["--config", &file, "serve"], &[]);
    let base = server.base().await;
    let events = run(&base, "kestrel", "Hello?").await;
    assert_eq!(outcome(&events), "success", "{events:?}");

    let request = received.recv().await.unwrap().body;
    assert_eq!(
        request["messages"][0],
        json!({"role": "system", "content": "You are Kestrel, the support agent of Example Ltd.\nAnswer in one sentence."}),
        "{request}"
    );
    assert_eq!(request["messages"][1]["content"], "Hello?", "{request}");
    assert!(
        request
            .get("tools")
            .is_none_or(|tools| tools.as_array().is_some_and(Vec::is_empty)),
        "a real model is offered no demo tool unless asked: {request}"
    );
    server.kill().await;
}

#[tokio::test]
async fn a_tool_or_rule_glob_that_matches_nothing_is_refused_at_start() {
    for flag in ["--tool", "--deny", "--ask", "--allow"] {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-tower"))
            .args(["serve", "--addr", "127.0.0.1:0", "--store", "memory"])
            .args(["--tool", "*", flag, "get_tim"])
            .output()
            .await
            .unwrap();
        assert!(!output.status.success(), "{flag}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("{flag} get_tim: no tool matches; the tools are ")),
            "{stderr}"
        );
        assert!(stderr.contains("get_time"), "{stderr}");
    }
}
