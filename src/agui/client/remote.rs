//! What the bridge knows of a thread's remote run: the updates not yet read and how the run ended
//! ([`Updates`]), the tool calls with their results, and the interrupts left to answer.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
};

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::super::{
    Event,
    event::RunFinishedOutcome,
    input::{self, InputContent, Interrupt, ToolContent},
};
use crate::{
    bridge::{BridgeError, BridgeErrorKind, End, Turn, Update, Updates},
    context::SharedState,
    id::MessageId,
    model::FinishReason,
    permission::Question,
    tool::ToolOutput,
};

#[derive(Default)]
struct Call {
    name: String,
    arguments: String,
    result: Option<ToolOutput>,
    interrupt: Option<Interrupt>,
}

#[derive(Default)]
struct State {
    updates: Updates,
    calls: HashMap<String, Call>,
    /// The interrupts the last run ended with, until a run answers them.
    interrupts: Vec<Interrupt>,
    /// Stops the reader of the run in flight.
    reader: Option<CancellationToken>,
    /// The conversation as the remote agent last told it (`MESSAGES_SNAPSHOT`).
    snapshot: Option<Vec<input::Message>>,
    /// The conversation as the bridge holds it: what the run was posted with, then what the
    /// remote agent said, called and answered in it (for an agent that sends no snapshot).
    held: Vec<input::Message>,
    /// The remote agent's shared state, as its snapshots and deltas make it.
    shared: Option<SharedState>,
    /// The client tools offered to the remote agent.
    offered: Vec<input::Tool>,
    /// The number of the run being read.
    run: u64,
    /// Calls the run knows under another id.
    aliases: crate::bridge::Aliases,
}

/// One thread's remote runs, one at a time.
#[derive(Default)]
pub(super) struct Remote {
    state: Mutex<State>,
    changed: Notify,
}

impl Remote {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn changed_now(&self) {
        self.changed.notify_waiters();
    }

    /// Whether a run is open: started and not yet read to its end.
    pub(super) fn is_open(&self) -> bool {
        self.lock().updates.is_open()
    }

    /// A new run posted with `messages`, offered `tools`, read by a reader that `stop` stops: the
    /// last one's reader is stopped, what it left is forgotten (the interrupts it ended with are
    /// answered by this one).
    pub(super) fn begin(
        &self,
        stop: CancellationToken,
        messages: Vec<input::Message>,
        tools: Vec<input::Tool>,
    ) -> u64 {
        let mut state = self.lock();
        state.run += 1;
        state.offered = tools;
        state.held = messages;
        state.snapshot = None;
        if let Some(reader) = state.reader.replace(stop) {
            reader.cancel();
        }
        state.updates = Updates::begin();
        state.run
    }

    /// The interrupts the last run ended with, to answer now: taken (no one else answers them)
    /// when `call` is one of them, or for any call when `call` is `None`.
    pub(super) fn take_interrupts(&self, call: Option<&str>) -> Vec<Interrupt> {
        let mut state = self.lock();
        let call = call.map(|call| state.aliases.remote(call).to_owned());
        let concerned = call.is_none_or(|call| state.interrupts.iter().any(|i| call_of(i) == call));
        if concerned {
            std::mem::take(&mut state.interrupts)
        } else {
            Vec::new()
        }
    }

    /// The client tools the last run was offered.
    pub(super) fn offered(&self) -> Vec<input::Tool> {
        self.lock().offered.clone()
    }

    /// Whether the remote run ended waiting for client tools: calls of the tools it was offered
    /// that have no result (the run's tools ran them; a new run brings their results).
    pub(super) fn awaits_client(&self) -> bool {
        let state = self.lock();
        state.updates.end().is_some()
            && state.calls.values().any(|call| {
                call.result.is_none() && state.offered.iter().any(|tool| tool.name == call.name)
            })
    }

    /// The conversation to resume with: as the remote agent last told it, else as the bridge
    /// holds it.
    pub(super) fn conversation(&self) -> Vec<input::Message> {
        let state = self.lock();
        state.snapshot.clone().unwrap_or_else(|| state.held.clone())
    }

    /// The questions among `interrupts` are answered: the calls that carry them have these
    /// results.
    pub(super) fn answered(&self, interrupts: &[(&Interrupt, ToolOutput)]) {
        let mut state = self.lock();
        for (interrupt, answer) in interrupts {
            if interrupt.tool_call_id.is_none()
                && let Some(call) = state.calls.get_mut(interrupt.id.as_str())
            {
                call.result = Some(answer.clone());
            }
        }
    }

    /// Whether `id` is a call the remote agent interrupted for.
    pub(super) fn is_interrupted(&self, id: &str) -> bool {
        let state = self.lock();
        state
            .calls
            .get(state.aliases.remote(id))
            .is_some_and(|call| call.interrupt.is_some())
    }

