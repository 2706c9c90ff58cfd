//! The body of a streamed `/v1/chat/completions` request, from a [`ModelRequest`].

use serde_json::{Map, Value, json};

use crate::{
    message::{ContentPart, MediaSource, Message},
    model::ModelRequest,
    tool::ToolSpec,
};

/// The JSON body: the conversation, the tools, the sampling options, `stream: true` with usage.
pub(super) fn body(model: &str, request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    body.insert(
        "messages".into(),
        request.messages.iter().filter_map(message).collect(),
    );
    if !request.tools.is_empty() {
        body.insert("tools".into(), request.tools.iter().map(tool).collect());
    }
    if let Some(max) = request.options.max_output_tokens {
        body.insert("max_tokens".into(), max.into());
    }
    if let Some(temperature) = request.options.temperature {
        body.insert("temperature".into(), temperature.into());
    }
    body.insert("stream".into(), true.into());
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(body)
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    })
}

/// One message in the provider's shape; reasoning is not sent back (providers keep their own),
/// nor a sub-agent's kept conversation (never the model's).
fn message(message: &Message) -> Option<Value> {
    Some(match message {
        // `developer` is OpenAI's newer name for `system`; compatible servers know `system`.
        Message::System { content, .. } | Message::Developer { content, .. } => {
            json!({"role": "system", "content": content})
        }
        Message::User { content, .. } => json!({"role": "user", "content": user_content(content)}),
        Message::Assistant {
            content,
            tool_calls,
            ..
        } => {
            let mut out = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                out["tool_calls"] = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })
                    })
                    .collect();
            }
            out
        }
        Message::Reasoning { .. } | Message::Subagent { .. } => return None,
        Message::Tool {
            tool_call_id,
            content,
            ..
        } => json!({
            "role": "tool",
            "tool_call_id": tool_call_id,
            "content": crate::message::parts_to_text(content),
        }),
    })
}

/// Text alone as a string; with media, the array of content parts (images as `image_url`, WAV
/// and MP3 as `input_audio`, anything else described in text).
fn user_content(parts: &[ContentPart]) -> Value {
    if parts.iter().all(|p| matches!(p, ContentPart::Text { .. })) {
        return crate::message::parts_to_text(parts).into();
    }
    parts
        .iter()
        .map(|part| match part {
            ContentPart::Image { source } => {
                json!({"type": "image_url", "image_url": {"url": url_of(source)}})
            }
            ContentPart::Audio {
                source: MediaSource::Data { data, mime_type },
            } if audio_format(mime_type).is_some() => json!({
                "type": "input_audio",
                "input_audio": {"data": data, "format": audio_format(mime_type)},
            }),
            other => json!({"type": "text", "text": other.to_text()}),
        })
        .collect()
}

fn url_of(source: &MediaSource) -> String {
    match source {
        MediaSource::Data { data, mime_type } => format!("data:{mime_type};base64,{data}"),
        MediaSource::Url { url, .. } => url.clone(),
    }
}

fn audio_format(mime_type: &str) -> Option<&'static str> {
    match mime_type {
        "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" => Some("mp3"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        context::RunContext,
        id::{MessageId, ToolCallId},
        message::ToolCallRequest,
    };

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            messages,
            tools: vec![ToolSpec::new("add", "Adds.").parameters(json!({"type": "object"}))].into(),
            options: crate::model::ModelOptions::default(),
            run: RunContext::new("t".into(), "r".into()),
        }
    }

    #[test]
    fn the_conversation_in_the_providers_shape() {
        let call = ToolCallRequest {
            id: ToolCallId::from("call_1"),
            name: "add".into(),
            arguments: r#"{"a":1}"#.into(),
            encrypted_value: None,
        };
        let body = body(
            "m",
            &request(vec![
                Message::system("be brief"),
                Message::user("add 1"),
                Message::Reasoning {
                    id: MessageId::from("r"),
                    content: "hmm".into(),
                    encrypted_value: None,
                },
                Message::Assistant {
                    id: MessageId::from("a"),
                    content: String::new(),
                    tool_calls: vec![call],
                },
                Message::Tool {
                    id: MessageId::from("t"),
                    tool_call_id: ToolCallId::from("call_1"),
                    content: vec![ContentPart::text("1")],
                    is_error: false,
                },
            ]),
        );
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "add 1"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "1"},
            ])
        );
        assert_eq!(body["tools"][0]["function"]["name"], "add");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn media_goes_as_content_parts() {
        let user = Message::User {
            id: MessageId::from("u"),
            content: vec![
                ContentPart::text("what is this?"),
                ContentPart::Image {
                    source: MediaSource::Data {
                        data: "AAAA".into(),
                        mime_type: "image/png".into(),
                    },
                },
                ContentPart::Audio {
                    source: MediaSource::Data {
                        data: "BBBB".into(),
                        mime_type: "audio/wav".into(),
                    },
                },
            ],
        };
        let body = body("m", &request(vec![user]));
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "input_audio", "input_audio": {"data": "BBBB", "format": "wav"}},
            ])
        );
    }
}
