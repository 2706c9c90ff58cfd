//! [`BearerAuthLayer`]: who may call the server, by bearer token and scope.

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};

use axum::{
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tower::{Layer, Service};

use super::{
    Rejection,
    refuse::{RefuseFuture, call_or_refuse},
};
use crate::{BoxError, context::Principal};

/// What a token may do. An operator token may do everything a run token may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Scope {
    /// Start runs and follow them.
    Run,
    /// Also read threads and the review queue, and answer interrupts out of band.
    Operator,
}

/// The shortest token accepted, in bytes: shorter ones can be guessed.
pub const MIN_TOKEN_BYTES: usize = 16;

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
    scope: Scope,
    principal: Principal,
    /// A trusted front, which may name the user it acts for.
    front: bool,
}

/// The header in which a trusted front names the user it acts for (see
/// [`BearerTokens::add_front`]).
pub const USER_HEADER: &str = "x-agent-tower-user";

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
    /// (`token-` and its first 8 hexadecimal digits: stable, and no secret).
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
        self.add_named(format!("token-{name}"), scope, token)
    }

    /// Adds `token` with `scope` for the principal `name` (a [`Scope::Operator`] token for an
    /// operator principal). Several tokens may name the same principal.
    ///
    /// # Errors
    ///
    /// When the token is shorter than [`MIN_TOKEN_BYTES`] or holds anything but visible ASCII
    /// (it could not be sent in a header), or when `name` cannot name a principal.
    pub fn add_named(
        mut self,
        name: impl AsRef<str>,
        scope: Scope,
        token: impl AsRef<str>,
    ) -> Result<Self, BoxError> {
        let token = token.as_ref();
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
        let principal = match scope {
            Scope::Run => Principal::user(name)?,
            Scope::Operator => Principal::operator(name)?,
        };
        self.tokens.push(Token {
            digest: digest(token.as_bytes()),
            scope,
            principal,
            front: false,
        });
        Ok(self)
    }

    /// Adds the token of a trusted front named `name`: a backend that authenticated its own
    /// users (a CopilotKit runtime, an API gateway) and names the one it acts for in the
    /// [`USER_HEADER`] of each request, whose principal the request then is (without it, the
    /// front's own). It has [`Scope::Run`]. A token not added here that names a user is refused.
    ///
    /// # Errors
    ///
    /// As [`add_named`](Self::add_named).
    pub fn add_front(
        self,
        name: impl AsRef<str>,
        token: impl AsRef<str>,
    ) -> Result<Self, BoxError> {
        let mut tokens = self.add_named(name, Scope::Run, token)?;
        if let Some(added) = tokens.tokens.last_mut() {
            added.front = true;
        }
        Ok(tokens)
    }

    /// Whether no token was added.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Whether any token has `scope`.
    #[must_use]
    pub fn has(&self, scope: Scope) -> bool {
        self.tokens.iter().any(|token| token.scope == scope)
    }

    /// The entry of `token`, if it is one of the set. Every digest is compared, whatever
    /// matches, so the time taken tells nothing about the tokens.
    fn find(&self, token: &[u8]) -> Option<&Token> {
        let given = digest(token);
        let mut found: Option<&Token> = None;
        for entry in &self.tokens {
            if bool::from(entry.digest.ct_eq(&given))
                && found.is_none_or(|found| entry.scope > found.scope)
            {
                found = Some(entry);
            }
        }
        found
    }
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

type ScopeOf = dyn Fn(&Request) -> Option<Scope> + Send + Sync;

/// Requires `Authorization: Bearer <token>` with the scope a request needs, and puts the token's
/// [`Principal`] in the request's extensions for the handlers.
///
/// Which scope a request needs is the layer's [`scope_of`](Self::scope_of) function (every
/// request needs [`Scope::Run`] by default; `None` makes a request public). A request without a
/// known token gets `401 unauthorized` with `WWW-Authenticate: Bearer`; one whose token lacks the
/// scope gets `403 forbidden`; both with the JSON error body.
///
/// Put it inside CORS, so that preflights (which carry no credentials) are answered:
/// [`AguiServer::auth`](super::AguiServer::auth) does, with the scopes of its routes.
///
/// ```
/// use agent_tower::server::{BearerAuthLayer, BearerTokens, Scope};
/// use axum::{Router, routing::get};
///
/// let tokens = BearerTokens::new().add(Scope::Run, "a-long-random-token-1")?;
/// let auth = BearerAuthLayer::new(tokens).scope_of(|request| {
///     (request.uri().path() != "/health").then_some(Scope::Run)
/// });
/// let app: Router = Router::new()
///     .route("/health", get(|| async { "ok" }))
///     .route("/private", get(|| async { "secret" }))
///     .layer(auth);
/// # Ok::<(), agent_tower::BoxError>(())
/// ```
#[derive(Clone)]
pub struct BearerAuthLayer {
    tokens: Arc<BearerTokens>,
    scope_of: Arc<ScopeOf>,
}

