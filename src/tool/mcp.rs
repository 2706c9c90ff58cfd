//! MCP servers' tools as tool services, over the official [`rmcp`] SDK: a server spawned as a
//! command (stdio) or reached over streamable HTTP, on the current protocol (2026-07-28:
//! `server/discover`, no session) or, for a server of an earlier one, the `initialize`
//! handshake.
//!
//! Each tool is routed as `{server}__{tool}` (a name every provider accepts), with the server's
//! description and input schema. Its annotations give its kind: read-only ([`readOnlyHint`]) is
//! [`Read`](super::ToolKind::Read) (so permission policies let it run); any other tool may change
//! something (MCP assumes so when nothing is said), and its kind is the one its name says among
//! those that write (`write_file` [`Edit`](super::ToolKind::Edit), `move_file`
//! [`Move`](super::ToolKind::Move)), else `Edit` for a tool the server marks not destructive
//! ([`destructiveHint`] `false`), else [`Other`](super::ToolKind::Other). Editors show that kind;
//! the command asks about every call of a tool that is not read-only unless a rule says otherwise.
//! Results become content
//! parts: text as text, images and audio as media, embedded resources as text (or a document
//! when binary), resource links as document URLs, structured content as JSON when there is
//! nothing else; a result with `isError` reaches the model as a failed result.
//!
//! A tool marked `idempotentHint` may [run again](super::Rerun) when its run is continued after a
//! crash; every call carries its [idempotency key](super::ToolCall::idempotency_key) in its
//! `_meta`, under [`IDEMPOTENCY_KEY`].
//!
//! [`readOnlyHint`]: https://modelcontextprotocol.io/specification/2026-07-28/schema#toolannotations
//! [`destructiveHint`]: https://modelcontextprotocol.io/specification/2026-07-28/schema#toolannotations
//!
//! ```no_run
//! # async fn run() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::tool::{ToolRouter, mcp::{McpConnection, McpServer}};
//!
//! let server: McpServer = "files=npx -y @modelcontextprotocol/server-filesystem /tmp".parse()?;
//! let connection = McpConnection::connect(&server).await?;
//! let tools: ToolRouter = connection.tools().await?;
//! println!("{:?}", tools.specs());
//! # Ok(()) }
//! ```

use std::{
    fmt,
    str::FromStr,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::future::BoxFuture;
use rmcp::{
    ClientLifecycleMode, ClientServiceExt as _, Peer, RoleClient,
    model::{CallToolRequestParams, ProtocolVersion, Tool},
    transport::{
        StreamableHttpClientTransport, TokioChildProcess,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};
use tower_service::Service;

use super::{
    Access, Rerun, ToolCall, ToolError, ToolErrorKind, ToolKind, ToolOutput, ToolRouter, ToolSpec,
};
use crate::{
    child::{Link, Supervised},
    message::{ContentPart, MediaSource},
};

/// The separator between a server's name and its tool's name.
const SEPARATOR: &str = "__";

/// Where an MCP server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServer {
    /// A command that speaks MCP on its stdin and stdout.
    Stdio {
        /// The prefix of its tools' names.
        name: String,
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables set for it.
        env: Vec<(String, String)>,
        /// Variables of this process's environment it gets, by name. Besides these and `env`, it
        /// gets only what a program needs to run (`PATH`, `HOME`, the locale, `TMPDIR`, …): never
        /// this process's tokens or keys unless named.
        inherit: Vec<String>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The prefix of its tools' names.
        name: String,
        /// The endpoint's URL.
        url: String,
        /// Headers sent with every request (`Authorization`, …).
        headers: Vec<(String, String)>,
    },
}

impl McpServer {
    /// The prefix of its tools' names.
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Stdio { name, .. } | Self::Http { name, .. } => name,
        }
    }
}

