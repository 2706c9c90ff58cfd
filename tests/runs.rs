//! The run engine used as a library, without HTTP: begin, follow, cancel; a caller that goes away
//! mid-begin; a bounded log that fills up; what the agent sent meanwhile written at once; the
//! run's own events written by the engine, whatever agent it drives.

use crate::support;

use agent_tower::{
    BoxError,
    agent::Agent,
    agui::{AguiLayer, RunAgentInput},
    message::Message,
    model::scripted::ScriptedModel,
    run::{RunOutcome, RunRequest},
    runs::{Begun, Cancel, Logged, MemoryLog, RunObserver, Runs},
    tool::ToolRouter,
};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use serde_json::{Value, json};
use tower::{Layer, Service};

fn agent() -> impl Service<RunRequest, Response = RunOutcome, Error = BoxError, Future: Send>
+ Clone
+ Send
+ Sync
+ 'static {
    let agui = AguiLayer::new();
    agui.layer(Agent::new(
        agui.layer(ScriptedModel::new()),
        agui.layer(ToolRouter::new()),
    ))
}

fn input(run: &str, tokens: u64) -> RunAgentInput {
    let hello = agent_tower::agui::input::Message::from_domain(&Message::user("hello")).unwrap();
    let mut input = RunAgentInput::new(format!("t-{run}").into(), run.into(), vec![hello]);
    input.forwarded_props = Some(json!({"scripted": {"tokens": tokens}}));
    input
}

async fn events(runs: &Runs, begun: &Begun) -> Vec<Value> {
    runs.follow(begun.run_id().clone(), begun.from())
        .map(|e| serde_json::from_slice(e.json()).unwrap())
        .collect()
        .await
}

#[tokio::test]
async fn a_caller_gone_mid_begin_leaves_a_run_driven_to_its_end() {
    let runs = Runs::new(agent());
    let gone = input("gone", 50);
    let mut begin = tokio_test::task::spawn(runs.begin(gone.clone()));
    // The start runs in a task of its own; the caller is dropped while it waits for it.
    tokio_test::assert_pending!(begin.poll());
    drop(begin);
    // The same request again (its start queued behind the first): the run that started, replayed.
    let again = runs.begin(gone).await.unwrap();
    assert!(
        matches!(again, Begun::Replayed { from: 0, .. }),
        "{again:?}"
    );
    let log = events(&runs, &again).await;
    assert_eq!(
        log.first().map(|e| e["type"].clone()),
        Some(json!("RUN_STARTED")),
        "{log:?}"
    );
    assert_eq!(log.last().unwrap()["type"], "RUN_FINISHED");
}

#[tokio::test]
async fn a_run_is_cancelled_by_its_id() {
    let runs = Runs::new(agent());
    let begun = runs.begin(input("long", 10_000_000)).await.unwrap();
    let mut follow = runs.follow(begun.run_id().clone(), 0);
    follow.next().await.expect("RUN_STARTED");
    assert_eq!(
        runs.cancel(begun.run_id()).await.unwrap(),
        Cancel::Cancelled
    );
    let rest: Vec<Value> = follow
        .map(|e| serde_json::from_slice(e.json()).unwrap())
        .collect()
        .await;
    assert_eq!(
        rest.last().unwrap()["outcome"]["type"],
        "cancelled",
        "{:?}",
        rest.last()
    );
    assert_eq!(
        runs.cancel(begun.run_id()).await.unwrap(),
        Cancel::NotRunning,
        "it ended"
    );
}

#[tokio::test]
async fn a_full_log_stops_the_run_with_a_terminal_event() {
    let runs = Runs::new(agent()).log(MemoryLog::new().max_bytes(64 * 1024));
    let begun = runs.begin(input("big", 1_000_000)).await.unwrap();
    let log = events(&runs, &begun).await;
    let end = log.last().unwrap();
    assert_eq!(end["type"], "RUN_ERROR", "{end}");
    assert_eq!(end["code"], "log_full", "{end}");
    // Another run can start once the full one ended (its bytes can be forgotten).
    let next = runs.begin(input("small", 10)).await.unwrap();
    assert_eq!(
        events(&runs, &next).await.last().unwrap()["type"],
        "RUN_FINISHED"
    );
}

/// The number of events of each write to the run log.
#[derive(Clone, Default)]
struct Writes(Arc<Mutex<Vec<u64>>>);

impl RunObserver for Writes {
    fn on_logged(&self, logged: &Logged<'_>) {
        self.0.lock().unwrap().push(logged.events);
    }
}

