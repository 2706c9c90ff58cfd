//! [`Delta`]: a piece of streamed text, shared by every layer that sees it.
//!
//! A model's token goes to the agent (which accumulates the answer), to the AG-UI or ACP encoder
//! (which puts it in a wire event) and to whatever layer watches the stream; a `Delta` is an
//! `Arc<str>`, so each of them holds the same bytes: cloning one is a reference-count increment,
//! never an allocation.
//!
//! ```
//! use agent_tower::delta::Delta;
//!
//! let delta = Delta::from("Hello");
//! let shared = delta.clone(); // the same bytes
//! assert_eq!(shared, "Hello");
//! assert_eq!(delta.len(), 5); // it derefs to `str`
//! assert_eq!(String::from(delta), "Hello");
//! ```

use std::{borrow::Borrow, fmt, ops::Deref, sync::Arc};

use serde::{Deserialize, Serialize};

/// A piece of streamed text (a token, a fragment of tool-call arguments), cheap to clone.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Delta(Arc<str>);

impl Delta {
    /// The text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Delta {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Delta {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Delta {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Delta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Delta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl From<&str> for Delta {
    fn from(text: &str) -> Self {
        Self(text.into())
    }
}

impl From<String> for Delta {
    fn from(text: String) -> Self {
        Self(text.into())
    }
}

impl From<&String> for Delta {
    fn from(text: &String) -> Self {
        Self(text.as_str().into())
    }
}

impl From<Arc<str>> for Delta {
    fn from(text: Arc<str>) -> Self {
        Self(text)
    }
}

impl From<Delta> for String {
    fn from(delta: Delta) -> Self {
        delta.0.as_ref().to_owned()
    }
}

impl From<Delta> for Arc<str> {
    fn from(delta: Delta) -> Self {
        delta.0
    }
}

impl PartialEq<str> for Delta {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Delta {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for Delta {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Delta> for str {
    fn eq(&self, other: &Delta) -> bool {
        *self == *other.0
    }
}

impl PartialEq<Delta> for &str {
    fn eq(&self, other: &Delta) -> bool {
        **self == *other.0
    }
}

impl PartialEq<Delta> for String {
    fn eq(&self, other: &Delta) -> bool {
        **self == *other.0
    }
}
