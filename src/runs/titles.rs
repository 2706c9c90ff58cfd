//! Threads named by a model after their first answer ([`Runs::title_model`](super::Runs::title_model)).
//!
//! A thread is listed from its first run's start under the first line of its first prompt. When
//! a title model is configured and that run ends with an answer, the model is asked for a title
//! of a few words from the prompt and the answer; the thread takes it unless someone named it
//! meanwhile ([`ThreadChange::suggested_name`]), and the thread list's followers are told. The
//! model's call is bounded in time and in what it may write; a title that fails (the model is
//! down, slow, or answers nothing usable) leaves the first line, and is logged.

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt;
use tower::ServiceExt;

use super::{RunLog, ThreadChange, thread_name, threads::Listing};
use crate::{
    context::{Principal, RunContext},
    id::{RunId, ThreadId},
    message::Message,
    model::{BoxModel, ModelEvent, ModelOptions, ModelRequest},
};

/// What the model is told.
const INSTRUCTIONS: &str = "You name conversations. Answer with a title for the conversation \
                            below, in its language, of at most six words: no quotes, no final \
                            punctuation, nothing else.";

/// How much of the prompt and of the answer the model is shown, in characters.
const SHOWN: usize = 1_000;

/// The longest title kept, in characters (a thread's name may be longer, when a person gives it).
const LONGEST: usize = 80;

/// How much of the model's answer is read, in bytes: a title is a line.
const READ: usize = 1_024;

/// How long the model may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The model that names threads, and how its answers become titles.
#[derive(Clone)]
pub(super) struct TitleModel {
    model: BoxModel,
}

impl TitleModel {
    pub(super) fn new(model: BoxModel) -> Self {
        Self { model }
    }

    /// Names `thread` after `conversation`, its first run's, unless someone named it meanwhile,
    /// and tells the thread list's followers. In a task of its own: the run has ended already.
    pub(super) fn name(
        &self,
        log: Arc<dyn RunLog>,
        listing: Listing,
        thread: ThreadId,
        principal: Option<Principal>,
        conversation: &[Message],
    ) {
        let Some(asked) = exchange(conversation) else {
            return;
        };
        let model = self.model.clone();
        tokio::spawn(async move {
            let title = tokio::time::timeout(TIMEOUT, title(model, &thread, principal, asked));
            let title = match title.await {
                Ok(Ok(Some(title))) => title,
                Ok(Ok(None)) => {
                    tracing::warn!(thread_id = %thread, "the title model answered no title");
                    return;
                }
                Ok(Err(error)) => {
                    tracing::warn!(thread_id = %thread, %error, "the title model failed");
                    return;
                }
                Err(_) => {
                    tracing::warn!(thread_id = %thread, timeout = ?TIMEOUT, "the title model took too long");
                    return;
                }
            };
            let change = ThreadChange::new().suggested_name(title);
            match log.change_thread(&thread, &change).await {
                Ok(Some(summary)) => listing.changed(&thread, summary.principal.as_deref()),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(thread_id = %thread, %error, "a thread's title was not kept");
                }
            }
        });
    }
}

/// What the model is asked about: the first prompt and the first answer, each cut at
/// [`SHOWN`] characters; `None` when the conversation has no answer in words.
fn exchange(conversation: &[Message]) -> Option<String> {
    let prompt = conversation
        .iter()
        .find(|m| matches!(m, Message::User { .. }))?
        .text();
    let answer = conversation
        .iter()
        .map(|m| match m {
            Message::Assistant { content, .. } => content.as_str(),
            _ => "",
        })
        .find(|text| !text.trim().is_empty())?;
    let cut = |text: &str| text.chars().take(SHOWN).collect::<String>();
    Some(format!(
        "The user wrote:\n{}\n\nThe assistant answered:\n{}",
        cut(&prompt),
        cut(answer)
    ))
}

/// The model's title for the `asked` exchange of `thread`, asked as its `principal` (whose
/// budgets it counts against).
async fn title(
    model: BoxModel,
    thread: &ThreadId,
    principal: Option<Principal>,
    asked: String,
) -> Result<Option<String>, crate::BoxError> {
    let mut run = RunContext::new(thread.clone(), RunId::new());
    run.principal = principal;
    let request = ModelRequest {
        messages: vec![Message::system(INSTRUCTIONS), Message::user(asked)],
        tools: Arc::new([]),
        options: ModelOptions {
            max_output_tokens: Some(32),
            temperature: Some(0.2),
        },
        run,
    };
    let mut events = model.oneshot(request).await?;
    let mut text = String::new();
    while let Some(event) = events.next().await {
        match event? {
            ModelEvent::TextDelta { delta, .. } => text.push_str(&delta),
            ModelEvent::Finish(_) => break,
            _ => {}
        }
        if text.len() >= READ || text.trim_start().contains('\n') {
            break;
        }
    }
    Ok(cleaned(&text))
}

/// A model's answer as a title: its first line, without a `Title:` label, quotes, emphasis or
/// final punctuation, cut at a word before [`LONGEST`] characters; `None` when nothing is left
/// or it is no thread name ([`thread_name`]).
fn cleaned(answer: &str) -> Option<String> {
    let line = answer
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())?;
    let line = ["title:", "Title:", "TITLE:"]
        .iter()
        .find_map(|label| line.strip_prefix(label))
        .unwrap_or(line);
    let decoration = |c: char| {
        matches!(
            c,
            '"' | '\'' | '“' | '”' | '«' | '»' | '*' | '#' | '`' | '_'
        )
    };
    let line = line
        .trim_matches(|c: char| decoration(c) || c.is_whitespace())
        .trim_end_matches(['.', '!', '。'])
        .trim();
    let title = if line.chars().count() <= LONGEST {
        line.to_owned()
    } else {
        let cut: String = line.chars().take(LONGEST).collect();
        match cut.rfind(char::is_whitespace) {
            Some(space) if space > 0 => cut[..space].trim_end().to_owned(),
            _ => cut,
        }
    };
    thread_name(&title).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_becomes_a_title_of_one_line() {
        let titled = |answer| cleaned(answer);
        assert_eq!(
            titled("Oslo's population"),
            Some("Oslo's population".into())
        );
        assert_eq!(
            titled("\n  Title: \"Oslo's population.\"\nBecause you asked."),
            Some("Oslo's population".into())
        );
        assert_eq!(titled("**Trip to Kyoto**"), Some("Trip to Kyoto".into()));
        assert_eq!(titled("  \n\"\"  "), None, "nothing left");
        let long = "word ".repeat(40);
        let title = titled(&long).unwrap();
        assert!(title.chars().count() <= LONGEST, "{title}");
        assert!(title.ends_with("word"), "cut at a word: {title}");
    }

    #[test]
    fn the_model_is_shown_the_first_prompt_and_the_first_answer_in_words() {
        let id = crate::id::MessageId::new;
        let conversation = [
            Message::user("How many live in Oslo?"),
            Message::Assistant {
                id: id(),
                content: String::new(),
                tool_calls: Vec::new(),
            },
            Message::assistant(id(), "About 700,000."),
            Message::user("Thanks!"),
            Message::assistant(id(), "You are welcome."),
        ];
        let asked = exchange(&conversation).unwrap();
        assert_eq!(
            asked,
            "The user wrote:\nHow many live in Oslo?\n\nThe assistant answered:\nAbout 700,000."
        );
        assert_eq!(exchange(&conversation[..2]), None, "no answer in words");
    }
}
