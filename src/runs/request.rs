//! What a run is asked: the request it keeps for a retry, and the request the agent gets.

use serde_json::{Value, json};

use super::{InterruptStatus, Interrupts, LogError, RunLog};
use crate::{agui::RunAgentInput, message::Message, run::RunRequest};

/// What a run keeps of its request ([`RunRecord::request`](super::RunRecord::request)): all
/// but the conversation (the thread's is used) and the answers (the interrupts' are used).
pub(super) fn kept(input: &RunAgentInput) -> Value {
    let mut kept = serde_json::to_value(input).unwrap_or(Value::Null);
    kept["messages"] = json!([]);
    if let Some(kept) = kept.as_object_mut() {
        kept.remove("resume");
    }
    kept
}

/// What a running run keeps of its request for a server that continues it after this one
/// stopped: all of it, or, for a run that applies decisions (it continues the thread's stored
/// conversation), what [`kept`] keeps.
pub(super) fn stored(input: &RunAgentInput, continues: bool) -> Value {
    if continues {
        kept(input)
    } else {
        serde_json::to_value(input).unwrap_or(Value::Null)
    }
}

/// What a run is asked, and whether its client's copy of the thread is stale.
pub(super) struct Asked {
    /// The request the agent gets.
    pub(super) request: RunRequest,
    /// The thread's conversation, when the request would erase a turn of it (see [`stale`]): the
    /// run is then refused with it, and the agent is not asked.
    pub(super) stale: Option<Vec<Message>>,
    /// Whether this run is the thread's first (the log keeps no conversation of it yet).
    pub(super) first: bool,
}

impl Asked {
    /// What the first run of a thread the start made is asked (see
    /// [`Lease::made_thread`](super::Lease::made_thread)): the log has nothing else of the
    /// thread, so there is nothing to read back.
    pub(super) fn first_turn(input: &RunAgentInput) -> Self {
        Self {
            request: input.to_run_request(),
            stale: None,
            first: true,
        }
    }
}

/// The run `input` asks for, continuing the thread's stored conversation when it applies
/// decisions: each decision (read back from the interrupts it resolved) bound to the very call
/// it was asked about. A run that does not continue the stored conversation must extend it (see
/// [`stale`]). Read while the run holds its thread: no other run changes the conversation.
pub(super) async fn run_request(
    log: &dyn RunLog,
    input: &RunAgentInput,
    continues: bool,
) -> Result<Asked, LogError> {
    let mut req = input.to_run_request();
    let thread = log.thread(&input.thread_id).await?;
    if !continues {
        // The log holds this run already: the thread's first has no other, and no conversation.
        let first = thread.as_ref().is_none_or(|thread| {
            thread.messages.is_empty() && thread.runs.iter().all(|r| r.run_id == input.run_id)
        });
        let stored = thread.map(|thread| thread.messages).unwrap_or_default();
        if stale(&stored, &req.messages) {
            return Ok(Asked {
                request: req,
                stale: Some(stored),
                first,
            });
        }
        keep_transcripts(&mut req.messages, &stored);
        return Ok(Asked {
            request: req,
            stale: None,
            first,
        });
    }
    // A resume continues the stored conversation, never the client's copy of it.
    if let Some(thread) = thread {
        req.messages = thread.messages;
        req.state = thread.state.or(req.state);
    }
    let resolved = log
        .interrupts(Interrupts::ResolvedBy(&input.run_id))
        .await?;
    let mut by_call = std::collections::HashMap::new();
    for record in resolved {
        let decision = match &record.resolution {
            Some(decision) if record.status == InterruptStatus::Resolved => decision.clone(),
            _ => continue,
        };
        let decision = bound::decision_for(&record, decision, &req.messages);
        by_call.insert(record.tool_call_id, decision);
    }
    req.run
        .extensions
        .insert(crate::permission::Resolutions::new(by_call));
    Ok(Asked {
        request: req,
        stale: None,
        first: false,
    })
}