/// `name=command arg…` (split on whitespace) or `name=http(s)://…`.
impl FromStr for McpServer {
    type Err = McpError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let invalid = |why: &str| McpError::Config(format!("`{value}`: {why}"));
        let (name, target) = value
            .split_once('=')
            .ok_or_else(|| invalid("expected name=command or name=url"))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(invalid("the name takes letters, digits, - and _"));
        }
        let target = target.trim();
        if target.starts_with("http://") || target.starts_with("https://") {
            return Ok(Self::Http {
                name: name.to_owned(),
                url: target.to_owned(),
                headers: Vec::new(),
            });
        }
        let mut words = target.split_whitespace().map(str::to_owned);
        let command = words.next().ok_or_else(|| invalid("no command"))?;
        Ok(Self::Stdio {
            name: name.to_owned(),
            command,
            args: words.collect(),
            env: Vec::new(),
            inherit: Vec::new(),
        })
    }
}

/// Connecting to or talking with an MCP server failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum McpError {
    /// The server's description is wrong.
    Config(String),
    /// The server could not be started or reached, or did not complete the handshake.
    Connect {
        /// The server.
        server: String,
        /// Why.
        source: crate::BoxError,
    },
    /// The server answered a request with an error.
    Request {
        /// The server.
        server: String,
        /// Why.
        source: rmcp::ServiceError,
    },
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(why) => write!(f, "invalid MCP server {why}"),
            Self::Connect { server, source } => {
                write!(f, "cannot connect to MCP server `{server}`: {source}")
            }
            Self::Request { server, source } => write!(f, "MCP server `{server}`: {source}"),
        }
    }
}

impl std::error::Error for McpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Config(_) => None,
            Self::Connect { source, .. } => Some(source.as_ref()),
            Self::Request { source, .. } => Some(source),
        }
    }
}

/// A live connection to one MCP server; it closes when the connection and every tool routed
/// from it are dropped.
///
/// The server is supervised: when it exits (a command that crashed, an HTTP session that ended),
/// it is started (or reached) again after 1 s, doubling up to 60 s while that fails, and back to
/// 1 s once it stayed up a minute. A call made meanwhile fails at once, saying when the next
/// attempt is; a call in flight when it exits fails saying so. Its tools stay routed as they
/// were listed first.
#[derive(Clone)]
pub struct McpConnection {
    name: Arc<str>,
    link: watch::Receiver<Link<Running>>,
    _stop: Arc<DropGuard>,
}

/// One run of the server: its peer, and a token that fires when that run ended.
#[derive(Clone)]
struct Running {
    peer: Peer<RoleClient>,
    closed: CancellationToken,
}

impl Supervised for Running {
    fn closed(&self) -> impl std::future::Future<Output = ()> + Send {
        let closed = self.closed.clone();
        async move { closed.cancelled().await }
    }
}

impl fmt::Debug for McpConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpConnection")
            .field("name", &self.name)
            .field("up", &self.peer().is_ok())
            .finish_non_exhaustive()
    }
}

impl McpConnection {
    /// Starts (stdio) or reaches (HTTP) `server` and completes the MCP handshake; from then on
    /// the server is supervised (see [`McpConnection`]).
    ///
    /// # Errors
    ///
    /// [`McpError::Connect`] when the command cannot start, the URL does not answer, or the
    /// handshake fails.
    pub async fn connect(server: &McpServer) -> Result<Self, McpError> {
        let stop = CancellationToken::new();
        let first = start(server, &stop).await?;
        let (link, watched) = watch::channel(Link::Up(first.clone()));
        let restart = {
            let (server, stop) = (server.clone(), stop.clone());
            move || {
                let (server, stop) = (server.clone(), stop.clone());
                async move { start(&server, &stop).await.map_err(|e| e.to_string()) }
            }
        };
        tokio::spawn(crate::child::supervise(
            format!("MCP server `{}`", server.name()),
            first,
            restart,
            link,
            stop.clone(),
        ));
        Ok(Self {
            name: server.name().into(),
            link: watched,
            _stop: Arc::new(stop.drop_guard()),
        })
    }

