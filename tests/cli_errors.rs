//! `agent-tower serve` refuses bad settings at start with a sentence, not a panic or a `Debug`
//! dump, and exits non-zero. The built binary.

use std::process::Command;

use crate::support::json_logs;

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");

/// Runs `agent-tower serve` with `args`; its stderr, once it exited unsuccessfully.
fn refused(args: &[&str]) -> String {
    let output = Command::new(AGENT)
        .args(["serve", "--store", "memory"])
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{args:?} was accepted: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Os {"),
        "{args:?}: {stderr}"
    );
    stderr
}

#[test]
fn a_path_without_its_slash_is_refused() {
    let stderr = refused(&["--path", "agent"]);
    assert!(stderr.contains("starts with `/`"), "{stderr}");
}

#[test]
fn a_lease_or_an_interrupt_ttl_out_of_range_is_refused() {
    for args in [
        ["--lease", "0s"],
        ["--lease", "500ms"],
        ["--interrupt-ttl", "0s"],
        ["--interrupt-ttl", "1000years"],
    ] {
        let stderr = refused(&args);
        assert!(stderr.contains("between"), "{args:?}: {stderr}");
    }
}

#[test]
fn an_address_in_use_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let stderr = refused(&["--addr", &addr]);
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
}

#[test]
fn an_address_that_is_not_host_and_port_is_refused() {
    for addr in [
        "8000",
        "localhost",
        ":8000",
        "localhost:http",
        "::1:8000",
        "a b:8000",
    ] {
        let stderr = refused(&["--addr", addr]);
        assert!(stderr.contains("`host:port`"), "{addr}: {stderr}");
    }
}

#[tokio::test]
async fn an_address_may_name_its_host() {
    let mut server = json_logs::JsonLogged::start(
        &[
            "--log-format",
            "json",
            "serve",
            "--addr",
            "localhost:0",
            "--store",
            "memory",
        ],
        &[],
    );
    let base = server.base().await;
    let health = reqwest::get(format!("{base}/health")).await.unwrap();
    assert_eq!(health.status(), 200, "{base}");
    server.kill().await;
}

#[test]
fn settings_are_refused_before_the_address_is_taken() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let stderr = refused(&[
        "--addr",
        &addr,
        "--auth-token-env",
        "AGENT_TOWER_TEST_NO_SUCH_VAR",
    ]);
    assert!(stderr.contains("AGENT_TOWER_TEST_NO_SUCH_VAR"), "{stderr}");
    assert!(!stderr.contains("cannot listen"), "{stderr}");
}

#[test]
fn auth_tokens_that_are_missing_or_weak_are_refused() {
    let stderr = refused(&["--auth-token-env", "AGENT_TOWER_TEST_NO_SUCH_VAR"]);
    assert!(
        stderr.contains("AGENT_TOWER_TEST_NO_SUCH_VAR") && stderr.contains("not set"),
        "{stderr}"
    );
    let output = Command::new(AGENT)
        .args([
            "serve",
            "--store",
            "memory",
            "--auth-token-env",
            "WEAK_TOKENS",
        ])
        .env("WEAK_TOKENS", "a-long-enough-token-123,short")
        .env("RUST_LOG", "error")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("at least 16 characters"), "{stderr}");
    assert!(
        !stderr.contains("a-long-enough-token-123"),
        "no token is printed: {stderr}"
    );
}

