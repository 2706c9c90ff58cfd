//! The MCP door: the agent offered to MCP clients (assistants, IDEs, other agents) as one tool,
//! at `/mcp` (Streamable HTTP, over `rmcp`), on the same run log as every other door.
//!
//! - **Both generations**: protocol `2026-07-28` (each request stands alone: no session) and the
//!   earlier ones through `initialize` (a session per client), as `rmcp` negotiates them.
//! - **One tool**, named and described after the agent's
//!   [identity](crate::agui::capabilities::Identity) (`agent` otherwise): its input is
//!   `{"prompt": "…", "threadId"?: "…"}`, its answer the agent's last message, with
//!   `{"answer", "threadId", "runId"}` as structured content, so that the next call can go on
//!   with the same conversation.
//! - **A call is a run**: begun through the engine as the caller's [`Principal`] (bearer token or
//!   JWT, as on every route), so its owner, limits, quotas, cancel and takeover are a web run's.
//!   While it goes, a client that asked for progress (`_meta.progressToken`) is told each step
//!   (`calling \`tool\``, `answering`). A client that cancels the call (or goes away) cancels the
//!   run.
//! - **An approval the run waits for is asked of the client's person** (elicitation): on
//!   `2026-07-28`, the call answers `input_required` with one form per interrupt, and the
//!   client's retry carries the answers (its `requestState` is only the run's id: the log holds
//!   the run, and only its principal may continue it); on the earlier generation, the form is
//!   asked within the call. The run then goes on under its own id. A client that cannot elicit
//!   gets an error result naming the thread: the approval waits there, for any other door
//!   (`GET /interrupts`, an AG-UI client's `resume[]`).
//!
//! - **Tasks** (the Tasks extension of `2026-07-28`, see `tasks`): a client that declares it gets
//!   each call answered at once as a task, the run, which it reads, answers and cancels.
//! - **A deploy under a call**: when this instance stops mid-run, the run is handed over
//!   ([`Runs::hand_over`]); a `2026-07-28` call is answered `input_required` with the run as its
//!   only state, and the client's retry, wherever it lands, reads the run on to its answer. An
//!   earlier-generation call (its session was here) gets the error `handed_over`.
//!
//! The door keeps nothing but its connections' sessions (the earlier generation's, each ended
//! after its idle time).

mod tasks;

use std::sync::Arc;

use futures_util::StreamExt;
use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
        ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
        GetTaskParams, GetTaskResult, Implementation, InputRequest, InputRequests,
        InputRequiredResult, InputResponses, JsonObject, ListToolsResult, PaginatedRequestParams,
        ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
        UpdateTaskParams,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};

use crate::{
    agui::{
        Event,
        capabilities::Identity,
        event::RunFinishedOutcome,
        input::{Interrupt, ResumeEntry, ResumeStatus},
    },
    context::Principal,
    id::{MessageId, RunId, ThreadId},
    message::{ContentPart, Message},
    runs::{BeginError, Begun, LoggedEvent, ResumeError, Runs, rules::may_use},
};

/// The tool's name when the agent has none (or one MCP does not allow).
const DEFAULT_NAME: &str = "agent";

/// The MCP service mounted at `/mcp`: `runs` offered as one tool, named after `identity`.
pub(crate) fn service(
    runs: Runs,
    identity: Option<&Identity>,
    body_limit: usize,
) -> StreamableHttpService<McpDoor, LocalSessionManager> {
    let door = McpDoor {
        runs: runs.clone(),
        tool: Arc::new(tool(identity)),
        server: Arc::new(server_info(identity)),
    };
    // Host and Origin are the server's to check (`allow_hosts`, `allow_origins`), for every
    // route alike, before a request gets here. The engine's shutdown does not stop the service:
    // a call whose run was just handed over still writes its answer (`input_required`, to call
    // again elsewhere); its connections end with the server's.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(body_limit);
    StreamableHttpService::new(move || Ok(door.clone()), Arc::default(), config)
}

/// The agent as an MCP server of one tool.
pub(crate) struct McpDoor {
    runs: Runs,
    tool: Arc<Tool>,
    server: Arc<ServerConfig>,
}

