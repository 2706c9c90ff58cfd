//! The agent loop: model → tools → model, until the model is done. Itself a
//! `Service<RunRequest>`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
//! use agent_tower::agent::Agent;
//! use agent_tower::message::Message;
//! use agent_tower::model::scripted::ScriptedModel;
//! use agent_tower::run::{RunRequest, StopReason};
//! use agent_tower::tool::{ToolCall, ToolOutput, ToolRouter, ToolSpec};
//! use tower::{service_fn, ServiceExt};
//!
//! let tools = ToolRouter::new().route(
//!     ToolSpec::new("get_time", "The current time."),
//!     service_fn(|_: ToolCall| async { Ok::<_, std::convert::Infallible>(ToolOutput::text("12:00")) }),
//! );
//! let agent = Agent::new(ScriptedModel::new(), tools.clone()).tool_specs(tools.specs());
//!
//! let outcome = agent.oneshot(RunRequest::new(vec![Message::user("call get_time")])).await?;
//! assert_eq!(outcome.stop, StopReason::EndTurn);
//! // user, assistant (tool call), tool result, assistant (answer)
//! assert_eq!(outcome.messages.len(), 4);
//! assert!(outcome.messages[3].text().contains("12:00"));
//! # Ok(()) }
//! ```
//!
//! # What the loop does
//!
//! Each turn it calls the model with the conversation (plus the run's context entries as a system
//! message) and every tool spec, consuming the model's stream to build the assistant message under
//! the step's message id. When the model asked for tools, it runs the server-side calls
//! concurrently, each under a fresh tool-message id, appends their results (a tool error or panic
//! becomes an error result the model sees), and calls the model again. It stops when the model
//! answers without tools, at `max_turns`, when the run's cancellation token fires, or when the
//! model called client-side tools (their ids are returned as pending).
//!
//! A tool call whose id already has a result in the conversation is never run again, so a client
//! re-sending history cannot trigger a tool twice. A conversation that ends with an assistant
//! message whose server-side calls have no result yet (a run resuming after an interrupt) has
//! those calls run first, through the same tool stack (so the permission layer decides again, or
//! applies the answer the run brought). Any other call the conversation holds without a result
//! (its step was cut off mid-stream and a client kept what it had seen, or a client never answered
//! its tool) is then given an error result saying it did not run, after its message's results: no
//! model is shown a call without its result.
//!
//! The turns are counted from the request's [`RunContext::turn`](crate::context::RunContext::turn)
//! (0, or the turns a run continued after its server stopped had taken), up to `max_turns`.
//!
//! # Interrupts
//!
//! A tool stack may answer a call with an [`Interrupt`]
//! ([`ToolResponse::Interrupted`](crate::tool::ToolResponse)): the call needs a decision nobody
//! has given yet (the AG-UI approver of the permission layer does this). The other calls of the turn
//! finish, and the run ends with [`StopReason::Interrupted`] and the interrupts in
//! [`RunOutcome::interrupts`]; no task waits for the person.
//!
//! A call whose own work stopped at interrupts (an [agent called as a tool](crate::subagent)
//! whose tools wait for a person) answers [`ToolResponse::Suspended`]: the run ends with its
//! interrupts as well, and its work is kept in the conversation after the call
//! ([`Message::Subagent`]). The run that answers them takes it out again and hands it back to the
//! call ([`crate::tool::SubagentRun`], in the call's extensions), which goes on
//! where it stopped. A call such an agent answers ([`ToolResponse::Delegated`]) keeps its
//! conversation there too, after the turn's results: the transcript a client was shown. Kept
//! conversations are never shown to the model.
//!
//! # State and background work
//!
//! The run's [`SharedState`](crate::context::SharedState) (from the request, or empty) is in every
//! step's context: tools and layers read and change it, and the outcome carries the final state
//! ([`state_context`](Agent::state_context) shows it to the model). Work that layers hand to the
//! run's [`Background`](crate::context::Background) (post-processing of whole messages) is driven alongside the loop; the
//! run ends when it is done, or after [`background_timeout`](Agent::background_timeout).
//!
//! # Readiness
//!
//! The agent is always ready; each run clones the model and tool services and waits for their
//! readiness inside its future before every call.

