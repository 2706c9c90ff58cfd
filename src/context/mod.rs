//! What every step of a run sees: [`RunContext`] (ids, cancellation, the run's own services,
//! extensions).
//!
//! The context travels with every step: the agent puts it on each
//! [`ModelRequest`](crate::model::ModelRequest) and [`ToolCall`](crate::tool::ToolCall), and layers
//! read it to find the run's ids, its [`CancellationToken`], and the run's own services in typed
//! fields: where its wire events go ([`RunContext::sinks`]), its [`SharedState`] and its
//! [`Background`] work. That is how one layer stack serves many clients at once: the stack is
//! built once, each run brings its own sinks. [`RunContext::extensions`] is left to user data
//! (forwarded properties, overrides). Models, tools and runs all read this module; it reads none
//! of them.
//!
//! ```
//! # #[cfg(feature = "agui")] {
//! use agent_tower::agui::Event;
//! use agent_tower::context::RunContext;
//! use agent_tower::transport::Channel;
//!
//! let (tx, _rx) = Channel::<Event>::bounded(16);
//! let mut run = RunContext::new("thread-1".into(), "run-1".into());
//! run.sinks.agui = Some(tx); // every AguiLayer of the stack sends this run's events here
//! # }
//! ```

mod background;
pub(crate) mod state;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) use self::background::with_background;
pub use self::{
    background::Background,
    state::{ApplyError, SharedState},
};
use crate::{
    id::{MessageId, RunId, ThreadId},
    transport::OnDisconnect,
};

pub use http::Extensions;

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
