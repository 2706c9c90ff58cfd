//! What the agent answers to each request of the client, and the notifications it sends.

use std::sync::Arc;

use agent_client_protocol::{
    Client, Error,
    schema::ProtocolVersion,
    v1::{
        ConnectionTo, Responder,
        schema::{
            self as acp, AgentCapabilities, ArchiveSessionRequest, ArchiveSessionResponse,
            AuthMethod, AuthMethodAgent, AuthenticateRequest, AuthenticateResponse,
            CloseSessionRequest, CloseSessionResponse, ConfigOptionUpdate, ContentBlock,
            ContentChunk, CurrentModeUpdate, DeleteSessionRequest, DeleteSessionResponse,
            ForkSessionRequest, ForkSessionResponse, InitializeRequest, InitializeResponse,
            ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
            McpCapabilities, McpServer, Meta, NewSessionRequest, NewSessionResponse, PromptRequest,
            PromptResponse, ResumeSessionRequest, ResumeSessionResponse,
            SessionArchiveCapabilities, SessionArchiveFilter, SessionCapabilities,
            SessionCloseCapabilities, SessionDeleteCapabilities, SessionForkCapabilities,
            SessionId, SessionInfo, SessionInfoUpdate, SessionListCapabilities,
            SessionResumeCapabilities, SessionTitleCapabilities, SessionUpdate,
            SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
            SetSessionModeResponse, SetSessionTitleRequest, SetSessionTitleResponse,
            UnarchiveSessionRequest, UnarchiveSessionResponse,
        },
    },
};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    Reach, Shared,
    mcp::connect_mcp,
    modes::{commands, config_options, mode_id, mode_of, mode_state},
    sessions::{Session, session_title, store_failed},
};
use crate::{
    acp::{
        Notifier,
        approve::Editor,
        content,
        events::{LoggedUpdates, Shown},
        history,
    },
    agui::{
        Event,
        event::{RunFinished, RunFinishedOutcome},
        input::{Interrupt, ResumeEntry, ResumeStatus},
        interrupt::{asked_call, resume_entry},
    },
    id::{MessageId, RunId, ThreadId, ToolCallId},
    map_error::{AcpStopReason, ErrorKind},
    message::Message,
    permission::{Decision, Mode, PendingCall},
    run::{RunService, StopReason},
    runs::{
        Attach, BeginError, Begun, Fork, ForkError, Interrupts, LoggedEvent, ResumeError,
        RunRecord, RunStatus, ThreadChange, ThreadCursor, ThreadQuery, ThreadRecord, thread_name,
    },
    tool::{RunTools, ToolRouter},
};

pub(super) fn not_found(session: &SessionId) -> Error {
    acp::Error::session_not_found(session.clone()).into()
}

pub(super) fn notify(cx: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate) {
    send(cx, acp::SessionNotification::new(session.clone(), update));
}

/// [`notify`], the update's `place` in the log in its `_meta` (its cursor).
fn notify_at(cx: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate, place: &Place) {
    let cursor = Meta::from_iter([(CURSOR.to_owned(), Value::String(place.to_string()))]);
    send(
        cx,
        acp::SessionNotification::new(session.clone(), update).meta(cursor),
    );
}

fn send(cx: &ConnectionTo<Client>, notification: acp::SessionNotification) {
    if let Err(error) = cx.send_notification(notification) {
        tracing::debug!(%error, "client gone");
    }
}

/// The id of the one way this agent accepts an editor (see [`auth_methods`]).
const AUTH_METHOD: &str = "agent-tower";

/// The ways this agent accepts an editor, as `initialize` declares them (what an ACP registry
/// lists): one, of the `agent` type, that asks nothing of the user; `authenticate` with it always
/// succeeds. On this machine the agent is the command the editor started, and the model's
/// credentials are the command's (its environment and flags), never the editor's. Across the
/// network, the server checked the connection's bearer token before the first message (the
/// upgrade's `Authorization` header), as on every route: the connection is its principal's.
fn auth_methods(reach: Reach) -> Vec<AuthMethod> {
    let how = match reach {
        Reach::Local => {
            "Nothing to enter: the agent uses the model credentials it was started with."
        }
        Reach::Remote => {
            "Nothing more to enter: the server took this connection's bearer token when it opened."
        }
    };
    vec![AuthMethod::Agent(
        AuthMethodAgent::new(AUTH_METHOD, "agent-tower").description(how),
    )]
}

/// `authenticate` with [`AUTH_METHOD`]: nothing to check (see [`auth_methods`]); any other
/// method is not this agent's.
pub(super) fn authenticate(
    req: AuthenticateRequest,
    responder: Responder<AuthenticateResponse>,
) -> Result<(), Error> {
    if &*req.method_id.0 == AUTH_METHOD {
        responder.respond(AuthenticateResponse::new())
    } else {
        responder.respond_with_error(Error::invalid_params().data(json!({
            "methodId": req.method_id,
            "reason": format!("this agent offers `{AUTH_METHOD}` only"),
        })))
    }
}