mod budget;
mod orphans;
mod step;

pub use self::budget::TurnBudget;

use std::{
    collections::{HashMap, HashSet},
    fmt,
    future::Future,
    num::NonZeroU32,
    panic::AssertUnwindSafe,
    sync::Arc,
    task::{Context, Poll},
};

use futures_util::FutureExt;
use tower::ServiceExt;
use tower_service::Service;
use tracing::Instrument;

use crate::{
    BoxError,
    context::{Checkpoint, RunContext},
    id::{MessageId, ToolCallId},
    message::{Message, ToolCallRequest, answered_calls},
    model::{ModelOptions, ModelRequest, ModelService, Usage},
    run::{CallsUsage, ContextEntry, EarlierUsage, RunOutcome, RunRequest, StopReason, TurnCalls},
    tool::{
        Interrupt, RunTools, SubagentRun, Suspended, ToolCall, ToolError, ToolOutput, ToolReply,
        ToolResponse, ToolSpec,
    },
};

/// Builds, from the run's current state, a message the model reads before the conversation.
type StateContext = Arc<dyn Fn(&serde_json::Value) -> Option<Message> + Send + Sync>;

#[derive(Clone)]
struct Config {
    instructions: Option<Message>,
    tool_specs: Arc<[ToolSpec]>,
    max_turns: NonZeroU32,
    options: ModelOptions,
    state_context: Option<StateContext>,
    background_grace: std::time::Duration,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field(
                "instructions",
                &self.instructions.as_ref().map(Message::text),
            )
            .field("tool_specs", &self.tool_specs)
            .field("max_turns", &self.max_turns)
            .field("options", &self.options)
            .field("state_context", &self.state_context.is_some())
            .field("background_grace", &self.background_grace)
            .finish()
    }
}

/// The model ↔ tools loop; see the [module docs](self).
pub struct Agent<M, T> {
    model: M,
    tools: T,
    config: Arc<Config>,
}

impl<M, T> Agent<M, T> {
    /// An agent calling `model`, running tools through `tools`, at most 16 model turns a run.
    pub fn new(model: M, tools: T) -> Self {
        Self {
            model,
            tools,
            config: Arc::new(Config {
                instructions: None,
                tool_specs: Arc::default(),
                max_turns: NonZeroU32::new(16).expect("16 is not zero"),
                options: ModelOptions::default(),
                state_context: None,
                background_grace: std::time::Duration::from_secs(30),
            }),
        }
    }

    /// What the model is told first, in every turn (its system prompt): a system message before
    /// the run's context and the conversation. It is not added to the conversation itself, so
    /// clients never see it and never send it back.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agent_tower::BoxError> {
    /// use agent_tower::{agent::Agent, message::{Message, Role}, run::RunRequest, tool::ToolRouter};
    /// use agent_tower::test_util::{MockItem, MockModel};
    /// use tower::ServiceExt;
    ///
    /// let model = MockModel::new([vec![MockItem::text("Ahoy."), MockItem::stop()]]);
    /// let agent = Agent::new(model.clone(), ToolRouter::new()).instructions("Answer as a pirate.");
    /// let outcome = agent.oneshot(RunRequest::new(vec![Message::user("hello")])).await?;
    /// let asked = &model.requests()[0].messages;
    /// assert_eq!((asked[0].role(), asked[0].text().as_str()), (Role::System, "Answer as a pirate."));
    /// assert_eq!(outcome.messages.len(), 2, "the conversation does not hold it");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.config_mut().instructions = Some(Message::system(instructions.into()));
        self
    }

    /// The tools the model is told about (typically [`ToolRouter::specs`](crate::tool::ToolRouter::specs)).
    #[must_use]
    pub fn tool_specs(mut self, specs: Vec<ToolSpec>) -> Self {
        self.config_mut().tool_specs = specs.into();
        self
    }

    /// The most model turns one run may take.
    #[must_use]
    pub fn max_turns(mut self, max_turns: NonZeroU32) -> Self {
        self.config_mut().max_turns = max_turns;
        self
    }

    /// Sampling options for every model call.
    #[must_use]
    pub fn model_options(mut self, options: ModelOptions) -> Self {
        self.config_mut().options = options;
        self
    }

    /// Shows the model the run's state: before every model turn, `build(current state)` may
    /// return a message (typically a system message) placed before the conversation. It is not
    /// added to the conversation itself.
    ///
    /// ```
    /// use agent_tower::{agent::Agent, message::Message, model::scripted::ScriptedModel, tool::ToolRouter};
    ///
    /// let agent = Agent::new(ScriptedModel::new(), ToolRouter::new())
    ///     .state_context(|state| Some(Message::system(format!("Current state: {state}"))));
    /// ```
    #[must_use]
    pub fn state_context<F>(mut self, build: F) -> Self
    where
        F: Fn(&serde_json::Value) -> Option<Message> + Send + Sync + 'static,
    {
        self.config_mut().state_context = Some(Arc::new(build));
        self
    }

    /// How long a finished run waits for its [`Background`](crate::context::Background) work (post-processing) before it
    /// drops what is left (default 30 s).
    #[must_use]
    pub fn background_timeout(mut self, grace: std::time::Duration) -> Self {
        self.config_mut().background_grace = grace;
        self
    }

    fn config_mut(&mut self) -> &mut Config {
        Arc::make_mut(&mut self.config)
    }
}

