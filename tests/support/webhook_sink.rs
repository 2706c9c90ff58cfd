//! A webhook receiver on the Standard Webhooks specification's own library
//! (`tests/conformance/webhook-sink.mjs`): what it was sent, a delivery at a time.
#![allow(dead_code)]

use std::{process::Stdio, time::Duration};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};

/// The secret the server signs with and the receiver checks with.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// `tests/conformance/webhook-sink.mjs`: what it was sent, a line each.
pub struct Sink {
    pub url: String,
    lines: Lines<BufReader<tokio::process::ChildStdout>>,
    _child: tokio::process::Child,
}

impl Sink {
    /// A receiver that never answers the first `hold` deliveries, then answers `fail` ones
    /// `500`.
    pub async fn start(hold: usize, fail: usize) -> Self {
        let modules = super::node_modules().await;
        let mut child = tokio::process::Command::new("node")
            .arg(modules.join("../webhook-sink.mjs"))
            .current_dir(modules.join(".."))
            .env("SECRET", SECRET)
            .env("HOLD", hold.to_string())
            .env("FAIL", fail.to_string())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next_line().await.unwrap().expect("the sink listens");
        let port = first.strip_prefix("listening ").expect("its port");
        Self {
            url: format!("http://127.0.0.1:{port}/hook"),
            lines,
            _child: child,
        }
    }

    /// The next delivery: `{id, verified, error, failed, held, body}`.
    pub async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("a webhook within 30 s")
            .unwrap()
            .expect("the sink runs");
        serde_json::from_str(&line).unwrap()
    }
}
