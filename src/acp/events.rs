//! The run log's events as the session updates an editor is sent while a turn goes: how an
//! editor that reaches the agent across the network (the server's `/acp`) sees a turn, whichever
//! instance runs it. The log speaks AG-UI; this is its ACP translation.
//!
//! | logged event | session update |
//! |---|---|
//! | `TEXT_MESSAGE_CONTENT`, `TEXT_MESSAGE_CHUNK` | `agent_message_chunk` (with its `messageId`) |
//! | `REASONING_MESSAGE_CONTENT`, `REASONING_MESSAGE_CHUNK` | `agent_thought_chunk` |
//! | `TOOL_CALL_START` … `TOOL_CALL_END` | `tool_call` (title, kind, input, locations), and a `plan` for a plan tool |
//! | `TOOL_CALL_RESULT` | `tool_call_update` `completed` (`failed` for a call the person declined), the result as its content |
//!
//! A sub-agent's events are its own run's: the editor sees the call of the sub-agent, not its
//! inside. The run's own events (its start, steps, state) have no update; its end answers the
//! prompt.

use std::collections::{HashMap, HashSet};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, SessionUpdate, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::Value;

use super::{
    content::{to_block, tool_content},
    tool_call::{Kinds, announced, plan},
};
use crate::{
    agui::{Event, event::TextMessageRole},
    id::ToolCallId,
    message::Message,
};

/// How many calls may be announced and not yet complete at once; a step that opens more has
/// the extra ones shown when their results come, without their input.
const MAX_OPEN_CALLS: usize = 256;

/// A turn's translation: the calls whose arguments are still coming, those the person declined,
/// and for an editor that joins a turn in flight what it was already shown.
pub(crate) struct LoggedUpdates<'a> {
    kinds: &'a Kinds,
    open: HashMap<ToolCallId, OpenCall>,
    declined: HashSet<ToolCallId>,
    shown: Option<Shown>,
}

/// What an editor that joins a turn in flight was shown of the thread (its history replayed):
/// the messages, the calls, the calls answered. A run continued after an interrupt logs again
/// what the thread already holds; the turn's prompt is shown once.
#[derive(Default)]
pub(crate) struct Shown {
    messages: HashSet<String>,
    calls: HashSet<String>,
    answered: HashSet<String>,
}

impl Shown {
    /// What replaying `messages` showed.
    pub(crate) fn of(messages: &[Message]) -> Self {
        let mut shown = Self::default();
        for message in messages {
            shown.learn(message);
        }
        shown
    }

    fn learn(&mut self, message: &Message) {
        self.messages.insert(message.id().to_string());
        match message {
            Message::Assistant { tool_calls, .. } => {
                self.calls
                    .extend(tool_calls.iter().map(|call| call.id.to_string()));
            }
            Message::Tool { tool_call_id, .. } => {
                self.answered.insert(tool_call_id.to_string());
            }
            _ => {}
        }
    }
}

/// A call announced by `TOOL_CALL_START`, its arguments so far.
struct OpenCall {
    tool: String,
    arguments: String,
}

impl<'a> LoggedUpdates<'a> {
    /// A translation that gives tools the kinds in `kinds`.
    pub(crate) fn new(kinds: &'a Kinds) -> Self {
        Self {
            kinds,
            open: HashMap::new(),
            declined: HashSet::new(),
            shown: None,
        }
    }

    /// A translation for an editor that joins a turn in flight from its start, having been
    /// `shown` the thread: what it holds is not shown again, and the turn's prompt is.
    pub(crate) fn joining(kinds: &'a Kinds, shown: Shown) -> Self {
        Self {
            shown: Some(shown),
            ..Self::new(kinds)
        }
    }

    /// Whether the editor was shown `message` already.
    fn was_shown(&self, message: &str) -> bool {
        self.shown
            .as_ref()
            .is_some_and(|shown| shown.messages.contains(message))
    }

