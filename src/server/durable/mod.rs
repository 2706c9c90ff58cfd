//! The server's durable mode ([`AguiServer::store`](super::AguiServer::store)): runs written to a
//! [`RunStore`], interrupts, resumable streams, the review queue.

mod driver;

use std::{collections::HashMap, sync::Arc, time::Duration};

use axum::{
    Json, Router,
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tower::ServiceExt;
use tower_service::Service;

use super::{Format, Rejection, Server, run::RunTracker, threads::BusyThread};
use crate::{
    BoxError,
    agui::{
        Event, RunAgentInput,
        event::{BaseEvent, RunError, RunStarted},
        input::{ResumeEntry, ResumeStatus},
        interrupt,
    },
    id::{InterruptId, RunId, ThreadId},
    message::Message,
    permission::{Decision, Resolutions},
    run::{RunOutcome, RunRequest},
    store::{
        InterruptRecord, InterruptStatus, NewRun, RunRecord, RunStatus, RunStore, StartError,
        args_hash,
    },
    transport::{Channel, OnDisconnect},
};

/// The durable mode's settings.
#[derive(Debug, Clone)]
pub(crate) struct Durable {
    pub(crate) store: RunStore,
    pub(crate) lease: Duration,
}

/// How a run request was taken.
enum Begun {
    /// A new run, running.
    Started(RunId, tokio_util::sync::CancellationToken),
    /// The same resume again: the run that applied it answers.
    Replay(RunId),
    /// Refused with a RUN_ERROR, recorded as a run of its own.
    Refused(RunId, &'static str, String),
}

fn store_failed(error: impl std::fmt::Display) -> Rejection {
    tracing::error!(%error, "the run store failed");
    Rejection::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        "the run store is unavailable; try again",
    )
}

/// The RUN_ERROR code of a refused start.
fn refusal_code(error: &StartError) -> &'static str {
    match error {
        StartError::InterruptsPending(_) => "interrupts_pending",
        StartError::ResumeMissing(_) => "resume_incomplete",
        StartError::UnknownInterrupt(_) => "unknown_interrupt",
        StartError::Expired(_) => "interrupt_expired",
        StartError::AlreadyResolved { .. } => "interrupt_already_resolved",
        _ => "run_refused",
    }
}

/// What is compared when the same resume comes twice.
fn answer(entry: &ResumeEntry) -> Value {
    json!({"status": entry.status, "payload": entry.payload})
}

