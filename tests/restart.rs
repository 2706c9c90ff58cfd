//! `agent-tower serve` killed with SIGKILL and started again on the same store: a pending
//! interrupt is still resumable, a run that was streaming ends in its log with a terminal event,
//! and nothing a client was sent is lost.

#[path = "support/frames.rs"]
mod frames;
#[path = "support/process.rs"]
mod process;
#[path = "support/stores.rs"]
mod stores;

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
async fn a_run_streaming_when_killed_ends_in_its_log() {
    for (name, store) in stores::store_urls("kill-stream").await {
        let before = start(&store).await;
        let body = json!({
            "threadId": thread(), "runId": "long",
            "messages": [{"id": "u1", "role": "user", "content": "hello"}],
            "forwardedProps": {"scripted": {"tokens": 100000, "delay_ms": 1}},
        });
        let mut stream = before.post(&body).await.bytes_stream();
        let mut text = String::new();
        while frames(&text).len() < 20 {
            text.push_str(std::str::from_utf8(&stream.next().await.unwrap().unwrap()).unwrap());
        }
        before.kill().await;
        // What the client was sent before the kill, to the last byte that arrived.
        while let Some(Ok(chunk)) = stream.next().await {
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        let seen = frames(&text);

        // The new process closes the dead owner's run once its lease has run out; a client that
        // follows the log sees everything it was sent, then the end.
        let after = start(&store).await;
        let log = after.get("/runs/long/events?after=0").await;
        assert_eq!(log.status(), 200, "{name}");
        let log = frames(&log.text().await.unwrap());
        assert!(log.len() > seen.len(), "{name}: the log goes on to an end");
        assert_eq!(log[..seen.len()], seen[..], "{name}: nothing sent was lost");
        let ids: Vec<String> = log.iter().map(|(id, _)| id.clone()).collect();
        let expected: Vec<String> = (1..=log.len()).map(|n| format!("long:{n}")).collect();
        assert_eq!(ids, expected, "{name}: one log, in order");
        let end = &log.last().unwrap().1;
        assert_eq!(end["type"], "RUN_ERROR", "{name}: {end}");
        assert_eq!(end["code"], "run_lost", "{name}");
        let thread: Value = after
            .get(&format!("/threads/{}", body["threadId"].as_str().unwrap()))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(thread["runs"][0]["status"], "failed", "{name}");
        after.kill().await;
    }
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

        // The new process runs the continuation again once the old one's lease ran out: a
        // client following its log sees the cut segment end, then the continuation to its end.
        let after = start(&store).await;
        let events = after.get(resolved["events"].as_str().unwrap()).await;
        assert_eq!(events.status(), 200, "{name}");
        let events = frames(&events.text().await.unwrap());
        let lost = events
            .iter()
            .position(|(_, e)| e["code"] == "run_lost")
            .unwrap_or_else(|| panic!("{name}: the cut segment ends with run_lost: {events:?}"));
        let continuation = &events[lost + 1..];
        assert_eq!(continuation[0].1["type"], "RUN_STARTED", "{name}");
        let result = continuation
            .iter()
            .find(|(_, e)| e["type"] == "TOOL_CALL_RESULT")
            .expect("the approved call ran after the restart");
        assert_eq!(result.1["toolCallId"], interrupt["toolCallId"], "{name}");
        let end = &continuation.last().unwrap().1;
        assert_eq!(end["outcome"]["type"], "success", "{name}: {end}");
        let ids: Vec<String> = events.iter().map(|(id, _)| id.clone()).collect();
        let run = resolved["runId"].as_str().unwrap();
        let expected: Vec<String> = (1..=events.len()).map(|n| format!("{run}:{n}")).collect();
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
