//! Forking a thread: a new thread with the conversation of another up to a message, the
//! original untouched. Editing a message and asking for another answer are forks too (before
//! the message edited, before the answer), so a thread's other branches stay readable.

use std::fmt;

use super::{LogError, Runs, SavedThread, ThreadQuery, ThreadSummary, takeover::unanswered};
use crate::{
    id::{MessageId, ThreadId},
    message::Message,
};

/// Where a thread was forked from: the thread, and the last message of its conversation the
/// fork kept (`None`: it kept none).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForkedFrom {
    /// The thread forked.
    pub thread_id: ThreadId,
    /// The last of its messages the fork kept.
    pub message_id: Option<MessageId>,
}

impl ForkedFrom {
    /// A fork of `thread_id` that kept its messages through `message_id`.
    #[must_use]
    pub fn new(thread_id: ThreadId, message_id: Option<MessageId>) -> Self {
        Self {
            thread_id,
            message_id,
        }
    }
}

/// Where a fork cuts the conversation it copies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForkAt<'a> {
    /// After its last message: the whole conversation.
    #[default]
    End,
    /// After this message (a fork "from here").
    Through(&'a MessageId),
    /// Before this message (an edit of it, or another answer in its place).
    Before(&'a MessageId),
}

/// A fork to make with [`Runs::fork_thread`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Fork<'a> {
    /// The thread to fork.
    pub from: &'a ThreadId,
    /// Where its conversation is cut.
    pub at: ForkAt<'a>,
    /// Whom the fork belongs to (`None`: a server that authenticates nobody).
    pub principal: Option<&'a str>,
    /// The directory the fork works in (an editor's session); `None`: the thread's.
    pub workspace: Option<&'a str>,
}

impl<'a> Fork<'a> {
    /// The whole of `from`, for nobody in particular, in its directory.
    #[must_use]
    pub fn new(from: &'a ThreadId) -> Self {
        Self {
            from,
            at: ForkAt::End,
            principal: None,
            workspace: None,
        }
    }

    /// Cut at `at`.
    #[must_use]
    pub fn at(mut self, at: ForkAt<'a>) -> Self {
        self.at = at;
        self
    }

    /// The fork is `principal`'s.
    #[must_use]
    pub fn principal(mut self, principal: Option<&'a str>) -> Self {
        self.principal = principal;
        self
    }

    /// The fork works in `workspace`.
    #[must_use]
    pub fn workspace(mut self, workspace: Option<&'a str>) -> Self {
        self.workspace = workspace;
        self
    }
}

/// Why a fork was not made.
#[derive(Debug)]
#[non_exhaustive]
pub enum ForkError {
    /// The log has no such thread.
    UnknownThread(ThreadId),
    /// The thread's conversation has no such message.
    UnknownMessage(MessageId),
    /// The log failed.
    Log(LogError),
}

impl fmt::Display for ForkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownThread(thread) => write!(f, "no thread `{thread}`"),
            Self::UnknownMessage(message) => {
                write!(f, "the thread's conversation has no message `{message}`")
            }
            Self::Log(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for ForkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Log(error) => Some(error),
            _ => None,
        }
    }
}

impl From<LogError> for ForkError {
    fn from(error: LogError) -> Self {
        Self::Log(error)
    }
}

impl Runs {
    /// Forks a thread ([`Fork`]): a new thread with its conversation up to the cut and its
    /// state, the original untouched, listed with [`ForkedFrom`]; tells the thread list's
    /// followers, and answers the fork as listed. The conversation is the thread's as its last
    /// ended run left it (a run of it may be running meanwhile), and its state is the thread's
    /// latest.
    ///
    /// A fork never splits a step: a call it keeps keeps its result, and a call still waiting
    /// (for an approval) is left out with what its run kept of it, so no model is ever sent a
    /// call without its result.
    ///
    /// Whether the caller may read the thread is the caller's to check first.
    ///
    /// # Errors
    ///
    /// [`ForkError::UnknownThread`], [`ForkError::UnknownMessage`] for a cut at a message the
    /// conversation does not have, [`ForkError::Log`].
    pub async fn fork_thread(&self, fork: Fork<'_>) -> Result<ThreadSummary, ForkError> {
        let log = &self.inner.log;
        let source = log
            .thread(fork.from)
            .await?
            .ok_or_else(|| ForkError::UnknownThread(fork.from.clone()))?;
        let workspace = match fork.workspace {
            Some(workspace) => Some(workspace.to_owned()),
            None => listed(self, fork.from).await?.and_then(|t| t.workspace),
        };
        let messages = cut(&source.messages, fork.at)?;
        let thread = ThreadId::new();
        let forked_from =
            ForkedFrom::new(fork.from.clone(), messages.last().map(|m| m.id().clone()));
        let saved = SavedThread::new(&thread, &messages)
            .principal(fork.principal)
            .state(source.state.as_ref())
            .workspace(workspace.as_deref())
            .forked_from(Some(&forked_from));
        log.save_thread(saved).await?;
        self.inner.listing.changed(&thread, fork.principal);
        listed(self, &thread).await?.ok_or_else(|| {
            ForkError::Log(LogError::Corrupt(format!("fork `{thread}`, kept unlisted")))
        })
    }
}

