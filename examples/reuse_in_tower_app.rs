//! Our layers stacked with tower's own: timeout, retry and concurrency limit.
//!
//! ```text
//! cargo run --example reuse_in_tower_app
//! ```
//!
//! The model is busy (its first call is rate-limited); tower's `Retry`, with a policy that asks
//! the error's class whether to retry, retries it with backoff before any token was streamed.
//! `Timeout` bounds each call, and the tools run at most two at a time. The run's AG-UI events
//! are printed as the SSE lines a browser would receive.

use std::{
    convert::Infallible,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use agent_tower::{
    BoxError,
    agent::Agent,
    agui::{AguiLayer, Event},
    map_error::{ClassifyError, DefaultClassifier},
    message::Message,
    model::{ModelError, ModelErrorKind, ModelRequest, scripted::ScriptedModel},
    run::RunRequest,
    tool::{ToolCall, ToolOutput, ToolRouter, ToolSpec},
    transport::Channel,
};
use futures_util::StreamExt;
use serde_json::json;
use tower::{ServiceBuilder, ServiceExt, retry::Policy, service_fn};

/// Retries model calls whose error class is retryable (rate limited, timeout, transport), waiting
/// what the provider asked for or a doubling backoff.
#[derive(Clone, Debug)]
struct RetryTransient {
    attempts_left: u32,
    backoff: Duration,
}

impl<Res> Policy<ModelRequest, Res, BoxError> for RetryTransient {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _req: &mut ModelRequest,
        result: &mut Result<Res, BoxError>,
    ) -> Option<Self::Future> {
        let Err(error) = result else { return None };
        let class = DefaultClassifier::new().classify(&**error);
        if !class.retryable || self.attempts_left == 0 {
            return None;
        }
        self.attempts_left -= 1;
        let asked = find_retry_after(&**error);
        let wait = asked.unwrap_or(self.backoff);
        self.backoff *= 2;
        eprintln!("model call failed ({error}); retrying in {wait:?}");
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, req: &ModelRequest) -> Option<ModelRequest> {
        Some(req.clone())
    }
}

/// The provider's `retry-after`, if the error carries one.
fn find_retry_after(error: &(dyn std::error::Error + 'static)) -> Option<Duration> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(model) = e.downcast_ref::<ModelError>() {
            return model.retry_after();
        }
        cause = e.source();
    }
    None
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // A model whose first call is rate-limited, before streaming anything.
    let failed_once = Arc::new(AtomicBool::new(false));
    let flaky_model = service_fn(move |req: ModelRequest| {
        let failed_once = failed_once.clone();
        async move {
            if !failed_once.swap(true, Ordering::SeqCst) {
                return Err(
                    ModelError::new(ModelErrorKind::RateLimited, "429 Too Many Requests")
                        .with_retry_after(Duration::from_millis(20)),
                );
            }
            ScriptedModel::new().oneshot(req).await
        }
    });

    let tools = ToolRouter::new()
        .route(
            ToolSpec::new("get_time", "The current time."),
            service_fn(|_: ToolCall| async {
                Ok::<_, Infallible>(ToolOutput::text("2026-11-22T12:00:00Z"))
            }),
        )
        .route(
            ToolSpec::new("add", "Adds a and b.").parameters(json!({
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            })),
            service_fn(|call: ToolCall| async move {
                let sum = call.arguments["a"].as_f64().unwrap_or(0.0)
                    + call.arguments["b"].as_f64().unwrap_or(0.0);
                Ok::<_, Infallible>(ToolOutput::json(json!(sum)))
            }),
        );
    let specs = tools.specs();

    let agui = AguiLayer::new();
    let model = ServiceBuilder::new()
        .check_clone()
        .layer(agui.clone())
        .retry(RetryTransient {
            attempts_left: 3,
            backoff: Duration::from_millis(50),
        })
        .timeout(Duration::from_secs(30))
        .service(flaky_model);
    let tools = ServiceBuilder::new()
        .layer(agui.clone())
        .concurrency_limit(2)
        .timeout(Duration::from_secs(10))
        .service(tools);
    let agent = ServiceBuilder::new()
        .layer(agui)
        .timeout(Duration::from_secs(120))
        .service(Agent::new(model, tools).tool_specs(specs));

    // One run, one channel: this is what an SSE endpoint does per request.
    let (tx, rx) = Channel::<Event>::bounded(64);
    let mut req = RunRequest::new(vec![Message::user(
        r#"think, then call get_time and add {"a": 2, "b": 40}"#,
    )]);
    req.run.sinks.insert(tx);
    let printer = tokio::spawn(rx.for_each(|event| async move {
        println!(
            "data: {}\n",
            serde_json::to_string(&event).expect("events serialize")
        );
    }));

    let outcome = agent.oneshot(req).await?;
    printer.await?;
    eprintln!(
        "run finished: {:?}, {} messages, {} tokens",
        outcome.stop,
        outcome.messages.len(),
        outcome.usage.total_tokens()
    );
    Ok(())
}
