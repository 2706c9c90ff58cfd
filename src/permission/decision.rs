use std::{collections::HashMap, sync::Arc, time::SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    id::{RunId, ThreadId, ToolCallId},
    tool::ToolKind,
};

/// A call waiting for a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    /// The call.
    pub id: ToolCallId,
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
    /// What the tool does.
    pub kind: ToolKind,
}

/// A request for decisions: every call of one model turn that the policy asks about.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRequest {
    /// The thread.
    pub thread_id: ThreadId,
    /// The run.
    pub run_id: RunId,
    /// The model turn.
    pub turn: u32,
    /// The calls, in the order the model made them.
    pub calls: Vec<PendingCall>,
}

/// What the approver decided about one call.
///
/// It serializes as a run log keeps it: `"approve"`, `{"edit": {…}}`, `{"reject": "…"}`, …
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run it as it is.
    Approve,
    /// Run it, and every later call of the same tool in the same thread without asking.
    ///
    /// The [`PermissionLayer`](super::PermissionLayer) that applies it remembers it, in memory,
    /// for up to 4,096 (thread, tool) pairs, the oldest forgotten first: after a restart, or on
    /// another instance, the person is asked again. The policy still comes first: a call it
    /// denies stays denied.
    ApproveAlways,
    /// Run it with these arguments instead (a full replacement, checked by the policy again).
    Edit(Value),
    /// Do not run it; the model receives the feedback as the call's result and can re-plan.
    Reject(String),
    /// Do not run it nor any later call of the same tool in the same thread; the model receives
    /// the feedback each time. Remembered like [`ApproveAlways`](Self::ApproveAlways).
    RejectAlways(String),
    /// Stop the run (its outcome is cancelled).
    Cancel,
    /// Decide later: the call does not run, the run ends with it as an
    /// [`Interrupt`](crate::run::Interrupt) that can be resumed until `expires_at`, and a later
    /// run brings the decision in its [`Resolutions`].
    Interrupt {
        /// When the interrupt expires.
        expires_at: SystemTime,
    },
}

/// Decisions made after the run that asked had ended (answers to its interrupts), by tool call:
/// put in a run's extensions, they are applied to those calls instead of asking again. A decision
/// applies only to the call it names; an edit is checked by the policy again.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolutions(Arc<HashMap<ToolCallId, Decision>>);

impl Resolutions {
    /// The decisions, by call.
    #[must_use]
    pub fn new(decisions: HashMap<ToolCallId, Decision>) -> Self {
        Self(Arc::new(decisions))
    }

    /// The decision for `call`, if one was made.
    #[must_use]
    pub fn get(&self, call: &ToolCallId) -> Option<&Decision> {
        self.0.get(call)
    }
}

/// What the approver decided about every call of a step, in the run extensions of each call
/// that runs after being asked about: for a tool that acts on the step's calls together, such as
/// an [AG-UI agent bridged](crate::agui::client) whose interrupts must be answered all at once.
#[derive(Debug, Clone)]
pub struct StepDecisions(pub Arc<Decisions>);

/// The decisions for a [`PermissionRequest`]: one per call, or one for all.
#[derive(Debug, Clone, PartialEq)]
pub struct Decisions {
    each: HashMap<ToolCallId, Decision>,
    rest: Decision,
}

impl Decisions {
    /// The same decision for every call.
    #[must_use]
    pub fn all(decision: Decision) -> Self {
        Self {
            each: HashMap::new(),
            rest: decision,
        }
    }

    /// `decision` for `call`, the others unchanged.
    #[must_use]
    pub fn with(mut self, call: impl Into<ToolCallId>, decision: Decision) -> Self {
        self.each.insert(call.into(), decision);
        self
    }

    /// The decision for `call`.
    #[must_use]
    pub fn get(&self, call: &ToolCallId) -> &Decision {
        self.each.get(call).unwrap_or(&self.rest)
    }
}
