//! Typed tools in a run: the schema the model is offered, a bad argument answered with an error
//! the model reads (and the tool not run), an edited call checked again.

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
};

use agent_tower::{
    message::Message,
    permission::{Action, Decision, Decisions, PermissionRequest, Policy},
    run::RunRequest,
    stack::Stack,
    test_util::{MockItem, MockModel},
    tool::{
        ToolKind, ToolRouter,
        typed::{JsonSchema, TypedTool},
    },
};
use serde::Deserialize;
use tower::{ServiceExt, service_fn};

/// A city and a unit.
#[derive(Debug, Deserialize, JsonSchema)]
struct Place {
    /// The city.
    city: String,
    /// `c` or `f`.
    unit: Unit,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    C,
    F,
}

/// `weather`, recording the places it was asked about.
fn weather(asked: Arc<Mutex<Vec<String>>>) -> ToolRouter {
    let tool = TypedTool::from_fn("weather", "The weather in a city.", move |place: Place| {
        asked
            .lock()
            .unwrap()
            .push(format!("{} {:?}", place.city, place.unit));
        async move { Ok::<_, Infallible>(format!("sunny in {}", place.city)) }
    })
    .kind(ToolKind::Fetch);
    ToolRouter::new().tool(tool)
}

fn tool_text(message: &Message) -> Option<(String, bool)> {
    match message {
        Message::Tool {
            content, is_error, ..
        } => Some((agent_tower::message::parts_to_text(content), *is_error)),
        _ => None,
    }
}

#[tokio::test]
async fn the_model_is_offered_the_types_schema() {
    let model = MockModel::new([vec![MockItem::text("hi"), MockItem::stop()]]);
    let agent = Stack::new(model.clone(), weather(Arc::default())).build();
    agent
        .oneshot(RunRequest::new(vec![Message::user("hello")]))
        .await
        .unwrap();
    let offered = &model.requests()[0].tools;
    let weather = offered.iter().find(|t| t.name == "weather").unwrap();
    assert_eq!(
        weather.parameters["required"],
        serde_json::json!(["city", "unit"])
    );
    assert_eq!(
        weather.parameters["properties"]["unit"]["enum"],
        serde_json::json!(["c", "f"]),
        "{}",
        weather.parameters
    );
    assert_eq!(
        weather.parameters["properties"]["city"]["description"],
        "The city."
    );
}

#[tokio::test]
async fn a_bad_argument_is_an_error_the_model_reads_and_corrects() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let model = MockModel::new([
        MockItem::turn_calling("c1", "weather", r#"{"city": "Oslo", "unit": "kelvin"}"#),
        MockItem::turn_calling("c2", "weather", r#"{"city": "Oslo", "unit": "c"}"#),
        vec![MockItem::text("It is sunny."), MockItem::stop()],
    ]);
    let agent = Stack::new(model.clone(), weather(asked.clone())).build();
    let outcome = agent
        .oneshot(RunRequest::new(vec![Message::user("weather in Oslo?")]))
        .await
        .unwrap();

    assert_eq!(*asked.lock().unwrap(), ["Oslo C"], "the bad call never ran");
    let requests = model.requests();
    let (first, is_error) = requests[1]
        .messages
        .iter()
        .find_map(tool_text)
        .expect("the second model call sees the first result");
    assert!(is_error, "{first}");
    assert!(first.contains("`unit`"), "names the field: {first}");
    assert!(first.contains("invalid arguments"), "{first}");
    let second = requests[2]
        .messages
        .iter()
        .filter_map(tool_text)
        .nth(1)
        .unwrap();
    assert_eq!(second, ("sunny in Oslo".to_owned(), false));
    assert_eq!(outcome.messages.last().unwrap().text(), "It is sunny.");
}

#[tokio::test]
async fn arguments_a_person_edited_are_checked_again() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let model = MockModel::new([
        MockItem::turn_calling("c1", "weather", r#"{"city": "Oslo", "unit": "c"}"#),
        vec![MockItem::text("ok"), MockItem::stop()],
    ]);
    // The person edits the call into one the schema refuses: `city` is gone.
    let approver = service_fn(|request: PermissionRequest| async move {
        let call = request.calls[0].id.clone();
        Ok::<_, Infallible>(
            Decisions::all(Decision::Approve)
                .with(call, Decision::Edit(serde_json::json!({"unit": "f"}))),
        )
    });
    let agent = Stack::new(model.clone(), weather(asked.clone()))
        .policy(Policy::new().rule("weather", Action::Ask))
        .approver(approver)
        .build();
    agent
        .oneshot(RunRequest::new(vec![Message::user("weather?")]))
        .await
        .unwrap();

    assert!(
        asked.lock().unwrap().is_empty(),
        "the edited call never ran"
    );
    let (result, is_error) = model.requests()[1]
        .messages
        .iter()
        .find_map(tool_text)
        .unwrap();
    assert!(is_error);
    assert!(
        result.contains("\"city\" is a required property"),
        "{result}"
    );
}
