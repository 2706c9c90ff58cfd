//! The body of a streamed `/v1/messages` request, from a [`ModelRequest`].

use serde_json::{Map, Value, json};

use super::{Settings, thinking::Sealed};
use crate::{
    message::{ContentPart, MediaSource, Message, ToolCallRequest},
    model::ModelRequest,
    tool::ToolSpec,
};

/// The JSON body: the system prompt, the conversation in alternating turns, the tools, the
/// sampling options and `stream: true`.
pub(super) fn body(model: &str, settings: &Settings, request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    let max_tokens = request
        .options
        .max_output_tokens
        .unwrap_or(settings.max_tokens);
    body.insert("max_tokens".into(), max_tokens.into());
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System { content, .. } | Message::Developer { content, .. } => {
                Some(content.as_str())
            }
            _ => None,
        })
        .collect();
    if !system.is_empty() {
        body.insert("system".into(), system.join("\n\n").into());
    }
    body.insert("messages".into(), turns(&request.messages));
    if !request.tools.is_empty() {
        body.insert("tools".into(), request.tools.iter().map(tool).collect());
    }
    match settings.thinking_budget {
        Some(budget) => {
            // The API takes no temperature with thinking on: its own is required.
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        None => {
            if let Some(temperature) = request.options.temperature {
                body.insert("temperature".into(), temperature.into());
            }
        }
    }
    body.insert("stream".into(), true.into());
    Value::Object(body)
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.parameters,
    })
}

/// The conversation as the API wants it: `user` and `assistant` turns of content blocks, the
/// blocks of consecutive messages of one side in one turn (a step's reasoning with its answer,
/// the results of parallel calls together).
fn turns(messages: &[Message]) -> Value {
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::User { content, .. } => ("user", content.iter().map(part).collect()),
            Message::Reasoning {
                content,
                encrypted_value,
                ..
            } => ("assistant", thinking(content, encrypted_value.as_deref())),
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                let text = (!content.is_empty()).then(|| json!({"type": "text", "text": content}));
                let calls = tool_calls.iter().map(tool_use);
                ("assistant", text.into_iter().chain(calls).collect())
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let mut result = json!({
                    "type": "tool_result",
                    "tool_use_id": tool_call_id,
                    "content": crate::message::parts_to_text(content),
                });
                if *is_error {
                    result["is_error"] = true.into();
                }
                ("user", vec![result])
            }
            Message::System { .. } | Message::Developer { .. } | Message::Subagent { .. } => {
                continue;
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, kept)) if *last == role => kept.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// A reasoning message as the block the API signed, or nothing: reasoning without the
/// provider's signature (another provider's, a client's own) cannot be sent back.
fn thinking(content: &str, encrypted_value: Option<&str>) -> Vec<Value> {
    match encrypted_value.map(Sealed::open) {
        Some(Sealed::Signature(signature)) => vec![json!({
            "type": "thinking",
            "thinking": content,
            "signature": signature,
        })],
        Some(Sealed::Redacted(data)) => vec![json!({"type": "redacted_thinking", "data": data})],
        None => Vec::new(),
    }
}

