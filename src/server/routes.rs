//! The routes around runs: re-joining a run's events, the thread view, the review queue and
//! answers given out of band.

use std::{collections::HashSet, sync::Arc};

use axum::{
    Extension, Json, Router,
    extract::{
        Path, Query, State,
        rejection::{PathRejection, QueryRejection},
    },
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Format, Rejection, Server, begin_rejection, hydrate, require_json, respond};
use crate::{
    agui::input::{ResumeEntry, ResumeStatus},
    context::Principal,
    id::{InterruptId, RunId, ThreadId},
    model::budget::{Limit, Remaining},
    runs::{
        Cancel, InterruptRecord, InterruptStatus, Interrupts, LogError, NoticeRecord, ResumeError,
        Resumed, RunRecord, RunStatus, ThreadRecord, rules::may_use,
    },
};

/// `GET /runs/{runId}`, `GET /runs/{runId}/events`, `POST /runs/{runId}/cancel`,
/// `GET /threads/{threadId}`, `GET /budget`,
/// `POST /threads/{threadId}/resume`, `GET /interrupts`, `POST /interrupts/{id}/resolve`,
/// `GET /webhooks`.
pub(super) fn routes() -> Router<Arc<Server>> {
    Router::new()
        .route("/runs/{run_id}", get(run))
        .route("/runs/{run_id}/events", get(run_events))
        .route("/runs/{run_id}/cancel", post(cancel_run))
        .route("/threads/{thread_id}", get(thread))
        .route("/threads/{thread_id}/events", get(thread_events))
        .route("/threads/{thread_id}/resume", post(resume_thread))
        .route("/budget", get(budget))
        .route("/interrupts", get(interrupts))
        .route("/interrupts/{interrupt_id}/resolve", post(resolve))
        .route("/webhooks", get(webhooks))
}

/// The principal a request was authenticated as, if the server authenticates.
pub(super) fn caller(principal: Option<&Extension<Principal>>) -> Option<&Principal> {
    principal.map(|Extension(principal)| principal)
}

/// `caller` when it is an operator touching what another principal (`owner`) owns: what the
/// audit lines are about.
fn operator_of_another<'a>(
    caller: Option<&'a Principal>,
    owner: Option<&str>,
) -> Option<&'a Principal> {
    caller.filter(|c| c.is_operator() && owner != Some(c.name()))
}

/// Whether `caller` may see what `owner` owns; an operator seeing another principal's is logged.
fn visible(caller: Option<&Principal>, owner: Option<&str>, what: &str) -> bool {
    let visible = may_use(caller, owner);
    if let Some(operator) = operator_of_another(caller, owner).filter(|_| visible) {
        tracing::info!(
            operator = operator.name(),
            owner = owner.unwrap_or_default(),
            what,
            "an operator read another principal's"
        );
    }
    visible
}

