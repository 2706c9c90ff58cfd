//! The streamed answer: the Messages API's server-sent events, as [`ModelEvent`]s.

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::Value;

use super::{error, thinking::Sealed};
use crate::{
    id::{MessageId, ToolCallId},
    model::{
        FinishReason, ModelError, ModelEvent, Usage,
        http::{Decode, unreadable},
    },
};

/// One event's data; its `type` says which (the SSE event name says the same).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Wire {
    MessageStart {
        message: WireMessage,
    },
    ContentBlockStart {
        index: u32,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: u32,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: u32,
    },
    MessageDelta {
        #[serde(default)]
        delta: WireMessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: Value,
    },
    /// Events added later; the API's versioning policy says to ignore them.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
struct WireMessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
    },
    /// Server tools' blocks and anything newer: not the agent's to act on.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

/// A content block being streamed.
enum Block {
    Text,
    Thinking { id: MessageId, signature: String },
    ToolUse { id: ToolCallId, has_arguments: bool },
    Other,
}

/// Turns the Messages API's events into model events, keeping the blocks in flight, the usage
/// and the stop reason.
pub(super) struct Decoder {
    message_id: MessageId,
    blocks: Vec<(u32, Block)>,
    usage: Usage,
    stop: Option<FinishReason>,
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        // `end_turn`, `stop_sequence`, `pause_turn` and anything newer.
        _ => FinishReason::Stop,
    }
}

impl Decoder {
    /// A decoder for the step writing `message_id`; each thinking block is a reasoning message
    /// `{message_id}-thinking-{index}`.
    pub(super) fn new(message_id: MessageId) -> Self {
        Self {
            message_id,
            blocks: Vec::new(),
            usage: Usage::default(),
            stop: None,
        }
    }

    /// Counts as the API reports them: `input_tokens` without the cached ones (added here, so
    /// that the input is the whole prompt as other providers count it), `output_tokens`
    /// cumulative.
    fn count(&mut self, usage: &WireUsage) {
        let read = usage.cache_read_input_tokens;
        let written = usage.cache_creation_input_tokens;
        if let Some(input) = usage.input_tokens {
            self.usage.input_tokens = input + read.unwrap_or(0) + written.unwrap_or(0);
        }
        if let Some(output) = usage.output_tokens {
            self.usage.output_tokens = output;
        }
        self.usage.cached_input_tokens = read.or(self.usage.cached_input_tokens);
        self.usage.cache_write_input_tokens = written.or(self.usage.cache_write_input_tokens);
    }

    fn start(&mut self, index: u32, block: WireBlock, out: &mut VecDeque<ModelEvent>) {
        let block = match block {
            WireBlock::Text { text } => {
                self.text(text, out);
                Block::Text
            }
            WireBlock::Thinking {
                thinking,
                signature,
            } => {
                let id = MessageId::from(format!("{}-thinking-{index}", self.message_id));
                if !thinking.is_empty() {
                    out.push_back(ModelEvent::ReasoningDelta {
                        message_id: id.clone(),
                        delta: thinking.into(),
                    });
                }
                Block::Thinking { id, signature }
            }
            WireBlock::RedactedThinking { data } => {
                out.push_back(ModelEvent::ReasoningEncryptedValue {
                    message_id: MessageId::from(format!("{}-thinking-{index}", self.message_id)),
                    value: Sealed::Redacted(data).seal(),
                });
                Block::Other
            }
            WireBlock::ToolUse { id, name } => {
                let id = ToolCallId::from(id);
                out.push_back(ModelEvent::ToolCallStart {
                    id: id.clone(),
                    name,
                });
                Block::ToolUse {
                    id,
                    has_arguments: false,
                }
            }
            WireBlock::Other => Block::Other,
        };
        self.blocks.push((index, block));
    }

    fn text(&self, text: String, out: &mut VecDeque<ModelEvent>) {
        if !text.is_empty() {
            out.push_back(ModelEvent::TextDelta {
                message_id: self.message_id.clone(),
                delta: text.into(),
            });
        }
    }