impl Clone for McpDoor {
    fn clone(&self) -> Self {
        Self {
            runs: self.runs.clone(),
            tool: self.tool.clone(),
            server: self.server.clone(),
        }
    }
}

/// The tool: the agent's name (when MCP allows it as a tool name) and description.
fn tool(identity: Option<&Identity>) -> Tool {
    let name = identity
        .and_then(|identity| identity.name.as_deref())
        .filter(|name| is_tool_name(name))
        .unwrap_or(DEFAULT_NAME)
        .to_owned();
    let description = identity
        .and_then(|identity| identity.description.clone())
        .unwrap_or_else(|| "Asks the agent; it may call its own tools to answer.".to_owned());
    Tool::new(name, description, object(&input_schema()))
        .with_raw_output_schema(object(&output_schema()))
}

/// Whether `name` is a tool name MCP allows: 1 to 128 of `A-Z a-z 0-9 _ - .`.
fn is_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "minLength": 1, "description": "What to ask the agent."},
            "threadId": {
                "type": "string",
                "minLength": 1,
                "description": "Go on with this conversation (the `threadId` of an earlier answer); a new one without it."
            }
        },
        "required": ["prompt"],
        "additionalProperties": false
    })
}

fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "answer": {"type": "string", "description": "The agent's last message."},
            "threadId": {"type": "string", "description": "The conversation, to go on with."},
            "runId": {"type": "string", "description": "The run that answered."}
        },
        "required": ["answer", "threadId", "runId"]
    })
}

fn object(schema: &Value) -> Arc<JsonObject> {
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

fn server_info(identity: Option<&Identity>) -> ServerConfig {
    let name = identity
        .and_then(|identity| identity.name.clone())
        .unwrap_or_else(|| "agent-tower".to_owned());
    let version = identity
        .and_then(|identity| identity.version.clone())
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned());
    let capabilities = ServerCapabilities::builder()
        .enable_tools()
        .enable_tasks()
        .build();
    let mut info = ServerConfig::new(capabilities);
    info.server_info = Implementation::new(name, version);
    info.instructions = identity.and_then(|identity| identity.description.clone());
    info
}

impl ServerHandler for McpDoor {
    fn get_info(&self) -> ServerConfig {
        (*self.server).clone()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![(*self.tool).clone()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == self.tool.name).then(|| (*self.tool).clone())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.task(caller(&cx).as_ref(), &request.task_id).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = caller(&cx);
        self.answer_task(caller, &request.task_id, &request.input_responses)
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.stop_task(caller(&cx).as_ref(), &request.task_id).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != self.tool.name {
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool `{}`: this server has `{}`",
                    request.name, self.tool.name
                ),
                None,
            ));
        }
        let caller = caller(&cx);
        let reading = match (&request.request_state, &request.input_responses) {
            // The retry of a call that asked for input: the answers continue its run.
            (Some(run), Some(responses)) if !responses.is_empty() => {
                let run = RunId::from(run.as_str());
                let answers = answers(&run, Some(responses));
                match self.runs.continue_run(caller.clone(), &run, answers).await {
                    Ok(begun) => (run, begun.from()),
                    Err(error) => return Ok(resume_failed(&error).into()),
                }
            }
            // The retry of a call whose instance stopped: its run is read again, wherever it goes on.
            (Some(run), _) => {
                let run = RunId::from(run.as_str());
                match self.runs.run_log().run(&run).await {
                    Ok(Some(record)) if may_use(caller.as_ref(), record.principal.as_deref()) => {
                        (run, 0)
                    }
                    Ok(_) => return Ok(resume_failed(&ResumeError::UnknownRun(run)).into()),
                    Err(error) => {
                        return Ok(failure("store_unavailable", &error.to_string()).into());
                    }
                }
            }
            (None, _) => {
                let asked = Asked::parse(request.arguments.as_ref())?;
                let begun = match self.begin(caller.clone(), asked).await {
                    Ok(begun) => begun,
                    Err(error) => return Ok(refused(&error).into()),
                };
                // A client that takes tasks polls the run as one (see `tasks`).
                if tasks::taken_by(&cx) {
                    return Ok(tasks::created(begun.run_id()).into());
                }
                (begun.run_id().clone(), begun.from())
            }
        };
        self.answer(caller, reading, &cx).await
    }
}

