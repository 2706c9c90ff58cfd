//! A deterministic, offline model: the default for demos, tests and benchmarks.
//!
//! [`ScriptedModel`] answers from the last message of the conversation:
//!
//! 1. the [`Rule`]s of its [`Script`], in order: the first whose [`When`] matches gives the reply;
//! 2. if the client forwarded `{"scripted": {"tokens": N}}` (AG-UI `forwardedProps`), N tokens of
//!    filler text, for benchmarks and load tests of any length; with `"delay_ms": D` as well, one
//!    token every D milliseconds (a slow model, or with a large D an idle stream); a user asking
//!    for tools gets their calls first, and the filler after their results;
//! 3. after tool results, a sentence quoting them;
//! 4. if the user mentions tools it was given, a call of each (all in one step, so they run in
//!    parallel), with the first JSON object that follows the name as arguments;
//! 5. otherwise an echo of the user's words.
//!
//! A user message containing the word `slowly` is answered with 200 filler tokens, one every
//! 50 ms (ten seconds to cancel in). A user message containing the word `think` is answered with
//! a short reasoning first. Text is
//! streamed word by word, tool arguments in fragments of a few bytes, and a usage event closes
//! every step.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use agent_tower::message::Message;
//! use agent_tower::model::{ModelEvent, ModelRequest, scripted::{ScriptedModel, Script, Rule, When, Step}};
//! use futures_util::StreamExt;
//! use tower::ServiceExt;
//!
//! let model = ScriptedModel::with_script(Script::new().rule(Rule::new(
//!     When::Mentions("weather".into()),
//!     vec![Step::Text("Sunny.".into())],
//! )));
//! let req = ModelRequest {
//!     messages: vec![Message::user("How is the weather?")],
//!     tools: Default::default(), options: Default::default(), run: Default::default(),
//! };
//! let events: Vec<_> = model.oneshot(req).await.unwrap().collect().await;
//! assert!(matches!(&events[0], Ok(ModelEvent::TextDelta { delta, .. }) if delta == "Sunny."));
//! # }
//! ```

use std::{
    collections::VecDeque,
    fmt,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
    time::Duration,
};

use futures_core::Stream;
use serde_json::Value;
use tower_service::Service;

use super::{FinishReason, ModelError, ModelErrorKind, ModelEvent, ModelRequest, Usage};
use crate::{
    context::ForwardedProps,
    id::{MessageId, ToolCallId},
    message::{Message, ToolCallRequest},
};

const SLOW_TOKENS: u64 = 200;
const SLOW_DELAY_MS: u64 = 50;

/// When a [`Rule`] applies.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum When {
    /// The last user message contains this text (case-insensitive).
    Mentions(String),
    /// The last message is a tool result.
    AfterToolResult,
    /// Always.
    Always,
}

/// One thing a scripted reply does.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Step {
    /// Stream text, word by word.
    Text(String),
    /// Stream reasoning, word by word.
    Reasoning(String),
    /// Call a tool with these arguments (streamed in fragments).
    ToolCall {
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: Value,
    },
    /// Fail the stream here with this error.
    Fail(ModelErrorKind, String),
}

/// A condition and the reply it triggers.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    when: When,
    reply: Vec<Step>,
}

impl Rule {
    /// A rule replying with `reply` when `when` matches.
    #[must_use]
    pub fn new(when: When, reply: Vec<Step>) -> Self {
        Self { when, reply }
    }
}

/// Ordered rules; the first that matches wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    rules: Vec<Rule>,
}

impl Script {
    /// No rules: only the built-in behaviour.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule after the existing ones.
    #[must_use]
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }
}

/// The scripted model; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    script: Arc<Script>,
    /// Whether clients tune it with `forwardedProps.scripted`.
    knobs: bool,
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::with_script(Script::default())
    }
}

impl ScriptedModel {
    /// The built-in behaviour only.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Rules first, then the built-in behaviour.
    #[must_use]
    pub fn with_script(script: Script) -> Self {
        Self {
            script: Arc::new(script),
            knobs: true,
        }
    }

    /// Whether a client's `forwardedProps.scripted` (`tokens`, `delay_ms`) is honoured (by
    /// default it is: a model for tests and load). A server open to clients it does not trust
    /// turns it off, so that no request makes it stream, and log, answers of any length.
    #[must_use]
    pub fn client_knobs(mut self, on: bool) -> Self {
        self.knobs = on;
        self
    }

