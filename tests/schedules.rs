//! Schedules: `agent-tower serve --schedule` begins a run for each occurrence, once across the
//! instances on a store (two on PostgreSQL), and makes up for, or skips, what fell while no
//! instance was up. Each scheduled run's end is heard through a webhook, as an operator would.

use crate::support::process::{ALICE, BOB, Process};
use crate::support::stores;
use crate::support::webhook_sink::{SECRET, Sink};

use std::{collections::BTreeSet, time::Duration};

/// An operator's token.
const OPERATOR: &str = "ops:operator-token-0123456789";
/// What the operator sends.
const OPERATOR_BEARER: &str = "operator-token-0123456789";

/// The occurrences (ms since the epoch) of the runs `schedule` ended, as webhooks told them,
/// read from `sink` until there are `count` of them; checks each was told as finished.
async fn occurrences(sink: &mut Sink, schedule: &str, count: usize) -> BTreeSet<u64> {
    let mut seen = BTreeSet::new();
    while seen.len() < count {
        let delivery = sink.next().await;
        assert_eq!(delivery["verified"], true, "{delivery}");
        assert_eq!(delivery["body"]["type"], "run.finished", "{delivery}");
        let run = delivery["body"]["data"]["runId"].as_str().unwrap();
        let at = run
            .strip_prefix(&format!("{schedule}-"))
            .expect("a scheduled run");
        seen.insert(at.parse().unwrap());
    }
    seen
}

/// Whether `occurrences` are every second from the first to the last.
fn every_second(occurrences: &BTreeSet<u64>) -> bool {
    let (first, last) = (occurrences.first().unwrap(), occurrences.last().unwrap());
    occurrences.iter().all(|at| at % 1000 == 0)
        && (last - first) / 1000 + 1 == occurrences.len() as u64
}

async fn serve(store: &str, sink: &Sink, schedule: &str, spec: &str) -> Process {
    let schedule = format!("{schedule}={spec}");
    Process::serve_with_env(
        &[
            "--store",
            store,
            "--webhook",
            &sink.url,
            "--schedule",
            &schedule,
        ],
        &[("AGENT_TOWER_WEBHOOK_SECRET", SECRET)],
    )
    .await
}

#[tokio::test]
async fn two_instances_begin_each_occurrence_of_a_schedule_once() {
    let Some(store) = stores::postgres("schedules-two").await else {
        return;
    };
    let mut sink = Sink::start(0, 0).await;
    let spec = r#"{"cron": "* * * * * *", "prompt": "hello"}"#;
    let (a, b) = (
        serve(&store, &sink, "tick", spec).await,
        serve(&store, &sink, "tick", spec).await,
    );
    // Six occurrences in a row, none missing: the second instance took none of them twice
    // (a run per occurrence, under the occurrence's id), and neither left one out.
    let seen = occurrences(&mut sink, "tick", 6).await;
    assert!(every_second(&seen), "{seen:?}");
    let listed: serde_json::Value = a.get("/webhooks").await.json().await.unwrap();
    let told = listed["webhooks"].as_array().unwrap();
    let runs: BTreeSet<&str> = told.iter().map(|w| w["runId"].as_str().unwrap()).collect();
    assert_eq!(runs.len(), told.len(), "one end per run: {told:?}");
    a.kill().await;
    b.kill().await;

    // The command lists them from the store, as the routes do.
    let lines = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_agent-tower"))
            .args(args)
            .args(["--store", &store])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .collect::<Vec<_>>()
    };
    let schedules = lines(&["schedules"]);
    assert_eq!(schedules.len(), 1, "{schedules:?}");
    assert_eq!(schedules[0]["name"], "tick");
    let last = schedules[0]["lastRunId"].as_str().unwrap();
    let at: u64 = last.strip_prefix("tick-").unwrap().parse().unwrap();
    assert!(at >= *seen.last().unwrap(), "{last} after {seen:?}");
    let first = format!("tick-{}", seen.first().unwrap());
    let webhooks = lines(&["webhooks", "--run", &first]);
    assert_eq!(webhooks.len(), 1, "{webhooks:?}");
    assert_eq!(webhooks[0]["type"], "run.finished");
    assert_eq!(webhooks[0]["status"], "delivered");
}

