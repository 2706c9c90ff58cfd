//! AG-UI 1.0 agent capabilities: what an agent declares it supports, for clients to discover
//! (`AbstractAgent.getCapabilities()`; CopilotKit's runtime shows them to its pages).
//!
//! Every field is optional: an omitted one is *not declared* (unknown), not unsupported. The
//! categories this crate can derive are typed; the others (`output`, `multiAgent`, …) and an
//! integration's own go in [`Capabilities::other`] as JSON.
//!
//! ```
//! use agent_tower::agui::capabilities::{Capabilities, HumanInTheLoop};
//!
//! let capabilities = Capabilities {
//!     human_in_the_loop: Some(HumanInTheLoop::interrupts()),
//!     ..Capabilities::default()
//! };
//! let json = serde_json::to_value(&capabilities).unwrap();
//! assert_eq!(json["humanInTheLoop"]["approveWithEdits"], true);
//! assert!(json.get("tools").is_none(), "not declared");
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::input::Tool;
use crate::tool::ToolSpec;

/// What an agent supports (AG-UI's `AgentCapabilities`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// Its name and what it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
    /// How clients reach it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    /// The tools it calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Tools>,
    /// The shared state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    /// Reasoning shown to clients.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
    /// What it accepts besides text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multimodal: Option<Multimodal>,
    /// Its limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<Execution>,
    /// People in the loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub human_in_the_loop: Option<HumanInTheLoop>,
    /// The other categories (`output`, `multiAgent`, `custom`, …), as JSON.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl Capabilities {
    /// `self`, with what `more` declares on top (each category `more` declares replaces this
    /// one's).
    #[must_use]
    pub fn merge(mut self, more: Self) -> Self {
        fn take<T>(mine: &mut Option<T>, theirs: Option<T>) {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
        take(&mut self.identity, more.identity);
        take(&mut self.transport, more.transport);
        take(&mut self.tools, more.tools);
        take(&mut self.state, more.state);
        take(&mut self.reasoning, more.reasoning);
        take(&mut self.multimodal, more.multimodal);
        take(&mut self.execution, more.execution);
        take(&mut self.human_in_the_loop, more.human_in_the_loop);
        self.other.extend(more.other);
        self
    }
}

/// Who the agent is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    /// Shown in UIs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The framework or platform behind it.
    #[serde(rename = "type")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Who maintains it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Its documentation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
}

/// The transports it answers on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transport {
    /// Server-sent events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// WebSocket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub websocket: Option<bool>,
    /// AG-UI protobuf over HTTP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_binary: Option<bool>,
    /// Webhooks after a run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push_notifications: Option<bool>,
    /// Streams resumed from a sequence number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumable: Option<bool>,
}

/// Tool calling.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tools {
    /// It calls tools at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported: Option<bool>,
    /// Its own tools (not the client's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<Tool>>,
    /// Several calls in one step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_calls: Option<bool>,
    /// It calls the tools a client offers in `RunAgentInput.tools`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_provided: Option<bool>,
}

impl Tools {
    /// An agent that calls `specs` and the client's tools.
    #[must_use]
    pub fn of(specs: &[ToolSpec]) -> Self {
        Self {
            supported: Some(true),
            items: Some(specs.iter().map(Tool::from_spec).collect()),
            parallel_calls: None,
            client_provided: Some(true),
        }
    }
}

/// The shared state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// `STATE_SNAPSHOT`s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<bool>,
    /// `STATE_DELTA`s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deltas: Option<bool>,
    /// Memory beyond the thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<bool>,
    /// State kept across a thread's runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_state: Option<bool>,
}

/// Reasoning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reasoning {
    /// Reasoning is shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported: Option<bool>,
    /// As it comes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// Encrypted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
}

/// Modalities.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Multimodal {
    /// What it accepts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<MultimodalInput>,
}

/// Input modalities.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MultimodalInput {
    /// Images.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<bool>,
    /// Audio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audio: Option<bool>,
    /// Video.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub video: Option<bool>,
    /// PDF documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pdf: Option<bool>,
    /// Other files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<bool>,
}

/// Limits of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Execution {
    /// Code execution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_execution: Option<bool>,
    /// In a sandbox.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandboxed: Option<bool>,
    /// The most model turns a run takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// The longest a run lasts, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_execution_time: Option<u64>,
}

/// People in the loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HumanInTheLoop {
    /// Any form of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supported: Option<bool>,
    /// Approval before sensitive actions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals: Option<bool>,
    /// Changes to the plan mid-run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interventions: Option<bool>,
    /// Feedback taken into account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<bool>,
    /// The interrupt protocol: runs end with an `interrupt` outcome, answered in `resume`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupts: Option<bool>,
    /// Tool-call interrupts accept `editedArgs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approve_with_edits: Option<bool>,
}

impl HumanInTheLoop {
    /// Approvals through AG-UI interrupts, answered with approve (edited or not), reject with
    /// feedback, or dismiss: what [`InterruptApprover`](crate::permission::InterruptApprover)
    /// asks.
    #[must_use]
    pub fn interrupts() -> Self {
        Self {
            supported: Some(true),
            approvals: Some(true),
            interventions: None,
            feedback: Some(true),
            interrupts: Some(true),
            approve_with_edits: Some(true),
        }
    }
}
