//! Connections bounded in time: a head sent too slowly, an idle keep-alive connection, a body
//! sent too slowly, and a client that stops reading are all ended within their timeouts. Real
//! TCP against `Connections::serve`.

use std::{net::SocketAddr, time::Duration};

use agent_tower::{
    demo,
    runs::Runs,
    server::{AguiServer, Connections, Ended, RunSummary},
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::mpsc,
};
use tokio_util::sync::CancellationToken;

const SHORT: Duration = Duration::from_millis(300);
/// How long a test waits for what a timeout must cause; far past `SHORT`.
const BOUND: Duration = Duration::from_secs(10);

/// A server with short timeouts; run summaries arrive on the receiver.
async fn serve() -> (SocketAddr, mpsc::UnboundedReceiver<RunSummary>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let runs = CancellationToken::new();
    let engine = Runs::new(
        demo::scripted()
            .max_turns(std::num::NonZeroU32::new(4).unwrap())
            .build(),
    )
    .shutdown_token(runs.clone())
    .on_run_end(move |run| {
        let _ = tx.send(run.clone());
    });
    // A cut connection cancels its run at once, without waiting for a re-join.
    let router = AguiServer::with_runs(engine)
        .body_timeout(SHORT)
        .rejoin_grace(Duration::ZERO)
        .into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Connections::new()
        .header_timeout(SHORT)
        .write_timeout(SHORT);
    tokio::spawn(connections.serve(listener, router, runs, std::future::pending()));
    (addr, rx)
}

/// Sends `bytes` on a new connection to a fresh server, then reads everything it answers until
/// it closes the connection (an error counts as closed).
async fn answer_to(bytes: &[u8]) -> String {
    let (addr, _runs) = serve().await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut received = Vec::new();
    let read = tokio::time::timeout(BOUND, async {
        let mut buf = [0; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await.expect("the server closes the connection");
    String::from_utf8_lossy(&received).into_owned()
}

#[tokio::test]
async fn a_head_sent_too_slowly_is_cut() {
    let answer = answer_to(b"POST / HTTP/1.1\r\nHost: localhost\r\n").await;
    assert!(!answer.contains("200 OK"), "{answer}");
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_its_last_response() {
    let answer = answer_to(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with(r#"{"status":"ok"}"#), "{answer}");
}

#[tokio::test]
async fn a_body_sent_too_slowly_is_refused_with_408() {
    let answer = answer_to(
        b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
          Content-Length: 100\r\n\r\n{\"threadId\"",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_and_its_run_cancelled() {
    let (addr, mut runs) = serve().await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let body = json!({
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "m", "role": "user", "content": "hi"}],
        "forwardedProps": {"scripted": {"tokens": 400_000}},
    })
    .to_string();
    let head = format!(
        "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    // Nothing is read: the run's stream fills the socket, its write blocks and times out.
    let summary = tokio::time::timeout(BOUND, runs.recv())
        .await
        .expect("the run ends once the connection is cut")
        .unwrap();
    assert_eq!(summary.end, Ended::Disconnected, "{summary:?}");
    assert!(summary.events < 400_000, "{summary:?}");
}
