//! Golden AG-UI event sequences of whole runs, one scenario per test.

use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use agent_tower::{
    BoxError,
    agent::Agent,
    agui::{
        AguiLayer, AguiOptions, Event, StateSnapshots, event::RunFinishedOutcome,
        input::ToolContent,
    },
    assert_events,
    context::ForwardedProps,
    message::Message,
    model::{ModelErrorKind, ModelRequest},
    run::{RunOutcome, RunRequest, StopReason},
    test_util::{MockItem, MockModel, MockStream, Recording, verify},
    tool::{ToolCall, ToolError, ToolErrorKind, ToolOutput, ToolRouter, ToolSpec},
    transport::{Channel, OnDisconnect},
};
use serde_json::json;
use tower::{Layer, ServiceBuilder, ServiceExt, service_fn};

fn add_tool() -> ToolRouter {
    let add = service_fn(|call: ToolCall| async move {
        let a = call.arguments["a"].as_i64().unwrap_or(0);
        let b = call.arguments["b"].as_i64().unwrap_or(0);
        Ok::<_, Infallible>(ToolOutput::json(json!(a + b)))
    });
    let broken = service_fn(|_: ToolCall| async move {
        Err::<ToolOutput, _>(ToolError::new(ToolErrorKind::Failed, "disk on fire"))
    });
    ToolRouter::new()
        .route(ToolSpec::new("add", "Adds a and b."), add)
        .route(ToolSpec::new("broken", "Always fails."), broken)
}

/// The whole stack: AguiLayer around the agent, the model and the tools, recording the events.
async fn run_with(
    model: MockModel,
    tools: ToolRouter,
    req: RunRequest,
) -> (Result<RunOutcome, BoxError>, Vec<Event>) {
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let agent = agui
        .layer(Agent::new(agui.layer(model), agui.layer(tools.clone())).tool_specs(tools.specs()));
    let result = agent.oneshot(req).await;
    let events = ui.events();
    verify(&events).unwrap_or_else(|v| panic!("{v}\n{events:#?}"));
    (result, events)
}

fn user(text: &str) -> RunRequest {
    RunRequest::new(vec![Message::user(text)])
}

fn outcome_of(events: &[Event]) -> RunFinishedOutcome {
    match events.last() {
        Some(Event::RunFinished(finished)) => finished.outcome.clone().expect("an outcome"),
        other => panic!("not RUN_FINISHED: {other:?}"),
    }
}

#[tokio::test]
async fn text_only() {
    let model = MockModel::new([vec![
        MockItem::text("Hel"),
        MockItem::text("lo"),
        MockItem::usage(3, 2),
        MockItem::stop(),
    ]]);
    let (result, events) = run_with(model, ToolRouter::new(), user("hi")).await;
    assert_events!(
        events,
        [
            RunStarted,
            StepStarted,
            TextMessageStart,
            TextMessageContent,
            TextMessageContent,
            TextMessageEnd,
            Custom,
            StepFinished,
            MessagesSnapshot,
            RunFinished,
        ]
    );
    // What the step used, before its end.
    let Event::Custom(used) = &events[6] else {
        unreachable!()
    };
    assert_eq!(used.name, agent_tower::agui::future::USAGE_EVENT);
    assert_eq!(used.value["inputTokens"], 3);
    assert_eq!(used.value["outputTokens"], 2);
    let outcome = result.unwrap();
    assert_eq!(outcome.stop, StopReason::EndTurn);
    // The streamed id is the id of the message in the snapshot.
    let Event::TextMessageStart(start) = &events[2] else {
        unreachable!()
    };
    assert_eq!(outcome.messages[1].id(), &start.message_id);
    let Event::RunStarted(started) = &events[0] else {
        unreachable!()
    };
    assert_eq!(started.protocol_version.as_deref(), Some("1.0"));
    let Event::RunFinished(finished) = &events[9] else {
        unreachable!()
    };
    assert_eq!(finished.usage.as_ref().unwrap()[0].total_tokens, Some(5));
}

