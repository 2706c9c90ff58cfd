//! `agent-tower serve`'s `/acp`: editors across the network over ACP's WebSocket and Streamable
//! HTTP bindings. The official TypeScript ACP client (`@agentclientprotocol/sdk`'s transports)
//! drives it on each binding as two principals (`tests/conformance/acp-remote.mjs`): a streamed
//! turn, an approval asked as a permission (allowed, rejected), a cancel, the turns as runs of
//! the thread over HTTP, a second connection that loads the session, a fork, a turn that
//! outlives its connection and is joined to its end by the next, a turn read across 20 cut
//! connections (every update once), another principal kept out; and a turn whose instance is
//! killed, read to its end through the other. Here too: the upgrade refused without a token or
//! from a foreign origin, a malformed message answered with its id, and what the HTTP binding
//! refuses.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest, http::StatusCode};

use crate::support::{
    self,
    process::{ALICE, BOB, Process},
    stores,
};

/// Every scenario's line.
const SCENARIOS: usize = 10;

/// Every scenario of `acp-remote.mjs` over `binding` (`ws` or `http`).
async fn scenarios_over(binding: &str) {
    let store = stores::sqlite(&format!("acp-remote-{binding}"));
    let server = Process::serve_for_alice_and_bob(&store, &[]).await;
    let _logs = server.logs_on_failure();
    let out = support::node("acp-remote.mjs", &[&server.base, ALICE, BOB, binding], None).await;
    println!("{out}");
    let passed = out.lines().filter(|l| l.starts_with("ok - ")).count();
    assert_eq!(passed, SCENARIOS, "{out}");
}

#[tokio::test]
async fn the_official_client_works_over_a_websocket() {
    scenarios_over("ws").await;
}

#[tokio::test]
async fn the_official_client_works_over_streamable_http() {
    scenarios_over("http").await;
}

/// The official Python client (`agent-client-protocol`'s WebSocket and Streamable HTTP
/// transports) on each binding: a streamed prompt, an approval, a cancel, a load, another
/// principal kept out (`tests/conformance/acp_remote.py`).
#[tokio::test]
async fn the_official_python_client_works_on_both_bindings() {
    let server = Process::serve_for_alice_and_bob("memory", &[]).await;
    let _logs = server.logs_on_failure();
    let out = support::python("acp_remote.py", &[&server.base, ALICE, BOB]).await;
    println!("{out}");
    let passed = out.lines().filter(|l| l.starts_with("ok - ")).count();
    assert_eq!(passed, 10, "five scenarios on each binding: {out}");
}

/// kill -9 of the instance under an editor's turn (on PostgreSQL, else SQLite): the editor
/// connects to the other instance, loads the session and reads the turn, continued there, to its
/// end (`tests/conformance/acp-remote-takeover.mjs`).
#[tokio::test]
async fn a_turn_survives_a_kill_of_its_instance() {
    let store = stores::shared("acp-takeover").await;
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

/// The HTTP binding refuses what does not fit it, as every route refuses (a status and a JSON
/// `error`): a first message that is not `initialize`, a batch, a stream without a connection,
/// and another principal's connection, which is unknown.
#[tokio::test]
async fn the_http_binding_refuses_what_does_not_fit_it() {
    let server = Process::serve_for_alice_and_bob("memory", &[]).await;
    let client = reqwest::Client::new();
    let acp = format!("{}/acp", server.base);
    let post = |token: &str, connection: Option<&str>, body: Value| {
        let mut request = client.post(&acp).bearer_auth(token).json(&body);
        if let Some(connection) = connection {
            request = request.header("acp-connection-id", connection);
        }
        request.send()
    };
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    });
    let opened = post(ALICE, None, initialize.clone()).await.unwrap();
    assert_eq!(opened.status(), 200);
    let connection = opened.headers()["acp-connection-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let answer: Value = opened.json().await.unwrap();
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["protocolVersion"], 1);

    let status_and_code = async |response: reqwest::Response| {
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        (status, body["error"]["code"].as_str().unwrap().to_owned())
    };
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}});
    assert_eq!(
        status_and_code(post(ALICE, None, list.clone()).await.unwrap()).await,
        (400, "no_connection".to_owned())
    );
    assert_eq!(
        status_and_code(
            post(ALICE, Some(&connection), json!([list.clone()]))
                .await
                .unwrap()
        )
        .await,
        (501, "batch".to_owned())
    );
    assert_eq!(
        status_and_code(post(BOB, Some(&connection), list.clone()).await.unwrap()).await,
        (404, "unknown_connection".to_owned())
    );
    let stream = client.get(&acp).bearer_auth(ALICE).send().await.unwrap();
    assert_eq!(
        status_and_code(stream).await,
        (400, "no_connection".to_owned())
    );
    assert_eq!(
        post(ALICE, Some(&connection), list).await.unwrap().status(),
        202
    );
    let ended = client
        .delete(&acp)
        .bearer_auth(ALICE)
        .header("acp-connection-id", &connection)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 202);
    let again = json!({"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}});
    assert_eq!(
        status_and_code(post(ALICE, Some(&connection), again).await.unwrap()).await,
        (404, "unknown_connection".to_owned())
    );
}
