//! Any ACP agent (Claude Code through `claude-agent-acp`, Codex through `codex-acp`, Gemini CLI,
//! `agent-tower acp`, …) as a model and a tool service, so that every layer of this crate applies
//! to it unchanged and `AguiLayer` puts it on the web.
//!
//! [`AcpBridge::spawn`] starts the agent (a command, its arguments and environment) and speaks
//! ACP to it over its stdio with the official SDK. Each thread gets one ACP session
//! (`session/new`, in the bridge's working directory; a thread new to the bridge sends its earlier
//! messages as the first prompt's context).
//!
//! - [`AcpBridge::model`] is a [`Service<ModelRequest>`](crate::model::ModelRequest): a step
//!   whose last message is the user's sends `session/prompt`; the agent's message and thought
//!   chunks stream as text and reasoning deltas. When the agent starts a tool call, the step ends
//!   with that call (`FinishReason::ToolCalls`), and the next step goes on reading the same turn.
//!   The turn's end is the last step's end (its stop reason mapped to a finish reason).
//! - [`AcpBridge::tools`] is a [`Service<ToolCall>`](crate::tool::ToolCall) for those calls: the
//!   agent runs its tools itself, so calling one *lets it run*: the agent's
//!   `session/request_permission` for it, if any, is answered "allow" (its "allow always" option
//!   when the person approved *always*: what that covers is the agent's to say), and the service waits
//!   for the call to complete or fail and returns its content. A call the run never makes (a
//!   [`PermissionLayer`](crate::permission::PermissionLayer) refused it) is answered "reject"
//!   when the model is called again. Arguments edited by a person cannot reach the agent: such a
//!   call is refused with an error the model reads.
//! - A run cancelled mid-turn sends `session/cancel`.
//! - A call approved after the bridge started again (an interrupt answered after a restart: the
//!   agent's turn that asked is gone) is asked of the agent again in a new turn; its permission
//!   request for the same tool and arguments is allowed, and its result is the approved call's.
//!
//! The client capabilities it declares are none: no file system, no terminal (an agent asks
//! its own tools for those).

