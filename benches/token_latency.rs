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
//! or `+eager` after one adds it at that `--durability`, as `sqlite+relaxed`),
//! `LATENCY_RUNS` (runs × tokens, `10x200`), `LATENCY_EVERY_MS` (time between two tokens, `5`),
//! `LATENCY_BIN` (another build of `agent-tower`, to compare two side by side).

use std::time::{Duration, Instant};

#[path = "support/model.rs"]
mod model;
#[path = "support/serve.rs"]
mod serve;

use model::{Model, Read};

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

fn main() {
    serve::block_on(bench());
}

fn setting(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// One run's latencies: from the request to its first token, and each token's from its write,
/// in the order they came.
struct Timed {
    first: Duration,
    tokens: Vec<Duration>,
}

/// Posts one run of `tokens` tokens (to `serve`, or straight to the model server) and times them.
async fn one_run(
    client: &reqwest::Client,
    url: &str,
    read: Read,
    model: &Model,
    tokens: usize,
) -> Timed {
    let (mut first, mut latencies) = (None::<Instant>, Vec::with_capacity(tokens));
    let asked = read
        .run(client, url, tokens, |index, arrived| {
            first.get_or_insert(arrived);
            latencies.push(arrived - model.sent(index));
        })
        .await
        .expect("the run ends well");
    Timed {
        first: first.map_or(Duration::ZERO, |first| first - asked),
        tokens: latencies,
    }
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
                t.parse::<usize>().expect("tokens"),
            )
        })
        .expect("runs x tokens, as `10x200`");
    let every = Duration::from_millis(
        setting("LATENCY_EVERY_MS", "5")
            .parse()
            .expect("milliseconds"),
    );
    let model = Model::new(every).noting();
    let base = model.clone().serve().await;
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
        let store = serve::Store::named(store, "latency");
        let (child, addr) = serve::listening(serve::with_model(&agent, &store, &base, &[])).await;
        let url = format!("http://{addr}/");
        // Warm up: the connections, the store.
        one_run(&client, &url, Read::Serve, &model, tokens).await;
        servers.push((store.name, url, child, store.dir));
    }
    let direct_url = format!("{base}/chat/completions");
    one_run(&client, &direct_url, Read::Direct, &model, tokens).await;
    let mut direct = Column::default();
    let mut columns: Vec<Column> = servers.iter().map(|_| Column::default()).collect();
    for _ in 0..runs {
        direct.add(
            one_run(&client, &direct_url, Read::Direct, &model, tokens).await,
            tokens,
        );
        for ((_, url, ..), column) in servers.iter().zip(&mut columns) {
            column.add(
                one_run(&client, url, Read::Serve, &model, tokens).await,
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
