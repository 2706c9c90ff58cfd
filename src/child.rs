//! The processes this crate starts (a bridged ACP agent, a stdio MCP server): what of this
//! process's environment they get, their standard error in the log, and their supervision
//! ([`supervise`]: started again with back-off when they exit).
//!
//! A child gets an allow-listed environment, never the whole of this one: a server's bearer
//! tokens and provider keys are in its environment, and an agent told to run `env` would hand
//! them to whoever prompts it. It gets [`INHERITED`] (what a program needs to run: where programs
//! are, its home, its locale, a temporary directory), the variables its owner names, and the
//! values its owner sets.

use std::{ffi::OsStr, future::Future, sync::Arc, time::Duration};

use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

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

/// The first wait before a child that exited is started again; it doubles while starting fails.
const RESTART_MIN: Duration = Duration::from_secs(1);
/// The longest wait between attempts; a child up this long starts with the shortest wait again.
const RESTART_MAX: Duration = Duration::from_secs(60);

/// A supervised child as its users see it now.
#[derive(Clone)]
pub(crate) enum Link<C> {
    /// Running: its connection.
    Up(C),
    /// Exited (`why`); started again at `retry_at`, for the `attempt`th time.
    Down {
        why: Arc<str>,
        attempt: u32,
        retry_at: Instant,
    },
}

impl<C: Clone> Link<C> {
    /// The connection, or why there is none, naming the child as `what`: "the ACP agent is not
    /// running (it exited); it is started again in 4s (attempt 3)".
    pub(crate) fn up(&self, what: &str) -> Result<C, String> {
        match self {
            Self::Up(connection) => Ok(connection.clone()),
            Self::Down {
                why,
                attempt,
                retry_at,
            } => {
                let left = retry_at.saturating_duration_since(Instant::now());
                let left = Duration::from_secs(left.as_secs() + u64::from(left.subsec_nanos() > 0));
                Err(format!(
                    "{what} is not running ({why}); it is started again in {} (attempt {attempt})",
                    humantime::format_duration(left)
                ))
            }
        }
    }
}

/// A connection to a child that a supervisor watches.
pub(crate) trait Supervised: Clone + Send + Sync + 'static {
    /// Resolves once the child exited (or its connection closed).
    fn closed(&self) -> impl Future<Output = ()> + Send;
}

/// Watches the child of `current` (named `what` in the log): when it exits, starts it again with
/// `start` after 1 s, doubling up to 60 s while starting fails, back to 1 s once it ran for a
/// minute; publishes each state on `link`, until `stop` fires.
pub(crate) async fn supervise<C, S, F>(
    what: String,
    mut current: C,
    mut start: S,
    link: watch::Sender<Link<C>>,
    stop: CancellationToken,
) where
    C: Supervised,
    S: FnMut() -> F + Send,
    F: Future<Output = Result<C, String>> + Send,
{
    let mut wait = RESTART_MIN;
    loop {
        let up = Instant::now();
        tokio::select! {
            () = current.closed() => {}
            () = stop.cancelled() => return,
        }
        if up.elapsed() >= RESTART_MAX {
            wait = RESTART_MIN;
        }
        let mut attempt = 1;
        let mut why: Arc<str> = Arc::from("it exited");
        current = loop {
            tracing::warn!(
                reason = %why,
                "{what} is down; starting it again in {}",
                humantime::format_duration(wait)
            );
            link.send_replace(Link::Down {
                why: why.clone(),
                attempt,
                retry_at: Instant::now() + wait,
            });
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = stop.cancelled() => return,
            }
            wait = (wait * 2).min(RESTART_MAX);
            match start().await {
                Ok(connection) => break connection,
                Err(error) => {
                    why = Arc::from(error);
                    attempt += 1;
                }
            }
        };
        tracing::info!(attempt, "{what} was started again");
        link.send_replace(Link::Up(current.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct Child(CancellationToken);

    impl Supervised for Child {
        fn closed(&self) -> impl Future<Output = ()> + Send {
            let closed = self.0.clone();
            async move { closed.cancelled().await }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_exited_child_is_started_again_with_back_off() {
        let first = Child(CancellationToken::new());
        let (link, mut watched) = watch::channel(Link::Up(first.clone()));
        let stop = CancellationToken::new();
        let starts = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counted = starts.clone();
        let started = Instant::now();
        tokio::spawn(supervise(
            "the child".to_owned(),
            first.clone(),
            move || {
                let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                async move {
                    // The first start fails, the second works.
                    if n == 0 {
                        Err("no luck".to_owned())
                    } else {
                        Ok(Child(CancellationToken::new()))
                    }
                }
            },
            link,
            stop.clone(),
        ));
        first.0.cancel();
        watched.changed().await.unwrap();
        let down = watched.borrow_and_update().up("the child").err().unwrap();
        assert_eq!(
            down,
            "the child is not running (it exited); it is started again in 1s (attempt 1)"
        );
        watched.changed().await.unwrap();
        let down = watched.borrow_and_update().up("the child").err().unwrap();
        assert!(
            down.contains("(no luck)") && down.contains("in 2s (attempt 2)"),
            "{down}"
        );
        watched.changed().await.unwrap();
        assert!(watched.borrow_and_update().up("the child").is_ok());
        assert_eq!(started.elapsed(), Duration::from_secs(3), "1 s, then 2 s");
        stop.cancel();
    }

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
