//! The two bindings of the A2A door, answering the same: JSON-RPC 2.0 (`POST /a2a`) and
//! HTTP+JSON (`/a2a/message:send`, `/a2a/tasks/{id}`, …); and the Agent Card.

use std::sync::Arc;

use a2a_types::{
    A2AError, CancelTaskRequest, GetTaskRequest, JsonRpcId, JsonRpcRequest, JsonRpcResponse,
    ListTasksRequest, SendMessageRequest, SubscribeToTaskRequest, TaskState, error_code, methods,
};
use axum::{
    Extension, Json, Router,
    body::Bytes,
    extract::{DefaultBodyLimit, Path, Query, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response, Sse, sse},
    routing::{get, post},
};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{A2aDoor, PATH, Updates, card};
use crate::{agui::capabilities::Identity, context::Principal, runs::Runs};

type Door = State<Arc<A2aDoor>>;
type Caller = Option<Extension<Principal>>;

/// The Agent Card and both bindings, for `runs`.
pub(crate) fn routes<S>(
    runs: Runs,
    identity: Option<&Identity>,
    authenticated: bool,
    body_limit: usize,
) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let door = Arc::new(A2aDoor::new(runs, identity, authenticated));
    Router::new()
        .route("/.well-known/agent-card.json", get(agent_card))
        .route(PATH, post(json_rpc))
        .route(&format!("{PATH}/message:send"), post(send))
        .route(&format!("{PATH}/message:stream"), post(stream))
        .route(&format!("{PATH}/tasks"), get(list))
        .route(&format!("{PATH}/tasks/{{task}}"), get(get_task).post(act))
        .route(
            &format!("{PATH}/tasks/{{task}}/pushNotificationConfigs"),
            get(no_push).post(no_push),
        )
        .route(
            &format!("{PATH}/tasks/{{task}}/pushNotificationConfigs/{{config}}"),
            get(no_push).delete(no_push),
        )
        .route(&format!("{PATH}/extendedAgentCard"), get(no_extended_card))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(door)
}

async fn agent_card(State(door): Door, headers: HeaderMap) -> Response {
    let card = card::card(&door.identity, &card::base(&headers), door.authenticated);
    Json(card).into_response()
}

/// The A2A version a request asks for, if this server speaks it (`A2A-Version`; 1.0 when
/// absent).
fn version(headers: &HeaderMap) -> Result<(), A2AError> {
    match headers
        .get(a2a_types::SVC_PARAM_VERSION)
        .map(|v| v.to_str())
    {
        None => Ok(()),
        Some(Ok("1.0" | "1")) => Ok(()),
        Some(Ok(asked)) => Err(A2AError::version_not_supported(asked)),
        Some(Err(_)) => Err(A2AError::version_not_supported("(not text)")),
    }
}

/// Refused unless the body is declared JSON (`application/json` or `application/a2a+json`): a
/// page may send other types to any site without asking first.
fn json_declared(headers: &HeaderMap) -> Result<(), A2AError> {
    let declared = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    if matches!(
        declared.as_deref(),
        Some("application/json" | "application/a2a+json")
    ) {
        Ok(())
    } else {
        Err(super::saying(
            A2AError::content_type_not_supported(),
            "the body must be `application/json` or `application/a2a+json`",
        ))
    }
}

// --- JSON-RPC ----------------------------------------------------------------------------------

async fn json_rpc(State(door): Door, caller: Caller, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(refused) = json_declared(&headers) {
        return rpc_error(JsonRpcId::Null, &refused);
    }
    let caller = caller.map(|Extension(p)| p);
    let request: JsonRpcRequest = match serde_json::from_slice::<Value>(&body) {
        Err(error) => {
            return rpc_error(JsonRpcId::Null, &A2AError::parse_error(error.to_string()));
        }
        Ok(value) => match serde_json::from_value(value) {
            Ok(request) => request,
            Err(error) => {
                return rpc_error(
                    JsonRpcId::Null,
                    &A2AError::invalid_request(error.to_string()),
                );
            }
        },
    };
    let id = request.id.clone();
    if request.jsonrpc != "2.0" {
        return rpc_error(id, &A2AError::invalid_request("jsonrpc must be \"2.0\""));
    }
    if let Err(error) = version(&headers) {
        return rpc_error(id, &error);
    }
    let params = request.params.unwrap_or(Value::Null);
    match dispatch(&door, caller, &request.method, params).await {
        Ok(Answer::One(result)) => Json(JsonRpcResponse::success(id, result)).into_response(),
        Ok(Answer::Stream(updates)) => {
            let events = updates.map(move |update| {
                let framed = JsonRpcResponse::success(id.clone(), to_value(&update));
                Ok::<_, std::convert::Infallible>(sse_event(&framed))
            });
            sse(events)
        }
        Err(error) => rpc_error(id, &error),
    }
}

