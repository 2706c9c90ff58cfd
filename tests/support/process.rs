//! The built `agent-tower serve`, started on a free port.
#![allow(dead_code)]

use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

/// A running `agent-tower serve` process.
pub struct Process {
    child: tokio::process::Child,
    pub base: String,
    /// Its log lines since it listened, and a notification for each new one.
    logs: std::sync::Arc<(std::sync::Mutex<Vec<String>>, tokio::sync::Notify)>,
}

/// Prints the lines its process logged when dropped by a failing test (a panic).
pub struct LogsOnFailure<'a>(&'a Process);

impl Drop for LogsOnFailure<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("agent-tower logged:\n{}", self.0.lines().join("\n"));
        }
    }
}

/// Alice's bearer token, on a server of [`Process::serve_for_alice_and_bob`].
pub const ALICE: &str = "alice-token-0123456789abcdef";
/// Bob's.
pub const BOB: &str = "bob-token-0123456789abcdef";

impl Process {
    /// Starts `agent-tower serve --addr 127.0.0.1:0` with `args`, and waits until it listens.
    pub async fn serve(args: &[&str]) -> Self {
        Self::serve_with_env(args, &[]).await
    }

    /// [`serve`](Self::serve) in memory on the model `model` (`provider:name`) at `base`, with
    /// `more` flags and the environment variables `env`.
    pub async fn serve_model(model: &str, base: &str, more: &[&str], env: &[(&str, &str)]) -> Self {
        let mut args = vec!["--store", "none", "--model", model, "--base-url", base];
        args.extend_from_slice(more);
        Self::serve_with_env(&args, env).await
    }

    /// [`serve`](Self::serve) on `store` for two principals, [`ALICE`] and [`BOB`] (their
    /// bearer tokens), and `more` flags.
    pub async fn serve_for_alice_and_bob(store: &str, more: &[&str]) -> Self {
        let tokens = format!("alice:{ALICE},bob:{BOB}");
        let mut args = vec!["--store", store, "--auth-token-env", "ALICE_AND_BOB"];
        args.extend_from_slice(more);
        Self::serve_with_env(&args, &[("ALICE_AND_BOB", &tokens)]).await
    }

    /// [`serve`](Self::serve) with these environment variables set.
    pub async fn serve_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = tokio::process::Command::new(AGENT)
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the agent-tower binary starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            let read = stderr.read_line(&mut line).await.unwrap();
            assert!(read > 0, "agent-tower exited before listening");
            if let Some(at) = line.find("addr=") {
                break line[at + "addr=".len()..]
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .to_owned();
            }
        };
        // Keep reading its logs, so that it never blocks on a full pipe.
        let logs = std::sync::Arc::new((
            std::sync::Mutex::new(Vec::new()),
            tokio::sync::Notify::new(),
        ));
        let kept = logs.clone();
        tokio::spawn(async move {
            let mut lines = stderr.lines();
            while let Ok(Some(line)) = lines.next_line().await {
                kept.0.lock().unwrap().push(line);
                kept.1.notify_waiters();
            }
        });
        Self {
            child,
            base: format!("http://{addr}"),
            logs,
        }
    }

    /// Two instances on one `store` for a deploy under a run: a short lease (the second looks
    /// for runs to continue every third of it) and a drain shorter than a slow run; `more` flags.
    pub async fn rolling_pair(store: &str, more: &[&str]) -> (Self, Self) {
        let mut args = vec![
            "--store",
            store,
            "--lease",
            "1s",
            "--drain-timeout",
            "100ms",
        ];
        args.extend_from_slice(more);
        (Self::serve(&args).await, Self::serve(&args).await)
    }

    /// A guard that prints what it logged if the test fails while the guard lives.
    pub fn logs_on_failure(&self) -> LogsOnFailure<'_> {
        LogsOnFailure(self)
    }

    /// Once it exited, after a signal: that it exited successfully within 10 s.
    pub async fn exits_cleanly(&mut self) {
        let status = self
            .exit_within(std::time::Duration::from_secs(10))
            .await
            .expect("the instance exits");
        assert!(status.success(), "{status}");
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("still running")
    }

    /// Sends the signal `name` (`TERM`, `INT`) with `kill(1)`, as an operator or a supervisor
    /// would.
    pub fn signal(&self, name: &str) {
        let pid = self.pid().to_string();
        let sent = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{name} {pid}");
    }

    /// The process's exit status, once it exits; `None` when it is still running after `limit`.
    pub async fn exit_within(
        &mut self,
        limit: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .ok()
            .map(|status| status.unwrap())
    }

    /// Every line it logged since it listened, so far.
    pub fn lines(&self) -> Vec<String> {
        self.logs.0.lock().unwrap().clone()
    }

    /// Once it logged a line holding `text` (since it listened); the line.
    pub async fn logged(&self, text: &str) -> String {
        self.until(|lines| lines.iter().find(|l| l.contains(text)).cloned())
            .await
    }

    /// How many lines holding `text` it logged, so far.
    pub fn count_logged(&self, text: &str) -> usize {
        holding(&self.logs.0.lock().unwrap(), text)
    }

    /// Once it logged more than `seen` lines holding `text`.
    pub async fn logged_past(&self, text: &str, seen: usize) {
        self.until(|lines| (holding(lines, text) > seen).then_some(()))
            .await
    }

    /// Once `found` finds something in the lines it logged; what it found.
    async fn until<T>(&self, found: impl Fn(&[String]) -> Option<T>) -> T {
        loop {
            let changed = self.logs.1.notified();
            if let Some(found) = found(&self.logs.0.lock().unwrap()) {
                return found;
            }
            changed.await;
        }
    }

    /// SIGKILL: no shutdown, no flush, no goodbye.
    pub async fn kill(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }

    pub async fn post(&self, body: &Value) -> reqwest::Response {
        let response = reqwest::Client::new()
            .post(&self.base)
            .json(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{body}");
        response
    }

    /// `GET path` as the bearer of `token`: its JSON body, the answer being `200`.
    pub async fn get_as(&self, token: &str, path: &str) -> Value {
        let response = reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "GET {path}");
        response.json().await.unwrap()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        reqwest::get(format!("{}{path}", self.base)).await.unwrap()
    }
}

/// How many of `lines` hold `text`.
fn holding(lines: &[String], text: &str) -> usize {
    lines.iter().filter(|l| l.contains(text)).count()
}
