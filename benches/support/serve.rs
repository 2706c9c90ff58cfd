//! Starting the built `agent-tower serve` from a bench.
#![allow(dead_code)]

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

/// `agent serve --addr 127.0.0.1:0` with `args` (logs at `info`): start it with [`listening`].
pub fn command(agent: &str, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(agent);
    command
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "info");
    command
}

/// Starts `agent serve --addr 127.0.0.1:0` with `args` (logs at `info`) and waits until it
/// listens: the process and its address.
pub async fn serve(agent: &str, args: &[&str]) -> (tokio::process::Child, String) {
    listening(command(agent, args)).await
}

/// `agent serve` on `store`, with `args` after: start it with [`listening`].
pub fn on_store(agent: &str, store: &Store, args: &[&str]) -> tokio::process::Command {
    let stored = ["--store", &store.url, "--durability", store.durability];
    command(agent, &[&stored[..], args].concat())
}

/// `agent serve` on `store`, its model `openai:bench` at `base` (a bench's model server), with
/// `args` after: start it with [`listening`].
pub fn with_model(
    agent: &str,
    store: &Store,
    base: &str,
    args: &[&str],
) -> tokio::process::Command {
    let model = ["--model", "openai:bench", "--base-url", base];
    let mut command = on_store(agent, store, &[&model[..], args].concat());
    command.env("OPENAI_API_KEY", "bench");
    command
}

/// Starts `command`, a server that writes `addr=HOST:PORT` to its standard error once it
/// listens, and waits for that line (the rest of its standard error is read and dropped, so that
/// it never blocks on a full pipe): the process and its address.
pub async fn listening(mut command: tokio::process::Command) -> (tokio::process::Child, String) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the server starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let addr = loop {
        let line = lines
            .next_line()
            .await
            .expect("stderr reads")
            .expect("the server listens before it exits");
        if let Some(at) = line.find("addr=") {
            break line[at + 5..]
                .split_whitespace()
                .next()
                .expect("an address")
                .to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

/// A store as a bench's setting names it: `none`, `sqlite` (a new file in a directory of its
/// own) or a `postgres://…` URL, with `+relaxed` or `+eager` after it for that `--durability`.
pub struct Store {
    /// What the bench's lines call it (the URL's scheme, and `+relaxed` or `+eager`).
    pub name: String,
    /// What `--store` is given.
    pub url: String,
    /// What `--durability` is given.
    pub durability: &'static str,
    /// The SQLite file's directory, removed with the store.
    pub dir: Option<TempDir>,
}

impl Store {
    /// The store `setting` names, a SQLite file's directory named after `bench`.
    pub fn named(setting: &str, bench: &str) -> Self {
        let (backend, durability) = ["relaxed", "eager"]
            .into_iter()
            .find_map(|level| Some((setting.strip_suffix(&format!("+{level}"))?, level)))
            .unwrap_or((setting, "full"));
        let (url, dir) = match backend {
            "sqlite" => {
                let dir = std::env::temp_dir().join(format!(
                    "agent-tower-{bench}-{}-{durability}",
                    std::process::id()
                ));
                std::fs::create_dir_all(&dir).expect("a temporary directory");
                let url = format!("sqlite://{}", dir.join("runs.db").display());
                (url, Some(TempDir(dir)))
            }
            other => (other.to_owned(), None),
        };
        let scheme = backend.split("://").next().unwrap_or(backend);
        let name = match durability {
            "full" => scheme.to_owned(),
            level => format!("{scheme}+{level}"),
        };
        Self {
            name,
            url,
            durability,
            dir,
        }
    }
}

/// A directory removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `bench` on a multi-threaded runtime, as a bench's `main` does (criterion-style flags
/// from `cargo bench` are ignored).
pub fn block_on(bench: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(bench);
}
