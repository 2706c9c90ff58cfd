//! MCP tasks (the Tasks extension of `2026-07-28`): a call of a client that declares the
//! extension answers at once with a task, the call's run, which the client polls (`tasks/get`),
//! answers when it waits for its person (`tasks/update`) and cancels (`tasks/cancel`). The task
//! is the run in the log: its id is the run's, only its principal sees it, and any instance
//! answers for it.

use rmcp::{
    ErrorData, RoleServer,
    model::{
        CreateTaskResult, DetailedTask, GetTaskResult, InputRequest, InputResponses, Task,
        TaskPayload, TaskStatus,
    },
    service::RequestContext,
};
use serde_json::Value;

use super::{End, McpDoor, answers, failure, form, resume_failed};
use crate::{
    context::Principal,
    id::RunId,
    runs::{RunRecord, RunStatus, last_event, pending_of, rules::may_use},
};

/// How often a client is asked to poll a task.
const POLL_MS: u64 = 1_000;

/// Whether the client of this call takes tasks (it declared the extension), on `2026-07-28`.
pub(super) fn taken_by(cx: &RequestContext<RoleServer>) -> bool {
    super::Form::stateless(cx)
        && cx
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// The task of a call whose run just began.
pub(super) fn created(run: &RunId) -> CreateTaskResult {
    let now = rfc3339(std::time::SystemTime::now());
    CreateTaskResult::new(
        Task::new(run.to_string(), TaskStatus::Working, now.clone(), now)
            .with_poll_interval_ms(POLL_MS),
    )
}

fn rfc3339(time: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

/// A task no caller of this principal has: unknown, as for none.
fn unknown(task: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no task `{task}`"), None)
}

fn unavailable(error: impl std::fmt::Display) -> ErrorData {
    tracing::error!(%error, "the run log failed an MCP task request");
    ErrorData::internal_error("the run log is unavailable", None)
}

impl McpDoor {
    /// The run `task` names, if `caller` may see it.
    async fn owned(&self, caller: Option<&Principal>, task: &str) -> Result<RunRecord, ErrorData> {
        self.runs
            .run_log()
            .run(&RunId::from(task))
            .await
            .map_err(unavailable)?
            .filter(|record| may_use(caller, record.principal.as_deref()))
            .ok_or_else(|| unknown(task))
    }

    /// `tasks/get`: the task as the log has its run: working, waiting for its person (a form per
    /// call it waits at), completed (the call's result: the answer, or the error result a failed
    /// run gives), or cancelled.
    pub(super) async fn task(
        &self,
        caller: Option<&Principal>,
        task: &str,
    ) -> Result<GetTaskResult, ErrorData> {
        let record = self.owned(caller, task).await?;
        let payload = match record.status {
            RunStatus::Running => TaskPayload::Working,
            RunStatus::Interrupted => {
                let pending = pending_of(self.runs.run_log().as_ref(), &record)
                    .await
                    .map_err(unavailable)?;
                let input_requests = pending
                    .iter()
                    .map(|interrupt| {
                        let asked = form(&interrupt.tool_name, &interrupt.arguments);
                        let request =
                            InputRequest::Elicitation(rmcp::model::ElicitRequest::new(asked));
                        (interrupt.id.to_string(), request)
                    })
                    .collect::<rmcp::model::InputRequests>();
                if input_requests.is_empty() {
                    // Answered through another door, by a run of its own.
                    completed(&failure(
                        "answered_elsewhere",
                        "the approvals were answered through another door; the run that went on \
                         is another of the thread",
                    ))
                } else {
                    TaskPayload::InputRequired { input_requests }
                }
            }
            RunStatus::Finished => completed(&self.finished(&record.run_id).await),
            RunStatus::Cancelled => TaskPayload::Cancelled,
            _ => completed(&self.failed(&record).await),
        };
        let task = Task::new(
            task.to_owned(),
            payload.status(),
            rfc3339(record.created_at),
            rfc3339(record.updated_at),
        )
        .with_poll_interval_ms(POLL_MS);
        Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
    }

    /// The error result of a failed run: its `RUN_ERROR`.
    async fn failed(&self, record: &RunRecord) -> rmcp::model::CallToolResult {
        match last_event(self.runs.run_log().as_ref(), record).await {
            Ok(last) => match last.as_ref().map(End::of) {
                Some(End::Failed(result)) => result,
                _ => failure("run_lost", "the run ended without its end"),
            },
            Err(error) => failure("store_unavailable", &error.to_string()),
        }
    }

    /// `tasks/update`: the person's answers to the forms of a task that waits for them; its run
    /// goes on under its own id.
    pub(super) async fn answer_task(
        &self,
        caller: Option<Principal>,
        task: &str,
        responses: &InputResponses,
    ) -> Result<(), ErrorData> {
        let record = self.owned(caller.as_ref(), task).await?;
        let answers = answers(&record.run_id, Some(responses));
        match self
            .runs
            .continue_run(caller, &record.run_id, answers)
            .await
        {
            Ok(_) => Ok(()),
            Err(error) => {
                let refused = resume_failed(&error);
                let said = refused
                    .content
                    .first()
                    .and_then(|c| c.as_text())
                    .map(|t| t.text.clone())
                    .unwrap_or_default();
                Err(ErrorData::invalid_params(said, None))
            }
        }
    }

    /// `tasks/cancel`: the run cancelled, whichever instance drives it.
    pub(super) async fn stop_task(
        &self,
        caller: Option<&Principal>,
        task: &str,
    ) -> Result<(), ErrorData> {
        let record = self.owned(caller, task).await?;
        self.runs
            .cancel(&record.run_id)
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

/// A completed task's payload: the call's result.
fn completed(result: &rmcp::model::CallToolResult) -> TaskPayload {
    let result = serde_json::to_value(result)
        .ok()
        .and_then(|value| match value {
            Value::Object(object) => Some(object),
            _ => None,
        })
        .unwrap_or_default();
    TaskPayload::Completed { result }
}
