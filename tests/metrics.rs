//! `GET /metrics` of the built `agent-tower serve` (its runs in SQLite), scraped by a real Prometheus (Debian's
//! `prometheus`) and queried through its HTTP API after three runs: one that succeeds, one that
//! fails, one whose client goes away.

use crate::support::debian;
use crate::support::process;

use std::{process::Stdio, time::Duration};

use process::Process;
use serde_json::{Value, json};

/// How long Prometheus may take to scrape what the runs did (it scrapes every 100 ms here).
const PATIENCE: Duration = Duration::from_secs(60);

fn run(thread: &str, run: &str, text: &str, forwarded: Value) -> Value {
    json!({
        "threadId": thread,
        "runId": run,
        "messages": [{"id": format!("m-{run}"), "role": "user", "content": text}],
        "forwardedProps": forwarded,
    })
}

/// A free loopback port (bound, then released for Prometheus to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn prometheus_scrapes_runs_by_outcome() {
    debian::ensure("prometheus", "prometheus");
    let dir = std::env::temp_dir().join(format!("agent-tower-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = format!("sqlite://{}", dir.join("runs.db").display());
    let server = Process::serve(&[
        "--scripted-knobs",
        "--store",
        &store,
        "--max-run-events",
        "24",
        "--metrics-group",
        "support=alice,bob",
        // The run whose client goes away is cancelled at once, not after a re-join grace.
        "--rejoin-grace",
        "0s",
    ])
    .await;

    // The text itself: OpenMetrics, every family present from the start.
    let text = server.get("/metrics").await.text().await.unwrap();
    assert!(
        text.contains("# TYPE agent_tower_runs_started counter"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");

    // One run that succeeds with a tool call, one stopped past its bounds (an error), one whose
    // client goes away mid-stream (cancelled by the disconnect).
    let ok = server
        .post(&run("t1", "ok", "add {\"a\": 1, \"b\": 2}", json!({})))
        .await;
    assert!(ok.text().await.unwrap().contains("RUN_FINISHED"));
    let too_large = server
        .post(&run(
            "t2",
            "big",
            "hi",
            json!({"scripted": {"tokens": 100}}),
        ))
        .await;
    assert!(too_large.text().await.unwrap().contains("run_too_large"));
    let mut slow = server
        .post(&run("t3", "gone", "answer slowly", json!({})))
        .await;
    assert!(
        slow.chunk().await.unwrap().is_some(),
        "the slow run started"
    );
    drop(slow);

    let target = server.base.trim_start_matches("http://");
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 100ms\n  scrape_timeout: 100ms\n\
             scrape_configs:\n  - job_name: agent-tower\n    static_configs:\n      \
             - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let mut prometheus = tokio::process::Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("Prometheus runs (Debian package `prometheus`; .ci/run installs it)");

    let query = format!(
        "http://127.0.0.1:{port}/api/v1/query?query=sum%20by%20(outcome)%20(agent_tower_runs_ended_total)"
    );
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let outcomes = loop {
        // Prometheus scrapes on its own clock and tells no one: asking again is the only way.
        if let Ok(response) = http.get(&query).send().await
            && let Ok(answer) = response.json::<Value>().await
        {
            let mut outcomes: Vec<(String, String)> = answer["data"]["result"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|series| {
                    (
                        series["metric"]["outcome"]
                            .as_str()
                            .unwrap_or("")
                            .to_owned(),
                        series["value"][1].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect();
            outcomes.sort();
            if outcomes.len() == 3 {
                break outcomes;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Prometheus did not report three outcomes within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        outcomes,
        [
            ("disconnected".to_owned(), "1".to_owned()),
            ("error".to_owned(), "1".to_owned()),
            ("success".to_owned(), "1".to_owned()),
        ]
    );
    let instant = async |query: &str| -> Value {
        http.get(format!(
            "http://127.0.0.1:{port}/api/v1/query?query={query}"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
    };
    let tools = instant("agent_tower_tool_calls_total").await;
    assert_eq!(
        tools["data"]["result"][0]["metric"]["tool"], "add",
        "{tools}"
    );
    assert_eq!(
        tools["data"]["result"][0]["metric"]["outcome"], "ok",
        "{tools}"
    );
    let tokens = instant("agent_tower_model_tokens_total%7Btype%3D%22output%22%7D").await;
    let output: f64 = tokens["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{tokens}"));
    assert!(output > 0.0, "{tokens}");
    // Requests by route template, method and status; a path that matches no route adds none.
    assert_eq!(server.get("/runs/no-such-run/events").await.status(), 404);
    assert_eq!(server.get("/no/such/route").await.status(), 404);
    let text = server.get("/metrics").await.text().await.unwrap();
    let posted = "agent_tower_http_requests_total{route=\"/\",method=\"POST\",status=\"200\"} ";
    let posts: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix(posted))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(posts, 3, "{text}");
    let template = "route=\"/runs/{run_id}/events\",method=\"GET\",status=\"404\"";
    assert!(text.contains(template), "{text}");
    assert!(
        !text.contains("/no/such/route") && !text.contains("no-such-run"),
        "{text}"
    );
    let requests = instant("sum%20by%20(route)%20(agent_tower_http_requests_total)").await;
    let routes: Vec<&str> = requests["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["metric"]["route"].as_str())
        .collect();
    assert!(
        routes.contains(&"/metrics"),
        "Prometheus's own scrapes: {requests}"
    );
    // The process's own metrics, as Prometheus names them.
    let resident = instant("process_resident_memory_bytes").await;
    let bytes: f64 = resident["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{resident}"));
    assert!(bytes > 1e6, "{resident}");
    assert!(text.contains("process_open_fds "), "{text}");
    // The store's commits are timed.
    let text = server.get("/metrics").await.text().await.unwrap();
    let commits: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix("agent_tower_store_commit_seconds_count "))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(commits > 0, "{text}");
    // Runs are counted by group of principals too: without authentication, under `none`.
    let unauthenticated: u64 = text
        .lines()
        .filter(|line| line.starts_with("agent_tower_group_runs_ended_total{group=\"none\""))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(unauthenticated, 3, "{text}");
    prometheus.kill().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
