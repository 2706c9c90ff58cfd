//! [`ToolRouter`]: dispatches a [`ToolCall`] to the tool service registered under its name.

use std::{collections::BTreeMap, fmt, sync::Arc};

use tower::util::{BoxCloneSyncService, Oneshot, ServiceExt};
use tower_service::Service;

use super::{Rerun, Tool, ToolCall, ToolError, ToolOutput, ToolReply, ToolResponse, ToolSpec};
use crate::BoxError;

type BoxTool = BoxCloneSyncService<ToolCall, ToolResponse, ToolError>;

/// Routes tool calls by name.
///
/// A router answers a [`ToolResponse`]: its tools answer a [`ToolOutput`], or,
/// when their work may stop at interrupts (an [agent called as a
/// tool](crate::subagent::AgentTool)), a [`ToolResponse`].
///
/// # Readiness
///
/// A router cannot know which tool the next call needs, so `poll_ready` is always ready and each
/// call drives its own tool's readiness: the tool service is cloned and called with
/// [`ServiceExt::oneshot`] inside the response future (axum's `Route` does the same). A tool
/// behind a `ConcurrencyLimit` therefore waits for its permit in the future, never in the router.
///
/// # Unknown tools
///
/// A call to a name nobody registered goes to the [fallback](Self::fallback) when there is one;
/// otherwise it fails with a [`ToolError`] of kind [`NotFound`](super::ToolErrorKind::NotFound):
/// the agent hands it to the model as an error result, the run goes on.
#[derive(Clone, Default)]
pub struct ToolRouter {
    routes: Arc<BTreeMap<String, (ToolSpec, BoxTool)>>,
    fallback: Option<BoxTool>,
}

impl ToolRouter {
    /// An empty router.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `tool` under `spec.name`, replacing any tool of that name.
    ///
    /// The tool's errors become [`ToolError`]s (kept as they are if they already are one).
    #[must_use]
    pub fn route<S>(mut self, spec: ToolSpec, tool: S) -> Self
    where
        S: Service<ToolCall> + Clone + Send + Sync + 'static,
        S::Response: ToolReply,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        Arc::make_mut(&mut self.routes).insert(spec.name.clone(), (spec, boxed(tool)));
        self
    }

    /// Registers a [`Tool`] under the name its spec gives, replacing any tool of that name.
    #[must_use]
    pub fn tool<T>(self, tool: T) -> Self
    where
        T: Tool + Clone + Send + Sync + 'static,
        T::Error: Into<BoxError>,
        T::Future: Send + 'static,
    {
        let spec = tool.spec();
        self.route(spec, tool)
    }

    /// Sends calls of tools nobody registered (here or in the run's [`RunTools`]) to `tool`, as
    /// axum's `Router::fallback` does for paths: for a model whose tools are run elsewhere, such
    /// as an agent bridged over ACP, whose tools are its own.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use agent_tower::tool::{ToolCall, ToolOutput, ToolRouter};
    /// use tower::{ServiceExt, service_fn};
    ///
    /// let router = ToolRouter::new().fallback(service_fn(|call: ToolCall| async move {
    ///     Ok::<_, std::convert::Infallible>(ToolOutput::text(format!("ran {}", call.name)))
    /// }));
    /// let output = router.oneshot(ToolCall::new("anything", serde_json::json!({}))).await.unwrap();
    /// let output = output.into_output().unwrap();
    /// assert_eq!(output.content, [agent_tower::message::ContentPart::text("ran anything")]);
    /// # }
    /// ```
    #[must_use]
    pub fn fallback<S>(mut self, tool: S) -> Self
    where
        S: Service<ToolCall> + Clone + Send + Sync + 'static,
        S::Response: ToolReply,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
    {
        self.fallback = Some(boxed(tool));
        self
    }

    /// Adds every tool of `other`, replacing tools of the same name (and its fallback, when this
    /// router has none).
    #[must_use]
    pub fn merge(mut self, other: ToolRouter) -> Self {
        let routes = Arc::make_mut(&mut self.routes);
        for (name, route) in other.routes.iter() {
            routes.insert(name.clone(), route.clone());
        }
        self.fallback = self.fallback.or(other.fallback);
        self
    }

    /// Keeps only the tools whose spec `keep` accepts (the fallback stays).
    #[must_use]
    pub fn retain(mut self, mut keep: impl FnMut(&ToolSpec) -> bool) -> Self {
        Arc::make_mut(&mut self.routes).retain(|_, (spec, _)| keep(spec));
        self
    }

    /// The specs of every registered tool, sorted by name.
    #[must_use]
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.routes.values().map(|(spec, _)| spec.clone()).collect()
    }

    /// Whether a tool is registered under `name`.
    #[must_use]
    pub fn contains(&self, name: &str) -> bool {
        self.routes.contains_key(name)
    }

    /// The spec of the tool registered under `name`.
    #[must_use]
    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.routes.get(name).map(|(spec, _)| spec)
    }
}