#[tokio::test]
async fn text_and_tool_call() {
    let mut first = vec![MockItem::text("Let me add.")];
    first.extend(MockItem::tool_call("call_1", "add", r#"{"a":2,"b":3}"#));
    first.push(MockItem::tool_calls());
    let model = MockModel::new([first, vec![MockItem::text("5"), MockItem::stop()]]);
    let (result, events) = run_with(model.clone(), add_tool(), user("add 2 and 3")).await;
    assert_events!(
        events,
        [
            RunStarted,
            StepStarted,
            TextMessageStart,
            TextMessageContent,
            ToolCallStart,
            ToolCallArgs,
            ToolCallEnd,
            TextMessageEnd,
            StepFinished,
            ToolCallResult,
            StepStarted,
            TextMessageStart,
            TextMessageContent,
            TextMessageEnd,
            StepFinished,
            MessagesSnapshot,
            RunFinished,
        ]
    );
    let Event::ToolCallStart(start) = &events[4] else {
        unreachable!()
    };
    let Event::TextMessageStart(text) = &events[2] else {
        unreachable!()
    };
    assert_eq!(start.parent_message_id.as_ref(), Some(&text.message_id));
    let Event::ToolCallResult(result_event) = &events[9] else {
        unreachable!()
    };
    assert_eq!(result_event.tool_call_id, "call_1");
    assert_eq!(result_event.content, ToolContent::Text("5".into()));
    // The model's second turn saw the result, under the id the UI got.
    let outcome = result.unwrap();
    let tool_message = &outcome.messages[2];
    assert_eq!(tool_message.id(), &result_event.message_id);
    assert_eq!(model.requests()[1].messages.last(), Some(tool_message));
}

#[tokio::test]
async fn two_parallel_tool_calls_run_concurrently() {
    // Each tool waits for the other: the run only finishes if both run at the same time.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let meet = service_fn(move |call: ToolCall| {
        let barrier = barrier.clone();
        async move {
            barrier.wait().await;
            Ok::<_, Infallible>(ToolOutput::text(call.id.to_string()))
        }
    });
    let tools = ToolRouter::new().route(ToolSpec::new("meet", "Waits for a peer."), meet);
    let mut first = Vec::new();
    first.extend(MockItem::tool_call("c1", "meet", "{}"));
    first.extend(MockItem::tool_call("c2", "meet", "{}"));
    first.push(MockItem::tool_calls());
    let model = MockModel::new([first, vec![MockItem::text("both met"), MockItem::stop()]]);
    let (result, events) = run_with(model, tools, user("meet twice")).await;
    assert_events!(
        events,
        [
            RunStarted,
            StepStarted,
            ToolCallStart,
            ToolCallArgs,
            ToolCallEnd,
            ToolCallStart,
            ToolCallArgs,
            ToolCallEnd,
            StepFinished,
            ToolCallResult,
            ToolCallResult,
            StepStarted,
            TextMessageStart,
            TextMessageContent,
            TextMessageEnd,
            StepFinished,
            MessagesSnapshot,
            RunFinished,
        ]
    );
    assert_eq!(result.unwrap().messages.len(), 5);
}

#[tokio::test]
async fn tool_error_is_a_result_the_model_sees() {
    let mut first = Vec::new();
    first.extend(MockItem::tool_call("c1", "broken", "{}"));
    first.extend(MockItem::tool_call("c2", "missing", "{}"));
    first.extend(MockItem::tool_call("c3", "add", "{not json"));
    first.push(MockItem::tool_calls());
    let model = MockModel::new([first, vec![MockItem::text("sorry"), MockItem::stop()]]);
    let (result, events) = run_with(model.clone(), add_tool(), user("break")).await;
    // Failures of tools that were called are shown; the bad JSON never reached a tool.
    assert_events!(
        events,
        [
            RunStarted,
            StepStarted,
            ToolCallStart,
            ToolCallArgs,
            ToolCallEnd,
            ToolCallStart,
            ToolCallArgs,
            ToolCallEnd,
            ToolCallStart,
            ToolCallArgs,
            ToolCallEnd,
            StepFinished,
            ToolCallResult,
            ToolCallResult,
            StepStarted,
            TextMessageStart,
            TextMessageContent,
            TextMessageEnd,
            StepFinished,
            MessagesSnapshot,
            RunFinished,
        ]
    );
    let seen = &model.requests()[1].messages;
    let errors: Vec<String> = seen
        .iter()
        .filter_map(|m| match m {
            Message::Tool { is_error: true, .. } => Some(m.text()),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].contains("disk on fire"));
    assert!(errors[1].contains("unknown tool `missing`"));
    assert!(errors[2].contains("not valid JSON"));
    assert_eq!(result.unwrap().stop, StopReason::EndTurn);
}

