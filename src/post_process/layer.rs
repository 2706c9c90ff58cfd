use std::{fmt, sync::Arc};

use tower_layer::Layer;

use super::{PostProcess, is_safe};

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) key: String,
    pub(crate) max_text: usize,
    pub(crate) when: fn(&str) -> bool,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("key", &self.key)
            .field("max_text", &self.max_text)
            .finish_non_exhaustive()
    }
}

/// Post-processes whole assistant messages; see the [module docs](super).
#[must_use]
pub struct PostProcessLayer<P> {
    processor: P,
    config: Arc<Config>,
}

impl<P> PostProcessLayer<P> {
    /// Runs `processor` on each message; findings go under `/<key>` in the shared state.
    ///
    /// # Errors
    ///
    /// When `key` is empty or one of `__proto__`, `constructor`, `prototype`.
    pub fn new(key: &str, processor: P) -> Result<Self, error::ConfigError> {
        if key.is_empty() || !is_safe(key) {
            return Err(error::ConfigError(format!(
                "`{key}` cannot be a state key for post-processing"
            )));
        }
        Ok(Self {
            processor,
            config: Arc::new(Config {
                key: key.to_owned(),
                max_text: 1024 * 1024,
                when: |_| true,
            }),
        })
    }

    /// The longest message text processed (default 1 MiB); longer ones get `too_large`.
    pub fn max_text(mut self, bytes: usize) -> Self {
        self.config_mut().max_text = bytes;
        self
    }

    /// Processes only the messages whose whole text satisfies `when` (default: all); the others
    /// leave no trace in the state.
    pub fn when(mut self, when: fn(&str) -> bool) -> Self {
        self.config_mut().when = when;
        self
    }

    fn config_mut(&mut self) -> &mut Config {
        // Copy on write: a layer configured after it was cloned changes only itself.
        Arc::make_mut(&mut self.config)
    }
}

impl<P: Clone> Clone for PostProcessLayer<P> {
    fn clone(&self) -> Self {
        Self {
            processor: self.processor.clone(),
            config: self.config.clone(),
        }
    }
}

impl<P> fmt::Debug for PostProcessLayer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostProcessLayer")
            .field("processor", &std::any::type_name::<P>())
            .field("config", &self.config)
            .finish()
    }
}

impl<S, P: Clone> Layer<S> for PostProcessLayer<P> {
    type Service = PostProcess<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        PostProcess::new(inner, self.processor.clone(), self.config.clone())
    }
}

/// Configuration errors.
pub mod error {
    use std::fmt;

    /// A state key that cannot work.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConfigError(pub(super) String);

    impl fmt::Display for ConfigError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.pad(&self.0)
        }
    }

    impl std::error::Error for ConfigError {}
}
