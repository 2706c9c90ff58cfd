//! The ACP agent driven by the official SDK's client, in process (`Channel::duplex`).

use std::{num::NonZeroU32, time::Duration};

use agent_client_protocol::{
    Agent, Channel, Client, Error,
    schema::ProtocolVersion,
    v1::{ConnectionTo, Responder},
};
use agent_tower::{
    acp::{
        AcpAgent, AcpApprover, AcpLayer,
        schema::{
            AudioContent, AuthenticateRequest, CancelNotification, CloseSessionRequest,
            ContentBlock, ImageContent, InitializeRequest, InitializeResponse, LoadSessionRequest,
            NewSessionRequest, PermissionOptionKind, PromptCapabilities, PromptRequest,
            PromptResponse, RequestPermissionOutcome, RequestPermissionRequest,
            RequestPermissionResponse, ResourceLink, SelectedPermissionOutcome, SessionConfigKind,
            SessionConfigOptionValue, SessionId, SessionNotification, SessionUpdate,
            SetSessionConfigOptionRequest, SetSessionModeRequest, StopReason, TextContent,
            ToolCallStatus, ToolKind,
        },
    },
    agent::Agent as Loop,
    map_error::MapErrorLayer,
    model::{FinishReason, ModelErrorKind, ModelEvent},
    test_util::{MockItem, MockModel},
    tool::ToolRouter,
};
use tokio::sync::mpsc;
use tower::Layer;

type Asked = (
    RequestPermissionRequest,
    Responder<RequestPermissionResponse>,
);

/// The editor's side: the connection, and what the agent sent it.
struct Editor {
    cx: ConnectionTo<Agent>,
    updates: mpsc::UnboundedReceiver<SessionNotification>,
    asked: mpsc::UnboundedReceiver<Asked>,
}

/// A safety net, not a wait: a missing update fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(20);

impl Editor {
    async fn initialize(&self, version: ProtocolVersion) -> InitializeResponse {
        self.cx
            .send_request(InitializeRequest::new(version))
            .block_task()
            .await
            .expect("initialize")
    }

    async fn session(&mut self) -> SessionId {
        self.initialize(ProtocolVersion::V1).await;
        let session = self
            .cx
            .send_request(NewSessionRequest::new("/tmp"))
            .block_task()
            .await
            .expect("session/new")
            .session_id;
        let commands = self.update().await;
        assert!(matches!(
            commands,
            SessionUpdate::AvailableCommandsUpdate(_)
        ));
        session
    }

    /// A session lent the tools of the MCP server `node SCRIPT stdio`, under `name`.
    async fn session_lent(&mut self, name: &str, script: String) -> SessionId {
        use agent_tower::acp::schema::{McpServer, McpServerStdio};

        let server =
            McpServer::Stdio(McpServerStdio::new(name, "node").args(vec![script, "stdio".into()]));
        let session = self
            .cx
            .send_request(NewSessionRequest::new("/tmp").mcp_servers(vec![server]))
            .block_task()
            .await
            .expect("session/new")
            .session_id;
        self.update().await; // the commands
        session
    }

    fn prompt(
        &self,
        session: &SessionId,
        text: &str,
    ) -> agent_client_protocol::v1::SentRequest<PromptResponse> {
        self.cx.send_request(PromptRequest::new(
            session.clone(),
            vec![ContentBlock::Text(TextContent::new(text))],
        ))
    }

    async fn update(&mut self) -> SessionUpdate {
        tokio::time::timeout(PATIENCE, self.updates.recv())
            .await
            .expect("an update in time")
            .expect("the agent is connected")
            .update
    }

    async fn asked(&mut self) -> Asked {
        tokio::time::timeout(PATIENCE, self.asked.recv())
            .await
            .expect("a permission request in time")
            .expect("the agent is connected")
    }

    /// A prompt that asks for one permission, answered with `option`.
    async fn answered(
        &mut self,
        session: &SessionId,
        text: &str,
        option: &str,
    ) -> Result<PromptResponse, Error> {
        let reply = self.prompt(session, text);
        let (_, responder) = self.asked().await;
        choose(responder, option);
        reply.block_task().await
    }

    /// Every update received so far.
    fn received(&mut self) -> Vec<SessionUpdate> {
        let mut all = Vec::new();
        while let Ok(n) = self.updates.try_recv() {
            all.push(n.update);
        }
        all
    }

    /// Updates until (and with) the first one `stop` accepts.
    async fn until(&mut self, stop: impl Fn(&SessionUpdate) -> bool) -> Vec<SessionUpdate> {
        let mut seen = Vec::new();
        loop {
            let update = self.update().await;
            let done = stop(&update);
            seen.push(update);
            if done {
                return seen;
            }
        }
    }
}

fn choose(responder: Responder<RequestPermissionResponse>, option: &str) {
    responder
        .respond(RequestPermissionResponse::new(
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option.to_owned())),
        ))
        .expect("answer the permission request");
}

