use std::{error::Error as StdError, fmt};

use crate::{
    model::{ModelError, ModelErrorKind},
    tool::{ToolError, ToolErrorKind},
};

/// What kind of failure an error is, whatever its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Something took too long.
    Timeout,
    /// A provider or a limit asked us to slow down.
    RateLimited,
    /// The model's provider is overloaded (Anthropic's 529): not our limit, nor the caller's.
    Overloaded,
    /// A spending limit on models was reached.
    BudgetExceeded,
    /// The conversation does not fit the model's context.
    ContextLength,
    /// The model refused.
    Refusal,
    /// The run was cancelled.
    Cancelled,
    /// A policy or a person refused an action.
    PermissionDenied,
    /// Credentials were refused.
    Auth,
    /// The request was malformed.
    InvalidRequest,
    /// A tool failed.
    ToolFailed,
    /// A connection or a provider failed.
    Transport,
    /// A bridged agent's process exited, or its connection closed, during the run.
    AgentExited,
    /// A bridged agent is not running (restarting) or cannot be reached.
    AgentUnavailable,
    /// A bridged agent requires an authentication it was not given.
    AuthRequired,
    /// A bridged agent answered outside its protocol.
    ProtocolError,
    /// A bridged agent reported a failure of its own.
    AgentError,
    /// Anything else.
    Internal,
}

impl ErrorKind {
    /// The stable snake_case code, used as AG-UI `RUN_ERROR.code`.
    #[must_use]
    pub fn code(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::RateLimited => "rate_limited",
            Self::Overloaded => "overloaded",
            Self::BudgetExceeded => "budget_exceeded",
            Self::ContextLength => "context_length",
            Self::Refusal => "refusal",
            Self::Cancelled => "cancelled",
            Self::PermissionDenied => "permission_denied",
            Self::Auth => "auth",
            Self::InvalidRequest => "invalid_request",
            Self::ToolFailed => "tool_failed",
            Self::Transport => "transport",
            Self::AgentExited => "agent_exited",
            Self::AgentUnavailable => "agent_unavailable",
            Self::AuthRequired => "auth_required",
            Self::ProtocolError => "protocol_error",
            Self::AgentError => "agent_error",
            Self::Internal => "internal",
        }
    }

    /// The kind whose [`code`](Self::code) is `code`.
    #[must_use]
    pub fn from_code(code: &str) -> Option<Self> {
        [
            Self::Timeout,
            Self::RateLimited,
            Self::Overloaded,
            Self::BudgetExceeded,
            Self::ContextLength,
            Self::Refusal,
            Self::Cancelled,
            Self::PermissionDenied,
            Self::Auth,
            Self::InvalidRequest,
            Self::ToolFailed,
            Self::Transport,
            Self::AgentExited,
            Self::AgentUnavailable,
            Self::AuthRequired,
            Self::ProtocolError,
            Self::AgentError,
            Self::Internal,
        ]
        .into_iter()
        .find(|kind| kind.code() == code)
    }

    /// A generic sentence for people, saying nothing the error itself said.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Self::Timeout => "The agent took too long.",
            Self::RateLimited => "The model is busy; try again shortly.",
            Self::Overloaded => "The model's provider is overloaded; try again shortly.",
            Self::BudgetExceeded => "The spending limit for the model was reached.",
            Self::ContextLength => "The conversation is too long for the model.",
            Self::Refusal => "The model declined to answer.",
            Self::Cancelled => "The run was cancelled.",
            Self::PermissionDenied => "The action was not permitted.",
            Self::Auth => "The model provider refused the credentials.",
            Self::InvalidRequest => "The request was not valid.",
            Self::ToolFailed => "A tool failed.",
            Self::Transport => "The connection to the model failed.",
            Self::AgentExited => "The agent stopped during the run.",
            Self::AgentUnavailable => "The agent is not available; try again shortly.",
            Self::AuthRequired => "The agent needs to be signed in.",
            Self::ProtocolError => "The agent answered something it should not have.",
            Self::AgentError => "The agent failed.",
            Self::Internal => "The agent failed.",
        }
    }

    /// Whether trying again may succeed.
    #[must_use]
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Self::Timeout | Self::RateLimited | Self::Overloaded | Self::Transport
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.code())
    }
}

/// An error, classified: its kind, whether to retry, a message for people and the error chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorClass {
    /// The kind.
    pub kind: ErrorKind,
    /// Whether trying again may succeed.
    pub retryable: bool,
    /// The error's own message (its `Display`).
    pub message: String,
    /// The messages of its sources, outermost first.
    pub chain: Vec<String>,
}