/// `tool` as a router's tool: its answer a [`ToolResponse`], its errors [`ToolError`]s (kept as
/// they are if they already are one).
fn boxed<S>(tool: S) -> BoxTool
where
    S: Service<ToolCall> + Clone + Send + Sync + 'static,
    S::Response: ToolReply,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    BoxTool::new(
        tool.map_response(ToolReply::into_response)
            .map_err(|e: S::Error| ToolError::from_boxed(e.into())),
    )
}

impl fmt::Debug for ToolRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRouter")
            .field("tools", &self.routes.keys().collect::<Vec<_>>())
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

/// Tools of one run only, in the run's extensions: the [`Agent`](crate::agent::Agent) offers
/// their specs to the model besides its own, and a [`ToolRouter`] routes a call it has no tool
/// for to them. An ACP session's MCP servers come this way.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use agent_tower::tool::{RunTools, ToolCall, ToolOutput, ToolRouter, ToolSpec};
/// use tower::{ServiceExt, service_fn};
///
/// let session = ToolRouter::new().route(
///     ToolSpec::new("ping", "Answers pong."),
///     service_fn(|_: ToolCall| async { Ok::<_, std::convert::Infallible>(ToolOutput::text("pong")) }),
/// );
/// let mut call = ToolCall::new("ping", serde_json::json!({}));
/// call.run.extensions.insert(RunTools(session));
/// let output = ToolRouter::new().oneshot(call).await.unwrap();
/// let output = output.into_output().unwrap();
/// assert_eq!(output.content, [agent_tower::message::ContentPart::text("pong")]);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RunTools(pub ToolRouter);

impl Service<ToolCall> for ToolRouter {
    type Response = ToolResponse;
    type Error = ToolError;
    type Future = future::ResponseFuture;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        let route = self.routes.get(&call.name).or_else(|| {
            let run = call.run.extensions.get::<RunTools>()?;
            run.0.routes.get(&call.name)
        });
        if let Some((spec, _)) = route
            && spec.effective_rerun() == Rerun::Never
            && call.may_have_run()
        {
            tracing::warn!(tool = %call.name, tool_call_id = %call.id, "a call cut off by a stopped server is not run again");
            return future::ResponseFuture::ready(Ok(ToolResponse::Output(ToolOutput::error(
                format!(
                    "The call of `{}` was interrupted (its server stopped) and may or may not \
                     have taken effect; it was not run again. Check before calling it again.",
                    call.name
                ),
            ))));
        }
        match route
            .map(|(_, tool)| tool.clone())
            .or_else(|| self.fallback.clone())
        {
            Some(tool) => future::ResponseFuture::call(tool.oneshot(call)),
            None => future::ResponseFuture::ready(Err(ToolError::not_found(&call.name))),
        }
    }
}

/// The router's response future.
pub mod future {
    use std::{
        fmt,
        future::Future,
        pin::Pin,
        task::{Context, Poll},
    };

    use pin_project_lite::pin_project;

    use super::{BoxTool, Oneshot, ToolCall, ToolError, ToolResponse};

    pin_project! {
        /// Either the routed tool's call or an immediate answer (an unknown tool, a call that
        /// must not run again).
        pub struct ResponseFuture {
            #[pin]
            inner: Inner,
        }
    }

