//! [`Principal`]: who a run is for.

use std::{fmt, sync::Arc};

/// Who a request comes from, as an authentication scheme named it: a stable name that is not a
/// secret (it is logged and stored with what the principal owns), and whether it is an operator.
///
/// Threads and runs belong to the principal that made them; another principal is told they do
/// not exist, an operator sees and answers everything. A server that authenticates nobody has no
/// principal: everyone shares one space.
///
/// ```
/// use agent_tower::context::Principal;
///
/// let alice = Principal::user("alice")?;
/// assert!(alice.may_use(Some("alice")));
/// assert!(!alice.may_use(Some("bob")));
/// assert!(!alice.may_use(None), "made without authentication: not hers");
/// assert!(Principal::operator("ops")?.may_use(Some("bob")));
/// assert!(Principal::user("").is_err());
/// # Ok::<(), agent_tower::context::InvalidPrincipal>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    name: Arc<str>,
    operator: bool,
}

/// The longest principal name, in bytes.
pub const MAX_PRINCIPAL_BYTES: usize = 256;

impl Principal {
    /// A principal that sees what it owns.
    ///
    /// # Errors
    ///
    /// When `name` is empty, longer than [`MAX_PRINCIPAL_BYTES`] or holds a control character.
    pub fn user(name: impl AsRef<str>) -> Result<Self, InvalidPrincipal> {
        Self::named(name.as_ref(), false)
    }

    /// An operator: it sees and answers everything.
    ///
    /// # Errors
    ///
    /// As [`user`](Self::user).
    pub fn operator(name: impl AsRef<str>) -> Result<Self, InvalidPrincipal> {
        Self::named(name.as_ref(), true)
    }

    fn named(name: &str, operator: bool) -> Result<Self, InvalidPrincipal> {
        let problem = if name.is_empty() {
            "is empty"
        } else if name.len() > MAX_PRINCIPAL_BYTES {
            "is longer than 256 bytes"
        } else if name.chars().any(char::is_control) {
            "holds a control character"
        } else {
            return Ok(Self {
                name: name.into(),
                operator,
            });
        };
        Err(InvalidPrincipal(problem))
    }

    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it is an operator.
    #[must_use]
    pub fn is_operator(&self) -> bool {
        self.operator
    }

    /// Whether it may see and use what `owner` owns (`None`: something made without
    /// authentication, which only operators see once principals exist).
    #[must_use]
    pub fn may_use(&self, owner: Option<&str>) -> bool {
        self.operator || owner == Some(self.name())
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Principal")
            .field("name", &self.name())
            .field("operator", &self.operator)
            .finish()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// A principal name that cannot be one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPrincipal(&'static str);

impl fmt::Display for InvalidPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a principal's name {}", self.0)
    }
}

impl std::error::Error for InvalidPrincipal {}
