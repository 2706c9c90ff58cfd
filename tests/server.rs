//! The AG-UI server over real HTTP and WebSocket, with the official client where one exists.

use std::{net::SocketAddr, time::Duration};

use agent_tower::{
    agent::Agent,
    agui::{AguiLayer, Event},
    demo,
    model::scripted::ScriptedModel,
    runs::Runs,
    server::{AguiServer, BusyThread, Ended, RunSummary},
    test_util::{MockItem, MockModel, verify},
    tool::ToolRouter,
    transport::OnDisconnect,
};
use axum::{
    Router,
    body::Body,
    http::{Request, StatusCode, header},
};
use futures_util::{SinkExt, StreamExt};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::mpsc,
};
use tower::{Layer, ServiceExt};

use crate::support;
use support::node;

/// The scripted agent behind a configured server; run summaries arrive on the receiver.
fn scripted(
    configure: impl FnOnce(AguiServer) -> AguiServer,
) -> (Router, mpsc::UnboundedReceiver<RunSummary>) {
    scripted_on(|runs| runs, configure)
}

/// The scripted agent on a configured engine; run summaries arrive on the receiver.
fn engine(configure: impl FnOnce(Runs) -> Runs) -> (Router, mpsc::UnboundedReceiver<RunSummary>) {
    scripted_on(configure, |server| server)
}

fn scripted_on(
    engine: impl FnOnce(Runs) -> Runs,
    server: impl FnOnce(AguiServer) -> AguiServer,
) -> (Router, mpsc::UnboundedReceiver<RunSummary>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let runs = engine(Runs::new(demo::scripted().build())).on_run_end(move |run| {
        let _ = tx.send(run.clone());
    });
    // Disconnects cancel at once here; the grace period for a re-join has its own tests.
    let configured = server(AguiServer::with_runs(runs).rejoin_grace(Duration::ZERO));
    (configured.into_router(), rx)
}

/// A server whose model streams `items` (for runs that hang); disconnects cancel at once.
fn mocked(items: Vec<MockItem>, busy: BusyThread) -> (Router, mpsc::UnboundedReceiver<RunSummary>) {
    mocked_with(items, busy, |server| server.rejoin_grace(Duration::ZERO))
}

fn mocked_with(
    items: Vec<MockItem>,
    busy: BusyThread,
    configure: impl FnOnce(AguiServer) -> AguiServer,
) -> (Router, mpsc::UnboundedReceiver<RunSummary>) {
    let agui = AguiLayer::new();
    let agent = agui.layer(Agent::new(
        agui.layer(MockModel::new([items])),
        agui.layer(ToolRouter::new()),
    ));
    let (tx, rx) = mpsc::unbounded_channel();
    let runs = Runs::new(agent).busy_thread(busy).on_run_end(move |run| {
        let _ = tx.send(run.clone());
    });
    let router =
        configure(AguiServer::with_runs(runs).keep_alive(Duration::from_millis(100))).into_router();
    (router, rx)
}