/// `thread` as the log lists it.
async fn listed(runs: &Runs, thread: &ThreadId) -> Result<Option<ThreadSummary>, LogError> {
    let query = ThreadQuery::new(1).thread(thread);
    Ok(runs.inner.log.threads(&query).await?.threads.pop())
}

/// The conversation a fork of `messages` cut at `at` keeps: the messages up to the cut, then
/// through the results of the calls it keeps, without the calls that have no result in the
/// whole conversation (and without what their runs kept of them).
pub(crate) fn cut(messages: &[Message], at: ForkAt<'_>) -> Result<Vec<Message>, ForkError> {
    let position = |id: &MessageId| {
        messages
            .iter()
            .position(|m| m.id() == id)
            .ok_or_else(|| ForkError::UnknownMessage(id.clone()))
    };
    let mut end = match at {
        ForkAt::End => messages.len(),
        ForkAt::Through(id) => position(id)? + 1,
        ForkAt::Before(id) => position(id)?,
    };
    // The results of the kept calls come after them: the cut moves past the last of them, and
    // again while that keeps calls of its own.
    loop {
        let open = unanswered(&messages[..end]);
        let answers = |m: &Message| matches!(m, Message::Tool { tool_call_id, .. } if open.contains(tool_call_id));
        match messages[end..].iter().rposition(answers) {
            Some(last) => end += last + 1,
            None => break,
        }
    }
    let waiting = unanswered(messages);
    let kept = messages[..end]
        .iter()
        .filter_map(|message| match message {
            Message::Assistant {
                id,
                content,
                tool_calls,
            } => {
                let tool_calls: Vec<_> = tool_calls
                    .iter()
                    .filter(|call| !waiting.contains(&call.id))
                    .cloned()
                    .collect();
                (!content.is_empty() || !tool_calls.is_empty()).then(|| Message::Assistant {
                    id: id.clone(),
                    content: content.clone(),
                    tool_calls,
                })
            }
            Message::Subagent { tool_call_id, .. } if waiting.contains(tool_call_id) => None,
            other => Some(other.clone()),
        })
        .collect();
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A conversation: a question, a call and its result, an answer, a second question, and a
    /// call waiting for an approval (asked with a sub-agent's kept run).
    fn conversation() -> Vec<Message> {
        serde_json::from_value(json!([
            {"role": "user", "id": "q1", "content": [{"type": "text", "text": "weather?"}]},
            {"role": "assistant", "id": "a1", "content": "", "tool_calls": [
                {"id": "c1", "name": "weather", "arguments": "{}"}]},
            {"role": "tool", "id": "r1", "tool_call_id": "c1",
             "content": [{"type": "text", "text": "sunny"}], "is_error": false},
            {"role": "assistant", "id": "a2", "content": "It is sunny.", "tool_calls": []},
            {"role": "user", "id": "q2", "content": [{"type": "text", "text": "remember it"}]},
            {"role": "assistant", "id": "a3", "content": "Asking first.", "tool_calls": [
                {"id": "c2", "name": "remember", "arguments": "{}"}]},
            {"role": "subagent", "id": "s1", "tool_call_id": "c2", "run_id": "sub", "messages": []},
        ]))
        .unwrap()
    }

    fn ids(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.id().as_str()).collect()
    }

    fn at(id: &str) -> MessageId {
        MessageId::from(id)
    }

    #[test]
    fn a_cut_keeps_the_messages_up_to_it() {
        let all = conversation();
        let answer = at("a2");
        assert_eq!(
            ids(&cut(&all, ForkAt::Through(&answer)).unwrap()),
            ["q1", "a1", "r1", "a2"]
        );
        assert_eq!(
            ids(&cut(&all, ForkAt::Before(&answer)).unwrap()),
            ["q1", "a1", "r1"]
        );
        let first = at("q1");
        assert!(cut(&all, ForkAt::Before(&first)).unwrap().is_empty());
    }

    #[test]
    fn a_cut_inside_a_step_keeps_the_call_with_its_result() {
        let all = conversation();
        let call = at("a1");
        let result = at("r1");
        for fork in [ForkAt::Through(&call), ForkAt::Before(&result)] {
            assert_eq!(
                ids(&cut(&all, fork).unwrap()),
                ["q1", "a1", "r1"],
                "{fork:?}"
            );
        }
    }

    #[test]
    fn a_call_waiting_for_its_result_is_left_out() {
        let whole = cut(&conversation(), ForkAt::End).unwrap();
        assert_eq!(ids(&whole), ["q1", "a1", "r1", "a2", "q2", "a3"]);
        let Message::Assistant {
            content,
            tool_calls,
            ..
        } = &whole[5]
        else {
            panic!("{:?}", whole[5]);
        };
        assert_eq!((content.as_str(), tool_calls.len()), ("Asking first.", 0));
        assert!(unanswered(&whole).is_empty());
    }

    #[test]
    fn a_cut_at_a_message_the_conversation_lacks_is_refused() {
        let missing = at("nowhere");
        let refused = cut(&conversation(), ForkAt::Through(&missing)).unwrap_err();
        assert!(
            matches!(&refused, ForkError::UnknownMessage(id) if id == &missing),
            "{refused}"
        );
    }
}
