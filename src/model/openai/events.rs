//! The streamed answer: server-sent events carrying chat-completion chunks, as [`ModelEvent`]s.

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::Value;

use super::error;
use crate::{
    id::{MessageId, ToolCallId},
    model::{
        FinishReason, ModelError, ModelEvent, Usage,
        http::{Decode, unreadable},
    },
};

#[derive(Deserialize)]
struct Chunk {
    /// An error reported inside the stream (the whole chunk is then the error).
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    /// llama.cpp, DeepSeek, vLLM.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// OpenRouter, Ollama.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    completion_tokens_details: Option<Details>,
    #[serde(default)]
    prompt_tokens_details: Option<Details>,
}

#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// A tool call being streamed: fragments are keyed by `index`; the id and name come on the first.
struct Call {
    index: usize,
    id: ToolCallId,
    /// Arguments that came before the name, sent once the call has started.
    early_arguments: String,
    started: bool,
    ended: bool,
}

/// Turns `data:` payloads into events, keeping the calls in flight and the finish reason.
pub(super) struct Decoder {
    message_id: MessageId,
    reasoning_id: MessageId,
    calls: Vec<Call>,
    finish: Option<FinishReason>,
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Stop,
    }
}

impl Decoder {
    /// A decoder for the step writing `message_id`; reasoning goes under `{message_id}-reasoning`.
    pub(super) fn new(message_id: MessageId) -> Self {
        Self {
            reasoning_id: MessageId::from(format!("{message_id}-reasoning")),
            message_id,
            calls: Vec::new(),
            finish: None,
        }
    }

    fn push_reasoning(&self, text: String, out: &mut VecDeque<ModelEvent>) {
        if !text.is_empty() {
            out.push_back(ModelEvent::ReasoningDelta {
                message_id: self.reasoning_id.clone(),
                delta: text.into(),
            });
        }
    }

    fn tool_call(&mut self, delta: ToolCallDelta, out: &mut VecDeque<ModelEvent>) {
        let known = match delta.index {
            Some(index) => self.calls.iter().position(|c| c.index == index),
            // Without an index: a fragment with an id opens a call, one without continues the last.
            None if delta.id.is_some() => None,
            None => self.calls.len().checked_sub(1),
        };
        let position = known.unwrap_or_else(|| {
            let index = delta.index.unwrap_or(self.calls.len());
            let id = delta.id.clone().filter(|id| !id.is_empty()).map_or_else(
                || ToolCallId::from(format!("{}-call-{index}", self.message_id)),
                ToolCallId::from,
            );
            self.calls.push(Call {
                index,
                id,
                early_arguments: String::new(),
                started: false,
                ended: false,
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[position];
        if call.ended {
            return;
        }
        let (name, arguments) = delta
            .function
            .map_or((None, None), |f| (f.name, f.arguments));
        if let Some(name) = name.filter(|n| !n.is_empty() && !call.started) {
            call.started = true;
            out.push_back(ModelEvent::ToolCallStart {
                id: call.id.clone(),
                name,
            });
            if !call.early_arguments.is_empty() {
                out.push_back(ModelEvent::ToolCallArgs {
                    id: call.id.clone(),
                    delta: std::mem::take(&mut call.early_arguments).into(),
                });
            }
        }
        if let Some(arguments) = arguments.filter(|a| !a.is_empty()) {
            if call.started {
                out.push_back(ModelEvent::ToolCallArgs {
                    id: call.id.clone(),
                    delta: arguments.into(),
                });
            } else {
                call.early_arguments.push_str(&arguments);
            }
        }
    }

    fn end_calls(&mut self, out: &mut VecDeque<ModelEvent>) -> Result<(), ModelError> {
        for call in self.calls.iter_mut().filter(|c| !c.ended) {
            if !call.started {
                return Err(unreadable(format!("tool call {} has no name", call.index)));
            }
            call.ended = true;
            out.push_back(ModelEvent::ToolCallEnd {
                id: call.id.clone(),
            });
        }
        Ok(())
    }
}

impl Decode for Decoder {
    const LAST: &'static str = "[DONE]";

    /// One `data:` payload; `Ok(true)` at `[DONE]`.
    fn data(&mut self, data: &str, out: &mut VecDeque<ModelEvent>) -> Result<bool, ModelError> {
        if data.trim() == "[DONE]" {
            self.end_calls(out)?;
            let reason = match self.finish.take() {
                // Some servers (Ollama) say `stop` after calling tools.
                Some(FinishReason::Stop) | None if !self.calls.is_empty() => {
                    FinishReason::ToolCalls
                }
                Some(reason) => reason,
                None => FinishReason::Stop,
            };
            out.push_back(ModelEvent::Finish(reason));
            return Ok(true);
        }
        // One parse, into the chunk's own types.
        let chunk: Chunk = serde_json::from_str(data).map_err(unreadable)?;
        if let Some(error) = &chunk.error {
            return Err(error::from_stream(error));
        }
        // Only the first choice: one answer per step.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index != 0 {
                continue;
            }
            let delta = choice.delta.unwrap_or_default();
            if let Some(text) = delta.reasoning_content.or(delta.reasoning) {
                self.push_reasoning(text, out);
            }
            for text in [delta.content, delta.refusal].into_iter().flatten() {
                if !text.is_empty() {
                    out.push_back(ModelEvent::TextDelta {
                        message_id: self.message_id.clone(),
                        delta: text.into(),
                    });
                }
            }
            for call in delta.tool_calls.unwrap_or_default() {
                self.tool_call(call, out);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(finish_reason(&reason));
                self.end_calls(out)?;
            }
        }
        if let Some(usage) = chunk.usage {
            out.push_back(ModelEvent::Usage(Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
                reasoning_tokens: usage
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens),
                cached_input_tokens: usage.prompt_tokens_details.and_then(|d| d.cached_tokens),
                ..Usage::default()
            }));
        }
        Ok(false)
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
    use crate::model::ModelErrorKind;

    fn decode(payloads: &[&str]) -> Result<Vec<ModelEvent>, ModelError> {
        crate::model::http::decode_all(Decoder::new(MessageId::from("m")), payloads)
    }

    #[test]
    fn fragments_without_index_or_with_arguments_before_the_name() {
        let events = decode(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"f","arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            events,
            [
                ModelEvent::ToolCallStart {
                    id: "a".into(),
                    name: "f".into()
                },
                ModelEvent::ToolCallArgs {
                    id: "a".into(),
                    delta: r#"{"x""#.into()
                },
                ModelEvent::ToolCallArgs {
                    id: "a".into(),
                    delta: ":1}".into()
                },
                ModelEvent::ToolCallEnd { id: "a".into() },
                ModelEvent::Finish(FinishReason::ToolCalls),
            ]
        );
    }

    #[test]
    fn an_error_inside_the_stream_is_an_error() {
        let error = decode(&[r#"{"error":{"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}"#])
            .unwrap_err();
        assert_eq!(error.kind(), ModelErrorKind::ContextLength);
        let nameless = decode(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a"}]},"finish_reason":"tool_calls"}]}"#,
        ])
        .unwrap_err();
        assert!(nameless.message().contains("no name"), "{nameless}");
    }
}
