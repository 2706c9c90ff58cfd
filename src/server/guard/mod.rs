//! [`BrowserGuardLayer`]: what a web page in the user's browser may not do to a local server.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use axum::{
    extract::Request,
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use tower::{Layer, Service};

use super::{
    Rejection,
    refuse::{RefuseFuture, call_or_refuse},
};
use crate::BoxError;

/// The names a loopback server answers to by default.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Which `Host` names are served.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Hosts {
    /// The loopback names and these (lowercase, without port).
    Listed(Vec<String>),
    /// Any: the server is reached by names it cannot know (behind a proxy, on a public address).
    Any,
}

#[derive(Debug, Clone)]
struct Policy {
    hosts: Hosts,
    origins: Vec<HeaderValue>,
}

/// Refuses what a web page in the user's browser could do to a local server.
///
/// Two attacks reach a server on `localhost` from any page the user opens:
///
/// - **DNS rebinding**: `evil.example` resolves to `127.0.0.1`; the page's requests then go to
///   the server with `Host: evil.example`, and the browser treats the answers as same-origin.
///   The guard answers `421 host_not_allowed` to a `Host` that is not an allowed name (by default
///   the loopback names `localhost`, `127.0.0.1` and `::1`, any port).
/// - **Cross-site requests**: CORS keeps a foreign page from *reading* answers, not from sending
///   a form `POST` or opening a WebSocket (browsers apply no CORS to WebSockets). The guard
///   answers `403 origin_not_allowed` to a WebSocket upgrade or a request that may change state
///   (any method but `GET`, `HEAD` and `OPTIONS`) whose `Origin` is neither the server's own
///   (same host and port as `Host`) nor in the allow-list (the same list as CORS).
///
/// Requests without `Host` or `Origin` (curl, SDKs, servers) are not browsers' and pass.
///
/// ```
/// use agent_tower::server::BrowserGuardLayer;
/// use axum::{Router, routing::post};
///
/// let guard = BrowserGuardLayer::new()
///     .allow_hosts(["agents.example.com"])?
///     .allow_origins(["https://app.example.com"])?;
/// let app: Router = Router::new().route("/", post(|| async { "ran" })).layer(guard);
/// # Ok::<(), agent_tower::BoxError>(())
/// ```
#[derive(Debug, Clone)]
pub struct BrowserGuardLayer {
    policy: Arc<Policy>,
}

impl Default for BrowserGuardLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl BrowserGuardLayer {
    /// A guard serving the loopback names only, and no foreign origin.
    #[must_use]
    pub fn new() -> Self {
        Self {
            policy: Arc::new(Policy {
                hosts: Hosts::Listed(Vec::new()),
                origins: Vec::new(),
            }),
        }
    }

    /// Also serves these host names (as in `Host`, without the port; a name or an IP address).
    ///
    /// # Errors
    ///
    /// When a name is empty, holds a port, a scheme or a path, or is `*`.
    pub fn allow_hosts<I, H>(mut self, hosts: I) -> Result<Self, BoxError>
    where
        I: IntoIterator<Item = H>,
        H: AsRef<str>,
    {
        let policy = Arc::make_mut(&mut self.policy);
        for host in hosts {
            let host = host.as_ref().trim();
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            let valid = !bare.is_empty()
                && bare != "*"
                && !bare.contains(['/', '@', ' '])
                && (bare.parse::<std::net::Ipv6Addr>().is_ok() || !bare.contains(':'));
            if !valid {
                return Err(format!(
                    "`{host}` is not a host name (write it as in `Host`, without scheme or port)"
                )
                .into());
            }
            if let Hosts::Listed(names) = &mut policy.hosts {
                names.push(bare.to_ascii_lowercase());
            }
        }
        Ok(self)
    }

    /// Serves any `Host`: for a server reached by names it cannot list. Not for a server on a
    /// user's machine, which a rebinding page would reach.
    #[must_use]
    pub fn allow_any_host(mut self) -> Self {
        Arc::make_mut(&mut self.policy).hosts = Hosts::Any;
        self
    }