/// A call as a `tool_use` block; arguments that are not a JSON object (the model's own mistake,
/// answered by an error result) go as an empty input, the only shape the API takes back.
fn tool_use(call: &ToolCallRequest) -> Value {
    let input = serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

/// Text as text; images and PDFs as blocks (inline or by URL); anything else described in text.
fn part(part: &ContentPart) -> Value {
    let source = |source: &MediaSource| match source {
        MediaSource::Data { data, mime_type } => {
            json!({"type": "base64", "media_type": mime_type, "data": data})
        }
        MediaSource::Url { url, .. } => json!({"type": "url", "url": url}),
    };
    match part {
        ContentPart::Text { text } => json!({"type": "text", "text": text}),
        ContentPart::Image { source: media } => json!({"type": "image", "source": source(media)}),
        ContentPart::Document { source: media } if is_pdf(media) => {
            json!({"type": "document", "source": source(media)})
        }
        other => json!({"type": "text", "text": other.to_text()}),
    }
}

fn is_pdf(source: &MediaSource) -> bool {
    match source {
        MediaSource::Data { mime_type, .. } => mime_type == "application/pdf",
        MediaSource::Url { url, mime_type } => {
            mime_type.as_deref() == Some("application/pdf")
                || std::path::Path::new(url)
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("pdf"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        context::RunContext,
        id::{MessageId, ToolCallId},
    };

    fn settings(thinking_budget: Option<u32>) -> Settings {
        Settings {
            max_tokens: 1024,
            thinking_budget,
        }
    }

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            messages,
            tools: vec![ToolSpec::new("add", "Adds.")].into(),
            options: crate::model::ModelOptions {
                temperature: Some(0.5),
                ..Default::default()
            },
            run: RunContext::new("t".into(), "r".into()),
        }
    }

    fn call(id: &str, arguments: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: ToolCallId::from(id),
            name: "add".into(),
            arguments: arguments.into(),
            encrypted_value: None,
        }
    }

    fn result(id: &str, text: &str) -> Message {
        Message::Tool {
            id: MessageId::from(format!("t-{id}")),
            tool_call_id: ToolCallId::from(id),
            content: vec![ContentPart::text(text)],
            is_error: false,
        }
    }

    #[test]
    fn a_step_with_thinking_and_two_calls_is_one_assistant_turn_and_one_user_turn() {
        let body = body(
            "claude",
            &settings(Some(2048)),
            &request(vec![
                Message::system("be brief"),
                Message::user("add twice"),
                Message::Reasoning {
                    id: MessageId::from("m-thinking-0"),
                    content: "two sums".into(),
                    encrypted_value: Some("c2lnbmF0dXJl".into()),
                },
                Message::Reasoning {
                    id: MessageId::from("m-thinking-1"),
                    content: String::new(),
                    encrypted_value: Some(Sealed::Redacted("b3BhcXVl".into()).seal()),
                },
                Message::Reasoning {
                    id: MessageId::from("elsewhere"),
                    content: "unsigned, from another model".into(),
                    encrypted_value: None,
                },
                Message::Assistant {
                    id: MessageId::from("m"),
                    content: "Adding.".into(),
                    tool_calls: vec![call("a", r#"{"a":1}"#), call("b", "{not json")],
                },
                result("a", "1"),
                result("b", "bad arguments"),
            ]),
        );
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 2048})
        );
        assert!(body.get("temperature").is_none(), "not with thinking");
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "add twice"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "two sums", "signature": "c2lnbmF0dXJl"},
                    {"type": "redacted_thinking", "data": "b3BhcXVl"},
                    {"type": "text", "text": "Adding."},
                    {"type": "tool_use", "id": "a", "name": "add", "input": {"a": 1}},
                    {"type": "tool_use", "id": "b", "name": "add", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                    {"type": "tool_result", "tool_use_id": "b", "content": "bad arguments"},
                ]},
            ])
        );
    }

    #[test]
    fn without_thinking_the_temperature_is_sent_and_media_are_blocks() {
        let image = ContentPart::Image {
            source: MediaSource::Data {
                data: "aGk=".into(),
                mime_type: "image/png".into(),
            },
        };
        let pdf = ContentPart::Document {
            source: MediaSource::Url {
                url: "https://example.com/a.pdf".into(),
                mime_type: None,
            },
        };
        let mut request = request(vec![Message::User {
            id: MessageId::from("u"),
            content: vec![ContentPart::text("look"), image, pdf],
        }]);
        request.options.max_output_tokens = Some(99);
        let body = body("claude", &settings(None), &request);
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["max_tokens"], 99);
        assert!(body.get("system").is_none());
        let content = &body["messages"][0]["content"];
        assert_eq!(content[1]["source"]["media_type"], "image/png");
        assert_eq!(content[2]["type"], "document");
        assert_eq!(content[2]["source"]["url"], "https://example.com/a.pdf");
    }
}
