//! Many users on one server: threads and runs belong to the principal whose token made them, and
//! another principal is told they do not exist, over HTTP and the WebSocket, on every store.

use crate::support::frames;
use crate::support::stores;

use std::{num::NonZeroU32, time::Duration};

use agent_tower::{
    demo,
    permission::InterruptApprover,
    runs::{PrincipalLimits, Runs},
    server::{AguiServer, BearerTokens, Scope},
    store::RunStore,
    test_util::{MockItem, MockModel},
};
use frames::{Live, frames};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";
const OPS: &str = "operator-token-0123456789abcdef";

stores::postgresql_answers_test!();

#[derive(Clone)]
struct Server {
    name: &'static str,
    base: String,
    http: reqwest::Client,
}

/// The product agent (`remember` asks for approval) behind a server with alice's, bob's and an
/// operator's tokens, its runs on `store` (`None`: in memory).
async fn serve(name: &'static str, store: Option<&str>) -> Server {
    serve_titled(name, store, None).await
}

/// [`serve`], its new threads named by `titles` when given.
async fn serve_titled(
    name: &'static str,
    store: Option<&str>,
    titles: Option<agent_tower::model::BoxModel>,
) -> Server {
    let agent = demo::scripted()
        .policy(demo::policy())
        .approver(InterruptApprover::new(Duration::from_secs(600)))
        .max_turns(NonZeroU32::new(8).unwrap())
        .build();
    let mut runs = Runs::new(agent);
    if let Some(url) = store {
        runs = runs.log(RunStore::open(url).await.unwrap());
    }
    if let Some(titles) = titles {
        runs = runs.title_model(titles);
    }
    let router = AguiServer::with_runs(runs).auth(tokens()).into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    Server {
        name,
        base,
        http: reqwest::Client::new(),
    }
}

/// A server on each store: memory, a SQLite file, PostgreSQL.
async fn servers(test: &str) -> Vec<Server> {
    let mut servers = vec![serve("memory", None).await];
    for (name, url) in stores::store_urls(test).await {
        servers.push(serve(name, Some(&url)).await);
    }
    servers
}

