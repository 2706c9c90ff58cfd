//! `agent-tower acp`, the built binary, driven over stdio by the official ACP clients: the npm
//! `@agentclientprotocol/sdk` and the PyPI `agent-client-protocol` (versions pinned in
//! `tests/conformance`). Each script runs every scenario an editor meets (streaming, permission
//! allowed / rejected / remembered, cancel while streaming and while a permission is pending,
//! modes, close and load, an unsupported protocol version, a session loaded after the agent was
//! killed and started again on the same store; with the TypeScript client, a fork, names and the
//! archive) and fails on the first broken expectation.

use crate::support;
use crate::support::stores;

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

/// Every scenario's line, in order.
const SCENARIOS: usize = 10;

/// The TypeScript client's scenarios: every one, then a fork, and names and the archive
/// (`session/fork`, `session/set_title`, `session/archive`: unstable in ACP).
const TS_SCENARIOS: usize = SCENARIOS + 2;

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
    assert_eq!(passed, TS_SCENARIOS, "{out}");
}

#[tokio::test]
async fn the_python_client_drives_every_scenario() {
    let store = stores::sqlite("acp-py");
    let out = support::python("acp_client.py", &[AGENT, "--store", &store]).await;
    let passed = out.lines().filter(|l| l.starts_with("ok - ")).count();
    assert_eq!(passed, SCENARIOS, "{out}");
}

/// A running `agent-tower acp`, its stdin, and its stdout to read lines from.
type RawAgent = (
    std::process::Child,
    std::process::ChildStdin,
    std::io::BufReader<std::process::ChildStdout>,
);

/// `agent-tower acp` in memory, its stdin and its stdout, to read and write raw lines.
fn raw_agent() -> RawAgent {
    raw_agent_with(&[])
}

/// [`raw_agent`] with more flags.
fn raw_agent_with(flags: &[&str]) -> RawAgent {
    raw_agent_of(flags, None)
}

/// [`raw_agent_with`] `flags`, as the machine's user `user` when given.
fn raw_agent_of(flags: &[&str], user: Option<&str>) -> RawAgent {
    let mut flags = flags.to_vec();
    if !flags.contains(&"--store") {
        flags.extend(["--store", "none"]);
    }
    let mut command = std::process::Command::new(AGENT);
    if let Some(user) = user {
        command.env("USER", user).env("LOGNAME", user);
    }
    let mut agent = command
        .arg("acp")
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

#[test]
fn a_subagents_call_is_asked_of_the_editor_in_the_session() {
    use std::io::BufRead;
    let researcher = r#"researcher={"description": "Finds facts.", "tools": ["get_time"]}"#;
    let flags = [
        "--mode",
        "auto",
        "--tool",
        "researcher",
        "--ask",
        "get_time",
    ];
    let (mut agent, mut stdin, mut stdout) =
        initialized(&[&flags[..], &["--subagent", researcher]].concat());
    let new = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": "/tmp", "mcpServers": []}});
    send(&mut stdin, &new);
    let session = until_answer(&mut stdout, 2).1["result"]["sessionId"].clone();
    let task = r#"researcher {"task": "What time is it? get_time"}"#;
    let prompt = serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": task}]}});
    send(&mut stdin, &prompt);
    // The researcher's call of `get_time`, asked of the editor in the session it prompted.
    let asked = loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the agent ended");
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_ne!(message["id"], 3, "the turn ended without asking: {message}");
        if message["method"] == "session/request_permission" {
            break message;
        }
    };
    assert_eq!(asked["params"]["sessionId"], session, "{asked}");
    assert_eq!(
        asked["params"]["toolCall"]["rawInput"],
        serde_json::json!({}),
        "{asked}"
    );
    let allow = serde_json::json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}});
    send(&mut stdin, &allow);
    let (updates, answer) = until_answer(&mut stdout, 3);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // The researcher's answer is the content of the agent's call, and the agent's answer quotes
    // it: what the researcher found with the tool it was allowed.
    let found = updates
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .find_map(|u| u["content"][0]["content"]["text"].as_str())
        .unwrap_or_else(|| panic!("no completed call: {updates:?}"));
    assert!(
        found.starts_with("The `get_time` tool returned 20"),
        "{found}"
    );
    let text = agent_text(&updates);
    assert!(text.contains(found), "{text}");
    drop(stdin);
    let _ = agent.kill();
    let _ = agent.wait();
}

