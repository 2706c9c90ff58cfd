//! ACP's Streamable HTTP binding at `/acp`: `POST` carries the client's messages (`initialize`
//! opens a connection and is answered `200` with its `Acp-Connection-Id`; every later message is
//! answered `202`, its answer coming on a stream), `GET` with `Acp-Connection-Id` opens the
//! connection's stream of what the agent sends (SSE), and with `Acp-Session-Id` too a session's
//! stream; `DELETE` ends the connection.
//!
//! What the agent sends goes to the stream of the session it is about (a notification or request
//! whose `params.sessionId` names one, the answer to a request the client made about one) when the
//! client opened that stream before the session's first message, else to the connection's stream
//! (where a client learns of a session and opens its stream), for good: a session's messages come
//! in order on one stream. Each queue is bounded, and a full one holds the agent back.
//! An update read from the log is an SSE event whose `id:` is its cursor (`_meta["acp/cursor"]`).
//! A connection is its opener's: another principal's id is unknown (`404`). A connection nobody
//! reads nor writes to for [`IDLE`] is ended.

use std::{
    collections::HashMap,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    task::{Context, Poll},
    time::{Duration, Instant},
};

use axum::{
    Extension,
    body::Bytes,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode},
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures_core::Stream;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, PollSender};

use super::{CONNECTION_HEADER, Server, agent_of};
use crate::{acp::Inbox, context::Principal, id::RunId};

/// The header that names the session a stream (or a message) is about.
const SESSION_HEADER: &str = "acp-session-id";

/// How many connections the server keeps open at once.
const MAX_CONNECTIONS: usize = 1024;

/// How many session streams one connection has at most.
const MAX_SESSION_STREAMS: usize = 64;

/// How many messages wait in one stream's queue (or in a connection's inbox).
const QUEUED: usize = 256;

/// How long a connection nobody reads nor writes to is kept.
const IDLE: Duration = Duration::from_secs(300);

/// How long `initialize` may take to be answered.
const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(30);

/// The open connections of the HTTP binding.
#[derive(Default)]
pub(crate) struct Connections(Mutex<HashMap<String, Arc<Connection>>>);

impl Connections {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Connection>>> {
        locked(&self.0)
    }

    /// The connection `headers` name, if it is `principal`'s.
    fn of(&self, headers: &HeaderMap, principal: Option<&Principal>) -> Option<Arc<Connection>> {
        let id = headers.get(CONNECTION_HEADER)?.to_str().ok()?;
        let connection = self.lock().get(id).cloned()?;
        (connection.principal.as_deref() == principal.map(Principal::name)).then(|| {
            connection.touch();
            connection
        })
    }

    fn end(&self, id: &str) {
        if let Some(connection) = self.lock().remove(id) {
            connection.closed.cancel();
        }
    }
}

/// One client's connection: the agent it talks to, and where the agent's messages go.
struct Connection {
    id: String,
    principal: Option<String>,
    inbox: mpsc::Sender<String>,
    routes: Mutex<Routes>,
    closed: CancellationToken,
    touched: Mutex<Instant>,
}

impl Connection {
    fn routes(&self) -> MutexGuard<'_, Routes> {
        locked(&self.routes)
    }

    fn touch(&self) {
        *locked(&self.touched) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        locked(&self.touched).elapsed()
    }
}

/// Where the agent's messages go.
struct Routes {
    connection: Outlet,
    sessions: HashMap<String, Outlet>,
    /// The stream each session's messages go to, chosen at its first: its own when the client
    /// had opened it (`true`), else the connection's, for good, so that they arrive in order.
    chosen: HashMap<String, bool>,
    /// The client's requests about a session, by id: their answers go to its stream.
    asked: HashMap<String, String>,
    /// The `initialize` request waiting for its answer, by id.
    initialize: Option<(String, oneshot::Sender<String>)>,
}

