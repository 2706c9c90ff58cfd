//! What the protocol bridges share ([`acp::client`](crate::acp::client),
//! [`agui::client`](crate::agui::client)): a remote agent's turn read as model steps.
//!
//! A bridge keeps one `Turn` per thread, fed by its connection: text and thoughts as they come,
//! the tool calls the remote agent starts (it runs them itself), and how the turn ended. A model
//! call reads it with `steps`: deltas stream, a tool call is held until the remote agent shows
//! what it needs (it asks permission, runs it, or the turn ends) and then ends the step; the next
//! model call goes on reading the same turn.
//!
//! Its public part is [`BridgeError`]: why a bridged agent failed a run, which
//! [`map_error`](crate::map_error) turns into a specific `RUN_ERROR` code.

use std::{collections::VecDeque, sync::Arc};

use futures_util::{StreamExt, stream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::{
    context::{RunContext, SharedState},
    id::{MessageId, ToolCallId},
    model::{BoxModelStream, FinishReason, ModelEvent},
};

/// Why a bridged agent (an ACP agent behind [`AcpBridge`](crate::acp::client::AcpBridge), an
/// AG-UI agent behind [`AguiBridge`](crate::agui::client::AguiBridge)) failed a run.
///
/// The model side of a bridge fails with it; the default
/// [classifier](crate::map_error::DefaultClassifier) gives each kind its own `RUN_ERROR` code
/// (see [`BridgeErrorKind::code`]). None is retried: a bridged agent keeps its own history, and a
/// prompt sent twice would be answered twice.
///
/// ```
/// use agent_tower::bridge::{BridgeError, BridgeErrorKind};
///
/// let error = BridgeError::new(BridgeErrorKind::AgentUnavailable, "the ACP agent is restarting");
/// assert_eq!(error.kind().code(), "agent_unavailable");
/// assert_eq!(error.to_string(), "the ACP agent is restarting");
/// ```
#[derive(Debug, Clone)]
pub struct BridgeError {
    kind: BridgeErrorKind,
    message: String,
}

/// What kind of failure a [`BridgeError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BridgeErrorKind {
    /// The agent's process exited, or its connection closed, during the run.
    AgentExited,
    /// The agent is not running (it is being restarted) or cannot be reached.
    AgentUnavailable,
    /// The agent requires an authentication it was not given, or refused it.
    AuthRequired,
    /// The agent answered outside its protocol, or refused a request of it.
    ProtocolError,
    /// The agent reported a failure of its own (an AG-UI `RUN_ERROR`, a refused prompt).
    AgentError,
}

impl BridgeErrorKind {
    /// The stable snake_case code, used as AG-UI `RUN_ERROR.code`.
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            Self::AgentExited => "agent_exited",
            Self::AgentUnavailable => "agent_unavailable",
            Self::AuthRequired => "auth_required",
            Self::ProtocolError => "protocol_error",
            Self::AgentError => "agent_error",
        }
    }
}

