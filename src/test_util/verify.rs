use std::{collections::HashSet, fmt};

use crate::agui::{Event, EventType};

/// A broken rule of the AG-UI event sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The index of the offending event (the length of the sequence for "missing end").
    pub index: usize,
    /// What is wrong, worded like the official verifier.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "event {}: {}", self.index, self.message)
    }
}

impl std::error::Error for Violation {}

/// Checks a sequence of events against the rules of `@ag-ui/client`'s `verifyEvents` (1.0)
/// and, stricter than the client, that a run ends with exactly one terminal event.
///
/// Rules: the first event is `RUN_STARTED` (or `RUN_ERROR`); no run inside a run; nothing after
/// `RUN_ERROR` but a new run, nothing after `RUN_FINISHED` but a new run or `RUN_ERROR`; text
/// messages, tool calls, reasoning spans and reasoning messages are opened once and continued or
/// closed only while open; steps are started once and finished only while active; `RUN_FINISHED`
/// only when nothing is open.
///
/// # Errors
///
/// The first broken rule.
pub fn verify(events: &[Event]) -> Result<(), Violation> {
    let mut verifier = Verifier::default();
    for (index, event) in events.iter().enumerate() {
        verifier
            .check(event)
            .map_err(|message| Violation { index, message })?;
    }
    match verifier.run {
        RunState::Running => Err(Violation {
            index: events.len(),
            message: "the stream ended without RUN_FINISHED or RUN_ERROR".to_owned(),
        }),
        _ => Ok(()),
    }
}

#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
enum RunState {
    #[default]
    NotStarted,
    Running,
    Finished,
    Errored,
}

#[derive(Debug, Default)]
struct Verifier {
    run: RunState,
    text: HashSet<String>,
    tools: HashSet<String>,
    steps: HashSet<String>,
    reasoning: HashSet<String>,
    reasoning_messages: HashSet<String>,
}

fn open(set: &mut HashSet<String>, id: &str, what: &str) -> Result<(), String> {
    if set.insert(id.to_owned()) {
        Ok(())
    } else {
        Err(format!("{what} with ID '{id}' is already in progress"))
    }
}

fn active(set: &HashSet<String>, id: &str, what: &str) -> Result<(), String> {
    if set.contains(id) {
        Ok(())
    } else {
        Err(format!("No active {what} found with ID '{id}'"))
    }
}

fn close(set: &mut HashSet<String>, id: &str, what: &str) -> Result<(), String> {
    if set.remove(id) {
        Ok(())
    } else {
        Err(format!("No active {what} found with ID '{id}'"))
    }
}

impl Verifier {
    fn check(&mut self, event: &Event) -> Result<(), String> {
        let kind = event.kind();
        match (self.run, kind) {
            (RunState::NotStarted, EventType::RunStarted | EventType::RunError) => {}
            (RunState::NotStarted, _) => {
                return Err(format!(
                    "First event must be 'RUN_STARTED', got '{}'",
                    kind.as_str()
                ));
            }
            (RunState::Running, EventType::RunStarted) => {
                return Err("Cannot send 'RUN_STARTED' while a run is still active".to_owned());
            }
            (RunState::Errored, EventType::RunStarted)
            | (RunState::Finished, EventType::RunStarted) => {
                *self = Self::default();
            }
            (RunState::Errored, _) => {
                return Err(format!(
                    "Cannot send event type '{}': The run has already errored with 'RUN_ERROR'",
                    kind.as_str()
                ));
            }
            (RunState::Finished, EventType::RunError) => {}
            (RunState::Finished, _) => {
                return Err(format!(
                    "Cannot send event type '{}': The run has already finished with 'RUN_FINISHED'",
                    kind.as_str()
                ));
            }
            (RunState::Running, _) => {}
        }
        match event {
            Event::RunStarted(_) => self.run = RunState::Running,
            Event::RunError(_) => self.run = RunState::Errored,
            Event::RunFinished(_) => {
                let open: Vec<&str> = [
                    (&self.steps, "steps"),
                    (&self.text, "text messages"),
                    (&self.tools, "tool calls"),
                    (&self.reasoning, "reasoning"),
                    (&self.reasoning_messages, "reasoning messages"),
                ]
                .iter()
                .filter(|(set, _)| !set.is_empty())
                .map(|(_, what)| *what)
                .collect();
                if !open.is_empty() {
                    return Err(format!(
                        "Cannot send 'RUN_FINISHED' while {} are still active",
                        open.join(", ")
                    ));
                }
                self.run = RunState::Finished;
            }
            Event::StepStarted(e) => open(&mut self.steps, &e.step_name, "Step")?,
            Event::StepFinished(e) => close(&mut self.steps, &e.step_name, "step")?,
            Event::TextMessageStart(e) => open(&mut self.text, &e.message_id, "Text message")?,
            Event::TextMessageContent(e) => active(&self.text, &e.message_id, "text message")?,
            Event::TextMessageEnd(e) => close(&mut self.text, &e.message_id, "text message")?,
            Event::ToolCallStart(e) => open(&mut self.tools, &e.tool_call_id, "Tool call")?,
            Event::ToolCallArgs(e) => active(&self.tools, &e.tool_call_id, "tool call")?,
            Event::ToolCallEnd(e) => close(&mut self.tools, &e.tool_call_id, "tool call")?,
            Event::ReasoningStart(e) => open(&mut self.reasoning, &e.message_id, "Reasoning")?,
            Event::ReasoningEnd(e) => close(&mut self.reasoning, &e.message_id, "reasoning")?,
            Event::ReasoningMessageStart(e) => {
                open(
                    &mut self.reasoning_messages,
                    &e.message_id,
                    "Reasoning message",
                )?;
            }
            Event::ReasoningMessageContent(e) => {
                active(&self.reasoning_messages, &e.message_id, "reasoning message")?;
            }
            Event::ReasoningMessageEnd(e) => {
                close(
                    &mut self.reasoning_messages,
                    &e.message_id,
                    "reasoning message",
                )?;
            }
            _ => {}
        }
        Ok(())
    }
}
