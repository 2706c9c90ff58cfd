//! The body of a `:streamGenerateContent` request, from a [`ModelRequest`].

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::Settings;
use crate::{
    id::ToolCallId,
    message::{ContentPart, MediaSource, Message},
    model::ModelRequest,
    tool::ToolSpec,
};

/// The JSON body: the system instruction, the conversation as `user` and `model` contents, the
/// function declarations and the generation config.
pub(super) fn body(settings: &Settings, request: &ModelRequest) -> Value {
    let mut body = Map::new();
    let system: Vec<Value> = request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System { content, .. } | Message::Developer { content, .. } => {
                Some(json!({"text": content}))
            }
            _ => None,
        })
        .collect();
    if !system.is_empty() {
        body.insert("systemInstruction".into(), json!({"parts": system}));
    }
    body.insert("contents".into(), contents(&request.messages));
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request.tools.iter().map(declaration).collect();
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    let mut config = Map::new();
    if let Some(max) = request.options.max_output_tokens {
        config.insert("maxOutputTokens".into(), max.into());
    }
    if let Some(temperature) = request.options.temperature {
        config.insert("temperature".into(), temperature.into());
    }
    if let Some(budget) = settings.thinking_budget {
        config.insert(
            "thinkingConfig".into(),
            json!({"includeThoughts": true, "thinkingBudget": budget}),
        );
    }
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    Value::Object(body)
}

fn declaration(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
    })
}

/// The conversation as `user` and `model` contents, the parts of consecutive messages of one
/// side in one content (a step's answer with its calls, the results of parallel calls together).
/// Reasoning is not sent back: the API keeps its own.
fn contents(messages: &[Message]) -> Value {
    // A function's response names the function: the name of the call it answers.
    let names: HashMap<&ToolCallId, &str> = messages
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .map(|call| (&call.id, call.name.as_str()))
        .collect();
    let mut contents: Vec<(&str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, parts) = match message {
            Message::User { content, .. } => ("user", content.iter().map(part).collect()),
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                let text = (!content.is_empty()).then(|| json!({"text": content}));
                let calls = tool_calls.iter().map(|call| {
                    let args = serde_json::from_str::<Value>(&call.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    let mut part =
                        json!({"functionCall": {"id": call.id, "name": call.name, "args": args}});
                    // The thought signature the call came with goes back with it.
                    if let Some(signature) = &call.encrypted_value {
                        part["thoughtSignature"] = signature.as_str().into();
                    }
                    part
                });
                ("model", text.into_iter().chain(calls).collect())
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let text = crate::message::parts_to_text(content);
                let response = if *is_error {
                    json!({"error": text})
                } else {
                    json!({"result": text})
                };
                let name = names.get(tool_call_id).copied().unwrap_or_default();
                let part = json!({
                    "functionResponse": {"id": tool_call_id, "name": name, "response": response}
                });
                ("user", vec![part])
            }
            Message::System { .. }
            | Message::Developer { .. }
            | Message::Reasoning { .. }
            | Message::Subagent { .. } => continue,
        };
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((last, kept)) if *last == role => kept.extend(parts),
            _ => contents.push((role, parts)),
        }
    }
    contents
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect()
}

