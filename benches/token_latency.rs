//! The latency a token gains on its way through `agent-tower serve`: from the moment a model
//! server writes it to the moment the AG-UI client has read it.
//!
//! ```text
//! cargo bench --bench token_latency --features cli,jemalloc
//! ```
//!
//! The bench is both ends: an OpenAI-compatible model server (`POST /v1/chat/completions`,
//! streamed as a real one streams: one `chat.completion.chunk` per token, `data: [DONE]` last)
//! that notes when it writes each token, and the client that posts runs to the built
//! `agent-tower serve --model openai:bench --base-url …` and notes when each token's
//! `TEXT_MESSAGE_CONTENT` arrives. One clock, so the difference is the time the token spent in
//! the server (and on loopback twice). Each token is `w<N> `, so that the client knows which it
//! got. Runs go one at a time; reports p50, p95 and p99 per store.
//!
//! Beside them, the **direct** column: the same client reads the same model server itself (the
//! tokens of its `chat.completion.chunk`s), one direct run before each round of runs through the
//! stores, so that every column sees the same machine at the same moments. Each store's line then
//! says what `serve` *adds*: to each token's latency (p50, p99, over the direct column's) and to
//! the first token's (from the request to the first token read).
//!
//! Environment: `LATENCY_STORES` (`none,sqlite`; a `postgres://…` URL adds PostgreSQL; `+relaxed`
//! after one adds it at `--durability relaxed`, as `sqlite+relaxed`),
//! `LATENCY_RUNS` (runs × tokens, `10x200`), `LATENCY_EVERY_MS` (time between two tokens, `5`),
//! `LATENCY_BIN` (another build of `agent-tower`, to compare two side by side).

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Router, body::Body, extract::State, routing::post};
use futures_util::StreamExt;
use serde_json::json;

#[path = "support/serve.rs"]
mod serve;

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

fn main() {
    serve::block_on(bench());
}

fn setting(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// The model server's side: how many tokens an answer has, how far apart, and when each token of
/// the answer being streamed was written.
#[derive(Clone)]
struct Model {
    tokens: usize,
    every: Duration,
    sent: Arc<Mutex<Vec<Instant>>>,
}

/// One streamed answer of `model.tokens` tokens, each noted as it is written.
async fn completions(State(model): State<Model>) -> axum::response::Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, Infallible>>(16);
    model.sent.lock().expect("not poisoned").clear();
    tokio::spawn(async move {
        let chunk = |delta: serde_json::Value, finish: Option<&str>| {
            let body = json!({
                "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
                "model": "bench",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            });
            format!("data: {body}\n\n")
        };
        let mut ticks = tokio::time::interval(model.every);
        for i in 0..model.tokens {
            ticks.tick().await;
            let data = chunk(json!({"content": format!("w{i} ")}), None);
            model
                .sent
                .lock()
                .expect("not poisoned")
                .push(Instant::now());
            if tx.send(Ok(data)).await.is_err() {
                return;
            }
        }
        let _ = tx.send(Ok(chunk(json!({}), Some("stop")))).await;
        let _ = tx.send(Ok("data: [DONE]\n\n".to_owned())).await;
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(
            tokio_stream_from(rx).map(|item| item.map(axum::body::Bytes::from)),
        ))
        .expect("a response")
}

/// The receiver as a stream.
fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Starts the model server on loopback: its base URL.
async fn model_server(model: Model) -> String {
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(model);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    // Each token is written as it comes, as a model server does: without `TCP_NODELAY` the
    // second of two small writes waits for the client's delayed ACK (40 ms).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v1")
}

/// Where a column reads its tokens: a run through `serve` (its AG-UI events), or the model
/// server itself (its chunks).
#[derive(Clone, Copy, PartialEq)]
enum Read {
    Serve,
    Direct,
}

/// One run's latencies: from the request to its first token, and each token's from its write,
/// in the order they came.
struct Timed {
    first: Duration,
    tokens: Vec<Duration>,
}

/// Posts one run (to `serve`, or straight to the model server) and times its tokens.
async fn one_run(
    client: &reqwest::Client,
    url: &str,
    read: Read,
    sent: &Mutex<Vec<Instant>>,
) -> Timed {
    let body = match read {
        Read::Serve => json!({
            "threadId": format!("thread-{}", uuid::Uuid::now_v7().simple()),
            "runId": format!("run-{}", uuid::Uuid::now_v7().simple()),
            "messages": [{"id": "m", "role": "user", "content": "go"}],
        }),
        Read::Direct => json!({
            "model": "bench", "stream": true,
            "messages": [{"role": "user", "content": "go"}],
        }),
    };
    let asked = Instant::now();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(body.to_string())
        .send()
        .await
        .expect("the server answers");
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut pending = Vec::new();
    let mut timed = Timed {
        first: Duration::ZERO,
        tokens: Vec::new(),
    };
    while let Some(chunk) = stream.next().await {
        let arrived = Instant::now();
        pending.extend_from_slice(&chunk.expect("the body streams"));
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let frame: Vec<u8> = pending.drain(..end + 2).collect();
            let frame = String::from_utf8_lossy(&frame);
            let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            let Some(token) = token_of(read, data) else {
                continue;
            };
            let index: usize = token
                .trim()
                .strip_prefix('w')
                .and_then(|n| n.parse().ok())
                .expect("a token of the bench's model");
            if timed.tokens.is_empty() {
                timed.first = arrived - asked;
            }
            let written = sent.lock().expect("not poisoned")[index];
            timed.tokens.push(arrived - written);
        }
    }
    timed
}

