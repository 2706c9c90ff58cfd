//! Decoding a provider's replayed answers: every streamed body replayed in chunks of 1, 2, 3, 5,
//! 7 and 64 bytes and whole (boundaries inside lines and inside UTF-8 characters must not change
//! a single event), and what the events say.
#![allow(dead_code)]

use std::time::Duration;

use agent_tower::{
    context::RunContext,
    message::Message,
    model::{BoxModelStream, FinishReason, ModelError, ModelEvent, ModelRequest, RetryPolicy},
    tool::ToolSpec,
};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tower::{Service, ServiceBuilder, ServiceExt};

use super::replay::{Fixture, serve};

/// A provider's model service at a base URL.
pub trait Provider: Fn(&str) -> Self::Model {
    type Model: Service<ModelRequest, Response = BoxModelStream<ModelError>, Error = ModelError>
        + Clone;
}

impl<F, M> Provider for F
where
    F: Fn(&str) -> M,
    M: Service<ModelRequest, Response = BoxModelStream<ModelError>, Error = ModelError> + Clone,
{
    type Model = M;
}

pub const CHUNKS: [usize; 7] = [1, 2, 3, 5, 7, 64, usize::MAX];

pub fn request() -> ModelRequest {
    let mut run = RunContext::new("thread".into(), "run".into());
    run.message_id = "msg".into();
    ModelRequest {
        messages: vec![Message::user("hello")],
        tools: vec![
            ToolSpec::new("get_weather", "The weather in a city.").parameters(json!({
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            })),
        ]
        .into(),
        options: Default::default(),
        run,
    }
}

/// Every event of `fixture`'s stream (the error, if it ends in one), replayed in chunks of
/// `chunk` bytes.
pub async fn events_in_chunks(
    provider: &impl Provider,
    fixture: &Fixture,
    chunk: usize,
) -> (Vec<ModelEvent>, Option<ModelError>) {
    let (base, _) = serve(vec![fixture.clone()], chunk).await;
    let stream = provider(&base)
        .oneshot(request())
        .await
        .unwrap_or_else(|e| panic!("the call failed: {e}"));
    let mut events = Vec::new();
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => events.push(event),
            Err(error) => {
                assert!(stream.next().await.is_none(), "nothing after the error");
                return (events, Some(error));
            }
        }
    }
    (events, None)
}

/// The events of `fixture`, the same in every chunking.
pub async fn events(
    provider: &impl Provider,
    fixture: Fixture,
) -> (Vec<ModelEvent>, Option<ModelError>) {
    let (whole, error) = events_in_chunks(provider, &fixture, usize::MAX).await;
    for chunk in CHUNKS {
        let (events, other) = events_in_chunks(provider, &fixture, chunk).await;
        assert_eq!(events, whole, "in chunks of {chunk}");
        assert_eq!(
            other.as_ref().map(ModelError::kind),
            error.as_ref().map(ModelError::kind),
            "in chunks of {chunk}"
        );
    }
    (whole, error)
}

pub fn text(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta { message_id, delta } => {
                assert_eq!(message_id.as_ref(), "msg");
                Some(delta.as_str())
            }
            _ => None,
        })
        .collect()
}

pub fn reasoning(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ReasoningDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

/// `(id, name, arguments)` of every call, in the order they started; each ended before Finish.
pub fn calls(events: &[ModelEvent]) -> Vec<(String, String, Value)> {
    let mut calls: Vec<(String, String, String, bool)> = Vec::new();
    for event in events {
        match event {
            ModelEvent::ToolCallStart { id, name } => {
                calls.push((id.to_string(), name.clone(), String::new(), false));
            }
            ModelEvent::ToolCallArgs { id, delta } => {
                let call = calls.iter_mut().find(|c| c.0 == id.as_ref()).unwrap();
                assert!(!call.3, "arguments after the end");
                call.2.push_str(delta);
            }
            ModelEvent::ToolCallEnd { id } => {
                calls.iter_mut().find(|c| c.0 == id.as_ref()).unwrap().3 = true;
            }
            _ => {}
        }
    }
    calls
        .into_iter()
        .map(|(id, name, arguments, ended)| {
            assert!(ended, "call {id} ended");
            let arguments =
                serde_json::from_str(&arguments).unwrap_or_else(|e| panic!("{arguments}: {e}"));
            (id, name, arguments)
        })
        .collect()
}

pub fn finish(events: &[ModelEvent]) -> &FinishReason {
    match events.last() {
        Some(ModelEvent::Finish(reason)) => reason,
        other => panic!("the last event is {other:?}, not Finish"),
    }
}

pub fn usage(events: &[ModelEvent]) -> agent_tower::model::Usage {
    events
        .iter()
        .find_map(|e| match e {
            ModelEvent::Usage(usage) => Some(usage.clone()),
            _ => None,
        })
        .expect("a usage event")
}

/// The error of a call to `provider` answered with `fixture`.
pub async fn call_error(provider: &impl Provider, fixture: Fixture) -> ModelError {
    let (base, _) = serve(vec![fixture], usize::MAX).await;
    match provider(&base).oneshot(request()).await {
        Ok(_) => panic!("the call succeeded"),
        Err(error) => error,
    }
}

/// The events of a call to `provider`, retried by `RetryPolicy` after its first attempt is
/// answered with `refused`, the second with `answered`: exactly two requests.
pub async fn retried_once(
    provider: &impl Provider,
    refused: Fixture,
    answered: Fixture,
) -> Vec<ModelEvent> {
    let (base, mut received) = serve(vec![refused, answered], usize::MAX).await;
    let model = ServiceBuilder::new()
        .retry(RetryPolicy::new(2).max_wait(Duration::from_millis(10)))
        .service(provider(&base));
    let events: Vec<_> = model.oneshot(request()).await.unwrap().collect().await;
    assert!(received.recv().await.is_some() && received.recv().await.is_some());
    assert!(received.try_recv().is_err(), "two requests, no more");
    events.into_iter().map(Result::unwrap).collect()
}
