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
use serde_json::json;

use super::{
    Reach, Shared,
    mcp::connect_mcp,
    modes::{commands, config_options, mode_id, mode_of, mode_state},
    sessions::{Session, session_title, store_failed},
    turns::{JoinAt, Turn, in_flight, turn_state},
};
use crate::{
    acp::{Notifier, approve::Editor, content, events::Shown, history},
    id::{MessageId, RunId, ThreadId},
    permission::Mode,
    runs::{Attach, Fork, ForkError, ThreadChange, ThreadCursor, ThreadQuery, thread_name},
    tool::{RunTools, ToolRouter},
};

pub(super) fn not_found(session: &SessionId) -> Error {
    acp::Error::session_not_found(session.clone()).into()
}

pub(super) fn notify(cx: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate) {
    send(cx, acp::SessionNotification::new(session.clone(), update));
}

pub(super) fn send(cx: &ConnectionTo<Client>, notification: acp::SessionNotification) {
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

impl Shared {
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
}

/// How many sessions one `session/list` answer holds at most.
pub(super) const PAGE: usize = 50;

/// `time` as ISO 8601 (RFC 3339, UTC, milliseconds).
pub(super) fn rfc3339(time: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}
