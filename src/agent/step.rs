//! One model step: call the model, consume its stream, build the step's messages.

use futures_util::StreamExt;
use tower::ServiceExt;

use crate::{
    BoxError,
    id::{MessageId, ToolCallId},
    message::{Message, ToolCallRequest},
    model::{FinishReason, ModelEvent, ModelRequest, ModelService, Usage},
    run::StopReason,
};

/// What one model step produced.
pub(super) struct StepResult {
    /// Reasoning messages, then the assistant message.
    pub(super) messages: Vec<Message>,
    pub(super) tool_calls: Vec<ToolCallRequest>,
    pub(super) finish: Option<FinishReason>,
    pub(super) usage: Usage,
}

pub(super) async fn call_model<M>(
    model: &mut M,
    request: ModelRequest,
    message_id: MessageId,
) -> Result<StepResult, BoxError>
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

    let mut text = String::new();
    let mut reasoning: Vec<(MessageId, String)> = Vec::new();
    let mut calls: Vec<ToolCallRequest> = Vec::new();
    let mut finish = None;
    let mut usage = Usage::default();
    let call =
        |calls: &mut Vec<ToolCallRequest>, id: &ToolCallId| calls.iter().position(|c| &c.id == id);
    while let Some(event) = stream.next().await {
        match event.map_err(Into::into)? {
            ModelEvent::TextDelta { delta, .. } => text.push_str(&delta),
            ModelEvent::ReasoningDelta { message_id, delta } => {
                match reasoning.iter_mut().find(|(id, _)| *id == message_id) {
                    Some((_, content)) => content.push_str(&delta),
                    None => reasoning.push((message_id, delta)),
                }
            }
            ModelEvent::ToolCallStart { id, name } => {
                if call(&mut calls, &id).is_none() {
                    calls.push(ToolCallRequest {
                        id,
                        name,
                        arguments: String::new(),
                    });
                }
            }
            ModelEvent::ToolCallArgs { id, delta } => {
                if let Some(at) = call(&mut calls, &id) {
                    calls[at].arguments.push_str(&delta);
                }
            }
            ModelEvent::ToolCallEnd { .. } => {}
            ModelEvent::Usage(step) => usage.add(&step),
            ModelEvent::Finish(reason) => finish = Some(reason),
        }
    }

    let mut messages: Vec<Message> = reasoning
        .into_iter()
        .map(|(id, content)| Message::Reasoning { id, content })
        .collect();
    messages.push(Message::Assistant {
        id: message_id,
        content: text,
        tool_calls: calls.clone(),
    });
    Ok(StepResult {
        messages,
        tool_calls: calls,
        finish,
        usage,
    })
}

pub(super) fn stop_reason(finish: Option<&FinishReason>) -> StopReason {
    match finish {
        Some(FinishReason::Length) => StopReason::MaxTokens,
        Some(FinishReason::ContentFilter) => StopReason::Refusal,
        _ => StopReason::EndTurn,
    }
}
