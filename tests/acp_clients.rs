//! `agent-tower acp`, the built binary, driven over stdio by the official ACP clients: the npm
//! `@agentclientprotocol/sdk` and the PyPI `agent-client-protocol` (versions pinned in
//! `tests/conformance`). Each script runs every scenario an editor meets (streaming, permission
//! allowed / rejected / remembered, cancel while streaming and while a permission is pending,
//! modes, close and load, an unsupported protocol version, a session loaded after the agent was
//! killed and started again on the same store) and fails on the first broken expectation.

#[path = "support/stores.rs"]
mod stores;
mod support;

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

/// Every scenario's line, in order.
const SCENARIOS: usize = 8;

#[tokio::test]
async fn the_typescript_client_drives_every_scenario() {
    let store = stores::sqlite("acp-ts");
    let out = support::node("acp-client.mjs", &[AGENT, "--store", &store], None).await;
    let passed = out.lines().filter(|l| l.starts_with("ok - ")).count();
    assert_eq!(passed, SCENARIOS, "{out}");
}

#[tokio::test]
async fn the_python_client_drives_every_scenario() {
    let store = stores::sqlite("acp-py");
    let out = support::python("acp_client.py", &[AGENT, "--store", &store]).await;
    let passed = out.lines().filter(|l| l.starts_with("ok - ")).count();
    assert_eq!(passed, SCENARIOS, "{out}");
}

#[test]
fn the_binary_answers_a_line_that_is_not_utf8_and_goes_on() {
    use std::io::{BufRead, BufReader, Write};
    let mut agent = std::process::Command::new(AGENT)
        .args(["acp", "--store", "none"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary starts");
    let mut stdin = agent.stdin.take().unwrap();
    let mut stdout = BufReader::new(agent.stdout.take().unwrap());
    let mut next = || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str::<serde_json::Value>(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    stdin.write_all(b"\xc3\x28 not UTF-8\n").unwrap();
    stdin.flush().unwrap();
    let answer = next();
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .unwrap();
    stdin.flush().unwrap();
    let answer = next();
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    drop(stdin);
    assert!(
        agent.wait().unwrap().success(),
        "the agent ends cleanly when its input ends"
    );
}
