//! Tool calls as services: [`ToolCall`] in, [`ToolOutput`] out.
//!
//! A tool is any `tower::Service<ToolCall, Response = ToolOutput>`; [`ToolService`] is an alias for
//! that bound. A [`ToolRouter`] dispatches calls by tool name. A tool's failure is never a crash of
//! the run: the agent turns it into an error result the model sees and can react to.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use agent_tower::tool::{ToolCall, ToolOutput, ToolRouter, ToolSpec};
//! use serde_json::json;
//! use tower::{service_fn, ServiceExt};
//!
//! let add = service_fn(|call: ToolCall| async move {
//!     let sum = call.arguments["a"].as_f64().unwrap_or(0.0) + call.arguments["b"].as_f64().unwrap_or(0.0);
//!     Ok::<_, std::convert::Infallible>(ToolOutput::json(json!(sum)))
//! });
//! let router = ToolRouter::new().route(ToolSpec::new("add", "Adds a and b."), add);
//!
//! let out = router.oneshot(ToolCall::new("add", json!({"a": 1, "b": 2}))).await.unwrap();
//! // A router answers a `ToolResponse`: an output, unless the call stopped at an interrupt.
//! assert_eq!(out.into_output().unwrap().to_text(), "3.0");
//! # }
//! ```

pub mod demo;
#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
pub mod mcp;
mod progress;
mod response;
pub mod router;
mod started;
#[cfg(feature = "typed-tools")]
#[cfg_attr(docsrs, doc(cfg(feature = "typed-tools")))]
pub mod typed;

use std::{error::Error as StdError, fmt};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower_service::Service;

use crate::{
    BoxError,
    context::RunContext,
    id::ToolCallId,
    message::{ContentPart, parts_to_text},
};

pub use self::{
    progress::Progress,
    response::{Interrupt, SubagentRun, Suspended, ToolReply, ToolResponse},
    router::{RunTools, ToolRouter},
    started::Started,
};

/// What the model may call: a name, a description and a JSON Schema of the arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolSpec {
    /// The tool's name, unique in a router.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// A JSON Schema of the arguments object.
    pub parameters: Value,
    /// What the tool does, in ACP's vocabulary; decides whether it reads or writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    /// Whether a call cut off by a stopped server may run again; see [`Rerun`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<Rerun>,
}

/// Whether a call that may already have run can run again when its run is continued after the
/// server running it stopped (a crash, a deploy: see [`crate::runs`]). The call keeps its
/// [idempotency key](ToolCall::idempotency_key) across continuations.
///
/// [`ToolRouter`] applies it: a call that [may have run](ToolCall::may_have_run) of a tool
/// declaring [`Rerun::Never`] is not run again; the model reads an error result saying the
/// call was interrupted, and decides what to do.
///
/// ```
/// use agent_tower::tool::{Rerun, ToolKind, ToolSpec};
///
/// // Undeclared: tools that only read may run again, the others may not.
/// assert_eq!(ToolSpec::new("get_weather", "").effective_rerun(), Rerun::Safe);
/// assert_eq!(ToolSpec::new("send_email", "").effective_rerun(), Rerun::Never);
/// // A tool that recognises its idempotency key says so.
/// let pay = ToolSpec::new("charge_card", "").kind(ToolKind::Execute).rerun(Rerun::Safe);
/// assert_eq!(pay.effective_rerun(), Rerun::Safe);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rerun {
    /// Running it again is harmless: it only reads, or it is idempotent (it recognises its
    /// call's idempotency key).
    Safe,
    /// It must not run twice.
    Never,
}

/// What a tool does (ACP's `ToolKind`): editors show it, permission policies derive from it
/// whether the tool only reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files or data.
    Read,
    /// Changes files or content.
    Edit,
    /// Removes files or data.
    Delete,
    /// Moves or renames.
    Move,
    /// Searches.
    Search,
    /// Runs commands or code.
    Execute,
    /// Thinks or plans, without side effects.
    Think,
    /// Fetches from the network.
    Fetch,
    /// Switches the session's mode.
    SwitchMode,
    /// Anything else.
    Other,
}

/// Whether a tool only reads or may change something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// It has no side effects.
    Read,
    /// It may change something.
    Write,
}

