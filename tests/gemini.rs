//! The Gemini provider against a local HTTP server replaying `streamGenerateContent` answers
//! (`tests/fixtures/gemini/`, each saying where it came from), every streamed body replayed in
//! chunks of 1, 2, 3, 5, 7 and 64 bytes and whole (CRLF line ends split included).

use crate::support::model_events;
use crate::support::replay;

use std::time::Duration;

use agent_tower::model::{FinishReason, ModelError, ModelErrorKind, ModelEvent, gemini::Gemini};
use futures_util::StreamExt;
use model_events::{calls, finish, reasoning, request, text, usage};
use replay::{Fixture, serve};
use serde_json::json;
use tower::ServiceExt;

fn gemini(base: &str) -> Gemini {
    Gemini::new("gemini-2.5-flash").base_url(base)
}

fn fixture(name: &str) -> Fixture {
    Fixture::of("gemini", name)
}

async fn events(name: &str) -> (Vec<ModelEvent>, Option<ModelError>) {
    model_events::events(&gemini, fixture(name)).await
}

#[tokio::test]
async fn a_thought_text_and_two_parallel_calls() {
    let (events, error) = events("thinking_tool_calls.sse").await;
    assert!(error.is_none(), "{error:?}");
    assert!(reasoning(&events).contains("the `add` tool"));
    assert_eq!(text(&events), "I'll add both pairs.");
    let calls = calls(&events);
    let arguments: Vec<_> = calls.iter().map(|c| c.2.clone()).collect();
    assert_eq!(
        arguments,
        [json!({"a": 2, "b": 3}), json!({"a": 40, "b": 2})]
    );
    assert_ne!(calls[0].0, calls[1].0, "two ids");
    assert_eq!(finish(&events), &FinishReason::ToolCalls);
    let usage = usage(&events);
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.reasoning_tokens
        ),
        (61, 74, Some(38)),
        "the last counts, thoughts in the output"
    );
}

#[tokio::test]
async fn the_answer_with_cached_input() {
    let (events, error) = events("answer.sse").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text(&events), "2 + 3 = 5, and 40 + 2 = 42.");
    assert_eq!(usage(&events).cached_input_tokens, Some(64));
    assert_eq!(finish(&events), &FinishReason::Stop);
}

#[tokio::test]
async fn an_answer_stopped_by_the_safety_filters_is_a_content_filter_finish() {
    let (events, error) = events("safety.sse").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text(&events), "Once upon a time");
    assert_eq!(finish(&events), &FinishReason::ContentFilter);
}

#[tokio::test]
async fn a_body_cut_before_its_finish_is_an_error() {
    let (events, error) = events("cut.sse").await;
    assert_eq!(text(&events), "2 + 3 = 5");
    assert_eq!(error.map(|e| e.kind()), Some(ModelErrorKind::StreamCut));
}

#[tokio::test]
async fn the_request_has_the_key_and_the_conversation() {
    let (base, mut received) = serve(vec![fixture("answer.sse")], usize::MAX).await;
    let model = gemini(&base).api_key("AIza-test").thinking(512);
    assert!(!format!("{model:?}").contains("AIza-test"));
    let _ = model
        .oneshot(request())
        .await
        .unwrap()
        .collect::<Vec<_>>()
        .await;
    let received = received.recv().await.unwrap();
    assert_eq!(
        received.path,
        "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(received.header("x-goog-api-key"), Some("AIza-test"));
    let body = &received.body;
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [{"text": "hello"}]}])
    );
    assert_eq!(
        body["tools"][0]["functionDeclarations"][0]["name"],
        "get_weather"
    );
    assert_eq!(
        body["generationConfig"]["thinkingConfig"]["thinkingBudget"],
        512
    );
}

#[tokio::test]
async fn an_exhausted_quota_waits_its_retry_delay_and_is_retried() {
    let limited = model_events::call_error(&gemini, fixture("rate_limited.http")).await;
    assert_eq!(limited.kind(), ModelErrorKind::RateLimited);
    assert_eq!(limited.retry_after(), Some(Duration::from_secs(1)));

    let (refused, answered) = (fixture("rate_limited.http"), fixture("answer.sse"));
    let events = model_events::retried_once(&gemini, refused, answered).await;
    assert_eq!(finish(&events), &FinishReason::Stop);
}
