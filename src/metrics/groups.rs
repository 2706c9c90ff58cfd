//! [`PrincipalGroups`]: the groups of principals the metrics count runs by.

use std::{collections::HashMap, fmt, sync::Arc};

/// The group of runs made without authentication.
const NONE: &str = "none";
/// The group of principals in no named group.
const OTHER: &str = "other";
/// The longest group name, in bytes.
const MAX_GROUP_BYTES: usize = 64;

/// Which group each principal's runs count under in
/// [`Metrics::with_groups`](super::Metrics::with_groups): groups an operator names, so the label
/// set stays bounded however many principals sign in. A principal in no group counts under
/// `other`, a run made without authentication under `none`.
///
/// ```
/// use agent_tower::metrics::PrincipalGroups;
///
/// let groups = PrincipalGroups::new().group("support", ["alice", "bob"])?;
/// assert!(PrincipalGroups::new().group("other", ["carol"]).is_err(), "a name of its own");
/// assert!(groups.clone().group("research", ["alice"]).is_err(), "one group a principal");
/// # Ok::<(), agent_tower::metrics::InvalidGroup>(())
/// ```
#[derive(Debug, Clone)]
pub struct PrincipalGroups {
    /// The group of each principal named in one.
    of: HashMap<String, Arc<str>>,
    none: Arc<str>,
    other: Arc<str>,
}

impl Default for PrincipalGroups {
    fn default() -> Self {
        Self::new()
    }
}

impl PrincipalGroups {
    /// No groups: the metrics have no group families.
    #[must_use]
    pub fn new() -> Self {
        Self {
            of: HashMap::new(),
            none: NONE.into(),
            other: OTHER.into(),
        }
    }

    /// These principals (by name) count under `group`.
    ///
    /// # Errors
    ///
    /// When `group` is empty, longer than 64 bytes, holds anything but ASCII letters, digits,
    /// `-`, `_` and `.`, or is `none` or `other`; when a principal is already in another group.
    pub fn group<P>(
        mut self,
        group: &str,
        principals: impl IntoIterator<Item = P>,
    ) -> Result<Self, InvalidGroup>
    where
        P: AsRef<str>,
    {
        let valid = !group.is_empty()
            && group.len() <= MAX_GROUP_BYTES
            && group
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !valid {
            return Err(InvalidGroup::Name(group.to_owned()));
        }
        if group == NONE || group == OTHER {
            return Err(InvalidGroup::Reserved(group.to_owned()));
        }
        let named: Arc<str> = self
            .of
            .values()
            .find(|known| &***known == group)
            .cloned()
            .unwrap_or_else(|| group.into());
        for principal in principals {
            let principal = principal.as_ref();
            match self.of.get(principal) {
                Some(known) if *known != named => {
                    return Err(InvalidGroup::TwoGroups {
                        principal: principal.to_owned(),
                        first: known.to_string(),
                        second: group.to_owned(),
                    });
                }
                _ => {
                    self.of.insert(principal.to_owned(), named.clone());
                }
            }
        }
        Ok(self)
    }

    /// Whether no group is named.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.of.is_empty()
    }

    /// The group the runs of `principal` (a name; `None`: no authentication) count under.
    #[must_use]
    pub fn of(&self, principal: Option<&str>) -> Arc<str> {
        match principal {
            None => self.none.clone(),
            Some(name) => self.of.get(name).unwrap_or(&self.other).clone(),
        }
    }
}

/// A group [`PrincipalGroups::group`] refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidGroup {
    /// The name is empty, too long, or holds a character a label had better not.
    Name(String),
    /// The name is one the metrics give themselves (`none`, `other`).
    Reserved(String),
    /// A principal named in two groups.
    TwoGroups {
        /// The principal.
        principal: String,
        /// The group it was in.
        first: String,
        /// The group it was named in again.
        second: String,
    },
}

impl fmt::Display for InvalidGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(name) => write!(
                f,
                "the group name `{name}` is not 1 to 64 ASCII letters, digits, `-`, `_` or `.`"
            ),
            Self::Reserved(name) => write!(
                f,
                "the group name `{name}` is the metrics' own (for runs without authentication, or \
                 of principals in no group)"
            ),
            Self::TwoGroups {
                principal,
                first,
                second,
            } => write!(
                f,
                "the principal `{principal}` is in group `{first}` and in group `{second}`: one \
                 group each"
            ),
        }
    }
}

impl std::error::Error for InvalidGroup {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_principal_counts_under_its_group_the_rest_under_other_or_none() {
        let groups = PrincipalGroups::new()
            .group("support", ["alice", "bob"])
            .unwrap()
            .group("support", ["dan"])
            .unwrap()
            .group("research", ["carol"])
            .unwrap();
        let of = |principal| groups.of(principal).to_string();
        assert_eq!(
            [
                of(Some("alice")),
                of(Some("dan")),
                of(Some("carol")),
                of(Some("eve")),
                of(None)
            ],
            ["support", "support", "research", "other", "none"]
        );
    }

    #[test]
    fn bad_groups_are_refused_with_the_reason() {
        let refused = |group: &str, principals: &[&str]| {
            PrincipalGroups::new()
                .group("support", ["alice"])
                .unwrap()
                .group(group, principals)
                .unwrap_err()
        };
        assert!(matches!(refused("", &[]), InvalidGroup::Name(_)));
        assert!(matches!(refused("a b", &[]), InvalidGroup::Name(_)));
        assert!(matches!(
            refused(&"g".repeat(65), &[]),
            InvalidGroup::Name(_)
        ));
        assert!(matches!(refused("none", &[]), InvalidGroup::Reserved(_)));
        let twice = refused("research", &["alice"]);
        assert_eq!(
            twice.to_string(),
            "the principal `alice` is in group `support` and in group `research`: one group each"
        );
    }
}
