//! Recovering the runs of instances that died, and of writes that failed.

use std::{
    sync::{Arc, Weak, atomic::Ordering},
    time::Duration,
};

use super::{
    Inner, Interrupts, LogError, LoggedEvent, LostRun, Recovery, RunEnd, RunEnding, RunRecord,
    RunStatus, Runs, SENT_AHEAD,
    driver::{Launch, run_error},
    request::run_request,
    takeover::Progress,
};
use crate::{
    agui::{RunAgentInput, framing::bare_start},
    id::RunId,
};

impl Runs {
    /// Starts, once, the sweeper of this engine: one heartbeat for all this instance's runs every
    /// third of the lease, and the recovery of lost runs (other instances' that stopped beating),
    /// until the shutdown token fires or the engine is dropped. [`begin`](Runs::begin) starts it
    /// (so does the server's router); outside a tokio runtime this does nothing.
    ///
    /// The heartbeat has a task of its own: recovering other instances' runs (a drained
    /// instance hands over all of its at once) never delays it, lest this instance's own runs
    /// look lost meanwhile.
    pub fn sweep(&self) {
        if tokio::runtime::Handle::try_current().is_err()
            || self.inner.sweeping.swap(true, Ordering::AcqRel)
        {
            return;
        }
        tokio::spawn(beat(Arc::downgrade(&self.inner)));
        tokio::spawn(sweep(Arc::downgrade(&self.inner)));
    }
}

