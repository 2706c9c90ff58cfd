use std::collections::VecDeque;

use super::event::{
    BaseEvent, Event, ReasoningEnd, ReasoningMessageContent, ReasoningMessageEnd,
    ReasoningMessageStart, ReasoningRole, ReasoningStart, StepFinished, StepStarted,
    TextMessageContent, TextMessageEnd, TextMessageRole, TextMessageStart, ToolCallArgs,
    ToolCallEnd, ToolCallStart,
};
use crate::{
    id::{MessageId, ToolCallId},
    model::ModelEvent,
    stream::{Encode, End, Tee},
};

/// The stream an [`Agui`](super::Agui)-wrapped model answers with: the model's own events,
/// unchanged, teed to the run's transport as AG-UI events.
pub type ResponseStream<St, T> = Tee<St, T, ModelEncoder>;

/// Turns one model step's [`ModelEvent`]s into AG-UI events.
///
/// - The step is framed by `STEP_STARTED` / `STEP_FINISHED`.
/// - The first text delta of a message opens `TEXT_MESSAGE_START`; a delta for another message
///   closes the current one first.
/// - Reasoning deltas open a reasoning span and message (`REASONING_START`,
///   `REASONING_MESSAGE_START`), closed when text or a tool call follows, or at the end.
/// - Tool calls become `TOOL_CALL_START` (with `parentMessageId` = the step's message id),
///   `TOOL_CALL_ARGS`, `TOOL_CALL_END`. Arguments or ends for a call that was never started are
///   dropped rather than sent unbalanced.
/// - At the end of the step, however it ends, everything still open is closed, in reverse order.
#[derive(Debug)]
pub struct ModelEncoder {
    step_name: String,
    parent_message_id: MessageId,
    text: Option<MessageId>,
    reasoning: Option<MessageId>,
    tool_calls: Vec<ToolCallId>,
}

impl ModelEncoder {
    /// An encoder for the step writing `message_id`; returns it with the step's opening event.
    pub(crate) fn start(step_name: String, message_id: MessageId) -> (Self, Event) {
        let opening = StepStarted {
            step_name: step_name.clone(),
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into();
        (
            Self {
                step_name,
                parent_message_id: message_id,
                text: None,
                reasoning: None,
                tool_calls: Vec::new(),
            },
            opening,
        )
    }

    fn close_text(&mut self, out: &mut VecDeque<Event>) {
        if let Some(message_id) = self.text.take() {
            out.push_back(
                TextMessageEnd {
                    message_id,
                    subagent_run_id: None,
                    base: BaseEvent::default(),
                }
                .into(),
            );
        }
    }

    fn close_reasoning(&mut self, out: &mut VecDeque<Event>) {
        if let Some(message_id) = self.reasoning.take() {
            out.push_back(
                ReasoningMessageEnd {
                    message_id: message_id.clone(),
                    subagent_run_id: None,
                    base: BaseEvent::default(),
                }
                .into(),
            );
            out.push_back(
                ReasoningEnd {
                    message_id,
                    subagent_run_id: None,
                    base: BaseEvent::default(),
                }
                .into(),
            );
        }
    }
}

impl<E> Encode<Result<ModelEvent, E>> for ModelEncoder {
    type Event = Event;

    fn encode(&mut self, item: &Result<ModelEvent, E>, out: &mut VecDeque<Event>) -> Option<End> {
        let event = match item {
            Ok(event) => event,
            Err(_) => return Some(End::Failed),
        };
        match event {
            ModelEvent::TextDelta { message_id, delta } => {
                self.close_reasoning(out);
                if self.text.as_ref() != Some(message_id) {
                    self.close_text(out);
                    self.text = Some(message_id.clone());
                    out.push_back(
                        TextMessageStart {
                            message_id: message_id.clone(),
                            role: Some(TextMessageRole::Assistant),
                            name: None,
                            subagent_run_id: None,
                            base: BaseEvent::default(),
                        }
                        .into(),
                    );
                }
                out.push_back(
                    TextMessageContent {
                        message_id: message_id.clone(),
                        delta: delta.clone(),
                        subagent_run_id: None,
                        base: BaseEvent::default(),
                    }
                    .into(),
                );
            }
            ModelEvent::ReasoningDelta { message_id, delta } => {
                if self.reasoning.as_ref() != Some(message_id) {
                    self.close_reasoning(out);
                    self.reasoning = Some(message_id.clone());
                    out.push_back(
                        ReasoningStart {
                            message_id: message_id.clone(),
                            subagent_run_id: None,
                            base: BaseEvent::default(),
                        }
                        .into(),
                    );
                    out.push_back(
                        ReasoningMessageStart {
                            message_id: message_id.clone(),
                            role: ReasoningRole::Reasoning,
                            subagent_run_id: None,
                            base: BaseEvent::default(),
                        }
                        .into(),
                    );
                }
                out.push_back(
                    ReasoningMessageContent {
                        message_id: message_id.clone(),
                        delta: delta.clone(),
                        subagent_run_id: None,
                        base: BaseEvent::default(),
                    }
                    .into(),
                );
            }
            ModelEvent::ToolCallStart { id, name } => {
                self.close_reasoning(out);
                if !self.tool_calls.contains(id) {
                    self.tool_calls.push(id.clone());
                    out.push_back(
                        ToolCallStart {
                            tool_call_id: id.clone(),
                            tool_call_name: name.clone(),
                            parent_message_id: Some(self.parent_message_id.clone()),
                            subagent_run_id: None,
                            base: BaseEvent::default(),
                        }
                        .into(),
                    );
                }
            }
            ModelEvent::ToolCallArgs { id, delta } => {
                if self.tool_calls.contains(id) {
                    out.push_back(
                        ToolCallArgs {
                            tool_call_id: id.clone(),
                            delta: delta.clone(),
                            subagent_run_id: None,
                            base: BaseEvent::default(),
                        }
                        .into(),
                    );
                }
            }
            ModelEvent::ToolCallEnd { id } => {
                if let Some(at) = self.tool_calls.iter().position(|open| open == id) {
                    let tool_call_id = self.tool_calls.remove(at);
                    out.push_back(
                        ToolCallEnd {
                            tool_call_id,
                            subagent_run_id: None,
                            base: BaseEvent::default(),
                        }
                        .into(),
                    );
                }
            }
            ModelEvent::Usage(_) => {}
            ModelEvent::Finish(_) => return Some(End::Finished),
        }
        None
    }

    fn end(&mut self, _end: End, out: &mut VecDeque<Event>) {
        self.close_reasoning(out);
        for tool_call_id in self.tool_calls.drain(..).rev() {
            out.push_back(
                ToolCallEnd {
                    tool_call_id,
                    subagent_run_id: None,
                    base: BaseEvent::default(),
                }
                .into(),
            );
        }
        self.close_text(out);
        out.push_back(
            StepFinished {
                step_name: std::mem::take(&mut self.step_name),
                subagent_run_id: None,
                base: BaseEvent::default(),
            }
            .into(),
        );
    }
}
