//! The development page of the built `agent-tower serve` in Debian's Chromium (driven by
//! `playwright-core`, `tests/conformance/dev-page.mjs`): a chat with reasoning, a backend tool,
//! interrupts approved, edited and rejected, state set from the page; a reload that re-joins the
//! run and Stop that cancels it on the server; the thread list on two screens; and CORS from a
//! page on another origin. Without a browser: what the page routes answer to other clients, and
//! `--no-ui`.

use crate::support;
use crate::support::debian;
use crate::support::lead;
use crate::support::process;
use crate::support::stores;

use process::Process;

/// Runs a scenario of `dev-page.mjs` in Chromium.
async fn browser(args: &[&str]) -> String {
    debian::ensure("chromium", "chromium");
    let out = support::node("dev-page.mjs", args, None).await;
    println!("{out}");
    out
}

#[tokio::test]
async fn the_page_chats_through_the_server() {
    let store = stores::sqlite("dev-page");
    let server = Process::serve(&["--store", &store]).await;
    let screenshot = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/browser-artifacts/dev-page.png"
    );
    std::fs::create_dir_all(std::path::Path::new(screenshot).parent().unwrap()).unwrap();
    let out = browser(&["chat", &server.base, screenshot]).await;
    for step in [
        "ok text and reasoning",
        "ok backend tool",
        "ok interrupt approved",
        "ok interrupt edited",
        "ok interrupt rejected",
        "ok state set from the page",
        "ok markdown",
        "ok event log",
        "chat: passed",
    ] {
        assert!(out.contains(step), "{step} missing from:\n{out}");
    }
}

#[tokio::test]
async fn the_console_draws_the_runs_and_answers_what_waits_in_every_thread() {
    let store = stores::sqlite("dev-page-console");
    let base = lead::server(&store).await;
    let screenshot = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/browser-artifacts/console.png"
    );
    std::fs::create_dir_all(std::path::Path::new(screenshot).parent().unwrap()).unwrap();
    let out = browser(&["console", base.trim_end_matches('/'), screenshot]).await;
    for step in [
        "ok the pending interrupts of two threads",
        "ok answered in the inbox: the thread went on",
        "ok the runs drawn as timelines",
        "ok rejected in the inbox",
        "console: passed",
    ] {
        assert!(out.contains(step), "{step} missing from:\n{out}");
    }
}

#[tokio::test]
async fn the_console_lists_the_schedules_and_the_webhooks() {
    let store = stores::sqlite("dev-page-operations");
    // A receiver that is not there: the webhooks wait, with why.
    let server = Process::serve_with_env(
        &[
            "--store",
            &store,
            "--schedule",
            r#"tick={"cron": "* * * * * *", "prompt": "hello"}"#,
            "--webhook",
            "http://127.0.0.1:9/hook",
        ],
        &[(
            "AGENT_TOWER_WEBHOOK_SECRET",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        )],
    )
    .await;
    let out = browser(&["operations", &server.base]).await;
    for step in [
        "ok a schedule with its next occurrence and the run its last one began",
        "ok the webhook of its end, not delivered, with why",
        "operations: passed",
    ] {
        assert!(out.contains(step), "{step} missing from:\n{out}");
    }
}

#[tokio::test]
async fn a_reload_rejoins_the_run_and_stop_cancels_it() {
    // The default settings: a run whose page went away waits for it to come back.
    let store = stores::sqlite("dev-page-rejoin");
    let server = Process::serve(&["--store", &store]).await;
    let out = browser(&["rejoin", &server.base]).await;
    for step in [
        "ok re-joined after a reload",
        "ok stop",
        "ok another device restored the thread from the server",
        "ok a second screen follows the thread live and goes on from it",
        "ok a stale screen is refused, shown the thread, and goes on from it",
        "ok the thread list: listed live, opened, named, archived and deleted on both screens",
        "rejoin: passed",
    ] {
        assert!(out.contains(step), "{step} missing from:\n{out}");
    }
}

#[tokio::test]
async fn pages_on_allowed_origins_start_and_rejoin_runs_with_a_token() {
    // The page of another application, on another port: another origin.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(|| async { axum::response::Html("<!doctype html><title>app</title>") }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (app_origin, other_origin) = (
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
    );
    let token = "a-token-of-sixteen-bytes-or-more";
    let server = Process::serve_with_env(
        &[
            "--store",
            "memory",
            "--allow-origin",
            &app_origin,
            "--auth-token-env",
            "DEV_PAGE_TOKEN",
        ],
        &[("DEV_PAGE_TOKEN", token)],
    )
    .await;
    let out = browser(&["cors", &server.base, &app_origin, &other_origin, token]).await;
    assert!(out.contains("cors: passed"), "{out}");
}

async fn get(base: &str, path: &str, accept: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("{base}{path}"))
        .header("accept", accept)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_page_is_for_browsers_and_holds_nothing_foreign() {
    let token = "a-token-of-sixteen-bytes-or-more";
    let server = Process::serve_with_env(
        &[
            "--store",
            "memory",
            "--path",
            "/agent",
            "--auth-token-env",
            "T",
        ],
        &[("T", token)],
    )
    .await;
    // Public (it holds no data), and it knows where runs go.
    let page = get(
        &server.base,
        "/",
        "text/html,application/xhtml+xml,*/*;q=0.8",
    )
    .await;
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"<meta name="agent-tower-run-path" content="/agent">"#));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "nothing loaded from elsewhere"
    );
    for (path, content_type) in [
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let asset = get(&server.base, path, "*/*").await;
        assert_eq!(asset.status(), 200, "{path}");
        assert!(
            asset.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(content_type)
        );
        let body = asset.text().await.unwrap();
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path} loads nothing"
        );
    }
    // Any other client gets what `GET /` always answered.
    let json = get(&server.base, "/", "application/json").await;
    assert_eq!(json.status(), 405);
    let body: serde_json::Value = json.json().await.unwrap();
    assert_eq!(body["error"]["code"], "method_not_allowed");
    // What the page does still needs the token.
    let run = reqwest::Client::new()
        .post(format!("{}/agent", server.base))
        .json(&serde_json::json!({"threadId": "t", "runId": "r", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), 401);
}

#[tokio::test]
async fn no_ui_serves_no_page() {
    let server = Process::serve(&["--store", "memory", "--no-ui"]).await;
    assert_eq!(get(&server.base, "/", "text/html").await.status(), 405);
    assert_eq!(get(&server.base, "/ui/app.js", "*/*").await.status(), 404);
}
