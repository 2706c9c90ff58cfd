//! Runs that survive their server. `agent-tower serve` on an OpenAI-compatible model server that
//! records every request, with the tools of an MCP server on the official SDK that writes down
//! every call it starts, is killed with SIGKILL at random points of multi-step runs with tool
//! calls and started again on the same store: every run finishes with `RUN_FINISHED` and a
//! complete conversation, no completed step is asked of the model again, no call of a tool that
//! must not run twice runs twice. The built binary, real signals.

use crate::support;
use crate::support::frames;
use crate::support::process;
use crate::support::replay;
use crate::support::stores;
use crate::support::verified;

use std::{
    collections::{HashMap, HashSet},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use frames::frames;
use futures_util::StreamExt;
use process::Process;
use serde_json::{Value, json};
use tokio::{io::AsyncWriteExt, net::TcpListener};

/// Model steps with tool calls before the answer.
const STEPS: usize = 3;
/// How many times the servers are killed, at least.
const KILLS: usize = 20;

/// What the model server was asked: the run (its user message) and how many steps with tool
/// calls the conversation held.
type Asked = Arc<Mutex<Vec<(String, usize)>>>;

/// An OpenAI-compatible model server that answers by the conversation it is sent: a step that
/// says a few words and calls `ledger__record` and `ledger__lookup`, [`STEPS`] times, then an
/// answer; streamed a piece every few milliseconds, as a model generates. With `stall`, the
/// first time it is asked that step it stops in the middle of the first call's arguments, and
/// sends nothing more for a minute (its server is killed meanwhile).
async fn model_server(stall: Option<usize>) -> (String, Asked) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let asked = Asked::default();
    let kept = asked.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let asked = kept.clone();
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut read = tokio::io::BufReader::new(read);
                let request = replay::read_request(&mut read).await;
                let messages = request.body["messages"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let run = messages
                    .iter()
                    .find(|m| m["role"] == "user")
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                let steps = messages
                    .iter()
                    .filter(|m| {
                        m["role"] == "assistant"
                            && m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
                    })
                    .count();
                let first_time = {
                    let mut asked = asked.lock().unwrap();
                    asked.push((run.clone(), steps));
                    asked
                        .iter()
                        .filter(|(r, s)| *r == run && *s == steps)
                        .count()
                        == 1
                };
                let stalls = stall == Some(steps) && first_time;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                if write.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for data in answer(&run, steps) {
                    if stalls && second_half_of_first_call(&data) {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        return;
                    }
                    let frame = format!("data: {data}\n\n");
                    if replay::write_chunk(&mut write, frame.as_bytes())
                        .await
                        .is_err()
                    {
                        return;
                    }
                    // The pace of a model generating.
                    tokio::time::sleep(Duration::from_millis(8)).await;
                }
                let _ = write.write_all(b"0\r\n\r\n").await;
                let _ = write.shutdown().await;
            });
        }
    });
    (base, asked)
}

/// Whether `data` is the chunk that finishes the arguments of a step's first call.
fn second_half_of_first_call(data: &str) -> bool {
    let chunk: Value = serde_json::from_str(data).unwrap_or_default();
    let call = &chunk["choices"][0]["delta"]["tool_calls"][0];
    call["index"] == 0 && call.get("id").is_none()
}

/// The chunks of the answer to `run`'s conversation after `steps` steps with tool calls.
fn answer(run: &str, steps: usize) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if steps >= STEPS {
        for word in ["All ", "steps ", "are ", "done."] {
            chunks.push(chunk(json!({"content": word}), Value::Null));
        }
        chunks.push(chunk(json!({}), json!("stop")));
    } else {
        let step = steps + 1;
        for word in ["Step ", &format!("{step}"), ": ", "noting ", "it ", "down."] {
            chunks.push(chunk(json!({"content": word}), Value::Null));
        }
        for (index, tool) in ["ledger__record", "ledger__lookup"].iter().enumerate() {
            let id = format!("call_{}", uuid::Uuid::now_v7().simple());
            let arguments = json!({"note": format!("{run} step {step}")}).to_string();
            let (first, rest) = arguments.split_at(arguments.len() / 2);
            chunks.push(chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                       "function": {"name": tool, "arguments": first}}]}),
                Value::Null,
            ));
            chunks.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": rest}}]}),
                Value::Null,
            ));
        }
        chunks.push(chunk(json!({}), json!("tool_calls")));
    }
    // What the step used, its own numbers: a run's usage is the sum of its steps'.
    let (input, output) = step_usage(steps);
    chunks.push(
        json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
               "choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output,
                                        "total_tokens": input + output}})
        .to_string(),
    );
    chunks.push("[DONE]".to_owned());
    chunks
}

