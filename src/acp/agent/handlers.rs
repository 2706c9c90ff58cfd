//! What the agent answers to each request of the client, and the notifications it sends.

use std::sync::Arc;

use agent_client_protocol::{
    Client, Error,
    schema::ProtocolVersion,
    v1::{
        ConnectionTo, Responder,
        schema::{
            self as acp, AgentCapabilities, CloseSessionRequest, CloseSessionResponse,
            ConfigOptionUpdate, ContentBlock, ContentChunk, CurrentModeUpdate,
            DeleteSessionRequest, DeleteSessionResponse, InitializeRequest, InitializeResponse,
            ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
            McpCapabilities, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse,
            ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities,
            SessionCloseCapabilities, SessionDeleteCapabilities, SessionId, SessionInfo,
            SessionInfoUpdate, SessionListCapabilities, SessionResumeCapabilities, SessionUpdate,
            SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
            SetSessionModeResponse,
        },
    },
};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tower_service::Service;

use super::{
    Shared,
    mcp::connect_mcp,
    modes::{commands, config_options, mode_id, mode_of, mode_state},
    sessions::{Session, session_title},
};
use crate::{
    BoxError,
    acp::{Notifier, content, history},
    context::RunContext,
    id::{MessageId, RunId},
    map_error::{AcpAnswer, AcpStopReason, acp_answer},
    message::Message,
    permission::Mode,
    run::{RunOutcome, RunRequest},
    tool::RunTools,
};

pub(super) fn not_found(session: &SessionId) -> Error {
    acp::Error::session_not_found(session.clone()).into()
}

pub(super) fn notify(cx: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate) {
    if let Err(error) = cx.send_notification(acp::SessionNotification::new(session.clone(), update))
    {
        tracing::debug!(%error, "client gone");
    }
}

