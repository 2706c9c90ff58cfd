//! A run's own events, as AG-UI says them: what opens it (`RUN_STARTED`, the initial state
//! snapshot) and what closes it (the final snapshots, `RUN_FINISHED` or `RUN_ERROR`).
//!
//! The run-level [`Agui`](super::Agui) writes them around the agent it wraps; the
//! [run engine](crate::runs) writes the same ones for an agent that writes none.

use serde_json::{Value, json};

use super::{
    AguiOptions, Event, RunAgentInput,
    event::{BaseEvent, RunError, RunFinished, RunFinishedOutcome, RunStarted, TokenUsage},
    input::ClientProtocol,
};
use crate::{
    BoxError,
    context::{Extensions, ForwardedProps, RunContext},
    id::{RunId, ThreadId},
    message::Message,
    run::{RunOutcome, RunRequest, StopReason},
};

/// The ids on a run's events.
#[derive(Debug, Clone)]
pub(crate) struct RunIds {
    pub(crate) thread_id: ThreadId,
    pub(crate) run_id: RunId,
    /// Whom the run's events are for: what its `RUN_FINISHED` may say.
    pub(crate) protocol: ClientProtocol,
}

/// What a run's own events say, resolved once from its request: its ids and its options.
#[derive(Debug, Clone)]
pub(crate) struct Framing {
    pub(crate) ids: RunIds,
    pub(crate) options: AguiOptions,
}

impl Framing {
    /// The framing of `run`: its options are its context's over its request's
    /// (`forwardedProps.agui`) over `layer`'s; its ids are its own unless the options replace them.
    ///
    /// # Errors
    ///
    /// When the request asks for options that are not valid.
    pub(crate) fn of(
        layer: &AguiOptions,
        run: &RunContext,
    ) -> Result<Self, super::error::ConfigError> {
        let options = run_options(layer, &run.extensions)?;
        let ids = RunIds {
            thread_id: options
                .thread_id
                .clone()
                .unwrap_or_else(|| run.thread_id.clone()),
            run_id: options.run_id.clone().unwrap_or_else(|| run.run_id.clone()),
            protocol: run
                .extensions
                .get::<ClientProtocol>()
                .copied()
                .unwrap_or_default(),
        };
        Ok(Self { ids, options })
    }

    /// `RUN_STARTED`, echoing what `req` answers, then the state's snapshot if the options ask
    /// for the initial one.
    pub(crate) fn opening(&self, req: &RunRequest) -> impl Iterator<Item = Event> + use<> {
        let started = RunStarted {
            thread_id: self.ids.thread_id.clone(),
            run_id: self.ids.run_id.clone(),
            parent_run_id: None,
            input: Some(Box::new(answered(&self.ids, req))),
            protocol_version: Some(super::PROTOCOL_VERSION.to_owned()),
            base: BaseEvent::default(),
        };
        let state = req
            .state
            .as_ref()
            .filter(|_| self.options.state_snapshots().initial())
            .map(|state| Event::state_snapshot(state.clone()));
        std::iter::once(started.into()).chain(state)
    }

    /// What closes a run that returned `result`: the snapshots its options ask for, what its
    /// models cost, then `RUN_FINISHED` (or `RUN_ERROR` for a run that failed).
    pub(crate) fn closing(&self, result: &Result<RunOutcome, BoxError>) -> Vec<Event> {
        terminal_events(&self.ids, &self.options, result)
    }
}

/// A `RUN_STARTED` that echoes nothing: the start of a run the engine writes without its
/// request at hand (a run refused before it ran, a run taken over before its own start was
/// logged), whose later events say what it answers.
#[cfg(feature = "runs")]
pub(crate) fn bare_start(thread_id: &ThreadId, run_id: &RunId) -> Event {
    RunStarted {
        thread_id: thread_id.clone(),
        run_id: run_id.clone(),
        parent_run_id: None,
        input: None,
        protocol_version: Some(super::PROTOCOL_VERSION.to_owned()),
        base: BaseEvent::default(),
    }
    .into()
}