/// The input and output tokens the step after `steps` steps with tool calls uses.
fn step_usage(steps: usize) -> (u64, u64) {
    (100 + steps as u64, 10 * (steps as u64 + 1))
}

/// A small random number generator, seeded from the clock (or `TAKEOVER_SEED`), the seed
/// printed to reproduce a failure.
struct Random(u64);

impl Random {
    fn new() -> Self {
        let seed = std::env::var("TAKEOVER_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("TAKEOVER_SEED={seed}");
        Self(seed)
    }

    /// A number in `1..=max`.
    fn upto(&mut self, max: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % max as u64) as usize + 1
    }
}

/// What every server of a test shares: the model server, the ledger, the store, its flags.
struct Setup {
    asked: Asked,
    ledger: PathBuf,
    args: Vec<String>,
    /// Its servers send events before they are committed (`--durability eager`).
    eager: bool,
}

impl Setup {
    async fn new(test: &str, store: &str) -> Self {
        Self::stalling(test, store, None).await
    }

    /// A setup whose model stops in the middle of step `stall`'s first call, the first time.
    async fn stalling(test: &str, store: &str, stall: Option<usize>) -> Self {
        let (base, asked) = model_server(stall).await;
        let script = support::node_modules()
            .await
            .join("../mcp-ledger.mjs")
            .display()
            .to_string();
        let ledger = std::env::temp_dir().join(format!("{test}-{}.jsonl", uuid::Uuid::now_v7()));
        std::fs::write(&ledger, "").unwrap();
        let args = [
            "--store",
            store,
            "--model",
            "openai:scripted",
            "--base-url",
            &base,
            "--mcp",
            &format!("ledger=node {script}"),
            "--mcp-env",
            &format!("ledger=LEDGER={}", ledger.display()),
            "--allow",
            "ledger__*",
            "--lease",
            "1s",
            "--on-disconnect",
            "continue",
            // A dollar a million input tokens, two a million output tokens.
            "--price",
            "scripted=1,2",
        ]
        .map(str::to_owned)
        .to_vec();
        Self {
            asked,
            ledger,
            args,
            eager: false,
        }
    }

    /// The same setup, its servers given `args` too.
    fn with(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|arg| (*arg).to_owned()));
        self
    }

    async fn serve(&self) -> Process {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Process::serve(&args).await
    }

    /// The calls the tools started: `(tool, idempotency key, note)`.
    fn ledger(&self) -> Vec<(String, String, String)> {
        std::fs::read_to_string(&self.ledger)
            .unwrap()
            .lines()
            .map(|line| {
                let entry: Value = serde_json::from_str(line).unwrap();
                let text = |key: &str| entry[key].as_str().unwrap_or_default().to_owned();
                (text("tool"), text("key"), text("note"))
            })
            .collect()
    }
}

/// A client's view of one run: the frames it was sent over each connection.
struct Watched {
    run: String,
    thread: String,
    seen: Vec<(String, Value)>,
    kills: usize,
}