impl fmt::Debug for BearerAuthLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerAuthLayer")
            .field("tokens", &self.tokens)
            .finish_non_exhaustive()
    }
}

impl BearerAuthLayer {
    /// Requires one of `tokens`, with [`Scope::Run`], on every request.
    #[must_use]
    pub fn new(tokens: BearerTokens) -> Self {
        Self {
            tokens: Arc::new(tokens),
            scope_of: Arc::new(|_| Some(Scope::Run)),
        }
    }

    /// Which scope a request needs; `None` lets it through without a token.
    #[must_use]
    pub fn scope_of<F>(mut self, scope_of: F) -> Self
    where
        F: Fn(&Request) -> Option<Scope> + Send + Sync + 'static,
    {
        self.scope_of = Arc::new(scope_of);
        self
    }

    /// The principal of a request that may go on (`None` for a public route).
    fn check(&self, request: &Request) -> Result<Option<Principal>, Rejection> {
        let Some(needed) = (self.scope_of)(request) else {
            return Ok(None);
        };
        let token = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| bearer(value.as_bytes()));
        match token.and_then(|token| self.tokens.find(token)) {
            Some(token) if token.scope >= needed => {
                match (request.headers().get(USER_HEADER), token.front) {
                    (None, _) => Ok(Some(token.principal.clone())),
                    (Some(user), true) => user
                        .to_str()
                        .ok()
                        .and_then(|user| Principal::user(user.trim()).ok())
                        .map(Some)
                        .ok_or_else(|| {
                            Rejection::new(
                                StatusCode::BAD_REQUEST,
                                "invalid_user",
                                format!("`{USER_HEADER}` must name a user"),
                            )
                        }),
                    (Some(_), false) => Err(Rejection::new(
                        StatusCode::FORBIDDEN,
                        "forbidden",
                        format!("only a trusted front's token may name a user in `{USER_HEADER}`"),
                    )),
                }
            }
            Some(_) => Err(Rejection::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "this token may not use this route (it needs an operator token)",
            )),
            None => Err(Rejection::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                if token.is_some() {
                    "the bearer token is not known"
                } else {
                    "send `Authorization: Bearer <token>`"
                },
            )),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in any case).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, token) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| token.trim_ascii())
        .filter(|token| !token.is_empty())
}