    fn plan(&self, req: &ModelRequest) -> Plan {
        let last = req.messages.last();
        // Read where it is: a long prompt is not copied to be matched.
        let user_text = req
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User { content, .. } => Some(crate::message::parts_text(content)),
                _ => None,
            })
            .unwrap_or_default();
        let after_tool = matches!(last, Some(Message::Tool { .. }));

        let mut steps = self
            .script
            .rules
            .iter()
            .find(|rule| match &rule.when {
                When::Mentions(text) => !after_tool && mentions(&user_text, text),
                When::AfterToolResult => after_tool,
                When::Always => true,
            })
            .map(|rule| rule.reply.clone());

        let props = req
            .run
            .extensions
            .get::<ForwardedProps>()
            .filter(|_| self.knobs);
        let setting = |name: &str| {
            props
                .and_then(|props| props.0.pointer(&format!("/scripted/{name}")))
                .and_then(Value::as_u64)
        };
        // "slowly": a long answer, one token every 50 ms, for clients to cancel mid-way.
        let slowly = !after_tool && has_word(&user_text, "slowly");
        let filler = setting("tokens").or(slowly.then_some(SLOW_TOKENS));
        let mut plan = Plan::new(req.run.message_id.clone(), input_tokens(&req.messages));
        plan.delay = setting("delay_ms")
            .or(slowly.then_some(SLOW_DELAY_MS))
            .map(Duration::from_millis);
        // Filler answers, unless the user asks for tools: a run of any length after a call.
        let calls = || mentioned_tools(&user_text, req.tools.iter().map(|t| t.name.as_str()));
        if steps.is_none()
            && (after_tool || calls().is_empty())
            && let Some(tokens) = filler
        {
            plan.filler(tokens);
            return plan;
        }
        let steps = steps.get_or_insert_with(|| {
            let mut steps = Vec::new();
            if after_tool {
                steps.push(Step::Text(describe_results(&req.messages)));
                return steps;
            }
            if has_word(&user_text, "think") {
                steps.push(Step::Reasoning(format!(
                    "The user said \"{user_text}\". Let me answer briefly."
                )));
            }
            let calls = calls();
            if calls.is_empty() {
                steps.push(Step::Text(format!("You said: {user_text}")));
            } else {
                steps.extend(calls);
            }
            steps
        });
        for step in steps.drain(..) {
            plan.step(step);
        }
        plan
    }
}

impl Service<ModelRequest> for ScriptedModel {
    type Response = ScriptedStream;
    type Error = ModelError;
    type Future = std::future::Ready<Result<ScriptedStream, ModelError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        std::future::ready(Ok(self.plan(&req).finish()))
    }
}

/// What the scripted model streams, generated lazily (a filler of a million tokens costs nothing
/// up front).
pub struct ScriptedStream {
    queue: VecDeque<Planned>,
    message_id: MessageId,
    delay: Option<Duration>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

enum Planned {
    Event(ModelEvent),
    Filler(u64),
    /// Text or reasoning streamed a word at a time from `at`: a long echo costs its text, not
    /// an event per word up front.
    Words {
        message_id: MessageId,
        text: String,
        at: usize,
        reasoning: bool,
    },
    Fail(ModelError),
}

impl fmt::Debug for ScriptedStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedStream")
            .field("message_id", &self.message_id)
            .field("planned", &self.queue.len())
            .finish()
    }
}

impl Stream for ScriptedStream {
    type Item = Result<ModelEvent, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let (Some(delay), Some(Planned::Filler(_))) = (self.delay, self.queue.front()) {
            let sleep = self
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(delay)));
            ready!(sleep.as_mut().poll(cx));
            self.sleep = None;
        }
        let item = match self.queue.pop_front() {
            None => None,
            Some(Planned::Event(event)) => Some(Ok(event)),
            Some(Planned::Fail(error)) => {
                self.queue.clear();
                Some(Err(error))
            }
            Some(Planned::Words {
                message_id,
                text,
                at,
                reasoning,
            }) => {
                let word = words(&text[at..]).next().unwrap_or_default();
                let delta = word.into();
                let next = at + word.len();
                let event = if reasoning {
                    ModelEvent::ReasoningDelta {
                        message_id: message_id.clone(),
                        delta,
                    }
                } else {
                    ModelEvent::TextDelta {
                        message_id: message_id.clone(),
                        delta,
                    }
                };
                if next < text.len() {
                    self.queue.push_front(Planned::Words {
                        message_id,
                        text,
                        at: next,
                        reasoning,
                    });
                }
                Some(Ok(event))
            }
            Some(Planned::Filler(left)) => {
                if left > 1 {
                    self.queue.push_front(Planned::Filler(left - 1));
                }
                Some(Ok(ModelEvent::TextDelta {
                    message_id: self.message_id.clone(),
                    delta: FILLER[(left % FILLER.len() as u64) as usize].into(),
                }))
            }
        };
        Poll::Ready(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.queue.len(), None)
    }
}

