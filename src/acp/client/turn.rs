//! What the bridge knows of a session's prompt turn: the updates not yet read and how the turn
//! ended ([`Updates`]), the tool calls and the permissions they wait for.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use agent_client_protocol::{
    Agent,
    v1::{
        ConnectionTo, Responder,
        schema::{
            self as acp, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionResponse,
            SelectedPermissionOutcome, SessionId, ToolCallContent, ToolCallStatus,
        },
    },
};
use tokio::sync::Notify;

use crate::{
    bridge::{End, Turn, Update, Updates},
    tool::ToolOutput,
};

/// The decision the run took on a call, for the agent's permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Allow,
    /// Allowed "always": the agent's own "allow always" option, if it offers one.
    AllowAlways,
    Reject,
}

#[derive(Default)]
pub(super) struct Call {
    /// The arguments the agent proposed.
    arguments: Option<serde_json::Value>,
    status: Option<ToolCallStatus>,
    content: Vec<ToolCallContent>,
    verdict: Option<Verdict>,
    /// The agent asked permission for it.
    asked: bool,
    /// A model step read it (the run decides on it, or its permission layer refused it).
    read: bool,
    asking: Option<(
        Responder<RequestPermissionResponse>,
        Vec<acp::PermissionOption>,
    )>,
}

/// One ACP session, the turn running in it, and its calls.
pub(super) struct Session {
    pub(super) id: SessionId,
    pub(super) connection: ConnectionTo<Agent>,
    /// Fires once the agent exited.
    pub(super) closed: tokio_util::sync::CancellationToken,
    state: Mutex<State>,
    pub(super) changed: Notify,
    /// Notified when the turn is cancelled (`session/cancel` sent).
    pub(super) cancelled: Notify,
    /// The user messages the agent was given (it keeps its own history).
    pub(super) sent: Sent,
}

/// The user messages an agent was given, by id, and whether it was told the conversation before
/// them (a session new to its thread is, once).
#[derive(Default)]
pub(super) struct Sent(
    Mutex<std::collections::HashSet<crate::id::MessageId>>,
    std::sync::atomic::AtomicBool,
);

impl Sent {
    /// Whether the conversation before the new messages is due (the first time only).
    pub(super) fn history_due(&self) -> bool {
        !self.1.swap(true, std::sync::atomic::Ordering::AcqRel)
    }

    /// Of `ids`, those not given yet; they count as given from now on.
    pub(super) fn unsent(&self, ids: &[crate::id::MessageId]) -> Vec<crate::id::MessageId> {
        let mut sent = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ids.iter()
            .filter(|id| sent.insert((*id).clone()))
            .cloned()
            .collect()
    }
}

#[derive(Default)]
struct State {
    updates: Updates,
    calls: HashMap<String, Call>,
    /// Calls approved before a restart, asked again: (name, arguments, the approved call's id).
    expected: Vec<(String, serde_json::Value, String)>,
    /// The calls that made them again, by the approved call's id.
    replayed: HashMap<String, String>,
    /// The first call the agent made instead, while one was expected: its name.
    instead: Option<String>,
    /// The number of the current turn.
    turn: u64,
    /// Its calls the run knows under another id.
    aliases: crate::bridge::Aliases,
}

