//! The server's durable mode over real HTTP, on a SQLite file and on PostgreSQL: interrupts and
//! `resume[]`, resumable streams, the review queue.

use crate::support;
use crate::support::frames;
use crate::support::stores;
use crate::support::verified;

use std::{num::NonZeroU32, time::Duration};

use agent_tower::{
    demo,
    permission::{Decision, InterruptApprover},
    runs::{DurableLog, RunLog, Runs, SENT_AHEAD, Start, TAKEOVER},
    server::AguiServer,
    store::RunStore,
    transport::OnDisconnect,
};
use frames::frames;
use futures_util::StreamExt;
use serde_json::{Value, json};

#[derive(Clone)]
struct Server {
    base: String,
    http: reqwest::Client,
}

/// A durable server on the store at `url`, listening on a free port.
async fn serve(url: &str) -> Server {
    serve_leased(url, None).await
}

/// A durable server on the store at `url` whose runs' leases last `lease` (default: 30 s), so
/// that it beats every third of it.
async fn serve_leased(url: &str, lease: Option<Duration>) -> Server {
    serve_on(url, lease, None).await
}

/// A durable server on the store at `url`; with `rejoin_grace`, a run whose client went away is
/// cancelled once nobody has followed it for that long (else it goes on).
async fn serve_on(url: &str, lease: Option<Duration>, rejoin_grace: Option<Duration>) -> Server {
    let store = RunStore::open(url).await.unwrap();
    let agent = demo::scripted()
        .policy(demo::policy())
        .approver(InterruptApprover::new(Duration::from_secs(600)))
        .max_turns(NonZeroU32::new(8).unwrap())
        .build();
    let runs = Runs::new(agent).log(store);
    let runs = match lease {
        Some(lease) => runs.lease(lease),
        None => runs,
    };
    let server = AguiServer::with_runs(runs);
    let router = match rejoin_grace {
        Some(grace) => server.rejoin_grace(grace),
        None => server.on_disconnect(OnDisconnect::Continue),
    }
    .into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    Server {
        base,
        http: reqwest::Client::new(),
    }
}

async fn servers(test: &str) -> Vec<(&'static str, Server)> {
    let mut servers = Vec::new();
    for (name, url) in stores::store_urls(test).await {
        servers.push((name, serve(&url).await));
    }
    servers
}

fn types(frames: &[(String, Value)]) -> Vec<&str> {
    frames
        .iter()
        .map(|(_, e)| e["type"].as_str().unwrap())
        .collect()
}

impl Server {
    async fn run(&self, body: Value) -> Vec<(String, Value)> {
        let response = self.http.post(&self.base).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 200, "{body}");
        frames(&response.text().await.unwrap())
    }

    async fn resolve(&self, interrupt: &str, body: Value) -> reqwest::Response {
        self.http
            .post(format!("{}/interrupts/{interrupt}/resolve", self.base))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Starts a long run, reads its first `n` events and goes away; the run goes on.
    async fn watch_then_leave(&self, thread: &str, run: &str, n: usize) -> Vec<(String, Value)> {
        let body = json!({
            "threadId": thread, "runId": run,
            "messages": [{"id": "u1", "role": "user", "content": "hello"}],
            "forwardedProps": {"scripted": {"tokens": 1000, "delay_ms": 5}},
        });
        // A page that re-joins its runs after a reload.
        let response = self.http.post(&self.base).header("prefer", "rejoin");
        let response = response.json(&body).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let mut body = response.bytes_stream();
        let mut text = String::new();
        while frames(&text).len() < n {
            text.push_str(std::str::from_utf8(&body.next().await.unwrap().unwrap()).unwrap());
        }
        frames(&text)
    }

    /// `GET /runs/{run}/events` after the event `last_id`.
    async fn rejoin(&self, run: &str, last_id: &str) -> reqwest::Response {
        self.http
            .get(format!("{}/runs/{run}/events", self.base))
            .header("last-event-id", last_id)
            .send()
            .await
            .unwrap()
    }

    /// `GET /threads/{thread}`.
    async fn thread(&self, thread: &str) -> Value {
        self.get(&format!("/threads/{thread}"))
            .await
            .json()
            .await
            .unwrap()
    }

    async fn post(&self, path: &str) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
    }
}

