//! `agent-tower serve` stopped by a supervisor: SIGTERM (and SIGINT) give every client of a run
//! in flight its terminal event and exit; a client that stopped reading cannot hold the process
//! past `--drain-timeout`. The built binary, real signals.

use crate::support::process;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use process::Process;
use serde_json::json;

/// A run of a million tokens, one every 5 ms: it streams until something stops it.
fn endless() -> serde_json::Value {
    json!({
        "threadId": format!("t-{}", uuid::Uuid::now_v7()),
        "runId": format!("r-{}", uuid::Uuid::now_v7()),
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
        "forwardedProps": {"scripted": {"tokens": 1_000_000, "delay_ms": 5}},
    })
}

#[tokio::test]
async fn sigterm_and_sigint_end_every_stream_with_its_terminal_event_and_exit() {
    for signal in ["TERM", "INT"] {
        let mut server = Process::serve(&["--scripted-knobs", "--store", "memory"]).await;
        let response = server.post(&endless()).await;
        let mut body = response.bytes_stream();
        let mut seen = String::new();
        while !seen.contains("TEXT_MESSAGE_CONTENT") {
            let chunk = body.next().await.expect("the run streams").unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        server.signal(signal);
        while let Some(chunk) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(
                &chunk.expect("the stream ends cleanly"),
            ));
        }
        let last = seen
            .split("\n\n")
            .filter(|frame| frame.contains("data: "))
            .last()
            .expect("events");
        assert!(
            last.contains(r#""type":"RUN_ERROR""#) || last.contains(r#""type":"RUN_FINISHED""#),
            "SIG{signal}: the stream ends with a terminal event, not {last}"
        );
        let status = server
            .exit_within(Duration::from_secs(10))
            .await
            .expect("the server exits");
        assert!(status.success(), "SIG{signal}: {status}");
    }
}

/// A client that sent half a request head and nothing since: it holds its connection open.
async fn half_a_request(server: &Process) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let addr = server.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"POST / HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n")
        .await
        .unwrap();
    stream
}

#[tokio::test]
async fn a_connection_that_never_finishes_cannot_hold_the_shutdown_past_the_drain_timeout() {
    for drain in [1, 3] {
        let mut server = Process::serve(&[
            "--scripted-knobs",
            "--store",
            "memory",
            "--drain-timeout",
            &format!("{drain}s"),
        ])
        .await;
        let held = half_a_request(&server).await;
        // The server has the connection once it answers another request.
        assert_eq!(server.get("/health").await.status(), 200);
        let signalled = Instant::now();
        server.signal("TERM");
        let status = server
            .exit_within(Duration::from_secs(drain + 5))
            .await
            .expect("the server exits although a connection is held");
        let took = signalled.elapsed();
        assert!(status.success(), "{status}");
        assert!(
            took >= Duration::from_secs(drain) && took < Duration::from_secs(drain + 3),
            "--drain-timeout {drain}s: exited after {took:?}"
        );
        drop(held);
    }
}
