//! Webhooks: `agent-tower serve --webhook` tells a receiver written on the Standard Webhooks
//! specification's own library (`standardwebhooks`, which checks every signature) of each
//! run's end and of each run that waits for a person, at least once, on SQLite and PostgreSQL.
//! The built binary, the official AG-UI client for the runs.

use crate::support;
use crate::support::process::Process;
use crate::support::stores;
use crate::support::webhook_sink::{SECRET, Sink};

use serde_json::Value;

#[tokio::test]
async fn a_background_run_tells_its_webhook_when_it_waits_for_a_person_and_when_it_ends() {
    for (name, store) in stores::store_urls("webhooks-background").await {
        // The receiver fails the first delivery: it is sent again, under the same id.
        let mut sink = Sink::start(0, 1).await;
        let server = Process::serve_with_env(
            &[
                "--store",
                &store,
                "--webhook",
                &sink.url,
                "--webhook-retries",
                "100ms,100ms",
            ],
            &[("AGENT_TOWER_WEBHOOK_SECRET", SECRET)],
        )
        .await;
        let output =
            support::node("agui-background.mjs", &[&format!("{}/", server.base)], None).await;
        assert!(output.contains("followed to its end"), "{name}: {output}");

        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(sink.next().await);
        }
        for delivery in &seen {
            assert_eq!(delivery["verified"], true, "{name}: {delivery}");
        }
        // Two messages; the one the receiver failed (whichever came first) sent again, the same.
        let twice: Vec<&Value> = seen
            .iter()
            .filter(|d| seen.iter().filter(|other| other["id"] == d["id"]).count() == 2)
            .collect();
        assert_eq!(twice.len(), 2, "{name}: {seen:?}");
        assert_eq!(twice[0]["failed"], true, "{name}");
        assert_eq!(twice[1]["failed"], false, "{name}");
        assert_eq!(twice[0]["body"], twice[1]["body"], "{name}");
        let of = |kind: &str| {
            let mut told = seen.iter().filter(|d| d["body"]["type"] == kind);
            told.next_back()
                .unwrap_or_else(|| panic!("{name}: no {kind} in {seen:?}"))
                .clone()
        };
        let (interrupted, finished) = (of("run.interrupted"), of("run.finished"));
        assert_ne!(interrupted["id"], finished["id"], "{name}");
        // How many attempts each took: two for the one that failed.
        let took = |told: &Value| if told["id"] == twice[0]["id"] { 2 } else { 1 };
        // What each says: the run that waits, for what; the run that carried the answer out.
        let waiting = &interrupted["body"]["data"];
        let ended = &finished["body"]["data"];
        assert_eq!(waiting["status"], "interrupted", "{name}");
        assert_eq!(waiting["interrupts"][0]["toolName"], "remember", "{name}");
        assert_eq!(ended["status"], "finished", "{name}");
        assert_eq!(ended["threadId"], waiting["threadId"], "{name}");
        assert_ne!(ended["runId"], waiting["runId"], "{name}");
        let run: Value = server
            .get(ended["run"].as_str().unwrap())
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(run["status"], "finished", "{name}: {run}");

        // An operator sees both delivered, the one that failed after two attempts.
        let listed: Value = server.get("/webhooks").await.json().await.unwrap();
        let listed = listed["webhooks"].as_array().unwrap();
        let attempts = |id: &Value| {
            let webhook = listed.iter().find(|w| &w["id"] == id).unwrap();
            (
                webhook["status"].clone(),
                webhook["attempts"].as_u64().unwrap(),
            )
        };
        assert_eq!(listed.len(), 2, "{name}: {listed:?}");
        for told in [&interrupted, &finished] {
            assert_eq!(
                attempts(&told["id"]),
                ("delivered".into(), took(told)),
                "{name}"
            );
        }
        assert_eq!(listed[0]["url"], sink.url.as_str(), "{name}");
    }
}

#[tokio::test]
async fn a_run_naming_a_webhook_the_server_does_not_allow_is_refused_before_it_runs() {
    let sink = Sink::start(0, 0).await;
    let allowed = format!("{}/runs/", sink.url);
    let server = Process::serve_with_env(
        &["--store", "none", "--webhook-allow", &allowed],
        &[("AGENT_TOWER_WEBHOOK_SECRET", SECRET)],
    )
    .await;
    let run = |run: &str, url: &str| {
        serde_json::json!({
            "threadId": format!("t-{run}"), "runId": run,
            "messages": [{"id": "m", "role": "user", "content": "hello"}],
            "tools": [], "context": [], "state": {},
            "forwardedProps": {"webhook": {"url": url}},
        })
    };
    let refused = support::frames::frames(
        &server
            .post(&run("elsewhere", "http://127.0.0.1:9/steal"))
            .await
            .text()
            .await
            .unwrap(),
    );
    let end = &refused.last().unwrap().1;
    assert_eq!(end["type"], "RUN_ERROR", "{refused:?}");
    assert_eq!(end["code"], "invalid_options");
    assert!(
        end["message"]
            .as_str()
            .unwrap()
            .contains("is not allowed here"),
        "{end}"
    );
    let listed: Value = server.get("/webhooks").await.json().await.unwrap();
    assert_eq!(
        listed["webhooks"],
        serde_json::json!([]),
        "a refused run tells nothing"
    );

    // Under the prefix, the run's own webhook hears of its end.
    let own = format!("{allowed}7");
    let mut sink = sink;
    let answered = server.post(&run("own", &own)).await.text().await.unwrap();
    assert!(answered.contains("RUN_FINISHED"), "{answered}");
    let delivery = sink.next().await;
    assert_eq!(delivery["verified"], true, "{delivery}");
    assert_eq!(delivery["body"]["data"]["runId"], "own");
    assert_eq!(delivery["body"]["type"], "run.finished");
}

