//! [`BearerTokens`]: a fixed set of tokens, each naming its principal.

use std::fmt;

use futures_util::future::{BoxFuture, FutureExt};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{AuthError, Authenticate, Identity, MIN_TOKEN_BYTES, Scope};
use crate::{BoxError, context::Principal};

/// `name`, as a configured token or front may be named: without `:` or `/`, which only the
/// principals of the other ways in hold (`token:…` for an unnamed token, `{front}/{user}` for the
/// user a front names, `jwt:{subject}@{issuer}` for a JSON Web Token), so that no two ways in
/// name the same principal.
fn configured(name: &str) -> Result<&str, BoxError> {
    if name.contains([':', '/']) {
        return Err(format!(
            "`{name}` cannot name a token or a front: `:` and `/` mark the principals of the \
             other ways in (`token:…`, `{{front}}/{{user}}`, `jwt:…`)"
        )
        .into());
    }
    Ok(name)
}

/// A set of bearer tokens, each with its [`Scope`] and the name of the [`Principal`] it
/// authenticates. Only their SHA-256 digests are kept, and a token is compared with every one of
/// them in constant time.
#[derive(Clone, Default)]
pub struct BearerTokens {
    tokens: Vec<Token>,
}

#[derive(Clone)]
struct Token {
    digest: [u8; 32],
    identity: Identity,
}

impl fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerTokens")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl BearerTokens {
    /// No tokens: every request that needs a scope is refused.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `token` with `scope`, for a principal named after the token's digest
    /// (`token:` and its first 8 hexadecimal digits: stable, no secret, and a name no configured
    /// token or front can have; see [`add_named`](Self::add_named)).
    ///
    /// # Errors
    ///
    /// As [`add_named`](Self::add_named).
    pub fn add(self, scope: Scope, token: impl AsRef<str>) -> Result<Self, BoxError> {
        let digest = digest(token.as_ref().as_bytes());
        let name: String = digest[..4]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        self.add_principal(&format!("token:{name}"), scope, token.as_ref())
    }

    /// Adds `token` with `scope` for the principal `name` (a [`Scope::Operator`] token for an
    /// operator principal). Several tokens may name the same principal (a token and its
    /// replacement), all of one kind.
    ///
    /// # Errors
    ///
    /// When the token is shorter than [`MIN_TOKEN_BYTES`] or holds anything but visible ASCII
    /// (it could not be sent in a header), when `name` cannot name a principal or holds `:` or
    /// `/` (they mark the names of the other ways in: `token:…`, `{front}/{user}`, `jwt:…`), when
    /// the token is already listed, or when `name` is already a principal of another kind (a run
    /// token, an operator token, a front).
    pub fn add_named(
        self,
        name: impl AsRef<str>,
        scope: Scope,
        token: impl AsRef<str>,
    ) -> Result<Self, BoxError> {
        self.add_principal(configured(name.as_ref())?, scope, token.as_ref())
    }

    fn add_principal(self, name: &str, scope: Scope, token: &str) -> Result<Self, BoxError> {
        let principal = match scope {
            Scope::Run => Principal::user(name)?,
            Scope::Operator => Principal::operator(name)?,
        };
        self.push(
            token,
            Identity {
                principal,
                scope,
                front: false,
                expires_at: None,
            },
        )
    }

    /// Adds the token of a trusted front named `name`: a backend that authenticated its own
    /// users (a CopilotKit runtime, an API gateway) and names the one it acts for in the
    /// [`USER_HEADER`](super::USER_HEADER) of each request, whose principal the request then is:
    /// `{name}/{user}`, the user of this front, no other front's nor a token's (without it, the
    /// front's own). It has [`Scope::Run`].
    ///
    /// # Errors
    ///
    /// As [`add_named`](Self::add_named).
    pub fn add_front(
        self,
        name: impl AsRef<str>,
        token: impl AsRef<str>,
    ) -> Result<Self, BoxError> {
        let identity = Identity {
            principal: Principal::user(configured(name.as_ref())?)?,
            scope: Scope::Run,
            front: true,
            expires_at: None,
        };
        self.push(token.as_ref(), identity)
    }

    fn push(mut self, token: &str, identity: Identity) -> Result<Self, BoxError> {
        if token.len() < MIN_TOKEN_BYTES {
            return Err(format!(
                "a bearer token must have at least {MIN_TOKEN_BYTES} characters (one has {})",
                token.len()
            )
            .into());
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("a bearer token may hold only visible ASCII characters".into());
        }
        let digest = digest(token.as_bytes());
        let name = identity.principal.name();
        if let Some(listed) = self.tokens.iter().find(|t| t.digest == digest) {
            return Err(format!(
                "a bearer token is listed twice (for `{}` and for `{name}`): each token is one \
                 principal with one scope",
                listed.identity.principal.name()
            )
            .into());
        }
        if let Some(listed) = self
            .tokens
            .iter()
            .find(|t| t.identity.principal.name() == name && t.identity.kind() != identity.kind())
        {
            return Err(format!(
                "`{name}` names both {} and {}: one name is one principal",
                listed.identity.kind(),
                identity.kind()
            )
            .into());
        }
        self.tokens.push(Token { digest, identity });
        Ok(self)
    }

    /// Whether no token was added.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Whether any token has `scope`.
    #[must_use]
    pub fn has(&self, scope: Scope) -> bool {
        self.tokens
            .iter()
            .any(|token| token.identity.scope == scope)
    }

    /// Who `token` is, if it is one of the set. Every digest is compared, whatever matches, so
    /// the time taken tells nothing about the tokens.
    fn find(&self, token: &[u8]) -> Option<&Identity> {
        let given = digest(token);
        let mut found: Option<&Identity> = None;
        for entry in &self.tokens {
            if bool::from(entry.digest.ct_eq(&given))
                && found.is_none_or(|found| entry.identity.scope > found.scope)
            {
                found = Some(&entry.identity);
            }
        }
        found
    }
}

impl Authenticate for BearerTokens {
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<Identity>, AuthError>> {
        std::future::ready(Ok(self.find(token.as_bytes()).cloned())).boxed()
    }
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}
