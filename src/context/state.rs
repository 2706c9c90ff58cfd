//! The run's shared state: what AG-UI frontends see as `state`.

use std::sync::{Arc, Mutex, PoisonError};

use json_patch::{Patch, PatchOperation};
use serde_json::Value;

/// Keys a state change may not write: a JavaScript client applying the delta would change its
/// objects' prototypes.
pub(crate) const UNSAFE_KEYS: [&str; 3] = ["__proto__", "constructor", "prototype"];

/// Whether `op` writes no [`UNSAFE_KEYS`] key: neither in its path (those keys need no `~`
/// escape, so the raw segments are compared) nor in the value it writes.
fn is_safe_op(op: &PatchOperation) -> bool {
    fn safe_value(value: &Value) -> bool {
        match value {
            Value::Object(map) => map
                .iter()
                .all(|(key, value)| !UNSAFE_KEYS.contains(&key.as_str()) && safe_value(value)),
            Value::Array(items) => items.iter().all(safe_value),
            _ => true,
        }
    }
    let path: &str = op.path().as_ref();
    let value = match op {
        PatchOperation::Add(add) => Some(&add.value),
        PatchOperation::Replace(replace) => Some(&replace.value),
        _ => None,
    };
    path.split('/')
        .all(|segment| !UNSAFE_KEYS.contains(&segment))
        && value.is_none_or(safe_value)
}

/// Why [`SharedState::apply`] refused a patch.
#[derive(Debug)]
#[non_exhaustive]
pub enum ApplyError {
    /// The operation at this index writes a `__proto__`, `constructor` or `prototype` key.
    UnsafeKey {
        /// The index of the operation in the patch.
        operation: usize,
    },
    /// An operation does not apply.
    Patch(json_patch::PatchError),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnsafeKey { operation } => write!(
                f,
                "operation {operation} writes a `__proto__`, `constructor` or `prototype` key"
            ),
            Self::Patch(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for ApplyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::UnsafeKey { .. } => None,
            Self::Patch(error) => Some(error),
        }
    }
}

/// How many [`UNSAFE_KEYS`] keys `value` holds, at any depth.
pub(crate) fn unsafe_keys(value: &Value) -> usize {
    let mut count = 0;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    count += usize::from(UNSAFE_KEYS.contains(&key.as_str()));
                    stack.push(value);
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    count
}

/// The state of a run, shared by the agent, its tools and the layers that emit it.
///
/// Every change is recorded as RFC 6902 operations (computed with [`json_patch::diff`], or given
/// as a patch), which an emitting layer sends as a delta (`STATE_DELTA`); the run's outcome carries
/// the final state. Clones share the same state.
///
/// ```
/// use agent_tower::context::SharedState;
/// use serde_json::json;
///
/// let state = SharedState::new(json!({"todos": []}));
/// state.update(|s| s["todos"].as_array_mut().unwrap().push(json!("write docs")));
/// assert_eq!(state.get(), json!({"todos": ["write docs"]}));
/// let sent = serde_json::to_value(state.take_changes()).unwrap();
/// assert_eq!(sent, json!([{"op": "add", "path": "/todos/0", "value": "write docs"}]));
/// ```
#[derive(Debug, Clone)]
pub struct SharedState(Arc<Mutex<Inner>>, Arc<Watch>);

#[derive(Debug)]
struct Inner {
    value: Value,
    changes: Vec<PatchOperation>,
}

/// Whoever waits for changes, and whether there are any (checked without locking the state:
/// the waiter looks on every poll of its run).
#[derive(Debug, Default)]
struct Watch {
    waker: futures_util::task::AtomicWaker,
    changed: std::sync::atomic::AtomicBool,
}

impl Watch {
    fn notify(&self) {
        self.changed
            .store(true, std::sync::atomic::Ordering::Release);
        self.waker.wake();
    }
}

