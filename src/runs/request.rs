//! What a run is asked: the request it keeps for a retry, and the request the agent gets.

use serde_json::{Value, json};

use super::{InterruptStatus, Interrupts, LogError, RunLog};
use crate::{agui::RunAgentInput, run::RunRequest};

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

/// The run `input` asks for, continuing the thread's stored conversation when it applies
/// decisions: each decision (read back from the interrupts it resolved) bound to the very call
/// it was asked about.
pub(super) async fn run_request(
    log: &dyn RunLog,
    input: &RunAgentInput,
    continues: bool,
) -> Result<RunRequest, LogError> {
    let mut req = input.to_run_request();
    if !continues {
        return Ok(req);
    }
    // A resume continues the stored conversation, never the client's copy of it.
    if let Some(thread) = log.thread(&input.thread_id).await? {
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
    Ok(req)
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
