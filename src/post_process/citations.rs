use std::{
    convert::Infallible,
    future::Ready,
    task::{Context, Poll},
};

use futures_util::stream::{self, Iter};
use serde_json::json;
use tower_service::Service;

use super::{Finding, ProcessRequest};

/// A processor that resolves `[n]` citation markers against the run's context entries (1-based):
/// each marker becomes a finding at `citations/<n>`, `{description, value}` of the entry, or
/// `{"unresolved": true}` when there is no such entry.
#[derive(Debug, Clone, Copy, Default)]
pub struct Citations {
    _priv: (),
}

impl Citations {
    /// The processor.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `text` has a `[n]` marker: a predicate for
    /// [`PostProcessLayer::when`](super::PostProcessLayer::when).
    #[must_use]
    pub fn cites(text: &str) -> bool {
        !markers(text).is_empty()
    }
}

/// The numbers inside `[n]` markers, in order of first appearance.
fn markers(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        rest = &rest[open + 1..];
        let Some(close) = rest.find(']') else { break };
        if let Ok(n) = rest[..close].parse::<usize>()
            && seen.insert(n)
        {
            found.push(n);
        }
        rest = &rest[close..];
    }
    found
}

impl Service<ProcessRequest> for Citations {
    type Response = Iter<std::vec::IntoIter<Finding>>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ProcessRequest) -> Self::Future {
        let findings: Vec<Finding> = markers(&req.text)
            .into_iter()
            .map(|n| Finding {
                path: vec!["citations".to_owned(), n.to_string()],
                value: match n.checked_sub(1).and_then(|i| req.context.get(i)) {
                    Some(entry) => json!({"description": entry.description, "value": entry.value}),
                    None => json!({"unresolved": true}),
                },
            })
            .collect();
        std::future::ready(Ok(stream::iter(findings)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_markers_once_in_order() {
        assert_eq!(markers("a [2] b [1] c [2] [x] [10]"), vec![2, 1, 10]);
        assert_eq!(markers("no markers [ here"), Vec::<usize>::new());
    }
}
