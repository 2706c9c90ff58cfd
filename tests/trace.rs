//! The spans of one run with a tool call, exported through `tracing-opentelemetry` into the
//! OpenTelemetry SDK's in-memory exporter: names, GenAI attributes, and who is whose parent.

use std::num::NonZeroU32;

use agent_tower::{agui::Event, demo, message::Message, run::RunRequest, transport::Channel};
use futures_util::StreamExt;
use opentelemetry::{Value, trace::TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tower::ServiceExt;
use tracing_subscriber::layer::SubscriberExt;

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|span| span.name == name).collect()
}

#[tokio::test]
async fn a_run_with_a_tool_call_is_a_tree_of_genai_spans() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let _installed = tracing::subscriber::set_default(subscriber);

    let (tx, rx) = Channel::<Event>::bounded(256);
    let mut request = RunRequest::new(vec![Message::user(r#"add {"a": 1, "b": 2}"#)]);
    request.run.sinks.insert(tx);
    request.run.principal = Some(agent_tower::context::Principal::user("alice").unwrap());
    let thread = request.run.thread_id.clone();
    let agent = demo::scripted()
        .max_turns(NonZeroU32::new(8).unwrap())
        .build();
    let outcome = agent.oneshot(request).await.unwrap();
    drop(rx.collect::<Vec<_>>().await);
    drop(outcome);
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();

    let runs = named(&spans, "invoke_agent agent-tower");
    assert_eq!(
        runs.len(),
        1,
        "{:#?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let run = runs[0];
    assert_eq!(
        attribute(run, "gen_ai.operation.name"),
        Some(&Value::from("invoke_agent"))
    );
    assert_eq!(
        attribute(run, "gen_ai.conversation.id"),
        Some(&Value::from(thread.to_string()))
    );
    assert_eq!(attribute(run, "enduser.id"), Some(&Value::from("alice")));
    let chats = named(&spans, "chat scripted");
    assert_eq!(
        chats.len(),
        2,
        "one model call for the tool call, one for the answer"
    );
    for chat in &chats {
        assert_eq!(
            chat.parent_span_id,
            run.span_context.span_id(),
            "a chat is the run's child"
        );
        assert_eq!(
            attribute(chat, "gen_ai.request.model"),
            Some(&Value::from("scripted"))
        );
        assert!(
            attribute(chat, "gen_ai.usage.output_tokens").is_some(),
            "{chat:#?}"
        );
        assert!(
            attribute(chat, "gen_ai.response.finish_reasons").is_some(),
            "{chat:#?}"
        );
        assert!(
            attribute(chat, "agent_tower.time_to_first_token_ms").is_some(),
            "{chat:#?}"
        );
        assert!(
            attribute(chat, "gen_ai.input.messages").is_none(),
            "no content unless asked for"
        );
    }
    let tools = named(&spans, "execute_tool add");
    assert_eq!(tools.len(), 1);
    let tool = tools[0];
    assert_eq!(
        tool.parent_span_id,
        run.span_context.span_id(),
        "a tool call is the run's child"
    );
    assert_eq!(
        attribute(tool, "gen_ai.tool.name"),
        Some(&Value::from("add"))
    );
    assert!(attribute(tool, "gen_ai.tool.call.id").is_some());
    assert!(attribute(tool, "error.type").is_none());
    assert!(
        attribute(run, "gen_ai.usage.output_tokens").is_some(),
        "{run:#?}"
    );
}
