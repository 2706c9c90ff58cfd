//! [`BearerAuthLayer`]: who may call the server, by bearer token, and as which [`Principal`].

#[cfg(feature = "jwt")]
mod jwt;
mod tokens;

use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
    time::SystemTime,
};

use axum::{
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use futures_util::future::{BoxFuture, FutureExt};
use tower::{Layer, Service};

#[cfg(feature = "jwt")]
pub use self::jwt::{Jwt, JwtError};
pub use self::tokens::BearerTokens;
use super::Rejection;
use crate::context::Principal;

/// What a token may do. An operator token may do everything a run token may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Scope {
    /// Start runs and follow them (its principal's own threads and runs).
    Run,
    /// Also see every thread and run, read the review queue, and answer interrupts out of band.
    Operator,
}

/// The shortest token accepted, in bytes: shorter ones can be guessed.
pub const MIN_TOKEN_BYTES: usize = 16;

/// The header in which a trusted front names the user it acts for (see
/// [`BearerTokens::add_front`]).
pub const USER_HEADER: &str = "x-agent-tower-user";

/// Who a token is, as a scheme of [`Authenticate`] tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The principal the token authenticates.
    pub principal: Principal,
    /// What it may do.
    pub scope: Scope,
    /// Whether it is a trusted front's: it may name the user it acts for in [`USER_HEADER`].
    pub front: bool,
    /// When the token stops being valid, if it says (a JSON Web Token's `exp`): a connection it
    /// opened is closed then ([`TokenExpiry`]).
    pub expires_at: Option<SystemTime>,
}

/// When the token that authenticated a request stops being valid, in the request's extensions
/// when its scheme says ([`Identity::expires_at`]): what a connection that outlives the request
/// (a WebSocket) holds on to, and ends at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenExpiry(pub SystemTime);

/// Who a request is, as the layer checked it.
struct Authenticated {
    principal: Principal,
    expires_at: Option<SystemTime>,
}

impl Identity {
    /// What kind of token it is, in words.
    fn kind(&self) -> &'static str {
        match (self.scope, self.front) {
            (_, true) => "a trusted front",
            (Scope::Run, false) => "a run token",
            (Scope::Operator, false) => "an operator token",
        }
    }
}

/// A token a scheme knows and refuses (expired, for another audience, signed by an unknown key):
/// why, in a sentence for the client (no secret in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthError(pub String);

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl std::error::Error for AuthError {}

/// One way to tell who sends a request from its bearer token: [`BearerTokens`], [`Jwt`]
/// (feature `jwt`), or your own (an introspection endpoint, a session store).
///
/// ```
/// use agent_tower::context::Principal;
/// use agent_tower::server::{AuthError, Authenticate, Identity, Scope};
/// use futures_util::future::{BoxFuture, FutureExt};
///
/// /// Tokens `user:<name>`, for a demo.
/// #[derive(Debug)]
/// struct Demo;
///
/// impl Authenticate for Demo {
///     fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<Identity>, AuthError>> {
///         let identity = token.strip_prefix("user:").map(|name| {
///             Principal::user(name).map_err(|e| AuthError(e.to_string())).map(|principal| Identity {
///                 principal,
///                 scope: Scope::Run,
///                 front: false,
///                 expires_at: None,
///             })
///         });
///         std::future::ready(identity.transpose()).boxed()
///     }
/// }
/// ```
pub trait Authenticate: fmt::Debug + Send + Sync + 'static {
    /// Who `token` is: `Ok(None)` when the token is not this scheme's (the next scheme is asked);
    /// an error when it is and is refused (the request is then refused with it).
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<Identity>, AuthError>>;
}

type ScopeOf = dyn Fn(&Request) -> Option<Scope> + Send + Sync;