#[tokio::test]
async fn model_error_mid_stream_closes_all_but_the_cut_call_and_ends_with_run_error() {
    let model = MockModel::new([vec![
        MockItem::reasoning("hmm"),
        MockItem::text("partial"),
        MockItem::tool_start("c1", "add"),
        MockItem::error(ModelErrorKind::RateLimited, "slow down"),
    ]]);
    let (result, events) = run_with(model, add_tool(), user("hi")).await;
    assert_events!(
        events,
        [
            RunStarted,
            StepStarted,
            ReasoningStart,
            ReasoningMessageStart,
            ReasoningMessageContent,
            ReasoningMessageEnd,
            ReasoningEnd,
            TextMessageStart,
            TextMessageContent,
            // The call's arguments were cut off: it is never presented as complete.
            ToolCallStart,
            TextMessageEnd,
            StepFinished,
            RunError,
        ]
    );
    let Some(Event::RunError(error)) = events.last() else {
        unreachable!()
    };
    assert_eq!(error.code.as_deref(), Some("rate_limited"));
    assert!(result.is_err());
}

#[tokio::test(start_paused = true)]
async fn timeout_around_the_model_ends_with_run_error() {
    // A tower-test mock that never answers: the timeout fires (in paused time, instantly).
    let (mock, _handle) = tower_test::mock::pair::<ModelRequest, MockStream>();
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let model = ServiceBuilder::new()
        .layer(agui.clone())
        .timeout(Duration::from_secs(30))
        .service(mock);
    let agent = agui.layer(Agent::new(model, agui.layer(ToolRouter::new())));
    let result = agent.oneshot(user("hi")).await;
    let events = ui.events();
    verify(&events).unwrap();
    // The call never produced a stream, so no step was started.
    assert_events!(events, [RunStarted, RunError]);
    let Some(Event::RunError(error)) = events.last() else {
        unreachable!()
    };
    assert_eq!(error.code.as_deref(), Some("timeout"));
    assert!(result.is_err());
}

#[tokio::test(start_paused = true)]
async fn timeout_around_the_run_closes_the_open_stream() {
    let model = MockModel::new([vec![MockItem::text("stuck"), MockItem::Pending]]);
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let agent = ServiceBuilder::new()
        .layer(agui.clone())
        .timeout(Duration::from_secs(60))
        .service(Agent::new(agui.layer(model), agui.layer(ToolRouter::new())));
    let result = agent.oneshot(user("hi")).await;
    let events = ui.events();
    verify(&events).unwrap();
    assert_events!(
        events,
        [
            RunStarted,
            StepStarted,
            TextMessageStart,
            TextMessageContent,
            TextMessageEnd,
            StepFinished,
            RunError,
        ]
    );
    let Some(Event::RunError(error)) = events.last() else {
        unreachable!()
    };
    assert_eq!(error.code.as_deref(), Some("timeout"));
    assert!(result.is_err());
}

#[tokio::test]
async fn cancellation_finishes_with_a_cancelled_outcome() {
    let model = MockModel::new([vec![MockItem::text("thinking"), MockItem::Pending]]);
    let (tx, mut rx) = Channel::<Event>::bounded(64);
    let agui = AguiLayer::new();
    let agent = agui.layer(Agent::new(agui.layer(model), agui.layer(ToolRouter::new())));
    let mut req = user("hi");
    req.run.sinks.insert(tx);
    let cancel = req.run.cancel.clone();
    let run = tokio::spawn(agent.oneshot(req));

    let mut events = Vec::new();
    // Wait (on the channel, not the clock) until the model is streaming, then cancel.
    while let Some(event) = rx.recv().await {
        let streaming = matches!(event, Event::TextMessageContent(_));
        events.push(event);
        if streaming {
            break;
        }
    }
    cancel.cancel();
    let outcome = run.await.unwrap().unwrap();
    while let Some(event) = rx.recv().await {
        events.push(event);
    }
    verify(&events).unwrap();
    assert_events!(
        events,
        [
            RunStarted,
            StepStarted,
            TextMessageStart,
            TextMessageContent,
            TextMessageEnd,
            StepFinished,
            MessagesSnapshot,
            RunFinished,
        ]
    );
    assert_eq!(outcome_of(&events), RunFinishedOutcome::Cancelled);
    assert_eq!(outcome.stop, StopReason::Cancelled);
    // What the UI was shown stays in the snapshot, under the streamed id.
    let Event::TextMessageStart(start) = &events[2] else {
        unreachable!()
    };
    let Event::MessagesSnapshot(snapshot) = &events[6] else {
        unreachable!()
    };
    let kept = snapshot.messages.iter().find_map(|m| match m {
        agent_tower::agui::input::Message::Assistant { id, content, .. }
            if *id == start.message_id =>
        {
            content.clone()
        }
        _ => None,
    });
    assert_eq!(kept.as_deref(), Some("thinking"));
}