    /// The person declined `call` (it will not run): its result, the refusal, ends it `failed`,
    /// as the thread keeps it. The log's result says no more than its content.
    pub(crate) fn declined(&mut self, call: ToolCallId) {
        self.declined.insert(call);
    }

    /// The updates `event` is shown as, pushed to `out` (none for most events).
    pub(crate) fn translate(&mut self, event: &Event, out: &mut Vec<SessionUpdate>) {
        match event {
            Event::RunStarted(e) => {
                let (Some(shown), Some(input)) = (&mut self.shown, &e.input) else {
                    return;
                };
                for message in input.messages.iter().filter_map(|m| m.to_domain()) {
                    let new = !shown.messages.contains(message.id().as_str());
                    if let (true, Message::User { id, content }) = (new, &message) {
                        out.extend(content.iter().map(|part| {
                            SessionUpdate::UserMessageChunk(
                                ContentChunk::new(to_block(part)).message_id(id.as_ref()),
                            )
                        }));
                    }
                    shown.learn(&message);
                }
            }
            Event::TextMessageContent(e) if self.was_shown(e.message_id.as_str()) => {}
            Event::ReasoningMessageContent(e) if self.was_shown(e.message_id.as_str()) => {}
            Event::TextMessageChunk(e)
                if e.message_id
                    .as_ref()
                    .is_some_and(|id| self.was_shown(id.as_str())) => {}
            Event::ReasoningMessageChunk(e)
                if e.message_id
                    .as_ref()
                    .is_some_and(|id| self.was_shown(id.as_str())) => {}
            Event::ToolCallStart(e)
                if self
                    .shown
                    .as_ref()
                    .is_some_and(|shown| shown.calls.contains(e.tool_call_id.as_str())) => {}
            Event::ToolCallResult(e)
                if self
                    .shown
                    .as_ref()
                    .is_some_and(|shown| shown.answered.contains(e.tool_call_id.as_str())) => {}
            Event::TextMessageContent(e) if e.subagent_run_id.is_none() => {
                out.push(message(e.message_id.as_str(), &e.delta));
            }
            Event::TextMessageChunk(e)
                if e.subagent_run_id.is_none()
                    && matches!(e.role, None | Some(TextMessageRole::Assistant)) =>
            {
                if let (Some(id), Some(delta)) = (&e.message_id, &e.delta) {
                    out.push(message(id.as_str(), delta));
                }
            }
            Event::ReasoningMessageContent(e) if e.subagent_run_id.is_none() => {
                out.push(thought(e.message_id.as_str(), &e.delta));
            }
            Event::ReasoningMessageChunk(e) if e.subagent_run_id.is_none() => {
                if let (Some(id), Some(delta)) = (&e.message_id, &e.delta) {
                    out.push(thought(id.as_str(), delta));
                }
            }
            Event::ToolCallStart(e)
                if e.subagent_run_id.is_none() && self.open.len() < MAX_OPEN_CALLS =>
            {
                self.open.insert(
                    e.tool_call_id.clone(),
                    OpenCall {
                        tool: e.tool_call_name.clone(),
                        arguments: String::new(),
                    },
                );
            }
            Event::ToolCallArgs(e) => {
                if let Some(call) = self.open.get_mut(&e.tool_call_id) {
                    call.arguments.push_str(&e.delta);
                }
            }
            Event::ToolCallEnd(e) => {
                if let Some(call) = self.open.remove(&e.tool_call_id) {
                    let arguments: Value =
                        serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
                    let plan = plan(&call.tool, &arguments);
                    out.push(SessionUpdate::ToolCall(announced(
                        e.tool_call_id.to_string(),
                        &call.tool,
                        self.kinds.of(&call.tool),
                        arguments,
                    )));
                    out.extend(plan.map(SessionUpdate::Plan));
                }
            }
            Event::ToolCallResult(e) if e.subagent_run_id.is_none() => {
                let status = if self.declined.remove(&e.tool_call_id) {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                out.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    e.tool_call_id.to_string(),
                    ToolCallUpdateFields::new()
                        .status(status)
                        .content(tool_content(&e.content.to_parts())),
                )));
            }
            _ => {}
        }
    }
}

