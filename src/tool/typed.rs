//! Typed tools: the arguments are a Rust type, their JSON Schema is generated from it, and every
//! call is checked before the tool runs.
//!
//! A [`TypedTool`] wraps an async function ([`TypedTool::from_fn`]) or a service of
//! [`Typed<A>`] ([`TypedTool::new`], for a tool that needs its call's run: its state, its
//! progress, its id). `A` is `Deserialize` and [`JsonSchema`] (`#[derive(Deserialize,
//! JsonSchema)]`; add `schemars` 1 to your dependencies for the derive). The schema is what the
//! model is offered (the doc comments of the type and its fields become descriptions). Arguments
//! that do not fit never reach the tool: the call ends with a [`ToolError`] of kind
//! [`InvalidArguments`](ToolErrorKind::InvalidArguments) naming the field at fault, which the
//! model reads as the call's result and can correct. Arguments a person edited in an approval
//! are checked the same way: the check is part of the call, inside the
//! [`PermissionLayer`](crate::permission::PermissionLayer).
//!
//! # How far the check goes
//!
//! The arguments are parsed into `A`: wrong types, missing fields, unknown enum variants (and
//! unknown fields under `#[serde(deny_unknown_fields)]`) are refused, the first fault named
//! with its path. What only the schema states, such as the ranges, lengths and patterns of
//! `#[schemars(range(..), length(..), regex(..))]`, is offered to the model but not checked
//! by parsing: with the feature `schema-check`, every call is first checked against the whole
//! schema (with `jsonschema`), which checks those too and names every fault (up to eight, the
//! rest counted).
//!
//! What a tool returns becomes its [`ToolOutput`] through [`IntoToolOutput`]: text as text,
//! [`Json`] of any `Serialize` type as structured content.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use agent_tower::tool::{ToolCall, ToolRouter, typed::{Json, JsonSchema, TypedTool}};
//! use serde::{Deserialize, Serialize};
//! use serde_json::json;
//! use tower::ServiceExt;
//!
//! /// Where to look.
//! #[derive(Deserialize, JsonSchema)]
//! struct Place {
//!     /// The city's name.
//!     city: String,
//!     /// Degrees Celsius or Fahrenheit.
//!     unit: Unit,
//! }
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(rename_all = "lowercase")]
//! enum Unit { C, F }
//!
//! #[derive(Serialize)]
//! struct Weather { temperature: f64 }
//!
//! let weather = TypedTool::from_fn("weather", "The weather in a city.", |place: Place| async move {
//!     let temperature = match place.unit { Unit::C => 21.0, Unit::F => 69.8 };
//!     Ok::<_, std::convert::Infallible>(Json(Weather { temperature }))
//! });
//! let tools = ToolRouter::new().tool(weather);
//! assert_eq!(tools.specs()[0].parameters["required"], json!(["city", "unit"]));
//!
//! let ok = tools.clone().oneshot(ToolCall::new("weather", json!({"city": "Oslo", "unit": "c"}))).await;
//! assert_eq!(ok.unwrap().into_output().unwrap().to_text(), r#"{"temperature":21.0}"#);
//!
//! let bad = tools.oneshot(ToolCall::new("weather", json!({"city": "Oslo", "unit": "kelvin"}))).await;
//! let error = bad.unwrap_err();
//! assert!(error.to_string().contains("`unit`"), "{error}");
//! # }
//! ```

use std::{
    convert::Infallible,
    fmt,
    future::Future,
    marker::PhantomData,
    pin::Pin,
    task::{Context, Poll},
};

use pin_project_lite::pin_project;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;
use tower_service::Service;

pub use schemars::{self, JsonSchema};

use super::{Rerun, Tool, ToolCall, ToolError, ToolErrorKind, ToolKind, ToolOutput, ToolSpec};
use crate::BoxError;

/// How many faults of one call's arguments are reported (the rest are counted).
#[cfg(feature = "schema-check")]
const MAX_REPORTED: usize = 8;

/// A call of a [`TypedTool`]: its arguments, checked and parsed, and the call they came in
/// (its id, its run).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Typed<A> {
    /// The arguments.
    pub args: A,
    /// The call, with its arguments as the model sent them (or as a person edited them).
    pub call: ToolCall,
}

