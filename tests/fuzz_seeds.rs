//! The `cargo fuzz` targets of `fuzz/` on their seed corpora, and on mutations of them, with the
//! stable toolchain and no sanitizer: every seed, and any crash a campaign left in
//! `fuzz/artifacts/<target>/`, stays harmless. A campaign itself (`cargo +nightly fuzz run
//! <target>`) is run outside the tests (docs/security.md).
//!
//! Each target is a single call of `agent_tower::fuzzing::<target>`; the first test holds every
//! target file to that, so that what runs here is what the fuzzer runs.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use proptest::prelude::*;

/// A target: the name of its file in `fuzz/fuzz_targets/` and of its corpus directory, and its
/// entry point.
type Target = (&'static str, fn(&[u8]));

/// Every target.
const TARGETS: &[Target] = &[
    ("acp_line", agent_tower::fuzzing::acp_line),
    ("acp_prompt", agent_tower::fuzzing::acp_prompt),
    ("anthropic_sse", agent_tower::fuzzing::anthropic_sse),
    ("gemini_sse", agent_tower::fuzzing::gemini_sse),
    ("openai_sse", agent_tower::fuzzing::openai_sse),
    ("run_input", agent_tower::fuzzing::run_input),
    ("state_patch", agent_tower::fuzzing::state_patch),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of `fuzz/<kind>/<target>/`, in name order (none when the directory is absent).
fn inputs(kind: &str, target: &str) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind).join(target)) else {
        return Vec::new();
    };
    let mut files: Vec<(String, Vec<u8>)> = entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// The seeds of every target, flattened: (target's index in [`TARGETS`], seed).
static SEEDS: LazyLock<Vec<(usize, Vec<u8>)>> = LazyLock::new(|| {
    TARGETS
        .iter()
        .enumerate()
        .flat_map(|(index, (name, _))| {
            inputs("corpus", name)
                .into_iter()
                .map(move |(_, bytes)| (index, bytes))
        })
        .collect()
});

#[test]
fn every_fuzz_target_is_one_call_of_its_entry_point_and_has_seeds() {
    let mut files: Vec<String> = std::fs::read_dir(fuzz_dir().join("fuzz_targets"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let names: Vec<String> = TARGETS
        .iter()
        .map(|(name, _)| format!("{name}.rs"))
        .collect();
    assert_eq!(
        files, names,
        "a target of fuzz/fuzz_targets is not replayed here"
    );
    for (name, _) in TARGETS {
        let source =
            std::fs::read_to_string(fuzz_dir().join(format!("fuzz_targets/{name}.rs"))).unwrap();
        let call = format!(
            "libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_tower::fuzzing::{name}(data));"
        );
        let body: Vec<&str> = source
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect();
        assert_eq!(
            body,
            ["#![no_main]", call.as_str()],
            "fuzz/fuzz_targets/{name}.rs"
        );
        assert!(!inputs("corpus", name).is_empty(), "{name} has no seed");
    }
}

#[test]
fn the_seeds_and_the_crashes_found_before_are_harmless() {
    for (name, target) in TARGETS {
        for kind in ["corpus", "artifacts"] {
            for (file, bytes) in inputs(kind, name) {
                let outcome = std::panic::catch_unwind(|| target(&bytes));
                assert!(outcome.is_ok(), "fuzz/{kind}/{name}/{file}");
            }
        }
    }
}

/// A seed changed the ways a fuzzer changes one: bytes overwritten, a range cut out, the input
/// cut short, or another seed's bytes spliced in.
#[derive(Debug, Clone)]
enum Mutation {
    Overwrite(usize, u8),
    Remove(usize, usize),
    Truncate(usize),
    Splice(usize, usize),
}

fn mutate(seed: &[u8], other: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for mutation in mutations {
        let len = bytes.len().max(1);
        match *mutation {
            Mutation::Overwrite(at, byte) => {
                if let Some(slot) = bytes.get_mut(at % len) {
                    *slot = byte;
                }
            }
            Mutation::Remove(at, count) => {
                let start = (at % len).min(bytes.len());
                let end = (start + count).min(bytes.len());
                bytes.drain(start..end);
            }
            Mutation::Truncate(at) => bytes.truncate(at % len),
            Mutation::Splice(at, from) => {
                let at = (at % len).min(bytes.len());
                let from = from % other.len().max(1);
                bytes.splice(at..at, other[from.min(other.len())..].iter().copied());
            }
        }
    }
    bytes
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Overwrite(at, byte)),
        2 => (any::<usize>(), 1usize..64).prop_map(|(at, count)| Mutation::Remove(at, count)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(at, from)| Mutation::Splice(at, from)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_seeds_are_harmless(
        pick in any::<prop::sample::Index>(),
        other in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..8),
    ) {
        let (target, seed) = pick.get(&SEEDS);
        // Spliced bytes come from a seed of the same target.
        let same: Vec<&[u8]> = SEEDS.iter().filter(|(t, _)| t == target).map(|(_, s)| &s[..]).collect();
        let input = mutate(seed, other.get::<&[u8]>(&same), &mutations);
        TARGETS[*target].1(&input);
    }
}
