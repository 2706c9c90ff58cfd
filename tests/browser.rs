//! What a web page in the user's browser may not do to the server: open a WebSocket or start a
//! run from a foreign origin, or reach it through a DNS-rebinding `Host`. Over a real socket.

use std::num::NonZeroU32;

use agent_tower::{demo, server::AguiServer};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

const APP: &str = "https://app.example";
const EVIL: &str = "https://evil.example";

/// A server allowing pages on [`APP`]; its address.
async fn serve() -> std::net::SocketAddr {
    let server = AguiServer::new(
        demo::scripted()
            .max_turns(NonZeroU32::new(4).unwrap())
            .build(),
    )
    .allow_origins([APP])
    .unwrap();
    let router = server.into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

fn run() -> Value {
    json!({
        "threadId": format!("t-{}", uuid::Uuid::now_v7()),
        "runId": format!("r-{}", uuid::Uuid::now_v7()),
        "messages": [{"id": "u1", "role": "user", "content": "hello"}],
    })
}

/// Opens `/ws` with `origin`; the handshake's status.
async fn websocket(addr: std::net::SocketAddr, origin: Option<&str>) -> u16 {
    let mut request = format!("ws://{addr}/ws").into_client_request().unwrap();
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((_, response)) => response.status().as_u16(),
        Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(other) => panic!("the handshake failed: {other}"),
    }
}

/// Starts a run at `addr` with `header` set.
async fn post(addr: std::net::SocketAddr, header: (&str, &str)) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("http://{addr}/"))
        .header(header.0, header.1)
        .json(&run())
        .send()
        .await
        .unwrap()
}

async fn error_code(response: reqwest::Response) -> String {
    let body: Value = response.json().await.unwrap();
    body["error"]["code"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn only_the_servers_own_and_allowed_pages_open_a_websocket() {
    let addr = serve().await;
    assert_eq!(websocket(addr, Some(EVIL)).await, 403, "a foreign page");
    assert_eq!(websocket(addr, Some("null")).await, 403, "a sandboxed page");
    assert_eq!(websocket(addr, Some(APP)).await, 101, "an allowed page");
    let own = format!("http://{addr}");
    assert_eq!(
        websocket(addr, Some(&own)).await,
        101,
        "the server's own page"
    );
    assert_eq!(websocket(addr, None).await, 101, "not a browser");
}

#[tokio::test]
async fn a_foreign_page_cannot_start_a_run_and_an_allowed_one_can() {
    let addr = serve().await;
    let refused = post(addr, ("origin", EVIL)).await;
    assert_eq!(refused.status(), 403);
    assert_eq!(error_code(refused).await, "origin_not_allowed");

    let allowed = post(addr, ("origin", APP)).await;
    assert_eq!(allowed.status(), 200);
    assert_eq!(allowed.headers()["access-control-allow-origin"], APP);
    assert!(allowed.text().await.unwrap().contains("RUN_FINISHED"));

    // The preflight an allowed page sends first still gets its CORS answer.
    let preflight = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, format!("http://{addr}/"))
        .header("origin", APP)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    assert_eq!(preflight.headers()["access-control-allow-origin"], APP);
}

#[tokio::test]
async fn a_rebinding_host_is_refused_and_loopback_names_are_served() {
    let addr = serve().await;
    let http = reqwest::Client::new();
    let url = format!("http://{addr}/");
    let port = addr.port();
    for host in [format!("evil.example:{port}"), "evil.example".to_owned()] {
        let refused = post(addr, ("host", &host)).await;
        assert_eq!(refused.status(), 421, "{host}");
        assert_eq!(error_code(refused).await, "host_not_allowed");
        let listing = http
            .get(format!("{url}interrupts"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(listing.status(), 421, "{host}: reads too");
    }
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let served = post(addr, ("host", &host)).await;
        assert_eq!(served.status(), 200, "{host}");
    }
}
