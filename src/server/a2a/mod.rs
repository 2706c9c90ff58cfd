//! The A2A door: the agent to other agents over A2A 1.0, on the same run log as every other door.
//!
//! - **Discovery**: `GET /.well-known/agent-card.json`, the Agent Card derived from the agent's
//!   [identity](crate::agui::capabilities::Identity): one skill (the agent), streaming, no push
//!   notifications, the bearer scheme when the server authenticates, and two interfaces at
//!   `/a2a`: JSON-RPC (`POST /a2a`) and HTTP+JSON (`POST /a2a/message:send`, `GET /a2a/tasks`, …),
//!   which answer the same.
//! - **A task is a run, a context is a thread**: a message without `taskId` is the next turn of
//!   its context (a new one without `contextId`), begun through the engine as the caller's
//!   [`Principal`], with a web run's owner, limits, cancel and takeover; `GetTask`,
//!   `ListTasks` (the caller's tasks only, the most recently changed first, in pages),
//!   `CancelTask` and `SubscribeToTask` read and act on the log.
//! - **An approval the run waits for is `TASK_STATE_INPUT_REQUIRED`**: the status message names
//!   each call and how to answer (`yes` or `no …` as text, or a data part `{"approved": bool,
//!   "feedback"?}`); the answer is a message with the task's id, and the run goes on under it. The
//!   same approval can be answered through any other door (an AG-UI client resuming the run).
//! - Text the agent writes streams as the `answer` artifact (each message replaces the last; the
//!   final one is the answer); each tool call is a `TASK_STATE_WORKING` status naming it.
//!
//! The door keeps nothing of its own: every answer is read from the log.

mod bindings;
mod card;
mod view;

use std::{pin::Pin, time::Duration};

use a2a_types::{
    A2AError, ListTasksRequest, ListTasksResponse, Message as A2aMessage, PartContent, Role,
    SendMessageRequest, SendMessageResponse, StreamResponse, Task, TaskState,
};
use futures_core::Stream;
use futures_util::StreamExt;
use serde_json::{Value, json};

use self::view::Translate;
use crate::{
    agui::{
        capabilities::Identity,
        input::{ResumeEntry, ResumeStatus},
    },
    context::Principal,
    id::{MessageId, RunId, ThreadId},
    message::{ContentPart, Message},
    runs::{
        BeginError, ResumeError, RunCursor, RunQuery, RunRecord, RunStatus, Runs, pending_of,
        rules::may_use,
    },
};

pub(crate) use self::bindings::routes;

/// Where both bindings are served.
pub(crate) const PATH: &str = "/a2a";

/// A stream of a task's updates.
type Updates = Pin<Box<dyn Stream<Item = StreamResponse> + Send>>;

/// The agent as an A2A server.
pub(crate) struct A2aDoor {
    runs: Runs,
    identity: Identity,
    /// Whether the server asks for a bearer token.
    authenticated: bool,
}

impl A2aDoor {
    pub(crate) fn new(runs: Runs, identity: Option<&Identity>, authenticated: bool) -> Self {
        Self {
            runs,
            identity: identity.cloned().unwrap_or_default(),
            authenticated,
        }
    }

