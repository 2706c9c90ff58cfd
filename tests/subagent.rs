//! Agents as tools: a sub-agent's run as the parent's client sees it (checked by the official
//! AG-UI client's schemas and verifier), nested sub-agents, cancellation, the shared turn
//! budget, an interrupt inside a sub-agent answered through its parent (in-process, and by
//! the official client on two instances of a durable server), and the sub-agent's transcript
//! kept in the thread where its client was shown it.

use crate::support;
use crate::support::lead;
use crate::support::stores;

use std::{convert::Infallible, num::NonZeroU32, time::Duration};

use agent_tower::{
    BoxError,
    agui::Event,
    message::Message,
    model::{ModelEvent, ModelRequest},
    permission::{Action, Decision, InterruptApprover, Policy, Resolutions},
    run::{RunRequest, StopReason},
    stack::Stack,
    subagent::AgentTool,
    test_util::{MockItem, MockModel},
    tool::{ToolOutput, ToolRouter, ToolSpec},
    transport::Channel,
};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;
use tower::{ServiceExt, service_fn};

/// A model turn calling `tool` with `task`.
fn delegate(id: &str, tool: &str, task: &str) -> Vec<MockItem> {
    let arguments = serde_json::json!({ "task": task }).to_string();
    MockItem::turn_calling(id, tool, &arguments)
}

fn answer(text: &str) -> Vec<MockItem> {
    vec![MockItem::text(text), MockItem::stop()]
}

/// The events of a run of `agent`, as JSON.
async fn events_of<A>(agent: A, text: &str) -> Vec<Value>
where
    A: tower::Service<RunRequest, Response = agent_tower::run::RunOutcome>,
    A::Error: std::fmt::Debug,
{
    let (tx, rx) = Channel::<Event>::bounded(256);
    let mut req = RunRequest::new(vec![Message::user(text)]);
    req.run.sinks.insert(tx);
    let (outcome, events) = tokio::join!(agent.oneshot(req), rx.collect::<Vec<_>>());
    outcome.unwrap();
    events
        .iter()
        .map(|event| serde_json::to_value(event).unwrap())
        .collect()
}

#[tokio::test]
async fn a_sub_agents_run_reaches_the_client_as_a_sub_agent_run() {
    // lead → researcher → checker, each answering what it was told.
    let checker = Stack::new(MockModel::new([answer("Checked.")]), ToolRouter::new()).build();
    let researcher = Stack::new(
        MockModel::new([
            delegate("r1", "checker", "Check: Oslo has 700,000 people."),
            answer("Oslo has 700,000 people."),
        ]),
        ToolRouter::new().tool(AgentTool::new("checker", "Checks facts.", checker)),
    )
    .build();
    let lead = Stack::new(
        MockModel::new([
            delegate("l1", "researcher", "Population of Oslo?"),
            answer("About 700,000."),
        ]),
        ToolRouter::new().tool(AgentTool::new("researcher", "Finds facts.", researcher)),
    )
    .build();
    let events = events_of(lead, "How many live in Oslo?").await;

    let of_type =
        |kind: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == kind).collect() };
    assert_eq!(of_type("RUN_STARTED").len(), 1, "one run: the parent's");
    assert_eq!(of_type("RUN_FINISHED").len(), 1);
    assert!(of_type("MESSAGES_SNAPSHOT").len() <= 1);
    let started = of_type("SUBAGENT_STARTED");
    assert_eq!(started.len(), 2, "{events:#?}");
    let researcher_run = started[0]["subagentRunId"].as_str().unwrap();
    let checker_run = started[1]["subagentRunId"].as_str().unwrap();
    assert_eq!(started[0]["name"], "researcher");
    assert_eq!(started[0]["parentToolCallId"], "l1");
    assert!(started[0].get("parentSubagentRunId").is_none());
    assert_eq!(started[1]["name"], "checker");
    assert_eq!(started[1]["parentToolCallId"], "r1");
    assert_eq!(started[1]["parentSubagentRunId"], researcher_run);
    let finished = of_type("SUBAGENT_FINISHED");
    assert_eq!(finished.len(), 2);
    assert_eq!(
        finished[0]["subagentRunId"], checker_run,
        "the inner one ends first"
    );
    assert_eq!(finished[0]["outcome"]["type"], "success");

    // Each agent's text is attributed to its own run; the parent's to none.
    let texts = |owner: Option<&str>| -> String {
        events
            .iter()
            .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
            .filter(|e| e["subagentRunId"].as_str() == owner)
            .map(|e| e["delta"].as_str().unwrap())
            .collect()
    };
    assert_eq!(texts(Some(checker_run)), "Checked.");
    assert_eq!(texts(Some(researcher_run)), "Oslo has 700,000 people.");
    assert_eq!(texts(None), "About 700,000.");
    let result = of_type("TOOL_CALL_RESULT")
        .into_iter()
        .find(|e| e["toolCallId"] == "l1")
        .unwrap();
    assert_eq!(result["content"], "Oslo has 700,000 people.");
    assert!(result.get("subagentRunId").is_none());

    // The whole sequence passes the official schemas and the client's verifier.
    support::officially_verified(&events).await;
}

