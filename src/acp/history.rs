//! A conversation replayed as session updates (`session/load`).

use std::collections::HashSet;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, SessionUpdate, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::Value;

use super::{
    content::{to_block, tool_content},
    tool_call::{Kinds, announced},
};
use crate::message::Message;

/// The updates that show `messages` as an editor saw them live: user and agent messages and
/// thoughts under their ids, every tool call with its arguments and final status. A call that
/// never got a result (its turn was cancelled) ends `failed`.
pub(crate) fn replay(messages: &[Message], kinds: &Kinds) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut answered = HashSet::new();
    for message in messages {
        match message {
            Message::User { id, content } => {
                updates.extend(content.iter().map(|part| {
                    SessionUpdate::UserMessageChunk(
                        ContentChunk::new(to_block(part)).message_id(id.as_ref()),
                    )
                }));
            }
            Message::Reasoning { id, content, .. } if !content.is_empty() => {
                updates.push(SessionUpdate::AgentThoughtChunk(
                    ContentChunk::new(ContentBlock::from(content.as_str())).message_id(id.as_ref()),
                ));
            }
            Message::Assistant {
                id,
                content,
                tool_calls,
            } => {
                if !content.is_empty() {
                    updates.push(SessionUpdate::AgentMessageChunk(
                        ContentChunk::new(ContentBlock::from(content.as_str()))
                            .message_id(id.as_ref()),
                    ));
                }
                for call in tool_calls {
                    let arguments: Value =
                        serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
                    updates.push(SessionUpdate::ToolCall(announced(
                        call.id.to_string(),
                        &call.name,
                        kinds.of(&call.name),
                        arguments,
                    )));
                    open.push(call.id.to_string());
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let status = if *is_error {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                let content = tool_content(content);
                updates.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    tool_call_id.to_string(),
                    ToolCallUpdateFields::new().status(status).content(content),
                )));
                answered.insert(tool_call_id.to_string());
            }
            _ => {}
        }
    }
    updates.extend(
        open.into_iter()
            .filter(|id| !answered.contains(id))
            .map(|id| {
                SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    id,
                    ToolCallUpdateFields::new().status(ToolCallStatus::Failed),
                ))
            }),
    );
    updates
}
