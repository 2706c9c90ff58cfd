//! One place where errors get their meaning: [`MapErrorLayer`], [`ErrorClass`], [`ClassifyError`].
//!
//! Errors travel through a stack untouched (tower's own, [`ModelError`](crate::model::ModelError),
//! [`ToolError`](crate::tool::ToolError), yours); at the edge, this layer classifies each into an
//! [`ErrorClass`] (kind, retryable, message, chain) with a [`ClassifyError`] that looks at types,
//! never at message text, and wraps it in [`Classified`] with the configured [`Detail`]. The
//! emitting layers render that: AG-UI `RUN_ERROR` `code`/`message`
//! ([`ErrorClass::run_error`]), ACP stop reasons or JSON-RPC errors ([`ErrorClass::acp`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use agent_tower::agui::{AguiLayer, Event};
//! use agent_tower::map_error::{Detail, MapErrorLayer};
//! use agent_tower::model::{ModelError, ModelErrorKind};
//! use agent_tower::run::{RunOutcome, RunRequest};
//! use agent_tower::transport::Recording;
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! // An agent that fails with a provider error carrying a secret in its cause.
//! let agent = service_fn(|_: RunRequest| async {
//!     Err::<RunOutcome, _>(ModelError::new(ModelErrorKind::RateLimited, "slow down")
//!         .with_source(std::io::Error::other("key sk-123 over quota")))
//! });
//! let ui = Recording::new();
//! let agent = ServiceBuilder::new()
//!     .layer(AguiLayer::new().transport(ui.clone()))
//!     .layer(MapErrorLayer::new().detail(Detail::Code))
//!     .service(agent);
//! let _ = agent.oneshot(RunRequest::new(vec![])).await;
//!
//! let Some(Event::RunError(error)) = ui.events().pop() else { unreachable!() };
//! assert_eq!(error.code.as_deref(), Some("rate_limited"));
//! assert_eq!(error.message, "The model is busy; try again shortly.");
//! # }
//! ```
//!
//! # When it acts
//!
//! - Around an agent (`Service<RunRequest>`) or a model (`Service<ModelRequest>`, its call and its
//!   stream's items): every error becomes a [`Classified`] (a `BoxError` callers can downcast).
//! - Around a tool (`Service<ToolCall>`): a failure becomes an error *result* the model reads
//!   (rendered at the configured detail), never a run error.
//!
//! Without this layer, [`AguiLayer`](crate::agui::AguiLayer) classifies with the
//! [`DefaultClassifier`] at [`Detail::Message`].
//!
//! # Retrying
//!
//! [`ErrorClass::retryable`] is what a `tower::retry::Policy` should look at; see
//! `examples/reuse_in_tower_app.rs`, which retries rate-limited and transport errors with backoff,
//! before the first token only.

mod class;
pub mod future;
mod layer;
mod render;
mod service;
mod stream;

use std::{error::Error as StdError, fmt, sync::Arc};

pub use self::{
    class::{ClassifyError, DefaultClassifier, ErrorClass, ErrorKind},
    layer::MapErrorLayer,
    render::{AcpAnswer, AcpStopReason, Detail},
    service::MapError,
    stream::ResponseStream,
};
use crate::BoxError;

pub(crate) use self::class::find;

/// An error with its class and the detail the client may see. Its `source` is the original error.
#[derive(Debug)]
pub struct Classified {
    class: ErrorClass,
    detail: Detail,
    source: BoxError,
}

impl Classified {
    /// The class.
    #[must_use]
    pub fn class(&self) -> &ErrorClass {
        &self.class
    }

    /// The detail the client may see.
    #[must_use]
    pub fn detail(&self) -> Detail {
        self.detail
    }

    /// The AG-UI `RUN_ERROR` code and message.
    #[must_use]
    pub fn run_error(&self) -> (Option<String>, String) {
        self.class.run_error(self.detail)
    }
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.class.message)
    }
}

impl StdError for Classified {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

/// The AG-UI `RUN_ERROR` code and message for any error: its [`Classified`] rendering if it has
/// one, else the [`DefaultClassifier`]'s at [`Detail::Message`].
#[must_use]
pub fn run_error(error: &(dyn StdError + 'static)) -> (Option<String>, String) {
    match find::<Classified>(error) {
        Some(classified) => classified.run_error(),
        None => DefaultClassifier::new()
            .classify(error)
            .run_error(Detail::Message),
    }
}

/// How an ACP `session/prompt` answers any error: its [`Classified`] rendering if it has one,
/// else the [`DefaultClassifier`]'s at [`Detail::Message`].
#[must_use]
pub fn acp_answer(error: &(dyn StdError + 'static)) -> AcpAnswer {
    match find::<Classified>(error) {
        Some(classified) => classified.class.acp(classified.detail),
        None => DefaultClassifier::new()
            .classify(error)
            .acp(Detail::Message),
    }
}

/// Classifies with `C` and keeps the detail level.
pub(crate) struct Mapper<C> {
    pub(crate) classifier: Arc<C>,
    pub(crate) detail: Detail,
}

impl<C> Clone for Mapper<C> {
    fn clone(&self) -> Self {
        Self {
            classifier: self.classifier.clone(),
            detail: self.detail,
        }
    }
}

impl<C: ClassifyError> Mapper<C> {
    pub(crate) fn classified(&self, error: BoxError) -> BoxError {
        if error.is::<Classified>() {
            return error;
        }
        let class = self.classifier.classify(&*error);
        Box::new(Classified {
            class,
            detail: self.detail,
            source: error,
        })
    }
}

impl<C> fmt::Debug for Mapper<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mapper")
            .field("classifier", &std::any::type_name::<C>())
            .field("detail", &self.detail)
            .finish()
    }
}