/// What a call asks.
struct Asked {
    prompt: String,
    thread: Option<ThreadId>,
}

impl Asked {
    /// The call's arguments, as the input schema says (`-32602` naming what is wrong).
    fn parse(arguments: Option<&JsonObject>) -> Result<Self, ErrorData> {
        let invalid =
            |why: &str| ErrorData::invalid_params(format!("invalid arguments: {why}"), None);
        let empty = JsonObject::new();
        let arguments = arguments.unwrap_or(&empty);
        if let Some(unknown) = arguments
            .keys()
            .find(|key| !matches!(key.as_str(), "prompt" | "threadId"))
        {
            return Err(invalid(&format!("unknown argument `{unknown}`")));
        }
        let prompt = match arguments.get("prompt") {
            Some(Value::String(prompt)) if !prompt.trim().is_empty() => prompt.clone(),
            Some(Value::String(_)) => return Err(invalid("`prompt` must not be empty")),
            Some(_) => return Err(invalid("`prompt` must be a string")),
            None => return Err(invalid("`prompt` is required")),
        };
        let thread = match arguments.get("threadId") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => match super::id_problem(id) {
                None => Some(ThreadId::from(id.as_str())),
                Some(problem) => return Err(invalid(&format!("`threadId` {problem}"))),
            },
            Some(_) => return Err(invalid("`threadId` must be a string")),
        };
        Ok(Self { prompt, thread })
    }
}

impl McpDoor {
    /// Begins the run of a call: a turn of its thread (a new one without `threadId`).
    async fn begin(&self, caller: Option<Principal>, asked: Asked) -> Result<Begun, BeginError> {
        let thread = asked
            .thread
            .unwrap_or_else(|| ThreadId::from(RunId::new().as_ref()));
        let prompt = Message::User {
            id: MessageId::new(),
            content: vec![ContentPart::text(asked.prompt)],
        };
        let input = self.runs.next_turn(caller.as_ref(), thread, prompt).await?;
        // A refusal of the run's own (`interrupts_pending`) is followed as its `RUN_ERROR`.
        self.runs.begin_as(caller, input).await
    }

    /// Follows `begun` to its end and answers the call; an approval it waits for is asked of
    /// the client as its protocol allows, and the run goes on with the answers.
    async fn answer(
        &self,
        caller: Option<Principal>,
        (run, mut from): (RunId, u64),
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let progress = cx.meta.get_progress_token();
        let mut told = 0.0;
        loop {
            let end = self
                .follow((&run, from), cx, progress.as_ref(), &mut told)
                .await;
            let (thread, interrupts) = match end {
                End::Finished => return Ok(self.finished(&run).await.into()),
                End::Interrupted(thread, interrupts) => (thread, interrupts),
                End::Failed(result) => return Ok(result.into()),
                // This instance stops (a deploy): a client that calls again reaches another,
                // which reads the run on; one that cannot is told where its answer will be.
                End::Elsewhere if Form::stateless(cx) => {
                    return Ok(InputRequiredResult::from_request_state(run.to_string()).into());
                }
                End::Elsewhere => return Ok(elsewhere(&run).into()),
            };
            let Some(form) = Form::of_client(cx) else {
                return Ok(waits(&thread, &run, &interrupts).into());
            };
            if form == Form::Retry {
                let requests = interrupts
                    .iter()
                    .map(|interrupt| {
                        (
                            interrupt.id.clone(),
                            InputRequest::Elicitation(ElicitRequest::new(elicit(interrupt))),
                        )
                    })
                    .collect::<InputRequests>();
                return Ok(InputRequiredResult::new(Some(requests), Some(run.to_string())).into());
            }
            let mut responses = InputResponses::new();
            for interrupt in &interrupts {
                let asked = tokio::select! {
                    asked = cx.peer.create_elicitation_with_timeout(elicit(interrupt), Some(until(interrupt))) => asked,
                    () = cx.ct.cancelled() => return Ok(cancelled().into()),
                };
                let answer = match asked {
                    Ok(answer) => answer,
                    Err(error) => {
                        tracing::debug!(%error, run_id = %run, "the client did not answer an approval");
                        return Ok(waits(&thread, &run, &interrupts).into());
                    }
                };
                responses.insert(
                    interrupt.id.clone(),
                    serde_json::to_value(answer).unwrap_or_default(),
                );
            }
            let answers = answers(&run, Some(&responses));
            from = match self.runs.continue_run(caller.clone(), &run, answers).await {
                Ok(begun) => begun.from(),
                Err(error) => return Ok(resume_failed(&error).into()),
            };
        }
    }

