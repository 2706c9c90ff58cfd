#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_tower::fuzzing::gemini_sse(data));
