//! How the store's rows read and write: columns, numbers, times, records.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use sqlx::{Row, any::AnyRow};

use super::conn::Columns;
use crate::{
    agui::{
        input::{ResumeEntry, ResumeStatus},
        interrupt,
    },
    id::RunId,
    permission::Decision,
    runs::{InterruptRecord, InterruptStatus, LogError, RunRecord, RunStatus},
};

pub(super) fn text(row: &impl Columns, column: &str) -> Result<String, LogError> {
    row.text(column)
}

pub(super) fn number(row: &impl Columns, column: &str) -> Result<i64, LogError> {
    row.number(column)
}

pub(super) fn json<T: serde::de::DeserializeOwned>(raw: &str, what: &str) -> Result<T, LogError> {
    serde_json::from_str(raw).map_err(|e| LogError::Corrupt(format!("{what} ({e})")))
}

pub(super) fn seq(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

pub(super) fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) const RUN_COLUMNS: &str =
    "run_id, thread_id, status, owner, principal, last_seq, created_at, updated_at, request";

pub(super) fn run_record(row: &AnyRow) -> Result<RunRecord, LogError> {
    let request: Option<String> = row.try_get("request")?;
    Ok(RunRecord {
        run_id: text(row, "run_id")?.into(),
        thread_id: text(row, "thread_id")?.into(),
        status: RunStatus::parse(&text(row, "status")?)?,
        owner: text(row, "owner")?,
        principal: row.optional_text("principal")?,
        last_seq: seq(number(row, "last_seq")?),
        created_at: from_millis(number(row, "created_at")?),
        updated_at: from_millis(number(row, "updated_at")?),
        request: request.map(|r| json(&r, "run's request")).transpose()?,
    })
}

pub(super) const INTERRUPT_COLUMNS: &str = "interrupt_id, thread_id, run_id, tool_call_id, \
     tool_name, arguments, args_hash, created_at, expires_at, status, resolution, resolved_by_run";

pub(super) fn interrupt_record(row: &impl Columns) -> Result<InterruptRecord, LogError> {
    let resolution = row.optional_text("resolution")?;
    let resolved_by = row.optional_text("resolved_by_run")?;
    Ok(InterruptRecord {
        id: text(row, "interrupt_id")?.into(),
        thread_id: text(row, "thread_id")?.into(),
        run_id: text(row, "run_id")?.into(),
        tool_call_id: text(row, "tool_call_id")?.into(),
        tool_name: text(row, "tool_name")?,
        arguments: json(&text(row, "arguments")?, "interrupt's arguments")?,
        args_hash: text(row, "args_hash")?,
        created_at: from_millis(number(row, "created_at")?),
        expires_at: from_millis(number(row, "expires_at")?),
        status: InterruptStatus::parse(&text(row, "status")?)?,
        resolution: resolution.as_deref().map(decision).transpose()?,
        resolved_by_run: resolved_by.map(RunId::from),
    })
}

/// Milliseconds since the Unix epoch, as logs store times.
#[must_use]
pub(super) fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The time `ms` milliseconds after the Unix epoch.
#[must_use]
pub(super) fn from_millis(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A decision as the store keeps it (its JSON).
pub(super) fn decision_text(decision: &Decision) -> String {
    serde_json::to_string(decision).expect("a decision serializes")
}

/// A decision the store kept: its JSON, or the AG-UI resume entry (`{"status", "payload"}`)
/// that earlier versions kept instead.
fn decision(raw: &str) -> Result<Decision, LogError> {
    let value: Value = json(raw, "interrupt's resolution")?;
    if let Ok(decision) = serde_json::from_value::<Decision>(value.clone()) {
        return Ok(decision);
    }
    let entry = ResumeEntry {
        interrupt_id: String::new(),
        status: serde_json::from_value(value["status"].clone()).unwrap_or(ResumeStatus::Cancelled),
        payload: Some(value["payload"].clone()).filter(|payload| !payload.is_null()),
        metadata: None,
    };
    interrupt::decision(&entry)
        .map_err(|e| LogError::Corrupt(format!("interrupt's resolution ({e})")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn decisions_read_back_as_kept_and_as_earlier_versions_kept_them() {
        for kept in [
            Decision::Approve,
            Decision::ApproveAlways,
            Decision::Edit(json!({"path": "b"})),
            Decision::Reject("no".into()),
            Decision::RejectAlways("never".into()),
        ] {
            assert_eq!(decision(&decision_text(&kept)).unwrap(), kept);
        }
        let earlier = |answer: Value| decision(&answer.to_string()).unwrap();
        assert_eq!(
            earlier(json!({"status": "resolved", "payload": {"approved": true}})),
            Decision::Approve
        );
        assert_eq!(
            earlier(
                json!({"status": "resolved", "payload": {"approved": false, "feedback": "no"}})
            ),
            Decision::Reject("no".into())
        );
        assert!(matches!(
            earlier(json!({"status": "cancelled", "payload": null})),
            Decision::Reject(_)
        ));
        assert!(decision(r#"{"status": "resolved", "payload": {"approve": 1}}"#).is_err());
    }
}