impl<A> Server<A>
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    /// Starts the run `input` asks for, in a task of its own, its events written to the log.
    async fn begin(&self, durable: &Durable, input: RunAgentInput) -> Result<Begun, Rejection> {
        let store = &durable.store;
        let resume = input.resume.clone().unwrap_or_default();
        let mut answers = Vec::with_capacity(resume.len());
        let mut decisions = HashMap::new();
        for entry in &resume {
            let id = InterruptId::from(entry.interrupt_id.as_str());
            match interrupt::decision(entry) {
                Ok(decision) => {
                    answers.push((id.clone(), answer(entry)));
                    decisions.insert(id, decision);
                }
                Err(invalid) => {
                    return self
                        .refuse(store, &input, "resume_invalid", invalid.to_string())
                        .await;
                }
            }
        }
        let new_run =
            NewRun::new(input.thread_id.clone(), input.run_id.clone()).lease(durable.lease);
        let lease = loop {
            match store.start_run(&new_run, &answers).await {
                Ok(lease) => break lease,
                Err(StartError::Busy(thread)) => match self.config.busy_thread {
                    BusyThread::Queue => wait_for_thread(store, &thread).await?,
                    BusyThread::Reject => {
                        return Err(Rejection::new(
                            StatusCode::CONFLICT,
                            "thread_busy",
                            format!("thread `{thread}` already has an active run"),
                        ));
                    }
                },
                Err(StartError::RunExists(run)) => {
                    return Err(Rejection::new(
                        StatusCode::CONFLICT,
                        "run_exists",
                        format!("run `{run}` exists already"),
                    ));
                }
                Err(StartError::AlreadyResolved {
                    by_run, same: true, ..
                }) => return Ok(Begun::Replay(by_run)),
                Err(StartError::Store(error)) => return Err(store_failed(error)),
                Err(refused) => {
                    let code = refusal_code(&refused);
                    return self.refuse(store, &input, code, refused.to_string()).await;
                }
            }
        };

        let mut req = input.to_run_request();
        if !decisions.is_empty() {
            // A resume continues the stored conversation, never the client's copy of it.
            let thread = store
                .thread(&input.thread_id)
                .await
                .map_err(store_failed)?
                .ok_or_else(|| store_failed("a resumed thread has no conversation"))?;
            req.messages = thread.messages;
            req.state = thread.state.or(req.state);
            let mut by_call = HashMap::new();
            for (id, decision) in decisions {
                let record = store
                    .interrupt(&id)
                    .await
                    .map_err(store_failed)?
                    .ok_or_else(|| store_failed("a resolved interrupt vanished"))?;
                if !bound_to_call(&record, &req.messages) {
                    tracing::error!(interrupt = %id, "the conversation does not hold the interrupted call as stored");
                }
                let decision = decision_for(&record, decision, &req.messages);
                by_call.insert(record.tool_call_id, decision);
            }
            req.run.extensions.insert(Resolutions::new(by_call));
        }
        req.run.cancel = self.config.shutdown.child_token();
        let (tx, rx) = Channel::<Event>::bounded(self.config.channel_capacity);
        req.run.sinks.agui = Some(tx);
        // The log reads every event: the run never loses its transport to a viewer leaving.
        req.run.sinks.on_disconnect = Some(OnDisconnect::Continue);
        let cancel = req.run.cancel.clone();
        let tracker = RunTracker::new(
            req.run.thread_id.clone(),
            req.run.run_id.clone(),
            self.config.on_run_end.clone(),
            None,
        );
        let run: super::run::RunFuture = Box::pin(self.agent.clone().oneshot(req));
        tokio::spawn(driver::drive(
            store.clone(),
            Arc::new(lease),
            run,
            rx,
            cancel.clone(),
            tracker,
        ));
        Ok(Begun::Started(input.run_id, cancel))
    }

    /// Records `input`'s run as refused (`RUN_STARTED`, `RUN_ERROR{code}`).
    async fn refuse(
        &self,
        store: &RunStore,
        input: &RunAgentInput,
        code: &'static str,
        message: String,
    ) -> Result<Begun, Rejection> {
        let events = [
            Event::from(RunStarted {
                thread_id: input.thread_id.clone(),
                run_id: input.run_id.clone(),
                parent_run_id: None,
                input: None,
                protocol_version: Some(crate::agui::PROTOCOL_VERSION.to_owned()),
                base: BaseEvent::default(),
            }),
            Event::from(RunError {
                message: message.clone(),
                code: Some(code.to_owned()),
                usage: None,
                base: BaseEvent::default(),
            }),
        ]
        .iter()
        .map(|e| serde_json::to_string(e).expect("events serialize"))
        .collect::<Vec<_>>();
        store
            .record_refused(&input.thread_id, &input.run_id, &events)
            .await
            .map_err(|_| {
                Rejection::new(
                    StatusCode::CONFLICT,
                    "run_exists",
                    format!("run `{}` exists already", input.run_id),
                )
            })?;
        Ok(Begun::Refused(input.run_id.clone(), code, message))
    }

    /// `POST /`: the run's events from its log, as they are written.
    pub(super) async fn start_durable(
        &self,
        durable: &Durable,
        input: RunAgentInput,
        format: Format,
    ) -> Result<Response, Rejection> {
        let (run_id, guard) = match self.begin(durable, input).await? {
            Begun::Started(run_id, cancel) => {
                let guard = (self.config.on_disconnect == OnDisconnect::Cancel)
                    .then(|| cancel.drop_guard());
                (run_id, guard)
            }
            Begun::Replay(run_id) | Begun::Refused(run_id, ..) => (run_id, None),
        };
        Ok(self.log_response(&durable.store, run_id, 0, format, guard))
    }

    /// The events of `run_id` after `after`, then live, in `format`; SSE events carry
    /// `id: {runId}:{seq}`. `guard` lives as long as the response body.
    fn log_response(
        &self,
        store: &RunStore,
        run_id: RunId,
        after: u64,
        format: Format,
        guard: Option<tokio_util::sync::DropGuard>,
    ) -> Response {
        let events = store.follow(run_id.clone(), after).map(move |logged| {
            let _viewer = &guard;
            logged.map_err(|error| {
                tracing::warn!(%error, "a run's log could not be read: the stream ends");
                error
            })
        });
        match format {
            Format::Sse => {
                let frames = events.map(move |logged| {
                    logged.map(|event| {
                        axum::response::sse::Event::default()
                            .id(format!("{run_id}:{}", event.seq))
                            .data(event.json)
                    })
                });
                super::sse_response(frames, self.config.keep_alive)
            }
            Format::Ndjson => super::binary_response(
                format,
                events.map(|logged| {
                    logged.map(|event| {
                        let mut line = event.json.into_bytes();
                        line.push(b'\n');
                        axum::body::Bytes::from(line)
                    })
                }),
            ),
            #[cfg(feature = "proto")]
            Format::Proto => super::binary_response(
                format,
                events.map(|logged| {
                    let event = logged?;
                    let event: Event = serde_json::from_str(&event.json).map_err(|e| {
                        crate::store::StoreError::Corrupt(format!("logged event ({e})"))
                    })?;
                    let mut frame = Vec::new();
                    crate::agui::proto::encode_framed(&event, &mut frame);
                    Ok::<_, crate::store::StoreError>(axum::body::Bytes::from(frame))
                }),
            ),
        }
    }
}

