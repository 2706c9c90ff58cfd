//! AG-UI events as protobuf (`application/vnd.ag-ui.event+proto`, feature `proto`).
//!
//! Each event is an `ag_ui.Event` message (see `proto/ag_ui/*.proto`, wire-compatible with the
//! official messages) preceded by its length as a 4-byte big-endian integer.
//!
//! ```
//! use agent_tower::agui::{Event, proto};
//!
//! let mut out = Vec::new();
//! proto::encode_framed(&Event::step_started("turn 0".into()), &mut out);
//! let len = u32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
//! assert_eq!(out.len(), 4 + len);
//! ```

use prost::Message as _;
use serde_json::Value;

use super::{
    Event,
    event::{self, BaseEvent, RunFinishedOutcome, SubagentOutcome},
    input::{self, InputContent, InputSource, ToolContent},
};

/// The media type of the framing.
pub const MEDIA_TYPE: &str = "application/vnd.ag-ui.event+proto";

/// The `ag_ui` messages, generated from `proto/ag_ui/*.proto` by `scripts/protogen` (checked in,
/// so that a build compiles no protobuf compiler).
#[allow(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    clippy::all
)]
pub mod wire;

/// Appends `event`, framed (length prefix, then the message), to `out`. An
/// [`Event::Unknown`] (only produced by parsing) is skipped.
pub fn encode_framed(event: &Event, out: &mut Vec<u8>) {
    let Some(message) = to_wire(event) else {
        return;
    };
    let len = message.encoded_len();
    out.reserve(4 + len);
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    message.encode(out).expect("a Vec grows to fit the message");
}