/// The answer when the run log fails (the cause is logged, not sent).
pub(super) fn unavailable(error: &LogError) -> Rejection {
    tracing::error!(%error, "the run log failed");
    Rejection::new(
        StatusCode::SERVICE_UNAVAILABLE,
        crate::runs::STORE_UNAVAILABLE,
        "the run log is unavailable; try again",
    )
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BudgetQuery {
    run_id: Option<String>,
}

/// `GET /budget`: what the caller spent today and may still spend, and with `?runId=` what
/// that run of its spent (`{"today": {...}, "run": {...}}`, each `{spent: {tokens, cost},
/// limit, left}`, a limit `{"tokens": n}` or `{"cost": {amount, currency}}`).
async fn budget(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    query: Result<Query<BudgetQuery>, QueryRejection>,
) -> Response {
    let answer = async {
        let Query(query) = query?;
        let Some(budget) = &server.config.budget else {
            return Err(Rejection::new(
                StatusCode::NOT_FOUND,
                "no_budget",
                "this server keeps no budget",
            ));
        };
        let run = match &query.run_id {
            Some(run_id) => Some(
                visible_run(&server, principal.as_ref(), run_id)
                    .await?
                    .run_id,
            ),
            None => None,
        };
        let caller = caller(principal.as_ref());
        let left = budget.left(caller, run.as_ref()).await.map_err(|error| {
            tracing::error!(%error, "the budget's ledger failed");
            Rejection::new(
                StatusCode::SERVICE_UNAVAILABLE,
                crate::runs::STORE_UNAVAILABLE,
                "the budget's ledger is unavailable; try again",
            )
        })?;
        let mut answer = json!({ "today": remaining(&left.day) });
        if let Some(run) = &left.run {
            answer["run"] = remaining(run);
        }
        Ok(Json(answer).into_response())
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

/// One budget, as `GET /budget` tells it.
fn remaining(budget: &Remaining) -> Value {
    let amount = |limit: Limit| match limit {
        Limit::Tokens(tokens) => json!({ "tokens": tokens }),
        Limit::Cost(cost) => json!({ "cost": cost }),
    };
    json!({
        "spent": { "tokens": budget.spent.tokens, "cost": budget.spent.cost },
        "limit": budget.limit.map(amount),
        "left": budget.left().map(amount),
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

async fn run_events(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<After>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let answer = async {
        let Path(run_id) = path?;
        let Query(query) = query?;
        let run = visible_run(&server, principal.as_ref(), &run_id).await?;
        let run_id = run.run_id.clone();
        let after = cursor(&run_id, &query, &headers)?;
        if run.status != RunStatus::Running && after >= run.last_seq {
            // Up to date with an ended run: nothing to resume (and SSE clients stop retrying).
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let format = Format::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
        let follow = server.runs.rejoin(run_id, after).await;
        Ok(respond::events(follow, format, server.config.keep_alive))
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

/// `GET /runs/{runId}`: where a run stands (a background run's status, say): its thread, its
/// status (`running`, `finished`, `interrupted`, `cancelled`, `failed`), its events so far, when it
/// started and last changed, and the interrupts it waits on (answer them with
/// `POST /interrupts/{id}/resolve` or a run whose `resume` does).
async fn run(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let answer = async {
        let Path(run_id) = path?;
        let run = visible_run(&server, principal.as_ref(), &run_id).await?;
        let pending = match run.status {
            RunStatus::Interrupted => server
                .runs
                .run_log()
                .interrupts(Interrupts::PendingOf(&run.thread_id))
                .await
                .map_err(|e| unavailable(&e))?
                .into_iter()
                .filter(|interrupt| interrupt.run_id == run.run_id)
                .collect(),
            _ => Vec::new(),
        };
        let mut view = json!(RunView::from(&run));
        view["threadId"] = json!(run.thread_id);
        view["pendingInterrupts"] =
            json!(pending.iter().map(InterruptView::from).collect::<Vec<_>>());
        Ok::<_, Rejection>(Json(view).into_response())
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

/// The run `run_id`, if the caller may see it: `404` for one it may not, as for no run at all.
async fn visible_run(
    server: &Server,
    principal: Option<&Extension<Principal>>,
    run_id: &str,
) -> Result<RunRecord, Rejection> {
    let unknown = || {
        Rejection::new(
            StatusCode::NOT_FOUND,
            "unknown_run",
            format!("no run `{run_id}`"),
        )
    };
    // Ids with control characters are refused when runs start: no such run exists.
    if run_id.chars().any(char::is_control) {
        return Err(unknown());
    }
    server
        .runs
        .run_log()
        .run(&RunId::from(run_id))
        .await
        .map_err(|e| unavailable(&e))?
        .filter(|run| {
            let what = format!("run {}", run.run_id);
            visible(caller(principal), run.principal.as_deref(), &what)
        })
        .ok_or_else(unknown)
}

/// `POST /runs/{runId}/cancel`: the run is cancelled whichever instance drives it (its owner or
/// an operator may); `202` while it stops (its followers get its end), `200` with its status for
/// a run that already ended (asking again changes nothing).
async fn cancel_run(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let answer = async {
        let Path(run_id) = path?;
        let run = visible_run(&server, principal.as_ref(), &run_id).await?;
        let cancelled = if run.status == RunStatus::Running {
            server
                .runs
                .cancel(&run.run_id)
                .await
                .map_err(|e| unavailable(&e))?
        } else {
            Cancel::NotRunning
        };
        let events = format!("/runs/{}/events", run.run_id);
        Ok::<_, Rejection>(match cancelled {
            Cancel::NotRunning => {
                // Ended meanwhile, maybe: its status as the log has it now.
                let run = visible_run(&server, principal.as_ref(), &run_id).await?;
                let body =
                    json!({"runId": run.run_id, "status": run.status.as_str(), "events": events});
                (StatusCode::OK, Json(body)).into_response()
            }
            Cancel::Cancelled | Cancel::Requested => {
                let body = json!({"runId": run.run_id, "status": "cancelling", "events": events});
                (StatusCode::ACCEPTED, Json(body)).into_response()
            }
        })
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

async fn thread(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let answer = async {
        let Path(thread_id) = path?;
        let log = server.runs.run_log();
        let thread = visible_thread(&server, principal.as_ref(), thread_id).await?;
        let thread_id = thread.thread_id.clone();
        let pending = log
            .interrupts(Interrupts::PendingOf(&thread_id))
            .await
            .map_err(|e| unavailable(&e))?;
        let messages = crate::agui::input::Message::conversation(&thread.messages);
        let mut answer = json!({
            "threadId": thread.thread_id,
            "messages": messages,
            "state": thread.state,
            "runs": thread.runs.iter().map(RunView::from).collect::<Vec<_>>(),
            "pendingInterrupts": pending.iter().map(InterruptView::from).collect::<Vec<_>>(),
        });
        let branches = super::threads::branches(&server, principal.as_ref(), &thread_id).await?;
        if let Some(answer) = answer.as_object_mut() {
            answer.extend(branches);
        }
        Ok::<_, Rejection>(Json(answer).into_response())
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

/// The thread `thread_id`, if the caller may see it: `404` for one it may not, as for none.
pub(super) async fn visible_thread(
    server: &Server,
    principal: Option<&Extension<Principal>>,
    thread_id: String,
) -> Result<ThreadRecord, Rejection> {
    let thread_id = ThreadId::from(thread_id);
    server
        .runs
        .run_log()
        .thread(&thread_id)
        .await
        .map_err(|e| unavailable(&e))?
        .filter(|thread| {
            let what = format!("thread {}", thread.thread_id);
            visible(caller(principal), thread.principal.as_deref(), &what)
        })
        .ok_or_else(|| unknown_thread(&thread_id))
}

/// The answer for a thread the log does not know (or not for this caller).
pub(super) fn unknown_thread(thread_id: &ThreadId) -> Rejection {
    Rejection::new(
        StatusCode::NOT_FOUND,
        "unknown_thread",
        format!("no thread `{thread_id}`"),
    )
}

/// `GET /threads/{threadId}/events`: the thread as events, for a client connecting to it (see
/// [`hydrate`](super::hydrate)), in the format it accepts.
async fn thread_events(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<FollowThread>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let answer = async {
        let Path(thread_id) = path?;
        let Query(query) = query?;
        let thread = visible_thread(&server, principal.as_ref(), thread_id).await?;
        let format = Format::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
        let keep_alive = server.config.keep_alive;
        let follow = query.follow.unwrap_or(false);
        let (first, run_id) = match hydrate::in_flight(&thread) {
            Some(run) => {
                let follow = server.runs.rejoin(run.run_id.clone(), 0).await;
                (
                    hydrate::First::Joined(Box::new(hydrate::Joined::new(follow, &thread))),
                    run.run_id.clone(),
                )
            }
            None => {
                let events = ended_thread(&server, &thread).await?;
                let run_id = thread
                    .runs
                    .last()
                    .map_or_else(|| RunId::from("none"), |run| run.run_id.clone());
                (hydrate::First::Ended(events), run_id)
            }
        };
        let events = hydrate::stream(server.runs.clone(), &thread, first, follow);
        Ok::<_, Rejection>(respond::stream(events, &run_id, format, keep_alive))
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

/// `?follow=true`: after the thread as it is, its later runs as they start.
#[derive(Debug, Deserialize)]
struct FollowThread {
    follow: Option<bool>,
}

/// The events of `thread`, which has no run in flight (see [`hydrate::ended`]).
async fn ended_thread(
    server: &Server,
    thread: &ThreadRecord,
) -> Result<std::collections::VecDeque<crate::runs::LoggedEvent>, Rejection> {
    let log = server.runs.run_log();
    let pending: HashSet<InterruptId> = log
        .interrupts(Interrupts::PendingOf(&thread.thread_id))
        .await
        .map_err(|e| unavailable(&e))?
        .into_iter()
        .map(|interrupt| interrupt.id)
        .collect();
    let last_end = match thread.runs.last() {
        Some(run) if !pending.is_empty() && run.last_seq > 0 => log
            .read(&run.run_id, run.last_seq - 1, 1)
            .await
            .map_err(|e| unavailable(&e))?
            .and_then(|page| page.events.into_iter().next()),
        _ => None,
    };
    Ok(hydrate::ended(thread, last_end.as_ref(), &pending))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WebhookQuery {
    run_id: Option<RunId>,
    limit: Option<usize>,
}

/// `GET /webhooks` (operators): the newest notices of runs' ends, delivered or not (`?runId=`
/// one run's, `?limit=` at most 1,000, 100 by default); their URLs without their query, which
/// may carry a token.
async fn webhooks(
    State(server): State<Arc<Server>>,
    query: Result<Query<WebhookQuery>, QueryRejection>,
) -> Response {
    let answer = async {
        let Query(query) = query?;
        let Some(outbox) = server.runs.run_log().outbox() else {
            return Err(Rejection::new(
                StatusCode::NOT_FOUND,
                "no_webhooks",
                "this server's run log keeps no webhooks",
            ));
        };
        let limit = query.limit.unwrap_or(100).min(1_000);
        let list = outbox
            .notices(query.run_id.as_ref(), limit)
            .await
            .map_err(|e| unavailable(&e))?;
        let list: Vec<Value> = list.iter().map(NoticeRecord::json).collect();
        Ok(Json(json!({ "webhooks": list })).into_response())
    };
    answer.await.unwrap_or_else(Rejection::into_response)
}

#[derive(Debug, Deserialize)]
struct StatusFilter {
    status: Option<String>,
}

async fn interrupts(
    State(server): State<Arc<Server>>,
    filter: Result<Query<StatusFilter>, QueryRejection>,
) -> Response {
    let answer = async {
        let Query(filter) = filter?;
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
        let list = server
            .runs
            .run_log()
            .interrupts(Interrupts::All(status))
            .await
            .map_err(|e| unavailable(&e))?;
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

/// Answers for pending interrupts of a thread, out of band.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResumeThread {
    resume: Vec<ResumeEntry>,
}

/// The bodies of the out-of-band answers, parsed as their routes parse them (for the fuzz
/// target).
#[cfg(feature = "fuzzing")]
pub(crate) fn parse_answers(body: &[u8]) {
    let _ = parse_json::<Resolve>(body);
    let _ = parse_json::<ResumeThread>(body);
}

/// A route's JSON body, read within the server's bounds and parsed: `415` unless it is declared
/// JSON, `413` past the limit, `422` for JSON that is not a `T`.
pub(super) async fn json_body<T>(
    server: &Server,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<T, Rejection>
where
    T: serde::de::DeserializeOwned,
{
    require_json(headers)?;
    parse_json(&server.read_body(body).await?)
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

/// `202` with where to watch the run, or why no run was taken.
fn resumed(result: Result<Resumed, ResumeError>) -> Response {
    let Resumed { thread_id, run_id } = match result {
        Ok(resumed) => resumed,
        Err(ResumeError::Begin(error)) => return begin_rejection(error).into_response(),
        Err(error) => {
            let status = match error {
                ResumeError::UnknownInterrupt(_) => StatusCode::NOT_FOUND,
                ResumeError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
                _ => StatusCode::CONFLICT,
            };
            return Rejection::new(status, error.code(), error.to_string()).into_response();
        }
    };
    (
        StatusCode::ACCEPTED,
        Json(json!({
            "threadId": thread_id,
            "runId": run_id,
            "events": format!("/runs/{run_id}/events"),
        })),
    )
        .into_response()
}

async fn resolve(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, Rejection> {
    let Path(interrupt_id) = path?;
    let body: Resolve = json_body(&server, &headers, body).await?;
    let id = InterruptId::from(interrupt_id);
    let result = server
        .runs
        .resolve(caller(principal.as_ref()), &id, body.status, body.payload)
        .await;
    audit_answer(&server, principal.as_ref(), &result).await;
    Ok(resumed(result))
}

/// Logs an operator's answer in another principal's thread, as its reads are.
async fn audit_answer(
    server: &Server,
    principal: Option<&Extension<Principal>>,
    result: &Result<Resumed, ResumeError>,
) {
    let (Some(caller), Ok(Resumed { thread_id, run_id })) = (caller(principal), result) else {
        return;
    };
    let owner = match server.runs.run_log().thread(thread_id).await {
        Ok(thread) => thread.and_then(|thread| thread.principal),
        Err(error) => Some(format!("unknown ({error})")),
    };
    if let Some(operator) = operator_of_another(Some(caller), owner.as_deref()) {
        tracing::info!(
            operator = operator.name(),
            owner = owner.unwrap_or_default(),
            what = format!("thread {thread_id}"),
            run_id = %run_id,
            "an operator answered another principal's interrupt"
        );
    }
}

async fn resume_thread(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, Rejection> {
    let Path(thread_id) = path?;
    let body: ResumeThread = json_body(&server, &headers, body).await?;
    let result = server
        .runs
        .resume_thread(
            caller(principal.as_ref()),
            ThreadId::from(thread_id),
            body.resume,
        )
        .await;
    audit_answer(&server, principal.as_ref(), &result).await;
    Ok(resumed(result))
}
