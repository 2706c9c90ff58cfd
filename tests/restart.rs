//! `agent-tower serve` killed with SIGKILL and started again on the same store: a pending
//! interrupt is still resumable, a run that was streaming is continued to its end, and nothing a
//! client was sent is lost.

use crate::support::frames;
use crate::support::process;
use crate::support::stores;
use crate::support::verified;

use agent_tower::runs::SENT_AHEAD;
use frames::frames;
use futures_util::StreamExt;
use process::Process;
use serde_json::{Value, json};

/// `agent-tower serve` on `store` with a one-second lease, its clients' runs going on without
/// them.
async fn start(store: &str) -> Process {
    Process::serve(&[
        "--scripted-knobs",
        "--lease",
        "1s",
        "--on-disconnect",
        "continue",
        "--store",
        store,
    ])
    .await
}

/// Posts `body` to `server` and reads its stream until 20 frames arrived: the stream, and what
/// it sent so far.
async fn streaming(
    server: &Process,
    body: &Value,
) -> (
    impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin + use<>,
    String,
) {
    let mut stream = server.post(body).await.bytes_stream();
    let mut text = String::new();
    while frames(&text).len() < 20 {
        text.push_str(std::str::from_utf8(&stream.next().await.unwrap().unwrap()).unwrap());
    }
    (stream, text)
}

fn thread() -> String {
    format!("t-{}", uuid::Uuid::now_v7())
}

#[tokio::test]
async fn a_pending_interrupt_survives_a_kill() {
    for (name, store) in stores::store_urls("kill-interrupt").await {
        let thread = thread();
        let before = start(&store).await;
        let body = json!({
            "threadId": thread, "runId": "r1",
            "messages": [{"id": "u1", "role": "user", "content": r#"remember {"key": "theme", "value": "dark"}"#}],
        });
        let first = frames(&before.post(&body).await.text().await.unwrap());
        let end = &first.last().unwrap().1;
        assert_eq!(end["outcome"]["type"], "interrupt", "{name}: {end}");
        let interrupt = end["outcome"]["interrupts"][0].clone();
        before.kill().await;

        let after = start(&store).await;
        let pending: Value = after
            .get("/interrupts?status=pending")
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(pending["interrupts"][0]["id"], interrupt["id"], "{name}");
        let resume = json!({
            "threadId": thread, "runId": "r2", "messages": [],
            "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": true}}],
        });
        let second = frames(&after.post(&resume).await.text().await.unwrap());
        let result = second
            .iter()
            .find(|(_, e)| e["type"] == "TOOL_CALL_RESULT")
            .expect("the approved call ran after the restart");
        assert_eq!(result.1["toolCallId"], interrupt["toolCallId"], "{name}");
        assert_eq!(
            second.last().unwrap().1["outcome"]["type"],
            "success",
            "{name}"
        );
        after.kill().await;
    }
}

