//! The rules of a start, written once: a [`Start`] and a [`ThreadView`] in, a [`Plan`] or a
//! refusal out.
//!
//! Every [`RunLog`](super::RunLog) applies the same rules: it loads the view of the start's
//! thread inside its own atomic section (the memory log under its lock, a store inside its
//! transaction), calls [`plan`], and writes the plan. The log's unique indexes and conditional
//! updates are guards against writers it cannot see (another instance), not a second copy of
//! the rules: when a guard fails, the backend loads the view again and [`plan`] says why.
//! Who may see what is a rule too, [`may_use`], that the routes reading runs and threads ask.
//!
//! ```
//! use std::time::SystemTime;
//! use agent_tower::context::Principal;
//! use agent_tower::runs::{Start, StartError};
//! use agent_tower::runs::rules::{plan, Begins, Thread, ThreadView};
//!
//! let mut start = Start::new("thread".into(), "run-2".into());
//! start.principal = Some(Principal::user("alice")?);
//! // A thread with nothing going on: a new run, and the thread becomes alice's.
//! let planned = plan(&start, &ThreadView::default(), SystemTime::now())?;
//! assert_eq!((planned.begins, planned.principal.as_deref()), (Begins::New, Some("alice")));
//!
//! // A thread whose run is still going: refused.
//! let busy = ThreadView {
//!     thread: Thread::Of(Some("alice".into())),
//!     active: Some("run-1".into()),
//!     ..ThreadView::default()
//! };
//! assert!(matches!(plan(&start, &busy, SystemTime::now()), Err(StartError::Busy { .. })));
//!
//! // Bob's thread does not exist for alice.
//! let bobs = ThreadView { thread: Thread::Of(Some("bob".into())), ..ThreadView::default() };
//! assert!(matches!(plan(&start, &bobs, SystemTime::now()), Err(StartError::UnknownThread(_))));
//! # Ok::<(), agent_tower::BoxError>(())
//! ```

use std::{collections::HashSet, time::SystemTime};

use super::{InterruptRecord, InterruptStatus, Lease, RunStatus, Start, StartError};
use crate::{
    context::Principal,
    id::{InterruptId, RunId},
};

/// What the rules read of the log for one [`Start`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadView {
    /// The start's thread, and whom it belongs to.
    pub thread: Thread,
    /// The run under the start's id, if the log has one.
    pub run: Option<ExistingRun>,
    /// The start's thread's active (running) run, if it has one.
    pub active: Option<RunId>,
    /// The interrupts that matter, in any order: the start's thread's pending ones, and every
    /// one the start answers (whatever its thread or status, if the log has it).
    pub interrupts: Vec<InterruptRecord>,
}

impl ThreadView {
    fn interrupt(&self, id: &InterruptId) -> Option<&InterruptRecord> {
        self.interrupts.iter().find(|record| &record.id == id)
    }
}

/// A thread, as the rules see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Thread {
    /// The log has no such thread (no run, no kept conversation): the start makes it.
    #[default]
    New,
    /// The log has it; it belongs to this principal (`None`: it was made without authentication).
    Of(Option<String>),
}

/// A run the log already has under a start's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingRun {
    /// Where it is.
    pub status: RunStatus,
    /// The principal it belongs to.
    pub principal: Option<String>,
    /// The hash of the request that started its latest segment.
    pub request_hash: String,
    /// Where that segment begins (its events follow this one).
    pub segment_start: u64,
    /// The sequence number of its last event.
    pub last_seq: u64,
}

/// What a start writes, besides resolving every interrupt of [`Start::resume`] with its decision
/// (by the start's run) and making the run its thread's active one, owned by this instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The run it begins.
    pub begins: Begins,
    /// The principal the run belongs to: its thread's, or, for a new thread, the caller's (the
    /// thread becomes theirs).
    pub principal: Option<String>,
}

/// Which run a start begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begins {
    /// A new run, running, under the start's id, hash and request; its events from 1.
    New,
    /// The interrupted run under the start's id goes on (the shape CopilotKit sends): running
    /// again, under the start's hash and request, a new segment of its log after event `after`.
    Continue {
        /// The run's last event: the new segment follows it.
        after: u64,
    },
}

impl Plan {
    /// The lease of the run `start` begins under this plan.
    #[must_use]
    pub fn lease(&self, start: &Start) -> Lease {
        Lease {
            run_id: start.run_id.clone(),
            thread_id: start.thread_id.clone(),
            principal: self.principal.clone(),
            last_seq: match self.begins {
                Begins::New => 0,
                Begins::Continue { after } => after,
            },
            made_thread: false,
        }
    }
}