    /// `SendMessage`: the task the message begins or continues, once it ends or waits for input
    /// (at once with `returnImmediately`).
    async fn send_message(
        &self,
        caller: Option<Principal>,
        request: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2AError> {
        let at_once = request
            .configuration
            .as_ref()
            .and_then(|c| c.return_immediately)
            .unwrap_or(false);
        let history = request
            .configuration
            .as_ref()
            .and_then(|c| c.history_length);
        let (run, from) = self.take(caller, request.message).await?;
        if !at_once {
            let mut events = self.runs.rejoin(run.clone(), from).await;
            while events.next().await.is_some() {}
        }
        let record = self.record(&run).await?;
        Ok(SendMessageResponse::Task(
            self.task(&record, history, true).await?,
        ))
    }

    /// `SendStreamingMessage`: the task first, then its updates until it ends or waits for
    /// input.
    async fn stream_message(
        &self,
        caller: Option<Principal>,
        request: SendMessageRequest,
    ) -> Result<Updates, A2AError> {
        let (run, from) = self.take(caller, request.message).await?;
        let record = self.record(&run).await?;
        let mut task = self.task(&record, Some(0), false).await?;
        // The message was taken: the task works on it, whatever its record said a moment ago.
        task.status.state = TaskState::Working;
        task.status.message = None;
        Ok(self.updates(task, &record, from).await)
    }

    /// `SubscribeToTask`: the task as it is, then its updates.
    async fn subscribe(&self, caller: Option<Principal>, id: &str) -> Result<Updates, A2AError> {
        let record = self.owned(caller.as_ref(), id).await?;
        if is_terminal(record.status) {
            return Err(A2AError::unsupported_operation(format!(
                "the task {id} has ended: there is nothing to subscribe to"
            )));
        }
        let task = self.task(&record, Some(0), false).await?;
        Ok(self.updates(task, &record, record.last_seq).await)
    }

    /// `task`, then what the log says of its run after `from`, translated.
    async fn updates(&self, task: Task, record: &RunRecord, from: u64) -> Updates {
        let events = self.runs.rejoin(record.run_id.clone(), from).await;
        let mut translate = Translate::new(&record.run_id, &record.thread_id);
        let updates =
            events.flat_map(move |event| futures_util::stream::iter(translate.event(&event)));
        Box::pin(futures_util::stream::once(async { StreamResponse::Task(task) }).chain(updates))
    }

    /// `GetTask`.
    async fn get_task(
        &self,
        caller: Option<Principal>,
        id: &str,
        history: Option<i32>,
    ) -> Result<Task, A2AError> {
        let record = self.owned(caller.as_ref(), id).await?;
        self.task(&record, history, true).await
    }

    /// `ListTasks`: the caller's tasks (everyone's for an operator), the most recently changed
    /// first.
    async fn list_tasks(
        &self,
        caller: Option<Principal>,
        request: ListTasksRequest,
    ) -> Result<ListTasksResponse, A2AError> {
        let size = request.page_size.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&size) {
            return Err(A2AError::invalid_params(format!(
                "pageSize must be 1 to {MAX_PAGE} (it is {size})"
            )));
        }
        let cursor = match request.page_token.as_deref() {
            None | Some("") => None,
            Some(token) => Some(token.parse::<RunCursor>().map_err(|_| {
                A2AError::invalid_params("pageToken is not one a ListTasks answer gave")
            })?),
        };
        let context = request.context_id.as_deref().map(ThreadId::from);
        let status = match request.status {
            None | Some(TaskState::Unspecified) => None,
            Some(state) => match run_status(state) {
                Some(status) => Some(status),
                // A state no run is in (submitted, rejected, auth-required): none is.
                None => {
                    return Ok(ListTasksResponse {
                        tasks: Vec::new(),
                        next_page_token: String::new(),
                        page_size: size,
                        total_size: 0,
                    });
                }
            },
        };
        let owner = caller
            .as_ref()
            .filter(|p| !p.is_operator())
            .map(Principal::name);
        let query = RunQuery::new(usize::try_from(size).unwrap_or(1))
            .principal(owner)
            .thread(context.as_ref())
            .status(status)
            .changed_after(request.status_timestamp_after.map(Into::into))
            .after(cursor.as_ref());
        let page = self
            .runs
            .run_log()
            .runs(&query)
            .await
            .map_err(unavailable)?;
        let artifacts = request.include_artifacts.unwrap_or(false);
        let history = Some(request.history_length.unwrap_or(0));
        let mut tasks = Vec::with_capacity(page.runs.len());
        for record in &page.runs {
            tasks.push(self.task(record, history, artifacts).await?);
        }
        Ok(ListTasksResponse {
            tasks,
            next_page_token: page.next.map(|c| c.to_string()).unwrap_or_default(),
            page_size: size,
            total_size: i32::try_from(page.total).unwrap_or(i32::MAX),
        })
    }

    /// `CancelTask`: the run cancelled, whichever instance drives it; the task once it ended.
    async fn cancel_task(&self, caller: Option<Principal>, id: &str) -> Result<Task, A2AError> {
        let record = self.owned(caller.as_ref(), id).await?;
        match record.status {
            RunStatus::Running => {}
            RunStatus::Interrupted => {
                return Err(saying(
                    A2AError::task_not_cancelable(id),
                    "the task waits for an approval: answer it (a `no` stops the call) instead",
                ));
            }
            _ => return Err(A2AError::task_not_cancelable(id)),
        }
        self.runs
            .cancel(&record.run_id)
            .await
            .map_err(unavailable)?;
        let mut events = self
            .runs
            .rejoin(record.run_id.clone(), record.last_seq)
            .await;
        // The run stops at its next event; one driven elsewhere, at that instance's next beat.
        let _ = tokio::time::timeout(CANCEL_WAIT, async {
            while events.next().await.is_some() {}
        })
        .await;
        let record = self.record(&record.run_id).await?;
        self.task(&record, Some(0), true).await
    }