    /// The server's peer, or why it is not running.
    fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let running = self
            .link
            .borrow()
            .up(&format!("MCP server `{}`", self.name))?;
        if running.closed.is_cancelled() {
            return Err(format!(
                "MCP server `{}` exited; it is started again shortly",
                self.name
            ));
        }
        Ok(running.peer)
    }

    /// Connects to every server of `servers` and routes all their tools in one router.
    ///
    /// # Errors
    ///
    /// The first server that cannot be connected or listed.
    pub async fn tools_of(servers: &[McpServer]) -> Result<ToolRouter, McpError> {
        let mut tools = ToolRouter::new();
        for server in servers {
            tools = tools.merge(Self::connect(server).await?.tools().await?);
        }
        Ok(tools)
    }

    /// The server's tools, routed as `{server}__{tool}`.
    ///
    /// # Errors
    ///
    /// [`McpError::Request`] when listing them fails.
    pub async fn tools(&self) -> Result<ToolRouter, McpError> {
        let peer = self.peer().map_err(|why| McpError::Connect {
            server: self.name.to_string(),
            source: why.into(),
        })?;
        let tools = peer
            .list_all_tools()
            .await
            .map_err(|source| McpError::Request {
                server: self.name.to_string(),
                source,
            })?;
        Ok(tools.into_iter().fold(ToolRouter::new(), |router, tool| {
            let spec = self.spec(&tool);
            router.route(
                spec,
                McpTool {
                    connection: self.clone(),
                    name: tool.name.to_string(),
                },
            )
        }))
    }

    fn spec(&self, tool: &Tool) -> ToolSpec {
        let mut spec = ToolSpec::new(
            format!("{}{SEPARATOR}{}", self.name, tool.name),
            tool.description.as_deref().unwrap_or_default(),
        )
        .parameters(Value::Object((*tool.input_schema).clone()));
        let annotations = tool.annotations.as_ref();
        // MCP's defaults: not read-only, and destructive.
        let read_only = annotations.and_then(|a| a.read_only_hint).unwrap_or(false);
        let destructive = annotations.and_then(|a| a.destructive_hint).unwrap_or(true);
        spec = spec.kind(kind(&tool.name, read_only, destructive));
        // A call repeated with the same arguments has no further effect: it may run again.
        if annotations.and_then(|a| a.idempotent_hint) == Some(true) {
            spec = spec.rerun(Rerun::Safe);
        }
        spec
    }
}

/// The kind of the tool `name` as its server's annotations say: read-only is a read; anything
/// else may change something, and is what its name says among the kinds that write (`write_file`
/// an edit, `move_file` a move), else an edit when its server marks it not destructive, else
/// [`Other`](ToolKind::Other). Never a kind that only reads unless the server says so.
fn kind(name: &str, read_only: bool, destructive: bool) -> ToolKind {
    let named = ToolKind::guess(name);
    if read_only {
        ToolKind::Read
    } else if named.access() == Access::Write && named != ToolKind::Other {
        named
    } else if destructive {
        ToolKind::Other
    } else {
        ToolKind::Edit
    }
}

/// The `_meta` key of a call's [idempotency key](super::ToolCall::idempotency_key).
pub const IDEMPOTENCY_KEY: &str = "dev.agent-tower/idempotencyKey";

/// How a connection starts: the current protocol's `server/discover`, and for a server of an
/// earlier protocol (which refuses it, or says nothing for 10 s) the `initialize` handshake.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::LATEST],
        legacy_version: None,
    }
}

/// Why `command` could not be started, naming it.
fn not_started(command: &str, error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => {
            format!("`{command}` was not found (is it installed, and on the PATH?)")
        }
        std::io::ErrorKind::PermissionDenied => format!("`{command}` may not be run: {error}"),
        _ => format!("`{command}` could not be started: {error}"),
    }
}

/// Why the handshake failed: its innermost cause (`Connection refused (os error 111)`, a
/// status), not rmcp's description of it, which names its transport by its Rust types. rmcp
/// keeps two causes out of the error chain; they are followed here.
fn not_connected(error: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::{
        service::ClientInitializeError, transport::streamable_http_client::StreamableHttpError,
    };
    type Error = dyn std::error::Error + 'static;
    fn cause(error: &Error) -> Option<&Error> {
        match error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            Some(StreamableHttpError::Client(client)) => Some(client),
            _ => error.source(),
        }
    }
    let outer: &Error = match error {
        ClientInitializeError::TransportError { error, .. } => error,
        other => other,
    };
    std::iter::successors(Some(outer), |&e| cause(e))
        .last()
        .unwrap_or(outer)
        .to_string()
}

