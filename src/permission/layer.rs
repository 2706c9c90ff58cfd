use std::{fmt, sync::Arc};

use tower_layer::Layer;

use super::{Permission, Policy, batch::Batches, remember::Remembered};

/// Checks tool calls against a policy and asks an approver; see the [module docs](super).
#[derive(Clone)]
#[must_use]
pub struct PermissionLayer<A> {
    policy: Arc<Policy>,
    approver: A,
    batches: Batches,
    remembered: Remembered,
}

impl<A> PermissionLayer<A> {
    /// Decides with `policy`, asks `approver`.
    pub fn new(policy: Policy, approver: A) -> Self {
        Self {
            policy: Arc::new(policy),
            approver,
            batches: Batches::default(),
            remembered: Remembered::default(),
        }
    }
}

impl<A> fmt::Debug for PermissionLayer<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermissionLayer")
            .field("policy", &self.policy)
            .field("approver", &std::any::type_name::<A>())
            .field("remembered", &self.remembered)
            .finish()
    }
}

impl<S, A: Clone> Layer<S> for PermissionLayer<A> {
    type Service = Permission<S, A>;

    fn layer(&self, inner: S) -> Self::Service {
        Permission::new(
            inner,
            self.policy.clone(),
            self.approver.clone(),
            self.batches.clone(),
            self.remembered.clone(),
        )
    }
}