impl ToolKind {
    /// Whether tools of this kind only read.
    #[must_use]
    pub fn access(self) -> Access {
        match self {
            Self::Read | Self::Search | Self::Think | Self::Fetch => Access::Read,
            Self::Edit
            | Self::Delete
            | Self::Move
            | Self::Execute
            | Self::SwitchMode
            | Self::Other => Access::Write,
        }
    }

    /// A guess from a tool's name, for tools that declare no kind: `read_*`, `get_*`, `list_*`,
    /// `search_*`, `find_*`, `fetch_*` read; anything else is assumed to write.
    #[must_use]
    pub fn guess(name: &str) -> Self {
        let verb = name
            .split(['_', '-', '.'])
            .next()
            .unwrap_or(name)
            .to_ascii_lowercase();
        match verb.as_str() {
            "read" | "get" | "list" | "view" | "show" => Self::Read,
            "search" | "find" | "grep" | "query" => Self::Search,
            "fetch" | "download" => Self::Fetch,
            "think" | "plan" => Self::Think,
            "delete" | "remove" | "rm" => Self::Delete,
            "move" | "rename" | "mv" => Self::Move,
            "edit" | "write" | "update" | "create" | "patch" => Self::Edit,
            "run" | "exec" | "execute" | "shell" => Self::Execute,
            _ => Self::Other,
        }
    }
}

impl ToolSpec {
    /// A tool taking an object with any properties.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
            kind: None,
            rerun: None,
        }
    }

    /// Declares whether a call cut off by a stopped server may run again.
    #[must_use]
    pub fn rerun(mut self, rerun: Rerun) -> Self {
        self.rerun = Some(rerun);
        self
    }

    /// The declared [`Rerun`], or, undeclared, [`Rerun::Safe`] for a tool that only reads (its
    /// [kind](Self::effective_kind)) and [`Rerun::Never`] for any other.
    #[must_use]
    pub fn effective_rerun(&self) -> Rerun {
        self.rerun.unwrap_or(match self.effective_kind().access() {
            Access::Read => Rerun::Safe,
            Access::Write => Rerun::Never,
        })
    }

    /// Declares what the tool does.
    #[must_use]
    pub fn kind(mut self, kind: ToolKind) -> Self {
        self.kind = Some(kind);
        self
    }

    /// The declared kind, or a guess from the name.
    #[must_use]
    pub fn effective_kind(&self) -> ToolKind {
        self.kind.unwrap_or_else(|| ToolKind::guess(&self.name))
    }

    /// Sets the JSON Schema of the arguments.
    #[must_use]
    pub fn parameters(mut self, schema: Value) -> Self {
        self.parameters = schema;
        self
    }
}

/// One call of a tool.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The call's id, as the model chose it.
    pub id: ToolCallId,
    /// The tool's name.
    pub name: String,
    /// The parsed arguments.
    pub arguments: Value,
    /// The run; `run.message_id` is the id of the tool message that will hold the result.
    pub run: RunContext,
}

impl ToolCall {
    /// What makes this call the same call wherever and however often it runs: its id, kept
    /// when its run is continued on another server. A tool with side effects can record it and
    /// do nothing the second time (and declare [`Rerun::Safe`]).
    #[must_use]
    pub fn idempotency_key(&self) -> &str {
        self.id.as_str()
    }

    /// Whether this call may already have run: its run was cut off (its server stopped) after
    /// the model asked for it and before its result was logged, and is being continued.
    #[must_use]
    pub fn may_have_run(&self) -> bool {
        self.run
            .extensions
            .get::<CutOff>()
            .is_some_and(|cut| cut.0.contains(&self.id))
    }

    /// The spec of this call's tool when its run lends it ([`RunTools`]: an editor's MCP
    /// servers), for layers that know only the stack's own tools.
    #[must_use]
    pub fn lent_spec(&self) -> Option<&ToolSpec> {
        self.run.extensions.get::<RunTools>()?.0.spec(&self.name)
    }

    /// The kind of this call's tool: `known` (what a layer was told of its tools), else what
    /// its run's [lent spec](Self::lent_spec) says, else a guess from its name.
    #[cfg(feature = "permission")]
    pub(crate) fn kind_given(&self, known: Option<ToolKind>) -> ToolKind {
        known
            .or_else(|| self.lent_spec().map(ToolSpec::effective_kind))
            .unwrap_or_else(|| ToolKind::guess(&self.name))
    }