use std::{
    collections::HashMap,
    fmt,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use agent_client_protocol::v1::schema::{
    self as acp, ContentBlock, NewSessionRequest, PromptRequest, SessionId, SessionUpdate,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

mod link;
mod model;
mod tools;
mod turn;

use self::{
    link::{Connection, Link},
    turn::Session,
};
pub use self::{model::AcpModel, tools::AcpTools};
use crate::{
    BoxError,
    bridge::{BridgeError, BridgeErrorKind, End, Threads, Turn, Update},
    id::ThreadId,
    message::Message,
    model::FinishReason,
};

/// How to reach an ACP agent: a command to start here (its arguments and environment), or one
/// served across the network ([`remote`](Self::remote): its `/acp` WebSocket, such as another
/// agent-tower's); the working directory its sessions get, and how it is authenticated.
///
/// A command's agent gets an allow-listed environment, not this process's: `PATH`, `HOME`, `USER`,
/// `LOGNAME`, `SHELL`, the locale (`LANG`, `LANGUAGE`, `LC_ALL`, `LC_CTYPE`, `LC_MESSAGES`),
/// `TERM`, `TZ`, `TMPDIR` and the `XDG_*` directories when set, then the variables named with
/// [`inherit_env`](Self::inherit_env) and the values set with [`env`](Self::env). A server's
/// tokens and provider keys stay out of reach of an agent that runs commands, unless named.
///
/// ```
/// use agent_tower::acp::client::AcpCommand;
///
/// let command = AcpCommand::parse("codex-acp")?
///     .inherit_env("OPENAI_API_KEY")
///     .authenticate("openai-api-key");
/// # Ok::<(), agent_tower::BoxError>(())
/// ```
#[derive(Clone)]
pub struct AcpCommand {
    target: Target,
    env: Vec<(String, String)>,
    inherit: Vec<String>,
    cwd: PathBuf,
    start_timeout: Duration,
    auth_method: Option<String>,
}

/// Where the agent is.
#[derive(Clone)]
enum Target {
    /// A command started here, spoken to on its stdio.
    Spawn { program: PathBuf, args: Vec<String> },
    /// An agent served across the network, spoken to over the WebSocket at `url` (ACP's remote
    /// transport), with the bearer `token` when it needs one.
    Dial { url: String, token: Option<String> },
}

/// How long an agent has to answer `initialize` (and `authenticate`), by default.
const START_TIMEOUT: Duration = Duration::from_secs(30);

impl fmt::Debug for AcpCommand {
    /// The command, its arguments and the *names* of its variables: values may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("AcpCommand");
        match &self.target {
            Target::Spawn { program, args } => f.field("program", program).field("args", args),
            Target::Dial { url, token } => f.field("url", url).field("token", &token.is_some()),
        }
        .field(
            "env",
            &self.env.iter().map(|(name, _)| name).collect::<Vec<_>>(),
        )
        .field("inherit", &self.inherit)
        .field("cwd", &self.cwd)
        .field("auth_method", &self.auth_method)
        .finish_non_exhaustive()
    }
}

impl AcpCommand {
    /// `command` with `args`, in the current directory.
    #[must_use]
    pub fn new<I, S>(command: impl Into<PathBuf>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::reaching(Target::Spawn {
            program: command.into(),
            args: args.into_iter().map(Into::into).collect(),
        })
    }

    /// The agent served at `url`, a `ws://` or `wss://` URL (an agent-tower's `/acp`): each
    /// connection is opened there, and opened again when it closes, as a command's agent is
    /// started again.
    ///
    /// ```
    /// use agent_tower::acp::client::AcpCommand;
    ///
    /// let remote = AcpCommand::remote("wss://agent.example.com/acp")?.bearer_token("s3cret");
    /// assert!(AcpCommand::remote("https://agent.example.com/acp").is_err());
    /// # Ok::<(), agent_tower::BoxError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// When `url` is not a `ws://` or `wss://` URL.
    pub fn remote(url: impl Into<String>) -> Result<Self, BoxError> {
        let url = url.into();
        if !is_websocket_url(&url) {
            return Err(format!("`{url}` is not a ws:// or wss:// URL").into());
        }
        Ok(Self::reaching(Target::Dial { url, token: None }))
    }

    /// Whether the agent is served across the network ([`remote`](Self::remote)).
    #[must_use]
    pub fn is_remote(&self) -> bool {
        matches!(self.target, Target::Dial { .. })
    }

    fn reaching(target: Target) -> Self {
        Self {
            target,
            env: Vec::new(),
            inherit: Vec::new(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            start_timeout: START_TIMEOUT,
            auth_method: None,
        }
    }

    /// A command line, split as a shell would (`claude-agent-acp --verbose`, quotes allowed), or
    /// a `ws://` or `wss://` URL alone: an agent served there ([`remote`](Self::remote)).
    ///
    /// # Errors
    ///
    /// When the line is empty or its quotes do not close.
    pub fn parse(line: &str) -> Result<Self, BoxError> {
        if is_websocket_url(line.trim()) {
            return Self::remote(line.trim());
        }
        let words = shell_words(line)?;
        let (command, args) = words
            .split_first()
            .ok_or("the agent's command line is empty")?;
        Ok(Self::new(command, args.iter().cloned()))
    }

    /// The bearer token a [`remote`](Self::remote) agent is opened with (its
    /// `Authorization` header); a command's agent has none.
    #[must_use]
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        if let Target::Dial { token: held, .. } = &mut self.target {
            *held = Some(token.into());
        }
        self
    }

    /// Sets a variable of the agent's environment (a command's: a remote agent has its own).
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Passes the variable `name` of this process's environment on to the agent (when set):
    /// its provider key, say.
    #[must_use]
    pub fn inherit_env(mut self, name: impl Into<String>) -> Self {
        self.inherit.push(name.into());
        self
    }

    /// Authenticates with the agent's method `id` (one of those its `initialize` answer lists)
    /// once it is started: an agent that requires it refuses sessions otherwise
    /// (`auth_required`).
    #[must_use]
    pub fn authenticate(mut self, id: impl Into<String>) -> Self {
        self.auth_method = Some(id.into());
        self
    }

    /// How long the agent has to answer `initialize` (and `authenticate`) once started or
    /// connected to (default 30 s); past it, [`AcpBridge::spawn`] fails and the agent is stopped.
    #[must_use]
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// The directory the agent's sessions work in (default: this process's).
    #[must_use]
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = dir.into();
        self
    }
}

