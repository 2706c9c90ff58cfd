//! `RunAgentInput` (the body of an AG-UI request) and the AG-UI message union, with their
//! conversions to and from the protocol-neutral [`crate::message`] types.
//!
//! Parsing is lenient where the protocol is: unknown fields are ignored, `tools` and `context`
//! default to empty, ids are any string.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    context::RunContext,
    id::{MessageId, RunId, ThreadId, ToolCallId},
    message::{self, ContentPart, MediaSource, ToolCallRequest},
    run::{ContextEntry, RunRequest},
    tool::ToolSpec,
};

/// The body of an AG-UI run request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The thread.
    pub thread_id: ThreadId,
    /// The run the client allocated.
    pub run_id: RunId,
    /// The run this one branches from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<RunId>,
    /// The shared state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// The conversation.
    pub messages: Vec<Message>,
    /// Tools the client executes.
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// Context for the agent.
    #[serde(default)]
    pub context: Vec<Context>,
    /// Anything else the client forwards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forwarded_props: Option<Value>,
    /// Answers to the interrupts of the previous run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<Vec<ResumeEntry>>,
    /// The protocol version the client speaks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
}

impl RunAgentInput {
    /// An input for a new run with `messages`, from a client of this crate's protocol version.
    pub fn new(thread_id: ThreadId, run_id: RunId, messages: Vec<Message>) -> Self {
        Self {
            thread_id,
            run_id,
            parent_run_id: None,
            state: None,
            messages,
            tools: Vec::new(),
            context: Vec::new(),
            forwarded_props: None,
            resume: None,
            protocol_version: Some(super::PROTOCOL_VERSION.to_owned()),
        }
    }

    /// The run request this input asks for: messages, client tools, context and state converted;
    /// `forwardedProps` stored as a [`ForwardedProps`](crate::context::ForwardedProps) extension,
    /// the client's [`ClientProtocol`] as another.
    #[must_use]
    pub fn to_run_request(&self) -> RunRequest {
        let mut run = RunContext::new(self.thread_id.clone(), self.run_id.clone());
        run.extensions
            .insert(ClientProtocol::declared(self.protocol_version.as_deref()));
        if let Some(props) = &self.forwarded_props {
            run.extensions
                .insert(crate::context::ForwardedProps(props.clone()));
        }
        if let Some(resume) = self.resume.as_ref().filter(|resume| !resume.is_empty()) {
            run.extensions.insert(Answers(resume.clone()));
        }
        RunRequest {
            messages: self
                .messages
                .iter()
                .filter_map(Message::to_domain)
                .collect(),
            client_tools: self.tools.iter().map(Tool::to_spec).collect(),
            context: self
                .context
                .iter()
                .map(|c| ContextEntry {
                    description: c.description.clone(),
                    value: c.value.clone(),
                })
                .collect(),
            state: self.state.clone().filter(|s| !s.is_null()),
            run,
        }
    }
}

/// The answers a run brings to interrupts (its input's `resume`), kept in
/// [`RunContext::extensions`] for its `RUN_STARTED` to echo: what was decided, and when.
#[derive(Debug, Clone)]
pub(crate) struct Answers(pub(crate) Vec<ResumeEntry>);

/// The AG-UI generation of the client that started a run, read from its input's
/// `protocolVersion` and kept in [`RunContext::extensions`].
///
/// 1.0 clients declare `protocolVersion: "1.0"`; clients before 1.0 declare nothing, and their
/// schema refuses what 1.0 added to `RUN_FINISHED` (the `cancelled` outcome, `pendingToolCallIds`
/// on success): CopilotKit 1.x runs on `@ag-ui/client` 0.0.x and fails the run on either. For them
/// a cancelled run ends with `RUN_ERROR` (code `cancelled`) and a run waiting for client tools with
/// a plain success (the calls without results are the pending ones). A run with no
/// `ClientProtocol` (not started from an AG-UI input) speaks 1.0.
///
/// ```
/// use agent_tower::agui::{RunAgentInput, input::ClientProtocol};
///
/// let protocol = |input: &RunAgentInput| input.to_run_request().run.extensions.get::<ClientProtocol>().copied();
/// let mut input = RunAgentInput::new("t".into(), "r".into(), vec![]); // says "1.0"
/// assert_eq!(protocol(&input), Some(ClientProtocol::V1));
/// input.protocol_version = None; // what a client before 1.0 sends
/// assert_eq!(protocol(&input), Some(ClientProtocol::PreV1));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClientProtocol {
    /// AG-UI 1.0 or later.
    #[default]
    V1,
    /// Before 1.0 (0.0.x): no `cancelled` outcome, no `pendingToolCallIds`.
    PreV1,
}

