//! Any AG-UI endpoint (LangGraph, CrewAI, Mastra, another `agent-tower serve`, …) as a model and a
//! tool service, so that every layer of this crate applies to it unchanged and `AcpLayer` puts it
//! in an editor (`agent-tower acp --agent agui:<url>`).
//!
//! [`AguiBridge::new`] takes the endpoint's URL; runs are posted to it as `HttpAgent` does (JSON
//! in, server-sent events out, the whole conversation each time).
//!
//! - [`AguiBridge::model`] is a [`Service<ModelRequest>`](crate::model::ModelRequest): a step whose
//!   last message is the user's starts a remote run; its text and reasoning stream as deltas.
//!   The remote agent runs its own tools: a tool call ends the step once its result came (or the
//!   remote agent interrupted for it), and the next step goes on reading the same run.
//! - [`AguiBridge::tools`] is a [`Service<ToolCall>`](crate::tool::ToolCall) for those calls: it
//!   returns the result the remote agent sent. For a call the remote run was interrupted for, it
//!   answers every interrupt of that run at once (`resume[]` in a new run) with the decisions of
//!   the step ([`StepDecisions`](crate::permission::StepDecisions): approved, approved with
//!   edited arguments, rejected with feedback, dismissed), and waits for the result.
//!   [`AguiBridge::interrupted`] is the predicate for
//!   [`Policy::ask_if`](crate::permission::Policy::ask_if) that asks a person exactly about those
//!   calls; if none of them runs (all rejected), the next step answers them.
//! - A run cancelled mid-way is cancelled on the remote agent too when it is agent-tower (its
//!   events name their run and place; `POST /runs/{runId}/cancel`), and its connection dropped;
//!   a connection dropped before the run's end is re-joined once with `Last-Event-ID` at
//!   `/runs/{runId}/events` (agent-tower's route), else the step fails.
//!
//! The tools the model is offered (the run's own: an ACP session's MCP servers, the tools of the
//! stack) are offered to the remote agent as client tools: it calls them, its run ends waiting
//! for their results, the run's tools run them, and the next step sends the results in a new
//! remote run.

use std::{
    fmt,
    sync::{Arc, Mutex},
    time::Duration,
};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod model;
mod remote;
mod tools;

use self::remote::{Remote, call_of};
pub use self::{model::AguiModel, tools::AguiTools};
use super::{
    Event, PROTOCOL_VERSION, RunAgentInput,
    input::{self, ResumeEntry, ResumeStatus},
};
use crate::{
    BoxError,
    bridge::{BridgeError, BridgeErrorKind, Threads},
    id::{RunId, ThreadId},
    permission::{Decision, Decisions},
    tool::ToolOutput,
};

/// How long a remote agent may take to answer a run's request (its events then take as long as
/// they take).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A remote AG-UI agent, bridged; clones share it. See the [module](self).
#[derive(Clone)]
pub struct AguiBridge {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    url: reqwest::Url,
    client: reqwest::Client,
    headers: HeaderMap,
    remotes: Arc<Mutex<Threads<Arc<Remote>>>>,
}

impl fmt::Debug for AguiBridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AguiBridge")
            .field("url", &self.inner.url.as_str())
            .finish_non_exhaustive()
    }
}

