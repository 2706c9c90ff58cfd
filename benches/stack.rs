//! What a whole agent costs per token: a run of the [`Stack`](agent_tower::stack::Stack) the
//! demo builds (every layer in place), its AG-UI events to the run's own sink as a server sets
//! one, drained as they come.
//!
//! ```text
//! cargo bench --bench stack
//! valgrind --tool=callgrind target/release/deps/stack-* --bench none   # instructions, stable
//! ```
//!
//! Before criterion runs, a counting allocator prints allocations per token.

use std::hint::black_box;

use agent_tower::{
    agui::Event,
    context::ForwardedProps,
    demo::{self, ScriptedAgent},
    message::Message,
    run::RunRequest,
    transport::Channel,
};
use criterion::{BenchmarkId, Criterion, Throughput};
use futures_util::StreamExt;
use serde_json::json;
use tower::ServiceExt;

#[path = "support/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const TOKENS: u64 = 10_000;

/// One run of `tokens` tokens; returns how many events the run's sink received.
async fn run(agent: ScriptedAgent, tokens: u64) -> usize {
    let (tx, rx) = Channel::<Event>::bounded(64);
    let mut req = RunRequest::new(vec![Message::user("hello")]);
    req.run
        .extensions
        .insert(ForwardedProps(json!({"scripted": {"tokens": tokens}})));
    req.run.sinks.insert(tx);
    let drained = tokio::spawn(rx.fold(0, |n, event| async move {
        n + matches!(black_box(event), Event::TextMessageContent(_)) as usize
    }));
    agent.oneshot(req).await.expect("the run ends");
    drained.await.expect("the sink is drained")
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let agent = demo::scripted().build();
    rt.block_on(run(agent.clone(), TOKENS)); // warm up
    let before = counting::allocations();
    let events = rt.block_on(run(agent.clone(), TOKENS));
    let after = counting::allocations();
    println!(
        "allocations/token  demo stack, run sink  {:.3}  ({events} text events)",
        (after - before) as f64 / TOKENS as f64
    );
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("stack");
    group.throughput(Throughput::Elements(TOKENS));
    group.bench_function(BenchmarkId::new("demo_run_sink", TOKENS), |b| {
        b.iter(|| rt.block_on(run(agent.clone(), TOKENS)))
    });
    group.finish();
    criterion.final_summary();
}