    /// Also accepts requests from pages on these origins (`https://app.example.com`), as CORS
    /// allows them to read answers.
    ///
    /// # Errors
    ///
    /// When an origin is not a valid header value, or is `*`.
    pub fn allow_origins<I, O>(mut self, origins: I) -> Result<Self, BoxError>
    where
        I: IntoIterator<Item = O>,
        O: AsRef<str>,
    {
        let policy = Arc::make_mut(&mut self.policy);
        for origin in origins {
            let origin = origin.as_ref();
            if origin == "*" {
                return Err("list the allowed origins; `*` is not accepted".into());
            }
            policy.origins.push(HeaderValue::from_str(origin)?);
        }
        Ok(self)
    }
}

impl BrowserGuardLayer {
    /// The origins allowed besides the server's own.
    pub(crate) fn origins(&self) -> &[HeaderValue] {
        &self.policy.origins
    }
}

impl<S> Layer<S> for BrowserGuardLayer {
    type Service = BrowserGuard<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BrowserGuard {
            inner,
            policy: Arc::clone(&self.policy),
        }
    }
}

/// The service of [`BrowserGuardLayer`].
#[derive(Debug, Clone)]
pub struct BrowserGuard<S> {
    inner: S,
    policy: Arc<Policy>,
}

impl<S> BrowserGuard<S> {
    crate::inner_service!();
}

impl<S> Service<Request> for BrowserGuard<S>
where
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = RefuseFuture<S>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let verdict = self
            .policy
            .check(&request)
            .map_err(IntoResponse::into_response);
        call_or_refuse(&mut self.inner, request, verdict)
    }
}

impl Policy {
    fn check(&self, request: &Request) -> Result<(), Rejection> {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| request.uri().authority().map(|a| a.as_str()));
        if let Some(host) = host
            && !self.serves(host)
        {
            return Err(Rejection::new(
                StatusCode::MISDIRECTED_REQUEST,
                "host_not_allowed",
                format!("this server does not answer to `{host}` (allow it with --allow-host)"),
            ));
        }
        let guarded = !matches!(
            *request.method(),
            Method::GET | Method::HEAD | Method::OPTIONS
        ) || is_upgrade(request.headers());
        if let Some(origin) = request.headers().get(header::ORIGIN).filter(|_| guarded)
            && !self.origins.contains(origin)
            && !same_origin(origin, host)
        {
            return Err(Rejection::new(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                format!(
                    "pages on {} may not call this server (allow them with --allow-origin)",
                    origin.to_str().unwrap_or("that origin")
                ),
            ));
        }
        Ok(())
    }

    fn serves(&self, host: &str) -> bool {
        let Hosts::Listed(names) = &self.hosts else {
            return true;
        };
        let name = host_name(host).to_ascii_lowercase();
        LOOPBACK.contains(&name.as_str()) || names.contains(&name)
    }
}

