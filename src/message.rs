//! The protocol-neutral conversation: [`Message`], [`Role`] and [`ContentPart`].
//!
//! AG-UI and ACP each have their own message shapes; both are converted to and from these types at
//! their edge, so models and tools never see a wire type.
//!
//! ```
//! use agent_tower::message::{ContentPart, Message};
//!
//! let question = Message::user("What time is it?");
//! assert_eq!(question.text(), "What time is it?");
//! assert!(matches!(question.content()[0], ContentPart::Text { .. }));
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::{MessageId, RunId, ToolCallId};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the application.
    System,
    /// Instructions from the developer (OpenAI's newer name for system).
    Developer,
    /// The human.
    User,
    /// The model's visible answer, possibly with tool calls.
    Assistant,
    /// The model's reasoning, streamed apart from its answer.
    Reasoning,
    /// The result of one tool call.
    Tool,
    /// A sub-agent's conversation, kept in the thread (see [`Message::Subagent`]).
    Subagent,
}

/// Where the bytes of a media part are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum MediaSource {
    /// Inline, base64-encoded.
    Data {
        /// The base64 payload.
        data: String,
        /// Its media type, e.g. `image/png`.
        mime_type: String,
    },
    /// Behind a URL.
    Url {
        /// Where to fetch it.
        url: String,
        /// Its media type, when known.
        mime_type: Option<String>,
    },
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Structured data, typically a tool's result.
    Json {
        /// The value.
        value: Value,
    },
    /// An image.
    Image {
        /// Where it is.
        source: MediaSource,
    },
    /// A sound.
    Audio {
        /// Where it is.
        source: MediaSource,
    },
    /// A video.
    Video {
        /// Where it is.
        source: MediaSource,
    },
    /// A document (PDF, text file, …).
    Document {
        /// Where it is.
        source: MediaSource,
    },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// This part as text: text as is, JSON serialized, media described in one line.
    pub fn to_text(&self) -> String {
        match self {
            Self::Text { text } => text.clone(),
            Self::Json { value } => value.to_string(),
            Self::Image { source } => describe("image", source),
            Self::Audio { source } => describe("audio", source),
            Self::Video { source } => describe("video", source),
            Self::Document { source } => describe("document", source),
        }
    }
}

fn describe(kind: &str, source: &MediaSource) -> String {
    match source {
        MediaSource::Data { mime_type, data } => {
            format!("[{kind}: {mime_type}, {} bytes of base64]", data.len())
        }
        MediaSource::Url { url, .. } => format!("[{kind}: {url}]"),
    }
}

/// A tool call the assistant asked for, as it stays in the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The call's id; the tool message answering it carries the same id.
    pub id: ToolCallId,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model streamed them (JSON text, possibly invalid).
    pub arguments: String,
    /// What the provider needs back with the call (Gemini's thought signature), opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// Instructions from the application.
    System {
        /// The message's id.
        id: MessageId,
        /// The instructions.
        content: String,
    },
    /// Instructions from the developer.
    Developer {
        /// The message's id.
        id: MessageId,
        /// The instructions.
        content: String,
    },
    /// What the human said.
    User {
        /// The message's id.
        id: MessageId,
        /// Text and media.
        content: Vec<ContentPart>,
    },
    /// The model's answer.
    Assistant {
        /// The message's id: the id its text was streamed under.
        id: MessageId,
        /// The visible text, empty when the model only called tools.
        content: String,
        /// The tool calls the model asked for.
        tool_calls: Vec<ToolCallRequest>,
    },
    /// The model's reasoning.
    Reasoning {
        /// The message's id: the id the reasoning was streamed under.
        id: MessageId,
        /// The reasoning text.
        content: String,
        /// What the provider needs back with it (Anthropic's thinking signature), opaque.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted_value: Option<String>,
    },
    /// The result of a tool call.
    Tool {
        /// The message's id.
        id: MessageId,
        /// The call this answers.
        tool_call_id: ToolCallId,
        /// The result.
        content: Vec<ContentPart>,
        /// Whether the result describes a failure.
        is_error: bool,
    },
    /// The conversation of an agent called as a tool (a [sub-agent](crate::subagent)), kept after
    /// the results of the turn that called it. Once the call has its result, it is the
    /// sub-agent's transcript, which AG-UI clients are shown where it happened (its messages
    /// carry its `subagentRunId`); while the call has none, its run stopped at interrupts, and a
    /// later run that answers them resumes the call where it stopped. No model is shown it: the
    /// model requests leave it out, and the [`Agent`](crate::agent::Agent) takes a suspended one
    /// out of the conversation before it asks the model.
    Subagent {
        /// The message's id.
        id: MessageId,
        /// The call that started the sub-agent.
        tool_call_id: ToolCallId,
        /// The sub-agent's run.
        run_id: RunId,
        /// Its conversation: its task, then what it said and did.
        messages: Vec<Message>,
    },
}

