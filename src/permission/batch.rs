//! One approval request per model turn, shared by the turn's calls.

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex, PoisonError},
};

use futures_util::{
    FutureExt,
    future::{BoxFuture, Shared},
};
use tower::ServiceExt;

use super::{Action, Approve, Decisions, PendingCall, PermissionRequest, Policy};
use crate::{BoxError, id::RunId, run::TurnCalls, tool::ToolCall};

pub(crate) type SharedDecisions = Shared<BoxFuture<'static, Result<Arc<Decisions>, Arc<str>>>>;

type Key = (RunId, u32);

struct Batch {
    decisions: SharedDecisions,
    holders: usize,
}

/// The pending requests, by run and turn.
#[derive(Clone, Default)]
pub(crate) struct Batches(Arc<Mutex<HashMap<Key, Batch>>>);

impl fmt::Debug for Batches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pending = self.0.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("Batches")
            .field("pending", &pending)
            .finish()
    }
}

/// A share in a pending request; the request is forgotten (and its approver call dropped) when
/// the last share goes, answered or not.
pub(crate) struct Ticket {
    batches: Batches,
    key: Key,
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket").field("turn", &self.key.1).finish()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut batches = self
            .batches
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(batch) = batches.get_mut(&self.key) {
            batch.holders -= 1;
            if batch.holders == 0 {
                batches.remove(&self.key);
            }
        }
    }
}

impl Batches {
    /// The decisions for `call`'s turn: the pending request if one exists, else a new request
    /// listing every call of the turn the policy asks about.
    pub(crate) fn join<A>(
        &self,
        call: &ToolCall,
        policy: &Policy,
        approver: &A,
    ) -> (SharedDecisions, Ticket)
    where
        A: Approve + Clone + Send + 'static,
        A::Error: Into<BoxError>,
        A::Future: Send + 'static,
    {
        let key = (call.run.run_id.clone(), call.run.turn);
        let mut batches = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let batch = batches.entry(key.clone()).or_insert_with(|| Batch {
            decisions: ask(request(call, policy), approver.clone()),
            holders: 0,
        });
        batch.holders += 1;
        let decisions = batch.decisions.clone();
        drop(batches);
        (
            decisions,
            Ticket {
                batches: self.clone(),
                key,
            },
        )
    }
}

fn pending(call: &ToolCall, policy: &Policy) -> PendingCall {
    PendingCall {
        id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        kind: policy.kind(&call.name),
    }
}

/// Every call of the turn the policy asks about (just this one without [`TurnCalls`]).
fn request(call: &ToolCall, policy: &Policy) -> PermissionRequest {
    let calls = match call.run.extensions.get::<TurnCalls>() {
        Some(TurnCalls(turn)) => turn
            .iter()
            .filter(|c| policy.decide_for(c) == Action::Ask)
            .map(|c| pending(c, policy))
            .collect(),
        None => vec![pending(call, policy)],
    };
    PermissionRequest {
        thread_id: call.run.thread_id.clone(),
        run_id: call.run.run_id.clone(),
        turn: call.run.turn,
        calls,
    }
}

fn ask<A>(request: PermissionRequest, approver: A) -> SharedDecisions
where
    A: Approve + Send + 'static,
    A::Error: Into<BoxError>,
    A::Future: Send + 'static,
{
    async move {
        approver
            .oneshot(request)
            .await
            .map(Arc::new)
            .map_err(|e| Arc::<str>::from(e.into().to_string()))
    }
    .boxed()
    .shared()
}