/// Whether `url` is a WebSocket URL.
fn is_websocket_url(url: &str) -> bool {
    url.strip_prefix("ws://")
        .or_else(|| url.strip_prefix("wss://"))
        .is_some_and(|rest| !rest.is_empty() && !rest.contains(char::is_whitespace))
}

/// A running ACP agent, bridged; clones share it. See the [module](self).
#[derive(Clone)]
pub struct AcpBridge {
    inner: Arc<Inner>,
}

struct Inner {
    cwd: PathBuf,
    /// The agent now: its connection, or why it is down.
    link: watch::Receiver<Link>,
    /// Held while a thread's session is created, so that a thread gets one.
    creating: tokio::sync::Mutex<()>,
    /// Stops the agent (and its supervision) when the last bridge goes.
    _stop: tokio_util::sync::DropGuard,
}

/// The sessions, by id for the connection's handlers, and by thread for the permission policy.
#[derive(Default)]
struct Routes(Mutex<RouteMaps>);

#[derive(Default)]
struct RouteMaps {
    by_id: HashMap<SessionId, Arc<Session>>,
    by_thread: Threads<Arc<Session>>,
}

impl Routes {
    fn lock(&self) -> std::sync::MutexGuard<'_, RouteMaps> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, id: &SessionId) -> Option<Arc<Session>> {
        self.lock().by_id.get(id).cloned()
    }

    fn of_thread(&self, thread: &ThreadId) -> Option<Arc<Session>> {
        self.lock().by_thread.get(thread)
    }

    fn insert(&self, thread: ThreadId, session: Arc<Session>) {
        let mut maps = self.lock();
        maps.by_id.insert(session.id.clone(), session.clone());
        if let Some(old) = maps.by_thread.insert(thread, session, |s| !s.is_open()) {
            maps.by_id.remove(&old.id);
        }
    }

    fn end_all(&self, why: &BridgeError) {
        let sessions: Vec<_> = self.lock().by_id.values().cloned().collect();
        for session in sessions {
            session.end(End::Failed(why.clone()));
        }
    }
}

impl fmt::Debug for AcpBridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpBridge")
            .field("cwd", &self.inner.cwd)
            .field("up", &!self.is_closed())
            .finish_non_exhaustive()
    }
}

impl AcpBridge {
    /// Starts the agent and initializes the connection (protocol version 1), then authenticates
    /// when the command names a method. From then on the agent is supervised: when it exits,
    /// the runs it was in end with `agent_exited`, it is started again (after 1 s, doubling to
    /// 60 s while it keeps failing), and runs meanwhile fail at once with `agent_unavailable`.
    ///
    /// # Errors
    ///
    /// When the agent cannot be started, does not answer `initialize` within its
    /// [start timeout](AcpCommand::start_timeout), or refuses the authentication.
    pub async fn spawn(command: AcpCommand) -> Result<Self, BoxError> {
        let stop = CancellationToken::new();
        let first = link::start(&command, &stop).await?;
        let (link, watched) = watch::channel(Link::Up(first.clone()));
        tokio::spawn(link::supervise(command.clone(), first, link, stop.clone()));
        Ok(Self {
            inner: Arc::new(Inner {
                cwd: command.cwd,
                link: watched,
                creating: tokio::sync::Mutex::new(()),
                _stop: stop.drop_guard(),
            }),
        })
    }