impl Watched {
    /// Reads `response`'s frames to the end of the stream; with `kill`, `(after, server)`, the
    /// server is killed once `after` frames arrived (the stream is still read to its last
    /// byte). The server, if it was not killed.
    async fn read(
        &mut self,
        response: reqwest::Response,
        mut kill: Option<(usize, Process)>,
    ) -> Option<Process> {
        let mut body = response.bytes_stream();
        let mut text = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            text.push_str(std::str::from_utf8(&chunk).unwrap());
            let arrived = frames(&text);
            let ended = arrived.iter().any(|(_, e)| is_terminal(e));
            if !ended
                && kill
                    .as_ref()
                    .is_some_and(|(after, _)| arrived.len() >= *after)
            {
                kill.take().unwrap().1.kill().await;
                self.kills += 1;
            }
        }
        self.seen.extend(frames(&text));
        kill.map(|(_, server)| server)
    }

    /// Whether the client saw the run's end.
    fn ended(&self) -> bool {
        self.seen.iter().any(|(_, e)| is_terminal(e))
    }

    /// How many times the client saw the run taken over.
    fn takeovers(&self) -> usize {
        self.seen
            .iter()
            .filter(|(_, e)| e["name"] == "agent_tower.takeover")
            .count()
    }

    /// The rest of the run, from after the last frame seen, on `server`.
    async fn rejoin(&self, server: &Process) -> reqwest::Response {
        let last = self
            .seen
            .last()
            .map_or("0", |(id, _)| id.rsplit(':').next().unwrap());
        let response = server
            .get(&format!("/runs/{}/events?after={last}", self.run))
            .await;
        assert_eq!(response.status(), 200);
        response
    }
}

impl Setup {
    /// Checks every run of `watched` on `server` (see the module docs); how many times they
    /// were taken over.
    async fn check(&self, server: &Process, watched: &[Watched]) -> usize {
        let asked = self.asked.lock().unwrap().clone();
        let ledger = self.ledger();
        let mut records = HashSet::new();
        for (_, key, _) in ledger.iter().filter(|(tool, ..)| tool == "record") {
            assert!(
                records.insert(key.clone()),
                "`record` ran twice for {key}: {ledger:?}"
            );
        }
        let (mut takeovers, mut taken_back) = (0, 0);
        for run in watched {
            let checked = check_run(server, run, &asked, &ledger, self.eager).await;
            takeovers += checked.takeovers;
            taken_back += checked.taken_back;
        }
        assert!(
            self.eager || taken_back == 0,
            "sent only once committed: {taken_back} events taken back"
        );
        // The budget's ledger counted each step once, whichever attempt did it: today's
        // spending is the runs' steps, not the calls made (a cut step is asked again).
        let spent: Value = server.get("/budget").await.json().await.unwrap();
        let per_run: u64 = (0..=STEPS).map(step_usage).map(|(i, o)| i + o).sum();
        assert_eq!(
            spent["today"]["spent"]["tokens"].as_u64(),
            Some(per_run * watched.len() as u64),
            "{spent}, {} model requests",
            asked.len()
        );
        eprintln!(
            "{} runs, {takeovers} taken over, {taken_back} events a client was sent taken back, \
             {} model requests, {} tool calls started",
            watched.len(),
            asked.len(),
            ledger.len()
        );
        if self.eager {
            assert!(
                taken_back > 0,
                "a kill took back events sent ahead of their commit"
            );
        }
        takeovers
    }
}

/// What [`check_run`] found of a run.
struct Checked {
    /// How many times it was taken over.
    takeovers: usize,
    /// How many events its client was sent that the log does not have (sent ahead of a commit
    /// that its server did not live to make).
    taken_back: usize,
}

/// The sequence number in an SSE id, `{run}:{seq}`.
fn seq_of(id: &str) -> u64 {
    id.rsplit(':').next().unwrap().parse().unwrap()
}

/// The roles of `messages`, in order.
fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

/// The roles of a run's complete conversation: the user, each step with its two calls' results,
/// the answer.
fn complete() -> Vec<&'static str> {
    let mut roles = vec!["user"];
    for _ in 0..STEPS {
        roles.extend(["assistant", "tool", "tool"]);
    }
    roles.push("assistant");
    roles
}

