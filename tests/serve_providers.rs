//! `agent-tower serve --model anthropic:…` and `gemini:…` against a local server replaying the
//! providers' streams, driven by the official AG-UI client: Anthropic's signed thinking reaches
//! the client as `REASONING_ENCRYPTED_VALUE`, goes back to the API with the tool results, and
//! comes back from the client's own copy of the conversation in the next run; Gemini's parallel
//! calls are answered with function responses that name them.

use crate::support;
use crate::support::process;
use crate::support::replay;

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
    let agent = Process::serve_model(
        "anthropic:claude-sonnet-4-5",
        &base,
        &["--demo-tools", "--thinking-budget", "2048"],
        &[("ANTHROPIC_API_KEY", "sk-ant-test")],
    )
    .await;
    let seen = support::node("agui-reasoning.mjs", &[&format!("{}/", agent.base)], None).await;
    let seen: Value = serde_json::from_str(seen.trim()).unwrap_or_else(|e| panic!("{e}: {seen}"));
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

/// `agent-tower acp` with `flags`, in one session: each prompt's answer and the updates before it.
async fn acp_prompts(flags: &[&str], prompts: &[&str]) -> Vec<(Value, Vec<Value>)> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut agent = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-tower"))
        .args(["acp", "--store", "none", "--demo-tools", "--retries", "0"])
        .args(flags)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = agent.stdin.take().unwrap();
    let mut lines = BufReader::new(agent.stdout.take().unwrap()).lines();
    let mut answer = async |id: usize, method: &str, params: Value| {
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
    let mut answers = Vec::new();
    for (at, text) in prompts.iter().enumerate() {
        let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        answers.push(answer(3 + at, "session/prompt", prompt).await);
    }
    answers
}

fn update_kinds(updates: &[Value]) -> Vec<&str> {
    updates
        .iter()
        .filter_map(|u| u["params"]["update"]["sessionUpdate"].as_str())
        .collect()
}

/// `agent-tower acp` on a model cut off while a call's arguments stream: the editor is never
/// shown a call (calls are shown when they run, and none of a failed step runs), and the prompt
/// fails with the failure's code.
#[tokio::test]
async fn an_editor_is_never_shown_a_call_cut_off_mid_arguments() {
    let (base, _) = serve(vec![fixture("tool_call_cut.sse")], 64).await;
    let flags = [
        "--model",
        "anthropic:claude-sonnet-4-5",
        "--base-url",
        &base,
    ];
    let (end, updates) = acp_prompts(&flags, &["Add."]).await.remove(0);
    let kinds = update_kinds(&updates);
    assert!(kinds.contains(&"agent_thought_chunk"), "{updates:?}");
    assert!(
        !kinds.iter().any(|k| k.starts_with("tool_call")),
        "{updates:?}"
    );
    assert!(end.get("error").is_some(), "{end}");
}

/// The cost of each step, from `--price`, in the editor's `usage_update`: the session's total.
#[tokio::test]
async fn an_editor_is_told_the_sessions_cost_so_far() {
    let (base, _) = serve(vec![fixture("answer.sse")], usize::MAX).await;
    // answer.sse: 20 new input tokens, 680 read from the cache, 18 output tokens.
    let flags = [
        "--model",
        "anthropic:claude-test",
        "--base-url",
        &base,
        "--price",
        "claude-test=3,15,0.3",
    ];
    let answers = acp_prompts(&flags, &["One.", "Two."]).await;
    let step = (20.0 * 3.0 + 680.0 * 0.3 + 18.0 * 15.0) / 1e6;
    for (turn, (end, updates)) in answers.iter().enumerate() {
        assert_eq!(end["result"]["stopReason"], "end_turn", "{end}");
        let usage = updates
            .iter()
            .map(|u| &u["params"]["update"])
            .find(|u| u["sessionUpdate"] == "usage_update")
            .unwrap_or_else(|| panic!("{updates:?}"));
        assert_eq!(usage["cost"]["currency"], "USD", "{usage}");
        let amount = usage["cost"]["amount"].as_f64().unwrap();
        let expected = step * (turn + 1) as f64;
        assert!(
            (amount - expected).abs() < 1e-9,
            "turn {turn}: {amount} ≠ {expected}"
        );
    }
}

