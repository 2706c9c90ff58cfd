//! Layer overhead, measured.
//!
//! ```text
//! cargo bench --bench overhead
//! ```
//!
//! - `call`: one model call through `AguiLayer` (empty answer) vs the bare service; `run_sink`:
//!   its events to the run's own sink, as a server sets one per run, instead of the layer's.
//! - `tokens`: a 10,000-token answer drained raw, through the tee + AG-UI encoder into a null
//!   transport, and through the tee + encoder + SSE framing (`data: <json>\n\n` into a reused
//!   buffer); next to `serde_json::to_writer` of the same 10,000 events alone.
//! - Before criterion runs, a counting allocator prints allocations per token for each variant.

use std::{
    hint::black_box,
    pin::Pin,
    task::{Context, Poll},
};

use agent_tower::{
    agui::{
        AguiLayer, Event,
        event::{BaseEvent, TextMessageContent},
    },
    context::{ForwardedProps, RunContext},
    id::MessageId,
    map_error::MapErrorLayer,
    model::{ModelRequest, scripted::ScriptedModel},
    transport::{Channel, Null, Transport, error::TransportClosed},
    truncate::TruncateLayer,
};
use criterion::{BenchmarkId, Criterion, Throughput};
use futures_util::{Sink, StreamExt};
use serde_json::json;
use tower::{Layer, ServiceBuilder, ServiceExt};

#[path = "support/counting.rs"]
mod counting;

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

const TOKENS: u64 = 10_000;

/// A transport that frames each event as SSE into a reused buffer, like an HTTP body would.
#[derive(Default)]
struct SseFraming {
    buf: Vec<u8>,
}

impl Clone for SseFraming {
    fn clone(&self) -> Self {
        Self {
            buf: Vec::with_capacity(256),
        }
    }
}

impl Sink<Event> for SseFraming {
    type Error = TransportClosed;
    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), TransportClosed>> {
        Poll::Ready(Ok(()))
    }
    fn start_send(mut self: Pin<&mut Self>, event: Event) -> Result<(), TransportClosed> {
        self.send_now(event)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), TransportClosed>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), TransportClosed>> {
        Poll::Ready(Ok(()))
    }
}

impl Transport<Event> for SseFraming {
    fn send_now(&mut self, event: Event) -> Result<(), TransportClosed> {
        self.buf.clear();
        self.buf.extend_from_slice(b"data: ");
        serde_json::to_writer(&mut self.buf, &event).expect("events serialize");
        self.buf.extend_from_slice(b"\n\n");
        black_box(&self.buf);
        Ok(())
    }
}

fn request(tokens: u64) -> ModelRequest {
    let mut run = RunContext::default();
    run.extensions
        .insert(ForwardedProps(json!({"scripted": {"tokens": tokens}})));
    ModelRequest {
        messages: Vec::new(),
        tools: Default::default(),
        options: Default::default(),
        run,
    }
}

async fn drain_raw(tokens: u64) -> usize {
    let stream = ScriptedModel::new().oneshot(request(tokens)).await.unwrap();
    stream
        .fold(0, |n, e| async move { n + black_box(e).is_ok() as usize })
        .await
}

/// The whole model stack a server runs: AG-UI emission, error classification, delta splitting.
async fn drain_full_stack(tokens: u64) -> usize {
    let model = ServiceBuilder::new()
        .layer(AguiLayer::new().transport(SseFraming::default()))
        .layer(MapErrorLayer::new())
        .layer(TruncateLayer::new())
        .service(ScriptedModel::new());
    let stream = model.oneshot(request(tokens)).await.unwrap();
    stream
        .fold(0, |n, e| async move { n + black_box(e).is_ok() as usize })
        .await
}

async fn drain_teed<T>(transport: T, tokens: u64) -> usize
where
    T: Transport<Event> + Clone + Send + Sync + 'static,
{
    let model = AguiLayer::new()
        .transport(transport)
        .layer(ScriptedModel::new());
    let stream = model.oneshot(request(tokens)).await.unwrap();
    stream
        .fold(0, |n, e| async move { n + black_box(e).is_ok() as usize })
        .await
}

