//! What a reasoning message keeps for the API: the signature of a thinking block, or the data of
//! a redacted one, in one opaque string (AG-UI's `encryptedValue`).

/// The value the API needs back with a reasoning message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Sealed {
    /// A `thinking` block's `signature`.
    Signature(String),
    /// A `redacted_thinking` block's `data`.
    Redacted(String),
}

/// Marks a redacted block's data. Signatures are base64, so never start with it.
const REDACTED: &str = "redacted_thinking:";

impl Sealed {
    /// The opaque string clients keep and send back.
    pub(super) fn seal(self) -> String {
        match self {
            Self::Signature(signature) => signature,
            Self::Redacted(data) => format!("{REDACTED}{data}"),
        }
    }

    /// What `value` (from [`seal`](Self::seal)) holds.
    pub(super) fn open(value: &str) -> Self {
        match value.strip_prefix(REDACTED) {
            Some(data) => Self::Redacted(data.to_owned()),
            None => Self::Signature(value.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_as_what_it_was() {
        for sealed in [
            Sealed::Signature("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()),
            Sealed::Redacted("EmwKAhgBEgy3va3pzix/LafPsn4a".into()),
        ] {
            assert_eq!(Sealed::open(&sealed.clone().seal()), sealed);
        }
    }
}
