//! The MCP servers a client gives in `session/new` and `session/load`, connected for the session.

use agent_client_protocol::{Error, v1::schema as acp};
#[cfg(feature = "mcp")]
use serde_json::json;

use crate::tool::ToolRouter;

/// The tools of a session's MCP servers (`None` when it has none).
#[cfg(feature = "mcp")]
pub(super) async fn connect_mcp(servers: &[acp::McpServer]) -> Result<Option<ToolRouter>, Error> {
    use crate::tool::mcp::{McpConnection, McpServer};
    if servers.is_empty() {
        return Ok(None);
    }
    // Tool names are `{server}__{tool}`: the server's name keeps what every provider accepts.
    let name = |name: &str| -> String {
        name.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let servers = servers
        .iter()
        .map(|server| match server {
            acp::McpServer::Stdio(stdio) => Ok(McpServer::Stdio {
                name: name(&stdio.name),
                command: stdio.command.display().to_string(),
                args: stdio.args.clone(),
                env: stdio
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone()))
                    .collect(),
                // The editor gives the server what it needs in `env`.
                inherit: Vec::new(),
            }),
            acp::McpServer::Http(http) => Ok(McpServer::Http {
                name: name(&http.name),
                url: http.url.clone(),
                headers: http
                    .headers
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect(),
            }),
            _ => Err(Error::invalid_params().data(json!({
                "reason": "MCP servers over stdio and http are supported, not this one",
            }))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let tools = McpConnection::tools_of(&servers).await.map_err(|error| {
        tracing::warn!(%error, "an MCP server of the session failed");
        Error::internal_error().data(json!({"reason": error.to_string()}))
    })?;
    Ok(Some(tools))
}

/// Without the `mcp` feature, a session's MCP servers are not connected.
#[cfg(not(feature = "mcp"))]
#[allow(clippy::unused_async)]
pub(super) async fn connect_mcp(servers: &[acp::McpServer]) -> Result<Option<ToolRouter>, Error> {
    if !servers.is_empty() {
        tracing::warn!(
            count = servers.len(),
            "MCP servers from the client are not connected (feature `mcp` is off)"
        );
    }
    Ok(None)
}
