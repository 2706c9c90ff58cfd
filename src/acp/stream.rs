use std::{
    collections::VecDeque,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use agent_client_protocol::v1::schema::{
    self, ContentBlock, ContentChunk, SessionUpdate, UsageUpdate,
};

use crate::{
    model::{Cost, ModelEvent},
    stream::{Encode, End, Tee},
};

/// What a session's model steps have cost so far (ACP's `usage_update.cost` is the session's
/// total), shared by its turns through the run's extensions.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionCost(Arc<AtomicU64>);

impl SessionCost {
    /// Adds `cost`; the session's total.
    fn add(&self, cost: Cost) -> Cost {
        let before = self.0.fetch_add(cost.nano_usd(), Ordering::Relaxed);
        Cost::from_nano_usd(before.saturating_add(cost.nano_usd()))
    }
}

/// The stream an [`Acp`](super::Acp)-wrapped model answers with: the model's own events,
/// unchanged, teed to the turn's transport as session updates.
pub type ResponseStream<St, T> = Tee<St, T, UpdateEncoder>;

/// Turns one model step's [`ModelEvent`]s into ACP session updates.
///
/// - Text deltas become `agent_message_chunk`s, reasoning deltas `agent_thought_chunk`s, each
///   with the `messageId` of its message.
/// - Usage becomes a `usage_update` (`used` = the step's input and output tokens, `size` = the
///   layer's context window, `cost` = the session's cost so far, when the step's is known).
/// - Tool calls are announced by the tool layer, which knows their complete arguments and
///   whether they run; the model's streamed calls are not sent.
///
/// ACP messages have no end event, so a step that ends early leaves nothing open.
#[derive(Debug)]
pub struct UpdateEncoder {
    context_window: u64,
    session_cost: SessionCost,
}

impl UpdateEncoder {
    pub(crate) fn new(context_window: u64, session_cost: SessionCost) -> Self {
        Self {
            context_window,
            session_cost,
        }
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
                let mut update = UsageUpdate::new(usage.total_tokens(), self.context_window);
                if let Some(cost) = usage.cost {
                    let total = self.session_cost.add(cost);
                    update = update.cost(schema::Cost::new(total.usd(), "USD"));
                }
                out.push_back(SessionUpdate::UsageUpdate(update));
            }
            ModelEvent::Finish(_) => return Some(End::Finished),
            // An editor shows the thought; what the provider needs back stays in the session.
            ModelEvent::ReasoningEncryptedValue { .. }
            | ModelEvent::ToolCallEncryptedValue { .. }
            | ModelEvent::ToolCallStart { .. }
            | ModelEvent::ToolCallArgs { .. }
            | ModelEvent::ToolCallEnd { .. } => {}
        }
        None
    }

    fn end(&mut self, _end: End, _out: &mut VecDeque<SessionUpdate>) {}
}