/// Checks `run`: one log, what its client was sent a part of it (with `eager`, or events sent
/// ahead of a commit that a kill prevented, at numbers the takeover left unused), one
/// `RUN_FINISHED`, seen once, a complete conversation, each step asked of the model again only
/// for a takeover, each tool run again only for one.
async fn check_run(
    server: &Process,
    run: &Watched,
    asked: &[(String, usize)],
    ledger: &[(String, String, String)],
    eager: bool,
) -> Checked {
    let name = &run.run;
    let log = frames(
        &server
            .get(&format!("/runs/{name}/events?after=0"))
            .await
            .text()
            .await
            .unwrap(),
    );
    // By number: a takeover leaves unused the numbers its run may have sent uncommitted.
    let logged: HashMap<u64, &Value> = log.iter().map(|(id, e)| (seq_of(id), e)).collect();
    let mut taken_back = 0;
    for (id, event) in &run.seen {
        let at = seq_of(id);
        if let Some(logged) = logged.get(&at) {
            assert_eq!(*logged, event, "{name}: what a client was sent is the log");
            continue;
        }
        assert!(eager, "{name}: {id} was sent, and is not in the log");
        // Sent after the last commit of an attempt that was killed: the log goes on after the
        // numbers that attempt could have used, with the takeover.
        let before = log
            .iter()
            .map(|(id, _)| seq_of(id))
            .filter(|s| *s < at)
            .max();
        let mut continued = log.iter().filter(|(id, _)| seq_of(id) > at);
        let (next, first) = continued
            .next()
            .unwrap_or_else(|| panic!("{name}: the log goes on after {id}"));
        assert_eq!(
            seq_of(next),
            before.unwrap_or(0) + agent_tower::runs::SENT_AHEAD + 1,
            "{name}: the takeover after {id} leaves the numbers an attempt may send unused"
        );
        let marker = if before.is_none() {
            // Nothing of the run was committed, its start neither: the takeover opens it.
            assert_eq!(first["type"], "RUN_STARTED", "{name}: {id}");
            (continued.find(|(_, event)| event["type"] != "STATE_SNAPSHOT"))
                .map_or(&Value::Null, |(_, event)| event)
        } else {
            first
        };
        assert_eq!(marker["name"], "agent_tower.takeover", "{name}: {id}");
        assert!(
            event["type"] != "RUN_FINISHED" && event["type"] != "RUN_ERROR",
            "{name}: an end is sent once committed"
        );
        taken_back += 1;
    }
    let ends: Vec<&String> = (run.seen.iter())
        .filter(|(_, e)| is_terminal(e))
        .map(|(id, _)| id)
        .collect();
    assert!(
        ends.len() <= 1 && ends.iter().all(|id| **id == log.last().unwrap().0),
        "{name}: its client saw its end at most once, the log's: {ends:?}"
    );
    let types = verified::one_run(&log, name);
    assert_eq!(
        types.last(),
        Some(&"RUN_FINISHED"),
        "{name}: {types:?}, ending {}",
        log.last().map_or(Value::Null, |(_, end)| end.clone())
    );
    let takeovers = log
        .iter()
        .filter(|(_, e)| e["name"] == "agent_tower.takeover")
        .count();
    // What the run used, and what it cost, is every step's, once, whichever attempt did it.
    let usage = &log.last().unwrap().1["usage"][0];
    let (input, output) = (0..=STEPS)
        .map(step_usage)
        .fold((0, 0), |(i, o), (si, so)| (i + si, o + so));
    assert_eq!(
        (
            usage["inputTokens"].as_u64(),
            usage["outputTokens"].as_u64()
        ),
        (Some(input), Some(output)),
        "{name}, taken over {takeovers} times: {usage}"
    );
    // And what it cost.
    let cost = log
        .iter()
        .rev()
        .find(|(_, e)| e["name"] == "agent_tower.cost")
        .map(|(_, e)| e["value"]["total"]["amount"].as_f64().unwrap())
        .unwrap_or_else(|| panic!("{name}: no cost"));
    let priced = (input + 2 * output) as f64 / 1e6;
    assert!(
        (cost - priced).abs() < 1e-9,
        "{name}: {cost} against {priced}"
    );

    // A complete conversation: each step's calls answered once, then the answer.
    let thread: Value = server
        .get(&format!("/threads/{}", run.thread))
        .await
        .json()
        .await
        .unwrap();
    let messages = thread["messages"].as_array().unwrap();
    assert_eq!(roles(messages), complete(), "{name}");
    let results: HashMap<&str, &str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["toolCallId"].as_str().unwrap(),
                m["content"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    for message in messages.iter().filter(|m| m["role"] == "assistant") {
        for call in message["toolCalls"].as_array().into_iter().flatten() {
            let id = call["id"].as_str().unwrap();
            let ran = ledger.iter().filter(|(_, key, _)| key == id).count();
            let result = results
                .get(id)
                .unwrap_or_else(|| panic!("{name}: {id} answered"));
            if result.contains("interrupted") {
                // Cut off by a kill: told to the model, not run again.
                assert_eq!(call["function"]["name"], "ledger__record", "{name}");
                assert!(ran <= 1, "{name}: {id}");
            } else {
                assert!(ran >= 1, "{name}: {id} ran");
            }
        }
    }
    // Each kill redoes at most the step it cut: no completed step is asked again.
    let requests: Vec<usize> = asked
        .iter()
        .filter(|(r, _)| r == name)
        .map(|(_, s)| *s)
        .collect();
    let distinct: HashSet<usize> = requests.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        STEPS + 1,
        "{name}: every step asked: {requests:?}"
    );
    assert!(
        requests.len() <= STEPS + 1 + takeovers,
        "{name}: {takeovers} takeovers, steps asked {requests:?}"
    );
    let runs: Vec<&str> = ledger
        .iter()
        .filter(|(_, _, note)| note.starts_with(&format!("{name} ")))
        .map(|(_, key, _)| key.as_str())
        .collect();
    let once: HashSet<&str> = runs.iter().copied().collect();
    assert!(
        runs.len() - once.len() <= takeovers,
        "{name}: a tool ran again only for a kill"
    );
    Checked {
        takeovers,
        taken_back,
    }
}