impl Session {
    pub(super) fn new(
        id: SessionId,
        connection: ConnectionTo<Agent>,
        closed: tokio_util::sync::CancellationToken,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            connection,
            closed,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            cancelled: Notify::new(),
            sent: Sent::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a turn is open (started and not yet read to its end).
    pub(super) fn is_open(&self) -> bool {
        self.lock().updates.is_open()
    }

    /// Whether the open turn has ended (the agent answered the prompt).
    pub(super) fn has_ended(&self) -> bool {
        let state = self.lock();
        !state.updates.is_open() || state.updates.end().is_some()
    }

    /// A new turn: what the last one left is forgotten. Returns the turn's number, for
    /// [`end_turn`](Self::end_turn).
    pub(super) fn begin(&self) -> u64 {
        let mut state = self.lock();
        for (_, call) in state.calls.drain() {
            if let Some((responder, _)) = call.asking {
                let _ = responder.respond(cancelled());
            }
        }
        let turn = state.turn + 1;
        *state = State {
            updates: Updates::begin(),
            turn,
            ..State::default()
        };
        turn
    }

    /// Turn `turn` ended (the prompt's answer), if it is still the session's (an answer that
    /// comes after the next turn began ends nothing).
    pub(super) fn end_turn(&self, turn: u64, end: End) {
        if self.lock().turn == turn {
            self.end(end);
        }
    }

    pub(super) fn push(&self, update: Update) {
        let mut state = self.lock();
        if let Update::ToolCall {
            id,
            name,
            arguments,
        } = &update
        {
            // The same arguments (in any order), under the same name; or, when there are
            // arguments, under another title.
            let replay = state.expected.iter().position(|(n, a, _)| {
                a == arguments && (n == name || a.as_object().is_none_or(|o| !o.is_empty()))
            });
            let call = state.calls.entry(id.clone()).or_default();
            call.arguments = Some(arguments.clone());
            if let Some(at) = replay {
                // The approved call, made again: allowed (the agent may have asked already), and
                // not a new call of the run.
                call.verdict = Some(Verdict::Allow);
                let asking = call.asking.take();
                let (.., approved) = state.expected.remove(at);
                state.replayed.insert(approved, id.clone());
                drop(state);
                if let Some((responder, options)) = asking {
                    let _ = responder.respond(answer(Verdict::Allow, &options));
                }
                self.changed.notify_waiters();
                return;
            }
            if !state.expected.is_empty() && state.instead.is_none() {
                state.instead = Some(name.clone());
            }
        }
        state.updates.push(update);
        drop(state);
        self.changed.notify_waiters();
    }

    /// A `tool_call_update`: the call's status and content so far.
    pub(super) fn update_call(
        &self,
        id: &str,
        status: Option<ToolCallStatus>,
        content: Option<Vec<ToolCallContent>>,
    ) {
        let mut state = self.lock();
        let call = state.calls.entry(id.to_owned()).or_default();
        if status.is_some() {
            call.status = status;
        }
        if let Some(content) = content {
            call.content = content;
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// The turn ended (the prompt's answer, or the connection's end).
    pub(super) fn end(&self, end: End) {
        let mut state = self.lock();
        state.updates.finish(end);
        for call in state.calls.values_mut() {
            if let Some((responder, _)) = call.asking.take() {
                let _ = responder.respond(cancelled());
            }
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// Expects the agent to make the call `approved` (of `name` with `arguments`, approved before
    /// a restart) again in the next turn.
    pub(super) fn expect(&self, name: String, arguments: serde_json::Value, approved: String) {
        self.lock().expected.push((name, arguments, approved));
    }

    /// The call that made `approved` again, once the agent made it.
    pub(super) fn replayed(&self, approved: &str) -> Option<String> {
        self.lock().replayed.get(approved).cloned()
    }

    /// The name of the call the agent made instead of an expected one, if it did.
    pub(super) fn made_instead(&self) -> Option<String> {
        self.lock().instead.clone()
    }

    /// Whether `id` is a call of this session's turns.
    pub(super) fn knows(&self, id: &str) -> bool {
        let state = self.lock();
        state.calls.contains_key(state.aliases.remote(id))
    }

    /// The arguments the agent proposed for `id`.
    pub(super) fn proposed(&self, id: &str) -> Option<serde_json::Value> {
        let state = self.lock();
        state.calls.get(state.aliases.remote(id))?.arguments.clone()
    }

    /// Whether the agent asked permission for `id`.
    pub(super) fn was_asked(&self, id: &str) -> bool {
        let state = self.lock();
        state
            .calls
            .get(state.aliases.remote(id))
            .is_some_and(|call| call.asked)
    }

    /// The agent asks whether `id` may run: answered at once when the run already decided.
    pub(super) fn ask(
        &self,
        id: &str,
        options: Vec<acp::PermissionOption>,
        responder: Responder<RequestPermissionResponse>,
    ) {
        let mut state = self.lock();
        let call = state.calls.entry(id.to_owned()).or_default();
        call.asked = true;
        match call.verdict {
            Some(verdict) => {
                drop(state);
                let _ = responder.respond(answer(verdict, &options));
            }
            None => {
                call.asking = Some((responder, options));
                drop(state);
            }
        }
        // A step holding the call learns it is asked about.
        self.changed.notify_waiters();
    }

    /// The run's decision on `id` (the run's id); the agent's question, if it asked, is answered.
    pub(super) fn decide(&self, id: &str, verdict: Verdict) {
        let mut state = self.lock();
        let id = state.aliases.remote(id).to_owned();
        let call = state.calls.entry(id).or_default();
        call.verdict.get_or_insert(verdict);
        if let Some((responder, options)) = call.asking.take() {
            drop(state);
            let _ = responder.respond(answer(verdict, &options));
        }
    }

    /// Rejects every call of the turn a step read that the run did not let run (its tool
    /// service was never called: a permission layer said no). Calls not read yet are the next
    /// step's.
    pub(super) fn reject_undecided(&self) {
        let undecided: Vec<String> = self
            .lock()
            .calls
            .iter()
            .filter(|(_, call)| call.read && call.verdict.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in undecided {
            self.decide(&id, Verdict::Reject);
        }
    }

    /// The result of `id` once the agent says it completed or failed, or why it has none.
    pub(super) fn result(&self, id: &str) -> Option<Result<ToolOutput, String>> {
        let state = self.lock();
        let call = state.calls.get(state.aliases.remote(id))?;
        let text = || {
            call.content
                .iter()
                .filter_map(|content| match content {
                    ToolCallContent::Content(content) => match &content.content {
                        acp::ContentBlock::Text(text) => Some(text.text.clone()),
                        _ => None,
                    },
                    ToolCallContent::Diff(diff) => Some(format!("edited {}", diff.path.display())),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        match call.status {
            Some(ToolCallStatus::Completed) => Some(Ok(ToolOutput::text(text()))),
            Some(ToolCallStatus::Failed) => Some(Ok(ToolOutput::error(text()))),
            _ => state
                .updates
                .end()
                .map(|_| Err("the agent ended its turn before the call finished".to_owned())),
        }
    }
}

impl Turn for Session {
    fn next(&self) -> Option<Result<Update, End>> {
        let mut state = self.lock();
        let next = state.updates.next();
        if let Some(Ok(Update::ToolCall { id, .. })) = &next {
            state.calls.entry(id.clone()).or_default().read = true;
        }
        next
    }

    /// The agent asked permission for the call, or runs or ran it, or the turn ended.
    fn is_settled(&self, id: &str) -> bool {
        let state = self.lock();
        state.updates.end().is_some()
            || state.calls.get(id).is_some_and(|call| {
                call.asked
                    || matches!(
                        call.status,
                        Some(
                            ToolCallStatus::InProgress
                                | ToolCallStatus::Completed
                                | ToolCallStatus::Failed
                        )
                    )
            })
    }

    fn changed(&self) -> &Notify {
        &self.changed
    }

    fn rename(&self, remote: &str, run: &str) {
        self.lock().aliases.insert(remote, run);
    }

    fn cancel(&self) {
        if let Err(error) = self
            .connection
            .send_notification(acp::CancelNotification::new(self.id.clone()))
        {
            tracing::debug!(%error, "session/cancel could not be sent");
        }
        self.cancelled.notify_waiters();
    }
}

fn cancelled() -> RequestPermissionResponse {
    RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled)
}

/// The option of `options` that says `verdict` once (or always, when once is not offered).
fn answer(verdict: Verdict, options: &[acp::PermissionOption]) -> RequestPermissionResponse {
    let kinds = match verdict {
        Verdict::Allow => [
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ],
        Verdict::AllowAlways => [
            PermissionOptionKind::AllowAlways,
            PermissionOptionKind::AllowOnce,
        ],
        Verdict::Reject => [
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ],
    };
    kinds
        .iter()
        .find_map(|kind| options.iter().find(|option| option.kind == *kind))
        .map_or_else(cancelled, |option| {
            RequestPermissionResponse::new(RequestPermissionOutcome::Selected(
                SelectedPermissionOutcome::new(option.option_id.clone()),
            ))
        })
}
