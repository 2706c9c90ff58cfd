use std::{
    fmt,
    sync::{Arc, Mutex, PoisonError},
};

use futures_util::task::AtomicWaker;
use serde_json::Value;

/// A long-running tool's progress report channel, found in its call's
/// [`extensions`](crate::context::RunContext::extensions) when a layer shows progress (AG-UI
/// activities, ACP tool call updates). The latest report wins: a UI needs where the tool is, not
/// every step it took.
///
/// ```
/// use agent_tower::tool::{Progress, ToolCall};
/// use serde_json::json;
///
/// fn report(call: &ToolCall, done: u32, of: u32) {
///     if let Some(progress) = call.run.extensions.get::<Progress>() {
///         progress.report(json!({"done": done, "of": of}));
///     }
/// }
/// report(&ToolCall::new("index", json!({})), 1, 10); // no layer listening: nothing happens
/// ```
#[derive(Clone, Default)]
pub struct Progress(Arc<Inner>);

#[derive(Default)]
struct Inner {
    latest: Mutex<Option<Value>>,
    waker: AtomicWaker,
}

impl Progress {
    /// A channel nobody listens to yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Reports where the tool is (any JSON; an object is usual).
    pub fn report(&self, progress: Value) {
        *self.0.latest.lock().unwrap_or_else(PoisonError::into_inner) = Some(progress);
        self.0.waker.wake();
    }

    /// The latest report not yet taken; the task is woken at the next report.
    #[cfg(any(feature = "agui", feature = "acp"))]
    pub(crate) fn poll_take(&self, cx: &mut std::task::Context<'_>) -> Option<Value> {
        self.0.waker.register(cx.waker());
        self.0
            .latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Progress").finish_non_exhaustive()
    }
}
