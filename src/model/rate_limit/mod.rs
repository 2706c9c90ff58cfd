//! [`RateLimitLayer`]: at most so many requests and tokens a minute to one model.

use std::{
    collections::VecDeque,
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, ready},
    time::Duration,
};

use futures_core::Stream;
use futures_util::future::BoxFuture;
use pin_project_lite::pin_project;
use sync_wrapper::SyncWrapper;
use tokio::time::{Instant, Sleep};
use tower_layer::Layer;
use tower_service::Service;

use super::{
    ModelError, ModelErrorKind, ModelEvent, ModelObserver, ModelRequest, ModelService, Observer,
    WrapEvents,
};
use crate::BoxError;

const MINUTE: Duration = Duration::from_secs(60);

/// What the last minute used: one entry per request, one per usage reported.
#[derive(Debug, Default)]
struct Window {
    /// `(when, requests, tokens)`, oldest first.
    entries: VecDeque<(Instant, u32, u64)>,
    requests: u32,
    tokens: u64,
}

impl Window {
    fn forget_before(&mut self, now: Instant) {
        while let Some(&(at, requests, tokens)) = self.entries.front() {
            if now.duration_since(at) < MINUTE {
                break;
            }
            self.requests -= requests;
            self.tokens -= tokens;
            self.entries.pop_front();
        }
    }

    fn push(&mut self, now: Instant, requests: u32, tokens: u64) {
        self.entries.push_back((now, requests, tokens));
        self.requests += requests;
        self.tokens += tokens;
    }

    /// How long until a request fits under `limits`; zero when it fits now.
    fn wait(&self, now: Instant, limits: &Limits) -> Duration {
        // When enough of the oldest entries have left the window for the count to be under the
        // limit: the moment the last of them leaves.
        let until = |over: &dyn Fn(u32, u64) -> bool| {
            let (mut requests, mut tokens) = (self.requests, self.tokens);
            for &(at, r, t) in &self.entries {
                if !over(requests, tokens) {
                    break;
                }
                requests -= r;
                tokens -= t;
                if !over(requests, tokens) {
                    return (at + MINUTE).saturating_duration_since(now);
                }
            }
            Duration::ZERO
        };
        let requests = limits
            .requests
            .map_or(Duration::ZERO, |limit| until(&|r, _| r >= limit));
        let tokens = limits
            .tokens
            .map_or(Duration::ZERO, |limit| until(&|_, t| t >= limit));
        requests.max(tokens)
    }
}

/// What a model may be sent in any minute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MinuteLimits {
    /// Calls.
    pub requests: Option<u32>,
    /// Tokens, input and output.
    pub tokens: Option<u64>,
}

impl MinuteLimits {
    /// At most `requests` calls and `tokens` tokens a minute (`None`: no limit).
    #[must_use]
    pub fn new(requests: Option<u32>, tokens: Option<u64>) -> Self {
        Self { requests, tokens }
    }
}

#[derive(Debug, Clone, Copy)]
struct Limits {
    requests: Option<u32>,
    tokens: Option<u64>,
    max_wait: Duration,
}

impl Limits {
    fn minute(self) -> MinuteLimits {
        MinuteLimits {
            requests: self.requests,
            tokens: self.tokens,
        }
    }
}

/// Where a [`RateLimitLayer`] counts a model's calls and tokens of the last minute when
/// instances share them: a [`RunStore`](crate::store::RunStore) is one
/// ([`RateLimitLayer::shared`]). Without one, the layer counts in memory, for itself.
pub trait CallWindow: fmt::Debug + Send + Sync + 'static {
    /// Counts a call to `model` now if the calls and tokens of the last minute leave room under
    /// `limits`: `None`; else how long until there may be room (the call is not counted).
    ///
    /// # Errors
    ///
    /// The window could not be read or written; the call is refused (it fails closed).
    fn admit<'a>(
        &'a self,
        model: &'a str,
        limits: MinuteLimits,
    ) -> BoxFuture<'a, Result<Option<Duration>, BoxError>>;

    /// Counts `tokens` that a call to `model` used, now.
    ///
    /// # Errors
    ///
    /// The window could not be written (the tokens are not counted; the layer logs it).
    fn used<'a>(&'a self, model: &'a str, tokens: u64) -> BoxFuture<'a, Result<(), BoxError>>;
}

impl<W: CallWindow + ?Sized> CallWindow for Arc<W> {
    fn admit<'a>(
        &'a self,
        model: &'a str,
        limits: MinuteLimits,
    ) -> BoxFuture<'a, Result<Option<Duration>, BoxError>> {
        (**self).admit(model, limits)
    }

    fn used<'a>(&'a self, model: &'a str, tokens: u64) -> BoxFuture<'a, Result<(), BoxError>> {
        (**self).used(model, tokens)
    }
}