impl<S> Layer<S> for BearerAuthLayer {
    type Service = BearerAuth<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BearerAuth {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`BearerAuthLayer`].
#[derive(Clone, Debug)]
pub struct BearerAuth<S> {
    inner: S,
    layer: BearerAuthLayer,
}

impl<S> BearerAuth<S> {
    crate::inner_service!();
}

impl<S> Service<Request> for BearerAuth<S>
where
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = RefuseFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let verdict = self.layer.check(&request).map(|principal| {
            if let Some(principal) = principal {
                request.extensions_mut().insert(principal);
            }
        });
        let verdict = verdict.map_err(|rejection| {
            let unauthorized = rejection.status() == StatusCode::UNAUTHORIZED;
            let mut response = rejection.into_response();
            if unauthorized {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            response
        });
        call_or_refuse(&mut self.inner, request, verdict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "run-token-0123456789";
    const OPERATOR: &str = "operator-token-0123456789";

    fn layer() -> BearerAuthLayer {
        let tokens = BearerTokens::new()
            .add(Scope::Run, RUN)
            .unwrap()
            .add(Scope::Run, "another-run-token-0123")
            .unwrap()
            .add(Scope::Operator, OPERATOR)
            .unwrap();
        BearerAuthLayer::new(tokens).scope_of(|request| match request.uri().path() {
            "/health" => None,
            "/interrupts" => Some(Scope::Operator),
            _ => Some(Scope::Run),
        })
    }

    fn code(path: &str, authorization: Option<&str>) -> Option<String> {
        let mut builder = Request::builder().uri(path);
        if let Some(value) = authorization {
            builder = builder.header("authorization", value);
        }
        let request = builder.body(axum::body::Body::empty()).unwrap();
        layer().check(&request).err().map(|r| r.code().to_owned())
    }

    #[test]
    fn each_route_needs_its_scope() {
        let unauthorized = Some("unauthorized".to_owned());
        assert_eq!(code("/health", None), None);
        assert_eq!(code("/", None), unauthorized);
        assert_eq!(
            code("/", Some("Bearer wrong-token-0123456789")),
            unauthorized
        );
        assert_eq!(code("/", Some(&format!("Basic {RUN}"))), unauthorized);
        assert_eq!(code("/", Some("Bearer ")), unauthorized);
        assert_eq!(code("/", Some(&format!("Bearer {RUN}"))), None);
        assert_eq!(code("/", Some(&format!("bearer  {RUN} "))), None);
        assert_eq!(code("/", Some("Bearer another-run-token-0123")), None);
        assert_eq!(
            code("/interrupts", Some(&format!("Bearer {RUN}"))),
            Some("forbidden".to_owned())
        );
        assert_eq!(
            code("/interrupts", Some(&format!("Bearer {OPERATOR}"))),
            None
        );
        assert_eq!(code("/", Some(&format!("Bearer {OPERATOR}"))), None);
    }

    #[test]
    fn each_token_is_a_principal_and_only_a_front_names_another() {
        const FRONT: &str = "front-token-0123456789";
        let tokens = BearerTokens::new()
            .add_named("alice", Scope::Run, RUN)
            .unwrap()
            .add_named("ops", Scope::Operator, OPERATOR)
            .unwrap()
            .add_front("copilot-runtime", FRONT)
            .unwrap()
            .add(Scope::Run, "an-unnamed-token-0123")
            .unwrap();
        let layer = BearerAuthLayer::new(tokens);
        let principal = |token: &str, user: Option<&str>| {
            let mut request = Request::builder()
                .uri("/")
                .header("authorization", format!("Bearer {token}"));
            if let Some(user) = user {
                request = request.header(USER_HEADER, user);
            }
            let request = request.body(axum::body::Body::empty()).unwrap();
            layer
                .check(&request)
                .map(|p| p.map(|p| (p.name().to_owned(), p.is_operator())))
                .map_err(|r| r.code().to_owned())
        };
        let named = |name: &str, operator| Ok(Some((name.to_owned(), operator)));
        assert_eq!(principal(RUN, None), named("alice", false));
        assert_eq!(principal(OPERATOR, None), named("ops", true));
        assert_eq!(principal(FRONT, None), named("copilot-runtime", false));
        assert_eq!(principal(FRONT, Some("bob")), named("bob", false));
        assert_eq!(principal(FRONT, Some("")), Err("invalid_user".to_owned()));
        assert_eq!(principal(RUN, Some("bob")), Err("forbidden".to_owned()));
        assert_eq!(
            principal(OPERATOR, Some("bob")),
            Err("forbidden".to_owned())
        );
        let unnamed = principal("an-unnamed-token-0123", None).unwrap().unwrap();
        assert!(
            unnamed.0.starts_with("token-") && unnamed.0.len() == 14,
            "{unnamed:?}"
        );
        assert!(
            !unnamed.0.contains("unnamed"),
            "the name tells nothing of the token"
        );
    }

    #[test]
    fn weak_tokens_are_refused_and_none_is_printed() {
        assert!(BearerTokens::new().add(Scope::Run, "short").is_err());
        assert!(
            BearerTokens::new()
                .add(Scope::Run, "has a space in it!!")
                .is_err()
        );
        let tokens = BearerTokens::new().add(Scope::Run, RUN).unwrap();
        assert!(!format!("{tokens:?}").contains(RUN));
        assert!(tokens.has(Scope::Run) && !tokens.has(Scope::Operator));
    }
}