const FILLER: [&str; 8] = [
    "lorem ",
    "ipsum ",
    "dolor ",
    "sit ",
    "amet ",
    "consectetur ",
    "adipiscing ",
    "elit ",
];

/// Builds the stream of one step.
struct Plan {
    queue: VecDeque<Planned>,
    message_id: MessageId,
    delay: Option<Duration>,
    input_tokens: u64,
    output_tokens: u64,
    calls: usize,
}

impl Plan {
    fn new(message_id: MessageId, input_tokens: u64) -> Self {
        Self {
            queue: VecDeque::new(),
            message_id,
            delay: None,
            input_tokens,
            output_tokens: 0,
            calls: 0,
        }
    }

    fn filler(&mut self, tokens: u64) {
        if tokens > 0 {
            self.queue.push_back(Planned::Filler(tokens));
            self.output_tokens += tokens;
        }
    }

    fn words(&mut self, message_id: MessageId, text: String, reasoning: bool) {
        if text.is_empty() {
            return;
        }
        self.output_tokens += words(&text).count() as u64;
        self.queue.push_back(Planned::Words {
            message_id,
            text,
            at: 0,
            reasoning,
        });
    }

    fn step(&mut self, step: Step) {
        match step {
            Step::Text(text) => {
                let message_id = self.message_id.clone();
                self.words(message_id, text, false);
            }
            Step::Reasoning(text) => {
                let message_id = MessageId::from(format!("{}-reasoning", self.message_id));
                self.words(message_id, text, true);
            }
            Step::ToolCall { name, arguments } => {
                let id = ToolCallId::from(format!("{}-call-{}", self.message_id, self.calls));
                self.calls += 1;
                self.queue
                    .push_back(Planned::Event(ModelEvent::ToolCallStart {
                        id: id.clone(),
                        name,
                    }));
                let arguments = arguments.to_string();
                for fragment in fragments(&arguments, 8) {
                    self.output_tokens += 1;
                    self.queue
                        .push_back(Planned::Event(ModelEvent::ToolCallArgs {
                            id: id.clone(),
                            delta: fragment.into(),
                        }));
                }
                self.queue
                    .push_back(Planned::Event(ModelEvent::ToolCallEnd { id }));
            }
            Step::Fail(kind, message) => {
                self.queue
                    .push_back(Planned::Fail(ModelError::new(kind, message)));
            }
        }
    }

    fn finish(mut self) -> ScriptedStream {
        let reason = if self.calls > 0 {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        self.queue
            .push_back(Planned::Event(ModelEvent::Usage(Usage {
                input_tokens: self.input_tokens,
                output_tokens: self.output_tokens,
                ..Usage::default()
            })));
        self.queue
            .push_back(Planned::Event(ModelEvent::Finish(reason)));
        ScriptedStream {
            queue: self.queue,
            message_id: self.message_id,
            delay: self.delay,
            sleep: None,
        }
    }
}

/// Words with their trailing whitespace: concatenated, they give the text back.
fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let end = rest[word_end..]
            .find(|c: char| !c.is_whitespace())
            .map_or(rest.len(), |i| word_end + i);
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(word)
    })
}

/// Pieces of at most `max` bytes, on character boundaries.
fn fragments(text: &str, max: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = max.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

fn input_tokens(messages: &[Message]) -> u64 {
    let words = |text: &str| text.split_whitespace().count() as u64;
    messages
        .iter()
        .map(|m| match m {
            Message::Subagent { .. } => 0,
            Message::System { content, .. }
            | Message::Developer { content, .. }
            | Message::Assistant { content, .. }
            | Message::Reasoning { content, .. } => words(content),
            Message::User { content, .. } | Message::Tool { content, .. } => {
                words(&crate::message::parts_text(content))
            }
        })
        .sum()
}

/// Whether `text` has `word` (ASCII letters and digits) as a word of its own, in any case.
fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case(word))
}

/// Whether `text` mentions `what`, in any case.
fn mentions(text: &str, what: &str) -> bool {
    if what.is_ascii() {
        let what = what.as_bytes();
        what.is_empty()
            || text
                .as_bytes()
                .windows(what.len())
                .any(|window| window.eq_ignore_ascii_case(what))
    } else {
        text.to_lowercase().contains(&what.to_lowercase())
    }
}