/// Where a layer counts: in memory, or in a window instances share, under the model's name.
#[derive(Debug, Clone)]
enum Counted {
    Here(Arc<Mutex<Window>>),
    Shared {
        window: Arc<dyn CallWindow>,
        model: Arc<str>,
    },
}

/// At most so many requests, and tokens (input and output, counted from the usage each step
/// reports), in any minute to the model it wraps. A request over a limit waits until it fits
/// (in `poll_ready`, holding nothing of the model's: see [`RateLimit`]) when that is within
/// [`max_wait`](Self::max_wait) (default 10 s), else fails at once with a
/// [`RateLimited`](ModelErrorKind::RateLimited) error carrying how long to wait (which
/// [`RetryPolicy`](super::RetryPolicy) honours, and a [`Fallback`](super::fallback::Fallback)
/// takes as a reason to ask the next model).
///
/// The count is shared by the layer's clones and the services it made: put one layer on each
/// model, where its provider's limits are.
///
/// ```
/// use std::time::Duration;
/// use agent_tower::model::{rate_limit::RateLimitLayer, scripted::ScriptedModel};
/// use tower::ServiceBuilder;
///
/// let model = ServiceBuilder::new()
///     .layer(
///         RateLimitLayer::new()
///             .requests_per_minute(500)
///             .tokens_per_minute(200_000)
///             .max_wait(Duration::from_secs(5)),
///     )
///     .service(ScriptedModel::new());
/// # let _ = model;
/// ```
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    limits: Limits,
    counted: Counted,
    observer: Observer,
}

impl Default for RateLimitLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl RateLimitLayer {
    /// No limit yet.
    #[must_use]
    pub fn new() -> Self {
        Self {
            limits: Limits {
                requests: None,
                tokens: None,
                max_wait: Duration::from_secs(10),
            },
            counted: Counted::Here(Arc::default()),
            observer: Observer::default(),
        }
    }

    /// Counts in `window`, which instances share (a [`RunStore`](crate::store::RunStore)),
    /// under `model`'s name (the same name on every instance: `openai:gpt-4.1`), instead of in
    /// this layer's memory: the limits then hold for all of them together. A window that fails
    /// refuses the call.
    #[must_use]
    pub fn shared(mut self, window: impl CallWindow, model: impl Into<Arc<str>>) -> Self {
        self.counted = Counted::Shared {
            window: Arc::new(window),
            model: model.into(),
        };
        self
    }

    /// Tells `observer` of each call held for room (and how long).
    #[must_use]
    pub fn observer(mut self, observer: impl ModelObserver) -> Self {
        self.observer = Observer::new(observer);
        self
    }

    /// At most `requests` calls in any minute.
    #[must_use]
    pub fn requests_per_minute(mut self, requests: u32) -> Self {
        self.limits.requests = Some(requests);
        self
    }

    /// At most `tokens` tokens in any minute.
    #[must_use]
    pub fn tokens_per_minute(mut self, tokens: u64) -> Self {
        self.limits.tokens = Some(tokens);
        self
    }

    /// The longest a request waits for room before it fails.
    #[must_use]
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.limits.max_wait = max_wait;
        self
    }

    fn here(window: &Mutex<Window>) -> MutexGuard<'_, Window> {
        window
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a request if it fits now: `Ready(Ok(()))`; else how long until it does; or the
    /// shared window's answer on its way.
    fn try_admit(&self) -> Admission {
        if self.is_unlimited() {
            return Admission::Now(Ok(()));
        }
        match &self.counted {
            Counted::Here(window) => {
                let now = Instant::now();
                let mut window = Self::here(window);
                window.forget_before(now);
                let wait = window.wait(now, &self.limits);
                if wait.is_zero() {
                    window.push(now, 1, 0);
                    Admission::Now(Ok(()))
                } else {
                    Admission::Now(Err(wait))
                }
            }
            Counted::Shared { window, model } => {
                let (window, model) = (window.clone(), model.clone());
                let limits = self.limits.minute();
                Admission::Asked(Box::pin(async move { window.admit(&model, limits).await }))
            }
        }
    }

    /// No limit: nothing is counted.
    fn is_unlimited(&self) -> bool {
        self.limits.requests.is_none() && self.limits.tokens.is_none()
    }

    fn count_tokens(&self, tokens: u64) {
        if self.is_unlimited() {
            return;
        }
        match &self.counted {
            Counted::Here(window) => Self::here(window).push(Instant::now(), 0, tokens),
            Counted::Shared { window, model } => {
                let (window, model) = (window.clone(), model.clone());
                // Counted whether or not the stream is still read.
                tokio::spawn(async move {
                    if let Err(error) = window.used(&model, tokens).await {
                        tracing::warn!(%error, %model, tokens, "a call's tokens were not counted against its rate limit");
                    }
                });
            }
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            limit: self.clone(),
            state: State::Waiting,
        }
    }
}

