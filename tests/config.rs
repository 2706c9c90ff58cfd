//! `agent-tower --config FILE`: the file's settings apply, flags on the command line win, and a
//! bad file is refused with a sentence. The built binary.

use serde_json::json;

use crate::support;
use crate::support::json_logs;

use json_logs::JsonLogged;

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

fn config(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agent-tower-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn the_file_applies_and_flags_win() {
    let file = config(
        "agent-tower.toml",
        r#"
log-format = "json"

[serve]
addr = "127.0.0.1:0"
store = "memory"
path = "/from-the-file"
max-messages = 1
allow-host = ["agents.example"]

[acp]
max-turns = 3
"#,
    );
    let file = file.display().to_string();
    let mut server = JsonLogged::start(
        &["--config", &file, "serve", "--path", "/from-the-flag"],
        &[],
    );
    let serving = server
        .next("serving", |line| line["path"].is_string())
        .await;
    assert_eq!(
        serving["path"], "/from-the-flag",
        "the flag wins: {serving}"
    );
    let base = format!("http://{}", serving["addr"].as_str().unwrap());
    let two_messages = json!({
        "threadId": "t",
        "runId": "r",
        "messages": [
            {"id": "1", "role": "user", "content": "a"},
            {"id": "2", "role": "user", "content": "b"},
        ],
    });
    let answer = reqwest::Client::new()
        .post(format!("{base}/from-the-flag"))
        .header("host", "agents.example")
        .json(&two_messages)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 422, "max-messages from the file applies");
    server.kill().await;
}

#[test]
fn a_bad_file_is_refused_with_a_sentence() {
    for (name, text, expected) in [
        ("broken.toml", "[serve\naddr =", "not valid TOML"),
        ("table.toml", "[serve]\naddr = { a = 1 }", "`addr` must be"),
        (
            "subagent.toml",
            "[agent.subagent]\nresearcher = \"finds facts\"",
            "`subagent.researcher` must be a table (it is string)",
        ),
        (
            "unknown.toml",
            "[serve]\nno-such-flag = 1",
            "unknown.toml: unknown setting `no-such-flag` in [serve]",
        ),
        (
            "top.toml",
            "frobnicate = 1",
            "top.toml: unknown setting `frobnicate`;",
        ),
        (
            "agent.toml",
            "[agent]\ninstruction = \"x\"",
            "unknown setting `instruction` in [agent]",
        ),
        (
            "serve-in-agent.toml",
            "[agent]\naddr = \"127.0.0.1:0\"",
            "`addr` in [agent] is a setting of `agent-tower serve` alone; [agent] holds what both \
             commands take: put it in [serve]",
        ),
    ] {
        let file = config(name, text);
        let output = std::process::Command::new(AGENT)
            .arg("--config")
            .arg(&file)
            .args(["serve", "--store", "memory"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{name}: {stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    let output = std::process::Command::new(AGENT)
        .args(["--config", "/no/such/agent-tower.toml", "serve"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read the config file /no/such/agent-tower.toml"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_deployment_settings_start_a_server() {
    let dir = std::env::temp_dir().join(format!("agent-tower-deploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = format!("sqlite://{}", dir.join("runs.db").display());
    // The deployment's MCP server, on the `workspace` of its working directory.
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let bin = support::node_modules().await.join(".bin");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut server = JsonLogged::start_in(
        &dir,
        &[
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/agent-tower.toml"),
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--store",
            &store,
        ],
        &[
            ("AGENT_TOWER_TOKENS", "a-run-token-0123456789"),
            (
                "AGENT_TOWER_OPERATOR_TOKENS",
                "an-operator-token-0123456789",
            ),
            // The variable wins over the file's model.
            ("AGENT_TOWER_MODEL", "scripted"),
            ("PATH", &path),
        ],
    );
    let base = server.base().await;
    let http = reqwest::Client::new();
    assert_eq!(
        http.get(format!("{base}/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let metrics = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(
        metrics.status(),
        401,
        "tokens from the deployment's variables"
    );
    let metrics = http
        .get(format!("{base}/metrics"))
        .bearer_auth("an-operator-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    // A client cannot make the scripted model answer at any length: no --scripted-knobs.
    let long = json!({
        "threadId": "t", "runId": "r",
        "messages": [{"id": "1", "role": "user", "content": "hello"}],
        "forwardedProps": {"scripted": {"tokens": 100_000}},
    });
    let answer = http
        .post(format!("{base}/"))
        .bearer_auth("a-run-token-0123456789")
        .json(&long)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let body = answer.text().await.unwrap();
    let tokens = body.matches("TEXT_MESSAGE_CONTENT").count();
    assert!(
        tokens > 0 && tokens < 10,
        "an echo, not 100,000 tokens: {tokens}"
    );
    // The deployment's rules: the filesystem server's writes wait for a person, its reads run.
    let call = |thread: &str, text: String| {
        let body = json!({
            "threadId": thread, "runId": format!("{thread}-run"),
            "messages": [{"id": "1", "role": "user", "content": text}],
        });
        http.post(format!("{base}/"))
            .bearer_auth("a-run-token-0123456789")
            .json(&body)
            .send()
    };
    let note = workspace.join("note.txt");
    let write = json!({"path": note, "content": "hi"});
    let written = call("write", format!("files__write_file {write}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        written.contains(r#""outcome":{"type":"interrupt""#),
        "{written}"
    );
    assert!(!note.exists(), "the write waits for approval");
    let list = json!({"path": workspace});
    let listed = call("read", format!("files__list_directory {list}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(listed.contains("TOOL_CALL_RESULT"), "{listed}");
    assert!(
        listed.contains(r#""outcome":{"type":"success""#),
        "{listed}"
    );
    server.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
