//! What a run whose server stopped had done, read back from its log: the conversation of its
//! completed steps, its state, the calls that may have run, and the events that close what its
//! cut step left open.
//!
//! A model step is complete once its `STEP_FINISHED` is logged (its text, reasoning and tool
//! calls with it); a tool call once its `TOOL_CALL_RESULT` is. What a step that was cut off
//! streamed is closed (every `*_START` gets its `*_END`, so that clients and verifiers see a
//! well-formed stream) and left out of the conversation: the continuation does that step again,
//! under the same turn (step names go on from the log's).
//! Events of sub-agents (with a `subagentRunId`) are the calls' own work, not the run's.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::LoggedEvent;
use crate::{
    agui::{
        AguiOptions, Event,
        event::{BaseEvent, Custom, EncryptedValueSubtype, TokenUsage, ToolCallResult},
        framing::{Framing, bare_start},
        future::USAGE_EVENT,
    },
    id::{MessageId, ToolCallId},
    message::{Message, ToolCallRequest},
    model::Usage,
    run::RunRequest,
};

/// The name of the `CUSTOM` event that marks where a run was taken over: its value says which
/// attempt begins (from 2) and that the events after it continue the same run.
pub const TAKEOVER: &str = "agent_tower.takeover";

/// What a run's log says it had done; see the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// The messages of its completed steps, in order.
    pub(crate) messages: Vec<Message>,
    /// Its state after them, if it has one.
    pub(crate) state: Option<Value>,
    /// The step being streamed when the log ends.
    open: Option<Step>,
    /// The model steps it completed: the continuation's first step is this turn.
    pub(crate) turns: u32,
    /// What its completed steps used, and the steps of its sub-agents, in the order logged.
    pub(crate) usage: Vec<Usage>,
    /// Logged events that were not the run's own JSON (left out).
    pub(crate) unreadable: usize,
    /// Whether the log holds the start of the segment being run: its owner may have died
    /// before its `RUN_STARTED` was committed (or sent it ahead of the commit).
    started: bool,
}

/// A model step being streamed: its messages in the order they began.
#[derive(Debug, Default)]
struct Step {
    name: String,
    messages: Vec<Draft>,
    /// What it used, once it says.
    usage: Vec<Usage>,
}

#[derive(Debug)]
enum Draft {
    Text {
        id: MessageId,
        content: String,
        open: bool,
        calls: Vec<Call>,
    },
    Reasoning {
        id: MessageId,
        content: String,
        /// Until its `REASONING_MESSAGE_END`.
        message_open: bool,
        /// Until its `REASONING_END`.
        open: bool,
        encrypted_value: Option<String>,
    },
}

#[derive(Debug)]
struct Call {
    id: ToolCallId,
    name: String,
    arguments: String,
    open: bool,
    encrypted_value: Option<String>,
}

impl Progress {
    /// Reads `events`, a run's log from its segment's `RUN_STARTED` (or from its beginning:
    /// an earlier segment's events are forgotten at its end).
    pub(crate) fn of(events: &[LoggedEvent]) -> Self {
        let mut progress = Self::default();
        for logged in events {
            match serde_json::from_slice::<Event>(logged.json()) {
                Ok(event) => progress.apply(event),
                Err(_) => progress.unreadable += 1,
            }
        }
        progress
    }