impl<M: Clone, T: Clone> Clone for Agent<M, T> {
    fn clone(&self) -> Self {
        Self {
            model: self.model.clone(),
            tools: self.tools.clone(),
            config: self.config.clone(),
        }
    }
}

impl<M, T> fmt::Debug for Agent<M, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("model", &std::any::type_name::<M>())
            .field("tools", &std::any::type_name::<T>())
            .field("config", &self.config)
            .finish()
    }
}

impl<M, T> Service<RunRequest> for Agent<M, T>
where
    M: ModelService + Clone + Send + 'static,
    M::Future: Send,
    M::Events: Send,
    M::Error: Into<BoxError>,
    M::StreamError: Into<BoxError>,
    T: Service<ToolCall> + Clone + Send + 'static,
    T::Response: ToolReply,
    T::Future: Send,
    T::Error: Into<BoxError>,
{
    type Response = RunOutcome;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: RunRequest) -> Self::Future {
        let span = tracing::info_span!(
            "agent.run",
            thread_id = %req.run.thread_id,
            run_id = %req.run.run_id,
        );
        let background = req.run.background();
        let grace = self.config.background_grace;
        let shared = req.run.shared_state(req.state.as_ref());
        // Boxed on its own: the wrappers below keep a pointer, not three copies of the loop's
        // state (an async block keeps what it captured beside the futures it awaits).
        let run = Box::pin(run_loop(
            self.model.clone(),
            self.tools.clone(),
            self.config.clone(),
            req,
        ));
        let run = async move {
            let mut result = crate::context::with_background(run, &background, grace).await;
            // Background work may have changed the state after the loop ended.
            if let Ok(outcome) = &mut result
                && (outcome.state.is_some() || shared.get() != serde_json::json!({}))
            {
                outcome.state = Some(shared.get());
            }
            result
        };
        ResponseFuture(Box::pin(run.instrument(span)))
    }
}

crate::boxed_future! {
    /// The agent's response future (boxed per run, never per token).
    pub struct ResponseFuture -> Result<RunOutcome, BoxError>;
}