/// One JSON-RPC line to the agent.
fn send(stdin: &mut std::process::ChildStdin, message: &serde_json::Value) {
    use std::io::Write;
    writeln!(stdin, "{message}").unwrap();
    stdin.flush().unwrap();
}

/// [`raw_agent_with`] `flags`, initialized (request 1).
fn initialized(flags: &[&str]) -> RawAgent {
    initialized_as(flags, None)
}

/// [`initialized`], as the machine's user `user` when given.
fn initialized_as(flags: &[&str], user: Option<&str>) -> RawAgent {
    let (agent, mut stdin, mut stdout) = raw_agent_of(flags, user);
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1},
    });
    send(&mut stdin, &initialize);
    until_answer(&mut stdout, 1);
    (agent, stdin, stdout)
}

/// Lines from the agent until the answer to request `id` (returned with what came before it).
fn until_answer(
    stdout: &mut std::io::BufReader<std::process::ChildStdout>,
    id: u64,
) -> (Vec<serde_json::Value>, serde_json::Value) {
    use std::io::BufRead;
    let mut before = Vec::new();
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the agent ended");
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id && message.get("method").is_none() {
            return (before, message);
        }
        before.push(message);
    }
}

/// The agent text of `session/update` notifications, in order.
fn agent_text(updates: &[serde_json::Value]) -> String {
    updates
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// `agent-tower acp --agent acp:ws://…/acp`: an editor on this machine whose agent is another
/// agent-tower's `/acp`, across the network: the prompt is answered there, in a session of its.
#[tokio::test]
async fn an_editor_reaches_a_remote_agent_tower_through_its_own_acp() {
    let remote = support::process::Process::serve(&["--store", "memory"]).await;
    let agent = format!("acp:{}/acp", remote.base.replace("http://", "ws://"));
    let (mut process, mut stdin, mut stdout) = initialized(&["--agent", &agent]);
    let new = serde_json::json!({
        "jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": "/tmp", "mcpServers": []},
    });
    send(&mut stdin, &new);
    let (_, created) = until_answer(&mut stdout, 2);
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let prompt = serde_json::json!({
        "jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "hello from afar"}]},
    });
    send(&mut stdin, &prompt);
    let (updates, answer) = until_answer(&mut stdout, 3);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&updates), "You said: hello from afar");
    let threads: serde_json::Value = reqwest::get(format!("{}/threads", remote.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        threads["threads"][0]["title"], "hello from afar",
        "{threads}"
    );
    process.kill().unwrap();
}

