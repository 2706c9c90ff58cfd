//! Any A2A 1.0 agent (on the official SDKs, LangGraph's, Mastra's, another `agent-tower serve`,
//! …) as a model service, so that every layer of this crate applies to it unchanged: `agent-tower
//! serve --agent a2a:<url>` puts it in a web chat and `agent-tower acp --agent a2a:<url>` in an
//! editor.
//!
//! [`A2aBridge::connect`] reads the agent's card (`<url>/.well-known/agent-card.json`) and talks
//! to its JSON-RPC interface.
//!
//! - A model step whose last message is the person's sends it as the thread's next message:
//!   each thread of the run is one A2A context (the remote agent keeps its history), streamed
//!   (`SendStreamingMessage`) when the card says it can, else answered (`SendMessage`).
//! - What the remote task writes (its artifacts' text, or its answering message) streams as the
//!   step's text; what it says while it works (a working status's message) as its reasoning.
//! - A task that asks for input (`TASK_STATE_INPUT_REQUIRED`) ends the step with its question as
//!   the text; the thread's next message answers it (it is sent with that task's id). A task
//!   that needs authentication fails the step with `auth_required`; one that fails or is
//!   rejected, with `agent_error`.
//! - A run cancelled mid-step cancels the remote task (`CancelTask`) and stops reading it.
//!
//! The remote agent runs its own tools: the bridge has no tool side.

use std::{
    fmt,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll},
    time::Duration,
};

use a2a_types::{
    AgentCard, JsonRpcId, JsonRpcRequest, JsonRpcResponse, Message as A2aMessage, Part,
    PartContent, Role, SendMessageRequest, SendMessageResponse, StreamResponse,
    TRANSPORT_PROTOCOL_JSONRPC, Task, TaskState, TaskStatus, methods,
};
use eventsource_stream::Eventsource;
use futures_util::{StreamExt, future::BoxFuture};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use crate::{
    BoxError,
    bridge::{BridgeError, BridgeErrorKind, End, Threads, Turn, Update, Updates},
    id::{MessageId, ThreadId},
    message::Message,
    model::{BoxModelStream, FinishReason, ModelRequest},
};

/// How long the remote agent may take to answer a request (its task's events then take as long
/// as they take).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a cancellation may take to be sent.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);

/// A remote A2A agent, bridged; clones share it. See the [module](self).
#[derive(Clone)]
pub struct A2aBridge {
    inner: Arc<Inner>,
}

struct Inner {
    card: AgentCard,
    /// Its JSON-RPC interface.
    endpoint: reqwest::Url,
    client: reqwest::Client,
    headers: HeaderMap,
    threads: Mutex<Threads<Arc<Remote>>>,
}

impl fmt::Debug for A2aBridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("A2aBridge")
            .field("agent", &self.inner.card.name)
            .field("endpoint", &self.inner.endpoint.as_str())
            .finish_non_exhaustive()
    }
}

impl A2aBridge {
    /// The agent whose card is at `url` (`<url>/.well-known/agent-card.json`, or `url` itself
    /// when it names a `.json` file), reached with `headers` (`Authorization: Bearer …`; never
    /// logged).
    ///
    /// # Errors
    ///
    /// When `url` is not an `http(s)` URL, the card cannot be read, or it offers no JSON-RPC
    /// interface.
    pub async fn connect(url: &str, headers: &[(&str, &str)]) -> Result<Self, BoxError> {
        let base = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(format!("`{url}` is not an http(s) URL").into());
        }
        let mut sent = HeaderMap::new();
        for (name, value) in headers {
            let mut value = HeaderValue::try_from(*value)?;
            value.set_sensitive(true);
            sent.insert(HeaderName::try_from(*name)?, value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()?;
        let card_url = if base.path().ends_with(".json") {
            base.clone()
        } else {
            base.join("/.well-known/agent-card.json")?
        };
        let card = client
            .get(card_url.clone())
            .headers(sent.clone())
            .timeout(CONNECT_TIMEOUT)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("the agent card at {card_url} could not be read: {e}"))?
            .bytes()
            .await
            .map_err(|e| format!("the agent card at {card_url} could not be read: {e}"))?;
        let card: AgentCard = serde_json::from_slice(&card)
            .map_err(|e| format!("the agent card at {card_url} is not one: {e}"))?;
        let endpoint = card
            .supported_interfaces
            .iter()
            .find(|interface| interface.protocol_binding == TRANSPORT_PROTOCOL_JSONRPC)
            .ok_or_else(|| format!("the agent `{}` offers no JSON-RPC interface", card.name))?;
        let endpoint = reqwest::Url::parse(&endpoint.url)
            .map_err(|e| format!("the agent's interface `{}` is not a URL: {e}", endpoint.url))?;
        Ok(Self {
            inner: Arc::new(Inner {
                card,
                endpoint,
                client,
                headers: sent,
                threads: Mutex::default(),
            }),
        })
    }

