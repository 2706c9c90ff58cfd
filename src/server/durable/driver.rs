//! A run in a task of its own, its events written to the log in batches.

use std::{sync::Arc, time::Duration};

use futures_util::{FutureExt, StreamExt, future::BoxFuture};
use tokio_util::sync::CancellationToken;

use super::super::run::{RunEnd as Ended, RunFuture, RunTracker};
use crate::{
    BoxError,
    agui::Event,
    run::{RunOutcome, StopReason},
    store::{Lease, RunEnd, RunStatus, RunStore, StoreError},
    transport::ChannelReceiver,
};

/// The most events one append carries.
const MAX_BATCH: usize = 512;

fn json(event: &Event) -> String {
    serde_json::to_string(event).expect("events serialize")
}

fn end_of(result: &Result<RunOutcome, BoxError>) -> RunEnd {
    match result {
        Ok(outcome) => {
            let status = match outcome.stop {
                StopReason::Interrupted => RunStatus::Interrupted,
                StopReason::Cancelled => RunStatus::Cancelled,
                _ => RunStatus::Finished,
            };
            let mut end = RunEnd::new(status);
            end.messages = Some(outcome.messages.clone());
            end.state.clone_from(&outcome.state);
            end.interrupts.clone_from(&outcome.interrupts);
            end
        }
        Err(_) => RunEnd::new(RunStatus::Failed),
    }
}

/// Drives `run` and writes what it emits to the log: every batch is committed before anyone can
/// read it, and the next batch gathers while one is written (group commit), so the per-event
/// cost stays one serialization. The last batch, the run's status, the thread's conversation and
/// the interrupts are written in one transaction. The lease is renewed while the run is quiet;
/// if it is lost, the run is cancelled.
pub(super) async fn drive(
    store: RunStore,
    lease: Arc<Lease>,
    run: RunFuture,
    mut events: ChannelReceiver<Event>,
    cancel: CancellationToken,
    mut tracker: RunTracker,
) {
    let mut run = Some(run);
    let mut result = None;
    let mut batch: Vec<String> = Vec::new();
    let mut writing: Option<BoxFuture<'static, Result<u64, StoreError>>> = None;
    let mut closed = false;
    let mut heartbeat = tokio::time::interval(lease.length().max(Duration::from_millis(30)) / 3);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if writing.is_none() && !batch.is_empty() {
            let (store, lease, batch) = (store.clone(), lease.clone(), std::mem::take(&mut batch));
            writing = Some(async move { store.append(&lease, &batch).await }.boxed());
        }
        if result.is_some() && writing.is_none() {
            break;
        }
        tokio::select! {
            done = async { run.as_mut().expect("guarded").await }, if run.is_some() => {
                result = Some(done);
                run = None;
            }
            event = events.next(), if !closed && result.is_none() && batch.len() < MAX_BATCH => {
                match event {
                    Some(event) => batch.push(json(&event)),
                    None => closed = true,
                }
            }
            written = async { writing.as_mut().expect("guarded").await }, if writing.is_some() => {
                writing = None;
                if let Err(error) = written {
                    tracing::error!(run_id = %lease.run_id(), %error, "the run's log cannot be written: the run is cancelled");
                    cancel.cancel();
                    tracker.ended(Ended::Failed(error.to_string()));
                    return;
                }
            }
            _ = heartbeat.tick(), if writing.is_none() && result.is_none() => {
                let (store, lease) = (store.clone(), lease.clone());
                writing = Some(async move { store.renew(&lease).await.map(|()| lease.last_seq()) }.boxed());
            }
        }
    }
    // Everything the run sent is in the channel once it has resolved.
    while let Some(event) = events.try_recv() {
        batch.push(json(&event));
    }
    let result = result.expect("the loop ends when the run has resolved");
    let end = end_of(&result);
    if let Err(error) = store.finish(&lease, &batch, &end).await {
        tracing::error!(run_id = %lease.run_id(), %error, "the run's end cannot be written");
    }
    tracker.ended(match result {
        Ok(outcome) => Ended::Finished(outcome.stop),
        Err(error) => Ended::Failed(error.to_string()),
    });
}
