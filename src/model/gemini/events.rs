//! The streamed answer: `GenerateContentResponse` chunks as server-sent events (`alt=sse`), as
//! [`ModelEvent`]s.

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::Value;

use super::error;
use crate::{
    id::{MessageId, ToolCallId},
    model::{
        FinishReason, ModelError, ModelErrorKind, ModelEvent, Usage,
        http::{Decode, unreadable},
    },
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk {
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    usage_metadata: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    function_call: Option<FunctionCall>,
    /// The signature of the thinking that led to this part, to be sent back with it.
    #[serde(default)]
    thought_signature: Option<String>,
}

#[derive(Deserialize)]
struct FunctionCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
}

/// Turns the chunks into model events, keeping the usage (each chunk reports it so far) and the
/// finish reason: the stream has no end marker, it ends after the chunk that finishes.
pub(super) struct Decoder {
    message_id: MessageId,
    reasoning_id: MessageId,
    calls: usize,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
}

/// The finish of a candidate (`finishReason`), or an error for a call the model botched.
fn finish_reason(reason: &str) -> Result<FinishReason, ModelError> {
    Ok(match reason {
        "STOP" | "FINISH_REASON_UNSPECIFIED" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS" => {
            return Err(ModelError::new(
                ModelErrorKind::Other,
                format!("the model's function call was refused by the API ({reason})"),
            ));
        }
        // SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, IMAGE_SAFETY, LANGUAGE, OTHER…
        _ => FinishReason::ContentFilter,
    })
}

impl Decoder {
    /// A decoder for the step writing `message_id`; thoughts go under `{message_id}-thinking`,
    /// calls without an id of their own are `{message_id}-call-{n}`.
    pub(super) fn new(message_id: MessageId) -> Self {
        Self {
            reasoning_id: MessageId::from(format!("{message_id}-thinking")),
            message_id,
            calls: 0,
            usage: None,
            finish: None,
        }
    }

    fn part(&mut self, part: Part, out: &mut VecDeque<ModelEvent>) {
        if let Some(call) = part.function_call {
            // A call comes whole: its arguments are complete.
            let id = call.id.filter(|id| !id.is_empty()).map_or_else(
                || ToolCallId::from(format!("{}-call-{}", self.message_id, self.calls)),
                ToolCallId::from,
            );
            self.calls += 1;
            let arguments = call
                .args
                .unwrap_or_else(|| Value::Object(Default::default()));
            out.push_back(ModelEvent::ToolCallStart {
                id: id.clone(),
                name: call.name,
            });
            if let Some(signature) = part.thought_signature.filter(|s| !s.is_empty()) {
                out.push_back(ModelEvent::ToolCallEncryptedValue {
                    id: id.clone(),
                    value: signature,
                });
            }
            out.push_back(ModelEvent::ToolCallArgs {
                id: id.clone(),
                delta: arguments.to_string().into(),
            });
            out.push_back(ModelEvent::ToolCallEnd { id });
            return;
        }
        let Some(text) = part.text.filter(|t| !t.is_empty()) else {
            return;
        };
        out.push_back(if part.thought {
            ModelEvent::ReasoningDelta {
                message_id: self.reasoning_id.clone(),
                delta: text.into(),
            }
        } else {
            ModelEvent::TextDelta {
                message_id: self.message_id.clone(),
                delta: text.into(),
            }
        });
    }
}

impl Decode for Decoder {
    const LAST: &'static str = "its finish reason";

