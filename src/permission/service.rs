use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use tower_service::Service;

use super::{Action, Approve, Policy, Resolutions, batch::Batches, future, remember::Remembered};
use crate::{
    BoxError,
    tool::{Started, ToolCall, ToolReply, ToolResponse},
};

/// A tool service wrapped by [`PermissionLayer`](super::PermissionLayer).
#[derive(Clone)]
pub struct Permission<S, A> {
    inner: S,
    policy: Arc<Policy>,
    approver: A,
    batches: Batches,
    remembered: Remembered,
}

impl<S, A> Permission<S, A> {
    pub(crate) fn new(
        inner: S,
        policy: Arc<Policy>,
        approver: A,
        batches: Batches,
        remembered: Remembered,
    ) -> Self {
        Self {
            inner,
            policy,
            approver,
            batches,
            remembered,
        }
    }

    crate::inner_service!();
}

impl<S: fmt::Debug, A> fmt::Debug for Permission<S, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permission")
            .field("inner", &self.inner)
            .field("policy", &self.policy)
            .field("batches", &self.batches)
            .field("remembered", &self.remembered)
            .finish()
    }
}

impl<S, A> Service<ToolCall> for Permission<S, A>
where
    S: Service<ToolCall> + Clone,
    S::Response: ToolReply,
    S::Error: Into<BoxError>,
    A: Approve + Clone + Send + 'static,
    A::Error: Into<BoxError>,
    A::Future: Send + 'static,
{
    type Response = ToolResponse;
    type Error = BoxError;
    type Future = future::ResponseFuture<S>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is driven per call, once the call may run (see "Readiness").
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        // Each call gets its own clone, readied only when it runs: never across a human wait.
        let inner = self.inner.clone();
        let resolved = call
            .run
            .extensions
            .get::<Resolutions>()
            .and_then(|resolutions| resolutions.get(&call.id))
            .cloned();
        let remembered = &self.remembered;
        match (self.policy.decide_for(&call), resolved) {
            (Action::Deny, _) => future::ResponseFuture::denied(&call.name),
            (_, Some(decision)) => {
                future::ResponseFuture::decided(inner, call, &self.policy, remembered, decision)
            }
            (Action::Allow, None) => future::ResponseFuture::run(inner, call),
            (Action::Ask, None) => {
                // The call does not run before a decision: a layer in front may want to know.
                if let Some(started) = call.run.extensions.get::<Started>() {
                    started.hold();
                }
                let (decisions, ticket) =
                    self.batches
                        .join(&call, &self.policy, remembered, &self.approver);
                future::ResponseFuture::waiting(
                    inner,
                    call,
                    self.policy.clone(),
                    remembered.clone(),
                    decisions,
                    ticket,
                )
            }
        }
    }
}
