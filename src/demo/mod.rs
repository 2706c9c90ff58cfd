//! The demo: the [scripted model](crate::model::scripted) and the [demo tools](crate::tool::demo)
//! in a [`Stack`], with the settings that show off what the layers do. It is what
//! `agent-tower serve` and `agent-tower acp` run when no model is given; it is here to read, to
//! try the server and the ACP agent without a model, and to test against. Your own agent is a
//! [`Stack`] of your model and your tools.
//!
//! - `write_document` shows predictive state ([`agui`]): its `document` argument is mirrored into
//!   the state key `document` (a CUSTOM `PredictState` before the call, the state set as soon as
//!   the arguments are complete, by the [`state`] rule).
//! - Answers citing `[n]` get their citations resolved against the run's context entries by
//!   [`Citations`], under the state key `citations` ([`citations`]).
//! - [`policy`] asks before `remember`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use agent_tower::{agui::Event, demo, message::Message, run::RunRequest, transport::Channel};
//! use futures_util::StreamExt;
//! use tower::ServiceExt;
//!
//! let (tx, rx) = Channel::<Event>::bounded(64);
//! let mut req = RunRequest::new(vec![Message::user(r#"add {"a": 1, "b": 2}"#)]);
//! req.run.sinks.insert(tx);
//! let outcome = demo::scripted().build().oneshot(req).await.unwrap();
//! assert!(outcome.messages.last().unwrap().text().contains("returned 3"));
//! assert!(rx.collect::<Vec<_>>().await.iter().any(|e| matches!(e, Event::ToolCallResult(_))));
//! # }
//! ```

use crate::{
    agui::AguiLayer,
    model::scripted::ScriptedModel,
    permission::{Action, AutoApprove, Policy},
    post_process::{Citations, PostProcessLayer},
    stack::{Stack, StackAgent},
    state::StateLayer,
    tool::{ToolRouter, demo::demo_tools},
    trace::TraceLayer,
};

/// A [`Stack`] with the demo's settings, around any model and tools.
pub type DemoStack<M, A = AutoApprove> = Stack<M, A, PostProcessLayer<Citations>>;

/// The agent [`scripted`] builds, its calls asked about through `A`.
pub type ScriptedAgent<A = AutoApprove> = StackAgent<ScriptedModel, A, PostProcessLayer<Citations>>;

/// The scripted model and the demo tools with the demo's settings; every call allowed until
/// a [`policy`](Stack::policy) and an [`approver`](Stack::approver) say otherwise ([`policy`], for one).
pub fn scripted() -> DemoStack<ScriptedModel> {
    stack(ScriptedModel::new(), demo_tools()).trace(TraceLayer::new().model("scripted"))
}

/// Any `model` and `tools` with the demo's settings: predictive state for `write_document`,
/// citations resolved.
pub fn stack<M>(model: M, tools: ToolRouter) -> DemoStack<M> {
    Stack::new(model, tools)
        .agui(agui())
        .state(state())
        .model_layer(citations())
}

/// The AG-UI layer predicting the state key `document` from `write_document`'s argument.
pub fn agui() -> AguiLayer {
    AguiLayer::new().predict_state("write_document", "document", "document")
}

/// The state layer setting `document` from `write_document`'s argument.
pub fn state() -> StateLayer {
    StateLayer::new().from_args("write_document", |args, state| {
        if !state.is_object() {
            *state = serde_json::json!({});
        }
        state["document"] = args["document"].clone();
    })
}

/// Citations resolved under the state key `citations` when an answer cites `[n]`.
pub fn citations() -> PostProcessLayer<Citations> {
    PostProcessLayer::new("citations", Citations::new())
        .expect("`citations` is a valid state key")
        .when(Citations::cites)
}

/// The demo's rule: a call of `remember` (which writes the shared state) is asked about.
#[must_use]
pub fn policy() -> Policy {
    Policy::new().rule("remember", Action::Ask)
}
