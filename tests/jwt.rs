//! Principals from JSON Web Tokens: verified against the keys a local issuer serves (a JWKS
//! endpoint this test starts), each token's `sub` a principal who sees only its own threads.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use agent_tower::{
    demo,
    server::{AguiServer, BearerTokens, Jwt, Scope},
};
use axum::{Json, Router, extract::State, routing::get};
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode, get_current_timestamp};
use serde_json::{Value, json};

const ISSUER: &str = "https://issuer.test/";
const AUDIENCE: &str = "agent-tower";

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/jwt/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn jwk(kid: &str) -> Value {
    serde_json::from_str(&fixture(&format!("{kid}.jwk.json"))).unwrap()
}

/// A token signed with the private key `signer`, naming key `kid`, with `claims` over the
/// defaults (alice, this issuer and audience, valid for an hour).
fn token(signer: &str, kid: &str, claims: Value) -> String {
    let now = get_current_timestamp();
    let mut all =
        json!({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 3600});
    for (name, value) in claims.as_object().unwrap() {
        all[name] = value.clone();
    }
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_owned());
    let key = EncodingKey::from_ed_pem(fixture(&format!("{signer}.pem")).as_bytes()).unwrap();
    encode(&header, &all, &key).unwrap()
}

/// The issuer's key set, served at `GET /jwks`; the test changes it to rotate keys.
type Keys = Arc<Mutex<Value>>;

