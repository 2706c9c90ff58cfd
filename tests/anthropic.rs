//! The Anthropic provider against a local HTTP server replaying Messages API streams
//! (`tests/fixtures/anthropic/`, each saying where it came from), every streamed body replayed
//! in chunks of 1, 2, 3, 5, 7 and 64 bytes and whole.

use crate::support::model_events;
use crate::support::replay;

use agent_tower::model::{
    FinishReason, ModelError, ModelErrorKind, ModelEvent, anthropic::Anthropic,
};
use futures_util::StreamExt;
use model_events::{calls, finish, reasoning, request, text, usage};
use replay::{Fixture, serve};
use serde_json::json;
use tower::ServiceExt;

fn anthropic(base: &str) -> Anthropic {
    Anthropic::new("claude-sonnet-4-5").base_url(base)
}

fn fixture(name: &str) -> Fixture {
    Fixture::of("anthropic", name)
}

async fn events(name: &str) -> (Vec<ModelEvent>, Option<ModelError>) {
    model_events::events(&anthropic, fixture(name)).await
}

/// The signature in `thinking_tool_calls.sse`, read from the fixture itself.
fn recorded_signature() -> String {
    let body = String::from_utf8(fixture("thinking_tool_calls.sse").body).unwrap();
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .find_map(|e| e["delta"]["signature"].as_str().map(str::to_owned))
        .unwrap()
}

#[tokio::test]
async fn thinking_with_its_signature_text_and_two_parallel_calls() {
    let (events, error) = events("thinking_tool_calls.sse").await;
    assert!(error.is_none(), "{error:?}");
    assert!(reasoning(&events).starts_with("The user wants two sums"));
    assert_eq!(text(&events), "I'll add both pairs.");
    let signed: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ReasoningEncryptedValue { message_id, value } => {
                Some((message_id.to_string(), value.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        signed,
        [("msg-thinking-0".to_owned(), recorded_signature())]
    );
    let calls = calls(&events);
    let arguments: Vec<_> = calls.iter().map(|c| c.2.clone()).collect();
    assert_eq!(
        arguments,
        [json!({"a": 2, "b": 3}), json!({"a": 40, "b": 2})]
    );
    assert!(calls.iter().all(|c| c.1 == "add"));
    assert_eq!(finish(&events), &FinishReason::ToolCalls);
    let usage = usage(&events);
    assert_eq!((usage.input_tokens, usage.output_tokens), (512, 131));
    assert_eq!(usage.cached_input_tokens, Some(0));
}

#[tokio::test]
async fn cache_reads_count_in_the_input() {
    let (events, error) = events("answer.sse").await;
    assert!(error.is_none(), "{error:?}");
    let usage = usage(&events);
    assert_eq!(
        usage.input_tokens, 700,
        "20 new and 680 read from the cache"
    );
    assert_eq!(usage.cached_input_tokens, Some(680));
    assert_eq!(finish(&events), &FinishReason::Stop);
}

#[tokio::test]
async fn the_request_has_the_key_the_version_and_the_conversation() {
    let (base, mut received) = serve(vec![fixture("answer.sse")], usize::MAX).await;
    let model = anthropic(&format!("{base}/"))
        .api_key("sk-ant-test")
        .thinking(2048);
    assert!(!format!("{model:?}").contains("sk-ant-test"));
    let _ = model
        .oneshot(request())
        .await
        .unwrap()
        .collect::<Vec<_>>()
        .await;
    let received = received.recv().await.unwrap();
    assert_eq!(received.path, "/v1/messages");
    assert_eq!(received.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(received.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(received.authorization, None);
    let body = &received.body;
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["thinking"]["budget_tokens"], 2048);
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hello"}]}])
    );
    assert_eq!(body["tools"][0]["name"], "get_weather");
    assert_eq!(
        body["tools"][0]["input_schema"]["required"],
        json!(["city"])
    );
}

#[tokio::test]
async fn a_stream_cut_mid_arguments_never_ends_the_call() {
    let (events, error) = events("tool_call_cut.sse").await;
    assert_eq!(error.map(|e| e.kind()), Some(ModelErrorKind::StreamCut));
    let started = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::ToolCallStart { .. }))
        .count();
    let ended = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::ToolCallEnd { .. }))
        .count();
    assert_eq!(
        (started, ended),
        (2, 1),
        "the second call was cut: {events:?}"
    );
    assert!(!events.iter().any(|e| matches!(e, ModelEvent::Finish(_))));
}

#[tokio::test]
async fn an_overloaded_api_is_a_retryable_error_and_is_retried() {
    let overloaded = model_events::call_error(&anthropic, fixture("overloaded.http")).await;
    assert_eq!(overloaded.kind(), ModelErrorKind::Overloaded);
    assert!(overloaded.kind().is_retryable());
    assert_eq!(overloaded.message(), "HTTP 529: Overloaded");

    let (refused, answered) = (fixture("overloaded.http"), fixture("answer.sse"));
    let events = model_events::retried_once(&anthropic, refused, answered).await;
    assert_eq!(text(&events), "2 + 3 = 5, and 40 + 2 = 42.");
}