impl BridgeError {
    /// An error of `kind` with a message for people.
    pub fn new(kind: BridgeErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// Its kind.
    #[must_use]
    pub fn kind(&self) -> BridgeErrorKind {
        self.kind
    }
}

impl std::fmt::Display for BridgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BridgeError {}

/// A side of a bridge (its model or its tools): a service holding the bridge, built by it.
macro_rules! side {
    ($(#[$doc:meta])* $name:ident($bridge:ty)) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            bridge: $bridge,
        }

        impl $name {
            pub(super) fn new(bridge: $bridge) -> Self {
                Self { bridge }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("bridge", &self.bridge)
                    .finish()
            }
        }
    };
}
pub(crate) use side;

/// How many threads a bridge keeps (a session or a remote run each); past it, the oldest one with
/// no turn open is forgotten (its thread starts a new one, told the conversation, if it comes
/// back).
pub(crate) const MAX_THREADS: usize = 1024;

/// The bridge's threads, in the order they came, bounded by [`MAX_THREADS`].
#[derive(Debug)]
pub(crate) struct Threads<V> {
    map: std::collections::HashMap<crate::id::ThreadId, V>,
    order: VecDeque<crate::id::ThreadId>,
}

impl<V> Default for Threads<V> {
    fn default() -> Self {
        Self {
            map: std::collections::HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<V: Clone> Threads<V> {
    pub(crate) fn get(&self, thread: &crate::id::ThreadId) -> Option<V> {
        self.map.get(thread).cloned()
    }

    /// Keeps `value` for `thread`; returns what was forgotten to make room (the oldest thread
    /// `idle` says has no turn open), if anything was.
    pub(crate) fn insert(
        &mut self,
        thread: crate::id::ThreadId,
        value: V,
        idle: impl Fn(&V) -> bool,
    ) -> Option<V> {
        let mut forgotten = None;
        if self.map.len() >= MAX_THREADS
            && let Some(at) = self
                .order
                .iter()
                .position(|t| self.map.get(t).is_some_and(&idle))
        {
            let old = self.order.remove(at).expect("a position in the order");
            forgotten = self.map.remove(&old);
        }
        if self.map.insert(thread.clone(), value).is_none() {
            self.order.push_back(thread);
        }
        forgotten
    }
}

/// How many updates of a turn may wait for a model step to read them; past it the oldest text is
/// dropped (a step reads them as they come: only a run that stalls fills it).
const MAX_PENDING_UPDATES: usize = 4096;

/// What a model step reads, in order.
#[derive(Debug)]
#[cfg_attr(
    not(any(feature = "acp-client", feature = "agui-client")),
    allow(
        dead_code,
        reason = "the bridges whose agents show their tool calls use it"
    )
)]
pub(crate) enum Update {
    /// A piece of the remote agent's message (under its id, when it gives one).
    Text(Option<MessageId>, String),
    /// A piece of its reasoning (likewise).
    Thought(Option<MessageId>, String),
    /// A tool call the remote agent started: its id, name and arguments.
    ToolCall {
        id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// Keys of the run's shared state, set to these values (an ACP agent's plan).
    State(serde_json::Map<String, serde_json::Value>),
}

/// How a turn ended.
#[derive(Debug, Clone)]
pub(crate) enum End {
    Finished(FinishReason),
    Failed(BridgeError),
}

/// A turn's updates not yet read, and its end.
#[derive(Debug, Default)]
pub(crate) struct Updates {
    open: bool,
    queue: VecDeque<Update>,
    end: Option<End>,
}

impl Updates {
    /// A new turn's.
    pub(crate) fn begin() -> Self {
        Self {
            open: true,
            ..Self::default()
        }
    }

    /// Whether a turn is open: started, and not yet read to its end.
    pub(crate) fn is_open(&self) -> bool {
        self.open
    }

    #[cfg_attr(
        not(any(feature = "acp-client", feature = "agui-client")),
        allow(
            dead_code,
            reason = "the bridges whose agents show their tool calls use it"
        )
    )]
    pub(crate) fn end(&self) -> Option<&End> {
        self.end.as_ref()
    }

    pub(crate) fn push(&mut self, update: Update) {
        if self.queue.len() >= MAX_PENDING_UPDATES
            && let Some(at) = self
                .queue
                .iter()
                .position(|u| matches!(u, Update::Text(..) | Update::Thought(..)))
        {
            self.queue.remove(at);
        }
        self.queue.push_back(update);
    }

    /// The turn ended (the first end counts).
    pub(crate) fn finish(&mut self, end: End) {
        self.end.get_or_insert(end);
    }

    /// The next update, or the end once every update is read (the turn is then closed).
    pub(crate) fn next(&mut self) -> Option<Result<Update, End>> {
        if let Some(update) = self.queue.pop_front() {
            return Some(Ok(update));
        }
        let end = self.end.clone()?;
        self.open = false;
        Some(Err(end))
    }
}

/// A remote agent's turn, as its bridge keeps it.
pub(crate) trait Turn: Send + Sync + 'static {
    /// The next update, or how the turn ended; `None` while neither has come.
    fn next(&self) -> Option<Result<Update, End>>;
    /// Whether the remote agent showed what the call `id` needs.
    fn is_settled(&self, id: &str) -> bool;
    /// Notified on every change.
    fn changed(&self) -> &Notify;
    /// Asks the remote agent to stop the turn (it then ends it).
    fn cancel(&self);
    /// The run knows the remote agent's call `remote` as `run`: the remote agent reused the id of
    /// a call the conversation already has (another turn's, or its own before a restart).
    fn rename(&self, remote: &str, run: &str);
}

/// The remote agent's ids of calls the run knows under another id (see [`Turn::rename`]).
#[derive(Debug, Default)]
#[cfg_attr(
    not(any(feature = "acp-client", feature = "agui-client")),
    allow(
        dead_code,
        reason = "the bridges whose agents show their tool calls use it"
    )
)]
pub(crate) struct Aliases(std::collections::HashMap<String, String>);

#[cfg_attr(
    not(any(feature = "acp-client", feature = "agui-client")),
    allow(
        dead_code,
        reason = "the bridges whose agents show their tool calls use it"
    )
)]
impl Aliases {
    pub(crate) fn insert(&mut self, remote: &str, run: &str) {
        self.0.insert(run.to_owned(), remote.to_owned());
    }

    /// The remote agent's id of the run's call `id`.
    pub(crate) fn remote<'a>(&'a self, id: &'a str) -> &'a str {
        self.0.get(id).map_or(id, String::as_str)
    }