/// Whether `caller` may see and use what `owner` owns: everything when there is no caller (a
/// server that authenticates nobody: one space shared by all), else as
/// [`Principal::may_use`] (its own, or everything for an operator).
#[must_use]
pub fn may_use(caller: Option<&Principal>, owner: Option<&str>) -> bool {
    caller.is_none_or(|caller| caller.may_use(owner))
}

/// What `start` may do, given `view` of its thread at `now`:
///
/// 1. **A taken run id**: the same request again (same hash) is [`StartError::Exists`] with
///    `same` (the caller replays the segment it started); a resume, under the interrupted run's
///    own id, of interrupts that run stopped at continues it; anything else under a taken id is
///    `Exists` without `same`, and so is a run the caller may not use (it is not replayed).
/// 2. **Threads belong to their principal**: another principal's thread does not exist for the
///    caller ([`StartError::UnknownThread`]); see [`may_use`].
/// 3. **One active run per thread**: [`StartError::Busy`].
/// 4. **Each answer** names an interrupt of the thread ([`StartError::UnknownInterrupt`]), still
///    pending ([`StartError::AlreadyResolved`], also for an interrupt answered twice in one
///    start) and not expired ([`StartError::Expired`]).
/// 5. **Every pending interrupt of the thread is answered**: [`StartError::InterruptsPending`]
///    when the start answers none, [`StartError::ResumeMissing`] when it answers some; the ids
///    left, sorted.
///
/// The first rule broken is the refusal.
///
/// # Errors
///
/// The refusal, as above; never [`StartError::Log`].
pub fn plan(start: &Start, view: &ThreadView, now: SystemTime) -> Result<Plan, StartError> {
    let caller = start.principal.as_ref();
    let begins = match &view.run {
        None => Begins::New,
        Some(run) if !may_use(caller, run.principal.as_deref()) => {
            return Err(StartError::Exists {
                run: start.run_id.clone(),
                same: false,
                from: 0,
            });
        }
        Some(run) if run.request_hash == start.request_hash => {
            return Err(StartError::Exists {
                run: start.run_id.clone(),
                same: true,
                from: run.segment_start,
            });
        }
        Some(run) if run.status == RunStatus::Interrupted && resumes_own(start, view) => {
            Begins::Continue {
                after: run.last_seq,
            }
        }
        Some(_) => {
            return Err(StartError::Exists {
                run: start.run_id.clone(),
                same: false,
                from: 0,
            });
        }
    };
    let principal = owner(start, view)?;
    if let Some(active) = &view.active {
        return Err(StartError::Busy {
            thread: start.thread_id.clone(),
            active: Some(active.clone()),
        });
    }
    let mut answered = HashSet::with_capacity(start.resume.len());
    for (id, _) in &start.resume {
        let record = match view.interrupt(id) {
            Some(record) if record.thread_id == start.thread_id => record,
            _ => return Err(StartError::UnknownInterrupt(id.clone())),
        };
        if !answered.insert(id) {
            return Err(StartError::AlreadyResolved {
                id: id.clone(),
                by_run: start.run_id.clone(),
            });
        }
        if record.status == InterruptStatus::Resolved {
            return Err(StartError::AlreadyResolved {
                id: id.clone(),
                by_run: record
                    .resolved_by_run
                    .clone()
                    .unwrap_or_else(|| record.run_id.clone()),
            });
        }
        if record.expires_at <= now {
            return Err(StartError::Expired(id.clone()));
        }
    }
    let mut missing: Vec<InterruptId> = view
        .interrupts
        .iter()
        .filter(|record| {
            record.thread_id == start.thread_id
                && record.status == InterruptStatus::Pending
                && !answered.contains(&record.id)
        })
        .map(|record| record.id.clone())
        .collect();
    if !missing.is_empty() {
        missing.sort();
        missing.dedup();
        return Err(if start.resume.is_empty() {
            StartError::InterruptsPending(missing)
        } else {
            StartError::ResumeMissing(missing)
        });
    }
    Ok(Plan { begins, principal })
}

