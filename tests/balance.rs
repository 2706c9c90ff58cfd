//! Property: whatever the fragmentation of the model's deltas and wherever a failure strikes, the
//! AG-UI sequence of a run is balanced and ends with exactly one terminal event.

use std::convert::Infallible;

use agent_tower::{
    agent::Agent,
    agui::{AguiLayer, Event},
    message::Message,
    model::ModelErrorKind,
    run::RunRequest,
    test_util::{MockItem, MockModel, Recording, verify},
    tool::{ToolCall, ToolOutput, ToolRouter, ToolSpec},
};
use proptest::prelude::*;
use tower::{Layer, ServiceExt, service_fn};

#[derive(Debug, Clone, Copy)]
enum Failure {
    None,
    /// The stream fails before item `n`.
    Error(usize),
    /// The stream hangs before item `n`; the run is then dropped.
    Drop(usize),
    /// The stream hangs before item `n`; the run's token is then cancelled.
    Cancel(usize),
}

/// Splits `text` at the given byte offsets (moved to char boundaries).
fn fragment(text: &str, cuts: &[usize]) -> Vec<String> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|&cut| {
            let mut at = cut % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at += 1;
            }
            at
        })
        .collect();
    points.push(0);
    points.push(text.len());
    points.sort_unstable();
    points.dedup();
    points
        .windows(2)
        .map(|w| text[w[0]..w[1]].to_owned())
        .collect()
}

#[derive(Debug, Clone)]
struct Scenario {
    reasoning: Vec<String>,
    text: Vec<String>,
    tools: Vec<(Vec<String>, bool)>,
    failure: Failure,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let fragmented = |max: usize| {
        ("\\PC{0,24}", prop::collection::vec(0..64usize, 0..max))
            .prop_map(|(text, cuts)| fragment(&text, &cuts))
    };
    let tool = (fragmented(4), any::<bool>());
    (
        fragmented(3),
        fragmented(6),
        prop::collection::vec(tool, 0..3),
        prop_oneof![
            Just(Failure::None),
            (0..20usize).prop_map(Failure::Error),
            (0..20usize).prop_map(Failure::Drop),
            (0..20usize).prop_map(Failure::Cancel),
        ],
    )
        .prop_map(|(reasoning, text, tools, failure)| Scenario {
            reasoning,
            text,
            tools,
            failure,
        })
}

fn items(s: &Scenario) -> Vec<MockItem> {
    let mut items: Vec<MockItem> = s.reasoning.iter().map(|r| MockItem::reasoning(r)).collect();
    items.extend(s.text.iter().map(|t| MockItem::text(t)));
    for (i, (args, ends)) in s.tools.iter().enumerate() {
        let id = format!("call_{i}");
        items.push(MockItem::tool_start(&id, "echo"));
        items.extend(args.iter().map(|a| MockItem::tool_args(&id, a)));
        if *ends {
            items.push(MockItem::tool_end(&id));
        }
    }
    items.push(if s.tools.is_empty() {
        MockItem::stop()
    } else {
        MockItem::tool_calls()
    });
    match s.failure {
        Failure::None => {}
        Failure::Error(n) => items.insert(
            n.min(items.len()),
            MockItem::error(ModelErrorKind::Transport, "connection reset"),
        ),
        Failure::Drop(n) | Failure::Cancel(n) => {
            items.insert(n.min(items.len()), MockItem::Pending)
        }
    }
    items
}

fn run(s: &Scenario) -> Vec<Event> {
    let model = MockModel::new([items(s), vec![MockItem::text("done"), MockItem::stop()]]);
    let echo = service_fn(|call: ToolCall| async move {
        Ok::<_, Infallible>(ToolOutput::json(call.arguments))
    });
    let tools = ToolRouter::new().route(ToolSpec::new("echo", "echo"), echo);
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let agent = agui.layer(Agent::new(agui.layer(model), agui.layer(tools)));
    let req = RunRequest::new(vec![Message::user("go")]);
    let cancel = req.run.cancel.clone();
    let mut fut = tokio_test::task::spawn(agent.oneshot(req));
    match fut.poll() {
        std::task::Poll::Ready(_) => {}
        std::task::Poll::Pending => match s.failure {
            Failure::Cancel(_) => {
                cancel.cancel();
                assert!(fut.poll().is_ready(), "a cancelled run ends");
            }
            _ => drop(fut),
        },
    }
    ui.events()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_run_is_balanced_and_ends_once(s in scenario()) {
        let events = run(&s);
        if let Err(violation) = verify(&events) {
            prop_assert!(false, "{violation}\n{s:?}\n{events:#?}");
        }
        let terminals = events
            .iter()
            .filter(|e| matches!(e, Event::RunFinished(_) | Event::RunError(_)))
            .count();
        prop_assert_eq!(terminals, 1);
        prop_assert!(matches!(events.last(), Some(Event::RunFinished(_) | Event::RunError(_))));

        // Every message the UI saw streamed is in the final snapshot, under the same id.
        if let Some(Event::MessagesSnapshot(snapshot)) =
            events.iter().rev().find(|e| matches!(e, Event::MessagesSnapshot(_)))
        {
            let ids: Vec<&str> = snapshot.messages.iter().map(|m| m.id().as_str()).collect();
            for event in &events {
                let streamed = match event {
                    Event::TextMessageStart(e) => e.message_id.as_str(),
                    Event::ReasoningMessageStart(e) => e.message_id.as_str(),
                    _ => continue,
                };
                prop_assert!(ids.contains(&streamed), "{streamed} missing from {ids:?}");
            }
        }

        // Text reaches the UI unchanged: the first step's deltas concatenate to a prefix of what
        // the model said (all of it when nothing failed).
        let shown: String = events
            .iter()
            .take_while(|e| !matches!(e, Event::StepFinished(_)))
            .filter_map(|e| match e {
                Event::TextMessageContent(c) => Some(c.delta.as_str()),
                _ => None,
            })
            .collect();
        let said: String = s.text.concat();
        prop_assert!(said.starts_with(&shown), "{shown:?} is not a prefix of {said:?}");
        if matches!(s.failure, Failure::None) {
            prop_assert_eq!(shown, said);
        }
    }
}