#[tokio::test]
async fn cancelling_the_parent_cancels_the_sub_agent() {
    // The sub-agent's model never answers; it says when it was called.
    let (called, mut was_called) = mpsc::unbounded_channel();
    let stalled = service_fn(move |_: ModelRequest| {
        let _ = called.send(());
        async {
            Ok::<_, Infallible>(futures_util::stream::pending::<
                Result<ModelEvent, Infallible>,
            >())
        }
    });
    let worker = Stack::new(stalled, ToolRouter::new()).build();
    let lead = Stack::new(
        MockModel::new([delegate("l1", "worker", "Work forever.")]),
        ToolRouter::new().tool(AgentTool::new("worker", "Works.", worker)),
    )
    .build();
    let req = RunRequest::new(vec![Message::user("go")]);
    let cancel = req.run.cancel.clone();
    let run = tokio::spawn(lead.oneshot(req));
    was_called.recv().await.unwrap();
    cancel.cancel();
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome.stop, StopReason::Cancelled);
}

#[tokio::test]
async fn a_sub_agents_turns_count_against_its_parents() {
    // The looper calls its tool in every turn; alone it would take all of its 16.
    let looping: Vec<Vec<MockItem>> = (0..16)
        .map(|i| MockItem::turn_calling(&format!("x{i}"), "noop", "{}"))
        .collect();
    let looper_model = MockModel::new(looping);
    let noop = service_fn(|_| async { Ok::<_, Infallible>(ToolOutput::text("done")) });
    let looper = Stack::new(
        looper_model.clone(),
        ToolRouter::new().route(ToolSpec::new("noop", "Does nothing."), noop),
    )
    .build();
    let lead_model = MockModel::new([delegate("l1", "looper", "Loop."), answer("never asked")]);
    let lead = Stack::new(
        lead_model.clone(),
        ToolRouter::new().tool(AgentTool::new("looper", "Loops.", looper)),
    )
    .max_turns(NonZeroU32::new(4).unwrap())
    .build();
    let outcome = lead
        .oneshot(RunRequest::new(vec![Message::user("go")]))
        .await
        .unwrap();
    assert_eq!(outcome.stop, StopReason::MaxTurns);
    assert_eq!(lead_model.requests().len(), 1, "the lead's one turn");
    assert_eq!(looper_model.requests().len(), 3, "the rest of the four");
}