    /// The model side: one step of the agent's turn per call.
    #[must_use]
    pub fn model(&self) -> AcpModel {
        AcpModel::new(self.clone())
    }

    /// The tool side: lets the agent run the calls it started.
    #[must_use]
    pub fn tools(&self) -> AcpTools {
        AcpTools::new(self.clone())
    }

    /// Picks the calls the agent asked permission for, for
    /// [`Policy::ask_if`](crate::permission::Policy::ask_if): with it, a
    /// [`PermissionLayer`](crate::permission::PermissionLayer) asks a person exactly when the
    /// agent would have asked its editor.
    ///
    /// A step holds each tool call until the agent asks about it or starts running it, so that
    /// the answer is known when the call reaches the permission layer.
    pub fn asked(&self) -> impl Fn(&crate::tool::ToolCall) -> bool + Send + Sync + 'static {
        let watched = self.inner.link.clone();
        move |call| {
            let connection = link::connection(&watched.borrow());
            connection.is_ok_and(|connection| {
                connection
                    .routes
                    .of_thread(&call.run.thread_id)
                    .is_some_and(|session| session.was_asked(call.id.as_str()))
            })
        }
    }

    /// Whether the agent is down now (it exited and is started again after a back-off).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.availability().is_err()
    }

    /// `Ok` while the agent runs; while it is down, the `agent_unavailable` error runs get
    /// (saying why and when it is started again): for a readiness probe.
    ///
    /// # Errors
    ///
    /// While the agent is down.
    pub fn availability(&self) -> Result<(), BridgeError> {
        self.connection().map(|_| ())
    }

    fn connection(&self) -> Result<Arc<Connection>, BridgeError> {
        let connection = link::connection(&self.inner.link.borrow())?;
        if connection.closed.is_cancelled() {
            // Exited; its supervisor has not said so yet.
            return Err(BridgeError::new(
                BridgeErrorKind::AgentUnavailable,
                "the ACP agent exited; it is started again shortly",
            ));
        }
        Ok(connection)
    }

    /// The session of `thread`, created on first use.
    async fn session(&self, thread: &ThreadId) -> Result<Arc<Session>, BridgeError> {
        let link = self.connection()?;
        let _creating = self.inner.creating.lock().await;
        if let Some(session) = link.routes.of_thread(thread) {
            return Ok(session);
        }
        let created = link
            .connection
            .send_request(NewSessionRequest::new(self.inner.cwd.clone()))
            .block_task();
        let created = tokio::select! {
            answer = created => answer
                .map_err(|e| link::refused("session/new", &e, &link.auth_methods))?,
            () = link.closed.cancelled() => return Err(BridgeError::new(
                BridgeErrorKind::AgentExited,
                "the ACP agent exited before answering `session/new`",
            )),
        };
        let session = Session::new(
            created.session_id,
            link.connection.clone(),
            link.closed.clone(),
        );
        link.routes.insert(thread.clone(), session.clone());
        Ok(session)
    }

    fn existing_session(&self, thread: &ThreadId) -> Option<Arc<Session>> {
        self.connection().ok()?.routes.of_thread(thread)
    }

    /// Starts a turn of `session` with `prompt`, once its last turn ended (cancelled if it had
    /// not); `expect` (a call approved before a restart) is expected in it.
    async fn prompt(
        &self,
        session: &Arc<Session>,
        prompt: Vec<ContentBlock>,
        expect: Option<(String, serde_json::Value, String)>,
    ) {
        if !session.has_ended() {
            session.cancel();
            let ended = async {
                loop {
                    let changed = session.changed.notified();
                    if session.has_ended() {
                        return;
                    }
                    changed.await;
                }
            };
            if tokio::time::timeout(TURN_END_TIMEOUT, ended).await.is_err() {
                tracing::warn!("the ACP agent did not end its cancelled turn; prompting anyway");
            }
        }
        let turn = session.begin();
        if let Some((name, arguments, approved)) = expect {
            session.expect(name, arguments, approved);
        }
        let request = PromptRequest::new(session.id.clone(), prompt);
        let answer = session.connection.send_request(request).block_task();
        let session = session.clone();
        tokio::spawn(async move {
            // Once cancelled, the agent has a while to end the turn (ACP has it answer
            // `cancelled`); then the turn is over for the bridge all the same.
            let cancelled = async {
                session.cancelled.notified().await;
                tokio::time::sleep(TURN_END_TIMEOUT).await;
            };
            let end = tokio::select! {
                answer = answer => match answer {
                    Ok(answer) => End::Finished(finish(answer.stop_reason)),
                    Err(error) => {
                        if link::is_gone(&error) {
                            // The connection's end ends the turn, saying how the agent exited
                            // (the first end counts).
                            let exited = session.closed.cancelled();
                            let _ = tokio::time::timeout(2 * link::EXIT_GRACE, exited).await;
                        }
                        End::Failed(link::refused("session/prompt", &error, &[]))
                    }
                },
                () = session.closed.cancelled() => End::Failed(BridgeError::new(
                    BridgeErrorKind::AgentExited,
                    "the ACP agent exited",
                )),
                () = cancelled => {
                    tracing::warn!(
                        session = %session.id,
                        "the ACP agent did not end its cancelled turn within {}",
                        humantime::format_duration(TURN_END_TIMEOUT)
                    );
                    End::Failed(BridgeError::new(
                        BridgeErrorKind::AgentError,
                        "the ACP agent did not end its cancelled turn",
                    ))
                }
            };
            session.end_turn(turn, end);
        });
    }
}