/// kill -9 of `agent-tower acp` mid-turn: the turn is a run in the log, continued to its end by
/// a `serve` on the same store, and the editor's next `agent-tower acp` loads the whole turn.
#[tokio::test]
async fn a_turn_cut_by_kill_9_is_continued_on_its_store_and_loaded_whole() {
    use agent_tower::{id::ThreadId, runs::RunLog, store::RunStore};
    use serde_json::json;
    use std::io::BufRead;

    let store = stores::sqlite("acp-kill-9");
    let (mut agent, mut stdin, mut stdout) = initialized(&["--store", &store, "--lease", "1s"]);
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}}),
    );
    let (_, created) = until_answer(&mut stdout, 2);
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": "slowly, please"}],
        }}),
    );
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0);
        if line.contains("agent_message_chunk") {
            break;
        }
    }
    agent.kill().unwrap(); // SIGKILL
    agent.wait().unwrap();

    // The turn is in the log, running, with no one driving it any more.
    let log = RunStore::open(&store).await.unwrap();
    let thread = ThreadId::from(session.as_str());
    let run = log
        .thread(&thread)
        .await
        .unwrap()
        .expect("the session's thread")
        .runs[0]
        .run_id
        .clone();

    // A server on the store continues it to its end, once the dead process's lease ran out.
    let server = support::process::Process::serve(&["--store", &store, "--lease", "1s"]).await;
    let followed = server.get(&format!("/runs/{run}/events")).await;
    let events = support::frames::frames(&followed.text().await.unwrap());
    let types: Vec<&str> = events
        .iter()
        .filter_map(|(_, e)| e["type"].as_str())
        .collect();
    assert_eq!(types.first(), Some(&"RUN_STARTED"));
    assert!(
        events
            .iter()
            .any(|(_, e)| e["name"] == agent_tower::runs::TAKEOVER),
        "continued after a takeover: {types:?}"
    );
    assert_eq!(
        types
            .iter()
            .filter(|t| matches!(**t, "RUN_FINISHED" | "RUN_ERROR"))
            .count(),
        1,
        "{types:?}"
    );
    let (_, last) = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED", "{last}");
    let kept = log.thread(&thread).await.unwrap().unwrap().messages;
    let answer = kept.last().expect("the answer").text();
    assert_eq!(
        answer.split_whitespace().count(),
        200,
        "the whole answer: {answer}"
    );
    drop(server);

    // The editor's next process loads the whole turn.
    let (mut agent, mut stdin, mut stdout) = initialized(&["--store", &store]);
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": {
            "sessionId": session, "cwd": "/tmp", "mcpServers": [],
        }}),
    );
    let (replayed, loaded) = until_answer(&mut stdout, 2);
    assert!(loaded.get("result").is_some(), "{loaded}");
    let first = &replayed[0]["params"]["update"];
    assert_eq!(first["sessionUpdate"], "user_message_chunk", "{first}");
    assert_eq!(first["content"]["text"], "slowly, please");
    assert_eq!(agent_text(&replayed), answer);
    agent.kill().unwrap();
    agent.wait().unwrap();
}

/// An editor's sessions in a shared store are its principal's: the machine's user as
/// `local:{user}` (never the token of that name; `local:uid-{uid}` with no user in the
/// environment, never everybody), or the principal it names on purpose.
#[tokio::test]
async fn an_editors_sessions_in_a_shared_store_belong_to_its_principal() {
    use serde_json::json;
    let store = stores::sqlite("acp-principal");
    let web = support::process::Process::serve_for_alice_and_bob(&store, &[]).await;
    let on_purpose = ["--store", store.as_str(), "--principal", "alice"];
    // (An empty `$USER` and `$LOGNAME`: no user named in the environment.)
    for (flags, user, seen_by_the_web_alice) in [
        (&["--store", store.as_str()][..], "alice", false),
        (&["--store", store.as_str()][..], "", false),
        (&on_purpose[..], "alice", true),
    ] {
        let (mut agent, mut stdin, mut stdout) = initialized_as(flags, Some(user));
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                    "params": {"cwd": "/tmp", "mcpServers": []}}),
        );
        let (_, created) = until_answer(&mut stdout, 2);
        let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
                "sessionId": session, "prompt": [{"type": "text", "text": "hello"}],
            }}),
        );
        let (_, answered) = until_answer(&mut stdout, 3);
        assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
        drop(stdin);
        agent.wait().unwrap();
        let status = reqwest::Client::new()
            .get(format!("{}/threads/{session}", web.base))
            .bearer_auth(support::process::ALICE)
            .send()
            .await
            .unwrap()
            .status();
        let expected = if seen_by_the_web_alice { 200 } else { 404 };
        assert_eq!(status, expected, "{flags:?} as {user:?}");
    }
}