async fn listen(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// The input of a 1.0 client.
fn input(thread: &str, text: &str) -> Value {
    json!({
        "threadId": thread,
        "runId": format!("run-{text}"),
        "messages": [{"id": "m1", "role": "user", "content": text}],
        "protocolVersion": "1.0",
    })
}

fn post(body: impl Into<Body>, content_type: &str, accept: &str) -> Request<Body> {
    Request::post("/")
        .header(header::CONTENT_TYPE, content_type)
        .header(header::ACCEPT, accept)
        .body(body.into())
        .unwrap()
}

fn post_json(value: &Value) -> Request<Body> {
    post(value.to_string(), "application/json", "text/event-stream")
}

async fn body_text(response: axum::response::Response) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn sse_events(text: &str) -> Vec<Event> {
    text.split("\n\n")
        .filter_map(|frame| frame.lines().find_map(|line| line.strip_prefix("data: ")))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

async fn error_of(response: axum::response::Response) -> (StatusCode, Value) {
    let status = response.status();
    (
        status,
        serde_json::from_str(&body_text(response).await).unwrap(),
    )
}

#[tokio::test]
async fn the_official_client_talks_to_the_server() {
    let (router, mut runs) = scripted(|s| s);
    let addr = listen(router).await;
    let output = node("agui.mjs", &[&format!("http://{addr}/")], None).await;
    assert!(output.contains("all scenarios passed"), "{output}");
    // Nine runs; the aborted one was cancelled by the server, not left running.
    let mut ends = Vec::new();
    for _ in 0..9 {
        ends.push(
            tokio::time::timeout(Duration::from_secs(5), runs.recv())
                .await
                .expect("every run ends")
                .unwrap()
                .end,
        );
    }
    assert_eq!(
        ends.iter().filter(|e| **e == Ended::Disconnected).count(),
        1,
        "{ends:?}"
    );
}

#[tokio::test]
async fn a_disconnect_cancels_the_run_within_a_second() {
    for quiet in [false, true] {
        // A busy run (a million tokens) and a quiet one (the model hangs; keep-alive notices).
        let (router, mut runs) = if quiet {
            mocked(
                vec![MockItem::text("waiting"), MockItem::Pending],
                BusyThread::Reject,
            )
        } else {
            scripted(|s| s)
        };
        let addr = listen(router).await;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut body = input("t", "stream");
        body["forwardedProps"] = json!({"scripted": {"tokens": 1_000_000}});
        let body = body.to_string();
        let request = format!(
            "POST / HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("TEXT_MESSAGE_CONTENT") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the server closed early");
            seen.extend_from_slice(&buf[..n]);
        }
        drop(stream);
        let summary = tokio::time::timeout(Duration::from_secs(1), runs.recv())
            .await
            .expect("the server noticed within 1 s")
            .unwrap();
        assert_eq!(summary.end, Ended::Disconnected, "quiet: {quiet}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_run_whose_client_left_waits_for_a_rejoin_then_is_cancelled() {
    let grace = Duration::from_secs(30);
    let hang = vec![MockItem::text("waiting"), MockItem::Pending];
    let (router, mut runs) = mocked_with(hang, BusyThread::Reject, |s| s.rejoin_grace(grace));
    // The page starts the run saying it re-joins its runs, reads its first event, and goes away
    // (it reloads).
    let mut request = post_json(&input("t", "left"));
    request
        .headers_mut()
        .insert("prefer", "wait=10, rejoin".parse().unwrap());
    let started = router.clone().oneshot(request).await.unwrap();
    assert_eq!(started.headers()["preference-applied"], "rejoin");
    let mut viewer = started.into_body();
    viewer.frame().await.unwrap().unwrap();
    drop(viewer);
    tokio::time::sleep(grace - Duration::from_secs(1)).await;
    assert!(runs.try_recv().is_err(), "the run waits for its page");

    // The page comes back within the grace and re-joins; it stays long past the grace.
    let rejoin = Request::get("/runs/run-left/events")
        .header(header::ACCEPT, "text/event-stream")
        .header("last-event-id", "run-left:1")
        .body(Body::empty())
        .unwrap();
    let rejoined = router.clone().oneshot(rejoin).await.unwrap();
    assert_eq!(rejoined.status(), StatusCode::OK);
    tokio::time::sleep(grace * 3).await;
    assert!(runs.try_recv().is_err(), "a run somebody follows goes on");

    // It goes away for good: the grace starts again, and the run is cancelled at its end.
    drop(rejoined);
    let left = tokio::time::Instant::now();
    let summary = runs.recv().await.unwrap();
    assert_eq!(summary.end, Ended::Disconnected);
    assert_eq!(
        left.elapsed(),
        grace,
        "cancelled when the grace ended, not before"
    );
}

/// A plain AG-UI client's Stop closes its connection: with the same grace configured, its run is
/// cancelled at once, even while another screen follows it, and the thread takes the next
/// message.
#[tokio::test(start_paused = true)]
async fn a_plain_clients_run_is_cancelled_when_it_goes_away() {
    let grace = Duration::from_secs(30);
    let hang = vec![MockItem::text("waiting"), MockItem::Pending];
    let (router, mut runs) = mocked_with(hang, BusyThread::Reject, |s| s.rejoin_grace(grace));
    let started = router
        .clone()
        .oneshot(post_json(&input("t", "stopped")))
        .await
        .unwrap();
    assert!(!started.headers().contains_key("preference-applied"));
    let mut viewer = started.into_body();
    viewer.frame().await.unwrap().unwrap();
    // Another screen watches the run; it does not keep it going once its client stops it.
    let watch = Request::get("/runs/run-stopped/events")
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::empty())
        .unwrap();
    let watcher = router.clone().oneshot(watch).await.unwrap();
    assert_eq!(watcher.status(), StatusCode::OK);
    let left = tokio::time::Instant::now();
    drop(viewer);
    let summary = tokio::time::timeout(grace * 2, runs.recv())
        .await
        .expect("the run ends though another screen follows it")
        .unwrap();
    assert_eq!(summary.end, Ended::Disconnected);
    assert_eq!(left.elapsed(), Duration::ZERO, "cancelled at once");
    let watched = String::from_utf8(
        watcher
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    let last = watched.lines().rfind(|line| line.starts_with("data:"));
    let last: Value = serde_json::from_str(last.unwrap().trim_start_matches("data:")).unwrap();
    assert_eq!(
        (&last["type"], &last["outcome"]),
        (&json!("RUN_FINISHED"), &json!({"type": "cancelled"})),
        "the watcher sees the run end cancelled: {watched}"
    );
    let next = router
        .clone()
        .oneshot(post_json(&input("t", "next")))
        .await
        .unwrap();
    assert_eq!(
        next.status(),
        StatusCode::OK,
        "the next message is answered"
    );
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_streams() {
    let (router, _runs) = scripted(|s| s.body_limit(1024));
    let cases = [
        (post("{\"threadId\":", "application/json", "*/*"), StatusCode::BAD_REQUEST, "malformed_json", None),
        (
            post(json!({"threadId": "t", "runId": "r", "messages": [{"id": 1, "role": "user", "content": "x"}]}).to_string(), "application/json", "*/*"),
            // Messages are tagged by role: the path names the message, the text the problem.
            StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", Some("messages[0]"),
        ),
        (
            post(json!({"threadId": "t", "messages": []}).to_string(), "application/json", "*/*"),
            StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", Some("runId"),
        ),
        (
            post(json!({"threadId": "", "runId": "r", "messages": []}).to_string(), "application/json", "*/*"),
            StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", Some("threadId"),
        ),
        (
            // Ids go into every SSE `id:` line and every row of the log: 256 bytes at most.
            post(json!({"threadId": "t", "runId": "r".repeat(257), "messages": []}).to_string(), "application/json", "*/*"),
            StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", Some("runId"),
        ),
        (post("x".repeat(2048), "application/json", "*/*"), StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", None),
        (post("{}", "text/plain", "*/*"), StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", None),
    ];
    for (request, status, code, field) in cases {
        let (got, body) = error_of(router.clone().oneshot(request).await.unwrap()).await;
        assert_eq!(got, status, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert_eq!(body["error"]["field"].as_str(), field, "{body}");
    }
}

#[tokio::test]
async fn a_busy_thread_is_refused_or_queued() {
    let hang = || vec![MockItem::text("busy"), MockItem::Pending];
    // Reject: the first run is still streaming (its body is held), the second gets 409.
    let (router, mut runs) = mocked(hang(), BusyThread::Reject);
    let first = router
        .clone()
        .oneshot(post_json(&input("t", "one")))
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let (status, body) = error_of(
        router
            .clone()
            .oneshot(post_json(&input("t", "two")))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "thread_busy");
    let other = router
        .clone()
        .oneshot(post_json(&input("u", "three")))
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::OK, "other threads are free");
    drop(first);
    let ended = loop {
        let summary = runs.recv().await.unwrap();
        if summary.run_id.as_str() == "run-one" {
            break summary.end;
        }
    };
    assert_eq!(ended, Ended::Disconnected);
    let again = router
        .clone()
        .oneshot(post_json(&input("t", "four")))
        .await
        .unwrap();
    assert_eq!(
        again.status(),
        StatusCode::OK,
        "the thread is free once the run has ended"
    );

    // Queue: the second run waits for the first to end.
    let (router, _runs) = mocked(hang(), BusyThread::Queue);
    let first = router
        .clone()
        .oneshot(post_json(&input("t", "one")))
        .await
        .unwrap();
    let mut second = tokio_test::task::spawn(router.clone().oneshot(post_json(&input("t", "two"))));
    tokio_test::assert_pending!(second.poll());
    drop(first);
    assert_eq!(second.await.unwrap().status(), StatusCode::OK);
}

#[tokio::test]
async fn sse_headers_and_ndjson_on_request() {
    let (router, _runs) = scripted(|s| s);
    let response = router
        .clone()
        .oneshot(post_json(&input("t", "hi")))
        .await
        .unwrap();
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    assert_eq!(response.headers()[header::CACHE_CONTROL], "no-cache");
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    let events = sse_events(&body_text(response).await);
    verify(&events).unwrap();

    let response = router
        .oneshot(post(
            input("t", "hi").to_string(),
            "application/json",
            "application/x-ndjson",
        ))
        .await
        .unwrap();
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "application/x-ndjson"
    );
    let text = body_text(response).await;
    let lines: Vec<Event> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    verify(&lines).unwrap();
    assert_eq!(lines.len(), events.len());
}

#[tokio::test(start_paused = true)]
async fn a_quiet_run_gets_ping_comments() {
    let agui = AguiLayer::new();
    let agent = agui.layer(Agent::new(
        agui.layer(MockModel::new([vec![MockItem::Pending]])),
        agui.layer(ToolRouter::new()),
    ));
    let router = AguiServer::new(agent)
        .keep_alive(Duration::from_secs(15))
        .into_router();
    let response = router.oneshot(post_json(&input("t", "hi"))).await.unwrap();
    let mut body = response.into_body();
    let mut text = String::new();
    while !text.ends_with(": ping\n\n") {
        let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
        text.push_str(std::str::from_utf8(&frame).unwrap());
    }
    let blocks: Vec<&str> = text.split_terminator("\n\n").collect();
    assert_eq!(blocks.len(), 3, "{text}");
    assert!(
        blocks[0].starts_with("id: run-hi:1\ndata: {\"type\":\"RUN_STARTED\""),
        "{text}"
    );
    assert!(
        blocks[1].starts_with("id: run-hi:2\ndata: {\"type\":\"STEP_STARTED\""),
        "{text}"
    );
    assert_eq!(blocks[2], ": ping");
}

#[tokio::test]
async fn cors_is_off_unless_origins_are_allowed() {
    let preflight = || {
        Request::options("/")
            .header(header::ORIGIN, "https://app.example")
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .body(Body::empty())
            .unwrap()
    };
    let (router, _runs) = scripted(|s| s);
    let response = router.oneshot(preflight()).await.unwrap();
    assert!(
        response
            .headers()
            .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            .is_none()
    );

    let (router, _runs) = scripted(|s| s.allow_origins(["https://app.example"]).unwrap());
    let response = router.oneshot(preflight()).await.unwrap();
    assert_eq!(
        response.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "https://app.example"
    );
    assert!(
        response
            .headers()
            .get(header::ACCESS_CONTROL_ALLOW_CREDENTIALS)
            .is_none()
    );

    let agui = AguiLayer::new();
    let agent = agui.layer(Agent::new(
        agui.layer(ScriptedModel::new()),
        agui.layer(ToolRouter::new()),
    ));
    assert!(AguiServer::new(agent).allow_origins(["*"]).is_err());
}

/// A `Stack` served by `Stack::server` declares what it has at `GET /capabilities`, beside the
/// server's transports, with no wiring.
#[tokio::test]
async fn a_stacks_server_declares_its_tools_and_approvals() {
    use agent_tower::{
        permission::{Action, InterruptApprover, Policy},
        stack::Stack,
        tool::{ToolCall, ToolOutput, ToolSpec},
    };
    let tools = ToolRouter::new().route(
        ToolSpec::new("get_time", "The current time."),
        tower::service_fn(|_: ToolCall| async {
            Ok::<_, std::convert::Infallible>(ToolOutput::text("12:00"))
        }),
    );
    let router = Stack::new(ScriptedModel::new(), tools)
        .policy(Policy::new().rule("get_time", Action::Ask))
        .approver(InterruptApprover::new(Duration::from_secs(60)))
        .max_turns(std::num::NonZeroU32::new(4).unwrap())
        .server()
        .into_router();
    let response = router
        .oneshot(Request::get("/capabilities").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let declared: Value = serde_json::from_str(&body_text(response).await).unwrap();
    let names: Vec<&str> = declared["tools"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{declared}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_time"], "{declared}");
    assert_eq!(declared["execution"]["maxIterations"], 4, "{declared}");
    assert_eq!(declared["humanInTheLoop"]["supported"], true, "{declared}");
    assert_eq!(
        declared["transport"]["streaming"], true,
        "the server's own: {declared}"
    );
}

#[tokio::test]
async fn health_answers() {
    let (router, _runs) = scripted(|s| s);
    let response = router
        .oneshot(Request::get("/health").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body_text(response).await, r#"{"status":"ok"}"#);
}

#[tokio::test]
async fn a_run_past_its_bounds_is_stopped_with_run_too_large() {
    for (events, bytes) in [(50, u64::MAX), (u64::MAX, 4_000)] {
        let (router, mut runs) = engine(|runs| runs.max_run(events, bytes));
        let mut body = input("t", "large");
        body["forwardedProps"] = json!({"scripted": {"tokens": 1_000_000}});
        let response = router.oneshot(post_json(&body)).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let text = body_text(response).await;
        let sent: Vec<Value> = text
            .split("\n\n")
            .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
            .map(|data| serde_json::from_str(data).unwrap())
            .collect();
        let end = sent.last().unwrap();
        assert_eq!(end["type"], "RUN_ERROR", "{end}");
        assert_eq!(end["code"], "run_too_large", "{end}");
        let taken = (sent.len() - 1) as u64;
        let json: u64 = sent[..sent.len() - 1]
            .iter()
            .map(|e| e.to_string().len() as u64)
            .sum();
        assert!(
            taken <= events && json <= bytes,
            "{taken} events, {json} bytes"
        );
        let summary = runs.recv().await.unwrap();
        assert_eq!(
            summary.events,
            sent.len() as u64,
            "every event sent is logged"
        );
    }
}

#[tokio::test]
async fn a_run_past_the_live_runs_is_refused_with_retry_after() {
    let (router, mut runs) = engine(|runs| runs.max_live_runs(1));
    let slow = |thread: &str| {
        let mut body = input(thread, &format!("run-{thread}"));
        body["forwardedProps"] = json!({"scripted": {"tokens": 1_000, "delay_ms": 60_000}});
        post_json(&body)
    };
    let first = router.clone().oneshot(slow("a")).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let refused = router.clone().oneshot(slow("b")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
    let (_, body) = error_of(refused).await;
    assert_eq!(body["error"]["code"], "overloaded", "{body}");
    // The first client goes away: its run ends, and its place is free.
    drop(first);
    assert_eq!(runs.recv().await.unwrap().run_id.as_str(), "run-run-a");
    let next = router.oneshot(slow("c")).await.unwrap();
    assert_eq!(next.status(), StatusCode::OK);
}

#[tokio::test]
async fn ready_answers_until_the_server_stops() {
    let stop = tokio_util::sync::CancellationToken::new();
    let (router, _runs) = engine(|runs| runs.shutdown_token(stop.clone()));
    let ready = || Request::get("/ready").body(Body::empty()).unwrap();
    let response = router.clone().oneshot(ready()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body_text(response).await, r#"{"status":"ready"}"#);
    stop.cancel();
    let response = router.clone().oneshot(ready()).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(body_text(response).await.contains(r#""status":"draining""#));
    let health = router
        .oneshot(Request::get("/health").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK, "still alive");
}

#[tokio::test]
async fn websocket_runs_cancels_and_closes() {
    use tokio_tungstenite::tungstenite::Message;

    let (router, mut runs) = scripted(|s| s);
    let addr = listen(router).await;
    let (mut socket, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws"))
        .await
        .unwrap();
    async fn until_terminal(
        socket: &mut (
                 impl futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
                 + Unpin
             ),
    ) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(message) = socket.next().await {
            if let Message::Text(text) = message.unwrap() {
                let event: Value = serde_json::from_str(text.as_str()).unwrap();
                let done = matches!(event["type"].as_str(), Some("RUN_FINISHED" | "RUN_ERROR"));
                events.push(event);
                if done {
                    break;
                }
            }
        }
        events
    }

    // Two runs, one after the other, on one socket.
    socket
        .send(Message::text(input("ws", "hello").to_string()))
        .await
        .unwrap();
    socket
        .send(Message::text(
            input("ws", r#"add {"a": 1, "b": 1}"#).to_string(),
        ))
        .await
        .unwrap();
    let mut all = until_terminal(&mut socket).await;
    all.extend(until_terminal(&mut socket).await);
    assert!(
        all.iter()
            .any(|e| e["type"] == "TOOL_CALL_RESULT" && e["content"] == "2")
    );

    // A long run, cancelled by a message.
    let mut long = input("ws", "long");
    long["forwardedProps"] = json!({"scripted": {"tokens": 1_000_000}});
    socket.send(Message::text(long.to_string())).await.unwrap();
    socket
        .send(Message::text(r#"{"type":"cancel"}"#))
        .await
        .unwrap();
    let cancelled = until_terminal(&mut socket).await;
    assert_eq!(cancelled.last().unwrap()["outcome"]["type"], "cancelled");
    all.extend(cancelled);

    // The same sequence passes the official schemas and the client's verifier.
    support::officially_verified(&all).await;
    let typed: Vec<Event> = all
        .into_iter()
        .map(|e| serde_json::from_value(e).unwrap())
        .collect();
    verify(&typed).unwrap();

    // A long run, then the socket closes: the run is cancelled.
    for _ in 0..3 {
        runs.recv().await.unwrap();
    }
    let mut long = input("ws", "closing");
    long["forwardedProps"] = json!({"scripted": {"tokens": 1_000_000}});
    socket.send(Message::text(long.to_string())).await.unwrap();
    loop {
        if let Some(Ok(Message::Text(text))) = socket.next().await
            && text.as_str().contains("TEXT_MESSAGE_CONTENT")
        {
            break;
        }
    }
    drop(socket);
    let summary = tokio::time::timeout(Duration::from_secs(1), runs.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(summary.end, Ended::Disconnected);
}

#[tokio::test]
async fn websocket_says_why_it_closes() {
    use tokio_tungstenite::tungstenite::{Message, protocol::frame::coding::CloseCode};

    let (router, _runs) = scripted(|s| s.body_limit(1024));
    let addr = listen(router).await;
    let cases = [
        (
            Message::text("x".repeat(2048)),
            CloseCode::Size,
            "1024 bytes at most",
        ),
        (
            Message::binary(vec![0u8; 8]),
            CloseCode::Unsupported,
            "text frames only",
        ),
    ];
    for (message, code, reason) in cases {
        let (mut socket, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws"))
            .await
            .unwrap();
        socket.send(message).await.unwrap();
        let close = loop {
            match socket.next().await {
                Some(Ok(Message::Close(close))) => break close,
                Some(Ok(_)) => {}
                other => panic!("the socket ended without a close frame: {other:?}"),
            }
        };
        let close = close.expect("the close frame has a code");
        assert_eq!(close.code, code);
        assert!(close.reason.as_str().contains(reason), "{}", close.reason);
    }
}

#[tokio::test]
async fn on_disconnect_continue_lets_the_run_finish() {
    let agui = AguiLayer::new();
    let agent = agui.layer(Agent::new(
        agui.layer(ScriptedModel::new()),
        agui.layer(ToolRouter::new()),
    ));
    let (tx, mut runs) = mpsc::unbounded_channel();
    let engine = Runs::new(agent).channel_capacity(1).on_run_end(move |run| {
        let _ = tx.send(run.clone());
    });
    let router = AguiServer::with_runs(engine)
        .on_disconnect(OnDisconnect::Continue)
        .into_router();
    let mut body = input("t", "long");
    body["forwardedProps"] = json!({"scripted": {"tokens": 2_000}});
    let response = router.oneshot(post_json(&body)).await.unwrap();
    let mut stream = response.into_body();
    stream.frame().await.unwrap().unwrap();
    drop(stream);
    let summary = tokio::time::timeout(Duration::from_secs(5), runs.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        summary.end,
        Ended::Detached(Box::new(Ended::Finished(
            agent_tower::run::StopReason::EndTurn
        )))
    );
}

#[tokio::test]
async fn shutdown_gives_runs_in_flight_their_terminal_event() {
    let agui = AguiLayer::new();
    let agent = agui.layer(Agent::new(
        agui.layer(MockModel::new([vec![
            MockItem::text("busy"),
            MockItem::Pending,
        ]])),
        agui.layer(ToolRouter::new()),
    ));
    let runs = tokio_util::sync::CancellationToken::new();
    let router = AguiServer::with_runs(Runs::new(agent).shutdown_token(runs.clone())).into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(agent_tower::server::serve(listener, router, runs, async {
        let _ = stopped.await;
    }));

    let response = reqwest::Client::new()
        .post(format!("http://{addr}/"))
        .header("content-type", "application/json")
        .body(input("t", "hi").to_string())
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let mut text = String::new();
    while !text.contains("TEXT_MESSAGE_CONTENT") {
        text.push_str(std::str::from_utf8(&body.next().await.unwrap().unwrap()).unwrap());
    }
    stop.send(()).unwrap();
    while let Some(chunk) = body.next().await {
        text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    let events = sse_events(&text);
    verify(&events).unwrap();
    let Some(Event::RunFinished(finished)) = events.last() else {
        panic!("no terminal event: {text}")
    };
    assert_eq!(
        finished.outcome,
        Some(agent_tower::agui::event::RunFinishedOutcome::Cancelled)
    );
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
}

#[cfg(feature = "proto")]
#[tokio::test]
async fn the_official_client_parses_our_protobuf() {
    let (router, _runs) = scripted(|s| s);
    let addr = listen(router).await;
    let output = node("proto.mjs", &[&format!("http://{addr}/")], None).await;
    assert!(output.contains("ok protobuf"), "{output}");
}

#[tokio::test]
async fn accepted_connections_send_without_delay() {
    use axum::serve::Listener;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut listener = agent_tower::server::nodelay(listener);
    let client = tokio::spawn(tokio::net::TcpStream::connect(addr));
    let (accepted, _) = listener.accept().await;
    assert!(
        accepted.nodelay().unwrap(),
        "TCP_NODELAY is set on the server's side"
    );
    drop(client.await.unwrap().unwrap());
}

#[tokio::test]
async fn every_refusal_has_the_json_error_body() {
    let (router, _runs) = scripted(|s| s);
    for (method, uri, status, code) in [
        ("GET", "/nope", StatusCode::NOT_FOUND, "not_found"),
        (
            "PUT",
            "/",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "DELETE",
            "/health",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "GET",
            "/runs/r/events?after=abc",
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "GET",
            "/interrupts?status=x&status=y",
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            "GET",
            "/threads/%FF",
            StatusCode::BAD_REQUEST,
            "invalid_path",
        ),
        (
            "POST",
            "/threads/t/resume",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        (
            "POST",
            "/interrupts/i/resolve",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
    ] {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "application/json",
            "{method} {uri}"
        );
        let (got, body) = error_of(response).await;
        assert_eq!(
            (got, body["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {uri}: {body}"
        );
    }
}

#[tokio::test]
async fn too_many_messages_are_refused_naming_the_field() {
    let (router, _runs) = scripted(|s| s.max_messages(2));
    let mut body = input("t", "hi");
    body["messages"] = json!([
        {"id": "1", "role": "user", "content": "a"},
        {"id": "2", "role": "user", "content": "b"},
        {"id": "3", "role": "user", "content": "c"},
    ]);
    let (status, error) = error_of(router.oneshot(post_json(&body)).await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(error["error"]["field"], "messages", "{error}");
}

#[tokio::test]
async fn resuming_a_thread_without_answers_or_interrupts_creates_nothing() {
    let (router, _runs) = scripted(|s| s);
    let resume = |thread: &str, body: Value| {
        Request::post(format!("/threads/{thread}/resume"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let (status, body) = error_of(
        router
            .clone()
            .oneshot(resume("t", json!({"resume": []})))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (StatusCode::UNPROCESSABLE_ENTITY, &json!("resume_invalid")),
        "{body}"
    );
    let answer = json!({"resume": [{"interruptId": "i", "status": "resolved"}]});
    let (status, body) =
        error_of(router.clone().oneshot(resume("new", answer)).await.unwrap()).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (StatusCode::CONFLICT, &json!("nothing_to_resume")),
        "{body}"
    );
    let thread = router
        .oneshot(Request::get("/threads/new").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(
        thread.status(),
        StatusCode::NOT_FOUND,
        "no thread was created"
    );
}

/// Two tabs on one thread, through the official client: the stale tab's message is refused with
/// the thread's conversation, which the client shows in place of its own; sent again, it goes
/// after the other tab's turn. No turn is lost.
#[tokio::test]
async fn a_stale_tab_never_erases_a_turn_and_is_shown_the_thread() {
    let (router, _runs) = scripted(|s| s);
    let addr = listen(router).await;
    let seen: Value =
        serde_json::from_str(&node("agui-stale-tab.mjs", &[&format!("http://{addr}")], None).await)
            .unwrap();
    assert_eq!(seen["error"]["code"], "thread_conflict", "{seen}");
    let turns = |words: &[&str]| -> Value {
        words
            .iter()
            .flat_map(|w| {
                [
                    json!(["user", w]),
                    json!(["assistant", format!("You said: {w}")]),
                ]
            })
            .collect()
    };
    assert_eq!(
        seen["refreshed"],
        turns(&["one", "two"]),
        "the thread, shown"
    );
    assert_eq!(seen["again"], Value::Null, "sent again, answered");
    assert_eq!(seen["shown"], turns(&["one", "two", "three"]));
    assert_eq!(seen["stored"], seen["shown"], "kept as shown");
}
