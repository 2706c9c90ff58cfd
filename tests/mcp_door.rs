//! The MCP door (`/mcp`) of `agent-tower serve`, driven by the official MCP TypeScript clients of
//! both generations (v1 `@modelcontextprotocol/sdk` on the 2025 protocol, v2
//! `@modelcontextprotocol/client` on 2026-07-28): the agent as one tool, calls as runs of the
//! caller (the next turn on the same thread, another principal's thread unknown), progress,
//! approvals through elicitation (within the call, and as `input_required` whose retry continues
//! the run), an approval a client cannot give answered over AG-UI, a cancelled call's run
//! cancelled. The steps are in `tests/conformance/mcp-door.mjs`.

use crate::support::{
    self,
    process::{ALICE, BOB, Process},
    stores,
};

async fn door(store: &str) {
    let server = Process::serve_for_alice_and_bob(store, &[]).await;
    let out = support::node("mcp-door.mjs", &[&server.base, ALICE, BOB], None).await;
    println!("{out}");
    for step in [
        "ok v1 tool",
        "ok another principal's thread is unknown",
        "ok a wrong argument and a wrong tool are refused by name",
        "ok v1 approval asked within the call, approved, the tool ran",
        "ok v1 approval declined with feedback",
        "ok a client without elicitation is told the run waits; answered over AG-UI, it went on",
        "ok v1 call aborted: its run ended cancelled",
        "ok v2 (2026-07-28) call with progress, approval through input_required, one run",
        "ok v2 another principal's run handle is refused",
        "mcp-door: passed",
    ] {
        assert!(out.contains(step), "{step} missing from:\n{out}");
    }
}

#[tokio::test]
async fn the_official_mcp_clients_call_the_agent_in_memory() {
    door("memory").await;
}

#[tokio::test]
async fn the_official_mcp_clients_call_the_agent_on_sqlite() {
    door(&stores::sqlite("mcp-door")).await;
}

/// A deploy under a call: SIGTERM of the instance answering a 2026-07-28 client's call; the client
/// calls again (through the other instance, as behind a load balancer) and gets the whole answer of
/// the one run, continued there. The steps are in `tests/conformance/mcp-deploy.mjs`.
#[tokio::test]
async fn a_call_survives_a_deploy_of_the_instance_answering_it() {
    let store = stores::sqlite("mcp-deploy");
    let (mut first, second) = Process::rolling_pair(&store, &[]).await;
    let pid = first.pid().to_string();
    let out = support::node("mcp-deploy.mjs", &[&first.base, &second.base, &pid], None).await;
    println!("{out}");
    assert!(out.contains("mcp-deploy: passed"), "{out}");
    first.exits_cleanly().await;
    first.logged("runs in flight were handed over").await;
}