impl ClientProtocol {
    /// The generation of a client that declared `version` (`None`: it declared none).
    #[must_use]
    pub fn declared(version: Option<&str>) -> Self {
        match version {
            None => Self::PreV1,
            Some(version) if version.trim().starts_with("0.") => Self::PreV1,
            Some(_) => Self::V1,
        }
    }
}

/// A tool the client offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// A JSON Schema of its arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Free-form metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl Tool {
    /// The AG-UI tool of a protocol-neutral spec.
    #[must_use]
    pub fn from_spec(spec: &ToolSpec) -> Self {
        Self {
            name: spec.name.clone(),
            description: spec.description.clone(),
            parameters: Some(spec.parameters.clone()),
            metadata: None,
        }
    }

    /// The protocol-neutral spec.
    #[must_use]
    pub fn to_spec(&self) -> ToolSpec {
        let spec = ToolSpec::new(self.name.clone(), self.description.clone());
        match &self.parameters {
            Some(schema) => spec.parameters(schema.clone()),
            None => spec,
        }
    }
}

/// A piece of context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    /// What it is.
    pub description: String,
    /// The value.
    pub value: String,
}

/// An interrupt the run waits on (`RUN_FINISHED.outcome.interrupts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    /// The interrupt.
    pub id: String,
    /// Why: `tool_call`, `input_required`, `confirmation` or `fw:name`.
    pub reason: String,
    /// For people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The tool call waiting for approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<ToolCallId>,
    /// The schema of an acceptable resume payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
    /// When it expires (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Free-form metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// How the client resolved an interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    /// Answered.
    Resolved,
    /// Dismissed.
    Cancelled,
}

/// An answer to an interrupt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    /// The interrupt answered.
    pub interrupt_id: String,
    /// How.
    pub status: ResumeStatus,
    /// The answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// Free-form metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// A tool call inside an assistant message (OpenAI-shaped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The call.
    pub id: ToolCallId,
    /// Always `"function"`.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function called.
    pub function: FunctionCall,
    /// Opaque provider data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted_value: Option<String>,
}

fn function_type() -> String {
    "function".to_owned()
}

/// The function of a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON text.
    pub arguments: String,
}

/// Where a media part's bytes are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum InputSource {
    /// Inline base64.
    Data {
        /// The payload.
        value: String,
        /// Its media type.
        mime_type: String,
    },
    /// A URL.
    Url {
        /// The URL.
        value: String,
        /// Its media type.
        #[serde(skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// A provider's file handle.
    File {
        /// The handle.
        value: String,
        /// Whose handle.
        #[serde(skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
        /// Its media type.
        #[serde(skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

/// One part of multimodal content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum InputContent {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Where.
        source: InputSource,
        /// Free-form metadata.
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Value>,
    },
    /// Audio.
    Audio {
        /// Where.
        source: InputSource,
        /// Free-form metadata.
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Value>,
    },
    /// Video.
    Video {
        /// Where.
        source: InputSource,
        /// Free-form metadata.
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Value>,
    },
    /// A document.
    Document {
        /// Where.
        source: InputSource,
        /// Free-form metadata.
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Value>,
    },
    /// The legacy (0.0.x) binary part.
    Binary {
        /// Its media type.
        mime_type: String,
        /// An id.
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// A URL.
        #[serde(skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// Inline base64.
        #[serde(skip_serializing_if = "Option::is_none")]
        data: Option<String>,
        /// A file name.
        #[serde(skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
}

/// A string, or content parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolContent {
    /// Plain text.
    Text(String),
    /// Parts.
    Parts(Vec<InputContent>),
}

