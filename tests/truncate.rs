//! TruncateLayer inside AguiLayer: pieces within the limit, text intact, events balanced, the
//! agent's result whole.

use std::convert::Infallible;

use agent_tower::{
    agent::Agent,
    agui::{AguiLayer, Event},
    message::Message,
    run::RunRequest,
    test_util::{MockItem, MockModel, Recording, verify},
    tool::{ToolCall, ToolOutput, ToolRouter, ToolSpec},
    truncate::TruncateLayer,
};
use proptest::prelude::*;
use tower::{Layer, ServiceBuilder, ServiceExt, service_fn};

fn run(text: &str, args: &str, result: &str, max_delta: usize) -> (Vec<Event>, Vec<Message>) {
    let mut first = vec![MockItem::text(text)];
    first.extend(MockItem::tool_call("c1", "big", args));
    first.push(MockItem::tool_calls());
    let model = MockModel::new([first, vec![MockItem::text("done"), MockItem::stop()]]);
    let result = result.to_owned();
    let big = service_fn(move |_: ToolCall| {
        let result = result.clone();
        async move { Ok::<_, Infallible>(ToolOutput::text(result)) }
    });
    let ui = Recording::new();
    let agui = AguiLayer::new().transport(ui.clone());
    let truncate = TruncateLayer::new()
        .max_delta(max_delta)
        .unwrap()
        .max_ui_payload(64)
        .unwrap();
    let model = ServiceBuilder::new()
        .layer(agui.clone())
        .layer(truncate.clone())
        .service(model);
    let tools = ServiceBuilder::new()
        .layer(agui.clone())
        .layer(truncate)
        .service(ToolRouter::new().route(ToolSpec::new("big", "big"), big));
    let agent = agui.layer(Agent::new(model, tools));
    let outcome = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(agent.oneshot(RunRequest::new(vec![Message::user("go")])))
        .unwrap();
    (ui.events(), outcome.messages)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn split_deltas_keep_text_and_balance(
        text in "\\PC{1,120}",
        args in "\\PC{0,80}",
        result in "\\PC{0,300}",
        max_delta in 4usize..24,
    ) {
        let args = serde_json::to_string(&args).unwrap(); // valid JSON arguments
        let (events, messages) = run(&text, &args, &result, max_delta);
        prop_assert!(verify(&events).is_ok(), "{:?}", verify(&events));

        let mut shown_text = String::new();
        let mut shown_args = String::new();
        for event in &events {
            let delta = match event {
                Event::TextMessageContent(c) if shown_text.len() < text.len() => {
                    shown_text.push_str(&c.delta);
                    &c.delta
                }
                Event::ToolCallArgs(a) => {
                    shown_args.push_str(&a.delta);
                    &a.delta
                }
                _ => continue,
            };
            prop_assert!(delta.len() <= max_delta || delta.chars().count() == 1, "{delta:?}");
        }
        prop_assert_eq!(&shown_text, &text);
        prop_assert_eq!(&shown_args, &args);

        // The UI's copy of the result is bounded; the model got all of it.
        let shown = events.iter().find_map(|e| match e {
            Event::ToolCallResult(r) => Some(serde_json::to_value(&r.content).unwrap()),
            _ => None,
        }).unwrap();
        prop_assert!(shown.as_str().unwrap().len() <= 64);
        let tool_message = messages.iter().find(|m| matches!(m, Message::Tool { .. })).unwrap();
        prop_assert_eq!(tool_message.text(), result);
    }
}