/// How long the agent has to end a turn once it is cancelled.
const TURN_END_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The finish reason of a turn the agent ended with `reason`.
fn finish(reason: acp::StopReason) -> FinishReason {
    match reason {
        acp::StopReason::MaxTokens | acp::StopReason::MaxTurnRequests => FinishReason::Length,
        acp::StopReason::Refusal => FinishReason::ContentFilter,
        _ => FinishReason::Stop,
    }
}

/// One update of the agent, into its session.
fn route(session: &Session, update: SessionUpdate) {
    match update {
        SessionUpdate::AgentMessageChunk(chunk) => {
            if let ContentBlock::Text(text) = chunk.content {
                session.push(Update::Text(message_id(chunk.message_id), text.text));
            }
        }
        SessionUpdate::AgentThoughtChunk(chunk) => {
            if let ContentBlock::Text(text) = chunk.content {
                session.push(Update::Thought(message_id(chunk.message_id), text.text));
            }
        }
        SessionUpdate::ToolCall(call) => {
            let id = call.tool_call_id.to_string();
            session.push(Update::ToolCall {
                id: id.clone(),
                name: call.name.unwrap_or(call.title),
                arguments: call
                    .raw_input
                    .unwrap_or_else(|| serde_json::Value::Object(Default::default())),
            });
            session.update_call(&id, Some(call.status), Some(call.content));
        }
        SessionUpdate::Plan(plan) => {
            if let Ok(entries) = serde_json::to_value(&plan.entries) {
                let mut keys = serde_json::Map::new();
                keys.insert("plan".to_owned(), entries);
                session.push(Update::State(keys));
            }
        }
        SessionUpdate::ToolCallUpdate(update) => {
            session.update_call(
                &update.tool_call_id.to_string(),
                update.fields.status,
                update.fields.content,
            );
        }
        _ => {}
    }
}

/// The id the agent gave its message, as ours.
fn message_id(id: Option<acp::MessageId>) -> Option<crate::id::MessageId> {
    id.map(|id| crate::id::MessageId::from(id.to_string()))
}