/// The token can fire on another thread after the agent looked at it and before the model's
/// stream does: the stream fails of the cancellation, and the run is still cancelled, with what
/// was streamed kept (a bridge's remote agent cancelled so once left the turn out of the thread).
#[tokio::test]
async fn a_step_failing_of_the_cancellation_ends_the_run_cancelled() {
    let model = service_fn(|req: ModelRequest| async move {
        let cancel = req.run.cancel.clone();
        let said = agent_tower::model::ModelEvent::TextDelta {
            message_id: req.run.message_id.clone(),
            delta: "thinking".into(),
        };
        let cancelled = futures_util::stream::once(async move {
            cancel.cancel();
            Err::<agent_tower::model::ModelEvent, BoxError>("the run was cancelled".into())
        });
        Ok::<_, Infallible>(futures_util::StreamExt::chain(
            futures_util::stream::iter([Ok(said)]),
            cancelled,
        ))
    });
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let agent = agui.layer(Agent::new(agui.layer(model), agui.layer(ToolRouter::new())));
    let outcome = agent.oneshot(user("hi")).await.unwrap();

    assert_eq!(outcome.stop, StopReason::Cancelled);
    let events = ui.events();
    verify(&events).unwrap();
    assert_eq!(outcome_of(&events), RunFinishedOutcome::Cancelled);
    let kept: Vec<_> = outcome.messages.iter().map(Message::text).collect();
    assert_eq!(kept, ["hi", "thinking"]);
}