    /// The remote agent's card.
    #[must_use]
    pub fn card(&self) -> &AgentCard {
        &self.inner.card
    }

    /// The model side: one remote task per turn of a thread.
    #[must_use]
    pub fn model(&self) -> A2aModel {
        A2aModel::new(self.clone())
    }

    /// `thread`'s remote context.
    fn remote(&self, thread: &ThreadId) -> Arc<Remote> {
        let mut threads = lock(&self.inner.threads);
        if let Some(remote) = threads.get(thread) {
            return remote;
        }
        let remote = Arc::new(Remote::default());
        threads.insert(thread.clone(), remote.clone(), |r| !r.is_open());
        remote
    }

    /// Sends `prompt` as the next message of `remote`'s context and reads its task in a task of
    /// its own.
    fn send(&self, remote: &Arc<Remote>, prompt: String) {
        let stop = CancellationToken::new();
        let (turn, message) = remote.begin(stop.clone(), prompt);
        tokio::spawn(read(self.clone(), remote.clone(), turn, message, stop));
    }

    /// One JSON-RPC request of `method`.
    fn request(&self, method: &str, params: Value) -> reqwest::RequestBuilder {
        let request = JsonRpcRequest::new(
            JsonRpcId::String(MessageId::new().to_string()),
            method,
            Some(params),
        );
        self.inner
            .client
            .post(self.inner.endpoint.clone())
            .headers(self.inner.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(a2a_types::SVC_PARAM_VERSION, a2a_types::VERSION)
            .body(serde_json::to_vec(&request).unwrap_or_default())
    }

    /// Asks the remote agent to cancel `task`.
    async fn cancel(&self, task: &str) {
        let asked = self
            .request(methods::CANCEL_TASK, json!({ "id": task }))
            .timeout(CANCEL_TIMEOUT)
            .send()
            .await;
        if let Err(error) = asked {
            tracing::debug!(task, %error, "the A2A agent could not be asked to cancel");
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the bridge knows of a thread's remote context.
#[derive(Default)]
struct Remote {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
struct State {
    updates: Updates,
    /// The remote context (given by the remote agent with its first task).
    context: Option<String>,
    /// The task that asked for input: the next message answers it.
    asking: Option<String>,
    /// Stops the reader of the task in flight.
    reader: Option<CancellationToken>,
    /// The message id of the text being read (a new one for each artifact written anew).
    text: Option<MessageId>,
    /// The number of the turn being read: a reader of an earlier one (cancelled, finishing
    /// late) changes nothing.
    turn: u64,
}

impl Remote {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn is_open(&self) -> bool {
        self.state().updates.is_open()
    }

    /// A new turn: its number, and the message that sends `prompt` (in the context, answering
    /// the task that asked for input, if one did).
    fn begin(&self, stop: CancellationToken, prompt: String) -> (u64, A2aMessage) {
        let mut state = self.state();
        if let Some(reader) = state.reader.replace(stop) {
            reader.cancel();
        }
        state.updates = Updates::begin();
        state.text = None;
        state.turn += 1;
        let turn = state.turn;
        let mut message = A2aMessage::new(Role::User, vec![Part::text(prompt)]);
        message.context_id.clone_from(&state.context);
        message.task_id = state.asking.take();
        (turn, message)
    }

    /// A reader of turn `turn`.
    fn reading(&self, turn: u64) -> Reading<'_> {
        Reading {
            remote: self,
            turn,
            task: Mutex::default(),
        }
    }
}

/// What reads one turn of a remote context: it changes the context only while that turn is the
/// one being read.
struct Reading<'a> {
    remote: &'a Remote,
    turn: u64,
    /// The remote task this turn started, once the remote agent named it.
    task: Mutex<Option<String>>,
}

impl Reading<'_> {
    /// The context's state, if this turn is still its turn.
    fn state(&self) -> Option<MutexGuard<'_, State>> {
        Some(self.remote.state()).filter(|state| state.turn == self.turn)
    }

    fn push(&self, update: Update) {
        if let Some(mut state) = self.state() {
            state.updates.push(update);
        }
        self.remote.changed.notify_waiters();
    }

    fn finish(&self, end: End) {
        if let Some(mut state) = self.state() {
            state.updates.finish(end);
        }
        self.remote.changed.notify_waiters();
    }

    /// What the remote agent said of its task, as updates of the turn; whether the turn ended.
    fn take(&self, response: StreamResponse) -> bool {
        match response {
            StreamResponse::Task(task) => self.task(&task),
            StreamResponse::Message(message) => {
                self.text(&message.parts, true);
                self.finish(End::Finished(FinishReason::Stop));
                true
            }
            StreamResponse::StatusUpdate(update) => {
                *lock(&self.task) = Some(update.task_id.clone());
                if let Some(mut state) = self.state() {
                    state.context.get_or_insert(update.context_id.clone());
                }
                self.status(&update.task_id, &update.status)
            }
            StreamResponse::ArtifactUpdate(update) => {
                let anew = !update.append.unwrap_or(false);
                self.text(&update.artifact.parts, anew);
                false
            }
        }
    }

    /// A whole task: its context and id kept, its answer (when it ended) read.
    fn task(&self, task: &Task) -> bool {
        *lock(&self.task) = Some(task.id.clone());
        if let Some(mut state) = self.state() {
            state.context = Some(task.context_id.clone());
        }
        if matches!(task.status.state, TaskState::Completed) {
            for artifact in task.artifacts.iter().flatten() {
                self.text(&artifact.parts, true);
            }
        }
        self.status(&task.id, &task.status)
    }

    /// A status of `task`: working (its message as reasoning), asking for input (its question as
    /// text, the turn ended), or ended.
    fn status(&self, task: &str, status: &TaskStatus) -> bool {
        let said = status
            .message
            .as_ref()
            .map(|m| text_of(&m.parts))
            .unwrap_or_default();
        let failed = |kind| {
            let why = if said.is_empty() {
                format!(
                    "the A2A agent's task {task} ended {}",
                    state_name(&status.state)
                )
            } else {
                said.clone()
            };
            End::Failed(BridgeError::new(kind, why))
        };
        let end = match status.state {
            TaskState::Working | TaskState::Submitted | TaskState::Unspecified => {
                if !said.is_empty() {
                    self.push(Update::Thought(None, format!("{said}\n")));
                }
                return false;
            }
            TaskState::InputRequired => {
                if let Some(mut state) = self.state() {
                    state.asking = Some(task.to_owned());
                }
                self.push(Update::Text(Some(MessageId::new()), said));
                End::Finished(FinishReason::Stop)
            }
            TaskState::Completed | TaskState::Canceled => {
                let wrote = self.state().is_none_or(|state| state.text.is_some());
                if !said.is_empty() && !wrote {
                    self.push(Update::Text(Some(MessageId::new()), said));
                }
                End::Finished(FinishReason::Stop)
            }
            TaskState::AuthRequired => failed(BridgeErrorKind::AuthRequired),
            TaskState::Failed | TaskState::Rejected => failed(BridgeErrorKind::AgentError),
        };
        self.finish(end);
        true
    }

    /// The text of `parts`, written on the current text (or `anew`, as another message).
    fn text(&self, parts: &[Part], anew: bool) {
        let text = text_of(parts);
        let id = self.state().and_then(|mut state| {
            if anew || state.text.is_none() {
                state.text = Some(MessageId::new());
            }
            state.text.clone()
        });
        if !text.is_empty() {
            self.push(Update::Text(id, text));
        }
    }
}

impl Turn for Remote {
    fn next(&self) -> Option<Result<Update, End>> {
        self.state().updates.next()
    }

