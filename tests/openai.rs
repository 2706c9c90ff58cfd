//! The OpenAI-compatible provider against a local HTTP server replaying recorded responses
//! (`tests/fixtures/openai/`, each saying where it came from), every streamed body replayed in
//! chunks of 1, 2, 3, 5, 7 and 64 bytes and whole: boundaries inside lines and inside UTF-8
//! characters must not change a single event.

use crate::support::model_events;
use crate::support::replay;

use std::time::Duration;

use agent_tower::model::{FinishReason, ModelError, ModelErrorKind, ModelEvent, openai::OpenAi};
use futures_util::StreamExt;
use model_events::{calls, finish, reasoning, request, text, usage};
use replay::{Fixture, serve};
use serde_json::{Value, json};
use tower::ServiceExt;

fn openai(base: &str) -> OpenAi {
    OpenAi::new(base, "m")
}

async fn events(fixture: &str) -> (Vec<ModelEvent>, Option<ModelError>) {
    model_events::events(&openai, Fixture::load(fixture)).await
}

#[tokio::test]
async fn a_plain_answer_with_usage() {
    let (events, error) = events("plain.sse").await;
    assert!(error.is_none(), "{error:?}");
    assert!(!text(&events).is_empty());
    let usage = usage(&events);
    assert!(
        usage.input_tokens > 0 && usage.output_tokens > 0,
        "{usage:?}"
    );
    assert_eq!(finish(&events), &FinishReason::Stop);
}

#[tokio::test]
async fn the_request_streams_with_usage_and_the_key() {
    let (base, mut received) = serve(vec![Fixture::load("plain.sse")], usize::MAX).await;
    let model = OpenAi::new(&format!("{base}/"), "smollm2").api_key("sk-test");
    assert!(
        !format!("{model:?}").contains("sk-test"),
        "the key is never shown"
    );
    let _ = model
        .oneshot(request())
        .await
        .unwrap()
        .collect::<Vec<_>>()
        .await;
    let received = received.recv().await.unwrap();
    assert_eq!(received.path, "/v1/chat/completions");
    assert_eq!(received.authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(received.body["model"], "smollm2");
    assert_eq!(received.body["stream"], true);
    assert_eq!(received.body["stream_options"]["include_usage"], true);
    assert_eq!(
        received.body["messages"],
        json!([{"role": "user", "content": "hello"}])
    );
    assert_eq!(received.body["tools"][0]["function"]["name"], "get_weather");
}

/// A request the server never answered (llama.cpp closes a kept-alive connection after each
/// streamed answer) is sent again once, on a new connection, without a retry layer.
#[tokio::test]
async fn a_request_never_answered_is_sent_once_more() {
    let (base, mut received) = serve(
        vec![Fixture::unanswered(), Fixture::load("plain.sse")],
        usize::MAX,
    )
    .await;
    let events: Vec<_> = openai(&base)
        .oneshot(request())
        .await
        .expect("answered the second time")
        .collect()
        .await;
    assert!(events.iter().all(Result::is_ok), "{events:?}");
    let (first, second) = (
        received.recv().await.unwrap(),
        received.recv().await.unwrap(),
    );
    assert_eq!(first.body, second.body, "the same request");

    let (base, mut received) = serve(vec![Fixture::unanswered()], usize::MAX).await;
    let Err(error) = openai(&base).oneshot(request()).await else {
        panic!("a server that never answers is an error");
    };
    assert_eq!(error.kind(), ModelErrorKind::Transport, "{error}");
    for _ in 0..2 {
        received.recv().await.unwrap();
    }
    assert!(received.try_recv().is_err(), "sent twice, not more");
}

#[tokio::test]
async fn a_tool_call_with_fragmented_arguments() {
    let (events, error) = events("tool_call.sse").await;
    assert!(error.is_none(), "{error:?}");
    let calls = calls(&events);
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0].1, "get_weather");
    assert!(calls[0].2["city"].is_string(), "{:?}", calls[0].2);
    let fragments = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::ToolCallArgs { .. }))
        .count();
    assert!(fragments > 1, "the arguments came in pieces");
    assert_eq!(finish(&events), &FinishReason::ToolCalls);
}

#[tokio::test]
async fn two_parallel_tool_calls_interleaved() {
    let (events, error) = events("parallel_tool_calls.sse").await;
    assert!(error.is_none(), "{error:?}");
    let calls = calls(&events);
    let cities: Vec<&Value> = calls.iter().map(|c| &c.2["city"]).collect();
    assert_eq!(cities, [&json!("Paris"), &json!("Tokyo")]);
    assert_ne!(calls[0].0, calls[1].0, "two ids");
    assert_eq!(finish(&events), &FinishReason::ToolCalls);
}

#[tokio::test]
async fn reasoning_then_the_answer() {
    let (events, error) = events("reasoning.sse").await;
    assert!(error.is_none(), "{error:?}");
    assert!(!reasoning(&events).is_empty());
    assert!(!text(&events).is_empty());
    let first_text = events
        .iter()
        .position(|e| matches!(e, ModelEvent::TextDelta { .. }))
        .unwrap();
    assert!(
        events[..first_text]
            .iter()
            .any(|e| matches!(e, ModelEvent::ReasoningDelta { .. })),
        "reasoning first"
    );
    assert!(usage(&events).reasoning_tokens.is_some());
}

#[tokio::test]
async fn keep_alive_comments_and_multibyte_characters() {
    let (events, error) = events("keepalive.sse").await;
    assert!(error.is_none(), "{error:?}");
    let text = text(&events);
    assert!(text.chars().any(|c| c.len_utf8() > 1), "{text}");
    assert!(
        !text.contains('\u{fffd}'),
        "no character was broken: {text}"
    );
}

#[tokio::test]
async fn a_stream_cut_midway_is_an_error_not_a_success() {
    for fixture in ["cut.sse", "cut_connection.sse"] {
        let (events, error) = events(fixture).await;
        assert!(
            !text(&events).is_empty(),
            "{fixture}: what came before the cut"
        );
        assert!(
            !events.iter().any(|e| matches!(e, ModelEvent::Finish(_))),
            "{fixture}"
        );
        assert_eq!(
            error.map(|e| e.kind()),
            Some(ModelErrorKind::StreamCut),
            "{fixture}"
        );
    }
}

async fn call_error(fixture: &str) -> ModelError {
    model_events::call_error(&openai, Fixture::load(fixture)).await
}

#[tokio::test]
async fn http_errors_become_typed_kinds() {
    let limited = call_error("rate_limited.http").await;
    assert_eq!(limited.kind(), ModelErrorKind::RateLimited);
    assert!(limited.kind().is_retryable());
    assert_eq!(limited.retry_after(), Some(Duration::from_secs(1)));

    let context = call_error("context_length.http").await;
    assert_eq!(context.kind(), ModelErrorKind::ContextLength, "{context}");
    assert!(!context.kind().is_retryable());

    let not_streamed = call_error("not_streamed.http").await;
    assert_eq!(
        not_streamed.kind(),
        ModelErrorKind::InvalidRequest,
        "{not_streamed}"
    );

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let unreachable = OpenAi::new(&closed, "m")
        .oneshot(request())
        .await
        .err()
        .unwrap();
    assert_eq!(unreachable.kind(), ModelErrorKind::Transport);
}

#[tokio::test]
async fn a_rate_limited_call_is_retried_before_its_first_token() {
    let refused = Fixture::load("rate_limited.http");
    let events = model_events::retried_once(&openai, refused, Fixture::load("plain.sse")).await;
    assert_eq!(finish(&events), &FinishReason::Stop);
}
