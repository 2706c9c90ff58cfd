//! Our protobuf framing, decoded by the official `@ag-ui/proto` (npm), for every event type.

use crate::support;

use agent_tower::agui::{Event, EventType, proto};
use serde_json::{Value, json};

/// One event of each of the 31 types, with their optional fields set.
fn samples() -> Vec<Value> {
    let base = json!({"timestamp": 1_763_800_000_000u64, "metadata": {"source": "test", "n": 1}});
    let mut events = vec![
        json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "parentRunId": "p", "protocolVersion": "1.0",
               "input": {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}],
                         "tools": [{"name": "add", "description": "adds", "parameters": {"type": "object"}}],
                         "context": [{"description": "d", "value": "v"}], "state": {"k": [1, 2]}, "forwardedProps": {"x": true},
                         "resume": []}}),
        json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": {"ok": true},
               "outcome": {"type": "success", "pendingToolCallIds": ["c1"]},
               "usage": [{"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}]}),
        json!({"type": "RUN_ERROR", "message": "boom", "code": "internal"}),
        json!({"type": "STEP_STARTED", "stepName": "turn 0"}),
        json!({"type": "STEP_FINISHED", "stepName": "turn 0"}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "name": "bot"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Grüße "}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m"}),
        json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "role": "assistant", "delta": "x"}),
        json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "add", "parentMessageId": "m"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{\"a\":"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "c"}),
        json!({"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "add", "delta": "{}"}),
        json!({"type": "TOOL_CALL_RESULT", "messageId": "tm", "toolCallId": "c", "content": "3", "role": "tool"}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": {"a": [1, "two", null, false], "b": {"c": 1.5}}}),
        json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/a/-", "value": 3}, {"op": "move", "from": "/b", "path": "/c"}]}),
        json!({"type": "MESSAGES_SNAPSHOT", "messages": [
            {"id": "u", "role": "user", "content": "hi"},
            {"id": "a", "role": "assistant", "content": "calling",
             "toolCalls": [{"id": "c", "type": "function", "function": {"name": "add", "arguments": "{}"}}]},
            {"id": "tm", "role": "tool", "content": "3", "toolCallId": "c"},
            {"id": "r", "role": "reasoning", "content": "hmm"}]}),
        json!({"type": "ACTIVITY_SNAPSHOT", "messageId": "act", "activityType": "tool_call", "content": {"status": "running"}, "replace": false}),
        json!({"type": "ACTIVITY_DELTA", "messageId": "act", "activityType": "tool_call", "patch": [{"op": "replace", "path": "/status", "value": "done"}]}),
        json!({"type": "RAW", "event": {"native": 1}, "source": "provider"}),
        json!({"type": "CUSTOM", "name": "PredictState", "value": [{"state_key": "doc"}]}),
        json!({"type": "REASONING_START", "messageId": "rs"}),
        json!({"type": "REASONING_END", "messageId": "rs"}),
        json!({"type": "REASONING_MESSAGE_START", "messageId": "rs", "role": "reasoning"}),
        json!({"type": "REASONING_MESSAGE_CONTENT", "messageId": "rs", "delta": "so"}),
        json!({"type": "REASONING_MESSAGE_END", "messageId": "rs"}),
        json!({"type": "REASONING_MESSAGE_CHUNK", "messageId": "rs", "delta": "so"}),
        json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "rs", "encryptedValue": "opaque"}),
        json!({"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "helper", "description": "helps", "parentToolCallId": "c"}),
        json!({"type": "SUBAGENT_FINISHED", "subagentRunId": "s", "outcome": {"type": "suspended", "interruptIds": ["i"]}}),
        json!({"type": "SUBAGENT_ERROR", "subagentRunId": "s", "message": "failed", "code": "x"}),
    ];
    // Base fields on a few, as any event may carry them.
    for event in events.iter_mut().step_by(7) {
        event
            .as_object_mut()
            .unwrap()
            .extend(base.as_object().unwrap().clone());
    }
    events
}

#[tokio::test]
async fn every_event_type_decodes_with_the_official_package() {
    let samples = samples();
    let mut frames = Vec::new();
    let mut kinds = Vec::new();
    for sample in &samples {
        let event: Event = serde_json::from_value(sample.clone()).unwrap();
        kinds.push(event.kind());
        // What we send as JSON is what we encode.
        assert_eq!(&serde_json::to_value(&event).unwrap(), sample);
        proto::encode_framed(&event, &mut frames);
    }
    for kind in EventType::ALL {
        assert!(kinds.contains(kind), "no sample of {kind:?}");
    }
    let hex: String = frames.iter().map(|b| format!("{b:02x}")).collect();
    let output = support::node(
        "proto-roundtrip.mjs",
        &[],
        Some(json!({"events": samples, "frames": hex}).to_string()),
    )
    .await;
    assert!(output.starts_with("ok 31 events"), "{output}");
}

/// The checked-in messages (`src/agui/proto/wire.rs`) were generated from the `.proto` files as
/// they are: its first line names their SHA-256, computed as `scripts/protogen` does.
#[test]
fn the_generated_messages_are_those_of_the_proto_files() {
    use sha2::{Digest, Sha256};
    use std::{fmt::Write as _, fs, path::Path};

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("proto/ag_ui");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".proto"))
        .collect();
    names.sort();
    assert_eq!(names, ["events.proto", "patch.proto", "types.proto"]);
    let mut hasher = Sha256::new();
    for name in &names {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(fs::read(dir.join(name)).unwrap());
        hasher.update([0]);
    }
    let digest = hasher
        .finalize()
        .iter()
        .fold(String::new(), |mut hex, byte| {
            write!(hex, "{byte:02x}").unwrap();
            hex
        });
    let generated = fs::read_to_string(root.join("src/agui/proto/wire.rs")).unwrap();
    assert_eq!(
        generated.lines().next(),
        Some(format!("// proto/ag_ui sha256 {digest}").as_str()),
        "proto/ag_ui changed: regenerate with `cargo run --manifest-path scripts/protogen/Cargo.toml`"
    );
}