/// The run: its steps until the model stops, a tool interrupts, or the run is cancelled.
///
/// Not an `async fn`: one keeps its arguments for as long as it runs, so the request would be
/// kept beside the parts taken out of it.
fn run_loop<M, T>(
    mut model: M,
    tools: T,
    config: Arc<Config>,
    req: RunRequest,
) -> impl Future<Output = Result<RunOutcome, BoxError>>
where
    M: ModelService,
    M::Error: Into<BoxError>,
    M::StreamError: Into<BoxError>,
    T: Service<ToolCall> + Clone,
    T::Response: ToolReply,
    T::Error: Into<BoxError>,
{
    let RunRequest {
        mut messages,
        client_tools,
        context,
        state,
        mut run,
    } = req;
    async move {
        // The run's state, shared with the tools (and the layers that emit it).
        let had_state = state.is_some();
        let shared = run.shared_state(state.as_ref());
        // Layers that look at whole messages may resolve them against the context.
        let context: Arc<[ContextEntry]> = context.into();
        run.extensions.insert(context.clone());
        // Work of calls suspended by an earlier run: the calls that resume get theirs back.
        let mut suspended = take_suspended(&mut messages);
        let client_tool_names: HashSet<String> =
            client_tools.iter().map(|t| t.name.clone()).collect();
        // What the model is offered, shared by every step (the agent's own list as it is, unless the
        // run brings tools of its own).
        let run_tools = run.extensions.get::<RunTools>();
        let specs: Arc<[ToolSpec]> = if run_tools.is_none() && client_tools.is_empty() {
            config.tool_specs.clone()
        } else {
            let mut specs = config.tool_specs.to_vec();
            if let Some(RunTools(tools)) = run_tools {
                specs.extend(tools.specs());
            }
            specs.extend(client_tools);
            specs.into()
        };
        // The turns left, shared with the agents this run calls as tools (a run continued after
        // its server stopped took `run.turn` already).
        let budget = match run.extensions.get::<TurnBudget>() {
            Some(budget) => budget.clone(),
            None => {
                let budget = TurnBudget::new(config.max_turns.get().saturating_sub(run.turn));
                run.extensions.insert(budget.clone());
                budget
            }
        };
        // What the run used before this attempt, and what its tool calls' agents use: the
        // run's usage counts them (its calls see a `CallsUsage` of their own, not this one).
        let mut usage = RunUsage::default();
        if let Some(EarlierUsage(earlier)) = run.extensions.remove::<EarlierUsage>() {
            earlier.iter().for_each(|used| usage.add(used));
        }
        let calls_usage = CallsUsage::new();
        run.extensions.insert(calls_usage.clone());
        let finish = |stop, messages, mut usage: RunUsage, pending, interrupts| {
            calls_usage.take().iter().for_each(|used| usage.add(used));
            let state = shared.get();
            let state = (had_state || state != serde_json::json!({})).then_some(state);
            let mut outcome = RunOutcome::new(stop, messages, state);
            outcome.usage = usage.total;
            outcome.models = usage.models;
            outcome.pending_tool_calls = pending;
            outcome.interrupts = interrupts;
            Ok(outcome)
        };
        let cancelled = |messages, usage| {
            finish(
                StopReason::Cancelled,
                messages,
                usage,
                Vec::new(),
                Vec::new(),
            )
        };

        // Calls of the last assistant message still without a result (a run resuming after an
        // interrupt) run before the model is asked again.
        let unanswered = unanswered_calls(&messages, &client_tool_names);
        // Whether a step of this run acted (ran calls) since the model was last asked: the next
        // question waits until the log keeps what it did.
        let mut acted = !unanswered.is_empty();
        if !unanswered.is_empty() {
            let turn = run.turn;
            let calls = Calls::resuming(unanswered, &mut suspended);
            let Some(results) = run_calls(tools.clone(), &run, turn, calls).await else {
                return cancelled(messages, usage);
            };
            messages.extend(results.messages);
            if !results.interrupts.is_empty() {
                return finish(
                    StopReason::Interrupted,
                    messages,
                    usage,
                    Vec::new(),
                    results.interrupts,
                );
            }
        }

        // A call the conversation holds without a result is never shown to a model as one.
        let orphans = orphans::answer_orphans(&mut messages);
        if orphans > 0 {
            tracing::warn!(
                calls = orphans,
                "calls without a result in the conversation were answered as not run"
            );
        }

        for turn in run.turn..config.max_turns.get() {
            if std::mem::take(&mut acted) {
                kept(&run).await;
            }
            if run.cancel.is_cancelled() {
                return cancelled(messages, usage);
            }
            if !budget.take() {
                break;
            }
            let message_id = MessageId::new();
            let request = ModelRequest {
                messages: with_context(
                    config.instructions.as_ref(),
                    &context,
                    config
                        .state_context
                        .as_ref()
                        .and_then(|build| build(&shared.get())),
                    &messages,
                ),
                tools: specs.clone(),
                options: config.options.clone(),
                run: run.for_step(message_id.clone(), turn),
            };
            let step_span = tracing::info_span!("agent.model_step", turn, message_id = %message_id);
            let mut step = step::Step::new(message_id);
            let called = tokio::select! {
                biased;
                () = run.cancel.cancelled() => None,
                called = step::call_model(&mut model, request, &mut step).instrument(step_span) => Some(called),
            };
            // A step that failed once the run was cancelled failed of the cancellation (a model
            // service sees the token too, and may see it first: the token can fire on another
            // thread between the two branches' polls).
            let called = called.filter(|called| called.is_ok() || !run.cancel.is_cancelled());
            let Some(called) = called else {
                // What was streamed before the cancellation stays, under the ids the UI saw.
                if !step.is_empty() {
                    messages.extend(step.messages());
                }
                return cancelled(messages, usage);
            };
            called?;
            usage.add(&step.usage);
            messages.extend(step.messages());
            let tool_calls = std::mem::take(&mut step.tool_calls);
            if tool_calls.is_empty() {
                return finish(
                    step::stop_reason(step.finish.as_ref()),
                    messages,
                    usage,
                    Vec::new(),
                    Vec::new(),
                );
            }

            let answered = answered_calls(&messages);
            let (client_calls, server_calls): (Vec<_>, Vec<_>) = tool_calls
                .into_iter()
                .filter(|call| !answered.contains(&call.id))
                .partition(|call| client_tool_names.contains(&call.name));

            // The calls run once the log keeps the step that asked for them.
            if !server_calls.is_empty() {
                kept(&run).await;
                acted = true;
            }
            let calls = Calls::new(server_calls);
            let Some(results) = run_calls(tools.clone(), &run, turn, calls).await else {
                return cancelled(messages, usage);
            };
            messages.extend(results.messages);
            let pending: Vec<_> = client_calls.into_iter().map(|call| call.id).collect();
            if !results.interrupts.is_empty() {
                return finish(
                    StopReason::Interrupted,
                    messages,
                    usage,
                    pending,
                    results.interrupts,
                );
            }
            if !pending.is_empty() {
                return finish(
                    StopReason::ClientToolCalls,
                    messages,
                    usage,
                    pending,
                    Vec::new(),
                );
            }
        }
        finish(
            StopReason::MaxTurns,
            messages,
            usage,
            Vec::new(),
            Vec::new(),
        )
    }
}