impl SharedState {
    /// A state starting at `initial`.
    #[must_use]
    pub fn new(initial: Value) -> Self {
        Self(
            Arc::new(Mutex::new(Inner {
                value: initial,
                changes: Vec::new(),
            })),
            Arc::default(),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of the current state.
    #[must_use]
    pub fn get(&self) -> Value {
        self.lock().value.clone()
    }

    /// Changes the state with `change`; returns the operations that describe the change.
    ///
    /// A change that would write a key named `__proto__`, `constructor` or `prototype` (keys
    /// that pollute a JavaScript client applying the delta) is refused whole: the state is left
    /// as it was and the returned patch is empty.
    pub fn update(&self, change: impl FnOnce(&mut Value)) -> Patch {
        self.try_update(change).unwrap_or_else(|_| {
            tracing::warn!(
                "a state change writing `__proto__`, `constructor` or `prototype` was refused"
            );
            Patch(Vec::new())
        })
    }

    /// [`update`](Self::update), saying when the change is refused.
    ///
    /// # Errors
    ///
    /// [`ApplyError::UnsafeKey`] when the change would write a `__proto__`, `constructor` or
    /// `prototype` key: the state is left as it was.
    pub fn try_update(&self, change: impl FnOnce(&mut Value)) -> Result<Patch, ApplyError> {
        let mut inner = self.lock();
        let before = inner.value.clone();
        change(&mut inner.value);
        let patch = json_patch::diff(&before, &inner.value);
        if let Some(operation) = patch.0.iter().position(|op| !is_safe_op(op)) {
            inner.value = before;
            return Err(ApplyError::UnsafeKey { operation });
        }
        inner.changes.extend(patch.0.iter().cloned());
        drop(inner);
        if !patch.0.is_empty() {
            self.1.notify();
        }
        Ok(patch)
    }

    /// Applies `patch` atomically (all of it or nothing).
    ///
    /// # Errors
    ///
    /// When an operation writes a `__proto__`, `constructor` or `prototype` key (a page that
    /// merges the state into its objects would be polluted), or does not apply (a missing path, a
    /// failed `test`); the state is unchanged.
    pub fn apply(&self, patch: &Patch) -> Result<(), ApplyError> {
        if let Some(operation) = patch.0.iter().position(|op| !is_safe_op(op)) {
            return Err(ApplyError::UnsafeKey { operation });
        }
        let mut inner = self.lock();
        // Applied to a copy, swapped in whole on success: `json_patch::patch` undoes a failed
        // patch itself, and its undo panics on some patches (a `move` onto the parent of its
        // `from`, then a failing operation; found by the `state_patch` fuzz target).
        let mut value = inner.value.clone();
        json_patch::patch_unsafe(&mut value, patch).map_err(ApplyError::Patch)?;
        // A copy writes what it finds: it must not find an unsafe key the state already had.
        if let Some(operation) = patch
            .0
            .iter()
            .position(|op| matches!(op, PatchOperation::Copy(_)))
            && unsafe_keys(&value) > unsafe_keys(&inner.value)
        {
            return Err(ApplyError::UnsafeKey { operation });
        }
        inner.value = value;
        inner.changes.extend(patch.0.iter().cloned());
        drop(inner);
        self.1.notify();
        Ok(())
    }

    /// The operations recorded since the last call, in order: what has not been sent yet.
    #[must_use]
    pub fn take_changes(&self) -> Vec<PatchOperation> {
        std::mem::take(&mut self.lock().changes)
    }

    /// Like [`take_changes`](SharedState::take_changes), and wakes the task at the next change.
    #[cfg_attr(not(feature = "agui"), allow(dead_code))]
    pub(crate) fn poll_changes(&self, cx: &mut std::task::Context<'_>) -> Vec<PatchOperation> {
        self.1.waker.register(cx.waker());
        if !self
            .1
            .changed
            .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            return Vec::new();
        }
        self.take_changes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-100i64..100).prop_map(Value::from),
            "[a-z~/]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-z~/._]{0,3}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Applying the recorded operations, in order, to the first snapshot gives the state held.
        #[test]
        fn deltas_replay_to_the_state(initial in json_value(), steps in prop::collection::vec(json_value(), 1..5)) {
            let state = SharedState::new(initial.clone());
            let mut client = initial;
            for next in steps {
                state.update(|s| *s = next.clone());
                let ops = state.take_changes();
                json_patch::patch(&mut client, &ops).unwrap();
                prop_assert_eq!(&client, &state.get());
            }
        }
    }

    #[test]
    fn a_failing_patch_after_a_move_onto_its_parent_changes_nothing() {
        // The `state_patch` fuzz target's first crash: `json_patch::patch` panics undoing it.
        let state = SharedState::new(json!({"a": {"x": 1}, "b": []}));
        let patch: Patch = serde_json::from_value(json!([
            {"op": "copy", "from": "/a", "path": "/b/-"},
            {"op": "move", "from": "/a/x", "path": "/a"},
            {"op": "test", "path": "/y", "value": 1}
        ]))
        .unwrap();
        assert!(matches!(state.apply(&patch), Err(ApplyError::Patch(_))));
        assert_eq!(state.get(), json!({"a": {"x": 1}, "b": []}));
        assert!(state.take_changes().is_empty());
    }

    #[test]
    fn a_failing_patch_changes_nothing() {
        let state = SharedState::new(json!({"a": 1}));
        let patch: Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/a", "value": 2},
            {"op": "remove", "path": "/missing"}
        ]))
        .unwrap();
        assert!(state.apply(&patch).is_err());
        assert_eq!(state.get(), json!({"a": 1}));
        assert!(state.take_changes().is_empty());
    }

    #[test]
    fn a_change_writing_a_prototype_key_is_refused_whole() {
        let state = SharedState::new(json!({"kept": 1}));
        for key in UNSAFE_KEYS {
            let patch = state.update(|state| {
                state["fine"] = json!(true);
                state["nested"][key] = json!({"polluted": true});
            });
            assert!(patch.0.is_empty(), "{key}");
            assert_eq!(state.get(), json!({"kept": 1}), "{key}");
        }
        assert!(state.take_changes().is_empty());
        for patch in [
            json!([{"op": "add", "path": "/__proto__", "value": {"polluted": true}}]),
            json!([{"op": "add", "path": "/ok", "value": 1}, {"op": "replace", "path": "/kept", "value": {"a": {"constructor": {}}}}]),
        ] {
            let patch: Patch = serde_json::from_value(patch).unwrap();
            assert!(matches!(
                state.apply(&patch),
                Err(ApplyError::UnsafeKey { .. })
            ));
            assert_eq!(state.get(), json!({"kept": 1}));
        }
        // A state given whole (by a client) may hold one; a copy does not spread it.
        let given = SharedState::new(json!({"a": {"__proto__": {"x": 1}}}));
        let copy: Patch =
            serde_json::from_value(json!([{"op": "copy", "from": "/a", "path": "/b"}])).unwrap();
        assert!(matches!(
            given.apply(&copy),
            Err(ApplyError::UnsafeKey { operation: 0 })
        ));
        assert_eq!(given.get(), json!({"a": {"__proto__": {"x": 1}}}));
        state.update(|state| state["fine"] = json!(true));
        assert_eq!(state.get(), json!({"kept": 1, "fine": true}));
    }
}
