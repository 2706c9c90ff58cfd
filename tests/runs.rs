//! The run engine used as a library, without HTTP: begin, follow, cancel; a caller that goes away
//! mid-begin; a bounded log that fills up; what the agent sent meanwhile written at once.

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

async fn events<A>(runs: &Runs<A>, begun: &Begun) -> Vec<Value> {
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
