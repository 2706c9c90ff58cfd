//! Response futures of [`Agui`](super::Agui).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;
use serde_json::{Value, json};

use super::{
    Event, ModelEncoder,
    event::{
        ActivityDelta, ActivitySnapshot, BaseEvent, RunFinishedOutcome, ToolCallResult, ToolRole,
    },
    framing::{Framing, run_finished},
    input::ToolContent,
};
use crate::{
    BoxError,
    context::SharedState,
    id::{MessageId, ToolCallId},
    run::RunOutcome,
    stream::{Outbox, TeeFuture},
    tool::{Progress, ToolCall, ToolReply},
    transport::Transport,
};

pub use super::framing::{COST_EVENT, USAGE_EVENT};

/// The future of a wrapped model call: resolves to the model's stream, teed.
///
/// A call that fails before streaming emits nothing (the step never started).
pub type ModelResponseFuture<F, T> = TeeFuture<F, T, ModelEncoder, Event>;

/// What a tool call's `TOOL_CALL_RESULT` needs.
#[derive(Debug)]
pub(crate) struct ToolResult {
    pub(crate) tool_call_id: ToolCallId,
    pub(crate) message_id: MessageId,
    pub(crate) emit: bool,
    /// The run's state: what the tool changed goes out right after its result.
    pub(crate) state: Option<SharedState>,
}

/// The activity message shown while a tool runs: `{toolCallId, toolName, status, progress?}`.
#[derive(Debug)]
pub(crate) struct ToolActivity {
    message_id: MessageId,
    content: serde_json::Value,
    progress: Progress,
}

impl ToolActivity {
    pub(crate) fn new(message_id: MessageId, call: &ToolCall, progress: Progress) -> Self {
        Self {
            message_id,
            content: json!({"toolCallId": call.id, "toolName": call.name, "status": "running"}),
            progress,
        }
    }

    pub(crate) fn snapshot(&mut self, status: &str) -> Event {
        self.content["status"] = json!(status);
        activity_snapshot(self.message_id.clone(), self.content.clone())
    }

    /// The latest progress report, as a delta of the activity's content.
    fn poll_progress(&mut self, cx: &mut Context<'_>) -> Option<Event> {
        let progress = self.progress.poll_take(cx)?;
        let mut next = self.content.clone();
        next["progress"] = progress;
        let patch = json_patch::diff(&self.content, &next);
        self.content = next;
        (!patch.0.is_empty()).then(|| activity_delta(self.message_id.clone(), &patch))
    }
}

pin_project! {
    /// The future of a wrapped tool call: the tool's own result, once `TOOL_CALL_RESULT` is out.
    pub struct ToolResponseFuture<F, T>
    where
        F: Future,
        T: Transport<Event>,
    {
        #[pin]
        inner: F,
        outbox: Outbox<T, Event>,
        result: ToolResult,
        activity: Option<ToolActivity>,
        output: Option<F::Output>,
        done: bool,
    }

    impl<F, T> PinnedDrop for ToolResponseFuture<F, T>
    where
        F: Future,
        T: Transport<Event>,
    {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if *this.done {
                return;
            }
            if this.output.is_none()
                && let Some(mut activity) = this.activity.take() {
                    this.outbox.queue().push_back(activity.snapshot("cancelled"));
                }
            this.outbox.send_now();
        }
    }
}

impl<F, T> ToolResponseFuture<F, T>
where
    F: Future,
    T: Transport<Event>,
{
    pub(crate) fn new(
        inner: F,
        outbox: Outbox<T, Event>,
        result: ToolResult,
        activity: Option<ToolActivity>,
    ) -> Self {
        Self {
            inner,
            outbox,
            result,
            activity,
            output: None,
            done: false,
        }
    }
}

impl<F, R, E, T> Future for ToolResponseFuture<F, T>
where
    F: Future<Output = Result<R, E>>,
    R: ToolReply,
    E: fmt::Display + 'static,
    T: Transport<Event>,
{
    type Output = Result<R, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if this.output.is_none() {
            if let Some(event) = this.activity.as_mut().and_then(|a| a.poll_progress(cx)) {
                this.outbox.push(event);
            }
            ready!(this.outbox.poll_drain(cx));
            let output = ready!(this.inner.poll(cx));
            // A call that stopped at an interrupt has no result yet: the run that resumes it
            // reports it, under the same tool call id.
            let (content, failed) = match &output {
                Ok(reply) => match reply.output() {
                    Some(out) => (
                        Some(ToolContent::from_parts(out.ui_content())),
                        out.is_error,
                    ),
                    None => (None, false),
                },
                Err(error) => (Some(ToolContent::Text(error.to_string())), true),
            };
            let interrupted = content.is_none();
            if let Some(content) = content.filter(|_| this.result.emit) {
                this.outbox.push(
                    ToolCallResult {
                        message_id: this.result.message_id.clone(),
                        tool_call_id: this.result.tool_call_id.clone(),
                        content,
                        role: Some(ToolRole::Tool),
                        subagent_run_id: None,
                        base: BaseEvent::default(),
                    }
                    .into(),
                );
            }
            if let Some(changes) = this.result.state.as_ref().map(SharedState::take_changes)
                && !changes.is_empty()
            {
                this.outbox.push(Event::state_delta(&changes));
            }
            if let Some(mut activity) = this.activity.take() {
                let status = match (interrupted, failed) {
                    (true, _) => "interrupted",
                    (false, true) => "failed",
                    (false, false) => "completed",
                };
                this.outbox.push(activity.snapshot(status));
            }
            *this.output = Some(output);
        }
        ready!(this.outbox.poll_flush(cx));
        *this.done = true;
        Poll::Ready(
            this.output
                .take()
                .expect("ToolResponseFuture polled after completion"),
        )
    }
}