    /// The events that continue the log where it was cut, as attempt `attempt` of the run
    /// asked `asked` (its conversation is the one before the run's own steps):
    ///
    /// 0. when the log does not hold the segment's start (its owner died before committing
    ///    it), the run's opening, as its first attempt writes it: the log is one well-formed run
    ///    whatever the cut;
    /// 1. the `CUSTOM` [`TAKEOVER`] marker;
    /// 2. the ends of the text and reasoning the cut step left open;
    /// 3. a `MESSAGES_SNAPSHOT` of the conversation the continuation answers (what the cut step
    ///    began is not in it);
    /// 4. the ends of the tool calls cut mid-arguments, after that snapshot: a client that applies
    ///    it no longer holds those calls, so their ends announce no call (the official client
    ///    fires `onNewToolCall` at a `TOOL_CALL_END`, with the arguments it holds);
    /// 5. the cut step's `STEP_FINISHED`.
    ///
    /// One write: a log cut again in the middle of it is never left with a call open.
    pub(crate) fn bridge(&self, attempt: u32, asked: &RunRequest) -> Vec<Event> {
        let mut events = self.opening(asked);
        events.push(Self::marker(attempt));
        let mut cut_calls = Vec::new();
        for draft in self.open.iter().flat_map(|step| &step.messages) {
            match draft {
                Draft::Text {
                    id, open, calls, ..
                } => {
                    if *open {
                        events.push(Event::text_message_end(id.clone()));
                    }
                    cut_calls.extend(
                        calls
                            .iter()
                            .filter(|call| call.open)
                            .map(|call| Event::tool_call_end(call.id.clone())),
                    );
                }
                Draft::Reasoning {
                    id,
                    message_open,
                    open,
                    ..
                } => {
                    if *message_open {
                        events.push(Event::reasoning_message_end(id.clone()));
                    }
                    if *open {
                        events.push(Event::reasoning_end(id.clone()));
                    }
                }
            }
        }
        events.push(Event::messages_snapshot(
            asked.messages.iter().chain(&self.messages),
        ));
        events.extend(cut_calls);
        if let Some(step) = &self.open {
            events.push(Event::step_finished(step.name.clone()));
        }
        events
    }

    /// What opens the segment when the log does not (see [`bridge`](Self::bridge)): none
    /// when it does.
    fn opening(&self, asked: &RunRequest) -> Vec<Event> {
        if self.started {
            return Vec::new();
        }
        match Framing::of(&AguiOptions::default(), &asked.run) {
            Ok(framing) => framing.opening(asked).collect(),
            // The continuation ends at once with `invalid_options`: its start says nothing more.
            Err(_) => vec![bare_start(&asked.run.thread_id, &asked.run.run_id)],
        }
    }

    /// Whether the log holds the start of the segment being run.
    pub(crate) fn started(&self) -> bool {
        self.started
    }

