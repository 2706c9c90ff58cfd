//! The response future of [`Permission`](super::Permission).

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use pin_project_lite::pin_project;
use tokio_util::sync::WaitForCancellationFutureOwned;
use tower::util::{Oneshot, ServiceExt};
use tower_service::Service;

use super::{
    Action, Decision, Policy,
    batch::{SharedDecisions, Ticket},
    error::{ApprovalFailed, Cancelled},
    remember::Remembered,
};
use crate::{
    BoxError,
    id::InterruptId,
    tool::{Interrupt, Started, ToolCall, ToolOutput, ToolReply, ToolResponse},
};

pin_project! {
    #[project = StateProj]
    enum State<S>
    where
        S: Service<ToolCall>,
    {
        Done { output: Option<Result<ToolResponse, BoxError>> },
        Waiting {
            #[pin] decisions: SharedDecisions,
            #[pin] cancelled: WaitForCancellationFutureOwned,
            ticket: Option<Ticket>,
            call: Option<ToolCall>,
            inner: Option<S>,
            policy: Arc<Policy>,
            remembered: Remembered,
        },
        Running { #[pin] call: Oneshot<S, ToolCall> },
    }
}

impl<S> State<S>
where
    S: Service<ToolCall>,
    S::Response: ToolReply,
{
    /// What a decision about `call` leads to; an "always" answer is remembered.
    fn decided(
        inner: S,
        mut call: ToolCall,
        policy: &Policy,
        remembered: &Remembered,
        decision: Decision,
    ) -> Self {
        let done = |output: Result<ToolOutput, BoxError>| State::Done {
            output: Some(output.map(ToolResponse::Output)),
        };
        remembered.note(&call, &decision);
        match decision {
            Decision::Approve | Decision::ApproveAlways => State::run(inner, call),
            Decision::Edit(arguments) => {
                call.arguments = arguments;
                if policy.decide_for(&call) == Action::Deny {
                    done(Ok(denial(&call.name)))
                } else {
                    State::run(inner, call)
                }
            }
            Decision::Reject(feedback) | Decision::RejectAlways(feedback) => {
                done(Ok(refusal(if call.name == super::Question::TOOL {
                    // A question answered no: the answer is the feedback.
                    feedback
                } else {
                    format!("The user rejected this call of `{}`: {feedback}", call.name)
                })))
            }
            Decision::Cancel => {
                call.run.cancel.cancel();
                done(Err(Box::new(Cancelled::new())))
            }
            Decision::Interrupt { expires_at } => State::Done {
                output: Some(Ok(ToolResponse::Interrupted(Interrupt {
                    id: InterruptId::new(),
                    tool_call_id: call.id,
                    tool_name: call.name,
                    arguments: call.arguments,
                    expires_at,
                }))),
            },
        }
    }

    /// A held call runs: whoever watches its start hears of it.
    fn run(inner: S, call: ToolCall) -> Self {
        if let Some(started) = call.run.extensions.get::<Started>() {
            started.start();
        }
        State::Running {
            call: inner.oneshot(call),
        }
    }
}

pin_project! {
    /// Allowed: the tool's call. Denied: a result saying so. Asked: the decision, then as decided
    /// (deferred: the [`Interrupt`], as the answer).
    pub struct ResponseFuture<S>
    where
        S: Service<ToolCall>,
    {
        #[pin]
        state: State<S>,
    }
}

/// What the model reads when a call does not run.
fn refusal(text: String) -> ToolOutput {
    ToolOutput::error(text)
}

fn denial(tool: &str) -> ToolOutput {
    refusal(format!(
        "The permission policy does not allow calling `{tool}`."
    ))
}

impl<S> ResponseFuture<S>
where
    S: Service<ToolCall>,
    S::Response: ToolReply,
{
    pub(crate) fn run(inner: S, call: ToolCall) -> Self {
        Self {
            state: State::Running {
                call: inner.oneshot(call),
            },
        }
    }

    pub(crate) fn denied(tool: &str) -> Self {
        Self {
            state: State::Done {
                output: Some(Ok(ToolResponse::Output(denial(tool)))),
            },
        }
    }

    /// A call decided before it was made (an answer to an earlier run's interrupt).
    pub(crate) fn decided(
        inner: S,
        call: ToolCall,
        policy: &Policy,
        remembered: &Remembered,
        decision: Decision,
    ) -> Self {
        Self {
            state: State::decided(inner, call, policy, remembered, decision),
        }
    }

    pub(crate) fn waiting(
        inner: S,
        call: ToolCall,
        policy: Arc<Policy>,
        remembered: Remembered,
        decisions: SharedDecisions,
        ticket: Ticket,
    ) -> Self {
        Self {
            state: State::Waiting {
                decisions,
                cancelled: call.run.cancel.clone().cancelled_owned(),
                ticket: Some(ticket),
                call: Some(call),
                inner: Some(inner),
                policy,
                remembered,
            },
        }
    }
}

impl<S> Future for ResponseFuture<S>
where
    S: Service<ToolCall>,
    S::Response: ToolReply,
    S::Error: Into<BoxError>,
{
    type Output = Result<ToolResponse, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let next = match this.state.as_mut().project() {
                StateProj::Done { output } => {
                    return Poll::Ready(
                        output
                            .take()
                            .expect("ResponseFuture polled after completion"),
                    );
                }
                StateProj::Running { call } => {
                    return call
                        .poll(cx)
                        .map(|output| output.map(ToolReply::into_response).map_err(Into::into));
                }
                StateProj::Waiting {
                    decisions,
                    cancelled,
                    ticket,
                    call,
                    inner,
                    policy,
                    remembered,
                } => {
                    // A cancelled run gives up on the decision at once.
                    if cancelled.poll(cx).is_ready() {
                        ticket.take();
                        State::Done {
                            output: Some(Err(Box::new(Cancelled::new()))),
                        }
                    } else {
                        let decided = ready!(decisions.poll(cx));
                        ticket.take();
                        let call = call.take().expect("polled after completion");
                        let inner = inner.take().expect("polled after completion");
                        match decided {
                            Err(reason) => State::Done {
                                output: Some(Err(Box::new(ApprovalFailed::new(&reason)))),
                            },
                            Ok(decisions) => {
                                let mut call = call;
                                let decision = decisions.get(&call.id).clone();
                                call.run
                                    .extensions
                                    .insert(super::StepDecisions(decisions.clone()));
                                State::decided(inner, call, policy, remembered, decision)
                            }
                        }
                    }
                }
            };
            this.state.set(next);
        }
    }
}

impl<S: Service<ToolCall>> fmt::Debug for ResponseFuture<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
