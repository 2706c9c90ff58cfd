//! Debian packages a test needs, installed when missing (as `.ci/run` does), so that `cargo test`
//! works on a fresh machine too.

/// Installs Debian's `package` unless `command` is on the path; panics saying what is missing
/// when it cannot. (Whether it is there, not whether `--version` succeeds: Debian's `chromium`
/// wrapper can fail that on a busy machine while the browser itself runs.)
pub fn ensure(command: &str, package: &str) {
    // One at a time: two tests of one file installing at once meet apt's lock, and one fails.
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {command}")])
        .output()
        .is_ok_and(|output| output.status.success());
    if found {
        return;
    }
    let installed = std::process::Command::new("sh")
        .args([
            "-c",
            &format!(
                "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq {package}"
            ),
        ])
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        installed,
        "this test needs `{command}`: install Debian's package `{package}`"
    );
}
