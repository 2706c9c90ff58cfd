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