/// A third of the lease, until the engine shuts down, hands its runs over or is dropped: each
/// tick, the engine as it is then (or also, with `now`, when it is notified).
async fn every_third_of_the_lease<F>(
    inner: Weak<Inner>,
    now: Option<Arc<tokio::sync::Notify>>,
    mut each: impl FnMut(Arc<Inner>) -> F,
) where
    F: Future<Output = ()>,
{
    let Some((lease, shutdown, handing_over)) = inner.upgrade().map(|inner| {
        (
            inner.config.lease,
            inner.config.shutdown.clone(),
            inner.handing_over.clone(),
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
            () = async { now.as_ref().expect("guarded").notified().await }, if now.is_some() => {}
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        each(inner).await;
    }
}

/// Keeps this instance's runs its own: the heartbeat, and the runs followed here that another
/// instance drives (it must not cancel them as abandoned).
async fn beat(inner: Weak<Inner>) {
    every_third_of_the_lease(inner, None, |inner| async move {
        let lease = inner.config.lease;
        if let Err(error) = inner.log.heartbeat(lease).await {
            tracing::warn!(%error, "the heartbeat of this instance's runs failed");
        }
        if let Some(durable) = inner.log.durable() {
            let followed = inner.hub.followed_not_driven();
            if let Err(error) = durable.followed(&followed, lease).await {
                tracing::warn!(%error, "could not record the runs followed here");
            }
        }
    })
    .await;
}

/// Reads the cancellations asked of another instance whose notification did not arrive, and
/// continues the runs other instances lost (at once when one released its runs).
async fn sweep(inner: Weak<Inner>) {
    let now = inner.upgrade().map(|inner| inner.sweep_now.clone());
    every_third_of_the_lease(inner, now, |inner| async move {
        if let Some(durable) = inner.log.durable() {
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
        if inner.draining.is_cancelled() {
            // A draining instance takes no run over.
            return;
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
    })
    .await;
}

impl Inner {
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
        let progress = Progress::of(&events);
        let input = lost
            .record
            .request
            .as_ref()
            .and_then(|request| serde_json::from_value::<RunAgentInput>(request.clone()).ok())
            .filter(|_| lost.attempts < self.config.max_attempts);
        let Some(input) = input else {
            return self.end_lost(&lost, progress.started()).await;
        };
        let attempt = lost.attempts + 1;
        let continues = !self
            .log
            .interrupts(Interrupts::ResolvedBy(run))
            .await?
            .is_empty();
        // What the run was asked before its own steps: the conversation the bridge shows.
        let asked = run_request(&*self.log, &input, continues).await?.request;
        let bridge: Vec<LoggedEvent> = progress
            .bridge(attempt, &asked)
            .into_iter()
            .map(|event| LoggedEvent::stamped(0, event))
            .collect();
        let Some(recovered) = self.log.recover(&lost, &bridge, Recovery::Take).await? else {
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

    /// Ends a lost run that cannot be continued with a `RUN_ERROR` (`run_lost`), after a
    /// `RUN_STARTED` unless its log holds its (segment's) start.
    async fn end_lost(&self, lost: &LostRun, started: bool) -> Result<(), LogError> {
        let run = &lost.record.run_id;
        let message =
            format!("run `{run}` ended without its owner (the server stopped while it ran)");
        let start = (!started).then(|| bare_start(&lost.record.thread_id, run));
        let terminal: Vec<LoggedEvent> = (start.into_iter())
            .chain([run_error("run_lost", message.clone())])
            .map(|event| LoggedEvent::stamped(0, event))
            .collect();
        let mut end = RunEnd::new(RunStatus::Failed);
        if let Some(notify) = &self.config.notify {
            let input = (lost.record.request.as_ref())
                .and_then(|request| serde_json::from_value::<RunAgentInput>(request.clone()).ok());
            end.notices = notify.notices(&RunEnding {
                run_id: run,
                thread_id: &lost.record.thread_id,
                principal: lost.record.principal.as_deref(),
                status: RunStatus::Failed,
                // Numbered after those its owner may have sent uncommitted (see `RunLog::recover`).
                seq: lost.record.last_seq + SENT_AHEAD + terminal.len() as u64,
                input: input.as_ref(),
                error: Some(("run_lost", &message)),
                interrupts: &[],
            });
        }
        if self
            .log
            .recover(lost, &terminal, Recovery::End(&end))
            .await?
            .is_some()
        {
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
            // A page may stop short at a takeover's gap: the log is read until none is left.
            if page.events.is_empty() {
                return Ok(Some((events, after)));
            }
            events.extend(page.events);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use futures_util::{FutureExt, future::BoxFuture};

    use super::*;
    use crate::{
        agent::Agent,
        id::ThreadId,
        model::scripted::ScriptedModel,
        runs::{
            Deleted, InterruptRecord, Lease, MemoryLog, Page, Recovered, RunEnd, RunLog, RunPage,
            RunQuery, SavedThread, Start, StartError, ThreadChange, ThreadPage, ThreadQuery,
            ThreadRecord, ThreadSummary,
        },
        tool::ToolRouter,
    };

    /// A memory log that counts its heartbeats and takes forever to say which runs are lost,
    /// as a store busy recovering another instance's runs does.
    #[derive(Debug, Default)]
    struct SlowToRecover {
        log: MemoryLog,
        beats: Arc<AtomicUsize>,
    }

    impl RunLog for SlowToRecover {
        fn start<'a>(&'a self, start: &'a Start) -> BoxFuture<'a, Result<Lease, StartError>> {
            self.log.start(start)
        }

        fn write<'a>(
            &'a self,
            lease: &'a Lease,
            events: &'a [LoggedEvent],
            end: Option<&'a RunEnd>,
        ) -> BoxFuture<'a, Result<(), LogError>> {
            self.log.write(lease, events, end)
        }

        fn refuse<'a>(
            &'a self,
            start: &'a Start,
            events: &'a [LoggedEvent],
        ) -> BoxFuture<'a, Result<(), StartError>> {
            self.log.refuse(start, events)
        }

        fn read<'a>(
            &'a self,
            run: &'a RunId,
            after: u64,
            limit: usize,
        ) -> BoxFuture<'a, Result<Option<Page>, LogError>> {
            self.log.read(run, after, limit)
        }

        fn owner(&self) -> &str {
            self.log.owner()
        }

        fn run<'a>(&'a self, run: &'a RunId) -> BoxFuture<'a, Result<Option<RunRecord>, LogError>> {
            self.log.run(run)
        }

        fn thread<'a>(
            &'a self,
            thread: &'a ThreadId,
        ) -> BoxFuture<'a, Result<Option<ThreadRecord>, LogError>> {
            self.log.thread(thread)
        }

        fn save_thread<'a>(
            &'a self,
            saved: SavedThread<'a>,
        ) -> BoxFuture<'a, Result<(), LogError>> {
            self.log.save_thread(saved)
        }

        fn threads<'a>(
            &'a self,
            query: &'a ThreadQuery<'a>,
        ) -> BoxFuture<'a, Result<ThreadPage, LogError>> {
            self.log.threads(query)
        }

        fn runs<'a>(&'a self, query: &'a RunQuery<'a>) -> BoxFuture<'a, Result<RunPage, LogError>> {
            self.log.runs(query)
        }

        fn change_thread<'a>(
            &'a self,
            thread: &'a ThreadId,
            change: &'a ThreadChange,
        ) -> BoxFuture<'a, Result<Option<ThreadSummary>, LogError>> {
            self.log.change_thread(thread, change)
        }

        fn delete_thread<'a>(
            &'a self,
            thread: &'a ThreadId,
        ) -> BoxFuture<'a, Result<Deleted, LogError>> {
            self.log.delete_thread(thread)
        }

        fn interrupts<'a>(
            &'a self,
            filter: Interrupts<'a>,
        ) -> BoxFuture<'a, Result<Vec<InterruptRecord>, LogError>> {
            self.log.interrupts(filter)
        }

        fn heartbeat(&self, lease: Duration) -> BoxFuture<'_, Result<(), LogError>> {
            self.beats.fetch_add(1, Ordering::Relaxed);
            self.log.heartbeat(lease)
        }

        fn durable(&self) -> Option<&dyn super::super::DurableLog> {
            None
        }

        fn lost(&self) -> BoxFuture<'_, Result<Vec<LostRun>, LogError>> {
            std::future::pending().boxed()
        }

        fn recover<'a>(
            &'a self,
            lost: &'a LostRun,
            events: &'a [LoggedEvent],
            recovery: Recovery<'a>,
        ) -> BoxFuture<'a, Result<Option<Recovered>, LogError>> {
            self.log.recover(lost, events, recovery)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_heartbeat_keeps_its_pace_while_lost_runs_are_recovered() {
        let log = SlowToRecover::default();
        let beats = log.beats.clone();
        let runs = Runs::new(Agent::new(ScriptedModel::new(), ToolRouter::new()))
            .lease(Duration::from_secs(3))
            .log(log);
        runs.sweep();
        // Ten leases: a beat every second, whatever the search for lost runs waits on.
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let beats = beats.load(Ordering::Relaxed);
        assert!((30..=31).contains(&beats), "{beats} heartbeats in 30 s");
    }
}
