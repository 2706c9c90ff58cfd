//! The thread list: a principal's threads, newest first, named, archived and deleted by their
//! clients (`GET /threads`, `PATCH /threads/{threadId}`, `DELETE /threads/{threadId}`), and
//! followed live (`GET /threads` as an event stream).

use std::{convert::Infallible, sync::Arc};

use axum::{
    Extension, Json, Router,
    extract::{
        Path, Query, State,
        rejection::{PathRejection, QueryRejection},
    },
    http::{HeaderMap, StatusCode, header},
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
    routing::{get, patch, post},
};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::json;

use super::{
    Rejection, Server,
    negotiate::quality,
    routes::{caller, json_body, unavailable, unknown_thread, visible_thread},
};
use crate::{
    context::Principal,
    id::{MessageId, ThreadId},
    runs::{
        Deleted, Fork, ForkAt, ForkError, ListChange, MAX_TITLE, ThreadChange, ThreadCursor,
        ThreadQuery, ThreadSummary, thread_name,
    },
};

/// The threads a page lists when the client does not say.
const PAGE: usize = 20;

/// The most threads a page lists.
const MAX_PAGE: usize = 100;

/// `GET /threads`, `PATCH /threads/{threadId}`, `DELETE /threads/{threadId}` (the thread itself,
/// `GET /threads/{threadId}`, is with the routes around runs).
pub(super) fn routes() -> Router<Arc<Server>> {
    Router::new()
        .route("/threads", get(list))
        .route("/threads/{thread_id}", patch(change).delete(delete))
        .route("/threads/{thread_id}/fork", post(fork))
}

/// How a thread is listed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ThreadView {
    thread_id: ThreadId,
    title: Option<String>,
    archived: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    workspace: Option<String>,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    forked_from: Option<ForkView>,
}

/// Where a fork came from: the thread, and the last of its messages the fork kept.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ForkView {
    thread_id: ThreadId,
    message_id: Option<MessageId>,
}

impl From<ThreadSummary> for ThreadView {
    fn from(thread: ThreadSummary) -> Self {
        Self {
            thread_id: thread.thread_id,
            title: thread.title,
            archived: thread.archived,
            workspace: thread.workspace,
            updated_at: humantime::format_rfc3339_millis(thread.updated_at).to_string(),
            forked_from: thread.forked_from.map(|from| ForkView {
                thread_id: from.thread_id,
                message_id: from.message_id,
            }),
        }
    }
}

/// `GET /threads` asks for: `limit`, `after` (the `next` of the last page), `archived` (`false`,
/// `true` or `all`), `q` (text of the title).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    limit: Option<usize>,
    after: Option<String>,
    archived: Option<String>,
    q: Option<String>,
}