/// Runs `test` as an editor connected to `agent`.
async fn editor(agent: AcpAgent, test: impl AsyncFnOnce(Editor) -> Result<(), Error>) {
    let (agent_end, editor_end) = Channel::duplex();
    tokio::spawn(agent.serve(agent_end));
    let (updates_tx, updates) = mpsc::unbounded_channel();
    let (asked_tx, asked) = mpsc::unbounded_channel();
    Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                let _ = updates_tx.send(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |r: RequestPermissionRequest, responder, _cx| {
                let _ = asked_tx.send((r, responder));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(editor_end, async move |cx| {
            test(Editor { cx, updates, asked }).await
        })
        .await
        .expect("the editor's session ran");
}

fn demo() -> AcpAgent {
    agent_tower::demo::scripted()
        .max_turns(NonZeroU32::new(8).unwrap())
        .acp_agent()
}

fn text_of(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn message_ids(updates: &[SessionUpdate]) -> Vec<agent_tower::acp::schema::MessageId> {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(c) => c.message_id.clone(),
            _ => None,
        })
        .collect()
}

fn is_status(update: &SessionUpdate, status: ToolCallStatus) -> bool {
    matches!(update, SessionUpdate::ToolCallUpdate(u) if u.fields.status == Some(status))
}

#[tokio::test]
async fn initialize_negotiates_version_one_and_advertises_what_is_routed() {
    editor(demo(), async |e: Editor| {
        let answer = e.initialize(ProtocolVersion::V1).await;
        assert_eq!(answer.protocol_version, ProtocolVersion::V1);
        let caps = &answer.agent_capabilities;
        assert!(caps.load_session);
        assert!(caps.prompt_capabilities.image && caps.prompt_capabilities.embedded_context);
        assert!(caps.session_capabilities.close.is_some());
        // MCP over http with the `mcp` feature (stdio is implied); never SSE.
        assert_eq!(caps.mcp_capabilities.http, cfg!(feature = "mcp"));
        assert!(!caps.mcp_capabilities.sse);
        assert_eq!(answer.agent_info.expect("agent info").name, "agent-tower");
        // One way in, of the `agent` type (what a registry lists), that asks the user nothing.
        let methods = serde_json::to_value(&answer.auth_methods).unwrap();
        assert_eq!(methods.as_array().map(Vec::len), Some(1), "{methods}");
        assert_eq!(methods[0]["id"], "agent-tower", "{methods}");
        assert!(
            methods[0].get("type").is_none(),
            "the agent type is the default: {methods}"
        );
        let id = answer.auth_methods[0].id().clone();
        e.cx.send_request(AuthenticateRequest::new(id))
            .block_task()
            .await
            .expect("authenticated");
        let other =
            e.cx.send_request(AuthenticateRequest::new("a-key-the-user-types"))
                .block_task()
                .await
                .expect_err("not this agent's method");
        assert_eq!(
            other.code,
            agent_client_protocol::ErrorCode::INVALID_PARAMS,
            "{other:?}"
        );
        // A version the agent does not speak is answered with the one it does.
        let two: ProtocolVersion = serde_json::from_value(serde_json::json!(2)).unwrap();
        let newer = e.initialize(two).await;
        assert_eq!(newer.protocol_version, ProtocolVersion::V1);
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn a_prompt_streams_chunks_of_one_message_then_ends_the_turn() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        let answer = e.prompt(&session, "hello there").block_task().await?;
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        let updates = e.received();
        assert!(
            matches!(&updates[0], SessionUpdate::SessionInfoUpdate(info) if serde_json::to_value(info).unwrap()["title"] == "hello there"),
            "the first prompt titles the session: {updates:?}"
        );
        assert_eq!(text_of(&updates), "You said: hello there");
        let ids: std::collections::HashSet<_> = message_ids(&updates).into_iter().collect();
        assert_eq!(ids.len(), 1, "one message, one id");
        assert!(
            updates.iter().any(|u| matches!(u, SessionUpdate::UsageUpdate(usage) if usage.used > 0 && usage.size == 128_000)),
            "{updates:?}"
        );
        // Only the first prompt titles the session.
        e.prompt(&session, "again").block_task().await?;
        assert!(!e.received().iter().any(|u| matches!(u, SessionUpdate::SessionInfoUpdate(_))));
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn reasoning_is_sent_as_thoughts() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        e.prompt(&session, "think about it").block_task().await?;
        let updates = e.received();
        let thought = updates
            .iter()
            .position(|u| matches!(u, SessionUpdate::AgentThoughtChunk(_)))
            .expect("a thought");
        let text = updates
            .iter()
            .position(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .expect("an answer");
        assert!(thought < text);
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn an_allowed_tool_call_goes_pending_in_progress_completed() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        let reply = e.prompt(&session, r#"write_document {"document": "two words"}"#);
        let (asked, responder) = e.asked().await;
        let kinds: Vec<_> = asked.options.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::AllowAlways,
                PermissionOptionKind::RejectOnce,
                PermissionOptionKind::RejectAlways
            ],
            "the first option is the narrowest yes"
        );
        let announced = e.received();
        let call = announced
            .iter()
            .find_map(|u| match u {
                SessionUpdate::ToolCall(call) => Some(call.clone()),
                _ => None,
            })
            .expect("the call is announced before it is asked about");
        assert_eq!(call.tool_call_id, asked.tool_call.tool_call_id);
        assert_eq!(call.kind, ToolKind::Edit);
        assert_eq!(call.status, ToolCallStatus::Pending);
        assert_eq!(call.raw_input.as_ref().unwrap()["document"], "two words");
        assert!(
            !announced
                .iter()
                .any(|u| is_status(u, ToolCallStatus::InProgress)),
            "nothing runs before the answer"
        );
        choose(responder, "allow_once");
        assert_eq!(reply.block_task().await?.stop_reason, StopReason::EndTurn);
        let after = e.received();
        let running = after
            .iter()
            .position(|u| is_status(u, ToolCallStatus::InProgress))
            .expect("in progress");
        let done = after
            .iter()
            .position(|u| is_status(u, ToolCallStatus::Completed))
            .expect("completed");
        assert!(running < done);
        let SessionUpdate::ToolCallUpdate(completed) = &after[done] else {
            unreachable!()
        };
        assert_eq!(
            completed.fields.raw_output.as_ref().unwrap(),
            "saved 2 words"
        );
        assert!(text_of(&after).contains("saved 2 words"));
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn a_rejected_call_fails_and_the_model_reads_why() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        let reply = e.prompt(&session, r#"write_document {"document": "x"}"#);
        let (_, responder) = e.asked().await;
        choose(responder, "reject_once");
        assert_eq!(reply.block_task().await?.stop_reason, StopReason::EndTurn);
        let updates = e.received();
        assert!(updates.iter().any(|u| is_status(u, ToolCallStatus::Failed)));
        assert!(
            !updates
                .iter()
                .any(|u| is_status(u, ToolCallStatus::InProgress))
        );
        assert!(
            text_of(&updates).contains("declined"),
            "{}",
            text_of(&updates)
        );
        // Rejected once: asked again next time.
        e.answered(
            &session,
            r#"write_document {"document": "x"}"#,
            "allow_once",
        )
        .await?;
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn always_answers_are_remembered_per_session_and_tool() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        e.answered(
            &session,
            r#"write_document {"document": "x"}"#,
            "allow_always",
        )
        .await?;
        // Not asked again in this session…
        e.prompt(&session, r#"write_document {"document": "y"}"#)
            .block_task()
            .await?;
        assert!(e.asked.try_recv().is_err(), "allow_always is remembered");
        assert!(
            e.received()
                .iter()
                .any(|u| is_status(u, ToolCallStatus::Completed))
        );
        // …nor for another tool's answer; and "always reject" refuses without asking.
        let reply = e.prompt(&session, r#"remember {"key": "k", "value": 1}"#);
        let (asked, responder) = e.asked().await;
        assert!(
            asked
                .tool_call
                .fields
                .title
                .unwrap()
                .starts_with("remember")
        );
        choose(responder, "reject_always");
        reply.block_task().await?;
        e.prompt(&session, r#"remember {"key": "k", "value": 2}"#)
            .block_task()
            .await?;
        assert!(e.asked.try_recv().is_err(), "reject_always is remembered");
        // A new session starts with nothing remembered.
        e.received();
        let other =
            e.cx.send_request(NewSessionRequest::new("/tmp"))
                .block_task()
                .await?
                .session_id;
        let reply = e.prompt(&other, r#"write_document {"document": "z"}"#);
        let (asked, responder) = e.asked().await;
        assert_eq!(asked.session_id, other);
        choose(responder, "allow_once");
        reply.block_task().await?;
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn cancel_while_streaming_answers_cancelled_and_sends_nothing_after() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        let reply = e.prompt(&session, "answer slowly please");
        e.until(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .await;
        e.cx.send_notification(CancelNotification::new(session.clone()))?;
        assert_eq!(reply.block_task().await?.stop_reason, StopReason::Cancelled);
        e.received();
        // A round trip later, nothing more of the cancelled turn arrived.
        e.cx.send_request(NewSessionRequest::new("/tmp"))
            .block_task()
            .await?;
        let late: Vec<_> = e
            .received()
            .into_iter()
            .filter(|u| !matches!(u, SessionUpdate::AvailableCommandsUpdate(_)))
            .collect();
        assert!(late.is_empty(), "updates after the answer: {late:?}");
        // The session takes the next prompt.
        let again = e.prompt(&session, "hello").block_task().await?;
        assert_eq!(again.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn cancel_while_a_permission_is_pending_answers_cancelled() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        let reply = e.prompt(&session, r#"write_document {"document": "x"}"#);
        let (_, responder) = e.asked().await;
        e.cx.send_notification(CancelNotification::new(session.clone()))?;
        assert_eq!(reply.block_task().await?.stop_reason, StopReason::Cancelled);
        let updates = e.received();
        assert!(
            updates.iter().any(|u| is_status(u, ToolCallStatus::Failed)),
            "the announced call reaches a final status: {updates:?}"
        );
        // The client answers the pending request `cancelled`, as the protocol asks; late and
        // harmless.
        let _ = responder.respond(RequestPermissionResponse::new(
            RequestPermissionOutcome::Cancelled,
        ));
        let reply = e.prompt(&session, r#"write_document {"document": "x"}"#);
        let (_, responder) = e.asked().await;
        choose(responder, "allow_once");
        assert_eq!(reply.block_task().await?.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn a_cancelled_permission_outcome_cancels_the_turn() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        let reply = e.prompt(&session, r#"write_document {"document": "x"}"#);
        let (_, responder) = e.asked().await;
        responder.respond(RequestPermissionResponse::new(
            RequestPermissionOutcome::Cancelled,
        ))?;
        assert_eq!(reply.block_task().await?.stop_reason, StopReason::Cancelled);
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn modes_and_the_mode_option_stay_in_sync() {
    editor(demo(), async |mut e: Editor| {
        e.initialize(ProtocolVersion::V1).await;
        let created = e
            .cx
            .send_request(NewSessionRequest::new("/tmp"))
            .block_task()
            .await?;
        let session = created.session_id;
        let modes = created.modes.expect("modes");
        assert_eq!(&*modes.current_mode_id.0, "ask");
        let options = created.config_options.expect("config options");
        let SessionConfigKind::Select(select) = &options[0].kind else {
            panic!("a select")
        };
        assert_eq!(&*select.current_value.0, "ask");
        e.received();

        e.cx.send_request(SetSessionModeRequest::new(session.clone(), "read-only"))
            .block_task()
            .await?;
        let updates = e.received();
        assert!(matches!(&updates[0], SessionUpdate::CurrentModeUpdate(m) if &*m.current_mode_id.0 == "read-only"));
        assert!(matches!(&updates[1], SessionUpdate::ConfigOptionUpdate(_)));
        // Read-only refuses writing tools without asking.
        e.prompt(&session, r#"write_document {"document": "x"}"#)
            .block_task()
            .await?;
        assert!(e.asked.try_recv().is_err());
        assert!(e.received().iter().any(|u| is_status(u, ToolCallStatus::Failed)));

        // The config option sets the same mode.
        let answer = e
            .cx
            .send_request(SetSessionConfigOptionRequest::new(
                session.clone(),
                "mode",
                SessionConfigOptionValue::value_id("auto"),
            ))
            .block_task()
            .await?;
        let SessionConfigKind::Select(select) = &answer.config_options[0].kind else {
            panic!("a select")
        };
        assert_eq!(&*select.current_value.0, "auto");
        assert!(matches!(&e.update().await, SessionUpdate::CurrentModeUpdate(m) if &*m.current_mode_id.0 == "auto"));
        // Auto runs writing tools without asking.
        e.prompt(&session, r#"write_document {"document": "x"}"#)
            .block_task()
            .await?;
        assert!(e.asked.try_recv().is_err());
        assert!(e.received().iter().any(|u| is_status(u, ToolCallStatus::Completed)));

        // The slash command too, and a bad mode is refused.
        let answer = e.prompt(&session, "/mode ask").block_task().await?;
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        assert!(e.received().iter().any(|u| matches!(u, SessionUpdate::CurrentModeUpdate(m) if &*m.current_mode_id.0 == "ask")));
        let bad = e
            .cx
            .send_request(SetSessionModeRequest::new(session.clone(), "yolo"))
            .block_task()
            .await
            .expect_err("unknown mode");
        assert_eq!(bad.code, agent_client_protocol::ErrorCode::INVALID_PARAMS);
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn load_replays_the_conversation_before_answering() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        e.answered(
            &session,
            r#"write_document {"document": "a b c"}"#,
            "allow_once",
        )
        .await?;
        let live = e.received();
        e.cx.send_request(CloseSessionRequest::new(session.clone()))
            .block_task()
            .await?;
        let prompt = e
            .prompt(&session, "hello")
            .block_task()
            .await
            .expect_err("a closed session takes no prompt");
        assert_eq!(
            prompt.code,
            agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND
        );

        e.cx.send_request(LoadSessionRequest::new(session.clone(), "/tmp"))
            .block_task()
            .await?;
        let replayed = e.received();
        assert!(matches!(&replayed[0], SessionUpdate::UserMessageChunk(_)));
        assert!(
            matches!(
                replayed.last(),
                Some(SessionUpdate::AvailableCommandsUpdate(_))
            ),
            "everything the load sends comes before its answer"
        );
        let live_call = live.iter().find_map(|u| match u {
            SessionUpdate::ToolCall(c) => Some(c.tool_call_id.clone()),
            _ => None,
        });
        let replayed_call = replayed.iter().find_map(|u| match u {
            SessionUpdate::ToolCall(c) => Some(c.tool_call_id.clone()),
            _ => None,
        });
        assert_eq!(live_call, replayed_call, "the call keeps its id");
        assert!(
            replayed
                .iter()
                .any(|u| is_status(u, ToolCallStatus::Completed))
        );
        assert_eq!(
            text_of(&replayed),
            text_of(&live),
            "the same answer, the same words"
        );
        let (live_ids, replayed_ids) = (message_ids(&live), message_ids(&replayed));
        assert_eq!(
            live_ids.last(),
            replayed_ids.last(),
            "messages keep their ids"
        );

        // The loaded session continues the conversation.
        e.prompt(&session, "and now?").block_task().await?;
        let unknown =
            e.cx.send_request(LoadSessionRequest::new("nope", "/tmp"))
                .block_task()
                .await
                .expect_err("unknown session");
        assert_eq!(
            unknown.code,
            agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND
        );
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn close_cancels_the_running_turn() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        let reply = e.prompt(&session, "slowly, please");
        e.until(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .await;
        e.cx.send_request(CloseSessionRequest::new(session.clone()))
            .block_task()
            .await?;
        assert_eq!(reply.block_task().await?.stop_reason, StopReason::Cancelled);
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn a_plan_tool_sends_the_complete_plan() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        e.prompt(
            &session,
            r#"plan {"entries": [{"content": "read", "status": "completed"}, {"content": "write", "status": "in_progress"}]}"#,
        )
        .block_task()
        .await?;
        let plan = e
            .received()
            .into_iter()
            .find_map(|u| match u {
                SessionUpdate::Plan(plan) => Some(plan),
                _ => None,
            })
            .expect("a plan");
        let contents: Vec<_> = plan.entries.iter().map(|e| e.content.as_str()).collect();
        assert_eq!(contents, ["read", "write"]);
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn prompt_content_reaches_the_model_and_capabilities_are_respected() {
    editor(demo(), async |mut e: Editor| {
        let session = e.session().await;
        let answer =
            e.cx.send_request(PromptRequest::new(
                session.clone(),
                vec![
                    ContentBlock::Text(TextContent::new("look at")),
                    ContentBlock::Image(ImageContent::new("aGVsbG8=", "image/png")),
                    ContentBlock::ResourceLink(ResourceLink::new("main.rs", "file:///src/main.rs")),
                ],
            ))
            .block_task()
            .await?;
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        let said = text_of(&e.received());
        assert!(said.contains("image/png"), "{said}");
        assert!(said.contains("file:///src/main.rs"), "{said}");
        Ok(())
    })
    .await;

    let text_only = demo().prompt_capabilities(PromptCapabilities::new());
    editor(text_only, async |mut e: Editor| {
        let session = e.session().await;
        let refused =
            e.cx.send_request(PromptRequest::new(
                session.clone(),
                vec![ContentBlock::Audio(AudioContent::new("aGk=", "audio/wav"))],
            ))
            .block_task()
            .await
            .expect_err("audio was not advertised");
        assert_eq!(
            refused.code,
            agent_client_protocol::ErrorCode::INVALID_PARAMS
        );
        Ok(())
    })
    .await;
}

/// An agent around a mock model: each reply is one turn of the model.
fn mocked(replies: Vec<Vec<MockItem>>, max_turns: u32) -> AcpAgent {
    let model = AcpLayer::new().layer(MapErrorLayer::new().layer(MockModel::new(replies)));
    let tools = AcpLayer::new().layer(ToolRouter::new());
    let agent = MapErrorLayer::new()
        .layer(Loop::new(model, tools).max_turns(NonZeroU32::new(max_turns).unwrap()));
    AcpAgent::new(agent).approver(AcpApprover::new())
}

#[tokio::test]
async fn stop_reasons_come_from_the_outcome_and_the_error_class() {
    let finish = |reason| MockItem::Event(ModelEvent::Finish(reason));
    let cases = [
        (
            vec![MockItem::text("cut"), finish(FinishReason::Length)],
            StopReason::MaxTokens,
        ),
        (
            vec![finish(FinishReason::ContentFilter)],
            StopReason::Refusal,
        ),
        (
            vec![MockItem::error(ModelErrorKind::ContextLength, "too long")],
            StopReason::MaxTokens,
        ),
        (
            vec![MockItem::error(ModelErrorKind::Refusal, "no")],
            StopReason::Refusal,
        ),
    ];
    for (reply, expected) in cases {
        editor(mocked(vec![reply], 4), async |mut e: Editor| {
            let session = e.session().await;
            let answer = e.prompt(&session, "go").block_task().await?;
            assert_eq!(answer.stop_reason, expected);
            Ok(())
        })
        .await;
    }

    // The turn budget.
    let mut call = Vec::from(MockItem::tool_call("c1", "missing", "{}"));
    call.push(MockItem::tool_calls());
    editor(mocked(vec![call], 1), async |mut e: Editor| {
        let session = e.session().await;
        let answer = e.prompt(&session, "go").block_task().await?;
        assert_eq!(answer.stop_reason, StopReason::MaxTurnRequests);
        Ok(())
    })
    .await;

    // Other failures are JSON-RPC errors with the error's kind.
    editor(
        mocked(
            vec![vec![MockItem::error(ModelErrorKind::Transport, "reset")]],
            4,
        ),
        async |mut e: Editor| {
            let session = e.session().await;
            let error = e
                .prompt(&session, "go")
                .block_task()
                .await
                .expect_err("a transport failure");
            assert_eq!(error.code, agent_client_protocol::ErrorCode::INTERNAL_ERROR);
            assert_eq!(error.data.unwrap()["kind"], "transport");
            Ok(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_dropped_tool_call_still_reaches_a_final_status() {
    use agent_tower::{tool::ToolCall, transport::Recording};
    use tower::ServiceExt;

    let editor = Recording::new();
    let never = tower::service_fn(|_: ToolCall| {
        std::future::pending::<Result<agent_tower::tool::ToolOutput, std::convert::Infallible>>()
    });
    let tool = AcpLayer::new().transport(editor.clone()).layer(never);
    let call = tool.oneshot(ToolCall::new(
        "shell",
        serde_json::json!({"command": "sleep"}),
    ));
    let mut call = tokio_test::task::spawn(call);
    assert!(call.poll().is_pending());
    drop(call);
    let updates = editor.events();
    assert!(matches!(&updates[0], SessionUpdate::ToolCall(c) if c.kind == ToolKind::Execute));
    assert!(is_status(&updates[1], ToolCallStatus::InProgress));
    assert!(
        is_status(&updates[2], ToolCallStatus::Failed),
        "{updates:?}"
    );
    assert_eq!(updates.len(), 3);
}

use crate::support;

/// The MCP servers an editor gives in `session/new` lend their tools to that session only.
#[cfg(feature = "mcp")]
#[tokio::test]
async fn a_sessions_mcp_servers_lend_it_their_tools() {
    let everything = support::mcp_everything().await;
    let agent = demo().default_mode(agent_tower::permission::Mode::Agentic);
    editor(agent, async move |mut editor| {
        let init = editor.initialize(ProtocolVersion::V1).await;
        assert!(
            init.agent_capabilities.mcp_capabilities.http,
            "http is advertised"
        );
        let with = editor.session_lent("every thing", everything).await;
        let ask = r#"every_thing__echo {"message": "from the editor"}"#;
        let answer = editor.prompt(&with, ask).block_task().await?;
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        let updates = editor.received();
        let completed = updates.iter().find_map(|u| match u {
            SessionUpdate::ToolCallUpdate(update)
                if update.fields.status == Some(ToolCallStatus::Completed) =>
            {
                Some(format!("{:?}", update.fields.content))
            }
            _ => None,
        });
        let completed = completed.expect("the MCP tool ran");
        assert!(completed.contains("from the editor"), "{completed}");

        // Another session, without the server: no such tool.
        let without = editor
            .cx
            .send_request(NewSessionRequest::new("/tmp"))
            .block_task()
            .await?
            .session_id;
        editor.update().await;
        editor.prompt(&without, ask).block_task().await?;
        let updates = editor.received();
        assert!(
            !updates
                .iter()
                .any(|u| matches!(u, SessionUpdate::ToolCall(_))),
            "{updates:?}"
        );
        Ok(())
    })
    .await;
}

/// A tool an editor's MCP server lends a session is what its server says: `lookup`, marked
/// read-only, runs in the `ask` mode without asking; `write_word`, unannotated (MCP then assumes it
/// destructive), is asked about and shown as an edit, so that the editor shows an edit.
#[tokio::test]
async fn a_lent_mcp_tool_is_shown_and_asked_about_as_what_its_server_says() {
    let modern = support::mcp_modern().await;
    editor(demo(), async move |mut editor| {
        editor.initialize(ProtocolVersion::V1).await;
        let session = editor.session_lent("modern", modern).await;
        let lookup = editor.prompt(&session, r#"modern__lookup {"word": "tower"}"#);
        let found = tokio::time::timeout(PATIENCE, lookup.block_task())
            .await
            .expect("a read-only tool runs without asking")?;
        assert_eq!(found.stop_reason, StopReason::EndTurn);
        assert!(format!("{:?}", editor.received()).contains("tower: found"));

        let write = editor.prompt(&session, r#"modern__write_word {"word": "tower"}"#);
        let (_, responder) = editor.asked().await;
        let updates = editor.received();
        let call = updates
            .iter()
            .find_map(|u| match u {
                SessionUpdate::ToolCall(call) => Some(call),
                _ => None,
            })
            .expect("the call is announced before it is asked about");
        assert_eq!(call.kind, ToolKind::Edit, "{call:?}");
        choose(responder, "allow_once");
        assert_eq!(write.block_task().await?.stop_reason, StopReason::EndTurn);
        assert!(format!("{:?}", editor.received()).contains("tower: written"));
        Ok(())
    })
    .await;
}

/// The agent's ends of an in-memory pipe of `capacity` bytes (for `serve_io`), and the editor's.
type AgentEnds = (
    tokio::io::ReadHalf<tokio::io::DuplexStream>,
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
);
type EditorEnds = (
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
    tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
);

fn pipe(capacity: usize) -> (AgentEnds, EditorEnds) {
    let (agent_end, editor_end) = tokio::io::duplex(capacity);
    let (editor_reads, editor_writes) = tokio::io::split(editor_end);
    (
        tokio::io::split(agent_end),
        (editor_writes, tokio::io::BufReader::new(editor_reads)),
    )
}

/// The next line the agent wrote, as JSON.
async fn next_line(
    reader: &mut tokio::io::BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
) -> serde_json::Value {
    use tokio::io::AsyncBufReadExt;
    let mut line = String::new();
    tokio::time::timeout(PATIENCE, reader.read_line(&mut line))
        .await
        .expect("the agent answers")
        .unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[tokio::test]
async fn bad_lines_are_answered_and_the_agent_goes_on() {
    use tokio::io::AsyncWriteExt;
    let ((reads, writes), (mut to_agent, mut from_agent)) = pipe(64 * 1024);
    tokio::spawn(demo().serve_io(reads, writes));
    to_agent.write_all(b"\xff\xfe not UTF-8\n").await.unwrap();
    let answer = next_line(&mut from_agent).await;
    assert_eq!(answer["id"], serde_json::Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], -32700, "{answer}");

    for (line, id) in [
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"session/new","params":"x"}"#,
            json_id(7),
        ),
        (
            r#"{"id":"eight","method":"initialize","params":{"protocolVersion":1}}"#,
            json_id("eight"),
        ),
    ] {
        to_agent
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let answer = next_line(&mut from_agent).await;
        assert_eq!(answer["id"], id, "answered with the request's id: {answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
    }

    to_agent
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .await
        .unwrap();
    let answer = next_line(&mut from_agent).await;
    assert_eq!(answer["id"], 9, "{answer}");
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
}

fn json_id(id: impl Into<serde_json::Value>) -> serde_json::Value {
    id.into()
}

/// A service that says when its call ended.
#[derive(Clone)]
struct Watched<S> {
    inner: S,
    ended: mpsc::UnboundedSender<()>,
}

impl<S> tower::Service<agent_tower::run::RunRequest> for Watched<S>
where
    S: tower::Service<agent_tower::run::RunRequest> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures_util::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: agent_tower::run::RunRequest) -> Self::Future {
        let call = self.inner.call(request);
        let ended = self.ended.clone();
        Box::pin(async move {
            let result = call.await;
            let _ = ended.send(());
            result
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_client_that_stops_reading_holds_the_turn_back() {
    use tokio::io::AsyncWriteExt;
    const CHUNKS: usize = 50_000;
    let model = AcpLayer::new().layer(
        MapErrorLayer::new().layer(MockModel::new([(0..CHUNKS)
            .map(|i| MockItem::Text(format!("chunk {i} of a long answer ")))
            .collect::<Vec<_>>()])),
    );
    let tools = AcpLayer::new().layer(ToolRouter::new());
    let (ended_tx, mut ended) = mpsc::unbounded_channel();
    let agent = Watched {
        inner: MapErrorLayer::new().layer(Loop::new(model, tools)),
        ended: ended_tx,
    };
    let ((reads, writes), (mut to_agent, mut from_agent)) = pipe(64 * 1024);
    tokio::spawn(AcpAgent::new(agent).serve_io(reads, writes));
    let mut send = async |line: serde_json::Value| {
        to_agent
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    };
    send(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})).await;
    assert_eq!(next_line(&mut from_agent).await["id"], 1);
    send(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})).await;
    let session = loop {
        let line = next_line(&mut from_agent).await;
        if line["id"] == 2 {
            break line["result"]["sessionId"].clone();
        }
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}}),
    )
    .await;

    // Nothing is read: once every task waits (the clock is paused, so this returns only then),
    // the turn must be waiting for the client rather than finished into a queue.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(
        ended.try_recv().is_err(),
        "the turn ran to its end while the client read nothing"
    );

    let mut chunks = 0;
    let answer = loop {
        let line = next_line(&mut from_agent).await;
        if line["id"] == 3 {
            break line;
        }
        if line["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            chunks += 1;
        }
    };
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(chunks, CHUNKS, "every chunk arrives, in order, once read");
    assert!(ended.try_recv().is_ok());
}

/// A SQLite store for `test`'s sessions, in a directory of its own (removed by the test).
#[cfg(feature = "store")]
async fn session_store(test: &str) -> (std::path::PathBuf, agent_tower::store::RunStore) {
    let dir = std::env::temp_dir().join(format!("agent-tower-acp-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("sessions.db").display());
    let store = agent_tower::store::RunStore::open(&url).await.unwrap();
    (dir, store)
}

/// The demo agent on `store`, for the principal `name`.
#[cfg(feature = "store")]
fn demo_as(store: &agent_tower::store::RunStore, name: &str) -> AcpAgent {
    demo()
        .engine(|runs| runs.log(store.clone()))
        .principal(agent_tower::context::Principal::user(name).unwrap())
}

/// Sessions kept in a store shared by several connections belong to their connection's
/// principal: another principal's `session/load` finds nothing, as for a session nobody kept.
#[cfg(feature = "store")]
#[tokio::test]
async fn a_kept_session_is_unknown_to_another_principal() {
    let (dir, store) = session_store("owner").await;
    let as_user = |name: &str| demo_as(&store, name);
    let (made, mut session) = tokio::sync::oneshot::channel();
    editor(as_user("alice"), async move |mut e: Editor| {
        let session = e.session().await;
        e.prompt(&session, "hello").block_task().await?;
        let _ = made.send(session);
        Ok(())
    })
    .await;
    let session = session.try_recv().expect("alice's session");

    let load = |session: SessionId| {
        async move |e: Editor| -> Result<(), Error> {
            e.initialize(ProtocolVersion::V1).await;
            e.cx.send_request(LoadSessionRequest::new(session, "/tmp"))
                .block_task()
                .await
                .map(drop)
        }
    };
    let (refused, mut bob_saw) = tokio::sync::oneshot::channel();
    let attempt = load(session.clone());
    editor(as_user("bob"), async move |e: Editor| {
        let _ = refused.send(attempt(e).await.map_err(|e| e.code));
        Ok(())
    })
    .await;
    assert_eq!(
        bob_saw.try_recv().unwrap(),
        Err(agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND)
    );
    editor(as_user("alice"), load(session)).await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_sub_agent_asks_the_editor_and_its_answer_is_the_calls_content() {
    use agent_tower::{
        permission::{Action, Policy},
        stack::Stack,
        subagent::AgentTool,
        tool::{ToolCall, ToolOutput, ToolSpec},
    };
    // The helper deletes a note (asked about), then says so; the lead delegates to it.
    let approver = AcpApprover::new();
    let delete = tower::service_fn(|_: ToolCall| async {
        Ok::<_, std::convert::Infallible>(ToolOutput::text("deleted"))
    });
    let helper = Stack::new(
        MockModel::new([
            MockItem::turn_calling("h1", "delete_note", r#"{"id": 7}"#),
            vec![MockItem::text("Note 7 is deleted."), MockItem::stop()],
        ]),
        ToolRouter::new().route(ToolSpec::new("delete_note", "Deletes a note."), delete),
    )
    .policy(Policy::new().rule("delete_note", Action::Ask))
    .approver(approver.clone())
    .build();
    let lead = Stack::new(
        MockModel::new([
            MockItem::turn_calling("l1", "helper", r#"{"task": "Delete note 7."}"#),
            vec![MockItem::text("Done."), MockItem::stop()],
        ]),
        ToolRouter::new().tool(AgentTool::new("helper", "Helps with notes.", helper)),
    )
    .approver(approver.clone())
    .build();
    let agent = AcpAgent::new(lead).approver(approver);
    editor(agent, async |mut e: Editor| {
        let session = e.session().await;
        let reply = e.prompt(&session, "Please delete note 7.");
        // The sub-agent's question reaches the editor of the parent's session.
        let (asked, responder) = e.asked().await;
        assert_eq!(asked.session_id, session);
        assert_eq!(asked.tool_call.tool_call_id.to_string(), "h1");
        choose(responder, "allow_once");
        let done = reply.block_task().await?;
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        let updates = e.received();
        let nested = updates.iter().any(|u| match u {
            SessionUpdate::ToolCallUpdate(update) => {
                update.tool_call_id.to_string() == "l1"
                    && update.fields.content.as_ref().is_some_and(|content| {
                        format!("{content:?}").contains("Note 7 is deleted.")
                    })
            }
            _ => false,
        });
        assert!(
            nested,
            "the helper's answer is the call's content: {updates:#?}"
        );
        assert!(text_of(&updates).contains("Done."));
        Ok(())
    })
    .await;
}

/// An editor's history: sessions kept in a store are listed (newest first, by directory, the
/// principal's own), resumed without their history sent, and deleted, from later connections.
#[cfg(feature = "store")]
#[tokio::test]
async fn kept_sessions_are_listed_resumed_and_deleted_by_later_connections() {
    use agent_client_protocol::v1::schema::{
        DeleteSessionRequest, ListSessionsRequest, ResumeSessionRequest,
    };
    let (dir, store) = session_store("list").await;
    let as_user = |name: &str| demo_as(&store, name);
    let work = |cwd: &str, tasks: &'static [&'static str]| {
        let cwd = cwd.to_owned();
        async move |e: Editor| -> Result<(), Error> {
            let capabilities = e.initialize(ProtocolVersion::V1).await.agent_capabilities;
            let sessions = capabilities.session_capabilities;
            assert!(sessions.list.is_some() && sessions.resume.is_some());
            assert!(sessions.delete.is_some() && sessions.close.is_some());
            for task in tasks {
                let session =
                    e.cx.send_request(NewSessionRequest::new(cwd.as_str()))
                        .block_task()
                        .await?
                        .session_id;
                e.prompt(&session, task).block_task().await?;
            }
            Ok(())
        }
    };
    editor(as_user("alice"), work("/work/a", &["first task"])).await;
    editor(as_user("alice"), work("/work/b", &["second task"])).await;
    editor(as_user("alice"), work("/work/a", &["third task"])).await;
    editor(as_user("bob"), work("/work/a", &["bob's task"])).await;

    let (found, mut listed) = tokio::sync::oneshot::channel();
    editor(as_user("alice"), async move |mut e: Editor| {
        e.initialize(ProtocolVersion::V1).await;
        let in_a =
            e.cx.send_request(ListSessionsRequest::new().cwd("/work/a"))
                .block_task()
                .await?;
        let titles: Vec<_> = in_a.sessions.iter().map(|s| s.title.clone()).collect();
        assert_eq!(
            titles,
            [Some("third task".to_owned()), Some("first task".to_owned())],
            "hers, in that directory, newest first"
        );
        assert!(in_a.sessions.iter().all(|s| s.updated_at.is_some()));
        assert!(in_a.next_cursor.is_none());
        let all =
            e.cx.send_request(ListSessionsRequest::new())
                .block_task()
                .await?;
        assert_eq!(all.sessions.len(), 3, "every directory, none of bob's");
        let first = in_a.sessions[1].session_id.clone();
        let second = all
            .sessions
            .iter()
            .find(|s| s.title.as_deref() == Some("second task"))
            .unwrap()
            .session_id
            .clone();

        // Resumed: nothing of its history is sent, and it goes on.
        e.cx.send_request(ResumeSessionRequest::new(first.clone(), "/work/a"))
            .block_task()
            .await?;
        let sent = e.received();
        assert!(
            !sent
                .iter()
                .any(|u| matches!(u, SessionUpdate::UserMessageChunk(_))),
            "no history replayed: {sent:#?}"
        );
        e.prompt(&first, "and then?").block_task().await?;

        // Deleted: gone from the list, and nothing to load.
        e.cx.send_request(DeleteSessionRequest::new(second.clone()))
            .block_task()
            .await?;
        let left =
            e.cx.send_request(ListSessionsRequest::new())
                .block_task()
                .await?;
        assert_eq!(left.sessions.len(), 2);
        let load =
            e.cx.send_request(LoadSessionRequest::new(second.clone(), "/work/b"))
                .block_task()
                .await;
        assert_eq!(
            load.map(drop).map_err(|e| e.code),
            Err(agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND)
        );
        // Deleted again, or never made: deleted quietly, as the protocol asks.
        for gone in [second.clone(), SessionId::new("never-made")] {
            e.cx.send_request(DeleteSessionRequest::new(gone))
                .block_task()
                .await?;
        }
        let _ = found.send(first);
        Ok(())
    })
    .await;
    let first = listed.try_recv().expect("the resumed session");
    let kept =
        agent_tower::runs::RunLog::thread(&store, &agent_tower::id::ThreadId::from(&*first.0))
            .await
            .unwrap()
            .unwrap();
    let prompts: Vec<String> = kept
        .messages
        .iter()
        .filter(|m| matches!(m, agent_tower::message::Message::User { .. }))
        .map(agent_tower::message::Message::text)
        .collect();
    assert_eq!(
        prompts,
        ["first task", "and then?"],
        "one conversation, continued"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A server (another instance) on the store at `url`, listening on a free port: its base URL.
/// Its lease is short: on SQLite, it reads what other instances wrote at its heartbeats.
#[cfg(all(feature = "store", feature = "server"))]
async fn web_instance(url: &str) -> String {
    use agent_tower::{runs::Runs, server::AguiServer, store::RunStore};
    let store = RunStore::open(url).await.unwrap();
    let agent = agent_tower::demo::scripted().build();
    let runs = Runs::new(agent)
        .log(store)
        .lease(Duration::from_millis(300));
    let router = AguiServer::with_runs(runs).into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}

/// The text of a log's `TEXT_MESSAGE_CONTENT` events, in order.
#[cfg(all(feature = "store", feature = "server"))]
fn logged_text(events: &[(String, serde_json::Value)]) -> String {
    events
        .iter()
        .filter(|(_, e)| e["type"] == "TEXT_MESSAGE_CONTENT")
        .filter_map(|(_, e)| e["delta"].as_str())
        .collect()
}

/// An editor's turn is a run in the log while it runs: a server on the same store follows it
/// live and cancels it, and the editor's prompt is answered `cancelled`.
#[cfg(all(feature = "store", feature = "server"))]
#[tokio::test]
async fn an_editors_turn_is_a_run_that_a_server_on_its_store_follows_and_cancels() {
    use agent_tower::{id::ThreadId, runs::RunLog, store::RunStore};
    use futures_util::StreamExt;

    let url = support::stores::sqlite("acp-turn-run");
    let store = RunStore::open(&url).await.unwrap();
    // A short lease: the instance driving the turn hears of a cancel asked elsewhere at its next
    // heartbeat, a third of it.
    let agent = demo().engine(|runs| runs.log(store.clone()).lease(Duration::from_millis(300)));
    let web = web_instance(&url).await;
    let http = reqwest::Client::new();
    editor(agent, async |mut e: Editor| {
        let session = e.session().await;
        let reply = e.prompt(&session, "slowly, please");
        let mut seen = e
            .until(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .await;
        let thread = store
            .thread(&ThreadId::from(&*session.0))
            .await
            .unwrap()
            .expect("the session is a thread of the log");
        let [run] = &thread.runs[..] else {
            panic!("one run: {:?}", thread.runs)
        };
        assert_eq!(run.status, agent_tower::runs::RunStatus::Running);

        // Followed live from the other instance, then cancelled there.
        let follow = http
            .get(format!("{web}/runs/{}/events", run.run_id))
            .send()
            .await
            .unwrap();
        assert_eq!(follow.status(), 200);
        let mut body = follow.bytes_stream();
        let mut text = String::new();
        while !support::frames::frames(&text)
            .iter()
            .any(|(_, e)| e["type"] == "TEXT_MESSAGE_CONTENT")
        {
            text.push_str(std::str::from_utf8(&body.next().await.unwrap().unwrap()).unwrap());
        }
        let asked = http
            .post(format!("{web}/runs/{}/cancel", run.run_id))
            .send()
            .await
            .unwrap();
        assert_eq!(
            asked.status(),
            202,
            "asked of the instance that does not drive it"
        );
        assert_eq!(reply.block_task().await?.stop_reason, StopReason::Cancelled);
        while let Some(chunk) = body.next().await {
            text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }

        let events = support::frames::frames(&text);
        let (_, first) = &events[0];
        assert_eq!(first["type"], "RUN_STARTED");
        assert_eq!(first["threadId"], session.0.as_ref());
        let asked = &first["input"]["messages"];
        assert_eq!(
            asked[asked.as_array().unwrap().len() - 1]["content"],
            "slowly, please"
        );
        let (_, last) = events.last().unwrap();
        assert_eq!(
            (last["type"].as_str(), last["outcome"]["type"].as_str()),
            (Some("RUN_FINISHED"), Some("cancelled")),
            "{last}"
        );
        // The log and the editor tell the same words.
        seen.extend(e.received());
        let said = text_of(&seen);
        let logged = logged_text(&events);
        assert!(
            !logged.is_empty() && logged.len() < 200 * 6,
            "cut short: {logged}"
        );
        assert_eq!(said, logged, "the editor's words and the log's");
        let ended = store.run(&run.run_id).await.unwrap().unwrap();
        assert_eq!(ended.status, agent_tower::runs::RunStatus::Cancelled);
        Ok(())
    })
    .await;
}

/// Limits of the principal apply to an editor's turns as to web runs: past one, the prompt is
/// answered with an error that names it.
#[cfg(feature = "store")]
#[tokio::test]
async fn an_editors_turn_past_a_limit_of_its_principal_is_refused() {
    use agent_tower::runs::PrincipalLimits;

    // Runs of the minute: the second is refused. The bytes of the day: the turn that crossed
    // them is counted at its end, the next refused.
    let limits = [
        (PrincipalLimits::new().runs_per_minute(1), "rate_limited"),
        (
            PrincipalLimits::new().log_bytes_per_day(1),
            "quota_exceeded",
        ),
    ];
    for (limits, code) in limits {
        let ann = agent_tower::context::Principal::user("ann").unwrap();
        let agent = demo()
            .engine(|runs| runs.per_principal(limits))
            .principal(ann);
        editor(agent, async |mut e: Editor| {
            let session = e.session().await;
            let first = e.prompt(&session, "hello").block_task().await?;
            assert_eq!(first.stop_reason, StopReason::EndTurn);
            let refused = e
                .prompt(&session, "hello again")
                .block_task()
                .await
                .expect_err("past the limit");
            assert_eq!(refused.data.unwrap()["kind"], code);
            Ok(())
        })
        .await;
    }
}

/// One thread, two doors: a thread begun on the web is loaded in the editor with its history and
/// continued there; a session begun in the editor is opened and continued by the official AG-UI
/// client.
#[cfg(all(feature = "store", feature = "server"))]
#[tokio::test]
async fn a_thread_goes_from_the_web_to_the_editor_and_back() {
    use agent_tower::{id::ThreadId, runs::RunLog, store::RunStore};

    let url = support::stores::sqlite("acp-two-doors");
    let store = RunStore::open(&url).await.unwrap();
    let web = web_instance(&url).await;
    let http = reqwest::Client::new();
    let run = |thread: &str, messages: serde_json::Value| {
        let body = serde_json::json!({
            "threadId": thread, "runId": format!("r-{}", uuid::Uuid::now_v7()),
            "messages": messages,
        });
        let request = http.post(&web).json(&body);
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            support::frames::frames(&response.text().await.unwrap())
        }
    };
    let web_thread = format!("t-{}", uuid::Uuid::now_v7());
    run(
        &web_thread,
        serde_json::json!([{"id": "u1", "role": "user", "content": "hello from the web"}]),
    )
    .await;

    let agent = demo().engine(|runs| runs.log(store.clone()));
    let editors_session = std::sync::Mutex::new(None);
    editor(agent, async |mut e: Editor| {
        e.initialize(ProtocolVersion::V1).await;
        let session = SessionId::new(web_thread.clone());
        e.cx.send_request(LoadSessionRequest::new(session.clone(), "/tmp"))
            .block_task()
            .await?;
        let replayed = e.received();
        assert!(
            matches!(&replayed[0], SessionUpdate::UserMessageChunk(c) if matches!(&c.content, ContentBlock::Text(t) if t.text == "hello from the web")),
            "{replayed:?}"
        );
        assert_eq!(text_of(&replayed), "You said: hello from the web");
        let answer = e.prompt(&session, "and from the editor").block_task().await?;
        assert_eq!(answer.stop_reason, StopReason::EndTurn);
        assert_eq!(text_of(&e.received()), "You said: and from the editor");

        let own = e.session().await;
        e.prompt(&own, "begun in the editor").block_task().await?;
        *editors_session.lock().unwrap() = Some(own);
        Ok(())
    })
    .await;

    // The web thread holds both doors' turns, in order.
    let kept = async |thread: &str| -> Vec<String> {
        let record = store.thread(&ThreadId::from(thread)).await.unwrap();
        record.unwrap().messages.iter().map(|m| m.text()).collect()
    };
    assert_eq!(
        kept(&web_thread).await,
        [
            "hello from the web",
            "You said: hello from the web",
            "and from the editor",
            "You said: and from the editor"
        ]
    );

    // The editor's session, opened on the web and continued there by the official AG-UI client
    // with what it holds.
    let session = editors_session
        .lock()
        .unwrap()
        .take()
        .expect("the editor's session");
    let session = session.0.to_string();
    let seen: serde_json::Value = serde_json::from_str(
        &support::node(
            "agui-continue.mjs",
            &[&web, &session, "and on the web"],
            None,
        )
        .await,
    )
    .unwrap();
    let said = |messages: &serde_json::Value| -> Vec<(String, String)> {
        let pair = |m: &serde_json::Value| (m["role"].to_string(), m["content"].to_string());
        messages.as_array().unwrap().iter().map(pair).collect()
    };
    let turn = |role: &str, text: &str| (format!("{role:?}"), format!("{text:?}"));
    let begun = [
        turn("user", "begun in the editor"),
        turn("assistant", "You said: begun in the editor"),
    ];
    assert_eq!(
        said(&seen["opened"]),
        begun,
        "the thread as the client opened it"
    );
    let continued = [
        turn("user", "and on the web"),
        turn("assistant", "You said: and on the web"),
    ];
    assert_eq!(said(&seen["continued"]), [begun, continued].concat());
    assert_eq!(
        kept(&session).await,
        [
            "begun in the editor",
            "You said: begun in the editor",
            "and on the web",
            "You said: and on the web"
        ]
    );
}
