//! `agent-tower serve --model anthropic:…` and `gemini:…` against a local server replaying the
//! providers' streams, driven by the official AG-UI client: Anthropic's signed thinking reaches
//! the client as `REASONING_ENCRYPTED_VALUE`, goes back to the API with the tool results, and
//! comes back from the client's own copy of the conversation in the next run; Gemini's parallel
//! calls are answered with function responses that name them.

#[path = "support/process.rs"]
mod process;
#[path = "support/replay.rs"]
mod replay;
mod support;

use process::Process;
use replay::{Fixture, serve};
use serde_json::{Value, json};

fn fixture(name: &str) -> Fixture {
    Fixture::of("anthropic", name)
}

/// The thinking and its signature in `thinking_tool_calls.sse`, read from the fixture itself.
fn recorded_thinking() -> (String, String) {
    let body = String::from_utf8(fixture("thinking_tool_calls.sse").body).unwrap();
    let deltas: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .map(|e| e["delta"].clone())
        .collect();
    let text =
        |field: &str| -> String { deltas.iter().filter_map(|d| d[field].as_str()).collect() };
    (text("thinking"), text("signature"))
}

/// The `thinking` blocks of the request's assistant turns.
fn thinking_blocks(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["content"].as_array().unwrap().clone())
        .filter(|b| b["type"] == "thinking")
        .collect()
}

#[tokio::test]
async fn signed_thinking_goes_to_the_client_and_back_to_the_api() {
    let fixtures = vec![
        fixture("thinking_tool_calls.sse"),
        fixture("answer.sse"),
        fixture("answer.sse"),
    ];
    let (base, mut received) = serve(fixtures, 61).await;
    let agent = Process::serve_with_env(
        &[
            "--store",
            "none",
            "--model",
            "anthropic:claude-sonnet-4-5",
            "--base-url",
            &base,
            "--demo-tools",
            "--thinking-budget",
            "2048",
        ],
        &[("ANTHROPIC_API_KEY", "sk-ant-test")],
    )
    .await;
    let seen = support::node("agui-reasoning.mjs", &[&format!("{}/", agent.base)], None).await;
    let seen: Value = serde_json::from_str(seen.trim()).unwrap();
    let (thinking, signature) = recorded_thinking();

    // The client kept the signature on its reasoning message.
    let reasoning: Vec<&Value> = seen["first"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "reasoning")
        .collect();
    assert_eq!(
        reasoning,
        [&json!({"role": "reasoning", "encryptedValue": signature})]
    );
    for run in seen["runs"].as_array().unwrap() {
        assert_eq!(
            run.as_array().unwrap().last().unwrap(),
            "RUN_FINISHED",
            "{seen}"
        );
    }
    assert!(
        seen["runs"][0]
            .as_array()
            .unwrap()
            .contains(&json!("REASONING_ENCRYPTED_VALUE"))
    );

    // The first step's request: the key, the version, thinking on.
    let first = received.recv().await.unwrap();
    assert_eq!(first.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(first.body["thinking"]["budget_tokens"], 2048);
    assert!(thinking_blocks(&first.body).is_empty());

    // The step after the tool calls: the signed thinking first in the assistant turn, then the
    // text and both calls; the results together in the next user turn.
    let second = received.recv().await.unwrap();
    let turns = second.body["messages"].as_array().unwrap();
    let assistant = &turns[1]["content"];
    assert_eq!(
        assistant[0],
        json!({"type": "thinking", "thinking": thinking, "signature": signature})
    );
    assert_eq!(assistant[1]["type"], "text");
    assert_eq!(assistant[2]["input"], json!({"a": 2, "b": 3}));
    assert_eq!(assistant[3]["input"], json!({"a": 40, "b": 2}));
    let results: Vec<&Value> = turns[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| &b["content"])
        .collect();
    assert_eq!(results, [&json!("5"), &json!("42")]);

    // The next run, from the client's copy of the conversation: the same signed block.
    let third = received.recv().await.unwrap();
    assert_eq!(thinking_blocks(&third.body), [assistant[0].clone()]);
    agent.kill().await;
}

/// `agent-tower acp` on a model cut off while a call's arguments stream: the editor is never
/// shown a call (calls are shown when they run, and none of a failed step runs), and the prompt
/// fails with the failure's code.
#[tokio::test]
async fn an_editor_is_never_shown_a_call_cut_off_mid_arguments() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let (base, _) = serve(vec![fixture("tool_call_cut.sse")], 64).await;
    let mut agent = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-tower"))
        .args(["acp", "--store", "none", "--demo-tools", "--retries", "0"])
        .args([
            "--model",
            "anthropic:claude-sonnet-4-5",
            "--base-url",
            &base,
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = agent.stdin.take().unwrap();
    let mut lines = BufReader::new(agent.stdout.take().unwrap()).lines();
    let mut answer = async |id: u64, method: &str, params: Value| {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let mut before = Vec::new();
        loop {
            let line = lines.next_line().await.unwrap().expect("the agent answers");
            let value: Value = serde_json::from_str(&line).unwrap();
            if value["id"] == id {
                return (value, before);
            }
            before.push(value);
        }
    };
    answer(1, "initialize", json!({"protocolVersion": 1})).await;
    let cwd = std::env::temp_dir();
    let (session, _) = answer(2, "session/new", json!({"cwd": cwd, "mcpServers": []})).await;
    let session = session["result"]["sessionId"].clone();
    let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "Add."}]});
    let (end, updates) = answer(3, "session/prompt", prompt).await;
    let kinds: Vec<&str> = updates
        .iter()
        .filter_map(|u| u["params"]["update"]["sessionUpdate"].as_str())
        .collect();
    assert!(kinds.contains(&"agent_thought_chunk"), "{updates:?}");
    assert!(
        !kinds.iter().any(|k| k.starts_with("tool_call")),
        "{updates:?}"
    );
    assert!(end.get("error").is_some(), "{end}");
}

