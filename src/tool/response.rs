//! What a tool stack answers: the tool's output, or an interrupt.

use std::{fmt, time::SystemTime};

use serde_json::Value;

use super::ToolOutput;
use crate::{
    id::{InterruptId, RunId, ToolCallId},
    message::Message,
};

/// A tool call a run stopped at: it needs a decision nobody has given yet, so the run ended
/// ([`StopReason::Interrupted`](crate::run::StopReason::Interrupted)) and a later run on the
/// thread resumes it with the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupt {
    /// The interrupt.
    pub id: InterruptId,
    /// The call waiting.
    pub tool_call_id: ToolCallId,
    /// The tool it calls.
    pub tool_name: String,
    /// Its arguments, as the model gave them.
    pub arguments: Value,
    /// After this, the interrupt can no longer be resumed.
    pub expires_at: SystemTime,
}

impl fmt::Display for Interrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the call `{}` of `{}` waits for a decision (interrupt `{}`)",
            self.tool_call_id, self.tool_name, self.id
        )
    }
}

/// The work of a call that stopped at interrupts of its own: the run of an agent called as a
/// tool (a [sub-agent](crate::subagent)) whose tools wait for a person.
///
/// The [`Agent`](crate::agent::Agent) ends its run with these interrupts and keeps the run's
/// conversation after the call ([`Message::Subagent`]); the run that answers them makes the call
/// again with a [`SubagentRun`] in its extensions, and the call goes on where it stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspended {
    interrupts: Vec<Interrupt>,
    run: SubagentRun,
}

impl Suspended {
    /// `run` waiting for `interrupts`; `None` when there are none (a run that waits for nothing
    /// is not suspended).
    #[must_use]
    pub fn new(interrupts: Vec<Interrupt>, run: SubagentRun) -> Option<Self> {
        (!interrupts.is_empty()).then_some(Self { interrupts, run })
    }

    /// What the call waits for: at least one interrupt.
    #[must_use]
    pub fn interrupts(&self) -> &[Interrupt] {
        &self.interrupts
    }

    /// The interrupts and the run.
    #[must_use]
    pub fn into_parts(self) -> (Vec<Interrupt>, SubagentRun) {
        (self.interrupts, self.run)
    }
}

/// The run of an agent called as a tool (a [sub-agent](crate::subagent)): its id and its
/// conversation. The work of a [`Suspended`] call (its conversation ends with the calls that
/// wait; in the extensions of the call that resumes it,
/// [`RunContext::extensions`](crate::context::RunContext::extensions)), or what a
/// [`Delegated`](ToolResponse::Delegated) call's agent said and did.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentRun {
    /// The run.
    pub run_id: RunId,
    /// Its conversation.
    pub messages: Vec<Message>,
}

/// What a tool stack that may ask a person answers for one call: the call's output, the
/// [`Interrupt`] it stopped at (it did not run, nothing was decided), or the interrupts its own
/// work stopped at ([`Suspended`]).
///
/// "Ask a person later" is an answer, not a failure: no layer that handles errors (mapping them
/// to results, retrying, timing out, falling back) can turn it into a failed call. A
/// [`PermissionLayer`](crate::permission::PermissionLayer) answers this type; the layers
/// around it pass it through (see [`ToolReply`]) and the [`Agent`](crate::agent::Agent) ends the
/// run with the interrupts of the turn.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolResponse {
    /// The call ran, or was answered without running (a refusal the model reads).
    Output(ToolOutput),
    /// The call waits for a decision.
    Interrupted(Interrupt),
    /// The call's own work waits for decisions.
    Suspended(Suspended),
    /// The call ran as the run of another agent (a [sub-agent](crate::subagent)): its output,
    /// and that run, which the thread keeps where the call ran ([`Message::Subagent`]) for the
    /// clients that were shown it. No model is shown the run: the output is the call's result.
    Delegated {
        /// The call's result.
        output: ToolOutput,
        /// The run that answered it.
        run: SubagentRun,
    },
}

impl ToolResponse {
    /// The output, unless the call stopped at interrupts.
    #[must_use]
    pub fn into_output(self) -> Option<ToolOutput> {
        match self {
            Self::Output(output) | Self::Delegated { output, .. } => Some(output),
            Self::Interrupted(_) | Self::Suspended(_) => None,
        }
    }
}

impl From<ToolOutput> for ToolResponse {
    fn from(output: ToolOutput) -> Self {
        Self::Output(output)
    }
}

impl From<Interrupt> for ToolResponse {
    fn from(interrupt: Interrupt) -> Self {
        Self::Interrupted(interrupt)
    }
}

impl From<Suspended> for ToolResponse {
    fn from(suspended: Suspended) -> Self {
        Self::Suspended(suspended)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::ToolOutput {}
    impl Sealed for super::ToolResponse {}
}

/// The answer of a tool stack: a [`ToolOutput`] (a tool's, or a stack that never interrupts) or a
/// [`ToolResponse`] (a stack with a permission layer inside). Layers that look at results are
/// generic over it and answer what their inner service answers, so that a layer works on either
/// side of a [`PermissionLayer`](crate::permission::PermissionLayer).
pub trait ToolReply: From<ToolOutput> + sealed::Sealed {
    /// The output, unless the call stopped at an interrupt.
    fn output(&self) -> Option<&ToolOutput>;

    /// The output, mutably, unless the call stopped at an interrupt.
    fn output_mut(&mut self) -> Option<&mut ToolOutput>;

    /// The interrupts the call stopped at: none when it did not.
    fn interrupts(&self) -> &[Interrupt];

    /// As a [`ToolResponse`].
    fn into_response(self) -> ToolResponse;
}

impl ToolReply for ToolOutput {
    fn output(&self) -> Option<&ToolOutput> {
        Some(self)
    }

    fn output_mut(&mut self) -> Option<&mut ToolOutput> {
        Some(self)
    }

    fn interrupts(&self) -> &[Interrupt] {
        &[]
    }

    fn into_response(self) -> ToolResponse {
        ToolResponse::Output(self)
    }
}

impl ToolReply for ToolResponse {
    fn output(&self) -> Option<&ToolOutput> {
        match self {
            Self::Output(output) | Self::Delegated { output, .. } => Some(output),
            Self::Interrupted(_) | Self::Suspended(_) => None,
        }
    }

    fn output_mut(&mut self) -> Option<&mut ToolOutput> {
        match self {
            Self::Output(output) | Self::Delegated { output, .. } => Some(output),
            Self::Interrupted(_) | Self::Suspended(_) => None,
        }
    }

    fn interrupts(&self) -> &[Interrupt] {
        match self {
            Self::Output(_) | Self::Delegated { .. } => &[],
            Self::Interrupted(interrupt) => std::slice::from_ref(interrupt),
            Self::Suspended(suspended) => suspended.interrupts(),
        }
    }

    fn into_response(self) -> ToolResponse {
        self
    }
}