/// The Tasks extension (`2026-07-28`), driven by the official Rust SDK's client (`rmcp`; the
/// TypeScript and Python clients do not take task results yet): a call of a client that declares
/// the extension is answered at once with a task, the call's run; `tasks/get` reads it to its
/// result, `tasks/update` answers the approval it waits for, `tasks/cancel` cancels it, and
/// another principal's task is unknown. Each run's end is awaited on its events
/// (`GET /runs/{id}/events` ends with the run), not by polling.
#[tokio::test]
async fn a_call_is_a_task_the_official_rust_client_reads_answers_and_cancels() {
    use rmcp::{
        model::{
            CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
            ClientConfig, GetTaskParams, Implementation, ProtocolVersion, TaskPayload,
            UpdateTaskParams,
        },
        service::{ClientLifecycleMode, ClientServiceExt},
        transport::{
            StreamableHttpClientTransport,
            streamable_http_client::StreamableHttpClientTransportConfig,
        },
    };
    use serde_json::{Value, json};

    let server = Process::serve_for_alice_and_bob("memory", &[]).await;
    let connect = |token: &'static str| {
        let uri = format!("{}/mcp", server.base);
        async move {
            let bearer = http::HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
            let headers = std::collections::HashMap::from([(http::header::AUTHORIZATION, bearer)]);
            let config = StreamableHttpClientTransportConfig::with_uri(uri).custom_headers(headers);
            let transport = StreamableHttpClientTransport::from_config(config);
            let client = ClientConfig::new(
                ClientCapabilities::builder().enable_tasks().build(),
                Implementation::new("mcp-door-tasks", "1.0.0"),
            );
            // The 2026-07-28 generation: `server/discover`, each request on its own.
            let modern = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            client
                .serve_with_lifecycle(transport, modern)
                .await
                .expect("the client connects")
        }
    };
    let http = reqwest::Client::new();
    let ended = |run: String| {
        let request = http
            .get(format!("{}/runs/{run}/events", server.base))
            .bearer_auth(ALICE);
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let alice = connect(ALICE).await;
    let tool = alice.list_all_tools().await.unwrap()[0].name.clone();
    let call = |prompt: &str| {
        let arguments = json!({ "prompt": prompt }).as_object().cloned().unwrap();
        CallToolRequestParams::new(tool.clone()).with_arguments(arguments)
    };
    let task_of = |response: CallToolResponse| match response {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("a task, not {other:?}"),
    };

    // Answered at once with a task; its result once the run ended.
    let hello = task_of(alice.call_tool_once(call("hello as a task")).await.unwrap());
    ended(hello.clone()).await;
    let read = alice.get_task(GetTaskParams::new(&hello)).await.unwrap();
    let TaskPayload::Completed { result } = read.task.payload else {
        panic!("completed: {:?}", read.task);
    };
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello as a task")
    );
    assert_eq!(
        result["structuredContent"]["runId"],
        Value::from(hello.clone()),
        "the task is the run"
    );

    // It waits for its person: a form per call; the answer goes on with the run.
    let remember = r#"remember {"key": "theme", "value": "dark"}"#;
    let asking = task_of(alice.call_tool_once(call(remember)).await.unwrap());
    ended(asking.clone()).await;
    let read = alice.get_task(GetTaskParams::new(&asking)).await.unwrap();
    let TaskPayload::InputRequired { input_requests } = read.task.payload else {
        panic!("waiting for input: {:?}", read.task);
    };
    assert_eq!(input_requests.len(), 1, "one form per waiting call");
    let form = input_requests.keys().next().unwrap().clone();
    let approve = json!({"action": "accept", "content": {"approved": true}});
    let answers = std::collections::BTreeMap::from([(form, approve)]);
    alice
        .update_task(UpdateTaskParams::new(&asking, answers))
        .await
        .unwrap();
    let went_on = ended(asking.clone()).await;
    assert!(
        went_on.contains("TOOL_CALL_RESULT"),
        "the approved call ran: {went_on}"
    );
    let read = alice.get_task(GetTaskParams::new(&asking)).await.unwrap();
    assert!(
        matches!(read.task.payload, TaskPayload::Completed { .. }),
        "{:?}",
        read.task
    );

    // Cancelled.
    let slow = task_of(
        alice
            .call_tool_once(call("answer slowly please"))
            .await
            .unwrap(),
    );
    alice
        .cancel_task(CancelTaskParams::new(&slow))
        .await
        .unwrap();
    ended(slow.clone()).await;
    let read = alice.get_task(GetTaskParams::new(&slow)).await.unwrap();
    assert!(
        matches!(read.task.payload, TaskPayload::Cancelled),
        "{:?}",
        read.task
    );

    // Another principal's task does not exist for bob.
    let bob = connect(BOB).await;
    let error = bob.get_task(GetTaskParams::new(&hello)).await.unwrap_err();
    assert!(error.to_string().contains("no task"), "{error}");
    let error = bob
        .cancel_task(CancelTaskParams::new(&slow))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("no task"), "{error}");
}
