//! The agent `agent-tower serve` runs.

use std::{num::NonZeroU32, time::Duration};

use tower_layer::Layer;

use crate::{
    agent::Agent,
    agui::{Agui, AguiLayer, Event},
    map_error::{DefaultClassifier, Detail, MapError, MapErrorLayer},
    metrics::{Counted, MetricsLayer},
    model::scripted::ScriptedModel,
    permission::{Action, AutoApprove, InterruptApprover, Permission, PermissionLayer, Policy},
    post_process::{Citations, PostProcess, PostProcessLayer},
    state::{State, StateLayer},
    tool::{ToolRouter, demo::demo_tools},
    trace::{Trace, TraceLayer},
    transport::Channel,
    truncate::{Truncate, TruncateLayer},
};

type Emit<S> = Agui<S, Channel<Event>>;
type Classify<S> = MapError<S, DefaultClassifier>;

/// The stack `agent-tower serve` runs, around the model `M` and tools asking approval through
/// `A`; see [`scripted_agent`] and [`product_agent`].
pub type ProductAgent<M, A = AutoApprove> = Trace<
    Emit<
        Classify<
            Agent<
                Emit<Classify<PostProcess<State<Truncate<Trace<M>>>, Citations>>>,
                Emit<Permission<State<Truncate<Counted<Trace<ToolRouter>>>>, A>>,
            >,
        >,
    >,
>;

/// The agent [`scripted_agent`] builds (with `A` = [`AutoApprove`]), or
/// [`interrupting_agent`] (with `A` = [`InterruptApprover`]).
pub type ScriptedAgent<A = AutoApprove> = ProductAgent<ScriptedModel, A>;

/// The agent `agent-tower serve` runs: the [scripted model](crate::model::scripted) and the
/// [demo tools](crate::tool::demo), stacked as a real deployment would be:
///
/// ```text
/// agent:  TraceLayer > AguiLayer > MapErrorLayer > Agent
/// model:  AguiLayer > MapErrorLayer > PostProcessLayer > StateLayer > TruncateLayer > TraceLayer > ScriptedModel
/// tools:  AguiLayer > PermissionLayer > StateLayer > TruncateLayer > MetricsLayer > TraceLayer > ToolRouter (the demo tools)
/// ```
///
/// `write_document` shows predictive state: its `document` argument is mirrored into the state key
/// `document` (a CUSTOM `PredictState` before the call, the state set as soon as the arguments are
/// complete). Answers citing `[n]` get their citations resolved against the run's context entries
/// by [`Citations`], under the state key `citations`.
///
/// `detail` is how much of an error clients see in `RUN_ERROR`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use agent_tower::{agui::Event, map_error::Detail, message::Message, run::RunRequest};
/// use agent_tower::{demo::serve::scripted_agent, transport::Channel};
/// use futures_util::StreamExt;
/// use std::{num::NonZeroU32, time::Duration};
/// use tower::ServiceExt;
///
/// let (tx, rx) = Channel::<Event>::bounded(64);
/// let mut req = RunRequest::new(vec![Message::user(r#"add {"a": 1, "b": 2}"#)]);
/// req.run.sinks.insert(tx);
/// let agent = scripted_agent(NonZeroU32::new(16).unwrap(), Detail::Message);
/// let outcome = agent.oneshot(req).await.unwrap();
/// assert!(outcome.messages.last().unwrap().text().contains("returned 3"));
/// assert!(rx.collect::<Vec<_>>().await.iter().any(|e| matches!(e, Event::ToolCallResult(_))));
/// # }
/// ```
#[must_use]
pub fn scripted_agent(max_turns: NonZeroU32, detail: Detail) -> ScriptedAgent {
    product_agent(
        ScriptedModel::new(),
        demo_tools(),
        max_turns,
        detail,
        Policy::new(),
        AutoApprove,
        TraceLayer::new().model("scripted"),
    )
}

/// The same agent, but a call of `remember` stops the run at an interrupt (AG-UI
/// human in the loop) that can be resumed for `interrupt_ttl`: what `agent-tower serve` runs
/// with a run store.
#[must_use]
pub fn interrupting_agent(
    max_turns: NonZeroU32,
    detail: Detail,
    interrupt_ttl: Duration,
) -> ScriptedAgent<InterruptApprover> {
    product_agent(
        ScriptedModel::new(),
        demo_tools(),
        max_turns,
        detail,
        Policy::new().rule("remember", Action::Ask),
        InterruptApprover::new(interrupt_ttl),
        TraceLayer::new().model("scripted"),
    )
}

/// The stack of [`scripted_agent`] around any `model` and `tools` (the demo tools, an MCP
/// server's, yours): what `agent-tower serve --model openai:…` runs. `policy` learns the tools'
/// kinds; a call it asks about goes to `approver`. `trace` names the spans of the run, the model
/// and the tools.
pub fn product_agent<M, A: Clone>(
    model: M,
    tools: ToolRouter,
    max_turns: NonZeroU32,
    detail: Detail,
    policy: Policy,
    approver: A,
    trace: TraceLayer,
) -> ProductAgent<M, A> {
    let agui = AguiLayer::new().predict_state("write_document", "document", "document");
    let errors = MapErrorLayer::new().detail(detail);
    let truncate = TruncateLayer::new();
    let state = StateLayer::new().from_args("write_document", |args, state| {
        if !state.is_object() {
            *state = serde_json::json!({});
        }
        state["document"] = args["document"].clone();
    });
    let citations = PostProcessLayer::new("citations", Citations::new())
        .expect("`citations` is a valid state key")
        .when(Citations::cites);
    let model =
        agui.layer(errors.layer(citations.layer(state.layer(truncate.layer(trace.layer(model))))));
    let permission = PermissionLayer::new(policy.tools(&tools.specs()), approver);
    let counted = MetricsLayer::new();
    let tools_stack = agui.layer(
        permission.layer(state.layer(truncate.layer(counted.layer(trace.layer(tools.clone()))))),
    );
    let agent = Agent::new(model, tools_stack)
        .tool_specs(tools.specs())
        .max_turns(max_turns);
    trace.layer(agui.layer(errors.layer(agent)))
}
