use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicU8, Ordering},
    },
    task::{Context, Poll},
};

use futures_util::task::AtomicWaker;

const FREE: u8 = 0;
const HELD: u8 = 1;
const STARTED: u8 = 2;

/// Tells a layer in front of a tool when the call really starts running, found in the call's
/// [`extensions`](crate::context::RunContext::extensions) when a layer wants to know (the ACP layer
/// moves a tool call from `pending` to `in_progress` with it).
///
/// A layer that holds a call back before it runs (the [permission
/// layer](crate::permission) while a person decides) calls [`hold`](Started::hold) in its `call`,
/// and [`start`](Started::start) once the call may run. A call nobody holds counts as started as
/// soon as it is made.
///
/// ```
/// use agent_tower::tool::Started;
/// use std::task::{Context, Waker};
///
/// let started = Started::new();
/// let mut cx = Context::from_waker(Waker::noop());
/// started.hold();
/// assert!(started.poll_started(&mut cx).is_pending());
/// started.start();
/// assert!(started.poll_started(&mut cx).is_ready());
/// ```
#[derive(Clone, Default)]
pub struct Started(Arc<Inner>);

#[derive(Default)]
struct Inner {
    state: AtomicU8,
    waker: AtomicWaker,
}

impl Started {
    /// A signal for a call nobody holds yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Holds the call back: it has not started until [`start`](Started::start).
    pub fn hold(&self) {
        let _ = self
            .0
            .state
            .compare_exchange(FREE, HELD, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The held call runs now.
    pub fn start(&self) {
        self.0.state.store(STARTED, Ordering::Release);
        self.0.waker.wake();
    }

    /// Whether the call runs: it was never held, or it was started.
    #[must_use]
    pub fn is_started(&self) -> bool {
        self.0.state.load(Ordering::Acquire) != HELD
    }

    /// `Ready` once the call runs; registers the task to be woken when a held call starts.
    pub fn poll_started(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_started() {
            return Poll::Ready(());
        }
        self.0.waker.register(cx.waker());
        if self.is_started() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl fmt::Debug for Started {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Started")
            .field("started", &self.is_started())
            .finish()
    }
}
