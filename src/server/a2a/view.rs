//! How runs look to A2A clients: a run as a `Task`, its log's events as task updates.

use a2a_types::{
    Artifact, Message as A2aMessage, Part, Role, StreamResponse, Task, TaskArtifactUpdateEvent,
    TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::{
    agui::{Event, event::RunFinishedOutcome, input::Interrupt},
    id::{RunId, ThreadId},
    message::Message,
    runs::{InterruptRecord, LogError, LoggedEvent, RunLog, RunRecord, RunStatus},
};

/// The id of the artifact that holds the agent's answer.
const ANSWER: &str = "answer";

/// How many messages of its context a task shows when the client does not say.
const DEFAULT_HISTORY: usize = 20;

/// One call waiting for a person: its interrupt, its tool, its arguments.
struct Asked<'a> {
    id: &'a str,
    tool: &'a str,
    arguments: &'a Value,
}

/// The task of `record`, `pending` the interrupts it waits at; see
/// [`A2aDoor::task`](super::A2aDoor).
pub(super) async fn task(
    log: &dyn RunLog,
    record: &RunRecord,
    pending: &[InterruptRecord],
    history: Option<i32>,
    artifacts: bool,
) -> Result<Task, LogError> {
    let (task, context) = (record.run_id.as_str(), record.thread_id.as_str());
    let (state, message) = match record.status {
        RunStatus::Running => (TaskState::Working, None),
        RunStatus::Interrupted if !pending.is_empty() => {
            let asked: Vec<Asked<'_>> = pending
                .iter()
                .map(|interrupt| Asked {
                    id: interrupt.id.as_str(),
                    tool: &interrupt.tool_name,
                    arguments: &interrupt.arguments,
                })
                .collect();
            (
                TaskState::InputRequired,
                Some(approvals(task, context, &asked)),
            )
        }
        // Its approvals were answered through another door, by a run of their own.
        RunStatus::Interrupted => (
            TaskState::Completed,
            Some(agent_says(
                task,
                context,
                "The approvals were answered through another door; the run that went on is \
                 another task of this context.",
            )),
        ),
        RunStatus::Finished => (TaskState::Completed, None),
        RunStatus::Cancelled => (TaskState::Canceled, None),
        _ => (
            TaskState::Failed,
            Some(agent_says(task, context, &failure_of(log, record).await?)),
        ),
    };
    let history = match history {
        Some(0) => None,
        limit => {
            let limit = limit.map_or(DEFAULT_HISTORY, |n| usize::try_from(n).unwrap_or(0));
            let messages = log
                .thread(&record.thread_id)
                .await?
                .map(|thread| thread.messages)
                .unwrap_or_default();
            let shown: Vec<A2aMessage> = messages
                .iter()
                .filter_map(|message| shown(message, context))
                .collect();
            Some(shown[shown.len().saturating_sub(limit)..].to_vec())
        }
    };
    let artifacts = if artifacts && record.status == RunStatus::Finished {
        Some(vec![answer(answer_of(log, &record.run_id).await?)])
    } else {
        None
    };
    Ok(Task {
        id: task.to_owned(),
        context_id: context.to_owned(),
        status: TaskStatus {
            state,
            message,
            timestamp: Some(DateTime::<Utc>::from(record.updated_at)),
        },
        artifacts,
        history,
        metadata: None,
    })
}

/// A message of a conversation as A2A shows it: the person's and the agent's text.
fn shown(message: &Message, context: &str) -> Option<A2aMessage> {
    let role = match message {
        Message::User { .. } => Role::User,
        Message::Assistant { content, .. } if !content.is_empty() => Role::Agent,
        _ => return None,
    };
    let mut shown = A2aMessage::new(role, vec![Part::text(message.text())]);
    shown.message_id = message.id().to_string();
    shown.context_id = Some(context.to_owned());
    Some(shown)
}

/// The answer artifact holding `text`.
fn answer(text: String) -> Artifact {
    Artifact {
        artifact_id: ANSWER.to_owned(),
        name: Some(ANSWER.to_owned()),
        description: Some("The agent's answer.".to_owned()),
        parts: vec![Part::text(text)],
        metadata: None,
        extensions: None,
    }
}

/// The agent's last message in `run`'s log: the text of its last top-level text message.
async fn answer_of(log: &dyn RunLog, run: &RunId) -> Result<String, LogError> {
    let mut answer = String::new();
    crate::runs::each_event(log, run, |event| {
        match event.event()? {
            Event::TextMessageStart(start) if start.subagent_run_id.is_none() => answer.clear(),
            Event::TextMessageContent(content) if content.subagent_run_id.is_none() => {
                answer.push_str(&content.delta);
            }
            _ => {}
        }
        Ok(())
    })
    .await?;
    Ok(answer)
}

