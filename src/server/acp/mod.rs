//! The ACP door: editors across the network at `/acp`, both bindings of ACP's remote transport:
//! a WebSocket (`GET` with `Upgrade: websocket`, answered with an `Acp-Connection-Id`; each text
//! frame one JSON-RPC message, binary frames ignored) and Streamable HTTP (`POST`, `GET` streams,
//! `DELETE`: see `http`). The messages are those an editor speaks to `agent-tower acp` on its
//! stdio.
//!
//! A connection is an [`AcpAgent`] on the server's engine, for the principal that opened it:
//! its sessions are that principal's threads (another principal's session is unknown, as its
//! thread is on every route), each `session/prompt` is one of its runs, begun, limited, logged,
//! cancelled and continued after a crash as every run is, and what the editor is shown of a turn
//! is read from the log (an editor sees a turn to its end whichever instance runs it). An
//! approval the run waits for is asked as `session/request_permission`, and the run goes on
//! with the answer; when the connection goes first, the approval waits on the thread, for any
//! door. A dropped connection does not stop its turns. The MCP servers an editor names are on
//! its own machine: they are not started here.
//!
//! The same Origin and Host checks, token and limits hold as on every route: the upgrade is
//! refused before any message; a socket whose token expires is closed (code 1008); a message
//! longer than the server's body limit closes it (code 1009). The server pings a quiet socket
//! every keep-alive interval.

use std::{sync::Arc, time::SystemTime};

mod http;

use axum::{
    Extension,
    extract::{
        State, WebSocketUpgrade,
        ws::{CloseFrame, Message, WebSocket, rejection::WebSocketUpgradeRejection},
    },
    http::{HeaderMap, HeaderValue},
    response::Response,
    routing::{MethodRouter, get},
};
use futures_util::{SinkExt, StreamExt};
use tokio_util::sync::PollSender;

use super::{
    Server, TokenExpiry,
    ws::{expired, too_long},
};
use crate::{
    acp::{AcpAgent, Inbox},
    context::Principal,
    id::RunId,
};

/// The header that names the connection: on the answer to the upgrade or to `initialize`, and on
/// every later request of the HTTP binding.
const CONNECTION_HEADER: &str = "acp-connection-id";

/// How many frames may wait for the socket; the agent's updates wait for room beyond that.
const QUEUED_FRAMES: usize = 64;

/// The `/acp` route: the WebSocket upgrade and the HTTP binding's methods, with the binding's
/// open connections.
pub(crate) fn route() -> MethodRouter<Arc<Server>> {
    get(open)
        .post(http::post)
        .delete(http::delete)
        .layer(Extension(Arc::new(http::Connections::default())))
}

/// `GET /acp`: a WebSocket (`Upgrade: websocket`), else a stream of the HTTP binding.
async fn open(
    State(server): State<Arc<Server>>,
    Extension(connections): Extension<Arc<http::Connections>>,
    principal: Option<Extension<Principal>>,
    expiry: Option<Extension<TokenExpiry>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let principal = principal.map(|Extension(principal)| principal);
    let Ok(upgrade) = upgrade else {
        let keep_alive = server.config.keep_alive;
        return http::stream(&connections, principal.as_ref(), &headers, keep_alive);
    };
    let expiry = expiry.map(|Extension(TokenExpiry(at))| at);
    let id = RunId::new();
    tracing::debug!(connection = %id, "an editor connects over ACP (WebSocket)");
    let mut response = upgrade
        .max_message_size(server.config.body_limit)
        .on_upgrade(move |socket| connection(server, principal, expiry, socket));
    if let Ok(id) = HeaderValue::from_str(id.as_ref()) {
        response.headers_mut().insert(CONNECTION_HEADER, id);
    }
    response
}

/// The agent of a connection of `principal`: an [`AcpAgent`] for a remote editor on the
/// server's engine, named after its identity.
fn agent_of(server: &Server, principal: Option<Principal>) -> AcpAgent {
    let mut agent = AcpAgent::runs(server.runs.clone()).remote();
    if let Some(identity) = &server.config.capabilities.identity {
        let name = identity.name.as_deref().unwrap_or("agent-tower");
        let version = identity
            .version
            .as_deref()
            .unwrap_or(env!("CARGO_PKG_VERSION"));
        agent = agent.info(name, version, name);
    }
    match principal {
        Some(principal) => agent.principal(principal),
        None => agent,
    }
}

/// One editor's connection, until it closes or its token expires.
async fn connection(
    server: Arc<Server>,
    principal: Option<Principal>,
    expiry: Option<SystemTime>,
    socket: WebSocket,
) {
    let (mut to_client, mut from_client) = socket.split();
    let (frames, mut queued) = tokio::sync::mpsc::channel::<Message>(QUEUED_FRAMES);
    let outgoing = PollSender::new(frames.clone())
        .sink_map_err(std::io::Error::other)
        .with(|text: String| {
            std::future::ready(Ok::<_, std::io::Error>(Message::Text(text.into())))
        });
    let agent = agent_of(&server, principal);
    let limit = server.config.body_limit;
    let read = move |inbox: Inbox| async move {
        let expired = expired(expiry);
        tokio::pin!(expired);
        loop {
            tokio::select! {
                message = from_client.next() => match message {
                    Some(Ok(Message::Text(text))) => {
                        if !inbox.message(text.as_bytes()).await {
                            break;
                        }
                    }
                    // The transport ignores binary frames; the socket answers pings itself.
                    Some(Ok(Message::Binary(_) | Message::Ping(_) | Message::Pong(_))) => {}
                    Some(Err(error)) => {
                        if let Some(close) = too_long(error, limit) {
                            let _ = frames.send(Message::Close(Some(close))).await;
                        }
                        break;
                    }
                    Some(Ok(Message::Close(_))) | None => break,
                },
                () = &mut expired => {
                    let close = CloseFrame { code: 1008, reason: "the token expired".into() };
                    let _ = frames.send(Message::Close(Some(close))).await;
                    break;
                }
            }
        }
        Ok(())
    };
    let keep_alive = server.config.keep_alive;
    let write = async move {
        let mut ping = tokio::time::interval(keep_alive);
        ping.reset();
        loop {
            let frame = tokio::select! {
                frame = queued.recv() => match frame {
                    Some(frame) => frame,
                    None => break,
                },
                _ = ping.tick() => Message::Ping(Default::default()),
            };
            let closing = matches!(frame, Message::Close(_));
            if to_client.send(frame).await.is_err() || closing {
                break;
            }
        }
        let _ = to_client.close().await;
    };
    let (served, ()) = tokio::join!(agent.serve_messages(read, outgoing), write);
    if let Err(error) = served {
        tracing::debug!(%error, "an ACP connection ended");
    }
}