/// An answer: its status, and its body as JSON (an error) or as SSE frames (`events`).
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn code(&self) -> String {
        let body: Value = serde_json::from_str(&self.body).unwrap_or_default();
        body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn events(&self) -> Vec<Value> {
        frames(&self.body).into_iter().map(|(_, e)| e).collect()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `request` with `token`, answered.
    async fn ask(&self, token: &str, request: reqwest::RequestBuilder) -> Answer {
        Self::answer(request.bearer_auth(token).send().await.unwrap()).await
    }

    async fn post(&self, token: &str, body: &Value) -> Answer {
        self.ask(token, self.http.post(&self.base).json(body)).await
    }

    /// A run of `body` with `token`, answered `200`: its response, streaming.
    async fn stream(&self, token: &str, body: &Value) -> reqwest::Response {
        let request = self.http.post(&self.base).bearer_auth(token).json(body);
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", self.name);
        response
    }

    /// `body` made a run that goes on for hours, started with `token`: its response once the
    /// run has started (its first event, `RUN_STARTED`, read).
    async fn started(&self, token: &str, mut body: Value) -> reqwest::Response {
        body["forwardedProps"] = json!({"scripted": {"tokens": 1_000, "delay_ms": 60_000}});
        let mut running = self.stream(token, &body).await;
        let first = running.chunk().await.unwrap().unwrap();
        assert!(
            String::from_utf8_lossy(&first).contains("RUN_STARTED"),
            "{}: {first:?}",
            self.name
        );
        running
    }

    /// `POST /runs/{run}/cancel` with `token`.
    async fn cancel(&self, token: &str, run: &str) -> Answer {
        let url = self.url(&format!("/runs/{run}/cancel"));
        self.ask(token, self.http.post(url)).await
    }

    async fn get(&self, token: &str, path: &str) -> Answer {
        self.ask(token, self.http.get(self.url(path))).await
    }

    /// `PATCH {path}` of `body` with `token`.
    async fn patch(&self, token: &str, path: &str, body: &Value) -> Answer {
        self.ask(token, self.http.patch(self.url(path)).json(body))
            .await
    }

    /// `DELETE {path}` with `token`.
    async fn delete(&self, token: &str, path: &str) -> Answer {
        self.ask(token, self.http.delete(self.url(path))).await
    }

    /// The thread list followed live with `token`.
    async fn live(&self, token: &str) -> Live {
        let request = self.http.get(self.url("/threads")).bearer_auth(token);
        let response = request.header("accept", "text/event-stream").send();
        Live::new(response.await.unwrap()).with_token(token)
    }

    /// The threads `GET /threads{query}` lists for `token`: their ids and titles, in order.
    async fn threads(&self, token: &str, query: &str) -> Vec<(String, String)> {
        let listed = self.get(token, &format!("/threads{query}")).await;
        assert_eq!(listed.status, 200, "{}: {}", self.name, listed.body);
        listed.json()["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let id = t["threadId"].as_str().unwrap().to_owned();
                (id, t["title"].as_str().unwrap_or_default().to_owned())
            })
            .collect()
    }

    async fn answer(response: reqwest::Response) -> Answer {
        Answer {
            status: response.status().as_u16(),
            body: response.text().await.unwrap(),
        }
    }

    /// A WebSocket opened with `token`.
    async fn socket(&self, token: &str) -> Socket {
        let mut request = format!("{}/ws", self.base.replace("http://", "ws://"))
            .into_client_request()
            .unwrap();
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
        let (socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        Socket(socket)
    }
}

struct Socket(
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
);

impl Socket {
    /// The events of one run asked for on the socket, to its terminal event.
    async fn run(&mut self, body: &Value) -> Vec<Value> {
        self.0.send(Message::text(body.to_string())).await.unwrap();
        let mut events = Vec::new();
        while let Some(message) = self.0.next().await {
            let Message::Text(text) = message.unwrap() else {
                continue;
            };
            let event: Value = serde_json::from_str(text.as_str()).unwrap();
            let end = matches!(event["type"].as_str(), Some("RUN_FINISHED" | "RUN_ERROR"));
            events.push(event);
            if end {
                break;
            }
        }
        events
    }
}

fn user(thread: &str, run: &str, text: &str) -> Value {
    json!({
        "threadId": thread, "runId": run,
        "messages": [{"id": format!("m-{run}"), "role": "user", "content": text}],
    })
}

/// A run whose `remember` call stops at an interrupt.
fn remember(thread: &str, run: &str) -> Value {
    user(thread, run, r#"remember {"key": "theme", "value": "dark"}"#)
}

fn approve(thread: &str, run: &str, interrupt: &str) -> Value {
    json!({
        "threadId": thread, "runId": run, "messages": [],
        "resume": [{"interruptId": interrupt, "status": "resolved", "payload": {"approved": true}}],
    })
}

/// The interrupt a run's events end at.
fn interrupt_of(events: &[Value]) -> String {
    let end = events.last().expect("events");
    assert_eq!(end["outcome"]["type"], "interrupt", "{end}");
    end["outcome"]["interrupts"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7())
}

#[tokio::test]
async fn another_principals_thread_cannot_be_read_answered_replaced_or_kept_busy() {
    for server in servers("principals").await {
        let name = server.name;
        let thread = unique("alice-thread");
        let first = server.post(ALICE, &remember(&thread, "a-1")).await;
        assert_eq!(first.status, 200, "{name}: {}", first.body);
        let interrupt = interrupt_of(&first.events());

        // Bob cannot read alice's run or thread: for him they do not exist.
        let events = "/runs/a-1/events";
        assert_eq!(server.get(BOB, events).await.status, 404, "{name}");
        assert_eq!(server.get(ALICE, events).await.status, 200, "{name}");
        let view = format!("/threads/{thread}");
        let seen = server.get(BOB, &view).await;
        assert_eq!(
            (seen.status, seen.code().as_str()),
            (404, "unknown_thread"),
            "{name}"
        );

        // Bob cannot answer alice's interrupt: her call does not run.
        let answered = server.post(BOB, &approve(&thread, "b-1", &interrupt)).await;
        assert_eq!(
            (answered.status, answered.code().as_str()),
            (404, "unknown_thread"),
            "{name}: {}",
            answered.body
        );
        // Nor replace her conversation with a message of his, nor keep her thread busy with a
        // long run of his.
        let replaced = server.post(BOB, &user(&thread, "b-2", "hello")).await;
        assert_eq!(
            (replaced.status, replaced.code().as_str()),
            (404, "unknown_thread"),
            "{name}"
        );
        let mut long = user(&thread, "b-3", "hello");
        long["forwardedProps"] = json!({"scripted": {"tokens": 1_000, "delay_ms": 60_000}});
        assert_eq!(server.post(BOB, &long).await.status, 404, "{name}");
        // Nor replay her request to read its events: the id is taken, nothing more.
        let replayed = server.post(BOB, &remember(&thread, "a-1")).await;
        assert_eq!(
            (replayed.status, replayed.code().as_str()),
            (409, "run_exists"),
            "{name}"
        );

        let hers = server.get(ALICE, &view).await;
        assert_eq!(hers.status, 200, "{name}");
        let hers = hers.json();
        assert_eq!(
            hers["pendingInterrupts"][0]["id"], interrupt,
            "{name}: still pending"
        );
        assert_eq!(
            hers["messages"][0]["content"],
            remember(&thread, "x")["messages"][0]["content"]
        );
        assert!(
            hers["runs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|run| run["runId"] == "a-1"),
            "{name}: none of bob's attempts is a run of her thread: {hers}"
        );

        // Her own answer goes through at once: her thread was never busy.
        let resumed = server
            .post(ALICE, &approve(&thread, "a-2", &interrupt))
            .await;
        assert_eq!(resumed.status, 200, "{name}: {}", resumed.body);
        let end = resumed.events().pop().unwrap();
        assert_eq!(end["type"], "RUN_FINISHED", "{name}: {end}");
        let state = server.get(ALICE, &view).await.json();
        assert_eq!(
            state["state"]["theme"], "dark",
            "{name}: the approved call ran"
        );

        // An operator sees every thread.
        let operator = server.get(OPS, &view).await;
        assert_eq!(operator.status, 200, "{name}");
        assert_eq!(operator.json()["threadId"], thread, "{name}");
    }
}

#[tokio::test]
async fn a_background_run_goes_on_alone_and_its_owner_answers_and_follows_it_later() {
    for server in servers("background").await {
        let name = server.name;
        // Begun in the background: `202` at once; the run goes on with nobody connected, to the
        // last of its 40 tokens.
        let thread = unique("background");
        let mut long = user(&thread, &unique("run"), "hello");
        long["forwardedProps"] = json!({"scripted": {"tokens": 40, "delay_ms": 2}});
        let begun = server.post_async(ALICE, &long).await;
        assert_eq!(begun.status, 202, "{name}: {}", begun.body);
        assert_eq!(begun.json()["threadId"], thread.as_str(), "{name}");
        let run = begun.json()["runId"].as_str().unwrap().to_owned();
        let events = server
            .get(ALICE, &format!("/runs/{run}/events"))
            .await
            .events();
        let end = events.last().unwrap();
        assert_eq!(end["outcome"]["type"], "success", "{name}: {end}");
        let tokens = events
            .iter()
            .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
            .count();
        assert_eq!(tokens, 40, "{name}");
        let status = server.get(ALICE, &format!("/runs/{run}")).await.json();
        assert_eq!(status["status"], "finished", "{name}: {status}");
        assert_eq!(status["threadId"], thread.as_str(), "{name}");
        assert_eq!(status["events"], events.len(), "{name}: {status}");

        // One that stops to ask: its status names what it waits on, for its owner only.
        let thread = unique("asks");
        let begun = server
            .post_async(ALICE, &remember(&thread, &unique("run")))
            .await;
        assert_eq!(begun.status, 202, "{name}: {}", begun.body);
        let asked = begun.json()["runId"].as_str().unwrap().to_owned();
        let interrupt = interrupt_of(
            &server
                .get(ALICE, &format!("/runs/{asked}/events"))
                .await
                .events(),
        );
        let status = server.get(ALICE, &format!("/runs/{asked}")).await.json();
        assert_eq!(status["status"], "interrupted", "{name}: {status}");
        assert_eq!(
            status["pendingInterrupts"][0]["id"],
            interrupt.as_str(),
            "{name}"
        );
        assert_eq!(
            status["pendingInterrupts"][0]["toolName"], "remember",
            "{name}"
        );
        let theirs = server.get(BOB, &format!("/runs/{asked}")).await;
        assert_eq!(
            (theirs.status, theirs.code().as_str()),
            (404, "unknown_run"),
            "{name}"
        );

        // Answered in the background too, then followed to its end.
        let answer = approve(&thread, &unique("answer"), &interrupt);
        let answered = server.post_async(ALICE, &answer).await;
        assert_eq!(answered.status, 202, "{name}: {}", answered.body);
        let run = answered.json()["runId"].as_str().unwrap().to_owned();
        let events = server
            .get(ALICE, &format!("/runs/{run}/events"))
            .await
            .events();
        assert_eq!(
            events.last().unwrap()["outcome"]["type"],
            "success",
            "{name}"
        );
        let status = server.get(ALICE, &format!("/runs/{asked}")).await.json();
        assert_eq!(status["pendingInterrupts"], json!([]), "{name}: answered");
        assert_eq!(
            server
                .get(ALICE, &format!("/threads/{thread}"))
                .await
                .json()["state"]["theme"],
            "dark"
        );
        // The same answer again, under another run: refused at once, as a streamed one is.
        let again = server
            .post_async(ALICE, &approve(&thread, &unique("again"), &interrupt))
            .await;
        assert_eq!(again.status, 409, "{name}: {}", again.body);
    }
}

#[tokio::test]
async fn the_log_names_who_answered_each_interrupt_whoever_answered_it() {
    for server in servers("answered-by").await {
        let name = server.name;
        // Alice answers her own, her answer claiming to be bob's: the log names her.
        let thread = unique("own");
        let interrupt = interrupt_of(
            &server
                .post(ALICE, &remember(&thread, &unique("ask")))
                .await
                .events(),
        );
        let mut answer = approve(&thread, &unique("answer"), &interrupt);
        answer["resume"][0]["metadata"] = json!({"answeredBy": "bob", "note": "kept"});
        let answered = server.post(ALICE, &answer).await;
        assert_eq!(answered.status, 200, "{name}: {}", answered.body);
        let started = &answered.events()[0];
        assert_eq!(started["type"], "RUN_STARTED", "{name}");
        assert_eq!(
            started["input"]["resume"][0]["metadata"],
            json!({"answeredBy": "alice", "note": "kept"}),
            "{name}: {started}"
        );
        assert_eq!(
            started["input"]["resume"][0]["payload"],
            json!({"approved": true})
        );

        // An operator answers another's out of band: the run that goes on names the operator.
        let thread = unique("theirs");
        let interrupt = interrupt_of(
            &server
                .post(ALICE, &remember(&thread, &unique("ask")))
                .await
                .events(),
        );
        let url = server.url(&format!("/interrupts/{interrupt}/resolve"));
        let resolved = server
            .ask(
                OPS,
                server
                    .http
                    .post(url)
                    .json(&json!({"payload": {"approved": true}})),
            )
            .await;
        assert_eq!(resolved.status, 202, "{name}: {}", resolved.body);
        let run = resolved.json()["runId"].as_str().unwrap().to_owned();
        let events = server
            .get(ALICE, &format!("/runs/{run}/events"))
            .await
            .events();
        assert_eq!(
            events[0]["input"]["resume"][0]["metadata"]["answeredBy"], "ops",
            "{name}: {}",
            events[0]
        );
        assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{name}");
    }
}

#[tokio::test]
async fn each_principal_lists_names_archives_and_deletes_only_its_own_threads() {
    for server in servers("thread-list").await {
        let name = server.name;
        let (trip, milk, sale) = (unique("trip"), unique("milk"), unique("sale"));
        for (thread, text) in [
            (&trip, "plan the trip\nto the sea"),
            (&milk, "buy milk"),
            (&sale, "50% off_sale"),
        ] {
            let ran = server
                .post(ALICE, &user(thread, &unique("run"), text))
                .await;
            assert_eq!(ran.status, 200, "{name}: {}", ran.body);
        }
        let bobs = unique("bob");
        server
            .post(BOB, &user(&bobs, &unique("run"), "bob's"))
            .await;
        let entry = |thread: &String, title: &str| (thread.clone(), title.to_owned());

        // Each sees their own, newest first, titled by the first line of the first prompt.
        let all = [
            entry(&sale, "50% off_sale"),
            entry(&milk, "buy milk"),
            entry(&trip, "plan the trip"),
        ];
        assert_eq!(server.threads(ALICE, "").await, all, "{name}");
        assert_eq!(
            server.threads(BOB, "").await,
            [entry(&bobs, "bob's")],
            "{name}"
        );

        // Bob cannot rename, archive or delete hers: for him it does not exist.
        let path = format!("/threads/{trip}");
        let renamed = server.patch(BOB, &path, &json!({"title": "mine"})).await;
        assert_eq!(
            (renamed.status, renamed.code().as_str()),
            (404, "unknown_thread")
        );
        let deleted = server.delete(BOB, &path).await;
        assert_eq!(
            (deleted.status, deleted.code().as_str()),
            (404, "unknown_thread")
        );
        assert_eq!(server.threads(ALICE, "").await, all, "{name}: untouched");

        // Named: listed by its name, in its place; found by it in either case.
        let named = server
            .patch(ALICE, &path, &json!({"title": " Trip "}))
            .await;
        assert_eq!(named.status, 200, "{name}: {}", named.body);
        assert_eq!(named.json()["title"], "Trip", "{name}");
        let listed = server.threads(ALICE, "").await;
        assert_eq!(listed[2], entry(&trip, "Trip"), "{name}: {listed:?}");
        assert_eq!(
            server.threads(ALICE, "?q=tRI").await,
            [entry(&trip, "Trip")]
        );
        assert_eq!(
            server.threads(ALICE, "?q=%25").await,
            [entry(&sale, "50% off_sale")]
        );
        assert_eq!(
            server.threads(ALICE, "?q=_").await,
            [entry(&sale, "50% off_sale")]
        );

        // Archived: out of the list, in the archive.
        let archived = format!("/threads/{milk}");
        let shelved = server
            .patch(ALICE, &archived, &json!({"archived": true}))
            .await;
        assert_eq!(shelved.json()["archived"], true, "{name}");
        let active = [entry(&sale, "50% off_sale"), entry(&trip, "Trip")];
        assert_eq!(server.threads(ALICE, "").await, active, "{name}");
        let shelf = server.threads(ALICE, "?archived=true").await;
        assert_eq!(shelf, [entry(&milk, "buy milk")], "{name}");
        assert_eq!(server.threads(ALICE, "?archived=all").await.len(), 3);

        // Refused: nothing to change, an empty title, a field it does not know.
        for (body, code) in [
            (json!({}), "invalid_input"),
            (json!({"title": "  "}), "invalid_title"),
            (json!({"title": "a\u{7}b"}), "invalid_title"),
            (json!({"colour": "red"}), "invalid_input"),
            (json!({"archived": "yes"}), "invalid_input"),
        ] {
            let refused = server.patch(ALICE, &path, &body).await;
            assert_eq!(
                (refused.status, refused.code().as_str()),
                (422, code),
                "{body}"
            );
        }
        for (query, code) in [
            ("?limit=0", "invalid_limit"),
            ("?limit=101", "invalid_limit"),
            ("?after=nonsense", "invalid_cursor"),
            ("?archived=maybe", "invalid_archived"),
            ("?color=red", "invalid_query"),
        ] {
            let refused = server.get(ALICE, &format!("/threads{query}")).await;
            assert_eq!(
                (refused.status, refused.code().as_str()),
                (400, code),
                "{query}"
            );
        }

        // Its name taken back: the first prompt's line again.
        let unnamed = server.patch(ALICE, &path, &json!({"title": null})).await;
        assert_eq!(unnamed.json()["title"], "plan the trip", "{name}");

        // Deleted: gone from the list and the log.
        let gone = server.delete(ALICE, &format!("/threads/{sale}")).await;
        assert_eq!(gone.status, 204, "{name}: {}", gone.body);
        assert_eq!(
            server.get(ALICE, &format!("/threads/{sale}")).await.status,
            404
        );
        let left = [entry(&trip, "plan the trip")];
        assert_eq!(server.threads(ALICE, "").await, left, "{name}");
        assert_eq!(server.threads(BOB, "").await.len(), 1, "{name}: bob's kept");
    }
}

/// A turn after `history` (the thread's conversation as `GET /threads/{id}` gives it), as a
/// client sends it: the whole conversation, then the new message, if any.
fn turn(thread: &str, run: &str, history: &Value, text: Option<&str>) -> Value {
    let mut messages = history.as_array().cloned().unwrap_or_default();
    if let Some(text) = text {
        messages.push(json!({"id": format!("m-{run}"), "role": "user", "content": text}));
    }
    json!({"threadId": thread, "runId": run, "messages": messages})
}

/// The role and text of each message of `messages`.
fn said(messages: &Value) -> Vec<(String, String)> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = m["content"].as_str().unwrap_or_default();
            (m["role"].as_str().unwrap().to_owned(), text.to_owned())
        })
        .collect()
}

