//! `GET /schedules`, `PUT /schedules/{name}`, `DELETE /schedules/{name}` (operators): the
//! schedules of the run log, begun by the instances that run a
//! [`Scheduler`](crate::schedule::Scheduler) (`agent-tower serve` does).

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::{Path, State, rejection::PathRejection},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::{Value, json};

use super::{
    Rejection, Server,
    routes::{json_body, unavailable},
};
use crate::{
    runs::{LogError, ScheduleBook, ScheduleRecord},
    schedule::{Schedule, Scheduler, Spec},
};

pub(super) fn routes() -> Router<Arc<Server>> {
    Router::new()
        .route("/schedules", get(list))
        .route("/schedules/{name}", get(one).put(put).delete(remove))
}

fn book(server: &Server) -> Result<&dyn ScheduleBook, Rejection> {
    server.runs.run_log().schedules().ok_or_else(|| {
        Rejection::new(
            StatusCode::NOT_FOUND,
            "no_schedules",
            "this server's run log keeps no schedules",
        )
    })
}

/// Every schedule, by name.
async fn listed(server: &Server) -> Result<Vec<ScheduleRecord>, Rejection> {
    book(server)?.list().await.map_err(|e| unavailable(&e))
}

fn unknown(name: &str) -> Rejection {
    Rejection::new(
        StatusCode::NOT_FOUND,
        "unknown_schedule",
        format!("no schedule `{name}`"),
    )
}

async fn list(State(server): State<Arc<Server>>) -> Result<Response, Rejection> {
    let listed: Vec<Value> = (listed(&server).await?.iter())
        .map(ScheduleRecord::json)
        .collect();
    Ok(Json(json!({ "schedules": listed })).into_response())
}

async fn one(
    State(server): State<Arc<Server>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, Rejection> {
    let Path(name) = path?;
    let listed = listed(&server).await?;
    let found = listed
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| unknown(&name))?;
    Ok(Json(found.json()).into_response())
}

/// `PUT /schedules/{name}` with a [`Spec`]: kept (a new schedule due at its next occurrence, a
/// known one with the same spec left as it was), answered as `GET` shows it.
async fn put(
    State(server): State<Arc<Server>>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, Rejection> {
    let Path(name) = path?;
    let spec = json_body::<Spec>(&server, &headers, body).await?;
    let schedule = Schedule::new(name.clone(), spec).map_err(|error| {
        Rejection::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_schedule",
            error.to_string(),
        )
    })?;
    book(&server)?;
    Scheduler::new(server.runs.clone())
        .put(&schedule)
        .await
        .map_err(|error| match error {
            LogError::Full(why) => {
                Rejection::new(StatusCode::INSUFFICIENT_STORAGE, "log_full", why)
            }
            error => unavailable(&error),
        })?;
    tracing::info!(schedule = name, "a schedule was kept");
    one(State(server), Ok(Path(name))).await
}

async fn remove(
    State(server): State<Arc<Server>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, Rejection> {
    let Path(name) = path?;
    let removed = book(&server)?
        .remove(&name)
        .await
        .map_err(|e| unavailable(&e))?;
    if !removed {
        return Err(unknown(&name));
    }
    tracing::info!(schedule = name, "a schedule was removed");
    Ok(StatusCode::NO_CONTENT.into_response())
}
