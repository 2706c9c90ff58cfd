//! AG-UI over a WebSocket: `GET /ws`.
//!
//! The client sends text frames, each either a `RunAgentInput` (a run) or `{"type": "cancel"}`
//! (cancel the active run). Runs on one socket are served one at a time, in order; up to 8 inputs
//! may wait behind the active run, more closes the socket (code 1008). A message longer than the
//! server's body limit closes it with code 1009, a binary one with 1003; each close says why in its
//! reason. The server answers with one AG-UI event per text frame, and pings every keep-alive
//! interval.
//!
//! Runs over the socket go through the same engine as every other transport: they are logged,
//! can be re-joined with `GET /runs/{runId}/events`, and are refused for the same reasons. An
//! input the server refuses before any run (malformed, invalid, busy thread, taken run id) is
//! answered with a single `RUN_ERROR` frame whose `code` says why; the socket stays open. A socket
//! that closes applies the server's disconnect policy to the active run, as a dropped HTTP
//! response does: it is that run's Stop, unless the upgrade request said `Prefer: rejoin`. The
//! upgrade request's `Prefer: busy-thread=…` holds for each run of the socket. A socket opened
//! with a token that expires (a JSON Web Token's `exp`, [`TokenExpiry`]) is
//! closed when it does (code 1008), as a request with it would be refused from then on.

use std::{collections::VecDeque, sync::Arc};

use axum::{
    Extension,
    extract::{
        State, WebSocketUpgrade,
        ws::{CloseFrame, Message, WebSocket},
    },
    response::Response,
};
use futures_util::{SinkExt, StreamExt};

use super::{Prefer, Rejection, Server, TokenExpiry};
use crate::{
    agui::{
        Event,
        event::{BaseEvent, RunError},
    },
    context::Principal,
    runs::{Follow, LoggedEvent},
};

const MAX_WAITING: usize = 8;

pub(crate) async fn upgrade(
    State(server): State<Arc<Server>>,
    principal: Option<Extension<Principal>>,
    expiry: Option<Extension<TokenExpiry>>,
    headers: axum::http::HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let principal = principal.map(|Extension(principal)| principal);
    let expiry = expiry.map(|Extension(TokenExpiry(at))| at);
    let prefer = Prefer::asked(&headers);
    let mut response = upgrade
        .max_message_size(server.config.body_limit)
        .on_upgrade(move |socket| session(server, principal, expiry, prefer, socket));
    prefer.applied(&mut response);
    response
}

fn is_cancel(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .is_some_and(|v| v.get("type").and_then(|t| t.as_str()) == Some("cancel"))
}

fn frame(event: &LoggedEvent) -> Message {
    Message::Text(event.json_str().into())
}

fn refusal(rejection: &Rejection) -> Message {
    let error = Event::from(RunError {
        message: rejection.message().to_owned(),
        code: Some(rejection.code().to_owned()),
        usage: None,
        base: BaseEvent::default(),
    });
    Message::Text(
        serde_json::to_string(&error)
            .expect("events serialize")
            .into(),
    )
}

/// The close frame answering a message over the limit; `None` for any other read error (the
/// connection is gone or broke the protocol: there is no one to tell).
pub(super) fn too_long(error: axum::Error, limit: usize) -> Option<CloseFrame> {
    let error = error.into_inner().downcast::<tungstenite::Error>().ok()?;
    matches!(
        *error,
        tungstenite::Error::Capacity(tungstenite::error::CapacityError::MessageTooLong { .. })
    )
    .then(|| CloseFrame {
        code: 1009,
        reason: format!("messages are {limit} bytes at most").into(),
    })
}

async fn next_event(active: &mut Option<Follow>) -> Option<LoggedEvent> {
    match active.as_mut() {
        Some(events) => events.next().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the token that opened the socket expires (never for one that does not).
pub(super) async fn expired(at: Option<std::time::SystemTime>) {
    match at {
        Some(at) => {
            let left = at
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default();
            tokio::time::sleep(left).await;
        }
        None => std::future::pending().await,
    }
}

/// The runs of one socket, all for the principal that opened it, until its token expires.
async fn session(
    server: Arc<Server>,
    principal: Option<Principal>,
    expiry: Option<std::time::SystemTime>,
    prefer: Prefer,
    socket: WebSocket,
) {
    let (mut tx, mut rx) = socket.split();
    let expired = expired(expiry);
    tokio::pin!(expired);
    let mut waiting: VecDeque<String> = VecDeque::new();
    let mut active: Option<Follow> = None;
    let mut ping = tokio::time::interval(server.config.keep_alive);
    ping.reset();

    loop {
        if active.is_none()
            && let Some(text) = waiting.pop_front()
        {
            let begun = match server.parse_input(text.as_bytes()) {
                Ok(input) => server.begin(principal.clone(), input, prefer).await,
                Err(rejection) => Err(rejection),
            };
            match begun {
                Ok(events) => active = Some(events),
                Err(rejection) => {
                    rejection.log_refused_run();
                    if tx.send(refusal(&rejection)).await.is_err() {
                        break;
                    }
                }
            }
            continue;
        }
        tokio::select! {
            incoming = rx.next() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    if is_cancel(text.as_str()) {
                        if let Some(events) = &active {
                            // This instance drives the runs it starts: nothing to wait for.
                            if let Err(error) = server.runs.cancel(events.run_id()).await {
                                tracing::warn!(%error, "a run could not be cancelled");
                            }
                        }
                    } else if waiting.len() >= MAX_WAITING {
                        let close = CloseFrame { code: 1008, reason: "too many waiting runs".into() };
                        let _ = tx.send(Message::Close(Some(close))).await;
                        break;
                    } else {
                        waiting.push_back(text.as_str().to_owned());
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    let close = CloseFrame { code: 1003, reason: "text frames only".into() };
                    let _ = tx.send(Message::Close(Some(close))).await;
                    break;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Err(error)) => {
                    if let Some(close) = too_long(error, server.config.body_limit) {
                        let _ = tx.send(Message::Close(Some(close))).await;
                    }
                    break;
                }
                Some(Ok(Message::Close(_))) | None => break,
            },
            event = next_event(&mut active) => match event {
                Some(event) => {
                    if tx.send(frame(&event)).await.is_err() {
                        break;
                    }
                }
                None => active = None,
            },
            _ = ping.tick() => {
                if tx.send(Message::Ping(Default::default())).await.is_err() {
                    break;
                }
            }
            () = &mut expired => {
                let close = CloseFrame { code: 1008, reason: "the token expired".into() };
                let _ = tx.send(Message::Close(Some(close))).await;
                break;
            }
        }
    }
    // Dropping the active run's follower applies the disconnect policy.
    drop(active);
}