    /// Follows `run` after `from` to its end (the last segment's, for a run continued after
    /// interrupts and read from its start), telling progress, cancelling it when the call is.
    async fn follow(
        &self,
        (run, from): (&RunId, u64),
        cx: &RequestContext<RoleServer>,
        progress: Option<&rmcp::model::ProgressToken>,
        told: &mut f64,
    ) -> End {
        let mut events = self.runs.rejoin(run.clone(), from).await;
        // The call's future dropped (its client gone) before the run's end: the run is stopped.
        let mut stop = StopOnDrop::new(&self.runs, run);
        let mut last = None;
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(event) if event.is_terminal() || event.is_rejoin() => {
                        // Ended, or going on elsewhere: nothing for this call to stop.
                        stop.done = true;
                        last = Some(event);
                    }
                    Some(event) => {
                        if let (Some(token), Some(message)) = (progress, step(&event)) {
                            *told += 1.0;
                            let note = ProgressNotificationParam::new(token.clone(), *told)
                                .with_message(message);
                            if let Err(error) = cx.peer.notify_progress(note).await {
                                tracing::debug!(%error, "progress not sent");
                            }
                        }
                    }
                    None => break,
                },
                () = cx.ct.cancelled(), if !stop.done => {
                    stop.now().await;
                }
            }
        }
        stop.done = true;
        match last {
            Some(event) if event.is_rejoin() => End::Elsewhere,
            Some(event) => End::of(&event),
            None => End::Failed(failure("internal", "the run ended without its end")),
        }
    }

    /// The answer of a finished run: the agent's last message, as the thread keeps it.
    async fn finished(&self, run: &RunId) -> CallToolResult {
        let record = match self.runs.run_log().run(run).await {
            Ok(Some(record)) => record,
            Ok(None) => return failure("internal", "the run is not in the log"),
            Err(error) => return failure("store_unavailable", &error.to_string()),
        };
        let thread = match self.runs.run_log().thread(&record.thread_id).await {
            Ok(thread) => thread,
            Err(error) => return failure("store_unavailable", &error.to_string()),
        };
        let answer = thread
            .and_then(|thread| {
                thread
                    .messages
                    .iter()
                    .rev()
                    .find(|message| matches!(message, Message::Assistant { .. }))
                    .map(Message::text)
            })
            .unwrap_or_default();
        let mut result = CallToolResult::success(vec![ContentBlock::text(answer.clone())]);
        result.structured_content = Some(json!({
            "answer": answer,
            "threadId": record.thread_id,
            "runId": run,
        }));
        result
    }
}

/// How a run ended, for the call.
enum End {
    Finished,
    /// This instance stops; the run goes on on another.
    Elsewhere,
    Interrupted(ThreadId, Vec<Interrupt>),
    Failed(CallToolResult),
}

