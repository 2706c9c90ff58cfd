//! The agent's sessions: what each one holds, and its conversation kept in the store (when there
//! is one) so that `session/load` finds it after a restart.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Mutex, MutexGuard, PoisonError},
    time::SystemTime,
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
    /// The directory it works in.
    pub(super) cwd: PathBuf,
    /// When its conversation last changed.
    pub(super) updated_at: SystemTime,
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
    /// What its model steps have cost, since it was opened or loaded here.
    pub(super) cost: crate::acp::stream::SessionCost,
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
            let Some((messages, state, cwd)) = self
                .sessions
                .lock()
                .get(&*session.0)
                .map(|s| (s.messages.clone(), s.state.clone(), s.cwd.clone()))
            else {
                return Ok(());
            };
            let thread = crate::id::ThreadId::from(&*session.0);
            let principal = self.config.principal.as_ref().map(|p| p.name());
            let cwd = cwd.to_string_lossy();
            let saved = crate::runs::SavedThread::new(&thread, &messages)
                .principal(principal)
                .state(state.as_ref())
                .workspace(Some(&cwd));
            crate::runs::RunLog::save_thread(store, saved)
                .await
                .map_err(|error| store_failed(session, &error))?;
        }
        Ok(())
    }

    /// Brings a session the store knows (from before a restart) back into memory, closed,
    /// working in `cwd`; `false` when no store knows it.
    #[cfg_attr(not(feature = "store"), allow(clippy::unused_async, unused_variables))]
    pub(super) async fn restore(
        &self,
        session: &SessionId,
        cwd: &std::path::Path,
    ) -> Result<bool, Error> {
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
                    cwd: cwd.to_owned(),
                    updated_at: SystemTime::now(),
                    titled: !record.messages.is_empty(),
                    messages: record.messages,
                    state: record.state,
                    mode: self.config.mode,
                    turn: None,
                    open: false,
                    tools: None,
                    cost: Default::default(),
                });
            return Ok(true);
        }
        Ok(false)
    }
}

impl<S> Shared<S> {
    /// Deletes the session from the store, if there is one and it keeps it for this
    /// connection's principal; `false` when it does not.
    #[cfg_attr(not(feature = "store"), allow(clippy::unused_async, unused_variables))]
    pub(super) async fn forget(&self, session: &SessionId) -> Result<bool, Error> {
        #[cfg(feature = "store")]
        if let Some(store) = &self.config.store {
            let thread = crate::id::ThreadId::from(&*session.0);
            let caller = self.config.principal.as_ref();
            let kept = crate::runs::RunLog::thread(store, &thread)
                .await
                .map_err(|error| store_failed(session, &error))?
                .is_some_and(|record| {
                    crate::runs::rules::may_use(caller, record.principal.as_deref())
                });
            if !kept {
                return Ok(false);
            }
            return match store
                .delete_thread(&thread)
                .await
                .map_err(|error| store_failed(session, &error))?
            {
                crate::store::Deleted::Busy => Err(Error::invalid_request().data(json!({
                    "reason": "a run of this session is running; cancel it first",
                }))),
                _ => Ok(true),
            };
        }
        Ok(false)
    }
}

/// A session's title: the first line of its first prompt, at most 80 characters.
pub(super) fn session_title(text: &str) -> String {
    crate::message::first_line(text).unwrap_or_else(|| "New session".to_owned())
}
