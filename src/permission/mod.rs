//! Human in the loop: [`PermissionLayer`] asks before a tool runs.
//!
//! Around a tool service, each call is checked against a [`Policy`] (glob rules on tool names, a
//! default, a [`Mode`]): allowed calls run, denied calls are answered with a refusal the model
//! reads, and the rest are asked about. Asking is a service of its own, an [`Approve`]r
//! (`Service<PermissionRequest, Response = Decisions>`), so an approver can be a channel to a CLI,
//! an ACP client, a web UI, with its own timeout. All the calls of one model turn that need asking
//! go out in **one** request (the agent tells the layer which calls share a turn).
//!
//! A [`Decision`] approves, approves with edited arguments (a full replacement, checked by the
//! policy again), rejects with feedback (the model receives it as the call's result and can
//! re-plan) or cancels the run. Approving or rejecting can be *always*: the layer then decides
//! the later calls of that tool in that thread the same way without asking (see
//! [`Decision::ApproveAlways`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::agent::Agent;
//! use agent_tower::message::Message;
//! use agent_tower::permission::{Action, ChannelApprover, Decision, Decisions, PermissionLayer, Policy};
//! use agent_tower::run::RunRequest;
//! use agent_tower::test_util::{MockItem, MockModel};
//! use agent_tower::tool::{ToolCall, ToolOutput, ToolRouter, ToolSpec};
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! let delete = service_fn(|_: ToolCall| async { Ok::<_, std::convert::Infallible>(ToolOutput::text("deleted")) });
//! let tools = ToolRouter::new().route(ToolSpec::new("delete_file", "Deletes a file."), delete);
//! let (approver, mut approvals) = ChannelApprover::new(8);
//! let tools = PermissionLayer::new(Policy::new().rule("delete_*", Action::Ask), approver).layer(tools);
//!
//! let mut call = vec![];
//! call.extend(MockItem::tool_call("c1", "delete_file", r#"{"path": "notes.txt"}"#));
//! call.push(MockItem::tool_calls());
//! let model = MockModel::new([call, vec![MockItem::text("Kept it."), MockItem::stop()]]);
//! let run = tokio::spawn(Agent::new(model.clone(), tools).oneshot(RunRequest::new(vec![Message::user("clean up")])));
//!
//! // The person says no, with a reason the model reads.
//! let approval = approvals.recv().await.unwrap();
//! assert_eq!(approval.request.calls[0].name, "delete_file");
//! approval.decide(Decisions::all(Decision::Reject("I still need it".into()))).unwrap();
//!
//! run.await??;
//! let seen = model.requests()[1].messages.last().unwrap().text();
//! assert!(seen.contains("I still need it"), "{seen}");
//! # Ok(()) }
//! ```
//!
//! # When it acts
//!
//! - When the call is made: the policy decides at once. Allowed and denied calls never wait.
//! - While a decision is pending: nothing is emitted (the call's `TOOL_CALL_START/ARGS/END` are
//!   already out); the run's cancellation drops the wait at once, and the pending request is
//!   forgotten when its last call goes.
//! - When decided: the tool runs (its result becomes `TOOL_CALL_RESULT` through `AguiLayer`), or
//!   the refusal or rejection becomes the result, or the run is cancelled.
//! - When an earlier answer was *always* ([`Decision::ApproveAlways`], [`Decision::RejectAlways`]):
//!   the call is not asked about; it is decided as then, together with the turn's other calls
//!   (a turn's decisions are taken at once, so such a call waits for those that are asked about).
//! - When the decision is deferred ([`Decision::Interrupt`], what [`InterruptApprover`] answers):
//!   the call's answer is the [`Interrupt`](crate::tool::Interrupt)
//!   ([`ToolResponse::Interrupted`](crate::tool::ToolResponse::Interrupted), an answer, not an
//!   error: no error-handling layer stacked outside can swallow it) and the agent ends the run
//!   with it. Nothing waits in memory: the next run on the thread carries the decision as
//!   [`Resolutions`] in its extensions, and the layer applies it to the same call (by id) without
//!   asking. This is how AG-UI's interrupts and `resume[]` work (see `server`'s durable mode).
//!
//! # Readiness
//!
//! The layer is always ready and never holds a readied inner service while a person decides: each
//! call clones the inner service and drives its readiness (`oneshot`) only once it may run, so a
//! `ConcurrencyLimit` permit is never held across a human wait.

mod approve;
mod batch;
mod decision;
pub mod future;
mod layer;
mod policy;
mod question;
mod remember;
mod service;

pub use self::{
    approve::{
        AlwaysDeny, Approval, ApprovalFuture, Approvals, Approve, AutoApprove, ChannelApprover,
        InterruptApprover,
    },
    decision::{Decision, Decisions, PendingCall, PermissionRequest, Resolutions, StepDecisions},
    layer::PermissionLayer,
    policy::{Action, Glob, Mode, Policy},
    question::Question,
    service::Permission,
};

/// Permission errors.
pub mod error {
    use std::fmt;

    /// The approver cancelled the run, or the run was cancelled while a decision was pending.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Cancelled(());

    impl Cancelled {
        pub(crate) fn new() -> Self {
            Self(())
        }
    }

    impl fmt::Display for Cancelled {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.pad("the run was cancelled while a permission was pending")
        }
    }

    impl std::error::Error for Cancelled {}

    /// The approver failed: no decision could be had.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ApprovalFailed(String);

    impl ApprovalFailed {
        pub(crate) fn new(reason: &str) -> Self {
            Self(reason.to_owned())
        }
    }

    impl fmt::Display for ApprovalFailed {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "no permission decision: {}", self.0)
        }
    }

    impl std::error::Error for ApprovalFailed {}

    /// A [`ChannelApprover`](super::ChannelApprover)'s receiving end is gone.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ApproverGone(());

    impl ApproverGone {
        pub(crate) fn new() -> Self {
            Self(())
        }
    }

    impl fmt::Display for ApproverGone {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.pad("nobody answers permission requests")
        }
    }

    impl std::error::Error for ApproverGone {}
}
