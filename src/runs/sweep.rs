//! Recovering the runs of instances that died, and of writes that failed.

use std::{
    sync::{Arc, Weak, atomic::Ordering},
    time::Duration,
};

use super::{
    Inner, Interrupts, LogError, LoggedEvent, LostRun, RunRecord, Runs,
    driver::{Launch, run_error},
    request::run_request,
    takeover::Progress,
};
use crate::{agui::RunAgentInput, id::RunId, run::RunService};

impl<A> Runs<A>
where
    A: RunService,
{
    /// Starts, once, the sweeper of this engine: one heartbeat for all this instance's runs every
    /// third of the lease, and the recovery of lost runs (other instances' that stopped beating),
    /// until the shutdown token fires or the engine is dropped. [`begin`](Runs::begin) starts it
    /// (so does the server's router); outside a tokio runtime this does nothing.
    pub fn sweep(&self) {
        if tokio::runtime::Handle::try_current().is_err()
            || self.inner.sweeping.swap(true, Ordering::AcqRel)
        {
            return;
        }
        tokio::spawn(sweep(Arc::downgrade(&self.inner)));
    }
}

async fn sweep<A>(inner: Weak<Inner<A>>)
where
    A: RunService,
{
    let Some((lease, shutdown, handing_over, draining, now)) = inner.upgrade().map(|inner| {
        (
            inner.config.lease,
            inner.config.shutdown.clone(),
            inner.handing_over.clone(),
            inner.draining.clone(),
            inner.sweep_now.clone(),
        )
    }) else {
        return;
    };
    let mut tick = tokio::time::interval(lease / 3);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            // Its runs are released: no heartbeat may claim them again.
            () = handing_over.cancelled() => return,
            _ = tick.tick() => {}
            // Another instance released its runs: they are continued at once.
            () = now.notified() => {}
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if let Err(error) = inner.log.heartbeat(lease).await {
            tracing::warn!(%error, "the heartbeat of this instance's runs failed");
        }
        // Runs followed here that another instance drives: it must not cancel them as
        // abandoned.
        if let Some(durable) = inner.log.durable() {
            let followed = inner.hub.followed_not_driven();
            if let Err(error) = durable.followed(&followed, lease).await {
                tracing::warn!(%error, "could not record the runs followed here");
            }
            // Cancellations asked of another instance whose notification did not arrive.
            match durable.cancels_requested().await {
                Ok(runs) => {
                    for run in runs {
                        inner.hub.cancel(&run);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "could not read the cancellations asked for");
                }
            }
        }
        if draining.is_cancelled() {
            // A draining instance takes no run over.
            continue;
        }
        match inner.log.lost().await {
            Ok(lost) => {
                for run in lost {
                    if let Err(error) = inner.recover(&run).await {
                        tracing::warn!(run_id = %run.record.run_id, %error, "a lost run could not be recovered");
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "could not look for lost runs"),
        }
    }
}

impl<A> Inner<A>
where
    A: RunService,
{
    /// Recovers `lost` as soon as the log answers (retrying, backing off, until it is done or the
    /// engine shuts down).
    pub(super) fn settle(self: &Arc<Self>, lost: LostRun) {
        let inner = self.clone();
        tokio::spawn(async move {
            let shutdown = inner.config.shutdown.clone();
            let mut wait = Duration::from_millis(250);
            loop {
                match inner.recover(&lost).await {
                    Ok(()) => return,
                    Err(error) => {
                        tracing::debug!(run_id = %lost.record.run_id, %error, "the run is not settled yet");
                    }
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        });
    }

    /// Continues a run nobody drives any more, here, from what its log says it had done (see
    /// [`takeover`](super::takeover)); a run that cannot be continued (it kept no request, or
    /// used up its attempts) ends with a `RUN_ERROR` (`run_lost`).
    pub(super) async fn recover(self: &Arc<Self>, lost: &LostRun) -> Result<(), LogError> {
        let run = &lost.record.run_id;
        if self.hub.is_driven(run) {
            // Started again here meanwhile (the same request retried): nothing is lost.
            return Ok(());
        }
        let Some((events, last_seq)) = self.read_all(run).await? else {
            return Ok(());
        };
        // Continued from the end of the log as read now: if its owner writes more meanwhile
        // (it was not dead), the log refuses the takeover and the next sweep reads again.
        let lost = LostRun {
            record: RunRecord {
                last_seq,
                ..lost.record.clone()
            },
            attempts: lost.attempts,
        };
        let input = lost
            .record
            .request
            .as_ref()
            .and_then(|request| serde_json::from_value::<RunAgentInput>(request.clone()).ok())
            .filter(|_| lost.attempts < self.config.max_attempts);
        let Some(input) = input else {
            return self.end_lost(&lost).await;
        };
        let progress = Progress::of(&events);
        let attempt = lost.attempts + 1;
        let continues = !self
            .log
            .interrupts(Interrupts::ResolvedBy(run))
            .await?
            .is_empty();
        // What the run was asked before its own steps: the conversation the bridge shows.
        let asked = run_request(&*self.log, &input, continues)
            .await?
            .request
            .messages;
        let bridge: Vec<LoggedEvent> = progress
            .bridge(attempt, &asked)
            .into_iter()
            .map(|event| LoggedEvent::stamped(0, event))
            .collect();
        let Some(recovered) = self.log.recover(&lost, &bridge, true).await? else {
            return Ok(());
        };
        self.hub.wake(run);
        let Some(lease) = recovered.lease else {
            return Ok(());
        };
        tracing::warn!(
            run_id = %run,
            attempt,
            messages_kept = progress.messages.len(),
            "continuing a run whose server stopped"
        );
        self.config.observer.on_recovered(true);
        // Who asked is not kept: the run goes on for whom it belongs to.
        let principal = lease
            .principal
            .as_deref()
            .and_then(|name| crate::context::Principal::user(name).ok());
        self.launch(Launch {
            lease,
            input,
            continues,
            attempts: attempt,
            principal,
            takeover: Some(progress),
            // What a door lent the run stayed with the process that began it.
            attach: None,
            // A recovered run is not new load: it takes no permit.
            _permit: None,
            _admitted: None,
        });
        Ok(())
    }

    /// Ends a lost run that cannot be continued with a `RUN_ERROR` (`run_lost`).
    async fn end_lost(&self, lost: &LostRun) -> Result<(), LogError> {
        let run = &lost.record.run_id;
        let message =
            format!("run `{run}` ended without its owner (the server stopped while it ran)");
        let terminal = [LoggedEvent::stamped(0, run_error("run_lost", message))];
        if self.log.recover(lost, &terminal, false).await?.is_some() {
            self.hub.wake(run);
            self.config.observer.on_recovered(false);
            tracing::warn!(run_id = %run, thread_id = %lost.record.thread_id, "closed a run whose owner died");
        }
        Ok(())
    }

    /// Every event of `run`, and its last sequence number; `None` for an unknown run.
    async fn read_all(&self, run: &RunId) -> Result<Option<(Vec<LoggedEvent>, u64)>, LogError> {
        const PAGE: usize = 1024;
        let mut events = Vec::new();
        loop {
            let after = events.last().map_or(0, |e: &LoggedEvent| e.seq);
            let Some(page) = self.log.read(run, after, PAGE).await? else {
                return Ok(None);
            };
            let done = page.events.len() < PAGE;
            events.extend(page.events);
            if done {
                let last = events.last().map_or(0, |e| e.seq);
                return Ok(Some((events, last)));
            }
        }
    }
}
