//! The README's first code block is `examples/server.rs` (which CI compiles), word for word.

#[test]
fn the_readmes_server_is_the_example() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let example = std::fs::read_to_string(format!("{root}/examples/server.rs")).unwrap();
    let code: String = example
        .lines()
        .filter(|line| !line.starts_with("//!"))
        .skip_while(|line| line.is_empty())
        .map(|line| format!("{line}\n"))
        .collect();
    let first = readme
        .split("```rust")
        .nth(1)
        .and_then(|block| block.split_once('\n'))
        .and_then(|(_, block)| block.split("```").next())
        .expect("a rust code block");
    assert_eq!(
        first, code,
        "the README's first code block and examples/server.rs differ"
    );
}