/// What a method answers: one result, or a stream of updates.
enum Answer {
    One(Value),
    Stream(Updates),
}

async fn dispatch(
    door: &A2aDoor,
    caller: Option<Principal>,
    method: &str,
    params: Value,
) -> Result<Answer, A2AError> {
    fn parse<T: for<'de> Deserialize<'de>>(params: Value) -> Result<T, A2AError> {
        serde_path_to_error::deserialize(params).map_err(|error| {
            A2AError::invalid_params(format!("params.{}: {}", error.path(), error.inner()))
        })
    }
    Ok(match method {
        methods::SEND_MESSAGE => {
            let request: SendMessageRequest = parse(params)?;
            Answer::One(to_value(&door.send_message(caller, request).await?))
        }
        methods::SEND_STREAMING_MESSAGE => {
            Answer::Stream(door.stream_message(caller, parse(params)?).await?)
        }
        methods::GET_TASK => {
            let request: GetTaskRequest = parse(params)?;
            let task = door
                .get_task(caller, &request.id, request.history_length)
                .await?;
            Answer::One(to_value(&task))
        }
        methods::LIST_TASKS => {
            let request: ListTasksRequest = parse(params)?;
            Answer::One(to_value(&door.list_tasks(caller, request).await?))
        }
        methods::CANCEL_TASK => {
            let request: CancelTaskRequest = parse(params)?;
            Answer::One(to_value(&door.cancel_task(caller, &request.id).await?))
        }
        methods::SUBSCRIBE_TO_TASK => {
            let request: SubscribeToTaskRequest = parse(params)?;
            Answer::Stream(door.subscribe(caller, &request.id).await?)
        }
        methods::CREATE_PUSH_CONFIG
        | methods::GET_PUSH_CONFIG
        | methods::LIST_PUSH_CONFIGS
        | methods::DELETE_PUSH_CONFIG => return Err(A2AError::push_notification_not_supported()),
        methods::GET_EXTENDED_AGENT_CARD => {
            return Err(A2AError::unsupported_operation(
                "this agent has no extended card",
            ));
        }
        other => return Err(A2AError::method_not_found(other)),
    })
}

fn rpc_error(id: JsonRpcId, error: &A2AError) -> Response {
    Json(JsonRpcResponse::error(id, error.to_jsonrpc_error())).into_response()
}

// --- HTTP+JSON ---------------------------------------------------------------------------------

/// `POST /a2a/message:send`.
async fn send(State(door): Door, caller: Caller, headers: HeaderMap, body: Bytes) -> Response {
    let answer = async {
        let request = rest_request(&headers, &body)?;
        door.send_message(caller.map(|Extension(p)| p), request)
            .await
    };
    rest(answer.await.map(|response| to_value(&response)))
}

/// `POST /a2a/message:stream`.
async fn stream(State(door): Door, caller: Caller, headers: HeaderMap, body: Bytes) -> Response {
    let answer = async {
        let request = rest_request(&headers, &body)?;
        door.stream_message(caller.map(|Extension(p)| p), request)
            .await
    };
    rest_stream(answer.await)
}

