//! AG-UI interrupts of tool calls: the wire form of a [`run::Interrupt`](crate::run::Interrupt)
//! (`RUN_FINISHED.outcome.interrupts[]`) and the decision a `resume[]` entry carries.
//!
//! An interrupt has `reason: "tool_call"`, the waiting call's `toolCallId`, an `expiresAt` (RFC
//! 3339) and a `responseSchema` for the resume payload:
//!
//! ```json
//! {"approved": true}                                  approve
//! {"approved": true, "editedArgs": {"path": "b.txt"}} approve with these arguments instead
//! {"approved": false, "feedback": "not that file"}    reject; the model reads the feedback
//! {"approved": true, "always": true}                  approve, and every later call of the
//!                                                     tool in the thread without asking
//! {"approved": false, "always": true}                 reject, and every later call of it
//! ```
//!
//! (An edit applies to its call only: `always` with `editedArgs` is refused. "Always" is
//! remembered by the [`PermissionLayer`](crate::permission::PermissionLayer) of the process that
//! applies it; see [`Decision::ApproveAlways`].)
//!
//! A resume entry with `status: "cancelled"` dismisses the call: a rejection.
//!
//! ```
//! use agent_tower::agui::input::{ResumeEntry, ResumeStatus};
//! use agent_tower::agui::interrupt::decision;
//! use agent_tower::permission::Decision;
//! use serde_json::json;
//!
//! let entry = ResumeEntry {
//!     interrupt_id: "i-1".into(),
//!     status: ResumeStatus::Resolved,
//!     payload: Some(json!({"approved": true, "editedArgs": {"path": "b.txt"}})),
//!     metadata: None,
//! };
//! assert_eq!(decision(&entry).unwrap(), Decision::Edit(json!({"path": "b.txt"})));
//!
//! let wrong = ResumeEntry { payload: Some(json!({"approve": "yes"})), ..entry };
//! assert!(decision(&wrong).is_err());
//! ```

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::input::{Interrupt as WireInterrupt, ResumeEntry, ResumeStatus};
use crate::{permission::Decision, run::Interrupt};

/// The JSON Schema of the resume payload of a tool-call interrupt.
#[must_use]
pub fn response_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "editedArgs": {"type": "object"},
            "feedback": {"type": "string"},
            "always": {"type": "boolean"}
        },
        "required": ["approved"],
        "additionalProperties": false
    })
}

/// The wire form of `interrupt`.
#[must_use]
pub fn to_wire(interrupt: &Interrupt) -> WireInterrupt {
    WireInterrupt {
        id: interrupt.id.to_string(),
        reason: "tool_call".to_owned(),
        message: Some(format!("Approve the call of `{}`?", interrupt.tool_name)),
        tool_call_id: Some(interrupt.tool_call_id.clone()),
        response_schema: Some(response_schema()),
        expires_at: Some(humantime::format_rfc3339_millis(interrupt.expires_at).to_string()),
        metadata: Some(json!({
            "toolName": interrupt.tool_name,
            "arguments": interrupt.arguments,
        })),
    }
}

/// The call a wire interrupt asks about, as [`to_wire`] wrote it: the tool's name (`None` when
/// the interrupt names none) and its arguments (`null` when it gives none).
#[must_use]
pub fn asked_call(interrupt: &WireInterrupt) -> (Option<&str>, &Value) {
    static NOTHING: Value = Value::Null;
    let metadata = interrupt.metadata.as_ref();
    (
        metadata
            .and_then(|m| m.get("toolName"))
            .and_then(Value::as_str),
        metadata
            .and_then(|m| m.get("arguments"))
            .unwrap_or(&NOTHING),
    )
}

/// A resume payload that does not match [`response_schema`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPayload(String);

impl fmt::Display for InvalidPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the resume payload does not match its schema: {}",
            self.0
        )
    }
}

impl std::error::Error for InvalidPayload {}

/// The payload of [`response_schema`]; serde checks the schema (unknown fields refused).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Payload {
    approved: bool,
    edited_args: Option<Map<String, Value>>,
    feedback: Option<String>,
    #[serde(default)]
    always: bool,
}

/// The decision a resume entry carries.
///
/// # Errors
///
/// When a `resolved` entry has no payload, or one that does not match [`response_schema`].
pub fn decision(entry: &ResumeEntry) -> Result<Decision, InvalidPayload> {
    if entry.status == ResumeStatus::Cancelled {
        return Ok(Decision::Reject("The user dismissed this call.".to_owned()));
    }
    let payload = entry
        .payload
        .clone()
        .ok_or_else(|| InvalidPayload("a resolved interrupt needs a payload".to_owned()))?;
    let payload: Payload =
        serde_json::from_value(payload).map_err(|e| InvalidPayload(e.to_string()))?;
    let feedback = || {
        payload
            .feedback
            .clone()
            .unwrap_or_else(|| "The user did not approve this call.".to_owned())
    };
    Ok(
        match (payload.approved, payload.edited_args, payload.always) {
            (true, Some(_), true) => {
                return Err(InvalidPayload(
                    "edited arguments apply to one call: `always` cannot go with `editedArgs`"
                        .to_owned(),
                ));
            }
            (true, Some(arguments), false) => Decision::Edit(Value::Object(arguments)),
            (true, None, false) => Decision::Approve,
            (true, None, true) => Decision::ApproveAlways,
            (false, _, false) => Decision::Reject(feedback()),
            (false, _, true) => Decision::RejectAlways(feedback()),
        },
    )
}