/// Calls of every tool named in `text`, each with the first JSON object after its name.
fn mentioned_tools<'a>(text: &str, tools: impl Iterator<Item = &'a str>) -> Vec<Step> {
    let mut found: Vec<(usize, &str)> = tools
        .filter_map(|name| text.find(name).map(|at| (at, name)))
        .collect();
    found.sort_unstable();
    found
        .iter()
        .enumerate()
        .map(|(i, &(at, name))| {
            let end = found.get(i + 1).map_or(text.len(), |&(next, _)| next);
            let segment = &text[at + name.len()..end];
            Step::ToolCall {
                name: name.to_owned(),
                arguments: first_json_object(segment)
                    .unwrap_or_else(|| Value::Object(Default::default())),
            }
        })
        .collect()
}

fn first_json_object(text: &str) -> Option<Value> {
    let start = text.find('{')?;
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    match stream.next() {
        Some(Ok(value @ Value::Object(_))) => Some(value),
        _ => None,
    }
}

/// "The `add` tool returned 3." for each result since the last assistant message.
fn describe_results(messages: &[Message]) -> String {
    let calls: Vec<&ToolCallRequest> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant { tool_calls, .. } => Some(tool_calls.iter()),
            _ => None,
        })
        .flatten()
        .collect();
    let results: Vec<String> = messages
        .iter()
        .rev()
        .take_while(|m| matches!(m, Message::Tool { .. }))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let name = calls
                    .iter()
                    .find(|c| &c.id == tool_call_id)
                    .map_or("tool", |c| c.name.as_str());
                let text = crate::message::parts_to_text(content);
                Some(if *is_error {
                    format!("The `{name}` tool failed: {text}.")
                } else {
                    format!("The `{name}` tool returned {text}.")
                })
            }
            _ => None,
        })
        .collect();
    results.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use tower::ServiceExt;

    #[test]
    fn a_prompt_is_matched_in_any_case_where_it_is() {
        assert!(mentions("What is the WEATHER in Paris?", "weather"));
        assert!(!mentions("What is the wheather?", "weather"));
        assert!(mentions("Une ÉCOLE ouverte", "école"));
        assert!(has_word("Please answer SLOWLY.", "slowly"));
        assert!(!has_word("slowlyish", "slowly"));
        use crate::message::ContentPart;
        let one = [ContentPart::text("one text")];
        assert!(matches!(
            crate::message::parts_text(&one),
            std::borrow::Cow::Borrowed("one text")
        ));
        let two = [ContentPart::text("two "), ContentPart::text("words")];
        assert_eq!(crate::message::parts_text(&two), "two words");
        let messages = [
            Message::user("three words here"),
            Message::assistant("m".into(), "and two"),
        ];
        assert_eq!(input_tokens(&messages), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn filler_tokens_can_be_paced() {
        let mut run = crate::context::RunContext::default();
        run.extensions.insert(ForwardedProps(
            serde_json::json!({"scripted": {"tokens": 3, "delay_ms": 1000}}),
        ));
        let req = ModelRequest {
            messages: vec![],
            tools: Default::default(),
            options: Default::default(),
            run,
        };
        let start = tokio::time::Instant::now();
        let events: Vec<_> = ScriptedModel::new()
            .oneshot(req)
            .await
            .unwrap()
            .collect()
            .await;
        assert_eq!(events.len(), 5, "3 tokens, usage, finish");
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }

    #[test]
    fn words_and_fragments_concatenate_back() {
        let text = "Hello,  wide\tworld ";
        assert_eq!(words(text).collect::<String>(), text);
        assert_eq!(words(text).count(), 3);
        let json = r#"{"city":"Zürich","n":1}"#;
        assert_eq!(fragments(json, 3).collect::<String>(), json);
    }

    #[test]
    fn mentioned_tools_take_their_own_arguments() {
        let steps = mentioned_tools(
            r#"please add {"a": 1, "b": 2} and get_time"#,
            ["get_time", "add"].into_iter(),
        );
        assert_eq!(
            steps,
            vec![
                Step::ToolCall {
                    name: "add".into(),
                    arguments: serde_json::json!({"a": 1, "b": 2})
                },
                Step::ToolCall {
                    name: "get_time".into(),
                    arguments: serde_json::json!({})
                },
            ]
        );
    }
}