fn message(id: &str, delta: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(delta)).message_id(id))
}

fn thought(id: &str, delta: &str) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(ContentChunk::new(ContentBlock::from(delta)).message_id(id))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{
        agui::{
            event::{BaseEvent, ToolCallResult},
            input::ToolContent,
        },
        id::MessageId,
    };

    fn translated(events: &[Event]) -> Vec<Value> {
        translated_declining(events, None)
    }

    fn translated_declining(events: &[Event], declined: Option<&str>) -> Vec<Value> {
        let kinds = Kinds::default();
        let mut updates = LoggedUpdates::new(&kinds);
        if let Some(call) = declined {
            updates.declined(ToolCallId::from(call));
        }
        let mut out = Vec::new();
        for event in events {
            updates.translate(event, &mut out);
        }
        out.iter()
            .map(|update| serde_json::to_value(update).unwrap())
            .collect()
    }

    #[test]
    fn a_turn_reads_as_an_editor_sees_it_live() {
        let message = MessageId::from("m-1");
        let call = ToolCallId::from("call-1");
        let updates = translated(&[
            Event::text_message_start(message.clone()),
            Event::text_message_content(message.clone(), "Reading "),
            Event::text_message_content(message.clone(), "it."),
            Event::text_message_end(message.clone()),
            Event::tool_call_start(call.clone(), "read_file".into(), message.clone()),
            Event::tool_call_args(call.clone(), r#"{"path": "#),
            Event::tool_call_args(call.clone(), r#""src/main.rs"}"#),
            Event::tool_call_end(call.clone()),
            ToolCallResult {
                message_id: MessageId::from("t-1"),
                tool_call_id: call,
                content: ToolContent::Text("fn main() {}".into()),
                role: None,
                subagent_run_id: None,
                base: BaseEvent::default(),
            }
            .into(),
        ]);
        let kinds: Vec<&str> = updates
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "agent_message_chunk",
                "agent_message_chunk",
                "tool_call",
                "tool_call_update"
            ]
        );
        assert_eq!(updates[0]["content"]["text"], "Reading ");
        assert_eq!(updates[1]["messageId"], "m-1");
        assert_eq!(updates[2]["toolCallId"], "call-1");
        assert_eq!(updates[2]["title"], "read_file src/main.rs");
        assert_eq!(updates[2]["kind"], "read");
        assert_eq!(updates[2]["rawInput"], json!({"path": "src/main.rs"}));
        assert_eq!(updates[2]["locations"][0]["path"], "src/main.rs");
        assert_eq!(updates[3]["status"], "completed");
        assert_eq!(updates[3]["content"][0]["content"]["text"], "fn main() {}");
    }

    #[test]
    fn a_declined_calls_result_ends_it_failed() {
        let result = |call: &str| -> Event {
            ToolCallResult {
                message_id: MessageId::from("t-1"),
                tool_call_id: ToolCallId::from(call),
                content: ToolContent::Text("the user declined `remember`".into()),
                role: None,
                subagent_run_id: None,
                base: BaseEvent::default(),
            }
            .into()
        };
        let updates = translated_declining(&[result("call-1"), result("call-2")], Some("call-1"));
        assert_eq!(updates[0]["status"], "failed");
        assert_eq!(updates[1]["status"], "completed");
    }

    #[test]
    fn a_subagents_inside_and_a_call_cut_short_are_not_shown() {
        let message = MessageId::from("m-1");
        let mut inner = Event::text_message_content(message.clone(), "inside");
        if let Event::TextMessageContent(e) = &mut inner {
            e.subagent_run_id = Some("sub-1".into());
        }
        let cut = ToolCallId::from("call-cut");
        let updates = translated(&[
            inner,
            Event::tool_call_start(cut.clone(), "write_file".into(), message),
            Event::tool_call_args(cut.clone(), r#"{"path": "a"#),
        ]);
        assert_eq!(updates, Vec::<Value>::new());
    }
}