fn value(v: &Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.iter().map(value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(object(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

fn object(map: &serde_json::Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: map.iter().map(|(k, v)| (k.clone(), value(v))).collect(),
    }
}

/// A JSON object as a `Struct`; anything else has no `Struct` form and is left out.
fn structure(v: &Value) -> Option<prost_types::Struct> {
    v.as_object().map(object)
}

fn string<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        _ => String::new(),
    }
}

fn base(kind: wire::EventType, base: &BaseEvent) -> Option<wire::BaseEvent> {
    Some(wire::BaseEvent {
        r#type: kind as i32,
        timestamp: base.timestamp.map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
        raw_event: base.raw_event.as_deref().map(value),
        metadata: base.metadata.as_deref().map(object),
    })
}

fn usage(usage: &Option<Vec<event::TokenUsage>>) -> Vec<wire::Usage> {
    let count = |n: Option<u64>| n.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    usage
        .iter()
        .flatten()
        .map(|u| wire::Usage {
            provider: u.provider.clone(),
            model: u.model.clone(),
            input_tokens: count(u.input_tokens),
            output_tokens: count(u.output_tokens),
            total_tokens: count(u.total_tokens),
            reasoning_tokens: count(u.reasoning_tokens),
            cached_input_tokens: count(u.cached_input_tokens),
            cache_write_input_tokens: count(u.cache_write_input_tokens),
        })
        .collect()
}

fn patch(ops: &[Value]) -> Vec<wire::JsonPatchOperation> {
    use wire::JsonPatchOperationType as Op;
    ops.iter()
        .map(|op| wire::JsonPatchOperation {
            op: match op["op"].as_str() {
                Some("remove") => Op::Remove,
                Some("replace") => Op::Replace,
                Some("move") => Op::Move,
                Some("copy") => Op::Copy,
                Some("test") => Op::Test,
                _ => Op::Add,
            } as i32,
            path: op["path"].as_str().unwrap_or_default().to_owned(),
            from: op["from"].as_str().map(str::to_owned),
            value: op.get("value").map(value),
        })
        .collect()
}

fn source(source: &InputSource) -> wire::InputContentSource {
    use wire::input_content_source::Source;
    let source = match source {
        InputSource::Data { value, mime_type } => Source::Data(wire::InputContentDataSource {
            value: value.clone(),
            mime_type: mime_type.clone(),
        }),
        InputSource::Url { value, mime_type } => Source::Url(wire::InputContentUrlSource {
            value: value.clone(),
            mime_type: mime_type.clone(),
        }),
        InputSource::File {
            value,
            provider,
            mime_type,
        } => Source::File(wire::InputContentFileSource {
            value: value.clone(),
            provider: provider.clone(),
            mime_type: mime_type.clone(),
        }),
    };
    wire::InputContentSource {
        source: Some(source),
    }
}

fn part(content: &InputContent) -> wire::InputContent {
    use wire::input_content::Part;
    let media = |s: &InputSource, metadata: &Option<Value>| wire::MediaInputPart {
        source: Some(source(s)),
        metadata: metadata.as_ref().map(value),
        id: None,
    };
    let part = match content {
        InputContent::Text { text } => Part::Text(wire::TextInputPart {
            text: text.clone(),
            id: None,
            metadata: None,
        }),
        InputContent::Image { source, metadata } => Part::Image(media(source, metadata)),
        InputContent::Audio { source, metadata } => Part::Audio(media(source, metadata)),
        InputContent::Video { source, metadata } => Part::Video(media(source, metadata)),
        InputContent::Document { source, metadata } => Part::Document(media(source, metadata)),
        InputContent::Binary {
            mime_type,
            id,
            url,
            data,
            filename,
        } => {
            let source = match (data, url.as_ref().or(id.as_ref())) {
                (Some(data), _) => InputSource::Data {
                    value: data.clone(),
                    mime_type: mime_type.clone(),
                },
                (None, Some(url)) => InputSource::Url {
                    value: url.clone(),
                    mime_type: Some(mime_type.clone()),
                },
                (None, None) => InputSource::Url {
                    value: String::new(),
                    mime_type: Some(mime_type.clone()),
                },
            };
            let metadata =
                serde_json::json!({"legacyBinary": true, "filename": filename, "id": id});
            Part::Document(media(&source, &Some(metadata)))
        }
    };
    wire::InputContent { part: Some(part) }
}

/// `content` for text, `content_parts` for parts.
fn content(content: &ToolContent) -> (Option<String>, Vec<wire::InputContent>) {
    match content {
        ToolContent::Text(text) => (Some(text.clone()), Vec::new()),
        ToolContent::Parts(parts) => (None, parts.iter().map(part).collect()),
    }
}

fn message(message: &input::Message) -> wire::Message {
    let role = match message {
        input::Message::Developer { .. } => "developer",
        input::Message::System { .. } => "system",
        input::Message::Assistant { .. } => "assistant",
        input::Message::User { .. } => "user",
        input::Message::Tool { .. } => "tool",
        input::Message::Activity { .. } => "activity",
        input::Message::Reasoning { .. } => "reasoning",
    };
    let mut wire = wire::Message {
        role: role.to_owned(),
        subagent_run_id: message.subagent_run_id().map(str::to_owned),
        ..wire::Message::default()
    };
    match message {
        input::Message::Developer { id, content, name }
        | input::Message::System { id, content, name } => {
            wire.id = id.to_string();
            wire.content = Some(content.clone());
            wire.name = name.clone();
        }
        input::Message::Assistant {
            id,
            content,
            name,
            tool_calls,
            ..
        } => {
            wire.id = id.to_string();
            wire.content = content.clone();
            wire.name = name.clone();
            wire.tool_calls = tool_calls
                .iter()
                .flatten()
                .map(|call| wire::ToolCall {
                    id: call.id.to_string(),
                    r#type: call.kind.clone(),
                    function: Some(wire::tool_call::Function {
                        name: call.function.name.clone(),
                        arguments: call.function.arguments.clone(),
                    }),
                    metadata: None,
                    encrypted_value: call.encrypted_value.clone(),
                })
                .collect();
        }
        input::Message::User {
            id,
            content: body,
            name,
        } => {
            wire.id = id.to_string();
            (wire.content, wire.content_parts) = content(body);
            wire.name = name.clone();
        }
        input::Message::Tool {
            id,
            content: body,
            tool_call_id,
            error,
            ..
        } => {
            wire.id = id.to_string();
            (wire.content, wire.content_parts) = content(body);
            wire.tool_call_id = Some(tool_call_id.to_string());
            wire.error = error.clone();
        }
        input::Message::Activity {
            id,
            activity_type,
            content,
        } => {
            wire.id = id.to_string();
            wire.activity_type = Some(activity_type.clone());
            wire.activity_content = Some(structure(content).unwrap_or_default());
        }
        input::Message::Reasoning {
            id,
            content,
            encrypted_value,
            ..
        } => {
            wire.id = id.to_string();
            wire.content = Some(content.clone());
            wire.encrypted_value.clone_from(encrypted_value);
        }
    }
    wire
}

fn run_input(input: &input::RunAgentInput) -> wire::RunAgentInput {
    wire::RunAgentInput {
        thread_id: input.thread_id.to_string(),
        run_id: input.run_id.to_string(),
        parent_run_id: input.parent_run_id.as_ref().map(ToString::to_string),
        state: input.state.as_ref().map(value),
        messages: input.messages.iter().map(message).collect(),
        tools: input
            .tools
            .iter()
            .map(|t| wire::Tool {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.parameters.as_ref().map(value),
                metadata: t.metadata.as_ref().and_then(structure),
            })
            .collect(),
        context: input
            .context
            .iter()
            .map(|c| wire::Context {
                description: c.description.clone(),
                value: c.value.clone(),
            })
            .collect(),
        forwarded_props: input.forwarded_props.as_ref().map(value),
        resume: input
            .resume
            .iter()
            .flatten()
            .map(|r| wire::ResumeEntry {
                interrupt_id: r.interrupt_id.clone(),
                status: string(&r.status),
                payload: r.payload.as_ref().map(value),
                metadata: r.metadata.as_ref().and_then(structure),
            })
            .collect(),
        protocol_version: input.protocol_version.clone(),
    }
}

fn interrupt(i: &input::Interrupt) -> wire::Interrupt {
    wire::Interrupt {
        id: i.id.clone(),
        reason: i.reason.clone(),
        message: i.message.clone(),
        tool_call_id: i.tool_call_id.as_ref().map(ToString::to_string),
        response_schema: i.response_schema.as_ref().map(value),
        expires_at: i.expires_at.clone(),
        metadata: i.metadata.as_ref().map(value),
        subagent_run_id: None,
    }
}

/// The `ag_ui.Event` message for `event`; `None` for [`Event::Unknown`].
#[must_use]
pub fn to_wire(event: &Event) -> Option<wire::Event> {
    use wire::{EventType as T, event::Event as W};
    let sub = |s: &Option<String>| s.clone();
    let id = |s: &dyn ToString| s.to_string();
    let message = match event {
        Event::RunStarted(e) => W::RunStarted(wire::RunStartedEvent {
            base_event: base(T::RunStarted, &e.base),
            thread_id: id(&e.thread_id),
            run_id: id(&e.run_id),
            parent_run_id: e.parent_run_id.as_ref().map(ToString::to_string),
            input: e.input.as_deref().map(run_input),
            protocol_version: e.protocol_version.clone(),
        }),
        Event::RunFinished(e) => {
            let (outcome, interrupts, pending) = match &e.outcome {
                None => (String::new(), Vec::new(), Vec::new()),
                Some(RunFinishedOutcome::Success {
                    pending_tool_call_ids,
                }) => (
                    "success".to_owned(),
                    Vec::new(),
                    pending_tool_call_ids
                        .iter()
                        .flatten()
                        .map(ToString::to_string)
                        .collect(),
                ),
                Some(RunFinishedOutcome::Interrupt { interrupts }) => (
                    "interrupt".to_owned(),
                    interrupts.iter().map(interrupt).collect(),
                    Vec::new(),
                ),
                Some(RunFinishedOutcome::Cancelled) => {
                    ("cancelled".to_owned(), Vec::new(), Vec::new())
                }
            };
            W::RunFinished(wire::RunFinishedEvent {
                base_event: base(T::RunFinished, &e.base),
                thread_id: id(&e.thread_id),
                run_id: id(&e.run_id),
                result: e.result.as_deref().map(value),
                outcome,
                interrupts,
                usage: usage(&e.usage),
                pending_tool_call_ids: pending,
            })
        }
        Event::RunError(e) => W::RunError(wire::RunErrorEvent {
            base_event: base(T::RunError, &e.base),
            code: e.code.clone(),
            message: e.message.clone(),
            usage: usage(&e.usage),
        }),
        Event::StepStarted(e) => W::StepStarted(wire::StepStartedEvent {
            base_event: base(T::StepStarted, &e.base),
            step_name: e.step_name.clone(),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::StepFinished(e) => W::StepFinished(wire::StepFinishedEvent {
            base_event: base(T::StepFinished, &e.base),
            step_name: e.step_name.clone(),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::TextMessageStart(e) => W::TextMessageStart(wire::TextMessageStartEvent {
            base_event: base(T::TextMessageStart, &e.base),
            message_id: id(&e.message_id),
            role: e.role.as_ref().map(string),
            name: e.name.clone(),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::TextMessageContent(e) => W::TextMessageContent(wire::TextMessageContentEvent {
            base_event: base(T::TextMessageContent, &e.base),
            message_id: id(&e.message_id),
            delta: e.delta.to_string(),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::TextMessageEnd(e) => W::TextMessageEnd(wire::TextMessageEndEvent {
            base_event: base(T::TextMessageEnd, &e.base),
            message_id: id(&e.message_id),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::TextMessageChunk(e) => W::TextMessageChunk(wire::TextMessageChunkEvent {
            base_event: base(T::TextMessageChunk, &e.base),
            message_id: e.message_id.as_ref().map(ToString::to_string),
            role: e.role.as_ref().map(string),
            delta: e.delta.clone(),
            name: e.name.clone(),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::ToolCallStart(e) => W::ToolCallStart(wire::ToolCallStartEvent {
            base_event: base(T::ToolCallStart, &e.base),
            tool_call_id: id(&e.tool_call_id),
            tool_call_name: e.tool_call_name.clone(),
            parent_message_id: e.parent_message_id.as_ref().map(ToString::to_string),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::ToolCallArgs(e) => W::ToolCallArgs(wire::ToolCallArgsEvent {
            base_event: base(T::ToolCallArgs, &e.base),
            tool_call_id: id(&e.tool_call_id),
            delta: e.delta.to_string(),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::ToolCallEnd(e) => W::ToolCallEnd(wire::ToolCallEndEvent {
            base_event: base(T::ToolCallEnd, &e.base),
            tool_call_id: id(&e.tool_call_id),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::ToolCallChunk(e) => W::ToolCallChunk(wire::ToolCallChunkEvent {
            base_event: base(T::ToolCallChunk, &e.base),
            tool_call_id: e.tool_call_id.as_ref().map(ToString::to_string),
            tool_call_name: e.tool_call_name.clone(),
            parent_message_id: e.parent_message_id.as_ref().map(ToString::to_string),
            delta: e.delta.clone(),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::ToolCallResult(e) => {
            let (content, content_parts) = content(&e.content);
            W::ToolCallResult(wire::ToolCallResultEvent {
                base_event: base(T::ToolCallResult, &e.base),
                subagent_run_id: sub(&e.subagent_run_id),
                message_id: id(&e.message_id),
                tool_call_id: id(&e.tool_call_id),
                content,
                role: e.role.as_ref().map(string),
                content_parts,
            })
        }
        Event::StateSnapshot(e) => W::StateSnapshot(wire::StateSnapshotEvent {
            base_event: base(T::StateSnapshot, &e.base),
            snapshot: Some(value(&e.snapshot)),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::StateDelta(e) => W::StateDelta(wire::StateDeltaEvent {
            base_event: base(T::StateDelta, &e.base),
            delta: patch(&e.delta),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::MessagesSnapshot(e) => W::MessagesSnapshot(wire::MessagesSnapshotEvent {
            base_event: base(T::MessagesSnapshot, &e.base),
            messages: e.messages.iter().map(message).collect(),
        }),
        Event::ActivitySnapshot(e) => W::ActivitySnapshot(wire::ActivitySnapshotEvent {
            base_event: base(T::ActivitySnapshot, &e.base),
            subagent_run_id: sub(&e.subagent_run_id),
            message_id: id(&e.message_id),
            activity_type: e.activity_type.clone(),
            content: structure(&e.content),
            replace: e.replace,
        }),
        Event::ActivityDelta(e) => W::ActivityDelta(wire::ActivityDeltaEvent {
            base_event: base(T::ActivityDelta, &e.base),
            subagent_run_id: sub(&e.subagent_run_id),
            message_id: id(&e.message_id),
            activity_type: e.activity_type.clone(),
            patch: patch(&e.patch),
        }),
        Event::Raw(e) => W::Raw(wire::RawEvent {
            base_event: base(T::Raw, &e.base),
            event: Some(value(&e.event)),
            source: e.source.clone(),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::Custom(e) => W::Custom(wire::CustomEvent {
            base_event: base(T::Custom, &e.base),
            name: e.name.clone(),
            value: Some(value(&e.value)),
            subagent_run_id: sub(&e.subagent_run_id),
        }),
        Event::ReasoningStart(e) => W::ReasoningStart(wire::ReasoningStartEvent {
            base_event: base(T::ReasoningStart, &e.base),
            subagent_run_id: sub(&e.subagent_run_id),
            message_id: id(&e.message_id),
        }),
        Event::ReasoningEnd(e) => W::ReasoningEnd(wire::ReasoningEndEvent {
            base_event: base(T::ReasoningEnd, &e.base),
            subagent_run_id: sub(&e.subagent_run_id),
            message_id: id(&e.message_id),
        }),
        Event::ReasoningMessageStart(e) => {
            W::ReasoningMessageStart(wire::ReasoningMessageStartEvent {
                base_event: base(T::ReasoningMessageStart, &e.base),
                subagent_run_id: sub(&e.subagent_run_id),
                message_id: id(&e.message_id),
                role: string(&e.role),
            })
        }
        Event::ReasoningMessageContent(e) => {
            W::ReasoningMessageContent(wire::ReasoningMessageContentEvent {
                base_event: base(T::ReasoningMessageContent, &e.base),
                subagent_run_id: sub(&e.subagent_run_id),
                message_id: id(&e.message_id),
                delta: e.delta.to_string(),
            })
        }
        Event::ReasoningMessageEnd(e) => W::ReasoningMessageEnd(wire::ReasoningMessageEndEvent {
            base_event: base(T::ReasoningMessageEnd, &e.base),
            subagent_run_id: sub(&e.subagent_run_id),
            message_id: id(&e.message_id),
        }),
        Event::ReasoningMessageChunk(e) => {
            W::ReasoningMessageChunk(wire::ReasoningMessageChunkEvent {
                base_event: base(T::ReasoningMessageChunk, &e.base),
                subagent_run_id: sub(&e.subagent_run_id),
                message_id: e.message_id.as_ref().map(ToString::to_string),
                delta: e.delta.clone(),
            })
        }
        Event::ReasoningEncryptedValue(e) => {
            W::ReasoningEncryptedValue(wire::ReasoningEncryptedValueEvent {
                base_event: base(T::ReasoningEncryptedValue, &e.base),
                subagent_run_id: sub(&e.subagent_run_id),
                subtype: string(&e.subtype),
                entity_id: e.entity_id.clone(),
                encrypted_value: e.encrypted_value.clone(),
            })
        }
        Event::SubagentStarted(e) => W::SubagentStarted(wire::SubagentStartedEvent {
            base_event: base(T::SubagentStarted, &e.base),
            subagent_run_id: e.subagent_run_id.clone(),
            name: e.name.clone(),
            description: e.description.clone(),
            parent_subagent_run_id: e.parent_subagent_run_id.clone(),
            parent_tool_call_id: e.parent_tool_call_id.as_ref().map(ToString::to_string),
            parent_message_id: e.parent_message_id.as_ref().map(ToString::to_string),
        }),
        Event::SubagentFinished(e) => {
            let (outcome, interrupt_ids) = match &e.outcome {
                None => (String::new(), Vec::new()),
                Some(SubagentOutcome::Success) => ("success".to_owned(), Vec::new()),
                Some(SubagentOutcome::Suspended { interrupt_ids }) => (
                    "suspended".to_owned(),
                    interrupt_ids.clone().unwrap_or_default(),
                ),
            };
            W::SubagentFinished(wire::SubagentFinishedEvent {
                base_event: base(T::SubagentFinished, &e.base),
                subagent_run_id: e.subagent_run_id.clone(),
                result: e.result.as_ref().map(value),
                outcome,
                interrupt_ids,
            })
        }
        Event::SubagentError(e) => W::SubagentError(wire::SubagentErrorEvent {
            base_event: base(T::SubagentError, &e.base),
            subagent_run_id: e.subagent_run_id.clone(),
            message: e.message.clone(),
            code: e.code.clone(),
        }),
        Event::Unknown => return None,
    };
    Some(wire::Event {
        event: Some(message),
    })
}
