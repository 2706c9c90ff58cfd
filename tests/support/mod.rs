//! Running the official AG-UI client's npm packages from tests.

use std::{path::Path, process::Stdio};

use tokio::io::AsyncWriteExt;

/// Installs the pinned official packages (`npm ci`) once, if they are not there yet.
async fn install_client(dir: &Path) {
    static INSTALLED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    INSTALLED
        .get_or_init(|| async {
            if dir.join("node_modules/@ag-ui/client").exists() {
                return;
            }
            let out = tokio::process::Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(dir)
                .output()
                .await
                .expect("npm is installed");
            assert!(
                out.status.success(),
                "npm ci in tests/conformance failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        })
        .await;
}

/// Runs a script of the official client's package; panics with its output when it fails.
pub async fn node(script: &str, args: &[&str], stdin: Option<String>) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    install_client(&dir).await;
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join(script))
        .args(args)
        .current_dir(&dir)
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