/// The resume entry that answers interrupt `interrupt_id` with `decision`: what [`decision`]
/// reads back. A dismissal ([`Decision::Cancel`], or a decision put off again) is a `cancelled`
/// entry.
///
/// ```
/// use agent_tower::agui::interrupt::{decision, resume_entry};
/// use agent_tower::permission::Decision;
///
/// let answered = Decision::RejectAlways("not in this repository".to_owned());
/// assert_eq!(decision(&resume_entry("i-1", &answered)).unwrap(), answered);
/// ```
#[must_use]
pub fn resume_entry(interrupt_id: impl Into<String>, decision: &Decision) -> ResumeEntry {
    let (approved, always, edited, feedback) = match decision {
        Decision::Approve => (true, false, None, None),
        Decision::ApproveAlways => (true, true, None, None),
        Decision::Edit(arguments) => (true, false, Some(arguments), None),
        Decision::Reject(feedback) => (false, false, None, Some(feedback)),
        Decision::RejectAlways(feedback) => (false, true, None, Some(feedback)),
        Decision::Cancel | Decision::Interrupt { .. } => {
            return ResumeEntry {
                interrupt_id: interrupt_id.into(),
                status: ResumeStatus::Cancelled,
                payload: None,
                metadata: None,
            };
        }
    };
    let mut payload = json!({ "approved": approved });
    if always {
        payload["always"] = Value::Bool(true);
    }
    if let Some(arguments) = edited {
        payload["editedArgs"] = arguments.clone();
    }
    if let Some(feedback) = feedback {
        payload["feedback"] = Value::from(feedback.as_str());
    }
    ResumeEntry {
        interrupt_id: interrupt_id.into(),
        status: ResumeStatus::Resolved,
        payload: Some(payload),
        metadata: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(status: ResumeStatus, payload: Option<Value>) -> ResumeEntry {
        ResumeEntry {
            interrupt_id: "i".into(),
            status,
            payload,
            metadata: None,
        }
    }

    #[test]
    fn payloads_map_to_decisions() {
        let resolved = |p| decision(&entry(ResumeStatus::Resolved, Some(p)));
        assert_eq!(resolved(json!({"approved": true})), Ok(Decision::Approve));
        assert_eq!(
            resolved(json!({"approved": false, "feedback": "no"})),
            Ok(Decision::Reject("no".into()))
        );
        assert_eq!(
            resolved(json!({"approved": true, "always": true})),
            Ok(Decision::ApproveAlways)
        );
        assert_eq!(
            resolved(json!({"approved": false, "always": true, "feedback": "never"})),
            Ok(Decision::RejectAlways("never".into()))
        );
        assert_eq!(
            resolved(json!({"approved": true, "always": false})),
            Ok(Decision::Approve)
        );
        assert!(matches!(
            decision(&entry(ResumeStatus::Cancelled, None)),
            Ok(Decision::Reject(_))
        ));
        for bad in [
            json!({}),
            json!({"approved": "yes"}),
            json!({"approved": true, "editedArgs": [1]}),
            json!({"approved": true, "extra": 1}),
            json!({"approved": true, "always": "yes"}),
            json!({"approved": true, "always": true, "editedArgs": {"path": "b"}}),
        ] {
            assert!(resolved(bad.clone()).is_err(), "{bad} is refused");
        }
        assert!(decision(&entry(ResumeStatus::Resolved, None)).is_err());
    }

    #[test]
    fn every_answer_reads_back_as_itself() {
        for answered in [
            Decision::Approve,
            Decision::ApproveAlways,
            Decision::Edit(json!({"path": "b.txt"})),
            Decision::Reject("not that file".into()),
            Decision::RejectAlways("never".into()),
        ] {
            assert_eq!(decision(&resume_entry("i", &answered)), Ok(answered));
        }
        let dismissed = resume_entry("i", &Decision::Cancel);
        assert_eq!(dismissed.status, ResumeStatus::Cancelled);
        assert_eq!(dismissed.payload, None);
    }

    #[test]
    fn the_wire_form_names_the_call_and_its_expiry() {
        let interrupt = Interrupt {
            id: "i-1".into(),
            tool_call_id: "call-1".into(),
            tool_name: "delete".into(),
            arguments: json!({"path": "a"}),
            expires_at: std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(60),
        };
        let wire = serde_json::to_value(to_wire(&interrupt)).unwrap();
        assert_eq!(wire["reason"], "tool_call");
        assert_eq!(wire["toolCallId"], "call-1");
        assert_eq!(wire["expiresAt"], "1970-01-01T00:01:00.000Z");
        assert_eq!(wire["responseSchema"], response_schema());
    }
}
