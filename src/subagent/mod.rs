//! Agents as tools: any `Service<RunRequest>` (an [`Agent`](crate::agent::Agent), a
//! [`Stack`](crate::stack::Stack)'s agent, a bridged ACP or AG-UI agent) offered to another agent
//! as a tool.
//!
//! An [`AgentTool`] takes one argument, `task`: the sub-agent starts a run of its own on that
//! task alone (it sees nothing else of the conversation) and its last answer is the call's
//! result. While it works:
//!
//! - an AG-UI client sees it as a sub-agent run: `SUBAGENT_STARTED` (its name, the parent tool
//!   call), its events each carrying `subagentRunId`, then `SUBAGENT_FINISHED` or
//!   `SUBAGENT_ERROR`; its `RUN_*` and `MESSAGES_SNAPSHOT` events stay inside (the conversation
//!   on the screen is the parent's). Sub-agents of sub-agents name their parent
//!   (`parentSubagentRunId`).
//! - an ACP client (an editor) sees each of its answers, as it is complete, as the content of
//!   the parent's tool call (through [`Progress`]: the latest replaces the last).
//! - the thread keeps its conversation after the parent's call ([`Message::Subagent`]): the
//!   parent's final `MESSAGES_SNAPSHOT` and a restored thread show the client its messages where
//!   it was shown them while they streamed, each carrying its `subagentRunId`, and no model is
//!   shown them.
//! - cancelling the parent's run cancels it; it shares the parent's [`TurnBudget`] (its turns
//!   count against the parent's), its principal, its shared state and the decisions the parent
//!   run brings; what its model steps use is the parent run's (in the parent's usage, through
//!   [`CallsUsage`], and against the parent run's budget, through
//!   [`BilledRun`]).
//!
//! # Interrupts
//!
//! A sub-agent whose run stops at interrupts (its tools wait for a person's decision, with an
//! [`InterruptApprover`](crate::permission::InterruptApprover)) suspends the parent's call
//! ([`ToolResponse::Suspended`]): the parent's run ends with the same interrupts, which the client
//! answers as any other (AG-UI `resume`), and the sub-agent's conversation is kept in the
//! parent's ([`Message::Subagent`]). The run that answers them makes the call again: the
//! sub-agent continues its own run (same `subagentRunId`) from its conversation, the decisions
//! apply to its calls, and its answer is the call's result. Nothing is held in memory meanwhile:
//! with a [`RunLog`](crate::runs::RunLog) the parent's conversation is durable, so the answer may
//! come after a restart. An approver that asks while the run waits
//! ([`AcpApprover`](crate::acp::AcpApprover) in an editor) never suspends anything.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::{message::Message, run::RunRequest, stack::Stack, subagent::AgentTool};
//! use agent_tower::test_util::{MockItem, MockModel};
//! use agent_tower::tool::ToolRouter;
//! use tower::ServiceExt;
//!
//! // The researcher answers; the lead asks it, then answers with what it said.
//! let researcher = Stack::new(
//!     MockModel::new([vec![MockItem::text("Oslo has 700,000 people."), MockItem::stop()]]),
//!     ToolRouter::new(),
//! )
//! .build();
//! let ask = MockItem::turn_calling("c1", "researcher", r#"{"task": "Population of Oslo?"}"#);
//! let lead_model = MockModel::new([ask, vec![MockItem::text("About 700,000."), MockItem::stop()]]);
//! let lead = Stack::new(
//!     lead_model.clone(),
//!     ToolRouter::new().tool(AgentTool::new("researcher", "Finds facts.", researcher)),
//! )
//! .build();
//!
//! let outcome = lead.oneshot(RunRequest::new(vec![Message::user("How many live in Oslo?")])).await?;
//! assert_eq!(outcome.messages.last().unwrap().text(), "About 700,000.");
//! let result = lead_model.requests()[1].messages.last().unwrap().text();
//! assert_eq!(result, "Oslo has 700,000 people.");
//! # Ok(()) }
//! ```

use std::{
    fmt,
    task::{Context, Poll},
};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tower::ServiceExt;
use tower_service::Service;

use crate::{
    BoxError,
    agent::TurnBudget,
    agui::{
        Event,
        event::{BaseEvent, SubagentError, SubagentFinished, SubagentOutcome, SubagentStarted},
    },
    context::RunContext,
    id::{RunId, ToolCallId},
    message::Message,
    model::budget::BilledRun,
    run::{CallsUsage, RunOutcome, RunRequest, StopReason},
    tool::{
        Progress, SubagentRun, Suspended, Tool, ToolCall, ToolError, ToolErrorKind, ToolKind,
        ToolOutput, ToolResponse, ToolSpec,
    },
    transport::Channel,
};

/// How many of a sub-agent's events wait for the parent's transport before it is held back.
const FORWARDED: usize = 64;

/// A `Service<RunRequest>` as a tool taking a `task`; see the [module docs](self).
#[derive(Clone)]
pub struct AgentTool<S> {
    spec: ToolSpec,
    agent: S,
}