/// Whether a run of `asked` would erase a turn of the `stored` conversation: the thread's user
/// messages are not all in it, in their order (a client holding a stale copy of the thread: a
/// second tab, another device). Only the user's turns are compared: they are the client's own
/// (their ids are its), where a client may leave out what the server added (reasoning, say).
pub(super) fn stale(stored: &[Message], asked: &[Message]) -> bool {
    let user = |message: &&Message| matches!(message, Message::User { .. });
    let mut asked = asked.iter().filter(user).map(Message::id);
    // Each stored user message, in order, among those asked (a subsequence: the request may
    // add turns after them, never lack one).
    !stored
        .iter()
        .filter(user)
        .all(|turn| asked.any(|id| id == turn.id()))
}

/// Puts back the sub-agents' conversations of the `stored` thread that the `asked` conversation
/// lacks: a client's copy carries them only as the messages it was shown, which are not the
/// parent's (see [`to_domain`](crate::agui::input::Message::to_domain)). Each goes where the
/// thread kept it, after the results of the turn whose call it answered; one whose call the
/// request does not answer is left out.
pub(super) fn keep_transcripts(asked: &mut Vec<Message>, stored: &[Message]) {
    for transcript in stored {
        let Message::Subagent {
            id, tool_call_id, ..
        } = transcript
        else {
            continue;
        };
        if asked.iter().any(|message| message.id() == id) {
            continue;
        }
        let result = asked.iter().position(
            |message| matches!(message, Message::Tool { tool_call_id: answered, .. } if answered == tool_call_id),
        );
        let Some(result) = result else { continue };
        let after_turn = asked[result..]
            .iter()
            .position(|message| !matches!(message, Message::Tool { .. } | Message::Subagent { .. }))
            .map_or(asked.len(), |end| result + end);
        asked.insert(after_turn, transcript.clone());
    }
}

/// Decisions bound to the call they were asked about.
mod bound {
    use serde_json::Value;

    use crate::{
        message::Message,
        permission::Decision,
        runs::{InterruptRecord, args_hash},
    };

    /// The interrupted call's arguments, as the conversation holds them (a sub-agent's call in
    /// the sub-agent's kept conversation).
    fn call_arguments(record: &InterruptRecord, messages: &[Message]) -> Option<Value> {
        messages.iter().rev().find_map(|message| match message {
            Message::Assistant { tool_calls, .. } => tool_calls
                .iter()
                .find(|call| call.id == record.tool_call_id)
                .map(|call| serde_json::from_str(&call.arguments).unwrap_or(Value::Null)),
            Message::Subagent { messages, .. } => call_arguments(record, messages),
            _ => None,
        })
    }

    /// The decision to apply: an approval of a call whose arguments are not the ones asked about
    /// is refused (the model is told).
    pub(super) fn decision_for(
        record: &InterruptRecord,
        decision: Decision,
        messages: &[Message],
    ) -> Decision {
        let bound = call_arguments(record, messages)
            .is_some_and(|args| args_hash(&args) == record.args_hash);
        if !bound {
            tracing::error!(interrupt = %record.id, "the conversation does not hold the interrupted call as it was asked about");
        }
        match decision {
            Decision::Approve | Decision::ApproveAlways if !bound => Decision::Reject(
                "The call changed after it was approved; it was not run.".to_owned(),
            ),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stale;
    use crate::message::Message;

    fn user(id: &str) -> Message {
        let mut message = Message::user(id);
        if let Message::User { id: own, .. } = &mut message {
            *own = id.into();
        }
        message
    }

    #[test]
    fn a_request_must_carry_every_user_turn_of_the_thread_in_order() {
        let (u1, u2, u3) = (user("u1"), user("u2"), user("u3"));
        let answer = Message::assistant("a1".into(), "one");
        let stored = [
            u1.clone(),
            answer.clone(),
            u2.clone(),
            Message::assistant("a2".into(), "two"),
        ];
        // The thread, and a new turn after it; what the server added may be left out.
        assert!(!stale(
            &stored,
            &[u1.clone(), answer.clone(), u2.clone(), u3.clone()]
        ));
        assert!(!stale(&stored, &[u1.clone(), u2.clone(), u3.clone()]));
        assert!(!stale(&[], std::slice::from_ref(&u3)));
        // A stale copy (turn two missing), turns reordered, or only the last message.
        assert!(stale(&stored, &[u1.clone(), answer, u3.clone()]));
        assert!(stale(&stored, &[u2.clone(), u1.clone(), u3.clone()]));
        assert!(stale(&stored, &[u3]));
    }
}