#[tokio::test]
async fn dropping_the_run_mid_stream_still_balances_every_start() {
    let model = MockModel::new([vec![
        MockItem::text("half"),
        MockItem::tool_start("c1", "add"),
        MockItem::Pending,
    ]]);
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let agent = agui.layer(Agent::new(agui.layer(model), agui.layer(add_tool())));
    let mut run = tokio_test::task::spawn(agent.oneshot(user("hi")));
    tokio_test::assert_pending!(run.poll());
    drop(run);
    let events = ui.events();
    verify(&events).unwrap();
    assert_events!(
        events,
        [
            RunStarted,
            StepStarted,
            TextMessageStart,
            TextMessageContent,
            ToolCallStart,
            ToolCallEnd,
            TextMessageEnd,
            StepFinished,
            RunFinished,
        ]
    );
    assert_eq!(outcome_of(&events), RunFinishedOutcome::Cancelled);
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_run_by_default() {
    for (policy, expected) in [
        (OnDisconnect::Cancel, StopReason::Cancelled),
        (OnDisconnect::Continue, StopReason::EndTurn),
    ] {
        // The first step streams into a channel nobody reads any more.
        let model = MockModel::new([vec![
            MockItem::text("one"),
            MockItem::text("two"),
            MockItem::stop(),
        ]]);
        let (tx, rx) = Channel::<Event>::bounded(1);
        drop(rx);
        let agui = AguiLayer::new().on_disconnect(policy);
        let agent = agui.layer(Agent::new(agui.layer(model), agui.layer(ToolRouter::new())));
        let mut req = user("hi");
        req.run.sinks.insert(tx);
        let outcome = agent.oneshot(req).await.unwrap();
        assert_eq!(outcome.stop, expected, "{policy:?}");
    }
}

#[tokio::test]
async fn clients_before_1_0_get_ends_they_can_parse() {
    use agent_tower::agui::input::ClientProtocol;

    // Waiting for a client tool: a plain success (0.0.x schemas refuse `pendingToolCallIds`).
    let mut call = Vec::from(MockItem::tool_call(
        "fe_1",
        "change_background",
        r#"{"color":"blue"}"#,
    ));
    call.push(MockItem::tool_calls());
    let mut req = user("make it blue");
    req.client_tools = vec![ToolSpec::new(
        "change_background",
        "Changes the page colour.",
    )];
    req.run.extensions.insert(ClientProtocol::PreV1);
    let (result, events) = run_with(MockModel::new([call]), ToolRouter::new(), req).await;
    assert_eq!(result.unwrap().stop, StopReason::ClientToolCalls);
    assert_eq!(
        outcome_of(&events),
        RunFinishedOutcome::Success {
            pending_tool_call_ids: None
        }
    );

    // Cancelled: `RUN_ERROR` with code `cancelled` (0.0.x has no `cancelled` outcome).
    let model = MockModel::new([vec![MockItem::text("thinking"), MockItem::Pending]]);
    let mut req = user("hi");
    req.run.extensions.insert(ClientProtocol::PreV1);
    req.run.cancel.cancel();
    let (result, events) = run_with(model, ToolRouter::new(), req).await;
    assert_eq!(result.unwrap().stop, StopReason::Cancelled);
    let Some(Event::RunError(error)) = events.last() else {
        panic!("not RUN_ERROR: {events:?}")
    };
    assert_eq!(error.code.as_deref(), Some("cancelled"));
}

#[tokio::test]
async fn client_tools_are_streamed_and_left_pending() {
    let mut first = Vec::new();
    first.extend(MockItem::tool_call(
        "fe_1",
        "change_background",
        r#"{"color":"blue"}"#,
    ));
    first.push(MockItem::tool_calls());
    let model = MockModel::new([first, vec![MockItem::text("done"), MockItem::stop()]]);
    let mut req = user("make it blue");
    req.client_tools = vec![ToolSpec::new(
        "change_background",
        "Changes the page colour.",
    )];
    let (result, events) = run_with(model.clone(), ToolRouter::new(), req).await;
    assert_events!(
        events,
        [
            RunStarted,
            StepStarted,
            ToolCallStart,
            ToolCallArgs,
            ToolCallEnd,
            StepFinished,
            MessagesSnapshot,
            RunFinished,
        ]
    );
    assert_eq!(
        outcome_of(&events),
        RunFinishedOutcome::Success {
            pending_tool_call_ids: Some(vec!["fe_1".into()])
        }
    );
    assert!(
        model.requests()[0]
            .tools
            .iter()
            .any(|t| t.name == "change_background")
    );

    // The next run carries the client's result and continues from it.
    let mut messages = result.unwrap().messages;
    messages.push(Message::Tool {
        id: "tool-msg".into(),
        tool_call_id: "fe_1".into(),
        content: vec![agent_tower::message::ContentPart::text("ok")],
        is_error: false,
    });
    let (result, events) =
        run_with(model.clone(), ToolRouter::new(), RunRequest::new(messages)).await;
    assert_eq!(result.unwrap().stop, StopReason::EndTurn);
    assert_eq!(
        outcome_of(&events),
        RunFinishedOutcome::Success {
            pending_tool_call_ids: None
        }
    );
    assert_eq!(
        model.requests()[1].messages.last().unwrap().id(),
        "tool-msg"
    );
}

#[tokio::test]
async fn a_tool_call_id_runs_at_most_once_per_thread() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = {
        let calls = calls.clone();
        service_fn(move |_: ToolCall| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(ToolOutput::text("ran")) }
        })
    };
    let tools = ToolRouter::new().route(ToolSpec::new("once", "Must run once."), counted);
    // History already holds c1's result; the model (re-)emits c1.
    let history = vec![
        Message::user("do it"),
        Message::Assistant {
            id: "a1".into(),
            content: String::new(),
            tool_calls: vec![agent_tower::message::ToolCallRequest {
                id: "c1".into(),
                name: "once".into(),
                arguments: "{}".into(),
                encrypted_value: None,
            }],
        },
        Message::Tool {
            id: "t1".into(),
            tool_call_id: "c1".into(),
            content: vec![agent_tower::message::ContentPart::text("ran")],
            is_error: false,
        },
    ];
    let mut replay = Vec::new();
    replay.extend(MockItem::tool_call("c1", "once", "{}"));
    replay.push(MockItem::tool_calls());
    let model = MockModel::new([
        replay,
        vec![MockItem::text("already done"), MockItem::stop()],
    ]);
    let (result, events) = run_with(model, tools, RunRequest::new(history)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert!(!events.iter().any(|e| matches!(e, Event::ToolCallResult(_))));
    assert_eq!(result.unwrap().stop, StopReason::EndTurn);
}

