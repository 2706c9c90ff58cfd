//! Runs that stop to wait for a person instead of holding a task while the person decides.

use std::{any::Any, fmt, time::SystemTime};

use serde_json::Value;

use crate::{
    BoxError,
    id::{InterruptId, ToolCallId},
};

/// A tool call a run stopped at: it needs a decision nobody has given yet, so the run ended
/// ([`StopReason::Interrupted`](super::StopReason::Interrupted)) and a later run on the thread
/// resumes it with the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupt {
    /// The interrupt.
    pub id: InterruptId,
    /// The call waiting.
    pub tool_call_id: ToolCallId,
    /// The tool it calls.
    pub tool_name: String,
    /// Its arguments, as the model gave them.
    pub arguments: Value,
    /// After this, the interrupt can no longer be resumed.
    pub expires_at: SystemTime,
}

/// The error a tool stack answers for a call that stopped at an [`Interrupt`]: the call did not
/// run, nothing was decided. The [`Agent`](crate::agent::Agent) ends the run with the interrupts
/// of the turn; layers that report results (AG-UI) report none for such a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupted(pub Interrupt);

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the call `{}` of `{}` waits for a decision (interrupt `{}`)",
            self.0.tool_call_id, self.0.tool_name, self.0.id
        )
    }
}

impl std::error::Error for Interrupted {}

impl Interrupted {
    /// The interrupt behind `error`: an `Interrupted` itself, or a [`BoxError`] holding one.
    /// Layers generic over their inner error use it to tell an interrupt from a failure.
    #[must_use]
    pub fn find<'a>(error: &'a (dyn Any + 'static)) -> Option<&'a Interrupt> {
        if let Some(Interrupted(interrupt)) = error.downcast_ref::<Interrupted>() {
            return Some(interrupt);
        }
        error
            .downcast_ref::<BoxError>()
            .and_then(|boxed| boxed.downcast_ref::<Interrupted>())
            .map(|Interrupted(interrupt)| interrupt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_directly_and_boxed_but_not_in_other_errors() {
        let interrupt = Interrupt {
            id: "i".into(),
            tool_call_id: "c".into(),
            tool_name: "delete".into(),
            arguments: Value::Null,
            expires_at: SystemTime::UNIX_EPOCH,
        };
        let direct = Interrupted(interrupt.clone());
        assert_eq!(Interrupted::find(&direct), Some(&interrupt));
        let boxed: BoxError = Box::new(direct);
        assert_eq!(Interrupted::find(&boxed), Some(&interrupt));
        let other: BoxError = "no".into();
        assert_eq!(Interrupted::find(&other), None);
        assert_eq!(Interrupted::find(&std::io::Error::other("x")), None);
    }
}