#[test]
fn a_file_that_is_not_a_database_is_refused_at_once() {
    let dir = std::env::temp_dir().join(format!("agent-tower-corrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("corrupt.db");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    // The command line's last `--store` wins over the helper's `memory`.
    let stderr = refused(&["--store", &format!("sqlite://{}", path.display())]);
    assert!(
        stderr.contains(&path.display().to_string()) && stderr.contains("not a database"),
        "{stderr}"
    );
    assert!(!stderr.contains("timed out"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unreachable_postgres_is_named_without_its_password() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = format!("postgres://user:hunter2@127.0.0.1:{port}/agents");
    let stderr = refused(&["--store", &url]);
    assert!(
        stderr.contains(&format!(
            "cannot reach the PostgreSQL server 127.0.0.1:{port}/agents"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("refused"), "the cause: {stderr}");
    assert!(!stderr.contains("hunter2"), "no password: {stderr}");
}

#[test]
fn a_token_file_open_to_others_or_malformed_is_refused_without_its_tokens() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("agent-tower-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str, mode: u32| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.display().to_string()
    };
    let good = "# the team\nrun alice alice-token-0123456789\noperator ops ops-token-0123456789\n";
    let open = file("open", good, 0o644);
    let stderr = refused(&["--token-file", &open]);
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert!(
        !stderr.contains("alice-token"),
        "no token is printed: {stderr}"
    );
    for (text, why) in [
        (
            "run alice\n",
            "line 1: expected `run|operator|front NAME TOKEN`",
        ),
        (
            "\nadmin ops ops-token-0123456789\n",
            "line 2: `admin` is not run",
        ),
        ("run alice short-token\n", "at least 16 characters"),
        // Nothing but comments would leave every route open to everyone.
        ("", "holds no token"),
        ("# the team, some day\n\n", "holds no token"),
        (
            "run alice ops-token-0123456789\noperator ops ops-token-0123456789\n",
            "line 2: a bearer token is listed twice (for `alice` and for `ops`)",
        ),
        (
            "run ops alice-token-0123456789\noperator ops ops-token-0123456789\n",
            "line 2: `ops` names both a run token and an operator token",
        ),
    ] {
        let stderr = refused(&["--token-file", &file("bad", text, 0o600)]);
        assert!(stderr.contains(why), "{text:?}: {stderr}");
        assert!(
            !stderr.contains("ops-token"),
            "no token is printed: {stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn json_web_tokens_need_their_issuer_audience_and_keys() {
    let stderr = refused(&["--jwt-jwks", "/no/such/jwks.json"]);
    assert!(
        stderr.contains("--jwt-issuer") && stderr.contains("--jwt-audience"),
        "{stderr}"
    );
    let stderr = refused(&[
        "--jwt-jwks",
        "/no/such/jwks.json",
        "--jwt-issuer",
        "https://issuer.test/",
        "--jwt-audience",
        "agent-tower",
    ]);
    assert!(
        stderr.contains("/no/such/jwks.json cannot be read"),
        "{stderr}"
    );
    let jwks = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/jwt/first.jwk.json"
    );
    let stderr = refused(&[
        "--jwt-jwks",
        jwks,
        "--jwt-issuer",
        "https://issuer.test/",
        "--jwt-audience",
        "agent-tower",
    ]);
    assert!(
        stderr.contains("not a JWKS"),
        "a key alone is not a set: {stderr}"
    );
}

#[test]
fn a_metrics_group_that_cannot_be_one_is_refused() {
    for (args, says) in [
        (["--metrics-group", "support"], "GROUP=NAME"),
        (["--metrics-group", "support="], "names no principal"),
        (["--metrics-group", "other=alice"], "the metrics' own"),
    ] {
        let stderr = refused(&args);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let stderr = refused(&[
        "--metrics-group",
        "support=alice",
        "--metrics-group",
        "research=alice",
    ]);
    assert!(stderr.contains("one group each"), "{stderr}");
}

#[test]
fn a_temperature_out_of_range_is_refused() {
    assert!(refused(&["--temperature", "3"]).contains("3 is not between 0 and 2"));
    assert!(refused(&["--temperature", "warm"]).contains("`warm` is not a number"));
}

/// Sizes take units (`KiB`, `MiB`, `GiB`, `kB`, `MB`, `GB`) or bytes; anything else is refused
/// with what a size is.
#[tokio::test]
async fn sizes_take_units_and_a_bad_one_is_refused() {
    for bad in ["1.5MiB", "64 parsecs", "MiB", "99999999999GiB"] {
        let stderr = refused(&["--body-limit", bad]);
        assert!(stderr.contains(&format!("`{bad}`")), "{bad}: {stderr}");
    }
    let server =
        crate::support::process::Process::serve(&["--store", "none", "--body-limit", "1KiB"]).await;
    let client = reqwest::Client::new();
    let post = |bytes: usize| {
        client
            .post(format!("{}/", server.base))
            .header("content-type", "application/json")
            .body(format!(
                r#"{{"threadId":"t{bytes}","runId":"r{bytes}","messages":[{{"id":"u","role":"user","content":"{}"}}]}}"#,
                "x".repeat(bytes)
            ))
            .send()
    };
    assert_eq!(post(2_000).await.unwrap().status(), 413, "over 1,024 bytes");
    assert_eq!(post(900).await.unwrap().status(), 200, "under 1,024 bytes");
    server.kill().await;
}

#[test]
fn an_alias_without_principals_or_of_no_two_names_is_refused() {
    let stderr = refused(&["--principal-alias", "jwt:alice@https://id.example/=alice"]);
    assert!(stderr.contains("no principals to alias"), "{stderr}");
    let stderr = refused(&["--principal-alias", "alice"]);
    assert!(stderr.contains("is not `FROM=TO`"), "{stderr}");
}
