//! The MCP door (`/mcp`) of `agent-tower serve`, driven by the official MCP TypeScript clients of
//! both generations (v1 `@modelcontextprotocol/sdk` on the 2025 protocol, v2
//! `@modelcontextprotocol/client` on 2026-07-28): the agent as one tool, calls as runs of the
//! caller (the next turn on the same thread, another principal's thread unknown), progress,
//! approvals through elicitation (within the call, and as `input_required` whose retry continues
//! the run), an approval a client cannot give answered over AG-UI, a cancelled call's run
//! cancelled. The steps are in `tests/conformance/mcp-door.mjs`.

use crate::support::{self, process::Process, stores};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";

async fn door(store: &str) {
    let tokens = format!("alice:{ALICE},bob:{BOB}");
    let server = Process::serve_with_env(
        &["--store", store, "--auth-token-env", "MCP_DOOR_TOKENS"],
        &[("MCP_DOOR_TOKENS", &tokens)],
    )
    .await;
    let out = support::node("mcp-door.mjs", &[&server.base, ALICE, BOB], None).await;
    println!("{out}");
    for step in [
        "ok v1 tool",
        "ok another principal's thread is unknown",
        "ok a wrong argument and a wrong tool are refused by name",
        "ok v1 approval asked within the call, approved, the tool ran",
        "ok v1 approval declined with feedback",
        "ok a client without elicitation is told the run waits; answered over AG-UI, it went on",
        "ok v1 call aborted: its run ended cancelled",
        "ok v2 (2026-07-28) call with progress, approval through input_required, one run",
        "ok v2 another principal's run handle is refused",
        "mcp-door: passed",
    ] {
        assert!(out.contains(step), "{step} missing from:\n{out}");
    }
}

#[tokio::test]
async fn the_official_mcp_clients_call_the_agent_in_memory() {
    door("memory").await;
}

#[tokio::test]
async fn the_official_mcp_clients_call_the_agent_on_sqlite() {
    door(&stores::sqlite("mcp-door")).await;
}

/// A deploy under a call: SIGTERM of the instance answering a 2026-07-28 client's call; the client
/// calls again (through the other instance, as behind a load balancer) and gets the whole answer of
/// the one run, continued there. The steps are in `tests/conformance/mcp-deploy.mjs`.
#[tokio::test]
async fn a_call_survives_a_deploy_of_the_instance_answering_it() {
    let store = stores::sqlite("mcp-deploy");
    let (mut first, second) = Process::rolling_pair(&store, &[]).await;
    let pid = first.pid().to_string();
    let out = support::node("mcp-deploy.mjs", &[&first.base, &second.base, &pid], None).await;
    println!("{out}");
    assert!(out.contains("mcp-deploy: passed"), "{out}");
    first.exits_cleanly().await;
    first.logged("runs in flight were handed over").await;
}
