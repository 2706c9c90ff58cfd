use std::collections::VecDeque;

use agent_client_protocol::v1::schema::{ContentBlock, ContentChunk, SessionUpdate, UsageUpdate};

use crate::{
    model::ModelEvent,
    stream::{Encode, End, Tee},
};

/// The stream an [`Acp`](super::Acp)-wrapped model answers with: the model's own events,
/// unchanged, teed to the turn's transport as session updates.
pub type ResponseStream<St, T> = Tee<St, T, UpdateEncoder>;

/// Turns one model step's [`ModelEvent`]s into ACP session updates.
///
/// - Text deltas become `agent_message_chunk`s, reasoning deltas `agent_thought_chunk`s, each
///   with the `messageId` of its message.
/// - Usage becomes a `usage_update` (`used` = the step's input and output tokens, `size` = the
///   layer's context window).
/// - Tool calls are announced by the tool layer, which knows their complete arguments and
///   whether they run; the model's streamed calls are not sent.
///
/// ACP messages have no end event, so a step that ends early leaves nothing open.
#[derive(Debug)]
pub struct UpdateEncoder {
    context_window: u64,
}

impl UpdateEncoder {
    pub(crate) fn new(context_window: u64) -> Self {
        Self { context_window }
    }
}

fn chunk(message_id: &str, delta: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(delta)).message_id(message_id)
}

impl<E> Encode<Result<ModelEvent, E>> for UpdateEncoder {
    type Event = SessionUpdate;

    fn encode(
        &mut self,
        item: &Result<ModelEvent, E>,
        out: &mut VecDeque<SessionUpdate>,
    ) -> Option<End> {
        let event = match item {
            Ok(event) => event,
            Err(_) => return Some(End::Failed),
        };
        match event {
            ModelEvent::TextDelta { message_id, delta } => {
                out.push_back(SessionUpdate::AgentMessageChunk(chunk(message_id, delta)));
            }
            ModelEvent::ReasoningDelta { message_id, delta } => {
                out.push_back(SessionUpdate::AgentThoughtChunk(chunk(message_id, delta)));
            }
            ModelEvent::Usage(usage) => {
                out.push_back(SessionUpdate::UsageUpdate(UsageUpdate::new(
                    usage.total_tokens(),
                    self.context_window,
                )));
            }
            ModelEvent::Finish(_) => return Some(End::Finished),
            // An editor shows the thought; what the provider needs back stays in the session.
            ModelEvent::ReasoningEncryptedValue { .. }
            | ModelEvent::ToolCallStart { .. }
            | ModelEvent::ToolCallArgs { .. }
            | ModelEvent::ToolCallEnd { .. } => {}
        }
        None
    }

    fn end(&mut self, _end: End, _out: &mut VecDeque<SessionUpdate>) {}
}