impl AguiBridge {
    /// The agent whose runs are posted to `url`.
    ///
    /// # Errors
    ///
    /// When `url` is not an `http` or `https` URL.
    pub fn new(url: &str) -> Result<Self, BoxError> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("`{url}` is not an http(s) URL").into());
        }
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()?;
        Ok(Self {
            inner: Arc::new(Inner {
                url,
                client,
                headers: HeaderMap::new(),
                remotes: Arc::default(),
            }),
        })
    }

    /// Sends `name: value` with every request (`Authorization: Bearer …`); never logged.
    ///
    /// # Errors
    ///
    /// When the name or the value is not a valid header's.
    pub fn header(mut self, name: &str, value: &str) -> Result<Self, BoxError> {
        let name = HeaderName::try_from(name)?;
        let mut value = HeaderValue::try_from(value)?;
        value.set_sensitive(true);
        Arc::make_mut(&mut self.inner).headers.insert(name, value);
        Ok(self)
    }

    /// The model side: one step of the remote run per call.
    #[must_use]
    pub fn model(&self) -> AguiModel {
        AguiModel::new(self.clone())
    }

    /// The tool side: the results of the remote agent's calls, and the answers to its interrupts.
    #[must_use]
    pub fn tools(&self) -> AguiTools {
        AguiTools::new(self.clone())
    }

    /// Picks the calls the remote agent interrupted for, for
    /// [`Policy::ask_if`](crate::permission::Policy::ask_if).
    pub fn interrupted(&self) -> impl Fn(&crate::tool::ToolCall) -> bool + Send + Sync + 'static {
        let bridge = self.clone();
        move |call| {
            bridge
                .remote(&call.run.thread_id)
                .is_interrupted(call.id.as_str())
        }
    }

    fn remote(&self, thread: &ThreadId) -> Arc<Remote> {
        let mut remotes = self
            .inner
            .remotes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(remote) = remotes.get(thread) {
            return remote;
        }
        let remote = Arc::<Remote>::default();
        remotes.insert(thread.clone(), remote.clone(), |r| !r.is_open());
        remote
    }

    /// Starts a run of `thread` with `messages`, offering `tools` (and answering with `resume`),
    /// read into `remote`.
    fn start(
        &self,
        remote: &Arc<Remote>,
        thread: &ThreadId,
        messages: Vec<input::Message>,
        tools: Vec<input::Tool>,
        resume: Option<Vec<ResumeEntry>>,
    ) {
        let mut input = RunAgentInput::new(thread.clone(), RunId::new(), messages.clone());
        input.tools = tools.clone();
        input.resume = resume;
        let stop = CancellationToken::new();
        let run = remote.begin(stop.clone(), messages, tools);
        tokio::spawn(read(self.clone(), remote.clone(), run, input, stop));
    }

    /// Answers `interrupts` (every one `remote`'s last run ended with) with `decisions`, in a new
    /// run that carries the conversation (as the remote agent last told it, else as the bridge
    /// holds it: a stateless agent resumes with its context).
    fn resume(
        &self,
        remote: &Arc<Remote>,
        thread: &ThreadId,
        interrupts: &[input::Interrupt],
        decisions: &dyn Fn(&input::Interrupt) -> Decision,
    ) {
        let decided: Vec<_> = interrupts
            .iter()
            .map(|interrupt| (interrupt, decisions(interrupt)))
            .collect();
        let answers: Vec<_> = decided
            .iter()
            .map(|(interrupt, decision)| (*interrupt, answer(decision)))
            .collect();
        remote.answered(&answers);
        let entries = decided
            .into_iter()
            .map(|(interrupt, decision)| resume_entry(interrupt, decision))
            .collect();
        self.start(
            remote,
            thread,
            remote.conversation(),
            remote.offered(),
            Some(entries),
        );
    }
}

/// What a person's `decision` says, as the result of the call that asked a question.
fn answer(decision: &Decision) -> ToolOutput {
    match decision {
        Decision::Approve | Decision::ApproveAlways => ToolOutput::text("yes"),
        Decision::Edit(answer) => ToolOutput::text(answer.to_string()),
        Decision::Reject(feedback) | Decision::RejectAlways(feedback) => {
            ToolOutput::text(format!("no: {feedback}"))
        }
        _ => ToolOutput::text("not answered"),
    }
}

/// The resume entry answering `interrupt` with `decision`: for a tool call, the payload of
/// agent-tower's `responseSchema` (`approved`, `editedArgs`, `feedback`); for a question, the
/// answer's content when the person filled its form, else `approved` and `feedback`.
fn resume_entry(interrupt: &input::Interrupt, decision: Decision) -> ResumeEntry {
    let question = interrupt.tool_call_id.is_none();
    let (status, payload) = match decision {
        // "Always" is kept by this side's permission layer, which answers the remote agent's
        // later interrupts of the tool itself.
        Decision::Approve | Decision::ApproveAlways => {
            (ResumeStatus::Resolved, Some(json!({"approved": true})))
        }
        Decision::Edit(answer) if question => (ResumeStatus::Resolved, Some(answer)),
        Decision::Edit(arguments) => (
            ResumeStatus::Resolved,
            Some(json!({"approved": true, "editedArgs": arguments})),
        ),
        Decision::Reject(feedback) | Decision::RejectAlways(feedback) => (
            ResumeStatus::Resolved,
            Some(json!({"approved": false, "feedback": feedback})),
        ),
        _ => (ResumeStatus::Cancelled, None),
    };
    ResumeEntry {
        interrupt_id: interrupt.id.clone(),
        status,
        payload,
        metadata: None,
    }
}

