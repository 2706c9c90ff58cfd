use serde::{Deserialize, Serialize};

use super::{ErrorClass, ErrorKind};
use crate::run::StopReason;

/// How much of an error the client is told.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Detail {
    /// Nothing: a generic sentence, no code.
    None,
    /// The code and a generic sentence for its kind.
    Code,
    /// The code and the error's own message.
    #[default]
    Message,
    /// The code, the message and every cause in the chain (never a backtrace).
    Full,
}

impl std::str::FromStr for Detail {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Self::None),
            "code" => Ok(Self::Code),
            "message" => Ok(Self::Message),
            "full" => Ok(Self::Full),
            other => Err(format!(
                "error detail must be one of none, code, message, full; got `{other}`"
            )),
        }
    }
}

impl ErrorClass {
    /// The AG-UI `RUN_ERROR` `code` and `message` at a detail level.
    #[must_use]
    pub fn run_error(&self, detail: Detail) -> (Option<String>, String) {
        let code = Some(self.kind.code().to_owned());
        match detail {
            Detail::None => (None, "The run failed.".to_owned()),
            Detail::Code => (code, self.kind.describe().to_owned()),
            Detail::Message => (code, self.message.clone()),
            Detail::Full => {
                let mut message = self.message.clone();
                for cause in &self.chain {
                    message.push_str("\ncaused by: ");
                    message.push_str(cause);
                }
                (code, message)
            }
        }
    }

    /// How an ACP `session/prompt` answers this error: see [`ErrorKind::acp_stop`].
    #[must_use]
    pub fn acp(&self, detail: Detail) -> AcpAnswer {
        match self.kind.acp_stop() {
            Some(stop) => AcpAnswer::Stop(stop),
            None => AcpAnswer::Error {
                code: self.kind.json_rpc_code(),
                message: self.run_error(detail).1,
                kind: self.kind.code(),
            },
        }
    }
}

impl ErrorKind {
    /// The stop reason an ACP `session/prompt` answers a failure of this kind with, for the
    /// kinds ACP has one for (cancelled, refusal, and the context limit as `max_tokens`); the
    /// others are answered with a JSON-RPC error ([`json_rpc_code`](Self::json_rpc_code)).
    #[must_use]
    pub fn acp_stop(self) -> Option<AcpStopReason> {
        match self {
            Self::Cancelled => Some(AcpStopReason::Cancelled),
            Self::Refusal => Some(AcpStopReason::Refusal),
            Self::ContextLength => Some(AcpStopReason::MaxTokens),
            _ => None,
        }
    }

    /// The JSON-RPC code of the error a failure of this kind is answered with: -32602 invalid
    /// params, -32000 auth required, -32603 internal.
    #[must_use]
    pub fn json_rpc_code(self) -> i64 {
        match self {
            Self::InvalidRequest => -32602,
            Self::Auth => -32000,
            _ => -32603,
        }
    }
}

/// An ACP stop reason (`session/prompt` result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcpStopReason {
    /// The turn ended normally.
    EndTurn,
    /// The model hit its token limit.
    MaxTokens,
    /// The agent hit its limit of model requests for the turn.
    MaxTurnRequests,
    /// The model refused.
    Refusal,
    /// The client cancelled.
    Cancelled,
}

impl From<StopReason> for AcpStopReason {
    fn from(stop: StopReason) -> Self {
        match stop {
            StopReason::MaxTokens => Self::MaxTokens,
            StopReason::MaxTurns => Self::MaxTurnRequests,
            StopReason::Refusal => Self::Refusal,
            StopReason::Cancelled => Self::Cancelled,
            _ => Self::EndTurn,
        }
    }
}

/// How an ACP agent answers a failed prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcpAnswer {
    /// A normal result with this stop reason.
    Stop(AcpStopReason),
    /// A JSON-RPC error.
    Error {
        /// The JSON-RPC code: -32602 invalid params, -32000 auth required, -32603 internal.
        code: i64,
        /// The message at the configured detail.
        message: String,
        /// The error kind's code, for the error's `data`.
        kind: &'static str,
    },
}
