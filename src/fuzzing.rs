//! Entry points for the `cargo fuzz` targets in `fuzz/`: each takes arbitrary bytes and must
//! neither panic nor break the invariant it checks. Not part of the API (feature `fuzzing`).

/// An AG-UI run request as the server parses and checks it (400/422 or a `RunAgentInput`),
/// then turned into the agent's request; and the bodies of the out-of-band answers.
#[cfg(feature = "server")]
pub fn run_input(data: &[u8]) {
    if let Ok(input) = crate::server::parse_input(data, 1_000) {
        assert!(!input.thread_id.as_str().is_empty() && !input.run_id.as_str().is_empty());
        let request = input.to_run_request();
        assert!(request.messages.len() <= input.messages.len());
        // What the log keeps of a request is read back as the same request.
        let kept = serde_json::to_value(&input).expect("a parsed input serializes");
        let again: crate::agui::RunAgentInput =
            serde_json::from_value(kept).expect("a serialized input parses");
        assert_eq!(again.messages.len(), input.messages.len());
    }
    crate::server::parse_answers(data);
}

/// An OpenAI-compatible streamed answer, cut into pieces at the boundaries the first byte
/// chooses: decoding never panics, and gives the same events whatever the boundaries.
#[cfg(feature = "openai")]
pub fn openai_sse(data: &[u8]) {
    same_events_however_cut(data, crate::model::openai::decode_sse);
}

/// An Anthropic Messages stream, as [`openai_sse`] does for OpenAI's.
#[cfg(feature = "anthropic")]
pub fn anthropic_sse(data: &[u8]) {
    same_events_however_cut(data, crate::model::anthropic::decode_sse);
}

/// A Gemini stream (`alt=sse`), as [`openai_sse`] does for OpenAI's.
#[cfg(feature = "gemini")]
pub fn gemini_sse(data: &[u8]) {
    same_events_however_cut(data, crate::model::gemini::decode_sse);
}

/// Decodes the body after the first byte whole, then in pieces of the first byte's size, and
/// checks that both give the same events.
#[cfg(any(feature = "openai", feature = "anthropic", feature = "gemini"))]
fn same_events_however_cut<T: std::fmt::Debug>(data: &[u8], decode: fn(&[&[u8]]) -> T) {
    let Some((&step, body)) = data.split_first() else {
        return;
    };
    let whole = decode(&[body]);
    let step = usize::from(step.max(1));
    let pieces: Vec<&[u8]> = body.chunks(step).collect();
    let cut = decode(&pieces);
    assert_eq!(
        format!("{whole:?}"),
        format!("{cut:?}"),
        "the events do not depend on where the body was cut"
    );
}

/// An ACP prompt (a JSON array of content blocks): mapped to the agent's parts and back.
#[cfg(feature = "acp")]
pub fn acp_prompt(data: &[u8]) {
    use crate::acp::{content, schema::ContentBlock};
    let Ok(blocks) = serde_json::from_slice::<Vec<ContentBlock>>(data) else {
        return;
    };
    let parts = content::to_parts(&blocks);
    assert_eq!(parts.len(), blocks.len());
    for (part, block) in parts.iter().zip(&blocks) {
        let back = content::to_block(part);
        let _ = content::needs(block);
        let _ = content::needs(&back);
    }
}

/// A line of the ACP agent's input: parsed as the agent's reader parses it, and answered with
/// the request's id when it is a malformed request.
#[cfg(feature = "acp")]
pub fn acp_line(data: &[u8]) {
    crate::acp::fuzz_line(data);
}

/// A state and a JSON Patch for it (`{"state": …, "patch": […]}`): applied atomically, and
/// never writing a `__proto__`, `constructor` or `prototype` key.
pub fn state_patch(data: &[u8]) {
    #[derive(serde::Deserialize)]
    struct Case {
        state: serde_json::Value,
        patch: json_patch::Patch,
    }
    let Ok(case) = serde_json::from_slice::<Case>(data) else {
        return;
    };
    let state = crate::context::SharedState::new(case.state.clone());
    match state.apply(&case.patch) {
        Ok(()) => {
            let after = state.get();
            assert!(
                crate::context::state::unsafe_keys(&after)
                    <= crate::context::state::unsafe_keys(&case.state),
                "a patch wrote an unsafe key"
            );
            assert_eq!(state.take_changes().len(), case.patch.0.len());
        }
        Err(_) => assert_eq!(state.get(), case.state, "a refused patch changed nothing"),
    }
}
