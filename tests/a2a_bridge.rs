//! `--agent a2a:<url>`: an A2A agent written on the official Python SDK
//! (`tests/conformance/a2a_agent.py`) on the web, behind `agent-tower serve`, driven by the
//! official AG-UI client (`a2a-bridge.mjs`), and in an editor, behind `agent-tower acp`, driven
//! by the official ACP client (`acp-a2a.mjs`): its answers stream, a thread (a session) is one A2A
//! context, its question is answered by the next message, and a stop cancels its task there.

use std::{process::Stdio, sync::Arc};

use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{self, process::Process};

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

/// The A2A agent on the official Python SDK, running: its URL, and what it printed (once per
/// task it was asked to cancel: `cancelled <task>`), as it prints it.
struct PythonAgent {
    url: String,
    said: Arc<tokio::sync::Mutex<Vec<String>>>,
    changed: Arc<tokio::sync::Notify>,
    _child: tokio::process::Child,
}

impl PythonAgent {
    async fn start() -> Self {
        let mut command = support::python_command("a2a_agent.py").await;
        let mut child = command
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the A2A agent starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = loop {
            let line = lines.next_line().await.unwrap().expect("the agent listens");
            if let Some(port) = line.strip_prefix("listening on ") {
                break port.to_owned();
            }
        };
        let said = Arc::new(tokio::sync::Mutex::new(Vec::new()));
        let changed = Arc::new(tokio::sync::Notify::new());
        let (kept, told) = (said.clone(), changed.clone());
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                kept.lock().await.push(line);
                told.notify_waiters();
            }
        });
        Self {
            url: format!("http://127.0.0.1:{port}"),
            said,
            changed,
            _child: child,
        }
    }

    /// Once it said it cancelled `n` tasks.
    async fn cancelled(&self, n: usize) {
        loop {
            let changed = self.changed.notified();
            let cancelled = self
                .said
                .lock()
                .await
                .iter()
                .filter(|line| line.starts_with("cancelled "))
                .count();
            if cancelled >= n {
                return;
            }
            changed.await;
        }
    }
}

#[tokio::test]
async fn the_official_agui_client_talks_to_an_a2a_agent_through_serve() {
    let agent = PythonAgent::start().await;
    let server =
        Process::serve(&["--store", "none", "--agent", &format!("a2a:{}", agent.url)]).await;
    let out = support::node("a2a-bridge.mjs", &[&format!("{}/", server.base)], None).await;
    println!("{out}");
    for step in [
        "ok answers stream; one thread is one context",
        "ok its question is the run's answer; the next message answers it",
        "ok stopped mid-answer",
        "a2a-bridge: passed",
    ] {
        assert!(out.contains(step), "{step} missing from:\n{out}");
    }
    // The Stop reached the A2A agent: it cancelled the task.
    tokio::time::timeout(std::time::Duration::from_secs(10), agent.cancelled(1))
        .await
        .expect("the A2A agent was asked to cancel its task");
}

#[tokio::test]
async fn the_official_acp_client_talks_to_an_a2a_agent_through_acp() {
    let agent = PythonAgent::start().await;
    let out = support::node("acp-a2a.mjs", &[AGENT, &agent.url], None).await;
    println!("{out}");
    for step in [
        "ok answers stream; a session is one context",
        "ok its question ends the turn; the next prompt answers it",
        "ok session/cancel cancelled the turn",
        "acp-a2a: passed",
    ] {
        assert!(out.contains(step), "{step} missing from:\n{out}");
    }
    tokio::time::timeout(std::time::Duration::from_secs(10), agent.cancelled(1))
        .await
        .expect("the A2A agent was asked to cancel its task");
}

#[tokio::test]
async fn an_a2a_agent_that_cannot_be_reached_is_said_at_start() {
    let out = tokio::process::Command::new(AGENT)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--store",
            "none",
            "--agent",
            "a2a:http://127.0.0.1:9/",
        ])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(
            "the agent card at http://127.0.0.1:9/.well-known/agent-card.json could not be read"
        ),
        "{said}"
    );
}