#[tokio::test]
async fn runs_killed_at_random_points_finish_without_paying_twice_for_a_step_or_a_tool() {
    let store = stores::sqlite("takeover-kills");
    killed_at_random(Setup::new("takeover-kills", &store).await, KILLS).await;
}

#[tokio::test]
async fn at_the_relaxed_durability_a_kill_loses_nothing_a_client_was_sent() {
    // A step's events are sent before SQLite flushes them to disk: a killed process leaves them
    // in the database all the same, and the takeover continues after them.
    let store = stores::sqlite("takeover-relaxed");
    let setup = Setup::new("takeover-relaxed", &store).await;
    killed_at_random(setup.with(&["--durability", "relaxed"]), KILLS / 2).await;
}

#[tokio::test]
async fn at_the_eager_durability_a_kill_takes_back_only_what_was_sent_since_the_last_commit() {
    // Events are sent before their commit: a kill takes back what an attempt sent after its
    // last commit (never a run's end), the takeover numbers its events after every number that
    // attempt could have sent, and a client re-joining from the last event it saw is sent the
    // whole continuation; steps and tools are still paid for once.
    let store = stores::sqlite("takeover-eager");
    let mut setup = Setup::new("takeover-eager", &store).await;
    setup.eager = true;
    killed_at_random(setup.with(&["--durability", "eager"]), KILLS / 2).await;
}

/// Runs of `setup`'s server killed at random points until `cuts` kills cut one: each run ends
/// once, what its client was sent is its log, and no step or tool is paid for twice.
async fn killed_at_random(setup: Setup, cuts_wanted: usize) {
    let mut random = Random::new();
    let mut server = setup.serve().await;
    let mut watched = Vec::new();
    let (mut kills, mut cuts) = (0, 0);
    while cuts < cuts_wanted {
        let (mut run, body) = new_run(watched.len() + 1);
        // Killed at a random point of its first attempt, then of its second; then let be.
        let response = server.post(&body).await;
        let mut left = run.read(response, Some((random.upto(60), server))).await;
        for kill_after in [random.upto(40), usize::MAX] {
            let again = match left.take() {
                Some(alive) => alive,
                None => setup.serve().await,
            };
            if run.ended() {
                left = Some(again);
                break;
            }
            let response = run.rejoin(&again).await;
            left = run.read(response, Some((kill_after, again))).await;
        }
        server = match left {
            Some(alive) => alive,
            None => setup.serve().await,
        };
        assert!(run.ended(), "{}: its client saw its end", run.run);
        // A kill cut the run unless its end was logged first.
        kills += run.kills;
        cuts += run.takeovers();
        watched.push(run);
    }

    let takeovers = setup.check(&server, &watched).await;
    assert_eq!(takeovers, cuts, "the client saw every takeover");
    eprintln!("{kills} kills, {cuts} of them cut a run");
    assert!(cuts <= kills, "taken over only when its server was killed");
    server.kill().await;
}

