//! What the bridge knows of a session's prompt turn: the updates not yet read, the tool calls and
//! the permissions they wait for, and how the turn ended.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard},
};

use agent_client_protocol::v1::{
    Responder,
    schema::{
        self as acp, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionResponse,
        SelectedPermissionOutcome, SessionId, ToolCallContent, ToolCallStatus,
    },
};
use tokio::sync::Notify;

use crate::tool::ToolOutput;

/// How many updates of a turn may wait for the model stream to read them; past it the oldest
/// text is dropped (a model stream always reads them as they come, so only a stalled run fills it).
pub(super) const MAX_PENDING_UPDATES: usize = 4096;

/// What a model stream reads, in order.
#[derive(Debug)]
pub(super) enum Update {
    Text(String),
    Thought(String),
    /// A tool call the agent started: its id, name and arguments.
    ToolCall {
        id: String,
        name: String,
        arguments: serde_json::Value,
    },
}

/// How a turn ended: the agent's stop reason, or why there is none.
#[derive(Debug, Clone)]
pub(super) enum End {
    Stopped(acp::StopReason),
    Failed(String),
}

/// The decision the run took on a call, for the agent's permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Allow,
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
    asking: Option<(
        Responder<RequestPermissionResponse>,
        Vec<acp::PermissionOption>,
    )>,
}

/// One ACP session, the turn running in it, and its calls.
pub(super) struct Session {
    pub(super) id: SessionId,
    state: Mutex<State>,
    pub(super) changed: Notify,
    /// The user messages the agent was given, by id (it keeps its own history).
    sent: Mutex<std::collections::HashSet<crate::id::MessageId>>,
}

#[derive(Default)]
struct State {
    open: bool,
    updates: VecDeque<Update>,
    end: Option<End>,
    calls: HashMap<String, Call>,
}

impl Session {
    pub(super) fn new(id: SessionId) -> Arc<Self> {
        Arc::new(Self {
            id,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            sent: Mutex::new(std::collections::HashSet::new()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a turn is open (started and not yet ended, or ended with updates unread).
    pub(super) fn is_open(&self) -> bool {
        self.lock().open
    }

    /// Whether the open turn has ended (the agent answered the prompt).
    pub(super) fn has_ended(&self) -> bool {
        let state = self.lock();
        !state.open || state.end.is_some()
    }

    /// Of `ids`, those the agent was not given yet; they count as given from now on.
    pub(super) fn unsent(&self, ids: &[crate::id::MessageId]) -> Vec<crate::id::MessageId> {
        let mut sent = self
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ids.iter()
            .filter(|id| sent.insert((*id).clone()))
            .cloned()
            .collect()
    }

    /// A new turn: what the last one left is forgotten.
    pub(super) fn begin(&self) {
        let mut state = self.lock();
        for (_, call) in state.calls.drain() {
            if let Some((responder, _)) = call.asking {
                let _ = responder.respond(cancelled());
            }
        }
        *state = State {
            open: true,
            ..State::default()
        };
    }

    pub(super) fn push(&self, update: Update) {
        let mut state = self.lock();
        if let Update::ToolCall { id, arguments, .. } = &update {
            state.calls.entry(id.clone()).or_default().arguments = Some(arguments.clone());
        }
        if state.updates.len() >= MAX_PENDING_UPDATES
            && let Some(at) = state
                .updates
                .iter()
                .position(|u| matches!(u, Update::Text(_) | Update::Thought(_)))
        {
            state.updates.remove(at);
        }
        state.updates.push_back(update);
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
        state.end.get_or_insert(end);
        for call in state.calls.values_mut() {
            if let Some((responder, _)) = call.asking.take() {
                let _ = responder.respond(cancelled());
            }
        }
        drop(state);
        self.changed.notify_waiters();
    }

    /// The next update, or how the turn ended once every update is read; `None` while neither.
    pub(super) fn next(&self) -> Option<Result<Update, End>> {
        let mut state = self.lock();
        if let Some(update) = state.updates.pop_front() {
            return Some(Ok(update));
        }
        let end = state.end.clone()?;
        state.open = false;
        Some(Err(end))
    }

    /// The arguments the agent proposed for `id`.
    pub(super) fn proposed(&self, id: &str) -> Option<serde_json::Value> {
        self.lock().calls.get(id)?.arguments.clone()
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
            None => call.asking = Some((responder, options)),
        }
    }

    /// Whether the agent asked permission for `id`.
    pub(super) fn was_asked(&self, id: &str) -> bool {
        self.lock().calls.get(id).is_some_and(|call| call.asked)
    }

    /// Whether the agent showed what `id` needs: it asked permission for it, or runs or ran it
    /// (or the turn ended).
    pub(super) fn is_settled(&self, id: &str) -> bool {
        let state = self.lock();
        state.end.is_some()
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

    /// The run's decision on `id`; the agent's question, if it asked, is answered.
    pub(super) fn decide(&self, id: &str, verdict: Verdict) {
        let mut state = self.lock();
        let call = state.calls.entry(id.to_owned()).or_default();
        call.verdict.get_or_insert(verdict);
        if let Some((responder, options)) = call.asking.take() {
            drop(state);
            let _ = responder.respond(answer(verdict, &options));
        }
    }

    /// Rejects every call of the turn the run did not let run (its tool service was never called:
    /// a permission layer said no).
    pub(super) fn reject_undecided(&self) {
        let undecided: Vec<String> = self
            .lock()
            .calls
            .iter()
            .filter(|(_, call)| call.verdict.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in undecided {
            self.decide(&id, Verdict::Reject);
        }
    }

    /// The result of `id` once the agent says it completed or failed, or why it has none.
    pub(super) fn result(&self, id: &str) -> Option<Result<ToolOutput, String>> {
        let state = self.lock();
        let call = state.calls.get(id)?;
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
                .end
                .as_ref()
                .map(|_| Err("the agent ended its turn before the call finished".to_owned())),
        }
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
