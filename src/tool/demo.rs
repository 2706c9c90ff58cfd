//! Harmless tools for demos and tests.

use std::{
    convert::Infallible,
    time::{SystemTime, UNIX_EPOCH},
};

use serde_json::json;
use tower::service_fn;

use super::{
    Rerun, ToolCall, ToolError, ToolErrorKind, ToolKind, ToolOutput, ToolRouter, ToolSpec,
};

/// A router with `get_time` (the current UTC time), `add` (`a + b`), `remember` (sets `key` to
/// `value` in the run's [shared state](crate::context::SharedState)), `write_document` (saves a
/// document; a [`StateLayer`](crate::state) hook can mirror it into the state) and `plan`
/// (records a list of steps; the ACP layer shows it as the session's plan).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use agent_tower::tool::{ToolCall, demo::demo_tools};
/// use tower::ServiceExt;
///
/// let out = demo_tools().oneshot(ToolCall::new("add", serde_json::json!({"a": 2, "b": 40}))).await.unwrap();
/// assert_eq!(out.into_output().unwrap().to_text(), "42");
/// # }
/// ```
#[must_use]
pub fn demo_tools() -> ToolRouter {
    ToolRouter::new()
        .route(
            ToolSpec::new("get_time", "The current date and time, in UTC.").kind(ToolKind::Read),
            service_fn(|_: ToolCall| async { Ok::<_, Infallible>(ToolOutput::text(utc_now())) }),
        )
        .route(
            ToolSpec::new("add", "Adds two numbers.")
                .kind(ToolKind::Think)
                .parameters(json!({
                    "type": "object",
                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a", "b"],
                })),
            service_fn(|call: ToolCall| async move { add(&call.arguments) }),
        )
        .route(
            ToolSpec::new(
                "remember",
                "Remembers a value in the shared state, under a key.",
            )
            .kind(ToolKind::Edit)
            // Setting a key to a value twice is setting it once.
            .rerun(Rerun::Safe)
            .parameters(json!({
                "type": "object",
                "properties": {"key": {"type": "string"}, "value": {}},
                "required": ["key", "value"],
            })),
            service_fn(|call: ToolCall| async move { remember(&call) }),
        )
        .route(
            ToolSpec::new("write_document", "Writes the document the user is editing.")
                .kind(ToolKind::Edit)
                // The whole document, saved twice, is saved once.
                .rerun(Rerun::Safe)
                .parameters(json!({
                    "type": "object",
                    "properties": {"document": {"type": "string"}},
                    "required": ["document"],
                })),
            service_fn(|call: ToolCall| async move {
                let words = call.arguments["document"]
                    .as_str()
                    .map_or(0, |d| d.split_whitespace().count());
                Ok::<_, Infallible>(ToolOutput::text(format!("saved {words} words")))
            }),
        )
        .route(
            ToolSpec::new(
                "plan",
                "Records the plan of the work: `entries`, each a step with `content` and `status` \
                 (pending, in_progress, completed).",
            )
            .kind(ToolKind::Think)
            .parameters(json!({
                "type": "object",
                "properties": {"entries": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"content": {"type": "string"}, "status": {"type": "string"}},
                    "required": ["content"],
                }}},
                "required": ["entries"],
            })),
            service_fn(|call: ToolCall| async move {
                let steps = call.arguments["entries"].as_array().map_or(0, Vec::len);
                Ok::<_, Infallible>(ToolOutput::text(format!("plan recorded: {steps} steps")))
            }),
        )
}

fn remember(call: &ToolCall) -> Result<ToolOutput, ToolError> {
    let key = call.arguments["key"]
        .as_str()
        .ok_or_else(|| ToolError::new(ToolErrorKind::InvalidArguments, "`key` must be a string"))?;
    let state = call
        .run
        .state
        .as_ref()
        .ok_or_else(|| ToolError::new(ToolErrorKind::Failed, "this run has no shared state"))?;
    let value = call.arguments.get("value").cloned().unwrap_or_default();
    state
        .try_update(|state| {
            if !state.is_object() {
                *state = json!({});
            }
            state[key] = value;
        })
        .map_err(|_| {
            ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!("the state keeps no value under `{key}`: choose another key"),
            )
        })?;
    Ok(ToolOutput::text(format!("remembered {key}")))
}

fn add(arguments: &serde_json::Value) -> Result<ToolOutput, ToolError> {
    let number = |name: &str| {
        arguments[name].as_number().cloned().ok_or_else(|| {
            ToolError::new(
                ToolErrorKind::InvalidArguments,
                format!("`{name}` must be a number"),
            )
        })
    };
    let (a, b) = (number("a")?, number("b")?);
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) => a.checked_add(b).map(|s| json!(s)),
        _ => None,
    };
    let sum = sum.unwrap_or_else(|| json!(a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0)));
    Ok(ToolOutput::json(sum))
}

/// `YYYY-MM-DDTHH:MM:SSZ`, from the system clock (days to civil date: H. Hinnant's algorithm).
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt;

    use super::*;

    #[test]
    fn add_keeps_integers_and_refuses_non_numbers() {
        assert_eq!(add(&json!({"a": 2, "b": 3})).unwrap().to_text(), "5");
        assert_eq!(add(&json!({"a": 0.5, "b": 1})).unwrap().to_text(), "1.5");
        let err = add(&json!({"a": "x", "b": 1})).unwrap_err();
        assert_eq!(err.kind(), ToolErrorKind::InvalidArguments);
    }

    #[test]
    fn the_time_looks_like_rfc3339() {
        let now = utc_now();
        assert_eq!(now.len(), 20);
        assert!(now.starts_with("20") && now.ends_with('Z'), "{now}");
    }

    #[tokio::test]
    async fn remember_says_so_when_the_state_refuses_the_key() {
        let remember = |key: &str| {
            let mut call = ToolCall::new("remember", json!({"key": key, "value": 1}));
            let state = call.run.shared_state(None);
            (call, state)
        };
        let (call, state) = remember("theme");
        let done = demo_tools().oneshot(call).await.unwrap();
        assert_eq!(
            (done.into_output().unwrap().to_text().as_str(), state.get()),
            ("remembered theme", json!({"theme": 1}))
        );
        let (call, state) = remember("__proto__");
        let refused = demo_tools().oneshot(call).await;
        let error = refused.unwrap_err().to_string();
        assert!(
            error.contains("keeps no value under `__proto__`"),
            "{error}"
        );
        assert_eq!(state.get(), json!({}), "nothing was written");
    }
}