#[tokio::test]
async fn what_fell_while_no_instance_was_up_is_made_up_for_or_skipped_as_the_schedule_says() {
    for (missed, makes_up) in [("makeUp", true), ("skip", false)] {
        let store = stores::sqlite(&format!("schedules-{missed}"));
        let mut sink = Sink::start(0, 0).await;
        let spec = format!(
            r#"{{"cron": "* * * * * *", "prompt": "hello", "missed": "{missed}", "grace": "500ms"}}"#
        );
        let first = serve(&store, &sink, "tick", &spec).await;
        let before = occurrences(&mut sink, "tick", 2).await;
        first.kill().await;
        // Down for three seconds: three occurrences or more fall meanwhile.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let restarted = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let next = serve(&store, &sink, "tick", &spec).await;
        let mut all = before.clone();
        // Until the next instance began an occurrence of its own time (and, to make up, until
        // nothing is missing: each missed one comes before).
        while all.last().is_none_or(|last| *last <= restarted) || (makes_up && !every_second(&all))
        {
            all.extend(occurrences(&mut sink, "tick", 1).await);
        }
        let widest = all
            .iter()
            .zip(all.iter().skip(1))
            .map(|(a, b)| b - a)
            .max()
            .unwrap();
        if makes_up {
            // The next instance began each one it missed, the oldest first, then went on.
            assert!(every_second(&all), "{missed}: {all:?}");
        } else {
            // None of those it missed, more than their grace late.
            assert!(widest >= 3000, "{missed}: {all:?}");
        }
        next.kill().await;
    }
}

#[tokio::test]
async fn an_operator_puts_lists_and_removes_schedules_each_owned_by_its_principal() {
    let mut sink = Sink::start(0, 0).await;
    let store = stores::sqlite("schedules-routes");
    let tokens = format!("alice:{ALICE},bob:{BOB}");
    let server = Process::serve_with_env(
        &[
            "--store",
            &store,
            "--auth-token-env",
            "ALICE_AND_BOB",
            "--operator-token-env",
            "OPERATOR_TOKEN",
            "--webhook",
            &sink.url,
        ],
        &[
            ("ALICE_AND_BOB", &tokens),
            ("OPERATOR_TOKEN", OPERATOR),
            ("AGENT_TOWER_WEBHOOK_SECRET", SECRET),
        ],
    )
    .await;
    let http = reqwest::Client::new();
    let put = |name: &str, token: &str, spec: serde_json::Value| {
        http.put(format!("{}/schedules/{name}", server.base))
            .bearer_auth(token)
            .json(&spec)
            .send()
    };
    let spec = serde_json::json!({"cron": "* * * * * *", "prompt": "hello", "principal": "alice"});
    // A principal's token may not; an operator's may; a spec that cannot be is refused.
    let refused = put("tick", ALICE, spec.clone()).await.unwrap();
    assert_eq!(refused.status(), 403);
    let kept = put("tick", OPERATOR_BEARER, spec.clone()).await.unwrap();
    assert_eq!(kept.status(), 200);
    let kept: serde_json::Value = kept.json().await.unwrap();
    let mut shown = spec.clone();
    shown["missed"] = "skip".into();
    assert_eq!(kept["spec"], shown, "with its defaults");
    assert!(kept["nextAt"].is_string(), "{kept}");
    let bad = put(
        "bad",
        OPERATOR_BEARER,
        serde_json::json!({"cron": "61 * * * *", "prompt": "x"}),
    );
    let bad = bad.await.unwrap();
    assert_eq!(bad.status(), 422);
    let bad: serde_json::Value = bad.json().await.unwrap();
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("61 * * * *"),
        "{bad}"
    );

    // Its runs are Alice's: hers to read, not Bob's.
    let seen = occurrences(&mut sink, "tick", 1).await;
    let run = format!("/runs/tick-{}", seen.first().unwrap());
    let read = |token: &str| {
        http.get(format!("{}{run}", server.base))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(read(ALICE).await.unwrap().status(), 200);
    assert_eq!(read(BOB).await.unwrap().status(), 404);
    let listed: serde_json::Value = http
        .get(format!("{}/schedules", server.base))
        .bearer_auth(OPERATOR_BEARER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = listed["schedules"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(
        listed[0]["lastRunId"]
            .as_str()
            .unwrap()
            .starts_with("tick-")
    );

    let delete = |name: &str| {
        http.delete(format!("{}/schedules/{name}", server.base))
            .bearer_auth(OPERATOR_BEARER)
            .send()
    };
    assert_eq!(delete("tick").await.unwrap().status(), 204);
    assert_eq!(delete("tick").await.unwrap().status(), 404);
}
