//! [`Stack`]: your model and your tools in, an agent out, with every layer in its place.
//!
//! The order of the layers matters, and one wrong order changes behaviour without a word (an
//! error mapped before the UI saw the step, a truncated result given to the model, a permission
//! asked after the UI announced the call as running). `Stack` writes it once:
//!
//! ```text
//! agent:  TraceLayer > AguiLayer > MapErrorLayer > Agent
//! model:  AguiLayer > AcpLayer > MapErrorLayer > (your model layer) > StateLayer > TruncateLayer > TraceLayer > your model
//! tools:  AguiLayer > AcpLayer > PermissionLayer > StateLayer > TruncateLayer > MetricsLayer > TraceLayer > your tools
//! ```
//!
//! `AcpLayer` is there with the feature `acp` (for editors), `MetricsLayer` with the feature
//! `metrics`; without them, their places are empty and the stack builds no less.
//!
//! The result, [`StackAgent`], is a plain `Service<RunRequest>`: give it to
//! [`AguiServer`](crate::server::AguiServer), to the run engine, to an `AcpAgent`
//! (`Stack::acp_agent` wires the approver and the tools' kinds), or call it yourself.
//!
//! # Every layer is there; each costs nothing it is not asked for
//!
//! - The protocol layers speak only to the runs that carry their sink: a run of an AG-UI client
//!   encodes no ACP update and the other way round (a branch per token).
//! - `MetricsLayer` counts only in runs whose engine has `Metrics` (feature `metrics`).
//! - Without a [`policy`](Stack::policy), every call is allowed (the [`Policy`] is empty).
//! - Without rules ([`StateLayer::from_args`]), the state layer only carries the run's state.
//! - [`TruncateLayer`] bounds what a UI is shown ([`truncate`](Stack::truncate) to change the
//!   bounds); the model always gets whole results.
//! - [`TraceLayer`]'s spans cost a check when nothing collects them.
//!
//! Each layer's configuration is its own type, given as it is built
//! ([`agui`](Stack::agui), [`errors`](Stack::errors), [`state`](Stack::state), …). One layer of
//! your own goes around the model, inside error mapping ([`model_layer`](Stack::model_layer)):
//! post-processing, a cache, a guard; several are one `tower::ServiceBuilder`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::{message::Message, run::RunRequest, stack::Stack};
//! use agent_tower::model::scripted::ScriptedModel;
//! use agent_tower::tool::{ToolCall, ToolOutput, ToolRouter, ToolSpec};
//! use tower::{ServiceExt, service_fn};
//!
//! let tools = ToolRouter::new().route(
//!     ToolSpec::new("get_time", "The current time."),
//!     service_fn(|_: ToolCall| async { Ok::<_, std::convert::Infallible>(ToolOutput::text("12:00")) }),
//! );
//! let agent = Stack::new(ScriptedModel::new(), tools)
//!     .instructions("You tell the time.")
//!     .build();
//! let outcome = agent.oneshot(RunRequest::new(vec![Message::user("call get_time")])).await?;
//! assert!(outcome.messages.last().unwrap().text().contains("12:00"));
//! # Ok(()) }
//! ```

use std::{fmt, num::NonZeroU32};

use tower_layer::{Identity, Layer};

#[cfg(feature = "acp")]
use crate::acp::{AcpAgent, AcpApprover, AcpLayer};
use crate::{
    agent::Agent,
    agui::{
        Agui, AguiLayer, Event,
        capabilities::{self, Capabilities},
    },
    map_error::{DefaultClassifier, Detail, MapError, MapErrorLayer},
    model::ModelOptions,
    permission::{AutoApprove, Permission, PermissionLayer, Policy},
    state::{State, StateLayer},
    tool::ToolRouter,
    trace::{Trace, TraceLayer},
    transport::Channel,
    truncate::{Truncate, TruncateLayer},
};

/// The stack's place for editors: the ACP layer with the feature `acp`, empty without.
#[cfg(feature = "acp")]
type Editors = AcpLayer;
#[cfg(not(feature = "acp"))]
type Editors = Identity;
/// What [`Editors`] makes of `S`.
#[cfg(feature = "acp")]
type ForEditors<S> = crate::acp::Acp<S, crate::acp::Notifier>;
#[cfg(not(feature = "acp"))]
type ForEditors<S> = S;

/// The stack's place for counting tool calls: the metrics layer with the feature `metrics`,
/// empty without.
#[cfg(feature = "metrics")]
type Counting = crate::metrics::MetricsLayer;
#[cfg(not(feature = "metrics"))]
type Counting = Identity;
/// What [`Counting`] makes of `S`.
#[cfg(feature = "metrics")]
type Counted<S> = crate::metrics::Counted<S>;
#[cfg(not(feature = "metrics"))]
type Counted<S> = S;

/// The model as a [`Stack`] wraps it, `L` being its [model layer](Stack::model_layer).
pub type StackModel<M, L = Identity> = Agui<
    ForEditors<MapError<<L as Layer<State<Truncate<Trace<M>>>>>::Service, DefaultClassifier>>,
    Channel<Event>,