/// The prompt that asks the agent, in a session new after a restart, to make again the call
/// `name` with `arguments` that a person approved (the session's first prompt, before its
/// conversation).
fn replay_prompt(name: &str, arguments: &serde_json::Value) -> Vec<ContentBlock> {
    vec![ContentBlock::from(format!(
        "Approved by the user before a restart; make this call again now: {name} {arguments}"
    ))]
}

/// The prompt of a turn: the user's messages since the last answer that the agent was not given
/// (all of them if it was given every one: a retry); for a session new to the thread, the
/// conversation before them first, as text.
fn prompt_of(sent: &turn::Sent, messages: &[Message]) -> Vec<ContentBlock> {
    let start = messages
        .iter()
        .rposition(|m| !matches!(m, Message::User { .. }))
        .map_or(0, |at| at + 1);
    let ids: Vec<_> = messages[start..].iter().map(|m| m.id().clone()).collect();
    let unsent = sent.unsent(&ids);
    let new: Vec<&Message> = messages[start..]
        .iter()
        .filter(|m| unsent.is_empty() || unsent.contains(m.id()))
        .collect();
    let mut prompt = Vec::new();
    if sent.history_due() && start > 0 {
        let earlier: Vec<String> = messages[..start]
            .iter()
            .filter(|m| !m.text().is_empty())
            .map(|m| format!("{}: {}", role(m), m.text()))
            .collect();
        if !earlier.is_empty() {
            prompt.push(ContentBlock::from(format!(
                "The conversation so far:\n{}",
                earlier.join("\n")
            )));
        }
    }
    prompt.extend(new.iter().map(|m| ContentBlock::from(m.text())));
    prompt
}

fn role(message: &Message) -> &'static str {
    match message.role() {
        crate::message::Role::User => "user",
        crate::message::Role::Assistant => "assistant",
        crate::message::Role::Tool => "tool",
        crate::message::Role::Reasoning => "reasoning",
        crate::message::Role::System | crate::message::Role::Developer => "instructions",
        crate::message::Role::Subagent => "sub-agent",
    }
}

/// Splits a command line into words: whitespace separates, single and double quotes group,
/// a backslash escapes the next character (outside single quotes).
fn shell_words(line: &str) -> Result<Vec<String>, BoxError> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("a single quote does not close".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => w.extend(chars.next()),
                        Some(c) => w.push(c),
                        None => return Err("a double quote does not close".into()),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_as_a_shell_would() {
        assert_eq!(
            shell_words(r#"agent --name "two words" 'it''s' a\ b"#).unwrap(),
            ["agent", "--name", "two words", "its", "a b"]
        );
        assert!(shell_words("agent 'open").is_err());
        assert!(AcpCommand::parse("   ").is_err());
    }

    #[test]
    fn a_prompt_is_the_new_user_messages_and_for_a_new_session_what_came_before() {
        let messages = [
            Message::user("first"),
            Message::assistant("a1".into(), "answer"),
            Message::user("second"),
        ];
        let text = |blocks: Vec<ContentBlock>| -> Vec<String> {
            blocks
                .into_iter()
                .map(|b| match b {
                    ContentBlock::Text(t) => t.text,
                    _ => unreachable!(),
                })
                .collect()
        };
        let sent = turn::Sent::default();
        assert!(sent.history_due(), "the first time only");
        assert_eq!(text(prompt_of(&sent, &messages)), ["second"]);
        let new = text(prompt_of(&turn::Sent::default(), &messages));
        assert_eq!(new[1], "second");
        assert!(new[0].contains("user: first") && new[0].contains("assistant: answer"));

        // After a cancelled turn, the next prompt gives only what the agent was not given.
        let mut more = messages.to_vec();
        more.push(Message::user("third"));
        assert_eq!(text(prompt_of(&sent, &more)), ["third"]);
    }
}