    pin_project! {
        #[project = InnerProj]
        enum Inner {
            Call { #[pin] call: Oneshot<BoxTool, ToolCall> },
            Ready { result: Option<Result<ToolResponse, ToolError>> },
        }
    }

    impl ResponseFuture {
        pub(super) fn call(call: Oneshot<BoxTool, ToolCall>) -> Self {
            Self {
                inner: Inner::Call { call },
            }
        }

        pub(super) fn ready(result: Result<ToolResponse, ToolError>) -> Self {
            Self {
                inner: Inner::Ready {
                    result: Some(result),
                },
            }
        }
    }

    impl Future for ResponseFuture {
        type Output = Result<ToolResponse, ToolError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            match self.project().inner.project() {
                InnerProj::Call { call } => call.poll(cx),
                InnerProj::Ready { result } => Poll::Ready(
                    result
                        .take()
                        .expect("ResponseFuture polled after completion"),
                ),
            }
        }
    }

    impl fmt::Debug for ResponseFuture {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ResponseFuture").finish_non_exhaustive()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{ToolErrorKind, ToolOutput};
    use serde_json::json;
    use tower::service_fn;

    #[tokio::test]
    async fn unknown_tool_is_a_tool_error_not_a_crash() {
        let router = ToolRouter::new();
        let err = router
            .oneshot(ToolCall::new("nope", json!({})))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ToolErrorKind::NotFound);
        assert!(err.message().contains("nope"));
    }

    #[tokio::test]
    async fn a_call_that_may_have_run_runs_again_only_if_its_tool_allows_it() {
        use std::sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        };
        let ran = Arc::new(AtomicUsize::new(0));
        let tool = {
            let ran = ran.clone();
            service_fn(move |_: ToolCall| {
                ran.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, std::convert::Infallible>(ToolOutput::text("done")) }
            })
        };
        let router = ToolRouter::new()
            .route(ToolSpec::new("send_email", ""), tool.clone())
            .route(ToolSpec::new("charge", "").rerun(Rerun::Safe), tool);
        let cut = |name: &str| {
            let mut call = ToolCall::new(name, json!({}));
            let cut = std::collections::HashSet::from([call.id.clone()]);
            call.run
                .extensions
                .insert(crate::tool::CutOff(Arc::new(cut)));
            assert!(call.may_have_run());
            call
        };
        let refused = router.clone().oneshot(cut("send_email")).await.unwrap();
        let refused = refused.into_output().unwrap();
        assert!(
            refused.is_error && refused.to_text().contains("interrupted"),
            "{refused:?}"
        );
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "a tool that must not run twice did not"
        );
        let again = router.clone().oneshot(cut("charge")).await.unwrap();
        assert_eq!(again.into_output().unwrap().to_text(), "done");
        let fresh = router.oneshot(ToolCall::new("send_email", json!({}))).await;
        assert_eq!(fresh.unwrap().into_output().unwrap().to_text(), "done");
        assert_eq!(ran.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn routed_tool_is_called_once_readied() {
        let echo = service_fn(|call: ToolCall| async move {
            Ok::<_, std::io::Error>(ToolOutput::json(call.arguments))
        });
        let mut router = ToolRouter::new().route(ToolSpec::new("echo", "echoes"), echo);
        let out = router
            .ready()
            .await
            .unwrap()
            .call(ToolCall::new("echo", json!({"x": 1})))
            .await
            .unwrap();
        assert_eq!(out.into_output().unwrap().to_text(), r#"{"x":1}"#);
        assert_eq!(router.specs().len(), 1);
    }

    #[tokio::test]
    async fn a_tool_behind_an_unready_limit_is_waited_for_in_the_future() {
        // tower-test's mock starts with no capacity: the router must poll its readiness before
        // calling, or the mock panics.
        let (mock, mut handle) = tower_test::mock::pair::<ToolCall, ToolOutput>();
        handle.allow(0);
        let router = ToolRouter::new().route(ToolSpec::new("slow", "slow"), mock);
        let mut fut = tokio_test::task::spawn(router.oneshot(ToolCall::new("slow", json!({}))));
        tokio_test::assert_pending!(fut.poll());
        handle.allow(1);
        tokio_test::assert_pending!(fut.poll());
        let (_, respond) = handle.next_request().await.unwrap();
        respond.send_response(ToolOutput::text("done"));
        assert_eq!(fut.await.unwrap().into_output().unwrap().to_text(), "done");
    }
}
