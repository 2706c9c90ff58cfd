//! A prompt's turn: a run of the session's thread, begun, followed to its end (its updates from
//! the stack for an editor on this machine, from the log for one across the network), its
//! approvals asked; and for a remote editor a turn in flight joined when it loads or resumes a
//! session (from a cursor: only what it missed).

use std::sync::Arc;

use agent_client_protocol::{
    Client, Error,
    v1::{
        ConnectionTo,
        schema::{
            self as acp, Meta, PromptResponse, ResumeSessionRequest, SessionId, SessionInfoUpdate,
            SessionUpdate,
        },
    },
};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    Reach, Shared,
    handlers::{not_found, notify, rfc3339, send},
    sessions::store_failed,
};
use crate::{
    acp::events::{LoggedUpdates, Shown},
    agui::{
        Event,
        event::{RunFinished, RunFinishedOutcome},
        input::{Interrupt, ResumeEntry, ResumeStatus},
        interrupt::{asked_call, resume_entry},
    },
    id::{MessageId, RunId, ThreadId, ToolCallId},
    map_error::{AcpStopReason, ErrorKind},
    message::Message,
    permission::{Decision, Mode, PendingCall},
    run::StopReason,
    runs::{
        Attach, BeginError, Begun, Interrupts, LoggedEvent, ResumeError, RunRecord, RunStatus,
        ThreadRecord,
    },
};

impl Shared {
    /// One turn: a run on the session's thread, its conversation the thread's and the prompt,
    /// followed to its end; cancelled through the engine when the turn's cancel fires. Its
    /// request asks for the session's `mode`, so that an instance continuing it after a crash is
    /// not more permissive than the session was. A remote editor is asked about the calls the run
    /// waits at, and the run goes on with its answers.
    pub(super) async fn turn(
        &self,
        turn: &Turn<'_>,
        prompt: Vec<crate::message::ContentPart>,
        mode: Mode,
        attach: Attach,
    ) -> Result<PromptResponse, Error> {
        let session = turn.session;
        let prompt = Message::User {
            id: MessageId::new(),
            content: prompt,
        };
        let caller = self.config.principal.as_ref();
        let mut request = self
            .runs
            .next_turn(caller, ThreadId::from(&*session.0), prompt)
            .await
            .map_err(|error| refused(session, &error))?;
        request.forwarded_props = Some(json!({"permission": {"mode": mode}}));
        if turn.cancel.is_cancelled() {
            return Ok(PromptResponse::new(acp::StopReason::Cancelled));
        }
        let begun = self
            .runs
            .begin_with(self.config.principal.clone(), request, Some(attach))
            .await
            .map_err(|error| refused(session, &error))?;
        let run = match begun {
            Begun::Refused { code, message, .. } => return Err(failed(code, message)),
            begun => begun,
        };
        let mut updates =
            (self.config.reach == Reach::Remote).then(|| LoggedUpdates::new(&self.config.kinds));
        self.drive(turn, run.run_id(), run.from(), updates.as_mut(), None)
            .await
    }

    /// Follows the turn's `run` after `from` to the end of the turn, its answer; the updates of
    /// what comes before `seen` (a place in it the editor was sent) are not sent again. With
    /// `updates` (a remote editor), the editor is asked about the calls the run waits at, and
    /// the run goes on with its answers.
    async fn drive(
        &self,
        turn: &Turn<'_>,
        run: &RunId,
        mut from: u64,
        mut updates: Option<&mut LoggedUpdates<'_>>,
        mut seen: Option<Place>,
    ) -> Result<PromptResponse, Error> {
        loop {
            let end = self
                .follow(turn, run, from, updates.as_deref_mut(), seen.take())
                .await;
            let (Some(interrupts), Some(updates), Some(end)) = (
                interrupts_of(end.as_ref()),
                updates.as_deref_mut(),
                end.as_ref(),
            ) else {
                return answer(end.as_ref());
            };
            let waiting = self.waiting(turn.session, interrupts).await?;
            if waiting.is_empty() {
                // Answered already (a turn joined from its start): the run went on after it.
                from = end.seq;
                continue;
            }
            let answers = self.ask(turn, &waiting, updates).await?;
            let dismissed = answers
                .iter()
                .any(|answer| answer.status == ResumeStatus::Cancelled);
            from = self
                .runs
                .continue_run(self.config.principal.clone(), run, answers)
                .await
                .map_err(|error| resume_failed(turn.session, &error))?
                .from();
            if dismissed {
                // The person cancelled at the question: the calls are dismissed, the turn ends.
                self.stop(turn.session, run).await;
            }
        }
    }