async fn issuer(keys: Keys) -> String {
    let app = Router::new()
        .route(
            "/jwks",
            get(|State(keys): State<Keys>| async move { Json(keys.lock().unwrap().clone()) }),
        )
        .with_state(keys);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

struct Server {
    base: String,
    http: reqwest::Client,
}

impl Server {
    async fn start(jwks: &str) -> Self {
        Self::start_with(jwks, None).await
    }

    /// A server taking the issuer's tokens, and `tokens` before them.
    async fn start_with(jwks: &str, tokens: Option<BearerTokens>) -> Self {
        Self::start_aliased(jwks, tokens, &[]).await
    }

    /// [`start_with`](Self::start_with), each principal of `aliases` taken as another.
    async fn start_aliased(
        jwks: &str,
        tokens: Option<BearerTokens>,
        aliases: &[(&str, &str)],
    ) -> Self {
        let agent = demo::scripted()
            .max_turns(std::num::NonZeroU32::new(4).unwrap())
            .build();
        let jwt = Jwt::new(jwks, ISSUER, AUDIENCE).await.unwrap();
        let mut server = AguiServer::new(agent);
        if let Some(tokens) = tokens {
            server = server.auth(tokens);
        }
        let mut server = server.authenticate(jwt);
        for (from, to) in aliases {
            server = server.principal_alias(from, to).unwrap();
        }
        let router = server.into_router();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self {
            base,
            http: reqwest::Client::new(),
        }
    }

    /// A run on `thread` with `token`: the status, and the error's message if refused.
    async fn run(&self, token: &str, thread: &str) -> (u16, String) {
        let body = json!({
            "threadId": thread, "runId": format!("r-{}", uuid::Uuid::now_v7()),
            "messages": [{"id": "m", "role": "user", "content": "hello"}],
        });
        let response = self
            .http
            .post(&self.base)
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or(text);
        (status, message)
    }
}

#[tokio::test]
async fn a_subject_is_a_principal_of_its_issuer_not_the_token_or_the_front_user_of_that_name() {
    const ALICES: &str = "alices-bearer-token-0123";
    const FRONT: &str = "the-front-token-0123456";
    let keys = Arc::new(Mutex::new(json!({"keys": [jwk("first")]})));
    let tokens = BearerTokens::new()
        .add_named("alice", Scope::Run, ALICES)
        .unwrap()
        .add_front("portal", FRONT)
        .unwrap();
    let server = Server::start_with(&issuer(keys).await, Some(tokens)).await;
    // The bearer token named `alice` begins a thread; the issuer's `alice` does not see it.
    assert_eq!(server.run(ALICES, "the-token-alices").await.0, 200);
    let subject = token("first", "first", json!({}));
    let (status, message) = server.run(&subject, "the-token-alices").await;
    assert_eq!(
        (status, message.as_str()),
        (404, "no thread `the-token-alices`")
    );
    assert_eq!(server.run(&subject, "the-subject-alices").await.0, 200);
    // Nor does the front's user `alice`, who sees neither, and has a thread of her own.
    let as_user = |thread: &str| {
        let body = json!({
            "threadId": thread, "runId": format!("r-{}", uuid::Uuid::now_v7()),
            "messages": [{"id": "m", "role": "user", "content": "hello"}],
        });
        let request = server.http.post(&server.base).bearer_auth(FRONT);
        request
            .header("x-agent-tower-user", "alice")
            .json(&body)
            .send()
    };
    for thread in ["the-token-alices", "the-subject-alices"] {
        assert_eq!(as_user(thread).await.unwrap().status(), 404, "{thread}");
    }
    assert_eq!(as_user("the-users").await.unwrap().status(), 200);
    for theirs in [ALICES, subject.as_str()] {
        assert_eq!(server.run(theirs, "the-users").await.0, 404);
    }
}

#[tokio::test]
async fn an_operator_may_take_a_subject_as_the_token_of_another_name_on_purpose() {
    const ALICES: &str = "alices-bearer-token-0123";
    let keys = Arc::new(Mutex::new(json!({"keys": [jwk("first")]})));
    let tokens = || {
        BearerTokens::new()
            .add_named("alice", Scope::Run, ALICES)
            .unwrap()
    };
    let subject = format!("jwt:alice@{ISSUER}");
    let aliases = [(subject.as_str(), "alice")];
    let server = Server::start_aliased(&issuer(keys).await, Some(tokens()), &aliases).await;
    let jwt = token("first", "first", json!({}));
    // Each sees the other's thread: one principal, reached two ways.
    assert_eq!(server.run(ALICES, "begun-with-the-token").await.0, 200);
    assert_eq!(server.run(&jwt, "begun-with-the-token").await.0, 200);
    assert_eq!(server.run(&jwt, "begun-with-the-jwt").await.0, 200);
    assert_eq!(server.run(ALICES, "begun-with-the-jwt").await.0, 200);
    // An alias of an alias, or of itself, is refused; so is one without authentication.
    let aliased = AguiServer::new(demo::scripted().build())
        .auth(tokens())
        .principal_alias(&subject, "alice")
        .unwrap();
    assert!(aliased.principal_alias("alice", "bob").is_err(), "a chain");
    let alone = AguiServer::new(demo::scripted().build()).auth(tokens());
    assert!(alone.principal_alias("alice", "alice").is_err(), "itself");
    let open = AguiServer::new(demo::scripted().build());
    assert!(
        open.principal_alias(&subject, "alice").is_err(),
        "no principals"
    );
}

#[tokio::test]
async fn a_websocket_opened_with_a_token_is_closed_when_the_token_expires() {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};
    let keys = Arc::new(Mutex::new(json!({"keys": [jwk("first")]})));
    let server = Server::start(&issuer(keys).await).await;
    let open = |token: String| {
        let mut request = format!("{}/ws", server.base.replace("http://", "ws://"))
            .into_client_request()
            .unwrap();
        let bearer = format!("Bearer {token}").parse().unwrap();
        request.headers_mut().insert("authorization", bearer);
        tokio_tungstenite::connect_async(request)
    };
    // The socket of a token valid two more seconds is closed then, saying why; one of a token
    // valid an hour is still open.
    let now = get_current_timestamp();
    let (mut short, _) = open(token("first", "first", json!({"exp": now + 2})))
        .await
        .unwrap();
    let (mut long, _) = open(token("first", "first", json!({}))).await.unwrap();
    let opened = std::time::Instant::now();
    let close = loop {
        // A safety net, not a wait: the close comes about two seconds after the socket opened.
        let frame = tokio::time::timeout(Duration::from_secs(20), short.next())
            .await
            .expect("closed within 20 s");
        match frame {
            Some(Ok(Message::Close(frame))) => break frame.expect("a close frame says why"),
            Some(Ok(_)) => continue,
            other => panic!("not a close frame: {other:?}"),
        }
    };
    assert_eq!(u16::from(close.code), 1008, "{close:?}");
    assert_eq!(close.reason.as_str(), "the token expired");
    assert!(
        opened.elapsed() < Duration::from_secs(10),
        "{:?}",
        opened.elapsed()
    );
    let run = json!({
        "threadId": "still-open", "runId": "r-still-open",
        "messages": [{"id": "m", "role": "user", "content": "hello"}],
    });
    futures_util::SinkExt::send(&mut long, Message::text(run.to_string()))
        .await
        .unwrap();
    let first = long.next().await.unwrap().unwrap();
    assert!(
        first.to_text().unwrap().contains("RUN_STARTED"),
        "{first:?}"
    );
}