/// The `RUN_ERROR` of a run whose request asks for options that are not valid.
pub(crate) fn invalid_options(error: &super::error::ConfigError) -> Event {
    RunError {
        message: error.to_string(),
        code: Some("invalid_options".to_owned()),
        usage: None,
        base: BaseEvent::default(),
    }
    .into()
}

/// What `RUN_STARTED` echoes of the run's input: the messages the run answers, those after the
/// conversation's last assistant message (the new user turn, the results of client tools), so
/// that a client that follows the run from its start (a reloaded page re-joining it) shows what
/// it answers, and the answers it brings to interrupts (`resume`), so that its log says what was
/// decided. The conversation before them is the thread's, and is not sent again: a run's log
/// grows with its own input only.
fn answered(ids: &RunIds, req: &RunRequest) -> RunAgentInput {
    let messages = &req.messages;
    let from = messages
        .iter()
        .rposition(|message| matches!(message, Message::Assistant { .. }))
        .map_or(0, |last| last + 1);
    let echoed = messages[from..]
        .iter()
        .filter_map(super::input::Message::from_domain)
        .collect();
    let mut input = RunAgentInput::new(ids.thread_id.clone(), ids.run_id.clone(), echoed);
    input.protocol_version = None;
    input.resume = req
        .run
        .extensions
        .get::<super::input::Answers>()
        .map(|answers| answers.0.clone());
    input
}

/// The run's options: its context's over the request's (`forwardedProps.agui`) over the layer's.
fn run_options(
    layer: &AguiOptions,
    extensions: &Extensions,
) -> Result<AguiOptions, super::error::ConfigError> {
    let requested = match extensions
        .get::<ForwardedProps>()
        .and_then(|props| props.0.get("agui"))
    {
        Some(value) => serde_json::from_value::<AguiOptions>(value.clone())
            .map_err(|e| super::error::ConfigError::new(format!("forwardedProps.agui: {e}")))?,
        None => AguiOptions::default(),
    };
    let options = match extensions.get::<AguiOptions>() {
        Some(run) => run.clone().or(&requested.or(layer)),
        None => requested.or(layer),
    };
    options.validate()?;
    Ok(options)
}

fn terminal_events(
    ids: &RunIds,
    options: &AguiOptions,
    result: &Result<RunOutcome, BoxError>,
) -> Vec<Event> {
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            let (code, message) = crate::map_error::run_error(error.as_ref());
            tracing::debug!(?code, %message, "run failed");
            return vec![
                RunError {
                    message,
                    code,
                    usage: None,
                    base: BaseEvent::default(),
                }
                .into(),
            ];
        }
    };
    let mut events = Vec::with_capacity(3);
    let interrupted = outcome.stop == StopReason::Interrupted;
    // The state a resume needs goes out before an interrupting end, whatever the options.
    if let Some(state) = outcome
        .state
        .as_ref()
        .filter(|_| interrupted || options.state_snapshots().last())
    {
        events.push(Event::state_snapshot(state.clone()));
    }
    if interrupted || options.messages_snapshot() {
        events.push(Event::messages_snapshot(&outcome.messages));
    }
    let finished = match outcome.stop {
        StopReason::Cancelled => RunFinishedOutcome::Cancelled,
        StopReason::ClientToolCalls => RunFinishedOutcome::Success {
            pending_tool_call_ids: Some(outcome.pending_tool_calls.clone()),
        },
        StopReason::Interrupted => RunFinishedOutcome::Interrupt {
            interrupts: outcome
                .interrupts
                .iter()
                .map(super::interrupt::to_wire)
                .collect(),
        },
        _ => RunFinishedOutcome::Success {
            pending_tool_call_ids: None,
        },
    };
    let result = match outcome.stop {
        StopReason::MaxTokens | StopReason::MaxTurns | StopReason::Refusal => {
            Some(json!({ "stopReason": outcome.stop }))
        }
        _ => None,
    };
    let usage = token_usage(outcome);
    if let Some(cost) = usage.as_deref().and_then(cost_event) {
        events.push(cost);
    }
    events.push(run_finished(ids, finished, result, usage));
    events
}