/// A run's usage: in all, and per provider and model (a fallback may answer some steps).
#[derive(Default)]
struct RunUsage {
    total: Usage,
    models: Vec<Usage>,
}

impl RunUsage {
    fn add(&mut self, step: &Usage) {
        if step.is_empty() {
            return;
        }
        self.total.add(step);
        match self.models.iter_mut().find(|m| m.same_model(step)) {
            Some(model) => model.add(step),
            None => self.models.push(step.clone()),
        }
    }
}

/// What one turn's server-side calls gave: their result messages (then the kept work of the
/// suspended ones), and the interrupts they stopped at (no result message).
struct TurnResults {
    messages: Vec<Message>,
    interrupts: Vec<Interrupt>,
}

/// A call's result, and the conversation of the agent that answered it, when one did
/// ([`ToolResponse::Delegated`]).
struct Answered {
    result: Message,
    transcript: Option<Message>,
}

/// Why a call has no result yet.
enum Waiting {
    /// It waits for a decision.
    Decision(Interrupt),
    /// Its own work waits for decisions.
    Work(ToolCallId, Suspended),
}

/// One turn's server-side calls, each with the work it resumes, if any.
struct Calls(Vec<(ToolCallRequest, Option<SubagentRun>)>);

impl Calls {
    fn new(calls: Vec<ToolCallRequest>) -> Self {
        Self(calls.into_iter().map(|call| (call, None)).collect())
    }

