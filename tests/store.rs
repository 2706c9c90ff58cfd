//! The run store's guarantees, on a real SQLite file and a real PostgreSQL server: the log,
//! followers, one active run per thread, interrupts and their resumes, fencing and recovery.

#[path = "support/stores.rs"]
mod stores;

use std::time::{Duration, SystemTime};

use agent_tower::{
    id::{InterruptId, RunId, ThreadId},
    message::Message,
    run::Interrupt,
    store::{
        InterruptStatus, NewRun, RunEnd, RunStatus, RunStore, StartError, StoreError, args_hash,
    },
};
use futures_util::{StreamExt, TryStreamExt};
use serde_json::json;

fn ids() -> (ThreadId, RunId) {
    (ThreadId::new(), RunId::new())
}

fn events(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!(r#"{{"n":{i}}}"#)).collect()
}

async fn each_store(test: &str) -> Vec<(&'static str, RunStore)> {
    let mut stores = Vec::new();
    for (name, url) in stores::store_urls(test).await {
        let store = RunStore::open(&url)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .poll_interval(Duration::from_millis(50));
        stores.push((name, store));
    }
    stores
}

fn interrupt(call: &str, expires_in: Duration) -> Interrupt {
    Interrupt {
        id: InterruptId::new(),
        tool_call_id: call.into(),
        tool_name: "delete_file".into(),
        arguments: json!({"path": call}),
        expires_at: SystemTime::now() + expires_in,
    }
}

/// A finished run on a fresh thread that stopped at `interrupts`.
async fn interrupted(store: &RunStore, interrupts: Vec<Interrupt>) -> ThreadId {
    let (thread, run) = ids();
    let lease = store
        .start_run(&NewRun::new(thread.clone(), run), &[])
        .await
        .unwrap();
    let mut end = RunEnd::new(RunStatus::Interrupted);
    end.messages = Some(vec![Message::user("clean up")]);
    end.interrupts = interrupts;
    store.finish(&lease, &events(0..1), &end).await.unwrap();
    thread
}

#[tokio::test]
async fn a_follower_joining_mid_run_gets_every_event_once_in_order() {
    for (name, store) in each_store("follow").await {
        let (thread, run) = ids();
        let lease = store
            .start_run(&NewRun::new(thread, run.clone()), &[])
            .await
            .unwrap();
        assert_eq!(store.append(&lease, &events(0..3)).await.unwrap(), 3);

        // Joins after event 2; the writer goes on while it reads.
        let follower = tokio::spawn(store.follow(run.clone(), 2).try_collect::<Vec<_>>());
        for batch in 1..20u32 {
            store
                .append(&lease, &events(batch * 10..batch * 10 + 7))
                .await
                .unwrap();
        }
        let last = store
            .finish(
                &lease,
                &events(1000..1001),
                &RunEnd::new(RunStatus::Finished),
            )
            .await
            .unwrap();
        assert_eq!(last, 3 + 19 * 7 + 1);
        let seen = follower.await.unwrap().unwrap();
        let seqs: Vec<u64> = seen.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (3..=last).collect::<Vec<_>>(), "{name}");
        assert_eq!(seen[0].json, r#"{"n":2}"#, "{name}");
        assert_eq!(seen.last().unwrap().json, r#"{"n":1000}"#, "{name}");

        // A finished run replays to its end and closes; an unknown one closes at once.
        assert_eq!(store.follow(run.clone(), 0).count().await, last as usize);
        assert_eq!(store.follow(run, last).count().await, 0);
        assert_eq!(store.follow("nope".into(), 0).count().await, 0);
    }
}

#[tokio::test]
async fn one_active_run_per_thread() {
    for (name, store) in each_store("busy").await {
        let (thread, run) = ids();
        let lease = store
            .start_run(&NewRun::new(thread.clone(), run.clone()), &[])
            .await
            .unwrap();
        let again = store
            .start_run(&NewRun::new(thread.clone(), RunId::new()), &[])
            .await;
        assert!(
            matches!(again, Err(StartError::Busy(_))),
            "{name}: {again:?}"
        );
        let reused = store
            .start_run(&NewRun::new(ThreadId::new(), run.clone()), &[])
            .await;
        assert!(matches!(reused, Err(StartError::RunExists(_))), "{name}");

        store
            .finish(&lease, &[], &RunEnd::new(RunStatus::Finished))
            .await
            .unwrap();
        store
            .start_run(&NewRun::new(thread.clone(), RunId::new()), &[])
            .await
            .unwrap_or_else(|e| panic!("{name}: a finished run frees the thread: {e}"));
        let record = store.thread(&thread).await.unwrap().unwrap();
        assert_eq!(record.runs.len(), 2, "{name}");
        assert_eq!(record.runs[0].status, RunStatus::Finished, "{name}");
    }
}

#[tokio::test]
async fn interrupts_are_resumed_completely_once_and_idempotently() {
    for (name, store) in each_store("resume").await {
        let (a, b) = (
            interrupt("a", Duration::from_secs(60)),
            interrupt("b", Duration::from_secs(60)),
        );
        let thread = interrupted(&store, vec![a.clone(), b.clone()]).await;
        let pending = store.pending_interrupts(&thread).await.unwrap();
        assert_eq!(pending.len(), 2, "{name}");
        assert_eq!(pending[0].args_hash, args_hash(&json!({"path": "a"})));
        let start = |resume: Vec<(InterruptId, serde_json::Value)>| {
            let store = store.clone();
            let thread = thread.clone();
            async move {
                store
                    .start_run(&NewRun::new(thread, RunId::new()), &resume)
                    .await
            }
        };
        let yes = json!({"status": "resolved", "payload": {"approved": true}});

        let err = start(vec![]).await.unwrap_err();
        assert!(
            matches!(err, StartError::InterruptsPending(ref ids) if ids.len() == 2),
            "{name}: {err}"
        );
        let err = start(vec![(a.id.clone(), yes.clone())]).await.unwrap_err();
        assert!(
            matches!(err, StartError::ResumeMissing(ref ids) if ids == std::slice::from_ref(&b.id)),
            "{name}: {err}"
        );
        let err = start(vec![("other".into(), yes.clone())])
            .await
            .unwrap_err();
        assert!(
            matches!(err, StartError::UnknownInterrupt(_)),
            "{name}: {err}"
        );
        assert_eq!(
            store.pending_interrupts(&thread).await.unwrap().len(),
            2,
            "refusals change nothing"
        );

        // Two resumes at once: exactly one wins.
        let resume = vec![(a.id.clone(), yes.clone()), (b.id.clone(), yes.clone())];
        let (first, second) = tokio::join!(start(resume.clone()), start(resume.clone()));
        let (won, lost) = match (first, second) {
            (Ok(lease), Err(e)) | (Err(e), Ok(lease)) => (lease, e),
            other => panic!("{name}: exactly one resume wins: {other:?}"),
        };
        assert!(
            matches!(
                lost,
                StartError::Busy(_) | StartError::AlreadyResolved { .. }
            ),
            "{name}: {lost}"
        );
        store
            .finish(&won, &[], &RunEnd::new(RunStatus::Finished))
            .await
            .unwrap();

        // The same answer again names the run that applied it; another answer is refused.
        match start(resume).await.unwrap_err() {
            StartError::AlreadyResolved { by_run, same, .. } => {
                assert_eq!(&by_run, won.run_id(), "{name}");
                assert!(same, "{name}");
            }
            other => panic!("{name}: {other}"),
        }
        let no = json!({"status": "resolved", "payload": {"approved": false}});
        let err = start(vec![(a.id.clone(), no.clone()), (b.id.clone(), no)])
            .await
            .unwrap_err();
        assert!(
            matches!(err, StartError::AlreadyResolved { same: false, .. }),
            "{name}: {err}"
        );
        let a = store.interrupt(&a.id).await.unwrap().unwrap();
        assert_eq!(a.status, InterruptStatus::Resolved);
        assert_eq!(a.resolution, Some(yes), "{name}");
        assert_eq!(a.resolved_by_run.as_ref(), Some(won.run_id()), "{name}");
        assert!(
            store
                .interrupts(Some(InterruptStatus::Pending))
                .await
                .unwrap()
                .iter()
                .all(|i| i.thread_id != thread)
        );
    }
}

#[tokio::test]
async fn an_expired_interrupt_cannot_be_resumed() {
    for (name, store) in each_store("expired").await {
        let late = interrupt("a", Duration::ZERO);
        let thread = interrupted(&store, vec![late.clone()]).await;
        let err = store
            .start_run(
                &NewRun::new(thread, RunId::new()),
                &[(late.id.clone(), json!({"status": "resolved"}))],
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StartError::Expired(_)), "{name}: {err}");
    }
}

#[tokio::test]
async fn a_dead_owners_run_is_closed_with_a_terminal_event_and_fenced() {
    for (name, store) in each_store("recover").await {
        let (thread, run) = ids();
        // A lease that expires at once: as if the owner died right after these appends.
        let lease = store
            .start_run(
                &NewRun::new(thread.clone(), run.clone()).lease(Duration::ZERO),
                &[],
            )
            .await
            .unwrap();
        store.append(&lease, &events(0..2)).await.unwrap();
        let pending = interrupted(&store, vec![interrupt("x", Duration::from_secs(60))]).await;

        let follower = tokio::spawn(store.follow(run.clone(), 0).try_collect::<Vec<_>>());
        let closed = store
            .close_expired(|run| format!(r#"{{"lost":"{}"}}"#, run.run_id))
            .await
            .unwrap();
        assert!(closed.iter().any(|r| r.run_id == run), "{name}");
        let seen = follower.await.unwrap().unwrap();
        assert_eq!(seen.len(), 3, "{name}");
        assert_eq!(seen[2].json, format!(r#"{{"lost":"{run}"}}"#));

        let late = store.append(&lease, &events(5..6)).await;
        assert!(
            matches!(late, Err(StoreError::Fenced(_))),
            "{name}: {late:?}"
        );
        assert_eq!(
            store.run(&run).await.unwrap().unwrap().status,
            RunStatus::Failed
        );
        assert!(
            store
                .close_expired(|_| String::new())
                .await
                .unwrap()
                .iter()
                .all(|r| r.run_id != run)
        );
        assert_eq!(
            store.pending_interrupts(&pending).await.unwrap().len(),
            1,
            "{name}: interrupts stay"
        );
        store
            .start_run(&NewRun::new(thread, RunId::new()), &[])
            .await
            .unwrap_or_else(|e| panic!("{name}: the thread is free again: {e}"));
    }
}

#[tokio::test]
async fn a_thread_keeps_its_conversation_and_state() {
    for (name, store) in each_store("thread").await {
        let thread = ThreadId::new();
        assert!(store.thread(&thread).await.unwrap().is_none());
        let messages = vec![
            Message::user("hi"),
            Message::assistant("m-1".into(), "hello"),
        ];
        store
            .save_thread(&thread, &messages, Some(&json!({"n": 1})))
            .await
            .unwrap();
        let saved = store.thread(&thread).await.unwrap().unwrap();
        assert_eq!(saved.messages, messages, "{name}");
        assert_eq!(saved.state, Some(json!({"n": 1})), "{name}");
    }
}

#[tokio::test]
async fn a_file_store_survives_reopening() {
    let url = stores::sqlite("reopen");
    let (thread, run) = ids();
    {
        let store = RunStore::open(&url).await.unwrap();
        let lease = store
            .start_run(&NewRun::new(thread, run.clone()), &[])
            .await
            .unwrap();
        store
            .finish(&lease, &events(0..4), &RunEnd::new(RunStatus::Finished))
            .await
            .unwrap();
    }
    let store = RunStore::open(&url).await.unwrap();
    let all: Vec<_> = store.follow(run, 0).try_collect().await.unwrap();
    assert_eq!(all.len(), 4);
}

#[tokio::test]
async fn a_batch_of_any_size_is_logged_whole_and_in_order() {
    for (name, store) in each_store("batch").await {
        let (thread, run) = ids();
        let lease = store
            .start_run(&NewRun::new(thread, run.clone()), &[])
            .await
            .unwrap();
        // 600 = 256 + 256 + 64 + 16 + 8 rows, then 1 and 3.
        let mut written = Vec::new();
        for range in [0..600, 600..601, 601..604] {
            let batch = events(range);
            store.append(&lease, &batch).await.unwrap();
            written.extend(batch);
        }
        let logged = store.events_after(&run, 0, 10_000).await.unwrap();
        let seqs: Vec<u64> = logged.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=604).collect::<Vec<_>>(), "{name}");
        let json: Vec<String> = logged.into_iter().map(|e| e.json).collect();
        assert_eq!(json, written, "{name}");
    }
}