/// A tool whose arguments are `A`: the schema offered to the model is `A`'s, and a call whose
/// arguments do not fit is answered with an error naming the field at fault, without running
/// the tool. A `Service<ToolCall>`; register it with [`ToolRouter::tool`](super::ToolRouter::tool).
/// See the [module docs](self) for how far the check goes.
pub struct TypedTool<S, A> {
    spec: ToolSpec,
    #[cfg(feature = "schema-check")]
    schema: std::sync::Arc<jsonschema::Validator>,
    service: S,
    args: PhantomData<fn(A)>,
}

impl<S: Clone, A> Clone for TypedTool<S, A> {
    fn clone(&self) -> Self {
        Self {
            spec: self.spec.clone(),
            #[cfg(feature = "schema-check")]
            schema: std::sync::Arc::clone(&self.schema),
            service: self.service.clone(),
            args: PhantomData,
        }
    }
}

impl<S, A> fmt::Debug for TypedTool<S, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedTool")
            .field("spec", &self.spec)
            .field("args", &std::any::type_name::<A>())
            .finish_non_exhaustive()
    }
}

impl<S, A: JsonSchema> TypedTool<S, A> {
    /// `service` as the tool `name`, taking `A`.
    ///
    /// # Panics
    ///
    /// With the feature `schema-check`, if `A`'s generated schema is not a valid JSON Schema (a
    /// bug in a hand-written `JsonSchema` impl): a tool is built once, at start.
    pub fn new(name: impl Into<String>, description: impl Into<String>, service: S) -> Self {
        let parameters = schema_of::<A>();
        #[cfg(feature = "schema-check")]
        let schema = jsonschema::draft202012::new(&parameters).unwrap_or_else(|e| {
            panic!(
                "the schema of {} is invalid: {e}",
                std::any::type_name::<A>()
            )
        });
        Self {
            spec: ToolSpec::new(name, description).parameters(parameters),
            #[cfg(feature = "schema-check")]
            schema: std::sync::Arc::new(schema),
            service,
            args: PhantomData,
        }
    }

    /// Declares what the tool does (whether it reads or writes, for editors and policies).
    #[must_use]
    pub fn kind(mut self, kind: ToolKind) -> Self {
        self.spec = self.spec.kind(kind);
        self
    }

    /// Declares whether a call cut off by a stopped server may run again ([`Rerun`]).
    #[must_use]
    pub fn rerun(mut self, rerun: Rerun) -> Self {
        self.spec = self.spec.rerun(rerun);
        self
    }

    /// What the model is offered: the name, the description, `A`'s schema.
    #[must_use]
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

impl<F, A: JsonSchema> TypedTool<FnTool<F>, A> {
    /// The async function `f` as the tool `name`: it gets the arguments, parsed, and returns
    /// anything [`IntoToolOutput`], or an error the model reads as the call's result.
    pub fn from_fn<Fut, O, E>(name: impl Into<String>, description: impl Into<String>, f: F) -> Self
    where
        F: FnMut(A) -> Fut,
        Fut: Future<Output = Result<O, E>>,
    {
        Self::new(name, description, FnTool(f))
    }
}

/// The schema of `A` as a tool's parameters: subschemas inlined where they can be, no
/// `$schema` or `title` (models read descriptions, not titles).
fn schema_of<A: JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .for_deserialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<A>();
    schema.remove("title");
    schema.to_value()
}

impl<S, A> TypedTool<S, A>
where
    A: DeserializeOwned,
{
    /// The arguments, checked and parsed; or the error the model reads.
    fn parse(&self, arguments: &Value) -> Result<A, ToolError> {
        #[cfg(feature = "schema-check")]
        self.check(arguments)?;
        // What parsing refuses (all of it without the schema's check; with it, what a custom
        // `Deserialize` adds) is named with its path.
        serde_path_to_error::deserialize(arguments).map_err(|error| {
            let at = field(&error.path().to_string());
            self.invalid(&format!("{at}: {}", error.inner()))
        })
    }

    /// The arguments checked against the whole schema, every fault named up to a bound.
    #[cfg(feature = "schema-check")]
    fn check(&self, arguments: &Value) -> Result<(), ToolError> {
        let mut faults = self.schema.iter_errors(arguments);
        let reported: Vec<String> = faults
            .by_ref()
            .take(MAX_REPORTED)
            .map(|fault| {
                let at = fault.instance_path().to_string();
                format!("{}: {}", field(at.trim_start_matches('/')), fault.masked())
            })
            .collect();
        if reported.is_empty() {
            return Ok(());
        }
        let mut faults_named = reported.join("; ");
        let more = faults.count();
        if more > 0 {
            faults_named.push_str(&format!(" (and {more} more)"));
        }
        Err(self.invalid(&faults_named))
    }

    /// The error the model reads for `faults`.
    fn invalid(&self, faults: &str) -> ToolError {
        ToolError::new(
            ToolErrorKind::InvalidArguments,
            format!("invalid arguments for `{}`: {faults}", self.spec.name),
        )
    }
}

