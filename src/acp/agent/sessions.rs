//! The agent's sessions: what each one holds in this process. Its conversation is its thread's,
//! in the engine's log.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Mutex, MutexGuard, PoisonError},
};

use agent_client_protocol::{Error, v1::schema::SessionId};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::{permission::Mode, tool::ToolRouter};

/// One editor session: its title and its mode.
#[derive(Debug)]
pub(super) struct Session {
    /// The directory it works in.
    pub(super) cwd: PathBuf,
    /// The first line of its first prompt, once it has one.
    pub(super) title: Option<String>,
    pub(super) mode: Mode,
    /// Cancels the turns in flight; a fresh one replaces it when it fires.
    pub(super) cancel: CancellationToken,
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

impl Session {
    /// A session working in `cwd`, in `mode`, untitled.
    pub(super) fn new(cwd: PathBuf, mode: Mode) -> Self {
        Self {
            cwd,
            title: None,
            mode,
            cancel: CancellationToken::new(),
            open: true,
            tools: None,
            cost: crate::acp::stream::SessionCost::default(),
        }
    }

    /// Cancels its turns in flight; later turns are not.
    pub(super) fn cancel_turns(&mut self) {
        std::mem::take(&mut self.cancel).cancel();
    }

    /// Closes it, its running turn cancelled as `session/cancel` would: it keeps its history,
    /// for `session/load`.
    pub(super) fn close(&mut self) {
        self.cancel_turns();
        self.open = false;
    }
}

/// The internal error a session's store failure is answered with (the cause is logged).
pub(super) fn store_failed(session: &SessionId, error: &crate::runs::LogError) -> Error {
    tracing::error!(%session, %error, "the session store failed");
    Error::internal_error().data(json!({"reason": "the session store is unavailable"}))
}

impl Shared {
    /// Keeps the new session's thread in the log: it belongs to this connection's principal and
    /// works in `cwd`.
    pub(super) async fn keep(
        &self,
        session: &SessionId,
        cwd: &std::path::Path,
    ) -> Result<(), Error> {
        let thread = crate::id::ThreadId::from(&*session.0);
        let principal = self.config.principal.as_ref().map(|p| p.name());
        let cwd = cwd.to_string_lossy();
        let saved = crate::runs::SavedThread::new(&thread, &[])
            .principal(principal)
            .workspace(Some(&cwd));
        self.runs
            .run_log()
            .save_thread(saved)
            .await
            .map_err(|error| store_failed(session, &error))
    }

    /// The session's thread in the log, unless it is another principal's (`None`: the log does
    /// not know it).
    pub(super) async fn thread(
        &self,
        session: &SessionId,
    ) -> Result<Option<crate::runs::ThreadRecord>, Error> {
        let thread = crate::id::ThreadId::from(&*session.0);
        let caller = self.config.principal.as_ref();
        Ok(self
            .runs
            .run_log()
            .thread(&thread)
            .await
            .map_err(|error| store_failed(session, &error))?
            // Another principal's session is unknown here, as one nobody kept.
            .filter(|record| crate::runs::rules::may_use(caller, record.principal.as_deref())))
    }

    /// Brings a session the log knows (from before a restart, or begun through another door)
    /// into memory, closed, working in `cwd`; `false` when the log does not know it.
    pub(super) async fn restore(
        &self,
        session: &SessionId,
        cwd: &std::path::Path,
    ) -> Result<bool, Error> {
        let Some(record) = self.thread(session).await? else {
            return Ok(false);
        };
        self.sessions
            .lock()
            .entry(session.to_string())
            .or_insert_with(|| Session {
                title: crate::message::title(&record.messages),
                open: false,
                ..Session::new(cwd.to_owned(), self.config.mode)
            });
        Ok(true)
    }
}

impl Shared {
    /// Deletes the session's thread from the log, if the log keeps it for this connection's
    /// principal; `false` when it does not.
    pub(super) async fn forget(&self, session: &SessionId) -> Result<bool, Error> {
        if self.thread(session).await?.is_none() {
            return Ok(false);
        }
        let thread = crate::id::ThreadId::from(&*session.0);
        match self
            .runs
            .run_log()
            .delete_thread(&thread)
            .await
            .map_err(|error| store_failed(session, &error))?
        {
            crate::runs::Deleted::Busy => Err(Error::invalid_request().data(json!({
                "reason": "a run of this session is running; cancel it first",
            }))),
            _ => Ok(true),
        }
    }
}

/// A session's title: the first line of its first prompt, at most 80 characters.
pub(super) fn session_title(text: &str) -> String {
    crate::message::first_line(text).unwrap_or_else(|| "New session".to_owned())
}