#[tokio::test]
async fn gemini_calls_are_run_and_answered_by_name_and_id() {
    let fixtures = vec![
        Fixture::of("gemini", "thinking_tool_calls.sse"),
        Fixture::of("gemini", "answer.sse"),
    ];
    let (base, mut received) = serve(fixtures, 61).await;
    let agent = Process::serve_with_env(
        &[
            "--store",
            "none",
            "--model",
            "gemini:gemini-2.5-flash",
            "--base-url",
            &base,
            "--demo-tools",
            "--thinking-budget",
            "1024",
        ],
        &[("GEMINI_API_KEY", "AIza-test")],
    )
    .await;
    let seen = support::node("agui-reasoning.mjs", &[&format!("{}/", agent.base)], None).await;
    let seen: Value = serde_json::from_str(seen.trim()).unwrap();
    for run in seen["runs"].as_array().unwrap() {
        assert_eq!(
            run.as_array().unwrap().last().unwrap(),
            "RUN_FINISHED",
            "{seen}"
        );
    }
    let roles: Vec<&str> = seen["first"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "reasoning",
            "assistant",
            "tool",
            "tool",
            "assistant"
        ],
        "{seen}"
    );

    let first = received.recv().await.unwrap();
    assert_eq!(first.header("x-goog-api-key"), Some("AIza-test"));
    assert_eq!(
        first.body["generationConfig"]["thinkingConfig"]["thinkingBudget"],
        1024
    );
    let second = received.recv().await.unwrap();
    let contents = second.body["contents"].as_array().unwrap();
    let calls: Vec<&Value> = contents[1]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.get("functionCall"))
        .collect();
    let responses: Vec<&Value> = contents[2]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["functionResponse"])
        .collect();
    assert_eq!(calls.len(), 2, "{contents:?}");
    for (call, response) in calls.iter().zip(&responses) {
        assert_eq!(response["id"], call["id"]);
        assert_eq!(response["name"], "add");
    }
    let results: Vec<&Value> = responses.iter().map(|r| &r["response"]["result"]).collect();
    assert_eq!(results, [&json!("5"), &json!("42")]);
    agent.kill().await;
}

#[tokio::test]
async fn a_gemini_answer_stopped_by_its_safety_filters_finishes_as_a_refusal() {
    let (base, _) = serve(vec![Fixture::of("gemini", "safety.sse")], usize::MAX).await;
    let agent = Process::serve(&[
        "--store",
        "none",
        "--model",
        "gemini:gemini-2.5-flash",
        "--base-url",
        &base,
    ])
    .await;
    let events = support::user_run(&agent.base, "safety", "Tell me a story.").await;
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_FINISHED", "{end}");
    assert_eq!(end["result"]["stopReason"], "refusal", "{end}");
    agent.kill().await;
}
