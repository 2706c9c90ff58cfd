//! The run log as the spine, from every transport and on every store (memory, a SQLite file,
//! PostgreSQL): WebSocket runs are logged, re-joinable and resumable; refusals are the same over
//! HTTP and the WebSocket; the three idempotency cases; every run's summary counts its events.

use crate::support::frames;
use crate::support::stores;

use std::{num::NonZeroU32, time::Duration};

use agent_tower::{
    demo,
    permission::InterruptApprover,
    runs::Runs,
    server::{AguiServer, Ended, RunSummary},
    store::RunStore,
};
use frames::frames;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

struct Server {
    name: &'static str,
    base: String,
    http: reqwest::Client,
    summaries: mpsc::UnboundedReceiver<RunSummary>,
}

/// The product agent (`remember` asks for approval) behind a server on `store` (`None`: memory).
async fn serve(name: &'static str, store: Option<&str>) -> Server {
    let agent = demo::scripted()
        .policy(demo::policy())
        .approver(InterruptApprover::new(Duration::from_secs(600)))
        .max_turns(NonZeroU32::new(8).unwrap())
        .build();
    let (tx, summaries) = mpsc::unbounded_channel();
    let mut runs = Runs::new(agent).on_run_end(move |run| {
        let _ = tx.send(run.clone());
    });
    if let Some(url) = store {
        runs = runs.log(RunStore::open(url).await.unwrap());
    }
    let router = AguiServer::with_runs(runs).into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    Server {
        name,
        base,
        http: reqwest::Client::new(),
        summaries,
    }
}

async fn servers(test: &str) -> Vec<Server> {
    let mut servers = vec![serve("memory", None).await];
    for (name, url) in stores::store_urls(test).await {
        servers.push(serve(name, Some(&url)).await);
    }
    servers
}

fn new_thread() -> String {
    format!("t-{}", uuid::Uuid::now_v7())
}

fn remember(thread: &str, run: &str) -> Value {
    json!({
        "threadId": thread, "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": r#"remember {"key": "theme", "value": "dark"}"#}],
    })
}

fn hello(thread: &str, run: &str) -> Value {
    json!({
        "threadId": thread, "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
    })
}

