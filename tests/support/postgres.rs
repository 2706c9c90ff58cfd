//! A PostgreSQL server of the test's own, to stop while the test runs.
#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use tokio::io::{AsyncBufReadExt, BufReader};

/// A private PostgreSQL server (its own data directory and port), trust authentication.
pub struct PrivatePostgres {
    dir: PathBuf,
    pub url: String,
}

/// The directory of the machine's PostgreSQL server programs (Debian's layout).
fn bindir() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists() && bin.join("postgres").exists())
        .collect();
    versions.sort();
    versions.pop()
}

/// `program args…`, as the `postgres` user when running as root (the server refuses root).
fn as_postgres(program: &Path, args: &[&str]) -> Command {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.starts_with(b"0\n"));
    if root {
        let mut command = Command::new("runuser");
        command
            .args(["-u", "postgres", "--"])
            .arg(program)
            .args(args);
        command
    } else {
        let mut command = Command::new(program);
        command.args(args);
        command
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

impl PrivatePostgres {
    /// Creates and starts a server; `None` (skipped, loudly, and refused in CI) when the machine
    /// has no PostgreSQL server programs.
    pub async fn start(test: &str) -> Option<Self> {
        let Some(bin) = bindir() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must have the PostgreSQL server programs (/usr/lib/postgresql/*/bin)"
            );
            eprintln!("SKIPPED: {test} (no PostgreSQL server programs here)");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("agent-tower-pg-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        let _ = Command::new("chown").arg("postgres").arg(&dir).status();
        let data = dir.join("data");
        let data = data.to_str().unwrap();
        let init = as_postgres(
            &bin.join("initdb"),
            &["-D", data, "--auth=trust", "-U", "postgres", "--no-sync"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("initdb runs");
        assert!(
            init.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        let port = free_port().to_string();
        let mut postgres = tokio::process::Command::from(as_postgres(
            &bin.join("postgres"),
            &[
                "-D",
                data,
                "-p",
                &port,
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                &format!("unix_socket_directories={}", dir.display()),
                "-c",
                "fsync=off",
            ],
        ));
        let mut postgres = postgres
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("postgres starts");
        // Ready when it says so in its log.
        let mut log = BufReader::new(postgres.stderr.take().unwrap()).lines();
        loop {
            let line = log
                .next_line()
                .await
                .unwrap()
                .expect("the private PostgreSQL exited before it was ready");
            if line.contains("ready to accept connections") {
                break;
            }
        }
        tokio::spawn(async move { while let Ok(Some(_)) = log.next_line().await {} });
        let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
        Some(Self { dir, url })
    }

    /// The postmaster's process id.
    fn pid(&self) -> Option<String> {
        let pidfile = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).ok()?;
        pidfile.lines().next().map(str::to_owned)
    }

    /// Stops the server the hard way (SIGKILL to the postmaster and its children), as a crash
    /// would: every connection to it is cut.
    pub fn kill(&self) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("pkill").args(["-KILL", "-P", &pid]).status();
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