#[tokio::test]
async fn gemini_calls_are_run_and_answered_by_name_and_id() {
    let fixtures = vec![
        Fixture::of("gemini", "thinking_tool_calls.sse"),
        Fixture::of("gemini", "answer.sse"),
    ];
    let (base, mut received) = serve(fixtures, 61).await;
    let agent = Process::serve_model(
        "gemini:gemini-2.5-flash",
        &base,
        &["--demo-tools", "--thinking-budget", "1024"],
        &[("GEMINI_API_KEY", "AIza-test")],
    )
    .await;
    let seen = support::node("agui-reasoning.mjs", &[&format!("{}/", agent.base)], None).await;
    let seen: Value = serde_json::from_str(seen.trim()).unwrap_or_else(|e| panic!("{e}: {seen}"));
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
    let signature = "CiQBcsjafHTXvLsx7iKkT3ChA38PA8ZK2Q6RGKnOW+1CbuFgF0s=";
    assert_eq!(
        seen["first"][2]["calls"],
        json!([signature, null]),
        "the client keeps the first call's thought signature: {seen}"
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
    let signed = |contents: &[Value]| -> Vec<Value> {
        contents
            .iter()
            .filter(|c| c["role"] == "model")
            .flat_map(|c| c["parts"].as_array().unwrap().clone())
            .filter(|p| p.get("functionCall").is_some())
            .map(|p| p["thoughtSignature"].clone())
            .collect()
    };
    assert_eq!(
        signed(contents),
        [json!(signature), Value::Null],
        "sent back with its call"
    );

    // The next run, from the client's copy of the conversation: the same signature.
    let third = received.recv().await.unwrap();
    let contents = third.body["contents"].as_array().unwrap();
    assert_eq!(signed(contents), [json!(signature), Value::Null]);
    agent.kill().await;
}

#[tokio::test]
async fn a_gemini_answer_stopped_by_its_safety_filters_finishes_as_a_refusal() {
    let (base, _) = serve(vec![Fixture::of("gemini", "safety.sse")], usize::MAX).await;
    let agent = Process::serve_model("gemini:gemini-2.5-flash", &base, &[], &[]).await;
    let events = support::user_run(&agent.base, "safety", "Tell me a story.").await;
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_FINISHED", "{end}");
    assert_eq!(end["result"]["stopReason"], "refusal", "{end}");
    agent.kill().await;
}

#[tokio::test]
async fn an_overloaded_model_falls_back_and_the_usage_names_who_answered_with_its_cost() {
    let (anthropic, mut overloaded) = serve(vec![fixture("overloaded.http")], usize::MAX).await;
    let (openai, mut answered) = serve(vec![Fixture::of("openai", "plain.sse")], 7).await;
    let agent = Process::serve_model(
        "anthropic:claude-sonnet-4-5",
        &anthropic,
        &[
            "--retries",
            "0",
            "--fallback",
            &format!("openai:smollm2@{openai}"),
            "--price",
            "smollm2=1,2",
        ],
        &[],
    )
    .await;
    let events = support::user_run(&agent.base, "fallback", "Hello.").await;
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_FINISHED", "{end}");
    let usage = end["usage"].as_array().unwrap();
    assert_eq!(usage.len(), 1, "{end}");
    assert_eq!(usage[0]["provider"], "openai", "{end}");
    assert_eq!(usage[0]["model"], "smollm2", "{end}");
    let (input, output) = (
        usage[0]["inputTokens"].as_f64().unwrap(),
        usage[0]["outputTokens"].as_f64().unwrap(),
    );
    assert!(
        usage[0].get("cost").is_none(),
        "not a field AG-UI 1.0 knows: {end}"
    );
    let cost = events
        .iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "agent_tower.cost")
        .unwrap_or_else(|| panic!("{events:?}"));
    let amount = cost["value"]["total"]["amount"].as_f64().unwrap();
    assert!(
        (amount - (input + 2.0 * output) / 1e6).abs() < 1e-9,
        "{cost}"
    );
    assert_eq!(cost["value"]["models"][0]["model"], "smollm2", "{cost}");
    overloaded.recv().await.expect("the first model was asked");
    answered.recv().await.expect("then the fallback");
    // An operator sees the fallback taken, and what was spent by the model that answered.
    let metrics = agent.get("/metrics").await.text().await.unwrap();
    let line = |prefix: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::to_owned)
    };
    assert_eq!(
        line("agent_tower_model_fallbacks_total ").as_deref(),
        Some("1"),
        "{metrics}"
    );
    let spent = line("agent_tower_model_cost_usd_total{model=\"smollm2\"} ");
    let spent: f64 = spent
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!((spent - amount).abs() < 1e-9, "{metrics}");
    agent.kill().await;
}

#[tokio::test]
async fn the_step_that_spends_the_runs_budget_ends_it() {
    let (base, _) = serve(vec![Fixture::of("openai", "plain.sse")], usize::MAX).await;
    let agent = Process::serve_model("openai:m", &base, &["--run-budget", "10tokens"], &[]).await;
    let events = support::user_run(&agent.base, "budget", "Hello.").await;
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_ERROR", "{end}");
    assert_eq!(end["code"], "budget_exceeded", "{end}");
    assert!(
        events.iter().any(|e| e["type"] == "TEXT_MESSAGE_CONTENT"),
        "the step streamed before its usage crossed the budget"
    );
    agent.kill().await;
}

/// A budget in tokens acts on the scripted model (it reports its tokens), and without
/// authentication every run is nobody's: they share one day's budget (each thread alike).
#[tokio::test]
async fn runs_of_nobody_share_the_days_budget_on_the_scripted_model() {
    let agent = Process::serve(&["--store", "none", "--daily-budget", "1tokens"]).await;
    let first = support::user_run(&agent.base, "nobody-1", "Hello.").await;
    let end = first.last().unwrap();
    assert_eq!(
        end["code"], "budget_exceeded",
        "the step that spends it: {end}"
    );
    let second = support::user_run(&agent.base, "nobody-2", "Hello again.").await;
    let end = second.last().unwrap();
    assert_eq!(end["type"], "RUN_ERROR", "{end}");
    assert_eq!(
        end["code"], "budget_exceeded",
        "another thread, the same space: {end}"
    );
    assert!(
        !second.iter().any(|e| e["type"] == "TEXT_MESSAGE_CONTENT"),
        "refused before the model was asked"
    );
    agent.kill().await;
}
