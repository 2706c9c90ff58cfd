//! A conversation a model can read: every call's result right after its message, and no call
//! without one.
//!
//! A client's copy of a thread is not always in that shape: a call whose arguments never completed
//! (its step failed mid-stream, and the client kept what it had streamed), a client tool the client
//! never answered, or a result a client put at the end of its list (the official AG-UI client
//! appends the messages a snapshot adds). Providers refuse such a conversation, and a model that
//! accepts one takes a call without a result for one that ran. So before any model sees it, each
//! result is moved right after its call's message, and a call without one gets an error result
//! saying it did not run.

use std::collections::{HashMap, HashSet};

use crate::{
    id::{MessageId, ToolCallId},
    message::{ContentPart, Message},
};

/// What the model reads for a call that has no result.
pub(super) const NO_RESULT: &str =
    "This call did not run: it has no result (it was cut off before it completed).";

/// Puts `messages` in the shape a model can read (see the [module docs](self)); the number of
/// calls that had no result.
pub(super) fn answer_orphans(messages: &mut Vec<Message>) -> usize {
    let calls: HashSet<ToolCallId> = messages
        .iter()
        .flat_map(|message| match message {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .map(|call| call.id.clone())
        .collect();
    if calls.is_empty() {
        return 0;
    }
    let mut results: HashMap<ToolCallId, Message> = HashMap::new();
    let mut rest = Vec::with_capacity(messages.len());
    for message in messages.drain(..) {
        match message {
            Message::Tool {
                ref tool_call_id, ..
            } if calls.contains(tool_call_id) && !results.contains_key(tool_call_id) => {
                results.insert(tool_call_id.clone(), message);
            }
            other => rest.push(other),
        }
    }
    let mut orphans = 0;
    for message in rest {
        let ids: Vec<ToolCallId> = match &message {
            Message::Assistant { tool_calls, .. } => {
                tool_calls.iter().map(|call| call.id.clone()).collect()
            }
            _ => Vec::new(),
        };
        messages.push(message);
        for id in ids {
            let result = results.remove(&id).unwrap_or_else(|| {
                orphans += 1;
                Message::Tool {
                    id: MessageId::new(),
                    tool_call_id: id,
                    content: vec![ContentPart::text(NO_RESULT)],
                    is_error: true,
                }
            });
            messages.push(result);
        }
    }
    orphans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Role, ToolCallRequest};

    fn calling(id: &str, calls: &[&str]) -> Message {
        Message::Assistant {
            id: id.into(),
            content: String::new(),
            tool_calls: calls
                .iter()
                .map(|call| ToolCallRequest {
                    id: (*call).into(),
                    name: "read".into(),
                    arguments: r#"{"path":""#.into(),
                    encrypted_value: None,
                })
                .collect(),
        }
    }

    fn result(call: &str) -> Message {
        Message::Tool {
            id: MessageId::new(),
            tool_call_id: call.into(),
            content: vec![ContentPart::text("done")],
            is_error: false,
        }
    }

    /// Each message's role, and the call a result answers.
    fn shape(messages: &[Message]) -> Vec<(Role, Option<&str>)> {
        messages
            .iter()
            .map(|m| {
                let call = match m {
                    Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_ref()),
                    _ => None,
                };
                (m.role(), call)
            })
            .collect()
    }

    #[test]
    fn a_call_without_result_is_answered_after_its_message_results() {
        let mut messages = vec![
            Message::user("read it"),
            calling("a1", &["c1", "c2"]),
            result("c1"),
            Message::user("try again"),
        ];
        assert_eq!(answer_orphans(&mut messages), 1);
        assert_eq!(
            shape(&messages),
            [
                (Role::User, None),
                (Role::Assistant, None),
                (Role::Tool, Some("c1")),
                (Role::Tool, Some("c2")),
                (Role::User, None),
            ]
        );
        let Message::Tool {
            content, is_error, ..
        } = &messages[3]
        else {
            unreachable!()
        };
        assert!(*is_error);
        assert_eq!(content, &[ContentPart::text(NO_RESULT)]);
    }

    #[test]
    fn a_result_a_client_put_at_the_end_goes_back_after_its_call() {
        let mut messages = vec![
            calling("a1", &["c1"]),
            Message::user("next"),
            calling("a2", &["c2"]),
            result("c2"),
            calling("a3", &["c3"]),
            result("c1"),
        ];
        assert_eq!(answer_orphans(&mut messages), 1, "c3");
        assert_eq!(
            shape(&messages),
            [
                (Role::Assistant, None),
                (Role::Tool, Some("c1")),
                (Role::User, None),
                (Role::Assistant, None),
                (Role::Tool, Some("c2")),
                (Role::Assistant, None),
                (Role::Tool, Some("c3")),
            ]
        );
        let before = shape(&messages)
            .into_iter()
            .map(|(role, call)| (role, call.map(str::to_owned)))
            .collect::<Vec<_>>();
        assert_eq!(
            answer_orphans(&mut messages),
            0,
            "nothing is answered twice"
        );
        let after = shape(&messages)
            .into_iter()
            .map(|(role, call)| (role, call.map(str::to_owned)))
            .collect::<Vec<_>>();
        assert_eq!(before, after, "a readable conversation is left as it is");
    }
}