fn is_terminal(event: &Value) -> bool {
    matches!(event["type"].as_str(), Some("RUN_FINISHED" | "RUN_ERROR"))
}

/// A new run of `n` on a new thread, and the body that starts it.
fn new_run(n: usize) -> (Watched, Value) {
    let run = Watched {
        run: format!("run-{n}"),
        thread: format!("t-{}", uuid::Uuid::now_v7()),
        seen: Vec::new(),
        kills: 0,
    };
    let body = json!({
        "threadId": run.thread, "runId": run.run,
        "messages": [{"id": "u1", "role": "user", "content": run.run}],
    });
    (run, body)
}

#[tokio::test]
async fn a_run_whose_instance_dies_is_continued_by_another_where_its_client_follows() {
    let Some(store) = stores::postgres("takeover-two").await else {
        return;
    };
    let setup = Setup::new("takeover-two", &store).await;
    let mut random = Random::new();
    let survivor = setup.serve().await;
    let mut watched = Vec::new();
    for n in 1..=5 {
        // Started on one instance, followed on the other; the first is killed.
        let doomed = setup.serve().await;
        let (mut run, body) = new_run(n);
        drop(doomed.post(&body).await);
        let follow = survivor
            .get(&format!("/runs/{}/events?after=0", run.run))
            .await;
        assert_eq!(follow.status(), 200);
        if let Some(alive) = run.read(follow, Some((random.upto(60), doomed))).await {
            alive.kill().await;
        }
        watched.push(run);
    }
    let kills: usize = watched.iter().map(|run| run.kills).sum();
    let takeovers = setup.check(&survivor, &watched).await;
    assert_eq!(takeovers, kills, "one attempt more per kill");
    survivor.kill().await;
}

#[tokio::test]
async fn a_rolling_restart_under_a_trickle_of_runs_loses_none() {
    let Some(store) = stores::postgres("takeover-rolling").await else {
        return;
    };
    let mut setup = Setup::new("takeover-rolling", &store).await;
    setup
        .args
        .extend(["--drain-timeout".to_owned(), "500ms".to_owned()]);
    let (a, b) = (setup.serve().await, setup.serve().await);
    // The instances a balancer sends runs to, and the runs it sent, one every 100 ms.
    let live = Arc::new(Mutex::new(vec![a.base.clone(), b.base.clone()]));
    let (posted_tx, mut posted) = tokio::sync::mpsc::unbounded_channel::<(Watched, String)>();
    let stop = tokio_util::sync::CancellationToken::new();
    let trickle = tokio::spawn({
        let (live, stop) = (live.clone(), stop.clone());
        async move {
            let client = reqwest::Client::new();
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            for n in 1.. {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let (run, body) = new_run(n);
                let bases = live.lock().unwrap().clone();
                // The first instance that takes it (a draining one refuses connections).
                for base in bases.iter().cycle().skip(n).take(bases.len()) {
                    let sent = client.post(base).json(&body).send().await;
                    if sent.is_ok_and(|r| r.status() == 200) {
                        let _ = posted_tx.send((run, base.clone()));
                        break;
                    }
                }
            }
        }
    });
    let mut watched = Vec::new();
    let mut take = async |count: usize, watched: &mut Vec<(Watched, String)>| {
        for _ in 0..count {
            watched.push(posted.recv().await.expect("the trickle goes on"));
        }
    };
    take(5, &mut watched).await;
    let mut instances = vec![a, b];
    for _ in 0..2 {
        // The oldest instance is stopped as a deploy does, and a new one takes its place.
        let mut old = instances.remove(0);
        old.signal("TERM");
        let status = old
            .exit_within(Duration::from_secs(20))
            .await
            .expect("it exits");
        assert!(status.success(), "{status}");
        let new = setup.serve().await;
        {
            let mut live = live.lock().unwrap();
            live.retain(|base| base != &old.base);
            live.push(new.base.clone());
        }
        instances.push(new);
        take(5, &mut watched).await;
    }
    stop.cancel();
    trickle.await.unwrap();
    while let Ok(run) = posted.try_recv() {
        watched.push(run);
    }
    // Every run posted finishes, wherever it started.
    let server = &instances[0];
    let mut runs = Vec::new();
    for (mut run, _) in watched {
        let response = run.rejoin(server).await;
        run.read(response, None).await;
        runs.push(run);
    }
    let takeovers = setup.check(server, &runs).await;
    assert!(takeovers > 0, "the drained instances handed runs over");
    for instance in instances {
        instance.kill().await;
    }
}