impl<S> fmt::Debug for AgentTool<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentTool")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl<S> AgentTool<S> {
    /// `agent` as the tool `name`; `description` tells the calling model what it is for.
    pub fn new(name: impl Into<String>, description: impl Into<String>, agent: S) -> Self {
        let spec = ToolSpec::new(name, description).parameters(json!({
            "type": "object",
            "properties": {"task": {
                "type": "string",
                "description": "What to do, in full: the agent sees nothing else of this conversation.",
            }},
            "required": ["task"],
        }))
        .kind(ToolKind::Think);
        Self { spec, agent }
    }

    /// Declares what the sub-agent does, for editors and policies. By default it is
    /// [`Think`](ToolKind::Think), a kind that only reads: what the sub-agent changes, it changes
    /// through its own tools, which its own policy asks about.
    #[must_use]
    pub fn kind(mut self, kind: ToolKind) -> Self {
        self.spec = self.spec.kind(kind);
        self
    }
}

impl<S> Service<ToolCall> for AgentTool<S>
where
    S: Service<RunRequest, Response = RunOutcome> + Clone + Send + 'static,
    S::Error: Into<BoxError> + Send,
    S::Future: Send + 'static,
{
    type Response = ToolResponse;
    type Error = ToolError;
    type Future = ResponseFuture;

    /// Always ready: each call waits for the agent's readiness in its own future.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        ResponseFuture(Box::pin(run(self.agent.clone(), self.spec.clone(), call)))
    }
}

crate::boxed_future! {
    /// The sub-agent's run, as the call's response (boxed once per call, as the
    /// [agent's](crate::agent::ResponseFuture) is per run).
    pub struct ResponseFuture -> Result<ToolResponse, ToolError>;
}

impl<S> Tool for AgentTool<S>
where
    Self: Service<ToolCall, Response = ToolResponse>,
{
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
}

/// One sub-agent run for `call`, or the rest of the one it suspended.
async fn run<S>(agent: S, spec: ToolSpec, mut call: ToolCall) -> Result<ToolResponse, ToolError>
where
    S: Service<RunRequest, Response = RunOutcome>,
    S::Error: Into<BoxError>,
{
    let task = match call.arguments.get("task").and_then(Value::as_str) {
        Some(task) if !task.trim().is_empty() => task.to_owned(),
        _ => {
            return Err(ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!(
                    "`task` must be a non-empty string: what `{}` should do",
                    spec.name
                ),
            ));
        }
    };
    if call
        .run
        .extensions
        .get::<TurnBudget>()
        .is_some_and(|budget| budget.remaining() == 0)
    {
        return Err(ToolError::new(
            ToolErrorKind::Failed,
            format!(
                "`{}` was not started: the run has no model turn left",
                spec.name
            ),
        ));
    }
    // Its own, not its sub-agents': they find theirs in its conversation.
    let resumed = call.run.extensions.remove::<SubagentRun>();
    let (run_id, messages) = match resumed {
        Some(work) => (work.run_id, work.messages),
        None => (RunId::new(), vec![Message::user(task)]),
    };
    let (events, sub_events) = Channel::<Event>::bounded(FORWARDED);
    let mut req = RunRequest::new(messages);
    req.run = sub_run(&call.run, run_id.clone(), events);
    let parent = call.run.sinks.get::<Channel<Event>>().cloned();
    // Without an AG-UI client, the answer so far is the call's progress (an editor shows it as
    // the call's content).
    let progress = match parent {
        Some(_) => None,
        None => call.run.extensions.get::<Progress>().cloned(),
    };
    let attribution = Attribution {
        run_id: run_id.to_string(),
        name: spec.name.clone(),
        description: spec.description.clone(),
        parent_call: call.id.clone(),
    };
    let mut forwarder = Forwarder {
        parent,
        attribution,
        progress,
        answer: String::new(),
    };
    let mut agent_run = Box::pin(agent.oneshot(req));
    let mut sub_events = sub_events;
    let outcome = loop {
        tokio::select! {
            outcome = &mut agent_run => break outcome,
            Some(event) = sub_events.next() => forwarder.forward(event).await,
        }
    };
    // The run is over, whoever still holds its transport (a recording model keeps its
    // requests): what it sent goes, then nothing more.
    drop(agent_run);
    sub_events.close();
    while let Some(event) = sub_events.try_recv() {
        forwarder.forward(event).await;
    }
    let outcome = outcome.map_err(|e| ToolError::from_boxed(e.into()))?;
    // What it used is the parent run's.
    if let Some(calls) = call.run.extensions.get::<CallsUsage>() {
        calls.add(&outcome.usage_by_model());
    }
    answer(&spec.name, run_id, outcome)
}