#[tokio::test]
async fn what_a_sub_agent_used_is_in_the_usage_of_the_run_that_called_it() {
    let with_usage = |mut turn: Vec<MockItem>, input, output| {
        turn.insert(turn.len() - 1, MockItem::usage(input, output));
        turn
    };
    let researcher = Stack::new(
        MockModel::new([with_usage(answer("Oslo has 700,000 people."), 300, 40)]),
        ToolRouter::new(),
    )
    .build();
    let lead_model = MockModel::new([
        with_usage(delegate("l1", "researcher", "Population of Oslo?"), 100, 10),
        with_usage(answer("About 700,000."), 150, 5),
    ]);
    let lead = Stack::new(
        lead_model,
        ToolRouter::new().tool(AgentTool::new("researcher", "Finds facts.", researcher)),
    )
    .build();
    let events = events_of(lead, "How many live in Oslo?").await;
    let finished = events.last().unwrap();
    assert_eq!(finished["type"], "RUN_FINISHED", "{finished}");
    let usage = &finished["usage"][0];
    assert_eq!(
        (
            usage["inputTokens"].as_u64(),
            usage["outputTokens"].as_u64()
        ),
        (Some(100 + 300 + 150), Some(10 + 40 + 5)),
        "the lead's two steps and the researcher's one: {usage}"
    );
}

#[tokio::test]
async fn a_task_that_is_not_a_string_is_an_error_the_model_reads() -> Result<(), BoxError> {
    let nobody = Stack::new(MockModel::new([answer("unused")]), ToolRouter::new()).build();
    let tool = AgentTool::new("helper", "Helps.", nobody);
    let error = ToolRouter::new()
        .tool(tool)
        .oneshot(agent_tower::tool::ToolCall::new(
            "helper",
            serde_json::json!({"task": 3}),
        ))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`task` must be a non-empty string"),
        "{error}"
    );
    Ok(())
}