/// The principal `start`'s thread belongs to, if the caller may use it: its owner, or the
/// caller's for a new thread.
fn owner(start: &Start, view: &ThreadView) -> Result<Option<String>, StartError> {
    let caller = start.principal.as_ref();
    match &view.thread {
        Thread::New => Ok(caller.map(|caller| caller.name().to_owned())),
        Thread::Of(owner) if may_use(caller, owner.as_deref()) => Ok(owner.clone()),
        Thread::Of(_) => Err(StartError::UnknownThread(start.thread_id.clone())),
    }
}

/// Whether `start` answers interrupts, all of them ones its own run stopped at.
fn resumes_own(start: &Start, view: &ThreadView) -> bool {
    !start.resume.is_empty()
        && start.resume.iter().all(|(id, _)| {
            view.interrupt(id)
                .is_some_and(|record| record.run_id == start.run_id)
        })
}

/// Whether `start`, refused before it ran, may be recorded as a run of its own: its id is free
/// and its thread the caller's to use. The principal the recorded run belongs to.
///
/// # Errors
///
/// [`StartError::Exists`] when the id is taken (`same` and where its segment begins when the
/// same request took it, and the caller may see it); [`StartError::UnknownThread`] for another
/// principal's thread.
pub fn refusal(start: &Start, view: &ThreadView) -> Result<Option<String>, StartError> {
    match &view.run {
        None => owner(start, view),
        Some(run) => {
            let same = run.request_hash == start.request_hash
                && may_use(start.principal.as_ref(), run.principal.as_deref());
            Err(StartError::Exists {
                run: start.run_id.clone(),
                same,
                from: if same { run.segment_start } else { 0 },
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::{id::ThreadId, permission::Decision};

    const THREAD: &str = "t";
    const RUN: &str = "r0";

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000)
    }

    fn status() -> impl Strategy<Value = RunStatus> {
        prop_oneof![
            Just(RunStatus::Running),
            Just(RunStatus::Finished),
            Just(RunStatus::Interrupted),
            Just(RunStatus::Cancelled),
            Just(RunStatus::Failed),
        ]
    }

    /// Nobody (made without authentication), alice or bob.
    fn owner() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some("alice".into())),
            Just(Some("bob".into()))
        ]
    }

    /// A server that authenticates nobody, alice, bob, or an operator.
    fn caller() -> impl Strategy<Value = Option<Principal>> {
        prop_oneof![
            Just(None),
            Just(Some(Principal::user("alice").unwrap())),
            Just(Some(Principal::user("bob").unwrap())),
            Just(Some(Principal::operator("ops").unwrap())),
        ]
    }

    fn existing() -> impl Strategy<Value = ExistingRun> {
        (status(), owner(), 0..2u8, 0..5u64, 0..5u64).prop_map(
            |(status, principal, hash, start, more)| ExistingRun {
                status,
                principal,
                request_hash: format!("h{hash}"),
                segment_start: start,
                last_seq: start + more,
            },
        )
    }

    /// An interrupt `i{n}` of thread `t` or `u`, stopped at by run `r0`..`r2`, pending or
    /// resolved, expired or not.
    fn interrupt(n: usize) -> impl Strategy<Value = InterruptRecord> {
        (
            prop::bool::weighted(0.8),
            0..3u8,
            prop::bool::weighted(0.7),
            prop::bool::weighted(0.8),
            prop::option::of(0..3u8),
        )
            .prop_map(move |(ours, run, pending, live, resolver)| {
                let run_id = RunId::from(format!("r{run}"));
                InterruptRecord {
                    id: InterruptId::from(format!("i{n}")),
                    thread_id: ThreadId::from(if ours { THREAD } else { "u" }),
                    tool_call_id: format!("c{n}").into(),
                    tool_name: "delete".into(),
                    arguments: serde_json::json!({}),
                    args_hash: String::new(),
                    created_at: now() - Duration::from_secs(10),
                    expires_at: if live {
                        now() + Duration::from_secs(10)
                    } else {
                        now()
                    },
                    status: if pending {
                        InterruptStatus::Pending
                    } else {
                        InterruptStatus::Resolved
                    },
                    resolution: (!pending).then_some(Decision::Approve),
                    resolved_by_run: resolver
                        .filter(|_| !pending)
                        .map(|r| format!("r{r}").into()),
                    run_id,
                }
            })
    }

    fn view() -> impl Strategy<Value = ThreadView> {
        (
            prop::option::of(owner()),
            prop::option::of(existing()),
            prop::option::of(1..3u8),
            prop::collection::vec(prop::option::of(Just(())), 4),
        )
            .prop_flat_map(|(thread, run, active, present)| {
                let records: Vec<_> = present
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.is_some())
                    .map(|(n, _)| interrupt(n))
                    .collect();
                (Just(thread), Just(run), Just(active), records)
            })
            .prop_map(|(thread, run, active, interrupts)| ThreadView {
                thread: thread.map_or(Thread::New, Thread::Of),
                run,
                active: active.map(|r| format!("r{r}").into()),
                interrupts,
            })
    }

    fn start() -> impl Strategy<Value = Start> {
        (caller(), 0..2u8, prop::collection::vec(0..5usize, 0..4)).prop_map(
            |(principal, hash, answers)| Start {
                thread_id: THREAD.into(),
                run_id: RUN.into(),
                request_hash: format!("h{hash}"),
                resume: answers
                    .into_iter()
                    .map(|n| (InterruptId::from(format!("i{n}")), Decision::Approve))
                    .collect(),
                request: None,
                principal,
                first_turn: None,
            },
        )
    }

    /// Whether the caller may use what `owner` owns, said without `may_use`.
    fn allowed(start: &Start, owner: Option<&String>) -> bool {
        match &start.principal {
            None => true,
            Some(caller) => {
                caller.is_operator() || owner.map(String::as_str) == Some(caller.name())
            }
        }
    }

    /// Every rule, said as a condition on the view (not as the steps `plan` takes).
    fn may_start(start: &Start, view: &ThreadView) -> bool {
        let ids: Vec<&InterruptId> = start.resume.iter().map(|(id, _)| id).collect();
        let unique = ids.iter().collect::<HashSet<_>>().len() == ids.len();
        let run_ok = match &view.run {
            None => true,
            Some(run) => {
                allowed(start, run.principal.as_ref())
                    && run.request_hash != start.request_hash
                    && run.status == RunStatus::Interrupted
                    && resumes_own(start, view)
            }
        };
        let thread_ok = match &view.thread {
            Thread::New => true,
            Thread::Of(owner) => allowed(start, owner.as_ref()),
        };
        let answers_ok = ids.iter().all(|id| {
            view.interrupt(id).is_some_and(|i| {
                i.thread_id == start.thread_id
                    && i.status == InterruptStatus::Pending
                    && i.expires_at > now()
            })
        });
        let all_answered = view.interrupts.iter().all(|i| {
            i.thread_id != start.thread_id
                || i.status != InterruptStatus::Pending
                || ids.contains(&&i.id)
        });
        run_ok && thread_ok && view.active.is_none() && unique && answers_ok && all_answered
    }

    proptest! {
        #[test]
        fn a_start_is_planned_exactly_when_every_rule_holds(start in start(), view in view()) {
            let planned = plan(&start, &view, now());
            prop_assert_eq!(planned.is_ok(), may_start(&start, &view), "{:?}", planned);
        }

        #[test]
        fn a_planned_start_continues_exactly_an_interrupted_run(start in start(), view in view()) {
            let Ok(planned) = plan(&start, &view, now()) else {
                return Ok(());
            };
            match planned.begins {
                Begins::New => prop_assert!(view.run.is_none()),
                Begins::Continue { after } => {
                    let run = view.run.as_ref().unwrap();
                    prop_assert_eq!(run.status, RunStatus::Interrupted);
                    prop_assert_eq!(after, run.last_seq);
                    prop_assert!(!start.resume.is_empty());
                }
            }
            // The run belongs to the thread's principal, or to the caller for a new thread.
            let expected = match &view.thread {
                Thread::New => start.principal.as_ref().map(|p| p.name().to_owned()),
                Thread::Of(owner) => owner.clone(),
            };
            prop_assert_eq!(planned.principal, expected);
        }

        #[test]
        fn the_same_request_again_is_a_replay_for_whoever_may_see_its_run(
            start in start(),
            mut view in view(),
        ) {
            let run = view.run.get_or_insert_with(|| ExistingRun {
                status: RunStatus::Finished,
                principal: None,
                request_hash: String::new(),
                segment_start: 3,
                last_seq: 9,
            });
            run.request_hash.clone_from(&start.request_hash);
            let from = run.segment_start;
            let visible = allowed(&start, run.principal.as_ref());
            let answer = |refused: Result<_, StartError>| match refused {
                Err(StartError::Exists { same: true, from: f, .. }) => visible && f == from,
                Err(StartError::Exists { same: false, from: 0, .. }) => !visible,
                _ => false,
            };
            prop_assert!(answer(plan(&start, &view, now()).map(drop)));
            prop_assert!(answer(refusal(&start, &view).map(drop)));
        }

        #[test]
        fn another_principals_thread_does_not_exist_for_the_caller(
            start in start(),
            view in view(),
        ) {
            let Thread::Of(owner) = &view.thread else {
                return Ok(());
            };
            if view.run.is_none() && !allowed(&start, owner.as_ref()) {
                prop_assert!(matches!(
                    plan(&start, &view, now()),
                    Err(StartError::UnknownThread(_))
                ));
                prop_assert!(matches!(refusal(&start, &view), Err(StartError::UnknownThread(_))));
            }
        }

        #[test]
        fn the_refusal_does_not_depend_on_the_order_of_the_view(start in start(), view in view()) {
            let mut reversed = view.clone();
            reversed.interrupts.reverse();
            let (a, b) = (plan(&start, &view, now()), plan(&start, &reversed, now()));
            prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
        }

        #[test]
        fn answering_exactly_the_pending_interrupts_of_a_quiet_thread_starts(view in view()) {
            let mut view = view;
            view.active = None;
            view.run = None;
            let pending: Vec<_> = view
                .interrupts
                .iter()
                .filter(|i| {
                    i.thread_id == THREAD && i.status == InterruptStatus::Pending && i.expires_at > now()
                })
                .map(|i| (i.id.clone(), Decision::Approve))
                .collect();
            view.interrupts.retain(|i| i.thread_id != THREAD || i.status != InterruptStatus::Pending || i.expires_at > now());
            let start = Start { resume: pending, ..Start::new(THREAD.into(), RUN.into()) };
            prop_assert_eq!(plan(&start, &view, now()).unwrap().begins, Begins::New);
        }
    }

    #[test]
    fn the_first_rule_broken_is_the_refusal() {
        let pending = |n: usize, thread: &str| InterruptRecord {
            id: format!("i{n}").into(),
            thread_id: thread.into(),
            run_id: "r1".into(),
            tool_call_id: format!("c{n}").into(),
            tool_name: "delete".into(),
            arguments: serde_json::json!({}),
            args_hash: String::new(),
            created_at: now(),
            expires_at: now() + Duration::from_secs(60),
            status: InterruptStatus::Pending,
            resolution: None,
            resolved_by_run: None,
        };
        let answer = |n: usize| (InterruptId::from(format!("i{n}")), Decision::Approve);
        let start = |resume: Vec<(InterruptId, Decision)>| Start {
            resume,
            principal: Some(Principal::user("alice").unwrap()),
            ..Start::new(THREAD.into(), RUN.into())
        };
        let view = ThreadView {
            thread: Thread::Of(Some("alice".into())),
            run: None,
            active: Some("r1".into()),
            interrupts: vec![pending(1, THREAD), pending(2, THREAD), pending(3, "u")],
        };
        let refused = |start: &Start, view: &ThreadView| plan(start, view, now()).unwrap_err();
        assert!(matches!(
            refused(&start(vec![]), &view),
            StartError::Busy { .. }
        ));
        let bobs = ThreadView {
            thread: Thread::Of(Some("bob".into())),
            ..view.clone()
        };
        assert!(
            matches!(refused(&start(vec![]), &bobs), StartError::UnknownThread(_)),
            "another principal's thread before its busy run"
        );
        let quiet = ThreadView {
            active: None,
            ..view
        };
        assert!(matches!(
            refused(&start(vec![answer(3)]), &quiet),
            StartError::UnknownInterrupt(id) if id == "i3"
        ));
        assert!(matches!(
            refused(&start(vec![answer(1), answer(1)]), &quiet),
            StartError::AlreadyResolved { by_run, .. } if by_run == RUN
        ));
        assert!(matches!(
            refused(&start(vec![]), &quiet),
            StartError::InterruptsPending(ids) if ids == ["i1", "i2"]
        ));
        assert!(matches!(
            refused(&start(vec![answer(2)]), &quiet),
            StartError::ResumeMissing(ids) if ids == ["i1"]
        ));
        let both = start(vec![answer(2), answer(1)]);
        let planned = plan(&both, &quiet, now()).unwrap();
        assert_eq!(
            (planned.begins, planned.principal.as_deref()),
            (Begins::New, Some("alice"))
        );
        assert!(matches!(
            plan(&both, &quiet, now() + Duration::from_secs(60)),
            Err(StartError::Expired(id)) if id == "i2"
        ));
    }
}