/// A message of the agent on its way to a stream: its JSON, and its cursor when it has one (the
/// SSE event's id).
struct Outgoing {
    json: String,
    cursor: Option<String>,
}

/// One stream's queue; its receiving end is the open stream's while one is open.
struct Outlet {
    sender: mpsc::Sender<Outgoing>,
    receiver: Arc<Mutex<Option<mpsc::Receiver<Outgoing>>>>,
}

impl Outlet {
    fn new() -> Self {
        let (sender, receiver) = mpsc::channel(QUEUED);
        Self {
            sender,
            receiver: Arc::new(Mutex::new(Some(receiver))),
        }
    }

    /// The stream of its messages, unless one is open already; the queue is given back when
    /// that stream is dropped, for the client's next one.
    fn open(&self) -> Option<Outflow> {
        let receiver = locked(&self.receiver).take()?;
        Some(Outflow {
            receiver: Some(receiver),
            slot: Arc::clone(&self.receiver),
        })
    }

    fn is_open(&self) -> bool {
        locked(&self.receiver).is_none()
    }
}

/// An open stream's messages.
struct Outflow {
    receiver: Option<mpsc::Receiver<Outgoing>>,
    slot: Arc<Mutex<Option<mpsc::Receiver<Outgoing>>>>,
}

impl Stream for Outflow {
    type Item = Outgoing;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Outgoing>> {
        match self.receiver.as_mut() {
            Some(receiver) => receiver.poll_recv(cx),
            None => Poll::Ready(None),
        }
    }
}

impl Drop for Outflow {
    fn drop(&mut self) {
        if let Some(receiver) = self.receiver.take() {
            *locked(&self.slot) = Some(receiver);
        }
    }
}

/// `mutex`'s value, whatever a panic left in it (each lock here holds for one map operation).
fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A JSON-RPC id as a key (its JSON text).
fn key(id: &Value) -> String {
    id.to_string()
}

/// The session a message is about (`params.sessionId`).
fn session_of(message: &Value) -> Option<&str> {
    message.get("params")?.get("sessionId")?.as_str()
}

/// `POST /acp`.
pub(crate) async fn post(
    State(server): State<Arc<Server>>,
    Extension(connections): Extension<Arc<Connections>>,
    principal: Option<Extension<Principal>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let principal = principal.map(|Extension(principal)| principal);
    if body.len() > server.config.body_limit {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            "the message is over the body limit",
        );
    }
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "the body is not JSON",
        );
    };
    if message.is_array() {
        return refuse(
            StatusCode::NOT_IMPLEMENTED,
            "batch",
            "ACP takes no JSON-RPC batches",
        );
    }
    let Ok(text) = String::from_utf8(body.to_vec()) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "the body is not UTF-8",
        );
    };
    if !headers.contains_key(CONNECTION_HEADER) {
        return open(&server, &connections, principal, &message, text).await;
    }
    let Some(connection) = connections.of(&headers, principal.as_ref()) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "unknown_connection",
            "no such connection",
        );
    };
    if let (Some(id), Some(_), Some(session)) = (
        message.get("id"),
        message.get("method"),
        session_of(&message),
    ) {
        connection
            .routes()
            .asked
            .insert(key(id), session.to_owned());
    }
    if connection.inbox.send(text).await.is_err() {
        return refuse(
            StatusCode::NOT_FOUND,
            "unknown_connection",
            "the connection ended",
        );
    }
    StatusCode::ACCEPTED.into_response()
}