    fn block(&mut self, index: u32) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .find(|(at, _)| *at == index)
            .map(|(_, block)| block)
    }

    fn delta(&mut self, index: u32, delta: WireDelta, out: &mut VecDeque<ModelEvent>) {
        let message_id = self.message_id.clone();
        match (self.block(index), delta) {
            (Some(Block::Text), WireDelta::TextDelta { text }) if !text.is_empty() => {
                out.push_back(ModelEvent::TextDelta {
                    message_id,
                    delta: text.into(),
                });
            }
            (Some(Block::Thinking { id, .. }), WireDelta::ThinkingDelta { thinking })
                if !thinking.is_empty() =>
            {
                out.push_back(ModelEvent::ReasoningDelta {
                    message_id: id.clone(),
                    delta: thinking.into(),
                });
            }
            (
                Some(Block::Thinking { signature, .. }),
                WireDelta::SignatureDelta { signature: more },
            ) => {
                signature.push_str(&more);
            }
            (
                Some(Block::ToolUse { id, has_arguments }),
                WireDelta::InputJsonDelta { partial_json },
            ) if !partial_json.is_empty() => {
                *has_arguments = true;
                out.push_back(ModelEvent::ToolCallArgs {
                    id: id.clone(),
                    delta: partial_json.into(),
                });
            }
            // Citations, deltas of blocks we do not follow, empty fragments.
            _ => {}
        }
    }

    /// A block's end: a thinking block's signature is complete, a call's arguments are.
    fn stop(&mut self, index: u32, out: &mut VecDeque<ModelEvent>) {
        let Some(at) = self.blocks.iter().position(|(i, _)| *i == index) else {
            return;
        };
        match self.blocks.remove(at).1 {
            Block::Thinking { id, signature } if !signature.is_empty() => {
                out.push_back(ModelEvent::ReasoningEncryptedValue {
                    message_id: id,
                    value: Sealed::Signature(signature).seal(),
                });
            }
            Block::ToolUse { id, has_arguments } => {
                if !has_arguments {
                    // A call without input streams no fragment at all.
                    out.push_back(ModelEvent::ToolCallArgs {
                        id: id.clone(),
                        delta: "{}".into(),
                    });
                }
                out.push_back(ModelEvent::ToolCallEnd { id });
            }
            Block::Text | Block::Thinking { .. } | Block::Other => {}
        }
    }
}

impl Decode for Decoder {
    const LAST: &'static str = "message_stop";

    /// One event's data; `Ok(true)` at `message_stop`.
    fn data(&mut self, data: &str, out: &mut VecDeque<ModelEvent>) -> Result<bool, ModelError> {
        let event: Wire = serde_json::from_str(data).map_err(unreadable)?;
        match event {
            Wire::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.count(&usage);
                }
            }
            Wire::ContentBlockStart {
                index,
                content_block,
            } => self.start(index, content_block, out),
            Wire::ContentBlockDelta { index, delta } => self.delta(index, delta, out),
            Wire::ContentBlockStop { index } => self.stop(index, out),
            Wire::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop = Some(finish_reason(&reason));
                }
                if let Some(usage) = usage {
                    self.count(&usage);
                }
            }
            Wire::MessageStop => {
                out.push_back(ModelEvent::Usage(std::mem::take(&mut self.usage)));
                out.push_back(ModelEvent::Finish(
                    self.stop.take().unwrap_or(FinishReason::Stop),
                ));
                return Ok(true);
            }
            Wire::Error { error } => return Err(error::from_stream(&error)),
            Wire::Ping | Wire::Other => {}
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
    fn thinking_its_signature_text_and_a_call_without_input() {
        let events = decode(&[
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"usage":{"input_tokens":10,"cache_read_input_tokens":90,"cache_creation_input_tokens":5,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hmm."}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"b3BhcXVl"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Now."}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_time","input":{}}}"#,
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            r#"{"type":"content_block_stop","index":3}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .unwrap();
        let thinking = MessageId::from("m-thinking-0");
        assert_eq!(
            events,
            [
                ModelEvent::ReasoningDelta {
                    message_id: thinking.clone(),
                    delta: "Hmm.".into()
                },
                ModelEvent::ReasoningEncryptedValue {
                    message_id: thinking,
                    value: "c2ln".into()
                },
                ModelEvent::ReasoningEncryptedValue {
                    message_id: MessageId::from("m-thinking-1"),
                    value: "redacted_thinking:b3BhcXVl".into()
                },
                ModelEvent::TextDelta {
                    message_id: MessageId::from("m"),
                    delta: "Now.".into()
                },
                ModelEvent::ToolCallStart {
                    id: "toolu_1".into(),
                    name: "get_time".into()
                },
                ModelEvent::ToolCallArgs {
                    id: "toolu_1".into(),
                    delta: "{}".into()
                },
                ModelEvent::ToolCallEnd {
                    id: "toolu_1".into()
                },
                ModelEvent::Usage(Usage {
                    input_tokens: 105,
                    output_tokens: 42,
                    reasoning_tokens: None,
                    cached_input_tokens: Some(90),
                    cache_write_input_tokens: Some(5),
                    ..Usage::default()
                }),
                ModelEvent::Finish(FinishReason::ToolCalls),
            ]
        );
    }

    #[test]
    fn an_error_event_is_typed_and_unknown_events_are_ignored() {
        let error = decode(&[
            r#"{"type":"some_future_event","x":1}"#,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ])
        .unwrap_err();
        assert_eq!(error.kind(), ModelErrorKind::Overloaded);
        assert!(error.kind().is_retryable());
    }

    #[test]
    fn a_call_cut_mid_arguments_is_never_ended() {
        let (events, error) = crate::model::http::decoded(
            Decoder::new(MessageId::from("m")),
            &[
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"add","input":{}}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\": 1"}}"#,
            ],
        );
        assert_eq!(error.map(|e| e.kind()), Some(ModelErrorKind::StreamCut));
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, ModelEvent::ToolCallEnd { .. }))
        );
    }
}
