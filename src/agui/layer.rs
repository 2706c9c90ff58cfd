use std::{fmt, str::FromStr, sync::Arc};

use serde::{Deserialize, Serialize};
use tower_layer::Layer;

use super::{Agui, Event};
use crate::{
    context::Extensions,
    id::{RunId, ThreadId},
    transport::{Channel, OnDisconnect},
};

/// Which `STATE_SNAPSHOT`s a run emits (only when it has a state).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateSnapshots {
    /// One right after `RUN_STARTED`.
    #[default]
    Initial,
    /// One right before the terminal event.
    Final,
    /// Both.
    All,
    /// None.
    None,
}

impl StateSnapshots {
    pub(crate) fn initial(self) -> bool {
        matches!(self, Self::Initial | Self::All)
    }

    pub(crate) fn last(self) -> bool {
        matches!(self, Self::Final | Self::All)
    }
}

impl FromStr for StateSnapshots {
    type Err = error::ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "initial" => Ok(Self::Initial),
            "final" => Ok(Self::Final),
            "all" => Ok(Self::All),
            "none" => Ok(Self::None),
            other => Err(error::ConfigError::new(format!(
                "state snapshots must be one of initial, final, all, none; got `{other}`"
            ))),
        }
    }
}

/// Emission options, each optional so that several sources can be layered.
///
/// # Precedence
///
/// For every field, the first source that sets it wins:
///
/// 1. the run's context: an `AguiOptions` in [`RunContext::extensions`](crate::context::RunContext)
///    (set by the server code that starts the run);
/// 2. the request: `forwardedProps.agui` of the AG-UI input (what the client asked for);
/// 3. the layer's defaults ([`AguiLayer::options`]);
/// 4. the built-in defaults: initial state snapshot, tool results on, activities off, messages
///    snapshot on, ids from the run.
///
/// Options given to the layer are validated when the layer is built; options in a request are
/// validated when the run starts, and a bad value ends that run with a `RUN_ERROR`
/// (code `invalid_options`) before anything else happens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AguiOptions {
    /// Which state snapshots to emit.
    pub state_snapshots: Option<StateSnapshots>,
    /// Emit `TOOL_CALL_RESULT` for tools the server runs.
    pub tool_results: Option<bool>,
    /// Emit `ACTIVITY_SNAPSHOT`s while a tool runs (running, then completed / failed / cancelled).
    pub activities: Option<bool>,
    /// Emit `MESSAGES_SNAPSHOT` before `RUN_FINISHED`.
    pub messages_snapshot: Option<bool>,
    /// The thread id to put on run events instead of the run's own.
    pub thread_id: Option<ThreadId>,
    /// The run id to put on run events instead of the run's own.
    pub run_id: Option<RunId>,
}

impl AguiOptions {
    /// Checks values a type cannot rule out (empty ids).
    pub fn validate(&self) -> Result<(), error::ConfigError> {
        if self.thread_id.as_deref() == Some("") {
            return Err(error::ConfigError::new("thread id override is empty"));
        }
        if self.run_id.as_deref() == Some("") {
            return Err(error::ConfigError::new("run id override is empty"));
        }
        Ok(())
    }

    /// Fills the fields `self` leaves unset from `fallback`.
    #[must_use]
    pub fn or(self, fallback: &AguiOptions) -> AguiOptions {
        AguiOptions {
            state_snapshots: self.state_snapshots.or(fallback.state_snapshots),
            tool_results: self.tool_results.or(fallback.tool_results),
            activities: self.activities.or(fallback.activities),
            messages_snapshot: self.messages_snapshot.or(fallback.messages_snapshot),
            thread_id: self.thread_id.or_else(|| fallback.thread_id.clone()),
            run_id: self.run_id.or_else(|| fallback.run_id.clone()),
        }
    }

    /// The options in force for a step: the run's over the layer's.
    pub(crate) fn resolve(layer: &AguiOptions, extensions: &Extensions) -> AguiOptions {
        match extensions.get::<AguiOptions>() {
            Some(run) => run.clone().or(layer),
            None => layer.clone(),
        }
    }

    pub(crate) fn state_snapshots(&self) -> StateSnapshots {
        self.state_snapshots.unwrap_or_default()
    }

    pub(crate) fn tool_results(&self) -> bool {
        self.tool_results.unwrap_or(true)
    }

    pub(crate) fn activities(&self) -> bool {
        self.activities.unwrap_or(false)
    }

    pub(crate) fn messages_snapshot(&self) -> bool {
        self.messages_snapshot.unwrap_or(true)
    }
}