/// `initialize` without a connection: opens one for `principal`, runs its agent, and answers
/// with the agent's answer and the connection's id.
async fn open(
    server: &Arc<Server>,
    connections: &Arc<Connections>,
    principal: Option<Principal>,
    message: &Value,
    text: String,
) -> Response {
    let (Some(id), Some("initialize")) = (
        message.get("id"),
        message.get("method").and_then(Value::as_str),
    ) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "no_connection",
            "the first message of a connection is `initialize`, without Acp-Connection-Id",
        );
    };
    if connections.lock().len() >= MAX_CONNECTIONS {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_connections",
            "too many ACP connections",
        );
    }
    let (answered, answer) = oneshot::channel();
    let (inbox, mut posted) = mpsc::channel::<String>(QUEUED);
    let connection = Arc::new(Connection {
        id: RunId::new().to_string(),
        principal: principal.as_ref().map(|p| p.name().to_owned()),
        inbox,
        routes: Mutex::new(Routes {
            connection: Outlet::new(),
            sessions: HashMap::new(),
            chosen: HashMap::new(),
            asked: HashMap::new(),
            initialize: Some((key(id), answered)),
        }),
        closed: CancellationToken::new(),
        touched: Mutex::new(Instant::now()),
    });
    connections
        .lock()
        .insert(connection.id.clone(), Arc::clone(&connection));
    tracing::debug!(connection = %connection.id, "an editor connects over ACP (HTTP)");

    let (sent, mut outgoing) = mpsc::channel::<String>(QUEUED);
    let closed = connection.closed.clone();
    let read = move |inbox: Inbox| async move {
        loop {
            let message = tokio::select! {
                message = posted.recv() => message,
                () = closed.cancelled() => None,
            };
            match message {
                Some(message) if inbox.message(message.as_bytes()).await => {}
                _ => return Ok(()),
            }
        }
    };
    let agent = agent_of(server, principal);
    let sink = PollSender::new(sent).sink_map_err(std::io::Error::other);
    let ended = Arc::clone(connections);
    let served = Arc::clone(&connection);
    tokio::spawn(async move {
        if let Err(error) = agent.serve_messages(read, sink).await {
            tracing::debug!(%error, "an ACP connection ended");
        }
        ended.end(&served.id);
    });
    let routed = Arc::clone(&connection);
    tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            route(&routed, message).await;
        }
    });
    let idle = Arc::clone(&connection);
    let expired = Arc::clone(connections);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(IDLE) => {}
                () = idle.closed.cancelled() => return,
            }
            let reading = idle.routes().connection.is_open();
            if !reading && idle.idle_for() >= IDLE {
                tracing::debug!(connection = %idle.id, "an idle ACP connection is ended");
                expired.end(&idle.id);
                return;
            }
        }
    });

    if connection.inbox.send(text).await.is_err() {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the agent did not start",
        );
    }
    match tokio::time::timeout(INITIALIZE_TIMEOUT, answer).await {
        Ok(Ok(answer)) => {
            let mut response = (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                answer,
            )
                .into_response();
            if let Ok(id) = HeaderValue::from_str(&connection.id) {
                response.headers_mut().insert(CONNECTION_HEADER, id);
            }
            response
        }
        _ => {
            connections.end(&connection.id);
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "`initialize` was not answered",
            )
        }
    }
}

/// Sends `message` of the agent where it goes: the answer to `initialize` to its request, a
/// session's to that session's stream ([`Routes::stream_of`]), the rest to the connection's;
/// waits while that queue is full.
async fn route(connection: &Connection, message: String) {
    let Ok(value) = serde_json::from_str::<Value>(&message) else {
        return;
    };
    let answer_to = value
        .get("id")
        .filter(|_| value.get("method").is_none())
        .map(key);
    let sender = {
        let mut routes = connection.routes();
        if let Some(id) = &answer_to
            && routes
                .initialize
                .as_ref()
                .is_some_and(|(initialize, _)| initialize == id)
        {
            if let Some((_, answered)) = routes.initialize.take() {
                let _ = answered.send(message);
            }
            return;
        }
        let session = match &answer_to {
            Some(id) => routes.asked.remove(id),
            None => session_of(&value).map(str::to_owned),
        };
        match session.and_then(|session| routes.stream_of(session)) {
            Some(outlet) => outlet.sender.clone(),
            None => routes.connection.sender.clone(),
        }
    };
    let cursor = value
        .pointer("/params/_meta/acp~1cursor")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let outgoing = Outgoing {
        json: message,
        cursor,
    };
    if sender.send(outgoing).await.is_err() {
        tracing::debug!("an ACP stream's queue is gone");
    }
}

