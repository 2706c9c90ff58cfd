//! Load over loopback: concurrent clients streaming scripted runs from `agent-tower serve`, with
//! the run log in memory (`--store none`) and on a SQLite file (the default), side by side.
//!
//! ```text
//! cargo bench --bench load --features cli,jemalloc
//! ```
//!
//! For each store the bench starts the built `agent-tower serve` (the scripted model, the product
//! layer stack, logs at `info` to nowhere) and drives it from this process over HTTP/1.1 and SSE:
//!
//! 1. **Short runs**: C clients each post R runs of 100 filler tokens back to back (a new thread
//!    per run); reports runs/s and the p50/p99 time from the request to the first event.
//! 2. **Paced runs**: runs of 100 filler tokens started at a fixed rate (R per second for S
//!    seconds, each on time whatever the ones before it do); reports the p50/p99 time to the
//!    first event: the latency at that load, where the short runs' closed loop, once the server
//!    is saturated, measures its queue (C clients / runs per second).
//! 3. **Long runs**: C clients post runs of 1,000 filler tokens; reports events/s.
//! 4. **One long run**: one client posts runs of T tokens one after another (after one of
//!    warm-up); reports the time from the request to each run's last byte (p50 and best).
//! 5. **Idle streams**: opens K streams whose model waits (one token per 10 minutes), 500 at a
//!    time, until each got its first event; reports how long opening took, the server's resident
//!    memory per open stream, the CPU the server uses while they stay open (5 s), and its resident
//!    memory 25 s after they closed.
//!
//! `node` in `LOAD_STORES` (there by default) drives, side by side, a peer on the official
//! TypeScript SDK instead (`benches/peers/serve.mjs`, npm `@ag-ui/encoder` installed under
//! `target/peers/node`; skipped without `node`).
//!
//! Last, **against the model alone**: what `serve` adds to a model server. An OpenAI-compatible
//! model server in this process (`benches/support/model.rs`, its tokens as fast as they are
//! read) is read by the same client directly (the **direct** column) and through one `serve
//! --model openai:bench` per store, each column in turn, in `LOAD_DIRECT` rounds (`3`): the short
//! runs' rate as a ratio of the direct column's (where each saturates), and at the paced rate the
//! time from the request to the first token, with what `serve` adds to its p50 and p99.
//!
//! Environment: `LOAD_STORES` (`none,sqlite,node`; a `postgres://…` URL adds PostgreSQL; `+relaxed`
//! or `+eager` after a store adds it at that `--durability`), `LOAD_SHORT` (clients × runs, `50x40`),
//! `LOAD_PACED` (runs per second × seconds, `1000x5`),
//! `LOAD_LONG` (`10x20,100x20`), `LOAD_SINGLE` (tokens × runs, `10000x20`), `LOAD_IDLE` (`1000,10000`),
//! `LOAD_DIRECT` (rounds against the model alone, with the short and paced shapes, `3`),
//! `LOAD_MODEL_EVERY_MS` (the time between two of the model server's tokens there, `0`); an empty
//! value skips a phase.
//! `LOAD_URL` drives a server started elsewhere (to profile it) instead of starting one;
//! `LOAD_BIN` starts another build of `agent-tower` (to compare two builds side by side).

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;

#[path = "support/model.rs"]
mod model;
#[path = "support/serve.rs"]
mod serve;

use model::{Model, Read};

use serve::TempDir;

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

fn main() {
    serve::block_on(bench());
}