/// The name of the `CUSTOM` event saying what a run's models cost.
pub const COST_EVENT: &str = "agent_tower.cost";

/// `CUSTOM` `agent_tower.cost`: `{total, models: [{provider, model, cost}]}`, costs as
/// `{amount, currency}`, when a [`CostLayer`](crate::model::cost::CostLayer) priced the run.
/// Not on `usage` itself: AG-UI 1.0 clients strip (and warn about) fields their schema lacks.
fn cost_event(usage: &[TokenUsage]) -> Option<Event> {
    let priced: Vec<&TokenUsage> = usage.iter().filter(|u| u.cost.is_some()).collect();
    if priced.is_empty() {
        return None;
    }
    let total: crate::model::Cost = priced.iter().filter_map(|u| u.cost).sum();
    let models: Vec<Value> = priced
        .iter()
        .map(|u| json!({"provider": u.provider, "model": u.model, "cost": u.cost}))
        .collect();
    Some(
        super::event::Custom {
            name: COST_EVENT.to_owned(),
            value: json!({"total": total, "models": models}),
            subagent_run_id: None,
            base: BaseEvent::default(),
        }
        .into(),
    )
}

/// The name of the `CUSTOM` event saying what one model call used.
pub const USAGE_EVENT: &str = "agent_tower.usage";

/// `CUSTOM` `agent_tower.usage`: one model call's [`TokenUsage`] (`provider`, `model`,
/// `inputTokens`, `outputTokens`, …) and its `cost` (`{amount, currency}`) when it was priced;
/// at the end of the call's step, so that a timeline of the run can say what each step used.
pub(crate) fn usage_event(usage: &crate::model::Usage) -> Event {
    let mut value = serde_json::to_value(TokenUsage::from(usage)).unwrap_or_default();
    if let (Some(cost), Some(fields)) = (usage.cost, value.as_object_mut()) {
        fields.insert("cost".to_owned(), json!(cost));
    }
    super::event::Custom {
        name: USAGE_EVENT.to_owned(),
        value,
        subagent_run_id: None,
        base: BaseEvent::default(),
    }
    .into()
}

/// The run's usage as AG-UI counts it: an entry per provider and model.
pub(crate) fn token_usage(outcome: &RunOutcome) -> Option<Vec<TokenUsage>> {
    if outcome.usage.is_empty() {
        None
    } else if outcome.models.is_empty() {
        Some(vec![TokenUsage::from(&outcome.usage)])
    } else {
        Some(outcome.models.iter().map(TokenUsage::from).collect())
    }
}

/// The run's end, as its client's generation can read it (see [`ClientProtocol`]).
pub(crate) fn run_finished(
    ids: &RunIds,
    outcome: RunFinishedOutcome,
    result: Option<serde_json::Value>,
    usage: Option<Vec<TokenUsage>>,
) -> Event {
    let outcome = match (ids.protocol, outcome) {
        (ClientProtocol::PreV1, RunFinishedOutcome::Cancelled) => {
            return RunError {
                message: "the run was cancelled".to_owned(),
                code: Some("cancelled".to_owned()),
                usage,
                base: BaseEvent::default(),
            }
            .into();
        }
        (ClientProtocol::PreV1, RunFinishedOutcome::Success { .. }) => {
            RunFinishedOutcome::Success {
                pending_tool_call_ids: None,
            }
        }
        (_, outcome) => outcome,
    };
    RunFinished {
        thread_id: ids.thread_id.clone(),
        run_id: ids.run_id.clone(),
        result: result.map(Box::new),
        outcome: Some(outcome),
        usage,
        base: BaseEvent::default(),
    }
    .into()
}