fn remember(thread: &str, run: &str) -> Value {
    json!({
        "threadId": thread, "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": r#"remember {"key": "theme", "value": "dark"}"#}],
    })
}

fn resume(thread: &str, run: &str, entries: Value) -> Value {
    json!({"threadId": thread, "runId": run, "messages": [], "resume": entries})
}

#[tokio::test]
async fn an_interrupted_run_is_resumed_by_the_next_run_once() {
    for (name, server) in servers("interrupt").await {
        let thread = format!("t-{}", uuid::Uuid::now_v7());
        let first = server.run(remember(&thread, "r1")).await;
        let ids: Vec<&str> = first.iter().map(|(id, _)| id.as_str()).collect();
        let expected: Vec<String> = (1..=first.len()).map(|n| format!("r1:{n}")).collect();
        assert_eq!(ids, expected, "{name}");
        let (_, end) = first.last().unwrap();
        assert_eq!(end["outcome"]["type"], "interrupt", "{name}: {end}");
        let interrupt = &end["outcome"]["interrupts"][0];
        let (id, call) = (
            interrupt["id"].as_str().unwrap(),
            interrupt["toolCallId"].clone(),
        );
        assert!(!types(&first).contains(&"TOOL_CALL_RESULT"), "{name}");

        // The queue shows it.
        let queue: Value = server
            .get("/interrupts?status=pending")
            .await
            .json()
            .await
            .unwrap();
        assert!(
            queue["interrupts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|i| i["id"] == id),
            "{name}"
        );

        // Runs that do not answer it, or answer it wrongly, are refused with a clear code.
        let cases = [
            (remember(&thread, "r-no-resume"), "interrupts_pending"),
            (
                resume(
                    &thread,
                    "r-bad",
                    json!([{"interruptId": id, "status": "resolved", "payload": {"ok": 1}}]),
                ),
                "resume_invalid",
            ),
            (
                resume(
                    &thread,
                    "r-unknown",
                    json!([{"interruptId": "nope", "status": "resolved", "payload": {"approved": true}}]),
                ),
                "unknown_interrupt",
            ),
        ];
        for (body, code) in cases {
            let refused = server.run(body).await;
            assert_eq!(types(&refused), ["RUN_STARTED", "RUN_ERROR"], "{name}");
            assert_eq!(refused[1].1["code"], code, "{name}");
        }

        // The answer: the call runs under its original id, the model goes on.
        let answer =
            json!([{"interruptId": id, "status": "resolved", "payload": {"approved": true}}]);
        let second = server.run(resume(&thread, "r2", answer.clone())).await;
        let result = second
            .iter()
            .find(|(_, e)| e["type"] == "TOOL_CALL_RESULT")
            .expect("a TOOL_CALL_RESULT");
        assert_eq!(result.1["toolCallId"], call, "{name}");
        assert_eq!(
            second.last().unwrap().1["outcome"]["type"],
            "success",
            "{name}"
        );

        // The same request again replays that run, with its own ids; the same answer under
        // another run id is refused (never another run's events); so is the queue.
        let again = server.run(resume(&thread, "r2", answer.clone())).await;
        assert_eq!(again, second, "{name}: an idempotent replay");
        let elsewhere = server.run(resume(&thread, "r3", answer)).await;
        assert_eq!(types(&elsewhere), ["RUN_STARTED", "RUN_ERROR"], "{name}");
        assert_eq!(elsewhere[0].1["runId"], "r3", "{name}");
        assert_eq!(
            elsewhere[1].1["code"], "interrupt_already_resolved",
            "{name}"
        );
        let resolve = server
            .resolve(id, json!({"payload": {"approved": true}}))
            .await;
        assert_eq!(resolve.status(), 409, "{name}");

        let thread_view = server.thread(&thread).await;
        let statuses: Vec<&str> = thread_view["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["status"].as_str().unwrap())
            .collect();
        assert_eq!(
            statuses.iter().filter(|s| **s == "failed").count(),
            4,
            "{name}: the refusals are runs of their own: {statuses:?}"
        );
        assert!(
            statuses.contains(&"interrupted") && statuses.contains(&"finished"),
            "{name}"
        );
        assert_eq!(thread_view["state"]["theme"], "dark", "{name}");
    }
}

/// `{"approved": true, "always": true}`: the next call of the tool in the thread runs unasked;
/// another thread is asked.
#[tokio::test]
async fn an_answer_given_always_decides_the_tools_later_calls_in_the_thread() {
    for (name, server) in servers("always").await {
        let thread = format!("t-{}", uuid::Uuid::now_v7());
        let (id, _) = interrupt_of(&server.run(remember(&thread, "a1")).await);
        let always = json!([{
            "interruptId": id, "status": "resolved", "payload": {"approved": true, "always": true},
        }]);
        let resumed = server.run(resume(&thread, "a2", always)).await;
        assert_eq!(
            resumed.last().unwrap().1["outcome"]["type"],
            "success",
            "{name}"
        );

        let next = server
            .run(json!({
                "threadId": thread, "runId": "a3",
                "messages": [
                    {"id": "u1", "role": "user", "content": r#"remember {"key": "theme", "value": "dark"}"#},
                    {"id": "u2", "role": "user", "content": r#"remember {"key": "font", "value": "serif"}"#},
                ],
            }))
            .await;
        let (_, end) = next.last().unwrap();
        assert_eq!(end["outcome"]["type"], "success", "{name}: {end}");
        assert!(types(&next).contains(&"TOOL_CALL_RESULT"), "{name}");
        let thread_view = server.thread(&thread).await;
        assert_eq!(thread_view["state"]["font"], "serif", "{name}");

        let other = format!("t-{}", uuid::Uuid::now_v7());
        interrupt_of(&server.run(remember(&other, "b1")).await);
    }
}

#[tokio::test]
async fn the_review_queue_resolves_out_of_band_and_anyone_can_watch() {
    for (name, server) in servers("queue").await {
        let thread = format!("t-{}", uuid::Uuid::now_v7());
        let first = server.run(remember(&thread, "q1")).await;
        let id = first.last().unwrap().1["outcome"]["interrupts"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let resolved = server
            .resolve(
                &id,
                json!({"payload": {"approved": false, "feedback": "not now"}}),
            )
            .await;
        assert_eq!(resolved.status(), 202, "{name}");
        let resolved: Value = resolved.json().await.unwrap();
        let events = server
            .get(resolved["events"].as_str().unwrap())
            .await
            .text()
            .await
            .unwrap();
        let events = frames(&events);
        let result = events
            .iter()
            .find(|(_, e)| e["type"] == "TOOL_CALL_RESULT")
            .expect("the rejection is the call's result");
        assert!(
            result.1["content"].as_str().unwrap().contains("not now"),
            "{name}"
        );
        assert_eq!(events.last().unwrap().1["type"], "RUN_FINISHED", "{name}");
        let twice = server
            .resolve(&id, json!({"payload": {"approved": true}}))
            .await;
        assert_eq!(twice.status(), 409, "{name}");
    }
}

#[tokio::test]
async fn a_client_that_left_rejoins_with_last_event_id_and_misses_nothing() {
    for (name, server) in servers("rejoin").await {
        let thread = format!("t-{}", uuid::Uuid::now_v7());
        let seen = server.watch_then_leave(&thread, "long", 5).await;
        let (last_id, _) = seen.last().unwrap().clone();

        let busy = server
            .http
            .post(&server.base)
            .json(&remember(&thread, "other"))
            .send()
            .await
            .unwrap();
        assert_eq!(busy.status(), 409, "{name}: one active run per thread");

        let rest = server.rejoin("long", &last_id).await;
        assert_eq!(rest.status(), 200, "{name}");
        let rest = frames(&rest.text().await.unwrap());
        let frames: Vec<(String, Value)> = seen.iter().chain(&rest).cloned().collect();
        let all: Vec<String> = frames.iter().map(|(id, _)| id.clone()).collect();
        let expected = verified::ids_in_order(&frames, "long");
        assert_eq!(all, expected, "{name}: every event once, in order");
        assert_eq!(rest.last().unwrap().1["type"], "RUN_FINISHED", "{name}");

        // Up to date with a finished run: nothing to resume.
        let done = server.rejoin("long", all.last().unwrap()).await;
        assert_eq!(done.status(), 204, "{name}");
        let wrong = server.rejoin("long", "other:3").await;
        assert_eq!(wrong.status(), 400, "{name}");
        assert_eq!(
            server.get("/runs/nope/events").await.status(),
            404,
            "{name}"
        );
    }
}

/// `resume[]` approving `interrupt`.
fn approve(interrupt: &str) -> Value {
    json!([{"interruptId": interrupt, "status": "resolved", "payload": {"approved": true}}])
}

/// The id and tool call id of the interrupt a run ended with.
fn interrupt_of(events: &[(String, Value)]) -> (String, Value) {
    let (_, end) = events.last().unwrap();
    assert_eq!(end["outcome"]["type"], "interrupt", "{end}");
    let interrupt = &end["outcome"]["interrupts"][0];
    (
        interrupt["id"].as_str().unwrap().to_owned(),
        interrupt["toolCallId"].clone(),
    )
}

#[tokio::test]
async fn two_instances_on_one_postgres_store_act_as_one() {
    let Some(url) = stores::postgres("instances").await else {
        return;
    };
    let (a, b) = (serve(&url).await, serve(&url).await);

    // Interrupted on A, resumed on B.
    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let (id, call) = interrupt_of(&a.run(remember(&thread, "i1")).await);
    let resumed = b.run(resume(&thread, "i2", approve(&id))).await;
    let result = resumed
        .iter()
        .find(|(_, e)| e["type"] == "TOOL_CALL_RESULT")
        .expect("the approved call ran on B");
    assert_eq!(result.1["toolCallId"], call);
    assert_eq!(resumed.last().unwrap().1["outcome"]["type"], "success");

    // Resolved on both at once: exactly one wins.
    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let (id, _) = interrupt_of(&a.run(remember(&thread, "j1")).await);
    let answer = json!({"payload": {"approved": true}});
    let (on_a, on_b) = tokio::join!(a.resolve(&id, answer.clone()), b.resolve(&id, answer));
    let mut statuses = [on_a.status().as_u16(), on_b.status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [202, 409], "one resolution wins");

    // A streams a run; its client leaves and re-joins on B while A is still streaming.
    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let seen = a.watch_then_leave(&thread, "k1", 5).await;
    let view = b.thread(&thread).await;
    assert_eq!(view["runs"][0]["status"], "running", "A is still streaming");
    let rest = b.rejoin("k1", &seen.last().unwrap().0).await;
    assert_eq!(rest.status(), 200);
    let rest = frames(&rest.text().await.unwrap());
    let all: Vec<(String, Value)> = seen.into_iter().chain(rest).collect();
    let ids: Vec<&str> = all.iter().map(|(id, _)| id.as_str()).collect();
    let expected = verified::ids_in_order(&all, "k1");
    assert_eq!(ids, expected, "every event once, in order");
    assert_eq!(all.last().unwrap().1["type"], "RUN_FINISHED");
    let log = frames(&a.get("/runs/k1/events?after=0").await.text().await.unwrap());
    assert_eq!(log, all, "what the client saw is the log");
}

#[tokio::test]
async fn the_official_client_answers_interrupts_through_its_verifier() {
    let server = serve(&stores::sqlite("client")).await;
    let output = support::node("agui-interrupt.mjs", &[&format!("{}/", server.base)], None).await;
    assert!(
        output.contains("all interrupt scenarios passed"),
        "{output}"
    );
}

#[tokio::test]
async fn the_official_client_follows_a_background_run_answered_out_of_band_to_its_end() {
    for (name, url) in stores::store_urls("background-client").await {
        let server = serve(&url).await;
        let output =
            support::node("agui-background.mjs", &[&format!("{}/", server.base)], None).await;
        assert!(
            output.contains("followed to its end by the official client"),
            "{name}: {output}"
        );
    }
}

#[tokio::test]
async fn a_thread_connected_on_another_instance_shows_its_interrupt_and_answers_it() {
    // On SQLite the two "instances" are one; on PostgreSQL, two servers on one database.
    let mut pairs = Vec::new();
    for (name, url) in stores::store_urls("connect").await {
        pairs.push((name, serve(&url).await, serve(&url).await));
    }
    for (name, a, b) in pairs {
        let thread = format!("t-{}", uuid::Uuid::now_v7());
        let asked = a.run(remember(&thread, "r1")).await;
        let interrupt = asked.last().unwrap().1["outcome"]["interrupts"][0].clone();

        // Another screen, through the other instance, knows only the thread's id.
        let connected = frames(
            &b.get(&format!("/threads/{thread}/events"))
                .await
                .text()
                .await
                .unwrap(),
        );
        assert_eq!(
            types(&connected),
            ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"],
            "{name}"
        );
        let (_, end) = connected.last().unwrap();
        assert_eq!(
            end["outcome"]["interrupts"],
            json!([interrupt]),
            "{name}: the same interrupt"
        );
        assert!(
            connected.iter().all(|(id, _)| id.is_empty()),
            "{name}: not in the log"
        );

        // It answers; the first screen's late answer is refused; both then see the same thread.
        let entry = json!([{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": true}}]);
        let answered = b.run(resume(&thread, "r2", entry.clone())).await;
        assert_eq!(answered.last().unwrap().1["type"], "RUN_FINISHED", "{name}");
        let late = a.run(resume(&thread, "r3", entry)).await;
        assert_eq!(
            late.last().unwrap().1["code"],
            "interrupt_already_resolved",
            "{name}"
        );
        let again = frames(
            &a.get(&format!("/threads/{thread}/events"))
                .await
                .text()
                .await
                .unwrap(),
        );
        let (_, end) = again.last().unwrap();
        assert_eq!(end["outcome"]["type"], "success", "{name}: nothing waits");
        let (_, snapshot) = &again[1];
        assert!(
            snapshot["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["role"] == "tool" && m["toolCallId"] == interrupt["toolCallId"]),
            "{name}: the approved call's result is in the conversation: {snapshot}"
        );
    }
}

#[tokio::test]
async fn a_screen_following_a_thread_sees_the_answer_another_gave() {
    // Two instances on PostgreSQL; one on SQLite (a file has one server: there is no other
    // instance to hear from).
    let mut pairs = Vec::new();
    for (name, url) in stores::store_urls("follow-thread").await {
        let a = serve(&url).await;
        let b = if name == "sqlite" {
            a.clone()
        } else {
            serve(&url).await
        };
        pairs.push((name, a, b));
    }
    for (name, a, b) in pairs {
        let thread = format!("t-{}", uuid::Uuid::now_v7());
        let asked = a.run(remember(&thread, "r1")).await;
        let interrupt = asked.last().unwrap().1["outcome"]["interrupts"][0].clone();

        // The first screen follows the thread through A: the thread as it is, then what comes.
        let response = a
            .get(&format!("/threads/{thread}/events?follow=true"))
            .await;
        let mut body = response.bytes_stream();
        let mut text = String::new();
        while !frames(&text)
            .iter()
            .any(|(_, e)| e["type"] == "RUN_FINISHED")
        {
            text.push_str(std::str::from_utf8(&body.next().await.unwrap().unwrap()).unwrap());
        }
        assert_eq!(
            frames(&text).last().unwrap().1["outcome"]["interrupts"][0]["id"],
            interrupt["id"],
            "{name}"
        );

        // The second screen answers through B; the first sees the run that answer started.
        let entry = json!([{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": true}}]);
        let answered = b.run(resume(&thread, "r2", entry)).await;
        let ended = |text: &str| {
            frames(text)
                .iter()
                .any(|(_, e)| e["type"] == "RUN_FINISHED" && e["runId"] == "r2")
        };
        let seen = tokio::time::timeout(Duration::from_secs(10), async {
            while !ended(&text) {
                text.push_str(std::str::from_utf8(&body.next().await.unwrap().unwrap()).unwrap());
            }
            text
        })
        .await
        .unwrap_or_else(|_| panic!("{name}: the first screen never saw the answer"));
        let later: Vec<Value> = frames(&seen)
            .into_iter()
            .skip_while(|(_, e)| e["runId"] != "r2")
            .map(|(id, e)| {
                assert!(id.is_empty(), "{name}: a later run's events carry no id");
                e
            })
            .collect();
        let answered: Vec<Value> = answered.into_iter().map(|(_, e)| e).collect();
        assert_eq!(
            later, answered,
            "{name}: the answer's run, as its own screen saw it"
        );
    }
}

#[tokio::test]
async fn a_run_rejoined_on_another_instance_outlives_its_page() {
    let Some(url) = stores::postgres("rejoin-elsewhere").await else {
        return;
    };
    // The page leaves the instance that drives the run and re-joins through another (a load
    // balancer's choice); the run lasts ten graces.
    let grace = Duration::from_millis(500);
    let a = serve_on(&url, None, Some(grace)).await;
    let b = serve_on(&url, None, Some(grace)).await;
    let (thread, run) = (
        format!("t-{}", uuid::Uuid::now_v7()),
        format!("r-{}", uuid::Uuid::now_v7()),
    );
    let seen = a.watch_then_leave(&thread, &run, 3).await;
    let rejoined = b.rejoin(&run, &seen.last().unwrap().0).await;
    assert_eq!(rejoined.status(), 200);
    let rest = frames(&rejoined.text().await.unwrap());
    let (_, last) = rest.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED", "{last}");
    assert_eq!(last["outcome"]["type"], "success", "not cancelled: {last}");
    let tokens = types(&seen)
        .into_iter()
        .chain(types(&rest))
        .filter(|t| *t == "TEXT_MESSAGE_CONTENT")
        .count();
    assert_eq!(tokens, 1000, "every token, once");
    assert_eq!(b.thread(&thread).await["runs"][0]["status"], "finished");
}

#[tokio::test]
async fn a_run_is_cancelled_from_any_instance() {
    // Two instances on one store. On SQLite the one driving the run learns of the cancellation at
    // its next heartbeat (a short lease here); on PostgreSQL from a notification (the default
    // lease: without it the run would end on its own before the first heartbeat).
    let sqlite = stores::sqlite("cancel");
    let lease = Some(Duration::from_millis(300));
    let mut pairs = vec![(
        "sqlite",
        serve_leased(&sqlite, lease).await,
        serve_leased(&sqlite, lease).await,
    )];
    if let Some(url) = stores::postgres("cancel").await {
        pairs.push(("postgres", serve(&url).await, serve(&url).await));
    }
    for (name, a, b) in pairs {
        let (thread, run) = (
            format!("t-{}", uuid::Uuid::now_v7()),
            format!("r-{}", uuid::Uuid::now_v7()),
        );
        let long = json!({
            "threadId": thread, "runId": run,
            "messages": [{"id": "u1", "role": "user", "content": "hello"}],
            "forwardedProps": {"scripted": {"tokens": 1000, "delay_ms": 5}},
        });
        let response = a.http.post(&a.base).json(&long).send().await.unwrap();
        let mut body = response.bytes_stream();
        let mut text = String::new();
        while frames(&text).len() < 3 {
            text.push_str(std::str::from_utf8(&body.next().await.unwrap().unwrap()).unwrap());
        }

        // Asked of the other instance: accepted, and the stream on the first ends cancelled.
        let asked = b.post(&format!("/runs/{run}/cancel")).await;
        assert_eq!(asked.status(), 202, "{name}");
        let asked: Value = asked.json().await.unwrap();
        assert_eq!(asked["status"], "cancelling", "{name}");
        assert_eq!(asked["events"], format!("/runs/{run}/events"));
        while let Some(chunk) = body.next().await {
            text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
        let events = frames(&text);
        let tokens = types(&events)
            .iter()
            .filter(|t| **t == "TEXT_MESSAGE_CONTENT")
            .count();
        assert!(
            tokens < 1000,
            "{name}: stopped before its end ({tokens} tokens)"
        );
        let (_, last) = events.last().unwrap();
        assert_eq!(
            (last["type"].as_str(), last["code"].as_str()),
            (Some("RUN_ERROR"), Some("cancelled")),
            "{name}: a client of AG-UI 0.0.x is told so"
        );

        // Asking again changes nothing; the run's status says what happened.
        let again = a.post(&format!("/runs/{run}/cancel")).await;
        assert_eq!(again.status(), 200, "{name}");
        assert_eq!(again.json::<Value>().await.unwrap()["status"], "cancelled");
        assert_eq!(b.thread(&thread).await["runs"][0]["status"], "cancelled");
        assert_eq!(b.post("/runs/nope/cancel").await.status(), 404);
    }
}

stores::postgresql_answers_test!();

/// Starts a run of "hello" on a fresh thread on `store` and writes none of its events, as an
/// instance that dies before its first commit does (at `eager`, it may have sent some); with
/// `kept`, the run keeps its request (it can be continued). Its id.
async fn begun_then_cut(store: &RunStore, kept: bool) -> String {
    let (thread, run) = (
        format!("t-{}", uuid::Uuid::now_v7()),
        format!("r-{}", uuid::Uuid::now_v7()),
    );
    let input = json!({
        "threadId": thread, "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
    });
    let mut start = Start::new(thread.as_str().into(), run.as_str().into());
    start.request_hash = format!("hash-of-{run}");
    start.request = kept.then_some(input);
    store.start(&start).await.unwrap();
    run
}

#[tokio::test]
async fn a_run_cut_before_its_start_was_committed_is_taken_over_as_one_well_formed_run() {
    for (name, url) in stores::store_urls("unstarted").await {
        // A run stopped at an interrupt, which an answer given out of band continues under its
        // own id: its second segment.
        let thread = format!("t-{}", uuid::Uuid::now_v7());
        let segmented = format!("r-{}", uuid::Uuid::now_v7());
        let first = serve(&url).await.run(remember(&thread, &segmented)).await;
        let interrupt = first.last().unwrap().1["outcome"]["interrupts"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();

        let dead = RunStore::open(&url).await.unwrap();
        let (continued, ended) = (
            begun_then_cut(&dead, true).await,
            begun_then_cut(&dead, false).await,
        );
        let mut answered = Start::new(thread.as_str().into(), segmented.as_str().into());
        answered.request_hash = format!("hash-of-{segmented}-answered");
        answered.resume = vec![(interrupt.as_str().into(), Decision::Approve)];
        answered.request = Some(resume(&thread, &segmented, approve(&interrupt)));
        dead.start(&answered).await.unwrap();
        // Its heartbeat ends now: the next instance takes them over at once.
        dead.release().await.unwrap();
        let server = serve(&url).await;
        let log_of = |run: String| {
            let server = server.clone();
            async move {
                let response = server.get(&format!("/runs/{run}/events?after=0")).await;
                frames(&response.text().await.unwrap())
            }
        };

        // Continued: opened by the takeover (the run answers what it was asked), then marked.
        let log = log_of(continued.clone()).await;
        let types = verified::one_run(&log, name);
        assert_eq!(types[..2], ["RUN_STARTED", "CUSTOM"], "{name}: {types:?}");
        assert_eq!(log[1].1["name"], TAKEOVER, "{name}");
        assert_eq!(log[1].1["value"]["attempt"], 2, "{name}");
        assert_eq!(
            log[0].1["input"]["messages"][0]["content"], "hello",
            "{name}: {}",
            log[0].1
        );
        assert_eq!(types.last(), Some(&"RUN_FINISHED"), "{name}: {types:?}");
        let ids: Vec<String> = log.iter().map(|(id, _)| id.clone()).collect();
        assert_eq!(
            ids[0],
            format!("{continued}:{}", SENT_AHEAD + 1),
            "{name}: after every number the dead instance could have sent"
        );
        assert_eq!(ids, verified::ids_in_order(&log, &continued), "{name}");

        // Kept no request: ended, as a run.
        let log = log_of(ended.clone()).await;
        let types = verified::one_run(&log, name);
        assert_eq!(types, ["RUN_STARTED", "RUN_ERROR"], "{name}");
        assert_eq!(log[1].1["code"], "run_lost", "{name}");
        assert_eq!(log[1].0, format!("{ended}:{}", SENT_AHEAD + 2), "{name}");

        // The second segment, cut before its start, is opened by the takeover after the
        // first's end: a follower reads one run (neither that end nor the next start), the
        // takeover numbered after the start it wrote.
        let log = log_of(segmented.clone()).await;
        let went_on = first.len() - 1;
        assert_eq!(
            log[..went_on],
            first[..went_on],
            "{name}: the first segment stays"
        );
        let types = verified::one_run(&log, name);
        assert_eq!(log[went_on].1["name"], TAKEOVER, "{name}: {types:?}");
        assert_eq!(
            (log[went_on].0.as_str(), types.last()),
            (
                format!("{segmented}:{}", first.len() as u64 + SENT_AHEAD + 2).as_str(),
                Some(&"RUN_FINISHED")
            ),
            "{name}: {types:?}"
        );
        let results = types.iter().filter(|t| **t == "TOOL_CALL_RESULT").count();
        assert_eq!(results, 1, "{name}: {types:?}");
        let roles: Vec<Value> = (server.thread(&thread).await["messages"].as_array())
            .unwrap()
            .iter()
            .map(|message| message["role"].clone())
            .collect();
        assert_eq!(
            roles,
            ["user", "assistant", "tool", "assistant"],
            "{name}: each turn once"
        );
    }
}
