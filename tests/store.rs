//! The run log's contract, on every backend: the bounded in-memory log, a real SQLite file and a
//! real PostgreSQL server. One active run per thread, the same request told apart from another,
//! interrupts resumed completely and once, an interrupted run continued under its own id,
//! fencing, and the recovery of a dead instance's runs.

use crate::support::stores;

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use agent_tower::{
    context::Principal,
    id::{InterruptId, RunId, ThreadId},
    message::Message,
    permission::Decision,
    run::Interrupt,
    runs::{
        DurableLog, FirstTurn, InterruptStatus, Interrupts, Lease, LogError, LoggedEvent, LostRun,
        MemoryLog, Notice, NoticeStatus, Recovery, RunEnd, RunLog, RunRecord, RunStatus,
        SENT_AHEAD, SavedThread, Settle, Start, StartError,
    },
    store::{
        COMMIT_WITHIN, Deleted, Durability, RunStore, ThreadChange, ThreadCursor, ThreadQuery,
    },
};
use serde_json::json;

fn ids() -> (ThreadId, RunId) {
    (ThreadId::new(), RunId::new())
}

fn events(seqs: std::ops::RangeInclusive<u64>) -> Vec<LoggedEvent> {
    seqs.map(|seq| LoggedEvent::from_json(seq, format!(r#"{{"n":{seq}}}"#)))
        .collect()
}

/// The log of every backend: memory, a fresh SQLite file, a fresh PostgreSQL schema.
async fn each_log(test: &str) -> Vec<(&'static str, Arc<dyn RunLog>)> {
    let mut logs: Vec<(&'static str, Arc<dyn RunLog>)> =
        vec![("memory", Arc::new(MemoryLog::new()))];
    for (name, url) in stores::store_urls(test).await {
        let store = RunStore::open(&url)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        logs.push((name, Arc::new(store)));
    }
    logs
}

/// The SQL stores only (several instances on one database).
async fn each_store(test: &str) -> Vec<(&'static str, String)> {
    stores::store_urls(test).await
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

fn start(thread: &ThreadId, run: &RunId, resume: Vec<(InterruptId, Decision)>) -> Start {
    let mut start = Start::new(thread.clone(), run.clone());
    start.request_hash = format!("hash-of-{run}-{}", resume.len());
    start.resume = resume;
    start
}

/// Ends the run of `lease` with one event, finished.
async fn finish(log: &dyn RunLog, lease: &Lease) {
    let end = RunEnd::new(RunStatus::Finished);
    log.write(lease, &events(1..=1), Some(&end)).await.unwrap();
}

/// A run on a fresh thread that finished with two events; its thread and id.
async fn finished(log: &dyn RunLog) -> (ThreadId, RunId) {
    let (thread, run) = ids();
    let lease = log.start(&start(&thread, &run, vec![])).await.unwrap();
    log.write(
        &lease,
        &events(1..=2),
        Some(&RunEnd::new(RunStatus::Finished)),
    )
    .await
    .unwrap();
    (thread, run)
}

/// A run on a fresh thread that ended at `interrupts`; its thread and id.
async fn interrupted(log: &dyn RunLog, interrupts: Vec<Interrupt>) -> (ThreadId, RunId) {
    let (thread, run) = ids();
    let lease = log.start(&start(&thread, &run, vec![])).await.unwrap();
    let mut end = RunEnd::new(RunStatus::Interrupted);
    end.messages = Some(vec![Message::user("clean up")]);
    end.interrupts = interrupts;
    log.write(&lease, &events(1..=2), Some(&end)).await.unwrap();
    (thread, run)
}

#[tokio::test]
async fn a_log_is_read_back_whole_and_in_order() {
    for (name, log) in each_log("read").await {
        let (thread, run) = ids();
        let lease = log.start(&start(&thread, &run, vec![])).await.unwrap();
        assert_eq!(lease.last_seq, 0);
        // More than a chunk of the SQL stores holds (512), then 1 and 3.
        let mut written = Vec::new();
        for range in [1..=600, 601..=601, 602..=604] {
            let batch = events(range);
            log.write(&lease, &batch, None).await.unwrap();
            written.extend(batch);
        }
        let page = log.read(&run, 0, 10_000).await.unwrap().unwrap();
        assert_eq!(
            (page.status, page.last_seq),
            (RunStatus::Running, 604),
            "{name}"
        );
        let json: Vec<&str> = page.events.iter().map(LoggedEvent::json_str).collect();
        let expected: Vec<&str> = written.iter().map(LoggedEvent::json_str).collect();
        assert_eq!(json, expected, "{name}");
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=604).collect::<Vec<_>>(), "{name}");

        // Pages of 7 from anywhere, across every boundary between writes and chunks.
        for from in [0, 1, 505, 510, 511, 512, 513, 598, 600] {
            let mut after = from;
            let mut read = Vec::new();
            while after < 604 {
                let page = log.read(&run, after, 7).await.unwrap().unwrap();
                assert!(
                    (1..=7).contains(&page.events.len()),
                    "{name}: a page of {} after {after}",
                    page.events.len()
                );
                after = page.events.last().unwrap().seq;
                read.extend(page.events);
            }
            let seqs: Vec<u64> = read.iter().map(|e| e.seq).collect();
            assert_eq!(seqs, (from + 1..=604).collect::<Vec<_>>(), "{name}");
            assert_eq!(read, written[from as usize..], "{name}");
        }

        let after = log.read(&run, 600, 2).await.unwrap().unwrap();
        assert_eq!(
            after.events,
            events(601..=602),
            "{name}: a page after a point"
        );
        log.write(
            &lease,
            &events(605..=605),
            Some(&RunEnd::new(RunStatus::Finished)),
        )
        .await
        .unwrap();
        let ended = log.read(&run, 605, 10).await.unwrap().unwrap();
        assert!(ended.events.is_empty(), "{name}");
        assert_eq!(
            (ended.status, ended.last_seq),
            (RunStatus::Finished, 605),
            "{name}"
        );
        assert!(
            log.read(&"nope".into(), 0, 10).await.unwrap().is_none(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_log_written_at_any_durability_is_read_whole_by_another_instance() {
    for (name, url) in each_store("durability").await {
        let store = RunStore::open(&url).await.unwrap();
        assert_eq!(store.sends_ahead(), None, "{name}: by default");
        store.durability(Durability::Relaxed);
        assert_eq!(store.sends_ahead(), None, "{name}: committed before sent");
        let (thread, run) = ids();
        let lease = store.start(&start(&thread, &run, vec![])).await.unwrap();
        store.write(&lease, &events(1..=3), None).await.unwrap();
        store.durability(Durability::Full);
        let end = RunEnd::new(RunStatus::Finished);
        store
            .write(&lease, &events(4..=5), Some(&end))
            .await
            .unwrap();
        store.durability(Durability::Eager);
        assert_eq!(store.sends_ahead(), Some(COMMIT_WITHIN), "{name}");
        let (_, second) = finished(&store).await;

        let other = RunStore::open(&url).await.unwrap();
        let page = other.read(&run, 0, 100).await.unwrap().unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(
            (page.status, seqs),
            (RunStatus::Finished, vec![1, 2, 3, 4, 5]),
            "{name}"
        );
        let page = other.read(&second, 0, 100).await.unwrap().unwrap();
        assert_eq!(page.status, RunStatus::Finished, "{name}");
    }
}

#[tokio::test]
async fn writes_are_fenced_to_the_runs_end() {
    for (name, log) in each_log("fence").await {
        let (thread, run) = ids();
        let lease = log.start(&start(&thread, &run, vec![])).await.unwrap();
        log.write(&lease, &events(1..=2), None).await.unwrap();
        let gap = log.write(&lease, &events(4..=4), None).await;
        assert!(matches!(gap, Err(LogError::Fenced(_))), "{name}: {gap:?}");
        let again = log.write(&lease, &events(2..=2), None).await;
        assert!(
            matches!(again, Err(LogError::Fenced(_))),
            "{name}: written once"
        );
        log.write(
            &lease,
            &events(3..=3),
            Some(&RunEnd::new(RunStatus::Finished)),
        )
        .await
        .unwrap();
        let late = log.write(&lease, &events(4..=4), None).await;
        assert!(matches!(late, Err(LogError::Fenced(_))), "{name}: {late:?}");
        assert_eq!(
            log.read(&run, 0, 10).await.unwrap().unwrap().last_seq,
            3,
            "{name}"
        );
    }
}

#[tokio::test]
async fn one_active_run_per_thread_and_a_run_id_once() {
    for (name, log) in each_log("busy").await {
        let (thread, run) = ids();
        let first = start(&thread, &run, vec![]);
        let lease = log.start(&first).await.unwrap();
        let other = RunId::new();
        match log.start(&start(&thread, &other, vec![])).await {
            Err(StartError::Busy { active, .. }) => assert_eq!(active, Some(run.clone()), "{name}"),
            other => panic!("{name}: {other:?}"),
        }
        // The same request again, and another request under the same id.
        match log.start(&first).await {
            Err(StartError::Exists {
                same: true,
                from: 0,
                ..
            }) => {}
            other => panic!("{name}: {other:?}"),
        }
        let mut different = start(&ThreadId::new(), &run, vec![]);
        different.request_hash = "another".into();
        match log.start(&different).await {
            Err(StartError::Exists { same: false, .. }) => {}
            other => panic!("{name}: {other:?}"),
        }

        finish(&*log, &lease).await;
        log.start(&start(&thread, &other, vec![]))
            .await
            .unwrap_or_else(|e| panic!("{name}: a finished run frees the thread: {e}"));
        let record = log.thread(&thread).await.unwrap().unwrap();
        assert_eq!(record.runs.len(), 2, "{name}");
        assert_eq!(record.runs[0].status, RunStatus::Finished, "{name}");
    }
}

#[tokio::test]
async fn interrupts_are_resumed_completely_and_once() {
    for (name, log) in each_log("resume").await {
        let (a, b) = (
            interrupt("a", Duration::from_secs(60)),
            interrupt("b", Duration::from_secs(60)),
        );
        let (thread, _) = interrupted(&*log, vec![a.clone(), b.clone()]).await;
        let pending = log
            .interrupts(Interrupts::PendingOf(&thread))
            .await
            .unwrap();
        assert_eq!(pending.len(), 2, "{name}");
        // SHA-256 of `{"path":"a"}`, the arguments' canonical JSON.
        assert_eq!(
            pending[0].args_hash,
            "fde64ffe7a4a0bbd5d2fe2c294b795808c14bcb57a1d08f1c9dcd59871a020f4"
        );
        let yes = Decision::Approve;
        let try_start = |resume: Vec<(InterruptId, Decision)>| {
            let (log, thread) = (log.clone(), thread.clone());
            async move { log.start(&start(&thread, &RunId::new(), resume)).await }
        };

        let err = try_start(vec![]).await.unwrap_err();
        assert!(
            matches!(err, StartError::InterruptsPending(ref ids) if ids.len() == 2),
            "{name}: {err}"
        );
        let err = try_start(vec![(a.id.clone(), yes.clone())])
            .await
            .unwrap_err();
        assert!(
            matches!(err, StartError::ResumeMissing(ref ids) if ids == std::slice::from_ref(&b.id)),
            "{name}: {err}"
        );
        let err = try_start(vec![("other".into(), yes.clone())])
            .await
            .unwrap_err();
        assert!(
            matches!(err, StartError::UnknownInterrupt(_)),
            "{name}: {err}"
        );
        assert_eq!(
            log.interrupts(Interrupts::PendingOf(&thread))
                .await
                .unwrap()
                .len(),
            2,
            "{name}: refusals change nothing"
        );

        // Two resumes at once: exactly one wins.
        let resume = vec![(a.id.clone(), yes.clone()), (b.id.clone(), yes.clone())];
        let (first, second) = tokio::join!(try_start(resume.clone()), try_start(resume.clone()));
        let (won, lost) = match (first, second) {
            (Ok(lease), Err(e)) | (Err(e), Ok(lease)) => (lease, e),
            other => panic!("{name}: exactly one resume wins: {other:?}"),
        };
        assert!(
            matches!(
                lost,
                StartError::Busy { .. } | StartError::AlreadyResolved { .. }
            ),
            "{name}: {lost}"
        );
        log.write(
            &won,
            &events(1..=1),
            Some(&RunEnd::new(RunStatus::Finished)),
        )
        .await
        .unwrap();

        // Answered again, by any answer: refused, naming the run that applied the first.
        match try_start(resume).await.unwrap_err() {
            StartError::AlreadyResolved { by_run, .. } => assert_eq!(by_run, won.run_id, "{name}"),
            other => panic!("{name}: {other}"),
        }
        let a = log
            .interrupts(Interrupts::Id(&a.id))
            .await
            .unwrap()
            .remove(0);
        assert_eq!(a.status, InterruptStatus::Resolved);
        assert_eq!(a.resolution, Some(yes), "{name}");
        assert_eq!(a.resolved_by_run.as_ref(), Some(&won.run_id), "{name}");
        let applied = log
            .interrupts(Interrupts::ResolvedBy(&won.run_id))
            .await
            .unwrap();
        assert_eq!(applied.len(), 2, "{name}");
        assert!(
            log.interrupts(Interrupts::All(Some(InterruptStatus::Pending)))
                .await
                .unwrap()
                .iter()
                .all(|i| i.thread_id != thread)
        );
    }
}

#[tokio::test]
async fn an_expired_interrupt_cannot_be_resumed() {
    for (name, log) in each_log("expired").await {
        let late = interrupt("a", Duration::ZERO);
        let (thread, _) = interrupted(&*log, vec![late.clone()]).await;
        let resume = vec![(late.id.clone(), Decision::Approve)];
        let err = log
            .start(&start(&thread, &RunId::new(), resume))
            .await
            .unwrap_err();
        assert!(matches!(err, StartError::Expired(_)), "{name}: {err}");
    }
}

#[tokio::test]
async fn an_interrupted_run_resumed_under_its_own_id_goes_on() {
    for (name, log) in each_log("continue").await {
        let asked = interrupt("a", Duration::from_secs(60));
        let (thread, run) = interrupted(&*log, vec![asked.clone()]).await;
        let resume = start(&thread, &run, vec![(asked.id.clone(), Decision::Approve)]);
        let lease = log.start(&resume).await.unwrap();
        assert_eq!(
            lease.last_seq, 2,
            "{name}: the log goes on after the interrupt"
        );
        match log.start(&resume).await {
            Err(StartError::Exists {
                same: true,
                from: 2,
                ..
            }) => {}
            other => panic!("{name}: the same resume replays what it started: {other:?}"),
        }
        log.write(
            &lease,
            &events(3..=4),
            Some(&RunEnd::new(RunStatus::Finished)),
        )
        .await
        .unwrap();
        let page = log.read(&run, 0, 10).await.unwrap().unwrap();
        assert_eq!(
            (page.events.len(), page.status),
            (4, RunStatus::Finished),
            "{name}"
        );
        let answered = log.interrupts(Interrupts::Id(&asked.id)).await.unwrap();
        assert_eq!(answered[0].resolved_by_run.as_ref(), Some(&run), "{name}");

        // A run that did not stop at the interrupt cannot be continued with it.
        let other = interrupt("b", Duration::from_secs(60));
        let (thread, first) = interrupted(&*log, vec![other.clone()]).await;
        let (_, stranger) = interrupted(&*log, vec![]).await;
        let answer = vec![(other.id.clone(), Decision::Approve)];
        let err = log
            .start(&start(&thread, &stranger, answer))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StartError::Exists { same: false, .. }),
            "{name}: {err}"
        );
        assert_eq!(
            log.run(&first).await.unwrap().unwrap().status,
            RunStatus::Interrupted,
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_refused_run_reads_like_any_other() {
    for (name, log) in each_log("refused").await {
        let (thread, run) = ids();
        let refused = start(&thread, &run, vec![]);
        log.refuse(&refused, &events(1..=2)).await.unwrap();
        let page = log.read(&run, 0, 10).await.unwrap().unwrap();
        assert_eq!(
            (page.events.len(), page.status),
            (2, RunStatus::Failed),
            "{name}"
        );
        match log.refuse(&refused, &events(1..=2)).await {
            Err(StartError::Exists { same: true, .. }) => {}
            other => panic!("{name}: {other:?}"),
        }
        log.start(&start(&thread, &RunId::new(), vec![]))
            .await
            .unwrap_or_else(|e| panic!("{name}: a refusal does not hold the thread: {e}"));
    }
}

#[tokio::test]
async fn a_thread_keeps_its_conversation_and_state() {
    for (name, log) in each_log("thread").await {
        let thread = ThreadId::new();
        assert!(log.thread(&thread).await.unwrap().is_none());
        let messages = vec![
            Message::user("hi"),
            Message::assistant("m-1".into(), "hello"),
        ];
        let state = json!({"n": 1});
        log.save_thread(SavedThread::new(&thread, &messages).state(Some(&state)))
            .await
            .unwrap();
        let saved = log.thread(&thread).await.unwrap().unwrap();
        assert_eq!(saved.messages, messages, "{name}");
        assert_eq!(saved.state, Some(state), "{name}");
    }
}

#[tokio::test]
async fn threads_are_listed_by_principal_and_workspace_named_archived_searched_and_deleted() {
    for (name, url) in each_store("sessions").await {
        let store = RunStore::open(&url).await.unwrap();
        let save = async |thread: &ThreadId, who: &str, dir: &str, prompt: &str| {
            let messages = vec![Message::user(prompt)];
            let saved = SavedThread::new(thread, &messages)
                .principal(Some(who))
                .workspace(Some(dir));
            store.save_thread(saved).await.unwrap();
        };
        // Saved within one millisecond, sessions are ordered by id: the first one's sorts last,
        // so that once saved again it is the newest whatever the clock says.
        let mut threads: Vec<ThreadId> = (0..5).map(|_| ThreadId::new()).collect();
        threads[0] = ThreadId::from(format!("z-{}", uuid::Uuid::now_v7()).as_str());
        for (i, thread) in threads.iter().enumerate() {
            let dir = if i % 2 == 0 { "/work/a" } else { "/work/b" };
            save(thread, "alice", dir, &format!("task {i}\nmore detail")).await;
        }
        save(&ThreadId::new(), "bob", "/work/a", "bob's").await;
        // A web thread (no workspace) is no editor's session.
        let plain = vec![Message::user("from the web")];
        let web = ThreadId::new();
        let web_saved = SavedThread::new(&web, &plain).principal(Some("alice"));
        store.save_thread(web_saved).await.unwrap();
        // Saved again, the first is now the newest.
        save(&threads[0], "alice", "/work/a", "task 0 again").await;

        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let query = ThreadQuery::new(2)
                .principal(Some("alice"))
                .sessions(None)
                .after(after.as_ref());
            let page = store.threads(&query).await.unwrap();
            assert!(page.threads.len() <= 2, "{name}");
            seen.extend(page.threads);
            match page.next {
                Some(next) => after = Some(next.to_string().parse::<ThreadCursor>().unwrap()),
                None => break,
            }
        }
        let listed: Vec<&ThreadId> = seen.iter().map(|t| &t.thread_id).collect();
        assert_eq!(
            listed.len(),
            5,
            "{name}: alice's sessions, each once: {seen:?}"
        );
        assert_eq!(listed[0], &threads[0], "{name}: the newest first");
        assert_eq!(seen[0].title.as_deref(), Some("task 0 again"), "{name}");
        assert!(
            seen.windows(2).all(|w| w[0].updated_at >= w[1].updated_at),
            "{name}"
        );
        assert_eq!(seen[0].principal.as_deref(), Some("alice"));
        let in_b = ThreadQuery::new(10)
            .principal(Some("alice"))
            .sessions(Some("/work/b"));
        let in_b = store.threads(&in_b).await.unwrap();
        assert_eq!(in_b.threads.len(), 2, "{name}");
        assert!(
            in_b.threads
                .iter()
                .all(|t| t.workspace.as_deref() == Some("/work/b"))
        );
        assert_eq!(in_b.threads[1].title.as_deref(), Some("task 1"), "{name}");
        let sessions = ThreadQuery::new(10).sessions(None);
        let everyone = store.threads(&sessions).await.unwrap();
        assert_eq!(everyone.threads.len(), 6, "{name}: with bob's");
        assert!("nonsense".parse::<ThreadCursor>().is_err());

        // Every thread of alice's, the web one too.
        let alices = |query: ThreadQuery<'static>| {
            let store = &store;
            async move {
                let page = store
                    .threads(&query.principal(Some("alice")))
                    .await
                    .unwrap();
                page.threads
                    .into_iter()
                    .map(|t| (t.thread_id, t.title.unwrap_or_default()))
                    .collect::<Vec<_>>()
            }
        };
        let all = alices(ThreadQuery::new(10)).await;
        assert_eq!(all.len(), 6, "{name}: {all:?}");
        assert!(
            all.contains(&(web.clone(), "from the web".to_owned())),
            "{name}"
        );

        // Named: listed by its name, in its place (when it last changed stays).
        let before = store
            .threads(&ThreadQuery::new(10))
            .await
            .unwrap()
            .threads
            .into_iter()
            .find(|t| t.thread_id == web)
            .unwrap()
            .updated_at;
        let named = ThreadChange::new().name(Some("50% off_sale".to_owned()));
        let summary = store.change_thread(&web, &named).await.unwrap().unwrap();
        assert_eq!(summary.title.as_deref(), Some("50% off_sale"), "{name}");
        assert_eq!(summary.updated_at, before, "{name}");
        assert!(!summary.archived, "{name}");
        for (text, expected) in [("OFF", 1), ("%", 1), ("_", 1), ("task", 5), ("", 6)] {
            let found = alices(ThreadQuery::new(10).search(Some(text))).await;
            assert_eq!(found.len(), expected, "{name}: `{text}` finds {found:?}");
        }
        assert_eq!(
            alices(ThreadQuery::new(10).search(Some("off"))).await[0].0,
            web,
            "{name}"
        );

        // A suggested name (a model's title) names a thread nobody named, never one a person did.
        let suggested = ThreadChange::new().suggested_name("Tasks of the day".to_owned());
        let kept = store
            .change_thread(&web, &suggested)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(kept.title.as_deref(), Some("50% off_sale"), "{name}");
        let titled = store.change_thread(&threads[3], &suggested).await;
        let titled = titled.unwrap().unwrap().title;
        assert_eq!(titled.as_deref(), Some("Tasks of the day"), "{name}");
        let untitled = ThreadChange::new().name(None);
        store.change_thread(&threads[3], &untitled).await.unwrap();

        // Archived: out of the everyday list, in the archive; then back.
        let archive = ThreadChange::new().archived(true);
        let archived = store.change_thread(&threads[2], &archive).await.unwrap();
        assert!(archived.unwrap().archived, "{name}");
        let active = alices(ThreadQuery::new(10).archived(Some(false))).await;
        assert_eq!(active.len(), 5, "{name}");
        assert!(active.iter().all(|(id, _)| id != &threads[2]), "{name}");
        let shelf = alices(ThreadQuery::new(10).archived(Some(true))).await;
        assert_eq!(shelf, [(threads[2].clone(), "task 2".to_owned())], "{name}");
        let back = ThreadChange::new().archived(false).name(None);
        store.change_thread(&threads[2], &back).await.unwrap();
        store.change_thread(&web, &back).await.unwrap();
        let all = alices(ThreadQuery::new(10).archived(Some(false))).await;
        assert_eq!(all.len(), 6, "{name}");
        assert!(
            all.contains(&(web.clone(), "from the web".to_owned())),
            "{name}"
        );
        let unknown = store.change_thread(&ThreadId::new(), &archive).await;
        assert_eq!(unknown.unwrap(), None, "{name}");

        // Deleted: gone from the list and the log; a thread with a running run is not.
        assert_eq!(
            store.delete_thread(&threads[1]).await.unwrap(),
            Deleted::Deleted
        );
        assert!(store.thread(&threads[1]).await.unwrap().is_none(), "{name}");
        assert_eq!(
            store.delete_thread(&threads[1]).await.unwrap(),
            Deleted::Unknown
        );
        let (thread, run) = ids();
        store.start(&start(&thread, &run, vec![])).await.unwrap();
        assert_eq!(store.delete_thread(&thread).await.unwrap(), Deleted::Busy);
        assert!(store.run(&run).await.unwrap().is_some(), "{name}: kept");
    }
}

#[tokio::test]
async fn a_cancellation_asked_of_one_instance_reaches_the_one_that_drives_the_run() {
    for (name, url) in each_store("cancel").await {
        let (driver, asked) = (
            RunStore::open(&url).await.unwrap(),
            RunStore::open(&url).await.unwrap(),
        );
        let (thread, run) = ids();
        let lease = driver.start(&start(&thread, &run, vec![])).await.unwrap();
        assert!(asked.request_cancel(&run).await.unwrap(), "{name}: running");
        assert_eq!(
            driver.cancels_requested().await.unwrap(),
            std::slice::from_ref(&run),
            "{name}"
        );
        assert!(
            asked.cancels_requested().await.unwrap().is_empty(),
            "{name}: only the run's owner is told"
        );

        // Once it ended, there is nothing to cancel; a new segment starts without the request.
        let stopped = interrupt("a", Duration::from_secs(60));
        let mut end = RunEnd::new(RunStatus::Interrupted);
        end.interrupts = vec![stopped.clone()];
        driver
            .write(&lease, &events(1..=1), Some(&end))
            .await
            .unwrap();
        assert!(!asked.request_cancel(&run).await.unwrap(), "{name}: ended");
        assert!(
            driver.cancels_requested().await.unwrap().is_empty(),
            "{name}"
        );
        let resume = start(&thread, &run, vec![(stopped.id, Decision::Approve)]);
        driver.start(&resume).await.unwrap();
        assert!(
            driver.cancels_requested().await.unwrap().is_empty(),
            "{name}: the continuation was not asked to stop"
        );
        assert!(
            !asked.request_cancel(&RunId::new()).await.unwrap(),
            "{name}: unknown"
        );
    }
}

#[tokio::test]
async fn a_dead_instances_runs_are_recovered_once_and_it_is_fenced() {
    for (name, url) in each_store("recover").await {
        let (dead, alive) = (
            RunStore::open(&url).await.unwrap(),
            RunStore::open(&url).await.unwrap(),
        );
        let (thread, run) = ids();
        let lease = dead.start(&start(&thread, &run, vec![])).await.unwrap();
        dead.write(&lease, &events(1..=2), None).await.unwrap();
        let (_, other) = ids();
        let retried = dead
            .start(&start(&ThreadId::new(), &other, vec![]))
            .await
            .unwrap();
        assert!(
            alive.lost().await.unwrap().is_empty(),
            "{name}: its heartbeat is fresh"
        );

        // It releases its runs, as a draining instance does (its heartbeat ends now).
        dead.release().await.unwrap();
        let lost = alive.lost().await.unwrap();
        let lost_run = lost
            .iter()
            .find(|l| l.record.run_id == run)
            .expect("lost")
            .clone();
        assert_eq!(lost_run.record.last_seq, 2, "{name}");
        let terminal = [LoggedEvent::from_json(
            0,
            r#"{"type":"RUN_ERROR","code":"run_lost"}"#,
        )];
        let failed = RunEnd::new(RunStatus::Failed);
        let stale = LostRun {
            record: RunRecord {
                last_seq: 1,
                ..lost_run.record.clone()
            },
            ..lost_run.clone()
        };
        assert!(
            alive
                .recover(&stale, &terminal, Recovery::End(&failed))
                .await
                .unwrap()
                .is_none(),
            "{name}: a log that grew since it was read is not recovered"
        );
        let closed = alive
            .recover(&lost_run, &terminal, Recovery::End(&failed))
            .await
            .unwrap()
            .expect("recovered");
        // Numbered after those its owner may have sent uncommitted: they are never used.
        let ended_at = 2 + SENT_AHEAD + 1;
        assert_eq!(
            (closed.events[0].seq, closed.lease),
            (ended_at, None),
            "{name}"
        );
        assert!(
            alive
                .recover(&lost_run, &terminal, Recovery::End(&failed))
                .await
                .unwrap()
                .is_none(),
            "{name}: once"
        );
        let late = dead.write(&lease, &events(3..=3), None).await;
        assert!(matches!(late, Err(LogError::Fenced(_))), "{name}: {late:?}");
        // A page stops at the gap; the next one is what follows it.
        let page = alive.read(&run, 0, 10).await.unwrap().unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(
            (page.status, page.last_seq, seqs),
            (RunStatus::Failed, ended_at, vec![1, 2]),
            "{name}"
        );
        let page = alive.read(&run, 2, 10).await.unwrap().unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [ended_at], "{name}: after the gap");
        let page = alive.read(&run, 5, 10).await.unwrap().unwrap();
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [ended_at], "{name}: from inside the gap");
        let page = alive.read(&run, ended_at, 10).await.unwrap().unwrap();
        assert!(page.events.is_empty(), "{name}: none after the end");

        // Taken over to run again: the new owner writes on, the old one is fenced.
        let lost_other = alive
            .lost()
            .await
            .unwrap()
            .into_iter()
            .find(|l| l.record.run_id == other)
            .expect("lost");
        // Taken over to continue: the events that bridge the cut go on the log, numbered after
        // it, and the run stays running under the new owner.
        let bridge = [
            LoggedEvent::from_json(0, r#"{"type":"CUSTOM","name":"agent_tower.takeover"}"#),
            LoggedEvent::from_json(0, r#"{"type":"STEP_FINISHED","stepName":"s"}"#),
        ];
        let taken = alive
            .recover(&lost_other, &bridge, Recovery::Take)
            .await
            .unwrap()
            .expect("taken");
        let seqs: Vec<u64> = taken.events.iter().map(|e| e.seq).collect();
        let bridged = [SENT_AHEAD + 1, SENT_AHEAD + 2];
        assert_eq!(seqs, bridged, "{name}");
        let new_lease = taken.lease.expect("a lease to continue");
        assert_eq!(new_lease.last_seq, bridged[1], "{name}: after the bridge");
        let page = alive.read(&other, 0, 10).await.unwrap().unwrap();
        assert_eq!(
            (page.status, page.events.len()),
            (RunStatus::Running, 2),
            "{name}"
        );
        alive
            .write(
                &new_lease,
                &events(bridged[1] + 1..=bridged[1] + 1),
                Some(&RunEnd::new(RunStatus::Finished)),
            )
            .await
            .unwrap();
        let late = dead.write(&retried, &events(1..=1), None).await;
        assert!(matches!(late, Err(LogError::Fenced(_))), "{name}: {late:?}");
        assert!(alive.lost().await.unwrap().is_empty(), "{name}");
    }
}

#[tokio::test]
async fn a_file_store_survives_reopening() {
    let url = stores::sqlite("reopen");
    let (thread, run) = ids();
    {
        let store = RunStore::open(&url).await.unwrap();
        let lease = store.start(&start(&thread, &run, vec![])).await.unwrap();
        store
            .write(
                &lease,
                &events(1..=4),
                Some(&RunEnd::new(RunStatus::Finished)),
            )
            .await
            .unwrap();
    }
    let store = RunStore::open(&url).await.unwrap();
    let page = store.read(&run, 0, 10).await.unwrap().unwrap();
    assert_eq!(page.events, events(1..=4));
}

/// A connection to the store at `url` (`name`: `sqlite` or `postgres`), its schema brought to
/// the migrations before `version`, of which there are `count`: what an earlier release left.
async fn store_before(name: &str, url: &str, version: i64, count: usize) -> sqlx::AnyConnection {
    use sqlx::{Connection, migrate::Migrator};
    sqlx::any::install_default_drivers();
    let mut before = Migrator::new(std::path::Path::new("migrations"))
        .await
        .unwrap();
    let old: Vec<_> = before
        .migrations
        .iter()
        .filter(|m| m.version < version)
        .cloned()
        .collect();
    assert_eq!(old.len(), count, "the migrations before {version}");
    before.migrations = old.into();
    let created = if name == "sqlite" {
        format!("{url}?mode=rwc")
    } else {
        url.to_owned()
    };
    let mut conn = sqlx::AnyConnection::connect(&created).await.unwrap();
    before.run(&mut conn).await.unwrap();
    conn
}

#[tokio::test]
async fn events_logged_one_row_each_read_the_same_after_the_upgrade_to_chunks() {
    use sqlx::Connection;
    for (name, url) in each_store("upgrade").await {
        // The schema before chunks, with a finished run of three events.
        let mut conn = store_before(name, &url, 20261125000000, 2).await;
        sqlx::query(
            "INSERT INTO runs (run_id, thread_id, status, owner, lease_expires_at, last_seq, \
             created_at, updated_at) VALUES ('old', 't-old', 'finished', 'gone', 0, 3, 1, 1)",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        let written = events(1..=3);
        for event in &written {
            sqlx::query("INSERT INTO run_events (run_id, seq, event) VALUES ('old', $1, $2)")
                .bind(i64::try_from(event.seq).unwrap())
                .bind(event.json_str())
                .execute(&mut conn)
                .await
                .unwrap();
        }
        conn.close().await.unwrap();

        let store = RunStore::open(&url).await.unwrap();
        let page = store.read(&"old".into(), 0, 10).await.unwrap().unwrap();
        assert_eq!(page.events, written, "{name}");
        assert_eq!(
            (page.status, page.last_seq),
            (RunStatus::Finished, 3),
            "{name}"
        );
        let tail = store.read(&"old".into(), 1, 1).await.unwrap().unwrap();
        assert_eq!(tail.events, written[1..2], "{name}");
    }
}

#[tokio::test]
async fn runs_logged_before_run_keys_read_the_same_after_the_upgrade_and_new_runs_follow() {
    use sqlx::Connection;
    for (name, url) in each_store("run-keys").await {
        // The schema before run keys, with two finished runs of chunks under their ids.
        let mut conn = store_before(name, &url, 20261203000001, 16).await;
        for (run, created_at, seqs) in [("second", 2, 1..=2), ("first", 1, 1..=3)] {
            sqlx::query(
                "INSERT INTO runs (run_id, thread_id, status, owner, lease_expires_at, last_seq, \
                 created_at, updated_at) VALUES ($1, $1, 'finished', 'gone', 0, $2, $3, $3)",
            )
            .bind(run)
            .bind(i64::try_from(*seqs.end()).unwrap())
            .bind(created_at)
            .execute(&mut conn)
            .await
            .unwrap();
            for event in events(seqs) {
                let seq = i64::try_from(event.seq).unwrap();
                sqlx::query(
                    "INSERT INTO run_chunks (run_id, first_seq, last_seq, events) \
                     VALUES ($1, $2, $2, $3)",
                )
                .bind(run)
                .bind(seq)
                .bind(format!("{{\"{run}\":{seq}}}"))
                .execute(&mut conn)
                .await
                .unwrap();
            }
        }
        conn.close().await.unwrap();

        let store = RunStore::open(&url).await.unwrap();
        for (run, seqs) in [("first", 1..=3), ("second", 1..=2)] {
            let page = store.read(&run.into(), 0, 10).await.unwrap().unwrap();
            let read: Vec<String> = page
                .events
                .iter()
                .map(|e| e.json_str().to_owned())
                .collect();
            let written: Vec<String> = seqs.map(|seq| format!("{{\"{run}\":{seq}}}")).collect();
            assert_eq!(read, written, "{name}: {run}");
        }
        // A run begun after the upgrade has a key of its own: its log holds its events alone.
        let (_, run) = finished(&store).await;
        let page = store.read(&run, 0, 10).await.unwrap().unwrap();
        assert_eq!(page.events, events(1..=2), "{name}");
        let first = store.read(&"first".into(), 0, 10).await.unwrap().unwrap();
        assert_eq!(first.events.len(), 3, "{name}");
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_new_sqlite_file_is_its_owners_only() {
    use std::os::unix::fs::PermissionsExt;
    let url = stores::sqlite("private");
    let store = RunStore::open(&url).await.unwrap();
    let (thread, run) = ids();
    store.start(&start(&thread, &run, vec![])).await.unwrap();
    let path = url.trim_start_matches("sqlite://");
    for file in [
        path.to_owned(),
        format!("{path}-wal"),
        format!("{path}-shm"),
    ] {
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file}");
    }
}

#[tokio::test]
async fn a_new_sqlite_file_has_small_pages_and_an_older_one_keeps_its_own() {
    use sqlx::Connection;
    async fn page_size(url: &str) -> i64 {
        let mut conn = sqlx::AnyConnection::connect(url).await.unwrap();
        let size: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
        size
    }
    let new = stores::sqlite("pages-new");
    let store = RunStore::open(&new).await.unwrap();
    finished(&store).await;
    drop(store);
    assert_eq!(page_size(&new).await, 2048);

    // A file made by an earlier version (SQLite's default pages, the schema before run keys)
    // keeps its pages, and its runs go on.
    let old = stores::sqlite("pages-old");
    store_before("sqlite", &old, 20261203000001, 16)
        .await
        .close()
        .await
        .unwrap();
    assert_eq!(page_size(&old).await, 4096);
    let store = RunStore::open(&old).await.unwrap();
    let (_, run) = finished(&store).await;
    let page = store.read(&run, 0, 10).await.unwrap().unwrap();
    assert_eq!(page.events, events(1..=2));
    drop(store);
    assert_eq!(page_size(&old).await, 4096);
}

#[tokio::test]
async fn many_runs_writing_at_once_are_all_logged() {
    for (name, log) in each_log("group").await {
        let writers = (0..50).map(|_| {
            let log = log.clone();
            async move {
                let (thread, run) = ids();
                let lease = log.start(&start(&thread, &run, vec![])).await.unwrap();
                for n in 0..10 {
                    log.write(&lease, &events(n * 3 + 1..=n * 3 + 3), None)
                        .await
                        .unwrap();
                }
                log.write(
                    &lease,
                    &events(31..=31),
                    Some(&RunEnd::new(RunStatus::Finished)),
                )
                .await
                .unwrap();
                run
            }
        });
        for run in futures_util::future::join_all(writers).await {
            let page = log.read(&run, 0, 100).await.unwrap().unwrap();
            assert_eq!(page.events, events(1..=31), "{name}");
        }
    }
}

/// Jobs sent at once go to the writer in one group (PostgreSQL decides a group's starts and
/// writes in a few statements over all of them): each is decided as it would be alone.
#[tokio::test]
async fn starts_and_writes_sent_at_once_are_each_decided_as_alone() {
    use agent_tower::context::Principal;
    for (name, log) in each_log("at-once").await {
        let running = finished(&*log).await;
        let (waiting, _) = interrupted(&*log, vec![interrupt("c", Duration::from_secs(600))]).await;
        let alices = ThreadId::new();
        let mut alone = start(&alices, &RunId::new(), vec![]);
        alone.principal = Some(Principal::user("alice").unwrap());
        let alices_run = log.start(&alone).await.unwrap();
        let end = RunEnd::new(RunStatus::Finished);
        log.write(&alices_run, &events(1..=1), Some(&end))
            .await
            .unwrap();
        let (thread, run) = ids();
        let live = log.start(&start(&thread, &run, vec![])).await.unwrap();
        log.write(&live, &events(1..=2), None).await.unwrap();

        // Fresh threads (one of them twice), a taken id, a waiting thread, another's thread.
        let fresh: Vec<Start> = (0..40)
            .map(|_| start(&ThreadId::new(), &RunId::new(), vec![]))
            .collect();
        let twice = ThreadId::new();
        let mut starts = fresh.clone();
        starts.push(start(&twice, &RunId::new(), vec![]));
        starts.push(start(&twice, &RunId::new(), vec![]));
        let mut taken = start(&ThreadId::new(), &running.1, vec![]);
        taken.request_hash = "another".into();
        starts.push(taken);
        starts.push(start(&waiting, &RunId::new(), vec![]));
        let mut bobs = start(&alices, &RunId::new(), vec![]);
        bobs.principal = Some(Principal::user("bob").unwrap());
        starts.push(bobs);
        let mut end = RunEnd::new(RunStatus::Finished);
        end.messages = Some(vec![Message::user("at once")]);
        let (three_four, three, five) = (events(3..=4), events(3..=3), events(5..=5));
        let (started, written, stale, ended) = futures_util::join!(
            futures_util::future::join_all(starts.iter().map(|s| log.start(s))),
            log.write(&live, &three_four, None),
            log.write(&live, &three, None),
            log.write(&live, &five, Some(&end)),
        );
        let (ok, refused) = started.split_at(40);
        assert!(ok.iter().all(Result::is_ok), "{name}: {ok:?}");
        let on_twice: Vec<bool> = refused[..2].iter().map(Result::is_ok).collect();
        assert_eq!(
            on_twice.iter().filter(|ok| **ok).count(),
            1,
            "{name}: {refused:?}"
        );
        assert!(
            refused[..2]
                .iter()
                .any(|r| matches!(r, Err(StartError::Busy { .. }))),
            "{name}: {refused:?}"
        );
        assert!(
            matches!(refused[2], Err(StartError::Exists { same: false, .. })),
            "{name}: {:?}",
            refused[2]
        );
        assert!(
            matches!(refused[3], Err(StartError::InterruptsPending(_))),
            "{name}: {:?}",
            refused[3]
        );
        assert!(
            matches!(refused[4], Err(StartError::UnknownThread(_))),
            "{name}: {:?}",
            refused[4]
        );
        // Of two writes after event 2, one is fenced; the end after event 4 holds only after
        // the write that ends at 4.
        assert_ne!(
            written.is_ok(),
            stale.is_ok(),
            "{name}: {written:?} {stale:?}"
        );
        let page = log.read(&run, 0, 10).await.unwrap().unwrap();
        if written.is_ok() {
            assert!(ended.is_ok(), "{name}: {ended:?}");
            assert_eq!(
                (page.last_seq, page.status),
                (5, RunStatus::Finished),
                "{name}"
            );
            let kept = log.thread(&thread).await.unwrap().unwrap();
            assert_eq!(Some(kept.messages), end.messages, "{name}");
        } else {
            assert!(
                matches!(ended, Err(LogError::Fenced(_))),
                "{name}: {ended:?}"
            );
            assert_eq!(
                (page.last_seq, page.status),
                (3, RunStatus::Running),
                "{name}"
            );
        }
        for started in &fresh {
            let record = log.run(&started.run_id).await.unwrap().unwrap();
            assert_eq!(record.status, RunStatus::Running, "{name}");
        }
    }
}

stores::postgresql_answers_test!();

#[tokio::test]
async fn a_store_written_by_a_later_release_is_refused_by_name() {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    for (name, url) in stores::store_urls("newer-schema").await {
        drop(RunStore::open(&url).await.unwrap());
        // What a later release's migration leaves behind.
        let checksum = if name == "sqlite" {
            "X'00'"
        } else {
            "'\\x00'::bytea"
        };
        let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
        sqlx::query(&format!(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (99991231000001, 'a later release', TRUE, {checksum}, 0)"
        ))
        .execute(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();

        let refused = RunStore::open(&url).await.unwrap_err().to_string();
        assert!(
            refused.contains("schema (version 99991231000001) is newer than this binary knows"),
            "{name}: {refused}"
        );
    }
}

#[tokio::test]
async fn runs_that_ended_before_a_time_are_pruned_and_the_others_kept() {
    for (name, url) in each_store("prune").await {
        let store = RunStore::open(&url).await.unwrap();
        let log: &dyn RunLog = &store;
        // Ended: pruned, events and all.
        let mut ended = Vec::new();
        for _ in 0..3 {
            ended.push(finished(log).await.1);
        }
        let (waiting_thread, waiting) =
            interrupted(log, vec![interrupt("c1", Duration::from_secs(600))]).await;
        // Running: it goes on writing meanwhile.
        let (thread, running) = ids();
        let lease = log.start(&start(&thread, &running, vec![])).await.unwrap();
        log.write(&lease, &events(1..=1), None).await.unwrap();
        let messages = vec![Message::user("kept")];
        log.save_thread(SavedThread::new(&thread, &messages))
            .await
            .unwrap();

        let later = SystemTime::now() + Duration::from_secs(1);
        let pruning = store.prune(later);
        let second = events(2..=2);
        let writing = log.write(&lease, &second, None);
        let (pruned, written) = tokio::join!(pruning, writing);
        written.unwrap();
        assert_eq!(pruned.unwrap(), 3, "{name}");
        for run in &ended {
            assert!(
                log.read(run, 0, 10).await.unwrap().is_none(),
                "{name}: {run} gone"
            );
        }
        let live = log.read(&running, 0, 10).await.unwrap().unwrap();
        assert_eq!(live.events.len(), 2, "{name}: the running run whole");
        let asked = log.read(&waiting, 0, 10).await.unwrap().unwrap();
        assert_eq!(
            asked.events.len(),
            2,
            "{name}: the run that waits for a decision kept"
        );
        let pending = log
            .interrupts(Interrupts::PendingOf(&waiting_thread))
            .await
            .unwrap();
        assert_eq!(pending.len(), 1, "{name}: its interrupt too");
        assert_eq!(
            log.thread(&thread).await.unwrap().unwrap().messages,
            messages,
            "{name}: threads keep their conversation"
        );
        assert_eq!(
            store.prune(later).await.unwrap(),
            0,
            "{name}: nothing left to prune"
        );
    }
}

#[tokio::test]
async fn threads_idle_since_a_time_are_pruned_with_their_runs_unless_one_is_live() {
    for (name, url) in each_store("prune-threads").await {
        let store = RunStore::open(&url).await.unwrap();
        let log: &dyn RunLog = &store;
        let messages = vec![Message::user("old news")];
        // Idle: its conversation and its ended run go.
        let (idle, run) = finished(log).await;
        log.save_thread(SavedThread::new(&idle, &messages))
            .await
            .unwrap();
        // Waiting for a decision, and running: kept.
        let (waiting, _) = interrupted(log, vec![interrupt("c1", Duration::from_secs(600))]).await;
        log.save_thread(SavedThread::new(&waiting, &messages))
            .await
            .unwrap();
        let (busy, running) = ids();
        let lease = log.start(&start(&busy, &running, vec![])).await.unwrap();
        log.save_thread(SavedThread::new(&busy, &messages))
            .await
            .unwrap();

        let later = SystemTime::now() + Duration::from_secs(1);
        assert_eq!(store.prune_threads(later).await.unwrap(), 1, "{name}");
        assert!(
            log.thread(&idle).await.unwrap().is_none(),
            "{name}: the idle thread gone"
        );
        assert!(
            log.read(&run, 0, 10).await.unwrap().is_none(),
            "{name}: its run too"
        );
        assert!(log.thread(&waiting).await.unwrap().is_some(), "{name}");
        assert!(log.thread(&busy).await.unwrap().is_some(), "{name}");
        finish(log, &lease).await;
    }
}

/// The run list (what an A2A client's `ListTasks` reads): a principal's runs only, the most
/// recently changed first, in pages that continue where the last ended, by thread and by status.
#[tokio::test]
async fn runs_are_listed_per_principal_newest_first_in_pages() {
    use agent_tower::{
        context::Principal,
        runs::{RunCursor, RunQuery},
    };
    for (name, log) in each_log("run-list").await {
        let log = log.as_ref();
        let as_of = |who: &str, thread: &ThreadId| {
            let mut start = start(thread, &RunId::new(), vec![]);
            start.principal = Some(Principal::user(who).unwrap());
            start
        };
        let (first, second, bobs) = (ThreadId::new(), ThreadId::new(), ThreadId::new());
        let mut ended = Vec::new();
        for (who, thread) in [("alice", &first), ("alice", &second), ("bob", &bobs)] {
            let start = as_of(who, thread);
            let lease = log.start(&start).await.unwrap();
            let end = RunEnd::new(RunStatus::Finished);
            log.write(&lease, &events(1..=1), Some(&end)).await.unwrap();
            ended.push(start.run_id);
        }
        // Alice's third run is still running.
        let running = as_of("alice", &second);
        log.start(&running).await.unwrap();
        let alice = [&ended[0], &ended[1], &running.run_id];

        let mut listed = Vec::new();
        let mut cursor: Option<RunCursor> = None;
        let mut pages = 0;
        loop {
            let query = RunQuery::new(2)
                .principal(Some("alice"))
                .after(cursor.as_ref());
            let page = log.runs(&query).await.unwrap();
            pages += 1;
            assert_eq!(page.total, 3, "{name}: alice's runs on every page");
            assert!(page.runs.len() <= 2, "{name}");
            listed.extend(page.runs);
            let Some(next) = page.next else { break };
            // A cursor goes out and comes back as text.
            cursor = Some(next.to_string().parse().unwrap());
        }
        assert_eq!(pages, 2, "{name}: three runs in pages of two");
        let mut ids: Vec<&RunId> = listed.iter().map(|run| &run.run_id).collect();
        let order: Vec<_> = listed
            .iter()
            .map(|run| (run.updated_at, run.run_id.to_string()))
            .collect();
        assert!(
            order.windows(2).all(|pair| pair[0] >= pair[1]),
            "{name}: the most recently changed first: {order:?}"
        );
        ids.sort();
        let mut expected = alice.to_vec();
        expected.sort();
        assert_eq!(
            ids, expected,
            "{name}: alice's runs, each once, none of bob's"
        );
        assert!(
            listed
                .iter()
                .all(|run| run.principal.as_deref() == Some("alice"))
        );

        async fn only(log: &dyn RunLog, query: RunQuery<'_>) -> Vec<RunId> {
            let page = log.runs(&query).await.unwrap();
            page.runs.into_iter().map(|run| run.run_id).collect()
        }
        let of_alice = RunQuery::new(10).principal(Some("alice"));
        assert_eq!(
            only(log, of_alice.status(Some(RunStatus::Running))).await,
            std::slice::from_ref(&running.run_id),
            "{name}: by status"
        );
        assert_eq!(
            only(log, of_alice.thread(Some(&first))).await,
            std::slice::from_ref(&ended[0]),
            "{name}: by thread"
        );
        assert_eq!(
            only(log, RunQuery::new(10)).await.len(),
            4,
            "{name}: everyone's"
        );
        let later = SystemTime::now() + Duration::from_secs(60);
        assert!(
            only(log, of_alice.changed_after(Some(later)))
                .await
                .is_empty(),
            "{name}: changed after"
        );
    }
}

#[tokio::test]
async fn notices_kept_with_an_end_are_held_by_one_instance_at_a_time_and_go_with_their_run() {
    for (name, url) in each_store("notices").await {
        let (store, other) = (
            RunStore::open(&url).await.unwrap(),
            RunStore::open(&url).await.unwrap(),
        );
        let log: &dyn RunLog = &store;
        let (thread, run) = ids();
        let lease = log.start(&start(&thread, &run, vec![])).await.unwrap();
        let notice = |id: &str| Notice {
            id: format!("{id}-{run}"),
            run_id: run.clone(),
            url: "http://127.0.0.1:9/hook".to_owned(),
            kind: "run.finished".to_owned(),
            body: format!(r#"{{"say":"{id}"}}"#),
        };
        let mut end = RunEnd::new(RunStatus::Finished);
        end.notices = vec![notice("a"), notice("b")];
        log.write(&lease, &events(1..=1), Some(&end)).await.unwrap();

        // Claimed here, each a first attempt; held meanwhile, the other instance gets none.
        let mine = store.outbox().unwrap();
        let theirs = other.outbox().unwrap();
        let hold = Duration::from_secs(60);
        let claimed = mine.claim(10, hold).await.unwrap();
        let attempts: Vec<(String, u32)> = claimed
            .iter()
            .map(|c| (c.notice.id.clone(), c.attempt))
            .collect();
        assert_eq!(
            attempts,
            [(notice("a").id, 1), (notice("b").id, 1)],
            "{name}"
        );
        assert_eq!(claimed[1].notice, notice("b"), "{name}: kept as it was");
        assert!(theirs.claim(10, hold).await.unwrap().is_empty(), "{name}");

        // One delivered; the other due again at once, taken by the other instance, given up.
        mine.settle(&notice("a").id, &Settle::Delivered)
            .await
            .unwrap();
        let again = Settle::Retry {
            at: SystemTime::now(),
            error: "answered 503".to_owned(),
        };
        mine.settle(&notice("b").id, &again).await.unwrap();
        let retried = theirs.claim(10, hold).await.unwrap();
        assert_eq!(retried.len(), 1, "{name}");
        assert_eq!(
            (retried[0].notice.id.clone(), retried[0].attempt),
            (notice("b").id, 2)
        );
        let given_up = Settle::Failed {
            error: "answered 410".to_owned(),
        };
        theirs.settle(&notice("b").id, &given_up).await.unwrap();
        assert!(mine.claim(10, hold).await.unwrap().is_empty(), "{name}");

        let listed = mine.notices(Some(&run), 10).await.unwrap();
        let seen: Vec<(String, NoticeStatus, u32, Option<String>)> = listed
            .iter()
            .map(|n| {
                (
                    n.notice.id.clone(),
                    n.status,
                    n.attempts,
                    n.last_error.clone(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (
                    notice("b").id,
                    NoticeStatus::Failed,
                    2,
                    Some("answered 410".to_owned())
                ),
                (notice("a").id, NoticeStatus::Delivered, 1, None),
            ],
            "{name}: the newest first"
        );

        // Pruned with their run.
        store
            .prune(SystemTime::now() + Duration::from_secs(1))
            .await
            .unwrap();
        assert!(
            mine.notices(Some(&run), 10).await.unwrap().is_empty(),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_threads_first_run_makes_it_with_its_first_turn_and_no_other_start_does() {
    for (name, log) in each_log("first-turn").await {
        let turn = FirstTurn {
            messages: vec![Message::user("plan my week\nin detail")],
            state: Some(json!({"mood": "busy"})),
        };
        let with_turn = |thread: &ThreadId, run: &RunId| Start {
            first_turn: Some(turn.clone()),
            principal: Some(Principal::user("alice").unwrap()),
            ..start(thread, run, vec![])
        };
        let (thread, run) = ids();
        let lease = log.start(&with_turn(&thread, &run)).await.unwrap();
        assert!(lease.made_thread, "{name}");
        // Kept and listed from the start, the run's own.
        let kept = log.thread(&thread).await.unwrap().expect("kept");
        assert_eq!(
            (kept.messages, kept.state, kept.principal.as_deref()),
            (turn.messages.clone(), turn.state.clone(), Some("alice")),
            "{name}"
        );
        let listed = log
            .threads(
                &ThreadQuery::new(10)
                    .principal(Some("alice"))
                    .thread(&thread),
            )
            .await
            .unwrap()
            .threads;
        let titles: Vec<Option<&str>> = listed.iter().map(|t| t.title.as_deref()).collect();
        assert_eq!(titles, [Some("plan my week")], "{name}");
        finish(&*log, &lease).await;

        // Its next run finds the thread: nothing of it is kept by the start.
        let next = log.start(&with_turn(&thread, &RunId::new())).await.unwrap();
        assert!(!next.made_thread, "{name}");
        // Nor by a start on a thread whose conversation was kept without a run.
        let saved = ThreadId::new();
        let earlier = [Message::user("earlier")];
        (log.save_thread(SavedThread::new(&saved, &earlier).principal(Some("alice")))
            .await)
            .unwrap();
        let lease = log.start(&with_turn(&saved, &RunId::new())).await.unwrap();
        assert!(!lease.made_thread, "{name}");
        let kept = log.thread(&saved).await.unwrap().unwrap();
        assert_eq!(
            kept.messages, earlier,
            "{name}: the start changed nothing of it"
        );
        // Without a first turn, a new thread is the run's to keep.
        let (plain, run) = ids();
        let lease = log.start(&start(&plain, &run, vec![])).await.unwrap();
        assert!(!lease.made_thread, "{name}");
        let listed = (log.threads(&ThreadQuery::new(10).thread(&plain)).await)
            .unwrap()
            .threads;
        assert!(listed.is_empty(), "{name}: {listed:?}");
    }
}