/// Requires `Authorization: Bearer <token>` with the scope a request needs, known to one of its
/// schemes ([`Authenticate`]: [`BearerTokens`] first, then those added with
/// [`scheme`](Self::scheme)), and puts the token's [`Principal`] in the request's extensions for
/// the handlers. A trusted front's token may name the user it acts for in [`USER_HEADER`]; any
/// other token that does is refused.
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
    schemes: Arc<[Arc<dyn Authenticate>]>,
    scope_of: Arc<ScopeOf>,
    /// Principals taken as others, on purpose ([`alias`](Self::alias)).
    aliases: Arc<std::collections::HashMap<String, String>>,
}

impl fmt::Debug for BearerAuthLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerAuthLayer")
            .field("schemes", &self.schemes)
            .finish_non_exhaustive()
    }
}

impl BearerAuthLayer {
    /// Requires one of `tokens`, with [`Scope::Run`], on every request.
    #[must_use]
    pub fn new(tokens: BearerTokens) -> Self {
        Self {
            schemes: Arc::new([Arc::new(tokens) as Arc<dyn Authenticate>]),
            scope_of: Arc::new(|_| Some(Scope::Run)),
            aliases: Arc::default(),
        }
    }

    /// Takes the principal `from` (named by one way in) as `to` (named by another), on purpose:
    /// a JWT's `jwt:alice@https://id.example/` as the token named `alice`, so that both see the
    /// same threads. Without it, no two ways in name the same principal.
    ///
    /// # Errors
    ///
    /// When a name is not a principal's, the two are the same, or either is already aliased
    /// (an alias leads to a principal, never to another alias).
    pub fn alias(mut self, from: &str, to: &str) -> Result<Self, crate::BoxError> {
        Principal::user(from).map_err(|e| format!("the alias `{from}`: {e}"))?;
        Principal::user(to).map_err(|e| format!("the alias's principal `{to}`: {e}"))?;
        if from == to {
            return Err(format!("`{from}` is aliased to itself").into());
        }
        if self.aliases.contains_key(from) || self.aliases.contains_key(to) {
            return Err(format!("`{from}` or `{to}` is aliased already").into());
        }
        if self.aliases.values().any(|target| target == from) {
            return Err(format!("`{from}` is the principal of another alias").into());
        }
        let mut aliases = (*self.aliases).clone();
        aliases.insert(from.to_owned(), to.to_owned());
        self.aliases = Arc::new(aliases);
        Ok(self)
    }

    /// `principal`, or the one it is [aliased](Self::alias) to (of the same kind).
    fn aliased(&self, principal: Principal) -> Principal {
        let Some(to) = self.aliases.get(principal.name()) else {
            return principal;
        };
        let aliased = if principal.is_operator() {
            Principal::operator(to)
        } else {
            Principal::user(to)
        };
        // Checked when the alias was made.
        aliased.unwrap_or(principal)
    }

    /// Also accepts the tokens `scheme` knows (asked after those before it).
    #[must_use]
    pub fn scheme(mut self, scheme: impl Authenticate) -> Self {
        let mut schemes = self.schemes.to_vec();
        schemes.push(Arc::new(scheme));
        self.schemes = schemes.into();
        self
    }