/// Waits until the thread's active run (if any) has ended.
async fn wait_for_thread(store: &RunStore, thread: &ThreadId) -> Result<(), Rejection> {
    let record = store.thread(thread).await.map_err(store_failed)?;
    let active = record.and_then(|t| t.runs.into_iter().find(|r| r.status == RunStatus::Running));
    if let Some(run) = active {
        let mut events = store.follow(run.run_id, run.last_seq);
        while events.next().await.is_some() {}
    }
    Ok(())
}

/// The interrupted call, as the stored conversation holds it.
fn call_arguments(record: &InterruptRecord, messages: &[Message]) -> Option<Value> {
    messages.iter().rev().find_map(|message| match message {
        Message::Assistant { tool_calls, .. } => tool_calls
            .iter()
            .find(|call| call.id == record.tool_call_id)
            .map(|call| serde_json::from_str(&call.arguments).unwrap_or(Value::Null)),
        _ => None,
    })
}

/// Whether the conversation holds the interrupted call with the very arguments that were asked
/// about.
fn bound_to_call(record: &InterruptRecord, messages: &[Message]) -> bool {
    call_arguments(record, messages).is_some_and(|args| args_hash(&args) == record.args_hash)
}

/// The decision to apply: an approval of a call whose arguments are not the ones asked about is
/// refused (the model is told).
fn decision_for(record: &InterruptRecord, decision: Decision, messages: &[Message]) -> Decision {
    match decision {
        Decision::Approve if !bound_to_call(record, messages) => {
            Decision::Reject("The call changed after it was approved; it was not run.".to_owned())
        }
        other => other,
    }
}

/// The durable routes: `GET /runs/{runId}/events`, `GET /threads/{threadId}`,
/// `POST /threads/{threadId}/resume`, `GET /interrupts`, `POST /interrupts/{id}/resolve`.
pub(super) fn routes<A>() -> Router<Arc<Server<A>>>
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    Router::new()
        .route("/runs/{run_id}/events", get(run_events::<A>))
        .route("/threads/{thread_id}", get(thread::<A>))
        .route("/threads/{thread_id}/resume", post(resume_thread::<A>))
        .route("/interrupts", get(interrupts::<A>))
        .route("/interrupts/{interrupt_id}/resolve", post(resolve::<A>))
}

fn durable<A>(server: &Server<A>) -> Result<&Durable, Rejection> {
    server.config.durable.as_ref().ok_or_else(|| {
        Rejection::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no run store is configured",
        )
    })
}

#[derive(Debug, Deserialize)]
struct After {
    after: Option<u64>,
}

/// Where a re-joining client is: `?after=N`, else `Last-Event-ID: {runId}:{seq}`, else 0.
fn cursor(run_id: &RunId, query: &After, headers: &HeaderMap) -> Result<u64, Rejection> {
    if let Some(after) = query.after {
        return Ok(after);
    }
    let Some(last) = headers.get("last-event-id") else {
        return Ok(0);
    };
    let bad = |why: &str| {
        Rejection::new(
            StatusCode::BAD_REQUEST,
            "invalid_last_event_id",
            format!("`Last-Event-ID` {why}; expected `{run_id}:<seq>`"),
        )
    };
    let last = last.to_str().map_err(|_| bad("is not text"))?;
    let (run, seq) = last.rsplit_once(':').ok_or_else(|| bad("has no `:`"))?;
    if run != run_id.as_str() {
        return Err(bad("names another run"));
    }
    seq.parse().map_err(|_| bad("has no sequence number"))
}

