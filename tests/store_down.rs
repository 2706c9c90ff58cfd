//! A run store that dies mid-run (a PostgreSQL server of the test's own, killed): the open stream
//! ends with a `RUN_ERROR` (`store_unavailable`) within a bounded time, and a new run is refused
//! with `503` before anything streams.

use crate::support::postgres;

use std::{num::NonZeroU32, time::Duration};

use agent_tower::{
    demo, permission::InterruptApprover, runs::Runs, server::AguiServer, store::RunStore,
};
use futures_util::StreamExt;
use postgres::PrivatePostgres;
use serde_json::{Value, json};

/// The events of an SSE body, with or without ids.
fn events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[tokio::test]
async fn a_store_that_dies_mid_run_ends_the_stream_and_refuses_new_runs() {
    let Some(database) = PrivatePostgres::start("store-down").await else {
        return;
    };
    let store = RunStore::open(&database.url).await.unwrap();
    let agent = demo::scripted()
        .policy(demo::policy())
        .approver(InterruptApprover::new(Duration::from_secs(600)))
        .max_turns(NonZeroU32::new(8).unwrap())
        .build();
    let router = AguiServer::with_runs(Runs::new(agent).log(store)).into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let http = reqwest::Client::new();

    let body = json!({
        "threadId": "t", "runId": "long",
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
        "forwardedProps": {"scripted": {"tokens": 100_000, "delay_ms": 2}},
    });
    let response = http.post(&base).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    while events(&text).len() < 10 {
        text.push_str(std::str::from_utf8(&stream.next().await.unwrap().unwrap()).unwrap());
    }

    assert_eq!(
        http.get(format!("{base}/ready"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    database.kill();
    let rest = async {
        while let Some(chunk) = stream.next().await {
            text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
        text
    };
    let text = tokio::time::timeout(Duration::from_secs(30), rest)
        .await
        .expect("the stream ends once the store is gone");
    let end = events(&text).pop().unwrap();
    assert_eq!(end["type"], "RUN_ERROR", "{end}");
    assert_eq!(end["code"], "store_unavailable", "{end}");
    assert!(
        text.ends_with(&format!("data: {end}\n\n")) && !text.contains("id: long:0"),
        "the follower's own error carries no id of the log"
    );

    let refused = tokio::time::timeout(
        Duration::from_secs(30),
        http.post(&base)
            .json(&json!({"threadId": "u", "runId": "new", "messages": []}))
            .send(),
    )
    .await
    .expect("answered in bounded time")
    .unwrap();
    assert_eq!(refused.status(), 503);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"]["code"], "store_unavailable");

    // Readiness says so within its own bound; liveness does not.
    let ready = tokio::time::timeout(
        Duration::from_secs(10),
        http.get(format!("{base}/ready")).send(),
    )
    .await
    .expect("/ready answers in bounded time")
    .unwrap();
    assert_eq!(ready.status(), 503);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["status"], "store_unavailable", "{ready}");
    let health = http.get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
}

/// A server on `store`: the URL of its `/ready`.
async fn served(store: RunStore) -> String {
    let router =
        AguiServer::with_runs(Runs::new(demo::scripted().build()).log(store)).into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ready = format!("http://{}/ready", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    ready
}

#[tokio::test]
async fn readiness_is_a_write_a_file_another_process_holds_is_not_ready() {
    let dir = std::env::temp_dir().join(format!("agent-tower-ready-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("runs.db");
    let store = RunStore::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let ready = served(store).await;
    let http = reqwest::Client::new();
    let status = || async { http.get(&ready).send().await.unwrap().status().as_u16() };
    assert_eq!(status().await, 200);

    // Another process takes the write lock (a backup tool, a stray `sqlite3` shell): reads
    // still answer, runs would wait and fail, and readiness says so.
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert_eq!(status().await, 503, "not ready while writes cannot be made");
    other.execute_batch("ROLLBACK").unwrap();
    assert_eq!(status().await, 200, "ready again once they can");
    std::fs::remove_dir_all(&dir).ok();
}

/// A disk nearly full takes writes that change nothing (a probe's) while runs' writes fail:
/// readiness reads the room the disk has left (for the store's user) against what the store
/// keeps free. Asked to keep more than any disk has, it is not ready; asked for nothing, it is.
#[tokio::test]
async fn a_disk_with_less_room_than_the_store_keeps_free_is_not_ready() {
    let dir = std::env::temp_dir().join(format!("agent-tower-room-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = RunStore::open(&format!("sqlite://{}", dir.join("runs.db").display()))
        .await
        .unwrap();
    let ready = served(store.clone()).await;
    let http = reqwest::Client::new();
    let answer = || async {
        let answer = http.get(&ready).send().await.unwrap();
        (
            answer.status().as_u16(),
            answer.json::<Value>().await.unwrap(),
        )
    };
    assert_eq!(answer().await.0, 200, "64 MiB free by default");
    store.min_free_disk(u64::MAX);
    let (status, body) = answer().await;
    assert_eq!(
        (status, &body["status"]),
        (503, &json!("store_unavailable")),
        "{body}"
    );
    store.min_free_disk(0);
    assert_eq!(answer().await.0, 200);
    std::fs::remove_dir_all(&dir).ok();
}

/// A run whose instance is gone and that no instance can end in its log (here, nobody recovers
/// it): a follower that re-joins it ends with `store_unavailable` once it was lost for two
/// leases, instead of keep-alives without end.
#[tokio::test]
async fn a_follower_of_a_run_nobody_can_end_gets_a_terminal_event_in_bounded_time() {
    use agent_tower::runs::{LoggedEvent, RunLog, Start};
    let dir = std::env::temp_dir().join(format!("store-orphan-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("runs.db").display());

    // An instance starts a run, logs its start, and goes silent.
    let gone = RunStore::open(&url).await.unwrap();
    let lease = gone
        .start(&Start::new("thread".into(), "orphan".into()))
        .await
        .unwrap();
    let started = LoggedEvent::from_json(
        1,
        r#"{"type":"RUN_STARTED","threadId":"thread","runId":"orphan"}"#,
    );
    gone.write(&lease, &[started], None).await.unwrap();
    gone.heartbeat(Duration::ZERO).await.unwrap();

    // Another instance, whose sweeper never runs, follows it.
    let store = RunStore::open(&url).await.unwrap();
    let runs = Runs::new(demo::scripted().build())
        .log(store)
        .lease(Duration::from_secs(1));
    let followed: Vec<_> = tokio::time::timeout(
        Duration::from_secs(20),
        runs.follow("orphan".into(), 0).collect::<Vec<_>>(),
    )
    .await
    .expect("the follower ends");
    let last = followed.last().unwrap().event().unwrap();
    let last = serde_json::to_value(&last).unwrap();
    assert_eq!(followed.len(), 2, "{followed:?}");
    assert_eq!(last["type"], "RUN_ERROR", "{last}");
    assert_eq!(last["code"], "store_unavailable", "{last}");
    std::fs::remove_dir_all(&dir).ok();
}
