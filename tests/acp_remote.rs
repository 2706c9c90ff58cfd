//! `agent-tower serve`'s `/acp`: editors across the network over ACP's WebSocket binding. The
//! official TypeScript ACP client (`@agentclientprotocol/sdk`'s WebSocket transport) drives it
//! as two principals (`tests/conformance/acp-remote.mjs`): a streamed turn, an approval asked as
//! a permission (allowed, rejected), a cancel, the turns as runs of the thread over HTTP, a second
//! connection that loads the session, a turn that outlives its connection and is joined to its
//! end by the next, a turn read across 20 cut connections (every update once), another principal
//! kept out. Here too: the upgrade refused
//! without a token or from a foreign origin, and a malformed message answered with its id.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest, http::StatusCode};

use crate::support::{
    self,
    process::{ALICE, BOB, Process},
    stores,
};

/// Every scenario's line.
const SCENARIOS: usize = 9;

#[tokio::test]
async fn the_official_client_works_over_a_websocket() {
    let server = Process::serve_for_alice_and_bob(&stores::sqlite("acp-remote"), &[]).await;
    let _logs = server.logs_on_failure();
    let out = support::node("acp-remote.mjs", &[&server.base, ALICE, BOB], None).await;
    println!("{out}");
    let passed = out.lines().filter(|l| l.starts_with("ok - ")).count();
    assert_eq!(passed, SCENARIOS, "{out}");
}

/// kill -9 of the instance under an editor's turn (on PostgreSQL, else SQLite): the editor
/// connects to the other instance, loads the session and reads the turn, continued there, to its
/// end (`tests/conformance/acp-remote-takeover.mjs`).
#[tokio::test]
async fn a_turn_survives_a_kill_of_its_instance() {
    let store = match stores::postgres("acp-takeover").await {
        Some(url) => url,
        None => stores::sqlite("acp-takeover"),
    };
    let (first, second) = Process::rolling_pair(&store, &[]).await;
    let _logs = second.logs_on_failure();
    let pid = first.pid().to_string();
    let out = support::node(
        "acp-remote-takeover.mjs",
        &[&first.base, &second.base, &pid],
        None,
    )
    .await;
    println!("{out}");
    assert!(out.contains("acp-remote-takeover: passed"), "{out}");
}

/// The upgrade request to `/acp` of `server`, with `token` and `origin` when given.
fn upgrade(
    server: &Process,
    token: Option<&str>,
    origin: Option<&str>,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let mut request = format!("{}/acp", server.base.replace("http://", "ws://"))
        .into_client_request()
        .unwrap();
    let headers = request.headers_mut();
    if let Some(token) = token {
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    if let Some(origin) = origin {
        headers.insert("origin", origin.parse().unwrap());
    }
    request
}

/// The status the upgrade is refused with.
async fn refused(
    request: tokio_tungstenite::tungstenite::handshake::client::Request,
) -> StatusCode {
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => response.status(),
        Err(error) => panic!("refused otherwise: {error}"),
        Ok(_) => panic!("the upgrade was accepted"),
    }
}

#[tokio::test]
async fn the_upgrade_needs_a_token_and_no_foreign_origin() {
    let server = Process::serve_for_alice_and_bob("memory", &[]).await;
    assert_eq!(
        refused(upgrade(&server, None, None)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        refused(upgrade(&server, Some("not-a-token-of-anyone"), None)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        refused(upgrade(&server, Some(ALICE), Some("https://evil.example"))).await,
        StatusCode::FORBIDDEN
    );
    let (_, response) = tokio_tungstenite::connect_async(upgrade(&server, Some(ALICE), None))
        .await
        .expect("alice connects");
    let connection = response.headers()["acp-connection-id"].to_str().unwrap();
    assert!(!connection.is_empty());
}

#[tokio::test]
async fn a_malformed_message_is_answered_with_its_id_and_the_next_is_read() {
    let server = Process::serve_for_alice_and_bob("memory", &[]).await;
    let (mut socket, _) = tokio_tungstenite::connect_async(upgrade(&server, Some(ALICE), None))
        .await
        .unwrap();
    let mut answer = async |message: Value| -> Value {
        socket
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
        loop {
            if let Message::Text(text) = socket.next().await.unwrap().unwrap() {
                break serde_json::from_str(text.as_str()).unwrap();
            }
        }
    };
    let bad =
        answer(json!({"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": "x"})).await;
    assert_eq!(bad["id"], 7);
    assert_eq!(bad["error"]["code"], -32600);
    let init = answer(json!({
        "jsonrpc": "2.0", "id": 8, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    }))
    .await;
    assert_eq!(init["id"], 8);
    assert_eq!(init["result"]["protocolVersion"], 1);
}