    /// Those of `interrupts` that still wait for an answer on the session's thread.
    async fn waiting(
        &self,
        session: &SessionId,
        interrupts: Vec<Interrupt>,
    ) -> Result<Vec<Interrupt>, Error> {
        let thread = ThreadId::from(&*session.0);
        let pending = self
            .runs
            .run_log()
            .interrupts(Interrupts::PendingOf(&thread))
            .await
            .map_err(|error| store_failed(session, &error))?;
        Ok(interrupts
            .into_iter()
            .filter(|interrupt| {
                pending
                    .iter()
                    .any(|waiting| waiting.id.as_str() == interrupt.id)
            })
            .collect())
    }

    /// The run in flight on a session's thread that an editor joins when it loads or resumes
    /// the session: a remote editor's (one on this machine is the agent's only client).
    pub(super) fn joins(&self, in_flight: Option<&RunRecord>) -> Option<RunId> {
        (self.config.reach == Reach::Remote)
            .then(|| in_flight.map(|run| run.run_id.clone()))
            .flatten()
    }

    /// The run a remote editor joins when it resumes a session, whether it is in flight, and
    /// where it joins: after the place its `_meta["acp/cursor"]` names (a run of the session
    /// that ended, too), else the run in flight from its start.
    pub(super) fn rejoins(
        &self,
        req: &ResumeSessionRequest,
        record: Option<&ThreadRecord>,
    ) -> Result<Option<(RunId, bool, JoinAt)>, Error> {
        let cursor = req
            .meta
            .as_ref()
            .and_then(|meta| meta.get(CURSOR))
            .filter(|_| self.config.reach == Reach::Remote);
        let Some(cursor) = cursor else {
            return Ok(record.and_then(|record| {
                let run = self.joins(in_flight(record))?;
                Some((run, true, JoinAt::Start(Shown::of(&record.messages))))
            }));
        };
        let unknown = || {
            Error::invalid_params().data(json!({
                "cursor": cursor,
                "reason": "no such place in this session's log: load the session instead",
            }))
        };
        let place = cursor.as_str().and_then(Place::parse).ok_or_else(unknown)?;
        let run = record
            .and_then(|record| record.runs.iter().find(|run| run.run_id == place.run))
            .ok_or_else(unknown)?;
        Ok(Some((
            run.run_id.clone(),
            run.status == RunStatus::Running,
            JoinAt::After(place),
        )))
    }

    /// Shows the editor `run` of `session`'s thread from where it `joins` to the end of its
    /// turn, which a `session_info_update` then says (its `_meta["acp/turnState"]`). The turn's
    /// approvals are asked of this editor, and `session/cancel` cancels it, as if it had
    /// prompted it.
    pub(super) fn join(
        self: &Arc<Self>,
        session: &SessionId,
        run: RunId,
        joins: JoinAt,
        cx: &ConnectionTo<Client>,
    ) {
        let Some(cancel) = self
            .sessions
            .lock()
            .get(&*session.0)
            .map(|session| session.cancel.clone())
        else {
            return;
        };
        let shared = self.clone();
        let session = session.clone();
        let connection = cx.clone();
        let spawned = cx.spawn(async move {
            let turn = Turn {
                session: &session,
                cancel: &cancel,
                cx: &connection,
            };
            let kinds = &shared.config.kinds;
            let (mut updates, seen) = match joins {
                JoinAt::Start(shown) => (LoggedUpdates::joining(kinds, shown), None),
                JoinAt::After(place) => (LoggedUpdates::new(kinds), Some(place)),
            };
            let answer = shared.drive(&turn, &run, 0, Some(&mut updates), seen).await;
            let stop = match &answer {
                _ if cancel.is_cancelled() => acp::StopReason::Cancelled,
                Ok(answer) => answer.stop_reason,
                Err(_) => acp::StopReason::EndTurn,
            };
            notify(
                &connection,
                &session,
                SessionUpdate::SessionInfoUpdate(
                    SessionInfoUpdate::new()
                        .updated_at(rfc3339(std::time::SystemTime::now()))
                        .meta(turn_state(None, Some(stop))),
                ),
            );
            Ok(())
        });
        if let Err(error) = spawned {
            tracing::debug!(%error, "the connection is gone");
        }
    }

