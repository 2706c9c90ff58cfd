//! The agent `agent-tower acp` runs.

use std::num::NonZeroU32;

use tower_layer::Layer;

use crate::{
    acp::{Acp, AcpApprover, AcpLayer, Notifier},
    agent::Agent,
    map_error::{DefaultClassifier, Detail, MapError, MapErrorLayer},
    model::scripted::ScriptedModel,
    permission::{Permission, PermissionLayer, Policy},
    tool::{ToolRouter, ToolSpec, demo::demo_tools},
    trace::{Trace, TraceLayer},
};

/// The stack `agent-tower acp` runs around the model `M`; see [`scripted_agent`] and
/// [`product_agent`].
pub type ProductAgent<M> = Trace<
    MapError<
        Agent<
            Acp<MapError<Trace<M>, DefaultClassifier>, Notifier>,
            Acp<Permission<Trace<ToolRouter>, AcpApprover>, Notifier>,
        >,
        DefaultClassifier,
    >,
>;

/// The agent [`scripted_agent`] builds.
pub type ScriptedAgent = ProductAgent<ScriptedModel>;

/// The agent `agent-tower acp` runs: the [scripted model](crate::model::scripted) and the
/// [demo tools](crate::tool::demo), stacked as an editor agent would be:
///
/// ```text
/// agent:  TraceLayer > MapErrorLayer > Agent
/// model:  AcpLayer > MapErrorLayer > TraceLayer > ScriptedModel
/// tools:  AcpLayer > PermissionLayer (asks the editor) > TraceLayer > ToolRouter (the demo tools)
/// ```
///
/// The permission policy asks about tools that write (`write_document`, `remember`) in the
/// session mode `ask`, lets them run in `auto` and refuses them in `read-only`. Returns the agent,
/// the approver to give to [`AcpAgent::approver`](crate::acp::AcpAgent::approver), and the tools'
/// specs.
#[must_use]
pub fn scripted_agent(
    max_turns: NonZeroU32,
    detail: Detail,
) -> (ScriptedAgent, AcpApprover, Vec<ToolSpec>) {
    product_agent(
        ScriptedModel::new(),
        demo_tools(),
        max_turns,
        detail,
        TraceLayer::new().model("scripted"),
        Policy::new(),
    )
}

/// The stack of [`scripted_agent`] around any `model` and `tools`: what `agent-tower acp
/// --model openai:…` runs. `trace` names the spans of the turns (runs), the model and the tools;
/// `policy` says what is asked about, in the session's mode (the tools' kinds are added to it).
pub fn product_agent<M>(
    model: M,
    tools: ToolRouter,
    max_turns: NonZeroU32,
    detail: Detail,
    trace: TraceLayer,
    policy: Policy,
) -> (ProductAgent<M>, AcpApprover, Vec<ToolSpec>) {
    let specs = tools.specs();
    let approver = AcpApprover::new();
    let acp = AcpLayer::new().tools(&specs);
    let errors = MapErrorLayer::new().detail(detail);
    let permission = PermissionLayer::new(policy.tools(&specs), approver.clone());
    let agent = Agent::new(
        acp.layer(errors.layer(trace.layer(model))),
        acp.layer(permission.layer(trace.layer(tools))),
    )
    .tool_specs(specs.clone())
    .max_turns(max_turns);
    (trace.layer(errors.layer(agent)), approver, specs)
}
