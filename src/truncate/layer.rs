use std::{fmt, sync::Arc};

use tower_layer::Layer;

use super::Truncate;

/// How a JSON result too large for the UI is shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum JsonDisplay {
    /// Its text, cut, with a marker saying how much was cut.
    #[default]
    Truncate,
    /// A summary: the type, the size and (for an object) the top-level keys with their shapes.
    Summarize,
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) max_ui_payload: usize,
    pub(crate) max_delta: usize,
    pub(crate) json: JsonDisplay,
}

/// Bounds what a UI receives: tool results cut (or summarised) for display, large deltas split.
/// See the [module docs](super).
#[derive(Clone)]
#[must_use]
pub struct TruncateLayer {
    config: Arc<Config>,
}

/// The smallest UI payload: room for a marker and some text.
pub const MIN_UI_PAYLOAD: usize = 64;
/// The smallest delta: one character of any size.
pub const MIN_DELTA: usize = 4;

impl TruncateLayer {
    /// Results shown up to 50 KiB, deltas split above 16 KiB, JSON truncated.
    pub fn new() -> Self {
        Self {
            config: Arc::new(Config {
                max_ui_payload: 50 * 1024,
                max_delta: 16 * 1024,
                json: JsonDisplay::Truncate,
            }),
        }
    }

    /// The most bytes of a tool result a UI receives, marker included.
    ///
    /// # Errors
    ///
    /// Below [`MIN_UI_PAYLOAD`].
    pub fn max_ui_payload(mut self, bytes: usize) -> Result<Self, error::ConfigError> {
        if bytes < MIN_UI_PAYLOAD {
            return Err(error::ConfigError(format!(
                "max_ui_payload must be at least {MIN_UI_PAYLOAD} bytes, got {bytes}"
            )));
        }
        self.config_mut().max_ui_payload = bytes;
        Ok(self)
    }

    /// The largest text, reasoning or tool-argument delta passed on in one piece.
    ///
    /// # Errors
    ///
    /// Below [`MIN_DELTA`].
    pub fn max_delta(mut self, bytes: usize) -> Result<Self, error::ConfigError> {
        if bytes < MIN_DELTA {
            return Err(error::ConfigError(format!(
                "max_delta must be at least {MIN_DELTA} bytes, got {bytes}"
            )));
        }
        self.config_mut().max_delta = bytes;
        Ok(self)
    }

    /// How a JSON result over the limit is shown.
    pub fn json(mut self, display: JsonDisplay) -> Self {
        self.config_mut().json = display;
        self
    }

    fn config_mut(&mut self) -> &mut Config {
        // Copy on write: a layer configured after it was cloned changes only itself.
        Arc::make_mut(&mut self.config)
    }
}

impl Default for TruncateLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for TruncateLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TruncateLayer")
            .field("config", &self.config)
            .finish()
    }
}

impl<S> Layer<S> for TruncateLayer {
    type Service = Truncate<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Truncate::new(inner, self.config.clone())
    }
}

/// Configuration errors.
pub mod error {
    use std::fmt;

    /// A limit too small to work.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConfigError(pub(super) String);

    impl fmt::Display for ConfigError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "invalid truncation setting: {}", self.0)
        }
    }

    impl std::error::Error for ConfigError {}
}