/// One entry of a CUSTOM `PredictState` event: the UI mirrors `tool_argument` of `tool`'s
/// streaming arguments into `state_key` of its state, before the tool runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prediction {
    /// The state key the argument mirrors.
    pub state_key: String,
    /// The tool.
    pub tool: String,
    /// The tool's argument.
    pub tool_argument: String,
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) options: AguiOptions,
    pub(crate) on_disconnect: OnDisconnect,
    pub(crate) predictions: Arc<[Prediction]>,
}

/// Emits AG-UI events for model steps, tool calls and whole runs; see the [module docs](super).
///
/// A run's events go to the run's own AG-UI sink (a `Channel<Event>` in its
/// [`Sinks`](crate::context::Sinks), what a server sets for each request) when it has one, else to the layer's default transport `T`
/// (set with [`transport`](AguiLayer::transport)); with neither, nothing is emitted.
#[must_use]
pub struct AguiLayer<T = Channel<Event>> {
    transport: Option<T>,
    config: Arc<Config>,
}

impl AguiLayer {
    /// A layer that emits to the run's own [`Channel`] transport.
    pub fn new() -> Self {
        Self {
            transport: None,
            config: Arc::new(Config {
                options: AguiOptions::default(),
                on_disconnect: OnDisconnect::default(),
                predictions: Arc::new([]),
            }),
        }
    }
}

impl Default for AguiLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> AguiLayer<T> {
    /// Emits to `transport` the events of runs that bring no AG-UI sink of their own.
    pub fn transport<U>(self, transport: U) -> AguiLayer<U> {
        AguiLayer {
            transport: Some(transport),
            config: self.config,
        }
    }

    /// Sets the layer's default options (see [`AguiOptions`] for precedence).
    ///
    /// # Errors
    ///
    /// When an option is invalid (an empty id override).
    pub fn options(mut self, options: AguiOptions) -> Result<Self, error::ConfigError> {
        options.validate()?;
        self.config_mut().options = options;
        Ok(self)
    }

    /// What to do when the transport closes (default: cancel the run). A run may bring its own
    /// [`OnDisconnect`] in its [`Sinks`](crate::context::Sinks), which wins.
    pub fn on_disconnect(mut self, policy: OnDisconnect) -> Self {
        self.config_mut().on_disconnect = policy;
        self
    }

    /// Predictive state: before a call of `tool` streams, a CUSTOM `PredictState` event tells the
    /// UI to mirror its argument `tool_argument` into the state key `state_key`.
    pub fn predict_state(mut self, tool: &str, tool_argument: &str, state_key: &str) -> Self {
        let config = self.config_mut();
        let mut predictions = config.predictions.to_vec();
        predictions.push(Prediction {
            state_key: state_key.to_owned(),
            tool: tool.to_owned(),
            tool_argument: tool_argument.to_owned(),
        });
        config.predictions = predictions.into();
        self
    }

    fn config_mut(&mut self) -> &mut Config {
        // Copy on write: a layer configured after it was cloned changes only itself.
        Arc::make_mut(&mut self.config)
    }
}

impl<T: Clone> Clone for AguiLayer<T> {
    fn clone(&self) -> Self {
        Self {
            transport: self.transport.clone(),
            config: self.config.clone(),
        }
    }
}

impl<T> fmt::Debug for AguiLayer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AguiLayer")
            .field("transport", &std::any::type_name::<T>())
            .field("has_default_transport", &self.transport.is_some())
            .field("config", &self.config)
            .finish()
    }
}

impl<S, T: Clone> Layer<S> for AguiLayer<T> {
    type Service = Agui<S, T>;

    fn layer(&self, inner: S) -> Self::Service {
        Agui::new(inner, self.transport.clone(), self.config.clone())
    }
}

/// Configuration errors.
pub mod error {
    use std::fmt;

    /// An option had a value that can never work.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConfigError {
        message: String,
    }

    impl ConfigError {
        pub(crate) fn new(message: impl Into<String>) -> Self {
            Self {
                message: message.into(),
            }
        }
    }

    impl fmt::Display for ConfigError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "invalid AG-UI option: {}", self.message)
        }
    }

    impl std::error::Error for ConfigError {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_fail_at_construction() {
        assert!("sometimes".parse::<StateSnapshots>().is_err());
        let bad = AguiOptions {
            thread_id: Some("".into()),
            ..AguiOptions::default()
        };
        assert!(AguiLayer::new().options(bad).is_err());
    }

    #[test]
    fn run_options_win_over_layer_options() {
        let layer = AguiOptions {
            tool_results: Some(false),
            activities: Some(true),
            ..AguiOptions::default()
        };
        let mut ext = Extensions::new();
        ext.insert(AguiOptions {
            tool_results: Some(true),
            ..AguiOptions::default()
        });
        let resolved = AguiOptions::resolve(&layer, &ext);
        assert!(resolved.tool_results());
        assert!(resolved.activities());
        assert!(resolved.messages_snapshot(), "built-in default");
    }
}