impl<S> Shared<S>
where
    S: RunService,
{
    pub(super) fn initialize(
        &self,
        req: InitializeRequest,
        responder: Responder<InitializeResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        tracing::info!(
            requested = req.protocol_version.as_u16(),
            client = ?req.client_info.as_ref().map(|c| &c.name),
            "initialize"
        );
        if let Some(approver) = &self.config.approver {
            approver.connect(cx.clone(), &req.client_capabilities);
        }
        if self.config.reach == Reach::Remote {
            let _ = self.editor.set(Editor::new(cx, &req.client_capabilities));
        }
        // One version is spoken: the requested one if it is it, else it is the latest.
        responder.respond(
            InitializeResponse::new(ProtocolVersion::LATEST)
                .agent_capabilities(
                    AgentCapabilities::new()
                        .load_session(true)
                        .prompt_capabilities(self.config.prompt.clone())
                        .mcp_capabilities(
                            McpCapabilities::new()
                                .http(cfg!(feature = "mcp") && self.config.reach == Reach::Local),
                        )
                        .session_capabilities(
                            SessionCapabilities::new()
                                .list(SessionListCapabilities::new())
                                .resume(SessionResumeCapabilities::new())
                                .delete(SessionDeleteCapabilities::new())
                                .fork(SessionForkCapabilities::new())
                                .archive(SessionArchiveCapabilities::new())
                                .title(SessionTitleCapabilities::new())
                                .close(SessionCloseCapabilities::new()),
                        )
                        .meta(self.transport()),
                )
                .agent_info(self.config.info.clone())
                .auth_methods(auth_methods(self.config.reach)),
        )
    }

    /// What the transport offers, in the capabilities' `_meta["acp/transport"]`: for a remote
    /// editor, that a session's turn can be resumed at a cursor (`session/resume` with
    /// `_meta["acp/cursor"]`).
    fn transport(&self) -> Option<Meta> {
        (self.config.reach == Reach::Remote)
            .then(|| Meta::from_iter([("acp/transport".to_owned(), json!({"resumable": true}))]))
    }

    /// The tools of the MCP servers the editor names for a session: started here for an editor
    /// on this machine; an editor across the network has them on its own machine.
    async fn lent_tools(&self, servers: &[McpServer]) -> Result<Option<ToolRouter>, Error> {
        match self.config.reach {
            Reach::Local => connect_mcp(servers).await,
            Reach::Remote => {
                if !servers.is_empty() {
                    tracing::debug!(
                        servers = servers.len(),
                        "the MCP servers of a remote editor are not started here"
                    );
                }
                Ok(None)
            }
        }
    }

    pub(super) fn new_session(
        self: &Arc<Self>,
        req: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let id = SessionId::new(RunId::new().to_string());
        let mode = self.config.mode;
        let shared = self.clone();
        cx.clone().spawn(async move {
            let tools = match shared.lent_tools(&req.mcp_servers).await {
                Ok(tools) => tools,
                Err(error) => return responder.respond_with_error(error),
            };
            shared.sessions.lock().insert(
                id.to_string(),
                Session {
                    tools,
                    ..Session::new(req.cwd.clone(), mode)
                },
            );
            if let Err(error) = shared.keep(&id, &req.cwd).await {
                shared.sessions.lock().remove(&*id.0);
                return responder.respond_with_error(error);
            }
            responder.respond(
                NewSessionResponse::new(id.clone())
                    .modes(mode_state(mode))
                    .config_options(config_options(mode)),
            )?;
            notify(&cx, &id, SessionUpdate::AvailableCommandsUpdate(commands()));
            Ok(())
        })
    }

    pub(super) fn load(
        self: &Arc<Self>,
        req: LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let shared = self.clone();
        cx.clone().spawn(async move {
            // The conversation is the thread's, as the log keeps it (a session from before a
            // restart, or a thread begun through another door, too).
            let known = shared.sessions.lock().contains_key(&*req.session_id.0);
            let record = match shared.thread(&req.session_id).await {
                Ok(record) => record,
                Err(error) => return responder.respond_with_error(error),
            };
            if record.is_none() && !known {
                return responder.respond_with_error(not_found(&req.session_id));
            }
            let tools = match shared.lent_tools(&req.mcp_servers).await {
                Ok(tools) => tools,
                Err(error) => return responder.respond_with_error(error),
            };
            let joined = shared.joins(record.as_ref().and_then(in_flight));
            let messages = record.map(|record| record.messages).unwrap_or_default();
            let mode = {
                let mut sessions = shared.sessions.lock();
                let session = sessions
                    .entry(req.session_id.to_string())
                    .or_insert_with(|| Session {
                        title: crate::message::title(&messages),
                        ..Session::new(req.cwd.clone(), shared.config.mode)
                    });
                session.open = true;
                if tools.is_some() {
                    session.tools = tools;
                }
                session.mode
            };
            // Everything the load sends goes out before the answer (the conversation, then the
            // commands): a client that stops reading at the answer has the whole session.
            for update in history::replay(&messages, &shared.config.kinds) {
                notify(&cx, &req.session_id, update);
            }
            notify(
                &cx,
                &req.session_id,
                SessionUpdate::AvailableCommandsUpdate(commands()),
            );
            responder.respond(
                LoadSessionResponse::new()
                    .modes(mode_state(mode))
                    .config_options(config_options(mode))
                    .meta(turn_state(joined.as_ref().map(|run| (run, true)), None)),
            )?;
            if let Some(run) = joined {
                let shown = Shown::of(&messages);
                shared.join(&req.session_id, run, JoinAt::Start(shown), &cx);
            }
            Ok(())
        })
    }

    /// Sets the session's mode and tells the client, in both vocabularies.
    fn switch_mode(
        &self,
        session: &SessionId,
        id: &str,
        cx: &ConnectionTo<Client>,
    ) -> Result<Mode, Error> {
        let mode = mode_of(id).ok_or_else(|| {
            Error::invalid_params().data(json!({
                "modeId": id,
                "reason": "unknown mode; one of ask, auto, read-only",
            }))
        })?;
        match self.sessions.lock().get_mut(&*session.0) {
            Some(s) if s.open => s.mode = mode,
            _ => return Err(not_found(session)),
        }
        notify(
            cx,
            session,
            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode_id(mode))),
        );
        notify(
            cx,
            session,
            SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(config_options(mode))),
        );
        Ok(mode)
    }

    pub(super) fn set_mode(
        &self,
        req: SetSessionModeRequest,
        responder: Responder<SetSessionModeResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let switched = self.switch_mode(&req.session_id, &req.mode_id.0, &cx);
        responder.respond_with_result(switched.map(|_| SetSessionModeResponse::new()))
    }

    pub(super) fn set_config_option(
        &self,
        req: SetSessionConfigOptionRequest,
        responder: Responder<SetSessionConfigOptionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let switched = match (&*req.config_id.0, req.value.as_value_id()) {
            ("mode", Some(value)) => self.switch_mode(&req.session_id, &value.0, &cx),
            (config, _) => Err(Error::invalid_params()
                .data(json!({"configId": config, "reason": "unknown option or value"}))),
        };
        responder.respond_with_result(
            switched.map(|mode| SetSessionConfigOptionResponse::new(config_options(mode))),
        )
    }

    pub(super) fn close(
        &self,
        req: CloseSessionRequest,
        responder: Responder<CloseSessionResponse>,
    ) -> Result<(), Error> {
        let closed = match self.sessions.lock().get_mut(&*req.session_id.0) {
            Some(session) => {
                session.close();
                true
            }
            None => false,
        };
        if !closed {
            return responder.respond_with_error(not_found(&req.session_id));
        }
        responder.respond(CloseSessionResponse::new())
    }

    /// `session/list`: the sessions of this connection's principal (everyone's for an operator,
    /// or without one) that the log keeps, newest first, in pages of 50.
    pub(super) fn list(
        self: &Arc<Self>,
        req: ListSessionsRequest,
        responder: Responder<ListSessionsResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let shared = self.clone();
        cx.spawn(async move {
            let listed = shared.list_kept(&req).await;
            responder.respond_with_result(listed)
        })
    }

    /// The principal whose sessions this connection sees (`None`: everyone's).
    fn owner_filter(&self) -> Option<&str> {
        self.config
            .principal
            .as_ref()
            .filter(|p| !p.is_operator())
            .map(|p| p.name())
    }

    /// One page of the sessions the log keeps.
    async fn list_kept(&self, req: &ListSessionsRequest) -> Result<ListSessionsResponse, Error> {
        let cursor = req
            .cursor
            .as_deref()
            .map(str::parse::<ThreadCursor>)
            .transpose()
            .map_err(|e| Error::invalid_params().data(json!({"cursor": e.to_string()})))?;
        let cwd = req.cwd.as_ref().map(|cwd| cwd.to_string_lossy());
        let archived = match &req.archived {
            None | Some(SessionArchiveFilter::Exclude) => Some(false),
            Some(SessionArchiveFilter::Include) => None,
            Some(SessionArchiveFilter::Only) => Some(true),
            Some(other) => {
                return Err(Error::invalid_params().data(
                    json!({"archived": format!("{other:?}: one of exclude, include, only")}),
                ));
            }
        };
        let query = ThreadQuery::new(PAGE)
            .principal(self.owner_filter())
            .sessions(cwd.as_deref())
            .archived(archived)
            .after(cursor.as_ref());
        let page = self.runs.run_log().threads(&query).await.map_err(|error| {
            tracing::error!(%error, "the session store failed");
            Error::internal_error().data(json!({"reason": "the session store is unavailable"}))
        })?;
        let sessions = page
            .threads
            .into_iter()
            .map(|thread| {
                SessionInfo::new(
                    SessionId::new(thread.thread_id.to_string()),
                    thread.workspace.unwrap_or_default(),
                )
                .title(thread.title)
                .updated_at(rfc3339(thread.updated_at))
                .archived(thread.archived)
            })
            .collect();
        Ok(ListSessionsResponse::new(sessions).next_cursor(page.next.map(|c| c.to_string())))
    }

    /// `session/resume`: a known session (in memory or in the store) open again, without its
    /// history sent.
    pub(super) fn resume(
        self: &Arc<Self>,
        req: ResumeSessionRequest,
        responder: Responder<ResumeSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let shared = self.clone();
        let cx = cx.clone();
        cx.clone().spawn(async move {
            let known = shared.sessions.lock().contains_key(&*req.session_id.0);
            if !known {
                match shared.restore(&req.session_id, &req.cwd).await {
                    Ok(true) => {}
                    Ok(false) => return responder.respond_with_error(not_found(&req.session_id)),
                    Err(error) => return responder.respond_with_error(error),
                }
            }
            let tools = match shared.lent_tools(&req.mcp_servers).await {
                Ok(tools) => tools,
                Err(error) => return responder.respond_with_error(error),
            };
            let record = match shared.thread(&req.session_id).await {
                Ok(record) => record,
                Err(error) => return responder.respond_with_error(error),
            };
            let joined = match shared.rejoins(&req, record.as_ref()) {
                Ok(joined) => joined,
                Err(error) => return responder.respond_with_error(error),
            };
            let mode = {
                let mut sessions = shared.sessions.lock();
                let Some(session) = sessions.get_mut(&*req.session_id.0) else {
                    return responder.respond_with_error(not_found(&req.session_id));
                };
                session.open = true;
                session.cwd = req.cwd.clone();
                if tools.is_some() {
                    session.tools = tools;
                }
                session.mode
            };
            responder.respond(
                ResumeSessionResponse::new()
                    .modes(mode_state(mode))
                    .config_options(config_options(mode))
                    .meta(turn_state(
                        joined.as_ref().map(|(run, running, _)| (run, *running)),
                        None,
                    )),
            )?;
            notify(
                &cx,
                &req.session_id,
                SessionUpdate::AvailableCommandsUpdate(commands()),
            );
            if let Some((run, _, joins)) = joined {
                shared.join(&req.session_id, run, joins, &cx);
            }
            Ok(())
        })
    }

    /// `session/fork`: a new session with the whole conversation of one the caller may use (the
    /// original untouched), working in `cwd` with the client's MCP servers, in the original's
    /// mode when this connection has it open; in the log, a fork of its thread.
    pub(super) fn fork(
        self: &Arc<Self>,
        req: ForkSessionRequest,
        responder: Responder<ForkSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let shared = self.clone();
        cx.clone().spawn(async move {
            let known = match shared.thread(&req.session_id).await {
                Ok(record) => record.is_some(),
                Err(error) => return responder.respond_with_error(error),
            };
            if !known {
                return responder.respond_with_error(not_found(&req.session_id));
            }
            let tools = match connect_mcp(&req.mcp_servers).await {
                Ok(tools) => tools,
                Err(error) => return responder.respond_with_error(error),
            };
            let from = ThreadId::from(&*req.session_id.0);
            let cwd = req.cwd.to_string_lossy();
            let principal = shared.config.principal.as_ref().map(|p| p.name());
            let fork = Fork::new(&from).principal(principal).workspace(Some(&cwd));
            let forked = match shared.runs.fork_thread(fork).await {
                Ok(forked) => forked,
                Err(ForkError::Log(error)) => {
                    return responder.respond_with_error(store_failed(&req.session_id, &error));
                }
                Err(_) => return responder.respond_with_error(not_found(&req.session_id)),
            };
            let id = SessionId::new(forked.thread_id.as_str());
            let mode = {
                let mut sessions = shared.sessions.lock();
                let mode = sessions
                    .get(&*req.session_id.0)
                    .map_or(shared.config.mode, |session| session.mode);
                sessions.insert(
                    id.to_string(),
                    Session {
                        title: forked.title.clone(),
                        tools,
                        ..Session::new(req.cwd.clone(), mode)
                    },
                );
                mode
            };
            responder.respond(
                ForkSessionResponse::new(id.clone())
                    .modes(mode_state(mode))
                    .config_options(config_options(mode)),
            )?;
            notify(&cx, &id, SessionUpdate::AvailableCommandsUpdate(commands()));
            Ok(())
        })
    }

    /// `session/archive` (unstable in ACP): the session out of the everyday `session/list`, its
    /// history kept; a turn running in it is cancelled and the session closed first, as
    /// `session/close` would. The thread is archived in the log, for every door.
    pub(super) fn archive(
        self: &Arc<Self>,
        req: ArchiveSessionRequest,
        responder: Responder<ArchiveSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        if let Some(session) = self.sessions.lock().get_mut(&*req.session_id.0) {
            session.close();
        }
        let shared = self.clone();
        cx.spawn(async move {
            let change = ThreadChange::new().archived(true);
            match shared.change_session(&req.session_id, &change).await {
                Ok(()) => responder.respond(ArchiveSessionResponse::new()),
                Err(error) => responder.respond_with_error(error),
            }
        })
    }

    /// `session/unarchive` (unstable in ACP): the session back in the everyday `session/list`.
    pub(super) fn unarchive(
        self: &Arc<Self>,
        req: UnarchiveSessionRequest,
        responder: Responder<UnarchiveSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let shared = self.clone();
        cx.spawn(async move {
            let change = ThreadChange::new().archived(false);
            match shared.change_session(&req.session_id, &change).await {
                Ok(()) => responder.respond(UnarchiveSessionResponse::new()),
                Err(error) => responder.respond_with_error(error),
            }
        })
    }

    /// `session/set_title` (unstable in ACP): the session's name, trimmed, for every door's list
    /// (the thread's name in the log); refused as [`thread_name`] refuses it.
    pub(super) fn set_title(
        self: &Arc<Self>,
        req: SetSessionTitleRequest,
        responder: Responder<SetSessionTitleResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let title = match thread_name(&req.title) {
            Ok(title) => title,
            Err(invalid) => {
                let refused = json!({"title": invalid.to_string()});
                return responder.respond_with_error(Error::invalid_params().data(refused));
            }
        };
        let shared = self.clone();
        cx.spawn(async move {
            let change = ThreadChange::new().name(Some(title.clone()));
            if let Err(error) = shared.change_session(&req.session_id, &change).await {
                return responder.respond_with_error(error);
            }
            if let Some(session) = shared.sessions.lock().get_mut(&*req.session_id.0) {
                session.title = Some(title.clone());
            }
            responder.respond(SetSessionTitleResponse::new(title))
        })
    }

    /// Changes the listing of a session the caller may use: `-32002` for another principal's
    /// session or none.
    async fn change_session(
        &self,
        session: &SessionId,
        change: &ThreadChange,
    ) -> Result<(), Error> {
        if self.thread(session).await?.is_none() {
            return Err(not_found(session));
        }
        let thread = ThreadId::from(&*session.0);
        match self.runs.change_thread(&thread, change).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(not_found(session)),
            Err(error) => Err(store_failed(session, &error)),
        }
    }

    /// `session/delete`: the session and its history gone, its running turn cancelled first. A
    /// session this connection does not know (never made, already deleted, another principal's)
    /// is deleted quietly, as the protocol asks: nothing is said of it.
    pub(super) fn delete(
        self: &Arc<Self>,
        req: DeleteSessionRequest,
        responder: Responder<DeleteSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let mut removed = self.sessions.lock().remove(&*req.session_id.0);
        if let Some(session) = &mut removed {
            session.cancel_turns();
        }
        let shared = self.clone();
        cx.spawn(async move {
            if let Err(error) = shared.forget(&req.session_id).await {
                return responder.respond_with_error(error);
            }
            responder.respond(DeleteSessionResponse::new())
        })
    }

    pub(super) fn cancel(&self, session: &SessionId) {
        if let Some(entry) = self.sessions.lock().get_mut(&*session.0) {
            tracing::info!(%session, "cancel");
            entry.cancel_turns();
        }
    }

    pub(super) fn prompt(
        self: &Arc<Self>,
        mut req: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        if let Some(block) = req
            .prompt
            .iter()
            .find(|block| !content::allowed(&self.config.prompt, block))
        {
            return responder.respond_with_error(Error::invalid_params().data(json!({
                "reason": format!(
                    "the prompt has content this agent does not accept (needs the `{}` prompt capability)",
                    content::needs(block).unwrap_or("unknown")
                ),
            })));
        }
        let parts = content::into_parts(std::mem::take(&mut req.prompt));
        let text = crate::message::parts_text(&parts);
        if let Some(command) = text.trim().strip_prefix("/mode") {
            let answer = self
                .switch_mode(&req.session_id, command.trim(), &cx)
                .map(|mode| {
                    notify(
                        &cx,
                        &req.session_id,
                        SessionUpdate::AgentMessageChunk(
                            ContentChunk::new(ContentBlock::from(format!(
                                "Mode: {}.",
                                mode_id(mode)
                            )))
                            .message_id(MessageId::new().as_ref()),
                        ),
                    );
                    PromptResponse::new(acp::StopReason::EndTurn)
                });
            return responder.respond_with_result(answer);
        }

        let (cancel, attach, mode, title) = {
            let mut sessions = self.sessions.lock();
            let session = match sessions.get_mut(&*req.session_id.0) {
                Some(session) if session.open => session,
                _ => return responder.respond_with_error(not_found(&req.session_id)),
            };
            let title = session.title.is_none().then(|| session_title(&text));
            if title.is_some() {
                session.title.clone_from(&title);
            }
            (
                session.cancel.clone(),
                self.attach(session, &req.session_id, &cx),
                session.mode,
                title,
            )
        };
        if let Some(title) = title {
            notify(
                &cx,
                &req.session_id,
                SessionUpdate::SessionInfoUpdate(SessionInfoUpdate::new().title(title)),
            );
        }
        let shared = self.clone();
        let session = req.session_id;
        cx.clone().spawn(async move {
            let (notifier, attach) = attach;
            let turn = Turn {
                session: &session,
                cancel: &cancel,
                cx: &cx,
            };
            let answer = shared.turn(&turn, parts, mode, attach).await;
            // Nothing of this turn reaches the client after its answer.
            if let Some(notifier) = notifier {
                notifier.close();
            }
            // A cancel that came before its answer answers `cancelled`, whatever the model or a
            // tool made of it.
            let answer = if cancel.is_cancelled() {
                Ok(PromptResponse::new(acp::StopReason::Cancelled))
            } else {
                answer
            };
            if let Err(error) = responder.respond_with_result(answer) {
                tracing::debug!(%error, "the prompt's answer could not be sent");
            }
            Ok(())
        })
    }

    /// What the session lends its turn's run in this process: the session's mode, cost and
    /// tools, and for an editor on this machine the turn's notifier (a remote one's turn is read
    /// from the log).
    fn attach(
        &self,
        session: &Session,
        id: &SessionId,
        cx: &ConnectionTo<Client>,
    ) -> (Option<Notifier>, Attach) {
        let notifier = (self.config.reach == Reach::Local)
            .then(|| Notifier::new(cx.clone(), id.clone()).outbox(self.outbox.as_ref()));
        let lent = (
            notifier.clone(),
            session.mode,
            session.cost.clone(),
            session.tools.clone(),
        );
        let attach = Attach::new(move |run| {
            let (notifier, mode, cost, tools) = &lent;
            if let Some(notifier) = notifier {
                run.sinks.insert(notifier.clone());
            }
            run.extensions.insert(*mode);
            run.extensions.insert(cost.clone());
            if let Some(tools) = tools {
                run.extensions.insert(RunTools(tools.clone()));
            }
        });
        (notifier, attach)
    }

    /// One turn: a run on the session's thread, its conversation the thread's and the prompt,
    /// followed to its end; cancelled through the engine when the turn's cancel fires. Its
    /// request asks for the session's `mode`, so that an instance continuing it after a crash is
    /// not more permissive than the session was. A remote editor is asked about the calls the run
    /// waits at, and the run goes on with its answers.
    async fn turn(
        &self,
        turn: &Turn<'_>,
        prompt: Vec<crate::message::ContentPart>,
        mode: Mode,
        attach: Attach,
    ) -> Result<PromptResponse, Error> {
        let session = turn.session;
        let prompt = Message::User {
            id: MessageId::new(),
            content: prompt,
        };
        let caller = self.config.principal.as_ref();
        let mut request = self
            .runs
            .next_turn(caller, ThreadId::from(&*session.0), prompt)
            .await
            .map_err(|error| refused(session, &error))?;
        request.forwarded_props = Some(json!({"permission": {"mode": mode}}));
        if turn.cancel.is_cancelled() {
            return Ok(PromptResponse::new(acp::StopReason::Cancelled));
        }
        let begun = self
            .runs
            .begin_with(self.config.principal.clone(), request, Some(attach))
            .await
            .map_err(|error| refused(session, &error))?;
        let run = match begun {
            Begun::Refused { code, message, .. } => return Err(failed(code, message)),
            begun => begun,
        };
        let mut updates =
            (self.config.reach == Reach::Remote).then(|| LoggedUpdates::new(&self.config.kinds));
        self.drive(turn, run.run_id(), run.from(), updates.as_mut(), None)
            .await
    }

    /// Follows the turn's `run` after `from` to the end of the turn, its answer; the updates of
    /// what comes before `seen` (a place in it the editor was sent) are not sent again. With
    /// `updates` (a remote editor), the editor is asked about the calls the run waits at, and
    /// the run goes on with its answers.
    async fn drive(
        &self,
        turn: &Turn<'_>,
        run: &RunId,
        mut from: u64,
        mut updates: Option<&mut LoggedUpdates<'_>>,
        mut seen: Option<Place>,
    ) -> Result<PromptResponse, Error> {
        loop {
            let end = self
                .follow(turn, run, from, updates.as_deref_mut(), seen.take())
                .await;
            let (Some(interrupts), Some(updates), Some(end)) = (
                interrupts_of(end.as_ref()),
                updates.as_deref_mut(),
                end.as_ref(),
            ) else {
                return answer(end.as_ref());
            };
            let waiting = self.waiting(turn.session, interrupts).await?;
            if waiting.is_empty() {
                // Answered already (a turn joined from its start): the run went on after it.
                from = end.seq;
                continue;
            }
            let answers = self.ask(turn, &waiting, updates).await?;
            let dismissed = answers
                .iter()
                .any(|answer| answer.status == ResumeStatus::Cancelled);
            from = self
                .runs
                .continue_run(self.config.principal.clone(), run, answers)
                .await
                .map_err(|error| resume_failed(turn.session, &error))?
                .from();
            if dismissed {
                // The person cancelled at the question: the calls are dismissed, the turn ends.
                self.stop(turn.session, run).await;
            }
        }
    }

    /// Those of `interrupts` that still wait for an answer on the session's thread.
    async fn waiting(
        &self,
        session: &SessionId,
        interrupts: Vec<Interrupt>,
    ) -> Result<Vec<Interrupt>, Error> {
        let thread = ThreadId::from(&*session.0);
        let pending = self
            .runs
            .run_log()
            .interrupts(Interrupts::PendingOf(&thread))
            .await
            .map_err(|error| store_failed(session, &error))?;
        Ok(interrupts
            .into_iter()
            .filter(|interrupt| {
                pending
                    .iter()
                    .any(|waiting| waiting.id.as_str() == interrupt.id)
            })
            .collect())
    }

    /// The run in flight on a session's thread that an editor joins when it loads or resumes
    /// the session: a remote editor's (one on this machine is the agent's only client).
    fn joins(&self, in_flight: Option<&RunRecord>) -> Option<RunId> {
        (self.config.reach == Reach::Remote)
            .then(|| in_flight.map(|run| run.run_id.clone()))
            .flatten()
    }

    /// The run a remote editor joins when it resumes a session, whether it is in flight, and
    /// where it joins: after the place its `_meta["acp/cursor"]` names (a run of the session
    /// that ended, too), else the run in flight from its start.
    fn rejoins(
        &self,
        req: &ResumeSessionRequest,
        record: Option<&ThreadRecord>,
    ) -> Result<Option<(RunId, bool, JoinAt)>, Error> {
        let cursor = req
            .meta
            .as_ref()
            .and_then(|meta| meta.get(CURSOR))
            .filter(|_| self.config.reach == Reach::Remote);
        let Some(cursor) = cursor else {
            return Ok(record.and_then(|record| {
                let run = self.joins(in_flight(record))?;
                Some((run, true, JoinAt::Start(Shown::of(&record.messages))))
            }));
        };
        let unknown = || {
            Error::invalid_params().data(json!({
                "cursor": cursor,
                "reason": "no such place in this session's log: load the session instead",
            }))
        };
        let place = cursor.as_str().and_then(Place::parse).ok_or_else(unknown)?;
        let run = record
            .and_then(|record| record.runs.iter().find(|run| run.run_id == place.run))
            .ok_or_else(unknown)?;
        Ok(Some((
            run.run_id.clone(),
            run.status == RunStatus::Running,
            JoinAt::After(place),
        )))
    }

    /// Shows the editor `run` of `session`'s thread from where it `joins` to the end of its
    /// turn, which a `session_info_update` then says (its `_meta["acp/turnState"]`). The turn's
    /// approvals are asked of this editor, and `session/cancel` cancels it, as if it had
    /// prompted it.
    fn join(
        self: &Arc<Self>,
        session: &SessionId,
        run: RunId,
        joins: JoinAt,
        cx: &ConnectionTo<Client>,
    ) {
        let Some(cancel) = self
            .sessions
            .lock()
            .get(&*session.0)
            .map(|session| session.cancel.clone())
        else {
            return;
        };
        let shared = self.clone();
        let session = session.clone();
        let connection = cx.clone();
        let spawned = cx.spawn(async move {
            let turn = Turn {
                session: &session,
                cancel: &cancel,
                cx: &connection,
            };
            let kinds = &shared.config.kinds;
            let (mut updates, seen) = match joins {
                JoinAt::Start(shown) => (LoggedUpdates::joining(kinds, shown), None),
                JoinAt::After(place) => (LoggedUpdates::new(kinds), Some(place)),
            };
            let answer = shared.drive(&turn, &run, 0, Some(&mut updates), seen).await;
            let stop = match &answer {
                _ if cancel.is_cancelled() => acp::StopReason::Cancelled,
                Ok(answer) => answer.stop_reason,
                Err(_) => acp::StopReason::EndTurn,
            };
            notify(
                &connection,
                &session,
                SessionUpdate::SessionInfoUpdate(
                    SessionInfoUpdate::new()
                        .updated_at(rfc3339(std::time::SystemTime::now()))
                        .meta(turn_state(None, Some(stop))),
                ),
            );
            Ok(())
        });
        if let Err(error) = spawned {
            tracing::debug!(%error, "the connection is gone");
        }
    }

    /// Follows `run` after `from` to its end: the terminal event (`None` when the log ended
    /// without one). With `updates` (a remote editor), the client is sent the run's updates as
    /// they are logged, each once it has room for it; the turn's cancel cancels the run.
    async fn follow(
        &self,
        turn: &Turn<'_>,
        run: &RunId,
        from: u64,
        mut updates: Option<&mut LoggedUpdates<'_>>,
        seen: Option<Place>,
    ) -> Option<LoggedEvent> {
        let mut events = self.runs.follow(run.clone(), from);
        let mut out = Vec::new();
        let mut room = self.outbox.as_ref().map(|outbox| (outbox, outbox.waiter()));
        let mut asked = false;
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(event) if event.is_terminal() => return Some(event),
                    Some(logged) => {
                        let (Some(updates), Ok(event)) = (&mut updates, logged.event()) else {
                            continue;
                        };
                        updates.translate(&event, &mut out);
                        for (part, update) in out.drain(..).enumerate() {
                            let place = Place { run: run.clone(), seq: logged.seq, part };
                            if seen.as_ref().is_some_and(|seen| place <= *seen) {
                                // Sent before: translated again only for what follows.
                                continue;
                            }
                            if let Some((outbox, waiter)) = &mut room {
                                std::future::poll_fn(|cx| outbox.poll_reserve(waiter, cx)).await;
                            }
                            notify_at(turn.cx, turn.session, update, &place);
                        }
                    }
                    None => return None,
                },
                () = turn.cancel.cancelled(), if !asked => {
                    asked = true;
                    self.stop(turn.session, run).await;
                }
            }
        }
    }

    /// Cancels `run` through the engine, wherever it runs.
    async fn stop(&self, session: &SessionId, run: &RunId) {
        if let Err(error) = self.runs.cancel(run).await {
            tracing::warn!(%session, %error, "the turn could not be cancelled");
        }
    }

    /// The remote editor's answers to the calls a run waits at, one permission request each; a
    /// cancel (the person's, or the turn's) dismisses the call and those after it.
    async fn ask(
        &self,
        turn: &Turn<'_>,
        interrupts: &[Interrupt],
        updates: &mut LoggedUpdates<'_>,
    ) -> Result<Vec<ResumeEntry>, Error> {
        let editor = self.editor.get().ok_or_else(|| {
            Error::internal_error().data(json!({"reason": "the client did not initialize"}))
        })?;
        let mut answers = Vec::with_capacity(interrupts.len());
        let mut dismissed = false;
        for interrupt in interrupts {
            let call = self.waiting_call(interrupt);
            let decision = if dismissed {
                Decision::Cancel
            } else {
                tokio::select! {
                    decided = editor.decide(&turn.session.0, &call) => decided.map_err(|error| {
                        // The interrupts stay pending, for this editor's next connection or
                        // another door.
                        tracing::debug!(session = %turn.session, %error, "an approval was not answered");
                        Error::internal_error().data(json!({"reason": "the approval was not answered"}))
                    })?,
                    () = turn.cancel.cancelled() => Decision::Cancel,
                }
            };
            dismissed |= decision == Decision::Cancel;
            if !matches!(
                decision,
                Decision::Approve | Decision::ApproveAlways | Decision::Edit(_)
            ) {
                updates.declined(call.id);
            }
            answers.push(resume_entry(interrupt.id.clone(), &decision));
        }
        Ok(answers)
    }

    /// The call `interrupt` asks about, as the editor is asked about it.
    fn waiting_call(&self, interrupt: &Interrupt) -> PendingCall {
        let (tool, arguments) = asked_call(interrupt);
        let tool = tool.unwrap_or("tool");
        PendingCall {
            id: interrupt
                .tool_call_id
                .clone()
                .unwrap_or_else(|| ToolCallId::from(interrupt.id.as_str())),
            name: tool.to_owned(),
            arguments: arguments.clone(),
            kind: self.config.kinds.of(tool),
        }
    }
}

