//! Your own model client as a `Service<ModelRequest>`: an adapter for Ollama's native chat API
//! (`POST /api/chat`, one JSON object per line), not its OpenAI-compatible one. Any client
//! works the same way: turn the request's messages and tools into the client's, and its answer
//! into a stream of `ModelEvent`s under the step's message id.
//!
//! ```text
//! ollama pull qwen3:0.6b
//! cargo run --example own_model --features "server stack openai"
//! ```

use std::task::{Context, Poll};

use agent_tower::{
    BoxError,
    id::ToolCallId,
    message::Message,
    model::{BoxModelStream, FinishReason, ModelEvent, ModelRequest},
    server::AguiServer,
    stack::Stack,
    tool::demo::demo_tools,
};
use futures_util::{StreamExt, TryStreamExt, future::BoxFuture};
use serde_json::{Value, json};
use tower::Service;

/// Ollama's chat API at `base` (`http://127.0.0.1:11434`), for `model`.
#[derive(Clone)]
struct Ollama {
    http: reqwest::Client,
    base: String,
    model: String,
}

impl Service<ModelRequest> for Ollama {
    type Response = BoxModelStream;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<BoxModelStream, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let body = json!({
            "model": self.model,
            "stream": true,
            "messages": req.messages.iter().filter_map(to_ollama).collect::<Vec<_>>(),
            "tools": req.tools.iter().map(|tool| json!({"type": "function", "function": {
                "name": tool.name, "description": tool.description, "parameters": tool.parameters,
            }})).collect::<Vec<_>>(),
        });
        let send = self
            .http
            .post(format!("{}/api/chat", self.base))
            .json(&body)
            .send();
        let message_id = req.run.message_id.clone();
        Box::pin(async move {
            let response = send.await?.error_for_status()?;
            // One JSON object a line; a line may arrive in pieces.
            let lines = response
                .bytes_stream()
                .map_err(BoxError::from)
                .scan(Vec::new(), |pending: &mut Vec<u8>, chunk| {
                    let lines = chunk.map(|bytes| {
                        pending.extend_from_slice(&bytes);
                        let mut lines = Vec::new();
                        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                            lines.push(pending.drain(..=end).collect::<Vec<u8>>());
                        }
                        lines
                    });
                    std::future::ready(Some(lines))
                })
                .map_ok(|lines| {
                    futures_util::stream::iter(lines.into_iter().map(Ok::<_, BoxError>))
                })
                .try_flatten();
            let mut called = false;
            let events = lines.map(move |line| {
                let chunk: Value = serde_json::from_slice(&line?)?;
                Ok::<_, BoxError>(events_of(&chunk, &message_id, &mut called))
            });
            let events = events
                .map_ok(|events| futures_util::stream::iter(events.into_iter().map(Ok)))
                .try_flatten();
            Ok(Box::pin(events) as BoxModelStream)
        })
    }
}

/// A message as Ollama takes it (`None`: one it takes no part of).
fn to_ollama(message: &Message) -> Option<Value> {
    Some(match message {
        Message::System { content, .. } | Message::Developer { content, .. } => {
            json!({"role": "system", "content": content})
        }
        Message::User { .. } => json!({"role": "user", "content": message.text()}),
        Message::Assistant {
            content,
            tool_calls,
            ..
        } => json!({
            "role": "assistant",
            "content": content,
            "tool_calls": tool_calls.iter().map(|call| json!({"function": {
                "name": call.name,
                "arguments": serde_json::from_str::<Value>(&call.arguments).unwrap_or(json!({})),
            }})).collect::<Vec<_>>(),
        }),
        Message::Tool { .. } => json!({"role": "tool", "content": message.text()}),
        // Ollama takes no reasoning back; a sub-agent's kept work never reaches a model.
        Message::Reasoning { .. } | Message::Subagent { .. } => return None,
    })
}

/// The events of one line of Ollama's answer: text, whole tool calls, the end (`called`: whether
/// an earlier line called tools).
fn events_of(
    chunk: &Value,
    message_id: &agent_tower::id::MessageId,
    called: &mut bool,
) -> Vec<ModelEvent> {
    let mut events = Vec::new();
    let message = &chunk["message"];
    if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
        events.push(ModelEvent::TextDelta {
            message_id: message_id.clone(),
            delta: text.into(),
        });
    }
    let calls = message["tool_calls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    *called |= !calls.is_empty();
    for call in calls {
        // Ollama sends each call whole, without an id: the adapter gives it one.
        let id = ToolCallId::new();
        let name = call["function"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        events.push(ModelEvent::ToolCallStart {
            id: id.clone(),
            name,
        });
        let arguments = call["function"]["arguments"].to_string();
        events.push(ModelEvent::ToolCallArgs {
            id: id.clone(),
            delta: arguments.into(),
        });
        events.push(ModelEvent::ToolCallEnd { id });
    }
    if chunk["done"] == true {
        let reason = if *called {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        events.push(ModelEvent::Finish(reason));
    }
    events
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let model = Ollama {
        http: reqwest::Client::new(),
        base: "http://127.0.0.1:11434".to_owned(),
        model: "qwen3:0.6b".to_owned(),
    };
    let agent = Stack::new(model, demo_tools()).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
    println!("AG-UI on http://{}/", listener.local_addr()?);
    AguiServer::new(agent)
        .serve(listener, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