/// A message of the AG-UI conversation, tagged by `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "role",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Message {
    /// From the developer.
    Developer {
        /// The message.
        id: MessageId,
        /// The text.
        content: String,
        /// The author's name.
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// From the system.
    System {
        /// The message.
        id: MessageId,
        /// The text.
        content: String,
        /// The author's name.
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// From the assistant.
    Assistant {
        /// The message.
        id: MessageId,
        /// The text.
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        /// The author's name.
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Tool calls.
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_calls: Option<Vec<ToolCall>>,
        /// The sub-agent run that wrote it, when a sub-agent did (see [`Message::to_domain`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// From the user.
    User {
        /// The message.
        id: MessageId,
        /// Text or parts.
        content: ToolContent,
        /// The author's name.
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A tool's result.
    Tool {
        /// The message.
        id: MessageId,
        /// The result.
        content: ToolContent,
        /// The call answered.
        tool_call_id: ToolCallId,
        /// The failure, if the tool failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The sub-agent run that made the call, when a sub-agent did.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
    /// A UI activity (client-side only; never given to the model).
    Activity {
        /// The message.
        id: MessageId,
        /// What kind.
        activity_type: String,
        /// Its content.
        content: Value,
    },
    /// The model's reasoning.
    Reasoning {
        /// The message.
        id: MessageId,
        /// The text.
        content: String,
        /// What the provider needs back with it, opaque (`REASONING_ENCRYPTED_VALUE`).
        #[serde(skip_serializing_if = "Option::is_none")]
        encrypted_value: Option<String>,
        /// The sub-agent run that reasoned, when a sub-agent did.
        #[serde(skip_serializing_if = "Option::is_none")]
        subagent_run_id: Option<String>,
    },
}

impl Message {
    /// The message's id.
    #[must_use]
    pub fn id(&self) -> &MessageId {
        match self {
            Self::Developer { id, .. }
            | Self::System { id, .. }
            | Self::Assistant { id, .. }
            | Self::User { id, .. }
            | Self::Tool { id, .. }
            | Self::Activity { id, .. }
            | Self::Reasoning { id, .. } => id,
        }
    }

    /// The sub-agent run that wrote the message, when a sub-agent did.
    #[must_use]
    pub fn subagent_run_id(&self) -> Option<&str> {
        match self {
            Self::Assistant {
                subagent_run_id, ..
            }
            | Self::Tool {
                subagent_run_id, ..
            }
            | Self::Reasoning {
                subagent_run_id, ..
            } => subagent_run_id.as_deref(),
            _ => None,
        }
    }

    /// The protocol-neutral message; `None` for activity messages, which are UI only, and for a
    /// sub-agent's messages (with a `subagentRunId`): they are the sub-agent's transcript, which
    /// the thread keeps ([`Message::Subagent`](message::Message::Subagent)) and no model of the
    /// parent is shown.
    #[must_use]
    pub fn to_domain(&self) -> Option<message::Message> {
        if self.subagent_run_id().is_some() {
            return None;
        }
        Some(match self {
            Self::Developer { id, content, .. } => message::Message::Developer {
                id: id.clone(),
                content: content.clone(),
            },
            Self::System { id, content, .. } => message::Message::System {
                id: id.clone(),
                content: content.clone(),
            },
            Self::Assistant {
                id,
                content,
                tool_calls,
                ..
            } => message::Message::Assistant {
                id: id.clone(),
                content: content.clone().unwrap_or_default(),
                tool_calls: tool_calls
                    .iter()
                    .flatten()
                    .map(|call| ToolCallRequest {
                        id: call.id.clone(),
                        name: call.function.name.clone(),
                        arguments: call.function.arguments.clone(),
                        encrypted_value: call.encrypted_value.clone(),
                    })
                    .collect(),
            },
            Self::User { id, content, .. } => message::Message::User {
                id: id.clone(),
                content: content.to_parts(),
            },
            Self::Tool {
                id,
                content,
                tool_call_id,
                error,
                ..
            } => {
                let mut parts = content.to_parts();
                if let Some(error) = error
                    && parts.iter().all(|p| p.to_text().is_empty())
                {
                    parts = vec![ContentPart::text(error.clone())];
                }
                message::Message::Tool {
                    id: id.clone(),
                    tool_call_id: tool_call_id.clone(),
                    content: parts,
                    is_error: error.is_some(),
                }
            }
            Self::Reasoning {
                id,
                content,
                encrypted_value,
                ..
            } => message::Message::Reasoning {
                id: id.clone(),
                content: content.clone(),
                encrypted_value: encrypted_value.clone(),
            },
            Self::Activity { .. } => return None,
        })
    }
}

impl Message {
    /// A conversation on the wire, as a client is shown it: each message as
    /// [`from_domain`](Self::from_domain) gives it, and each sub-agent's kept conversation
    /// ([`Message::Subagent`](message::Message::Subagent)) as the messages its client saw stream
    /// (what it said and did, not its task), each carrying its `subagentRunId`.
    #[must_use]
    pub fn conversation<'a>(messages: impl IntoIterator<Item = &'a message::Message>) -> Vec<Self> {
        let mut wire = Vec::new();
        for message in messages {
            push_shown(&mut wire, message, None);
        }
        wire
    }

    /// The message on the wire; `None` for a sub-agent's kept conversation
    /// ([`Message::Subagent`](message::Message::Subagent)), which is not one message (see
    /// [`conversation`](Self::conversation)).
    #[must_use]
    pub fn from_domain(message: &message::Message) -> Option<Self> {
        Some(match message {
            message::Message::Subagent { .. } => return None,
            message::Message::System { id, content } => Self::System {
                id: id.clone(),
                content: content.clone(),
                name: None,
            },
            message::Message::Developer { id, content } => Self::Developer {
                id: id.clone(),
                content: content.clone(),
                name: None,
            },
            message::Message::User { id, content } => Self::User {
                id: id.clone(),
                content: ToolContent::from_parts(content),
                name: None,
            },
            message::Message::Assistant {
                id,
                content,
                tool_calls,
            } => Self::Assistant {
                id: id.clone(),
                content: (!content.is_empty()).then(|| content.clone()),
                name: None,
                subagent_run_id: None,
                tool_calls: (!tool_calls.is_empty()).then(|| {
                    tool_calls
                        .iter()
                        .map(|call| ToolCall {
                            id: call.id.clone(),
                            kind: function_type(),
                            function: FunctionCall {
                                name: call.name.clone(),
                                arguments: call.arguments.clone(),
                            },
                            encrypted_value: call.encrypted_value.clone(),
                        })
                        .collect()
                }),
            },
            message::Message::Reasoning {
                id,
                content,
                encrypted_value,
            } => Self::Reasoning {
                id: id.clone(),
                content: content.clone(),
                encrypted_value: encrypted_value.clone(),
                subagent_run_id: None,
            },
            message::Message::Tool {
                id,
                tool_call_id,
                content,
                is_error,
            } => {
                let content = ToolContent::Text(message::parts_to_text(content));
                let error = match (&content, is_error) {
                    (ToolContent::Text(text), true) => Some(text.clone()),
                    _ => None,
                };
                Self::Tool {
                    id: id.clone(),
                    content,
                    tool_call_id: tool_call_id.clone(),
                    error,
                    subagent_run_id: None,
                }
            }
        })
    }

    fn attributed_to(mut self, run: &str) -> Self {
        if let Self::Assistant {
            subagent_run_id, ..
        }
        | Self::Tool {
            subagent_run_id, ..
        }
        | Self::Reasoning {
            subagent_run_id, ..
        } = &mut self
        {
            *subagent_run_id = Some(run.to_owned());
        }
        self
    }
}

/// Pushes `message` as a client of the run `sub_agent` (the parent's when `None`) was shown it.
fn push_shown(wire: &mut Vec<Message>, message: &message::Message, sub_agent: Option<&str>) {
    match message {
        message::Message::Subagent {
            run_id, messages, ..
        } => {
            for message in messages {
                push_shown(wire, message, Some(run_id.as_str()));
            }
        }
        // A sub-agent's task and instructions are its own request, never streamed.
        message::Message::User { .. }
        | message::Message::System { .. }
        | message::Message::Developer { .. }
            if sub_agent.is_some() => {}
        message => {
            if let Some(shown) = Message::from_domain(message) {
                wire.push(match sub_agent {
                    Some(run) => shown.attributed_to(run),
                    None => shown,
                });
            }
        }
    }
}

impl ToolContent {
    /// As protocol-neutral parts.
    #[must_use]
    pub fn to_parts(&self) -> Vec<ContentPart> {
        match self {
            Self::Text(text) => vec![ContentPart::text(text.clone())],
            Self::Parts(parts) => parts.iter().map(InputContent::to_part).collect(),
        }
    }

    /// From protocol-neutral parts: one text part (or JSON) becomes a plain string.
    #[must_use]
    pub fn from_parts(parts: &[ContentPart]) -> Self {
        if parts
            .iter()
            .all(|p| matches!(p, ContentPart::Text { .. } | ContentPart::Json { .. }))
        {
            return Self::Text(message::parts_to_text(parts));
        }
        Self::Parts(parts.iter().map(InputContent::from_part).collect())
    }
}

impl InputContent {
    fn to_part(&self) -> ContentPart {
        let media = |source: &InputSource| match source {
            InputSource::Data { value, mime_type } => MediaSource::Data {
                data: value.clone(),
                mime_type: mime_type.clone(),
            },
            InputSource::Url { value, mime_type }
            | InputSource::File {
                value, mime_type, ..
            } => MediaSource::Url {
                url: value.clone(),
                mime_type: mime_type.clone(),
            },
        };
        match self {
            Self::Text { text } => ContentPart::text(text.clone()),
            Self::Image { source, .. } => ContentPart::Image {
                source: media(source),
            },
            Self::Audio { source, .. } => ContentPart::Audio {
                source: media(source),
            },
            Self::Video { source, .. } => ContentPart::Video {
                source: media(source),
            },
            Self::Document { source, .. } => ContentPart::Document {
                source: media(source),
            },
            Self::Binary {
                mime_type,
                url,
                data,
                id,
                filename,
            } => {
                let source = match (data, url) {
                    (Some(data), _) => MediaSource::Data {
                        data: data.clone(),
                        mime_type: mime_type.clone(),
                    },
                    (None, Some(url)) => MediaSource::Url {
                        url: url.clone(),
                        mime_type: Some(mime_type.clone()),
                    },
                    (None, None) => {
                        let name = filename.as_deref().or(id.as_deref()).unwrap_or("unnamed");
                        return ContentPart::text(format!("[file {name}: {mime_type}]"));
                    }
                };
                match mime_type.split('/').next() {
                    Some("image") => ContentPart::Image { source },
                    Some("audio") => ContentPart::Audio { source },
                    Some("video") => ContentPart::Video { source },
                    _ => ContentPart::Document { source },
                }
            }
        }
    }

    fn from_part(part: &ContentPart) -> Self {
        let source = |source: &MediaSource| match source {
            MediaSource::Data { data, mime_type } => InputSource::Data {
                value: data.clone(),
                mime_type: mime_type.clone(),
            },
            MediaSource::Url { url, mime_type } => InputSource::Url {
                value: url.clone(),
                mime_type: mime_type.clone(),
            },
        };
        match part {
            ContentPart::Text { text } => Self::Text { text: text.clone() },
            ContentPart::Json { value } => Self::Text {
                text: value.to_string(),
            },
            ContentPart::Image { source: s } => Self::Image {
                source: source(s),
                metadata: None,
            },
            ContentPart::Audio { source: s } => Self::Audio {
                source: source(s),
                metadata: None,
            },
            ContentPart::Video { source: s } => Self::Video {
                source: source(s),
                metadata: None,
            },
            ContentPart::Document { source: s } => Self::Document {
                source: source(s),
                metadata: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn minimal_input_parses_and_tolerates_unknown_fields() {
        let input: RunAgentInput = serde_json::from_value(json!({
            "threadId": "t-1", "runId": "r-1", "messages": [], "brandNew": 1
        }))
        .unwrap();
        assert!(input.tools.is_empty());
        assert_eq!(input.thread_id, "t-1");
    }

    #[test]
    fn every_role_round_trips_through_the_domain() {
        let messages = json!([
            {"id": "s", "role": "system", "content": "be brief"},
            {"id": "u", "role": "user", "content": "hi"},
            {"id": "a", "role": "assistant", "content": "calling",
             "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1}"}}]},
            {"id": "t", "role": "tool", "toolCallId": "c1", "content": "3"},
            {"id": "r", "role": "reasoning", "content": "hmm"}
        ]);
        let parsed: Vec<Message> = serde_json::from_value(messages.clone()).unwrap();
        let back: Vec<Message> = parsed
            .iter()
            .filter_map(Message::to_domain)
            .filter_map(|m| Message::from_domain(&m))
            .collect();
        assert_eq!(serde_json::to_value(&back).unwrap(), messages);
    }

    #[test]
    fn multimodal_user_content_keeps_every_part() {
        let message: Message = serde_json::from_value(json!({
            "id": "u", "role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image", "source": {"type": "url", "value": "https://x/y.png", "mimeType": "image/png"}},
                {"type": "binary", "mimeType": "application/pdf", "data": "AAAA"}
            ]
        }))
        .unwrap();
        let domain = message.to_domain().unwrap();
        assert_eq!(domain.content().len(), 3);
        assert!(matches!(domain.content()[2], ContentPart::Document { .. }));
    }

    #[test]
    fn a_reasoning_message_keeps_its_encrypted_value_both_ways() {
        let wire = json!({
            "id": "r", "role": "reasoning", "content": "hmm", "encryptedValue": "c2ln"
        });
        let message: Message = serde_json::from_value(wire.clone()).unwrap();
        let domain = message.to_domain().unwrap();
        assert!(matches!(
            &domain,
            message::Message::Reasoning { encrypted_value: Some(v), .. } if v == "c2ln"
        ));
        assert_eq!(
            serde_json::to_value(Message::from_domain(&domain).unwrap()).unwrap(),
            wire
        );
    }

    #[test]
    fn activity_messages_are_ui_only() {
        let message: Message = serde_json::from_value(json!({
            "id": "x", "role": "activity", "activityType": "progress", "content": {}
        }))
        .unwrap();
        assert!(message.to_domain().is_none());
    }
}
