use std::{fmt, sync::Arc};

use tower_layer::Layer;

use super::{Acp, Notifier, tool_call::Kinds};
use crate::{tool::ToolSpec, transport::OnDisconnect};

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) kinds: Kinds,
    pub(crate) context_window: u64,
    pub(crate) on_disconnect: OnDisconnect,
}

/// Sends ACP session updates for model steps and tool calls; see the [module docs](super).
///
/// A turn's updates go to its own [`Notifier`] (in its [`Sinks`](crate::context::Sinks), what
/// the ACP agent sets for each turn) when it has one, else to the layer's default transport `T` (set
/// with [`transport`](AcpLayer::transport)); with neither, nothing is sent.
#[must_use]
pub struct AcpLayer<T = Notifier> {
    transport: Option<T>,
    config: Arc<Config>,
}

impl AcpLayer {
    /// A layer that sends to the turn's own [`Notifier`].
    pub fn new() -> Self {
        Self {
            transport: None,
            config: Arc::new(Config {
                kinds: Kinds::default(),
                context_window: 128_000,
                on_disconnect: OnDisconnect::Cancel,
            }),
        }
    }
}

impl Default for AcpLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> AcpLayer<T> {
    /// Sends to `transport` the updates of turns that bring no notifier of their own.
    pub fn transport<U>(self, transport: U) -> AcpLayer<U> {
        AcpLayer {
            transport: Some(transport),
            config: self.config,
        }
    }

    /// Learns the kinds of these tools (`read`, `edit`, `execute`…), shown by editors next to each
    /// call; tools it does not know get a kind guessed from their name.
    pub fn tools(mut self, specs: &[ToolSpec]) -> Self {
        self.config_mut().kinds.learn(specs);
        self
    }

    /// The model's context window in tokens, the `size` of `usage_update`s (default 128 000).
    pub fn context_window(mut self, tokens: u64) -> Self {
        self.config_mut().context_window = tokens;
        self
    }

    /// What to do when the client is gone (default: cancel the turn).
    pub fn on_disconnect(mut self, policy: OnDisconnect) -> Self {
        self.config_mut().on_disconnect = policy;
        self
    }

    fn config_mut(&mut self) -> &mut Config {
        // Copy on write: a layer configured after it was cloned changes only itself.
        Arc::make_mut(&mut self.config)
    }
}

impl<T: Clone> Clone for AcpLayer<T> {
    fn clone(&self) -> Self {
        Self {
            transport: self.transport.clone(),
            config: self.config.clone(),
        }
    }
}

impl<T> fmt::Debug for AcpLayer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcpLayer")
            .field("transport", &std::any::type_name::<T>())
            .field("has_default_transport", &self.transport.is_some())
            .field("config", &self.config)
            .finish()
    }
}

impl<S, T: Clone> Layer<S> for AcpLayer<T> {
    type Service = Acp<S, T>;

    fn layer(&self, inner: S) -> Self::Service {
        Acp::new(inner, self.transport.clone(), self.config.clone())
    }
}
