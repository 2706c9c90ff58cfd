//! [`Jwt`]: principals from JSON Web Tokens signed by an issuer's keys.

use std::{
    collections::HashMap,
    fmt,
    path::PathBuf,
    str::FromStr,
    sync::{PoisonError, RwLock},
    time::{Duration, Instant},
};

use futures_util::future::{BoxFuture, FutureExt};
use jsonwebtoken::{
    Algorithm, DecodingKey, Validation, decode, decode_header, errors::ErrorKind, jwk::JwkSet,
};
use serde_json::Value;

use super::{AuthError, Authenticate, Identity, Scope};
use crate::context::Principal;

/// How long fetched keys are used before they are fetched again (when a token comes).
const REFRESH_AFTER: Duration = Duration::from_secs(600);

/// How often a token signed by an unknown key may make the keys be fetched again.
const UNKNOWN_KEY_REFRESH: Duration = Duration::from_secs(30);

/// How long fetching the keys may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Verifies JSON Web Tokens against the keys (a JWKS) of the issuer a server trusts (any OIDC
/// provider): the signature with an allowed algorithm, `iss`, `aud`, `exp` (required) and `nbf`;
/// the token's principal is the user `jwt:{sub}@{issuer}` (its `sub` claim, or
/// [another](Self::principal_claim), at this issuer: a name no bearer token, front or other issuer
/// gives). Keys are
/// fetched (from a URL) or read (from a file) again when they are older than 10 minutes, and when
/// a token names a key not known yet (a rotation), at most every 30 seconds. An
/// [`Authenticate`] scheme for [`BearerAuthLayer`](super::BearerAuthLayer) and
/// [`AguiServer::authenticate`](crate::server::AguiServer::authenticate).
///
/// ```no_run
/// # async fn serve(agent: impl agent_tower::run::RunService) -> Result<(), agent_tower::BoxError> {
/// use agent_tower::server::{AguiServer, Jwt};
///
/// let jwt = Jwt::new(
///     "https://login.example.com/.well-known/jwks.json",
///     "https://login.example.com/",
///     "agent-tower",
/// )
/// .await?;
/// let app = AguiServer::new(agent).authenticate(jwt).into_router();
/// # let _ = app; Ok(()) }
/// ```
pub struct Jwt {
    source: Source,
    issuer: String,
    audience: String,
    algorithms: Vec<Algorithm>,
    claim: String,
    refresh_after: Duration,
    keys: RwLock<Keys>,
    /// When the keys were last fetched, or tried to be: one fetch at a time.
    fetching: tokio::sync::Mutex<Instant>,
}

enum Source {
    Url(reqwest::Client, String),
    File(PathBuf),
}

/// An issuer's keys: by key id, and those without one.
struct Keys {
    by_id: HashMap<String, Key>,
    unnamed: Vec<Key>,
    fetched: Instant,
}

struct Key {
    key: DecodingKey,
    /// The algorithm the key is for, when the set says.
    algorithm: Option<Algorithm>,
}

/// The keys of a [`Jwt`] could not be had, or a setting is wrong.
#[derive(Debug)]
pub struct JwtError(String);

impl fmt::Display for JwtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl std::error::Error for JwtError {}

impl Jwt {
    /// Tokens of `issuer` for `audience`, verified against the keys at `jwks`: an `https://` (or
    /// `http://`) URL, or the path of a file; the keys are fetched now. The algorithms allowed are
    /// RS256, ES256 and EdDSA.
    ///
    /// # Errors
    ///
    /// When the keys cannot be fetched or read, or are not a JWKS with a key this crate verifies.
    pub async fn new(
        jwks: &str,
        issuer: impl Into<String>,
        audience: impl Into<String>,
    ) -> Result<Self, JwtError> {
        // `jsonwebtoken` verifies with the process's provider, aws-lc here unless the application
        // installed its own first. Installed, so that an application that also turns on the
        // crate's other provider (`rust_crypto`) does not make every verification panic.
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
        let source = if jwks.starts_with("https://") || jwks.starts_with("http://") {
            let client = reqwest::Client::builder()
                .timeout(FETCH_TIMEOUT)
                .build()
                .map_err(|e| JwtError(format!("no HTTP client for the JWKS: {e}")))?;
            Source::Url(client, jwks.to_owned())
        } else {
            Source::File(PathBuf::from(jwks))
        };
        let keys = source.fetch().await?;
        Ok(Self {
            source,
            issuer: issuer.into(),
            audience: audience.into(),
            algorithms: vec![Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA],
            claim: "sub".to_owned(),
            refresh_after: REFRESH_AFTER,
            keys: RwLock::new(keys),
            // A token signed by a key not known yet may make them be fetched at once.
            fetching: tokio::sync::Mutex::new(
                Instant::now()
                    .checked_sub(UNKNOWN_KEY_REFRESH)
                    .unwrap_or_else(Instant::now),
            ),
        })
    }