/// `GET /threads`: the caller's threads, newest first, a page at a time; without
/// authentication, everyone's (one shared space). Asked for as `text/event-stream`, the list's
/// changes from then on (see [`live`]).
async fn list(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    query: Result<Query<ListQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, Rejection> {
    let Query(query) = query?;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    if accept.is_some_and(|accept| {
        quality(accept, "text/event-stream") > quality(accept, "application/json")
    }) {
        let owner = caller(principal.as_ref()).map(|p| p.name().to_owned());
        return Ok(live(server, owner));
    }
    let bad = |field: &'static str, code: &'static str, message: String| {
        Rejection::new(StatusCode::BAD_REQUEST, code, message).field(field)
    };
    let limit = match query.limit {
        None => PAGE,
        Some(limit @ 1..=MAX_PAGE) => limit,
        Some(other) => {
            let why = format!("`limit` {other} is not between 1 and {MAX_PAGE}");
            return Err(bad("limit", "invalid_limit", why));
        }
    };
    let after = query
        .after
        .as_deref()
        .map(str::parse::<ThreadCursor>)
        .transpose()
        .map_err(|e| bad("after", "invalid_cursor", format!("`after`: {e}")))?;
    let archived = match query.archived.as_deref() {
        None | Some("false") => Some(false),
        Some("true") => Some(true),
        Some("all") => None,
        Some(other) => {
            let why = format!("`archived` {other:?}: use false, true or all");
            return Err(bad("archived", "invalid_archived", why));
        }
    };
    if let Some(text) = &query.q
        && text.chars().count() > MAX_TITLE
    {
        let why = format!("`q` is longer than {MAX_TITLE} characters");
        return Err(bad("q", "invalid_search", why));
    }
    let owner = caller(principal.as_ref()).map(Principal::name);
    let selected = ThreadQuery::new(limit)
        .principal(owner)
        .archived(archived)
        .search(query.q.as_deref())
        .after(after.as_ref());
    let page = server
        .runs
        .run_log()
        .threads(&selected)
        .await
        .map_err(|e| unavailable(&e))?;
    let threads: Vec<ThreadView> = page.threads.into_iter().map(ThreadView::from).collect();
    let next = page.next.map(|next| next.to_string());
    Ok(Json(json!({"threads": threads, "next": next})).into_response())
}

/// The thread list's changes as SSE events, from now on, for `owner`'s threads (`None`: every
/// thread), each a JSON object with a `type`:
///
/// - `THREAD_UPDATED` with `thread` (as `GET /threads` lists it): a thread new to the list (its
///   first run started), named, archived or unarchived, or continued (it moves to the top);
/// - `THREAD_DELETED` with `threadId`;
/// - `THREADS_CHANGED`: changes may have been missed (the follower fell behind, another
///   instance's notifications were interrupted): list again.
///
/// A client opens the stream first, then lists: nothing changed between the two is missed.
fn live(server: Arc<Server>, owner: Option<String>) -> Response {
    let keep_alive = server.config.keep_alive;
    let changes = server.runs.list_changes();
    let events = futures_util::stream::unfold(
        (server, owner, changes),
        |(server, owner, mut changes)| async move {
            // The stream ends when the engine stops: the client follows another instance.
            let event = loop {
                match changes.next().await? {
                    ListChange::Thread {
                        thread_id,
                        principal,
                    } if owner.is_none() || principal == owner => {
                        break changed(&server, owner.as_deref(), thread_id).await;
                    }
                    ListChange::Thread { .. } => {}
                    _ => break json!({"type": "THREADS_CHANGED"}),
                }
            };
            let event = Event::default().data(event.to_string());
            Some((Ok::<_, Infallible>(event), (server, owner, changes)))
        },
    );
    let keep_alive = KeepAlive::new().interval(keep_alive).text("ping");
    Sse::new(events).keep_alive(keep_alive).into_response()
}

/// The event of a change of `thread_id`: its listing as it is now, or its deletion.
async fn changed(server: &Server, owner: Option<&str>, thread_id: ThreadId) -> serde_json::Value {
    let query = ThreadQuery::new(1).principal(owner).thread(&thread_id);
    match server.runs.run_log().threads(&query).await {
        Ok(page) => match page.threads.into_iter().next() {
            Some(thread) => json!({"type": "THREAD_UPDATED", "thread": ThreadView::from(thread)}),
            None => json!({"type": "THREAD_DELETED", "threadId": thread_id}),
        },
        Err(error) => {
            tracing::warn!(%error, "a thread's listing could not be read");
            json!({"type": "THREADS_CHANGED"})
        }
    }
}

/// What `PATCH /threads/{threadId}` changes: `title` (a name, or `null` for the first line of
/// the first prompt again) and `archived`; what is absent stays.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    #[serde(default, deserialize_with = "present")]
    title: Option<Option<String>>,
    archived: Option<bool>,
}

/// A field that is present, `null` included.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// A title a client gives, trimmed, or why it is refused.
fn checked_title(title: &str) -> Result<String, Rejection> {
    thread_name(title).map_err(|invalid| {
        Rejection::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_title",
            invalid.to_string(),
        )
        .field("title")
    })
}

impl Change {
    /// The change to make, or why it is refused.
    fn checked(self) -> Result<ThreadChange, Rejection> {
        let mut change = ThreadChange::new();
        if let Some(title) = self.title {
            change = change.name(title.as_deref().map(checked_title).transpose()?);
        }
        if let Some(archived) = self.archived {
            change = change.archived(archived);
        }
        if change == ThreadChange::new() {
            return Err(Rejection::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_input",
                "nothing to change: send `title`, `archived` or both",
            ));
        }
        Ok(change)
    }
}