/// A model call whose events go to the run's own sink (what a server sets for each run).
async fn drain_to_run_sink(tokens: u64) -> usize {
    let (tx, mut rx) = Channel::<Event>::bounded(64);
    let mut req = request(tokens);
    req.run.sinks.insert(tx);
    let model = AguiLayer::new().layer(ScriptedModel::new());
    let stream = model.oneshot(req).await.unwrap();
    let items = stream
        .fold(0, |n, e| async move { n + black_box(e).is_ok() as usize })
        .await;
    while let Some(event) = rx.try_recv() {
        black_box(event);
    }
    items
}

fn content_events(tokens: u64) -> Vec<Event> {
    let id = MessageId::new();
    (0..tokens)
        .map(|i| {
            TextMessageContent {
                message_id: id.clone(),
                delta: ["lorem ", "ipsum ", "dolor "][i as usize % 3].into(),
                subagent_run_id: None,
                base: BaseEvent::default(),
            }
            .into()
        })
        .collect()
}

fn serialize_all(events: &[Event], buf: &mut Vec<u8>) {
    for event in events {
        buf.clear();
        buf.extend_from_slice(b"data: ");
        serde_json::to_writer(&mut *buf, event).expect("events serialize");
        buf.extend_from_slice(b"\n\n");
        black_box(&buf);
    }
}

fn allocations_per_token(rt: &tokio::runtime::Runtime) {
    let measure = |name: &str, f: &dyn Fn()| {
        f(); // warm up
        let before = counting::allocations();
        f();
        let after = counting::allocations();
        println!(
            "allocations/token  {name:<28} {:.3}",
            (after - before) as f64 / TOKENS as f64
        );
    };
    measure("raw scripted stream", &|| {
        rt.block_on(drain_raw(TOKENS));
    });
    measure("tee + AG-UI encoder (null)", &|| {
        rt.block_on(drain_teed(Null, TOKENS));
    });
    measure("tee + encoder + SSE framing", &|| {
        rt.block_on(drain_teed(SseFraming::default(), TOKENS));
    });
    measure("full model stack + SSE", &|| {
        rt.block_on(drain_full_stack(TOKENS));
    });
    let events = content_events(TOKENS);
    let buf = std::cell::RefCell::new(Vec::with_capacity(256));
    measure("serde_json SSE of the events", &|| {
        serialize_all(&events, &mut buf.borrow_mut())
    });
}

fn benches(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let mut call = c.benchmark_group("call");
    call.bench_function("bare", |b| b.iter(|| rt.block_on(drain_raw(0))));
    call.bench_function("agui", |b| b.iter(|| rt.block_on(drain_teed(Null, 0))));
    call.bench_function("run_sink", |b| b.iter(|| rt.block_on(drain_to_run_sink(0))));
    call.bench_function("full_stack", |b| {
        b.iter(|| rt.block_on(drain_full_stack(0)))
    });
    call.finish();

    let mut tokens = c.benchmark_group("tokens");
    tokens.throughput(Throughput::Elements(TOKENS));
    tokens.bench_function(BenchmarkId::new("raw", TOKENS), |b| {
        b.iter(|| rt.block_on(drain_raw(TOKENS)))
    });
    tokens.bench_function(BenchmarkId::new("tee+encode", TOKENS), |b| {
        b.iter(|| rt.block_on(drain_teed(Null, TOKENS)))
    });
    tokens.bench_function(BenchmarkId::new("tee+encode+sse", TOKENS), |b| {
        b.iter(|| rt.block_on(drain_teed(SseFraming::default(), TOKENS)))
    });
    tokens.bench_function(BenchmarkId::new("full_stack+sse", TOKENS), |b| {
        b.iter(|| rt.block_on(drain_full_stack(TOKENS)))
    });
    let events = content_events(TOKENS);
    let mut buf = Vec::with_capacity(256);
    tokens.bench_function(BenchmarkId::new("serde_json_sse", TOKENS), |b| {
        b.iter(|| serialize_all(&events, &mut buf))
    });
    tokens.finish();
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    allocations_per_token(&rt);
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion, &rt);
    criterion.final_summary();
}