    /// `calls`, each with its work from `suspended`.
    fn resuming(
        calls: Vec<ToolCallRequest>,
        suspended: &mut HashMap<ToolCallId, SubagentRun>,
    ) -> Self {
        Self(
            calls
                .into_iter()
                .map(|call| {
                    let work = suspended.remove(&call.id);
                    (call, work)
                })
                .collect(),
        )
    }
}

/// Takes the work of suspended calls out of the conversation ([`Message::Subagent`] of a call
/// without a result), by call. The transcripts of answered calls stay where they are.
fn take_suspended(messages: &mut Vec<Message>) -> HashMap<ToolCallId, SubagentRun> {
    let answered = answered_calls(messages);
    let mut suspended = HashMap::new();
    messages.retain_mut(|message| match message {
        Message::Subagent {
            tool_call_id,
            run_id,
            messages,
            ..
        } if !answered.contains(tool_call_id) => {
            let run = SubagentRun {
                run_id: run_id.clone(),
                messages: std::mem::take(messages),
            };
            suspended.insert(tool_call_id.clone(), run);
            false
        }
        _ => true,
    });
    suspended
}

/// Waits until the run's log keeps every event the run sent so far, when the run is logged
/// ([`Checkpoint`]), or until the run is cancelled.
async fn kept(run: &RunContext) {
    if let Some(checkpoint) = run.extensions.get::<Checkpoint>() {
        tokio::select! {
            () = run.cancel.cancelled() => {}
            () = checkpoint.reached() => {}
        }
    }
}

/// Runs one turn's server-side calls concurrently; `None` when the run is cancelled meanwhile.
async fn run_calls<T>(
    tools: T,
    run: &crate::context::RunContext,
    turn: u32,
    calls: Calls,
) -> Option<TurnResults>
where
    T: Service<ToolCall> + Clone,
    T::Response: ToolReply,
    T::Error: Into<BoxError>,
{
    let runs = tool_runs(&tools, run, turn, calls);
    let results = tokio::select! {
        biased;
        () = run.cancel.cancelled() => None,
        results = futures_util::future::join_all(runs) => Some(results),
    }?;
    let mut turn_results = TurnResults {
        messages: Vec::with_capacity(results.len()),
        interrupts: Vec::new(),
    };
    // After the turn's results, as a client streaming the turn is shown them: the sub-agents'
    // conversations.
    let mut kept = Vec::new();
    for result in results {
        match result {
            Ok(answered) => {
                turn_results.messages.push(answered.result);
                kept.extend(answered.transcript);
            }
            Err(Waiting::Decision(interrupt)) => turn_results.interrupts.push(interrupt),
            Err(Waiting::Work(tool_call_id, suspended)) => {
                let (interrupts, work) = suspended.into_parts();
                turn_results.interrupts.extend(interrupts);
                kept.push(Message::Subagent {
                    id: MessageId::new(),
                    tool_call_id,
                    run_id: work.run_id,
                    messages: work.messages,
                });
            }
        }
    }
    turn_results.messages.extend(kept);
    Some(turn_results)
}

/// The server-side calls without a result of an assistant message that ends the conversation
/// (followed by tool results only).
fn unanswered_calls(messages: &[Message], client_tools: &HashSet<String>) -> Vec<ToolCallRequest> {
    let Some(Message::Assistant { tool_calls, .. }) = messages
        .iter()
        .rev()
        .find(|m| !matches!(m, Message::Tool { .. }))
    else {
        return Vec::new();
    };
    let answered = answered_calls(messages);
    tool_calls
        .iter()
        .filter(|call| !answered.contains(&call.id) && !client_tools.contains(&call.name))
        .cloned()
        .collect()
}