    /// A call with a fresh id outside of any run (tests, direct use).
    pub fn new(name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: ToolCallId::new(),
            name: name.into(),
            arguments,
            run: RunContext::default(),
        }
    }
}

/// The calls of a continued run that may already have run (see [`ToolCall::may_have_run`]), in
/// its extensions.
#[derive(Debug, Clone, Default)]
pub(crate) struct CutOff(pub(crate) std::sync::Arc<std::collections::HashSet<ToolCallId>>);

/// What a tool returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The result, as content parts: what the model receives, always whole.
    pub content: Vec<ContentPart>,
    /// Whether the result describes a failure the model should see as one.
    pub is_error: bool,
    /// What a UI shows instead of `content`, when set: a bounded copy (see
    /// [`TruncateLayer`](crate::truncate::TruncateLayer)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<Vec<ContentPart>>,
}

impl ToolOutput {
    /// A text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentPart::text(text)],
            is_error: false,
            display: None,
        }
    }

    /// A structured result.
    pub fn json(value: Value) -> Self {
        Self {
            content: vec![ContentPart::Json { value }],
            is_error: false,
            display: None,
        }
    }

    /// A failure the model sees as the call's result.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: vec![ContentPart::text(message)],
            is_error: true,
            display: None,
        }
    }

    /// The result as one string.
    #[must_use]
    pub fn to_text(&self) -> String {
        parts_to_text(&self.content)
    }

    /// What a UI shows: [`display`](ToolOutput::display) if set, else the content.
    #[must_use]
    pub fn ui_content(&self) -> &[ContentPart] {
        self.display.as_deref().unwrap_or(&self.content)
    }
}

/// What kind of failure a tool call had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// No tool has that name.
    NotFound,
    /// The arguments were not valid JSON or did not fit the schema.
    InvalidArguments,
    /// The tool ran and failed.
    Failed,
    /// The tool took too long.
    Timeout,
    /// The call was cancelled.
    Cancelled,
    /// A policy or a person refused the call.
    PermissionDenied,
}

impl ToolErrorKind {
    /// A stable snake_case name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::InvalidArguments => "invalid_arguments",
            Self::Failed => "failed",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::PermissionDenied => "permission_denied",
        }
    }
}

/// A failed tool call.
#[derive(Debug)]
pub struct ToolError {
    kind: ToolErrorKind,
    message: String,
    source: Option<BoxError>,
}

impl ToolError {
    /// An error of `kind` with a message the model will read.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// No tool is named `name`.
    pub fn not_found(name: &str) -> Self {
        Self::new(ToolErrorKind::NotFound, format!("unknown tool `{name}`"))
    }

    /// Wraps any error: a `ToolError` is kept as it is, anything else becomes
    /// [`ToolErrorKind::Failed`] (or [`ToolErrorKind::Timeout`] for tower's `Elapsed`).
    pub fn from_boxed(error: BoxError) -> Self {
        match error.downcast::<ToolError>() {
            Ok(tool_error) => *tool_error,
            Err(other) => {
                let kind = if other.is::<tower::timeout::error::Elapsed>() {
                    ToolErrorKind::Timeout
                } else {
                    ToolErrorKind::Failed
                };
                Self {
                    kind,
                    message: other.to_string(),
                    source: Some(other),
                }
            }
        }
    }

    /// The kind of failure.
    #[must_use]
    pub fn kind(&self) -> ToolErrorKind {
        self.kind
    }

    /// The message the model reads.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.message)
    }
}

impl StdError for ToolError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// An alias for `Service<ToolCall, Response = ToolOutput>`, implemented for every such service.
pub trait ToolService: Service<ToolCall, Response = ToolOutput> {}

impl<S> ToolService for S where S: Service<ToolCall, Response = ToolOutput> {}

/// A tool that knows what it offers the model: its [`ToolSpec`]. Register one with
/// [`ToolRouter::tool`]; a [typed tool](typed) is one, and so is an
/// [agent called as a tool](crate::subagent::AgentTool) (which answers a [`ToolResponse`]: its
/// run may stop at interrupts).
pub trait Tool: Service<ToolCall, Response: ToolReply> {
    /// The tool's name, description and parameters.
    fn spec(&self) -> ToolSpec;
}