/// The decision of the step about the interrupt's call: its tool call, or the call that asked
/// its question.
fn decided<'a>(
    decisions: &'a Decisions,
    remote: &'a Remote,
) -> impl Fn(&input::Interrupt) -> Decision + 'a {
    |interrupt| {
        decisions
            .get(&crate::id::ToolCallId::from(
                remote.run_id(call_of(interrupt)),
            ))
            .clone()
    }
}

/// The content type of `response` when it is not an event stream (a web page at the URL, a
/// proxy's error page): nothing to read events from.
fn not_events(response: &reqwest::Response) -> Option<String> {
    let kind = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("no content type");
    let media = kind.split(';').next().unwrap_or_default().trim();
    (!media.eq_ignore_ascii_case("text/event-stream")).then(|| kind.chars().take(100).collect())
}

/// How long a remote agent may take to take a cancellation.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);

/// Asks the remote agent to cancel `run` (`POST /runs/{runId}/cancel`, agent-tower's route, for a
/// server whose events name their run and place, as agent-tower's do): leaving is not Stop, a
/// server may keep a run going for a client to come back. Best effort: a failure is logged.
async fn cancel(bridge: &AguiBridge, run: &RunId) {
    let Ok(url) = bridge.inner.url.join(&format!("/runs/{run}/cancel")) else {
        return;
    };
    let asked = bridge
        .inner
        .client
        .post(url)
        .headers(bridge.inner.headers.clone())
        .timeout(CANCEL_TIMEOUT)
        .send()
        .await;
    match asked {
        Ok(response) if response.status().is_success() => {}
        Ok(response) => {
            tracing::debug!(run_id = %run, status = %response.status(), "the AG-UI agent did not take the cancellation");
        }
        Err(error) => {
            tracing::debug!(run_id = %run, %error, "the AG-UI agent could not be asked to cancel")
        }
    }
}

/// Sends `request`; a `409 Conflict` (the thread's last run, just left, has not ended yet on
/// the remote side) is tried again, a few times over about three seconds.
async fn send(request: reqwest::RequestBuilder) -> reqwest::Result<reqwest::Response> {
    let mut wait = Duration::from_millis(25);
    loop {
        let Some(again) = request.try_clone() else {
            return request.send().await;
        };
        let response = again.send().await?;
        if response.status() != reqwest::StatusCode::CONFLICT || wait > BUSY_RETRY_LIMIT {
            return Ok(response);
        }
        tokio::time::sleep(wait).await;
        wait *= 2;
    }
}

/// The longest pause between tries of a run refused as busy.
const BUSY_RETRY_LIMIT: Duration = Duration::from_secs(2);

