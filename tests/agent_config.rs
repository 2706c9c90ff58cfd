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

/// `agent-tower serve` (in memory, on an address of its own, logging JSON) on a config file of
/// `agent` (its `[agent]` table and the tables under it), and its base URL.
async fn serving(name: &str, agent: &str) -> (JsonLogged, String) {
    let text = format!(
        "log-format = \"json\"\n\n{agent}\n[serve]\naddr = \"127.0.0.1:0\"\nstore = \"memory\"\n"
    );
    let file = config(name, &text);
    let mut server = JsonLogged::start(&["--config", &file, "serve"], &[]);
    let base = server.base().await;
    (server, base)
}

/// The `[agent]` settings of a model served by the recording server at `base_url`.
fn replayed(base_url: &str) -> String {
    format!(
        "model = \"openai:smollm2\"\nbase-url = \"{base_url}\"\napi-key-env = \"AGENT_TOWER_TEST_UNSET_KEY\""
    )
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
    let (server, base) = serving(
        "rules.toml",
        &format!(
            r#"
[agent]
mcp = ["ev=node {} stdio"]
deny = ["ev__echo"]
ask = ["ev__get-sum"]
"#,
            everything
        ),
    )
    .await;

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
    let model = replayed(&base_url);
    let (server, base) = serving(
        "instructions.toml",
        &format!(
            r#"
[agent]
{model}
instructions-file = "{instructions}"
"#
        ),
    )
    .await;
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

/// The tools a request to the model offers, by name.
fn offered(request: &Value) -> Vec<&str> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|tool| tool["function"]["name"].as_str().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_subagents_model_is_told_its_instructions_and_its_task_and_offered_its_tools() {
    let (base_url, mut received) = replay::serve(
        vec![
            // The agent hands `researcher` a task, the researcher answers, the agent answers.
            replay::Fixture::load("subagent_call.sse"),
            replay::Fixture::load("plain.sse"),
            replay::Fixture::load("plain.sse"),
        ],
        64,
    )
    .await;
    let model = replayed(&base_url);
    let (server, base) = serving(
        "subagent-model.toml",
        &format!(
            r#"
[agent]
{model}
instructions = "You answer people; the researcher finds facts."
demo-tools = true
tool = ["researcher"]

[agent.subagent.researcher]
description = "Finds facts with its tools."
instructions = "You find facts. Answer with facts only."
tools = ["get_*"]
"#
        ),
    )
    .await;
    let events = run(&base, "facts", "What time is it?").await;
    assert_eq!(outcome(&events), "success", "{events:?}");

    let agent = received.recv().await.unwrap().body;
    assert_eq!(offered(&agent), ["researcher"], "{agent}");
    assert_eq!(
        agent["messages"][0]["content"], "You answer people; the researcher finds facts.",
        "{agent}"
    );
    let researcher = received.recv().await.unwrap().body;
    assert_eq!(
        researcher["messages"],
        json!([
            {"role": "system", "content": "You find facts. Answer with facts only."},
            {"role": "user", "content": "What time is it in UTC?"},
        ]),
        "the researcher sees its task alone: {researcher}"
    );
    assert_eq!(offered(&researcher), ["get_time"], "{researcher}");
    let next = received.recv().await.unwrap().body;
    let told = next["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(
        (&told["role"], &told["tool_call_id"], &told["content"]),
        (
            &json!("tool"),
            &json!("call_researcher"),
            &json!("Je suis le monde, en français.")
        ),
        "the researcher's answer is the call's result: {next}"
    );
    server.kill().await;
}

#[tokio::test]
async fn a_subagent_runs_inside_the_agents_run_under_the_same_rules() {
    let (server, base) = serving(
        "subagent.toml",
        r#"
[agent]
tool = ["researcher"]

[agent.subagent.researcher]
description = "Finds facts, and remembers them."
tools = ["get_time", "remember"]
"#,
    )
    .await;
    let capabilities: Value = reqwest::get(format!("{base}/capabilities"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let items = capabilities["tools"]["items"].as_array().unwrap();
    let names: Vec<&str> = items.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["researcher"], "{capabilities}");

    // What a client sees, in order: the agent's call, the researcher's run inside it.
    let events = run(
        &base,
        "time",
        r#"researcher {"task": "What time is it? get_time"}"#,
    )
    .await;
    assert_eq!(outcome(&events), "success", "{events:?}");
    let sub = events
        .iter()
        .find(|e| e["type"] == "SUBAGENT_STARTED")
        .map(|e| e["subagentRunId"].clone())
        .unwrap_or_else(|| panic!("no sub-agent run: {events:?}"));
    let who = |e: &Value| {
        if e["subagentRunId"] == sub {
            "researcher"
        } else {
            "agent"
        }
    };
    let mut names = std::collections::HashMap::new();
    let story: Vec<String> = events
        .iter()
        .filter_map(|e| match e["type"].as_str()? {
            "TOOL_CALL_START" => {
                names.insert(e["toolCallId"].clone(), e["toolCallName"].clone());
                Some(format!("{} calls {}", who(e), e["toolCallName"]))
            }
            "TOOL_CALL_RESULT" => Some(format!("{} gets {}", who(e), names[&e["toolCallId"]])),
            "SUBAGENT_STARTED" => Some(format!("{} starts", e["name"])),
            "SUBAGENT_FINISHED" => Some(format!("researcher ends, {}", e["outcome"]["type"])),
            _ => None,
        })
        .collect();
    assert_eq!(
        story,
        [
            r#"agent calls "researcher""#,
            r#""researcher" starts"#,
            r#"researcher calls "get_time""#,
            r#"researcher gets "get_time""#,
            r#"researcher ends, "success""#,
            r#"agent gets "researcher""#,
        ],
        "{events:?}"
    );
    let text = |owner: &str| -> String {
        let deltas = events
            .iter()
            .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT");
        deltas
            .filter(|e| who(e) == owner)
            .map(|e| e["delta"].as_str().unwrap())
            .collect()
    };
    let time = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT" && who(e) == "researcher")
        .map(|e| e["content"].as_str().unwrap().to_owned())
        .unwrap();
    assert!(text("researcher").contains(&time), "{events:?}");
    assert!(
        text("agent").contains(&time),
        "the agent answers with what the researcher found: {events:?}"
    );

    // The agent's rules hold inside: the researcher's `remember` waits for a person, and the
    // answer the person gives lets it go on.
    let asked = run(
        &base,
        "remember",
        r#"researcher {"task": "remember {\"key\": \"city\", \"value\": \"Oslo\"}"}"#,
    )
    .await;
    let end = asked.last().unwrap();
    assert_eq!(end["outcome"]["type"], "interrupt", "{asked:?}");
    assert!(
        !asked.iter().any(|e| e["type"] == "TOOL_CALL_RESULT"),
        "{asked:?}"
    );
    let interrupt = end["outcome"]["interrupts"][0]["id"].as_str().unwrap();
    let approved = support::run_of(
        &base,
        None,
        &json!({
            "threadId": "remember", "runId": "remember-approved", "messages": [],
            "resume": [{"interruptId": interrupt, "status": "resolved", "payload": {"approved": true}}],
        }),
    )
    .await;
    assert_eq!(outcome(&approved), "success", "{approved:?}");
    let result = approved
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT")
        .unwrap_or_else(|| panic!("{approved:?}"));
    assert_eq!(result["content"], "remembered city", "{approved:?}");
    assert!(
        result.get("subagentRunId").is_some(),
        "the researcher's call ran, inside its run: {approved:?}"
    );
    let remembered = approved
        .iter()
        .find(|e| e["type"] == "STATE_DELTA")
        .map(|e| e["delta"].clone());
    assert_eq!(
        remembered,
        Some(json!([{"op": "add", "path": "/city", "value": "Oslo"}])),
        "{approved:?}"
    );
    server.kill().await;
}

#[tokio::test]
async fn a_subagent_that_cannot_be_built_is_refused_at_start() {
    let refused = |subagent: &'static str| async move {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-tower"))
            .args(["serve", "--addr", "127.0.0.1:0", "--store", "memory"])
            .args(["--subagent", subagent])
            .output()
            .await
            .unwrap();
        assert!(!output.status.success(), "{subagent}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let typo = refused(r#"researcher={"description": "Finds facts.", "tools": ["get_tim"]}"#).await;
    assert!(
        typo.contains("--subagent researcher: tool get_tim: no tool matches; the tools are ")
            && typo.contains("get_time"),
        "{typo}"
    );
    let taken = refused(r#"get_time={"description": "Tells the time."}"#).await;
    assert!(
        taken.contains("--subagent get_time: the agent has a tool of that name"),
        "{taken}"
    );
    let unknown = refused(r#"researcher={"description": "Finds facts.", "tool": ["add"]}"#).await;
    assert!(
        unknown.contains("sub-agent `researcher`: unknown field `tool`"),
        "{unknown}"
    );
    let unnamed = refused(r#"the researcher={"description": "Finds facts."}"#).await;
    assert!(unnamed.contains("a name is 1 to 64 letters"), "{unnamed}");
}
