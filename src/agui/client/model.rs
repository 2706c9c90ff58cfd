//! [`AguiModel`]: the remote agent's run, a step at a time.

use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use tower_service::Service;

use super::AguiBridge;
use crate::{
    BoxError,
    message::Message,
    model::{BoxModelStream, ModelRequest},
    permission::{Decision, Question},
};

/// `spec` as a client tool of an AG-UI run.
fn offered(spec: &crate::tool::ToolSpec) -> super::input::Tool {
    super::input::Tool {
        name: spec.name.clone(),
        description: spec.description.clone(),
        parameters: Some(spec.parameters.clone()),
        metadata: None,
    }
}

/// The conversation as the remote agent is told it: without the calls that asked its interrupts'
/// questions and their answers (it knows them as interrupts, answered with `resume`).
fn told(messages: &[Message]) -> Vec<super::input::Message> {
    let asked: std::collections::HashSet<_> = messages
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .filter(|call| call.name == Question::TOOL)
        .map(|call| &call.id)
        .collect();
    messages
        .iter()
        .filter_map(|message| match message {
            Message::Tool { tool_call_id, .. } if asked.contains(tool_call_id) => None,
            Message::Assistant {
                id,
                content,
                tool_calls,
            } if tool_calls.iter().any(|call| asked.contains(&call.id)) => {
                let tool_calls: Vec<_> = tool_calls
                    .iter()
                    .filter(|call| !asked.contains(&call.id))
                    .cloned()
                    .collect();
                (!content.is_empty() || !tool_calls.is_empty()).then(|| {
                    super::input::Message::from_domain(&Message::Assistant {
                        id: id.clone(),
                        content: content.clone(),
                        tool_calls,
                    })
                })?
            }
            message => super::input::Message::from_domain(message),
        })
        .collect()
}

crate::bridge::side! {
    /// The model side of an [`AguiBridge`]: see the [module](super).
    AguiModel(AguiBridge)
}

impl Service<ModelRequest> for AguiModel {
    type Response = BoxModelStream;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<BoxModelStream, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let bridge = self.bridge.clone();
        Box::pin(async move {
            let thread = &req.run.thread_id;
            let remote = bridge.remote(thread);
            let after_tools = matches!(req.messages.last(), Some(Message::Tool { .. }));
            let unanswered = if after_tools {
                remote.take_interrupts(None)
            } else {
                Vec::new()
            };
            if !unanswered.is_empty() {
                // No interrupted call ran: every one was refused; the run's tool messages say why.
                let rejected = |interrupt: &super::input::Interrupt| {
                    let call = remote.run_id(super::call_of(interrupt));
                    let feedback = req.messages.iter().find_map(|m| match m {
                        Message::Tool { tool_call_id, .. } if tool_call_id.as_str() == call => {
                            Some(m.text())
                        }
                        _ => None,
                    });
                    Decision::Reject(feedback.unwrap_or_default())
                };
                bridge.resume(&remote, thread, &unanswered, &rejected);
            } else if !(after_tools && remote.is_open() && !remote.awaits_client()) {
                // A new turn, or the results of the client tools the remote agent called.
                let messages = told(&req.messages);
                let tools = req.tools.iter().map(offered).collect();
                bridge.start(&remote, thread, messages, tools, None);
            }
            let taken = crate::bridge::call_ids(&req.messages);
            Ok(crate::bridge::steps(remote, &req.run, taken))
        })
    }
}