impl Routes {
    /// The stream of `session` its messages go to, `None` for the connection's: a session's own
    /// when the client had opened it before the session's first message (a client that learns
    /// of a session from the connection's stream opens its stream later: its messages stay on
    /// the connection's, in order), and while it is open (a client reopens a closed one when it
    /// next sees the session).
    fn stream_of(&mut self, session: String) -> Option<&Outlet> {
        let open = self.sessions.get(&session).is_some_and(Outlet::is_open);
        let own = match self.chosen.get(&session) {
            Some(own) => *own,
            None if self.chosen.len() < MAX_CHOSEN => {
                *self.chosen.entry(session.clone()).or_insert(open)
            }
            None => false,
        };
        if own && open {
            self.sessions.get(&session)
        } else {
            None
        }
    }

    /// The outlet of `session`'s stream, made when it has none; `None` past
    /// [`MAX_SESSION_STREAMS`].
    fn session_stream(&mut self, session: String) -> Option<&Outlet> {
        if !self.sessions.contains_key(&session) && self.sessions.len() >= MAX_SESSION_STREAMS {
            return None;
        }
        Some(self.sessions.entry(session).or_insert_with(Outlet::new))
    }
}

/// How many sessions' streams one connection remembers choosing (past it, the connection's).
const MAX_CHOSEN: usize = 1024;

/// `GET /acp` without an upgrade: the connection's stream, or a session's with
/// `Acp-Session-Id`.
pub(super) fn stream(
    connections: &Connections,
    principal: Option<&Principal>,
    headers: &HeaderMap,
    keep_alive: Duration,
) -> Response {
    if !headers.contains_key(CONNECTION_HEADER) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "no_connection",
            "a stream needs Acp-Connection-Id (or Upgrade: websocket)",
        );
    }
    let Some(connection) = connections.of(headers, principal) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "unknown_connection",
            "no such connection",
        );
    };
    let session = headers
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let outflow = {
        let mut routes = connection.routes();
        let outlet = match session {
            Some(session) => routes.session_stream(session),
            None => Some(&routes.connection),
        };
        let Some(outlet) = outlet else {
            return refuse(
                StatusCode::CONFLICT,
                "too_many_streams",
                "this connection has as many session streams as it may",
            );
        };
        outlet.open()
    };
    let Some(outflow) = outflow else {
        return refuse(
            StatusCode::CONFLICT,
            "stream_open",
            "this stream is open already",
        );
    };
    let closed = connection.closed.clone();
    let events = outflow
        .take_until(async move { closed.cancelled().await })
        .map(|outgoing| {
            let event = Event::default().data(outgoing.json);
            Ok::<_, std::convert::Infallible>(match outgoing.cursor {
                Some(cursor) => event.id(cursor),
                None => event,
            })
        });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response()
}

/// `DELETE /acp`: ends the connection `Acp-Connection-Id` names.
pub(crate) async fn delete(
    Extension(connections): Extension<Arc<Connections>>,
    principal: Option<Extension<Principal>>,
    headers: HeaderMap,
) -> Response {
    let principal = principal.map(|Extension(principal)| principal);
    match connections.of(&headers, principal.as_ref()) {
        Some(connection) => {
            connections.end(&connection.id);
            StatusCode::ACCEPTED.into_response()
        }
        None => refuse(
            StatusCode::NOT_FOUND,
            "unknown_connection",
            "no such connection",
        ),
    }
}

/// A refusal, as every route refuses (`{"error": {"code", "message"}}`).
fn refuse(status: StatusCode, code: &'static str, why: &str) -> Response {
    super::super::Rejection::new(status, code, why).into_response()
}