#[tokio::test]
async fn what_the_agent_sent_meanwhile_goes_in_one_write() {
    let writes = Writes::default();
    let runs = Runs::new(agent()).observer(writes.clone());
    let begun = runs.begin(input("many", 10_000)).await.unwrap();
    let log = events(&runs, &begun).await;
    assert_eq!(log.last().unwrap()["type"], "RUN_FINISHED");
    let writes = writes.0.lock().unwrap().clone();
    assert_eq!(writes.iter().sum::<u64>(), log.len() as u64, "{writes:?}");
    // One poll of the agent fills the room its channel has, and the driver takes all of it: a
    // write per event would be ten thousand writes.
    assert!(
        writes.len() < log.len() / 50,
        "{} writes for {} events",
        writes.len(),
        log.len()
    );
}

/// The types of `log`'s events, in order.
fn types(log: &[Value]) -> Vec<&str> {
    log.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn the_log_says_when_each_event_happened_and_what_each_model_call_used() {
    let runs = Runs::new(agent());
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let begun = runs.begin(input("timed", 20)).await.unwrap();
    let log = events(&runs, &begun).await;
    // Every event but a stream's fragments carries its time, in the order of the log.
    let (fragments, timed): (Vec<&Value>, Vec<&Value>) = log
        .iter()
        .partition(|e| e["type"] == "TEXT_MESSAGE_CONTENT");
    assert_eq!(fragments.len(), 20, "{:?}", types(&log));
    assert!(fragments.iter().all(|e| e.get("timestamp").is_none()));
    let times: Vec<u64> = timed
        .iter()
        .map(|e| {
            e["timestamp"]
                .as_u64()
                .unwrap_or_else(|| panic!("no time: {e}"))
        })
        .collect();
    assert!(times.is_sorted(), "{times:?}");
    assert!(times[0] >= before, "{} before {before}", times[0]);
    // Inside its step, what the model call used: the run's usage, as the run's end sums it.
    let step = types(&log)
        .iter()
        .position(|t| *t == "STEP_STARTED")
        .unwrap();
    let used: Vec<&Value> = log
        .iter()
        .filter(|e| e["type"] == "CUSTOM" && e["name"] == "agent_tower.usage")
        .collect();
    assert_eq!(used.len(), 1, "{:?}", types(&log));
    let at = log.iter().position(|e| e == used[0]).unwrap();
    assert!(
        at > step && log[at + 1]["type"] == "STEP_FINISHED",
        "{:?}",
        types(&log)
    );
    assert_eq!(used[0]["value"]["outputTokens"], 20);
    let finished = log.last().unwrap();
    assert_eq!(finished["type"], "RUN_FINISHED");
    assert_eq!(
        finished["usage"][0]["outputTokens"],
        used[0]["value"]["outputTokens"]
    );
    assert_eq!(
        finished["usage"][0]["inputTokens"],
        used[0]["value"]["inputTokens"]
    );
    support::officially_verified(&log).await;
}

#[tokio::test]
async fn a_bare_agent_is_a_whole_run_and_its_thread_goes_on() {
    // No AG-UI layer anywhere: the engine opens and closes the run itself.
    let runs = Runs::new(Agent::new(ScriptedModel::new(), ToolRouter::new()));
    let asked = input("bare", 3);
    let first = runs.begin(asked.clone()).await.unwrap();
    let log = events(&runs, &first).await;
    assert_eq!(
        types(&log),
        ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    );
    assert_eq!(log[0]["threadId"], "t-bare");
    assert_eq!(log[0]["runId"], "bare");
    assert_eq!(log[0]["input"]["messages"][0]["content"], "hello");
    let said: Vec<(&Value, &Value)> = log[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (&m["role"], &m["content"]))
        .collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert_eq!(said[0], (&json!("user"), &json!("hello")));
    assert_eq!(said[1].0, "assistant");
    // The scripted model was asked for three words.
    let answer_text = said[1].1.as_str().unwrap().to_owned();
    assert_eq!(answer_text.split_whitespace().count(), 3, "{said:?}");
    assert_eq!(log[2]["outcome"]["type"], "success");
    support::officially_verified(&log).await;

    // The next turn sees the first in its conversation, in order.
    let mut next = input("bare-2", 3);
    next.thread_id = "t-bare".into();
    let answer = serde_json::from_value(log[1]["messages"][1].clone()).unwrap();
    let again = agent_tower::agui::input::Message::from_domain(&Message::user("again")).unwrap();
    // The client's conversation: its first message as it sent it, the answer, its next.
    next.messages = vec![asked.messages[0].clone(), answer, again];
    let second = runs.begin(next).await.unwrap();
    let log = events(&runs, &second).await;
    assert_eq!(log[0]["input"]["messages"][0]["content"], "again");
    let roles: Vec<&Value> = log[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["role"])
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    let thread = runs
        .run_log()
        .thread(&"t-bare".into())
        .await
        .unwrap()
        .unwrap();
    let texts: Vec<String> = thread.messages.iter().map(Message::text).collect();
    assert_eq!(texts[0], "hello");
    assert_eq!(texts[1], answer_text);
    assert_eq!(texts[2], "again");
    assert_eq!(texts[3].split_whitespace().count(), 3, "{texts:?}");
}

#[tokio::test]
async fn steps_without_a_run_layer_are_opened_and_closed_by_the_engine() {
    let agui = AguiLayer::new();
    let agent = Agent::new(
        agui.layer(ScriptedModel::new()),
        agui.layer(ToolRouter::new()),
    );
    let runs = Runs::new(agent);
    let begun = runs.begin(input("steps", 3)).await.unwrap();
    let log = events(&runs, &begun).await;
    let kinds = types(&log);
    assert_eq!(
        kinds[..3],
        ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START"]
    );
    assert_eq!(
        kinds[kinds.len() - 5..],
        [
            "TEXT_MESSAGE_END",
            "CUSTOM",
            "STEP_FINISHED",
            "MESSAGES_SNAPSHOT",
            "RUN_FINISHED"
        ]
    );
    // The streamed text is the text of the snapshot's answer, under the same message id.
    let streamed: String = log
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    let snapshot = &log[log.len() - 2]["messages"][1];
    assert_eq!(snapshot["content"], streamed.as_str());
    assert_eq!(snapshot["id"], log[2]["messageId"]);
    support::officially_verified(&log).await;
}

#[tokio::test]
async fn an_agent_framed_twice_still_logs_one_start_and_one_end() {
    let agui = AguiLayer::new();
    let runs = Runs::new(agui.layer(agent()));
    let begun = runs.begin(input("twice", 3)).await.unwrap();
    let log = events(&runs, &begun).await;
    let kinds = types(&log);
    assert_eq!(kinds.iter().filter(|k| **k == "RUN_STARTED").count(), 1);
    assert_eq!(kinds.first(), Some(&"RUN_STARTED"));
    assert_eq!(
        kinds.iter().filter(|k| **k == "RUN_FINISHED").count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(kinds.last(), Some(&"RUN_FINISHED"));
    support::officially_verified(&log).await;
}

#[tokio::test]
async fn a_bare_agent_asked_for_bad_options_is_refused_before_it_runs() {
    let runs = Runs::new(Agent::new(ScriptedModel::new(), ToolRouter::new()));
    let mut bad = input("bad-options", 3);
    bad.forwarded_props = Some(json!({"agui": {"stateSnapshots": "sometimes"}}));
    let begun = runs.begin(bad).await.unwrap();
    let log = events(&runs, &begun).await;
    assert_eq!(types(&log), ["RUN_ERROR"]);
    assert_eq!(log[0]["code"], "invalid_options");
    assert!(
        log[0]["message"].as_str().unwrap().contains("`sometimes`"),
        "{log:?}"
    );
}

/// What a door without a conversation of its own asks the engine: the next turn of a thread
/// (its conversation, then the prompt) and an interrupted run continued under its own id with
/// the answers; neither reaches another principal's thread or run.
#[cfg(feature = "demo")]
#[tokio::test]
async fn a_door_takes_turns_and_continues_its_interrupted_run_for_its_principal_only() {
    use agent_tower::{
        agui::input::{ResumeEntry, ResumeStatus},
        context::Principal,
        demo,
        permission::InterruptApprover,
        runs::{BeginError, ResumeError},
    };
    let agent = demo::scripted()
        .policy(demo::policy())
        .approver(InterruptApprover::new(std::time::Duration::from_secs(600)))
        .build();
    let runs = Runs::new(agent);
    let (alice, bob) = (
        Principal::user("alice").unwrap(),
        Principal::user("bob").unwrap(),
    );
    let thread = agent_tower::id::ThreadId::from("door-thread");

    let first = runs
        .next_turn(Some(&alice), thread.clone(), Message::user("hello"))
        .await
        .unwrap();
    let begun = runs.begin_as(Some(alice.clone()), first).await.unwrap();
    assert_eq!(
        events(&runs, &begun).await.last().unwrap()["type"],
        "RUN_FINISHED"
    );

    // The next turn carries the thread's conversation, then the prompt.
    let remember = r#"remember {"key": "theme", "value": "dark"}"#;
    let second = runs
        .next_turn(Some(&alice), thread.clone(), Message::user(remember))
        .await
        .unwrap();
    let users: Vec<_> = second
        .messages
        .iter()
        .filter_map(|m| serde_json::to_value(m).ok())
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(users, [json!("hello"), json!(remember)]);
    assert!(matches!(
        runs.next_turn(Some(&bob), thread.clone(), Message::user("mine?"))
            .await,
        Err(BeginError::UnknownThread(_))
    ));

    // It stops at the approval of `remember`.
    let begun = runs.begin_as(Some(alice.clone()), second).await.unwrap();
    let run = begun.run_id().clone();
    let stopped = events(&runs, &begun).await;
    let end = stopped.last().unwrap();
    assert_eq!(end["outcome"]["type"], "interrupt");
    let interrupt = end["outcome"]["interrupts"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let approve = vec![ResumeEntry {
        interrupt_id: interrupt,
        status: ResumeStatus::Resolved,
        payload: Some(json!({"approved": true})),
        metadata: None,
    }];

    // Bob cannot continue it, whatever he answers; nothing changed.
    let refused = runs
        .continue_run(Some(bob.clone()), &run, approve.clone())
        .await;
    assert!(
        matches!(refused, Err(ResumeError::UnknownRun(_))),
        "{refused:?}"
    );
    // Alice's answer continues the same run after where it stopped; the tool runs.
    let continued = runs
        .continue_run(Some(alice.clone()), &run, approve.clone())
        .await
        .unwrap();
    assert_eq!(continued.run_id(), &run);
    assert_eq!(continued.from(), stopped.len() as u64);
    let went_on = events(&runs, &continued).await;
    assert_eq!(went_on.first().unwrap()["type"], "RUN_STARTED");
    assert!(went_on.iter().any(|e| e["type"] == "TOOL_CALL_RESULT"));
    assert_eq!(went_on.last().unwrap()["type"], "RUN_FINISHED");
    let kept = runs.run_log().thread(&thread).await.unwrap().unwrap();
    assert_eq!(kept.state, Some(json!({"theme": "dark"})));
    assert_eq!(kept.runs.len(), 2, "the answers continued the second run");
    // The same answers again (a client's retry): the continuation replayed, nothing run twice.
    let again = runs.continue_run(Some(alice), &run, approve).await.unwrap();
    assert!(matches!(again, Begun::Replayed { .. }), "{again:?}");
    assert_eq!(events(&runs, &again).await, went_on);
}

/// The events an agent sends until it waits (for its checkpoint, here): read from `rx`, counted
/// in `read`. Time is paused: a second passes only once every task waits.
async fn until_it_waits(
    rx: &mut agent_tower::transport::ChannelReceiver<agent_tower::agui::Event>,
    read: &mut u64,
) {
    let second = std::time::Duration::from_secs(1);
    while let Ok(Some(_)) = tokio::time::timeout(second, rx.next()).await {
        *read += 1;
    }
}

/// An agent acts on a step only once its run's log keeps it: while the log keeps nothing, the
/// step's call does not run and the model is not asked the next step; each goes on once the
/// log keeps what came before. A run continued after a crash starts from the step it was in.
#[tokio::test(start_paused = true)]
async fn a_step_acts_only_once_the_log_keeps_what_decided_it() {
    use agent_tower::{
        context::Checkpoint,
        test_util::{MockItem, MockModel},
        tool::{ToolCall, ToolOutput, ToolSpec},
        transport::Channel,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tower::{ServiceExt, service_fn};

    let model = MockModel::new([
        MockItem::turn_calling("c1", "add", r#"{"a": 1, "b": 2}"#),
        vec![MockItem::text("3"), MockItem::stop()],
    ]);
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = ran.clone();
    let add = service_fn(move |_: ToolCall| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, std::convert::Infallible>(ToolOutput::json(json!(3))) }
    });
    let tools = ToolRouter::new().route(ToolSpec::new("add", "Adds."), add);
    let agui = AguiLayer::new();
    let agent = agui.layer(
        Agent::new(agui.layer(model.clone()), agui.layer(tools.clone())).tool_specs(tools.specs()),
    );
    let (events, mut rx) = Channel::bounded(64);
    let (keeping, kept) = tokio::sync::watch::channel(0);
    let mut req = RunRequest::new(vec![Message::user("add 1 and 2")]);
    req.run
        .extensions
        .insert(Checkpoint::new(events.sent_count(), kept));
    req.run.sinks.insert(events);
    let run = tokio::spawn(agent.oneshot(req));

    let mut read = 0;
    until_it_waits(&mut rx, &mut read).await;
    assert_eq!(model.requests().len(), 1);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "the call waits for its step to be kept"
    );

    keeping.send_replace(read);
    until_it_waits(&mut rx, &mut read).await;
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(
        model.requests().len(),
        1,
        "the next step waits for the call's result to be kept"
    );

    keeping.send_replace(read);
    until_it_waits(&mut rx, &mut read).await;
    assert_eq!(model.requests().len(), 2);
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome.messages.last().unwrap().text(), "3");
}