/// A prompt turn's context: its session, its cancel and its client.
pub(super) struct Turn<'a> {
    session: &'a SessionId,
    cancel: &'a CancellationToken,
    cx: &'a ConnectionTo<Client>,
}

/// The interrupts a run stopped at, when its terminal event `end` says so.
fn interrupts_of(end: Option<&LoggedEvent>) -> Option<Vec<Interrupt>> {
    match end?.event().ok()? {
        Event::RunFinished(RunFinished {
            outcome: Some(RunFinishedOutcome::Interrupt { interrupts }),
            ..
        }) => Some(interrupts),
        _ => None,
    }
}

/// The run in flight on a thread, if any.
fn in_flight(thread: &ThreadRecord) -> Option<&RunRecord> {
    thread
        .runs
        .iter()
        .rev()
        .find(|run| run.status == RunStatus::Running)
}

/// The key of a session's turn state, in `_meta`: `{"running": true, "runId"}` while a turn
/// goes, `{"running": false, "stopReason"?}` once it ended.
const TURN_STATE: &str = "acp/turnState";

/// The key of the cursor of an update read from the log, in its notification's `_meta`.
const CURSOR: &str = "acp/cursor";

/// A session's turn state as `_meta`: the run the editor joined (and whether it is in flight),
/// else idle (with how its turn ended).
fn turn_state(joined: Option<(&RunId, bool)>, stopped: Option<acp::StopReason>) -> Meta {
    let state = match (joined, stopped) {
        (Some((run, running)), _) => json!({"running": running, "runId": run}),
        (None, Some(stop)) => json!({"running": false, "stopReason": stop}),
        (None, None) => json!({"running": false}),
    };
    Meta::from_iter([(TURN_STATE.to_owned(), state)])
}

