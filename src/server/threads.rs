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
    routing::{get, patch},
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
    id::ThreadId,
    run::RunService,
    runs::{Deleted, ListChange, ThreadChange, ThreadCursor, ThreadQuery, ThreadSummary},
};

/// The threads a page lists when the client does not say.
const PAGE: usize = 20;

/// The most threads a page lists.
const MAX_PAGE: usize = 100;

/// The longest title a client may give, in characters (as the longest search).
const MAX_TITLE: usize = 200;

/// `GET /threads`, `PATCH /threads/{threadId}`, `DELETE /threads/{threadId}` (the thread itself,
/// `GET /threads/{threadId}`, is with the routes around runs).
pub(super) fn routes<A>() -> Router<Arc<Server<A>>>
where
    A: RunService,
{
    Router::new().route("/threads", get(list::<A>)).route(
        "/threads/{thread_id}",
        patch(change::<A>).delete(delete::<A>),
    )
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
}

impl From<ThreadSummary> for ThreadView {
    fn from(thread: ThreadSummary) -> Self {
        Self {
            thread_id: thread.thread_id,
            title: thread.title,
            archived: thread.archived,
            workspace: thread.workspace,
            updated_at: humantime::format_rfc3339_millis(thread.updated_at).to_string(),
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
async fn list<A>(
    State(server): State<Arc<Server<A>>>,
    principal: Option<Extension<Principal>>,
    query: Result<Query<ListQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, Rejection>
where
    A: RunService,
{
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
///   first run ended), named, archived or unarchived, or continued (it moves to the top);
/// - `THREAD_DELETED` with `threadId`;
/// - `THREADS_CHANGED`: changes may have been missed (the follower fell behind, another
///   instance's notifications were interrupted): list again.
///
/// A client opens the stream first, then lists: nothing changed between the two is missed.
fn live<A>(server: Arc<Server<A>>, owner: Option<String>) -> Response
where
    A: RunService,
{
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
async fn changed<A>(
    server: &Server<A>,
    owner: Option<&str>,
    thread_id: ThreadId,
) -> serde_json::Value
where
    A: RunService,
{
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

impl Change {
    /// The change to make, or why it is refused.
    fn checked(self) -> Result<ThreadChange, Rejection> {
        let invalid = |message: String| {
            Rejection::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_title", message)
                .field("title")
        };
        let mut change = ThreadChange::new();
        if let Some(title) = self.title {
            let title = title.map(|title| title.trim().to_owned());
            if let Some(title) = &title {
                if title.is_empty() {
                    return Err(invalid(
                        "an empty title: send `null` to use the first prompt's".into(),
                    ));
                }
                if title.chars().count() > MAX_TITLE {
                    return Err(invalid(format!(
                        "a title longer than {MAX_TITLE} characters"
                    )));
                }
                if title.chars().any(char::is_control) {
                    return Err(invalid("a title with control characters".into()));
                }
            }
            change = change.name(title);
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
async fn change<A>(
    State(server): State<Arc<Server<A>>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, Rejection>
where
    A: RunService,
{
    let Path(thread_id) = path?;
    let change = json_body::<A, Change>(&server, &headers, body)
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
async fn delete<A>(
    State(server): State<Arc<Server<A>>>,
    principal: Option<Extension<Principal>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, Rejection>
where
    A: RunService,
{
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