#[tokio::test]
async fn a_call_cut_mid_arguments_is_never_presented_as_complete_and_turns_go_on() {
    let store = stores::sqlite("takeover-cut-call");
    // The second step stops in the middle of its first call's arguments; the server is killed there.
    let setup = Setup::stalling("takeover-cut-call", &store, Some(1)).await;
    let server = setup.serve().await;
    let (mut run, body) = new_run(1);
    let mut stream = server.post(&body).await.bytes_stream();
    let mut text = String::new();
    let cut = loop {
        text.push_str(std::str::from_utf8(&stream.next().await.unwrap().unwrap()).unwrap());
        let seen = frames(&text);
        let second_step = seen
            .iter()
            .enumerate()
            .filter(|(_, (_, e))| e["type"] == "STEP_STARTED")
            .nth(1)
            .map(|(at, _)| at);
        let cut = second_step.and_then(|at| {
            seen[at..]
                .iter()
                .find(|(_, e)| e["type"] == "TOOL_CALL_ARGS")
                .map(|(_, e)| e["toolCallId"].as_str().unwrap().to_owned())
        });
        if let Some(cut) = cut {
            break cut;
        }
    };
    server.kill().await;
    drop(stream);
    run.seen = frames(&text);
    run.kills = 1;

    let server = setup.serve().await;
    let log = frames(
        &server
            .get(&format!("/runs/{}/events?after=0", run.run))
            .await
            .text()
            .await
            .unwrap(),
    );
    let types = verified::one_run(&log, &run.run);
    assert_eq!(types.last(), Some(&"RUN_FINISHED"), "{types:?}");
    // In the log, the cut call ends only after the snapshot that takes it from the client.
    let at = |wanted: &dyn Fn(&Value) -> bool| log.iter().position(|(_, e)| wanted(e)).unwrap();
    let snapshot = at(&|e| e["type"] == "MESSAGES_SNAPSHOT");
    let cut_end = at(&|e| e["type"] == "TOOL_CALL_END" && e["toolCallId"] == cut.as_str());
    assert!(snapshot < cut_end, "{types:?}");
    assert!(
        !log[snapshot].1["messages"].to_string().contains(&cut),
        "the snapshot does not hold the cut call"
    );

    let seen = support::node(
        "agui-follow.mjs",
        &[&server.base, &run.run, &run.thread],
        None,
    )
    .await;
    eprintln!("{seen}");
    // Its last line: what it printed (the lines before: what it warned of, on stderr).
    let seen: Value =
        serde_json::from_str(seen.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    // Every call the official client was told is complete has whole arguments; the cut one is
    // never among them.
    let completed = seen["completed"].as_array().unwrap();
    assert_eq!(completed.len(), 2 * STEPS, "{seen}");
    for call in completed {
        assert_ne!(call["id"], cut.as_str(), "{seen}");
        let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{e}: {seen}"));
        assert!(arguments["note"].is_string(), "{seen}");
    }
    assert!(
        !seen["ended"].as_array().unwrap().contains(&json!(cut)),
        "{seen}"
    );
    // The cut step is done again under its own turn, and the turns go on from there.
    assert_eq!(
        seen["steps"],
        json!(["turn 0", "turn 1", "turn 1", "turn 2", "turn 3"]),
        "{seen}"
    );
    assert_eq!(
        roles(seen["messages"].as_array().unwrap()),
        complete(),
        "{seen}"
    );
    assert!(!seen["messages"].to_string().contains(&cut), "{seen}");
    assert_eq!(setup.check(&server, &[run]).await, 1, "taken over once");
    server.kill().await;
}
