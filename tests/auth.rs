//! Bearer tokens and their scopes over real routes, and CORS preflights beside them (the axum
//! example's app).

use agent_tower::{
    demo,
    server::{AguiServer, BearerTokens, Scope},
};
use axum::{
    Router,
    body::Body,
    http::{Request, StatusCode, header},
};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

#[path = "../examples/axum_agui.rs"]
#[allow(dead_code)]
mod example;

const RUN_TOKEN: &str = "run-token-0123456789abcdef";
const OPERATOR_TOKEN: &str = "operator-token-0123456789abcdef";

fn server() -> Router {
    let agent = demo::scripted()
        .max_turns(std::num::NonZeroU32::new(4).unwrap())
        .build();
    let tokens = BearerTokens::new()
        .add(Scope::Run, RUN_TOKEN)
        .unwrap()
        .add(Scope::Operator, OPERATOR_TOKEN)
        .unwrap();
    AguiServer::new(agent).auth(tokens).into_router()
}

fn request(method: &str, path: &str, token: Option<&str>) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let body = if method == "POST" {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
        json!({
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "m", "role": "user", "content": "hi"}],
        })
        .to_string()
    } else {
        String::new()
    };
    builder.body(Body::from(body)).unwrap()
}

async fn answer(router: &Router, request: Request<Body>) -> (StatusCode, String) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

fn code(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap();
    value["error"]["code"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn every_route_but_the_probes_needs_a_token_of_its_scope() {
    let router = server();
    for path in ["/health", "/ready"] {
        assert_eq!(
            answer(&router, request("GET", path, None)).await.0,
            StatusCode::OK
        );
    }
    let response = router
        .clone()
        .oneshot(request("POST", "/", None))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer");
    for (method, path) in [
        ("POST", "/"),
        ("GET", "/runs/r/events"),
        ("GET", "/ws"),
        ("GET", "/interrupts"),
        ("GET", "/threads/t"),
        ("POST", "/threads/t/resume"),
        ("POST", "/interrupts/i/resolve"),
    ] {
        let (status, body) = answer(
            &router,
            request(method, path, Some("not-a-known-token-000")),
        )
        .await;
        assert_eq!(
            (status, code(&body).as_str()),
            (StatusCode::UNAUTHORIZED, "unauthorized"),
            "{method} {path}"
        );
    }

    let (status, body) = answer(&router, request("POST", "/", Some(RUN_TOKEN))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("RUN_FINISHED"), "{body}");
    let (status, body) = answer(&router, request("GET", "/runs/r/events", Some(RUN_TOKEN))).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the run's events again, with a run token"
    );
    assert!(body.contains("RUN_FINISHED"), "{body}");

    for (method, path) in [
        ("GET", "/interrupts"),
        ("POST", "/threads/t/resume"),
        ("POST", "/interrupts/i/resolve"),
    ] {
        let (status, body) = answer(&router, request(method, path, Some(RUN_TOKEN))).await;
        assert_eq!(
            (status, code(&body).as_str()),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{method} {path}"
        );
    }
    let (status, body) = answer(&router, request("GET", "/threads/t", Some(RUN_TOKEN))).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "its own thread, with the token that made it: {body}"
    );
    let (status, body) = answer(&router, request("GET", "/threads/t", Some(OPERATOR_TOKEN))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["runs"][0]["runId"],
        "r"
    );
    let (status, _) = answer(&router, request("GET", "/interrupts", Some(OPERATOR_TOKEN))).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn the_axum_example_answers_preflights_and_requires_its_token() {
    let token = "example-token-0123456789";
    let app = example::app(token).unwrap();
    let preflight = Request::options("/agent")
        .header(header::ORIGIN, "http://localhost:5173")
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
        .header(
            header::ACCESS_CONTROL_REQUEST_HEADERS,
            "authorization,content-type,last-event-id",
        )
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(preflight).await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    assert_eq!(
        response.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "http://localhost:5173"
    );
    let allowed = response.headers()[header::ACCESS_CONTROL_ALLOW_HEADERS]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for name in ["authorization", "content-type", "last-event-id"] {
        assert!(allowed.contains(name), "{allowed}");
    }

    let (status, _) = answer(&app, request("POST", "/agent", None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = answer(&app, request("POST", "/agent", Some(token))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("RUN_FINISHED"), "{body}");
    let (status, body) = answer(&app, request("GET", "/api/hello", None)).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "hello from the existing app")
    );
}