/// Where an update is in the log, its cursor: `{runId}:{seq}:{part}`, the `part`th update (from
/// 0) the event at `seq` of the run was shown as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Place {
    run: RunId,
    seq: u64,
    part: usize,
}

impl Place {
    /// The place a cursor names (a run id may hold colons: the numbers are read from the end).
    fn parse(cursor: &str) -> Option<Self> {
        let mut fields = cursor.rsplitn(3, ':');
        let part = fields.next()?.parse().ok()?;
        let seq = fields.next()?.parse().ok()?;
        let run = fields.next().filter(|run| !run.is_empty())?;
        Some(Self {
            run: RunId::from(run),
            seq,
            part,
        })
    }
}

impl PartialOrd for Place {
    /// Places of one run are ordered; places of two runs are not.
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        (self.run == other.run).then(|| (self.seq, self.part).cmp(&(other.seq, other.part)))
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.run, self.seq, self.part)
    }
}

/// Where an editor joins a run: from its start, having been shown the thread, or after a place
/// it was sent.
pub(super) enum JoinAt {
    Start(Shown),
    After(Place),
}

/// What a turn is answered with: its run's terminal event as a stop reason (a run that ends
/// with an error ACP has a stop reason for, too), else as a JSON-RPC error whose `data.kind` is
/// the `RUN_ERROR` code.
fn answer(end: Option<&LoggedEvent>) -> Result<PromptResponse, Error> {
    let stop = match end.and_then(|end| end.event().ok()) {
        Some(Event::RunFinished(finished)) => match finished.outcome {
            Some(RunFinishedOutcome::Cancelled) => AcpStopReason::Cancelled,
            // The stop reasons AG-UI has no outcome for ride in `result.stopReason`.
            _ => finished
                .result
                .as_ref()
                .and_then(|result| result.get("stopReason"))
                .and_then(|stop| serde_json::from_value::<StopReason>(stop.clone()).ok())
                .map_or(AcpStopReason::EndTurn, AcpStopReason::from),
        },
        Some(Event::RunError(error)) => {
            let code = error.code.as_deref().unwrap_or("internal");
            match ErrorKind::from_code(code).and_then(ErrorKind::acp_stop) {
                Some(stop) => stop,
                None => return Err(failed(code, error.message)),
            }
        }
        _ => {
            return Err(failed(
                "internal",
                "the turn ended without its end".to_owned(),
            ));
        }
    };
    Ok(PromptResponse::new(stop_reason(stop)))
}