/// Posts `input` and reads its events into `remote` until the run's end, `stop`, or a failure
/// (after one re-join).
async fn read(
    bridge: AguiBridge,
    remote: Arc<Remote>,
    run: u64,
    input: RunAgentInput,
    stop: CancellationToken,
) {
    let run_id = input.run_id.clone();
    let mut body = input;
    body.protocol_version = Some(PROTOCOL_VERSION.to_owned());
    let request = bridge
        .inner
        .client
        .post(bridge.inner.url.clone())
        .headers(bridge.inner.headers.clone())
        .header(ACCEPT, "text/event-stream")
        .header(CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&body).expect("an input serializes"));
    let mut last_seq = None;
    let mut request = Some(request);
    for attempt in 0..2 {
        let request = match request.take() {
            Some(request) => request,
            None => {
                let Some(seq) = last_seq else { break };
                let Ok(url) = bridge.inner.url.join(&format!("/runs/{run_id}/events")) else {
                    break;
                };
                bridge
                    .inner
                    .client
                    .get(url)
                    .headers(bridge.inner.headers.clone())
                    .header(ACCEPT, "text/event-stream")
                    .header("last-event-id", format!("{run_id}:{seq}"))
            }
        };
        let response = tokio::select! {
            () = stop.cancelled() => return,
            response = send(request) => response,
        };
        let response = match response {
            Ok(response) if response.status().is_success() => response,
            Ok(response) => {
                let status = response.status();
                let body = response.text().await.unwrap_or_default();
                let body: String = body.chars().take(500).collect();
                if attempt == 0 {
                    let kind = match status.as_u16() {
                        401 | 403 => BridgeErrorKind::AuthRequired,
                        409 | 429 | 500.. => BridgeErrorKind::AgentUnavailable,
                        _ => BridgeErrorKind::ProtocolError,
                    };
                    let why = format!("the AG-UI agent refused the run ({status}): {body}");
                    remote.fail(run, BridgeError::new(kind, why));
                    return;
                }
                break;
            }
            Err(error) if attempt == 0 => {
                remote.fail(
                    run,
                    BridgeError::new(
                        BridgeErrorKind::AgentUnavailable,
                        format!("the AG-UI agent could not be reached: {error}"),
                    ),
                );
                return;
            }
            Err(_) => break,
        };
        if let Some(kind) = not_events(&response) {
            remote.fail(
                run,
                BridgeError::new(
                    BridgeErrorKind::ProtocolError,
                    format!(
                        "the AG-UI agent answered `{kind}`, not an event stream: is the URL its \
                         run endpoint?"
                    ),
                ),
            );
            return;
        }
        let mut events = response.bytes_stream().eventsource();
        loop {
            let item = tokio::select! {
                () = stop.cancelled() => {
                    if last_seq.is_some() {
                        cancel(&bridge, &run_id).await;
                    }
                    return;
                }
                item = events.next() => item,
            };
            match item {
                Some(Ok(sse)) if sse.data.is_empty() => {}
                Some(Ok(sse)) => {
                    if let Some((_, seq)) = sse.id.rsplit_once(':')
                        && let Ok(seq) = seq.parse::<u64>()
                    {
                        last_seq = Some(seq);
                    }
                    let event = match serde_json::from_str::<Event>(&sse.data) {
                        Ok(event) => event,
                        Err(error) => {
                            remote.fail(
                                run,
                                BridgeError::new(
                                    BridgeErrorKind::ProtocolError,
                                    format!(
                                        "the AG-UI agent sent an event that is not AG-UI: {error}"
                                    ),
                                ),
                            );
                            return;
                        }
                    };
                    if remote.apply(run, event) {
                        return;
                    }
                }
                Some(Err(_)) | None => break,
            }
        }
        tracing::debug!(%run_id, ?last_seq, "the AG-UI agent's stream dropped before the run's end");
    }
    remote.fail(
        run,
        BridgeError::new(
            BridgeErrorKind::AgentExited,
            "the connection to the AG-UI agent dropped before the run's end",
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_answer_interrupts_in_agent_towers_payload() {
        let interrupt = input::Interrupt {
            id: "i1".into(),
            reason: "tool_call".into(),
            message: None,
            tool_call_id: Some("c1".into()),
            response_schema: None,
            expires_at: None,
            metadata: None,
        };
        let entry = |decision| {
            let entry = resume_entry(&interrupt, decision);
            assert_eq!(entry.interrupt_id, "i1");
            (entry.status, entry.payload)
        };
        assert_eq!(
            entry(Decision::Approve),
            (ResumeStatus::Resolved, Some(json!({"approved": true})))
        );
        assert_eq!(
            entry(Decision::Edit(json!({"k": 1}))),
            (
                ResumeStatus::Resolved,
                Some(json!({"approved": true, "editedArgs": {"k": 1}}))
            )
        );
        assert_eq!(
            entry(Decision::Reject("no".into())),
            (
                ResumeStatus::Resolved,
                Some(json!({"approved": false, "feedback": "no"}))
            )
        );
        assert_eq!(entry(Decision::Cancel), (ResumeStatus::Cancelled, None));

        // A question's form, filled in: its content is the answer.
        let question = input::Interrupt {
            tool_call_id: None,
            ..interrupt.clone()
        };
        let answer = json!({"channel": "radio"});
        let entry = resume_entry(&question, Decision::Edit(answer.clone()));
        assert_eq!(
            (entry.status, entry.payload),
            (ResumeStatus::Resolved, Some(answer))
        );
    }

    #[test]
    fn only_http_urls_are_agents() {
        assert!(AguiBridge::new("http://127.0.0.1:8000/").is_ok());
        assert!(AguiBridge::new("file:///etc/passwd").is_err());
        assert!(AguiBridge::new("not a url").is_err());
    }
}