#[tokio::test]
async fn a_run_streaming_when_killed_is_continued_to_its_end_after_the_restart() {
    for (name, store) in stores::store_urls("kill-stream").await {
        let before = start(&store).await;
        let body = json!({
            "threadId": thread(), "runId": "long",
            "messages": [{"id": "u1", "role": "user", "content": "hello"}],
            "forwardedProps": {"scripted": {"tokens": 400, "delay_ms": 2}},
        });
        let (mut stream, mut text) = streaming(&before, &body).await;
        before.kill().await;
        // What the client was sent before the kill, to the last byte that arrived.
        while let Some(Ok(chunk)) = stream.next().await {
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        let seen = frames(&text);

        // The new process continues the dead owner's run once its lease has run out; a client
        // that re-joins after what it saw sees the rest, then one end.
        let after = start(&store).await;
        let last_id = &seen.last().unwrap().0;
        let rest = reqwest::Client::new()
            .get(format!("{}/runs/long/events", after.base))
            .header("Last-Event-ID", last_id)
            .send()
            .await
            .unwrap();
        assert_eq!(rest.status(), 200, "{name}");
        let rest = frames(&rest.text().await.unwrap());
        let log = frames(
            &after
                .get("/runs/long/events?after=0")
                .await
                .text()
                .await
                .unwrap(),
        );
        assert_eq!(log[..seen.len()], seen[..], "{name}: nothing sent was lost");
        assert_eq!(
            log[seen.len()..],
            rest[..],
            "{name}: a re-join reads the rest"
        );
        let ids: Vec<String> = log.iter().map(|(id, _)| id.clone()).collect();
        let expected = verified::ids_in_order(&log, "long");
        assert_eq!(ids, expected, "{name}: one log, in order");
        let types = verified::one_run(&log, name);
        assert_eq!(
            types.iter().filter(|t| **t == "RUN_STARTED").count(),
            1,
            "{name}"
        );
        let end = &log.last().unwrap().1;
        assert_eq!(end["type"], "RUN_FINISHED", "{name}: {end}");
        let marker = log
            .iter()
            .position(|(_, e)| e["name"] == "agent_tower.takeover")
            .unwrap_or_else(|| panic!("{name}: the takeover is marked: {types:?}"));
        assert_eq!(log[marker].1["value"]["attempt"], 2, "{name}");

        let thread: Value = after
            .get(&format!("/threads/{}", body["threadId"].as_str().unwrap()))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(thread["runs"][0]["status"], "finished", "{name}");
        let roles: Vec<&str> = thread["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            ["user", "assistant"],
            "{name}: the cut answer was redone, not kept"
        );
        after.kill().await;
    }
}

#[tokio::test]
async fn a_run_streaming_at_sigterm_is_handed_over_and_continued_at_the_next_start() {
    let store = stores::sqlite("sigterm-handover");
    // A lease of a minute: only the hand-over, not the lease, lets the next start continue it.
    let args = [
        "--scripted-knobs",
        "--lease",
        "60s",
        "--drain-timeout",
        "200ms",
        "--store",
        &store,
    ];
    let mut before = Process::serve(&args).await;
    let body = json!({
        "threadId": thread(), "runId": "drained",
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
        "forwardedProps": {"scripted": {"tokens": 2000, "delay_ms": 2}},
    });
    let (mut stream, mut text) = streaming(&before, &body).await;
    before.signal("TERM");
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("the response ends cleanly, not cut");
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let mut seen = frames(&text);
    assert!(
        seen.iter()
            .all(|(_, e)| e["type"] != "RUN_FINISHED" && e["type"] != "RUN_ERROR"),
        "the run was handed over, not ended"
    );
    // The response ends at an event boundary with where to re-join: after its last event.
    let (id, notice) = seen.pop().unwrap();
    assert_eq!(
        (
            id.as_str(),
            notice["type"].as_str(),
            notice["name"].as_str()
        ),
        ("", Some("CUSTOM"), Some("agent_tower.rejoin")),
        "{notice}"
    );
    assert_eq!(notice["value"]["runId"], "drained");
    assert_eq!(notice["value"]["lastEventId"], seen.last().unwrap().0);
    let status = before
        .exit_within(std::time::Duration::from_secs(10))
        .await
        .expect("it exits");
    assert!(status.success(), "{status}");

    let after = Process::serve(&args).await;
    let rest = reqwest::Client::new()
        .get(format!("{}/runs/drained/events", after.base))
        .header("Last-Event-ID", &seen.last().unwrap().0)
        .send()
        .await
        .unwrap();
    let rest = tokio::time::timeout(std::time::Duration::from_secs(30), rest.text())
        .await
        .expect("continued long before the lease runs out")
        .unwrap();
    let rest = frames(&rest);
    // The re-join goes on right after the last event read: what the cut response had not
    // delivered yet (logged before the hand-over), then the takeover, then the rest of the run.
    let seq = |id: &str| id.rsplit(':').next().unwrap().parse::<u64>().unwrap();
    let last_seen = seq(&seen.last().unwrap().0);
    let ids: Vec<u64> = rest.iter().map(|(id, _)| seq(id)).collect();
    let takeover = rest
        .iter()
        .position(|(_, e)| e["name"] == "agent_tower.takeover")
        .expect("continued after a takeover");
    // One after the other, but for the numbers the takeover leaves unused.
    let expected: Vec<u64> = (0..ids.len() as u64)
        .map(|i| {
            let gap = if i >= takeover as u64 { SENT_AHEAD } else { 0 };
            last_seen + 1 + i + gap
        })
        .collect();
    assert_eq!(ids, expected, "nothing missed, nothing twice");
    assert!(
        rest[..takeover]
            .iter()
            .all(|(_, e)| e["type"] == "TEXT_MESSAGE_CONTENT"),
        "only words the cut response had not delivered come first: {:?}",
        &rest[..takeover]
    );
    assert_eq!(rest.last().unwrap().1["type"], "RUN_FINISHED");
    after.kill().await;
}

#[tokio::test]
async fn an_approval_answered_before_a_kill_is_carried_out_after_it() {
    for (name, store) in stores::store_urls("kill-resolve").await {
        let thread = thread();
        let before = start(&store).await;
        // A call that needs approval; once approved, the model answers for a few seconds.
        let body = json!({
            "threadId": thread, "runId": "r1",
            "messages": [{"id": "u1", "role": "user", "content": r#"remember {"key": "theme", "value": "dark"}"#}],
            "forwardedProps": {"scripted": {"tokens": 2000, "delay_ms": 2}},
        });
        let first = frames(&before.post(&body).await.text().await.unwrap());
        let interrupt = first.last().unwrap().1["outcome"]["interrupts"][0].clone();
        let resolved = reqwest::Client::new()
            .post(format!(
                "{}/interrupts/{}/resolve",
                before.base,
                interrupt["id"].as_str().unwrap()
            ))
            .json(&json!({"payload": {"approved": true}}))
            .send()
            .await
            .unwrap();
        assert_eq!(resolved.status(), 202, "{name}");
        let resolved: Value = resolved.json().await.unwrap();
        // Killed as soon as the approval was acknowledged, mid-continuation.
        before.kill().await;

        // The new process continues the run once the old one's lease ran out: a client
        // following its log sees one run, the approved call carried out, and its end.
        let after = start(&store).await;
        let events = after.get(resolved["events"].as_str().unwrap()).await;
        assert_eq!(events.status(), 200, "{name}");
        let events = frames(&events.text().await.unwrap());
        assert!(
            events.iter().all(|(_, e)| e["code"] != "run_lost"),
            "{name}: {events:?}"
        );
        let result = events
            .iter()
            .find(|(_, e)| e["type"] == "TOOL_CALL_RESULT")
            .expect("the approved call ran");
        assert_eq!(result.1["toolCallId"], interrupt["toolCallId"], "{name}");
        let end = &events.last().unwrap().1;
        assert_eq!(end["outcome"]["type"], "success", "{name}: {end}");
        let ids: Vec<String> = events.iter().map(|(id, _)| id.clone()).collect();
        let run = resolved["runId"].as_str().unwrap();
        let expected = verified::ids_in_order(&events, run);
        assert_eq!(ids, expected, "{name}: one log, in order");

        let view: Value = after
            .get(&format!("/threads/{thread}"))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(
            view["state"]["theme"], "dark",
            "{name}: the approval was carried out"
        );
        assert_eq!(view["pendingInterrupts"], json!([]), "{name}");
        after.kill().await;
    }
}

stores::postgresql_answers_test!();

/// Runs `hello` on a new thread as `run`, to its end.
async fn finished(server: &Process, run: &str) {
    let body = json!({
        "threadId": thread(), "runId": run,
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
    });
    let events = server.post(&body).await.text().await.unwrap();
    assert!(events.contains("RUN_FINISHED"), "{events}");
}

/// The SQLite file of `store` (`sqlite://path`).
fn file_of(store: &str) -> std::path::PathBuf {
    store.trim_start_matches("sqlite://").into()
}

#[tokio::test]
async fn a_clean_stop_leaves_every_run_in_the_file_and_a_backup_restores_them_while_serving() {
    let store = stores::sqlite("backup");
    let server = start(&store).await;
    let mut runs = Vec::new();
    for n in 0..3 {
        let run = format!("r{n}");
        finished(&server, &run).await;
        runs.push(run);
    }
    // A run streams while the copy is taken: the copy has the finished runs, whole.
    let streaming = json!({
        "threadId": thread(), "runId": "streaming",
        "messages": [{"id": "u1", "role": "user", "content": "tell me slowly"}],
    });
    let streaming = server.post(&streaming).await;
    assert_eq!(streaming.status(), 200);
    let copy = file_of(&stores::sqlite("backup-copy"));
    let backup = std::process::Command::new(env!("CARGO_BIN_EXE_agent-tower"))
        .args(["backup", "--store", &store])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        backup.status.success(),
        "{}",
        String::from_utf8_lossy(&backup.stderr)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&copy).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the copy holds conversations");
    }
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_agent-tower"))
        .args(["backup", "--store", &store])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        !again.status.success(),
        "an existing file is not overwritten"
    );

    let restored = start(&format!("sqlite://{}", copy.display())).await;
    for run in &runs {
        let path = format!("/runs/{run}/events?after=0");
        let live = server.get(&path).await.text().await.unwrap();
        let copied = restored.get(&path).await.text().await.unwrap();
        assert!(live.contains("RUN_FINISHED"), "{live}");
        assert_eq!(frames(&copied), frames(&live), "{run}: the same events");
    }
    restored.kill().await;
    drop(streaming);

    // A clean stop folds the log into the file: the file alone is the store.
    let mut server = server;
    server.signal("TERM");
    let status = server
        .exit_within(std::time::Duration::from_secs(30))
        .await
        .expect("it exits");
    assert!(status.success(), "{status}");
    let file = file_of(&store);
    let wal = std::fs::metadata(format!("{}-wal", file.display())).map_or(0, |m| m.len());
    assert_eq!(wal, 0, "nothing left in the write-ahead log");
    let alone = file_of(&stores::sqlite("backup-alone"));
    std::fs::copy(&file, &alone).unwrap();
    let alone = start(&format!("sqlite://{}", alone.display())).await;
    for run in &runs {
        let events = alone.get(&format!("/runs/{run}/events?after=0")).await;
        assert!(
            events.text().await.unwrap().contains("RUN_FINISHED"),
            "{run}"
        );
    }
    alone.kill().await;
}

