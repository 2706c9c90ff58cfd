//! The A2A door of `agent-tower serve`, driven by the official A2A clients (JavaScript
//! `@a2a-js/sdk` 1.3 and Python `a2a-sdk` 1.3, A2A 1.0) on both bindings: discovery, messages
//! answered, tasks of one context on one thread, an approval answered over A2A and over AG-UI,
//! SubscribeToTask, cancel, the caller's tasks listed in pages (another principal's never); and a
//! task that survives a kill -9 of its instance. The steps are in `tests/conformance/a2a-door.mjs`,
//! `a2a-takeover.mjs` and `a2a_client.py`.

use crate::support::{
    self,
    process::{ALICE, BOB, Process},
    stores,
};

/// Asserts that `out` says `ok <binding>: …<step>…` for every step on every binding.
fn said_on_each(out: &str, bindings: &[&str], steps: &[&str]) {
    for binding in bindings {
        for step in steps {
            let said = out
                .lines()
                .any(|line| line.starts_with(&format!("ok {binding}: ")) && line.contains(step));
            assert!(said, "{binding}: {step} missing from:\n{out}");
        }
    }
}

async fn door(store: &str) {
    let server = Process::serve_for_alice_and_bob(store, &[]).await;
    let out = support::node("a2a-door.mjs", &[&server.base, ALICE, BOB], None).await;
    println!("{out}");
    said_on_each(
        &out,
        &["jsonrpc", "rest"],
        &[
            "a message answered, a second task in its context",
            "a streamed task asked for approval, answered yes over A2A, the call ran",
            "an approval answered over AG-UI completes the A2A task",
            "SubscribeToTask followed a task to its end",
            "a working task cancelled",
            "bob sees none of them",
        ],
    );
    assert!(out.contains("a2a-door: passed"), "{out}");
}

#[tokio::test]
async fn the_official_a2a_client_works_with_tasks_in_memory() {
    door("memory").await;
}

#[tokio::test]
async fn the_official_a2a_client_works_with_tasks_on_sqlite() {
    door(&stores::sqlite("a2a-door")).await;
}

/// kill -9 of the instance running a task (on PostgreSQL, else SQLite): the client subscribes
/// through the other instance and reads the task, continued there, to its end.
#[tokio::test]
async fn a_task_survives_a_kill_of_its_instance() {
    let store = stores::shared("a2a-takeover").await;
    let (first, second) = Process::rolling_pair(&store, &[]).await;
    let pid = first.pid().to_string();
    let out = support::node("a2a-takeover.mjs", &[&first.base, &second.base, &pid], None).await;
    println!("{out}");
    assert!(out.contains("a2a-takeover: passed"), "{out}");
}

/// The official Python client (`a2a-sdk` 1.3) on both bindings: a streamed answer, an approval
/// declined with feedback, the caller's tasks in pages, a cancel. The steps are in
/// `tests/conformance/a2a_client.py`.
#[tokio::test]
async fn the_official_python_a2a_client_works_with_tasks() {
    let server = Process::serve_for_alice_and_bob("memory", &[]).await;
    let out = support::python("a2a_client.py", &[&server.base, ALICE, BOB]).await;
    println!("{out}");
    said_on_each(
        &out,
        &["JSONRPC", "HTTP+JSON"],
        &[
            "a streamed answer",
            "an approval declined with feedback; the call did not run",
            "listed newest first; bob lists none of alice's",
            "a streamed task cancelled",
        ],
    );
    assert!(out.contains("a2a-python: passed"), "{out}");
}