impl ErrorClass {
    /// A class of `kind` for `error`, retryable as the kind is.
    pub fn new(kind: ErrorKind, error: &(dyn StdError + 'static)) -> Self {
        let mut chain = Vec::new();
        let mut source = error.source();
        while let Some(cause) = source {
            chain.push(cause.to_string());
            source = cause.source();
        }
        Self {
            kind,
            retryable: kind.is_retryable(),
            message: error.to_string(),
            chain,
        }
    }
}

/// Classifies errors. Implemented for closures returning `Option<ErrorClass>` (falling back to
/// [`DefaultClassifier`] on `None`).
pub trait ClassifyError {
    /// The class of `error`.
    fn classify(&self, error: &(dyn StdError + 'static)) -> ErrorClass;
}

/// Knows tower's errors (`Elapsed`, `Overloaded`), [`ModelError`] and [`ToolError`] kinds, a
/// bridged agent's errors (`BridgeError`), our transport and configuration errors, anywhere in the source chain; everything else is
/// [`ErrorKind::Internal`]. It looks at types, never at messages.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultClassifier {
    _priv: (),
}

impl DefaultClassifier {
    /// The default classifier.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn kind_of(error: &(dyn StdError + 'static)) -> Option<ErrorKind> {
        if let Some(model) = error.downcast_ref::<ModelError>() {
            return Some(match model.kind() {
                ModelErrorKind::RateLimited => ErrorKind::RateLimited,
                ModelErrorKind::Overloaded => ErrorKind::Overloaded,
                ModelErrorKind::BudgetExceeded => ErrorKind::BudgetExceeded,
                ModelErrorKind::ContextLength => ErrorKind::ContextLength,
                ModelErrorKind::Auth => ErrorKind::Auth,
                ModelErrorKind::InvalidRequest => ErrorKind::InvalidRequest,
                ModelErrorKind::Refusal => ErrorKind::Refusal,
                ModelErrorKind::Transport | ModelErrorKind::StreamCut => ErrorKind::Transport,
                ModelErrorKind::Timeout => ErrorKind::Timeout,
                _ => ErrorKind::Internal,
            });
        }
        #[cfg(any(
            feature = "acp-client",
            feature = "agui-client",
            feature = "a2a-client"
        ))]
        if let Some(bridge) = error.downcast_ref::<crate::bridge::BridgeError>() {
            use crate::bridge::BridgeErrorKind as B;
            return Some(match bridge.kind() {
                B::AgentExited => ErrorKind::AgentExited,
                B::AgentUnavailable => ErrorKind::AgentUnavailable,
                B::AuthRequired => ErrorKind::AuthRequired,
                B::ProtocolError => ErrorKind::ProtocolError,
                B::AgentError => ErrorKind::AgentError,
            });
        }
        if let Some(tool) = error.downcast_ref::<ToolError>() {
            return Some(match tool.kind() {
                ToolErrorKind::Timeout => ErrorKind::Timeout,
                ToolErrorKind::Cancelled => ErrorKind::Cancelled,
                ToolErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
                _ => ErrorKind::ToolFailed,
            });
        }
        if error.is::<tower::timeout::error::Elapsed>() {
            return Some(ErrorKind::Timeout);
        }
        if error.is::<tower::load_shed::error::Overloaded>() {
            return Some(ErrorKind::RateLimited);
        }
        if error.is::<crate::transport::error::TransportClosed>() {
            return Some(ErrorKind::Transport);
        }
        if error.is::<crate::run::InvalidRequest>() {
            return Some(ErrorKind::InvalidRequest);
        }
        None
    }
}

impl ClassifyError for DefaultClassifier {
    fn classify(&self, error: &(dyn StdError + 'static)) -> ErrorClass {
        if let Some(classified) = find::<super::Classified>(error) {
            return classified.class().clone();
        }
        let mut cause = Some(error);
        while let Some(e) = cause {
            if let Some(kind) = Self::kind_of(e) {
                let mut class = ErrorClass::new(kind, error);
                if let Some(model) = e.downcast_ref::<ModelError>() {
                    class.retryable = model.kind().is_retryable();
                }
                return class;
            }
            cause = e.source();
        }
        ErrorClass::new(ErrorKind::Internal, error)
    }
}

impl<F> ClassifyError for F
where
    F: Fn(&(dyn StdError + 'static)) -> Option<ErrorClass>,
{
    fn classify(&self, error: &(dyn StdError + 'static)) -> ErrorClass {
        self(error).unwrap_or_else(|| DefaultClassifier::new().classify(error))
    }
}

/// The first error of type `T` in `error`'s source chain, `error` included.
pub(crate) fn find<'a, T: StdError + 'static>(
    error: &'a (dyn StdError + 'static),
) -> Option<&'a T> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        cause = e.source();
    }
    None
}
