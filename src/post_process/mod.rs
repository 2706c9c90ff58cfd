//! Whole-message post-processing: [`PostProcessLayer`] runs a service on each assistant message
//! once its text is complete, and writes what it finds into the run's shared state.
//!
//! Around a model (inside [`AguiLayer`](crate::agui::AguiLayer)), every event passes through
//! unchanged while the layer collects each message's text. When the step ends, each message goes
//! to the processor, a `Service<ProcessRequest>` answering a stream of [`Finding`]s, as work of the
//! run's own ([`Background`](crate::context::Background)): the agent goes on, the findings are written as they arrive under
//! `/<key>/messages/<messageId>/…` in the [`SharedState`] (so AG-UI clients receive them as
//! `STATE_DELTA`s), with a `status` beside them, and the run's terminal event waits for the work,
//! up to the agent's [background timeout](crate::agent::Agent::background_timeout).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::agent::Agent;
//! use agent_tower::message::Message;
//! use agent_tower::post_process::{Citations, PostProcessLayer};
//! use agent_tower::run::{ContextEntry, RunRequest};
//! use agent_tower::test_util::{MockItem, MockModel};
//! use agent_tower::tool::ToolRouter;
//! use serde_json::json;
//! use tower::{Layer, ServiceExt};
//!
//! let model = MockModel::new([vec![MockItem::text("Tower is modular [1]."), MockItem::stop()]]);
//! let model = PostProcessLayer::new("citations", Citations::new())?.layer(model);
//! let mut req = RunRequest::new(vec![Message::user("What is tower?")]);
//! req.context = vec![ContextEntry { description: "tower docs".into(), value: "https://docs.rs/tower".into() }];
//! let outcome = Agent::new(model, ToolRouter::new()).oneshot(req).await?;
//!
//! let id = outcome.messages[1].id().to_string();
//! let found = &outcome.state.unwrap()["citations"]["messages"][&id];
//! assert_eq!(found["status"], "done");
//! assert_eq!(found["citations"]["1"], json!({"description": "tower docs", "value": "https://docs.rs/tower"}));
//! # Ok(()) }
//! ```
//!
//! # When it acts
//!
//! - While the model streams: text deltas are collected per message (up to `max_text` bytes each,
//!   1 MiB by default; a longer message gets the status `too_large` and is not processed).
//! - When the step's stream ends normally: each collected message is processed (status `pending`,
//!   then `done`, or `error` with the error's text, or `timeout` if the run stopped waiting). A
//!   step that fails or is dropped processes nothing: its text is incomplete.
//!
//! # Safety
//!
//! The state is read by JavaScript. Paths are built from data (message ids, finding names), so
//! every segment is escaped (`~0`, `~1`, as RFC 6901 says) and the segments `__proto__`,
//! `constructor` and `prototype` are refused (the message gets the status `refused`, the finding
//! is dropped); nothing is ever written outside `/<key>`.

mod citations;
mod layer;
mod service;
mod stream;

use std::sync::Arc;

use serde_json::{Map, Value};

pub use self::{
    citations::Citations,
    layer::{PostProcessLayer, error},
    service::{PostProcess, ResponseFuture},
    stream::ResponseStream,
};
use crate::{context::SharedState, context::state::UNSAFE_KEYS, id::MessageId};

/// A message to process.
#[derive(Debug, Clone)]
pub struct ProcessRequest {
    /// The message.
    pub message_id: MessageId,
    /// Its whole text.
    pub text: String,
    /// The run's context entries (documents the message may cite).
    pub context: Arc<[crate::run::ContextEntry]>,
}

/// Something the processor found: `value` goes at `path` below the message's place in the state.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Segments below `/<key>/messages/<messageId>`.
    pub path: Vec<String>,
    /// The value.
    pub value: Value,
}

pub(crate) fn is_safe(segment: &str) -> bool {
    !UNSAFE_KEYS.contains(&segment)
}

/// The message's object in the state, created as needed: `state[key]["messages"][id]`.
fn place<'a>(state: &'a mut Value, key: &str, id: &str) -> &'a mut Map<String, Value> {
    fn object<'a>(value: &'a mut Value, field: &str) -> &'a mut Value {
        let map = match value {
            Value::Object(map) => map,
            other => {
                *other = Value::Object(Map::new());
                other.as_object_mut().expect("just made an object")
            }
        };
        let entry = map
            .entry(field.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        entry
    }
    let messages = object(object(state, key), "messages");
    object(messages, id)
        .as_object_mut()
        .expect("made an object")
}

/// Writes into the message's place; `false` if a segment is refused.
#[cfg(test)]
pub(crate) fn write(
    state: &SharedState,
    key: &str,
    id: &str,
    path: &[String],
    value: Value,
) -> bool {
    let finding = Finding {
        path: path.to_vec(),
        value,
    };
    write_all(state, key, id, vec![finding]) == 1
}

/// Writes `findings` into the message's place in one change of the state (a change copies and
/// compares the whole state: one per finding would cost the square of their number); the
/// number written, those with a refused segment left out.
pub(crate) fn write_all(state: &SharedState, key: &str, id: &str, findings: Vec<Finding>) -> usize {
    if !is_safe(id) {
        return 0;
    }
    let findings: Vec<Finding> = findings
        .into_iter()
        .filter(|f| !f.path.is_empty() && f.path.iter().all(|s| is_safe(s)))
        .collect();
    if findings.is_empty() {
        return 0;
    }
    let written = findings.len();
    state.update(|state| {
        let place = place(state, key, id);
        for Finding { path, value } in findings {
            let mut at = &mut *place;
            for segment in &path[..path.len() - 1] {
                let next = at
                    .entry(segment.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !next.is_object() {
                    *next = Value::Object(Map::new());
                }
                at = next.as_object_mut().expect("made an object");
            }
            at.insert(path[path.len() - 1].clone(), value);
        }
    });
    written
}

/// Sets the message's `status` (and `error`, when given).
pub(crate) fn status(
    state: &SharedState,
    key: &str,
    id: &str,
    status: &str,
    error: Option<String>,
) {
    if !is_safe(id) {
        // A message id we cannot write under: say so once, at the layer's own level.
        state.update(|state| {
            let refused = place(state, key, "refused");
            refused.insert("status".to_owned(), Value::from("refused"));
        });
        return;
    }
    state.update(|state| {
        let at = place(state, key, id);
        at.insert("status".to_owned(), Value::from(status));
        if let Some(error) = error {
            at.insert("error".to_owned(), Value::from(error));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        /// Whatever the ids and finding names, every change stays under the layer's key.
        #[test]
        fn hostile_segments_never_leave_the_key(
            id in "(__proto__|constructor|prototype|[a-z/~.]{0,6})",
            path in prop::collection::vec("(__proto__|prototype|[a-z/~0-9]{0,5})", 1..4),
        ) {
            let state = SharedState::new(json!({"other": 1}));
            let wrote = write(&state, "key", &id, &path, json!(true));
            status(&state, "key", &id, "done", None);
            for op in state.take_changes() {
                let op = serde_json::to_value(op).unwrap();
                let target = op["path"].as_str().unwrap();
                prop_assert!(target == "/key" || target.starts_with("/key/"), "{target}");
                prop_assert!(!target.split('/').any(|s| UNSAFE_KEYS.contains(&s)), "{target}");
            }
            prop_assert_eq!(state.get()["other"].clone(), json!(1));
            let hostile = !is_safe(&id) || path.iter().any(|s| !is_safe(s));
            prop_assert_eq!(wrote, !hostile);
        }
    }
}