#[tokio::test]
async fn max_turns_stops_a_model_that_never_finishes() {
    let looping = || {
        let mut reply = Vec::new();
        reply.extend(MockItem::tool_call(&uuid_like(), "add", "{}"));
        reply.push(MockItem::tool_calls());
        reply
    };
    let model = MockModel::new((0..3).map(|_| looping()));
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let agent = agui.layer(
        Agent::new(agui.layer(model), agui.layer(add_tool()))
            .max_turns(std::num::NonZeroU32::new(2).unwrap()),
    );
    let outcome = agent.oneshot(user("loop")).await.unwrap();
    assert_eq!(outcome.stop, StopReason::MaxTurns);
    let events = ui.events();
    verify(&events).unwrap();
    let Some(Event::RunFinished(finished)) = events.last() else {
        unreachable!()
    };
    assert_eq!(
        finished.result.as_deref(),
        Some(&json!({"stopReason": "max_turns"}))
    );
}

fn uuid_like() -> String {
    agent_tower::id::ToolCallId::new().to_string()
}

#[tokio::test]
async fn state_snapshots_follow_the_options_with_run_over_request_over_layer() {
    let cases = [
        // (layer, request, run context) -> expected snapshots
        (None, None, None, 1),
        (Some(StateSnapshots::All), None, None, 2),
        (Some(StateSnapshots::All), Some("none"), None, 0),
        (
            Some(StateSnapshots::None),
            Some("final"),
            Some(StateSnapshots::All),
            2,
        ),
    ];
    for (layer, request, run, expected) in cases {
        let model = MockModel::new([vec![MockItem::text("ok"), MockItem::stop()]]);
        let ui = Recording::new();
        let mut agui = AguiLayer::new().transport(ui.clone());
        if let Some(layer) = layer {
            agui = agui
                .options(AguiOptions {
                    state_snapshots: Some(layer),
                    ..AguiOptions::default()
                })
                .unwrap();
        }
        let agent = agui.layer(Agent::new(agui.layer(model), agui.layer(ToolRouter::new())));
        let mut req = user("hi");
        req.state = Some(json!({"count": 1}));
        if let Some(request) = request {
            req.run
                .extensions
                .insert(ForwardedProps(json!({"agui": {"stateSnapshots": request}})));
        }
        if let Some(run) = run {
            req.run.extensions.insert(AguiOptions {
                state_snapshots: Some(run),
                ..AguiOptions::default()
            });
        }
        agent.oneshot(req).await.unwrap();
        let snapshots = ui
            .events()
            .iter()
            .filter(|e| matches!(e, Event::StateSnapshot(_)))
            .count();
        assert_eq!(snapshots, expected, "{layer:?} {request:?} {run:?}");
    }
}

#[tokio::test]
async fn a_bad_option_in_the_request_is_a_clear_run_error() {
    let model = MockModel::new([]);
    let mut req = user("hi");
    req.run.extensions.insert(ForwardedProps(
        json!({"agui": {"stateSnapshots": "sometimes"}}),
    ));
    let (result, events) = run_with(model.clone(), ToolRouter::new(), req).await;
    assert_events!(events, [RunError]);
    let Some(Event::RunError(error)) = events.last() else {
        unreachable!()
    };
    assert_eq!(error.code.as_deref(), Some("invalid_options"));
    assert!(error.message.contains("sometimes"));
    assert!(result.is_err());
    assert!(model.requests().is_empty(), "the agent never ran");
}