fn resume(thread: &str, run: &str, interrupt: &str) -> Value {
    json!({
        "threadId": thread, "runId": run, "messages": [],
        "resume": [{"interruptId": interrupt, "status": "resolved", "payload": {"approved": true}}],
    })
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn events(frames: &[(String, Value)]) -> Vec<Value> {
    frames.iter().map(|(_, e)| e.clone()).collect()
}

impl Server {
    async fn post(&self, body: &Value) -> reqwest::Response {
        self.http.post(&self.base).json(body).send().await.unwrap()
    }

    /// A run over HTTP, to its end: the frames `(id, event)`.
    async fn run(&self, body: &Value) -> Vec<(String, Value)> {
        let response = self.post(body).await;
        assert_eq!(response.status(), 200, "{}: {body}", self.name);
        frames(&response.text().await.unwrap())
    }

    /// The whole log of `run`, over HTTP.
    async fn log(&self, run: &str) -> Vec<(String, Value)> {
        let url = format!("{}/runs/{run}/events?after=0", self.base);
        frames(
            &self
                .http
                .get(url)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap(),
        )
    }

    async fn socket(&self) -> Socket {
        let url = format!("{}/ws", self.base.replacen("http", "ws", 1));
        let (socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        Socket(socket)
    }

    /// The summaries of the runs that ended, until `run`'s.
    async fn summary(&mut self, run: &str) -> RunSummary {
        loop {
            let summary = tokio::time::timeout(Duration::from_secs(10), self.summaries.recv())
                .await
                .expect("the run ends")
                .unwrap();
            if summary.run_id.as_str() == run {
                return summary;
            }
        }
    }
}

struct Socket(
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
);

impl Socket {
    async fn send(&mut self, body: &Value) {
        self.0.send(Message::text(body.to_string())).await.unwrap();
    }

    /// The events of one run (or one refusal), to its terminal event.
    async fn until_terminal(&mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(message) = self.0.next().await {
            if let Message::Text(text) = message.unwrap() {
                let event: Value = serde_json::from_str(text.as_str()).unwrap();
                let done = matches!(event["type"].as_str(), Some("RUN_FINISHED" | "RUN_ERROR"));
                events.push(event);
                if done {
                    return events;
                }
            }
        }
        panic!("the socket closed before a terminal event: {events:?}");
    }
}

fn interrupt_id(events: &[Value]) -> String {
    let end = events.last().unwrap();
    assert_eq!(end["outcome"]["type"], "interrupt", "{end}");
    end["outcome"]["interrupts"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn websocket_runs_are_logged_rejoinable_and_resumable() {
    for server in servers("ws").await {
        let name = server.name;
        let thread = new_thread();
        let mut socket = server.socket().await;
        socket.send(&remember(&thread, "w1")).await;
        let first = socket.until_terminal().await;
        let interrupt = interrupt_id(&first);

        // What the socket got is the run's log, re-joinable over HTTP with its ids.
        let log = server.log("w1").await;
        assert_eq!(events(&log), first, "{name}");
        let ids: Vec<String> = (1..=log.len()).map(|n| format!("w1:{n}")).collect();
        assert_eq!(
            log.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
            ids,
            "{name}"
        );

        // The interrupt holds the thread on the socket too, and the answer resumes it there.
        socket.send(&hello(&thread, "w2")).await;
        let refused = socket.until_terminal().await;
        assert_eq!(types(&refused), ["RUN_STARTED", "RUN_ERROR"], "{name}");
        assert_eq!(refused[1]["code"], "interrupts_pending", "{name}");
        socket.send(&resume(&thread, "w3", &interrupt)).await;
        let resumed = socket.until_terminal().await;
        assert!(
            types(&resumed).contains(&"TOOL_CALL_RESULT"),
            "{name}: {resumed:?}"
        );
        assert_eq!(
            resumed.last().unwrap()["outcome"]["type"],
            "success",
            "{name}"
        );
        assert_eq!(events(&server.log("w3").await), resumed, "{name}");
        let view: Value = server
            .http
            .get(format!("{}/threads/{thread}", server.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(view["state"]["theme"], "dark", "{name}");
    }
}

#[tokio::test]
async fn refusals_are_the_same_over_http_and_the_websocket() {
    for server in servers("refusals").await {
        let name = server.name;
        let thread = new_thread();
        let mut long = hello(&thread, "busy-1");
        long["forwardedProps"] = json!({"scripted": {"tokens": 100_000, "delay_ms": 5}});
        let holding = server.post(&long).await;
        assert_eq!(holding.status(), 200);
        let mut holding = holding.bytes_stream();
        holding.next().await.unwrap().unwrap();

        let busy = server.post(&hello(&thread, "busy-2")).await;
        assert_eq!(busy.status(), 409, "{name}");
        let body: Value = busy.json().await.unwrap();
        assert_eq!(body["error"]["code"], "thread_busy", "{name}");
        let mut socket = server.socket().await;
        socket.send(&hello(&thread, "busy-3")).await;
        let refused = socket.until_terminal().await;
        assert_eq!(types(&refused), ["RUN_ERROR"], "{name}");
        assert_eq!(refused[0]["code"], "thread_busy", "{name}");

        // A run id a different request used.
        let taken = server
            .post(&hello(&uuid::Uuid::now_v7().to_string(), "busy-1"))
            .await;
        assert_eq!(taken.status(), 409, "{name}");
        let body: Value = taken.json().await.unwrap();
        assert_eq!(body["error"]["code"], "run_exists", "{name}");
        socket
            .send(&hello(&uuid::Uuid::now_v7().to_string(), "busy-1"))
            .await;
        let refused = socket.until_terminal().await;
        assert_eq!(refused[0]["code"], "run_exists", "{name}");
        drop(holding);
    }
}

#[tokio::test]
async fn the_same_request_a_resolved_resume_and_a_resume_under_the_runs_own_id() {
    for mut server in servers("idempotency").await {
        let name = server.name;
        // 1. The same request again: the stored run, replayed with its own ids.
        let thread = new_thread();
        let once = server.run(&hello(&thread, "same")).await;
        assert_eq!(
            server.summary("same").await.events,
            once.len() as u64,
            "{name}"
        );
        let again = server.run(&hello(&thread, "same")).await;
        assert_eq!(again, once, "{name}: replayed, ids and all");

        // 2. A resume answered already, under a new run id: refused, never another run's events.
        let thread = new_thread();
        let first = events(&server.run(&remember(&thread, "i1")).await);
        let interrupted = server.summary("i1").await;
        assert_eq!(interrupted.events, first.len() as u64, "{name}");
        assert_eq!(
            interrupted.end,
            Ended::Finished(agent_tower::run::StopReason::Interrupted)
        );
        let interrupt = interrupt_id(&first);
        let applied = server.run(&resume(&thread, "i2", &interrupt)).await;
        assert_eq!(
            applied.last().unwrap().1["outcome"]["type"],
            "success",
            "{name}"
        );
        let elsewhere = events(&server.run(&resume(&thread, "i3", &interrupt)).await);
        assert_eq!(types(&elsewhere), ["RUN_STARTED", "RUN_ERROR"], "{name}");
        assert_eq!(elsewhere[0]["runId"], "i3", "{name}");
        assert_eq!(elsewhere[1]["code"], "interrupt_already_resolved", "{name}");
        let refused = server.summary("i3").await;
        assert_eq!(
            (refused.events, refused.end),
            (2, Ended::Refused("interrupt_already_resolved")),
            "{name}"
        );

        // 3. The resume under the interrupted run's own id: that run goes on, under that id.
        let thread = new_thread();
        let first = server.run(&remember(&thread, "c1")).await;
        let interrupt = interrupt_id(&events(&first));
        let continued = server.run(&resume(&thread, "c1", &interrupt)).await;
        let ids: Vec<String> = (first.len() + 1..=first.len() + continued.len())
            .map(|n| format!("c1:{n}"))
            .collect();
        assert_eq!(
            continued
                .iter()
                .map(|(id, _)| id.clone())
                .collect::<Vec<_>>(),
            ids,
            "{name}: its log goes on"
        );
        let continued_events = events(&continued);
        assert_eq!(continued_events[0]["type"], "RUN_STARTED", "{name}");
        assert_eq!(continued_events[0]["runId"], "c1", "{name}");
        let result = continued_events
            .iter()
            .find(|e| e["type"] == "TOOL_CALL_RESULT")
            .expect("the approved call ran");
        assert_eq!(result["content"], "remembered theme", "{name}");
        assert_eq!(
            continued_events.last().unwrap()["outcome"]["type"],
            "success"
        );
        let summary = server.summary("c1").await;
        assert_eq!(
            summary.events,
            first.len() as u64,
            "{name}: the first segment"
        );
        let summary = server.summary("c1").await;
        assert_eq!(
            summary.events,
            continued.len() as u64,
            "{name}: the continuation"
        );
        let again = server.run(&resume(&thread, "c1", &interrupt)).await;
        assert_eq!(
            again, continued,
            "{name}: the same resume replays the continuation"
        );
        // Replayed, it reads as one run: the first segment's end at the interrupt and the
        // continuation's start are not sent again.
        let replay = server.log("c1").await;
        let one_run: Vec<(String, Value)> = first[..first.len() - 1]
            .iter()
            .chain(&continued[1..])
            .cloned()
            .collect();
        assert_eq!(replay, one_run, "{name}: one coherent run");
        assert_eq!(
            types(&events(&replay))
                .iter()
                .filter(|t| **t == "RUN_STARTED")
                .count(),
            1,
            "{name}"
        );
    }
}

stores::postgresql_answers_test!();