    /// Also the schemes of `other` after its tokens (those of `other`'s [`new`](Self::new) are
    /// not kept).
    pub(crate) fn schemes_of(mut self, other: Self) -> Self {
        let mut schemes = self.schemes.to_vec();
        schemes.extend(other.schemes.iter().skip(1).cloned());
        self.schemes = schemes.into();
        self.aliases = other.aliases;
        self
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

    /// What of `request` the layer looks at.
    fn credentials(&self, request: &Request) -> Credentials {
        let headers = request.headers();
        Credentials {
            needed: (self.scope_of)(request),
            token: headers
                .get(header::AUTHORIZATION)
                .and_then(|value| bearer(value.as_bytes()))
                .map(str::to_owned),
            users: headers.get_all(USER_HEADER).iter().cloned().collect(),
        }
    }

    /// Who a request that may go on is (`None` for a public route).
    async fn check(&self, credentials: Credentials) -> Result<Option<Authenticated>, Rejection> {
        let Some(needed) = credentials.needed else {
            return Ok(None);
        };
        let Some(token) = credentials.token else {
            return Err(unauthorized("send `Authorization: Bearer <token>`"));
        };
        let mut identity = None;
        for scheme in self.schemes.iter() {
            match scheme.authenticate(&token).await {
                Ok(Some(found)) => {
                    identity = Some(found);
                    break;
                }
                Ok(None) => {}
                Err(refused) => return Err(unauthorized(&refused.0)),
            }
        }
        let identity = identity.ok_or_else(|| unauthorized("the bearer token is not known"))?;
        if identity.scope < needed {
            return Err(Rejection::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "this token may not use this route (it needs an operator token)",
            ));
        }
        let user = match <[HeaderValue; 1]>::try_from(credentials.users) {
            Ok([user]) => Some(user),
            Err(users) if users.is_empty() => None,
            Err(_) => {
                return Err(Rejection::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_user",
                    format!("`{USER_HEADER}` must be sent once"),
                ));
            }
        };
        let expires_at = identity.expires_at;
        let principal = match (user, identity.front) {
            (None, _) => Ok(identity.principal),
            // The user of a front is the front's: `{front}/{user}` (a front's name has no `/`).
            (Some(user), true) => user
                .to_str()
                .ok()
                .map(str::trim)
                .filter(|user| !user.is_empty())
                .and_then(|user| {
                    Principal::user(format!("{}/{user}", identity.principal.name())).ok()
                })
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
        }?;
        Ok(Some(Authenticated {
            principal: self.aliased(principal),
            expires_at,
        }))
    }
}

/// What a request says of who sends it, and what its route needs.
struct Credentials {
    needed: Option<Scope>,
    token: Option<String>,
    /// Every user header sent (more than one is refused).
    users: Vec<HeaderValue>,
}

fn unauthorized(why: &str) -> Rejection {
    Rejection::new(StatusCode::UNAUTHORIZED, "unauthorized", why)
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in any case), as text.
fn bearer(value: &[u8]) -> Option<&str> {
    let (scheme, token) = value.split_at_checked(7)?;
    let token = token.trim_ascii();
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| std::str::from_utf8(token).ok())
        .flatten()
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

/// The response future of [`BearerAuth`] (boxed: a scheme may fetch keys before it answers).
pub type BearerAuthFuture<E> = BoxFuture<'static, Result<Response, E>>;