    /// The algorithms a token may be signed with, by their JOSE names (`RS256`, `ES256`,
    /// `EdDSA`, `PS256`, …).
    ///
    /// # Errors
    ///
    /// For a name no algorithm has, for an HMAC one (`HS…`: a shared secret is not an issuer's
    /// key), or for none at all.
    pub fn algorithms<I, S>(mut self, names: I) -> Result<Self, JwtError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let algorithms = names
            .into_iter()
            .map(|name| {
                let name = name.as_ref();
                match Algorithm::from_str(name) {
                    Ok(Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) | Err(_) => Err(
                        JwtError(format!("`{name}` is not an algorithm of an issuer's keys")),
                    ),
                    Ok(algorithm) => Ok(algorithm),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if algorithms.is_empty() {
            return Err(JwtError(
                "at least one algorithm must be allowed".to_owned(),
            ));
        }
        self.algorithms = algorithms;
        Ok(self)
    }

    /// The claim that names the principal (default `sub`).
    #[must_use]
    pub fn principal_claim(mut self, claim: impl Into<String>) -> Self {
        self.claim = claim.into();
        self
    }

    /// How long the keys are used before they are fetched again (default 10 minutes).
    #[must_use]
    pub fn refresh_after(mut self, age: Duration) -> Self {
        self.refresh_after = age;
        self
    }

    /// Fetches the keys again now.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new); the keys known before stay.
    pub async fn refresh(&self) -> Result<(), JwtError> {
        let mut fetching = self.fetching.lock().await;
        *fetching = Instant::now();
        let keys = self.source.fetch().await?;
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = keys;
        Ok(())
    }

    /// Fetches the keys again if they are older than allowed, or if a token names one not known
    /// and the last try is not too recent; a failure is logged, the keys known stay. Only a
    /// token naming an unknown key waits for a fetch under way: the others go on with the keys
    /// known meanwhile.
    async fn refresh_if_due(&self, unknown_key: bool) {
        let stale = || {
            let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
            keys.fetched.elapsed() >= self.refresh_after
        };
        let mut fetching = if unknown_key {
            self.fetching.lock().await
        } else if !stale() {
            return;
        } else if let Ok(fetching) = self.fetching.try_lock() {
            fetching
        } else {
            return;
        };
        let due = stale() || (unknown_key && fetching.elapsed() >= UNKNOWN_KEY_REFRESH);
        if !due {
            return;
        }
        *fetching = Instant::now();
        match self.source.fetch().await {
            Ok(keys) => *self.keys.write().unwrap_or_else(PoisonError::into_inner) = keys,
            Err(error) => tracing::warn!(%error, "the issuer's keys could not be fetched again"),
        }
    }

    /// Verifies `token` with the key it names (`None` when no known key is for it).
    fn verify(
        &self,
        token: &str,
        kid: Option<&str>,
        algorithm: Algorithm,
    ) -> Option<Result<Value, AuthError>> {
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        let for_it = |key: &&Key| key.algorithm.is_none_or(|a| a == algorithm);
        let candidates: Vec<&Key> = match kid {
            Some(kid) => keys.by_id.get(kid).into_iter().filter(for_it).collect(),
            None => keys.unnamed.iter().filter(for_it).collect(),
        };
        if candidates.is_empty() {
            return None;
        }
        let mut validation = Validation::new(algorithm);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        let mut last = None;
        for key in candidates {
            match decode::<Value>(token, &key.key, &validation) {
                Ok(data) => return Some(Ok(data.claims)),
                Err(error) => last = Some(error),
            }
        }
        last.map(|error| Err(refusal(error.kind())))
    }
}

/// Why a token was refused, for its client.
fn refusal(kind: &ErrorKind) -> AuthError {
    AuthError(
        match kind {
            ErrorKind::ExpiredSignature => "the token expired",
            ErrorKind::ImmatureSignature => "the token is not valid yet",
            ErrorKind::InvalidAudience => "the token is for another audience",
            ErrorKind::InvalidIssuer => "the token is from another issuer",
            ErrorKind::InvalidSignature => "the token's signature does not verify",
            ErrorKind::MissingRequiredClaim(_) => "the token lacks `exp`, `iss` or `aud`",
            _ => "the token is not valid",
        }
        .to_owned(),
    )
}

impl Authenticate for Jwt {
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<Identity>, AuthError>> {
        async move {
            // Not a JWT of an algorithm this crate knows (`alg: none` among them): not this
            // scheme's.
            let Ok(header) = decode_header(token) else {
                return Ok(None);
            };
            if !self.algorithms.contains(&header.alg) {
                return Err(AuthError(format!(
                    "tokens signed with {:?} are not accepted",
                    header.alg
                )));
            }
            self.refresh_if_due(false).await;
            let kid = header.kid.as_deref();
            let verified = match self.verify(token, kid, header.alg) {
                Some(verified) => verified,
                None => {
                    self.refresh_if_due(true).await;
                    self.verify(token, kid, header.alg).ok_or_else(|| {
                        AuthError("the token's key is not one of the issuer's".to_owned())
                    })?
                }
            };
            let claims = verified?;
            let name = claims
                .get(&self.claim)
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    AuthError(format!(
                        "the token has no `{}` to name its principal",
                        self.claim
                    ))
                })?;
            // Named by its way in, `jwt:{subject}@{issuer}`: a name no token or front can have.
            let principal = Principal::user(format!("jwt:{name}@{}", self.issuer))
                .map_err(|e| AuthError(format!("the token's `{}`: {e}", self.claim)))?;
            // `exp` is required and checked: a connection the token opens ends with it.
            let expires_at = claims
                .get("exp")
                .and_then(Value::as_u64)
                .map(|exp| std::time::UNIX_EPOCH + Duration::from_secs(exp));
            Ok(Some(Identity {
                principal,
                scope: Scope::Run,
                front: false,
                expires_at,
            }))
        }
        .boxed()
    }
}