/// Whether a request fits: known now (a window in memory), or asked of a shared window.
enum Admission {
    Now(Result<(), Duration>),
    Asked(BoxFuture<'static, Result<Option<Duration>, BoxError>>),
}

/// Where a [`RateLimit`] is in readying its next request.
enum State {
    /// Its next request is not counted yet.
    Waiting,
    /// A shared window is asked whether it fits; since when it waits, if it waited already.
    Asking(
        SyncWrapper<BoxFuture<'static, Result<Option<Duration>, BoxError>>>,
        Option<Instant>,
    ),
    /// Waiting for room, until the deadline; since when it waits.
    Sleeping(Pin<Box<Sleep>>, Instant),
    /// Its next request is counted: the inner service is being readied for it.
    Admitted,
    /// Its next request would wait longer than allowed: it fails at once.
    Refused(ModelError),
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Waiting => "Waiting",
            Self::Asking(..) => "Asking",
            Self::Sleeping(..) => "Sleeping",
            Self::Admitted => "Admitted",
            Self::Refused(_) => "Refused",
        })
    }
}

/// The service of [`RateLimitLayer`].
///
/// Readiness follows `tower::limit::RateLimit`: `poll_ready` waits for room in the window
/// first (a timer, holding nothing), counts the request, and only then readies the inner
/// service, so no slot of the inner service is held while a request waits. A request that would
/// wait longer than [`max_wait`](RateLimitLayer::max_wait) is ready at once and fails
/// ([`RateLimited`](ModelErrorKind::RateLimited)) when called, as `tower::load_shed` does. A
/// clone shares the count, not the readiness: it starts unready.
#[derive(Debug)]
pub struct RateLimit<S> {
    inner: S,
    limit: RateLimitLayer,
    state: State,
}

impl<S: Clone> Clone for RateLimit<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            limit: self.limit.clone(),
            state: State::Waiting,
        }
    }
}

impl<S> RateLimit<S> {
    crate::inner_service!();
}

impl<S> Service<ModelRequest> for RateLimit<S>
where
    S: ModelService,
    S::Error: Into<BoxError>,
{
    type Response = RateLimitedStream<S::Events>;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            match &mut self.state {
                State::Waiting => {
                    self.state = match self.limit.try_admit() {
                        Admission::Now(fits) => self.limit.after(fits, None),
                        Admission::Asked(asked) => State::Asking(SyncWrapper::new(asked), None),
                    };
                }
                State::Asking(asked, since) => {
                    let since = *since;
                    self.state = match ready!(asked.get_mut().as_mut().poll(cx)) {
                        Ok(wait) => self.limit.after(wait.map_or(Ok(()), Err), since),
                        Err(error) => State::Refused(unwindowed(&error)),
                    };
                }
                State::Sleeping(sleep, since) => {
                    ready!(sleep.as_mut().poll(cx));
                    let since = *since;
                    self.state = match self.limit.try_admit() {
                        Admission::Now(fits) => self.limit.after(fits, Some(since)),
                        Admission::Asked(asked) => {
                            State::Asking(SyncWrapper::new(asked), Some(since))
                        }
                    };
                }
                State::Admitted => return self.inner.poll_ready(cx).map_err(Into::into),
                State::Refused(_) => return Poll::Ready(Ok(())),
            }
        }
    }

    fn call(&mut self, request: ModelRequest) -> Self::Future {
        match std::mem::replace(&mut self.state, State::Waiting) {
            State::Admitted => {
                future::ResponseFuture::admitted(self.inner.call(request), self.limit.clone())
            }
            State::Refused(error) => future::ResponseFuture::refused(error),
            State::Waiting | State::Asking(..) | State::Sleeping(..) => {
                future::ResponseFuture::refused(ModelError::new(
                    ModelErrorKind::Other,
                    "the rate-limited model was called before it was ready",
                ))
            }
        }
    }
}