/// The ids of the calls that have a result in `messages`.
pub(crate) fn answered_calls(messages: &[Message]) -> std::collections::HashSet<ToolCallId> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect()
}

impl Message {
    /// A user message with one text part and a fresh id.
    pub fn user(text: impl Into<String>) -> Self {
        Self::User {
            id: MessageId::new(),
            content: vec![ContentPart::text(text)],
        }
    }

    /// A system message with a fresh id.
    pub fn system(text: impl Into<String>) -> Self {
        Self::System {
            id: MessageId::new(),
            content: text.into(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant(id: MessageId, text: impl Into<String>) -> Self {
        Self::Assistant {
            id,
            content: text.into(),
            tool_calls: Vec::new(),
        }
    }

    /// The message's id.
    pub fn id(&self) -> &MessageId {
        match self {
            Self::System { id, .. }
            | Self::Developer { id, .. }
            | Self::User { id, .. }
            | Self::Assistant { id, .. }
            | Self::Reasoning { id, .. }
            | Self::Tool { id, .. }
            | Self::Subagent { id, .. } => id,
        }
    }

    /// Who wrote it.
    pub fn role(&self) -> Role {
        match self {
            Self::System { .. } => Role::System,
            Self::Developer { .. } => Role::Developer,
            Self::User { .. } => Role::User,
            Self::Assistant { .. } => Role::Assistant,
            Self::Reasoning { .. } => Role::Reasoning,
            Self::Tool { .. } => Role::Tool,
            Self::Subagent { .. } => Role::Subagent,
        }
    }

    /// The message's content parts (text-only roles give one text part; a sub-agent's
    /// conversation none).
    pub fn content(&self) -> Vec<ContentPart> {
        match self {
            Self::Subagent { .. } => Vec::new(),
            Self::System { content, .. }
            | Self::Developer { content, .. }
            | Self::Assistant { content, .. }
            | Self::Reasoning { content, .. } => vec![ContentPart::text(content.clone())],
            Self::User { content, .. } | Self::Tool { content, .. } => content.clone(),
        }
    }

    /// The message's content as one string (parts joined, media described; a sub-agent's
    /// conversation: empty).
    pub fn text(&self) -> String {
        match self {
            Self::Subagent { .. } => String::new(),
            Self::System { content, .. }
            | Self::Developer { content, .. }
            | Self::Assistant { content, .. }
            | Self::Reasoning { content, .. } => content.clone(),
            Self::User { content, .. } | Self::Tool { content, .. } => parts_to_text(content),
        }
    }
}

/// A conversation's title: the first line of its first user message, at most 80 characters
/// (`None` before anyone spoke).
#[must_use]
pub fn title(messages: &[Message]) -> Option<String> {
    let first = messages
        .iter()
        .find(|m| matches!(m, Message::User { .. }))?;
    first_line(&first.text())
}

/// The first non-empty line of `text`, trimmed, cut at 80 characters (`None` for blank text).
#[must_use]
pub fn first_line(text: &str) -> Option<String> {
    let line = text.lines().find(|l| !l.trim().is_empty())?.trim();
    Some(match line.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    })
}

/// Joins parts into one string, media described in text.
pub fn parts_to_text(parts: &[ContentPart]) -> String {
    parts_text(parts).into_owned()
}

/// [`parts_to_text`], borrowed when the parts are one text (a prompt's text is not copied to be
/// read).
#[must_use]
pub fn parts_text(parts: &[ContentPart]) -> std::borrow::Cow<'_, str> {
    match parts {
        [ContentPart::Text { text }] => std::borrow::Cow::Borrowed(text),
        parts => {
            let mut out = String::new();
            for part in parts {
                match part {
                    ContentPart::Text { text } => out.push_str(text),
                    other => out.push_str(&other.to_text()),
                }
            }
            std::borrow::Cow::Owned(out)
        }
    }
}
