//! Budgets, principals' limits and models' rate limits counted in the store: each model step
//! once, the same for every instance on the store, and the same after a restart.

use crate::support::{
    self,
    process::{ALICE, BOB, Process},
    replay::{Fixture, serve},
    stores,
};

use agent_tower::{
    id::RunId,
    model::{
        Cost,
        budget::{Accounts, Ledger, Spent, Step},
        rate_limit::{CallWindow, MinuteLimits},
    },
    store::RunStore,
};
use serde_json::Value;

stores::postgresql_answers_test!();

/// Today, in days since 1970-01-01 (UTC).
fn today() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.unwrap().as_secs() / 86_400
}

#[tokio::test]
async fn the_store_charges_each_step_once_for_every_instance_and_after_a_restart() {
    for (name, url) in stores::store_urls("ledger").await {
        let (one, two) = (
            RunStore::open(&url).await.unwrap(),
            RunStore::open(&url).await.unwrap(),
        );
        let alice = |run: &str| Accounts::new(RunId::from(run), "alice", today());
        let step = |run: &str, turn| Step::new(RunId::from(run), turn);
        let cent = Spent::new(100, Cost::from_usd(0.01));

        let first = one
            .charge(&step("r1", 0), &alice("r1"), cent)
            .await
            .unwrap();
        assert_eq!((first.run, first.day), (cent, cent), "{name}");
        // The same step again, on the other instance: redone after a takeover.
        let again = two
            .charge(&step("r1", 0), &alice("r1"), cent)
            .await
            .unwrap();
        assert_eq!((again.run, again.day), (cent, cent), "{name}: counted once");
        // A sub-agent's step, billed to the run that started it.
        let sub = two
            .charge(&step("sub", 0), &alice("r1"), cent)
            .await
            .unwrap();
        assert_eq!(sub.run, Spent::new(200, Cost::from_usd(0.02)), "{name}");
        let r2 = one
            .charge(&step("r2", 0), &alice("r2"), cent)
            .await
            .unwrap();
        assert_eq!(r2.run, cent, "{name}: a run of its own");
        assert_eq!(
            r2.day,
            Spent::new(300, Cost::from_usd(0.03)),
            "{name}: one day"
        );
        let bob = Accounts::new(RunId::from("r3"), "bob", today());
        assert_eq!(
            two.balance(&bob).await.unwrap().day,
            Spent::default(),
            "{name}"
        );
        let tomorrow = Accounts::new(RunId::from("r3"), "alice", today() + 1);
        assert_eq!(
            two.balance(&tomorrow).await.unwrap().day,
            Spent::default(),
            "{name}"
        );

        drop((one, two));
        let restarted = RunStore::open(&url).await.unwrap();
        let kept = restarted.balance(&alice("r1")).await.unwrap();
        assert_eq!((kept.run.tokens, kept.day.tokens), (200, 300), "{name}");
    }
}

/// The tokens the scripted model spends on a run of `text` on a new thread.
async fn tokens_of_a_run(text: &str) -> u64 {
    let agent = Process::serve(&["--store", "none"]).await;
    let events = support::user_run(&agent.base, "measure", text).await;
    agent.kill().await;
    let end = events.last().unwrap();
    assert_eq!(end["type"], "RUN_FINISHED", "{end}");
    let usage = &end["usage"][0];
    usage["inputTokens"].as_u64().unwrap() + usage["outputTokens"].as_u64().unwrap()
}

/// Two `serve` instances on the store at `url` for alice and bob, with `flags`.
async fn alice_and_bobs_pair(url: &str, flags: &[&str]) -> [Process; 2] {
    [
        Process::serve_for_alice_and_bob(url, flags).await,
        Process::serve_for_alice_and_bob(url, flags).await,
    ]
}

/// How a run ended, and whether the model was asked (its answer streamed).
fn outcome(events: &[Value]) -> (String, bool) {
    let end = events.last().unwrap();
    let how = match end["type"].as_str().unwrap() {
        "RUN_ERROR" => end["code"].as_str().unwrap().to_owned(),
        other => other.to_owned(),
    };
    (
        how,
        events.iter().any(|e| e["type"] == "TEXT_MESSAGE_CONTENT"),
    )
}