/// A lead whose `researcher` writes notes, each write asked about (the run stops at an
/// interrupt); the notes written, and both models, for the test to look at.
fn asking_researcher() -> (
    impl tower::Service<
        RunRequest,
        Response = agent_tower::run::RunOutcome,
        Error = BoxError,
        Future = impl Send,
    > + Clone,
    mpsc::UnboundedReceiver<Value>,
    MockModel,
    MockModel,
) {
    let (wrote, written) = mpsc::unbounded_channel();
    let write = service_fn(move |call: agent_tower::tool::ToolCall| {
        let _ = wrote.send(call.arguments);
        async { Ok::<_, Infallible>(ToolOutput::text("written")) }
    });
    let researcher_model = MockModel::new([
        MockItem::turn_calling("w1", "write", r#"{"note": "Oslo: 700,000"}"#),
        answer("Noted: Oslo has 700,000 people."),
    ]);
    let researcher = Stack::new(
        researcher_model.clone(),
        ToolRouter::new().route(ToolSpec::new("write", "Writes a note."), write),
    )
    .policy(Policy::new().rule("write", Action::Ask))
    .approver(InterruptApprover::new(Duration::from_secs(600)))
    .build();
    let lead_model = MockModel::new([
        delegate("l1", "researcher", "Note the population of Oslo."),
        answer("Done: noted."),
    ]);
    let lead = Stack::new(
        lead_model.clone(),
        ToolRouter::new().tool(AgentTool::new("researcher", "Takes notes.", researcher)),
    )
    .build();
    (lead, written, lead_model, researcher_model)
}

#[tokio::test]
async fn an_interrupt_in_a_sub_agent_stops_the_parent_and_its_answer_resumes_the_sub_agent()
-> Result<(), BoxError> {
    let (lead, mut written, lead_model, researcher_model) = asking_researcher();

    // The researcher's write waits for a person: the lead's run stops with that interrupt.
    let first = lead
        .clone()
        .oneshot(RunRequest::new(vec![Message::user(
            "Note Oslo's population.",
        )]))
        .await?;
    assert_eq!(first.stop, StopReason::Interrupted);
    assert_eq!(first.interrupts.len(), 1);
    assert_eq!(
        first.interrupts[0].tool_call_id.as_str(),
        "w1",
        "the sub-agent's call"
    );
    assert_eq!(first.interrupts[0].tool_name, "write");
    assert!(written.try_recv().is_err(), "nothing was written");
    let kept = first
        .messages
        .iter()
        .find_map(|m| match m {
            Message::Subagent {
                tool_call_id,
                messages,
                ..
            } => Some((tool_call_id.as_str(), messages.len())),
            _ => None,
        })
        .expect("the sub-agent's conversation is kept in the lead's");
    assert_eq!(kept, ("l1", 2), "its task and its call");

    // The answer, as a run that continues the conversation brings it.
    let mut resume = RunRequest::new(first.messages.clone());
    resume.run.extensions.insert(Resolutions::new(
        [("w1".into(), Decision::Approve)].into_iter().collect(),
    ));
    let second = lead.oneshot(resume).await?;
    assert_eq!(second.stop, StopReason::EndTurn, "{:?}", second.messages);
    assert_eq!(
        written.try_recv()?,
        serde_json::json!({"note": "Oslo: 700,000"})
    );
    assert!(written.try_recv().is_err(), "written once");
    assert_eq!(second.messages.last().unwrap().text(), "Done: noted.");
    // What the researcher said and did is kept once, whole, after the call's result: its
    // transcript.
    let roles: Vec<String> = second
        .messages
        .iter()
        .map(|m| format!("{:?}", m.role()))
        .collect();
    assert_eq!(
        roles,
        ["User", "Assistant", "Tool", "Subagent", "Assistant"],
        "{:?}",
        second.messages
    );
    let Message::Subagent { messages, .. } = &second.messages[3] else {
        unreachable!()
    };
    let transcript: Vec<String> = messages.iter().map(Message::text).collect();
    assert_eq!(
        transcript,
        [
            "Note the population of Oslo.",
            "",
            "written",
            "Noted: Oslo has 700,000 people."
        ]
    );

    // The researcher went on from its own conversation; the lead's model got its answer as the
    // call's result, and never saw the kept conversation.
    let researcher_asked = researcher_model.requests();
    assert_eq!(researcher_asked.len(), 2);
    let texts: Vec<String> = researcher_asked[1]
        .messages
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(texts, ["Note the population of Oslo.", "", "written"]);
    let lead_asked = lead_model.requests();
    assert_eq!(lead_asked.len(), 2);
    let last = lead_asked[1].messages.last().unwrap();
    assert_eq!(last.text(), "Noted: Oslo has 700,000 people.");
    assert!(lead_asked.iter().all(|req| {
        !req.messages
            .iter()
            .any(|m| matches!(m, Message::Subagent { .. }))
    }));
    Ok(())
}

/// The role, text and `subagentRunId` of each message of a `MESSAGES_SNAPSHOT`.
fn shown(snapshot: &Value) -> Vec<(String, String, Value)> {
    snapshot["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = m["content"].as_str().unwrap_or_default().to_owned();
            (
                m["role"].as_str().unwrap().to_owned(),
                text,
                m["subagentRunId"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_sub_agents_transcript_stays_in_the_thread_where_its_client_was_shown_it() {
    use agent_tower::{agui::RunAgentInput, agui::input, runs::Runs};
    let researcher = Stack::new(
        MockModel::new([answer("Oslo has 700,000 people.")]),
        ToolRouter::new(),
    )
    .build();
    let lead_model = MockModel::new([
        delegate("c1", "researcher", "Population of Oslo?"),
        answer("About 700,000."),
        answer("You are welcome."),
    ]);
    let lead = Stack::new(
        lead_model.clone(),
        ToolRouter::new().tool(AgentTool::new("researcher", "Finds facts.", researcher)),
    )
    .build();
    let runs = Runs::new(lead);
    let wire = |m: Message| input::Message::from_domain(&m).unwrap();
    let run = |id: &str, messages: Vec<input::Message>| {
        let input = RunAgentInput::new("t-oslo".into(), id.into(), messages);
        let runs = &runs;
        async move {
            let begun = runs.begin(input).await.unwrap();
            let log: Vec<Value> = runs
                .follow(begun.run_id().clone(), begun.from())
                .map(|e| serde_json::from_slice(e.json()).unwrap())
                .collect()
                .await;
            log
        }
    };
    let last_snapshot = |log: &[Value]| {
        log.iter()
            .rfind(|e| e["type"] == "MESSAGES_SNAPSHOT")
            .unwrap()
            .clone()
    };

    let first = run("r1", vec![wire(Message::user("How many live in Oslo?"))]).await;
    support::officially_verified(&first).await;
    // While the run streamed, the client was shown the researcher's answer under its run.
    let sub = first
        .iter()
        .find(|e| e["type"] == "SUBAGENT_STARTED")
        .unwrap()["subagentRunId"]
        .clone();
    let streamed = first
        .iter()
        .find(|e| e["type"] == "TEXT_MESSAGE_START" && e["subagentRunId"] == sub)
        .unwrap();
    // The run's last snapshot keeps it where the client put it, after the lead's call and its
    // result, before the lead's answer, under the same id.
    let snapshot = last_snapshot(&first);
    let null = Value::Null;
    let expected = |more: &[(&str, &str, &Value)]| {
        let mut all = vec![
            ("user", "How many live in Oslo?", &null),
            ("assistant", "", &null),
            ("tool", "Oslo has 700,000 people.", &null),
            ("assistant", "Oslo has 700,000 people.", &sub),
            ("assistant", "About 700,000.", &null),
        ];
        all.extend_from_slice(more);
        all.into_iter()
            .map(|(role, text, sub)| (role.to_owned(), text.to_owned(), sub.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(shown(&snapshot), expected(&[]));
    assert_eq!(snapshot["messages"][3]["id"], streamed["messageId"]);

    // The client's next turn sends all it holds, the researcher's message included: the lead's
    // model is not shown it (its result is the call's), and the thread keeps it where it was.
    let mut held: Vec<input::Message> =
        serde_json::from_value(snapshot["messages"].clone()).unwrap();
    held.push(wire(Message::user("Thanks!")));
    let second = run("r2", held).await;
    support::officially_verified(&second).await;
    assert_eq!(
        shown(&last_snapshot(&second)),
        expected(&[
            ("user", "Thanks!", &null),
            ("assistant", "You are welcome.", &null)
        ])
    );
    let asked = &lead_model.requests()[2];
    let texts: Vec<(String, String)> = asked
        .messages
        .iter()
        .map(|m| (format!("{:?}", m.role()), m.text()))
        .collect();
    let texts: Vec<(&str, &str)> = texts
        .iter()
        .map(|(r, t)| (r.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        texts,
        [
            ("User", "How many live in Oslo?"),
            ("Assistant", ""),
            ("Tool", "Oslo has 700,000 people."),
            ("Assistant", "About 700,000."),
            ("User", "Thanks!"),
        ]
    );
}

#[tokio::test]
async fn the_official_client_answers_a_sub_agents_interrupt_through_the_parent_on_another_instance()
{
    for (name, url) in stores::store_urls("subagent_interrupt").await {
        let (a, b) = (lead::server(&url).await, lead::server(&url).await);
        let output = support::node("agui-subagent-interrupt.mjs", &[&a, &b], None).await;
        assert!(
            output.contains("answered through its parent"),
            "{name}: {output}"
        );
    }
}

#[tokio::test]
async fn the_official_client_keeps_a_sub_agents_transcript_through_the_runs_end_a_restore_and_the_next_turn()
 {
    for (name, url) in stores::store_urls("subagent_transcript").await {
        let (a, b) = (lead::server(&url).await, lead::server(&url).await);
        let output = support::node("agui-subagent-transcript.mjs", &[&a, &b], None).await;
        assert!(
            output.contains("transcript was kept in the thread"),
            "{name}: {output}"
        );
    }
}

stores::postgresql_answers_test!();
