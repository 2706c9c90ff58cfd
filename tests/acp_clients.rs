//! `agent-tower acp`, the built binary, driven over stdio by the official ACP clients: the npm
//! `@agentclientprotocol/sdk` and the PyPI `agent-client-protocol` (versions pinned in
//! `tests/conformance`). Each script runs every scenario an editor meets (streaming, permission
//! allowed / rejected / remembered, cancel while streaming and while a permission is pending,
//! modes, close and load, an unsupported protocol version, a session loaded after the agent was
//! killed and started again on the same store) and fails on the first broken expectation.

use crate::support;
use crate::support::stores;

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

/// Every scenario's line, in order.
const SCENARIOS: usize = 10;

#[tokio::test]
async fn the_typescript_client_drives_every_scenario() {
    let store = stores::sqlite("acp-ts");
    let out = support::node(
        "acp-client.mjs",
        &[AGENT, "--store", &store, "--context-window", "32000"],
        None,
    )
    .await;
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

/// `agent-tower acp` in memory, its stdin and its stdout, to read and write raw lines.
fn raw_agent() -> (
    std::process::Child,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    raw_agent_with(&[])
}

/// [`raw_agent`] with more flags.
fn raw_agent_with(
    flags: &[&str],
) -> (
    std::process::Child,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
) {
    let mut agent = std::process::Command::new(AGENT)
        .args(["acp", "--store", "none"])
        .args(flags)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the binary starts");
    let stdin = agent.stdin.take().unwrap();
    let stdout = std::io::BufReader::new(agent.stdout.take().unwrap());
    (agent, stdin, stdout)
}

#[test]
fn the_binary_answers_a_line_that_is_not_utf8_and_goes_on() {
    use std::io::{BufRead, Write};
    let (mut agent, mut stdin, mut stdout) = raw_agent();
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

/// Everything `session/load` sends (the replayed conversation, the commands) is on the wire
/// before its answer, so a client that stops reading at the answer has the whole session. Read
/// on the raw wire: a client's SDK may hand a notification that follows the answer to its handler
/// before the answer's caller resumes, which would hide the order.
#[test]
fn a_load_sends_everything_before_its_answer() {
    use std::io::{BufRead, Write};
    let (mut agent, mut stdin, mut stdout) = raw_agent();
    let mut request = |id: u64, method: &str, params: serde_json::Value| {
        let line =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    // The lines up to the answer to `id`, the answer last.
    let mut until_answer = |id: u64| {
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).unwrap() > 0,
                "the agent ended: {lines:?}"
            );
            let value: serde_json::Value = serde_json::from_str(&line).unwrap();
            let answered = value["id"] == id;
            lines.push(value);
            if answered {
                return lines;
            }
        }
    };
    request(1, "initialize", serde_json::json!({"protocolVersion": 1}));
    until_answer(1);
    let cwd = std::env::temp_dir();
    request(
        2,
        "session/new",
        serde_json::json!({"cwd": cwd, "mcpServers": []}),
    );
    let session = until_answer(2).pop().unwrap()["result"]["sessionId"].clone();
    request(
        3,
        "session/prompt",
        serde_json::json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}),
    );
    until_answer(3);
    request(
        4,
        "session/load",
        serde_json::json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    let lines = until_answer(4);
    let kinds: Vec<&str> = lines
        .iter()
        .filter(|l| l["params"]["sessionId"] == session)
        .filter_map(|l| l["params"]["update"]["sessionUpdate"].as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"user_message_chunk"), "{lines:?}");
    assert_eq!(
        kinds.last(),
        Some(&"available_commands_update"),
        "{lines:?}"
    );
    assert!(kinds.contains(&"agent_message_chunk"), "{lines:?}");
    drop(stdin);
    assert!(agent.wait().unwrap().success());
}

/// The rules of `serve` are the rules of `acp`: a tool `--deny` names is refused (the model is
/// told) without asking the editor, and `--ask` asks even in the mode `auto`.
#[test]
fn the_rules_flags_apply_in_the_editor() {
    use std::io::{BufRead, Write};
    let (mut agent, mut stdin, mut stdout) =
        raw_agent_with(&["--mode", "auto", "--deny", "remem*", "--ask", "get_time"]);
    let mut send = |line: serde_json::Value| {
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let mut next = || {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the agent ended");
        serde_json::from_str::<serde_json::Value>(&line).unwrap()
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
    );
    while next()["id"] != 1 {}
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}),
    );
    let session = loop {
        let line = next();
        if line["id"] == 2 {
            break line["result"]["sessionId"].clone();
        }
    };
    let prompt = |id: u64, text: &str| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
    };

    send(prompt(3, r#"remember {"key": "k", "value": 1}"#));
    let mut refused = false;
    loop {
        let line = next();
        assert_ne!(
            line["method"], "session/request_permission",
            "a denied call is not asked about: {line}"
        );
        let update = &line["params"]["update"];
        if update["sessionUpdate"] == "tool_call_update" && update["status"] == "failed" {
            refused |= update
                .to_string()
                .contains("does not allow calling `remember`");
        }
        if line["id"] == 3 {
            break;
        }
    }
    assert!(refused, "the call failed with the policy's refusal");

    send(prompt(4, "get_time {}"));
    let asked = loop {
        let line = next();
        assert_ne!(line["id"], 4, "the prompt ended without asking");
        if line["method"] == "session/request_permission" {
            break line;
        }
    };
    assert_eq!(
        asked["params"]["toolCall"]["rawInput"],
        serde_json::json!({}),
        "{asked}"
    );
    drop(stdin);
    let _ = agent.kill();
    let _ = agent.wait();
}
