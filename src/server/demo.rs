//! The agent `agent-tower serve` runs.

use std::num::NonZeroU32;

use tower_layer::Layer;

use crate::{
    agent::Agent,
    agui::{Agui, AguiLayer, Event},
    map_error::{DefaultClassifier, Detail, MapError, MapErrorLayer},
    model::scripted::ScriptedModel,
    tool::{ToolRouter, demo::demo_tools},
    transport::Channel,
    truncate::{Truncate, TruncateLayer},
};

type Emit<S> = Agui<S, Channel<Event>>;
type Classify<S> = MapError<S, DefaultClassifier>;

/// The agent [`scripted_agent`] builds.
pub type ScriptedAgent =
    Emit<Classify<Agent<Emit<Classify<Truncate<ScriptedModel>>>, Emit<Truncate<ToolRouter>>>>>;

/// The agent `agent-tower serve` runs: the [scripted model](crate::model::scripted) and the
/// [demo tools](crate::tool::demo), stacked as a real deployment would be:
///
/// ```text
/// agent:  AguiLayer > MapErrorLayer > Agent
/// model:  AguiLayer > MapErrorLayer > TruncateLayer > ScriptedModel
/// tools:  AguiLayer > TruncateLayer > ToolRouter (get_time, add)
/// ```
///
/// `detail` is how much of an error clients see in `RUN_ERROR`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use agent_tower::{agui::Event, map_error::Detail, message::Message, run::RunRequest};
/// use agent_tower::{server::scripted_agent, transport::Channel};
/// use futures_util::StreamExt;
/// use std::num::NonZeroU32;
/// use tower::ServiceExt;
///
/// let (tx, rx) = Channel::<Event>::bounded(64);
/// let mut req = RunRequest::new(vec![Message::user(r#"add {"a": 1, "b": 2}"#)]);
/// req.run.extensions.insert(tx);
/// let agent = scripted_agent(NonZeroU32::new(16).unwrap(), Detail::Message);
/// let outcome = agent.oneshot(req).await.unwrap();
/// assert!(outcome.messages.last().unwrap().text().contains("returned 3"));
/// assert!(rx.collect::<Vec<_>>().await.iter().any(|e| matches!(e, Event::ToolCallResult(_))));
/// # }
/// ```
#[must_use]
pub fn scripted_agent(max_turns: NonZeroU32, detail: Detail) -> ScriptedAgent {
    let agui = AguiLayer::new();
    let errors = MapErrorLayer::new().detail(detail);
    let truncate = TruncateLayer::new();
    let tools = demo_tools();
    let model = agui.layer(errors.layer(truncate.layer(ScriptedModel::new())));
    let agent = Agent::new(model, agui.layer(truncate.layer(tools.clone())))
        .tool_specs(tools.specs())
        .max_turns(max_turns);
    agui.layer(errors.layer(agent))
}