>;

/// The tools as a [`Stack`] wraps them, asking `A` what its policy asks about.
pub type StackTools<A = AutoApprove> =
    Agui<ForEditors<Permission<State<Truncate<Counted<Trace<ToolRouter>>>>, A>>, Channel<Event>>;

/// The agent a [`Stack`] builds: a `Service<RunRequest>`.
pub type StackAgent<M, A = AutoApprove, L = Identity> = Trace<
    Agui<MapError<Agent<StackModel<M, L>, StackTools<A>>, DefaultClassifier>, Channel<Event>>,
>;

/// Builds an agent from a model service `M` and a [`ToolRouter`] with every layer in its
/// place; see the [module docs](self). `A` is the approver of the calls its policy asks about,
/// `L` a layer of yours around the model.
#[must_use]
#[derive(Clone)]
pub struct Stack<M, A = AutoApprove, L = Identity> {
    model: M,
    tools: ToolRouter,
    approver: A,
    model_layer: L,
    settings: Settings,
}

/// What a [`Stack`] is configured with, whatever its types.
#[derive(Clone, Debug)]
struct Settings {
    policy: Policy,
    instructions: Option<String>,
    max_turns: NonZeroU32,
    options: ModelOptions,
    agui: AguiLayer,
    #[cfg(feature = "acp")]
    acp: AcpLayer,
    errors: MapErrorLayer,
    state: StateLayer,
    truncate: TruncateLayer,
    trace: TraceLayer,
}

impl<M> Stack<M> {
    /// `model` and `tools` with the default of every layer: no instructions, at most 16 model
    /// turns a run, every tool call allowed, errors shown with their message.
    pub fn new(model: M, tools: ToolRouter) -> Self {
        Self {
            model,
            tools,
            approver: AutoApprove,
            model_layer: Identity::new(),
            settings: Settings {
                policy: Policy::new(),
                instructions: None,
                max_turns: NonZeroU32::new(16).expect("16 is not zero"),
                options: ModelOptions::default(),
                agui: AguiLayer::new(),
                #[cfg(feature = "acp")]
                acp: AcpLayer::new(),
                errors: MapErrorLayer::new(),
                state: StateLayer::new(),
                truncate: TruncateLayer::new(),
                trace: TraceLayer::new(),
            },
        }
    }
}