    /// Follows `run` after `from` to its end: the terminal event (`None` when the log ended
    /// without one). With `updates` (a remote editor), the client is sent the run's updates as
    /// they are logged, each once it has room for it; the turn's cancel cancels the run.
    async fn follow(
        &self,
        turn: &Turn<'_>,
        run: &RunId,
        from: u64,
        mut updates: Option<&mut LoggedUpdates<'_>>,
        seen: Option<Place>,
    ) -> Option<LoggedEvent> {
        let mut events = self.runs.follow(run.clone(), from);
        let mut out = Vec::new();
        let mut room = self.outbox.as_ref().map(|outbox| (outbox, outbox.waiter()));
        let mut asked = false;
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(event) if event.is_terminal() => return Some(event),
                    Some(logged) => {
                        let (Some(updates), Ok(event)) = (&mut updates, logged.event()) else {
                            continue;
                        };
                        updates.translate(&event, &mut out);
                        for (part, update) in out.drain(..).enumerate() {
                            let place = Place { run: run.clone(), seq: logged.seq, part };
                            if seen.as_ref().is_some_and(|seen| place <= *seen) {
                                // Sent before: translated again only for what follows.
                                continue;
                            }
                            if let Some((outbox, waiter)) = &mut room {
                                std::future::poll_fn(|cx| outbox.poll_reserve(waiter, cx)).await;
                            }
                            notify_at(turn.cx, turn.session, update, &place);
                        }
                    }
                    None => return None,
                },
                () = turn.cancel.cancelled(), if !asked => {
                    asked = true;
                    self.stop(turn.session, run).await;
                }
            }
        }
    }

    /// Cancels `run` through the engine, wherever it runs.
    async fn stop(&self, session: &SessionId, run: &RunId) {
        if let Err(error) = self.runs.cancel(run).await {
            tracing::warn!(%session, %error, "the turn could not be cancelled");
        }
    }

    /// The remote editor's answers to the calls a run waits at, one permission request each; a
    /// cancel (the person's, or the turn's) dismisses the call and those after it.
    async fn ask(
        &self,
        turn: &Turn<'_>,
        interrupts: &[Interrupt],
        updates: &mut LoggedUpdates<'_>,
    ) -> Result<Vec<ResumeEntry>, Error> {
        let editor = self.editor.get().ok_or_else(|| {
            Error::internal_error().data(json!({"reason": "the client did not initialize"}))
        })?;
        let mut answers = Vec::with_capacity(interrupts.len());
        let mut dismissed = false;
        for interrupt in interrupts {
            let call = self.waiting_call(interrupt);
            let decision = if dismissed {
                Decision::Cancel
            } else {
                tokio::select! {
                    decided = editor.decide(&turn.session.0, &call) => decided.map_err(|error| {
                        // The interrupts stay pending, for this editor's next connection or
                        // another door.
                        tracing::debug!(session = %turn.session, %error, "an approval was not answered");
                        Error::internal_error().data(json!({"reason": "the approval was not answered"}))
                    })?,
                    () = turn.cancel.cancelled() => Decision::Cancel,
                }
            };
            dismissed |= decision == Decision::Cancel;
            if !matches!(
                decision,
                Decision::Approve | Decision::ApproveAlways | Decision::Edit(_)
            ) {
                updates.declined(call.id);
            }
            answers.push(resume_entry(interrupt.id.clone(), &decision));
        }
        Ok(answers)
    }

    /// The call `interrupt` asks about, as the editor is asked about it.
    fn waiting_call(&self, interrupt: &Interrupt) -> PendingCall {
        let (tool, arguments) = asked_call(interrupt);
        let tool = tool.unwrap_or("tool");
        PendingCall {
            id: interrupt
                .tool_call_id
                .clone()
                .unwrap_or_else(|| ToolCallId::from(interrupt.id.as_str())),
            name: tool.to_owned(),
            arguments: arguments.clone(),
            kind: self.config.kinds.of(tool),
        }
    }
}