/// The sub-agent's run: a run of its own on the parent's thread, under the parent's
/// cancellation, principal, state and extensions (its turn budget, its decisions), its steps
/// billed to the parent's run, its AG-UI events into `events`.
fn sub_run(parent: &RunContext, run_id: RunId, events: Channel<Event>) -> RunContext {
    let mut run = RunContext::new(parent.thread_id.clone(), run_id);
    run.cancel = parent.cancel.child_token();
    run.principal = parent.principal.clone();
    run.state = parent.state.clone();
    run.extensions = parent.extensions.clone();
    // Its model steps count against the budget of the run that started it.
    run.extensions.insert(BilledRun::of(parent));
    run.sinks.insert(events);
    run
}

/// The call's result (the sub-agent's last answer, with its run), or its run suspended at its
/// interrupts.
fn answer(name: &str, run_id: RunId, outcome: RunOutcome) -> Result<ToolResponse, ToolError> {
    let text = || {
        outcome
            .messages
            .iter()
            .rev()
            .find(|m| matches!(m, Message::Assistant { .. }))
            .map(Message::text)
            .unwrap_or_default()
    };
    match outcome.stop {
        StopReason::Cancelled => Err(ToolError::new(
            ToolErrorKind::Cancelled,
            format!("`{name}` was cancelled"),
        )),
        StopReason::Interrupted if outcome.pending_tool_calls.is_empty() => {
            let work = SubagentRun {
                run_id,
                messages: outcome.messages,
            };
            Suspended::new(outcome.interrupts, work)
                .map(ToolResponse::Suspended)
                .ok_or_else(|| {
                    ToolError::new(
                        ToolErrorKind::Failed,
                        format!("`{name}` stopped without saying what it waits for"),
                    )
                })
        }
        StopReason::Interrupted | StopReason::ClientToolCalls => Err(ToolError::new(
            ToolErrorKind::Failed,
            format!("`{name}` called tools only a client can run"),
        )),
        _ => Ok(ToolResponse::Delegated {
            output: ToolOutput::text(text()),
            run: SubagentRun {
                run_id,
                messages: outcome.messages,
            },
        }),
    }
}

/// Who the forwarded events are from.
struct Attribution {
    run_id: String,
    name: String,
    description: String,
    parent_call: ToolCallId,
}

impl Attribution {
    /// The sub-agent's event as the parent's client sees it, or `None` for one that stays
    /// inside.
    fn attribute(&self, event: Event) -> Option<Event> {
        let base = BaseEvent::default;
        let attributed = match event {
            Event::RunStarted(_) => SubagentStarted {
                subagent_run_id: self.run_id.clone(),
                name: self.name.clone(),
                description: Some(self.description.clone()),
                parent_subagent_run_id: None,
                parent_tool_call_id: Some(self.parent_call.clone()),
                parent_message_id: None,
                base: base(),
            }
            .into(),
            Event::RunFinished(finished) => {
                let outcome = match finished.outcome {
                    Some(crate::agui::event::RunFinishedOutcome::Interrupt { interrupts }) => {
                        SubagentOutcome::Suspended {
                            interrupt_ids: Some(
                                interrupts.into_iter().map(|i| i.id.to_string()).collect(),
                            ),
                        }
                    }
                    _ => SubagentOutcome::Success,
                };
                SubagentFinished {
                    subagent_run_id: self.run_id.clone(),
                    result: None,
                    outcome: Some(outcome),
                    base: base(),
                }
                .into()
            }
            Event::RunError(error) => SubagentError {
                subagent_run_id: self.run_id.clone(),
                message: error.message,
                code: error.code,
                base: base(),
            }
            .into(),
            Event::MessagesSnapshot(_) => return None,
            // A sub-agent's own sub-agents: named as its children.
            Event::SubagentStarted(mut started) => {
                started
                    .parent_subagent_run_id
                    .get_or_insert_with(|| self.run_id.clone());
                started.into()
            }
            mut event => {
                if let Some(owner) = event.subagent_run_id_mut() {
                    owner.get_or_insert_with(|| self.run_id.clone());
                }
                event
            }
        };
        Some(attributed)
    }
}

/// Where the sub-agent's events go: attributed into the parent's transport, or its answers into
/// the parent call's `progress`.
struct Forwarder {
    parent: Option<Channel<Event>>,
    attribution: Attribution,
    progress: Option<Progress>,
    /// The answer being written, for `progress`.
    answer: String,
}

impl Forwarder {
    async fn forward(&mut self, event: Event) {
        if let Some(progress) = &self.progress {
            match &event {
                Event::TextMessageStart(_) => self.answer.clear(),
                Event::TextMessageContent(content) => self.answer.push_str(&content.delta),
                Event::TextMessageEnd(_) => progress.report(Value::String(self.answer.clone())),
                _ => {}
            }
        }
        let Some(sink) = self.parent.as_mut() else {
            return;
        };
        if let Some(event) = self.attribution.attribute(event)
            && sink.send(event).await.is_err()
        {
            // The client went away (the parent's run is cancelled with it): the rest is dropped,
            // so that the sub-agent is never held back.
            self.parent = None;
        }
    }
}