impl<M, A, L> Stack<M, A, L> {
    /// What the model is told first in every turn (its system prompt); see
    /// [`Agent::instructions`].
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.settings.instructions = Some(instructions.into());
        self
    }

    /// The most model turns one run may take (default 16).
    pub fn max_turns(mut self, max_turns: NonZeroU32) -> Self {
        self.settings.max_turns = max_turns;
        self
    }

    /// Sampling options for every model call.
    pub fn model_options(mut self, options: ModelOptions) -> Self {
        self.settings.options = options;
        self
    }

    /// What is asked about: the policy decides per call (it learns the tools' kinds when the
    /// stack is built); its asks go to the [`approver`](Self::approver).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.settings.policy = policy;
        self
    }

    /// Who answers what the [`policy`](Self::policy) asks about:
    /// [`InterruptApprover`](crate::permission::InterruptApprover) over AG-UI (the run stops at
    /// an interrupt), `AcpApprover` in an editor (`acp_agent` sets it), your own.
    pub fn approver<B>(self, approver: B) -> Stack<M, B, L> {
        let Self {
            model,
            tools,
            model_layer,
            settings,
            ..
        } = self;
        Stack {
            model,
            tools,
            approver,
            model_layer,
            settings,
        }
    }

    /// A layer of yours around the model, inside error mapping and outside state and
    /// truncation: it sees the model's whole events and the step's context
    /// ([`PostProcessLayer`](crate::post_process::PostProcessLayer) goes here).
    pub fn model_layer<K>(self, layer: K) -> Stack<M, A, K> {
        let Self {
            model,
            tools,
            approver,
            settings,
            ..
        } = self;
        Stack {
            model,
            tools,
            approver,
            model_layer: layer,
            settings,
        }
    }

    /// The AG-UI layer, configured ([`predict_state`](AguiLayer::predict_state), …).
    pub fn agui(mut self, agui: AguiLayer) -> Self {
        self.settings.agui = agui;
        self
    }

    /// The ACP layer, configured (the tools' kinds are added when the stack is built).
    #[cfg(feature = "acp")]
    #[cfg_attr(docsrs, doc(cfg(feature = "acp")))]
    pub fn acp(mut self, acp: AcpLayer) -> Self {
        self.settings.acp = acp;
        self
    }

    /// How errors become `RUN_ERROR` codes and stop reasons.
    pub fn errors(mut self, errors: MapErrorLayer) -> Self {
        self.settings.errors = errors;
        self
    }

    /// How much of an error clients see (the [`errors`](Self::errors) layer's detail).
    pub fn detail(mut self, detail: Detail) -> Self {
        self.settings.errors = self.settings.errors.detail(detail);
        self
    }

    /// The state layer, with its rules ([`from_args`](StateLayer::from_args), …).
    pub fn state(mut self, state: StateLayer) -> Self {
        self.settings.state = state;
        self
    }

    /// The bounds of what a UI is shown.
    pub fn truncate(mut self, truncate: TruncateLayer) -> Self {
        self.settings.truncate = truncate;
        self
    }

    /// The names of the spans: the model's and the provider's, for the GenAI conventions.
    pub fn trace(mut self, trace: TraceLayer) -> Self {
        self.settings.trace = trace;
        self
    }

    /// The tools, as given.
    #[must_use]
    pub fn tools(&self) -> &ToolRouter {
        &self.tools
    }

    /// The AG-UI capabilities of the agent this stack builds (for
    /// [`AguiServer::capabilities`](crate::server::AguiServer::capabilities) and
    /// `GET /capabilities`): its tools and the client's, state snapshots and deltas, its most
    /// model turns a run, and approvals through interrupts when its policy may ask about a call
    /// and its approver is not [`AutoApprove`]. What the model can do (reasoning, images) is not
    /// known here: add it with [`Capabilities::merge`].
    #[must_use]
    pub fn capabilities(&self) -> Capabilities
    where
        A: 'static,
    {
        let specs = self.tools.specs();
        let asks = self.settings.policy.may_ask(&specs)
            && std::any::TypeId::of::<A>() != std::any::TypeId::of::<AutoApprove>();
        Capabilities {
            tools: Some(capabilities::Tools::of(&specs)),
            state: Some(capabilities::State {
                snapshots: Some(true),
                deltas: Some(true),
                ..capabilities::State::default()
            }),
            execution: Some(capabilities::Execution {
                max_iterations: Some(self.settings.max_turns.get()),
                ..capabilities::Execution::default()
            }),
            human_in_the_loop: asks.then(capabilities::HumanInTheLoop::interrupts),
            ..Capabilities::default()
        }
    }

    /// The agent, every layer in its place.
    pub fn build(self) -> StackAgent<M, A, L>
    where
        A: Clone,
        L: Layer<State<Truncate<Trace<M>>>>,
    {
        let Settings {
            policy,
            instructions,
            max_turns,
            options,
            agui,
            #[cfg(feature = "acp")]
            acp,
            errors,
            state,
            truncate,
            trace,
        } = self.settings;
        let specs = self.tools.specs();
        #[cfg(feature = "acp")]
        let acp: Editors = acp.tools(&specs);
        #[cfg(not(feature = "acp"))]
        let acp = Editors::new();
        let model = self
            .model_layer
            .layer(state.layer(truncate.layer(trace.layer(self.model))));
        let model = agui.layer(acp.layer(errors.layer(model)));
        let counted = Counting::new().layer(trace.layer(self.tools));
        let permission = PermissionLayer::new(policy.tools(&specs), self.approver);
        let tools = agui.layer(acp.layer(permission.layer(state.layer(truncate.layer(counted)))));
        let mut agent = Agent::new(model, tools)
            .tool_specs(specs)
            .max_turns(max_turns)
            .model_options(options);
        if let Some(instructions) = instructions {
            agent = agent.instructions(instructions);
        }
        trace.layer(agui.layer(errors.layer(agent)))
    }

    /// The agent served over AG-UI: an [`AguiServer`](crate::server::AguiServer) of
    /// [`build`](Self::build) whose `GET /capabilities` declares what this stack has
    /// ([`capabilities`](Self::capabilities)), with the server's defaults otherwise.
    #[cfg(feature = "server")]
    pub fn server(self) -> crate::server::AguiServer
    where
        A: Clone + 'static,
        L: Layer<State<Truncate<Trace<M>>>>,
        StackAgent<M, A, L>: crate::run::RunService,
    {
        let capabilities = self.capabilities();
        crate::server::AguiServer::new(self.build()).capabilities(capabilities)
    }

    /// The agent for an editor: built with an [`AcpApprover`] (the editor is asked what the
    /// policy asks about), in an [`AcpAgent`] that knows that approver and the tools.
    #[cfg(feature = "acp")]
    #[cfg_attr(docsrs, doc(cfg(feature = "acp")))]
    pub fn acp_agent(self) -> AcpAgent
    where
        L: Layer<State<Truncate<Trace<M>>>>,
        StackAgent<M, AcpApprover, L>: crate::run::RunService,
    {
        let approver = AcpApprover::new();
        let specs = self.tools.specs();
        let agent = self.approver(approver.clone()).build();
        AcpAgent::new(agent).approver(approver).tools(&specs)
    }
}

impl<M, A, L> fmt::Debug for Stack<M, A, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stack")
            .field("model", &std::any::type_name::<M>())
            .field("tools", &self.tools)
            .field("approver", &std::any::type_name::<A>())
            .field("model_layer", &std::any::type_name::<L>())
            .field("settings", &self.settings)
            .finish()
    }
}