impl<S> Shared<S>
where
    S: Service<RunRequest, Response = RunOutcome> + Clone + Send + Sync + 'static,
    S::Error: Into<BoxError> + Send,
    S::Future: Send,
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
            approver.connect(cx, &req.client_capabilities);
        }
        // One version is spoken: the requested one if it is it, else it is the latest.
        responder.respond(
            InitializeResponse::new(ProtocolVersion::LATEST)
                .agent_capabilities(
                    AgentCapabilities::new()
                        .load_session(true)
                        .prompt_capabilities(self.config.prompt.clone())
                        .mcp_capabilities(McpCapabilities::new().http(cfg!(feature = "mcp")))
                        .session_capabilities(
                            SessionCapabilities::new()
                                .list(SessionListCapabilities::new())
                                .resume(SessionResumeCapabilities::new())
                                .delete(SessionDeleteCapabilities::new())
                                .close(SessionCloseCapabilities::new()),
                        ),
                )
                .agent_info(self.config.info.clone()),
        )
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
            let tools = match connect_mcp(&req.mcp_servers).await {
                Ok(tools) => tools,
                Err(error) => return responder.respond_with_error(error),
            };
            shared.sessions.lock().insert(
                id.to_string(),
                Session {
                    cwd: req.cwd.clone(),
                    updated_at: std::time::SystemTime::now(),
                    messages: Vec::new(),
                    state: None,
                    mode,
                    titled: false,
                    turn: None,
                    open: true,
                    tools,
                    cost: Default::default(),
                },
            );
            if let Err(error) = shared.persist(&id).await {
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
        let known = self.sessions.lock().contains_key(&*req.session_id.0);
        if known && req.mcp_servers.is_empty() {
            return self.replay(&req, responder, &cx);
        }
        // Not in memory (the store may have it, from before a restart), or MCP servers to
        // connect first.
        let shared = self.clone();
        cx.clone().spawn(async move {
            match shared.restore(&req.session_id, &req.cwd).await {
                Ok(true) => {}
                Ok(false) if known => {}
                Ok(false) => return responder.respond_with_error(not_found(&req.session_id)),
                Err(error) => return responder.respond_with_error(error),
            }
            let tools = match connect_mcp(&req.mcp_servers).await {
                Ok(tools) => tools,
                Err(error) => return responder.respond_with_error(error),
            };
            if let Some(session) = shared.sessions.lock().get_mut(&*req.session_id.0) {
                session.tools = tools;
            }
            shared.replay(&req, responder, &cx)
        })
    }

    /// Reopens a known session: its conversation as updates, then the answer.
    fn replay(
        &self,
        req: &LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let (replay, mode) = {
            let mut sessions = self.sessions.lock();
            let Some(session) = sessions.get_mut(&*req.session_id.0) else {
                return responder.respond_with_error(not_found(&req.session_id));
            };
            session.open = true;
            (
                history::replay(&session.messages, &self.config.kinds),
                session.mode,
            )
        };
        // Everything the load sends goes out before the answer (the conversation, then the
        // commands): a client that stops reading at the answer has the whole session.
        for update in replay {
            notify(cx, &req.session_id, update);
        }
        notify(
            cx,
            &req.session_id,
            SessionUpdate::AvailableCommandsUpdate(commands()),
        );
        responder.respond(
            LoadSessionResponse::new()
                .modes(mode_state(mode))
                .config_options(config_options(mode)),
        )
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
                // Closing cancels the running turn, as `session/cancel` would.
                if let Some(turn) = session.turn.take() {
                    turn.cancel();
                }
                session.open = false;
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
    /// or without one), newest first, in pages of 50; with a store, every session it
    /// keeps, else this process's.
    #[cfg_attr(not(feature = "store"), allow(unused_variables))]
    pub(super) fn list(
        self: &Arc<Self>,
        req: ListSessionsRequest,
        responder: Responder<ListSessionsResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        #[cfg(feature = "store")]
        if let Some(store) = self.config.store.clone() {
            let shared = self.clone();
            return cx.spawn(async move {
                let listed = shared.list_kept(&store, &req).await;
                responder.respond_with_result(listed)
            });
        }
        // The sessions in memory are all this agent's principal's.
        let mut sessions: Vec<(std::time::SystemTime, SessionInfo)> = self
            .sessions
            .lock()
            .iter()
            .filter(|(_, s)| req.cwd.as_ref().is_none_or(|cwd| *cwd == s.cwd))
            .map(|(id, s)| {
                let info = SessionInfo::new(SessionId::new(id.clone()), s.cwd.clone())
                    .title(crate::message::title(&s.messages))
                    .updated_at(rfc3339(s.updated_at));
                (s.updated_at, info)
            })
            .collect();
        sessions.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        responder.respond(ListSessionsResponse::new(
            sessions.into_iter().map(|(_, info)| info).collect(),
        ))
    }

    /// The principal whose sessions this connection sees (`None`: everyone's).
    #[cfg(feature = "store")]
    fn owner_filter(&self) -> Option<&str> {
        self.config
            .principal
            .as_ref()
            .filter(|p| !p.is_operator())
            .map(|p| p.name())
    }

    /// One page of the sessions `store` keeps.
    #[cfg(feature = "store")]
    async fn list_kept(
        &self,
        store: &crate::store::RunStore,
        req: &ListSessionsRequest,
    ) -> Result<ListSessionsResponse, Error> {
        let cursor = req
            .cursor
            .as_deref()
            .map(str::parse::<crate::store::ThreadCursor>)
            .transpose()
            .map_err(|e| Error::invalid_params().data(json!({"cursor": e.to_string()})))?;
        let cwd = req.cwd.as_ref().map(|cwd| cwd.to_string_lossy());
        let query = crate::store::ThreadQuery::new(PAGE)
            .principal(self.owner_filter())
            .workspace(cwd.as_deref())
            .after(cursor.as_ref());
        let page = store.threads(&query).await.map_err(|error| {
            tracing::error!(%error, "the session store failed");
            Error::internal_error().data(json!({"reason": "the session store is unavailable"}))
        })?;
        let sessions = page
            .threads
            .into_iter()
            .map(|thread| {
                SessionInfo::new(
                    SessionId::new(thread.thread_id.to_string()),
                    thread.workspace,
                )
                .title(thread.title)
                .updated_at(rfc3339(thread.updated_at))
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
            let tools = match connect_mcp(&req.mcp_servers).await {
                Ok(tools) => tools,
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
                    .config_options(config_options(mode)),
            )?;
            notify(
                &cx,
                &req.session_id,
                SessionUpdate::AvailableCommandsUpdate(commands()),
            );
            Ok(())
        })
    }

    /// `session/delete`: the session and its history gone, its running turn cancelled first.
    pub(super) fn delete(
        self: &Arc<Self>,
        req: DeleteSessionRequest,
        responder: Responder<DeleteSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let removed = self.sessions.lock().remove(&*req.session_id.0);
        if let Some(turn) = removed.as_ref().and_then(|s| s.turn.as_ref()) {
            turn.cancel();
        }
        let shared = self.clone();
        cx.spawn(async move {
            let kept = shared.forget(&req.session_id).await;
            match kept {
                Ok(true) => {}
                Ok(false) if removed.is_some() => {}
                Ok(false) => return responder.respond_with_error(not_found(&req.session_id)),
                Err(error) => return responder.respond_with_error(error),
            }
            responder.respond(DeleteSessionResponse::new())
        })
    }

    pub(super) fn cancel(&self, session: &SessionId) {
        if let Some(turn) = self
            .sessions
            .lock()
            .get(&*session.0)
            .and_then(|s| s.turn.as_ref())
        {
            tracing::info!(%session, "cancel");
            turn.cancel();
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

        let cancel = CancellationToken::new();
        let (mut messages, state, mode, title, tools, cost) = {
            let mut sessions = self.sessions.lock();
            let session = match sessions.get_mut(&*req.session_id.0) {
                Some(session) if session.open => session,
                _ => return responder.respond_with_error(not_found(&req.session_id)),
            };
            if session.turn.is_some() {
                return responder.respond_with_error(Error::invalid_request().data(json!({
                    "reason": "a prompt is already running in this session",
                })));
            }
            session.turn = Some(cancel.clone());
            let title = !std::mem::replace(&mut session.titled, true);
            (
                session.messages.clone(),
                session.state.clone(),
                session.mode,
                title.then(|| session_title(&text)),
                session.tools.clone(),
                session.cost.clone(),
            )
        };
        if let Some(title) = title {
            notify(
                &cx,
                &req.session_id,
                SessionUpdate::SessionInfoUpdate(SessionInfoUpdate::new().title(title)),
            );
        }
        messages.push(Message::User {
            id: MessageId::new(),
            content: parts,
        });

        let notifier =
            Notifier::new(cx.clone(), req.session_id.clone()).outbox(self.outbox.as_ref());
        let mut run = RunContext::new(req.session_id.0.as_ref().into(), RunId::new());
        run.cancel = cancel.clone();
        run.principal.clone_from(&self.config.principal);
        run.sinks.insert(notifier.clone());
        run.extensions.insert(mode);
        run.extensions.insert(cost);
        if let Some(tools) = tools {
            run.extensions.insert(RunTools(tools));
        }
        let mut request = RunRequest::new(messages.clone());
        request.state = state;
        request.run = run;

        let shared = self.clone();
        let session = req.session_id;
        cx.spawn(async move {
            let result = shared
                .service
                .clone()
                .oneshot(request)
                .await
                .map_err(Into::into);
            let answer = shared.end_turn(&session, messages, result);
            // Kept before it is answered: an answered turn survives a restart.
            if let Err(error) = shared.persist(&session).await {
                tracing::error!(%session, ?error, "the turn could not be kept in the store");
            }
            // Nothing of this turn reaches the client after its answer.
            notifier.close();
            // The turn is over only now: a cancel that came before its answer (while it was kept,
            // say) answers `cancelled`, whatever the model or a tool made of it.
            if let Some(entry) = shared.sessions.lock().get_mut(&*session.0) {
                entry.turn = None;
            }
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

    /// Keeps what the turn produced and says how it ended.
    fn end_turn(
        &self,
        session: &SessionId,
        asked: Vec<Message>,
        result: Result<RunOutcome, BoxError>,
    ) -> Result<PromptResponse, Error> {
        let mut sessions = self.sessions.lock();
        let entry = sessions.get_mut(&*session.0);
        let answer = match result {
            Ok(outcome) => {
                if let Some(entry) = entry {
                    entry.messages = outcome.messages;
                    entry.state = outcome.state;
                    entry.updated_at = std::time::SystemTime::now();
                }
                Ok(AcpStopReason::from(outcome.stop))
            }
            Err(error) => {
                if let Some(entry) = entry {
                    entry.messages = asked;
                }
                match acp_answer(error.as_ref()) {
                    AcpAnswer::Stop(reason) => Ok(reason),
                    AcpAnswer::Error {
                        code,
                        message,
                        kind,
                    } => {
                        tracing::warn!(%error, "prompt failed");
                        let code = i32::try_from(code).unwrap_or(-32603);
                        Err(Error::new(code, message).data(json!({ "kind": kind })))
                    }
                }
            }
        };
        drop(sessions);
        answer.map(|reason| PromptResponse::new(stop_reason(reason)))
    }
}

/// How many sessions one `session/list` answer holds at most.
#[cfg(feature = "store")]
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