    /// The `CUSTOM` event that marks the takeover: `attempt` begins.
    fn marker(attempt: u32) -> Event {
        Custom {
            name: TAKEOVER.to_owned(),
            value: json!({ "attempt": attempt }),
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    fn apply(&mut self, mut event: Event) {
        if let Event::Custom(custom) = &event
            && custom.name == USAGE_EVENT
        {
            // A sub-agent's step was spent, whether its call is done again or not; the run's
            // own step counts once it is complete (a cut one is done again, and counted then).
            let used = usage_of(&custom.value);
            match &mut self.open {
                Some(step) if custom.subagent_run_id.is_none() => step.usage.extend(used),
                _ => self.usage.extend(used),
            }
            return;
        }
        if event.subagent_run_id_mut().is_some_and(|id| id.is_some()) {
            return;
        }
        match event {
            Event::RunStarted(_) => {
                *self = Self {
                    started: true,
                    ..Self::default()
                };
            }
            // The segment is over: what runs now is the next, which may not have started.
            Event::RunFinished(_) | Event::RunError(_) => *self = Self::default(),
            Event::Custom(custom) if custom.name == TAKEOVER => self.open = None,
            Event::StepStarted(step) => {
                self.open = Some(Step {
                    name: step.step_name,
                    messages: Vec::new(),
                    usage: Vec::new(),
                });
            }
            Event::StepFinished(_) => {
                if let Some(mut step) = self.open.take() {
                    self.usage.append(&mut step.usage);
                    self.complete(step);
                    self.turns += 1;
                }
            }
            Event::TextMessageStart(start) => {
                self.text(&start.message_id);
            }
            Event::TextMessageContent(content) => {
                if let Some(Draft::Text { content: text, .. }) = self.draft(&content.message_id) {
                    text.push_str(content.delta.as_str());
                }
            }
            Event::TextMessageEnd(end) => {
                if let Some(Draft::Text { open, .. }) = self.draft(&end.message_id) {
                    *open = false;
                }
            }
            Event::ReasoningMessageStart(start) => {
                if let Some(step) = &mut self.open
                    && !step.messages.iter().any(|d| d.id() == &start.message_id)
                {
                    step.messages.push(Draft::Reasoning {
                        id: start.message_id,
                        content: String::new(),
                        message_open: true,
                        open: true,
                        encrypted_value: None,
                    });
                }
            }
            Event::ReasoningMessageContent(content) => {
                if let Some(Draft::Reasoning { content: text, .. }) =
                    self.draft(&content.message_id)
                {
                    text.push_str(content.delta.as_str());
                }
            }
            Event::ReasoningMessageEnd(end) => {
                if let Some(Draft::Reasoning { message_open, .. }) = self.draft(&end.message_id) {
                    *message_open = false;
                }
            }
            Event::ReasoningEnd(end) => {
                if let Some(Draft::Reasoning { open, .. }) = self.draft(&end.message_id) {
                    *open = false;
                }
            }
            Event::ReasoningEncryptedValue(sealed) => {
                let value = Some(sealed.encrypted_value);
                match sealed.subtype {
                    EncryptedValueSubtype::Message => {
                        if let Some(Draft::Reasoning {
                            encrypted_value, ..
                        }) = self.draft(&MessageId::from(sealed.entity_id.as_str()))
                        {
                            *encrypted_value = value;
                        }
                    }
                    EncryptedValueSubtype::ToolCall => {
                        if let Some(call) = self.call(&ToolCallId::from(sealed.entity_id.as_str()))
                        {
                            call.encrypted_value = value;
                        }
                    }
                }
            }
            Event::ToolCallStart(start) => {
                let parent = start.parent_message_id.unwrap_or_else(MessageId::new);
                if let Some(Draft::Text { calls, .. }) = self.text(&parent) {
                    calls.push(Call {
                        id: start.tool_call_id,
                        name: start.tool_call_name,
                        arguments: String::new(),
                        open: true,
                        encrypted_value: None,
                    });
                }
            }
            Event::ToolCallArgs(args) => {
                if let Some(call) = self.call(&args.tool_call_id) {
                    call.arguments.push_str(args.delta.as_str());
                }
            }
            Event::ToolCallEnd(end) => {
                if let Some(call) = self.call(&end.tool_call_id) {
                    call.open = false;
                }
            }
            Event::ToolCallResult(result) => self.answered(result),
            Event::StateSnapshot(snapshot) => self.state = Some(snapshot.snapshot),
            Event::StateDelta(delta) => {
                let state = self.state.get_or_insert_with(|| json!({}));
                let applied =
                    serde_json::from_value::<json_patch::Patch>(Value::Array(delta.delta))
                        .map_err(|e| e.to_string())
                        .and_then(|patch| {
                            json_patch::patch(state, &patch).map_err(|e| e.to_string())
                        });
                if let Err(error) = applied {
                    tracing::debug!(%error, "a logged STATE_DELTA did not apply");
                }
            }
            _ => {}
        }
    }

    /// The open step's message `id`.
    fn draft(&mut self, id: &MessageId) -> Option<&mut Draft> {
        let step = self.open.as_mut()?;
        step.messages.iter_mut().find(|draft| draft.id() == id)
    }

    /// The open step's text message `id`, begun if it is not there.
    fn text(&mut self, id: &MessageId) -> Option<&mut Draft> {
        let step = self.open.as_mut()?;
        let at = match step.messages.iter().position(|draft| draft.id() == id) {
            Some(at) => at,
            None => {
                step.messages.push(Draft::Text {
                    id: id.clone(),
                    content: String::new(),
                    open: true,
                    calls: Vec::new(),
                });
                step.messages.len() - 1
            }
        };
        step.messages.get_mut(at)
    }

    /// The open step's tool call `id`.
    fn call(&mut self, id: &ToolCallId) -> Option<&mut Call> {
        let step = self.open.as_mut()?;
        step.messages.iter_mut().find_map(|draft| match draft {
            Draft::Text { calls, .. } => calls.iter_mut().find(|call| &call.id == id),
            Draft::Reasoning { .. } => None,
        })
    }

    /// A finished step: its messages join the conversation, its calls wait for their results.
    fn complete(&mut self, step: Step) {
        for draft in step.messages {
            match draft {
                Draft::Text {
                    id, content, calls, ..
                } => {
                    let tool_calls: Vec<ToolCallRequest> = calls
                        .into_iter()
                        .map(|call| ToolCallRequest {
                            id: call.id,
                            name: call.name,
                            arguments: call.arguments,
                            encrypted_value: call.encrypted_value,
                        })
                        .collect();
                    self.messages.push(Message::Assistant {
                        id,
                        content,
                        tool_calls,
                    });
                }
                Draft::Reasoning {
                    id,
                    content,
                    encrypted_value,
                    ..
                } => self.messages.push(Message::Reasoning {
                    id,
                    content,
                    encrypted_value,
                }),
            }
        }
    }

    /// The result of a call: of a completed step, or of the conversation the run was asked
    /// (a call it runs first, such as an approved one).
    fn answered(&mut self, result: ToolCallResult) {
        let message = crate::agui::input::Message::Tool {
            id: result.message_id,
            content: result.content,
            tool_call_id: result.tool_call_id,
            error: None,
            subagent_run_id: None,
        };
        self.messages.extend(message.to_domain());
    }
}

/// The calls of `messages` that have no result: when a run is continued, they may have run.
pub(crate) fn unanswered(messages: &[Message]) -> HashSet<ToolCallId> {
    let mut calls = HashSet::new();
    for message in messages {
        match message {
            Message::Assistant { tool_calls, .. } => {
                calls.extend(tool_calls.iter().map(|call| call.id.clone()));
            }
            Message::Tool { tool_call_id, .. } => {
                calls.remove(tool_call_id);
            }
            _ => {}
        }
    }
    calls
}

impl Draft {
    fn id(&self) -> &MessageId {
        match self {
            Self::Text { id, .. } | Self::Reasoning { id, .. } => id,
        }
    }
}

/// The usage an `agent_tower.usage` event's `value` tells (its cost included).
fn usage_of(value: &Value) -> Option<Usage> {
    let told: TokenUsage = serde_json::from_value(value.clone()).ok()?;
    let cost = value
        .get("cost")
        .and_then(|cost| serde_json::from_value(cost.clone()).ok());
    Some(Usage {
        input_tokens: told.input_tokens.unwrap_or_default(),
        output_tokens: told.output_tokens.unwrap_or_default(),
        reasoning_tokens: told.reasoning_tokens,
        cached_input_tokens: told.cached_input_tokens,
        cache_write_input_tokens: told.cache_write_input_tokens,
        cost,
        provider: told.provider,
        model: told.model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        agui::{event::RunStarted, input::ToolContent},
        message::Role,
    };

    fn logged(events: Vec<Event>) -> Vec<LoggedEvent> {
        events
            .iter()
            .enumerate()
            .map(|(n, event)| LoggedEvent::of(n as u64 + 1, event))
            .collect()
    }

    fn started() -> Event {
        RunStarted {
            thread_id: "t".into(),
            run_id: "r".into(),
            parent_run_id: None,
            input: None,
            protocol_version: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    fn result(call: &str, text: &str) -> Event {
        ToolCallResult {
            message_id: format!("tool-{call}").as_str().into(),
            tool_call_id: call.into(),
            content: ToolContent::Text(text.into()),
            role: None,
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into()
    }

    /// A step that said `text` under `message` and called `calls`, whole.
    fn step(message: &str, text: &str, calls: &[&str]) -> Vec<Event> {
        let id = MessageId::from(message);
        let mut events = vec![
            Event::step_started(format!("step-{message}")),
            Event::text_message_start(id.clone()),
            Event::text_message_content(id.clone(), text),
            Event::text_message_end(id.clone()),
        ];
        for call in calls {
            events.push(Event::tool_call_start(
                (*call).into(),
                "record".into(),
                id.clone(),
            ));
            events.push(Event::tool_call_args((*call).into(), r#"{"n": 1}"#));
            events.push(Event::tool_call_end((*call).into()));
        }
        events.push(Event::step_finished(format!("step-{message}")));
        events
    }

    #[test]
    fn completed_steps_and_results_are_the_conversation_and_a_cut_step_is_closed_and_left_out() {
        let mut events = vec![started()];
        events.extend(step("m1", "Let me look.", &["c1", "c2"]));
        events.push(result("c1", "one"));
        // The next step was streaming when the server stopped.
        let cut = MessageId::from("m2");
        events.extend([
            Event::step_started("step-m2".into()),
            Event::text_message_start(cut.clone()),
            Event::text_message_content(cut.clone(), "Half an ans"),
            Event::tool_call_start("c3".into(), "record".into(), cut.clone()),
            Event::tool_call_args("c3".into(), r#"{"n":"#),
        ]);
        let progress = Progress::of(&logged(events));

        let roles: Vec<_> = progress.messages.iter().map(Message::role).collect();
        assert_eq!(roles, [Role::Assistant, Role::Tool]);
        let Message::Assistant {
            content,
            tool_calls,
            ..
        } = &progress.messages[0]
        else {
            panic!("{:?}", progress.messages);
        };
        assert_eq!(content, "Let me look.");
        assert_eq!(tool_calls.len(), 2);
        assert_eq!(tool_calls[1].arguments, r#"{"n": 1}"#);
        assert_eq!(progress.messages[1].text(), "one");
        assert_eq!(
            unanswered(&progress.messages),
            HashSet::from(["c2".into()]),
            "c2 has no result"
        );

        let asked = RunRequest::new(vec![Message::user("look")]);
        let bridge = progress.bridge(2, &asked);
        let kinds: Vec<_> = bridge.iter().map(Event::kind).collect();
        use crate::agui::EventType::*;
        assert_eq!(
            kinds,
            [
                Custom,
                TextMessageEnd,
                MessagesSnapshot,
                ToolCallEnd,
                StepFinished
            ],
            "the cut call ends once the snapshot took it from the client"
        );
        let Event::MessagesSnapshot(snapshot) = &bridge[2] else {
            panic!("{bridge:?}");
        };
        let ids: Vec<&str> = snapshot.messages.iter().map(|m| m.id().as_ref()).collect();
        assert_eq!(ids.len(), 3, "{ids:?}");
        assert!(!ids.contains(&"m2"), "{ids:?}");
        assert_eq!(progress.turns, 1);
    }

    #[test]
    fn a_run_taken_over_before_forgets_the_step_its_marker_closed() {
        let mut events = vec![started()];
        events.extend(step("m1", "first", &["c1"]));
        let cut = MessageId::from("m2");
        events.extend([
            Event::step_started("step-m2".into()),
            Event::text_message_start(cut.clone()),
            Event::text_message_content(cut.clone(), "cut"),
        ]);
        let first = Progress::of(&logged(events.clone()));
        events.extend(first.bridge(2, &RunRequest::new(Vec::new())));
        events.push(result("c1", "done"));
        events.extend(step("m3", "second", &[]));
        let progress = Progress::of(&logged(events));
        let texts: Vec<_> = progress.messages.iter().map(Message::text).collect();
        assert_eq!(texts, ["first", "done", "second"]);
        let bridge = progress.bridge(3, &RunRequest::new(Vec::new()));
        let kinds: Vec<_> = bridge.iter().map(Event::kind).collect();
        use crate::agui::EventType::*;
        assert_eq!(kinds, [Custom, MessagesSnapshot], "nothing is left open");
        assert!(unanswered(&progress.messages).is_empty());
        assert_eq!(progress.turns, 2, "the cut step is not a turn taken");
    }

    #[test]
    fn state_is_the_snapshot_with_its_deltas_and_an_earlier_segment_is_forgotten() {
        let mut events = step("old", "before", &[]);
        events.push(started());
        events.push(Event::state_snapshot(json!({"theme": "light"})));
        events.push(Event::state_delta(&[json_patch::PatchOperation::Replace(
            json_patch::ReplaceOperation {
                path: "/theme".parse().unwrap(),
                value: json!("dark"),
            },
        )]));
        let progress = Progress::of(&logged(events));
        assert!(progress.messages.is_empty());
        assert_eq!(progress.state, Some(json!({"theme": "dark"})));
    }

    #[test]
    fn a_log_cut_before_its_start_was_committed_is_opened_by_the_bridge() {
        let mut asked = RunRequest::new(vec![Message::user("look")]);
        asked.run.thread_id = "t".into();
        asked.run.run_id = "r".into();
        use crate::agui::EventType::*;
        // Nothing logged: the start was sent ahead of a commit that never came.
        let progress = Progress::of(&[]);
        assert!(!progress.started());
        let bridge = progress.bridge(2, &asked);
        let kinds: Vec<_> = bridge.iter().map(Event::kind).collect();
        assert_eq!(kinds, [RunStarted, Custom, MessagesSnapshot]);
        let Event::RunStarted(start) = &bridge[0] else {
            panic!("{bridge:?}");
        };
        assert_eq!(
            (start.thread_id.as_str(), start.run_id.as_str()),
            ("t", "r")
        );
        let echoed = start.input.as_ref().expect("what the run answers");
        assert_eq!(echoed.messages.len(), 1, "{echoed:?}");

        // A segment that continues an interrupted run, cut before its own start: the
        // earlier segment is over, and none of its steps is this one's.
        let mut events = vec![started()];
        events.extend(step("m1", "Asking.", &["c1"]));
        let interrupted = json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"});
        events.push(serde_json::from_value(interrupted).unwrap());
        let progress = Progress::of(&logged(events));
        assert!(!progress.started());
        assert!(progress.messages.is_empty());
        assert_eq!(progress.turns, 0);
        let bridge = progress.bridge(2, &asked);
        let kinds: Vec<_> = bridge.iter().map(Event::kind).collect();
        assert_eq!(kinds, [RunStarted, Custom, MessagesSnapshot]);

        // Its start logged: the bridge goes on from it.
        let progress = Progress::of(&logged(vec![started()]));
        let kinds: Vec<_> = (progress.bridge(2, &asked).iter())
            .map(Event::kind)
            .collect();
        assert_eq!(kinds, [Custom, MessagesSnapshot]);
    }

    #[test]
    fn what_the_completed_steps_and_the_sub_agents_used_is_kept_and_the_cut_step_is_not() {
        let used = |tokens: u64, model: &str| Usage {
            input_tokens: tokens,
            output_tokens: 1,
            cost: Some(crate::model::Cost::from_usd(0.5)),
            model: Some(model.to_owned()),
            ..Usage::default()
        };
        let mut events = vec![started()];
        let mut first = step("m1", "Asking.", &["c1"]);
        first.insert(
            first.len() - 1,
            crate::agui::framing::usage_event(&used(10, "lead")),
        );
        events.extend(first);
        let mut sub = crate::agui::framing::usage_event(&used(20, "researcher"));
        if let Event::Custom(custom) = &mut sub {
            custom.subagent_run_id = Some("sub-1".into());
        }
        events.push(sub);
        events.push(result("c1", "done"));
        // The next step told what it used, and was cut before it finished.
        events.push(Event::step_started("step-m2".into()));
        events.push(crate::agui::framing::usage_event(&used(40, "lead")));
        let progress = Progress::of(&logged(events));
        assert_eq!(progress.usage, [used(10, "lead"), used(20, "researcher")]);
        assert_eq!(progress.turns, 1);
    }
}
