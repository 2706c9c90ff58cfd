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
use serde_with::skip_serializing_none;

use super::input::Tool;
use crate::tool::ToolSpec;

/// What an agent supports (AG-UI's `AgentCapabilities`).
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// Its name and what it does.
    pub identity: Option<Identity>,
    /// How clients reach it.
    pub transport: Option<Transport>,
    /// The tools it calls.
    pub tools: Option<Tools>,
    /// The shared state.
    pub state: Option<State>,
    /// Reasoning shown to clients.
    pub reasoning: Option<Reasoning>,
    /// What it accepts besides text.
    pub multimodal: Option<Multimodal>,
    /// Its limits.
    pub execution: Option<Execution>,
    /// People in the loop.
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
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    /// Shown in UIs.
    pub name: Option<String>,
    /// The framework or platform behind it.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// What it does.
    pub description: Option<String>,
    /// Its version.
    pub version: Option<String>,
    /// Who maintains it.
    pub provider: Option<String>,
    /// Its documentation.
    pub documentation_url: Option<String>,
}

/// The transports it answers on.
#[skip_serializing_none]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transport {
    /// Server-sent events.
    pub streaming: Option<bool>,
    /// WebSocket.
    pub websocket: Option<bool>,
    /// AG-UI protobuf over HTTP.
    pub http_binary: Option<bool>,
    /// Webhooks after a run.
    pub push_notifications: Option<bool>,
    /// Streams resumed from a sequence number.
    pub resumable: Option<bool>,
}

/// Tool calling.
#[skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tools {
    /// It calls tools at all.
    pub supported: Option<bool>,
    /// Its own tools (not the client's).
    pub items: Option<Vec<Tool>>,
    /// Several calls in one step.
    pub parallel_calls: Option<bool>,
    /// It calls the tools a client offers in `RunAgentInput.tools`.
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
#[skip_serializing_none]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// `STATE_SNAPSHOT`s.
    pub snapshots: Option<bool>,
    /// `STATE_DELTA`s.
    pub deltas: Option<bool>,
    /// Memory beyond the thread.
    pub memory: Option<bool>,
    /// State kept across a thread's runs.
    pub persistent_state: Option<bool>,
}

/// Reasoning.
#[skip_serializing_none]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reasoning {
    /// Reasoning is shown.
    pub supported: Option<bool>,
    /// As it comes.
    pub streaming: Option<bool>,
    /// Encrypted.
    pub encrypted: Option<bool>,
}

/// Modalities.
#[skip_serializing_none]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Multimodal {
    /// What it accepts.
    pub input: Option<MultimodalInput>,
}

/// Input modalities.
#[skip_serializing_none]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MultimodalInput {
    /// Images.
    pub image: Option<bool>,
    /// Audio.
    pub audio: Option<bool>,
    /// Video.
    pub video: Option<bool>,
    /// PDF documents.
    pub pdf: Option<bool>,
    /// Other files.
    pub file: Option<bool>,
}

/// Limits of a run.
#[skip_serializing_none]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Execution {
    /// Code execution.
    pub code_execution: Option<bool>,
    /// In a sandbox.
    pub sandboxed: Option<bool>,
    /// The most model turns a run takes.
    pub max_iterations: Option<u32>,
    /// The longest a run lasts, in milliseconds.
    pub max_execution_time: Option<u64>,
}

/// People in the loop.
#[skip_serializing_none]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HumanInTheLoop {
    /// Any form of it.
    pub supported: Option<bool>,
    /// Approval before sensitive actions.
    pub approvals: Option<bool>,
    /// Changes to the plan mid-run.
    pub interventions: Option<bool>,
    /// Feedback taken into account.
    pub feedback: Option<bool>,
    /// The interrupt protocol: runs end with an `interrupt` outcome, answered in `resume`.
    pub interrupts: Option<bool>,
    /// Tool-call interrupts accept `editedArgs`.
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
