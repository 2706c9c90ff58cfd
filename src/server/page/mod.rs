//! The development page: `GET /` in a browser (`Accept: text/html`) answers a small page that
//! chats with this server over AG-UI (streamed text, reasoning, tool calls and their results, the
//! shared state, interrupts to approve, edit or reject, the raw events, and re-joining a run after
//! a reload), and a console: each run of the thread drawn as a timeline, and the interrupts of
//! every thread that wait for a person, answered there. Everything it needs is in the binary: no
//! CDN, no build step.
//!
//! The page, its script and its style are public (they hold no data); what the page does goes
//! through the same routes, guard and tokens as any client. Its `Content-Security-Policy` lets it
//! load only its own files and talk only to this server.

use axum::{
    Router,
    body::Bytes,
    http::{HeaderMap, HeaderValue, header},
    response::{IntoResponse, Response},
    routing::get,
};

use super::error;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const CONSOLE: &str = include_str!("console.js");
const STYLE: &str = include_str!("app.css");

/// Where the page's script and style are served.
pub(super) const ASSETS: &str = "/ui/";

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                      form-action 'none'; frame-ancestors 'none'";

/// `GET /`, `GET /ui/app.js`, `GET /ui/console.js` and `GET /ui/app.css`, for a server whose runs are posted to
/// `run_path`.
pub(super) fn routes<S: Clone + Send + Sync + 'static>(run_path: &str) -> Router<S> {
    let index = Bytes::from(render(run_path));
    Router::new()
        .route(
            "/",
            get(move |headers: HeaderMap| page(headers, index.clone())),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/ui/console.js",
            get(|| async { asset("text/javascript; charset=utf-8", CONSOLE) }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}

/// The page, with the run path in a `<meta>` the script reads.
fn render(run_path: &str) -> String {
    let mut escaped = String::with_capacity(run_path.len());
    for c in run_path.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    INDEX.replace("{{RUN_PATH}}", &escaped)
}

/// The page to a browser; to any other client, what `GET` on a run path always was: `405`.
async fn page(headers: HeaderMap, index: Bytes) -> Response {
    let wants_html = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|media| {
            media
                .split(';')
                .next()
                .is_some_and(|media| media.trim().eq_ignore_ascii_case("text/html"))
        });
    if !wants_html {
        return error::method_not_allowed(axum::http::Method::GET)
            .await
            .into_response();
    }
    let mut response = asset("text/html; charset=utf-8", index);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

fn asset(content_type: &'static str, body: impl Into<Bytes>) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body.into(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_path_cannot_leave_its_attribute() {
        let page = render(r#"/a"><script>alert(1)</script>"#);
        assert!(page.contains(r#"content="/a&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;""#));
        assert!(!page.contains("<script>alert"));
    }
}