#[tokio::test]
async fn two_instances_on_postgresql_hold_a_principals_daily_budget_across_restarts() {
    let Some(url) = stores::postgres("budget_pair").await else {
        return;
    };
    const PROMPT: &str = "What is the weather in Oslo?";
    let run = tokens_of_a_run(PROMPT).await;
    // Two runs fit; the third crosses.
    let budget = format!("{}tokens", 2 * run + run / 2);
    let flags = ["--daily-budget", budget.as_str()];
    let pair = alice_and_bobs_pair(&url, &flags).await;
    let mut outcomes = Vec::new();
    for n in 0..4 {
        let thread = format!("a{n}");
        let events = support::user_run_as(&pair[n % 2].base, Some(ALICE), &thread, PROMPT).await;
        outcomes.push(outcome(&events));
    }
    let finished = ("RUN_FINISHED".to_owned(), true);
    let crossed = ("budget_exceeded".to_owned(), true);
    let refused = ("budget_exceeded".to_owned(), false);
    assert_eq!(
        outcomes,
        [finished.clone(), finished.clone(), crossed, refused.clone()],
        "alternating instances, {run} tokens a run, a budget of {budget}"
    );
    // What alice may still spend, as either instance tells her.
    let told: Value = reqwest::Client::new()
        .get(format!("{}/budget", pair[1].base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let today = &told["today"];
    assert_eq!(today["spent"]["tokens"], 3 * run, "{told}");
    assert_eq!(today["limit"]["tokens"], 2 * run + run / 2, "{told}");
    assert_eq!(today["left"]["tokens"], 0, "{told}");
    // And each run's answer says what was left when it began.
    let bobs = reqwest::Client::new()
        .post(format!("{}/", pair[0].base))
        .bearer_auth(BOB)
        .json(&serde_json::json!({
            "threadId": "bob-first", "runId": "bob-first-run",
            "messages": [{"id": "m", "role": "user", "content": PROMPT}],
        }))
        .send()
        .await
        .unwrap();
    let left = bobs.headers()["agent-tower-budget-left"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        left,
        format!("tokens={}", 2 * run + run / 2),
        "bob's whole day"
    );
    bobs.text().await.unwrap();
    for instance in pair {
        instance.kill().await;
    }
    let restarted = alice_and_bobs_pair(&url, &flags).await;
    for (n, instance) in restarted.iter().enumerate() {
        let thread = format!("b{n}");
        let events = support::user_run_as(&instance.base, Some(ALICE), &thread, PROMPT).await;
        assert_eq!(outcome(&events), refused, "after a restart, instance {n}");
    }
    let bobs = support::user_run_as(&restarted[1].base, Some(BOB), "bob", PROMPT).await;
    assert_eq!(
        outcome(&bobs),
        finished,
        "bob's day is his own: his second run"
    );
}

/// Begins a run of `text` on a new thread `thread` as `token`, in the background
/// (`Prefer: respond-async`): the answer's status and body.
async fn begin(base: &str, token: &str, thread: &str, text: &str) -> (u16, Value) {
    let body = serde_json::json!({
        "threadId": thread, "runId": format!("{thread}-run"),
        "messages": [{"id": "m", "role": "user", "content": text}],
    });
    let answer = reqwest::Client::new()
        .post(format!("{base}/"))
        .bearer_auth(token)
        .header("prefer", "respond-async")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or_default())
}

/// The status of an answer of [`begin`], and its error's code.
fn refusal((status, body): &(u16, Value)) -> (u16, &str) {
    (*status, body["error"]["code"].as_str().unwrap_or_default())
}

#[tokio::test]
async fn two_instances_on_postgresql_hold_a_principals_live_runs_and_runs_a_minute() {
    let Some(url) = stores::postgres("limits_pair").await else {
        return;
    };
    let flags = [
        "--principal-live-runs",
        "1",
        "--principal-runs-per-minute",
        "3",
    ];
    let pair = alice_and_bobs_pair(&url, &flags).await;
    // A long run of alice's on the first instance holds her one place on both.
    let (status, _) = begin(&pair[0].base, ALICE, "long", "Answer slowly.").await;
    assert_eq!(status, 202);
    let refused = begin(&pair[1].base, ALICE, "second", "Hello.").await;
    assert_eq!(
        refusal(&refused),
        (429, "too_many_live_runs"),
        "{refused:?}"
    );
    let (status, _) = begin(&pair[1].base, BOB, "bobs", "Hello.").await;
    assert_eq!(status, 202, "bob's place is his own");
    let cancelled = reqwest::Client::new()
        .post(format!("{}/runs/long-run/cancel", pair[1].base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert!(cancelled.status().is_success(), "{}", cancelled.status());
    // Once it ended (its log, followed to its end, says so), her next run begins on the other
    // instance.
    let log = reqwest::Client::new()
        .get(format!("{}/runs/long-run/events?after=0", pair[0].base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        log.contains("RUN_ERROR") || log.contains("RUN_FINISHED"),
        "{log}"
    );
    let third = support::user_run_as(&pair[1].base, Some(ALICE), "third", "Hello.").await;
    assert_eq!(third.last().unwrap()["type"], "RUN_FINISHED");
    // Her third run of the minute; the fourth is refused on either instance, and after a
    // restart of both.
    let fourth = support::user_run_as(&pair[0].base, Some(ALICE), "fourth", "Hi.").await;
    assert_eq!(fourth.last().unwrap()["type"], "RUN_FINISHED");
    let refused = begin(&pair[1].base, ALICE, "too-many", "Hello.").await;
    assert_eq!(refusal(&refused), (429, "rate_limited"), "{refused:?}");
    for instance in pair {
        instance.kill().await;
    }
    let restarted = Process::serve_for_alice_and_bob(&url, &flags).await;
    let refused = begin(&restarted.base, ALICE, "fifth", "Hello.").await;
    assert_eq!(refusal(&refused), (429, "rate_limited"), "{refused:?}");
}

#[tokio::test]
async fn the_bytes_a_principal_logged_today_on_one_instance_count_on_the_other() {
    let Some(url) = stores::postgres("log_bytes_pair").await else {
        return;
    };
    // Less than one run logs: the first run ends (its bytes are counted by slices), the next
    // is refused wherever it begins.
    let flags = ["--principal-log-bytes-per-day", "1000"];
    let pair = alice_and_bobs_pair(&url, &flags).await;
    let first = support::user_run_as(&pair[0].base, Some(ALICE), "first", "Hello.").await;
    assert_eq!(first.last().unwrap()["type"], "RUN_FINISHED");
    let refused = begin(&pair[1].base, ALICE, "second", "Hello.").await;
    assert_eq!(refusal(&refused), (429, "quota_exceeded"), "{refused:?}");
    let (status, _) = begin(&pair[1].base, BOB, "bobs", "Hello.").await;
    assert_eq!(status, 202, "bob's bytes are his own");
}

#[tokio::test]
async fn a_models_calls_and_tokens_of_the_minute_count_for_every_instance_on_the_store() {
    for (name, url) in stores::store_urls("calls").await {
        let (one, two) = (
            RunStore::open(&url).await.unwrap(),
            RunStore::open(&url).await.unwrap(),
        );
        let two_calls = MinuteLimits::new(Some(2), None);
        assert_eq!(
            one.admit("openai:m", two_calls).await.unwrap(),
            None,
            "{name}"
        );
        assert_eq!(
            two.admit("openai:m", two_calls).await.unwrap(),
            None,
            "{name}"
        );
        let wait = one.admit("openai:m", two_calls).await.unwrap();
        let wait = wait.unwrap_or_else(|| panic!("{name}: a third call in the minute"));
        assert!(
            wait <= std::time::Duration::from_secs(60),
            "{name}: {wait:?}"
        );
        assert_eq!(
            two.admit("anthropic:m", two_calls).await.unwrap(),
            None,
            "{name}: another model's minute"
        );
        let thousand = MinuteLimits::new(None, Some(1_000));
        one.used("gemini:m", 600).await.unwrap();
        assert_eq!(
            two.admit("gemini:m", thousand).await.unwrap(),
            None,
            "{name}"
        );
        two.used("gemini:m", 600).await.unwrap();
        assert!(
            one.admit("gemini:m", thousand).await.unwrap().is_some(),
            "{name}: 1,200 of 1,000 tokens"
        );
    }
}

#[tokio::test]
async fn two_instances_on_postgresql_hold_a_models_calls_a_minute_together() {
    let Some(url) = stores::postgres("calls_pair").await else {
        return;
    };
    let flags = [
        "--store",
        url.as_str(),
        "--requests-per-minute",
        "1",
        "--retries",
        "0",
    ];
    let pair = [Process::serve(&flags).await, Process::serve(&flags).await];
    let first = support::user_run(&pair[0].base, "first", "Hello.").await;
    assert_eq!(outcome(&first), ("RUN_FINISHED".to_owned(), true));
    // The minute's one call is spent on the other instance: refused at once (a minute's wait
    // is more than a call may wait), the model never asked.
    let second = support::user_run(&pair[1].base, "second", "Hello.").await;
    assert_eq!(outcome(&second), ("rate_limited".to_owned(), false));
}

#[tokio::test]
async fn two_instances_on_postgresql_hold_a_principals_daily_budget_in_dollars() {
    let Some(url) = stores::postgres("dollars_pair").await else {
        return;
    };
    // A provider's recorded answer, priced at a tenth of a cent a token.
    let (provider, _) = serve(vec![Fixture::of("openai", "plain.sse")], usize::MAX).await;
    let price = ["--price", "smollm2=1000,1000"];
    let measure = Process::serve_model("openai:smollm2", &provider, &price, &[]).await;
    let events = support::user_run(&measure.base, "measure", "Hello.").await;
    measure.kill().await;
    let cost = events
        .iter()
        .find(|e| e["name"] == "agent_tower.cost")
        .and_then(|e| e["value"]["total"]["amount"].as_f64())
        .unwrap_or_else(|| panic!("{events:?}"));
    // One run fits; the second crosses.
    let budget = format!("{:.6}usd", 1.5 * cost);
    let model = ["--model", "openai:smollm2", "--base-url", provider.as_str()];
    let mut flags = vec!["--daily-budget", budget.as_str()];
    flags.extend(price);
    flags.extend(model);
    let pair = alice_and_bobs_pair(&url, &flags).await;
    let mut outcomes = Vec::new();
    for n in 0..3 {
        let thread = format!("d{n}");
        let events = support::user_run_as(&pair[n % 2].base, Some(ALICE), &thread, "Hello.").await;
        outcomes.push(outcome(&events));
    }
    assert_eq!(
        outcomes,
        [
            ("RUN_FINISHED".to_owned(), true),
            ("budget_exceeded".to_owned(), true),
            ("budget_exceeded".to_owned(), false),
        ],
        "alternating instances, ${cost} a run, a budget of {budget}"
    );
}
