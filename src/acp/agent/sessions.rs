//! The agent's sessions: what each one holds, and its conversation kept in the store (when there
//! is one) so that `session/load` finds it after a restart.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
};

use agent_client_protocol::{Error, v1::schema::SessionId};
use serde_json::Value;
#[cfg(feature = "store")]
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::{message::Message, permission::Mode, tool::ToolRouter};

/// One editor session: its conversation and its mode.
#[derive(Debug)]
pub(super) struct Session {
    pub(super) messages: Vec<Message>,
    pub(super) state: Option<Value>,
    pub(super) mode: Mode,
    pub(super) titled: bool,
    /// The running turn's cancellation.
    pub(super) turn: Option<CancellationToken>,
    /// Closed sessions keep their history, for `session/load`.
    pub(super) open: bool,
    /// The tools of the MCP servers the client gave for this session.
    pub(super) tools: Option<ToolRouter>,
}

#[derive(Debug, Default)]
pub(super) struct Sessions(Mutex<HashMap<String, Session>>);

impl Sessions {
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The internal error a session's store failure is answered with (the cause is logged).
#[cfg(feature = "store")]
pub(super) fn store_failed(session: &SessionId, error: &crate::runs::LogError) -> Error {
    tracing::error!(%session, %error, "the session store failed");
    Error::internal_error().data(json!({"reason": "the session store is unavailable"}))
}

impl<S> Shared<S> {
    /// Writes the session's conversation and state to the store, if there is one.
    #[cfg_attr(not(feature = "store"), allow(clippy::unused_async, unused_variables))]
    pub(super) async fn persist(&self, session: &SessionId) -> Result<(), Error> {
        #[cfg(feature = "store")]
        if let Some(store) = &self.config.store {
            let Some((messages, state)) = self
                .sessions
                .lock()
                .get(&*session.0)
                .map(|s| (s.messages.clone(), s.state.clone()))
            else {
                return Ok(());
            };
            let thread = crate::id::ThreadId::from(&*session.0);
            let principal = self.config.principal.as_ref().map(|p| p.name());
            crate::runs::RunLog::save_thread(store, &thread, principal, &messages, state.as_ref())
                .await
                .map_err(|error| store_failed(session, &error))?;
        }
        Ok(())
    }

    /// Brings a session the store knows (from before a restart) back into memory, closed;
    /// `false` when no store knows it.
    #[cfg_attr(not(feature = "store"), allow(clippy::unused_async, unused_variables))]
    pub(super) async fn restore(&self, session: &SessionId) -> Result<bool, Error> {
        #[cfg(feature = "store")]
        if let Some(store) = &self.config.store {
            let thread = crate::id::ThreadId::from(&*session.0);
            let caller = self.config.principal.as_ref();
            let Some(record) = crate::runs::RunLog::thread(store, &thread)
                .await
                .map_err(|error| store_failed(session, &error))?
                // Another principal's session is unknown here, as one nobody kept.
                .filter(|record| crate::runs::rules::may_use(caller, record.principal.as_deref()))
            else {
                return Ok(false);
            };
            self.sessions
                .lock()
                .entry(session.to_string())
                .or_insert_with(|| Session {
                    titled: !record.messages.is_empty(),
                    messages: record.messages,
                    state: record.state,
                    mode: self.config.mode,
                    turn: None,
                    open: false,
                    tools: None,
                });
            return Ok(true);
        }
        Ok(false)
    }
}

/// A session's title: the first line of its first prompt, at most 80 characters.
pub(super) fn session_title(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("New session")
        .trim();
    match line.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}