impl RateLimitLayer {
    /// Where a request goes once it is known whether it `fits` (else how long until it may),
    /// having waited since `since`, if it waited.
    fn after(&self, fits: Result<(), Duration>, since: Option<Instant>) -> State {
        let waited = since.map_or(Duration::ZERO, |since| since.elapsed());
        match fits {
            Ok(()) => {
                if since.is_some() {
                    tracing::info!(
                        waited_ms = waited.as_millis(),
                        "a model call waited for room under its rate limit"
                    );
                    self.observer.held(waited);
                }
                State::Admitted
            }
            Err(wait) if waited + wait > self.limits.max_wait => State::Refused(rate_limited(wait)),
            Err(wait) => State::Sleeping(
                Box::pin(tokio::time::sleep(wait)),
                since.unwrap_or_else(Instant::now),
            ),
        }
    }
}

/// The error of a request whose shared window failed: refused (it fails closed).
fn unwindowed(error: &BoxError) -> ModelError {
    tracing::error!(%error, "a rate limit's shared window failed: the call is refused");
    ModelError::new(
        ModelErrorKind::Other,
        format!("the rate limit's window failed: {error}"),
    )
}

/// The error of a request that would wait `wait` for room.
fn rate_limited(wait: Duration) -> ModelError {
    ModelError::new(
        ModelErrorKind::RateLimited,
        format!("this model's rate limit is reached; room in {wait:?}"),
    )
    .with_retry_after(wait)
}

pub mod future {
    //! The response future of [`RateLimit`](super::RateLimit).

    /// The model's stream, counted against its tokens a minute; or the refusal of a request
    /// that would wait too long.
    pub type ResponseFuture<F> = crate::model::AdmitFuture<F, super::RateLimitLayer>;
}

impl<St> WrapEvents<St> for RateLimitLayer {
    type Stream = RateLimitedStream<St>;

    fn wrap(self, events: St) -> Self::Stream {
        RateLimitedStream {
            inner: events,
            limit: self,
        }
    }
}

pin_project! {
    /// A model stream whose usage counts against its model's tokens a minute; see
    /// [`RateLimitLayer`].
    #[derive(Debug)]
    pub struct RateLimitedStream<St> {
        #[pin]
        inner: St,
        limit: RateLimitLayer,
    }
}

impl<St: Stream<Item = Result<ModelEvent, E>>, E> Stream for RateLimitedStream<St> {
    type Item = Result<ModelEvent, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let item = ready!(this.inner.poll_next(cx));
        if let Some(Ok(ModelEvent::Usage(usage))) = &item {
            this.limit.count_tokens(usage.total_tokens());
        }
        Poll::Ready(item)
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use tower::ServiceExt;

    use super::*;
    use crate::model::{BoxModel, BoxModelStream, FinishReason, Usage, boxed, test_request};

    /// A model whose every step uses `tokens` tokens.
    fn model(tokens: u64) -> BoxModel {
        boxed(tower::service_fn(move |_: ModelRequest| async move {
            let usage = Usage {
                output_tokens: tokens,
                ..Usage::default()
            };
            Ok::<_, ModelError>(futures_util::stream::iter([
                Ok::<_, ModelError>(ModelEvent::Usage(usage)),
                Ok(ModelEvent::Finish(FinishReason::Stop)),
            ]))
        }))
    }

