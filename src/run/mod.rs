//! One run of an agent: [`RunContext`] (ids, cancellation, the run's own services, extensions),
//! [`RunRequest`] and [`RunOutcome`].
//!
//! The context travels with every step: the agent puts it on each [`ModelRequest`] and
//! [`ToolCall`], and layers read it to find the run's ids, its [`CancellationToken`], and the
//! run's own services in typed fields: where its wire events go ([`RunContext::sinks`]), its
//! [`SharedState`] and its [`Background`] work. That is how one layer stack serves many clients
//! at once: the stack is built once, each run brings its own sinks.
//! [`RunContext::extensions`] is left to user data (forwarded properties, overrides).
//!
//! ```
//! # #[cfg(feature = "agui")] {
//! use agent_tower::agui::Event;
//! use agent_tower::run::RunContext;
//! use agent_tower::transport::Channel;
//!
//! let (tx, _rx) = Channel::<Event>::bounded(16);
//! let mut run = RunContext::new("thread-1".into(), "run-1".into());
//! run.sinks.agui = Some(tx); // every AguiLayer of the stack sends this run's events here
//! # }
//! ```
//!
//! [`ModelRequest`]: crate::model::ModelRequest
//! [`ToolCall`]: crate::tool::ToolCall

mod background;
mod interrupt;
mod invalid;
pub(crate) mod state;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) use self::background::with_background;
pub use self::{
    background::Background,
    interrupt::{Interrupt, Interrupted},
    invalid::InvalidRequest,
    state::{ApplyError, SharedState},
};

use crate::{
    id::{MessageId, RunId, ThreadId, ToolCallId},
    message::Message,
    model::Usage,
    tool::ToolSpec,
};

pub use http::Extensions;

use crate::transport::OnDisconnect;

/// Where a run's wire events go, one sink per protocol, and what to do when they close. Set by
/// whoever serves the run (a server, the ACP agent); read by the layers that emit. A layer uses
/// the run's sink when there is one, else its own default transport.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Sinks {
    /// The run's AG-UI events (read by every [`AguiLayer`](crate::agui::AguiLayer) of the stack).
    #[cfg(feature = "agui")]
    #[cfg_attr(docsrs, doc(cfg(feature = "agui")))]
    pub agui: Option<crate::transport::Channel<crate::agui::Event>>,
    /// The run's ACP session updates (read by every [`AcpLayer`](crate::acp::AcpLayer)).
    #[cfg(feature = "acp")]
    #[cfg_attr(docsrs, doc(cfg(feature = "acp")))]
    pub acp: Option<crate::acp::Notifier>,
    /// What a layer does when the run's sink closes; the layer's own setting when `None`.
    pub on_disconnect: Option<OnDisconnect>,
}

/// The ids, cancellation and services of a run, as seen by one step.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The conversation thread.
    pub thread_id: ThreadId,
    /// This run.
    pub run_id: RunId,
    /// The message this step writes: the assistant message of a model step, the tool message of a
    /// tool call.
    pub message_id: MessageId,
    /// The model turn this step belongs to, from 0.
    pub turn: u32,
    /// Cancelled when the run must stop (client gone, user cancelled, shutdown).
    pub cancel: CancellationToken,
    /// Where the run's wire events go.
    pub sinks: Sinks,
    /// The run's shared state, once a layer or the agent made it (see
    /// [`shared_state`](RunContext::shared_state)).
    pub state: Option<SharedState>,
    /// Work the run finishes before it ends, once the agent made it (see
    /// [`background`](RunContext::background)).
    pub background: Option<Background>,
    /// User data for the run: forwarded properties, overrides, per-run tools.
    pub extensions: Extensions,
}

impl RunContext {
    /// A context for a new run on `thread_id`.
    #[must_use]
    pub fn new(thread_id: ThreadId, run_id: RunId) -> Self {
        Self {
            thread_id,
            run_id,
            message_id: MessageId::new(),
            turn: 0,
            cancel: CancellationToken::new(),
            sinks: Sinks::default(),
            state: None,
            background: None,
            extensions: Extensions::new(),
        }
    }

    /// The run's [`SharedState`]: its own, else a new one starting at `initial` (an empty object
    /// without), kept for every later step.
    pub fn shared_state(&mut self, initial: Option<&Value>) -> SharedState {
        self.state
            .get_or_insert_with(|| {
                SharedState::new(initial.cloned().unwrap_or_else(|| serde_json::json!({})))
            })
            .clone()
    }

    /// The run's [`Background`] work: its own, else a new set kept for every later step.
    pub fn background(&mut self) -> Background {
        self.background.get_or_insert_with(Background::new).clone()
    }

    /// The same run, for a step that writes `message_id` in `turn`.
    #[must_use]
    pub fn for_step(&self, message_id: MessageId, turn: u32) -> Self {
        Self {
            message_id,
            turn,
            ..self.clone()
        }
    }
}

impl Default for RunContext {
    fn default() -> Self {
        Self::new(ThreadId::new(), RunId::new())
    }
}

/// Extra properties the client forwarded with the run (AG-UI `forwardedProps`), for any step that
/// wants them. Stored in [`RunContext::extensions`].
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardedProps(pub Value);

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
    /// Tokens used by every model step of the run.
    pub usage: Usage,
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
            pending_tool_calls: Vec::new(),
            interrupts: Vec::new(),
        }
    }
}
