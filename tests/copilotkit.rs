//! The CopilotKit example (`examples/copilotkit`: react-core 1.74 and runtime 1.75, pinned) in
//! Debian's Chromium, in front of the built `agent-tower serve`; the steps are in
//! `tests/conformance/copilotkit.mjs`, the thread list in two tabs in
//! `tests/conformance/copilotkit-threads.mjs` and, for the runtime as a trusted front of many
//! users, `tests/conformance/copilotkit-front.mjs`.

use crate::support;
use crate::support::debian;
use crate::support::process;
use crate::support::stores;

use std::{path::Path, process::Stdio};

use process::Process;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The example, installed and built once: its copy of `clients/js` (`@agent-tower/client`) is
/// the package as built now.
async fn example() -> std::path::PathBuf {
    static BUILT: tokio::sync::OnceCell<std::path::PathBuf> = tokio::sync::OnceCell::const_new();
    BUILT
        .get_or_init(|| async {
            let client = support::js_client().await.join("dist/index.js");
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/copilotkit");
            let copy = dir.join("node_modules/@agent-tower/client/dist/index.js");
            if std::fs::read(&copy).ok() != std::fs::read(&client).ok() {
                support::npm(&dir, &["ci", "--no-audit", "--no-fund"]).await;
            }
            support::npm_ci(
                &dir,
                &["@copilotkit/react-core", "@copilotkit/runtime", "vite"],
            )
            .await;
            support::npm(&dir, &["run", "build"]).await;
            dir
        })
        .await
        .clone()
}

/// The example's runtime and page (`node server.mjs`), in front of `agent`, with `env` (the token
/// it reaches agent-tower with: `AGENT_TOKEN` or `AGENT_FRONT_TOKEN`); its address.
async fn runtime(agent: &str, env: &[(&str, &str)]) -> (tokio::process::Child, String) {
    let dir = example().await;
    let mut child = tokio::process::Command::new("node")
        .arg("server.mjs")
        .current_dir(&dir)
        .env("AGENT_URL", format!("{agent}/"))
        .envs(env.iter().copied())
        .env("PORT", "0")
        .env("COPILOTKIT_TELEMETRY_DISABLED", "true")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node is installed");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines
        .next_line()
        .await
        .unwrap()
        .expect("the runtime says where it listens");
    let url = line
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// The operator token the runtimes reach agent-tower with, and that reads every thread.
const TOKEN: &str = "an-operator-token-of-some-length";

/// `agent-tower serve` on a SQLite store of its own (`name`), with [`TOKEN`] as its operator
/// token.
async fn with_operator(name: &str) -> Process {
    let store = stores::sqlite(name);
    Process::serve_with_env(
        &["--store", &store, "--operator-token-env", "OPERATOR_TOKEN"],
        &[("OPERATOR_TOKEN", TOKEN)],
    )
    .await
}

#[tokio::test]
async fn copilotkit_chats_calls_tools_shares_state_and_asks_approval() {
    debian::ensure("chromium", "chromium");
    let agent = with_operator("copilotkit").await;
    let (_runtime, page) = runtime(&agent.base, &[("AGENT_TOKEN", TOKEN)]).await;
    // A second runtime in front of the same agent: a reloaded page may reach either.
    let (_other, other_page) = runtime(&agent.base, &[("AGENT_TOKEN", TOKEN)]).await;
    let out = support::node(
        "copilotkit.mjs",
        &[&page, &agent.base, TOKEN, &other_page],
        None,
    )
    .await;
    println!("{out}");
    assert!(out.contains("copilotkit: passed"), "{out}");
}

#[tokio::test]
async fn copilotkit_lists_renames_archives_switches_and_deletes_threads_live_across_tabs() {
    debian::ensure("chromium", "chromium");
    let agent = with_operator("copilotkit-threads").await;
    let (_runtime, page) = runtime(&agent.base, &[("AGENT_TOKEN", TOKEN)]).await;
    let out = support::node("copilotkit-threads.mjs", &[&page], None).await;
    println!("{out}");
    assert!(out.contains("copilotkit-threads: passed"), "{out}");
}

#[tokio::test]
async fn copilotkit_as_a_trusted_front_keeps_its_users_apart() {
    debian::ensure("chromium", "chromium");
    let front = "copilotkit:a-front-token-of-some-length";
    let store = stores::sqlite("copilotkit-front");
    let agent = Process::serve_with_env(
        &["--store", &store, "--front-token-env", "FRONT_TOKEN"],
        &[("FRONT_TOKEN", front)],
    )
    .await;
    let token = front.split_once(':').unwrap().1;
    let (_runtime, page) = runtime(&agent.base, &[("AGENT_FRONT_TOKEN", token)]).await;
    let out = support::node("copilotkit-front.mjs", &[&page, &agent.base, token], None).await;
    println!("{out}");
    assert!(out.contains("copilotkit-front: passed"), "{out}");
}

/// Without `@agent-tower/client` (the official `HttpAgent` and CopilotKit's in-memory runner), as
/// most CopilotKit apps reach an AG-UI server: Stop in the page cancels the run on the server and
/// the next message is answered.
#[tokio::test]
async fn copilotkit_without_the_client_package_stops_a_run_and_goes_on() {
    debian::ensure("chromium", "chromium");
    let agent = with_operator("copilotkit-plain").await;
    let env = [("AGENT_TOKEN", TOKEN), ("AGENT_CLIENT", "ag-ui")];
    let (_runtime, page) = runtime(&agent.base, &env).await;
    let _logs = agent.logs_on_failure();
    let out = support::node("copilotkit-plain.mjs", &[&page, &agent.base, TOKEN], None).await;
    println!("{out}");
    assert!(out.contains("copilotkit-plain: passed"), "{out}");
}

/// A rolling restart under the example (`client`: `agent-tower`, or `ag-ui` for the app without
/// the client package): the runtime reaches two instances on one store through a balancer; the
/// one streaming gets SIGTERM. The runtime stays up and the next message is answered; on the
/// client package, the page shows the whole answer.
async fn rolling_restart(client: &str) {
    debian::ensure("chromium", "chromium");
    let store = stores::sqlite(&format!("copilotkit-deploy-{client}"));
    let (mut first, second) = Process::rolling_pair(&store, &[]).await;
    let dir = example().await;
    let pid = first.pid().to_string();
    let out = support::node(
        "copilotkit-deploy.mjs",
        &[
            client,
            dir.to_str().unwrap(),
            &first.base,
            &second.base,
            &pid,
        ],
        None,
    )
    .await;
    println!("{out}");
    assert!(out.contains("copilotkit-deploy: passed"), "{out}");
    first.exits_cleanly().await;
    second.kill().await;
}

#[tokio::test]
async fn copilotkit_keeps_streaming_across_a_rolling_restart() {
    rolling_restart("agent-tower").await;
}

#[tokio::test]
async fn copilotkit_without_the_client_package_stays_up_across_a_rolling_restart() {
    rolling_restart("ag-ui").await;
}
