//! One run of an agent: what it is asked ([`RunRequest`]: the conversation, the tools the client
//! runs itself, the [`RunContext`] every step sees) and what it gives back ([`RunOutcome`]: the new
//! messages, why it stopped, the interrupts it waits on, usage).

mod invalid;
mod usage;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use self::{
    invalid::InvalidRequest,
    usage::{CallsUsage, EarlierUsage},
};
/// The tool call a run stopped at; defined with the tool stack's answer,
/// [`ToolResponse`](crate::tool::ToolResponse).
pub use crate::tool::Interrupt;

use tower_service::Service;

use crate::{
    BoxError, context::RunContext, id::ToolCallId, message::Message, model::Usage, tool::ToolSpec,
};

/// The tool calls the agent runs together in one turn, in every one of their
/// [`RunContext::extensions`]: a layer that decides per turn (permission) sees them all.
#[derive(Debug, Clone)]
pub struct TurnCalls(pub std::sync::Arc<[crate::tool::ToolCall]>);

/// A piece of context the client supplied (AG-UI `context`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextEntry {
    /// What it is.
    pub description: String,
    /// The value.
    pub value: String,
}

/// What the run engine ([`Runs`](crate::runs::Runs)), the AG-UI server and the bridges drive:
/// a `Service<RunRequest, Response = RunOutcome>` whose errors become a [`BoxError`] (as tower's
/// own middleware asks of its services) and that is cloned into a task of its own per run
/// (`Clone + Send + Sync + 'static`, its future `Send + 'static`), such as an
/// [`Agent`](crate::agent::Agent) in its layers. Implemented for every such service: it names the
/// bound, nothing more.
pub trait RunService:
    Service<RunRequest, Response = RunOutcome, Error: Into<BoxError> + Send, Future: Send + 'static>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<A> RunService for A
where
    A: Service<RunRequest, Response = RunOutcome> + Clone + Send + Sync + 'static,
    A::Error: Into<BoxError> + Send,
    A::Future: Send + 'static,
{
}

/// A [`RunService`] whose type is erased: what the engine keeps of the agent it drives, so that
/// the engine, the server and its doors are compiled once, whatever the agent's type.
pub type BoxRunService = tower::util::BoxCloneSyncService<RunRequest, RunOutcome, BoxError>;

/// Erases `agent`'s type, its errors boxed; an agent already erased is kept as it is.
///
/// ```
/// use agent_tower::{agent::Agent, model::scripted::ScriptedModel, run::{BoxRunService, boxed}};
/// use agent_tower::tool::ToolRouter;
///
/// let agent: BoxRunService = boxed(Agent::new(ScriptedModel::new(), ToolRouter::new()));
/// let again: BoxRunService = boxed(agent);
/// # let _ = again;
/// ```
pub fn boxed<A: RunService>(agent: A) -> BoxRunService {
    use tower::ServiceExt;
    let mut agent = Some(agent);
    if let Some(erased) =
        (&mut agent as &mut dyn std::any::Any).downcast_mut::<Option<BoxRunService>>()
        && let Some(erased) = erased.take()
    {
        return erased;
    }
    match agent {
        Some(agent) => BoxRunService::new(agent.map_err(Into::into)),
        None => unreachable!("only an agent already erased is taken"),
    }
}

/// A request to run the agent once.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The conversation, including the new input.
    pub messages: Vec<Message>,
    /// Tools the *client* executes (AG-UI frontend tools): the agent streams their calls and ends
    /// the run with them pending.
    pub client_tools: Vec<ToolSpec>,
    /// Context entries, given to the model as a system message.
    pub context: Vec<ContextEntry>,
    /// The shared state, when the client sent one.
    pub state: Option<Value>,
    /// Ids, cancellation and per-run extensions.
    pub run: RunContext,
}

impl RunRequest {
    /// A run of `messages` with a fresh context.
    #[must_use]
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            client_tools: Vec::new(),
            context: Vec::new(),
            state: None,
            run: RunContext::default(),
        }
    }
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model hit its output token limit.
    MaxTokens,
    /// The agent hit its limit of model turns.
    MaxTurns,
    /// The model refused.
    Refusal,
    /// The run was cancelled.
    Cancelled,
    /// The model called client-side tools; the run continues when their results arrive.
    ClientToolCalls,
    /// Tool calls wait for a person's decision ([`RunOutcome::interrupts`]); a later run on the
    /// thread resumes them.
    Interrupted,
}

/// What a finished run produced.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunOutcome {
    /// Why it stopped.
    pub stop: StopReason,
    /// The whole conversation after the run, new messages under the ids they were streamed with.
    pub messages: Vec<Message>,
    /// The state after the run.
    pub state: Option<Value>,
    /// Tokens used by every model step of the run, and their cost: its sub-agents' steps and,
    /// for a run continued after its instance stopped, its earlier steps included (see
    /// [`EarlierUsage`], [`CallsUsage`]).
    pub usage: Usage,
    /// The same, per provider and model, in the order they first answered (one entry unless
    /// a fallback answered some steps).
    pub models: Vec<Usage>,
    /// Calls of client-side tools waiting for the client's results.
    pub pending_tool_calls: Vec<ToolCallId>,
    /// Calls waiting for a person's decision, when the run stopped for them.
    pub interrupts: Vec<Interrupt>,
}

impl RunOutcome {
    /// An outcome with no usage and no pending calls.
    #[must_use]
    pub fn new(stop: StopReason, messages: Vec<Message>, state: Option<Value>) -> Self {
        Self {
            stop,
            messages,
            state,
            usage: Usage::default(),
            models: Vec::new(),
            pending_tool_calls: Vec::new(),
            interrupts: Vec::new(),
        }
    }
}