/// The JSON-RPC error of a turn that failed with `code`.
fn failed(code: &str, message: String) -> Error {
    tracing::warn!(code, %message, "prompt failed");
    let rpc = ErrorKind::from_code(code).map_or(-32603, ErrorKind::json_rpc_code);
    Error::new(i32::try_from(rpc).unwrap_or(-32603), message).data(json!({ "kind": code }))
}

/// The error of a turn whose run could not go on with the editor's answers.
fn resume_failed(session: &SessionId, error: &ResumeError) -> Error {
    match error {
        ResumeError::UnknownRun(_) => not_found(session),
        ResumeError::Begin(error) => refused(session, error),
        error => failed(error.code(), error.to_string()),
    }
}

/// The error of a turn the engine took no run for.
fn refused(session: &SessionId, error: &BeginError) -> Error {
    match error {
        BeginError::Busy(_) => Error::invalid_request().data(json!({
            "kind": error.code(),
            "reason": "a prompt is already running in this session",
        })),
        BeginError::UnknownThread(_) => not_found(session),
        BeginError::Unavailable(cause) => store_failed(session, cause),
        _ => failed(error.code(), error.to_string()),
    }
}

/// How many sessions one `session/list` answer holds at most.
pub(super) const PAGE: usize = 50;

/// `time` as ISO 8601 (RFC 3339, UTC, milliseconds).
fn rfc3339(time: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

fn stop_reason(reason: AcpStopReason) -> acp::StopReason {
    match reason {
        AcpStopReason::EndTurn => acp::StopReason::EndTurn,
        AcpStopReason::MaxTokens => acp::StopReason::MaxTokens,
        AcpStopReason::MaxTurnRequests => acp::StopReason::MaxTurnRequests,
        AcpStopReason::Refusal => acp::StopReason::Refusal,
        AcpStopReason::Cancelled => acp::StopReason::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_names_its_place_whatever_the_run_id() {
        let place = |run: &str, seq, part| Place {
            run: RunId::from(run),
            seq,
            part,
        };
        for written in [place("01a2-b", 7, 0), place("a:b:c", 12, 3)] {
            assert_eq!(Place::parse(&written.to_string()), Some(written));
        }
        for wrong in ["", "7:0", ":7:0", "r:x:0", "r:7:-1", "r:7"] {
            assert_eq!(Place::parse(wrong), None, "{wrong}");
        }
        assert!(place("r", 7, 1) < place("r", 8, 0));
        assert!(place("r", 7, 0) < place("r", 7, 1));
        assert_eq!(place("r", 7, 0).partial_cmp(&place("s", 1, 0)), None);
    }
}
