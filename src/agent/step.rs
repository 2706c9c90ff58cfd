//! One model step: call the model, consume its stream into the step's messages.

use futures_util::StreamExt;
use tower::ServiceExt;

use crate::{
    BoxError,
    id::MessageId,
    message::{Message, ToolCallRequest},
    model::{FinishReason, ModelEvent, ModelRequest, ModelService, Usage},
    run::StopReason,
};

/// A reasoning message being streamed.
struct Reasoning {
    id: MessageId,
    content: String,
    encrypted_value: Option<String>,
}

/// What a model step has produced so far. It outlives the step's future, so a cancelled step
/// still yields what was streamed (the UI has shown it; the snapshot must keep it).
pub(super) struct Step {
    message_id: MessageId,
    text: String,
    reasoning: Vec<Reasoning>,
    pub(super) tool_calls: Vec<ToolCallRequest>,
    pub(super) finish: Option<FinishReason>,
    pub(super) usage: Usage,
}

impl Step {
    pub(super) fn new(message_id: MessageId) -> Self {
        Self {
            message_id,
            text: String::new(),
            reasoning: Vec::new(),
            tool_calls: Vec::new(),
            finish: None,
            usage: Usage::default(),
        }
    }

    fn push(&mut self, event: ModelEvent) {
        match event {
            ModelEvent::TextDelta { message_id, delta } => {
                // The model names its message with its first text (a bridged agent keeps its own
                // ids); by default that is the step's id.
                if self.text.is_empty() {
                    self.message_id = message_id;
                }
                self.text.push_str(&delta);
            }
            ModelEvent::ReasoningDelta { message_id, delta } => {
                self.reasoning(message_id).content.push_str(&delta);
            }
            ModelEvent::ReasoningEncryptedValue { message_id, value } => {
                self.reasoning(message_id).encrypted_value = Some(value);
            }
            ModelEvent::ToolCallStart { id, name } => {
                if !self.tool_calls.iter().any(|c| c.id == id) {
                    self.tool_calls.push(ToolCallRequest {
                        id,
                        name,
                        arguments: String::new(),
                        encrypted_value: None,
                    });
                }
            }
            ModelEvent::ToolCallArgs { id, delta } => {
                if let Some(call) = self.tool_calls.iter_mut().find(|c| c.id == id) {
                    call.arguments.push_str(&delta);
                }
            }
            ModelEvent::ToolCallEncryptedValue { id, value } => {
                if let Some(call) = self.tool_calls.iter_mut().find(|c| c.id == id) {
                    call.encrypted_value = Some(value);
                }
            }
            ModelEvent::ToolCallEnd { .. } => {}
            ModelEvent::Usage(step) => self.usage.add(&step),
            ModelEvent::Finish(reason) => self.finish = Some(reason),
        }
    }

    /// The reasoning message `id`, started if it is new.
    fn reasoning(&mut self, id: MessageId) -> &mut Reasoning {
        let at = match self.reasoning.iter().position(|r| r.id == id) {
            Some(at) => at,
            None => {
                self.reasoning.push(Reasoning {
                    id,
                    content: String::new(),
                    encrypted_value: None,
                });
                self.reasoning.len() - 1
            }
        };
        &mut self.reasoning[at]
    }

    /// Whether anything was streamed.
    pub(super) fn is_empty(&self) -> bool {
        self.text.is_empty() && self.reasoning.is_empty() && self.tool_calls.is_empty()
    }

    /// The step's messages: its reasoning, then the assistant message under the id of its text
    /// (the step's id unless the model named its text otherwise).
    pub(super) fn messages(&self) -> Vec<Message> {
        let mut messages: Vec<Message> = self
            .reasoning
            .iter()
            .map(|r| Message::Reasoning {
                id: r.id.clone(),
                content: r.content.clone(),
                encrypted_value: r.encrypted_value.clone(),
            })
            .collect();
        messages.push(Message::Assistant {
            id: self.message_id.clone(),
            content: self.text.clone(),
            tool_calls: self.tool_calls.clone(),
        });
        messages
    }
}

/// Calls the model and consumes its stream into `step`.
pub(super) async fn call_model<M>(
    model: &mut M,
    request: ModelRequest,
    step: &mut Step,
) -> Result<(), BoxError>
where
    M: ModelService,
    M::Error: Into<BoxError>,
    M::StreamError: Into<BoxError>,
{
    let stream = model
        .ready()
        .await
        .map_err(Into::into)?
        .call(request)
        .await
        .map_err(Into::into)?;
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        step.push(event.map_err(Into::into)?);
    }
    Ok(())
}

pub(super) fn stop_reason(finish: Option<&FinishReason>) -> StopReason {
    match finish {
        Some(FinishReason::Length) => StopReason::MaxTokens,
        Some(FinishReason::ContentFilter) => StopReason::Refusal,
        _ => StopReason::EndTurn,
    }
}
