//! What a run used beyond its own model steps of this attempt: its steps before it was continued
//! ([`EarlierUsage`]) and the agents its tool calls ran ([`CallsUsage`]). An
//! [`Agent`](crate::agent::Agent) counts both in its [`RunOutcome`](super::RunOutcome)'s usage,
//! so that a run reports (and its end's cost event prices) everything it spent.

use std::sync::{Arc, Mutex, PoisonError};

use crate::model::Usage;

/// What a run's steps used before this attempt of it, per provider and model: set in the
/// [extensions](crate::context::RunContext::extensions) of a run continued after its instance
/// stopped, read back from its log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EarlierUsage(pub Vec<Usage>);

/// Where the agents that a run's tool calls run (sub-agents) add what they used: an
/// [`Agent`](crate::agent::Agent) puts one in the extensions its tool calls see, and counts
/// what was added in its run's usage.
#[derive(Debug, Clone, Default)]
pub struct CallsUsage(Arc<Mutex<Vec<Usage>>>);

impl CallsUsage {
    /// A new, empty one.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds what a call used, per provider and model.
    pub fn add(&self, used: &[Usage]) {
        let mut added = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        added.extend(used.iter().filter(|u| !u.is_empty()).cloned());
    }

    /// Takes what was added since the last time.
    #[must_use]
    pub fn take(&self) -> Vec<Usage> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl super::RunOutcome {
    /// What the run used, per provider and model (its whole usage as one entry when it did not
    /// say per model).
    #[must_use]
    pub fn usage_by_model(&self) -> Vec<Usage> {
        if self.models.is_empty() && !self.usage.is_empty() {
            vec![self.usage.clone()]
        } else {
            self.models.clone()
        }
    }
}