impl<S> Service<Request> for BearerAuth<S>
where
    S: Service<Request, Response = Response> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = S::Error;
    type Future = BearerAuthFuture<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        // The ready service goes into the future; this one keeps a clone, readied next time.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let layer = self.layer.clone();
        let credentials = layer.credentials(&request);
        async move {
            match layer.check(credentials).await {
                Ok(authenticated) => {
                    let principal = authenticated.map(|authenticated| {
                        if let Some(expires_at) = authenticated.expires_at {
                            request.extensions_mut().insert(TokenExpiry(expires_at));
                        }
                        authenticated.principal
                    });
                    if let Some(principal) = &principal {
                        request.extensions_mut().insert(principal.clone());
                    }
                    let mut response = inner.call(request).await?;
                    // For the access log outside.
                    if let Some(principal) = principal {
                        response.extensions_mut().insert(principal);
                    }
                    Ok(response)
                }
                Err(rejection) => {
                    let unauthorized = rejection.status() == StatusCode::UNAUTHORIZED;
                    let mut response = rejection.into_response();
                    if unauthorized {
                        response
                            .headers_mut()
                            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                    }
                    Ok(response)
                }
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BoxError;

    /// The layer's verdict on `request` (the schemes here answer at once).
    fn checked(layer: &BearerAuthLayer, request: &Request) -> Result<Option<Principal>, Rejection> {
        layer
            .check(layer.credentials(request))
            .now_or_never()
            .expect("tokens answer at once")
            .map(|checked| checked.map(|checked| checked.principal))
    }

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
        checked(&layer(), &request)
            .err()
            .map(|r| r.code().to_owned())
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
            checked(&layer, &request)
                .map(|p| p.map(|p| (p.name().to_owned(), p.is_operator())))
                .map_err(|r| r.code().to_owned())
        };
        let named = |name: &str, operator| Ok(Some((name.to_owned(), operator)));
        assert_eq!(principal(RUN, None), named("alice", false));
        assert_eq!(principal(OPERATOR, None), named("ops", true));
        assert_eq!(principal(FRONT, None), named("copilot-runtime", false));
        // The front's user is the front's: not the token named `bob`, nor another front's `bob`.
        assert_eq!(
            principal(FRONT, Some("bob")),
            named("copilot-runtime/bob", false)
        );
        assert_eq!(
            principal(FRONT, Some("alice")),
            named("copilot-runtime/alice", false)
        );
        assert_eq!(principal(FRONT, Some("")), Err("invalid_user".to_owned()));
        assert_eq!(principal(FRONT, Some(" ")), Err("invalid_user".to_owned()));
        let twice = Request::builder()
            .uri("/")
            .header("authorization", format!("Bearer {FRONT}"))
            .header(USER_HEADER, "bob")
            .header(USER_HEADER, "alice")
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(
            checked(&layer, &twice).map_err(|r| r.code().to_owned()),
            Err("invalid_user".to_owned()),
            "two users named: neither is taken"
        );
        assert_eq!(principal(RUN, Some("bob")), Err("forbidden".to_owned()));
        assert_eq!(
            principal(OPERATOR, Some("bob")),
            Err("forbidden".to_owned())
        );
        let unnamed = principal("an-unnamed-token-0123", None).unwrap().unwrap();
        assert!(
            unnamed.0.starts_with("token:") && unnamed.0.len() == 14,
            "{unnamed:?}"
        );
        assert!(
            !unnamed.0.contains("unnamed"),
            "the name tells nothing of the token"
        );
    }

    #[test]
    fn a_token_listed_twice_or_a_name_of_two_kinds_is_refused() {
        let alice = BearerTokens::new()
            .add_named("alice", Scope::Run, RUN)
            .unwrap();
        let refused = |tokens: Result<BearerTokens, BoxError>| tokens.unwrap_err().to_string();
        let twice = refused(alice.clone().add_named("ops", Scope::Operator, RUN));
        assert!(
            twice.contains("listed twice") && !twice.contains(RUN),
            "{twice}"
        );
        assert!(refused(alice.clone().add_named("bob", Scope::Run, RUN)).contains("listed twice"));
        let operator = refused(alice.clone().add_named("alice", Scope::Operator, OPERATOR));
        assert!(
            operator.contains("`alice` names both a run token and an operator token"),
            "{operator}"
        );
        let front = refused(alice.clone().add_front("alice", "front-token-0123456789"));
        assert!(front.contains("a run token and a trusted front"), "{front}");
        // The names of the other ways in cannot be given to a token or a front.
        for name in [
            "token:0123abcd",
            "copilot-runtime/alice",
            "jwt:alice@https://idp.example",
        ] {
            let taken = refused(
                alice
                    .clone()
                    .add_named(name, Scope::Run, "a-new-token-0123456"),
            );
            assert!(taken.contains("cannot name a token or a front"), "{taken}");
            let front = refused(alice.clone().add_front(name, "a-new-token-0123456"));
            assert!(front.contains("cannot name a token or a front"), "{front}");
        }
        // A token and its replacement: one principal.
        let next = "alices-next-token-0123";
        let layer = BearerAuthLayer::new(alice.add_named("alice", Scope::Run, next).unwrap());
        for token in [RUN, next] {
            let request = Request::builder()
                .uri("/")
                .header("authorization", format!("Bearer {token}"))
                .body(axum::body::Body::empty())
                .unwrap();
            let principal = checked(&layer, &request).unwrap().unwrap();
            assert_eq!(principal.name(), "alice");
        }
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
