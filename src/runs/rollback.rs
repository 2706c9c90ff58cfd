//! A run rolled back ([`BusyThread::Rollback`](super::BusyThread::Rollback)): what it added to
//! its thread is left out.

use std::collections::HashSet;

use serde_json::Value;

use super::{LogError, RunLog, RunStatus, SavedThread};
use crate::{
    id::{MessageId, RunId},
    message::Message,
};

/// Leaves out of the thread of `run`, which has ended, what it added, as its events name it: the
/// prompt it was asked (the user messages of its `RUN_STARTED` input, which holds the run's own
/// input only) and every message it wrote, with the conversations of the agents it called. The thread's conversation before it is the
/// thread's again; its state stays as the run left it. Nothing changes while another run of
/// the thread runs (it would keep its own copy at its end). Returns the ids left out, for the
/// next run to leave out of its client's copy too.
pub(super) async fn roll_back(
    log: &dyn RunLog,
    run: &RunId,
) -> Result<HashSet<MessageId>, LogError> {
    let Some(record) = log.run(run).await? else {
        return Ok(HashSet::new());
    };
    let mut added = HashSet::new();
    super::log::each_event(log, run, |event| {
        if let Ok(event) = serde_json::from_slice::<Value>(event.json()) {
            added.extend(prompt_of(&event));
            added.extend(written_in(&event));
        }
        Ok(())
    })
    .await?;
    let Some(thread) = log.thread(&record.thread_id).await? else {
        return Ok(added);
    };
    let running = thread
        .runs
        .iter()
        .any(|r| r.status == RunStatus::Running && &r.run_id != run);
    if running || !thread.messages.iter().any(|m| added.contains(m.id())) {
        return Ok(added);
    }
    let kept = without(thread.messages, &added);
    let saved = SavedThread::new(&record.thread_id, &kept)
        .principal(record.principal.as_deref())
        .state(thread.state.as_ref());
    log.save_thread(saved).await?;
    Ok(added)
}

/// The prompt a run was asked, from its `RUN_STARTED`: the user messages of its own input (none
/// for a run that continued the stored conversation).
fn prompt_of(event: &Value) -> Vec<MessageId> {
    if event["type"] != "RUN_STARTED" {
        return Vec::new();
    }
    let messages = event["input"]["messages"].as_array().map(Vec::as_slice);
    messages
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["id"].as_str())
        .map(MessageId::from)
        .collect()
}

/// The message a run's own event writes, if it writes one (a sub-agent's are the sub-agent's).
fn written_in(event: &Value) -> Option<MessageId> {
    if event.get("subagentRunId").is_some_and(|id| !id.is_null()) {
        return None;
    }
    let field = match event["type"].as_str()? {
        "TEXT_MESSAGE_START" | "REASONING_MESSAGE_START" | "TOOL_CALL_RESULT" => "messageId",
        "TOOL_CALL_START" => "parentMessageId",
        _ => return None,
    };
    event[field].as_str().map(MessageId::from)
}

/// `messages` without those `added`, nor the conversations of the agents whose calls' results
/// are gone with them.
fn without(messages: Vec<Message>, added: &HashSet<MessageId>) -> Vec<Message> {
    let kept: Vec<Message> = messages
        .into_iter()
        .filter(|m| !added.contains(m.id()))
        .collect();
    let answered = crate::message::answered_calls(&kept);
    kept.into_iter()
        .filter(|m| match m {
            Message::Subagent { tool_call_id, .. } => answered.contains(tool_call_id),
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_runs_prompt_is_the_user_messages_of_its_own_input() {
        let started = json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "input": {
        "threadId": "t", "runId": "r", "messages": [
            {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "3"},
            {"id": "u2", "role": "user", "content": "and"},
            {"id": "u3", "role": "user", "content": "then?"},
        ]}});
        let prompt = prompt_of(&started);
        assert_eq!(prompt, ["u2", "u3"].map(MessageId::from));
        let resumed = json!({"type": "RUN_STARTED", "input": {"messages": []}});
        assert!(prompt_of(&resumed).is_empty());
        assert!(prompt_of(&json!({"type": "TEXT_MESSAGE_START"})).is_empty());
    }

    #[test]
    fn the_messages_a_run_writes_are_named_in_its_events_not_its_sub_agents() {
        let written = |event: Value| written_in(&event).map(|id| id.to_string());
        let start = json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"});
        assert_eq!(written(start).as_deref(), Some("m1"));
        let call = json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "add", "parentMessageId": "m2"});
        assert_eq!(written(call).as_deref(), Some("m2"));
        let result = json!({"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "3"});
        assert_eq!(written(result).as_deref(), Some("t1"));
        let sub = json!({"type": "TEXT_MESSAGE_START", "messageId": "s1", "subagentRunId": "r2"});
        assert_eq!(written(sub), None);
        assert_eq!(written(json!({"type": "RUN_STARTED"})), None);
    }
}
