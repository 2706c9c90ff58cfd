//! The client package `clients/js` (`@agent-tower/client`), built with its pinned TypeScript and
//! run through the official `@ag-ui/client` 1.0 against the built `agent-tower serve`: a thread
//! restored with its conversation, state and pending interrupt (answered from the restored
//! agent), a run in flight re-joined by a second reader, Stop cancelling on the server,
//! capabilities read through the official schema, and the CopilotKit runner; the steps are in
//! `clients/js/test/connect.mjs`.

use crate::support;
use crate::support::process;
use crate::support::stores;

use process::Process;

#[tokio::test]
async fn the_client_package_restores_rejoins_and_cancels() {
    let dir = support::js_client().await;
    let store = stores::sqlite("js-client");
    let server = Process::serve(&["--store", &store]).await;
    let out = support::node_in(&dir, "test/connect.mjs", &[&server.base], None).await;
    println!("{out}");
    for step in [
        "ok capabilities",
        "ok finished thread restored",
        "ok pending interrupt restored and answered",
        "ok run in flight re-joined",
        "ok abortRun cancels on the server",
        "ok runner runs, stops and connects through the server",
        "connect: passed",
    ] {
        assert!(out.contains(step), "{step} missing from:\n{out}");
    }
}

/// The client package's thread list, followed live while threads are made, named, archived and
/// deleted; the steps are in `clients/js/test/threads.mjs`.
#[tokio::test]
async fn the_client_package_lists_follows_names_archives_and_deletes_threads() {
    let dir = support::js_client().await;
    let store = stores::sqlite("js-client-threads");
    let server = Process::serve(&["--store", &store]).await;
    let out = support::node_in(&dir, "test/threads.mjs", &[&server.base], None).await;
    println!("{out}");
    for step in [
        "ok listed and followed",
        "ok pages",
        "ok named, archived",
        "ok deleted",
        "threads: passed",
    ] {
        assert!(
            out.contains(step),
            "{step} missing from:
{out}"
        );
    }
}

/// Forks with the client package, continued with the official `HttpAgent` while the original
/// is continued too; an edit and a regenerate; every branch read back as a client opens it. The
/// steps are in `clients/js/test/forks.mjs`.
#[tokio::test]
async fn forks_edits_and_regenerates_are_branches_continued_by_the_official_client() {
    let dir = support::js_client().await;
    let store = stores::sqlite("js-client-forks");
    let server = Process::serve(&["--store", &store]).await;
    let out = support::node_in(&dir, "test/forks.mjs", &[&server.base], None).await;
    println!("{out}");
    for step in [
        "ok fork and original continued at once",
        "ok edit and regenerate",
        "ok branches listed",
        "forks: passed",
    ] {
        assert!(out.contains(step), "{step} missing from:\n{out}");
    }
}

/// A deploy mid-run: SIGTERM of the instance streaming two runs, with a drain shorter than them;
/// another instance on the store continues them. The client package reads its run to the end in
/// one stream; a plain `HttpAgent`'s stream ends cleanly. The steps are in
/// `clients/js/test/deploy.mjs`.
#[tokio::test]
async fn a_deploy_mid_run_ends_streams_cleanly_and_the_client_package_reads_on() {
    let dir = support::js_client().await;
    let store = stores::sqlite("js-client-deploy");
    let (mut first, second) = Process::rolling_pair(&store, &["--scripted-knobs"]).await;
    let pid = first.pid().to_string();
    let out = support::node_in(
        &dir,
        "test/deploy.mjs",
        &[&first.base, &second.base, &pid],
        None,
    )
    .await;
    println!("{out}");
    assert!(out.contains("deploy: passed"), "{out}");
    first.exits_cleanly().await;
    first.logged("runs in flight were handed over").await;
    let said = first.lines();
    assert!(
        !said
            .iter()
            .any(|line| line.contains("responses still open")),
        "every response ended within the drain: {said:?}"
    );
    second.kill().await;
}

#[tokio::test]
async fn the_client_package_is_ready_to_publish() {
    let dir = support::js_client().await;
    let out = tokio::process::Command::new("npm")
        .args(["pack", "--dry-run", "--json"])
        .current_dir(&dir)
        .output()
        .await
        .expect("npm is installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let packed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let files: Vec<&str> = packed[0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| file["path"].as_str().unwrap())
        .collect();
    // The built code with its types, and nothing of the sources or the tests.
    assert_eq!(
        files,
        [
            "README.md",
            "dist/error.d.ts",
            "dist/error.js",
            "dist/index.d.ts",
            "dist/index.js",
            "dist/threads.d.ts",
            "dist/threads.js",
            "package.json"
        ]
    );
    assert_eq!(packed[0]["name"], "@agent-tower/client");
}