/// [`notify`], the update's `place` in the log in its `_meta` (its cursor).
fn notify_at(cx: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate, place: &Place) {
    let cursor = Meta::from_iter([(CURSOR.to_owned(), Value::String(place.to_string()))]);
    send(
        cx,
        acp::SessionNotification::new(session.clone(), update).meta(cursor),
    );
}

/// A prompt turn's context: its session, its cancel and its client.
pub(super) struct Turn<'a> {
    pub(super) session: &'a SessionId,
    pub(super) cancel: &'a CancellationToken,
    pub(super) cx: &'a ConnectionTo<Client>,
}

/// The interrupts a run stopped at, when its terminal event `end` says so.
fn interrupts_of(end: Option<&LoggedEvent>) -> Option<Vec<Interrupt>> {
    match end?.event().ok()? {
        Event::RunFinished(RunFinished {
            outcome: Some(RunFinishedOutcome::Interrupt { interrupts }),
            ..
        }) => Some(interrupts),
        _ => None,
    }
}

/// The run in flight on a thread, if any.
pub(super) fn in_flight(thread: &ThreadRecord) -> Option<&RunRecord> {
    thread
        .runs
        .iter()
        .rev()
        .find(|run| run.status == RunStatus::Running)
}

/// The key of a session's turn state, in `_meta`: `{"running": true, "runId"}` while a turn
/// goes, `{"running": false, "stopReason"?}` once it ended.
const TURN_STATE: &str = "acp/turnState";

/// The key of the cursor of an update read from the log, in its notification's `_meta`.
const CURSOR: &str = "acp/cursor";

/// A session's turn state as `_meta`: the run the editor joined (and whether it is in flight),
/// else idle (with how its turn ended).
pub(super) fn turn_state(joined: Option<(&RunId, bool)>, stopped: Option<acp::StopReason>) -> Meta {
    let state = match (joined, stopped) {
        (Some((run, running)), _) => json!({"running": running, "runId": run}),
        (None, Some(stop)) => json!({"running": false, "stopReason": stop}),
        (None, None) => json!({"running": false}),
    };
    Meta::from_iter([(TURN_STATE.to_owned(), state)])
}

/// Where an update is in the log, its cursor: `{runId}:{seq}:{part}`, the `part`th update (from
/// 0) the event at `seq` of the run was shown as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Place {
    run: RunId,
    seq: u64,
    part: usize,
}

impl Place {
    /// The place a cursor names (a run id may hold colons: the numbers are read from the end).
    fn parse(cursor: &str) -> Option<Self> {
        let mut fields = cursor.rsplitn(3, ':');
        let part = fields.next()?.parse().ok()?;
        let seq = fields.next()?.parse().ok()?;
        let run = fields.next().filter(|run| !run.is_empty())?;
        Some(Self {
            run: RunId::from(run),
            seq,
            part,
        })
    }
}

impl PartialOrd for Place {
    /// Places of one run are ordered; places of two runs are not.
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        (self.run == other.run).then(|| (self.seq, self.part).cmp(&(other.seq, other.part)))
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.run, self.seq, self.part)
    }
}

