//! A model server for benches, and the client's side of reading tokens from it or through
//! `agent-tower serve`.
//!
//! The server is OpenAI-compatible (`POST /v1/chat/completions`), streamed as a real one streams:
//! one `chat.completion.chunk` per token, `data: [DONE]` last. An answer has as many tokens as
//! the last message's content says (`"100"`); token `N` is `wN `, so that a reader knows which it
//! got.
#![allow(dead_code)]

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{Json, Router, body::Body, extract::State, routing::post};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// The model server's side: how far apart its tokens are and, when asked to, when each token of
/// the answer being streamed was written (for answers one at a time).
#[derive(Clone)]
pub struct Model {
    every: Duration,
    /// When each token of the last answer was written; `None`: not noted.
    sent: Option<Arc<Mutex<Vec<Instant>>>>,
}

impl Model {
    /// Tokens `every` apart (`Duration::ZERO`: as fast as the connection takes them).
    pub fn new(every: Duration) -> Self {
        Self { every, sent: None }
    }

    /// Notes when each token of the answer being streamed is written (answers one at a time).
    pub fn noting(mut self) -> Self {
        self.sent = Some(Arc::default());
        self
    }

    /// When token `index` of the last answer was written.
    pub fn sent(&self, index: usize) -> Instant {
        self.sent
            .as_ref()
            .expect("a noting model")
            .lock()
            .expect("not poisoned")[index]
    }

    /// Starts the server on loopback: its base URL (`http://…/v1`).
    pub async fn serve(self) -> String {
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(self);
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
}

/// One streamed answer of as many tokens as the last message says.
async fn completions(
    State(model): State<Model>,
    Json(request): Json<Value>,
) -> axum::response::Response {
    let tokens: usize = request["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|message| message["content"].as_str())
        .and_then(|content| content.trim().parse().ok())
        .expect("the last message says how many tokens");
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<String, Infallible>>(16);
    if let Some(sent) = &model.sent {
        sent.lock().expect("not poisoned").clear();
    }
    tokio::spawn(async move {
        let chunk = |delta: Value, finish: Option<&str>| {
            let body = json!({
                "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
                "model": "bench",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            });
            format!("data: {body}\n\n")
        };
        let mut ticks = (!model.every.is_zero()).then(|| tokio::time::interval(model.every));
        for i in 0..tokens {
            if let Some(ticks) = &mut ticks {
                ticks.tick().await;
            }
            let data = chunk(json!({"content": format!("w{i} ")}), None);
            if let Some(sent) = &model.sent {
                sent.lock().expect("not poisoned").push(Instant::now());
            }
            if tx.send(Ok(data)).await.is_err() {
                return;
            }
        }
        let _ = tx.send(Ok(chunk(json!({}), Some("stop")))).await;
        let _ = tx.send(Ok("data: [DONE]\n\n".to_owned())).await;
    });
    let body = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(
            body.map(|item| item.map(axum::body::Bytes::from)),
        ))
        .expect("a response")
}

/// Where a client reads its tokens: a run through `serve` (its AG-UI events), or the model
/// server itself (its chunks).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Read {
    Serve,
    Direct,
}

impl Read {
    /// A request of an answer of `tokens` tokens: a run on a new thread, or a chat completion.
    pub fn body(self, tokens: usize) -> String {
        let id = uuid::Uuid::now_v7().simple();
        match self {
            Self::Serve => json!({
                "threadId": format!("thread-{id}"),
                "runId": format!("run-{id}"),
                "messages": [{"id": "m", "role": "user", "content": tokens.to_string()}],
            }),
            Self::Direct => json!({
                "model": "bench", "stream": true,
                "messages": [{"role": "user", "content": tokens.to_string()}],
            }),
        }
        .to_string()
    }

    /// The token a frame's data carries, if any: a `TEXT_MESSAGE_CONTENT`'s delta, or a
    /// chunk's content; the event itself when it is a run's error.
    fn token_of(self, data: &str) -> Result<Option<usize>, String> {
        if data == "[DONE]" {
            return Ok(None);
        }
        let event: Value = serde_json::from_str(data).expect("a frame's JSON");
        let token = match self {
            Self::Serve if event["type"] == "RUN_ERROR" => return Err(event.to_string()),
            Self::Serve if event["type"] != "TEXT_MESSAGE_CONTENT" => return Ok(None),
            Self::Serve => &event["delta"],
            Self::Direct => &event["choices"][0]["delta"]["content"],
        };
        let index = token.as_str().and_then(|t| t.trim().strip_prefix('w'));
        Ok(index.map(|n| n.parse().expect("a token of the bench's model")))
    }

    /// Posts a request of `tokens` tokens to `url` and reads the answer to its end, calling
    /// `token` with each token's index as it arrives: the time the request was sent, or the
    /// run's error.
    pub async fn run(
        self,
        client: &reqwest::Client,
        url: &str,
        tokens: usize,
        mut token: impl FnMut(usize, Instant),
    ) -> Result<Instant, String> {
        let asked = Instant::now();
        let response = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(self.body(tokens))
            .send()
            .await
            .expect("the server answers");
        assert_eq!(response.status(), 200);
        let mut stream = response.bytes_stream();
        let mut pending = Vec::new();
        while let Some(chunk) = stream.next().await {
            let arrived = Instant::now();
            pending.extend_from_slice(&chunk.expect("the body streams"));
            while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = pending.drain(..end + 2).collect();
                let frame = String::from_utf8_lossy(&frame);
                let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                if let Some(index) = self.token_of(data)? {
                    token(index, arrived);
                }
            }
        }
        Ok(asked)
    }

    /// Posts a request of `tokens` tokens to `url` and reads the answer to its end: the time
    /// from the request to its first token, or the run's error.
    pub async fn first_token(
        self,
        client: &reqwest::Client,
        url: &str,
        tokens: usize,
    ) -> Result<Duration, String> {
        let (mut first, mut count) = (None, 0);
        let asked = self
            .run(client, url, tokens, |_, arrived| {
                first.get_or_insert(arrived);
                count += 1;
            })
            .await?;
        assert_eq!(count, tokens, "every token arrived");
        Ok(first.expect("a first token") - asked)
    }
}
