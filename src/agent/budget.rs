use std::sync::{
    Arc,
    atomic::{AtomicU32, Ordering},
};

/// The model turns a run has left, shared with the runs it starts: an
/// [`Agent`](super::Agent) takes one before each turn and stops (at
/// [`MaxTurns`](crate::run::StopReason::MaxTurns)) when none is left. A run without one gets its
/// agent's [`max_turns`](super::Agent::max_turns); an agent called as a tool of another
/// ([`subagent`](crate::subagent)) finds its parent's in its run's extensions, so that agents
/// calling agents never take more turns than the first one was given.
///
/// ```
/// use agent_tower::agent::TurnBudget;
///
/// let budget = TurnBudget::new(2);
/// let shared = budget.clone();
/// assert!(budget.take());
/// assert!(shared.take());
/// assert!(!budget.take(), "two turns in all");
/// assert_eq!(shared.remaining(), 0);
/// ```
#[derive(Debug, Clone)]
pub struct TurnBudget(Arc<AtomicU32>);

impl TurnBudget {
    /// `turns` turns.
    #[must_use]
    pub fn new(turns: u32) -> Self {
        Self(Arc::new(AtomicU32::new(turns)))
    }

    /// Takes a turn; `false` when none is left.
    pub fn take(&self) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(1)
            })
            .is_ok()
    }

    /// The turns left.
    #[must_use]
    pub fn remaining(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }
}
