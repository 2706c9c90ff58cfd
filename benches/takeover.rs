//! How long a run waits when its server stops: from the moment its server is killed (SIGKILL) or
//! stopped (SIGTERM, drain timeout 0) to the continuation, as a client following the run sees it:
//! the `agent_tower.takeover` event, then the continuation's first token.
//!
//! ```text
//! cargo bench --bench takeover --features cli,jemalloc
//! ```
//!
//! - **PostgreSQL**, two instances: the run is started on one and followed on the other, which
//!   continues it (needs `DATABASE_URL`; skipped without).
//! - **SQLite**, one instance: the run's server is started again on the same file, and the client
//!   re-joins there (the time includes the process's start).
//!
//! A crash is noticed when the dead server's lease runs out (`--lease`, here
//! `TAKEOVER_LEASE`, default `1s`; the server's default is 30 s) and the next sweep, every third
//! of it, looks; a draining server releases its runs and, on PostgreSQL, tells the others.
//! `TAKEOVER_ROUNDS` rounds of each (default 10).

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};

#[path = "support/serve.rs"]
mod serve;

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

fn main() {
    serve::block_on(bench());
}

/// How the run's server stops.
#[derive(Clone, Copy, Debug)]
enum Stop {
    Kill,
    Drain,
}

struct Instance {
    child: tokio::process::Child,
    base: String,
}

impl Instance {
    async fn start(store: &str, lease: &str) -> Self {
        let args = [
            "--store",
            store,
            "--scripted-knobs",
            "--lease",
            lease,
            "--drain-timeout",
            "0s",
            "--on-disconnect",
            "continue",
        ];
        let (child, addr) = serve::serve(AGENT, &args).await;
        Self {
            child,
            base: format!("http://{addr}"),
        }
    }

    /// Stops it as `stop` says; when.
    async fn stop(mut self, stop: Stop) -> Instant {
        let pid = self.child.id().expect("running").to_string();
        let signal = match stop {
            Stop::Kill => "-KILL",
            Stop::Drain => "-TERM",
        };
        let at = Instant::now();
        std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill runs");
        let _ = self.child.wait().await;
        at
    }
}

/// A run that streams until something stops it (a token every millisecond).
fn endless(n: usize) -> (String, Value) {
    let run = format!("r-{n}-{}", std::process::id());
    let body = json!({
        "threadId": format!("t-{run}"), "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
        "forwardedProps": {"scripted": {"tokens": 1_000_000, "delay_ms": 1}},
    });
    (run, body)
}

/// The events of `response` as they come: `(id, event)`.
fn events(response: reqwest::Response) -> impl futures_util::Stream<Item = (String, Value)> {
    let mut buffer = String::new();
    response
        .bytes_stream()
        .map(move |chunk| {
            buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap_or_default()));
            let mut frames = Vec::new();
            while let Some(end) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..end + 2).collect();
                let mut id = String::new();
                for line in frame.lines() {
                    if let Some(rest) = line.strip_prefix("id: ") {
                        id = rest.to_owned();
                    } else if let Some(data) = line.strip_prefix("data: ") {
                        frames.push((id.clone(), serde_json::from_str(data).unwrap()));
                    }
                }
            }
            futures_util::stream::iter(frames)
        })
        .flatten()
}

/// From `stopped` to the takeover event and to the continuation's first token, read on `follow`.
async fn continuation(
    follow: &mut (impl futures_util::Stream<Item = (String, Value)> + Unpin),
    stopped: Instant,
) -> (Duration, Duration) {
    let mut marked = None;
    while let Some((_, event)) = follow.next().await {
        if event["name"] == "agent_tower.takeover" {
            marked = Some(stopped.elapsed());
        } else if marked.is_some() && event["type"] == "TEXT_MESSAGE_CONTENT" {
            return (marked.unwrap(), stopped.elapsed());
        }
    }
    panic!("the run was not continued");
}

async fn cancel(client: &reqwest::Client, base: &str, run: &str) {
    let _ = client
        .post(format!("{base}/runs/{run}/cancel"))
        .send()
        .await;
}

/// The run started on one PostgreSQL instance, followed on another that continues it.
async fn postgres(url: &str, lease: &str, stop: Stop, rounds: usize) -> Vec<(Duration, Duration)> {
    let client = reqwest::Client::new();
    let survivor = Instance::start(url, lease).await;
    let mut times = Vec::new();
    for n in 0..rounds {
        let owner = Instance::start(url, lease).await;
        let (run, body) = endless(n);
        drop(client.post(&owner.base).json(&body).send().await.unwrap());
        let follow = client
            .get(format!("{}/runs/{run}/events?after=0", survivor.base))
            .send()
            .await
            .unwrap();
        let mut follow = Box::pin(events(follow));
        // Streaming: 50 tokens in.
        for _ in 0..50 {
            follow.next().await.expect("the run streams");
        }
        let stopped = owner.stop(stop).await;
        times.push(continuation(&mut follow, stopped).await);
        cancel(&client, &survivor.base, &run).await;
    }
    times
}

/// The run's SQLite server stopped and started again; its client re-joins there.
async fn sqlite(lease: &str, stop: Stop, rounds: usize) -> Vec<(Duration, Duration)> {
    let client = reqwest::Client::new();
    let dir = std::env::temp_dir().join(format!("agent-tower-takeover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = format!("sqlite://{}", dir.join("runs.db").display());
    let mut server = Instance::start(&store, lease).await;
    let mut times = Vec::new();
    for n in 0..rounds {
        let (run, body) = endless(n);
        let response = client.post(&server.base).json(&body).send().await.unwrap();
        let mut stream = Box::pin(events(response));
        let mut last = String::new();
        for _ in 0..50 {
            last = stream.next().await.expect("the run streams").0;
        }
        let stopped = server.stop(stop).await;
        server = Instance::start(&store, lease).await;
        let seq = last.rsplit(':').next().unwrap_or("0");
        let follow = client
            .get(format!("{}/runs/{run}/events?after={seq}", server.base))
            .send()
            .await
            .unwrap();
        times.push(continuation(&mut Box::pin(events(follow)), stopped).await);
        cancel(&client, &server.base, &run).await;
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    times
}

fn report(what: &str, mut times: Vec<(Duration, Duration)>) {
    if times.is_empty() {
        return;
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    times.sort();
    let marked: Vec<f64> = times.iter().map(|t| ms(t.0)).collect();
    let mut token: Vec<f64> = times.iter().map(|t| ms(t.1)).collect();
    token.sort_by(f64::total_cmp);
    let (mid, last) = (times.len() / 2, times.len() - 1);
    println!(
        "{what:<28} takeover p50 {:>7.0} ms  max {:>7.0} ms | first token p50 {:>7.0} ms  max {:>7.0} ms",
        marked[mid], marked[last], token[mid], token[last]
    );
}

async fn bench() {
    let lease = std::env::var("TAKEOVER_LEASE").unwrap_or_else(|_| "1s".to_owned());
    let rounds: usize = std::env::var("TAKEOVER_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    println!("lease {lease}, {rounds} rounds each");
    for stop in [Stop::Kill, Stop::Drain] {
        report(
            &format!("SQLite, {stop:?} + restart"),
            sqlite(&lease, stop, rounds).await,
        );
        match std::env::var("DATABASE_URL") {
            Ok(url) => report(
                &format!("PostgreSQL, {stop:?}"),
                postgres(&url, &lease, stop, rounds).await,
            ),
            Err(_) => println!("PostgreSQL skipped: set DATABASE_URL"),
        }
    }
}
