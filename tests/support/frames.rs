//! The frames of a durable server's SSE body.
#![allow(dead_code)]

use serde_json::Value;

/// `(id, event)` of the complete SSE frames of `body` (the id empty for an event that is not in
/// the log).
pub fn frames(body: &str) -> Vec<(String, Value)> {
    let complete = &body[..body.rfind("\n\n").map_or(0, |end| end + 2)];
    complete
        .split("\n\n")
        .filter(|frame| !frame.is_empty() && !frame.starts_with(':'))
        .map(|frame| {
            let (id, data) = match frame.split_once('\n') {
                Some((id, data)) if id.starts_with("id: ") => (&id[4..], data),
                _ => ("", frame),
            };
            (
                id.to_owned(),
                serde_json::from_str(data.strip_prefix("data: ").expect("a data line")).unwrap(),
            )
        })
        .collect()
}