    /// Begins the run a message asks for, or continues the task it answers; the run, and where
    /// its events of this message start.
    async fn take(
        &self,
        caller: Option<Principal>,
        message: A2aMessage,
    ) -> Result<(RunId, u64), A2AError> {
        if message.role != Role::User {
            return Err(A2AError::invalid_params("message.role must be ROLE_USER"));
        }
        if message.parts.is_empty() {
            return Err(A2AError::invalid_params("message.parts must hold a part"));
        }
        if let Some(task) = &message.task_id {
            return self.answer(caller, task, &message).await;
        }
        let prompt = prompt_of(&message)?;
        let thread = match &message.context_id {
            Some(context) => {
                if let Some(problem) = super::id_problem(context) {
                    return Err(A2AError::invalid_params(format!("contextId {problem}")));
                }
                ThreadId::from(context.clone())
            }
            None => ThreadId::new(),
        };
        let id = Some(message.message_id.as_str())
            .filter(|id| super::id_problem(id).is_none())
            .map_or_else(MessageId::new, MessageId::from);
        let prompt = Message::User {
            id,
            content: vec![ContentPart::text(prompt)],
        };
        let input = self
            .runs
            .next_turn(caller.as_ref(), thread, prompt)
            .await
            .map_err(refused)?;
        let begun = self.runs.begin_as(caller, input).await.map_err(refused)?;
        Ok((begun.run_id().clone(), begun.from()))
    }

    /// A message with a task's id: the answer to the approvals the task waits for.
    async fn answer(
        &self,
        caller: Option<Principal>,
        task: &str,
        message: &A2aMessage,
    ) -> Result<(RunId, u64), A2AError> {
        let record = self.owned(caller.as_ref(), task).await?;
        if message
            .context_id
            .as_deref()
            .is_some_and(|context| context != record.thread_id.as_str())
        {
            return Err(A2AError::invalid_params(
                "contextId is not the context of the task taskId names",
            ));
        }
        match record.status {
            RunStatus::Interrupted => {}
            RunStatus::Running => {
                return Err(A2AError::unsupported_operation(format!(
                    "the task {task} is working: it takes no message until it ends or asks for one"
                )));
            }
            _ => {
                return Err(A2AError::unsupported_operation(format!(
                    "the task {task} has ended: send a message with its contextId (and no taskId) \
                     to go on"
                )));
            }
        }
        let pending = pending_of(self.runs.run_log().as_ref(), &record)
            .await
            .map_err(unavailable)?;
        let payload = decision_of(message)?;
        let resume = pending
            .iter()
            .map(|interrupt| ResumeEntry {
                interrupt_id: interrupt.id.to_string(),
                status: ResumeStatus::Resolved,
                payload: Some(payload.clone()),
                metadata: None,
            })
            .collect();
        let begun = self
            .runs
            .continue_run(caller, &record.run_id, resume)
            .await
            .map_err(|error| match error {
                ResumeError::UnknownRun(_) => A2AError::task_not_found(task),
                ResumeError::Begin(error) => refused(error),
                error => A2AError::invalid_params(error.to_string()),
            })?;
        Ok((record.run_id, begun.from()))
    }

    /// The run `id` names, if `caller` may see it (`TaskNotFound` otherwise, as for none).
    async fn owned(&self, caller: Option<&Principal>, id: &str) -> Result<RunRecord, A2AError> {
        let record = self
            .runs
            .run_log()
            .run(&RunId::from(id))
            .await
            .map_err(unavailable)?;
        record
            .filter(|record| may_use(caller, record.principal.as_deref()))
            .ok_or_else(|| A2AError::task_not_found(id))
    }

    async fn record(&self, run: &RunId) -> Result<RunRecord, A2AError> {
        self.runs
            .run_log()
            .run(run)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| A2AError::task_not_found(run.as_str()))
    }

    /// The task of `record`: its state, the latest `history` messages of its context (none for
    /// `Some(0)`; 20 when not given), and its answer as an artifact when `artifacts`.
    async fn task(
        &self,
        record: &RunRecord,
        history: Option<i32>,
        artifacts: bool,
    ) -> Result<Task, A2AError> {
        let log = self.runs.run_log().as_ref();
        let pending = if record.status == RunStatus::Interrupted {
            pending_of(log, record).await.map_err(unavailable)?
        } else {
            Vec::new()
        };
        view::task(log, record, &pending, history, artifacts)
            .await
            .map_err(unavailable)
    }
}

