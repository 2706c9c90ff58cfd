//! PermissionLayer inside a real run: decisions, batching, policies, readiness, cancellation.

use std::{convert::Infallible, time::Duration};

use agent_tower::{
    BoxError,
    agent::Agent,
    agui::{AguiLayer, Event, event::RunFinishedOutcome},
    message::Message,
    permission::{
        Action, Approval, Approvals, ChannelApprover, Decision, Decisions, Mode, PermissionLayer,
        Policy,
    },
    run::{RunOutcome, RunRequest, StopReason},
    test_util::{MockItem, MockModel, Recording, verify},
    tool::{ToolCall, ToolKind, ToolOutput, ToolRouter, ToolSpec},
};
use serde_json::json;
use tokio::sync::mpsc;
use tower::{Layer, ServiceBuilder, ServiceExt, service_fn};

/// `echo` returns its arguments, `delete_file` says what it deleted, `read_file` reads; each call
/// is reported on the channel as it runs.
fn tools(ran: mpsc::UnboundedSender<String>) -> ToolRouter {
    let report = move |name: &'static str| {
        let ran = ran.clone();
        service_fn(move |call: ToolCall| {
            let _ = ran.send(format!("{name} {}", call.arguments));
            async move { Ok::<_, Infallible>(ToolOutput::json(call.arguments)) }
        })
    };
    ToolRouter::new()
        .route(
            ToolSpec::new("delete_file", "Deletes.").kind(ToolKind::Delete),
            report("delete_file"),
        )
        .route(
            ToolSpec::new("read_file", "Reads.").kind(ToolKind::Read),
            report("read_file"),
        )
        .route(
            ToolSpec::new("write_file", "Writes.").kind(ToolKind::Edit),
            report("write_file"),
        )
}

/// A model that calls the given tools in its first turn and then says "done".
fn model(calls: &[(&str, &str, &str)]) -> MockModel {
    let mut first = Vec::new();
    for (id, name, args) in calls {
        first.extend(MockItem::tool_call(id, name, args));
    }
    first.push(MockItem::tool_calls());
    MockModel::new([first, vec![MockItem::text("done"), MockItem::stop()]])
}

struct Harness {
    run: tokio::task::JoinHandle<Result<RunOutcome, BoxError>>,
    approvals: Approvals,
    ran: mpsc::UnboundedReceiver<String>,
    ui: Recording<Event>,
    model: MockModel,
    cancel: tokio_util::sync::CancellationToken,
}

fn start(policy: Policy, model: MockModel, concurrency: Option<usize>) -> Harness {
    let (tx, ran) = mpsc::unbounded_channel();
    let (approver, approvals) = ChannelApprover::new(8);
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let router = tools(tx);
    let policy = policy.tools(&router.specs());
    let tools = ServiceBuilder::new()
        .layer(agui.clone())
        .layer(PermissionLayer::new(policy, approver))
        .option_layer(concurrency.map(tower::limit::ConcurrencyLimitLayer::new))
        .service(router);
    let agent = agui.layer(Agent::new(agui.layer(model.clone()), tools));
    let req = RunRequest::new(vec![Message::user("go")]);
    let cancel = req.run.cancel.clone();
    Harness {
        run: tokio::spawn(agent.oneshot(req)),
        approvals,
        ran,
        ui,
        model,
        cancel,
    }
}

impl Harness {
    async fn approval(&mut self) -> Approval {
        self.approvals.recv().await.expect("a permission request")
    }

    /// Waits for the run; returns its outcome and events, and checks what is left: the tools
    /// that ran after the last `ran.recv()` and the requests nobody took.
    async fn finish(mut self) -> Finished {
        let outcome = (&mut self.run).await.unwrap().unwrap();
        let events = self.ui.events();
        verify(&events).unwrap();
        // The run is over and its approver dropped: the channel ends.
        let untaken = std::iter::from_fn(|| self.approvals_try()).count();
        let mut more = Vec::new();
        while let Ok(ran) = self.ran.try_recv() {
            more.push(ran);
        }
        Finished {
            outcome,
            events,
            model: self.model,
            more_runs: more,
            untaken_requests: untaken,
        }
    }

    fn approvals_try(&mut self) -> Option<Approval> {
        futures_util::FutureExt::now_or_never(self.approvals.recv()).flatten()
    }
}

