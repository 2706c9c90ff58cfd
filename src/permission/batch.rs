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

use super::{
    Action, Approve, Decision, Decisions, PendingCall, PermissionRequest, Policy,
    remember::Remembered,
};
use crate::{
    BoxError,
    id::{RunId, ToolCallId},
    run::TurnCalls,
    tool::ToolCall,
};

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
    /// The decisions for `call`'s turn: the pending request if one exists, else a new one. The
    /// approver is asked about every call of the turn the policy asks about and no "always"
    /// answer covers (not at all if there is none); the remembered answers join its decisions,
    /// so that the turn's decisions are complete.
    pub(crate) fn join<A>(
        &self,
        call: &ToolCall,
        policy: &Policy,
        remembered: &Remembered,
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
            decisions: ask(request(call, policy, remembered), approver.clone()),
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

/// What to ask about `call`'s turn: the calls the policy asks about (just this one without
/// [`TurnCalls`]), less those an "always" answer decides, which come apart.
struct Request {
    ask: PermissionRequest,
    remembered: Vec<(ToolCallId, Decision)>,
}

fn request(call: &ToolCall, policy: &Policy, remembered: &Remembered) -> Request {
    let asked: Vec<&ToolCall> = match call.run.extensions.get::<TurnCalls>() {
        Some(TurnCalls(turn)) => turn
            .iter()
            .filter(|c| policy.decide_for(c) == Action::Ask)
            .collect(),
        None => vec![call],
    };
    let mut calls = Vec::new();
    let mut known = Vec::new();
    for c in asked {
        match remembered.decision(c) {
            Some(decision) => known.push((c.id.clone(), decision)),
            None => calls.push(pending(c, policy)),
        }
    }
    Request {
        ask: PermissionRequest {
            thread_id: call.run.thread_id.clone(),
            run_id: call.run.run_id.clone(),
            turn: call.run.turn,
            calls,
        },
        remembered: known,
    }
}

fn ask<A>(request: Request, approver: A) -> SharedDecisions
where
    A: Approve + Send + 'static,
    A::Error: Into<BoxError>,
    A::Future: Send + 'static,
{
    async move {
        let Request { ask, remembered } = request;
        let decisions = if ask.calls.is_empty() {
            // Nothing left to ask: every call of the turn is remembered (listed below).
            Decisions::all(Decision::Cancel)
        } else {
            approver
                .oneshot(ask)
                .await
                .map_err(|e| Arc::<str>::from(e.into().to_string()))?
        };
        Ok(Arc::new(
            remembered
                .into_iter()
                .fold(decisions, |decisions, (call, decision)| {
                    decisions.with(call, decision)
                }),
        ))
    }
    .boxed()
    .shared()
}