/// The futures of one turn's server-side calls. Calls whose arguments are not JSON are answered
/// at once; the others carry, in their context, the list of the turn's calls ([`TurnCalls`]).
fn tool_runs<T>(
    tools: &T,
    run: &crate::context::RunContext,
    turn: u32,
    requests: Calls,
) -> Vec<impl Future<Output = Result<Answered, Waiting>>>
where
    T: Service<ToolCall> + Clone,
    T::Response: ToolReply,
    T::Error: Into<BoxError>,
{
    let prepared: Vec<Result<ToolCall, (ToolCallId, ToolError)>> = requests
        .0
        .into_iter()
        .map(
            |(request, work)| match parse_arguments(&request.arguments) {
                Ok(arguments) => {
                    let mut run = run.for_step(MessageId::new(), turn);
                    if let Some(work) = work {
                        run.extensions.insert(work);
                    }
                    Ok(ToolCall {
                        id: request.id,
                        name: request.name,
                        arguments,
                        run,
                    })
                }
                Err(error) => Err((request.id, error)),
            },
        )
        .collect();
    let turn_calls = TurnCalls(
        prepared
            .iter()
            .filter_map(|c| c.as_ref().ok().cloned())
            .collect(),
    );
    prepared
        .into_iter()
        .map(|prepared| {
            let tools = tools.clone();
            let turn_calls = turn_calls.clone();
            async move {
                match prepared {
                    Ok(mut call) => {
                        call.run.extensions.insert(turn_calls);
                        let span = tracing::info_span!("agent.tool_call", tool_call_id = %call.id, tool = %call.name);
                        call_tool(tools, call).instrument(span).await
                    }
                    Err((tool_call_id, error)) => Ok(Answered {
                        result: Message::Tool {
                            id: MessageId::new(),
                            tool_call_id,
                            content: ToolOutput::error(error.to_string()).content,
                            is_error: true,
                        },
                        transcript: None,
                    }),
                }
            }
        })
        .collect()
}

/// Runs one tool call; a tool error or panic becomes an error result, an interrupt or suspended
/// work stays one.
async fn call_tool<T>(tools: T, call: ToolCall) -> Result<Answered, Waiting>
where
    T: Service<ToolCall>,
    T::Response: ToolReply,
    T::Error: Into<BoxError>,
{
    let message_id = call.run.message_id.clone();
    let tool_call_id = call.id.clone();
    let name = call.name.clone();
    let mut transcript = None;
    let output = match AssertUnwindSafe(tools.oneshot(call)).catch_unwind().await {
        Ok(Ok(reply)) => match reply.into_response() {
            ToolResponse::Output(output) => output,
            ToolResponse::Delegated { output, run } => {
                transcript = Some(Message::Subagent {
                    id: MessageId::new(),
                    tool_call_id: tool_call_id.clone(),
                    run_id: run.run_id,
                    messages: run.messages,
                });
                output
            }
            ToolResponse::Interrupted(interrupt) => return Err(Waiting::Decision(interrupt)),
            ToolResponse::Suspended(suspended) => {
                return Err(Waiting::Work(tool_call_id, suspended));
            }
        },
        Ok(Err(error)) => ToolOutput::error(ToolError::from_boxed(error.into()).to_string()),
        Err(_panic) => {
            tracing::error!("tool panicked");
            ToolOutput::error(format!("tool `{name}` panicked"))
        }
    };
    Ok(Answered {
        result: Message::Tool {
            id: message_id,
            tool_call_id,
            content: output.content,
            is_error: output.is_error,
        },
        transcript,
    })
}

fn parse_arguments(text: &str) -> Result<serde_json::Value, ToolError> {
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| {
        ToolError::new(
            crate::tool::ToolErrorKind::InvalidArguments,
            format!("the arguments are not valid JSON: {e}"),
        )
    })
}

/// The model's view of the conversation: the agent's instructions, the run's context entries
/// (as a system message) and the state message first.
fn with_context(
    instructions: Option<&Message>,
    context: &[ContextEntry],
    state: Option<Message>,
    messages: &[Message],
) -> Vec<Message> {
    let mut all = Vec::with_capacity(messages.len() + 3);
    all.extend(instructions.cloned());
    if !context.is_empty() {
        let mut text = String::from("Context:");
        for entry in context {
            text.push_str(&format!("\n- {}: {}", entry.description, entry.value));
        }
        all.push(Message::system(text));
    }
    all.extend(state);
    // What the agents it called said and did is the thread's, not the model's: it has their
    // results.
    all.extend(
        messages
            .iter()
            .filter(|message| !matches!(message, Message::Subagent { .. }))
            .cloned(),
    );
    all
}
