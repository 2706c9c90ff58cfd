//! MCP tools against a real MCP server process: the reference server
//! `@modelcontextprotocol/server-everything` (pinned in `tests/conformance/package.json`), over
//! stdio and over streamable HTTP.

mod support;

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

/// The reference server's entry point.
async fn everything() -> String {
    support::node_modules()
        .await
        .join("@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
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
        Ok(output) => assert!(output.is_error, "{output:?}"),
        Err(error) => assert!(!error.to_string().is_empty()),
    }
}

#[tokio::test]
async fn tools_of_a_server_spawned_over_stdio() {
    let server: McpServer = format!("everything=node {} stdio", everything().await)
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
        .args([everything().await.as_str(), "streamableHttp"])
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

#[tokio::test]
async fn a_server_that_cannot_start_is_a_clear_error() {
    let server: McpServer = "ghost=/nonexistent/mcp-server".parse().unwrap();
    let error = McpConnection::connect(&server).await.unwrap_err();
    assert!(error.to_string().contains("ghost"), "{error}");
}
