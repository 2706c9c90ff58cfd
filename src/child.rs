//! The processes this crate starts (a bridged ACP agent, a stdio MCP server): what of this
//! process's environment they get, and their standard error in the log.
//!
//! A child gets an allow-listed environment, never the whole of this one: a server's bearer
//! tokens and provider keys are in its environment, and an agent told to run `env` would hand
//! them to whoever prompts it. It gets [`INHERITED`] (what a program needs to run: where programs
//! are, its home, its locale, a temporary directory), the variables its owner names, and the
//! values its owner sets.

use std::ffi::OsStr;

/// The variables of this process's environment every child gets, when set: none holds a secret.
pub(crate) const INHERITED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "TZ",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    // What Windows programs cannot start without.
    "SYSTEMROOT",
    "COMSPEC",
    "PATHEXT",
    "APPDATA",
    "LOCALAPPDATA",
    "USERPROFILE",
];

/// `program` with `args`, its environment cleared and then given [`INHERITED`], the variables
/// named by `inherit` (from this process's environment, when set) and `set` (in that order: a
/// value set wins).
pub(crate) fn command<I, S>(
    program: impl AsRef<OsStr>,
    args: I,
    inherit: &[String],
    set: &[(String, String)],
) -> tokio::process::Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = tokio::process::Command::new(program);
    command.args(args).env_clear();
    let named = INHERITED
        .iter()
        .copied()
        .chain(inherit.iter().map(String::as_str));
    for name in named {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(set.iter().map(|(name, value)| (name, value)));
    command
}

/// Logs each line `stderr` writes (at `info`, under the `child` field), until it closes; lines
/// longer than 4 KiB are left out (said so).
pub(crate) fn log_stderr(child: String, stderr: tokio::process::ChildStderr) {
    use futures_util::StreamExt;
    use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
    tokio::spawn(async move {
        let mut lines = FramedRead::new(stderr, LinesCodec::new_with_max_length(4096));
        while let Some(line) = lines.next().await {
            match line {
                Ok(line) => tracing::info!(%child, "{line}"),
                Err(LinesCodecError::MaxLineLengthExceeded) => {
                    tracing::info!(%child, "(a line longer than 4 KiB, left out)");
                }
                Err(LinesCodecError::Io(_)) => break,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_child_gets_only_the_allowed_variables() {
        // Cargo sets CARGO_* for the tests it runs; none is allowed unless named.
        let path = std::env::var("PATH").unwrap();
        let output = command(
            "env",
            std::iter::empty::<&str>(),
            &["CARGO_PKG_NAME".to_owned(), "NOT_SET_ANYWHERE".to_owned()],
            &[("SET".to_owned(), "value".to_owned())],
        )
        .output()
        .await
        .unwrap();
        let env = String::from_utf8(output.stdout).unwrap();
        let names: Vec<&str> = env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(n, _)| n)
            .collect();
        assert!(env.lines().any(|l| l == format!("PATH={path}")), "{env}");
        assert!(env.lines().any(|l| l == "SET=value"), "{env}");
        // Named: inherited (cargo sets it for tests).
        assert!(names.contains(&"CARGO_PKG_NAME"), "{env}");
        // Not named: not inherited, though set here.
        assert!(!names.contains(&"CARGO_MANIFEST_DIR"), "{env}");
        assert!(!names.contains(&"NOT_SET_ANYWHERE"), "{env}");
        assert!(
            names
                .iter()
                .all(|n| INHERITED.contains(n) || ["SET", "CARGO_PKG_NAME"].contains(n)),
            "{env}"
        );
    }
}