#[tokio::test]
async fn runs_past_their_retention_are_deleted_while_serving_and_by_the_prune_command() {
    let store = stores::sqlite("retain");
    let server = Process::serve(&["--store", &store, "--retain-runs", "1s"]).await;
    finished(&server, "old").await;
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        server.logged("runs past their retention deleted"),
    )
    .await
    .expect("pruned within its period");
    assert_eq!(server.get("/runs/old/events?after=0").await.status(), 404);
    server.kill().await;

    let store = stores::sqlite("prune");
    let server = start(&store).await;
    finished(&server, "kept").await;
    let prune = |older_than: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_agent-tower"))
            .args(["prune", "--store", &store, "--older-than", older_than])
            .output()
            .unwrap()
    };
    assert!(prune("1h").status.success());
    assert_eq!(
        server.get("/runs/kept/events?after=0").await.status(),
        200,
        "younger than 1 h"
    );
    assert!(prune("0s").status.success());
    assert_eq!(server.get("/runs/kept/events?after=0").await.status(), 404);
    server.kill().await;
}

#[tokio::test]
async fn a_thread_is_exported_as_json_lines_while_serving() {
    let store = stores::sqlite("export");
    let server = start(&store).await;
    let thread = thread();
    let mut logged = 0;
    let mut said = Vec::new();
    for (n, words) in ["hello", "add {\"a\": 1, \"b\": 2}"].iter().enumerate() {
        // The client's conversation: its user turns so far.
        said.push(json!({"id": format!("u{n}"), "role": "user", "content": words}));
        let body = json!({"threadId": thread, "runId": format!("r{n}"), "messages": said});
        let events = frames(&server.post(&body).await.text().await.unwrap());
        logged += events.len();
    }
    let export = std::process::Command::new(env!("CARGO_BIN_EXE_agent-tower"))
        .args(["export", "--store", &store, &thread])
        .output()
        .unwrap();
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(export.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines[0]["threadId"], thread.as_str());
    assert!(
        lines[0]["messages"].as_array().unwrap().len() >= 4,
        "{}",
        lines[0]
    );
    let events = &lines[1..];
    assert_eq!(events.len(), logged, "every event of both runs");
    assert_eq!(events[0]["runId"], "r0");
    assert_eq!(events[0]["event"]["type"], "RUN_STARTED");
    assert_eq!(events.last().unwrap()["runId"], "r1");
    assert_eq!(events.last().unwrap()["event"]["type"], "RUN_FINISHED");

    let unknown = std::process::Command::new(env!("CARGO_BIN_EXE_agent-tower"))
        .args(["export", "--store", &store, "no-such-thread"])
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no thread `no-such-thread`"));
    server.kill().await;
}
