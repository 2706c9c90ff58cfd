//! ACP (Agent Client Protocol) for code editors such as Zed: [`AcpLayer`] streams model steps and
//! tool calls as session updates, [`AcpApprover`] asks the editor for permission, and
//! [`AcpAgent`] serves any agent service to an editor over the official
//! [`agent-client-protocol`](agent_client_protocol) SDK.
//!
//! Wire types are the SDK's (`agent_client_protocol::v1::schema`, re-exported as
//! [`schema`]); nothing here is a hand-written copy.
//!
//! # What the layer sends
//!
//! Around a model (`Service<ModelRequest>`), a [`Tee`](crate::stream::Tee) of the model's stream:
//!
//! | model event | session update |
//! |---|---|
//! | text delta | `agent_message_chunk` (with the message's `messageId`) |
//! | reasoning delta | `agent_thought_chunk` (with its `messageId`) |
//! | usage | `usage_update` (`used` tokens of the layer's context window) |
//!
//! Around a tool (`Service<ToolCall>`), the call's life:
//!
//! 1. `tool_call`: title (the tool, and the file it works on), `kind` (from the tool's spec or
//!    its name), `rawInput`, `locations` when an argument names a path; status `pending`. A call of
//!    a plan tool (`plan`, `todo_write`…, see below) is also sent as a `plan` with every entry.
//!    It is out before anything the call asks of the editor (its permission request).
//! 2. `tool_call_update` `in_progress` when the call really runs: at once, or when a
//!    [`PermissionLayer`](crate::permission::PermissionLayer) inside lets it run.
//! 3. `tool_call_update` `completed` with the UI's copy of the result as `content` and
//!    `rawOutput`, or `failed` with why (a refusal, a tool error, the call dropped). Every
//!    announced call reaches one of the two, whatever happens.
//!
//! Progress a tool reports through [`Progress`](crate::tool::Progress) replaces the call's
//! content while it runs.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use agent_tower::acp::{AcpLayer, schema::SessionUpdate};
//! use agent_tower::tool::{ToolCall, ToolOutput};
//! use agent_tower::transport::Recording;
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! let editor = Recording::new();
//! let tool = AcpLayer::new()
//!     .transport(editor.clone())
//!     .layer(service_fn(|_: ToolCall| async { Ok::<_, std::convert::Infallible>(ToolOutput::text("fn main() {}")) }));
//! tool.oneshot(ToolCall::new("read_file", serde_json::json!({"path": "/src/main.rs"}))).await.unwrap();
//!
//! let updates = editor.events();
//! assert!(matches!(&updates[0], SessionUpdate::ToolCall(call) if call.title == "read_file /src/main.rs"));
//! assert_eq!(updates.len(), 3, "announced, in progress, completed");
//! # }
//! ```
//!
//! # Plans
//!
//! Calls of a tool named `plan`, `todo`, `todos`, `todo_write`, `write_todos` or `update_plan`
//! whose arguments hold a list under `entries`, `todos`, `plan` or `steps` become a `plan`
//! update with the complete list (ACP clients replace the plan each time). Items are strings or
//! objects with `content` (or `step`, `title`), `status` (`pending`, `in_progress`, `completed`)
//! and `priority` (`high`, `medium`, `low`).

mod agent;
mod approve;
#[cfg(feature = "acp-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "acp-client")))]
pub mod client;
pub mod content;
mod events;
pub mod future;
mod history;
mod layer;
mod lines;
#[cfg(feature = "acp-server")]
pub(crate) use lines::Inbox;
#[cfg(feature = "fuzzing")]
pub(crate) use lines::fuzz_line;
mod notifier;
mod service;
mod stream;
mod tool_call;

pub use self::{
    agent::AcpAgent,
    approve::AcpApprover,
    layer::AcpLayer,
    lines::{MAX_LINE_BYTES, MAX_QUEUED_UPDATES},
    notifier::Notifier,
    service::Acp,
    stream::{ResponseStream, UpdateEncoder},
};

/// The ACP wire types (the official SDK's protocol v1 schema).
pub use agent_client_protocol::v1::schema;