/// A run of one short answer.
fn hello(run: &str) -> Value {
    serde_json::json!({
        "threadId": format!("t-{run}"), "runId": run,
        "messages": [{"id": "m", "role": "user", "content": "hello"}],
        "tools": [], "context": [], "state": {}, "forwardedProps": {},
    })
}

#[tokio::test]
async fn what_a_killed_sender_was_sending_is_sent_again_by_the_next_under_the_same_ids() {
    for (name, store) in stores::store_urls("webhooks-kill").await {
        // The receiver never answers the first three deliveries: their sender is killed then.
        let mut sink = Sink::start(3, 0).await;
        let url = sink.url.clone();
        let args = [
            "--store",
            &store,
            "--webhook",
            &url,
            "--webhook-timeout",
            "1s",
        ];
        let env = [("AGENT_TOWER_WEBHOOK_SECRET", SECRET)];
        let first = Process::serve_with_env(&args, &env).await;
        let runs: Vec<String> = (0..6)
            .map(|n| format!("{name}-{n}-{}", uuid::Uuid::now_v7()))
            .collect();
        for run in &runs {
            let answered = first.post(&hello(run)).await.text().await.unwrap();
            assert!(answered.contains("RUN_FINISHED"), "{name}: {answered}");
        }
        let mut deliveries = Vec::new();
        while deliveries
            .iter()
            .filter(|d: &&Value| d["held"] == true)
            .count()
            < 3
        {
            deliveries.push(sink.next().await);
        }
        first.kill().await;

        // The next instance on the store (on PostgreSQL, two) sends the rest, and again what
        // the killed one was sending, once its hold ran out.
        let mut next = vec![Process::serve_with_env(&args, &env).await];
        if name == "postgres" {
            next.push(Process::serve_with_env(&args, &env).await);
        }
        let answered = |deliveries: &[Value]| {
            deliveries
                .iter()
                .filter(|d| d["held"] == false)
                .map(|d| d["body"]["data"]["runId"].as_str().unwrap().to_owned())
                .collect::<std::collections::HashSet<_>>()
        };
        while answered(&deliveries).len() < runs.len() {
            deliveries.push(sink.next().await);
        }
        // Every end was delivered, checked by the receiver; each held one again under its id.
        assert_eq!(
            answered(&deliveries),
            runs.iter().cloned().collect(),
            "{name}"
        );
        for delivery in &deliveries {
            assert_eq!(delivery["verified"], true, "{name}: {delivery}");
            assert_eq!(delivery["body"]["type"], "run.finished", "{name}");
        }
        let mut ids = std::collections::HashMap::new();
        for delivery in &deliveries {
            let run = delivery["body"]["data"]["runId"].as_str().unwrap();
            let id = delivery["id"].as_str().unwrap();
            assert_eq!(ids.entry(run).or_insert(id), &id, "{name}: one id per end");
        }
        // Sent again once: on PostgreSQL, one of the two instances claimed each.
        for held in deliveries.iter().filter(|d| d["held"] == true) {
            let again = deliveries
                .iter()
                .filter(|d| d["held"] == false && d["id"] == held["id"])
                .count();
            assert_eq!(again, 1, "{name}: {held} sent again, once");
        }
        // Every end is recorded delivered once its sender heard the answer, after the receiver
        // saw it: the killed sender may have recorded its last ones (without living to log it),
        // or not (and a next instance sends them again). Listed again each time a next instance
        // records one, until none is left to send.
        const RECORDED: &str = "a webhook was delivered";
        loop {
            let recorded: Vec<usize> = next.iter().map(|p| p.count_logged(RECORDED)).collect();
            let listed: Value = next[0].get("/webhooks").await.json().await.unwrap();
            let listed = listed["webhooks"].as_array().unwrap().clone();
            assert_eq!(listed.len(), runs.len(), "{name}: {listed:?}");
            assert!(
                listed
                    .iter()
                    .all(|w| w["status"] == "delivered" || w["status"] == "pending"),
                "{name}: {listed:?}"
            );
            if listed.iter().all(|w| w["status"] == "delivered") {
                break;
            }
            futures_util::future::select_all(
                next.iter()
                    .zip(recorded)
                    .map(|(p, seen)| Box::pin(p.logged_past(RECORDED, seen))),
            )
            .await;
        }
        eprintln!(
            "{name}: {} ends, {} deliveries ({} held by the killed sender)",
            runs.len(),
            deliveries.len(),
            3
        );
    }
}