    /// The run's id of the remote agent's call `id` (the latest it was renamed to).
    #[cfg(feature = "agui-client")]
    pub(crate) fn run<'a>(&'a self, id: &'a str) -> &'a str {
        self.0
            .iter()
            .filter(|(_, remote)| remote.as_str() == id)
            .map(|(run, _)| run.as_str())
            .max_by_key(|run| (run.len(), *run))
            .unwrap_or(id)
    }
}

/// The ids of the tool calls `messages` hold: a call the remote agent makes under one of them
/// gets another id in the run.
pub(crate) fn call_ids(messages: &[crate::message::Message]) -> std::collections::HashSet<String> {
    use crate::message::Message;
    let mut ids = std::collections::HashSet::new();
    for message in messages {
        match message {
            Message::Assistant { tool_calls, .. } => {
                ids.extend(tool_calls.iter().map(|call| call.id.to_string()));
            }
            Message::Tool { tool_call_id, .. } => {
                ids.insert(tool_call_id.to_string());
            }
            _ => {}
        }
    }
    ids
}

/// One model step of `turn` in `run`: its text and reasoning under the step's message id, ended
/// by a tool call or by the turn's end; state updates go to the run's shared state. The run's
/// cancellation cancels the turn. A call under one of the ids `taken` (the conversation's) gets
/// a new one.
pub(crate) fn steps(
    turn: Arc<dyn Turn>,
    run: &RunContext,
    taken: std::collections::HashSet<String>,
) -> BoxModelStream {
    let message_id = run.message_id.clone();
    let step = Step {
        reasoning_id: MessageId::from(format!("{message_id}-reasoning")),
        message_id,
        turn,
        state: run.state.clone(),
        cancel: run.cancel.clone(),
        cancel_sent: false,
        named: false,
        text_id: None,
        queued: VecDeque::new(),
        held: None,
        taken,
        done: false,
    };
    Box::pin(stream::unfold(step, Step::next).fuse())
}

struct Step {
    turn: Arc<dyn Turn>,
    state: Option<SharedState>,
    message_id: MessageId,
    reasoning_id: MessageId,
    cancel: CancellationToken,
    cancel_sent: bool,
    /// Whether the step's message has its id (from its first text).
    named: bool,
    /// The remote agent's id of the last text read.
    text_id: Option<MessageId>,
    queued: VecDeque<ModelEvent>,
    /// A tool call read, held until the remote agent shows what it needs.
    held: Option<(String, String, serde_json::Value)>,
    /// The conversation's call ids.
    taken: std::collections::HashSet<String>,
    done: bool,
}

type Item = Result<ModelEvent, crate::BoxError>;

impl Drop for Step {
    /// A step left before its end (the run was cancelled, its client stopped it, a layer timed
    /// it out), or after a cancellation, cancels the turn at once: the remote agent must not go
    /// on working for nobody until the thread's next prompt.
    fn drop(&mut self) {
        let ended = self.done && self.queued.is_empty();
        if !self.cancel_sent && (!ended || self.cancel.is_cancelled()) {
            self.cancel_sent = true;
            self.turn.cancel();
        }
    }
}

