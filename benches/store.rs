//! The run store's append path: what writing every event to a durable log costs.
//!
//! ```text
//! cargo bench --bench store --features store,server
//! ```
//!
//! 1. **Appends**: one run's log written in batches of 1, 8, 64 and 512 events (each batch one
//!    transaction, committed with fsync: SQLite in WAL mode with `synchronous=FULL`); reports
//!    events/s and the median commit. On PostgreSQL too when `DATABASE_URL` is set.
//! 2. **Per token, through the server**: one scripted run of 20,000 tokens posted to the AG-UI
//!    router in process (no sockets), without a store and in durable mode (every event committed
//!    to the log before the client reads it; the run's events gathered into a batch while the
//!    previous one commits). Reports events/s and ns/event.
//!
//! 3. **Whole runs**: 50 tasks each starting runs back to back, every run written as one batch
//!    of 100 token events with its end (conversation kept), as a scripted run is; reports runs/s
//!    and the CPU time this process spent per run (the store's own cost, no HTTP).
//!
//! Set `STORE_EVENTS` (events per measurement, default 20,000) to change the size.

use std::{
    num::NonZeroU32,
    path::PathBuf,
    time::{Duration, Instant},
};

use agent_tower::{
    demo,
    id::{RunId, ThreadId},
    runs::{LoggedEvent, RunEnd, RunLog, RunStatus, Runs, Start},
    server::AguiServer,
    store::RunStore,
};
use axum::{body::Body, http::Request};
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;

fn main() {
    // Criterion-style flags from `cargo bench` are ignored.
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(bench());
}