async fn run_events<A>(
    State(server): State<Arc<Server<A>>>,
    Path(run_id): Path<String>,
    Query(after): Query<After>,
    headers: HeaderMap,
) -> Response
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    let answer = async {
        let durable = durable(&server)?;
        let run_id = RunId::from(run_id);
        let after = cursor(&run_id, &after, &headers)?;
        let run = durable
            .store
            .run(&run_id)
            .await
            .map_err(store_failed)?
            .ok_or_else(|| {
                Rejection::new(
                    StatusCode::NOT_FOUND,
                    "unknown_run",
                    format!("no run `{run_id}`"),
                )
            })?;
        if run.status != RunStatus::Running && after >= run.last_seq {
            // Up to date with an ended run: nothing to resume (and SSE clients stop retrying).
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let format = Format::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
        Ok(server.log_response(&durable.store, run_id, after, format, None))
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunView {
    run_id: RunId,
    status: String,
    events: u64,
    created_at: String,
    updated_at: String,
}

impl From<&RunRecord> for RunView {
    fn from(run: &RunRecord) -> Self {
        Self {
            run_id: run.run_id.clone(),
            status: run.status.to_string(),
            events: run.last_seq,
            created_at: humantime::format_rfc3339_millis(run.created_at).to_string(),
            updated_at: humantime::format_rfc3339_millis(run.updated_at).to_string(),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InterruptView {
    id: InterruptId,
    thread_id: ThreadId,
    run_id: RunId,
    tool_call_id: crate::id::ToolCallId,
    tool_name: String,
    arguments: Value,
    status: &'static str,
    created_at: String,
    expires_at: String,
    age_seconds: u64,
    expired: bool,
    resolved_by_run: Option<RunId>,
}

impl From<&InterruptRecord> for InterruptView {
    fn from(record: &InterruptRecord) -> Self {
        let now = std::time::SystemTime::now();
        Self {
            id: record.id.clone(),
            thread_id: record.thread_id.clone(),
            run_id: record.run_id.clone(),
            tool_call_id: record.tool_call_id.clone(),
            tool_name: record.tool_name.clone(),
            arguments: record.arguments.clone(),
            status: record.status.as_str(),
            created_at: humantime::format_rfc3339_millis(record.created_at).to_string(),
            expires_at: humantime::format_rfc3339_millis(record.expires_at).to_string(),
            age_seconds: now
                .duration_since(record.created_at)
                .map_or(0, |age| age.as_secs()),
            expired: record.expires_at <= now,
            resolved_by_run: record.resolved_by_run.clone(),
        }
    }
}

async fn thread<A>(State(server): State<Arc<Server<A>>>, Path(thread_id): Path<String>) -> Response
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    let answer = async {
        let store = &durable(&server)?.store;
        let thread_id = ThreadId::from(thread_id);
        let thread = store
            .thread(&thread_id)
            .await
            .map_err(store_failed)?
            .ok_or_else(|| {
                Rejection::new(
                    StatusCode::NOT_FOUND,
                    "unknown_thread",
                    format!("no thread `{thread_id}`"),
                )
            })?;
        let pending = store
            .pending_interrupts(&thread_id)
            .await
            .map_err(store_failed)?;
        let messages: Vec<crate::agui::input::Message> =
            thread.messages.iter().map(Into::into).collect();
        Ok::<_, Rejection>(
            Json(json!({
                "threadId": thread.thread_id,
                "messages": messages,
                "state": thread.state,
                "runs": thread.runs.iter().map(RunView::from).collect::<Vec<_>>(),
                "pendingInterrupts": pending.iter().map(InterruptView::from).collect::<Vec<_>>(),
            }))
            .into_response(),
        )
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

#[derive(Debug, Deserialize)]
struct StatusFilter {
    status: Option<String>,
}

async fn interrupts<A>(
    State(server): State<Arc<Server<A>>>,
    Query(filter): Query<StatusFilter>,
) -> Response
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    let answer = async {
        let store = &durable(&server)?.store;
        let status = match filter.status.as_deref() {
            None | Some("all") => None,
            Some("pending") => Some(InterruptStatus::Pending),
            Some("resolved") => Some(InterruptStatus::Resolved),
            Some(other) => {
                return Err(Rejection::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_status",
                    format!("unknown status `{other}`: use pending, resolved or all"),
                )
                .field("status"));
            }
        };
        let list = store.interrupts(status).await.map_err(store_failed)?;
        Ok(Json(json!({
            "interrupts": list.iter().map(InterruptView::from).collect::<Vec<_>>()
        }))
        .into_response())
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

/// The answer to one interrupt, out of band.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Resolve {
    #[serde(default = "resolved")]
    status: ResumeStatus,
    payload: Option<Value>,
}

fn resolved() -> ResumeStatus {
    ResumeStatus::Resolved
}

/// Answers for every pending interrupt of a thread, out of band.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResumeThread {
    resume: Vec<ResumeEntry>,
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Rejection> {
    serde_json::from_slice(body).map_err(|e| {
        Rejection::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!("invalid body: {e}"),
        )
    })
}

async fn resolve<A>(
    State(server): State<Arc<Server<A>>>,
    Path(interrupt_id): Path<String>,
    body: axum::body::Bytes,
) -> Response
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    let answer = async {
        let durable = durable(&server)?;
        let body: Resolve = parse_json(&body)?;
        let id = InterruptId::from(interrupt_id);
        let record = durable
            .store
            .interrupt(&id)
            .await
            .map_err(store_failed)?
            .ok_or_else(|| {
                Rejection::new(
                    StatusCode::NOT_FOUND,
                    "unknown_interrupt",
                    format!("no interrupt `{id}`"),
                )
            })?;
        let entry = ResumeEntry {
            interrupt_id: id.to_string(),
            status: body.status,
            payload: body.payload,
            metadata: None,
        };
        server
            .resume_in_background(durable, record.thread_id, vec![entry])
            .await
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

async fn resume_thread<A>(
    State(server): State<Arc<Server<A>>>,
    Path(thread_id): Path<String>,
    body: axum::body::Bytes,
) -> Response
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    let answer = async {
        let durable = durable(&server)?;
        let body: ResumeThread = parse_json(&body)?;
        server
            .resume_in_background(durable, thread_id.into(), body.resume)
            .await
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

impl<A> Server<A>
where
    A: Service<RunRequest, Response = RunOutcome, Error = BoxError> + Clone + Send + Sync + 'static,
    A::Future: Send + 'static,
{
    /// Resumes a thread with `resume` in a run nobody watches (`202` with where to watch it).
    /// An answer that is refused (already resolved, expired, incomplete, invalid) is a `409` or
    /// `422` naming why.
    async fn resume_in_background(
        &self,
        durable: &Durable,
        thread_id: ThreadId,
        resume: Vec<ResumeEntry>,
    ) -> Result<Response, Rejection> {
        let mut input = RunAgentInput::new(thread_id.clone(), RunId::new(), Vec::new());
        input.resume = Some(resume);
        let run_id = match self.begin(durable, input).await? {
            Begun::Started(run_id, _) => run_id,
            Begun::Replay(by_run) => {
                return Err(Rejection::new(
                    StatusCode::CONFLICT,
                    "interrupt_already_resolved",
                    format!("resolved already, by run `{by_run}`"),
                ));
            }
            Begun::Refused(_, code, message) => {
                let status = if code == "resume_invalid" {
                    StatusCode::UNPROCESSABLE_ENTITY
                } else {
                    StatusCode::CONFLICT
                };
                return Err(Rejection::new(status, code, message));
            }
        };
        Ok((
            StatusCode::ACCEPTED,
            Json(json!({
                "threadId": thread_id,
                "runId": run_id,
                "events": format!("/runs/{run_id}/events"),
            })),
        )
            .into_response())
    }
}

/// The `RUN_ERROR` that closes the log of a run whose owner died.
pub(super) fn lost_run_event(run: &RunRecord) -> String {
    let event = Event::from(RunError {
        message: format!(
            "run `{}` ended without its owner (the server stopped while it ran)",
            run.run_id
        ),
        code: Some("run_lost".to_owned()),
        usage: None,
        base: BaseEvent::default(),
    });
    serde_json::to_string(&event).expect("events serialize")
}

/// Closes, now and every `every`, the runs whose owner died, until `stop`.
pub(super) fn sweep(store: RunStore, every: Duration, stop: tokio_util::sync::CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            match store.close_expired(lost_run_event).await {
                Ok(closed) => {
                    for run in closed {
                        tracing::warn!(run_id = %run.run_id, thread_id = %run.thread_id, "closed a run whose owner died");
                    }
                }
                Err(error) => tracing::warn!(%error, "could not sweep dead runs"),
            }
        }
    });
}
