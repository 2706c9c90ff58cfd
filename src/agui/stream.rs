use std::collections::VecDeque;

use super::event::Event;
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
/// - At the end of the step, however it ends, everything still open is closed.
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
        let opening = Event::step_started(step_name.clone());
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
            out.push_back(Event::text_message_end(message_id));
        }
    }

    fn close_reasoning(&mut self, out: &mut VecDeque<Event>) {
        if let Some(message_id) = self.reasoning.take() {
            out.push_back(Event::reasoning_message_end(message_id.clone()));
            out.push_back(Event::reasoning_end(message_id));
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
                    out.push_back(Event::text_message_start(message_id.clone()));
                }
                out.push_back(Event::text_message_content(
                    message_id.clone(),
                    delta.clone(),
                ));
            }
            ModelEvent::ReasoningDelta { message_id, delta } => {
                if self.reasoning.as_ref() != Some(message_id) {
                    self.close_reasoning(out);
                    self.reasoning = Some(message_id.clone());
                    out.push_back(Event::reasoning_start(message_id.clone()));
                    out.push_back(Event::reasoning_message_start(message_id.clone()));
                }
                out.push_back(Event::reasoning_message_content(
                    message_id.clone(),
                    delta.clone(),
                ));
            }
            ModelEvent::ToolCallStart { id, name } => {
                self.close_reasoning(out);
                if !self.tool_calls.contains(id) {
                    self.tool_calls.push(id.clone());
                    out.push_back(Event::tool_call_start(
                        id.clone(),
                        name.clone(),
                        self.parent_message_id.clone(),
                    ));
                }
            }
            ModelEvent::ToolCallArgs { id, delta } => {
                if self.tool_calls.contains(id) {
                    out.push_back(Event::tool_call_args(id.clone(), delta.clone()));
                }
            }
            ModelEvent::ToolCallEnd { id } => {
                if let Some(at) = self.tool_calls.iter().position(|open| open == id) {
                    out.push_back(Event::tool_call_end(self.tool_calls.remove(at)));
                }
            }
            ModelEvent::Usage(_) => {}
            ModelEvent::Finish(_) => return Some(End::Finished),
        }
        None
    }

    fn end(&mut self, _end: End, out: &mut VecDeque<Event>) {
        self.close_reasoning(out);
        out.extend(self.tool_calls.drain(..).map(Event::tool_call_end));
        self.close_text(out);
        out.push_back(Event::step_finished(std::mem::take(&mut self.step_name)));
    }
}
