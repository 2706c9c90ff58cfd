//! `agent-tower serve --log-format json`: every stderr line is a JSON object, with one line per
//! request, one per run that ends (with its events, also in the default durable mode) and one per
//! refused run with its code. The built binary.

use crate::support;
use crate::support::json_logs;

use json_logs::JsonLogged;
use serde_json::{Value, json};

#[tokio::test]
async fn json_logs_say_each_request_run_and_refusal() {
    let dir = std::env::temp_dir().join(format!("agent-tower-logs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = format!("sqlite://{}", dir.join("runs.db").display());
    let mut logs = JsonLogged::serve(&["--store", &store], &[]);
    let serving = logs
        .message("serving AG-UI (POST / for runs, GET /ws, GET /health, GET /ready, GET /metrics)")
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
    let answered = logs.message("answered").await;
    assert_eq!(answered["status"], 200, "{answered}");
    assert!(answered["duration_ms"].is_u64(), "{answered}");
    assert_eq!(answered["method"], "POST", "{answered}");
    assert_eq!(answered["path"], "/", "{answered}");
    let ended = logs.message("run ended").await;
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
    let line = logs.message("run refused").await;
    assert_eq!(line["code"], "run_exists", "{line}");
    assert_eq!(line["status"], 409, "{line}");
    logs.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With principals, the lines name them: each request's and each run's, and an operator who reads
/// another principal's thread is logged doing so.
#[tokio::test]
async fn json_logs_name_the_principal_and_an_operators_reads_and_answers() {
    const ALICE: &str = "alice-token-0123456789";
    let mut logs = JsonLogged::serve(
        &[
            "--auth-token-env",
            "TOKENS",
            "--operator-token-env",
            "OPERATORS",
        ],
        &[
            ("TOKENS", "alice:alice-token-0123456789"),
            ("OPERATORS", "ops:ops-token-0123456789"),
        ],
    );
    let serving = logs.next("serving", |line| line["addr"].is_string()).await;
    let base = format!("http://{}", serving["addr"].as_str().unwrap());
    let http = reqwest::Client::new();
    // A run of alice's in `thread`, read to its end.
    let run_as_alice = async |thread: &str, text: &str| {
        let body = json!({
            "threadId": thread,
            "runId": format!("{thread}-run"),
            "messages": [{"id": "m", "role": "user", "content": text}],
        });
        let answer = http.post(&base).bearer_auth(ALICE).json(&body).send();
        answer.await.unwrap().text().await.unwrap();
    };
    run_as_alice("alices", "hello").await;
    // The request's line and the run's end, in either order: both name alice.
    let mut seen = Vec::new();
    for _ in 0..2 {
        let line = logs
            .next("answered or run ended", |line| {
                line["message"] == "answered" || line["message"] == "run ended"
            })
            .await;
        assert_eq!(line["principal"], "alice", "{line}");
        seen.push(line["message"].as_str().unwrap().to_owned());
    }
    seen.sort();
    assert_eq!(seen, ["answered", "run ended"]);

    let read = http
        .get(format!("{base}/threads/alices"))
        .bearer_auth("ops-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    let audit = logs.message("an operator read another principal's").await;
    assert_eq!(
        (audit["operator"].as_str(), audit["owner"].as_str()),
        (Some("ops"), Some("alice")),
        "{audit}"
    );
    assert_eq!(audit["what"], "thread alices", "{audit}");

    // Alice's run waits for an approval; the operator gives it out of band, and that is said too.
    run_as_alice(
        "alices-approval",
        r#"remember {"key": "theme", "value": "dark"}"#,
    )
    .await;
    let thread: Value = http
        .get(format!("{base}/threads/alices-approval"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let interrupt = thread["pendingInterrupts"][0]["id"].clone();
    assert!(interrupt.is_string(), "{thread}");
    let answered = http
        .post(format!("{base}/threads/alices-approval/resume"))
        .bearer_auth("ops-token-0123456789")
        .json(&json!({"resume": [{"interruptId": interrupt, "status": "resolved", "payload": {"approved": true}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 202);
    let run: Value = answered.json().await.unwrap();
    let audit = logs
        .message("an operator answered another principal's interrupt")
        .await;
    assert_eq!(
        (audit["operator"].as_str(), audit["owner"].as_str()),
        (Some("ops"), Some("alice")),
        "{audit}"
    );
    assert_eq!(audit["what"], "thread alices-approval", "{audit}");
    assert_eq!(audit["run_id"], run["runId"], "{audit}");
    logs.kill().await;
}

#[tokio::test]
async fn a_base_url_the_scripted_model_ignores_is_said_at_start() {
    let mut logs = JsonLogged::serve(&["--base-url", "http://127.0.0.1:9/v1"], &[]);
    let warned = logs
        .message(
            "--base-url (or AGENT_TOWER_BASE_URL) is ignored: the model is scripted; name one \
             with --model openai:<model>, anthropic:<model> or gemini:<model>",
        )
        .await;
    assert_eq!(warned["level"], "WARN", "{warned}");
    assert_eq!(warned["base_url"], "http://127.0.0.1:9/v1", "{warned}");
    // It still serves.
    logs.base().await;
    logs.kill().await;
}

#[tokio::test]
async fn settings_that_do_nothing_together_are_said_to() {
    let mut logs = JsonLogged::serve(
        &[
            "--retain-runs",
            "30d",
            "--model",
            "openai:m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--scripted-knobs",
            "--thinking-budget",
            "2048",
        ],
        &[],
    );
    let thinking = logs
        .message("--thinking-budget is ignored: the model is not an anthropic: or gemini: one")
        .await;
    assert_eq!(thinking["level"], "WARN", "{thinking}");
    let knobs = logs
        .message("--scripted-knobs is ignored: the model is not the scripted one")
        .await;
    assert_eq!(knobs["level"], "WARN", "{knobs}");
    let retention = logs
        .message(
            "--retain-runs and --retain-threads are ignored: runs in memory are bounded, and gone \
             when the process exits",
        )
        .await;
    assert_eq!(retention["level"], "WARN", "{retention}");
    logs.base().await;
    logs.kill().await;
}

/// `--memory-runs` bounds the memory store: past it, the oldest ended run is forgotten (its
/// events answer 404), the latest are kept.
#[tokio::test]
async fn the_memory_store_keeps_as_many_ended_runs_as_it_is_told() {
    let mut logs = JsonLogged::serve(&["--store", "memory", "--memory-runs", "2"], &[]);
    let base = logs.base().await;
    let mut runs = Vec::new();
    for n in 0..3 {
        let events = support::user_run(&base, &format!("bounded-{n}"), "hi").await;
        runs.push(events[0]["runId"].as_str().unwrap().to_owned());
    }
    let client = reqwest::Client::new();
    let status = |run: String| {
        let client = client.clone();
        let base = base.clone();
        async move {
            client
                .get(format!("{base}/runs/{run}/events"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(
        status(runs[0].clone()).await,
        404,
        "the oldest is forgotten"
    );
    assert_eq!(status(runs[2].clone()).await, 200);
    logs.kill().await;
}