/// The token a frame's data carries, if any: a `TEXT_MESSAGE_CONTENT`'s delta, or a chunk's
/// content.
fn token_of(read: Read, data: &str) -> Option<String> {
    if data == "[DONE]" {
        return None;
    }
    let event: serde_json::Value = serde_json::from_str(data).expect("a frame's JSON");
    let token = match read {
        Read::Serve => {
            if event["type"] == "RUN_ERROR" {
                panic!("the run failed: {event}");
            }
            if event["type"] != "TEXT_MESSAGE_CONTENT" {
                return None;
            }
            &event["delta"]
        }
        Read::Direct => &event["choices"][0]["delta"]["content"],
    };
    token.as_str().map(str::to_owned)
}

/// A column's runs: the first tokens' latencies and every token's.
#[derive(Default)]
struct Column {
    first: Vec<Duration>,
    tokens: Vec<Duration>,
}

impl Column {
    fn add(&mut self, timed: Timed, tokens: usize) {
        assert_eq!(timed.tokens.len(), tokens, "every token arrived");
        self.first.push(timed.first);
        self.tokens.extend(timed.tokens);
    }

    fn sort(&mut self) {
        self.first.sort();
        self.tokens.sort();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0
}

async fn bench() {
    let (runs, tokens) = setting("LATENCY_RUNS", "10x200")
        .split_once('x')
        .map(|(r, t)| {
            (
                r.parse::<usize>().expect("runs"),
                t.parse().expect("tokens"),
            )
        })
        .expect("runs x tokens, as `10x200`");
    let every = Duration::from_millis(
        setting("LATENCY_EVERY_MS", "5")
            .parse()
            .expect("milliseconds"),
    );
    let model = Model {
        tokens,
        every,
        sent: Arc::default(),
    };
    let base = model_server(model.clone()).await;
    let agent = setting("LATENCY_BIN", AGENT);
    println!(
        "a token's way through agent-tower serve: {runs} runs of {tokens} tokens, one every {} ms",
        every.as_millis()
    );
    // Every server first, then the runs in rounds: direct, then each store.
    let client = reqwest::Client::new();
    let mut servers = Vec::new();
    for store in setting("LATENCY_STORES", "none,sqlite")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let serve::Store {
            name,
            url,
            durability,
            dir,
        } = serve::Store::named(store, "latency");
        let mut command = tokio::process::Command::new(&agent);
        command
            .args(["serve", "--addr", "127.0.0.1:0", "--store", &url])
            .args(["--durability", durability])
            .args(["--model", "openai:bench", "--base-url", &base])
            .env("OPENAI_API_KEY", "bench")
            .env("RUST_LOG", "info");
        let (child, addr) = serve::listening(command).await;
        let url = format!("http://{addr}/");
        // Warm up: the connections, the store.
        one_run(&client, &url, Read::Serve, &model.sent).await;
        servers.push((name, url, child, dir));
    }
    let direct_url = format!("{base}/chat/completions");
    one_run(&client, &direct_url, Read::Direct, &model.sent).await;
    let mut direct = Column::default();
    let mut columns: Vec<Column> = servers.iter().map(|_| Column::default()).collect();
    for _ in 0..runs {
        direct.add(
            one_run(&client, &direct_url, Read::Direct, &model.sent).await,
            tokens,
        );
        for ((_, url, ..), column) in servers.iter().zip(&mut columns) {
            column.add(
                one_run(&client, url, Read::Serve, &model.sent).await,
                tokens,
            );
        }
    }
    direct.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "  direct                   p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms ({} tokens); first token p50 {:.2} ms",
        percentile(&direct.tokens, 0.5),
        percentile(&direct.tokens, 0.95),
        percentile(&direct.tokens, 0.99),
        direct.tokens.len(),
        ms(direct.first[direct.first.len() / 2]),
    );
    for ((name, ..), mut column) in servers.iter().zip(columns) {
        column.sort();
        println!(
            "  --store {name:<16} p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms ({} tokens); \
             added per token p50 {:+.2} ms, p99 {:+.2} ms; first token p50 {:.2} ms, added {:+.2} ms",
            percentile(&column.tokens, 0.5),
            percentile(&column.tokens, 0.95),
            percentile(&column.tokens, 0.99),
            column.tokens.len(),
            percentile(&column.tokens, 0.5) - percentile(&direct.tokens, 0.5),
            percentile(&column.tokens, 0.99) - percentile(&direct.tokens, 0.99),
            ms(column.first[column.first.len() / 2]),
            ms(column.first[column.first.len() / 2]) - ms(direct.first[direct.first.len() / 2]),
        );
    }
}