/// `PATCH /threads/{threadId}`: names, renames, archives or unarchives one of the caller's
/// threads; its listing after the change.
async fn change(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, Rejection> {
    let Path(thread_id) = path?;
    let change = json_body::<Change>(&server, &headers, body)
        .await?
        .checked()?;
    let thread = visible_thread(&server, principal.as_ref(), thread_id).await?;
    let changed = server
        .runs
        .change_thread(&thread.thread_id, &change)
        .await
        .map_err(|e| unavailable(&e))?
        .ok_or_else(|| unknown_thread(&thread.thread_id))?;
    Ok(Json(ThreadView::from(changed)).into_response())
}

/// `DELETE /threads/{threadId}`: one of the caller's threads and everything of it gone from the
/// log (`204`); `409 thread_busy` while one of its runs runs.
async fn delete(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, Rejection> {
    let Path(thread_id) = path?;
    let thread = visible_thread(&server, principal.as_ref(), thread_id).await?;
    let deleted = server
        .runs
        .delete_thread(&thread.thread_id)
        .await
        .map_err(|e| unavailable(&e))?;
    match deleted {
        Deleted::Deleted => Ok(StatusCode::NO_CONTENT.into_response()),
        Deleted::Busy => Err(Rejection::new(
            StatusCode::CONFLICT,
            "thread_busy",
            "a run of the thread is running: cancel it, or wait for its end",
        )),
        _ => Err(unknown_thread(&thread.thread_id)),
    }
}

/// What `POST /threads/{threadId}/fork` copies: the conversation through `messageId`, or before
/// `beforeMessageId` (an edit of that message, another answer in its place), or all of it; and
/// the fork's `title` (absent: the first prompt's line, as any thread).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ForkBody {
    message_id: Option<MessageId>,
    before_message_id: Option<MessageId>,
    title: Option<String>,
}

/// `POST /threads/{threadId}/fork`: a new thread of the caller's with the conversation of one
/// it may read up to a message, the original untouched; `201` with the fork as listed (its
/// `forkedFrom` says where it came from).
async fn fork(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, Rejection> {
    let Path(thread_id) = path?;
    let body = json_body::<ForkBody>(&server, &headers, body).await?;
    let at = match (&body.message_id, &body.before_message_id) {
        (None, None) => ForkAt::End,
        (Some(id), None) => ForkAt::Through(id),
        (None, Some(id)) => ForkAt::Before(id),
        (Some(_), Some(_)) => {
            return Err(Rejection::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_input",
                "`messageId` or `beforeMessageId`, not both",
            ));
        }
    };
    let name = match body.title {
        Some(title) => Some(checked_title(&title)?),
        None => None,
    };
    let thread = visible_thread(&server, principal.as_ref(), thread_id).await?;
    let owner = caller(principal.as_ref()).map(Principal::name);
    let fork = Fork::new(&thread.thread_id).at(at).principal(owner);
    let mut forked = server
        .runs
        .fork_thread(fork)
        .await
        .map_err(|error| match error {
            ForkError::UnknownMessage(_) => Rejection::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unknown_message",
                error.to_string(),
            )
            .field(if body.message_id.is_some() {
                "messageId"
            } else {
                "beforeMessageId"
            }),
            ForkError::Log(error) => unavailable(&error),
            _ => unknown_thread(&thread.thread_id),
        })?;
    if name.is_some() {
        let named = ThreadChange::new().name(name);
        forked = server
            .runs
            .change_thread(&forked.thread_id, &named)
            .await
            .map_err(|e| unavailable(&e))?
            .unwrap_or(forked);
    }
    Ok((StatusCode::CREATED, Json(ThreadView::from(forked))).into_response())
}

/// What `GET /threads/{threadId}` says of a thread's branches: the thread it is a fork of
/// (`forkedFrom`, absent for an original) and the caller's forks of it (`forks`, newest first,
/// at most [`MAX_PAGE`], each as `GET /threads` lists it).
pub(super) async fn branches(
    server: &Server,
    principal: Option<&Extension<Principal>>,
    thread: &ThreadId,
) -> Result<serde_json::Map<String, serde_json::Value>, Rejection> {
    let log = server.runs.run_log();
    let owner = caller(principal).map(Principal::name);
    let itself = ThreadQuery::new(1).thread(thread).archived(None);
    let forks = ThreadQuery::new(MAX_PAGE)
        .principal(owner)
        .forks_of(thread)
        .archived(None);
    let (itself, forks) =
        tokio::try_join!(log.threads(&itself), log.threads(&forks)).map_err(|e| unavailable(&e))?;
    let mut branches = serde_json::Map::new();
    if let Some(from) = itself
        .threads
        .into_iter()
        .next()
        .and_then(|t| ThreadView::from(t).forked_from)
    {
        branches.insert("forkedFrom".into(), json!(from));
    }
    let forks: Vec<ThreadView> = forks.threads.into_iter().map(ThreadView::from).collect();
    branches.insert("forks".into(), json!(forks));
    Ok(branches)
}
