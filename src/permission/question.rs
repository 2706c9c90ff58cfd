//! [`Question`]: something a person is asked that no tool stands behind.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A question for the person that no tool stands behind: an AG-UI agent's interrupt without a
/// tool call ("Spend $500 on ads?"), brought into a run as a call of [`Question::TOOL`] so that
/// the [`PermissionLayer`](super::PermissionLayer) asks it like a call.
///
/// - It is always asked: no rule, mode or "always" answer decides it for the person.
/// - An approver that can show a form asks it as one ([`AcpApprover`](crate::acp::AcpApprover)
///   with ACP's `elicitation/create`, when the client supports forms); any other approver asks it
///   as a call to allow or reject.
/// - The answer is the call's [`Decision`](super::Decision): approved; approved with the form's
///   content ([`Decision::Edit`](super::Decision::Edit)); rejected; or the run cancelled.
///
/// ```
/// use agent_tower::permission::Question;
/// use serde_json::json;
///
/// let question = Question::new("Spend $500 on ads?");
/// let arguments = question.arguments();
/// assert_eq!(Question::of(Question::TOOL, &arguments), Some(question));
/// assert_eq!(Question::of("delete_file", &arguments), None, "only calls of Question::TOOL");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Question {
    /// What the person is asked.
    pub message: String,
    /// The JSON Schema of the answer, when the asker gave one (an object of a few plain fields
    /// can be shown as a form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

impl Question {
    /// The name of the calls that carry a question (no tool of this name runs).
    pub const TOOL: &'static str = "ask_the_person";

    /// A question without a schema: to approve or reject.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            schema: None,
        }
    }

    /// The same question, answered in the form of `schema` (a JSON Schema).
    #[must_use]
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// The question a call of `tool` with `arguments` carries, if it is one.
    #[must_use]
    pub fn of(tool: &str, arguments: &Value) -> Option<Self> {
        (tool == Self::TOOL)
            .then(|| Self::deserialize(arguments).ok())
            .flatten()
    }

    /// The arguments of the call that carries it.
    #[must_use]
    pub fn arguments(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