/// `host` without its port and IPv6 brackets.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Whether `origin` (`scheme://host[:port]`) is the server's own: the same host and port as
/// `Host`, the scheme's default port when it has none.
fn same_origin(origin: &HeaderValue, host: Option<&str>) -> bool {
    let (Ok(origin), Some(host)) = (origin.to_str(), host) else {
        return false;
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let default_port = match scheme {
        "http" | "ws" => "80",
        "https" | "wss" => "443",
        _ => return false,
    };
    let with_port = |a: &str| -> String {
        let has_port = match a.strip_prefix('[') {
            Some(rest) => rest
                .split_once(']')
                .is_some_and(|(_, p)| p.starts_with(':')),
            None => a.contains(':'),
        };
        if has_port {
            a.to_ascii_lowercase()
        } else {
            format!("{}:{default_port}", a.to_ascii_lowercase())
        }
    };
    with_port(authority) == with_port(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::builder().method(method).uri("/");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    }

    fn code(policy: &BrowserGuardLayer, request: &Request) -> Option<String> {
        policy
            .policy
            .check(request)
            .err()
            .map(|r| r.code().to_owned())
    }

    #[test]
    fn only_loopback_names_by_default_and_the_listed_ones() {
        let guard = BrowserGuardLayer::new();
        for host in [
            "localhost:8000",
            "127.0.0.1:8000",
            "[::1]:8000",
            "LOCALHOST",
        ] {
            assert_eq!(
                code(&guard, &request(Method::POST, &[("host", host)])),
                None,
                "{host}"
            );
        }
        for host in [
            "evil.example:8000",
            "evil.example",
            "localhost.evil.example",
        ] {
            assert_eq!(
                code(&guard, &request(Method::GET, &[("host", host)])),
                Some("host_not_allowed".to_owned()),
                "{host}"
            );
        }
        let listed = BrowserGuardLayer::new()
            .allow_hosts(["Agents.Example"])
            .unwrap();
        let ok = request(Method::GET, &[("host", "agents.example:443")]);
        assert_eq!(code(&listed, &ok), None);
        let any = BrowserGuardLayer::new().allow_any_host();
        assert_eq!(
            code(&any, &request(Method::GET, &[("host", "evil.example")])),
            None
        );
        assert!(
            BrowserGuardLayer::new()
                .allow_hosts(["a.example:80"])
                .is_err()
        );
        assert!(BrowserGuardLayer::new().allow_hosts(["*"]).is_err());
        assert!(
            BrowserGuardLayer::new()
                .allow_hosts(["http://a.example"])
                .is_err()
        );
    }

    #[test]
    fn foreign_origins_may_not_post_or_open_a_websocket() {
        let guard = BrowserGuardLayer::new()
            .allow_origins(["https://app.example"])
            .unwrap();
        let host = ("host", "localhost:8000");
        let evil = ("origin", "https://evil.example");
        let websocket = [
            host,
            evil,
            ("upgrade", "websocket"),
            ("connection", "upgrade"),
        ];
        assert_eq!(
            code(&guard, &request(Method::POST, &[host, evil])),
            Some("origin_not_allowed".to_owned())
        );
        assert_eq!(
            code(&guard, &request(Method::GET, &websocket)),
            Some("origin_not_allowed".to_owned())
        );
        assert_eq!(
            code(&guard, &request(Method::POST, &[host, ("origin", "null")])),
            Some("origin_not_allowed".to_owned()),
            "a sandboxed page"
        );
        // Reading is CORS's to refuse; a preflight is CORS's to answer.
        assert_eq!(code(&guard, &request(Method::GET, &[host, evil])), None);
        assert_eq!(code(&guard, &request(Method::OPTIONS, &[host, evil])), None);
        for origin in [
            "https://app.example",
            "http://localhost:8000",
            "http://LOCALHOST:8000",
        ] {
            assert_eq!(
                code(&guard, &request(Method::POST, &[host, ("origin", origin)])),
                None,
                "{origin}"
            );
        }
        assert_eq!(
            code(
                &guard,
                &request(Method::POST, &[host, ("origin", "http://localhost:9000")])
            ),
            Some("origin_not_allowed".to_owned()),
            "another port is another origin"
        );
        assert_eq!(
            code(&guard, &request(Method::POST, &[host])),
            None,
            "not a browser"
        );
    }

    #[test]
    fn an_origin_without_a_port_has_its_schemes() {
        let origin = |o| HeaderValue::from_static(o);
        assert!(same_origin(
            &origin("http://a.example"),
            Some("a.example:80")
        ));
        assert!(same_origin(
            &origin("https://a.example:443"),
            Some("a.example")
        ));
        assert!(!same_origin(
            &origin("https://a.example"),
            Some("a.example:80")
        ));
        assert!(same_origin(
            &origin("http://[::1]:8000"),
            Some("[::1]:8000")
        ));
    }
}
