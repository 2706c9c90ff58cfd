//! `agent-tower serve --otlp-endpoint`: the spans of a run reach a local OTLP/HTTP endpoint,
//! decoded with the official protobuf definitions (`opentelemetry-proto`); the batch is flushed
//! when the server stops on SIGTERM. The built binary.

use crate::support::process;

use axum::{Router, body::Bytes, extract::State, routing::post};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use process::Process;
use prost::Message as _;
use serde_json::json;
use tokio::sync::mpsc;

async fn collect(
    State(spans): State<mpsc::UnboundedSender<ExportTraceServiceRequest>>,
    body: Bytes,
) {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
    let _ = spans.send(request);
}

#[tokio::test]
async fn a_runs_spans_reach_the_collector() {
    let (tx, mut received) = mpsc::unbounded_channel();
    let collector = Router::new()
        .route("/v1/traces", post(collect))
        .with_state(tx);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, collector).await.unwrap() });

    let mut server = Process::serve(&["--store", "memory", "--otlp-endpoint", &endpoint]).await;
    let answer = server
        .post(&json!({
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "m", "role": "user", "content": "add {\"a\": 1, \"b\": 2}"}],
        }))
        .await;
    assert!(answer.text().await.unwrap().contains("RUN_FINISHED"));
    server.signal("TERM");
    assert!(
        server
            .exit_within(std::time::Duration::from_secs(20))
            .await
            .is_some(),
        "the server stops"
    );

    let mut names = Vec::new();
    let mut service = None;
    while let Ok(request) = received.try_recv() {
        for resource in request.resource_spans {
            if let Some(resource) = &resource.resource {
                for attribute in &resource.attributes {
                    if attribute.key == "service.name" {
                        service = Some(format!("{:?}", attribute.value));
                    }
                }
            }
            for scope in resource.scope_spans {
                names.extend(scope.spans.into_iter().map(|span| span.name));
            }
        }
    }
    names.sort();
    assert_eq!(
        names,
        [
            "chat scripted",
            "chat scripted",
            "execute_tool add",
            "invoke_agent agent-tower"
        ],
        "every span of the run, exported by the time the process exited"
    );
    assert!(service.unwrap().contains("agent-tower"));
}