/// Text as text, inline media as `inlineData`, media behind a URL as `fileData`.
fn part(part: &ContentPart) -> Value {
    let media = match part {
        ContentPart::Text { text } => return json!({"text": text}),
        ContentPart::Json { .. } => return json!({"text": part.to_text()}),
        ContentPart::Image { source }
        | ContentPart::Audio { source }
        | ContentPart::Video { source }
        | ContentPart::Document { source } => source,
    };
    match media {
        MediaSource::Data { data, mime_type } => {
            json!({"inlineData": {"mimeType": mime_type, "data": data}})
        }
        MediaSource::Url {
            url,
            mime_type: Some(mime_type),
        } => json!({"fileData": {"mimeType": mime_type, "fileUri": url}}),
        // The API needs a media type for a file: without one, the part is described.
        MediaSource::Url {
            mime_type: None, ..
        } => json!({"text": part.to_text()}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{context::RunContext, id::MessageId, message::ToolCallRequest};

    #[test]
    fn calls_and_their_results_name_the_function_and_sit_together() {
        let call = |id: &str, arguments: &str| ToolCallRequest {
            id: ToolCallId::from(id),
            name: "add".into(),
            arguments: arguments.into(),
            encrypted_value: (id == "a").then(|| "c2lnbmF0dXJl".to_owned()),
        };
        let result = |id: &str, text: &str, is_error| Message::Tool {
            id: MessageId::from(format!("t-{id}")),
            tool_call_id: ToolCallId::from(id),
            content: vec![ContentPart::text(text)],
            is_error,
        };
        let request = ModelRequest {
            messages: vec![
                Message::system("be brief"),
                Message::user("add twice"),
                Message::Reasoning {
                    id: MessageId::from("r"),
                    content: "hmm".into(),
                    encrypted_value: None,
                },
                Message::Assistant {
                    id: MessageId::from("m"),
                    content: "Adding.".into(),
                    tool_calls: vec![call("a", r#"{"a":1}"#), call("b", "{oops")],
                },
                result("a", "1", false),
                result("b", "not JSON", true),
            ],
            tools: vec![ToolSpec::new("add", "Adds.")].into(),
            options: crate::model::ModelOptions {
                max_output_tokens: Some(100),
                temperature: Some(0.2),
            },
            run: RunContext::new("t".into(), "r".into()),
        };
        let settings = Settings {
            thinking_budget: Some(512),
        };
        let body = body(&settings, &request);
        assert_eq!(body["systemInstruction"]["parts"][0]["text"], "be brief");
        assert_eq!(body["tools"][0]["functionDeclarations"][0]["name"], "add");
        assert_eq!(body["generationConfig"]["maxOutputTokens"], 100);
        assert_eq!(body["generationConfig"]["temperature"].to_string(), "0.2");
        assert_eq!(
            body["generationConfig"]["thinkingConfig"],
            json!({"includeThoughts": true, "thinkingBudget": 512})
        );
        assert_eq!(
            body["contents"],
            json!([
                {"role": "user", "parts": [{"text": "add twice"}]},
                {"role": "model", "parts": [
                    {"text": "Adding."},
                    {"functionCall": {"id": "a", "name": "add", "args": {"a": 1}}, "thoughtSignature": "c2lnbmF0dXJl"},
                    {"functionCall": {"id": "b", "name": "add", "args": {}}},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"id": "a", "name": "add", "response": {"result": "1"}}},
                    {"functionResponse": {"id": "b", "name": "add", "response": {"error": "not JSON"}}},
                ]},
            ])
        );
    }

    #[test]
    fn media_inline_or_by_url() {
        let request = ModelRequest {
            messages: vec![Message::User {
                id: MessageId::from("u"),
                content: vec![
                    ContentPart::Image {
                        source: MediaSource::Data {
                            data: "aGk=".into(),
                            mime_type: "image/png".into(),
                        },
                    },
                    ContentPart::Video {
                        source: MediaSource::Url {
                            url: "https://example.com/v.mp4".into(),
                            mime_type: Some("video/mp4".into()),
                        },
                    },
                ],
            }],
            tools: Default::default(),
            options: Default::default(),
            run: RunContext::new("t".into(), "r".into()),
        };
        let settings = Settings {
            thinking_budget: None,
        };
        let body = body(&settings, &request);
        let parts = &body["contents"][0]["parts"];
        assert_eq!(parts[0]["inlineData"]["mimeType"], "image/png");
        assert_eq!(parts[1]["fileData"]["fileUri"], "https://example.com/v.mp4");
        assert!(body.get("generationConfig").is_none());
    }
}
