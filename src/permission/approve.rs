use std::{
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, SystemTime},
};

use tokio::sync::{mpsc, oneshot};
use tower_service::Service;

use super::{Decision, Decisions, PermissionRequest, error::ApproverGone};

/// An alias for `Service<PermissionRequest, Response = Decisions>`, implemented for every such
/// service: an approver can have its own timeout, retry or transport (a channel to a UI, an ACP
/// `session/request_permission`).
pub trait Approve: Service<PermissionRequest, Response = Decisions> {}

impl<S> Approve for S where S: Service<PermissionRequest, Response = Decisions> {}

/// Approves everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoApprove;

impl Service<PermissionRequest> for AutoApprove {
    type Response = Decisions;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Decisions, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: PermissionRequest) -> Self::Future {
        std::future::ready(Ok(Decisions::all(Decision::Approve)))
    }
}

/// Decides nothing while the run waits: every call becomes an interrupt that expires after the
/// given time ([`Decision::Interrupt`]). The run ends, and a later run brings the decisions as
/// [`Resolutions`](super::Resolutions): human in the loop across requests and restarts.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use agent_tower::permission::{Decision, InterruptApprover, PermissionRequest};
/// use std::time::Duration;
/// use tower::ServiceExt;
///
/// let request = PermissionRequest { thread_id: "t".into(), run_id: "r".into(), turn: 0, calls: vec![] };
/// let decisions = InterruptApprover::new(Duration::from_secs(3600)).oneshot(request).await.unwrap();
/// assert!(matches!(decisions.get(&"any".into()), Decision::Interrupt { .. }));
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct InterruptApprover {
    expires_in: Duration,
}

/// The longest an interrupt waits: 100 years (beyond, a time is not representable everywhere).
const MAX_EXPIRY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl InterruptApprover {
    /// Interrupts that can be resumed for `expires_in` (at most 100 years; more is taken as
    /// 100 years).
    #[must_use]
    pub fn new(expires_in: Duration) -> Self {
        Self {
            expires_in: expires_in.min(MAX_EXPIRY),
        }
    }
}

impl Service<PermissionRequest> for InterruptApprover {
    type Response = Decisions;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Decisions, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: PermissionRequest) -> Self::Future {
        std::future::ready(Ok(Decisions::all(Decision::Interrupt {
            expires_at: SystemTime::now() + self.expires_in,
        })))
    }
}

/// Rejects everything, with a feedback the model reads.
#[derive(Debug, Clone)]
pub struct AlwaysDeny {
    feedback: Arc<str>,
}

impl AlwaysDeny {
    /// Rejects with `feedback`.
    pub fn new(feedback: &str) -> Self {
        Self {
            feedback: feedback.into(),
        }
    }
}

impl Service<PermissionRequest> for AlwaysDeny {
    type Response = Decisions;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Decisions, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _req: PermissionRequest) -> Self::Future {
        std::future::ready(Ok(Decisions::all(Decision::Reject(
            self.feedback.to_string(),
        ))))
    }
}

/// An approver in the same process: each request arrives on [`Approvals`] as an [`Approval`] to
/// answer (a CLI prompt, a test).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use agent_tower::permission::{ChannelApprover, Decision, Decisions, PermissionRequest};
/// use tower::ServiceExt;
///
/// let (approver, mut approvals) = ChannelApprover::new(8);
/// let request = PermissionRequest { thread_id: "t".into(), run_id: "r".into(), turn: 0, calls: vec![] };
/// let asked = tokio::spawn(approver.oneshot(request));
/// let approval = approvals.recv().await.unwrap();
/// approval.decide(Decisions::all(Decision::Approve));
/// assert_eq!(asked.await.unwrap().unwrap(), Decisions::all(Decision::Approve));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ChannelApprover {
    requests: mpsc::Sender<Approval>,
}

/// The receiving end of a [`ChannelApprover`].
#[derive(Debug)]
pub struct Approvals {
    requests: mpsc::Receiver<Approval>,
}

/// A request waiting for its decisions.
#[derive(Debug)]
pub struct Approval {
    /// What is asked.
    pub request: PermissionRequest,
    responder: oneshot::Sender<Decisions>,
}

impl Approval {
    /// Answers the request. Returns the decisions back if nobody waits any more (the run was
    /// cancelled).
    ///
    /// # Errors
    ///
    /// The decisions, when the asking run is gone.
    pub fn decide(self, decisions: Decisions) -> Result<(), Decisions> {
        self.responder.send(decisions)
    }

    /// Whether the asking run gave up (it was cancelled): nobody needs the answer.
    #[must_use]
    pub fn is_abandoned(&self) -> bool {
        self.responder.is_closed()
    }

    /// Waits until the asking run gives up.
    pub async fn abandoned(&mut self) {
        self.responder.closed().await;
    }
}

impl ChannelApprover {
    /// An approver whose requests queue up to `capacity` on the returned [`Approvals`].
    #[must_use]
    pub fn new(capacity: usize) -> (Self, Approvals) {
        let (requests, receiver) = mpsc::channel(capacity);
        (Self { requests }, Approvals { requests: receiver })
    }
}

impl Approvals {
    /// The next request, or `None` once every approver is gone.
    pub async fn recv(&mut self) -> Option<Approval> {
        self.requests.recv().await
    }
}

impl Service<PermissionRequest> for ChannelApprover {
    type Response = Decisions;
    type Error = ApproverGone;
    type Future = ApprovalFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: PermissionRequest) -> Self::Future {
        let requests = self.requests.clone();
        ApprovalFuture(Box::pin(async move {
            let (responder, decided) = oneshot::channel();
            requests
                .send(Approval { request, responder })
                .await
                .map_err(|_| ApproverGone::new())?;
            decided.await.map_err(|_| ApproverGone::new())
        }))
    }
}

crate::boxed_future! {
    /// The future of a [`ChannelApprover`] call (boxed once per request).
    pub struct ApprovalFuture -> Result<Decisions, ApproverGone>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiry_beyond_any_clock_is_capped_not_a_panic() {
        let mut approver = InterruptApprover::new(Duration::MAX);
        let decisions = approver
            .call(PermissionRequest {
                thread_id: "t".into(),
                run_id: "r".into(),
                turn: 0,
                calls: vec![],
            })
            .into_inner()
            .unwrap();
        let Decision::Interrupt { expires_at } = decisions.get(&"any".into()) else {
            panic!("an interrupt");
        };
        let years = expires_at
            .duration_since(SystemTime::now())
            .unwrap()
            .as_secs()
            / (365 * 24 * 3600);
        assert_eq!(years, 99, "capped at 100 years");
    }
}
