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
//! run.sinks.insert(tx); // every AguiLayer of the stack sends this run's events here
//! # }
//! ```

mod background;
mod checkpoint;
mod principal;
pub(crate) mod state;

use std::{
    any::{Any, TypeId},
    fmt,
    sync::Arc,
};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) use self::background::with_background;
pub use self::{
    background::Background,
    checkpoint::Checkpoint,
    principal::{InvalidPrincipal, MAX_PRINCIPAL_BYTES, Principal},
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
///
/// Each protocol's layer names its own sink type and finds it here by that type:
/// [`AguiLayer`](crate::agui::AguiLayer) a `transport::Channel<agui::Event>`,
/// [`AcpLayer`](crate::acp::AcpLayer) an `acp::Notifier`. The core names none of them. Clones
/// share the sinks until one of them changes (a clone per step costs a reference count).
///
/// ```
/// use agent_tower::context::Sinks;
///
/// #[derive(Debug, Clone, PartialEq)]
/// struct MySink(u32);
///
/// let mut sinks = Sinks::default();
/// assert_eq!(sinks.insert(MySink(1)), None);
/// let step = sinks.clone();
/// assert_eq!(sinks.insert(MySink(2)), Some(MySink(1)));
/// assert_eq!((sinks.get::<MySink>(), step.get::<MySink>()), (Some(&MySink(2)), Some(&MySink(1))));
/// ```
#[derive(Clone, Default)]
pub struct Sinks {
    /// The sinks, by type (a run has one or two).
    entries: Option<Arc<Vec<Sink>>>,
    /// What a layer does when the run's sink closes; the layer's own setting when `None`.
    pub on_disconnect: Option<OnDisconnect>,
}

/// One sink of a run, by its type.
#[derive(Clone)]
struct Sink {
    id: TypeId,
    name: &'static str,
    value: Arc<dyn Any + Send + Sync>,
}

impl Sinks {
    /// Makes `sink` the run's sink of its type; the one it replaces, if any.
    pub fn insert<S: Clone + Send + Sync + 'static>(&mut self, sink: S) -> Option<S> {
        let entries = Arc::make_mut(self.entries.get_or_insert_with(Arc::default));
        let sink = Sink {
            id: TypeId::of::<S>(),
            name: std::any::type_name::<S>(),
            value: Arc::new(sink),
        };
        match entries.iter_mut().find(|entry| entry.id == sink.id) {
            Some(entry) => {
                let old = std::mem::replace(entry, sink);
                old.value.downcast_ref::<S>().cloned()
            }
            None => {
                entries.push(sink);
                None
            }
        }
    }

    /// The run's sink of type `S`, if it has one.
    #[must_use]
    pub fn get<S: 'static>(&self) -> Option<&S> {
        self.entries
            .as_deref()?
            .iter()
            .find(|entry| entry.id == TypeId::of::<S>())
            .and_then(|entry| entry.value.downcast_ref())
    }
}

impl fmt::Debug for Sinks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .entries
            .iter()
            .flat_map(|entries| entries.iter().map(|entry| entry.name))
            .collect();
        f.debug_struct("Sinks")
            .field("sinks", &names)
            .field("on_disconnect", &self.on_disconnect)
            .finish()
    }
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
    /// The model turn this step belongs to, from 0. In a run's request, the turn it starts at:
    /// 0, or, for a run continued after its server stopped, the turns it had completed.
    pub turn: u32,
    /// Cancelled when the run must stop (client gone, user cancelled, shutdown).
    pub cancel: CancellationToken,
    /// Who the run is for: the principal that started it (`None`: a server that authenticates
    /// nobody, or a run outside any server).
    pub principal: Option<Principal>,
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
            principal: None,
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
