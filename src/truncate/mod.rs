//! Bounding what a UI receives, never what the agent receives: [`TruncateLayer`].
//!
//! Around a **tool** service, a result larger than `max_ui_payload` bytes (default 50 KiB) gets a
//! [`display`](crate::tool::ToolOutput::display) copy: its text cut on a character boundary with
//! a marker saying what was cut (`[truncated: 1.2 MiB of JSON]`), or, for JSON with
//! [`JsonDisplay::Summarize`], a summary of its shape. The model still receives the whole result;
//! [`AguiLayer`](crate::agui::AguiLayer) (and the ACP layer) show the copy.
//!
//! Around a **model** service, text, reasoning and tool-argument deltas larger than `max_delta`
//! (default 16 KiB) are split into several deltas, never inside a character; their concatenation
//! is the original.
//!
//! Put it *inside* the emitting layer, so that the emitter sees what it bounds:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::agui::{AguiLayer, Event};
//! use agent_tower::tool::{ToolCall, ToolOutput};
//! use agent_tower::transport::Recording;
//! use agent_tower::truncate::{JsonDisplay, TruncateLayer};
//! use serde_json::json;
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! let rows = json!({"rows": vec![json!({"id": 1, "name": "row"}); 10_000]});
//! let big_query = service_fn(move |_: ToolCall| {
//!     let rows = rows.clone();
//!     async move { Ok::<_, std::convert::Infallible>(ToolOutput::json(rows)) }
//! });
//!
//! let ui = Recording::new();
//! let tool = ServiceBuilder::new()
//!     .layer(AguiLayer::new().transport(ui.clone()))
//!     .layer(TruncateLayer::new().max_ui_payload(1024)?.json(JsonDisplay::Summarize))
//!     .service(big_query);
//!
//! let output = tool.oneshot(ToolCall::new("query", json!({}))).await?;
//! assert!(output.to_text().len() > 200_000, "the agent gets everything");
//! let Event::ToolCallResult(shown) = &ui.events()[0] else { unreachable!() };
//! let shown = serde_json::to_string(&shown.content)?;
//! assert!(shown.len() < 1024, "the UI gets a bounded copy");
//! assert!(shown.contains("rows: array of 10000 items"));
//! # Ok(()) }
//! ```
//!
//! # When it acts
//!
//! - On a tool's `Ok` result whose content (text, JSON as text, media by their data size) is over
//!   `max_ui_payload`; smaller results and errors pass untouched. A `display` an inner layer set is
//!   bounded in turn.
//! - On a model delta over `max_delta`, as it streams: the stream yields its pieces one by one
//!   before pulling the next event. Other events pass untouched.
//!
//! # Differences from a transport limit
//!
//! The SSE body could cut events too, but it would not know what it cuts. Here the cut happens
//! where the meaning is known (a JSON result, a text delta), once, and every protocol shows the
//! same bounded copy.

mod cut;
pub mod future;
mod layer;
mod service;
mod stream;

pub use self::{
    layer::{JsonDisplay, MIN_DELTA, MIN_UI_PAYLOAD, TruncateLayer, error},
    service::Truncate,
    stream::ResponseStream,
};
use crate::{
    message::{ContentPart, MediaSource, parts_to_text},
    tool::ToolOutput,
};

/// Bytes a UI would receive for these parts.
fn payload_size(parts: &[ContentPart]) -> usize {
    parts
        .iter()
        .map(|part| match part {
            ContentPart::Text { text } => text.len(),
            ContentPart::Json { value } => value.to_string().len(),
            ContentPart::Image { source }
            | ContentPart::Audio { source }
            | ContentPart::Video { source }
            | ContentPart::Document { source } => match source {
                MediaSource::Data { data, .. } => data.len(),
                MediaSource::Url { url, .. } => url.len(),
            },
        })
        .sum()
}

/// Sets `output.display` to a bounded copy when what a UI would show is over the limit.
fn bound(output: &mut ToolOutput, config: &layer::Config) {
    let parts = output.ui_content();
    if payload_size(parts) <= config.max_ui_payload {
        return;
    }
    let text = parts_to_text(parts);
    let shown = match (config.json, parts) {
        (JsonDisplay::Summarize, [ContentPart::Json { value }]) => {
            cut::summarize(value, text.len())
        }
        (_, [ContentPart::Json { .. }]) => text_cut(&text, config.max_ui_payload, "JSON"),
        _ => text_cut(&text, config.max_ui_payload, "text"),
    };
    let shown = cut::truncate(&shown, config.max_ui_payload, "summary").unwrap_or(shown);
    output.display = Some(vec![ContentPart::text(shown)]);
}

fn text_cut(text: &str, max: usize, what: &str) -> String {
    cut::truncate(text, max, what).unwrap_or_else(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max: usize, json: JsonDisplay) -> layer::Config {
        layer::Config {
            max_ui_payload: max,
            max_delta: 16,
            json,
        }
    }

    #[test]
    fn small_results_are_left_alone() {
        let mut output = ToolOutput::text("short");
        bound(&mut output, &config(64, JsonDisplay::Truncate));
        assert_eq!(output.display, None);
    }

    #[test]
    fn large_text_gets_a_cut_copy_and_keeps_its_content() {
        let text = "é".repeat(1000);
        let mut output = ToolOutput::text(text.clone());
        bound(&mut output, &config(100, JsonDisplay::Truncate));
        assert_eq!(output.to_text(), text);
        let shown = parts_to_text(output.ui_content());
        assert!(shown.len() <= 100);
        assert!(shown.ends_with("of text]"), "{shown}");
        // Bounding again changes nothing.
        let before = output.display.clone();
        bound(&mut output, &config(100, JsonDisplay::Truncate));
        assert_eq!(output.display, before);
    }

    #[test]
    fn media_counts_by_its_data() {
        let mut output = ToolOutput {
            content: vec![ContentPart::Image {
                source: MediaSource::Data {
                    data: "A".repeat(10_000),
                    mime_type: "image/png".into(),
                },
            }],
            is_error: false,
            display: None,
        };
        bound(&mut output, &config(100, JsonDisplay::Truncate));
        let shown = parts_to_text(output.ui_content());
        assert!(shown.contains("image/png"), "{shown}");
    }
}