/// How a fault's place is named: the field's path, or the arguments as a whole.
fn field(path: &str) -> String {
    if path.is_empty() || path == "." {
        "the arguments".to_owned()
    } else {
        format!("`{path}`")
    }
}

impl<S, A> Service<ToolCall> for TypedTool<S, A>
where
    S: Service<Typed<A>>,
    S::Response: IntoToolOutput,
    S::Error: Into<BoxError>,
    A: DeserializeOwned,
{
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = future::TypedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.service
            .poll_ready(cx)
            .map_err(|e| ToolError::from_boxed(e.into()))
    }

    fn call(&mut self, call: ToolCall) -> Self::Future {
        match self.parse(&call.arguments) {
            Ok(args) => future::TypedFuture::call(self.service.call(Typed { args, call })),
            Err(invalid) => future::TypedFuture::invalid(invalid),
        }
    }
}

impl<S, A> Tool for TypedTool<S, A>
where
    Self: Service<ToolCall, Response = ToolOutput, Error = ToolError>,
{
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
}

/// An async function as a service of [`Typed<A>`]: what [`TypedTool::from_fn`] wraps.
#[derive(Clone)]
pub struct FnTool<F>(F);

impl<F> fmt::Debug for FnTool<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnTool")
    }
}

impl<F, A, Fut, O, E> Service<Typed<A>> for FnTool<F>
where
    F: FnMut(A) -> Fut,
    Fut: Future<Output = Result<O, E>>,
{
    type Response = O;
    type Error = E;
    type Future = Fut;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), E>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, typed: Typed<A>) -> Fut {
        (self.0)(typed.args)
    }
}

/// What a tool returns, as the [`ToolOutput`] the model gets.
pub trait IntoToolOutput {
    /// The output.
    fn into_tool_output(self) -> ToolOutput;
}

impl IntoToolOutput for ToolOutput {
    fn into_tool_output(self) -> ToolOutput {
        self
    }
}

impl IntoToolOutput for String {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput::text(self)
    }
}

impl IntoToolOutput for &'static str {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput::text(self)
    }
}

impl IntoToolOutput for Value {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput::json(self)
    }
}

impl IntoToolOutput for Infallible {
    fn into_tool_output(self) -> ToolOutput {
        match self {}
    }
}

/// A `Serialize` value as a tool's structured result (axum's `Json`, for tools).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoToolOutput for Json<T> {
    fn into_tool_output(self) -> ToolOutput {
        match serde_json::to_value(self.0) {
            Ok(value) => ToolOutput::json(value),
            Err(error) => ToolOutput::error(format!("the result could not be written: {error}")),
        }
    }
}

/// The response future of a [`TypedTool`].
pub mod future {
    use super::{Context, Future, IntoToolOutput, Pin, Poll, ToolError, ToolOutput, pin_project};
    use crate::BoxError;

    pin_project! {
        /// The tool's call, or the error its arguments earned.
        pub struct TypedFuture<F> {
            #[pin]
            inner: Inner<F>,
        }
    }