fn setting(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `CxR` → (C, R).
fn shape(value: &str) -> (usize, usize) {
    let (c, r) = value.split_once('x').expect("clients x runs, as `50x40`");
    (
        c.parse().expect("a number of clients"),
        r.parse().expect("a number of runs"),
    )
}

/// A running `agent-tower serve`.
struct Server {
    child: tokio::process::Child,
    pid: u32,
    url: String,
    _dir: Option<TempDir>,
}

impl Server {
    /// `serve` on `store` (or the Node peer), its model the scripted one, or `openai:bench` at
    /// `model` (a model server's base URL).
    async fn start(store: &str, model: Option<&str>) -> Self {
        if let Ok(url) = std::env::var("LOAD_URL") {
            return Self::at(url);
        }
        let setting = serve::Store::named(if store == NODE { "none" } else { store }, "load");
        let agent = std::env::var("LOAD_BIN").unwrap_or_else(|_| AGENT.to_owned());
        let queue = ["--busy-thread", "queue"];
        let command = match model {
            _ if store == NODE => node_peer(),
            Some(base) => serve::with_model(&agent, &setting, base, &queue),
            None => serve::on_store(
                &agent,
                &setting,
                &[&["--scripted-knobs"][..], &queue].concat(),
            ),
        };
        let (child, addr) = serve::listening(command).await;
        let pid = child.id().expect("a pid");
        Self {
            child,
            pid,
            url: format!("http://{addr}/"),
            _dir: setting.dir,
        }
    }

    /// A server started elsewhere: no memory or CPU figures.
    fn at(url: String) -> Self {
        let child = tokio::process::Command::new("true")
            .spawn()
            .expect("a placeholder process");
        Self {
            pid: u32::MAX,
            child,
            url,
            _dir: None,
        }
    }

    fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// Bytes it caused to be written to disk so far (`write_bytes` of `/proc/<pid>/io`: its
    /// store's file and log, what the kernel writes back for it).
    fn disk_bytes(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/io", self.pid))
            .ok()
            .and_then(|io| {
                io.lines()
                    .find_map(|l| l.strip_prefix("write_bytes:"))
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// CPU time used so far (user + system), in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // Fields after the command name (which may hold spaces) start after the last ')'.
        let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
        fields
            .get(11..13)
            .map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum())
    }
}

/// The store name that starts the peer instead: the official TypeScript SDK on Node.
const NODE: &str = "node";

/// `node benches/peers/serve.mjs`, with the SDK's packages installed beside a copy of it (under
/// `target/peers/node`, as `benches/peers/run.sh` does).
fn node_peer() -> tokio::process::Command {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/node");
    std::fs::create_dir_all(&dir).expect("target/peers/node");
    if !dir.join("package.json").exists() {
        // npm installs into the nearest folder with a package.json: this one.
        std::fs::write(dir.join("package.json"), "{\"private\": true}\n").expect("package.json");
    }
    if !dir.join("node_modules/@ag-ui/encoder").exists() {
        let installed = std::process::Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund"])
            .args(["@ag-ui/encoder@1.0.0", "@ag-ui/core@1.0.0"])
            .current_dir(&dir)
            .status()
            .expect("npm runs");
        assert!(installed.success(), "npm installs the AG-UI SDK");
    }
    let script = dir.join("serve.mjs");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/serve.mjs"),
        &script,
    )
    .expect("the peer's script");
    let mut command = tokio::process::Command::new("node");
    command.arg(script);
    command
}

/// Whether `node` runs here.
fn has_node() -> bool {
    std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn body(run: &str, tokens: u64, delay_ms: Option<u64>) -> String {
    let mut scripted = json!({"tokens": tokens});
    if let Some(delay) = delay_ms {
        scripted["delay_ms"] = json!(delay);
    }
    json!({
        "threadId": format!("thread-{run}"),
        "runId": run,
        "messages": [{"id": "m", "role": "user", "content": "load"}],
        "forwardedProps": {"scripted": scripted},
    })
    .to_string()
}

/// Posts a run; returns (time to first event, events) once the stream ends.
async fn one_run(client: &reqwest::Client, url: &str, run: &str, tokens: u64) -> (Duration, u64) {
    let (first, _, events) = timed_run(client, url, run, tokens).await;
    (first, events)
}

/// Posts a run; returns (time to first event, time to its last byte, events).
async fn timed_run(
    client: &reqwest::Client,
    url: &str,
    run: &str,
    tokens: u64,
) -> (Duration, Duration, u64) {
    let start = Instant::now();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(body(run, tokens, None))
        .send()
        .await
        .expect("the server answers");
    assert_eq!(response.status(), 200, "run {run}");
    let mut stream = response.bytes_stream();
    let mut first = None;
    let mut events = 0;
    let mut last = 0u8;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("the body streams");
        let mut prev = last;
        for &b in chunk.iter() {
            if prev == b'\n' && b == b'\n' {
                events += 1;
                first.get_or_insert_with(|| start.elapsed());
            }
            prev = b;
        }
        last = prev;
    }
    (first.unwrap_or_default(), start.elapsed(), events)
}

/// `runs` runs of `tokens` tokens, one at a time on one connection; returns each one's time from
/// the request to its last byte, sorted.
async fn single(server: &Server, runs: usize, tokens: u64) -> Vec<Duration> {
    let client = reqwest::Client::new();
    let prefix = uuid::Uuid::now_v7().simple().to_string();
    let mut totals = Vec::with_capacity(runs);
    for r in 0..runs {
        let run = format!("{prefix}-single-{r}");
        let (_, total, events) = timed_run(&client, &server.url, &run, tokens).await;
        assert!(
            events > tokens,
            "run {run}: every token and the run's own events"
        );
        totals.push(total);
    }
    totals.sort();
    totals
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// What a run asks for: `tokens` filler tokens of the scripted model (the time to the first
/// event is the report's), or `tokens` tokens of a model server read through `serve` or directly
/// (the time to the first token).
#[derive(Clone, Copy)]
enum Ask {
    Scripted(u64),
    Model(Read, usize),
}

impl Ask {
    /// Posts run `run` to `url`: its time to the first event or token and the events read, or
    /// the error it ended with.
    async fn run(
        self,
        client: &reqwest::Client,
        url: &str,
        run: &str,
    ) -> Result<(Duration, u64), String> {
        match self {
            Self::Scripted(tokens) => Ok(one_run(client, url, run, tokens).await),
            Self::Model(read, tokens) => {
                let first = read.first_token(client, url, tokens).await?;
                Ok((first, tokens as u64))
            }
        }
    }
}

/// `clients` clients each posting `runs` runs of `ask` to `url` back to back.
async fn load(url: &str, clients: usize, runs: usize, ask: Ask) -> Report {
    let client = reqwest::Client::new();
    let prefix = uuid::Uuid::now_v7().simple().to_string();
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (client, url, prefix) = (client.clone(), url.to_owned(), prefix.clone());
            tokio::spawn(async move {
                let mut results = Vec::with_capacity(runs);
                for r in 0..runs {
                    let run = format!("{prefix}-{c}-{r}");
                    results.push(ask.run(&client, &url, &run).await);
                }
                results
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.extend(task.await.expect("a client task"));
    }
    Report::new(results, start.elapsed())
}

/// Runs of `ask` started at `rate` per second for `seconds` (open loop: a run starts on time
/// whether or not the ones before it ended), so that the time to the first event is the latency
/// at that load rather than the queue of a saturated server.
async fn paced(url: &str, rate: u64, seconds: u64, ask: Ask) -> Report {
    let client = reqwest::Client::new();
    let prefix = uuid::Uuid::now_v7().simple().to_string();
    let mut ticks =
        tokio::time::interval(Duration::from_secs(1) / u32::try_from(rate).expect("a rate"));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for r in 0..rate * seconds {
        ticks.tick().await;
        let (client, url, run) = (client.clone(), url.to_owned(), format!("{prefix}-{r}"));
        tasks.push(tokio::spawn(
            async move { ask.run(&client, &url, &run).await },
        ));
    }
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        results.push(task.await.expect("a run"));
    }
    Report::new(results, start.elapsed())
}

/// Runs' times to their first event (or token), sorted, with the events they read in `elapsed`,
/// and the errors of the runs that failed.
#[derive(Default)]
struct Report {
    firsts: Vec<Duration>,
    events: u64,
    elapsed: Duration,
    failed: Vec<String>,
}

impl Report {
    /// The report of runs that each gave (time to first event, events) or failed, in `elapsed`.
    fn new(results: Vec<Result<(Duration, u64), String>>, elapsed: Duration) -> Self {
        let mut report = Self {
            elapsed,
            ..Self::default()
        };
        for result in results {
            match result {
                Ok((first, events)) => {
                    report.firsts.push(first);
                    report.events += events;
                }
                Err(error) => report.failed.push(error),
            }
        }
        report.firsts.sort();
        report
    }

    /// This report and `other`'s runs as one (rounds of one column).
    fn add(&mut self, other: Self) {
        self.firsts.extend(other.firsts);
        self.firsts.sort();
        self.events += other.events;
        self.elapsed += other.elapsed;
        self.failed.extend(other.failed);
    }

    /// The runs that failed, if any, and the first one's error.
    fn failures(&self) -> String {
        match self.failed.first() {
            None => String::new(),
            Some(first) => format!(
                "; {} runs failed, the first with {first}",
                self.failed.len()
            ),
        }
    }

    fn runs_per_s(&self) -> f64 {
        self.firsts.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// The time to the first event at `p` (0.5: the median), in ms.
    fn first_ms(&self, p: f64) -> f64 {
        if self.firsts.is_empty() {
            return f64::NAN;
        }
        percentile(&self.firsts, p).as_secs_f64() * 1000.0
    }
}

/// What `serve` adds to a model server alone, on each store in `stores`: `rounds` rounds of each
/// `short` load and each `paces` rate, each column in turn (see the module).
async fn against_the_model(
    stores: &[String],
    rounds: usize,
    short: &[(usize, usize)],
    paces: &[(u64, u64)],
) {
    const TOKENS: usize = 100;
    let every: u64 = setting("LOAD_MODEL_EVERY_MS", "0")
        .first()
        .map_or(0, |ms| ms.parse().expect("milliseconds"));
    let base = Model::new(Duration::from_millis(every)).serve().await;
    let mut servers = Vec::new();
    for store in stores.iter().filter(|store| *store != NODE) {
        let name = serve::Store::named(store, "load").name;
        servers.push((name, Server::start(store, Some(&base)).await));
    }
    // The direct column first, then each server's (with the server, for its CPU and disk).
    let direct = format!("{base}/chat/completions");
    let columns: Vec<(&str, &str, Read, Option<&Server>)> =
        std::iter::once(("direct", direct.as_str(), Read::Direct, None))
            .chain(servers.iter().map(|(name, server)| {
                (
                    name.as_str(),
                    server.url.as_str(),
                    Read::Serve,
                    Some(server),
                )
            }))
            .collect();
    println!(
        "against the model alone: an OpenAI-compatible model server in this process, read directly \
         and through serve --model openai:bench, {rounds} rounds, each column in turn"
    );
    // Warm up: connections, allocator, the database files.
    for &(_, url, read, _) in &columns {
        load(url, 10, 10, Ask::Model(read, TOKENS)).await;
    }
    for &(clients, runs) in short {
        let mut reports: Vec<Report> = columns.iter().map(|_| Report::default()).collect();
        // Each server's CPU and disk writes over its rounds (none for the direct column: this
        // process's own).
        let mut used = vec![(0, 0); columns.len()];
        for _ in 0..rounds {
            for (column, &(_, url, read, server)) in columns.iter().enumerate() {
                let counters = || server.map_or((0, 0), |s| (s.cpu_ticks(), s.disk_bytes()));
                let before = counters();
                reports[column].add(load(url, clients, runs, Ask::Model(read, TOKENS)).await);
                let after = counters();
                used[column].0 += after.0 - before.0;
                used[column].1 += after.1 - before.1;
            }
        }
        let direct = reports[0].runs_per_s();
        for ((&(name, ..), report), (ticks, disk)) in columns.iter().zip(&reports).zip(used) {
            let runs_done = report.firsts.len().max(1) as f64;
            // Clock ticks are hundredths of a second.
            let cpu_us = ticks as f64 * 10_000.0 / runs_done;
            let disk_kb = disk as f64 / 1000.0 / runs_done;
            println!(
                "  short  {clients:>4} clients x {runs} runs of {TOKENS} tokens, {name:<16} {:>6.0} runs/s, {:.2}× direct, server CPU {cpu_us:.0} µs/run, disk {disk_kb:.1} KB/run{}",
                report.runs_per_s(),
                report.runs_per_s() / direct,
                report.failures(),
            );
        }
    }
    for &(rate, seconds) in paces {
        let mut reports: Vec<Report> = columns.iter().map(|_| Report::default()).collect();
        for _ in 0..rounds {
            for (&(_, url, read, _), report) in columns.iter().zip(&mut reports) {
                report.add(paced(url, rate, seconds, Ask::Model(read, TOKENS)).await);
            }
        }
        let direct = &reports[0];
        for (&(name, ..), report) in columns.iter().zip(&reports) {
            println!(
                "  paced  {rate:>4} runs/s for {seconds} s, runs of {TOKENS} tokens, {name:<16} first token p50 {:.2} ms, p99 {:.2} ms; added p50 {:+.2} ms, p99 {:+.2} ms{}",
                report.first_ms(0.5),
                report.first_ms(0.99),
                report.first_ms(0.5) - direct.first_ms(0.5),
                report.first_ms(0.99) - direct.first_ms(0.99),
                report.failures(),
            );
        }
    }
}

/// Opens `streams` idle streams; reports the time to open them, RSS per stream and idle CPU.
async fn idle(server: &Server, streams: usize) {
    let base = server.rss_kib();
    let prefix = uuid::Uuid::now_v7().simple().to_string();
    // One connection per stream: a stream keeps its connection busy, so the next one opens its own.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("a client");
    let start = Instant::now();
    let mut open = Vec::with_capacity(streams);
    for batch in (0..streams).collect::<Vec<_>>().chunks(500) {
        let opened = futures_util::future::join_all(batch.iter().map(|&i| {
            let (url, run) = (server.url.clone(), format!("{prefix}-idle-{i}"));
            let client = client.clone();
            async move {
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body(&run, 1, Some(600_000)))
                    .send()
                    .await
                    .expect("the server answers");
                assert_eq!(response.status(), 200);
                let mut stream = response.bytes_stream();
                stream.next().await.expect("a first event").expect("bytes");
                stream
            }
        }))
        .await;
        open.extend(opened);
    }
    let opened = start.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let with = server.rss_kib();
    let (ticks, window) = (server.cpu_ticks(), Duration::from_secs(5));
    tokio::time::sleep(window).await;
    let used = (server.cpu_ticks() - ticks) as f64 / 100.0 / window.as_secs_f64();
    println!(
        "  idle   {streams:>6} streams: opened in {:.2} s, RSS {base} -> {with} KiB ({:.1} KiB per stream), {:.1} % of a core while idle",
        opened.as_secs_f64(),
        with.saturating_sub(base) as f64 / streams as f64,
        used * 100.0,
    );
    drop(open);
    // What the server holds once they are gone: a quiet stream's closed connection is noticed
    // when its next ping is written (every 15 s), and the allocator gives memory back over some
    // seconds more.
    tokio::time::sleep(Duration::from_secs(25)).await;
    println!(
        "  idle   {streams:>6} streams closed: RSS {} KiB",
        server.rss_kib()
    );
}

async fn bench() {
    println!(
        "agent-tower serve, {} cores, client in this process",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let stores = setting("LOAD_STORES", "none,sqlite,node");
    let short: Vec<_> = setting("LOAD_SHORT", "50x40")
        .iter()
        .map(|s| shape(s))
        .collect();
    let paces: Vec<_> = setting("LOAD_PACED", "1000x5")
        .iter()
        .map(|s| {
            let (rate, seconds) = shape(s);
            (rate as u64, seconds as u64)
        })
        .collect();
    let long: Vec<_> = setting("LOAD_LONG", "10x20,100x20")
        .iter()
        .map(|s| shape(s))
        .collect();
    let singles: Vec<_> = setting("LOAD_SINGLE", "10000x20")
        .iter()
        .map(|s| shape(s))
        .collect();
    let idles: Vec<usize> = setting("LOAD_IDLE", "1000,10000")
        .iter()
        .map(|n| n.parse().expect("a number of streams"))
        .collect();

    let mut short_rates = Vec::new();
    for store in &stores {
        if store == NODE {
            if !has_node() {
                println!("node: not found, its peer skipped");
                continue;
            }
            println!("node: the official TypeScript SDK (@ag-ui/encoder 1.0.0), no run log");
        } else {
            println!("--store {store}");
        }
        let server = Server::start(store, None).await;
        // Warm up: connections, allocator, the database file.
        load(&server.url, 10, 10, Ask::Scripted(100)).await;
        for &(clients, runs) in &short {
            let (cpu, disk) = (server.cpu_ticks(), server.disk_bytes());
            let report = load(&server.url, clients, runs, Ask::Scripted(100)).await;
            let total = (clients * runs) as f64;
            // Clock ticks are hundredths of a second.
            let cpu_us = (server.cpu_ticks() - cpu) as f64 * 10_000.0 / total;
            let disk_kb = (server.disk_bytes() - disk) as f64 / 1000.0 / total;
            println!(
                "  short  {clients:>4} clients x {runs} runs of 100 tokens: {:.0} runs/s ({:.0} events/s), first event p50 {:.2} ms, p99 {:.2} ms; server CPU {cpu_us:.0} µs/run, disk {disk_kb:.1} KB/run",
                report.runs_per_s(),
                report.events as f64 / report.elapsed.as_secs_f64(),
                report.first_ms(0.5),
                report.first_ms(0.99),
            );
            short_rates.push((store.clone(), clients, report.runs_per_s()));
        }
        for &(rate, seconds) in &paces {
            let report = paced(&server.url, rate, seconds, Ask::Scripted(100)).await;
            println!(
                "  paced  {rate:>4} runs/s for {seconds} s, runs of 100 tokens: first event p50 {:.2} ms, p99 {:.2} ms",
                report.first_ms(0.5),
                report.first_ms(0.99),
            );
        }
        for &(clients, runs) in &long {
            let report = load(&server.url, clients, runs, Ask::Scripted(1000)).await;
            println!(
                "  long   {clients:>4} clients x {runs} runs of 1,000 tokens: {:.0} events/s, first event p50 {:.2} ms, p99 {:.2} ms",
                report.events as f64 / report.elapsed.as_secs_f64(),
                report.first_ms(0.5),
                report.first_ms(0.99),
            );
        }
        for &(tokens, runs) in &singles {
            single(&server, 1, tokens as u64).await;
            let totals = single(&server, runs, tokens as u64).await;
            println!(
                "  single {runs:>4} runs of {tokens} tokens, one at a time: to the last byte p50 {:.2} ms, best {:.2} ms",
                percentile(&totals, 0.5).as_secs_f64() * 1000.0,
                totals[0].as_secs_f64() * 1000.0,
            );
        }
        for &streams in &idles {
            idle(&server, streams).await;
        }
    }
    // The first store is the reference: every other store's short-run rate next to it.
    for (store, clients, rate) in &short_rates {
        let reference = short_rates
            .iter()
            .find(|(_, c, _)| c == clients)
            .filter(|(first, ..)| first != store);
        if let Some((first, _, base)) = reference {
            println!(
                "short runs at {clients} clients: {store} does {:.0} % of {first}",
                rate / base * 100.0
            );
        }
    }
    let rounds: usize = setting("LOAD_DIRECT", "3")
        .first()
        .map_or(0, |n| n.parse().expect("a number of rounds"));
    if rounds > 0 {
        against_the_model(&stores, rounds, &short, &paces).await;
    }
}