#[tokio::test]
async fn tool_results_off_and_activities_on() {
    let mut first = Vec::new();
    first.extend(MockItem::tool_call("c1", "add", r#"{"a":1,"b":1}"#));
    first.push(MockItem::tool_calls());
    let model = MockModel::new([first, vec![MockItem::text("2"), MockItem::stop()]]);
    let ui = Recording::new();
    let agui = AguiLayer::new()
        .transport(ui.clone())
        .options(AguiOptions {
            tool_results: Some(false),
            activities: Some(true),
            thread_id: Some("thread-override".into()),
            ..AguiOptions::default()
        })
        .unwrap();
    let tools = add_tool();
    let agent = agui.layer(Agent::new(agui.layer(model), agui.layer(tools)));
    agent.oneshot(user("add")).await.unwrap();
    let events = ui.events();
    verify(&events).unwrap();
    assert_events!(
        events,
        [
            RunStarted,
            StepStarted,
            ToolCallStart,
            ToolCallArgs,
            ToolCallEnd,
            StepFinished,
            ActivitySnapshot,
            ActivitySnapshot,
            StepStarted,
            TextMessageStart,
            TextMessageContent,
            TextMessageEnd,
            StepFinished,
            MessagesSnapshot,
            RunFinished,
        ]
    );
    let Event::ActivitySnapshot(done) = &events[7] else {
        unreachable!()
    };
    assert_eq!(done.content["status"], "completed");
    let Event::RunStarted(started) = &events[0] else {
        unreachable!()
    };
    assert_eq!(started.thread_id, "thread-override");
}

#[tokio::test(start_paused = true)]
async fn the_model_layer_passes_readiness_through() {
    // A tower-test mock with no capacity: the layer must report Pending, never call it.
    let (mock, mut handle) = tower_test::mock::pair::<ModelRequest, MockStream>();
    handle.allow(0);
    let mut model =
        tower_test::mock::Spawn::new(AguiLayer::new().transport(Recording::new()).layer(mock));
    tokio_test::assert_pending!(model.poll_ready::<ModelRequest>());
    handle.allow(1);
    tokio_test::assert_ready_ok!(model.poll_ready::<ModelRequest>());
}

#[tokio::test]
async fn a_tool_that_changes_state_emits_a_delta_after_its_result() {
    let mut first = Vec::new();
    first.extend(MockItem::tool_call(
        "c1",
        "remember",
        r#"{"key":"theme","value":"dark"}"#,
    ));
    first.push(MockItem::tool_calls());
    let model = MockModel::new([first, vec![MockItem::text("ok"), MockItem::stop()]]);
    let ui = Recording::new();
    let agui = AguiLayer::new()
        .transport(ui.clone())
        .options(AguiOptions {
            state_snapshots: Some(StateSnapshots::All),
            ..AguiOptions::default()
        })
        .unwrap();
    let tools = agent_tower::tool::demo::demo_tools();
    let agent = agui.layer(Agent::new(agui.layer(model), agui.layer(tools)));
    let mut req = user("remember");
    req.state = Some(json!({"items": [1]}));
    let outcome = agent.oneshot(req).await.unwrap();
    let events = ui.events();
    verify(&events).unwrap();
    assert_events!(
        events,
        [
            RunStarted,
            StateSnapshot,
            StepStarted,
            ToolCallStart,
            ToolCallArgs,
            ToolCallEnd,
            StepFinished,
            ToolCallResult,
            StateDelta,
            StepStarted,
            TextMessageStart,
            TextMessageContent,
            TextMessageEnd,
            StepFinished,
            StateSnapshot,
            MessagesSnapshot,
            RunFinished,
        ]
    );
    let Event::StateDelta(delta) = &events[8] else {
        unreachable!()
    };
    assert_eq!(
        delta.delta,
        vec![json!({"op": "add", "path": "/theme", "value": "dark"})]
    );
    let expected = json!({"items": [1], "theme": "dark"});
    assert_eq!(outcome.state, Some(expected.clone()));
    let Event::StateSnapshot(last) = &events[14] else {
        unreachable!()
    };
    assert_eq!(last.snapshot, expected);
}

#[tokio::test]
async fn the_model_reads_the_current_state_every_turn() {
    let mut first = Vec::new();
    first.extend(MockItem::tool_call(
        "c1",
        "remember",
        r#"{"key":"mood","value":"happy"}"#,
    ));
    first.push(MockItem::tool_calls());
    let model = MockModel::new([first, vec![MockItem::text("ok"), MockItem::stop()]]);
    let agent = Agent::new(model.clone(), agent_tower::tool::demo::demo_tools())
        .state_context(|state| Some(Message::system(format!("state: {state}"))));
    let mut req = user("hi");
    req.state = Some(json!({"mood": "calm"}));
    let outcome = agent.oneshot(req).await.unwrap();
    let seen: Vec<String> = model
        .requests()
        .iter()
        .map(|r| r.messages[0].text())
        .collect();
    assert_eq!(
        seen,
        [r#"state: {"mood":"calm"}"#, r#"state: {"mood":"happy"}"#]
    );
    // The state message is the model's view only, not part of the conversation.
    assert!(
        !outcome
            .messages
            .iter()
            .any(|m| m.text().starts_with("state:"))
    );
}

#[tokio::test]
async fn a_tool_reports_progress_as_activity_deltas() {
    let index = service_fn(|call: ToolCall| async move {
        let progress = call
            .run
            .extensions
            .get::<agent_tower::tool::Progress>()
            .cloned();
        for done in [1, 2] {
            if let Some(progress) = &progress {
                progress.report(json!({"done": done, "of": 2}));
            }
            tokio::task::yield_now().await;
        }
        Ok::<_, Infallible>(ToolOutput::text("indexed"))
    });
    let tools = ToolRouter::new().route(ToolSpec::new("index", "Indexes."), index);
    let mut first = Vec::new();
    first.extend(MockItem::tool_call("c1", "index", "{}"));
    first.push(MockItem::tool_calls());
    let model = MockModel::new([first, vec![MockItem::text("ok"), MockItem::stop()]]);
    let ui = Recording::new();
    let agui = AguiLayer::new()
        .transport(ui.clone())
        .options(AguiOptions {
            activities: Some(true),
            ..AguiOptions::default()
        })
        .unwrap();
    let agent = agui.layer(Agent::new(agui.layer(model), agui.layer(tools)));
    agent.oneshot(user("index")).await.unwrap();
    let events = ui.events();
    verify(&events).unwrap();
    let activity: Vec<&Event> = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::ActivitySnapshot(_) | Event::ActivityDelta(_) | Event::ToolCallResult(_)
            )
        })
        .collect();
    assert_events!(
        activity,
        [
            ActivitySnapshot,
            ActivityDelta,
            ActivityDelta,
            ToolCallResult,
            ActivitySnapshot,
        ]
    );
    // Replaying the deltas on the first snapshot gives what the tool reported last.
    let Event::ActivitySnapshot(start) = activity[0] else {
        unreachable!()
    };
    let mut content = start.content.clone();
    for event in &activity[1..3] {
        let Event::ActivityDelta(delta) = event else {
            unreachable!()
        };
        let patch: json_patch::Patch = serde_json::from_value(json!(delta.patch)).unwrap();
        json_patch::patch(&mut content, &patch).unwrap();
    }
    assert_eq!(content["progress"], json!({"done": 2, "of": 2}));
    let Event::ActivitySnapshot(end) = activity[4] else {
        unreachable!()
    };
    assert_eq!(end.content["status"], "completed");
}

#[tokio::test]
async fn a_runs_own_sink_wins_over_the_layers_transport() {
    // A layer built with a default transport, under a server that gives each run its own sink:
    // the run's events go to the run's sink, whatever the layer's transport type is.
    let model = MockModel::new([vec![MockItem::text("hi"), MockItem::stop()]]);
    let default = Recording::new();
    let agui = AguiLayer::new().transport(default.clone());
    let agent = agui.layer(Agent::new(agui.layer(model), agui.layer(ToolRouter::new())));
    let (tx, rx) = Channel::<Event>::bounded(64);
    let mut req = user("hi");
    req.run.sinks.insert(tx);
    agent.oneshot(req).await.unwrap();
    let events: Vec<Event> = futures_util::StreamExt::collect(rx).await;
    verify(&events).unwrap();
    assert_eq!(events.len(), 8, "{events:?}");
    assert!(
        default.events().is_empty(),
        "nothing went to the layer's default"
    );
}
