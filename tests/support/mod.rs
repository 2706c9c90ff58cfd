//! What the tests share: running the official clients (the AG-UI and ACP npm packages, the ACP
//! Python package), and the modules below. Each test module uses a part of it.
#![allow(dead_code)]

pub mod debian;
pub mod frames;
#[cfg(feature = "cli")]
pub mod json_logs;
#[cfg(all(feature = "subagent", feature = "demo", feature = "store"))]
pub mod lead;
pub mod model_events;
pub mod postgres;
#[cfg(feature = "cli")]
pub mod process;
pub mod replay;
pub mod stores;
#[cfg(feature = "test-util")]
pub mod verified;
pub mod webhook_sink;

use std::{path::Path, process::Stdio};

use tokio::io::AsyncWriteExt;

/// Installs the pinned official packages (`npm ci`) once, if they are not there yet.
async fn install_client(dir: &Path) {
    static INSTALLED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    INSTALLED
        .get_or_init(|| {
            npm_ci(
                dir,
                &[
                    "@ag-ui/client",
                    "@agentclientprotocol/sdk",
                    "@modelcontextprotocol/sdk",
                    "@modelcontextprotocol/server",
                    "@modelcontextprotocol/server-everything",
                    "playwright-core",
                    "standardwebhooks",
                    "ws",
                ],
            )
        })
        .await;
}

/// `npm ci` in `dir`, unless all of `packages` are installed there.
pub async fn npm_ci(dir: &Path, packages: &[&str]) {
    let installed = packages
        .iter()
        .all(|package| dir.join("node_modules").join(package).exists());
    if installed {
        return;
    }
    npm(dir, &["ci", "--no-audit", "--no-fund"]).await;
}

/// `npm ARGS` in `dir`; panics with its output when it fails.
pub async fn npm(dir: &Path, args: &[&str]) {
    let out = tokio::process::Command::new("npm")
        .args(args)
        .current_dir(dir)
        .output()
        .await
        .expect("npm is installed");
    assert!(
        out.status.success(),
        "npm {args:?} in {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Checks `events` (AG-UI events as JSON) as the official client does: each against the
/// `@ag-ui/core` schemas, the sequence with the client's verifier; panics saying why otherwise.
pub async fn officially_verified(events: &[serde_json::Value]) {
    let output = node(
        "check-events.mjs",
        &[],
        Some(serde_json::Value::from(events.to_vec()).to_string()),
    )
    .await;
    assert!(output.starts_with("ok"), "{output}: {events:?}");
}

/// The `node_modules` of `tests/conformance`, with the pinned packages installed.
pub async fn node_modules() -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    install_client(&dir).await;
    dir.join("node_modules")
}

/// The entry point of the reference MCP server (`@modelcontextprotocol/server-everything`).
pub async fn mcp_everything() -> String {
    node_modules()
        .await
        .join("@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

/// The script of the MCP server on the current protocol (`tests/conformance/mcp-modern.mjs`).
pub async fn mcp_modern() -> String {
    node_modules()
        .await
        .join("../mcp-modern.mjs")
        .display()
        .to_string()
}

/// Runs a script of the official client's package; panics with its output when it fails.
pub async fn node(script: &str, args: &[&str], stdin: Option<String>) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    install_client(&dir).await;
    node_in(&dir, script, args, stdin).await
}

/// The client package `clients/js`, its dependencies installed and built once; its directory.
pub async fn js_client() -> std::path::PathBuf {
    static BUILT: tokio::sync::OnceCell<std::path::PathBuf> = tokio::sync::OnceCell::const_new();
    BUILT
        .get_or_init(|| async {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/js");
            npm_ci(&dir, &["@ag-ui/client", "@ag-ui/core", "typescript"]).await;
            npm(&dir, &["run", "build"]).await;
            dir
        })
        .await
        .clone()
}

/// Runs `script` of `dir` with node, in `dir`; panics with its output when it fails.
pub async fn node_in(dir: &Path, script: &str, args: &[&str], stdin: Option<String>) -> String {
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join(script))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node is installed");
    let mut pipe = child.stdin.take().unwrap();
    if let Some(stdin) = stdin {
        pipe.write_all(stdin.as_bytes()).await.unwrap();
    }
    drop(pipe);
    let out = child.wait_with_output().await.unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "node {script} failed:\n{text}");
    text
}

/// The virtual environment with the pinned Python packages of `tests/conformance/requirements.txt`,
/// created once (in `target/`) if it is not there yet.
async fn python_env(dir: &Path) -> std::path::PathBuf {
    static VENV: tokio::sync::OnceCell<std::path::PathBuf> = tokio::sync::OnceCell::const_new();
    VENV.get_or_init(|| async {
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/acp-python");
        let python = venv.join("bin/python");
        let run = |program: std::path::PathBuf, args: Vec<String>| async move {
            let out = tokio::process::Command::new(&program)
                .args(&args)
                .output()
                .await
                .unwrap_or_else(|e| panic!("{} could not start: {e}", program.display()));
            assert!(
                out.status.success(),
                "{} {args:?} failed:\n{}",
                program.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        if !python.exists() {
            run(
                "python3".into(),
                vec!["-m".into(), "venv".into(), venv.display().to_string()],
            )
            .await;
        }
        let requirements = dir.join("requirements.txt").display().to_string();
        run(
            python.clone(),
            vec![
                "-m".into(),
                "pip".into(),
                "install".into(),
                "--quiet".into(),
                "--disable-pip-version-check".into(),
                "-r".into(),
                requirements,
            ],
        )
        .await;
        python
    })
    .await
    .clone()
}

/// A Python script of `tests/conformance` with the official packages installed, to spawn.
pub async fn python_command(script: &str) -> tokio::process::Command {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let mut command = tokio::process::Command::new(python_env(&dir).await);
    command.arg(dir.join(script)).current_dir(&dir);
    command
}

/// Runs a Python script with the official packages installed; panics with its output when it
/// fails.
pub async fn python(script: &str, args: &[&str]) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let python = python_env(&dir).await;
    let out = tokio::process::Command::new(python)
        .arg(dir.join(script))
        .args(args)
        .current_dir(&dir)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "python {script} failed:\n{text}");
    text
}

/// The events of a run of one user message `text` on `thread` (a run id of its own), posted to
/// the AG-UI server at `base` and read to the end.
pub async fn user_run(base: &str, thread: &str, text: &str) -> Vec<serde_json::Value> {
    user_run_as(base, None, thread, text).await
}

/// [`user_run`] with the bearer token `token`.
pub async fn user_run_as(
    base: &str,
    token: Option<&str>,
    thread: &str,
    text: &str,
) -> Vec<serde_json::Value> {
    let body = serde_json::json!({
        "threadId": thread, "runId": format!("{thread}-run-{}", uuid::Uuid::now_v7()),
        "messages": [{"id": "m", "role": "user", "content": text}],
    });
    run_of(base, token, &body).await
}

/// The events of the run `body` (a `RunAgentInput`) posted as `token` to the AG-UI server at
/// `base`, read to the end.
pub async fn run_of(
    base: &str,
    token: Option<&str>,
    body: &serde_json::Value,
) -> Vec<serde_json::Value> {
    let mut request = reqwest::Client::new().post(format!("{base}/")).json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let sse = request.send().await.unwrap().text().await.unwrap();
    sse.split("\n\n")
        .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}