impl Server {
    /// `POST /threads/{thread}/fork` of `body` with `token`.
    async fn fork(&self, token: &str, thread: &str, body: &Value) -> Answer {
        let url = self.url(&format!("/threads/{thread}/fork"));
        self.ask(token, self.http.post(url).json(body)).await
    }

    /// `GET /threads/{thread}` with `token`, which must be answered.
    async fn thread(&self, token: &str, thread: &str) -> Value {
        let seen = self.get(token, &format!("/threads/{thread}")).await;
        assert_eq!(seen.status, 200, "{}: {}", self.name, seen.body);
        seen.json()
    }

    /// A run of `body` with `token`, which must finish.
    async fn finish(&self, token: &str, body: &Value) {
        let ran = self.post(token, body).await;
        assert_eq!(ran.status, 200, "{}: {}", self.name, ran.body);
        let end = ran.events().pop().unwrap();
        assert_eq!(end["type"], "RUN_FINISHED", "{}: {end}", self.name);
    }
}

#[tokio::test]
async fn a_fork_edit_or_regenerate_is_a_branch_of_its_own_and_the_original_stays() {
    for server in servers("thread-forks").await {
        let name = server.name;
        let original = unique("trip");
        server
            .finish(
                ALICE,
                &turn(&original, &unique("r"), &json!([]), Some("a trip, please")),
            )
            .await;
        let first = server.thread(ALICE, &original).await["messages"].clone();
        server
            .finish(
                ALICE,
                &turn(&original, &unique("r"), &first, Some("to the sea")),
            )
            .await;
        let whole = server.thread(ALICE, &original).await;
        let kept = said(&whole["messages"]);
        let ids: Vec<&str> = whole["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(kept.len(), 4, "{name}: {kept:?}");
        let (question, answer) = (ids[2], ids[3]);

        // Forked from the first answer: a new thread of alice's with the conversation up to
        // it, listed as a fork, titled as the original.
        let forked = server
            .fork(ALICE, &original, &json!({"messageId": ids[1]}))
            .await;
        assert_eq!(forked.status, 201, "{name}: {}", forked.body);
        let fork = forked.json();
        let fork_id = fork["threadId"].as_str().unwrap().to_owned();
        assert_ne!(fork_id, original);
        assert_eq!(fork["title"], "a trip, please", "{name}");
        assert_eq!(
            fork["forkedFrom"],
            json!({"threadId": original, "messageId": ids[1]})
        );
        let copied = server.thread(ALICE, &fork_id).await;
        assert_eq!(said(&copied["messages"]), kept[..2], "{name}");

        // Edited (the second question asked otherwise) and regenerated (another answer to it):
        // forks before the message, each continued as any thread.
        let edited = server
            .fork(
                ALICE,
                &original,
                &json!({"beforeMessageId": question, "title": "By train"}),
            )
            .await
            .json();
        assert_eq!(edited["title"], "By train", "{name}");
        let edited = edited["threadId"].as_str().unwrap().to_owned();
        let before = server.thread(ALICE, &edited).await["messages"].clone();
        server
            .finish(
                ALICE,
                &turn(&edited, &unique("r"), &before, Some("by train")),
            )
            .await;
        let regenerated = server
            .fork(ALICE, &original, &json!({"beforeMessageId": answer}))
            .await
            .json();
        let regenerated = regenerated["threadId"].as_str().unwrap().to_owned();
        let asked = server.thread(ALICE, &regenerated).await["messages"].clone();
        assert_eq!(said(&asked), kept[..3], "{name}");
        server
            .finish(ALICE, &turn(&regenerated, &unique("r"), &asked, None))
            .await;
        let again = server.thread(ALICE, &regenerated).await["messages"].clone();
        assert_eq!(
            said(&again),
            kept,
            "{name}: the same question answered again"
        );
        assert_ne!(again[3]["id"], answer, "{name}: a new answer");
        let branch = server.thread(ALICE, &edited).await["messages"].clone();
        assert_eq!(said(&branch)[..2], kept[..2], "{name}");
        assert_eq!(said(&branch)[2], ("user".to_owned(), "by train".to_owned()));
        assert_eq!(said(&branch)[3].1, "You said: by train", "{name}");

        // The original is as it was, and lists its branches, newest first.
        let now = server.thread(ALICE, &original).await;
        assert_eq!(now["messages"], whole["messages"], "{name}: untouched");
        assert!(now.get("forkedFrom").is_none(), "{name}: {now}");
        let forks: Vec<&str> = now["forks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["threadId"].as_str().unwrap())
            .collect();
        assert_eq!(forks, [&*regenerated, &*edited, &*fork_id], "{name}");
        let branch_of = server.thread(ALICE, &edited).await;
        assert_eq!(branch_of["forkedFrom"]["threadId"], original, "{name}");
        assert_eq!(branch_of["forkedFrom"]["messageId"], ids[1], "{name}");

        // Bob can neither fork hers nor see her forks; nothing is forked at a message the
        // thread lacks, nor at two places.
        let refused = server.fork(BOB, &original, &json!({})).await;
        assert_eq!(
            (refused.status, refused.code().as_str()),
            (404, "unknown_thread")
        );
        for (body, code) in [
            (json!({"messageId": "nowhere"}), "unknown_message"),
            (
                json!({"messageId": ids[0], "beforeMessageId": ids[1]}),
                "invalid_input",
            ),
            (json!({"title": " "}), "invalid_title"),
            (json!({"at": 3}), "invalid_input"),
        ] {
            let refused = server.fork(ALICE, &original, &body).await;
            assert_eq!(
                (refused.status, refused.code().as_str()),
                (422, code),
                "{name}: {body}"
            );
        }
        assert_eq!(server.threads(BOB, "").await, [], "{name}");
    }
}

#[tokio::test]
async fn a_fork_of_a_thread_waiting_for_an_approval_leaves_the_call_out() {
    for server in servers("thread-fork-waiting").await {
        let name = server.name;
        let waiting = unique("waiting");
        let asked = server.post(ALICE, &remember(&waiting, &unique("r"))).await;
        interrupt_of(&asked.events());
        let forked = server.fork(ALICE, &waiting, &json!({})).await;
        assert_eq!(forked.status, 201, "{name}: {}", forked.body);
        let fork = forked.json()["threadId"].as_str().unwrap().to_owned();
        let copied = server.thread(ALICE, &fork).await;
        let calls: Vec<&Value> = copied["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m.get("toolCalls"))
            .flat_map(|calls| calls.as_array().unwrap())
            .collect();
        assert_eq!(calls, Vec::<&Value>::new(), "{name}: {copied}");
        assert_eq!(copied["pendingInterrupts"], json!([]), "{name}");
        // The fork goes on with no interrupt to answer; the original still waits for its own.
        let history = copied["messages"].clone();
        server
            .finish(ALICE, &turn(&fork, &unique("r"), &history, Some("hello")))
            .await;
        let original = server.thread(ALICE, &waiting).await;
        assert_eq!(
            original["pendingInterrupts"].as_array().unwrap().len(),
            1,
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_new_thread_is_listed_as_its_first_run_starts() {
    for server in servers("thread-listed-at-start").await {
        let name = server.name;
        let thread = unique("long");
        let run = unique("run");
        let long = user(&thread, &run, "a long story\nwith details");
        let running = server.started(ALICE, long).await;
        let listed = server.threads(ALICE, "").await;
        assert_eq!(
            listed,
            [(thread.clone(), "a long story".to_owned())],
            "{name}: listed and titled while its first run runs"
        );
        assert_eq!(server.threads(BOB, "").await, [], "{name}");
        let seen = server.thread(ALICE, &thread).await;
        assert_eq!(
            said(&seen["messages"]),
            [("user".to_owned(), "a long story\nwith details".to_owned())]
        );
        let cancelled = server.cancel(ALICE, &run).await;
        assert_eq!(cancelled.status, 202, "{name}: {}", cancelled.body);
        drop(running);
    }
}

#[tokio::test]
async fn a_walk_through_the_pages_of_a_growing_list_meets_each_thread_once() {
    for server in servers("thread-pages").await {
        let name = server.name;
        let mut made = Vec::new();
        for i in 0..5 {
            let thread = unique(&format!("t{i}"));
            server
                .post(ALICE, &user(&thread, &unique("run"), "hi"))
                .await;
            made.push(thread);
        }
        let mut seen: Vec<String> = Vec::new();
        let mut query = "?limit=2".to_owned();
        loop {
            let page = server.get(ALICE, &format!("/threads{query}")).await.json();
            let ids = page["threads"].as_array().unwrap().iter();
            seen.extend(ids.map(|t| t["threadId"].as_str().unwrap().to_owned()));
            // The list grows meanwhile: a newer thread, before the walk's point.
            let newer = unique("znewer");
            server
                .post(ALICE, &user(&newer, &unique("run"), "hi"))
                .await;
            match page["next"].as_str() {
                Some(next) => query = format!("?limit=2&after={next}"),
                None => break,
            }
        }
        made.reverse();
        assert_eq!(seen, made, "{name}: each once, newest first");
    }
}

#[tokio::test]
async fn the_list_followed_live_shows_its_principals_changes_made_on_any_instance() {
    let mut pairs = vec![("memory", None)];
    pairs.extend(
        stores::store_urls("thread-live")
            .await
            .into_iter()
            .map(|(name, url)| (name, Some(url))),
    );
    for (name, url) in pairs {
        // Followed on one instance; on PostgreSQL the changes are made through another.
        let here = serve(name, url.as_deref()).await;
        let second = match name {
            "postgres" => Some(serve(name, url.as_deref()).await),
            _ => None,
        };
        let there = second.as_ref().unwrap_or(&here);
        let mut alices = here.live(ALICE).await;
        let mut bobs = here.live(BOB).await;

        let thread = unique("live");
        let ran = there
            .post(ALICE, &user(&thread, &unique("run"), "first words\nmore"))
            .await;
        assert_eq!(ran.status, 200, "{name}: {}", ran.body);
        // Alice's list as her client keeps it from the stream alone.
        let mut list = Listed::default();
        let listed = |list: &Listed| list.0.get(&thread).cloned().unwrap_or_default();
        list.until(&mut alices, &here, |l| listed(l)["title"] == "first words")
            .await;
        assert_eq!(list.0.len(), 1, "{name}: hers only: {:?}", list.0);

        let path = format!("/threads/{thread}");
        there.patch(ALICE, &path, &json!({"title": "Named"})).await;
        list.until(&mut alices, &here, |l| listed(l)["title"] == "Named")
            .await;
        there.patch(ALICE, &path, &json!({"archived": true})).await;
        list.until(&mut alices, &here, |l| listed(l)["archived"] == true)
            .await;
        assert_eq!(there.delete(ALICE, &path).await.status, 204, "{name}");
        list.until(&mut alices, &here, |l| l.0.is_empty()).await;

        // Bob was told none of it: the first thread he is told of is his own.
        let his = unique("his");
        there.post(BOB, &user(&his, &unique("run"), "bob's")).await;
        let mut bobs_list = Listed::default();
        bobs_list.until(&mut bobs, &here, |l| !l.0.is_empty()).await;
        let told: Vec<&String> = bobs_list.0.keys().collect();
        assert_eq!(told, [&his], "{name}");
    }
}

#[tokio::test]
async fn a_title_model_names_a_new_thread_once_it_answered() {
    let mut stores = vec![("memory", None)];
    let durable = stores::store_urls("thread-titles").await;
    stores.extend(durable.into_iter().map(|(name, url)| (name, Some(url))));
    for (name, url) in stores {
        let titles = MockModel::new([vec![
            MockItem::text("Title: \"Oslo's population.\"\n"),
            MockItem::stop(),
        ]]);
        let model = agent_tower::model::boxed(titles.clone());
        let server = serve_titled(name, url.as_deref(), Some(model)).await;
        let mut alices = server.live(ALICE).await;
        let thread = unique("titled");
        let asked = user(&thread, &unique("run"), "How many live in Oslo?");
        assert_eq!(server.post(ALICE, &asked).await.status, 200, "{name}");

        // Listed under the first line of its first prompt, then under the model's title.
        let mut list = Listed::default();
        let title = |list: &Listed| list.0.get(&thread).map(|t| t["title"].clone());
        list.until(&mut alices, &server, |l| {
            title(l) == Some(json!("Oslo's population"))
        })
        .await;
        let listed = server.threads(ALICE, "").await;
        assert_eq!(
            listed,
            [(thread.clone(), "Oslo's population".to_owned())],
            "{name}"
        );

        // The model was shown the first prompt and the answer, and asked as alice (her budgets
        // count it).
        let requests = titles.requests();
        assert_eq!(requests.len(), 1, "{name}");
        let shown = requests[0].messages.last().unwrap().text();
        assert_eq!(
            shown,
            "The user wrote:\nHow many live in Oslo?\n\nThe assistant answered:\nYou said: How many live in Oslo?",
            "{name}"
        );
        let principal = requests[0]
            .run
            .principal
            .as_ref()
            .map(|p| p.name().to_owned());
        assert_eq!(principal.as_deref(), Some("alice"), "{name}");

        // The next run of the thread asks for no title.
        let again = turn(
            &thread,
            &unique("run"),
            &server.thread(ALICE, &thread).await["messages"],
            Some("thanks"),
        );
        assert_eq!(server.post(ALICE, &again).await.status, 200, "{name}");
        assert_eq!(titles.requests().len(), 1, "{name}");
    }
}

impl Server {
    /// `body` posted with `token`, asking that a busy thread be handled as `busy` says (which the
    /// server must say it applied).
    async fn post_busy(&self, token: &str, body: &Value, busy: &str) -> Answer {
        let preference = format!("busy-thread={busy}");
        let request = self.http.post(&self.base).header("prefer", &preference);
        let response = request.bearer_auth(token).json(body).send().await.unwrap();
        let applied = response.headers()["preference-applied"].to_str().unwrap();
        assert_eq!(applied, preference, "{}", self.name);
        Self::answer(response).await
    }

    /// `body` begun in the background (`Prefer: respond-async`) with `token`.
    async fn post_async(&self, token: &str, body: &Value) -> Answer {
        let request = self.http.post(&self.base).header("prefer", "respond-async");
        let response = request.bearer_auth(token).json(body).send().await.unwrap();
        let accepted = response.status() == 202;
        let location = response.headers().get("location").cloned();
        let answer = Self::answer(response).await;
        if accepted {
            let location = location.expect("a location");
            assert_eq!(
                answer.json()["run"],
                location.to_str().unwrap(),
                "{}",
                self.name
            );
        }
        answer
    }
}

/// That the run `running` streams ends cancelled.
async fn cut_short(running: reqwest::Response, name: &str) {
    let cut = Server::answer(running).await.events();
    let end = cut.last().unwrap();
    assert_eq!(
        (end["type"].as_str(), end["code"].as_str()),
        (Some("RUN_ERROR"), Some("cancelled")),
        "{name}: {end}"
    );
}

/// The statuses of a thread's runs (as `GET /threads/{id}` gives it), in order.
fn statuses(thread: &Value) -> Vec<&str> {
    let runs = thread["runs"].as_array().unwrap();
    runs.iter().map(|r| r["status"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_client_rolls_back_the_run_of_a_busy_thread() {
    for (first, second) in pair("busy-rollback").await {
        let name = first.name;
        let thread = unique("rollback");
        let hello = first
            .post(ALICE, &user(&thread, &unique("run"), "hello"))
            .await;
        assert_eq!(hello.status, 200, "{name}: {}", hello.body);
        let before = first.thread(ALICE, &thread).await["messages"].clone();
        let long_run = unique("long");
        let long = turn(&thread, &long_run, &before, Some("tell me a long story"));
        let running = first.started(ALICE, long.clone()).await;

        // The next message, sent as the client holds the thread (the long story's prompt in
        // it), asking to roll the running run back, through the other instance.
        let late = unique("late");
        let mut messages = long["messages"].clone();
        let asked =
            json!({"id": format!("m-{late}"), "role": "user", "content": "never mind: and you?"});
        messages.as_array_mut().unwrap().push(asked);
        let body = json!({"threadId": thread, "runId": late, "messages": messages});
        let answered = second.post_busy(ALICE, &body, "rollback").await;
        assert_eq!(answered.status, 200, "{name}: {}", answered.body);
        cut_short(running, name).await;

        // The thread goes on from before the long story: its prompt is not kept, and the new
        // run's last snapshot shows the client so.
        let expected: Vec<(String, String)> = [
            ("user", "hello"),
            ("assistant", "You said: hello"),
            ("user", "never mind: and you?"),
            ("assistant", "You said: never mind: and you?"),
        ]
        .map(|(role, text)| (role.to_owned(), text.to_owned()))
        .into();
        let kept = first.thread(ALICE, &thread).await;
        assert_eq!(said(&kept["messages"]), expected, "{name}");
        let events = answered.events();
        let snapshot = events
            .iter()
            .rfind(|e| e["type"] == "MESSAGES_SNAPSHOT")
            .unwrap();
        assert_eq!(said(&snapshot["messages"]), expected, "{name}");
        let statuses = statuses(&kept);
        assert_eq!(statuses, ["finished", "cancelled", "finished"], "{name}");
    }
}

/// A thread list as a client following it keeps it: each thread's listing by id, from the
/// stream's events (a whole list again when told `THREADS_CHANGED`).
#[derive(Default)]
struct Listed(std::collections::BTreeMap<String, Value>);

impl Listed {
    /// Reads `live` (followed on `server`) until `done` holds of the list.
    async fn until(&mut self, live: &mut Live, server: &Server, done: impl Fn(&Self) -> bool) {
        while !done(self) {
            let event = live.next().await;
            match event["type"].as_str() {
                Some("THREAD_UPDATED") => {
                    let id = event["thread"]["threadId"].as_str().unwrap().to_owned();
                    self.0.insert(id, event["thread"].clone());
                }
                Some("THREAD_DELETED") => {
                    self.0.remove(event["threadId"].as_str().unwrap());
                }
                Some("THREADS_CHANGED") => {
                    let token = live.token().to_owned();
                    let all = server.get(&token, "/threads?archived=all").await.json();
                    self.0 = all["threads"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| (t["threadId"].as_str().unwrap().to_owned(), t.clone()))
                        .collect();
                }
                _ => panic!("{}: not an event of the list: {event}", server.name),
            }
        }
    }
}

#[tokio::test]
async fn only_its_principal_or_an_operator_cancels_a_run() {
    for server in servers("cancel").await {
        let name = server.name;
        let thread = unique("alice-long");
        let mut long = user(&thread, "a-long", "hello");
        long["forwardedProps"] = json!({"scripted": {"tokens": 1_000, "delay_ms": 20}});
        let streaming = server.stream(ALICE, &long).await;

        // For bob her run does not exist; it goes on.
        let refused = server.cancel(BOB, "a-long").await;
        assert_eq!(
            (refused.status, refused.code().as_str()),
            (404, "unknown_run"),
            "{name}"
        );
        let view = server
            .get(ALICE, &format!("/threads/{thread}"))
            .await
            .json();
        assert_eq!(view["runs"][0]["status"], "running", "{name}");

        // An operator stops it; her stream ends cancelled, and her own request finds it ended.
        assert_eq!(server.cancel(OPS, "a-long").await.status, 202, "{name}");
        let events = Server::answer(streaming).await.events();
        let end = events.last().unwrap();
        assert_eq!(
            (end["type"].as_str(), end["code"].as_str()),
            (Some("RUN_ERROR"), Some("cancelled")),
            "{name}"
        );
        let hers = server.cancel(ALICE, "a-long").await;
        assert_eq!(hers.status, 200, "{name}");
        assert_eq!(hers.json()["status"], "cancelled", "{name}");
    }
}

#[tokio::test]
async fn over_the_websocket_another_principals_thread_does_not_exist() {
    for server in servers("principals-ws").await {
        let name = server.name;
        let thread = unique("alice-ws");
        let mut alice = server.socket(ALICE).await;
        let interrupt = interrupt_of(&alice.run(&remember(&thread, "wa-1")).await);

        let mut bob = server.socket(BOB).await;
        for body in [
            approve(&thread, "wb-1", &interrupt),
            user(&thread, "wb-2", "hello"),
        ] {
            let events = bob.run(&body).await;
            assert_eq!(events.len(), 1, "{name}: {events:?}");
            assert_eq!(
                (events[0]["type"].as_str(), events[0]["code"].as_str()),
                (Some("RUN_ERROR"), Some("unknown_thread")),
                "{name}"
            );
        }
        // Bob's own thread works on the same socket.
        let own = bob.run(&user(&unique("bob-ws"), "wb-3", "hello")).await;
        assert_eq!(own.last().unwrap()["type"], "RUN_FINISHED", "{name}");

        let resumed = alice.run(&approve(&thread, "wa-2", &interrupt)).await;
        assert_eq!(
            resumed.last().unwrap()["type"],
            "RUN_FINISHED",
            "{name}: {resumed:?}"
        );
    }
}

/// A server whose principals may use what `limits` says.
/// Alice's and Bob's run tokens, and the operator's.
fn tokens() -> BearerTokens {
    BearerTokens::new()
        .add_named("alice", Scope::Run, ALICE)
        .unwrap()
        .add_named("bob", Scope::Run, BOB)
        .unwrap()
        .add_named("ops", Scope::Operator, OPS)
        .unwrap()
}

async fn limited(limits: PrincipalLimits) -> Server {
    let agent = demo::scripted()
        .policy(demo::policy())
        .approver(InterruptApprover::new(Duration::from_secs(600)))
        .max_turns(NonZeroU32::new(8).unwrap())
        .build();
    let router = AguiServer::with_runs(Runs::new(agent).per_principal(limits))
        .auth(tokens())
        .into_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    Server {
        name: "memory",
        base,
        http: reqwest::Client::new(),
    }
}

fn filler(run: &str, tokens: u64, delay_ms: u64) -> Value {
    let mut body = user(&unique("t"), run, "hello");
    body["forwardedProps"] = json!({"scripted": {"tokens": tokens, "delay_ms": delay_ms}});
    body
}

impl Server {
    async fn send(&self, token: &str, body: &Value) -> reqwest::Response {
        self.http
            .post(&self.base)
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn a_principal_with_as_many_live_runs_as_it_may_have_gets_429() {
    let server = limited(PrincipalLimits::new().live_runs(1)).await;
    let slow = server.send(ALICE, &filler("l-1", 1_000, 60_000)).await;
    assert_eq!(slow.status(), 200);
    let refused = server.send(ALICE, &filler("l-2", 1, 0)).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let refused = Server::answer(refused).await;
    assert_eq!(refused.code(), "too_many_live_runs", "{}", refused.body);
    assert_eq!(
        server.post(BOB, &filler("b-1", 1, 0)).await.status,
        200,
        "bob's own count"
    );
    assert_eq!(
        server.post(OPS, &filler("o-1", 1, 0)).await.status,
        200,
        "operators"
    );
}

#[tokio::test]
async fn a_principal_past_its_runs_a_minute_is_told_when_to_come_back() {
    let server = limited(PrincipalLimits::new().runs_per_minute(3)).await;
    for n in 0..3 {
        assert_eq!(
            server
                .post(BOB, &filler(&format!("r-{n}"), 1, 0))
                .await
                .status,
            200
        );
    }
    let fourth = server.send(BOB, &filler("r-3", 1, 0)).await;
    assert_eq!(fourth.status(), 429);
    let seconds: u64 = fourth.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&seconds), "{seconds}");
    assert_eq!(Server::answer(fourth).await.code(), "rate_limited");
    assert_eq!(
        server.post(ALICE, &filler("a-1", 1, 0)).await.status,
        200,
        "alice's own count"
    );
}

#[tokio::test]
async fn a_run_past_its_principals_bytes_of_the_day_is_stopped_and_the_next_refused() {
    let server = limited(PrincipalLimits::new().log_bytes_per_day(200 * 1024)).await;
    let stopped = server.post(ALICE, &filler("q-1", 100_000, 0)).await;
    assert_eq!(stopped.status, 200);
    let end = stopped.events().pop().unwrap();
    assert_eq!(
        (end["type"].as_str(), end["code"].as_str()),
        (Some("RUN_ERROR"), Some("quota_exceeded")),
        "{end}"
    );
    let sent = stopped.body.len();
    assert!(
        sent < 1024 * 1024,
        "stopped near 200 KB, not after 100,000 tokens: {sent}"
    );
    let next = server.post(ALICE, &filler("q-2", 1, 0)).await;
    assert_eq!((next.status, next.code().as_str()), (429, "quota_exceeded"));
    assert_eq!(server.post(BOB, &filler("q-3", 10, 0)).await.status, 200);
}

/// Two servers on one store where several instances share one (PostgreSQL); one server, named
/// twice, in memory and on a SQLite file.
async fn pair(test: &str) -> Vec<(Server, Server)> {
    let memory = serve("memory", None).await;
    let mut pairs = vec![(memory.clone(), memory)];
    for (name, url) in stores::store_urls(test).await {
        let first = serve(name, Some(&url)).await;
        let second = match name {
            "postgres" => serve(name, Some(&url)).await,
            _ => first.clone(),
        };
        pairs.push((first, second));
    }
    pairs
}

#[tokio::test]
async fn a_client_says_what_its_run_does_on_a_busy_thread() {
    for (first, second) in pair("busy-thread").await {
        let name = first.name;
        let thread = unique("busy");
        let (long_run, late) = (unique("long"), unique("late"));
        let long = user(&thread, &long_run, "tell me a long story");
        let running = first.started(ALICE, long.clone()).await;

        // Asked to be refused (the server's default too): 409, the long run goes on.
        let prefer = |value: &str| ("prefer", format!("busy-thread={value}"));
        let mut second_message = user(&thread, &late, "stop, another question");
        second_message["messages"] = json!([
            long["messages"][0],
            {"id": format!("m-{late}"), "role": "user", "content": "stop, another question"},
        ]);
        let (header, value) = prefer("reject");
        let request = second.http.post(&second.base).header(header, value);
        let refused = second.ask(ALICE, request.json(&second_message)).await;
        assert_eq!(
            (refused.status, refused.code().as_str()),
            (409, "thread_busy"),
            "{name}"
        );

        // Asked to interrupt: the long run ends cancelled for its reader (on the other
        // instance), then the new one runs, with both questions in the thread.
        let answered = second.post_busy(ALICE, &second_message, "interrupt").await;
        assert_eq!(answered.status, 200, "{name}: {}", answered.body);
        let end = answered.events().pop().unwrap();
        assert_eq!(end["type"], "RUN_FINISHED", "{name}: {end}");
        cut_short(running, name).await;
        let kept = first.thread(ALICE, &thread).await;
        let users: Vec<(String, String)> = said(&kept["messages"])
            .into_iter()
            .filter(|(role, _)| role == "user")
            .collect();
        assert_eq!(
            users,
            [
                ("user".to_owned(), "tell me a long story".to_owned()),
                ("user".to_owned(), "stop, another question".to_owned()),
            ],
            "{name}"
        );
        assert_eq!(statuses(&kept), ["cancelled", "finished"], "{name}");

        // Asked to wait: it starts once the running one ends (here, cancelled by its client).
        let history = kept["messages"].clone();
        let (again, queued) = (unique("again"), unique("queued"));
        let long = turn(&thread, &again, &history, Some("another long one"));
        let running = first.started(ALICE, long.clone()).await;
        let mut waiting = long["messages"].clone();
        waiting
            .as_array_mut()
            .unwrap()
            .push(json!({"id": format!("m-{queued}"), "role": "user", "content": "after it"}));
        let body = json!({"threadId": thread, "runId": queued, "messages": waiting});
        let (header, value) = prefer("queue");
        let request = second.http.post(&second.base).header(header, value);
        let request = request.bearer_auth(ALICE).json(&body).send();
        let queued_run = tokio::spawn(request);
        // (The server's own answer to a busy thread is 409: a request that arrived while the
        // long run ran and was not queued would fail this test.)
        assert_eq!(first.cancel(ALICE, &again).await.status, 202, "{name}");
        let answered = Server::answer(queued_run.await.unwrap().unwrap()).await;
        let end = answered.events().pop().unwrap();
        assert_eq!(end["type"], "RUN_FINISHED", "{name}: {end}");
        drop(running);
    }
}