fn events_per_measurement() -> usize {
    std::env::var("STORE_EVENTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000)
}

/// A fresh SQLite file, removed (with its WAL) when dropped.
struct TempDb(PathBuf);

impl TempDb {
    fn new() -> Self {
        Self(std::env::temp_dir().join(format!("agent-tower-bench-{}.db", uuid::Uuid::now_v7())))
    }

    fn url(&self) -> String {
        format!("sqlite://{}", self.0.display())
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

/// A text delta as the AG-UI layer writes it to the log.
fn event(n: usize) -> String {
    json!({
        "type": "TEXT_MESSAGE_CONTENT",
        "messageId": "0194e4a5-7c1d-7b6e-9f00-5d1c2a3b4c5d",
        "delta": format!(" token{n}"),
    })
    .to_string()
}

/// `n` events numbered after `last`.
fn batch(last: usize, n: usize) -> Vec<LoggedEvent> {
    (1..=n)
        .map(|i| LoggedEvent::from_json((last + i) as u64, event(last + i)))
        .collect()
}

fn ids() -> (ThreadId, RunId) {
    let id = uuid::Uuid::now_v7();
    (format!("t-{id}").into(), format!("r-{id}").into())
}

async fn appends(name: &str, url: &str, total: usize) {
    let store = RunStore::open(url).await.expect("the store opens");
    for size in [1, 8, 64, 512] {
        // A commit per event is slow: fewer of them for small batches.
        let total = if size == 1 { total / 10 } else { total };
        let (thread, run) = ids();
        let lease = store
            .start(&Start::new(thread, run))
            .await
            .expect("the run starts");
        let mut commits = Vec::with_capacity(total / size + 1);
        let started = Instant::now();
        let mut written = 0;
        while written < total {
            let events = batch(written, size.min(total - written));
            let commit = Instant::now();
            store
                .write(&lease, &events, None)
                .await
                .expect("the append commits");
            commits.push(commit.elapsed());
            written += events.len();
        }
        let elapsed = started.elapsed();
        commits.sort_unstable();
        println!(
            "| {name} | {size} | {total} | {:.0} | {:.2} ms |",
            total as f64 / elapsed.as_secs_f64(),
            commits[commits.len() / 2].as_secs_f64() * 1e3,
        );
    }
}

/// The CPU time this process has used (user and system), from `/proc/self/stat`.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command, which is in parentheses: utime and stime are the 12th and
    // 13th of them, in clock ticks (100 per second on Linux).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a command")
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
}

/// `tasks` tasks each logging `runs` whole runs of 100 tokens back to back.
async fn whole_runs(name: &str, url: &str, tasks: usize, runs: usize) {
    let store = RunStore::open(url).await.expect("the store opens");
    let reply = agent_tower::message::Message::assistant("m".into(), "token ".repeat(100));
    let (cpu, started) = (cpu_time(), Instant::now());
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            let (store, reply) = (store.clone(), reply.clone());
            tokio::spawn(async move {
                for _ in 0..runs {
                    let (thread, run) = ids();
                    let lease = store
                        .start(&Start::new(thread, run))
                        .await
                        .expect("the run starts");
                    let mut end = RunEnd::new(RunStatus::Finished);
                    end.messages = Some(vec![reply.clone()]);
                    store
                        .write(&lease, &batch(0, 100), Some(&end))
                        .await
                        .expect("the run is written");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a worker");
    }
    let (elapsed, cpu) = (started.elapsed(), cpu_time() - cpu);
    let total = (tasks * runs) as f64;
    println!(
        "| {name} | {tasks} | {} | {:.0} | {:.0} µs |",
        tasks * runs,
        total / elapsed.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / total,
    );
}

/// Posts one scripted run of `tokens` tokens; returns its events and how long it took.
async fn one_run(router: axum::Router, tokens: usize) -> (usize, Duration) {
    let (thread, run) = ids();
    let body = json!({
        "threadId": thread, "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
        "forwardedProps": {"scripted": {"tokens": tokens}},
    });
    let request = Request::post("/")
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(Body::from(body.to_string()))
        .expect("a request");
    let started = Instant::now();
    let response = router.oneshot(request).await.expect("a response");
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    let elapsed = started.elapsed();
    let text = std::str::from_utf8(&bytes).expect("UTF-8");
    let events = text.matches("\n\n").count();
    assert!(
        text.contains("RUN_FINISHED"),
        "the run finished: {text:.200}"
    );
    (events, elapsed)
}

async fn through_server(name: &str, store: Option<&str>, tokens: usize) {
    let runs = Runs::new(
        demo::scripted()
            .max_turns(NonZeroU32::new(4).expect("not zero"))
            .build(),
    );
    let runs = match store {
        Some(url) => runs.log(RunStore::open(url).await.expect("the store opens")),
        None => runs,
    };
    let router = AguiServer::with_runs(runs).into_router();
    // One warm-up run, then the best of three.
    one_run(router.clone(), tokens / 10).await;
    let mut best: Option<(usize, Duration)> = None;
    for _ in 0..3 {
        let (events, elapsed) = one_run(router.clone(), tokens).await;
        if best.is_none_or(|(_, b)| elapsed < b) {
            best = Some((events, elapsed));
        }
    }
    let (events, elapsed) = best.expect("three runs");
    println!(
        "| {name} | {events} | {:.0} | {:.0} |",
        events as f64 / elapsed.as_secs_f64(),
        elapsed.as_nanos() as f64 / events as f64,
    );
}

/// `url` in a fresh schema `agent_tower_bench` (dropped first if a previous run left it).
async fn bench_schema(url: &str) -> String {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("DATABASE_URL answers");
    for statement in [
        "DROP SCHEMA IF EXISTS agent_tower_bench CASCADE",
        "CREATE SCHEMA agent_tower_bench",
    ] {
        sqlx::query(statement)
            .execute(&mut conn)
            .await
            .expect("the schema is created");
    }
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3Dagent_tower_bench")
}

async fn bench() {
    let total = events_per_measurement();
    let postgres = match std::env::var("DATABASE_URL") {
        Ok(url) => Some(bench_schema(&url).await),
        Err(_) => None,
    };
    if postgres.is_none() {
        println!("(set DATABASE_URL to measure PostgreSQL too)");
    }

    println!("\nappends: one run's log, each batch one transaction\n");
    println!("| store | events/batch | events | events/s | median commit |");
    println!("|---|---:|---:|---:|---:|");
    let db = TempDb::new();
    appends("SQLite file (WAL, synchronous=FULL)", &db.url(), total).await;
    if let Some(url) = &postgres {
        appends("PostgreSQL", url, total).await;
    }

    println!("\nwhole runs: 100 tokens and an end each, 50 tasks\n");
    println!("| store | tasks | runs | runs/s | CPU per run |");
    println!("|---|---:|---:|---:|---:|");
    let db = TempDb::new();
    whole_runs("SQLite file", &db.url(), 50, total / 50).await;
    if let Some(url) = &postgres {
        whole_runs("PostgreSQL", url, 50, total / 50).await;
    }

    println!("\nper token, through the server: one run of {total} tokens, best of three\n");
    println!("| mode | events | events/s | ns/event |");
    println!("|---|---:|---:|---:|");
    through_server("in memory", None, total).await;
    let db = TempDb::new();
    through_server("durable, SQLite file", Some(&db.url()), total).await;
    if let Some(url) = &postgres {
        through_server("durable, PostgreSQL", Some(url), total).await;
    }
}