impl End {
    fn of(event: &LoggedEvent) -> Self {
        match event.event() {
            Ok(Event::RunFinished(finished)) => match finished.outcome {
                Some(RunFinishedOutcome::Interrupt { interrupts }) => {
                    Self::Interrupted(finished.thread_id, interrupts)
                }
                Some(RunFinishedOutcome::Cancelled) => Self::Failed(cancelled()),
                _ => Self::Finished,
            },
            Ok(Event::RunError(error)) => Self::Failed(failure(
                error.code.as_deref().unwrap_or("internal"),
                &error.message,
            )),
            Ok(_) => Self::Failed(failure("internal", "the run ended without its end")),
            Err(error) => Self::Failed(failure("store_unavailable", &error.to_string())),
        }
    }
}

/// What the client is told of `event` while the run goes, if anything: the agent's own steps,
/// not a sub-agent's.
fn step(event: &LoggedEvent) -> Option<String> {
    match event.event().ok()? {
        Event::ToolCallStart(call) if call.subagent_run_id.is_none() => {
            Some(format!("calling `{}`", call.tool_call_name))
        }
        Event::TextMessageStart(message) if message.subagent_run_id.is_none() => {
            Some("answering".to_owned())
        }
        _ => None,
    }
}

/// How the client can answer an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// In its retry of the call (`2026-07-28`: `input_required`).
    Retry,
    /// Within the call (the earlier generation: `elicitation/create` on the session).
    Within,
}

impl Form {
    /// How this call's client can be asked, if it can (it declared elicitation).
    fn of_client(cx: &RequestContext<RoleServer>) -> Option<Self> {
        cx.client_capabilities()?.elicitation?;
        Some(if Self::stateless(cx) {
            Self::Retry
        } else {
            Self::Within
        })
    }

    /// Whether the call is of `2026-07-28` or later, where a client calls again after
    /// `input_required` (and may reach another instance).
    fn stateless(cx: &RequestContext<RoleServer>) -> bool {
        cx.protocol_version()
            .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
    }
}

/// The form asking about `interrupt`: approve or not, and why not.
fn elicit(interrupt: &Interrupt) -> ElicitRequestParams {
    let (tool, arguments) = crate::agui::interrupt::asked_call(interrupt);
    form(tool.unwrap_or("a tool"), arguments)
}

/// The form asking whether the agent may call `tool` with `arguments`.
fn form(tool: &str, arguments: &Value) -> ElicitRequestParams {
    let schema = ElicitationSchema::builder()
        .required_bool_property("approved", |approved| {
            approved
                .title("Approve")
                .description(format!("Let the agent call `{tool}` with these arguments."))
        })
        .string_property("feedback", |feedback| {
            feedback
                .title("Feedback")
                .description("Why not, or what to do instead (read by the agent).")
        })
        .build_unchecked();
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("The agent asks to call `{tool}` with {arguments}. Approve?"),
        requested_schema: schema,
    }
}

/// How long the person may take to answer `interrupt`: until it expires (at most a day; a
/// minute when it does not say).
fn until(interrupt: &Interrupt) -> std::time::Duration {
    interrupt
        .expires_at
        .as_deref()
        .and_then(|at| humantime::parse_rfc3339_weak(at).ok())
        .and_then(|at| at.duration_since(std::time::SystemTime::now()).ok())
        .unwrap_or(std::time::Duration::from_secs(60))
        .min(std::time::Duration::from_secs(24 * 60 * 60))
}

/// The client's answers as resume entries of the run's interrupts: accepted forms are decisions
/// (`approved`, `feedback`), a declined one a rejection, a cancelled one a dismissal; an answer
/// that is not a form's result is kept as it is, for the engine to refuse (`resume_invalid`).
fn answers(run: &RunId, responses: Option<&InputResponses>) -> Vec<ResumeEntry> {
    let Some(responses) = responses else {
        return Vec::new();
    };
    responses
        .iter()
        .map(|(id, response)| {
            let (status, payload) = match serde_json::from_value::<ElicitResult>(response.clone()) {
                Ok(answer) => match answer.action {
                    ElicitationAction::Accept => {
                        let content = answer.content.unwrap_or_default();
                        let mut payload = json!({"approved": content.get("approved").cloned().unwrap_or(Value::Bool(false))});
                        if let Some(feedback) = content.get("feedback").filter(|f| f.as_str().is_some_and(|f| !f.is_empty())) {
                            payload["feedback"] = feedback.clone();
                        }
                        (ResumeStatus::Resolved, Some(payload))
                    }
                    ElicitationAction::Decline => (
                        ResumeStatus::Resolved,
                        Some(json!({"approved": false, "feedback": "The user declined this call."})),
                    ),
                    _ => (ResumeStatus::Cancelled, None),
                },
                Err(_) => (ResumeStatus::Resolved, Some(response.clone())),
            };
            tracing::debug!(run_id = %run, interrupt = %id, ?status, "an approval answered over MCP");
            ResumeEntry {
                interrupt_id: id.clone(),
                status,
                payload,
                metadata: None,
            }
        })
        .collect()
}

