//! Load over loopback: concurrent clients streaming scripted runs from the AG-UI server.
//!
//! ```text
//! cargo bench --bench load --features server
//! ```
//!
//! The bench starts itself a second time as the server (so the server's memory is measured
//! alone), then as the client:
//!
//! 1. **Throughput**: C clients each post runs of 1,000 filler tokens back to back; reports
//!    events/s and the p50/p99 time to first event.
//! 2. **Idle streams**: opens K streams whose model waits (one token per 10 minutes), in batches,
//!    until each got its first events; reports the server's resident memory per open stream.
//!
//! Set `LOAD_CLIENTS`, `LOAD_RUNS` and `LOAD_IDLE` (comma-separated counts) to change the sizes.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use agent_tower::{
    map_error::Detail,
    server::{AguiServer, scripted_agent},
};
use futures_util::StreamExt;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

const SERVER_ENV: &str = "AGENT_TOWER_LOAD_SERVER";

fn main() {
    if std::env::var_os(SERVER_ENV).is_some() {
        return server();
    }
    // Criterion-style flags from `cargo bench` are ignored.
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(client());
}

fn server() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(async {
            let router = AguiServer::new(scripted_agent(
                std::num::NonZeroU32::new(16).expect("not zero"),
                Detail::Message,
            ))
            .busy_thread(agent_tower::server::BusyThread::Queue)
            .on_run_end(|_| {})
            .into_router();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a port");
            println!("{}", listener.local_addr().expect("an address"));
            axum::serve(listener, router).await.expect("serving");
        });
}

fn counts(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn body(run: usize, tokens: u64, delay_ms: Option<u64>) -> String {
    let mut scripted = json!({"tokens": tokens});
    if let Some(delay) = delay_ms {
        scripted["delay_ms"] = json!(delay);
    }
    json!({
        "threadId": format!("thread-{run}"),
        "runId": format!("run-{run}"),
        "messages": [{"id": "m", "role": "user", "content": "load"}],
        "forwardedProps": {"scripted": scripted},
    })
    .to_string()
}

/// Posts a run; returns (time to first event, events) once the stream ends.
async fn one_run(client: &reqwest::Client, url: &str, run: usize) -> (Duration, u64) {
    let start = Instant::now();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(body(run, 1000, None))
        .send()
        .await
        .expect("the server answers");
    let mut stream = response.bytes_stream();
    let mut first = None;
    let mut events = 0;
    let mut last = 0u8;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("the body streams");
        first.get_or_insert_with(|| start.elapsed());
        let mut prev = last;
        for &b in chunk.iter() {
            if prev == b'\n' && b == b'\n' {
                events += 1;
            }
            prev = b;
        }
        last = prev;
    }
    (first.unwrap_or_default(), events)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn client() {
    let exe = std::env::current_exe().expect("the bench binary");
    let mut child = tokio::process::Command::new(exe)
        .env(SERVER_ENV, "1")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the server starts");
    let pid = child.id().expect("a pid");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = lines
        .next_line()
        .await
        .unwrap()
        .expect("the server's address");
    let url = format!("http://{addr}/");
    println!(
        "server pid {pid} on {addr}; {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    let runs_per_client = counts("LOAD_RUNS", &[20])[0];
    for clients in counts("LOAD_CLIENTS", &[10, 100]) {
        let client = reqwest::Client::new();
        let start = Instant::now();
        let tasks: Vec<_> = (0..clients)
            .map(|c| {
                let client = client.clone();
                let url = url.clone();
                tokio::spawn(async move {
                    let mut results = Vec::new();
                    for r in 0..runs_per_client {
                        results.push(one_run(&client, &url, c * 1_000_000 + r).await);
                    }
                    results
                })
            })
            .collect();
        let mut firsts = Vec::new();
        let mut events = 0;
        for task in tasks {
            for (first, n) in task.await.expect("a client task") {
                firsts.push(first);
                events += n;
            }
        }
        let elapsed = start.elapsed();
        firsts.sort();
        println!(
            "throughput  clients={clients:<5} runs={:<6} events={events:<9} {:.0} events/s  first event p50={:?} p99={:?}",
            firsts.len(),
            events as f64 / elapsed.as_secs_f64(),
            percentile(&firsts, 0.5),
            percentile(&firsts, 0.99),
        );
    }

    for streams in counts("LOAD_IDLE", &[1000, 10_000]) {
        let base = rss_kib(pid);
        let mut open = Vec::with_capacity(streams);
        for batch in (0..streams).collect::<Vec<_>>().chunks(500) {
            let opened = futures_util::future::join_all(batch.iter().map(|&i| {
                let url = url.clone();
                async move {
                    // One connection per stream.
                    let client = reqwest::Client::builder()
                        .pool_max_idle_per_host(0)
                        .build()
                        .unwrap();
                    let response = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body(10_000_000 + i, 1, Some(600_000)))
                        .send()
                        .await
                        .expect("the server answers");
                    let mut stream = response.bytes_stream();
                    stream.next().await.expect("a first event").expect("bytes");
                    (client, stream)
                }
            }))
            .await;
            open.extend(opened);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let with = rss_kib(pid);
        println!(
            "idle        streams={streams:<6} server RSS {base} KiB -> {with} KiB: {:.1} KiB per open stream",
            (with.saturating_sub(base)) as f64 / streams as f64
        );
        drop(open);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    child.kill().await.ok();
}