    fn is_settled(&self, _id: &str) -> bool {
        // The remote agent shows no calls of its own.
        true
    }

    fn changed(&self) -> &Notify {
        &self.changed
    }

    fn cancel(&self) {
        let reader = self.state().reader.take();
        if let Some(reader) = reader {
            reader.cancel();
        }
    }

    fn rename(&self, _remote: &str, _run: &str) {}
}

/// The text parts of `parts`, and the data parts as JSON.
fn text_of(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|part| match &part.content {
            PartContent::Text(text) => Some(text.clone()),
            PartContent::Data(data) => Some(data.to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn state_name(state: &TaskState) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Sends `message`, turn `turn` of `remote`, and reads what the remote agent answers until the
/// turn ends or `stop` fires (then the remote task, if one started, is cancelled).
async fn read(
    bridge: A2aBridge,
    remote: Arc<Remote>,
    turn: u64,
    message: A2aMessage,
    stop: CancellationToken,
) {
    let reading = remote.reading(turn);
    let streaming = bridge.inner.card.capabilities.streaming.unwrap_or(false);
    let request = SendMessageRequest {
        message,
        configuration: None,
        metadata: None,
        tenant: None,
    };
    let params = serde_json::to_value(&request).unwrap_or(Value::Null);
    let read = async {
        if streaming {
            stream(&bridge, &reading, params).await
        } else {
            answer(&bridge, &reading, params).await
        }
    };
    let ended = tokio::select! {
        ended = read => ended,
        () = stop.cancelled() => {
            let task = lock(&reading.task).clone();
            if let Some(task) = task {
                bridge.cancel(&task).await;
            }
            Err(End::Finished(FinishReason::Stop))
        }
    };
    if let Err(end) = ended {
        reading.finish(end);
    }
}

/// `SendStreamingMessage`: each event of its stream taken, to the end of the turn.
async fn stream(bridge: &A2aBridge, reading: &Reading<'_>, params: Value) -> Result<(), End> {
    let response = bridge
        .request(methods::SEND_STREAMING_MESSAGE, params)
        .header(ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(unreachable)?;
    let response = refused(response).await?;
    let mut events = response.bytes_stream().eventsource();
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| lost(&e.to_string()))?;
        if event.data.trim().is_empty() {
            continue;
        }
        if reading.take(framed(&event.data)?) {
            return Ok(());
        }
    }
    Err(lost("the stream closed before the task's end"))
}

/// `SendMessage`: the task (or message) it answers with, taken whole.
async fn answer(bridge: &A2aBridge, reading: &Reading<'_>, params: Value) -> Result<(), End> {
    let response = bridge
        .request(methods::SEND_MESSAGE, params)
        .send()
        .await
        .map_err(unreachable)?;
    let body = refused(response)
        .await?
        .text()
        .await
        .map_err(|e| lost(&e.to_string()))?;
    let taken = match framed::<SendMessageResponse>(&body)? {
        SendMessageResponse::Task(task) => StreamResponse::Task(task),
        SendMessageResponse::Message(message) => StreamResponse::Message(message),
    };
    if reading.take(taken) {
        Ok(())
    } else {
        Err(lost("the agent answered with a task still working"))
    }
}

/// The result of a JSON-RPC response, or the agent's error.
fn framed<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, End> {
    let response: JsonRpcResponse = serde_json::from_str(body)
        .map_err(|e| protocol(&format!("not a JSON-RPC response: {e}")))?;
    if let Some(error) = response.error {
        return Err(End::Failed(BridgeError::new(
            BridgeErrorKind::AgentError,
            format!("the A2A agent refused: {} ({})", error.message, error.code),
        )));
    }
    serde_json::from_value(response.result.unwrap_or(Value::Null))
        .map_err(|e| protocol(&format!("not an A2A result: {e}")))
}

/// `response`, unless its status refuses the request.
async fn refused(response: reqwest::Response) -> Result<reqwest::Response, End> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let kind = match status.as_u16() {
        401 | 403 => BridgeErrorKind::AuthRequired,
        502..=504 => BridgeErrorKind::AgentUnavailable,
        _ => BridgeErrorKind::ProtocolError,
    };
    Err(End::Failed(BridgeError::new(
        kind,
        format!("the A2A agent answered {status}"),
    )))
}

fn unreachable(error: reqwest::Error) -> End {
    End::Failed(BridgeError::new(
        BridgeErrorKind::AgentUnavailable,
        format!("the A2A agent cannot be reached: {error}"),
    ))
}

fn lost(why: &str) -> End {
    End::Failed(BridgeError::new(
        BridgeErrorKind::AgentExited,
        format!("the A2A agent's task was lost: {why}"),
    ))
}

fn protocol(why: &str) -> End {
    End::Failed(BridgeError::new(BridgeErrorKind::ProtocolError, why))
}

crate::bridge::side! {
    /// The model side of an [`A2aBridge`]: see the [module](self).
    A2aModel(A2aBridge)
}

impl Service<ModelRequest> for A2aModel {
    type Response = BoxModelStream;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<BoxModelStream, BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ModelRequest) -> Self::Future {
        let bridge = self.bridge.clone();
        Box::pin(async move {
            let remote = bridge.remote(&req.run.thread_id);
            if let Some(Message::User { .. }) = req.messages.last() {
                let prompt = req.messages.last().map(Message::text).unwrap_or_default();
                bridge.send(&remote, prompt);
            } else if !remote.is_open() {
                // Nothing to ask: the turn the remote agent took is over.
                let mut state = remote.state();
                state.updates = Updates::begin();
                state.updates.finish(End::Finished(FinishReason::Stop));
            }
            let taken = crate::bridge::call_ids(&req.messages);
            Ok(crate::bridge::steps(remote, &req.run, taken))
        })
    }
}