/// Starts (stdio) or reaches (HTTP) `server` and completes the handshake: one run of it, which
/// `stop` ends (a command is then stopped).
async fn start(server: &McpServer, stop: &CancellationToken) -> Result<Running, McpError> {
    let failed = |source: crate::BoxError| McpError::Connect {
        server: server.name().to_owned(),
        source,
    };
    let client = match server {
        McpServer::Stdio {
            command,
            args,
            env,
            inherit,
            ..
        } => {
            let mut process = crate::child::command(command, args, inherit, env);
            // Gone with this process, even when no runtime is left to run rmcp's cleanup.
            process.kill_on_drop(true);
            let (transport, stderr) = TokioChildProcess::builder(process)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| failed(not_started(command, &e).into()))?;
            if let Some(stderr) = stderr {
                crate::child::log_stderr(format!("mcp:{}", server.name()), stderr);
            }
            ().serve_with_lifecycle(transport, lifecycle())
                .await
                .map_err(|e| failed(format!("`{command}`: {}", not_connected(&e)).into()))?
        }
        McpServer::Http { url, headers, .. } => {
            let mut custom = std::collections::HashMap::new();
            for (name, value) in headers {
                let name =
                    http::HeaderName::try_from(name.as_str()).map_err(|e| failed(e.into()))?;
                let value =
                    http::HeaderValue::try_from(value.as_str()).map_err(|e| failed(e.into()))?;
                custom.insert(name, value);
            }
            let config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            let transport = StreamableHttpClientTransport::from_config(config);
            ().serve_with_lifecycle(transport, lifecycle())
                .await
                .map_err(|e| failed(format!("{url}: {}", not_connected(&e)).into()))?
        }
    };
    tracing::info!(
        server = server.name(),
        protocol = %client
            .peer()
            .peer_info()
            .map_or_else(|| "unknown".to_owned(), |info| info.protocol_version.to_string()),
        "MCP server connected"
    );
    let running = Running {
        peer: client.peer().clone(),
        closed: CancellationToken::new(),
    };
    let (closed, stop) = (running.closed.clone(), stop.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = client.waiting() => {}
            // Dropping the service closes it.
            () = stop.cancelled() => {}
        }
        closed.cancel();
    });
    Ok(running)
}

/// One tool of an MCP server, as a `Service<ToolCall>`.
#[derive(Clone)]
struct McpTool {
    connection: McpConnection,
    name: String,
}

impl Service<ToolCall> for McpTool {
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let (connection, name) = (self.connection.clone(), self.name.clone());
        Box::pin(async move {
            let key = Value::from(call.idempotency_key());
            let arguments = match call.arguments {
                Value::Object(arguments) => arguments,
                Value::Null => serde_json::Map::new(),
                other => {
                    return Err(ToolError::new(
                        ToolErrorKind::InvalidArguments,
                        format!("the arguments must be an object, not {other}"),
                    ));
                }
            };
            let peer = connection
                .peer()
                .map_err(|why| ToolError::new(ToolErrorKind::Failed, why))?;
            // The server can recognise a call it already ran (a run continued after a crash).
            let mut meta = serde_json::Map::new();
            meta.insert(IDEMPOTENCY_KEY.to_owned(), key);
            let mut request = CallToolRequestParams::new(name).with_arguments(arguments);
            request.meta = Some(meta.into());
            let result = tokio::select! {
                result = peer.call_tool(request) => result,
                () = call.run.cancel.cancelled() => {
                    return Err(ToolError::new(ToolErrorKind::Cancelled, "the run was cancelled"));
                }
            };
            let result = result.map_err(|e| {
                let why = match e {
                    rmcp::ServiceError::TransportClosed => {
                        "it exited during the call; it is started again".to_owned()
                    }
                    e => e.to_string(),
                };
                ToolError::new(
                    ToolErrorKind::Failed,
                    format!("MCP server `{}`: {why}", connection.name),
                )
            })?;
            let result = serde_json::to_value(&result)
                .map_err(|e| ToolError::new(ToolErrorKind::Failed, e.to_string()))?;
            Ok(output(&result))
        })
    }
}