    async fn step(limited: &RateLimit<BoxModel>) -> Result<Duration, BoxError> {
        let started = Instant::now();
        let events: Vec<_> = limited
            .clone()
            .oneshot(test_request())
            .await?
            .collect()
            .await;
        assert_eq!(events.len(), 2);
        Ok(started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_over_the_limit_waits_for_the_oldest_to_leave_the_minute() {
        let limited = RateLimitLayer::new()
            .requests_per_minute(2)
            .max_wait(MINUTE)
            .layer(model(1));
        assert_eq!(step(&limited).await.unwrap(), Duration::ZERO);
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(step(&limited).await.unwrap(), Duration::ZERO);
        // The first request leaves the window 60 s after it came, 40 s from now.
        assert_eq!(step(&limited).await.unwrap(), Duration::from_secs(40));
    }

    /// One request through `limited` to the mock model behind it, answered.
    async fn answered(
        limited: &mut RateLimit<tower_test::mock::Mock<ModelRequest, BoxModelStream>>,
        handle: &mut tower_test::mock::Handle<ModelRequest, BoxModelStream>,
    ) {
        handle.allow(1);
        let call = tokio::spawn(limited.ready().await.unwrap().call(test_request()));
        let (_, respond) = handle.next_request().await.unwrap();
        respond.send_response(Box::pin(futures_util::stream::empty()));
        assert!(call.await.unwrap().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waiting_for_room_holds_nothing_of_the_model() {
        let (mock, mut handle) = tower_test::mock::pair::<ModelRequest, BoxModelStream>();
        let limit = RateLimitLayer::new()
            .requests_per_minute(1)
            .max_wait(MINUTE);
        let mut first = limit.layer(mock.clone());
        let mut second = limit.layer(mock);
        answered(&mut first, &mut handle).await;

        // The model is ready, but the minute is full: the second request waits, unready, and
        // the model is not asked to be ready for it until there is room.
        handle.allow(1);
        let mut ready = tokio_test::task::spawn(second.ready());
        assert!(ready.poll().is_pending());
        tokio::time::advance(MINUTE - Duration::from_millis(1)).await;
        assert!(ready.poll().is_pending());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(ready.is_woken());
        assert!(matches!(ready.poll(), Poll::Ready(Ok(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_over_its_wait_is_ready_and_refused() {
        let (mock, mut handle) = tower_test::mock::pair::<ModelRequest, BoxModelStream>();
        let limit = RateLimitLayer::new().requests_per_minute(1);
        let mut service = limit.layer(mock);
        answered(&mut service, &mut handle).await;
        // A minute to wait, 10 s allowed: refused at once, the model never asked.
        let error = service
            .ready()
            .await
            .unwrap()
            .call(test_request())
            .await
            .err()
            .unwrap();
        let error = error.downcast_ref::<ModelError>().unwrap();
        assert_eq!(error.kind(), ModelErrorKind::RateLimited);
        assert_eq!(error.retry_after(), Some(MINUTE));
        handle.allow(0);
        assert!(
            tokio_test::task::spawn(handle.next_request())
                .poll()
                .is_pending(),
            "no request reached the model"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_count_from_the_usage_and_a_long_wait_fails_with_its_hint() {
        let limited = RateLimitLayer::new()
            .tokens_per_minute(1_000)
            .max_wait(Duration::from_secs(5))
            .layer(model(600));
        step(&limited).await.unwrap();
        step(&limited).await.unwrap();
        let error = step(&limited).await.unwrap_err();
        let error = error.downcast_ref::<ModelError>().unwrap();
        assert_eq!(error.kind(), ModelErrorKind::RateLimited);
        assert_eq!(error.retry_after(), Some(MINUTE), "1,200 of 1,000 tokens");
        tokio::time::advance(MINUTE).await;
        assert_eq!(step(&limited).await.unwrap(), Duration::ZERO);
    }

    /// A window in memory that instances would share, answering after a turn of the runtime,
    /// or failing.
    #[derive(Debug, Default)]
    struct Shared {
        calls: Mutex<Vec<(Instant, u32, u64)>>,
        down: std::sync::atomic::AtomicBool,
    }

    impl CallWindow for Shared {
        fn admit<'a>(
            &'a self,
            _model: &'a str,
            limits: MinuteLimits,
        ) -> BoxFuture<'a, Result<Option<Duration>, BoxError>> {
            Box::pin(async move {
                tokio::task::yield_now().await;
                if self.down.load(std::sync::atomic::Ordering::SeqCst) {
                    return Err("the store is down".into());
                }
                let mut calls = self.calls.lock().unwrap();
                let requests: u32 = calls.iter().map(|c| c.1).sum();
                if limits.requests.is_some_and(|limit| requests >= limit) {
                    return Ok(Some(MINUTE));
                }
                calls.push((Instant::now(), 1, 0));
                Ok(None)
            })
        }

        fn used<'a>(&'a self, _model: &'a str, tokens: u64) -> BoxFuture<'a, Result<(), BoxError>> {
            Box::pin(async move {
                self.calls.lock().unwrap().push((Instant::now(), 0, tokens));
                Ok(())
            })
        }
    }

    #[tokio::test]
    async fn layers_sharing_a_window_count_together_and_a_failing_window_refuses() {
        let shared = Arc::new(Shared::default());
        let instance = || {
            RateLimitLayer::new()
                .requests_per_minute(2)
                .shared(shared.clone(), "openai:m")
                .layer(model(10))
        };
        let (one, two) = (instance(), instance());
        step(&one).await.unwrap();
        step(&two).await.unwrap();
        let error = step(&one).await.unwrap_err();
        let error = error.downcast_ref::<ModelError>().unwrap();
        assert_eq!(
            error.kind(),
            ModelErrorKind::RateLimited,
            "the third of the minute"
        );
        let used: u64 = shared.calls.lock().unwrap().iter().map(|c| c.2).sum();
        assert_eq!(used, 20, "both calls' tokens counted");

        shared.calls.lock().unwrap().clear();
        shared.down.store(true, std::sync::atomic::Ordering::SeqCst);
        let error = step(&two).await.unwrap_err();
        assert!(error.to_string().contains("the store is down"), "{error}");
    }
}
