use std::collections::VecDeque;

use std::sync::Arc;

use super::{
    Prediction,
    event::{BaseEvent, Custom, Event},
};
use crate::{
    context::SharedState,
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
///   `REASONING_MESSAGE_START`), closed when text or a tool call follows, or at the end. What
///   the provider needs back with it (a thinking signature) is `REASONING_ENCRYPTED_VALUE` on
///   that message.
/// - Tool calls become `TOOL_CALL_START` (with `parentMessageId` = the step's message id),
///   `TOOL_CALL_ARGS`, `TOOL_CALL_END`. Arguments or ends for a call that was never started are
///   dropped rather than sent unbalanced.
/// - A call of a tool with [predictions](super::AguiLayer::predict_state) is preceded by a CUSTOM
///   `PredictState` event; state changed while the arguments streamed (a
///   [`StateLayer`](crate::state) hook) goes out as `STATE_DELTA` right after `TOOL_CALL_END`.
/// - At the end of the step, everything still open is closed, except a tool call when the model
///   failed: its arguments may be cut off mid-JSON, and a client treats `TOOL_CALL_END` as "the
///   arguments are complete" (the official client parses them and calls its hooks). The
///   `RUN_ERROR` that follows ends it; nothing runs it.
/// - What the call used (its [`Usage`](crate::model::Usage), when the model reports it) is a
///   `CUSTOM` [`agent_tower.usage`](super::future::USAGE_EVENT) event right before
///   `STEP_FINISHED`.
#[derive(Debug)]
pub struct ModelEncoder {
    step_name: String,
    /// The step's message: its id, or the id the model gave its first text.
    parent_message_id: MessageId,
    named: bool,
    text: Option<MessageId>,
    reasoning: Option<MessageId>,
    tool_calls: Vec<ToolCallId>,
    predictions: Arc<[Prediction]>,
    state: Option<SharedState>,
    /// What the call used, as the model last reported it: said at the step's end.
    used: Option<crate::model::Usage>,
}

impl ModelEncoder {
    /// An encoder for the step writing `message_id`; returns it with the step's opening event.
    pub(crate) fn start(
        step_name: String,
        message_id: MessageId,
        predictions: Arc<[Prediction]>,
        state: Option<SharedState>,
    ) -> (Self, Event) {
        let opening = Event::step_started(step_name.clone());
        (
            Self {
                step_name,
                parent_message_id: message_id,
                named: false,
                text: None,
                reasoning: None,
                tool_calls: Vec::new(),
                predictions,
                state,
                used: None,
            },
            opening,
        )
    }

    fn predict(&self, tool: &str, out: &mut VecDeque<Event>) {
        let predicted: Vec<&Prediction> =
            self.predictions.iter().filter(|p| p.tool == tool).collect();
        if !predicted.is_empty() {
            out.push_back(
                Custom {
                    name: "PredictState".to_owned(),
                    value: serde_json::to_value(predicted).expect("predictions serialize"),
                    subagent_run_id: None,
                    base: BaseEvent::default(),
                }
                .into(),
            );
        }
    }

    fn close_text(&mut self, out: &mut VecDeque<Event>) {
        if let Some(message_id) = self.text.take() {
            out.push_back(Event::text_message_end(message_id));
        }
    }

    fn open_reasoning(&mut self, message_id: &MessageId, out: &mut VecDeque<Event>) {
        if self.reasoning.as_ref() != Some(message_id) {
            self.close_reasoning(out);
            self.reasoning = Some(message_id.clone());
            out.push_back(Event::reasoning_start(message_id.clone()));
            out.push_back(Event::reasoning_message_start(message_id.clone()));
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
                if !self.named {
                    self.named = true;
                    self.parent_message_id = message_id.clone();
                }
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
                self.open_reasoning(message_id, out);
                out.push_back(Event::reasoning_message_content(
                    message_id.clone(),
                    delta.clone(),
                ));
            }
            ModelEvent::ReasoningEncryptedValue { message_id, value } => {
                // Inside its message, so that a client keeps it on the message (a redacted
                // block has no text: its message is opened for it).
                self.open_reasoning(message_id, out);
                out.push_back(Event::reasoning_encrypted_value(message_id, value.clone()));
            }
            ModelEvent::ToolCallStart { id, name } => {
                self.close_reasoning(out);
                if !self.tool_calls.contains(id) {
                    self.tool_calls.push(id.clone());
                    self.predict(name, out);
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
            ModelEvent::ToolCallEncryptedValue { id, value } => {
                if self.tool_calls.contains(id) {
                    out.push_back(Event::tool_call_encrypted_value(id, value.clone()));
                }
            }
            ModelEvent::ToolCallEnd { id } => {
                if let Some(at) = self.tool_calls.iter().position(|open| open == id) {
                    out.push_back(Event::tool_call_end(self.tool_calls.remove(at)));
                    // What a hook derived from the complete arguments, before the tool runs.
                    let changes = self.state.as_ref().map(SharedState::take_changes);
                    if let Some(changes) = changes.filter(|c| !c.is_empty()) {
                        out.push_back(Event::state_delta(&changes));
                    }
                }
            }
            ModelEvent::Usage(usage) => self.used = Some(usage.clone()),
            ModelEvent::Finish(_) => return Some(End::Finished),
        }
        None
    }

    fn end(&mut self, end: End, out: &mut VecDeque<Event>) {
        self.close_reasoning(out);
        let open_calls = self.tool_calls.drain(..);
        if end == End::Failed {
            drop(open_calls);
        } else {
            out.extend(open_calls.map(Event::tool_call_end));
        }
        self.close_text(out);
        if let Some(used) = self.used.take() {
            out.push_back(super::framing::usage_event(&used));
        }
        out.push_back(Event::step_finished(std::mem::take(&mut self.step_name)));
    }
}
