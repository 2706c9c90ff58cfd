//! The built `agent-tower` started with JSON logs: its stderr read line by line, each parsed.
#![allow(dead_code)]

use std::process::Stdio;

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    sync::mpsc,
};

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");
/// A safety net, not a wait: a missing line fails the test instead of hanging it.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(20);

/// A running `agent-tower` whose every stderr line must be a JSON object.
pub struct JsonLogged {
    child: tokio::process::Child,
    lines: mpsc::UnboundedReceiver<Value>,
}

impl JsonLogged {
    /// Starts `agent-tower` with `args` and `env`, without `RUST_LOG` (the default filter).
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_in(&std::env::current_dir().unwrap(), args, env)
    }

    /// `agent-tower serve` on a free loopback port with the memory store, `args` after those,
    /// and `env`.
    pub fn serve(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut all = vec![
            "--log-format",
            "json",
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--store",
            "memory",
        ];
        all.extend_from_slice(args);
        Self::start(&all, env)
    }

    /// [`start`](Self::start) in the working directory `dir`.
    pub fn start_in(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = tokio::process::Command::new(AGENT);
        command
            .current_dir(dir)
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("the binary starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr.next_line().await {
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The next line `wanted` accepts.
    pub async fn next(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        tokio::time::timeout(PATIENCE, async {
            loop {
                let line = self.lines.recv().await.expect("the process is running");
                if wanted(&line) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {what} line"))
    }

    /// The next line whose `message` is `message`.
    pub async fn message(&mut self, message: &str) -> Value {
        self.next(message, |line| line["message"] == message).await
    }

    /// The base URL of a server, from its line saying where it serves.
    pub async fn base(&mut self) -> String {
        let serving = self.next("serving", |line| line["path"].is_string()).await;
        format!("http://{}", serving["addr"].as_str().unwrap())
    }

    pub async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}