impl Step {
    async fn next(mut self) -> Option<(Item, Self)> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Some((Ok(event), self));
            }
            if self.done {
                return None;
            }
            let turn = self.turn.clone();
            let changed = turn.changed().notified();
            if let Some((id, ..)) = &self.held {
                if turn.is_settled(id) {
                    let (id, name, arguments) = self.held.take().expect("held");
                    return Some((Ok(self.tool_call(id, name, arguments)), self));
                }
                self.wait(turn.as_ref(), changed).await;
                continue;
            }
            match turn.next() {
                Some(Ok(update)) => {
                    if let Some(event) = self.event(update) {
                        return Some((Ok(event), self));
                    }
                }
                Some(Err(End::Finished(reason))) => {
                    self.done = true;
                    self.queued.push_back(ModelEvent::Finish(reason));
                }
                Some(Err(End::Failed(error))) => {
                    self.done = true;
                    return Some((Err(error.into()), self));
                }
                None => self.wait(turn.as_ref(), changed).await,
            }
        }
    }

    /// Until the turn changes; a cancelled run cancels the turn (which the remote agent then
    /// ends).
    async fn wait(&mut self, turn: &dyn Turn, changed: tokio::sync::futures::Notified<'_>) {
        let cancel = self.cancel.clone();
        let cancelled = tokio::select! {
            () = changed => false,
            () = cancel.cancelled(), if !self.cancel_sent => true,
        };
        if cancelled {
            self.cancel_sent = true;
            turn.cancel();
        }
    }

    /// The event of `update` (a tool call is held: see [`Self::tool_call`]).
    fn event(&mut self, update: Update) -> Option<ModelEvent> {
        match update {
            Update::Text(id, text) if !text.is_empty() => {
                // The step's message takes the remote agent's id for it, once.
                if !self.named {
                    self.named = true;
                    if let Some(id) = &id {
                        self.message_id = id.clone();
                    }
                }
                // Another message of the remote agent in the same step: a paragraph of its own,
                // not glued to the last one's words.
                let another = id.is_some() && self.text_id.is_some() && id != self.text_id;
                if id.is_some() {
                    self.text_id = id;
                }
                let delta = if another { format!("\n\n{text}") } else { text };
                Some(ModelEvent::TextDelta {
                    message_id: self.message_id.clone(),
                    delta: delta.into(),
                })
            }
            Update::Thought(id, text) if !text.is_empty() => Some(ModelEvent::ReasoningDelta {
                message_id: id.unwrap_or_else(|| self.reasoning_id.clone()),
                delta: text.into(),
            }),
            Update::Text(..) | Update::Thought(..) => None,
            Update::State(keys) => {
                if let Some(state) = &self.state {
                    state.update(|state| {
                        if !state.is_object() {
                            *state = serde_json::Value::Object(Default::default());
                        }
                        for (key, value) in keys {
                            state[key] = value;
                        }
                    });
                }
                None
            }
            Update::ToolCall {
                id,
                name,
                arguments,
            } => {
                self.held = Some((id, name, arguments));
                None
            }
        }
    }

    /// The events of a tool call the remote agent started; it ends the step.
    fn tool_call(&mut self, id: String, name: String, arguments: serde_json::Value) -> ModelEvent {
        let id = if self.taken.contains(&id) {
            let fresh = (2..)
                .map(|n| format!("{id}.{n}"))
                .find(|fresh| !self.taken.contains(fresh))
                .expect("an unused id");
            self.turn.rename(&id, &fresh);
            fresh
        } else {
            id
        };
        let id = ToolCallId::from(id);
        self.done = true;
        self.queued.extend([
            ModelEvent::ToolCallArgs {
                id: id.clone(),
                delta: arguments.to_string().into(),
            },
            ModelEvent::ToolCallEnd { id: id.clone() },
            ModelEvent::Finish(FinishReason::ToolCalls),
        ]);
        ModelEvent::ToolCallStart { id, name }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A turn that has already sent `updates` and ended.
    struct Said(std::sync::Mutex<VecDeque<Result<Update, End>>>, Notify);

    impl Turn for Said {
        fn next(&self) -> Option<Result<Update, End>> {
            self.0.lock().unwrap().pop_front()
        }
        fn is_settled(&self, _id: &str) -> bool {
            true
        }
        fn changed(&self) -> &Notify {
            &self.1
        }
        fn cancel(&self) {}
        fn rename(&self, _remote: &str, _run: &str) {}
    }

    #[tokio::test]
    async fn two_messages_of_one_step_stay_two_paragraphs() {
        use futures_util::StreamExt;
        let text = |id: &str, text: &str| Ok(Update::Text(Some(id.into()), text.to_owned()));
        let said = [
            text("a", "Hello"),
            text("a", " there."),
            text("b", "Anything"),
            text("b", " else?"),
            Err(End::Finished(FinishReason::Stop)),
        ];
        let turn = Arc::new(Said(std::sync::Mutex::new(said.into()), Notify::new()));
        let run = RunContext::new("t".into(), "r".into());
        let deltas: Vec<String> = steps(turn, &run, Default::default())
            .filter_map(|event| async move {
                match event.unwrap() {
                    ModelEvent::TextDelta { delta, .. } => Some(delta.to_string()),
                    _ => None,
                }
            })
            .collect()
            .await;
        assert_eq!(deltas.concat(), "Hello there.\n\nAnything else?");
    }

    #[test]
    fn threads_forget_the_oldest_idle_one_past_the_bound() {
        let mut threads = Threads::default();
        for n in 0..MAX_THREADS {
            assert!(
                threads
                    .insert(format!("t{n}").into(), n, |_| true)
                    .is_none()
            );
        }
        // t0 is busy (a turn open): t1 is the oldest idle one.
        let forgotten = threads.insert("new".into(), MAX_THREADS, |&n| n != 0);
        assert_eq!(forgotten, Some(1));
        assert_eq!(threads.get(&"t0".into()), Some(0));
        assert_eq!(threads.get(&"t1".into()), None);
        assert_eq!(threads.map.len(), MAX_THREADS);
        // None idle: kept anyway (a busy thread is never dropped).
        assert_eq!(threads.insert("more".into(), 0, |_| false), None);
    }
}
