//! The bridges, both ways, between the built binary's two sides:
//!
//! - `agent-tower serve --agent 'acp:agent-tower acp'`: an ACP agent on the web, driven by the
//!   official AG-UI client (`tests/conformance/agui-bridge.mjs`), and ACP agents that fail;
//! - `agent-tower acp --agent agui:<url of agent-tower serve>`: an AG-UI agent in an editor,
//!   driven by the official TypeScript ACP client (`tests/conformance/acp-bridge.mjs`);
//! - `agent-tower serve --agent acp:ws://…/acp`: another agent-tower's `/acp` on the web.

use crate::support;
use crate::support::process;
use crate::support::stores;

use std::time::Duration;

use futures_util::StreamExt;

use process::Process;
use serde_json::{Value, json};

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

#[tokio::test]
async fn the_official_client_runs_a_bridged_acp_agent() {
    let store = stores::sqlite("bridge");
    let server = Process::serve(&["--store", &store, "--agent", &format!("acp:{AGENT} acp")]).await;
    let out = support::node("agui-bridge.mjs", &[&format!("{}/", server.base)], None).await;
    println!("{out}");
    assert!(out.contains("all bridge scenarios passed"), "{out}");
    // Its approvals are asked, and take no edited arguments (an edited call would be refused).
    let declared: Value = server.get("/capabilities").await.json().await.unwrap();
    let asks = &declared["humanInTheLoop"];
    assert_eq!(
        (&asks["interrupts"], &asks["approveWithEdits"]),
        (&Value::Bool(true), &Value::Bool(false)),
        "{declared}"
    );
}

/// The events of a new run of `text` on a new thread, read to its end within 10 s.
async fn run(base: &str, text: &str) -> Vec<Value> {
    start(base, &format!("t-{}", uuid::Uuid::now_v7()), text).await
}

/// The events of a new run of `text` on `thread`.
async fn start(base: &str, thread: &str, text: &str) -> Vec<Value> {
    post(
        base,
        json!({
            "threadId": thread, "runId": format!("r-{}", uuid::Uuid::now_v7()),
            "messages": [{"id": "m1", "role": "user", "content": text}],
            "protocolVersion": "1.0",
        }),
    )
    .await
}

/// The events of the run that answers `interrupt` of `thread` with `payload`.
async fn resume(base: &str, thread: &str, interrupt: &Value, payload: Value) -> Vec<Value> {
    post(
        base,
        json!({
            "threadId": thread, "runId": format!("r-{}", uuid::Uuid::now_v7()),
            "messages": [],
            "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}],
            "protocolVersion": "1.0",
        }),
    )
    .await
}

/// The run's `RUN_ERROR`, which must be its last event: its code and message.
fn run_error(events: &[Value]) -> (&str, &str) {
    let last = events.last().expect("events");
    assert_eq!(last["type"], "RUN_ERROR", "{events:?}");
    (
        last["code"].as_str().unwrap(),
        last["message"].as_str().unwrap(),
    )
}

/// The text the run's events said.
fn said(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn an_agent_that_exits_mid_turn_ends_the_run_with_an_error() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/acp/broken.py");
    let server = Process::serve(&[
        "--store",
        "memory",
        "--agent",
        &format!("acp:python3 {script} dies"),
    ])
    .await;
    let events = run(&server.base, "hello").await;
    let (code, message) = run_error(&events);
    assert_eq!(code, "agent_exited");
    assert!(
        message.contains("the ACP agent exited (exit status: 3)"),
        "{message}"
    );
}

