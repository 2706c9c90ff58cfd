//! Test support for your own stacks: [`MockModel`], [`Recording`], [`assert_events!`](crate::assert_events) and
//! [`verify`], a port of the official AG-UI client's event verifier.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::{agent::Agent, agui::AguiLayer, assert_events};
//! use agent_tower::message::Message;
//! use agent_tower::run::RunRequest;
//! use agent_tower::test_util::{verify, MockItem, MockModel, Recording};
//! use agent_tower::tool::ToolRouter;
//! use tower::{Layer, ServiceExt};
//!
//! let ui = Recording::new();
//! let agui = AguiLayer::new().transport(ui.clone());
//! let model = MockModel::new([vec![MockItem::text("Hi!"), MockItem::stop()]]);
//! let agent = agui.layer(Agent::new(agui.layer(model.clone()), agui.layer(ToolRouter::new())));
//!
//! agent.oneshot(RunRequest::new(vec![Message::user("hello")])).await?;
//!
//! let events = ui.events();
//! verify(&events)?;
//! assert_events!(events, [
//!     RunStarted, StepStarted, TextMessageStart, TextMessageContent, TextMessageEnd,
//!     StepFinished, MessagesSnapshot, RunFinished,
//! ]);
//! assert_eq!(model.requests().len(), 1);
//! # Ok(()) }
//! ```

mod mock;
mod verify;

pub use self::{
    mock::{MockItem, MockModel, MockStream},
    verify::{Violation, verify},
};
pub use crate::transport::Recording;

/// Asserts the sequence of AG-UI event types, by [`EventType`](crate::agui::EventType) variant
/// name.
///
/// ```
/// use agent_tower::assert_events;
/// use agent_tower::agui::event::{BaseEvent, Event, StepStarted};
///
/// let events = vec![Event::from(StepStarted { step_name: "s".into(), subagent_run_id: None, base: BaseEvent::default() })];
/// assert_events!(events, [StepStarted]);
/// ```
#[macro_export]
macro_rules! assert_events {
    ($events:expr, [$($kind:ident),* $(,)?]) => {{
        let actual: ::std::vec::Vec<$crate::agui::EventType> =
            $events.iter().map(|event| event.kind()).collect();
        let expected: ::std::vec::Vec<$crate::agui::EventType> =
            ::std::vec![$($crate::agui::EventType::$kind),*];
        assert_eq!(
            actual.iter().map(|k| k.as_str()).collect::<::std::vec::Vec<_>>(),
            expected.iter().map(|k| k.as_str()).collect::<::std::vec::Vec<_>>(),
            "AG-UI event sequence differs"
        );
    }};
}
