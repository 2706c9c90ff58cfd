//! "Always" decisions, remembered per thread and tool by a [`PermissionLayer`](super::PermissionLayer).

use std::{
    collections::{HashMap, VecDeque},
    fmt,
    sync::{Arc, Mutex, PoisonError},
};

use super::Decision;
use crate::{id::ThreadId, tool::ToolCall};

/// How many (thread, tool) answers are kept; the oldest is forgotten first (its calls are asked
/// about again).
pub(crate) const MAX_REMEMBERED: usize = 4096;

type Key = (ThreadId, String);

#[derive(Default)]
struct Answers {
    decisions: HashMap<Key, Decision>,
    /// The keys in the order they were first answered.
    order: VecDeque<Key>,
}

/// The answers given "always", shared by the services of one layer.
#[derive(Clone, Default)]
pub(crate) struct Remembered(Arc<Mutex<Answers>>);

impl Remembered {
    fn lock(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The decision remembered for `call`'s tool in its thread: approve, or reject with the
    /// feedback given then.
    pub(crate) fn decision(&self, call: &ToolCall) -> Option<Decision> {
        let answers = self.lock();
        if answers.decisions.is_empty() {
            return None;
        }
        answers
            .decisions
            .get(&(call.run.thread_id.clone(), call.name.clone()))
            .cloned()
    }

    /// Remembers `decision` about `call` if it was given "always".
    pub(crate) fn note(&self, call: &ToolCall, decision: &Decision) {
        if call.name == super::Question::TOOL {
            // Each question is asked: an answer to one is not the answer to the next.
            return;
        }
        let remembered = match decision {
            Decision::ApproveAlways => Decision::Approve,
            Decision::RejectAlways(feedback) => Decision::Reject(feedback.clone()),
            _ => return,
        };
        let key = (call.run.thread_id.clone(), call.name.clone());
        let mut answers = self.lock();
        if answers.decisions.insert(key.clone(), remembered).is_none() {
            answers.order.push_back(key);
            if answers.order.len() > MAX_REMEMBERED
                && let Some(oldest) = answers.order.pop_front()
            {
                answers.decisions.remove(&oldest);
            }
        }
    }
}

impl fmt::Debug for Remembered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remembered")
            .field("answers", &self.lock().decisions.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(thread: &str, tool: &str) -> ToolCall {
        let mut call = ToolCall::new(tool, serde_json::json!({}));
        call.run.thread_id = thread.into();
        call
    }

    #[test]
    fn only_always_answers_are_kept_per_thread_and_tool() {
        let remembered = Remembered::default();
        remembered.note(&call("t", "a"), &Decision::Approve);
        remembered.note(&call("t", "b"), &Decision::Reject("no".into()));
        assert_eq!(remembered.decision(&call("t", "a")), None);
        assert_eq!(remembered.decision(&call("t", "b")), None);

        remembered.note(&call("t", "a"), &Decision::ApproveAlways);
        remembered.note(&call("t", "b"), &Decision::RejectAlways("never".into()));
        assert_eq!(
            remembered.decision(&call("t", "a")),
            Some(Decision::Approve)
        );
        assert_eq!(
            remembered.decision(&call("t", "b")),
            Some(Decision::Reject("never".into()))
        );
        assert_eq!(remembered.decision(&call("other", "a")), None);
        assert_eq!(remembered.decision(&call("t", "c")), None);
    }

    #[test]
    fn the_oldest_answer_goes_first_past_the_bound() {
        let remembered = Remembered::default();
        for n in 0..=MAX_REMEMBERED {
            remembered.note(&call(&format!("t{n}"), "a"), &Decision::ApproveAlways);
        }
        assert_eq!(remembered.decision(&call("t0", "a")), None);
        assert_eq!(
            remembered.decision(&call("t1", "a")),
            Some(Decision::Approve)
        );
        assert_eq!(
            remembered.decision(&call(&format!("t{MAX_REMEMBERED}"), "a")),
            Some(Decision::Approve)
        );
        assert_eq!(remembered.lock().order.len(), MAX_REMEMBERED);
    }
}