    /// One `data:` payload; never the last: the body ends after the chunk that finishes.
    fn data(&mut self, data: &str, out: &mut VecDeque<ModelEvent>) -> Result<bool, ModelError> {
        let chunk: Chunk = serde_json::from_str(data).map_err(unreadable)?;
        if let Some(error) = &chunk.error {
            return Err(error::from_stream(error));
        }
        if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            // The prompt itself was blocked: no candidate comes.
            tracing::debug!(%reason, "the provider blocked the prompt");
            self.finish = Some(FinishReason::ContentFilter);
        }
        // Only the first candidate: one answer per step.
        for candidate in chunk.candidates.into_iter().filter(|c| c.index == 0) {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                self.part(part, out);
            }
            if let Some(reason) = candidate.finish_reason {
                self.finish = Some(finish_reason(&reason)?);
            }
        }
        if let Some(usage) = chunk.usage_metadata {
            let thoughts = usage.thoughts_token_count;
            self.usage = Some(Usage {
                input_tokens: usage.prompt_token_count,
                output_tokens: usage.candidates_token_count + thoughts.unwrap_or(0),
                reasoning_tokens: thoughts,
                cached_input_tokens: usage.cached_content_token_count,
                ..Usage::default()
            });
        }
        Ok(false)
    }

    /// The body ends after the chunk that finished; without one it was cut.
    fn body_ended(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        let Some(finish) = self.finish.take() else {
            return Err(ModelError::new(
                ModelErrorKind::StreamCut,
                format!("the provider's stream ended before {}", Self::LAST),
            ));
        };
        if let Some(usage) = self.usage.take() {
            out.push_back(ModelEvent::Usage(usage));
        }
        let finish = match finish {
            FinishReason::Stop if self.calls > 0 => FinishReason::ToolCalls,
            other => other,
        };
        out.push_back(ModelEvent::Finish(finish));
        Ok(())
    }
}

/// The events of a body that arrives in `pieces` (for the fuzz target).
#[cfg(feature = "fuzzing")]
pub(crate) fn decode_sse(pieces: &[&[u8]]) -> Result<Vec<ModelEvent>, ModelError> {
    crate::model::http::decode_pieces(pieces, Decoder::new(MessageId::from("m")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(payloads: &[&str]) -> Result<Vec<ModelEvent>, ModelError> {
        crate::model::http::decode_all(Decoder::new(MessageId::from("m")), payloads)
    }

    #[test]
    fn thoughts_text_a_call_without_id_and_the_usage_so_far() {
        let events = decode(&[
            r#"{"candidates":[{"content":{"parts":[{"text":"Two sums.","thought":true}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":0,"thoughtsTokenCount":4}}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"Adding."},{"functionCall":{"name":"add","args":{"a":1,"b":2}},"thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":7,"thoughtsTokenCount":4,"cachedContentTokenCount":3}}"#,
        ])
        .unwrap();
        let call = ToolCallId::from("m-call-0");
        assert_eq!(
            events,
            [
                ModelEvent::ReasoningDelta {
                    message_id: MessageId::from("m-thinking"),
                    delta: "Two sums.".into()
                },
                ModelEvent::TextDelta {
                    message_id: MessageId::from("m"),
                    delta: "Adding.".into()
                },
                ModelEvent::ToolCallStart {
                    id: call.clone(),
                    name: "add".into()
                },
                ModelEvent::ToolCallEncryptedValue {
                    id: call.clone(),
                    value: "c2ln".into()
                },
                ModelEvent::ToolCallArgs {
                    id: call.clone(),
                    delta: r#"{"a":1,"b":2}"#.into()
                },
                ModelEvent::ToolCallEnd { id: call },
                ModelEvent::Usage(Usage {
                    input_tokens: 9,
                    output_tokens: 11,
                    reasoning_tokens: Some(4),
                    cached_input_tokens: Some(3),
                    ..Usage::default()
                }),
                ModelEvent::Finish(FinishReason::ToolCalls),
            ]
        );
    }

    #[test]
    fn a_blocked_prompt_or_answer_is_a_content_filter_finish() {
        let blocked = decode(&[r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#]).unwrap();
        assert_eq!(
            blocked.last(),
            Some(&ModelEvent::Finish(FinishReason::ContentFilter))
        );
        let recited = decode(&[
            r#"{"candidates":[{"content":{"parts":[{"text":"Once"}]},"finishReason":"RECITATION","index":0}]}"#,
        ])
        .unwrap();
        assert_eq!(
            recited.last(),
            Some(&ModelEvent::Finish(FinishReason::ContentFilter))
        );
    }

    #[test]
    fn a_malformed_call_an_error_and_a_cut_are_errors() {
        let malformed =
            decode(&[r#"{"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL","index":0}]}"#])
                .unwrap_err();
        assert!(malformed.message().contains("MALFORMED_FUNCTION_CALL"));
        let overloaded = decode(&[
            r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#,
        ])
        .unwrap_err();
        assert_eq!(overloaded.kind(), ModelErrorKind::Overloaded);
        let cut = decode(&[r#"{"candidates":[{"content":{"parts":[{"text":"Hel"}]},"index":0}]}"#])
            .unwrap_err();
        assert_eq!(cut.kind(), ModelErrorKind::StreamCut);
    }
}