impl Source {
    /// The keys, fetched or read now.
    async fn fetch(&self) -> Result<Keys, JwtError> {
        let text = match self {
            Self::Url(client, url) => {
                let fetched = async {
                    client
                        .get(url)
                        .send()
                        .await?
                        .error_for_status()?
                        .bytes()
                        .await
                }
                .await;
                fetched
                    .map_err(|e| JwtError(format!("the JWKS at {url} could not be fetched: {e}")))?
            }
            Self::File(path) => tokio::fs::read(path).await.map(Into::into).map_err(|e| {
                JwtError(format!(
                    "the JWKS file {} cannot be read: {e}",
                    path.display()
                ))
            })?,
        };
        let set: JwkSet = serde_json::from_slice(&text)
            .map_err(|e| JwtError(format!("the issuer's keys are not a JWKS: {e}")))?;
        let mut keys = Keys {
            by_id: HashMap::new(),
            unnamed: Vec::new(),
            fetched: Instant::now(),
        };
        for jwk in &set.keys {
            // Keys this crate cannot use (encryption keys, unknown types) are skipped.
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            let algorithm = jwk
                .common
                .key_algorithm
                .and_then(|a| Algorithm::from_str(&a.to_string()).ok());
            let key = Key { key, algorithm };
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.by_id.insert(kid.clone(), key);
                }
                None => keys.unnamed.push(key),
            }
        }
        if keys.by_id.is_empty() && keys.unnamed.is_empty() {
            return Err(JwtError(
                "the JWKS holds no key to verify tokens with".to_owned(),
            ));
        }
        Ok(keys)
    }
}

impl fmt::Debug for Jwt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = self.keys.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Jwt")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("algorithms", &self.algorithms)
            .field("claim", &self.claim)
            .field("keys", &(keys.by_id.len() + keys.unnamed.len()))
            .finish_non_exhaustive()
    }
}
