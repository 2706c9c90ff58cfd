//! `agent-tower serve --model openai:… --base-url …` against a local server replaying recorded
//! provider responses: the answer reaches the AG-UI client, and a rate-limited call is retried
//! before its first token without a duplicate event.

use crate::support;
use crate::support::process;
use crate::support::replay;

use process::Process;
use replay::{Fixture, serve};
use serde_json::{Value, json};

/// The events of one run posted to `agent`.
async fn run(agent: &Process) -> Vec<Value> {
    let body = json!({
        "threadId": format!("t-{}", uuid::Uuid::now_v7()), "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "Say hello in French, with an emoji."}],
    });
    let text = agent.post(&body).await.text().await.unwrap();
    text.split("\n\n")
        .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

fn answer(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect()
}

/// The provider's answer in `plain.sse`, decoded by hand from its `content` deltas.
fn recorded_answer() -> String {
    let fixture = Fixture::load("plain.sse");
    String::from_utf8(fixture.body)
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// `agent-tower serve` in memory with the model `openai:m` at `base`, and `more` flags.
async fn serving_model_at(base: &str, more: &[&str]) -> Process {
    Process::serve_model("openai:m", base, more, &[]).await
}

#[tokio::test]
async fn the_providers_answer_reaches_the_client_after_a_retry() {
    let fixtures = vec![
        Fixture::load("rate_limited.http"),
        Fixture::load("plain.sse"),
    ];
    let (base, mut received) = serve(fixtures, 7).await;
    let agent = Process::serve(&[
        "--store",
        "none",
        "--model",
        "openai:smollm2",
        "--base-url",
        &base,
        "--api-key-env",
        "AGENT_TOWER_TEST_KEY",
        "--temperature",
        "0.1",
        "--max-tokens",
        "77",
    ])
    .await;
    let events = run(&agent).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{events:?}");
    assert_eq!(answer(&events), recorded_answer(), "every token once");
    let starts = events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_START")
        .count();
    assert_eq!(starts, 1, "the rate-limited attempt sent nothing");
    let first = received.recv().await.unwrap();
    let second = received.recv().await.unwrap();
    assert_eq!(first.body, second.body, "the same request, retried");
    assert_eq!(second.body["model"], "smollm2");
    assert_eq!(
        second.body["temperature"].to_string(),
        "0.1",
        "--temperature as written, not as the nearest f32"
    );
    assert_eq!(second.body["max_tokens"], 77, "--max-tokens");
    agent.kill().await;
}

#[tokio::test]
async fn a_provider_that_refuses_the_prompt_is_a_run_error_with_its_code() {
    let (base, _) = serve(vec![Fixture::load("context_length.http")], usize::MAX).await;
    let agent = serving_model_at(&base, &[]).await;
    let events = run(&agent).await;
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_ERROR", "{end}");
    assert_eq!(end["code"], "context_length", "{end}");
    agent.kill().await;
}

#[tokio::test]
async fn a_failed_model_call_is_logged_with_its_cause_and_base_url_and_no_secret() {
    let (base, _) = serve(vec![Fixture::load("context_length.http")], usize::MAX).await;
    // Credentials in the URL, as some proxies take them.
    let secret_base = base.replacen("http://", "http://user:url-secret@", 1);
    let agent = Process::serve_with_env(
        &[
            "--store",
            "none",
            "--model",
            "openai:m",
            "--base-url",
            &secret_base,
        ],
        &[("OPENAI_API_KEY", "sk-key-secret")],
    )
    .await;
    let events = run(&agent).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_ERROR");
    let line = agent.logged("the model call failed").await;
    assert!(line.contains("127.0.0.1"), "the base URL: {line}");
    assert!(line.contains("ContextLength"), "the kind: {line}");
    assert!(line.contains("context"), "the cause: {line}");
    for secret in ["url-secret", "sk-key-secret"] {
        assert!(!line.contains(secret), "{secret} in {line}");
    }
    agent.kill().await;
}

#[tokio::test]
async fn a_provider_that_stalls_before_its_first_token_is_tried_again() {
    let fixtures = vec![Fixture::load("stalled.sse"), Fixture::load("plain.sse")];
    let (base, mut received) = serve(fixtures, 7).await;
    let agent = serving_model_at(&base, &["--model-timeout", "1s", "--retries", "1"]).await;
    let events = run(&agent).await;
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{events:?}");
    assert_eq!(answer(&events), recorded_answer());
    received.recv().await.unwrap();
    received
        .recv()
        .await
        .expect("a second call after the stall");
    agent.kill().await;
}

#[tokio::test]
async fn a_provider_that_always_stalls_before_its_first_token_ends_the_run_with_timeout() {
    let (base, _) = serve(vec![Fixture::load("stalled.sse")], usize::MAX).await;
    let agent = serving_model_at(&base, &["--model-timeout", "1s", "--retries", "0"]).await;
    let events = run(&agent).await;
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_ERROR", "{end}");
    assert_eq!(end["code"], "timeout", "{end}");
    agent.kill().await;
}

#[tokio::test]
async fn a_provider_that_stalls_mid_answer_ends_the_run_with_timeout() {
    let (base, mut received) =
        serve(vec![Fixture::load("stalled_mid_answer.sse")], usize::MAX).await;
    let agent = serving_model_at(&base, &["--idle-timeout", "1s"]).await;
    let events = run(&agent).await;
    assert!(!answer(&events).is_empty(), "the first tokens: {events:?}");
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_ERROR", "{end}");
    assert_eq!(end["code"], "timeout", "{end}");
    received.recv().await.unwrap();
    assert!(
        received.try_recv().is_err(),
        "a stream that sent tokens is not retried"
    );
    agent.kill().await;
}

#[tokio::test]
async fn a_tool_call_cut_off_mid_arguments_is_never_presented_as_complete() {
    let (base, _) = serve(vec![Fixture::load("tool_call_cut.sse")], 64).await;
    let agent = serving_model_at(&base, &[]).await;
    let seen = support::node("agui-cut-call.mjs", &[&format!("{}/", agent.base)], None).await;
    let seen: Value = serde_json::from_str(seen.trim()).unwrap();
    assert_eq!(seen["started"].as_array().unwrap().len(), 1, "{seen}");
    assert_eq!(
        seen["ended"],
        json!([]),
        "no hook hears the call end: {seen}"
    );
    assert_eq!(seen["completed"], json!([]), "no new tool call: {seen}");
    assert_eq!(seen["code"], "transport", "{seen}");
    let events = seen["events"].as_array().unwrap();
    assert!(!events.contains(&json!("TOOL_CALL_END")), "{seen}");
    assert_eq!(events.last().unwrap(), "RUN_ERROR", "{seen}");
    agent.kill().await;
}

#[tokio::test]
async fn a_call_cut_off_mid_arguments_reaches_the_next_turns_models_with_its_result_in_place() {
    let fixtures = vec![
        Fixture::load("tool_call_cut.sse"),
        Fixture::load("plain.sse"),
        Fixture::load("plain.sse"),
    ];
    let (base, mut received) = serve(fixtures, 64).await;
    let agent = serving_model_at(&base, &[]).await;
    let seen = support::node(
        "agui-cut-call.mjs",
        &[&format!("{}/", agent.base), "Try again.", "And now?"],
        None,
    )
    .await;
    let seen: Value = serde_json::from_str(seen.lines().last().unwrap()).unwrap();
    // The official client keeps the cut call and sends it with the next turn; the result the
    // server gave it comes last in the client's list (it appends what a snapshot adds).
    assert_eq!(
        seen["sent"],
        json!([
            ["user", "assistant", "user"],
            ["user", "assistant", "user", "assistant", "tool", "user"]
        ]),
        "{seen}"
    );
    let held = seen["held"].as_array().unwrap();
    let answers = held
        .iter()
        .filter(|m| m["role"] == "assistant" && m["content"] == recorded_answer().as_str())
        .count();
    assert_eq!(answers, 2, "both turns answered: {seen}");

    received.recv().await.unwrap();
    for (turn, expected) in [
        (2, vec!["user", "assistant", "tool", "user"]),
        (
            3,
            vec!["user", "assistant", "tool", "user", "assistant", "user"],
        ),
    ] {
        let asked = received.recv().await.unwrap();
        let messages = asked.body["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, expected, "turn {turn}: {messages:?}");
        let call = &messages[1]["tool_calls"][0];
        assert_eq!(messages[2]["tool_call_id"], call["id"], "turn {turn}");
        let result = messages[2]["content"].to_string();
        assert!(result.contains("did not run"), "turn {turn}: {result}");
    }
    agent.kill().await;
}

#[tokio::test]
async fn a_title_model_of_the_same_provider_names_the_new_thread() {
    let (base, mut received) = serve(vec![Fixture::load("plain.sse")], usize::MAX).await;
    let agent = serving_model_at(&base, &["--title-model", "openai:titler"]).await;
    let logs = agent.logs_on_failure();
    // The thread list, followed live from before the run.
    let live = reqwest::Client::new()
        .get(format!("{}/threads", agent.base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let mut live = crate::support::frames::Live::new(live);
    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let body = json!({
        "threadId": thread, "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "Say hello in French.\nPlease."}],
    });
    agent.post(&body).await.text().await.unwrap();

    // Listed under the first line of the prompt, then under the titler's answer, its final
    // punctuation left out.
    let mut titles = Vec::new();
    while titles.last().map(String::as_str) != Some("Je suis le monde, en français") {
        let change = live.next().await;
        assert_eq!(change["type"], "THREAD_UPDATED", "{change}");
        assert_eq!(change["thread"]["threadId"], thread.as_str());
        let title = change["thread"]["title"].as_str().unwrap().to_owned();
        if titles.last() != Some(&title) {
            titles.push(title);
        }
    }
    assert_eq!(
        titles,
        ["Say hello in French.", "Je suis le monde, en français"]
    );
    // Asked at the agent's base URL with its key variable: the agent's model, then the titler,
    // told what to write and shown the exchange.
    let asked = received.recv().await.unwrap();
    assert_eq!(asked.body["model"], "m");
    let titler = received.recv().await.unwrap();
    assert_eq!(titler.body["model"], "titler");
    let messages = titler.body["messages"].as_array().unwrap();
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You name conversations."),
        "{messages:?}"
    );
    let shown = messages[1]["content"].as_str().unwrap();
    assert!(shown.contains("Say hello in French."), "{shown}");
    assert!(shown.contains("Je suis le monde, en français."), "{shown}");
    drop(logs);
    agent.kill().await;
}
