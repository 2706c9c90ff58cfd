//! Identifiers of threads, runs, messages and tool calls.
//!
//! Every id is a string newtype over an `Arc<str>`: cloning one (which happens for every streamed
//! token) is a reference-count increment, never an allocation. Ids are *arbitrary strings* on the
//! wire: `"msg_1"` and `"call_abc"` are as valid as a UUID. The generators produce UUID v7 strings,
//! which sort by creation time.
//!
//! ```
//! use agent_tower::id::{MessageId, ToolCallId};
//!
//! let generated = MessageId::new();
//! assert_eq!(generated.as_str().len(), 36);
//!
//! let from_peer = ToolCallId::from("call_abc");
//! assert_eq!(from_peer.as_str(), "call_abc");
//! ```

use std::{borrow::Borrow, fmt, ops::Deref, sync::Arc};

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// A fresh, time-ordered id (a UUID v7 string).
            #[must_use]
            pub fn new() -> Self {
                Self(Arc::from(uuid::Uuid::now_v7().to_string()))
            }

            /// The id as a string slice.
            #[must_use]
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_tuple(stringify!($name)).field(&&*self.0).finish()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&self.0)
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(Arc::from(s))
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(Arc::from(s))
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }
    };
}

string_id! {
    /// A conversation thread: runs on the same thread continue the same conversation.
    ThreadId
}
string_id! {
    /// One run of the agent on a thread (one user turn, possibly many model and tool steps).
    RunId
}
string_id! {
    /// A message: the id a streamed message has in every later snapshot, store and replay.
    MessageId
}
string_id! {
    /// A tool call, as chosen by the model (or by the peer that sent it).
    ToolCallId
}
string_id! {
    /// A point where a run stopped to wait for a person (an AG-UI interrupt).
    InterruptId
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_any_string_on_the_wire() {
        let id: ToolCallId = serde_json::from_str("\"call_abc\"").unwrap();
        assert_eq!(id, "call_abc");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"call_abc\"");
    }

    #[test]
    fn generated_ids_are_unique_and_ordered() {
        let a = RunId::new();
        let b = RunId::new();
        assert_ne!(a, b);
        assert!(a < b);
    }
}