impl<F: Future, T: Transport<Event>> fmt::Debug for ToolResponseFuture<F, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolResponseFuture")
            .field("inner", &std::any::type_name::<F>())
            .field("result", &self.result)
            .finish_non_exhaustive()
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Running { #[pin] inner: F },
        Rejected { error: Option<BoxError> },
        Done,
    }
}

pin_project! {
    /// The future of a wrapped run: `RUN_STARTED` first, exactly one terminal event last.
    ///
    /// On success it emits the final state snapshot (if configured), `MESSAGES_SNAPSHOT` and
    /// `RUN_FINISHED`; on error, `RUN_ERROR`; when dropped before the end, the inner run is torn
    /// down first (so its steps close what they opened) and then `RUN_FINISHED` with a
    /// `cancelled` outcome is sent without waiting.
    pub struct RunResponseFuture<F, T>
    where
        T: Transport<Event>,
    {
        #[pin]
        state: State<F>,
        outbox: Outbox<T, Event>,
        framing: Option<Framing>,
        shared: Option<SharedState>,
        result: Option<Result<RunOutcome, BoxError>>,
        span: tracing::Span,
        done: bool,
    }

    impl<F, T> PinnedDrop for RunResponseFuture<F, T>
    where
        T: Transport<Event>,
    {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            if *this.done {
                return;
            }
            if this.result.is_none() {
                // Tear the run down first: its steps close their messages and tool calls.
                this.state.set(State::Done);
                if let Some(framing) = this.framing.as_ref() {
                    this.outbox.queue().push_back(run_finished(&framing.ids, RunFinishedOutcome::Cancelled, None, None));
                }
            }
            this.outbox.send_now();
        }
    }
}

impl<F, T: Transport<Event>> RunResponseFuture<F, T> {
    pub(crate) fn new(
        inner: F,
        outbox: Outbox<T, Event>,
        framing: Framing,
        shared: SharedState,
        span: tracing::Span,
    ) -> Self {
        Self {
            state: State::Running { inner },
            outbox,
            framing: Some(framing),
            shared: Some(shared),
            result: None,
            span,
            done: false,
        }
    }

    pub(crate) fn rejected(outbox: Outbox<T, Event>, error: BoxError) -> Self {
        Self {
            state: State::Rejected { error: Some(error) },
            outbox,
            framing: None,
            shared: None,
            result: None,
            span: tracing::Span::none(),
            done: false,
        }
    }
}

impl<F, E, T> Future for RunResponseFuture<F, T>
where
    F: Future<Output = Result<RunOutcome, E>>,
    E: Into<BoxError>,
    T: Transport<Event>,
{
    type Output = Result<RunOutcome, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let _entered = this.span.enter();
        if this.result.is_none() {
            // RUN_STARTED (and the initial snapshot) go out before the run does anything; state
            // changed by work of the run's own (background) goes out as it happens.
            if let Some(changes) = this.shared.as_ref().map(|s| s.poll_changes(cx))
                && !changes.is_empty()
            {
                this.outbox.push(Event::state_delta(&changes));
            }
            ready!(this.outbox.poll_drain(cx));
            // The run may now wait long on its model: its own events are few.
            this.outbox.release();
            let result = match this.state.as_mut().project() {
                StateProj::Running { inner } => ready!(inner.poll(cx)).map_err(Into::into),
                StateProj::Rejected { error } => Err(error
                    .take()
                    .expect("RunResponseFuture polled after completion")),
                StateProj::Done => panic!("RunResponseFuture polled after completion"),
            };
            this.state.set(State::Done);
            if let Some(framing) = this.framing.as_ref() {
                // Changes no tool result carried out (made by the model layer, by code around
                // the agent) go out before the end.
                let changes = this.shared.as_ref().map(SharedState::take_changes);
                if let Some(changes) = changes.filter(|c| !c.is_empty()) {
                    this.outbox.push(Event::state_delta(&changes));
                }
                this.outbox.queue().extend(framing.closing(&result));
            }
            *this.result = Some(result);
        }
        ready!(this.outbox.poll_flush(cx));
        *this.done = true;
        Poll::Ready(
            this.result
                .take()
                .expect("RunResponseFuture polled after completion"),
        )
    }
}

impl<F, T: Transport<Event>> fmt::Debug for RunResponseFuture<F, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunResponseFuture")
            .field("inner", &std::any::type_name::<F>())
            .field("framing", &self.framing)
            .finish_non_exhaustive()
    }
}

fn activity_delta(message_id: MessageId, patch: &json_patch::Patch) -> Event {
    ActivityDelta {
        message_id,
        activity_type: "tool_call".to_owned(),
        patch: patch
            .0
            .iter()
            .map(|op| serde_json::to_value(op).expect("patch operations serialize"))
            .collect(),
        subagent_run_id: None,
        base: BaseEvent::default(),
    }
    .into()
}

fn activity_snapshot(message_id: MessageId, content: Value) -> Event {
    ActivitySnapshot {
        message_id,
        activity_type: "tool_call".to_owned(),
        content,
        replace: None,
        subagent_run_id: None,
        base: BaseEvent::default(),
    }
    .into()
}
