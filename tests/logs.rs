//! `agent-tower serve --log-format json`: every stderr line is a JSON object, with one line per
//! request, one per run that ends (with its events, also in the default durable mode) and one per
//! refused run with its code. The built binary.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    sync::mpsc,
};

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");
/// A safety net, not a wait: a missing line fails the test instead of hanging it.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(20);

struct Logs(mpsc::UnboundedReceiver<Value>);

impl Logs {
    /// The next line whose `message` is `message`.
    async fn next(&mut self, message: &str) -> Value {
        tokio::time::timeout(PATIENCE, async {
            loop {
                let line = self.0.recv().await.expect("the server is running");
                if line["message"] == message {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no `{message}` line"))
    }
}

#[tokio::test]
async fn json_logs_say_each_request_run_and_refusal() {
    let dir = std::env::temp_dir().join(format!("agent-tower-logs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = format!("sqlite://{}", dir.join("runs.db").display());
    let mut child = tokio::process::Command::new(AGENT)
        .args([
            "--log-format",
            "json",
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--store",
            &store,
        ])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            let value: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            if tx.send(value).is_err() {
                break;
            }
        }
    });
    let mut logs = Logs(rx);
    let serving = logs
        .next("serving AG-UI (POST / for runs, GET /ws, GET /health, GET /ready, GET /metrics)")
        .await;
    let base = format!("http://{}", serving["addr"].as_str().unwrap());
    assert_eq!(serving["level"], "INFO");

    let http = reqwest::Client::new();
    let body = json!({
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "m", "role": "user", "content": "hello there"}],
    });
    let answer = http.post(&base).json(&body).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    answer.text().await.unwrap();
    let answered = logs.next("answered").await;
    assert_eq!(answered["status"], 200, "{answered}");
    assert!(answered["duration_ms"].is_u64(), "{answered}");
    assert_eq!(answered["method"], "POST", "{answered}");
    assert_eq!(answered["path"], "/", "{answered}");
    let ended = logs.next("run ended").await;
    assert_eq!(ended["run_id"], "r", "{ended}");
    assert!(
        ended["events"].as_u64().unwrap() > 2,
        "a durable run counts its events: {ended}"
    );
    assert_eq!(ended["level"], "INFO", "{ended}");

    // The same run id for another request: refused, and said so with its code.
    let mut other = body.clone();
    other["messages"][0]["content"] = json!("something else");
    let refused = http.post(&base).json(&other).send().await.unwrap();
    assert_eq!(refused.status(), 409);
    let line = logs.next("run refused").await;
    assert_eq!(line["code"], "run_exists", "{line}");
    assert_eq!(line["status"], 409, "{line}");
    child.kill().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
