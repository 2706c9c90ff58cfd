//! PostProcessLayer inside AguiLayer: findings stream into the state after the text ended, the
//! terminal event waits for them, every status is reported.

use std::{convert::Infallible, time::Duration};

use agent_tower::{
    agent::Agent,
    agui::{AguiLayer, Event},
    message::Message,
    post_process::{Finding, PostProcessLayer, ProcessRequest},
    run::RunRequest,
    test_util::{MockItem, MockModel, Recording, verify},
    tool::ToolRouter,
};
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use tower::{Layer, ServiceBuilder, ServiceExt, service_fn};

/// Runs one answer through the stack; returns the events and the final state.
async fn run<P, St>(processor: P, max_text: usize, grace: Duration) -> (Vec<Event>, Value)
where
    P: tower::Service<ProcessRequest, Response = St, Error = Infallible> + Clone + Send + 'static,
    P::Future: Send + 'static,
    St: futures_core::Stream<Item = Finding> + Send + 'static,
{
    let model = MockModel::new([vec![MockItem::text("The answer [1]."), MockItem::stop()]]);
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let model = ServiceBuilder::new()
        .layer(agui.clone())
        .layer(
            PostProcessLayer::new("notes", processor)
                .unwrap()
                .max_text(max_text),
        )
        .service(model);
    let agent = agui.layer(Agent::new(model, ToolRouter::new()).background_timeout(grace));
    let outcome = agent
        .oneshot(RunRequest::new(vec![Message::user("q")]))
        .await
        .unwrap();
    let events = ui.events();
    verify(&events).unwrap();
    // Whatever arrives, the client's state (the deltas replayed) is the state the run ended with.
    let mut client = json!({});
    for event in &events {
        if let Event::StateDelta(delta) = event {
            let patch: json_patch::Patch = serde_json::from_value(json!(delta.delta)).unwrap();
            json_patch::patch(&mut client, &patch).unwrap();
        }
    }
    let state = outcome.state.expect("the state changed");
    assert_eq!(client, state);
    (events, state)
}

fn the_message(state: &Value) -> &Value {
    state["notes"]["messages"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn findings_arriving_late_go_out_before_the_end() {
    // Two findings, a second apart, long after the text ended.
    let slow = service_fn(|req: ProcessRequest| async move {
        let findings = stream::iter([("length", json!(req.text.len())), ("words", json!(3))]).then(
            |(name, value)| async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Finding {
                    path: vec![name.to_owned()],
                    value,
                }
            },
        );
        Ok::<_, Infallible>(Box::pin(findings))
    });
    let (events, state) = run(slow, 1 << 20, Duration::from_secs(30)).await;
    let message = the_message(&state);
    assert_eq!(message["status"], "done");
    assert_eq!(message["length"], 15);
    assert_eq!(message["words"], 3);
    // `pending`, then `length` a second later, then `words`, then `done`: deltas as the
    // findings arrive, all before the terminal event.
    let kinds: Vec<&str> = events.iter().map(|e| e.kind().as_str()).collect();
    let text_end = kinds.iter().position(|k| *k == "TEXT_MESSAGE_END").unwrap();
    let deltas: Vec<usize> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| **k == "STATE_DELTA")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(deltas.len(), 4, "{kinds:?}");
    assert!(deltas[0] > text_end);
    assert_eq!(kinds.last(), Some(&"RUN_FINISHED"));
}

#[tokio::test(start_paused = true)]
async fn a_processor_past_the_timeout_is_marked() {
    let stuck =
        service_fn(
            |_: ProcessRequest| async move { Ok::<_, Infallible>(stream::pending::<Finding>()) },
        );
    let (_, state) = run(stuck, 1 << 20, Duration::from_secs(2)).await;
    assert_eq!(the_message(&state)["status"], "timeout");
}

#[tokio::test]
async fn failures_and_oversized_messages_are_marked() {
    let failing = service_fn(|_: ProcessRequest| async move {
        Err::<stream::Empty<Finding>, _>(std::io::Error::other("index offline"))
    });
    let model = MockModel::new([vec![MockItem::text("x"), MockItem::stop()]]);
    let agent = Agent::new(
        PostProcessLayer::new("notes", failing)
            .unwrap()
            .layer(model),
        ToolRouter::new(),
    );
    let state = agent
        .oneshot(RunRequest::new(vec![Message::user("q")]))
        .await
        .unwrap()
        .state
        .unwrap();
    let message = the_message(&state);
    assert_eq!(
        (message["status"].as_str(), message["error"].as_str()),
        (Some("error"), Some("index offline"))
    );

    let never =
        service_fn(
            |_: ProcessRequest| async move { Ok::<_, Infallible>(stream::empty::<Finding>()) },
        );
    let (_, state) = run(never, 4, Duration::from_secs(1)).await;
    assert_eq!(the_message(&state)["status"], "too_large");
}

#[test]
fn unsafe_keys_are_refused_at_construction() {
    let citations = agent_tower::post_process::Citations::new();
    assert!(PostProcessLayer::new("__proto__", citations).is_err());
    assert!(PostProcessLayer::new("", citations).is_err());
}

#[tokio::test]
async fn messages_the_predicate_skips_leave_no_trace() {
    let model = MockModel::new([vec![MockItem::text("no markers here"), MockItem::stop()]]);
    let layer = PostProcessLayer::new("citations", agent_tower::post_process::Citations::new())
        .unwrap()
        .when(agent_tower::post_process::Citations::cites);
    let agent = Agent::new(layer.layer(model), ToolRouter::new());
    let outcome = agent
        .oneshot(RunRequest::new(vec![Message::user("q")]))
        .await
        .unwrap();
    assert_eq!(outcome.state, None, "nothing was written");
}

#[tokio::test]
async fn ten_thousand_findings_are_a_few_changes_of_the_state() {
    // A change copies and compares the whole state: one per finding would cost the square of
    // their number (10,000 citations took a minute of CPU).
    let many = service_fn(|_: ProcessRequest| async move {
        let findings = (0..10_000).map(|n| Finding {
            path: vec!["citations".to_owned(), n.to_string()],
            value: json!(n),
        });
        Ok::<_, Infallible>(stream::iter(findings))
    });
    let (events, state) = run(many, 1 << 20, Duration::from_secs(30)).await;
    let message = the_message(&state);
    assert_eq!(message["status"], "done");
    assert_eq!(message["citations"].as_object().unwrap().len(), 10_000);
    assert_eq!(message["citations"]["9999"], 9_999);
    let deltas = events
        .iter()
        .filter(|e| e.kind().as_str() == "STATE_DELTA")
        .count();
    assert!(deltas <= 15, "{deltas} state deltas");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_that_finds_without_end_is_stopped_by_the_timeout() {
    // Always ready, never ending: the writer must yield for the timeout to fire.
    let endless = service_fn(|_: ProcessRequest| async move {
        Ok::<_, Infallible>(stream::repeat(Finding {
            path: vec!["again".to_owned()],
            value: json!(true),
        }))
    });
    let ran = tokio::time::timeout(
        Duration::from_secs(20),
        run(endless, 1 << 20, Duration::from_millis(300)),
    )
    .await
    .expect("the background timeout stops the processor");
    assert_eq!(the_message(&ran.1)["status"], "timeout");
}
