//! MCP tools against real MCP server processes, over stdio and over streamable HTTP: the
//! reference server `@modelcontextprotocol/server-everything` (on the TypeScript SDK v1, protocol
//! 2025-11-25, the `initialize` handshake) and a server on the TypeScript SDK v2 that speaks only
//! the current protocol (2026-07-28, `server/discover`; `tests/conformance/mcp-modern.mjs`),
//! all pinned in `tests/conformance/package.json`.

use crate::support;
#[cfg(feature = "cli")]
use crate::support::json_logs;

use agent_tower::{
    message::ContentPart,
    tool::{
        ToolCall, ToolRouter,
        mcp::{McpConnection, McpServer},
    },
};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tower::ServiceExt;

/// The result of the tool call a run of `words` (a tool's name and arguments, which the scripted
/// model calls) made, on the server at `base`.
async fn tool_result(base: &str, words: &str) -> String {
    let thread = format!("t-{}", uuid::Uuid::now_v7());
    let events = support::user_run(base, &thread, words).await;
    events
        .iter()
        .find(|event| event["type"] == "TOOL_CALL_RESULT")
        .and_then(|event| event["content"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no result: {events:?}"))
}

async fn call(
    tools: &ToolRouter,
    name: &str,
    arguments: serde_json::Value,
) -> agent_tower::tool::ToolOutput {
    tools
        .clone()
        .oneshot(ToolCall::new(name, arguments))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .into_output()
        .unwrap()
}

fn text(parts: &[ContentPart]) -> String {
    agent_tower::message::parts_to_text(parts)
}

/// What every transport must show: the tools listed under the server's prefix, text, sums,
/// images, and a failure the model sees.
async fn check(tools: &ToolRouter) {
    let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
    for expected in [
        "everything__echo",
        "everything__get-sum",
        "everything__get-tiny-image",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    let echo = tools
        .specs()
        .into_iter()
        .find(|s| s.name == "everything__echo")
        .unwrap();
    assert_eq!(
        echo.parameters["type"], "object",
        "the input schema is kept"
    );

    let echoed = call(tools, "everything__echo", json!({"message": "héllo 👋"})).await;
    assert!(!echoed.is_error);
    assert!(text(&echoed.content).contains("héllo 👋"), "{echoed:?}");

    let sum = call(tools, "everything__get-sum", json!({"a": 2, "b": 3})).await;
    assert!(text(&sum.content).contains('5'), "{sum:?}");

    let image = call(tools, "everything__get-tiny-image", json!({})).await;
    assert!(
        image
            .content
            .iter()
            .any(|p| matches!(p, ContentPart::Image { .. })),
        "{:?}",
        image.content
    );

    // Arguments the server's schema refuses: a failure the model reads, not a crash.
    let wrong = tools
        .clone()
        .oneshot(ToolCall::new("everything__get-sum", json!({"a": "two"})))
        .await;
    match wrong {
        Ok(output) => assert!(output.into_output().unwrap().is_error),
        Err(error) => assert!(!error.to_string().is_empty()),
    }
}

#[tokio::test]
async fn tools_of_a_server_spawned_over_stdio() {
    let server: McpServer = format!("everything=node {} stdio", support::mcp_everything().await)
        .parse()
        .unwrap();
    let connection = McpConnection::connect(&server).await.unwrap();
    check(&connection.tools().await.unwrap()).await;
}

#[tokio::test]
async fn tools_of_a_server_over_streamable_http() {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let mut child = tokio::process::Command::new("node")
        .args([support::mcp_everything().await.as_str(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    while let Some(line) = stderr.next_line().await.unwrap() {
        if line.contains("listening on port") {
            break;
        }
    }
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });

    let server: McpServer = format!("everything=http://127.0.0.1:{port}/mcp")
        .parse()
        .unwrap();
    let connection = McpConnection::connect(&server).await.unwrap();
    check(&connection.tools().await.unwrap()).await;
    drop(connection);
    child.kill().await.unwrap();
}

/// A server that cannot be started or reached is named with the cause, in a sentence: no Rust
/// type of the MCP SDK's transports.
#[tokio::test]
async fn a_server_that_cannot_start_is_a_clear_error() {
    let server: McpServer = "ghost=/nonexistent/mcp-server --flag".parse().unwrap();
    let error = McpConnection::connect(&server).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot connect to MCP server `ghost`: `/nonexistent/mcp-server` was not found (is it \
         installed, and on the PATH?)"
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", closed.local_addr().unwrap());
    drop(closed);
    let server: McpServer = format!("down={url}").parse().unwrap();
    let error = McpConnection::connect(&server)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!(
            "cannot connect to MCP server `down`: {url}: Connection refused"
        )),
        "{error}"
    );
    assert!(!error.contains("rmcp::"), "{error}");
}

/// `--mcp-env` reaches the spawned server: its `get-env` tool, called by the scripted model,
/// answers with the variable.
#[cfg(feature = "cli")]
#[tokio::test]
async fn the_command_sets_a_spawned_servers_environment() {
    let server = format!("ev=node {} stdio", support::mcp_everything().await);
    let mut agent = json_logs::JsonLogged::serve(
        &[
            "--mcp",
            &server,
            "--mcp-env",
            "ev=AGENT_TOWER_MCP_SETTING=set-by-the-flag",
        ],
        &[],
    );
    let base = agent.base().await;
    let result = tool_result(&base, "ev__get-env {}").await;
    assert!(result.contains("set-by-the-flag"), "{result}");
    agent.kill().await;
}

/// `--mcp-header-env` sends the variable's value as a header to an HTTP server (here a socket
/// that reads the first request's head and hangs up); an unset variable is refused by name.
#[cfg(feature = "cli")]
#[tokio::test]
async fn the_command_sends_a_header_read_from_the_environment() {
    use tokio::io::AsyncReadExt;
    let agent = env!("CARGO_BIN_EXE_agent-tower");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("docs=http://{}/mcp", listener.local_addr().unwrap());
    let command = |variable: Option<&str>| {
        let mut command = tokio::process::Command::new(agent);
        command
            .args(["serve", "--addr", "127.0.0.1:0", "--store", "memory"])
            .args([
                "--mcp",
                &server,
                "--mcp-header-env",
                "docs=Authorization=DOCS_AUTH",
            ])
            .env_remove("DOCS_AUTH")
            .env("RUST_LOG", "error")
            .kill_on_drop(true);
        if let Some(value) = variable {
            command.env("DOCS_AUTH", value);
        }
        command
    };

    let unset = command(None).output().await.unwrap();
    let stderr = String::from_utf8_lossy(&unset.stderr);
    assert!(!unset.status.success());
    assert!(
        stderr.contains("the variable DOCS_AUTH is not set"),
        "{stderr}"
    );

    let running = command(Some("Bearer mcp-secret-0123")).output();
    let head = async {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0];
            socket.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        String::from_utf8(head).unwrap().to_lowercase()
    };
    let (output, head) = tokio::join!(running, head);
    assert!(
        head.contains("authorization: bearer mcp-secret-0123"),
        "{head}"
    );
    let output = output.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the server hung up: {stderr}");
    assert!(
        !stderr.contains("mcp-secret"),
        "no secret in the logs: {stderr}"
    );
}

/// A spawned server that exits is started again: the call in flight fails saying so, calls
/// meanwhile fail at once saying when it comes back, and then its tools work again (a new
/// process). Against a server on the official TypeScript SDK (`tests/conformance/mcp-crashy.mjs`).
#[cfg(feature = "cli")]
#[tokio::test]
async fn a_server_that_exits_is_started_again() {
    let crashy = support::node_modules().await.join("../mcp-crashy.mjs");
    let server = format!("crashy=node {}", crashy.display());
    let mut agent = json_logs::JsonLogged::serve(&["--mcp", &server], &[]);
    let base = agent.base().await;
    let first = tool_result(&base, "crashy__pid {}").await;
    assert!(first.starts_with("pid "), "{first}");

    let exited = tool_result(&base, "crashy__exit {}").await;
    assert!(exited.contains("exited during the call"), "{exited}");
    let down = tool_result(&base, "crashy__pid {}").await;
    assert!(
        down.contains("not running") || down.contains("started again shortly"),
        "{down}"
    );

    agent.message("MCP server `crashy` was started again").await;
    let again = tool_result(&base, "crashy__pid {}").await;
    assert!(
        again.starts_with("pid ") && again != first,
        "{first} then {again}"
    );
    agent.kill().await;
}

/// What a server of the current protocol shows, whatever the transport: its tools, their kinds
/// from their annotations, a call.
async fn check_modern(tools: &ToolRouter) {
    use agent_tower::tool::ToolKind;
    let kinds: Vec<(String, Option<ToolKind>)> = tools
        .specs()
        .into_iter()
        .map(|spec| (spec.name, spec.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("modern__erase".to_owned(), Some(ToolKind::Other)),
            ("modern__lookup".to_owned(), Some(ToolKind::Read)),
            ("modern__note".to_owned(), Some(ToolKind::Edit)),
            ("modern__write_word".to_owned(), Some(ToolKind::Edit)),
        ],
        "destructive, read-only, not destructive, unannotated (named as a write)"
    );
    let found = call(tools, "modern__lookup", json!({"word": "tower"})).await;
    assert_eq!(text(&found.content), "tower: found");
}

#[tokio::test]
async fn a_server_of_the_current_protocol_over_stdio() {
    let server: McpServer = format!("modern=node {} stdio", support::mcp_modern().await)
        .parse()
        .unwrap();
    let connection = McpConnection::connect(&server).await.unwrap();
    check_modern(&connection.tools().await.unwrap()).await;
}

#[tokio::test]
async fn a_server_of_the_current_protocol_over_streamable_http() {
    let mut child = tokio::process::Command::new("node")
        .args([support::mcp_modern().await.as_str(), "http"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = stdout.next_line().await.unwrap().expect("the server's URL");
    let server: McpServer = format!("modern={url}").parse().unwrap();
    let connection = McpConnection::connect(&server).await.unwrap();
    check_modern(&connection.tools().await.unwrap()).await;
    drop(connection);
    child.kill().await.unwrap();
}

/// The annotations are the rules' defaults in the command: a tool its server marks read-only runs
/// as the mode says (here without asking); any other is asked about, a tool marked not
/// destructive too.
#[cfg(feature = "cli")]
#[tokio::test]
async fn a_tool_not_marked_read_only_is_asked_about_and_a_read_only_one_is_not() {
    let server = format!("modern=node {} stdio", support::mcp_modern().await);
    let mut agent = json_logs::JsonLogged::serve(&["--mcp", &server], &[]);
    let base = agent.base().await;
    let found = tool_result(&base, r#"modern__lookup {"word": "tower"}"#).await;
    assert_eq!(found, "tower: found");
    for call in [
        r#"modern__note {"word": "tower"}"#,
        r#"modern__erase {"word": "tower"}"#,
        r#"modern__write_word {"word": "tower"}"#,
    ] {
        let thread = format!("t-{}", uuid::Uuid::now_v7());
        let events = support::user_run(&base, &thread, call).await;
        let end = events.last().unwrap();
        assert_eq!(end["outcome"]["type"], "interrupt", "{call}: {end}");
        assert!(
            !events.iter().any(|e| e["type"] == "TOOL_CALL_RESULT"),
            "{call}: {events:?}"
        );
    }
    agent.kill().await;
}