/// Where an editor joins a run: from its start, having been shown the thread, or after a place
/// it was sent.
pub(super) enum JoinAt {
    Start(Shown),
    After(Place),
}

/// What a turn is answered with: its run's terminal event as a stop reason (a run that ends
/// with an error ACP has a stop reason for, too), else as a JSON-RPC error whose `data.kind` is
/// the `RUN_ERROR` code.
fn answer(end: Option<&LoggedEvent>) -> Result<PromptResponse, Error> {
    let stop = match end.and_then(|end| end.event().ok()) {
        Some(Event::RunFinished(finished)) => match finished.outcome {
            Some(RunFinishedOutcome::Cancelled) => AcpStopReason::Cancelled,
            // The stop reasons AG-UI has no outcome for ride in `result.stopReason`.
            _ => finished
                .result
                .as_ref()
                .and_then(|result| result.get("stopReason"))
                .and_then(|stop| serde_json::from_value::<StopReason>(stop.clone()).ok())
                .map_or(AcpStopReason::EndTurn, AcpStopReason::from),
        },
        Some(Event::RunError(error)) => {
            let code = error.code.as_deref().unwrap_or("internal");
            match ErrorKind::from_code(code).and_then(ErrorKind::acp_stop) {
                Some(stop) => stop,
                None => return Err(failed(code, error.message)),
            }
        }
        _ => {
            return Err(failed(
                "internal",
                "the turn ended without its end".to_owned(),
            ));
        }
    };
    Ok(PromptResponse::new(stop_reason(stop)))
}

/// The JSON-RPC error of a turn that failed with `code`.
fn failed(code: &str, message: String) -> Error {
    tracing::warn!(code, %message, "prompt failed");
    let rpc = ErrorKind::from_code(code).map_or(-32603, ErrorKind::json_rpc_code);
    Error::new(i32::try_from(rpc).unwrap_or(-32603), message).data(json!({ "kind": code }))
}

/// The error of a turn whose run could not go on with the editor's answers.
fn resume_failed(session: &SessionId, error: &ResumeError) -> Error {
    match error {
        ResumeError::UnknownRun(_) => not_found(session),
        ResumeError::Begin(error) => refused(session, error),
        error => failed(error.code(), error.to_string()),
    }
}

/// The error of a turn the engine took no run for.
fn refused(session: &SessionId, error: &BeginError) -> Error {
    match error {
        BeginError::Busy(_) => Error::invalid_request().data(json!({
            "kind": error.code(),
            "reason": "a prompt is already running in this session",
        })),
        BeginError::UnknownThread(_) => not_found(session),
        BeginError::Unavailable(cause) => store_failed(session, cause),
        _ => failed(error.code(), error.to_string()),
    }
}

fn stop_reason(reason: AcpStopReason) -> acp::StopReason {
    match reason {
        AcpStopReason::EndTurn => acp::StopReason::EndTurn,
        AcpStopReason::MaxTokens => acp::StopReason::MaxTokens,
        AcpStopReason::MaxTurnRequests => acp::StopReason::MaxTurnRequests,
        AcpStopReason::Refusal => acp::StopReason::Refusal,
        AcpStopReason::Cancelled => acp::StopReason::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_names_its_place_whatever_the_run_id() {
        let place = |run: &str, seq, part| Place {
            run: RunId::from(run),
            seq,
            part,
        };
        for written in [place("01a2-b", 7, 0), place("a:b:c", 12, 3)] {
            assert_eq!(Place::parse(&written.to_string()), Some(written));
        }
        for wrong in ["", "7:0", ":7:0", "r:x:0", "r:7:-1", "r:7"] {
            assert_eq!(Place::parse(wrong), None, "{wrong}");
        }
        assert!(place("r", 7, 1) < place("r", 8, 0));
        assert!(place("r", 7, 0) < place("r", 7, 1));
        assert_eq!(place("r", 7, 0).partial_cmp(&place("s", 1, 0)), None);
    }
}