#[tokio::test]
async fn a_valid_token_is_its_subject_and_every_other_is_refused() {
    let keys = Arc::new(Mutex::new(json!({"keys": [jwk("first")]})));
    let server = Server::start(&issuer(keys).await).await;
    let alice = token("first", "first", json!({}));
    let bob = token("first", "first", json!({"sub": "bob"}));

    let (status, _) = server.run(&alice, "alice-thread").await;
    assert_eq!(status, 200);
    let (status, message) = server.run(&bob, "alice-thread").await;
    assert_eq!(
        (status, message.as_str()),
        (404, "no thread `alice-thread`"),
        "bob is another principal"
    );
    assert_eq!(server.run(&bob, "bob-thread").await.0, 200);

    let now = get_current_timestamp();
    for (token, why) in [
        (
            token("first", "first", json!({"exp": now - 3600})),
            "the token expired",
        ),
        (
            token("first", "first", json!({"nbf": now + 3600})),
            "the token is not valid yet",
        ),
        (
            token("first", "first", json!({"aud": "another-service"})),
            "the token is for another audience",
        ),
        (
            token("first", "first", json!({"iss": "https://elsewhere.test/"})),
            "the token is from another issuer",
        ),
        (
            // Signed by a key the issuer does not have, under the name of one it has.
            token("stranger", "first", json!({})),
            "the token's signature does not verify",
        ),
    ] {
        let (status, message) = server.run(&token, "t").await;
        assert_eq!((status, message.as_str()), (401, why));
    }
    // `alg: none`, unsigned: no scheme knows it.
    let unsigned = {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header = b64.encode(r#"{"alg":"none","typ":"JWT"}"#);
        let claims = b64.encode(
            json!({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 3600}).to_string(),
        );
        format!("{header}.{claims}.")
    };
    let (status, message) = server.run(&unsigned, "alice-thread").await;
    assert_eq!(
        (status, message.as_str()),
        (401, "the bearer token is not known")
    );
}

#[tokio::test]
async fn a_new_key_of_the_issuer_is_fetched_when_a_token_names_it() {
    let keys = Arc::new(Mutex::new(json!({"keys": [jwk("first")]})));
    let server = Server::start(&issuer(keys.clone()).await).await;
    assert_eq!(
        server
            .run(&token("first", "first", json!({})), "t-1")
            .await
            .0,
        200
    );

    // The issuer rotates: the second key replaces the first.
    *keys.lock().unwrap() = json!({"keys": [jwk("second")]});
    let (status, message) = server
        .run(&token("second", "second", json!({})), "t-1")
        .await;
    assert_eq!(status, 200, "{message}");
    let (status, message) = server.run(&token("first", "first", json!({})), "t-1").await;
    assert_eq!(
        (status, message.as_str()),
        (401, "the token's key is not one of the issuer's"),
        "the first key is gone with the rotation"
    );
}

/// An issuer whose key set, after the first fetch, is served only once `gate` lets it; `asked`
/// hears of each such fetch as it arrives.
async fn slow_issuer(
    keys: Value,
) -> (
    String,
    tokio::sync::mpsc::UnboundedReceiver<()>,
    Arc<tokio::sync::Semaphore>,
) {
    let (tell, asked) = tokio::sync::mpsc::unbounded_channel();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let held = gate.clone();
    let app = Router::new().route(
        "/jwks",
        get(move || {
            let (keys, tell, gate, fetches) =
                (keys.clone(), tell.clone(), held.clone(), fetches.clone());
            async move {
                if fetches.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0 {
                    let _ = tell.send(());
                    gate.acquire().await.unwrap().forget();
                }
                Json(keys)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, asked, gate)
}

#[tokio::test]
async fn a_token_naming_an_unknown_key_does_not_hold_up_the_others_while_the_keys_are_fetched() {
    let (jwks, mut asked, gate) = slow_issuer(json!({"keys": [jwk("first")]})).await;
    let server = Arc::new(Server::start(&jwks).await);
    // A token signed by a key the issuer has not published: the keys are fetched again, slowly.
    let unknown = tokio::spawn({
        let server = server.clone();
        async move {
            server
                .run(&token("second", "second", json!({})), "t-2")
                .await
        }
    });
    asked.recv().await.expect("the keys are fetched again");
    // Meanwhile, a token of a known key is let in at once: while the fetch still hangs (it
    // would give up after 5 s, and let the waiting logins through then).
    let known = tokio::time::timeout(
        Duration::from_secs(3),
        server.run(&token("first", "first", json!({})), "t-1"),
    )
    .await
    .expect("a login of a known key waited for the fetch of another");
    assert_eq!(known.0, 200, "{}", known.1);
    assert!(!unknown.is_finished(), "the fetch is still under way");
    gate.add_permits(1);
    let (status, message) = unknown.await.unwrap();
    assert_eq!(
        (status, message.as_str()),
        (401, "the token's key is not one of the issuer's")
    );
}

#[tokio::test]
async fn an_issuer_whose_keys_cannot_be_had_or_an_hmac_algorithm_is_refused_at_start() {
    let error = Jwt::new("http://127.0.0.1:9/jwks", ISSUER, AUDIENCE)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("could not be fetched"),
        "{error}"
    );
    let error = Jwt::new("/no/such/jwks.json", ISSUER, AUDIENCE)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("cannot be read"), "{error}");
    let keys = Arc::new(Mutex::new(json!({"keys": [jwk("first")]})));
    let jwt = Jwt::new(&issuer(keys).await, ISSUER, AUDIENCE)
        .await
        .unwrap();
    let error = jwt.algorithms(["HS256"]).unwrap_err();
    assert!(error.to_string().contains("HS256"), "{error}");
}