/// The official-SDK agent (`tests/conformance/sdk-agent.mjs`), served with `args`; `env` is the
/// agent's (passed on with `--agent-env`).
async fn sdk_agent(args: &[&str], env: &[(&str, &str)]) -> Process {
    let agent = support::node_modules().await.join("../sdk-agent.mjs");
    let mut all = vec![
        "--agent".to_owned(),
        format!("acp:node {}", agent.display()),
    ];
    for (name, _) in env {
        all.extend(["--agent-env".to_owned(), (*name).to_owned()]);
    }
    all.extend(args.iter().map(|arg| (*arg).to_owned()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    Process::serve_with_env(&all, env).await
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn a_crashed_agent_is_started_again_and_meanwhile_runs_and_readiness_say_so() {
    // While the gate file exists, the agent exits as it starts.
    let gate = scratch("bridge-restart").join("gate");
    let gate_env = gate.to_str().unwrap();
    let server = sdk_agent(&["--store", "memory"], &[("START_GATE", gate_env)]).await;
    let thread = format!("t-{}", uuid::Uuid::now_v7());
    assert_eq!(
        said(&start(&server.base, &thread, "hello").await),
        "Echo: hello"
    );
    assert_eq!(server.get("/ready").await.status(), 200);

    std::fs::write(&gate, "").unwrap();
    let events = run(&server.base, "exit").await;
    let (code, message) = run_error(&events);
    assert_eq!(code, "agent_exited");
    assert!(message.contains("exit status: 3"), "{message}");

    // Down (every restart exits at once): runs fail at once, saying so, and /ready says why.
    let ready = server.get("/ready").await;
    assert_eq!(ready.status(), 503);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["status"], "agent_unavailable", "{ready}");
    let events = run(&server.base, "hello").await;
    let (code, message) = run_error(&events);
    assert_eq!(code, "agent_unavailable");
    assert!(message.contains("it is started again in"), "{message}");

    // The gate opens: the next restart stays up, and the thread goes on in a new session.
    std::fs::remove_file(&gate).unwrap();
    tokio::time::timeout(
        Duration::from_secs(60),
        server.logged("the ACP agent was started again"),
    )
    .await
    .expect("restarted within its back-off");
    assert_eq!(server.get("/ready").await.status(), 200);
    let again = start(&server.base, &thread, "hello again").await;
    assert!(said(&again).contains("hello again"), "{again:?}");
    assert_eq!(again.last().unwrap()["outcome"]["type"], "success");
}

#[tokio::test]
async fn the_agent_dies_with_the_server_and_gets_none_of_its_secrets() {
    let token = "a-run-token-of-at-least-16-chars";
    let agent = support::node_modules().await.join("../sdk-agent.mjs");
    let mut server = Process::serve_with_env(
        &[
            "--store",
            "memory",
            "--agent",
            &format!("acp:node {}", agent.display()),
            "--auth-token-env",
            "RUN_TOKENS",
            "--agent-env",
            "AGENT_KEY",
            "--agent-env",
            "AGENT_MODE=careful",
        ],
        &[
            ("RUN_TOKENS", token),
            ("OPENAI_API_KEY", "sk-not-for-the-agent"),
            ("AGENT_KEY", "for-the-agent"),
        ],
    )
    .await;
    let ask = async |text: &str| -> String {
        let input = json!({
            "threadId": format!("t-{}", uuid::Uuid::now_v7()),
            "runId": format!("r-{}", uuid::Uuid::now_v7()),
            "messages": [{"id": "m1", "role": "user", "content": text}],
        });
        said(&post_as(&server.base, Some(token), input).await)
    };
    let env = ask("env").await;
    let names: Vec<&str> = env.trim_start_matches("Echo: ").split(' ').collect();
    assert!(names.contains(&"PATH"), "{env}");
    assert!(names.contains(&"AGENT_KEY"), "named: {env}");
    assert!(names.contains(&"AGENT_MODE"), "set: {env}");
    for secret in ["RUN_TOKENS", "OPENAI_API_KEY", "RUST_LOG"] {
        assert!(!names.contains(&secret), "{secret} leaked: {env}");
    }

    // SIGTERM: the server goes, and its agent with it.
    let pid: i32 = ask("pid").await.trim_start_matches("pid ").parse().unwrap();
    server.signal("TERM");
    let status = server.exit_within(Duration::from_secs(30)).await;
    assert!(status.is_some(), "the server stops");
    let gone = tokio::time::timeout(Duration::from_secs(5), async {
        while std::path::Path::new(&format!("/proc/{pid}/stat")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z")
        {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(gone.is_ok(), "the agent (pid {pid}) outlived the server");
}

#[tokio::test]
async fn an_agent_that_requires_login_is_authenticated_or_says_so() {
    let env = [("AUTH_METHOD", "agent-key")];
    let server = sdk_agent(&["--store", "memory"], &env).await;
    let events = run(&server.base, "hello").await;
    let (code, message) = run_error(&events);
    assert_eq!(code, "auth_required");
    assert!(message.contains("`agent-key` (Use the key)"), "{message}");

    let server = sdk_agent(&["--store", "memory", "--agent-auth", "agent-key"], &env).await;
    assert_eq!(said(&run(&server.base, "hello").await), "Echo: hello");

    // A method the agent does not offer: the server does not start.
    let agent = support::node_modules().await.join("../sdk-agent.mjs");
    let output = tokio::process::Command::new(AGENT)
        .args(["serve", "--store", "memory", "--agent-auth", "password"])
        .args(["--agent-env", "AUTH_METHOD"])
        .arg("--agent")
        .arg(format!("acp:node {}", agent.display()))
        .envs(env)
        .env("RUST_LOG", "error")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("offers no authentication method `password` (it offers: `agent-key`)"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_agent_that_goes_silent_ends_the_run_at_the_idle_timeout() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/acp/broken.py");
    let server = Process::serve(&[
        "--store",
        "memory",
        "--idle-timeout",
        "1s",
        "--agent",
        &format!("acp:python3 {script} silent"),
    ])
    .await;
    let events = run(&server.base, "hello").await;
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{events:?}");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("sent nothing for 1s"),
        "{last}"
    );
}

#[test]
fn an_agent_that_cannot_start_stops_the_server_before_it_listens() {
    let output = std::process::Command::new(AGENT)
        .args([
            "serve",
            "--store",
            "memory",
            "--agent",
            "acp:/nonexistent/agent --flag",
        ])
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("ACP agent") && !stderr.contains("panicked"),
        "{stderr}"
    );
}

/// `serve --agent acp:ws://…/acp`: another agent-tower's `/acp` (which takes alice's token) on
/// the web: its answers, and its approval asked here through an interrupt and answered there;
/// the turns are alice's threads in its log. With a token it refuses, the server does not start.
#[tokio::test]
async fn a_remote_agent_towers_acp_is_bridged_on_the_web() {
    use process::{ALICE, BOB};
    let inner = Process::serve_for_alice_and_bob("memory", &[]).await;
    let agent = format!("acp:{}/acp", inner.base.replace("http://", "ws://"));
    let flags = [
        "--store",
        "memory",
        "--agent",
        &agent,
        "--agent-token-env",
        "INNER_TOKEN",
    ];
    let outer = Process::serve_with_env(&flags, &[("INNER_TOKEN", ALICE)]).await;
    let _logs = outer.logs_on_failure();
    assert_eq!(
        said(&run(&outer.base, "hello there").await),
        "You said: hello there"
    );

    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let events = start(
        &outer.base,
        &thread,
        r#"remember {"key": "theme", "value": "dark"}"#,
    )
    .await;
    let finished = events.last().unwrap();
    assert_eq!(finished["outcome"]["type"], "interrupt", "{events:?}");
    let interrupt = &finished["outcome"]["interrupts"][0];
    let resumed = resume(&outer.base, &thread, interrupt, json!({"approved": true})).await;
    assert_eq!(
        said(&resumed),
        "The `remember` tool returned remembered theme.",
        "{resumed:?}"
    );
    let threads = async |token: &str| inner.get_as(token, "/threads").await["threads"].clone();
    assert_eq!(
        threads(ALICE).await.as_array().unwrap().len(),
        2,
        "both turns, alice's"
    );
    assert_eq!(threads(BOB).await, json!([]));

    let refused = std::process::Command::new(AGENT)
        .arg("serve")
        .args(flags)
        .env("INNER_TOKEN", "not-a-token-of-anyone")
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(stderr.contains("refused the connection (401"), "{stderr}");
}

#[tokio::test]
async fn the_official_acp_client_runs_a_bridged_agui_agent() {
    let server = Process::serve(&["--store", "memory"]).await;
    let out = support::node(
        "acp-bridge.mjs",
        &[
            AGENT,
            "--agent",
            &format!("agui:{}/", server.base),
            "--store",
            "none",
        ],
        None,
    )
    .await;
    println!("{out}");
    assert!(out.contains("all bridge scenarios passed"), "{out}");
}

/// Posts `input`; the events of the run, read to its end within 10 s.
async fn post(base: &str, input: Value) -> Vec<Value> {
    post_as(base, None, input).await
}

/// [`post`] with a bearer token.
async fn post_as(base: &str, token: Option<&str>, input: Value) -> Vec<Value> {
    let mut request = reqwest::Client::new().post(format!("{base}/"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let body = request
        .json(&input)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .expect("the run ends (no hang)");
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[tokio::test]
async fn an_agent_on_the_official_sdk_asks_through_an_interrupt() {
    let agent = support::node_modules().await.join("../sdk-agent.mjs");
    let server = Process::serve(&[
        "--store",
        "memory",
        "--agent",
        &format!("acp:node {}", agent.display()),
    ])
    .await;
    for (answer, result, text) in [
        (json!({"approved": true}), "wrote notes.txt", "Done."),
        // Refused: the result is the refusal with the person's feedback (what the model reads);
        // the agent, told no, goes on.
        (
            json!({"approved": false, "feedback": "not today"}),
            "The user rejected this call of `Edit notes.txt`: not today",
            "I did not write it.",
        ),
    ] {
        let thread = format!("t-{}", uuid::Uuid::now_v7());
        let events = start(&server.base, &thread, "edit notes.txt").await;
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "REASONING_MESSAGE_CONTENT")
        );
        let start = events
            .iter()
            .find(|e| e["type"] == "TOOL_CALL_START")
            .unwrap();
        assert_eq!(start["toolCallName"], "Edit notes.txt");
        let finished = events.last().unwrap();
        assert_eq!(finished["outcome"]["type"], "interrupt", "{events:?}");
        let interrupt = &finished["outcome"]["interrupts"][0];
        assert_eq!(interrupt["toolCallId"], start["toolCallId"]);

        let resumed = resume(&server.base, &thread, interrupt, answer).await;
        let got = resumed
            .iter()
            .find(|e| e["type"] == "TOOL_CALL_RESULT")
            .unwrap_or_else(|| panic!("{resumed:?}"));
        assert_eq!(got["content"], result);
        assert_eq!(said(&resumed), text);
        assert_eq!(resumed.last().unwrap()["outcome"]["type"], "success");
    }

    // Approved "always": the agent is answered with its own "allow always", and does not ask
    // about its next edit in the thread (another file: another title, so not the layer's memory).
    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let events = start(&server.base, &thread, "edit notes.txt").await;
    let interrupt = &events.last().unwrap()["outcome"]["interrupts"][0];
    let always = json!({"approved": true, "always": true});
    let resumed = resume(&server.base, &thread, interrupt, always).await;
    assert_eq!(said(&resumed), "Done.", "{resumed:?}");
    let next = start(&server.base, &thread, "edit todo.txt").await;
    assert_eq!(
        next.last().unwrap()["outcome"]["type"],
        "success",
        "not asked: {next:?}"
    );
    let got = next
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT")
        .unwrap_or_else(|| panic!("{next:?}"));
    assert_eq!(got["content"], "wrote todo.txt");
}

/// Posts a run of `words` on `thread`, reads its events until its first text, then stops it
/// (`POST /runs/{id}/cancel`, answered 202): the rest of its body, and what was read of it.
async fn stopped_mid_turn(
    base: &str,
    thread: &str,
    words: &str,
) -> (
    impl futures_util::Stream<Item = reqwest::Result<impl AsRef<[u8]>>> + Unpin,
    String,
) {
    let run = format!("r-{}", uuid::Uuid::now_v7());
    let http = reqwest::Client::new();
    let response = http
        .post(format!("{base}/"))
        .json(&json!({
            "threadId": thread, "runId": run,
            "messages": [{"id": "m1", "role": "user", "content": words}],
            "protocolVersion": "1.0",
        }))
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let mut text = String::new();
    while !text.contains("TEXT_MESSAGE_CONTENT") {
        let chunk = body.next().await.unwrap().unwrap();
        text.push_str(std::str::from_utf8(chunk.as_ref()).unwrap());
    }
    let stop = http
        .post(format!("{base}/runs/{run}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(stop.status(), 202);
    (body, text)
}

#[tokio::test]
async fn stop_reaches_the_bridged_agent_at_once() {
    // The agent (on the official SDK) writes each `session/cancel` it gets to a named pipe.
    let dir = std::env::temp_dir().join(format!("bridge-stop-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("cancels");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let cancels = tokio::net::unix::pipe::OpenOptions::new()
        .open_receiver(&fifo)
        .unwrap();
    let server = sdk_agent(
        &["--store", "memory"],
        &[("CANCEL_FIFO", fifo.to_str().unwrap())],
    )
    .await;

    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let (mut body, mut text) = stopped_mid_turn(&server.base, &thread, "tell me slowly").await;

    // The agent hears of it within a bound, not at the thread's next prompt.
    let mut heard = String::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 256];
        while !heard.contains('\n') {
            cancels.readable().await.unwrap();
            match cancels.try_read(&mut buf) {
                Ok(n) => heard.push_str(std::str::from_utf8(&buf[..n]).unwrap()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await
    .expect("the agent got session/cancel within 5 s");
    assert!(heard.starts_with("cancelled "), "{heard}");
    while let Some(chunk) = body.next().await {
        text.push_str(std::str::from_utf8(chunk.unwrap().as_ref()).unwrap());
    }
    let last = text
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap();
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(last["outcome"]["type"], "cancelled", "{last}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn the_official_python_acp_client_runs_an_agent_of_the_official_python_agui_sdk() {
    let mut server = support::python_command("agui_server.py")
        .await
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(server.stdout.take().unwrap()));
    let line = lines
        .next_line()
        .await
        .unwrap()
        .expect("the server says where it listens");
    let url = line.trim_start_matches("listening on ");
    let out = support::python(
        "acp_bridge.py",
        &[AGENT, "--agent", &format!("agui:{url}"), "--store", "none"],
    )
    .await;
    println!("{out}");
    assert!(out.contains("all python bridge scenarios passed"), "{out}");
}

#[tokio::test]
async fn an_approval_after_a_restart_of_the_bridge_runs_the_call() {
    let store = stores::sqlite("bridge-restart");
    let args = [
        "--store",
        &store,
        "--agent",
        &format!("acp:{AGENT} acp --store none"),
    ];
    let server = Process::serve(&args).await;
    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let remember = r#"remember {"key": "theme", "value": "dark"}"#;
    let events = start(&server.base, &thread, remember).await;
    let interrupt = events.last().unwrap()["outcome"]["interrupts"][0].clone();
    assert!(interrupt["id"].is_string(), "{events:?}");
    // The bridge and its agent go down hard; another starts on the same run log.
    server.kill().await;
    let server = Process::serve(&args).await;
    let resumed = resume(&server.base, &thread, &interrupt, json!({"approved": true})).await;
    let result = resumed
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_RESULT")
        .unwrap_or_else(|| panic!("{resumed:?}"));
    assert_eq!(
        result["toolCallId"], interrupt["toolCallId"],
        "under the approved call's id"
    );
    assert_eq!(result["content"], "remembered theme");
    assert_eq!(
        said(&resumed),
        "The `remember` tool returned remembered theme."
    );
    assert_eq!(resumed.last().unwrap()["outcome"]["type"], "success");
}

#[tokio::test]
async fn after_a_restart_the_approved_call_runs_and_another_call_is_asked_anew() {
    let store = stores::sqlite("bridge-replay");
    for other in [false, true] {
        let args = ["--store", store.as_str()];
        let server = sdk_agent(&args, &[]).await;
        let thread = format!("t-{}", uuid::Uuid::now_v7());
        let events = start(&server.base, &thread, "edit notes.txt").await;
        let interrupt = events.last().unwrap()["outcome"]["interrupts"][0].clone();
        assert!(interrupt["id"].is_string(), "{events:?}");
        server.kill().await;

        let env: &[(&str, &str)] = if other { &[("REPLAY_OTHER", "1")] } else { &[] };
        let server = sdk_agent(&args, env).await;
        let resumed = resume(&server.base, &thread, &interrupt, json!({"approved": true})).await;
        let result = resumed
            .iter()
            .find(|e| e["type"] == "TOOL_CALL_RESULT")
            .unwrap_or_else(|| panic!("{resumed:?}"));
        assert_eq!(result["toolCallId"], interrupt["toolCallId"]);
        let last = resumed.last().unwrap();
        if other {
            // Not approved by the approval: said so, and asked about as a new call.
            assert!(
                result["content"]
                    .as_str()
                    .unwrap()
                    .contains("it made `Edit other.txt` instead"),
                "{result}"
            );
            let asked = &last["outcome"]["interrupts"][0];
            assert_eq!(last["outcome"]["type"], "interrupt", "{resumed:?}");
            assert_ne!(asked["toolCallId"], interrupt["toolCallId"]);
            let start = resumed
                .iter()
                .find(|e| e["type"] == "TOOL_CALL_START" && e["toolCallId"] == asked["toolCallId"])
                .unwrap_or_else(|| panic!("{resumed:?}"));
            assert_eq!(start["toolCallName"], "Edit other.txt");
        } else {
            assert_eq!(result["content"], "wrote notes.txt");
            assert_eq!(said(&resumed), "Done.");
            assert_eq!(last["outcome"]["type"], "success", "{resumed:?}");
        }
    }
}

#[tokio::test]
async fn a_web_page_at_the_agui_url_is_said_to_be_one() {
    use agent_tower::{
        agui::client::AguiBridge, context::RunContext, message::Message, model::ModelRequest,
    };
    use tower::ServiceExt;

    // A server that answers every request with a web page, as a mistyped URL often does.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let page = axum::Router::new()
        .fallback(|| async { axum::response::Html("<!doctype html><title>not an agent</title>") });
    tokio::spawn(async move { axum::serve(listener, page).await });

    let bridge = AguiBridge::new(&format!("http://{addr}/")).unwrap();
    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let request = ModelRequest {
        messages: vec![Message::user("hello")],
        tools: Vec::new().into(),
        options: Default::default(),
        run: RunContext::new(thread.as_str().into(), "r".into()),
    };
    let mut steps = bridge.model().oneshot(request).await.unwrap();
    let error = tokio::time::timeout(Duration::from_secs(5), steps.next())
        .await
        .expect("the step ends")
        .expect("an item")
        .expect_err("a web page is no event stream")
        .to_string();
    assert!(
        error.contains("answered `text/html; charset=utf-8`, not an event stream"),
        "{error}"
    );
}

#[tokio::test]
async fn an_agent_that_never_answers_stops_the_server_at_its_start_timeout() {
    // `sleep` reads nothing and answers nothing: the server must not wait for it silently.
    let child = tokio::process::Command::new(AGENT)
        .args([
            "serve",
            "--store",
            "memory",
            "--agent",
            "acp:sleep 3600",
            "--agent-start-timeout",
            "1s",
        ])
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the server gives up on the agent")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the ACP agent did not answer `initialize` within 1s"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_agent_that_does_not_end_its_cancelled_turn_is_waited_for_a_bounded_time() {
    let server = sdk_agent(&["--store", "memory"], &[]).await;
    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let (mut body, mut text) = stopped_mid_turn(&server.base, &thread, "stubbornly").await;
    // The run ends at once; the agent's turn is waited for 10 s, then given up, saying so.
    while let Some(chunk) = body.next().await {
        text.push_str(std::str::from_utf8(chunk.unwrap().as_ref()).unwrap());
    }
    assert!(text.contains("\"cancelled\""), "{text}");
    tokio::time::timeout(
        Duration::from_secs(30),
        server.logged("did not end its cancelled turn within 10s"),
    )
    .await
    .expect("the turn given up within its bound");
    // The thread goes on.
    let input = json!({
        "threadId": thread,
        "runId": format!("r-{}", uuid::Uuid::now_v7()),
        "messages": [
            {"id": "m1", "role": "user", "content": "stubbornly"},
            {"id": "m2", "role": "user", "content": "hello"},
        ],
    });
    assert_eq!(said(&post(&server.base, input).await), "Echo: hello");
}