/// The principal of the HTTP request that carried the call (`None`: the server authenticates
/// nobody).
fn caller(cx: &RequestContext<RoleServer>) -> Option<Principal> {
    cx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
}

/// An error result: `[code] message` as its text, and `{code, message}` under its `_meta`'s
/// [`ERROR_META`] (an error result carries no structured content: that is the answer's).
fn failure(code: &str, message: &str) -> CallToolResult {
    failure_with(code, message, serde_json::Map::new())
}

/// [`failure`], with `more` beside the code and message.
fn failure_with(
    code: &str,
    message: &str,
    mut more: serde_json::Map<String, Value>,
) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!("[{code}] {message}"))]);
    more.insert("code".to_owned(), Value::from(code));
    more.insert("message".to_owned(), Value::from(message));
    let mut meta = JsonObject::new();
    meta.insert(ERROR_META.to_owned(), Value::Object(more));
    result.meta = Some(rmcp::model::MetaObject(meta));
    result
}

/// The `_meta` key of an error result's details.
pub(crate) const ERROR_META: &str = "agent-tower/error";

fn cancelled() -> CallToolResult {
    failure("cancelled", "the run was cancelled")
}

/// The answer of a call the engine took no run for.
fn refused(error: &BeginError) -> CallToolResult {
    failure(error.code(), &error.to_string())
}

/// The answer of a retry whose answers were not taken.
fn resume_failed(error: &ResumeError) -> CallToolResult {
    failure(error.code(), &error.to_string())
}

/// The answer of a call whose instance stops while its run goes on elsewhere, to a client of the
/// earlier generation (which cannot be told to call again).
fn elsewhere(run: &RunId) -> CallToolResult {
    failure(
        "handed_over",
        &format!(
            "this server instance stops; the run {run} goes on on another, and its answer will be \
             the last message of its thread"
        ),
    )
}

/// The answer of a run that waits for approvals this client cannot give.
fn waits(thread: &ThreadId, run: &RunId, interrupts: &[Interrupt]) -> CallToolResult {
    let ids: Vec<&str> = interrupts.iter().map(|i| i.id.as_str()).collect();
    let more = json!({"threadId": thread, "runId": run, "interrupts": interrupts});
    failure_with(
        "interrupted",
        &format!(
            "the run {run} waits for approval ({}), which this client cannot ask for (it declares \
             no elicitation): answer it on thread {thread} through another door",
            ids.join(", ")
        ),
        more.as_object().cloned().unwrap_or_default(),
    )
}

/// Stops the run when dropped before it is `done` (the call's future dropped: its client went
/// away).
struct StopOnDrop<'a> {
    runs: &'a Runs,
    run: &'a RunId,
    done: bool,
}

impl<'a> StopOnDrop<'a> {
    fn new(runs: &'a Runs, run: &'a RunId) -> Self {
        Self {
            runs,
            run,
            done: false,
        }
    }

    /// Cancels the run now (the client cancelled the call).
    async fn now(&mut self) {
        self.done = true;
        if let Err(error) = self.runs.cancel(self.run).await {
            tracing::warn!(run_id = %self.run, %error, "a cancelled call's run could not be cancelled");
        }
    }
}

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (runs, run) = (self.runs.clone(), self.run.clone());
        // Dropped on the runtime that served the call.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = runs.cancel(&run).await;
            });
        }
    }
}