    pin_project! {
        #[project = InnerProj]
        enum Inner<F> {
            Call { #[pin] future: F },
            Invalid { error: Option<ToolError> },
        }
    }

    impl<F> TypedFuture<F> {
        pub(super) fn call(future: F) -> Self {
            Self {
                inner: Inner::Call { future },
            }
        }

        pub(super) fn invalid(error: ToolError) -> Self {
            Self {
                inner: Inner::Invalid { error: Some(error) },
            }
        }
    }

    impl<F, O, E> Future for TypedFuture<F>
    where
        F: Future<Output = Result<O, E>>,
        O: IntoToolOutput,
        E: Into<BoxError>,
    {
        type Output = Result<ToolOutput, ToolError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            match self.project().inner.project() {
                InnerProj::Call { future } => future.poll(cx).map(|result| {
                    result
                        .map(IntoToolOutput::into_tool_output)
                        .map_err(|e| ToolError::from_boxed(e.into()))
                }),
                InnerProj::Invalid { error } => {
                    Poll::Ready(Err(error.take().expect("polled after completion")))
                }
            }
        }
    }

    impl<F> std::fmt::Debug for TypedFuture<F> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("TypedFuture")
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;
    use tower::ServiceExt;

    use super::*;

    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Many {
        a: u8,
        b: u8,
        c: u8,
        d: u8,
        e: u8,
        f: u8,
        g: u8,
        h: u8,
        i: u8,
        j: u8,
    }

    fn many() -> impl Service<ToolCall, Response = ToolOutput, Error = ToolError> {
        TypedTool::from_fn("many", "Ten numbers.", |_: Many| {
            std::future::ready(Ok::<_, Infallible>("ran".to_owned()))
        })
    }

    #[cfg(feature = "schema-check")]
    #[tokio::test]
    async fn faults_are_reported_up_to_a_bound_and_counted_beyond() {
        let strings: serde_json::Map<String, Value> =
            ('a'..='j').map(|k| (k.to_string(), json!("x"))).collect();
        let error = many()
            .oneshot(ToolCall::new("many", Value::Object(strings)))
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ToolErrorKind::InvalidArguments);
        let message = error.to_string();
        assert_eq!(
            message.matches("is not of type").count(),
            MAX_REPORTED,
            "{message}"
        );
        assert!(message.ends_with("(and 2 more)"), "{message}");
        assert!(
            !message.contains("\"x\""),
            "values are not repeated back: {message}"
        );
    }

    #[tokio::test]
    async fn arguments_that_are_not_an_object_are_named_as_a_whole() {
        let error = many()
            .oneshot(ToolCall::new("many", json!([1, 2])))
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("invalid arguments for `many`: the arguments: "),
            "{error}"
        );
    }

    /// An order whose line counts parsing refuses at zero, though the schema (an integer) allows it.
    #[derive(Deserialize, JsonSchema)]
    struct Order {
        lines: Vec<Line>,
    }

    #[derive(Deserialize, JsonSchema)]
    struct Line {
        #[serde(deserialize_with = "positive")]
        count: u32,
    }

    fn positive<'de, D: serde::Deserializer<'de>>(count: D) -> Result<u32, D::Error> {
        match u32::deserialize(count)? {
            0 => Err(serde::de::Error::custom("must be positive")),
            count => Ok(count),
        }
    }

    #[tokio::test]
    async fn what_parsing_refuses_is_named_with_its_path() {
        let tool = TypedTool::from_fn("order", "An order.", |order: Order| {
            let items: u32 = order.lines.iter().map(|line| line.count).sum();
            std::future::ready(Ok::<_, Infallible>(format!("{items} items")))
        });
        let call = ToolCall::new("order", json!({"lines": [{"count": 2}, {"count": 1}]}));
        let output = tool.clone().oneshot(call).await.unwrap();
        assert_eq!(output.to_text(), "3 items");
        let call = ToolCall::new("order", json!({"lines": [{"count": 2}, {"count": 0}]}));
        let error = tool.oneshot(call).await.unwrap_err();
        assert_eq!(error.kind(), ToolErrorKind::InvalidArguments);
        assert_eq!(
            error.to_string(),
            "invalid arguments for `order`: `lines[1].count`: must be positive"
        );
    }

    #[tokio::test]
    async fn what_fits_the_schema_runs() {
        let args: serde_json::Map<String, Value> =
            ('a'..='j').map(|k| (k.to_string(), json!(1))).collect();
        let output = many()
            .oneshot(ToolCall::new("many", Value::Object(args)))
            .await
            .unwrap();
        assert_eq!(output.to_text(), "ran");
    }
}