    /// The run's id of the remote agent's call `id`.
    pub(super) fn run_id(&self, id: &str) -> String {
        self.lock().aliases.run(id).to_owned()
    }

    /// The result of `id` once the remote agent sent it, or why it will not.
    pub(super) fn result(&self, id: &str) -> Option<Result<ToolOutput, String>> {
        let state = self.lock();
        let call = state.calls.get(state.aliases.remote(id));
        if let Some(result) = call.and_then(|call| call.result.clone()) {
            return Some(Ok(result));
        }
        let waiting = call.is_some_and(|call| call.interrupt.is_some());
        match state.updates.end() {
            Some(_) if !waiting => Some(Err(
                "the AG-UI agent ended its run without a result for this call (it is left to its \
                 client, which this bridge is not)"
                    .to_owned(),
            )),
            _ => None,
        }
    }

    /// Run `run` ended without its terminal event (nothing, if another run began since).
    pub(super) fn fail(&self, run: u64, why: BridgeError) {
        let mut state = self.lock();
        if state.run == run {
            state.updates.finish(End::Failed(why));
        }
        drop(state);
        self.changed_now();
    }

    /// One event of run `run`; whether the reading is over (its last event, or another run
    /// began since).
    pub(super) fn apply(&self, run: u64, event: Event) -> bool {
        let mut state = self.lock();
        if state.run != run {
            return true;
        }
        let mut last = false;
        match event {
            Event::TextMessageContent(e) => {
                state.said(Some(&e.message_id), &e.delta);
                state
                    .updates
                    .push(Update::Text(Some(e.message_id), e.delta.into()));
            }
            Event::TextMessageChunk(e) => {
                if let Some(delta) = e.delta {
                    state.said(e.message_id.as_ref(), &delta);
                    state.updates.push(Update::Text(e.message_id, delta));
                }
            }
            Event::ReasoningMessageContent(e) => {
                state
                    .updates
                    .push(Update::Thought(Some(e.message_id), e.delta.into()));
            }
            Event::ReasoningMessageChunk(e) => {
                if let Some(delta) = e.delta {
                    state.updates.push(Update::Thought(e.message_id, delta));
                }
            }
            Event::ToolCallStart(e) => {
                state.calls.insert(
                    e.tool_call_id.to_string(),
                    Call {
                        name: e.tool_call_name,
                        ..Call::default()
                    },
                );
            }
            Event::ToolCallArgs(e) => {
                if let Some(call) = state.calls.get_mut(e.tool_call_id.as_str()) {
                    call.arguments.push_str(&e.delta);
                }
            }
            Event::ToolCallEnd(e) => {
                let id = e.tool_call_id.to_string();
                if let Some(call) = state.calls.get(&id) {
                    let arguments = serde_json::from_str(&call.arguments)
                        .unwrap_or_else(|_| Value::Object(Default::default()));
                    let name = call.name.clone();
                    let text = call.arguments.clone();
                    state.called(&id, &name, text);
                    state.updates.push(Update::ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
            }
            Event::ToolCallResult(e) => {
                let call = state.calls.entry(e.tool_call_id.to_string()).or_default();
                call.result = Some(ToolOutput::text(text(&e.content)));
                state.held.push(input::Message::Tool {
                    id: e.message_id,
                    content: e.content,
                    tool_call_id: e.tool_call_id,
                    error: None,
                    subagent_run_id: None,
                });
            }
            Event::MessagesSnapshot(e) => state.snapshot = Some(e.messages),
            Event::StateSnapshot(e) => {
                state.shared = Some(SharedState::new(e.snapshot));
                state.push_shared();
            }
            Event::StateDelta(e) => {
                let patch = serde_json::from_value::<json_patch::Patch>(Value::Array(e.delta));
                let shared = state
                    .shared
                    .get_or_insert_with(|| SharedState::new(Value::Object(Default::default())));
                match patch.map(|patch| shared.apply(&patch)) {
                    Ok(Ok(())) => state.push_shared(),
                    Ok(Err(error)) => {
                        tracing::debug!(%error, "an AG-UI agent's STATE_DELTA did not apply")
                    }
                    Err(error) => {
                        tracing::debug!(%error, "an AG-UI agent's STATE_DELTA is not a JSON patch")
                    }
                }
            }
            Event::RunFinished(e) => {
                last = true;
                let end = match e.outcome {
                    Some(RunFinishedOutcome::Interrupt { interrupts }) => {
                        for interrupt in &interrupts {
                            if interrupt.tool_call_id.is_none() {
                                state.ask(interrupt);
                            }
                            state
                                .calls
                                .entry(call_of(interrupt).to_owned())
                                .or_default()
                                .interrupt = Some(interrupt.clone());
                        }
                        state.interrupts = interrupts;
                        End::Finished(FinishReason::ToolCalls)
                    }
                    Some(RunFinishedOutcome::Cancelled) => End::Failed(BridgeError::new(
                        BridgeErrorKind::AgentError,
                        "the AG-UI agent cancelled its run",
                    )),
                    _ => End::Finished(FinishReason::Stop),
                };
                state.updates.finish(end);
            }
            Event::RunError(e) => {
                last = true;
                let code = e.code.map(|code| format!(" ({code})")).unwrap_or_default();
                state.updates.finish(End::Failed(BridgeError::new(
                    BridgeErrorKind::AgentError,
                    format!("the AG-UI agent failed{code}: {}", e.message),
                )));
            }
            _ => {}
        }
        drop(state);
        self.changed_now();
        last
    }
}

/// The id of the call an interrupt is about: its tool call, else the call that carries it as a
/// question (under the interrupt's id).
pub(super) fn call_of(interrupt: &Interrupt) -> &str {
    interrupt
        .tool_call_id
        .as_ref()
        .map_or(interrupt.id.as_str(), |id| id.as_str())
}

impl State {
    /// An interrupt without a tool call, to the run as a call that carries its question (what
    /// the person is asked; the payload's schema, when it has one).
    fn ask(&mut self, interrupt: &Interrupt) {
        let message = interrupt
            .message
            .clone()
            .unwrap_or_else(|| format!("The agent waits for you ({}).", interrupt.reason));
        let mut question = Question::new(message);
        if let Some(schema) = &interrupt.response_schema {
            question = question.schema(schema.clone());
        }
        self.calls.insert(
            interrupt.id.clone(),
            Call {
                name: Question::TOOL.to_owned(),
                ..Call::default()
            },
        );
        self.updates.push(Update::ToolCall {
            id: interrupt.id.clone(),
            name: Question::TOOL.to_owned(),
            arguments: question.arguments(),
        });
    }

    /// A piece of the remote agent's text, into the conversation held.
    fn said(&mut self, message: Option<&MessageId>, delta: &str) {
        if let Some(input::Message::Assistant {
            id,
            content: Some(content),
            ..
        }) = self.held.last_mut()
            && message.is_none_or(|message| message == id)
        {
            content.push_str(delta);
            return;
        }
        self.held.push(input::Message::Assistant {
            id: message.cloned().unwrap_or_else(MessageId::new),
            content: Some(delta.to_owned()),
            name: None,
            tool_calls: None,
            subagent_run_id: None,
        });
    }

    /// A call of the remote agent, into the conversation held (with the message before it).
    fn called(&mut self, id: &str, name: &str, arguments: String) {
        let call = input::ToolCall {
            id: id.into(),
            kind: "function".to_owned(),
            function: input::FunctionCall {
                name: name.to_owned(),
                arguments,
            },
            encrypted_value: None,
        };
        if let Some(input::Message::Assistant { tool_calls, .. }) = self.held.last_mut() {
            tool_calls.get_or_insert_with(Vec::new).push(call);
            return;
        }
        self.held.push(input::Message::Assistant {
            id: MessageId::new(),
            content: None,
            name: None,
            tool_calls: Some(vec![call]),
            subagent_run_id: None,
        });
    }

    /// The remote agent's state, into the run's (its top-level keys).
    fn push_shared(&mut self) {
        if let Some(serde_json::Value::Object(keys)) = self.shared.as_ref().map(SharedState::get) {
            self.updates.push(Update::State(keys));
        }
    }
}

/// The text of a tool result.
fn text(content: &ToolContent) -> String {
    match content {
        ToolContent::Text(text) => text.clone(),
        ToolContent::Parts(parts) => parts
            .iter()
            .filter_map(|part| match part {
                InputContent::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

impl Turn for Remote {
    fn next(&self) -> Option<Result<Update, End>> {
        self.lock().updates.next()
    }

    /// The remote agent sent the call's result or interrupted for it, or its run ended.
    fn is_settled(&self, id: &str) -> bool {
        let state = self.lock();
        state.updates.end().is_some()
            || state
                .calls
                .get(id)
                .is_some_and(|call| call.result.is_some() || call.interrupt.is_some())
    }

    fn changed(&self) -> &Notify {
        &self.changed
    }

    fn rename(&self, remote: &str, run: &str) {
        self.lock().aliases.insert(remote, run);
    }

    /// Drops the connection (an AG-UI server cancels a run its client left).
    fn cancel(&self) {
        let mut state = self.lock();
        if let Some(reader) = state.reader.take() {
            reader.cancel();
        }
        state.updates.finish(End::Failed(BridgeError::new(
            BridgeErrorKind::AgentError,
            "the run was cancelled",
        )));
        drop(state);
        self.changed_now();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(value: Value) -> Event {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_remote_state_reaches_the_run_through_snapshots_and_deltas() {
        let remote = Remote::default();
        let run = remote.begin(CancellationToken::new(), Vec::new(), Vec::new());
        remote.apply(
            run,
            event(json!({"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}})),
        );
        remote.apply(
            run,
            event(
                json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/b", "value": 2}]}),
            ),
        );
        // A delta that does not apply changes nothing.
        remote.apply(
            run,
            event(json!({"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/zz"}]})),
        );
        let states: Vec<_> = std::iter::from_fn(|| match remote.next() {
            Some(Ok(Update::State(keys))) => Some(Value::Object(keys)),
            _ => None,
        })
        .collect();
        assert_eq!(states, [json!({"a": 1}), json!({"a": 1, "b": 2})]);
    }

    #[test]
    fn an_interrupted_call_waits_and_a_call_without_result_fails_at_the_end() {
        let remote = Remote::default();
        let run = remote.begin(CancellationToken::new(), Vec::new(), Vec::new());
        for e in [
            json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "remember"}),
            json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{\"k\":1}"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c1"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "client_tool"}),
            json!({"type": "TOOL_CALL_END", "toolCallId": "c2"}),
        ] {
            remote.apply(run, event(e));
        }
        assert!(!remote.is_settled("c1"));
        let last = remote.apply(run, event(json!({
            "type": "RUN_FINISHED", "threadId": "t", "runId": "r",
            "outcome": {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "tool_call", "toolCallId": "c1"}]},
        })));
        assert!(last);
        assert!(remote.is_interrupted("c1") && remote.is_settled("c1"));
        assert!(remote.result("c1").is_none(), "it waits for the answer");
        assert!(
            remote.result("c2").unwrap().is_err(),
            "left to a client this bridge is not"
        );
        assert_eq!(remote.take_interrupts(Some("c2")), [], "not c2's to answer");
        assert_eq!(remote.take_interrupts(Some("c1")).len(), 1);
        assert_eq!(remote.take_interrupts(None), [], "taken once");
    }

    #[test]
    fn an_interrupt_without_a_call_is_a_question_and_the_conversation_is_held() {
        let remote = Remote::default();
        let asked = vec![input::Message::User {
            id: MessageId::new(),
            content: ToolContent::Text("spend $500".into()),
            name: None,
        }];
        let run = remote.begin(CancellationToken::new(), asked, Vec::new());
        for e in [
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "That is "}),
            json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "a lot."}),
            json!({
                "type": "RUN_FINISHED", "threadId": "t", "runId": "r",
                "outcome": {"type": "interrupt", "interrupts": [{
                    "id": "i1", "reason": "confirmation", "message": "Spend $500 on ads?",
                    "responseSchema": {"type": "object", "properties": {"channel": {"type": "string"}}},
                }]},
            }),
        ] {
            remote.apply(run, event(e));
        }
        let updates: Vec<_> = std::iter::from_fn(|| remote.next()?.ok()).collect();
        let question = updates.iter().find_map(|update| match update {
            Update::ToolCall {
                id,
                name,
                arguments,
            } if id == "i1" => Question::of(name, arguments),
            _ => None,
        });
        let question = question.expect("the interrupt is a question call");
        assert_eq!(question.message, "Spend $500 on ads?");
        assert!(question.schema.is_some());
        assert!(remote.is_interrupted("i1") && remote.result("i1").is_none());
        assert_eq!(
            remote.take_interrupts(Some("i1")).len(),
            1,
            "the question's own"
        );

        // No snapshot came: the conversation is what was posted, then what the agent said.
        let conversation = remote.conversation();
        assert_eq!(conversation.len(), 2, "{conversation:?}");
        assert!(matches!(
            &conversation[1],
            input::Message::Assistant { content: Some(text), .. } if text == "That is a lot."
        ));
    }

    #[test]
    fn a_run_left_behind_changes_nothing() {
        let remote = Remote::default();
        let old = remote.begin(CancellationToken::new(), Vec::new(), Vec::new());
        let new = remote.begin(CancellationToken::new(), Vec::new(), Vec::new());
        let text = json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "late"});
        assert!(remote.apply(old, event(text.clone())), "its reader stops");
        remote.fail(
            old,
            BridgeError::new(BridgeErrorKind::AgentExited, "dropped"),
        );
        assert!(remote.next().is_none(), "nothing of the old run");
        assert!(!remote.apply(new, event(text)));
        assert!(matches!(remote.next(), Some(Ok(Update::Text(_, t))) if t == "late"));
    }
}