/// A `CallToolResult` (as MCP's JSON) as a tool output.
fn output(result: &Value) -> ToolOutput {
    let mut content: Vec<ContentPart> = result["content"]
        .as_array()
        .map(|blocks| blocks.iter().map(part).collect())
        .unwrap_or_default();
    if content.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        content.push(ContentPart::Json {
            value: structured.clone(),
        });
    }
    ToolOutput {
        content,
        is_error: result["isError"].as_bool().unwrap_or(false),
        display: None,
    }
}

fn text(value: &Value, field: &str) -> String {
    value[field].as_str().unwrap_or_default().to_owned()
}

fn data(block: &Value, field: &str) -> MediaSource {
    MediaSource::Data {
        data: text(block, field),
        mime_type: text(block, "mimeType"),
    }
}

/// One MCP content block as a content part.
fn part(block: &Value) -> ContentPart {
    match block["type"].as_str() {
        Some("text") => ContentPart::text(text(block, "text")),
        Some("image") => ContentPart::Image {
            source: data(block, "data"),
        },
        Some("audio") => ContentPart::Audio {
            source: data(block, "data"),
        },
        Some("resource") => {
            let resource = &block["resource"];
            match resource.get("text").and_then(Value::as_str) {
                Some(body) => ContentPart::text(body),
                None => ContentPart::Document {
                    source: data(resource, "blob"),
                },
            }
        }
        Some("resource_link") => ContentPart::Document {
            source: MediaSource::Url {
                url: text(block, "uri"),
                mime_type: block["mimeType"].as_str().map(str::to_owned),
            },
        },
        _ => ContentPart::Json {
            value: block.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tool_reads_only_when_its_server_says_so() {
        for (name, read_only, destructive, expected) in [
            ("read_file", true, true, ToolKind::Read),
            ("write_file", true, false, ToolKind::Read),
            // Named as a write: shown as that write, whatever else is said.
            ("write_file", false, true, ToolKind::Edit),
            ("create_directory", false, false, ToolKind::Edit),
            ("move_file", false, true, ToolKind::Move),
            ("delete_note", false, true, ToolKind::Delete),
            ("run_query", false, true, ToolKind::Execute),
            // Named as a read, but not marked read-only: never a read.
            ("get_or_create", false, true, ToolKind::Other),
            ("search_and_replace", false, false, ToolKind::Edit),
            ("erase", false, true, ToolKind::Other),
            ("note", false, false, ToolKind::Edit),
        ] {
            assert_eq!(
                kind(name, read_only, destructive),
                expected,
                "{name} read-only {read_only} destructive {destructive}"
            );
        }
    }

    #[test]
    fn servers_parse_from_the_command_line() {
        assert_eq!(
            "fs=npx -y server /tmp".parse::<McpServer>().unwrap(),
            McpServer::Stdio {
                name: "fs".into(),
                command: "npx".into(),
                args: vec!["-y".into(), "server".into(), "/tmp".into()],
                env: Vec::new(),
                inherit: Vec::new(),
            }
        );
        assert_eq!(
            "web=https://example.com/mcp".parse::<McpServer>().unwrap(),
            McpServer::Http {
                name: "web".into(),
                url: "https://example.com/mcp".into(),
                headers: Vec::new(),
            }
        );
        for bad in ["no-equals", "=cmd", "a b=cmd", "x="] {
            assert!(bad.parse::<McpServer>().is_err(), "{bad}");
        }
    }

    #[test]
    fn content_blocks_become_parts() {
        let result = json!({
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
                {"type": "resource_link", "uri": "file:///b", "name": "b"},
            ],
            "isError": true,
        });
        let output = output(&result);
        assert!(output.is_error);
        assert_eq!(output.content[0], ContentPart::text("hi"));
        assert!(matches!(&output.content[1], ContentPart::Image { .. }));
        assert_eq!(output.content[2], ContentPart::text("body"));
        assert!(matches!(
            &output.content[3],
            ContentPart::Document { source: MediaSource::Url { url, .. } } if url == "file:///b"
        ));
        let structured = super::output(&json!({"content": [], "structuredContent": {"n": 1}}));
        assert_eq!(
            structured.content,
            [ContentPart::Json {
                value: json!({"n": 1})
            }]
        );
    }
}