/// `GET /a2a/tasks/{id}?historyLength=N`.
async fn get_task(
    State(door): Door,
    caller: Caller,
    headers: HeaderMap,
    Path(task): Path<String>,
    Query(query): Query<TaskQuery>,
) -> Response {
    let answer = async {
        version(&headers)?;
        let caller = caller.map(|Extension(p)| p);
        door.get_task(caller, &task, query.history_length).await
    };
    rest(answer.await.map(|task| to_value(&task)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TaskQuery {
    history_length: Option<i32>,
    #[allow(dead_code, reason = "taken, not used: this server is one tenant")]
    tenant: Option<String>,
}

/// `POST /a2a/tasks/{id}:cancel` and `POST /a2a/tasks/{id}:subscribe`.
async fn act(
    State(door): Door,
    caller: Caller,
    headers: HeaderMap,
    Path(action): Path<String>,
) -> Response {
    let caller = caller.map(|Extension(p)| p);
    if let Err(error) = version(&headers) {
        return rest(Err(error));
    }
    match action.rsplit_once(':') {
        Some((task, "cancel")) => rest(
            door.cancel_task(caller, task)
                .await
                .map(|task| to_value(&task)),
        ),
        Some((task, "subscribe")) => rest_stream(door.subscribe(caller, task).await),
        _ => rest(Err(A2AError::method_not_found(&format!(
            "POST {PATH}/tasks/{action}"
        )))),
    }
}

/// `GET /a2a/tasks?contextId=…&status=…&pageSize=…&pageToken=…&historyLength=…&…`.
async fn list(
    State(door): Door,
    caller: Caller,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    let answer = async {
        version(&headers)?;
        let status = query
            .status
            .map(|state| serde_json::from_value::<TaskState>(Value::String(state)))
            .transpose()
            .map_err(|error| A2AError::invalid_params(format!("status: {error}")))?;
        let changed_after = query
            .status_timestamp_after
            .map(|time| chrono::DateTime::parse_from_rfc3339(&time))
            .transpose()
            .map_err(|error| A2AError::invalid_params(format!("statusTimestampAfter: {error}")))?;
        let request = ListTasksRequest {
            context_id: query.context_id,
            status,
            page_size: query.page_size,
            page_token: query.page_token,
            history_length: query.history_length,
            status_timestamp_after: changed_after.map(|time| time.to_utc()),
            include_artifacts: query.include_artifacts,
            tenant: None,
        };
        door.list_tasks(caller.map(|Extension(p)| p), request).await
    };
    rest(answer.await.map(|page| to_value(&page)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListQuery {
    context_id: Option<String>,
    status: Option<String>,
    page_size: Option<i32>,
    page_token: Option<String>,
    history_length: Option<i32>,
    status_timestamp_after: Option<String>,
    include_artifacts: Option<bool>,
    #[allow(dead_code, reason = "taken, not used: this server is one tenant")]
    tenant: Option<String>,
}

async fn no_push() -> Response {
    rest(Err(A2AError::push_notification_not_supported()))
}

async fn no_extended_card() -> Response {
    rest(Err(A2AError::unsupported_operation(
        "this agent has no extended card",
    )))
}

/// A `SendMessageRequest` body, checked.
fn rest_request(headers: &HeaderMap, body: &[u8]) -> Result<SendMessageRequest, A2AError> {
    json_declared(headers)?;
    version(headers)?;
    let value: Value =
        serde_json::from_slice(body).map_err(|e| A2AError::parse_error(e.to_string()))?;
    serde_path_to_error::deserialize(value)
        .map_err(|e| A2AError::invalid_params(format!("{}: {}", e.path(), e.inner())))
}

fn rest(answer: Result<Value, A2AError>) -> Response {
    match answer {
        Ok(value) => (
            [(header::CONTENT_TYPE, "application/a2a+json")],
            value.to_string(),
        )
            .into_response(),
        Err(error) => rest_error(&error),
    }
}

fn rest_stream(answer: Result<Updates, A2AError>) -> Response {
    match answer {
        Ok(updates) => {
            sse(updates.map(|update| Ok::<_, std::convert::Infallible>(sse_event(&update))))
        }
        Err(error) => rest_error(&error),
    }
}

/// The HTTP answer of `error`: its status, and a `google.rpc.Status` body whose details name the
/// A2A error.
fn rest_error(error: &A2AError) -> Response {
    let status =
        StatusCode::from_u16(error.http_status_code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let name = match (error.code, status.as_u16()) {
        (error_code::TASK_NOT_FOUND, _) => "NOT_FOUND",
        (error_code::INVALID_PARAMS | error_code::PARSE_ERROR | error_code::INVALID_REQUEST, _)
        | (error_code::CONTENT_TYPE_NOT_SUPPORTED, _) => "INVALID_ARGUMENT",
        (error_code::METHOD_NOT_FOUND, _) => "UNIMPLEMENTED",
        (_, 400) => "FAILED_PRECONDITION",
        _ => "INTERNAL",
    };
    let details = error
        .to_jsonrpc_error()
        .data
        .unwrap_or(Value::Array(Vec::new()));
    let body = json!({
        "error": {
            "code": status.as_u16(),
            "status": name,
            "message": error.message,
            "details": details,
        }
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/a2a+json")],
        body.to_string(),
    )
        .into_response()
}

// --- Both --------------------------------------------------------------------------------------

fn to_value(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn sse_event(value: &impl serde::Serialize) -> sse::Event {
    sse::Event::default().data(to_value(value).to_string())
}

/// An SSE response of `events`, with a keep-alive comment while the task is quiet.
fn sse(
    events: impl futures_core::Stream<Item = Result<sse::Event, std::convert::Infallible>>
    + Send
    + 'static,
) -> Response {
    Sse::new(events)
        .keep_alive(sse::KeepAlive::new().interval(std::time::Duration::from_secs(15)))
        .into_response()
}