struct Finished {
    outcome: RunOutcome,
    events: Vec<Event>,
    model: MockModel,
    more_runs: Vec<String>,
    untaken_requests: usize,
}

impl Finished {
    fn nothing_else(&self) {
        assert!(
            self.more_runs.is_empty(),
            "unexpected tool runs: {:?}",
            self.more_runs
        );
        assert_eq!(self.untaken_requests, 0, "unexpected permission requests");
    }
}

fn result_of<'a>(events: &'a [Event], call: &str) -> &'a agent_tower::agui::event::ToolCallResult {
    events
        .iter()
        .find_map(|e| match e {
            Event::ToolCallResult(r) if r.tool_call_id == call => Some(r),
            _ => None,
        })
        .expect("a TOOL_CALL_RESULT")
}

fn asks_deletes() -> Policy {
    Policy::new().rule("delete_*", Action::Ask)
}

#[tokio::test]
async fn approve_runs_the_call() {
    let mut h = start(
        asks_deletes(),
        model(&[("c1", "delete_file", r#"{"path":"a"}"#)]),
        None,
    );
    let approval = h.approval().await;
    assert_eq!(approval.request.calls.len(), 1);
    assert_eq!(approval.request.calls[0].kind, ToolKind::Delete);
    assert!(
        h.ran.try_recv().is_err(),
        "nothing runs before the decision"
    );
    approval.decide(Decisions::all(Decision::Approve)).unwrap();
    assert_eq!(h.ran.recv().await.unwrap(), r#"delete_file {"path":"a"}"#);
    let done = h.finish().await;
    done.nothing_else();
    assert_eq!(done.outcome.stop, StopReason::EndTurn);
    assert_eq!(
        serde_json::to_value(&result_of(&done.events, "c1").content).unwrap(),
        json!(r#"{"path":"a"}"#)
    );
}

#[tokio::test]
async fn edit_runs_the_call_with_the_new_arguments() {
    let mut h = start(
        asks_deletes(),
        model(&[("c1", "delete_file", r#"{"path":"/"}"#)]),
        None,
    );
    h.approval()
        .await
        .decide(Decisions::all(Decision::Edit(json!({"path": "/tmp/x"}))))
        .unwrap();
    assert_eq!(
        h.ran.recv().await.unwrap(),
        r#"delete_file {"path":"/tmp/x"}"#
    );
    h.finish().await.nothing_else();
}

#[tokio::test]
async fn reject_gives_the_model_the_feedback() {
    let mut h = start(asks_deletes(), model(&[("c1", "delete_file", "{}")]), None);
    h.approval()
        .await
        .decide(Decisions::all(Decision::Reject("not that one".into())))
        .unwrap();
    let done = h.finish().await;
    done.nothing_else();
    assert_eq!(done.outcome.stop, StopReason::EndTurn);
    let shown = serde_json::to_string(&result_of(&done.events, "c1").content).unwrap();
    assert!(shown.contains("not that one"), "{shown}");
    let seen = done.model.requests()[1].messages.last().unwrap().clone();
    assert!(matches!(&seen, Message::Tool { is_error: true, .. }));
    assert!(seen.text().contains("not that one"));
}

#[tokio::test]
async fn cancel_ends_the_run_cancelled() {
    let mut h = start(asks_deletes(), model(&[("c1", "delete_file", "{}")]), None);
    h.approval()
        .await
        .decide(Decisions::all(Decision::Cancel))
        .unwrap();
    let done = h.finish().await;
    done.nothing_else();
    assert_eq!(done.outcome.stop, StopReason::Cancelled);
    let Some(Event::RunFinished(finished)) = done.events.last() else {
        unreachable!()
    };
    assert_eq!(finished.outcome, Some(RunFinishedOutcome::Cancelled));
    assert_eq!(
        done.model.requests().len(),
        1,
        "the model is not called again"
    );
}

#[tokio::test]
async fn the_calls_of_a_turn_are_decided_together() {
    let mut h = start(
        asks_deletes(),
        model(&[
            ("c1", "delete_file", r#"{"path":"a"}"#),
            ("c2", "read_file", r#"{"path":"b"}"#),
            ("c3", "delete_file", r#"{"path":"c"}"#),
        ]),
        None,
    );
    let approval = h.approval().await;
    let asked: Vec<_> = approval
        .request
        .calls
        .iter()
        .map(|c| c.id.to_string())
        .collect();
    assert_eq!(
        asked,
        ["c1", "c3"],
        "one request for the turn, allowed calls not in it"
    );
    // The allowed call ran without waiting for the decision.
    assert_eq!(h.ran.recv().await.unwrap(), r#"read_file {"path":"b"}"#);
    approval
        .decide(Decisions::all(Decision::Approve).with("c3", Decision::Reject("keep c".into())))
        .unwrap();
    assert_eq!(h.ran.recv().await.unwrap(), r#"delete_file {"path":"a"}"#);
    let done = h.finish().await;
    done.nothing_else(); // c3 was rejected: it never ran
    let shown = serde_json::to_string(&result_of(&done.events, "c3").content).unwrap();
    assert!(shown.contains("keep c"), "{shown}");
}

#[tokio::test]
async fn a_pending_decision_holds_no_concurrency_permit() {
    // One permit around the tools: if the waiting call held it, the allowed call would block.
    let mut h = start(
        asks_deletes(),
        model(&[("c1", "delete_file", "{}"), ("c2", "read_file", "{}")]),
        Some(1),
    );
    let approval = h.approval().await;
    assert_eq!(h.ran.recv().await.unwrap(), "read_file {}");
    approval.decide(Decisions::all(Decision::Approve)).unwrap();
    assert_eq!(h.ran.recv().await.unwrap(), "delete_file {}");
    h.finish().await.nothing_else();
}

#[tokio::test]
async fn a_cancelled_run_drops_its_pending_decision() {
    let mut h = start(asks_deletes(), model(&[("c1", "delete_file", "{}")]), None);
    let mut approval = h.approval().await;
    h.cancel.cancel();
    tokio::time::timeout(Duration::from_secs(1), approval.abandoned())
        .await
        .expect("the request is dropped at once");
    assert!(approval.decide(Decisions::all(Decision::Approve)).is_err());
    let done = h.finish().await;
    done.nothing_else();
    assert_eq!(done.outcome.stop, StopReason::Cancelled);
}

#[tokio::test]
async fn policies_deny_without_asking() {
    // Read-only: the writing tool is refused whatever the rules say; reading is allowed.
    let policy = Policy::new().rule("*", Action::Allow).mode(Mode::ReadOnly);
    let mut h = start(
        policy,
        model(&[("c1", "write_file", "{}"), ("c2", "read_file", "{}")]),
        None,
    );
    assert_eq!(h.ran.recv().await.unwrap(), "read_file {}");
    let done = h.finish().await;
    done.nothing_else(); // nobody was asked, the writing tool never ran
    assert_eq!(done.outcome.stop, StopReason::EndTurn);
    let shown = serde_json::to_string(&result_of(&done.events, "c1").content).unwrap();
    assert!(shown.contains("does not allow"), "{shown}");
}

/// The AG-UI way: nobody waits. Run 1 ends at the interrupt with the call's events out and no
/// result; run 2, carrying the decision, runs the same call (same id) and goes on.
#[tokio::test]
async fn an_interrupt_ends_the_run_and_the_next_run_applies_the_decision() {
    use agent_tower::permission::{InterruptApprover, Resolutions};

    let (tx, mut ran) = mpsc::unbounded_channel();
    let router = tools(tx);
    let policy = asks_deletes().tools(&router.specs());
    let agui_tools = |ui: &Recording<Event>| {
        let agui = AguiLayer::new().transport(ui.clone());
        ServiceBuilder::new()
            .layer(agui)
            .layer(PermissionLayer::new(
                policy.clone(),
                InterruptApprover::new(Duration::from_secs(60)),
            ))
            .service(router.clone())
    };
    let calls = [
        ("c1", "delete_file", r#"{"path":"a"}"#),
        ("c2", "read_file", r#"{"path":"b"}"#),
    ];
    let model = model(&calls);

    // Run 1: the read runs, the delete stops at an interrupt.
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let agent = agui.layer(Agent::new(agui.layer(model.clone()), agui_tools(&ui)));
    let first = agent
        .oneshot(RunRequest::new(vec![Message::user("go")]))
        .await
        .unwrap();
    assert_eq!(first.stop, StopReason::Interrupted);
    assert_eq!(first.interrupts.len(), 1);
    let interrupt = &first.interrupts[0];
    assert_eq!(
        (
            interrupt.tool_call_id.as_str(),
            interrupt.tool_name.as_str()
        ),
        ("c1", "delete_file")
    );
    assert_eq!(ran.try_recv().unwrap(), r#"read_file {"path":"b"}"#);
    assert!(ran.try_recv().is_err(), "the delete did not run");
    let events = ui.events();
    verify(&events).unwrap();
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, Event::ToolCallResult(r) if r.tool_call_id == "c1"))
    );
    let Some(Event::RunFinished(finished)) = events.last() else {
        panic!("RUN_FINISHED last: {:?}", events.last());
    };
    let Some(RunFinishedOutcome::Interrupt { interrupts }) = &finished.outcome else {
        panic!("an interrupt outcome: {:?}", finished.outcome);
    };
    assert_eq!(interrupts[0].id, interrupt.id.as_str());
    assert_eq!(interrupts[0].tool_call_id.as_ref().unwrap(), "c1");
    assert!(
        matches!(&events[events.len() - 2], Event::MessagesSnapshot(_)),
        "the snapshot a resume needs comes before the end"
    );

    // Run 2: the conversation so far, and the decision (edited arguments).
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let agent = agui.layer(Agent::new(agui.layer(model.clone()), agui_tools(&ui)));
    let mut req = RunRequest::new(first.messages.clone());
    let decisions = [("c1".into(), Decision::Edit(json!({"path": "z"})))].into();
    req.run.extensions.insert(Resolutions::new(decisions));
    let second = agent.oneshot(req).await.unwrap();
    assert_eq!(second.stop, StopReason::EndTurn);
    assert_eq!(ran.try_recv().unwrap(), r#"delete_file {"path":"z"}"#);
    assert!(ran.try_recv().is_err(), "the read did not run again");
    let events = ui.events();
    assert_eq!(
        serde_json::to_value(&result_of(&events, "c1").content).unwrap(),
        json!(r#"{"path":"z"}"#)
    );
    assert_eq!(
        model.requests().len(),
        2,
        "the model was asked once more, after the result"
    );
    assert_eq!(second.messages.last().unwrap().text(), "done");
}

/// "Always" answers decide the later calls of that tool in that thread, through the layer they
/// were given to: approved ones run, rejected ones get the feedback, and another thread is asked.
#[tokio::test]
async fn always_answers_decide_the_tools_later_calls_in_the_thread() {
    let (tx, mut ran) = mpsc::unbounded_channel();
    let (approver, mut approvals) = ChannelApprover::new(8);
    let router = tools(tx);
    let policy = Policy::new()
        .rule("delete_*", Action::Ask)
        .rule("write_*", Action::Ask)
        .tools(&router.specs());
    // One layer for every run, as in a server.
    let permission = PermissionLayer::new(policy, approver);
    let turn = |calls: &[(&str, &str)]| {
        let mut items = Vec::new();
        for (id, name) in calls {
            items.extend(MockItem::tool_call(id, name, "{}"));
        }
        items.push(MockItem::tool_calls());
        [items, vec![MockItem::text("done"), MockItem::stop()]]
    };
    let model = MockModel::new(
        [
            turn(&[("c1", "delete_file")]),
            turn(&[("c2", "delete_file"), ("c3", "write_file")]),
            turn(&[("c4", "delete_file"), ("c5", "write_file")]),
            turn(&[("c6", "delete_file")]),
        ]
        .into_iter()
        .flatten(),
    );
    let run = |thread: &str| {
        let ui = Recording::new();
        let agui = AguiLayer::new().transport(ui.clone());
        let tools = agui.layer(permission.layer(router.clone()));
        let agent = agui.layer(Agent::new(agui.layer(model.clone()), tools));
        let mut req = RunRequest::new(vec![Message::user("go")]);
        req.run.thread_id = thread.into();
        (tokio::spawn(agent.oneshot(req)), ui)
    };
    let asked = |approval: &Approval| -> Vec<String> {
        approval
            .request
            .calls
            .iter()
            .map(|c| c.id.to_string())
            .collect()
    };

    // Thread t: the delete is approved "always".
    let (first, _) = run("t");
    let approval = approvals.recv().await.unwrap();
    assert_eq!(asked(&approval), ["c1"]);
    approval
        .decide(Decisions::all(Decision::ApproveAlways))
        .unwrap();
    first.await.unwrap().unwrap();
    assert_eq!(ran.try_recv().unwrap(), "delete_file {}");

    // Thread t again: only the write is asked about, rejected "always"; the delete runs unasked,
    // with the turn's decisions.
    let (second, _) = run("t");
    let approval = approvals.recv().await.unwrap();
    assert_eq!(
        asked(&approval),
        ["c3"],
        "the remembered call is not asked about"
    );
    approval
        .decide(Decisions::all(Decision::RejectAlways("never write".into())))
        .unwrap();
    second.await.unwrap().unwrap();
    assert_eq!(ran.try_recv().unwrap(), "delete_file {}");
    assert!(ran.try_recv().is_err(), "the write did not run");

    // Thread t a third time: nobody is asked; the write gets the feedback given then.
    let (third, ui) = run("t");
    third.await.unwrap().unwrap();
    assert_eq!(ran.try_recv().unwrap(), "delete_file {}");
    assert!(ran.try_recv().is_err(), "the write did not run");
    let shown = serde_json::to_string(&result_of(&ui.events(), "c5").content).unwrap();
    assert!(shown.contains("never write"), "{shown}");
    assert!(
        futures_util::FutureExt::now_or_never(approvals.recv()).is_none(),
        "nobody was asked"
    );

    // Another thread is asked.
    let (fourth, _) = run("u");
    let approval = approvals.recv().await.unwrap();
    assert_eq!(asked(&approval), ["c6"]);
    approval.decide(Decisions::all(Decision::Approve)).unwrap();
    fourth.await.unwrap().unwrap();
    assert_eq!(ran.try_recv().unwrap(), "delete_file {}");
}

/// Retries every failed call up to twice: an error-handling layer a user may put anywhere.
#[derive(Clone)]
struct RetryFailures(usize);

impl<Res, E> tower::retry::Policy<ToolCall, Res, E> for RetryFailures {
    type Future = std::future::Ready<()>;

    fn retry(&mut self, _: &mut ToolCall, result: &mut Result<Res, E>) -> Option<Self::Future> {
        (result.is_err() && self.0 > 0).then(|| {
            self.0 -= 1;
            std::future::ready(())
        })
    }

    fn clone_request(&mut self, call: &ToolCall) -> Option<ToolCall> {
        Some(call.clone())
    }
}

/// "Ask a person" is the tool stack's answer, not a failure: a `MapErrorLayer` (which turns every
/// failure into a result the model reads) and a retry layer stacked outside the permission layer
/// leave the interrupt alone; the run stops at it, and the model is not asked again.
#[tokio::test]
async fn error_handling_layers_outside_the_permission_layer_keep_the_interrupt() {
    use agent_tower::{map_error::MapErrorLayer, permission::InterruptApprover};

    let (tx, mut ran) = mpsc::unbounded_channel();
    let router = tools(tx);
    let policy = asks_deletes().tools(&router.specs());
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let tools = ServiceBuilder::new()
        .layer(agui.clone())
        .layer(MapErrorLayer::new())
        .layer(tower::retry::RetryLayer::new(RetryFailures(2)))
        .layer(PermissionLayer::new(
            policy,
            InterruptApprover::new(Duration::from_secs(60)),
        ))
        .service(router);
    let model = model(&[("c1", "delete_file", r#"{"path":"a"}"#)]);
    let agent = agui.layer(Agent::new(agui.layer(model.clone()), tools));
    let outcome = agent
        .oneshot(RunRequest::new(vec![Message::user("go")]))
        .await
        .unwrap();

    assert_eq!(outcome.stop, StopReason::Interrupted);
    assert_eq!(outcome.interrupts.len(), 1);
    assert_eq!(outcome.interrupts[0].tool_call_id.as_str(), "c1");
    assert!(ran.try_recv().is_err(), "the delete did not run");
    assert_eq!(
        model.requests().len(),
        1,
        "the model was not told the call failed"
    );
    let events = ui.events();
    verify(&events).unwrap();
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, Event::ToolCallResult(r) if r.tool_call_id == "c1")),
        "no result for a call that did not run"
    );
}