/// How many tasks a `ListTasks` page holds by default, and at most.
const DEFAULT_PAGE: i32 = 50;
const MAX_PAGE: i32 = 100;

/// How long `CancelTask` waits for the run's end before answering with the task as it is.
const CANCEL_WAIT: Duration = Duration::from_secs(30);

fn is_terminal(status: RunStatus) -> bool {
    !matches!(status, RunStatus::Running | RunStatus::Interrupted)
}

/// The runs' status of tasks in `state`, if any run can be in it.
fn run_status(state: TaskState) -> Option<RunStatus> {
    Some(match state {
        TaskState::Working => RunStatus::Running,
        TaskState::InputRequired => RunStatus::Interrupted,
        TaskState::Completed => RunStatus::Finished,
        TaskState::Canceled => RunStatus::Cancelled,
        TaskState::Failed => RunStatus::Failed,
        _ => return None,
    })
}

/// What the prompt of a message says: its text parts, and its data parts as JSON.
fn prompt_of(message: &A2aMessage) -> Result<String, A2AError> {
    let mut prompt = Vec::with_capacity(message.parts.len());
    for part in &message.parts {
        match &part.content {
            PartContent::Text(text) => prompt.push(text.clone()),
            PartContent::Data(data) => prompt.push(data.to_string()),
            PartContent::Raw(_) | PartContent::Url(_) => {
                return Err(saying(
                    A2AError::content_type_not_supported(),
                    "this agent takes text and data parts, not files",
                ));
            }
        }
    }
    let prompt = prompt.join("\n");
    if prompt.trim().is_empty() {
        return Err(A2AError::invalid_params("the message says nothing"));
    }
    Ok(prompt)
}

/// The decision an answering message carries, as a resume payload: a data part `{"approved",
/// "feedback"?}`, or text that begins with yes or no (the rest of a no is the feedback).
fn decision_of(message: &A2aMessage) -> Result<Value, A2AError> {
    for part in &message.parts {
        match &part.content {
            PartContent::Data(Value::Object(data)) if data.contains_key("approved") => {
                let approved = data
                    .get("approved")
                    .and_then(Value::as_bool)
                    .ok_or_else(|| A2AError::invalid_params("`approved` must be true or false"))?;
                let mut payload = json!({"approved": approved});
                if let Some(feedback) = data.get("feedback").and_then(Value::as_str) {
                    payload["feedback"] = Value::from(feedback);
                }
                return Ok(payload);
            }
            PartContent::Text(text) => {
                let said = text.trim().to_lowercase();
                let starts = |words: &[&str]| {
                    words.iter().any(|word| {
                        said == *word
                            || said.strip_prefix(word).is_some_and(|rest| {
                                rest.starts_with(|c: char| !c.is_alphanumeric())
                            })
                    })
                };
                if starts(&["yes", "y", "approve", "approved", "ok"]) {
                    return Ok(json!({"approved": true}));
                }
                if starts(&["no", "n", "reject", "deny"]) {
                    return Ok(json!({"approved": false, "feedback": text.trim()}));
                }
            }
            _ => {}
        }
    }
    Err(A2AError::invalid_params(
        "the task waits for an approval: answer `yes`, or `no` and why (or a data part \
         {\"approved\": true|false, \"feedback\"?: \"…\"})",
    ))
}

/// The A2A error of a run the engine did not take.
fn refused(error: BeginError) -> A2AError {
    match error {
        BeginError::UnknownThread(thread) => {
            A2AError::invalid_params(format!("no context {thread}"))
        }
        BeginError::Busy(thread) => A2AError::unsupported_operation(format!(
            "the context {thread} has a task working: wait for it, or cancel it"
        )),
        BeginError::Unavailable(error) => unavailable(error),
        error => A2AError::internal(format!("[{}] {error}", error.code())),
    }
}

/// `error`, saying `message`.
fn saying(mut error: A2AError, message: &str) -> A2AError {
    message.clone_into(&mut error.message);
    error
}

/// The A2A error of a log that failed.
fn unavailable(error: impl std::fmt::Display) -> A2AError {
    tracing::error!(%error, "the run log failed an A2A request");
    A2AError::internal("the run log is unavailable")
}