/// Why `record`'s run failed: its `RUN_ERROR`, as `[code] message`.
async fn failure_of(log: &dyn RunLog, record: &RunRecord) -> Result<String, LogError> {
    let last = crate::runs::last_event(log, record).await?;
    Ok(match last.map(|event| event.event()).transpose()? {
        Some(Event::RunError(error)) => {
            format!(
                "[{}] {}",
                error.code.as_deref().unwrap_or("internal"),
                error.message
            )
        }
        _ => "[run_lost] the run ended without its end".to_owned(),
    })
}

/// A message of the agent saying `text`.
fn agent_says(task: &str, context: &str, text: &str) -> A2aMessage {
    let mut message = A2aMessage::new(Role::Agent, vec![Part::text(text)]);
    message.task_id = Some(task.to_owned());
    message.context_id = Some(context.to_owned());
    message
}

/// The message of a task that waits for approvals: what each call is, and how to answer.
fn approvals(task: &str, context: &str, asked: &[Asked<'_>]) -> A2aMessage {
    let calls: Vec<String> = asked
        .iter()
        .map(|call| format!("`{}` with {}", call.tool, call.arguments))
        .collect();
    let text = format!(
        "The agent asks to call {}. Answer `yes`, or `no` and why (a data part \
         {{\"approved\": true|false, \"feedback\"?: \"…\"}} does the same).",
        calls.join(" and ")
    );
    let listed: Vec<Value> = asked
        .iter()
        .map(|call| json!({"interruptId": call.id, "toolName": call.tool, "arguments": call.arguments}))
        .collect();
    let mut message = agent_says(task, context, &text);
    message
        .parts
        .push(Part::data(json!({ "approvals": listed })));
    message
}

/// What a run's log events are to a client following its task.
pub(super) struct Translate {
    task: String,
    context: String,
}

impl Translate {
    pub(super) fn new(run: &RunId, thread: &ThreadId) -> Self {
        Self {
            task: run.to_string(),
            context: thread.to_string(),
        }
    }

    /// The updates `event` makes (most make none).
    pub(super) fn event(&mut self, event: &LoggedEvent) -> Vec<StreamResponse> {
        let Ok(event) = event.event() else {
            return Vec::new();
        };
        match event {
            // Each text message of the agent replaces the answer; the last one is it.
            Event::TextMessageStart(start) if start.subagent_run_id.is_none() => {
                vec![self.artifact(String::new(), false, false)]
            }
            Event::TextMessageContent(content) if content.subagent_run_id.is_none() => {
                vec![self.artifact(content.delta.to_string(), true, false)]
            }
            Event::ToolCallStart(call) if call.subagent_run_id.is_none() => {
                let says = format!("calling `{}`", call.tool_call_name);
                vec![self.status(TaskState::Working, Some(&says))]
            }
            Event::RunFinished(finished) => match finished.outcome {
                Some(RunFinishedOutcome::Interrupt { interrupts }) => {
                    let asked: Vec<Asked<'_>> = interrupts.iter().map(asked).collect();
                    let message = approvals(&self.task, &self.context, &asked);
                    vec![self.status_with(TaskState::InputRequired, Some(message))]
                }
                Some(RunFinishedOutcome::Cancelled) => vec![self.status(TaskState::Canceled, None)],
                _ => vec![
                    self.artifact(String::new(), true, true),
                    self.status(TaskState::Completed, None),
                ],
            },
            Event::RunError(error) => {
                let says = format!(
                    "[{}] {}",
                    error.code.as_deref().unwrap_or("internal"),
                    error.message
                );
                vec![self.status(TaskState::Failed, Some(&says))]
            }
            _ => Vec::new(),
        }
    }

    fn artifact(&self, text: String, append: bool, last: bool) -> StreamResponse {
        let mut artifact = answer(text);
        artifact.description = None;
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task.clone(),
            context_id: self.context.clone(),
            artifact,
            append: Some(append),
            last_chunk: Some(last),
            metadata: None,
        })
    }

    fn status(&self, state: TaskState, says: Option<&str>) -> StreamResponse {
        let message = says.map(|text| agent_says(&self.task, &self.context, text));
        self.status_with(state, message)
    }

    fn status_with(&self, state: TaskState, message: Option<A2aMessage>) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task.clone(),
            context_id: self.context.clone(),
            status: TaskStatus {
                state,
                message,
                timestamp: Some(Utc::now()),
            },
            metadata: None,
        })
    }
}

/// The call an AG-UI interrupt asks about.
fn asked(interrupt: &Interrupt) -> Asked<'_> {
    let (tool, arguments) = crate::agui::interrupt::asked_call(interrupt);
    Asked {
        id: &interrupt.id,
        tool: tool.unwrap_or("a tool"),
        arguments,
    }
}
