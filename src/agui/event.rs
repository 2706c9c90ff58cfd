//! The 31 event types of AG-UI 1.0, with their exact camelCase wire fields.
//!
//! Every optional field is *omitted* when empty: the official TypeScript client rejects an
//! explicit `null`. Ids are any string.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::input::{Interrupt, Message, RunAgentInput};
use crate::{
    delta::Delta,
    id::{MessageId, RunId, ThreadId, ToolCallId},
};

/// Fields every event may carry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BaseEvent {
    /// Milliseconds since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<u64>,
    /// The native event this one was made from, for debugging (boxed, as `metadata`: rarely
    /// there, and every event carries the room for it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_event: Option<Box<Value>>,
    /// Free-form metadata; the key `"ag-ui"` is reserved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Box<serde_json::Map<String, Value>>>,
}

macro_rules! events {
    ($( $(#[$doc:meta])* $variant:ident = $wire:literal, )*) => {
        /// An AG-UI 1.0 event, tagged by `type` on the wire.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "type")]
        #[non_exhaustive]
        pub enum Event {
            $( $(#[$doc])* #[serde(rename = $wire)] $variant($variant), )*
            /// An event type this library does not know; only produced by parsing.
            #[serde(other, skip_serializing)]
            Unknown,
        }

        /// The type of an [`Event`], without its fields.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum EventType {
            $( $(#[$doc])* $variant, )*
            /// An unknown type.
            Unknown,
        }

        impl EventType {
            /// The wire name, e.g. `"RUN_STARTED"`.
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Self::$variant => $wire, )*
                    Self::Unknown => "UNKNOWN",
                }
            }

            /// Every known type, in the order of the specification.
            pub const ALL: &'static [EventType] = &[$( Self::$variant, )*];
        }

        impl Event {
            /// The event's type.
            #[must_use]
            pub fn kind(&self) -> EventType {
                match self {
                    $( Self::$variant(_) => EventType::$variant, )*
                    Self::Unknown => EventType::Unknown,
                }
            }

            /// The fields every event may carry (its time, its raw event, its metadata); none
            /// for an [`Event::Unknown`].
            #[must_use]
            pub fn base_mut(&mut self) -> Option<&mut BaseEvent> {
                match self {
                    $( Self::$variant(e) => Some(&mut e.base), )*
                    Self::Unknown => None,
                }
            }
        }

        $(
            impl From<$variant> for Event {
                fn from(event: $variant) -> Self {
                    Self::$variant(event)
                }
            }
        )*
    };
}

events! {
    /// A run started.
    RunStarted = "RUN_STARTED",
    /// A run finished (success, interrupt or cancelled).
    RunFinished = "RUN_FINISHED",
    /// A run failed. Terminal.
    RunError = "RUN_ERROR",
    /// A step (one model turn) started.
    StepStarted = "STEP_STARTED",
    /// A step finished.
    StepFinished = "STEP_FINISHED",
    /// A text message starts.
    TextMessageStart = "TEXT_MESSAGE_START",
    /// A piece of a text message.
    TextMessageContent = "TEXT_MESSAGE_CONTENT",
    /// A text message ends.
    TextMessageEnd = "TEXT_MESSAGE_END",
    /// Start, content and end in one (the client expands it).
    TextMessageChunk = "TEXT_MESSAGE_CHUNK",
    /// A tool call starts.
    ToolCallStart = "TOOL_CALL_START",
    /// A piece of a tool call's JSON arguments.
    ToolCallArgs = "TOOL_CALL_ARGS",
    /// A tool call's arguments are complete (not: the tool ran).
    ToolCallEnd = "TOOL_CALL_END",
    /// Start, args and end in one (the client expands it).
    ToolCallChunk = "TOOL_CALL_CHUNK",
    /// A tool call's result, as a new tool message.
    ToolCallResult = "TOOL_CALL_RESULT",
    /// The whole shared state.
    StateSnapshot = "STATE_SNAPSHOT",
    /// An RFC 6902 patch of the shared state.
    StateDelta = "STATE_DELTA",
    /// The whole conversation.
    MessagesSnapshot = "MESSAGES_SNAPSHOT",
    /// Creates or replaces an activity message.
    ActivitySnapshot = "ACTIVITY_SNAPSHOT",
    /// Patches an activity message.
    ActivityDelta = "ACTIVITY_DELTA",
    /// An event from another system, passed through.
    Raw = "RAW",
    /// An application-defined event.
    Custom = "CUSTOM",
    /// A reasoning span starts.
    ReasoningStart = "REASONING_START",
    /// A reasoning span ends.
    ReasoningEnd = "REASONING_END",
    /// A reasoning message starts.
    ReasoningMessageStart = "REASONING_MESSAGE_START",
    /// A piece of a reasoning message.
    ReasoningMessageContent = "REASONING_MESSAGE_CONTENT",
    /// A reasoning message ends.
    ReasoningMessageEnd = "REASONING_MESSAGE_END",
    /// Reasoning start, content and end in one.
    ReasoningMessageChunk = "REASONING_MESSAGE_CHUNK",
    /// Encrypted reasoning, for zero-data-retention providers.
    ReasoningEncryptedValue = "REASONING_ENCRYPTED_VALUE",
    /// A sub-agent run started.
    SubagentStarted = "SUBAGENT_STARTED",
    /// A sub-agent run finished.
    SubagentFinished = "SUBAGENT_FINISHED",
    /// A sub-agent run failed.
    SubagentError = "SUBAGENT_ERROR",
}

/// Constructors for the events of a stream, with every optional field left out.
impl Event {
    /// `STEP_STARTED`.
    pub fn step_started(step_name: String) -> Self {
        StepStarted {
            step_name,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `STEP_FINISHED`.
    pub fn step_finished(step_name: String) -> Self {
        StepFinished {
            step_name,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `TEXT_MESSAGE_START` of an assistant message.
    pub fn text_message_start(message_id: MessageId) -> Self {
        TextMessageStart {
            message_id,
            role: Some(TextMessageRole::Assistant),
            name: None,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `TEXT_MESSAGE_CONTENT`.
    pub fn text_message_content(message_id: MessageId, delta: impl Into<Delta>) -> Self {
        TextMessageContent {
            message_id,
            delta: delta.into(),
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `TEXT_MESSAGE_END`.
    pub fn text_message_end(message_id: MessageId) -> Self {
        TextMessageEnd {
            message_id,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `REASONING_START`.
    pub fn reasoning_start(message_id: MessageId) -> Self {
        ReasoningStart {
            message_id,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `REASONING_END`.
    pub fn reasoning_end(message_id: MessageId) -> Self {
        ReasoningEnd {
            message_id,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `REASONING_MESSAGE_START`.
    pub fn reasoning_message_start(message_id: MessageId) -> Self {
        ReasoningMessageStart {
            message_id,
            role: ReasoningRole::Reasoning,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `REASONING_MESSAGE_CONTENT`.
    pub fn reasoning_message_content(message_id: MessageId, delta: impl Into<Delta>) -> Self {
        ReasoningMessageContent {
            message_id,
            delta: delta.into(),
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `REASONING_ENCRYPTED_VALUE` for the reasoning message `message_id`.
    pub fn reasoning_encrypted_value(message_id: &MessageId, encrypted_value: String) -> Self {
        ReasoningEncryptedValue {
            subtype: EncryptedValueSubtype::Message,
            entity_id: message_id.to_string(),
            encrypted_value,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `REASONING_ENCRYPTED_VALUE` for the tool call `tool_call_id`.
    pub fn tool_call_encrypted_value(tool_call_id: &ToolCallId, encrypted_value: String) -> Self {
        ReasoningEncryptedValue {
            subtype: EncryptedValueSubtype::ToolCall,
            entity_id: tool_call_id.to_string(),
            encrypted_value,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `REASONING_MESSAGE_END`.
    pub fn reasoning_message_end(message_id: MessageId) -> Self {
        ReasoningMessageEnd {
            message_id,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `TOOL_CALL_START` of a call belonging to `parent_message_id`.
    pub fn tool_call_start(
        tool_call_id: ToolCallId,
        tool_call_name: String,
        parent_message_id: MessageId,
    ) -> Self {
        ToolCallStart {
            tool_call_id,
            tool_call_name,
            parent_message_id: Some(parent_message_id),
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `TOOL_CALL_ARGS`.
    pub fn tool_call_args(tool_call_id: ToolCallId, delta: impl Into<Delta>) -> Self {
        ToolCallArgs {
            tool_call_id,
            delta: delta.into(),
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `TOOL_CALL_END`.
    pub fn tool_call_end(tool_call_id: ToolCallId) -> Self {
        ToolCallEnd {
            tool_call_id,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `STATE_DELTA` of RFC 6902 operations.
    pub fn state_delta(operations: &[json_patch::PatchOperation]) -> Self {
        let delta = operations
            .iter()
            .map(|op| serde_json::to_value(op).expect("patch operations serialize"))
            .collect();
        StateDelta {
            delta,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `MESSAGES_SNAPSHOT` of a conversation, as clients are shown it
    /// ([`Message::conversation`](super::input::Message::conversation): a sub-agent's kept
    /// conversation as the messages it streamed).
    pub fn messages_snapshot<'a>(
        conversation: impl IntoIterator<Item = &'a crate::message::Message>,
    ) -> Self {
        MessagesSnapshot {
            messages: super::input::Message::conversation(conversation),
            base: BaseEvent::default(),
        }
        .into()
    }

    /// `STATE_SNAPSHOT`.
    pub fn state_snapshot(snapshot: Value) -> Self {
        StateSnapshot {
            snapshot,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }
}

impl Event {
    /// Whether it carries a piece of a stream (`TEXT_MESSAGE_CONTENT`, `TOOL_CALL_ARGS`,
    /// `REASONING_MESSAGE_CONTENT`): most of a run's events, written without their time.
    #[must_use]
    pub fn is_fragment(&self) -> bool {
        matches!(
            self,
            Self::TextMessageContent(_) | Self::ToolCallArgs(_) | Self::ReasoningMessageContent(_)
        )
    }

    /// Appends the event's JSON to `out`: the bytes `serde_json::to_writer` writes.
    ///
    /// The events that carry a stream's fragments (`TEXT_MESSAGE_CONTENT`, `TOOL_CALL_ARGS`,
    /// `REASONING_MESSAGE_CONTENT`: most of a run's events) are written without serde's map
    /// machinery when they carry nothing but their id and delta: their tag and keys are constant,
    /// and only the two strings need escaping.
    ///
    /// # Errors
    ///
    /// What `serde_json::to_writer` returns (a custom value that fails to serialize).
    pub fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let fragment = match self {
            Self::TextMessageContent(e) => Some((
                TEXT_FRAGMENT,
                &*e.message_id,
                &e.delta,
                &e.subagent_run_id,
                &e.base,
            )),
            Self::ToolCallArgs(e) => Some((
                ARGS_FRAGMENT,
                &*e.tool_call_id,
                &e.delta,
                &e.subagent_run_id,
                &e.base,
            )),
            Self::ReasoningMessageContent(e) => Some((
                REASONING_FRAGMENT,
                &*e.message_id,
                &e.delta,
                &e.subagent_run_id,
                &e.base,
            )),
            _ => None,
        };
        let Some((head, id, delta, None, _)) = fragment.filter(|(.., base)| base.is_empty()) else {
            return serde_json::to_writer(out, self);
        };
        out.extend_from_slice(head.as_bytes());
        serde_json::to_writer(&mut *out, id)?;
        out.extend_from_slice(br#","delta":"#);
        serde_json::to_writer(&mut *out, delta.as_str())?;
        out.push(b'}');
        Ok(())
    }
}

/// What a fragment's JSON starts with, up to its id's value.
const TEXT_FRAGMENT: &str = r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"#;
const ARGS_FRAGMENT: &str = r#"{"type":"TOOL_CALL_ARGS","toolCallId":"#;
const REASONING_FRAGMENT: &str = r#"{"type":"REASONING_MESSAGE_CONTENT","messageId":"#;

impl BaseEvent {
    /// Whether it carries none of its fields.
    fn is_empty(&self) -> bool {
        self.timestamp.is_none() && self.raw_event.is_none() && self.metadata.is_none()
    }
}

impl Event {
    /// The sub-agent run the event belongs to (`subagentRunId`), for the events that can carry
    /// one: every content and progress event, not the run's own (`RUN_*`, `MESSAGES_SNAPSHOT`)
    /// nor the `SUBAGENT_*` ones.
    #[must_use]
    pub fn subagent_run_id_mut(&mut self) -> Option<&mut Option<String>> {
        match self {
            Self::StepStarted(e) => Some(&mut e.subagent_run_id),
            Self::StepFinished(e) => Some(&mut e.subagent_run_id),
            Self::TextMessageStart(e) => Some(&mut e.subagent_run_id),
            Self::TextMessageContent(e) => Some(&mut e.subagent_run_id),
            Self::TextMessageEnd(e) => Some(&mut e.subagent_run_id),
            Self::TextMessageChunk(e) => Some(&mut e.subagent_run_id),
            Self::ToolCallStart(e) => Some(&mut e.subagent_run_id),
            Self::ToolCallArgs(e) => Some(&mut e.subagent_run_id),
            Self::ToolCallEnd(e) => Some(&mut e.subagent_run_id),
            Self::ToolCallChunk(e) => Some(&mut e.subagent_run_id),
            Self::ToolCallResult(e) => Some(&mut e.subagent_run_id),
            Self::StateSnapshot(e) => Some(&mut e.subagent_run_id),
            Self::StateDelta(e) => Some(&mut e.subagent_run_id),
            Self::ActivitySnapshot(e) => Some(&mut e.subagent_run_id),
            Self::ActivityDelta(e) => Some(&mut e.subagent_run_id),
            Self::Raw(e) => Some(&mut e.subagent_run_id),
            Self::Custom(e) => Some(&mut e.subagent_run_id),
            Self::ReasoningStart(e) => Some(&mut e.subagent_run_id),
            Self::ReasoningEnd(e) => Some(&mut e.subagent_run_id),
            Self::ReasoningMessageStart(e) => Some(&mut e.subagent_run_id),
            Self::ReasoningMessageContent(e) => Some(&mut e.subagent_run_id),
            Self::ReasoningMessageEnd(e) => Some(&mut e.subagent_run_id),
            Self::ReasoningMessageChunk(e) => Some(&mut e.subagent_run_id),
            Self::ReasoningEncryptedValue(e) => Some(&mut e.subagent_run_id),
            _ => None,
        }
    }
}

/// Declares one event struct: base fields flattened, camelCase, each field with its own attributes
/// (an option omitted when absent says so).
macro_rules! event_struct {
    ($(#[$doc:meta])* $name:ident { $( $(#[$fdoc:meta])* $field:ident : $ty:ty ),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            $( $(#[$fdoc])* pub $field: $ty, )*
            /// Base fields.
            #[serde(flatten)]
            pub base: BaseEvent,
        }
    };
}

event_struct! {
    /// `RUN_STARTED`.
    RunStarted {
        /// The thread.
        thread_id: ThreadId,
        /// The run.
        run_id: RunId,
        /// The run this one branches from.
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_run_id: Option<RunId>,
        /// The input, echoed.
        #[serde(skip_serializing_if = "Option::is_none")]
        input: Option<Box<RunAgentInput>>,
        /// The protocol version the producer speaks; `"1.0"` here.
        #[serde(skip_serializing_if = "Option::is_none")]
        protocol_version: Option<String>,
    }
}

event_struct! {
    /// `RUN_FINISHED`.
    RunFinished {
        /// The thread.
        thread_id: ThreadId,
        /// The run.
        run_id: RunId,
        /// The run's result, free-form (boxed: most runs have none).
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Box<Value>>,
        /// How the run ended; absent means success.
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<RunFinishedOutcome>,
        /// Token usage.
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<TokenUsage>>,
    }
}

event_struct! {
    /// `RUN_ERROR`.
    RunError {
        /// What went wrong, for people.
        message: String,
        /// A stable machine-readable code.
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        /// Token usage until the error.
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<TokenUsage>>,
    }
}

event_struct! {
    /// `STEP_STARTED`.
    StepStarted {
        /// The step's name, unique among active steps.
        step_name: String,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `STEP_FINISHED`.
    StepFinished {
        /// The step's name.
        step_name: String,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

/// The author of a streamed text message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextMessageRole {
    /// The developer.
    Developer,
    /// The system.
    System,
    /// The assistant (the default).
    Assistant,
    /// The user.
    User,
}

event_struct! {
    /// `TEXT_MESSAGE_START`.
    TextMessageStart {
        /// The message.
        message_id: MessageId,
        /// Its author (default assistant).
        #[serde(skip_serializing_if = "Option::is_none")]
        role: Option<TextMessageRole>,
        /// The author's name.
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `TEXT_MESSAGE_CONTENT`.
    TextMessageContent {
        /// The message.
        message_id: MessageId,
        /// The new text (may be empty).
        delta: Delta,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `TEXT_MESSAGE_END`.
    TextMessageEnd {
        /// The message.
        message_id: MessageId,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `TEXT_MESSAGE_CHUNK`.
    TextMessageChunk {
        /// The message (required on the first chunk).
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<MessageId>,
        /// Its author.
        #[serde(skip_serializing_if = "Option::is_none")]
        role: Option<TextMessageRole>,
        /// The new text.
        #[serde(skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
        /// The author's name.
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `TOOL_CALL_START`.
    ToolCallStart {
        /// The call.
        tool_call_id: ToolCallId,
        /// The tool's name.
        tool_call_name: String,
        /// The assistant message the call belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<MessageId>,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `TOOL_CALL_ARGS`.
    ToolCallArgs {
        /// The call.
        tool_call_id: ToolCallId,
        /// A fragment of the JSON arguments.
        delta: Delta,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `TOOL_CALL_END`.
    ToolCallEnd {
        /// The call.
        tool_call_id: ToolCallId,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `TOOL_CALL_CHUNK`.
    ToolCallChunk {
        /// The call (required on the first chunk).
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<ToolCallId>,
        /// The tool's name (required on the first chunk).
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_call_name: Option<String>,
        /// The assistant message the call belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<MessageId>,
        /// A fragment of the JSON arguments.
        #[serde(skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

/// The role of a tool result message: always `"tool"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolRole {
    /// `"tool"`.
    Tool,
}

event_struct! {
    /// `TOOL_CALL_RESULT`.
    ToolCallResult {
        /// The new tool message.
        message_id: MessageId,
        /// The call answered.
        tool_call_id: ToolCallId,
        /// The result.
        content: super::input::ToolContent,
        /// Always `tool`.
        #[serde(skip_serializing_if = "Option::is_none")]
        role: Option<ToolRole>,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `STATE_SNAPSHOT`.
    StateSnapshot {
        /// The whole state.
        snapshot: Value,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `STATE_DELTA`.
    StateDelta {
        /// RFC 6902 operations.
        delta: Vec<Value>,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `MESSAGES_SNAPSHOT`.
    MessagesSnapshot {
        /// The whole conversation.
        messages: Vec<Message>,
    }
}

event_struct! {
    /// `ACTIVITY_SNAPSHOT`.
    ActivitySnapshot {
        /// The activity message.
        message_id: MessageId,
        /// What kind of activity, e.g. `"tool_call"`.
        activity_type: String,
        /// The activity's content.
        content: Value,
        /// Whether to replace an existing message (default true).
        #[serde(skip_serializing_if = "Option::is_none")]
        replace: Option<bool>,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `ACTIVITY_DELTA`.
    ActivityDelta {
        /// The activity message.
        message_id: MessageId,
        /// What kind of activity.
        activity_type: String,
        /// RFC 6902 operations on the content.
        patch: Vec<Value>,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `RAW`.
    Raw {
        /// The foreign event.
        event: Value,
        /// Where it came from.
        #[serde(skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `CUSTOM`.
    Custom {
        /// The event's name, e.g. `"PredictState"`.
        name: String,
        /// Its value.
        value: Value,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `REASONING_START`.
    ReasoningStart {
        /// The reasoning span.
        message_id: MessageId,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `REASONING_END`.
    ReasoningEnd {
        /// The reasoning span.
        message_id: MessageId,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

/// The role of a reasoning message: always `"reasoning"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningRole {
    /// `"reasoning"`.
    Reasoning,
}

event_struct! {
    /// `REASONING_MESSAGE_START`.
    ReasoningMessageStart {
        /// The reasoning message.
        message_id: MessageId,
        /// Always `reasoning`.
        role: ReasoningRole,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `REASONING_MESSAGE_CONTENT`.
    ReasoningMessageContent {
        /// The reasoning message.
        message_id: MessageId,
        /// The new text.
        delta: Delta,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `REASONING_MESSAGE_END`.
    ReasoningMessageEnd {
        /// The reasoning message.
        message_id: MessageId,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `REASONING_MESSAGE_CHUNK`.
    ReasoningMessageChunk {
        /// The reasoning message (required on the first chunk).
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<MessageId>,
        /// The new text.
        #[serde(skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

/// What an encrypted reasoning value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EncryptedValueSubtype {
    /// A tool call.
    ToolCall,
    /// A message.
    Message,
}

event_struct! {
    /// `REASONING_ENCRYPTED_VALUE`.
    ReasoningEncryptedValue {
        /// What it belongs to.
        subtype: EncryptedValueSubtype,
        /// The id of the tool call or message.
        entity_id: String,
        /// The opaque value.
        encrypted_value: String,
        /// The sub-agent run this belongs to.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    }
}

event_struct! {
    /// `SUBAGENT_STARTED`.
    SubagentStarted {
        /// The sub-agent run.
        subagent_run_id: String,
        /// The sub-agent's name.
        name: String,
        /// What it does.
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// The sub-agent run that started this one.
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_subagent_run_id: Option<String>,
        /// The tool call that started it.
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<ToolCallId>,
        /// The message that started it.
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<MessageId>,
    }
}

/// How a sub-agent run finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum SubagentOutcome {
    /// It completed.
    Success,
    /// It waits for input.
    Suspended {
        /// The interrupts it waits on.
        #[serde(skip_serializing_if = "Option::is_none")]
        interrupt_ids: Option<Vec<String>>,
    },
}

event_struct! {
    /// `SUBAGENT_FINISHED`.
    SubagentFinished {
        /// The sub-agent run.
        subagent_run_id: String,
        /// Its result.
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// How it finished.
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<SubagentOutcome>,
    }
}

event_struct! {
    /// `SUBAGENT_ERROR`.
    SubagentError {
        /// The sub-agent run.
        subagent_run_id: String,
        /// What went wrong.
        message: String,
        /// A machine-readable code.
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    }
}

/// How a run finished (`RUN_FINISHED.outcome`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum RunFinishedOutcome {
    /// The run completed.
    Success {
        /// Client-side tool calls the next input must answer.
        #[serde(skip_serializing_if = "Option::is_none")]
        pending_tool_call_ids: Option<Vec<ToolCallId>>,
    },
    /// The run waits for the client to resolve interrupts.
    Interrupt {
        /// At least one interrupt.
        interrupts: Vec<Interrupt>,
    },
    /// The run was cancelled.
    Cancelled,
}

/// Token counts in `RUN_FINISHED` / `RUN_ERROR`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// The provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Prompt tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Answer tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Both.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Reasoning tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens from a cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Prompt tokens written to a cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_write_input_tokens: Option<u64>,
    /// What they cost, for readers in this process (the metrics). Never on the wire: AG-UI
    /// 1.0 clients strip the fields their schema lacks, with a warning; clients are told in the
    /// `CUSTOM` event [`agent_tower.cost`](super::future::COST_EVENT) instead.
    #[serde(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<crate::model::Cost>,
}

impl From<&crate::model::Usage> for TokenUsage {
    fn from(usage: &crate::model::Usage) -> Self {
        Self {
            input_tokens: Some(usage.input_tokens),
            output_tokens: Some(usage.output_tokens),
            total_tokens: Some(usage.total_tokens()),
            reasoning_tokens: usage.reasoning_tokens,
            cached_input_tokens: usage.cached_input_tokens,
            cache_write_input_tokens: usage.cache_write_input_tokens,
            cost: usage.cost,
            provider: usage.provider.clone(),
            model: usage.model.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_stays_small() {
        // Every event of a run moves through the run's queues (the channel to the run log, the
        // encoders' outboxes), whose room is counted in events: rare fields are boxed.
        assert!(
            std::mem::size_of::<Event>() <= 176,
            "{} bytes",
            std::mem::size_of::<Event>()
        );
    }

    #[test]
    fn there_are_31_event_types() {
        assert_eq!(EventType::ALL.len(), 31);
    }

    #[test]
    fn options_are_omitted_never_null() {
        let event = Event::from(TextMessageStart {
            message_id: "m1".into(),
            role: None,
            name: None,
            subagent_run_id: None,
            base: BaseEvent::default(),
        });
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m1"})
        );
    }

    #[test]
    fn outcome_is_a_tagged_union() {
        let event = Event::from(RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            result: None,
            outcome: Some(RunFinishedOutcome::Success {
                pending_tool_call_ids: Some(vec!["call_1".into()]),
            }),
            usage: None,
            base: BaseEvent::default(),
        });
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
                   "outcome": {"type": "success", "pendingToolCallIds": ["call_1"]}})
        );
    }

    #[test]
    fn parses_base_fields_and_unknown_types() {
        let event: Event = serde_json::from_value(json!({
            "type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{", "timestamp": 5,
            "somethingNew": true
        }))
        .unwrap();
        let Event::ToolCallArgs(args) = event else {
            panic!("wrong variant")
        };
        assert_eq!(args.base.timestamp, Some(5));
        let unknown: Event = serde_json::from_value(json!({"type": "FROM_THE_FUTURE"})).unwrap();
        assert_eq!(unknown.kind(), EventType::Unknown);
    }

    #[test]
    fn write_json_writes_what_serde_writes() {
        let texts = [
            "lorem ",
            "",
            "quote \" back \\ slash",
            "line\nfeed\ttab\u{1}",
            "é 日本 🦀",
        ];
        let mut events = Vec::new();
        for text in texts {
            events.push(Event::text_message_content(MessageId::from(text), text));
            events.push(Event::tool_call_args(ToolCallId::from(text), text));
            events.push(
                ReasoningMessageContent {
                    message_id: MessageId::from(text),
                    delta: text.into(),
                    subagent_run_id: None,
                    base: BaseEvent::default(),
                }
                .into(),
            );
        }
        // With a field the short path does not write: serde writes it.
        let mut with_subagent = Event::text_message_content(MessageId::from("m"), "x");
        *with_subagent.subagent_run_id_mut().unwrap() = Some("sub".into());
        events.push(with_subagent);
        let mut stamped = Event::text_message_content(MessageId::from("m"), "x");
        if let Event::TextMessageContent(e) = &mut stamped {
            e.base.timestamp = Some(7);
        }
        events.push(stamped);
        events.push(Event::step_started("turn 0".into()));
        for event in events {
            let mut written = Vec::new();
            event.write_json(&mut written).unwrap();
            assert_eq!(
                String::from_utf8(written).unwrap(),
                serde_json::to_string(&event).unwrap(),
                "{event:?}"
            );
        }
    }
}
