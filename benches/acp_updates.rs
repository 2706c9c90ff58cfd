//! ACP over stdio: how many `agent_message_chunk` updates per second `agent-tower acp` delivers
//! to the official TypeScript client, next to an agent written with that SDK's own agent side.
//!
//! ```text
//! cargo bench --bench acp_updates --features cli,jemalloc
//! ```
//!
//! The client is `tests/conformance/acp-updates.mjs` (`@agentclientprotocol/sdk`, pinned in
//! `tests/conformance/package.json`, installed with `npm ci` when missing), run with Node. Each
//! round prompts a new session with W words; the scripted model echoes them, one chunk a word,
//! and the round is timed from the prompt's request to its response, every chunk checked. Reports
//! the median and best round of each agent, the share of a core the client used (near 100 %: the
//! client is the limit, not the agent) and the agent's own CPU time per update.
//!
//! Then the same prompts to a client that only reads lines (this bench, in Rust, counting the
//! lines up to the prompt's answer): what the agent delivers when the client is not the limit.
//!
//! Environment: `ACP_WORDS` (10000), `ACP_ROUNDS` (15; the first five warm Node's JIT up and are
//! not counted), `ACP_BIN` (another build of `agent-tower`, to compare two side by side).

use std::{
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Command, Stdio},
    time::Instant,
};

const BUILT: &str = env!("CARGO_BIN_EXE_agent-tower");

/// The agent's binary: `ACP_BIN`, else the one built with the bench.
fn agent() -> String {
    std::env::var("ACP_BIN").unwrap_or_else(|_| BUILT.to_owned())
}
const WARM_UP: usize = 5;

/// The agent's CPU time so far (user and system), in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's name, which is in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |at: usize| {
        fields
            .get(at)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are the 14th and 15th fields; here from the 3rd.
    (ticks(11) + ticks(12)) / 100.0
}

/// `rounds` prompts of `words` words to `agent-tower acp --store none`, read as lines only: the
/// median and best updates a second, and the agent's CPU per update.
fn line_reader(words: usize, rounds: usize) {
    let mut agent = Command::new(agent())
        .args(["acp", "--store", "none"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the agent starts");
    let mut stdin = agent.stdin.take().expect("stdin");
    let mut stdout = BufReader::with_capacity(1 << 16, agent.stdout.take().expect("stdout"));
    let mut line = String::new();
    // Sends a request; the lines before its answer, and the answer.
    let mut request = |id: usize, method: &str, params: serde_json::Value| {
        let message =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{message}").expect("the agent reads");
        stdin.flush().expect("the agent reads");
        let mut before = 0;
        loop {
            line.clear();
            assert!(
                stdout.read_line(&mut line).expect("a line") > 0,
                "the agent ended"
            );
            // Updates are notifications: only an answer has an id and no method.
            if !line.contains("\"method\"") {
                let answer: serde_json::Value = serde_json::from_str(&line).expect("JSON");
                if answer["id"] == id {
                    return (before, answer);
                }
            }
            before += 1;
        }
    };
    request(1, "initialize", serde_json::json!({"protocolVersion": 1}));
    let text = vec!["word"; words].join(" ");
    let (mut rates, mut cpu) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let id = 2 + 2 * round;
        let (_, session) = request(
            id,
            "session/new",
            serde_json::json!({"cwd": "/tmp", "mcpServers": []}),
        );
        let session = session["result"]["sessionId"].clone();
        let prompt =
            serde_json::json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        let (cpu_before, started) = (cpu_seconds(agent.id()), Instant::now());
        let (updates, answer) = request(id + 1, "session/prompt", prompt);
        let took = started.elapsed().as_secs_f64();
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        assert!(updates >= words, "{updates} updates for {words} words");
        if round >= WARM_UP {
            rates.push(updates as f64 / took);
            cpu.push((cpu_seconds(agent.id()) - cpu_before) * 1e6 / updates as f64);
        }
    }
    drop(stdin);
    let _ = agent.wait();
    rates.sort_by(f64::total_cmp);
    println!(
        "  {:<30} median {:>7.0} updates/s, best {:>7.0}; agent CPU per update {:.2} µs",
        "agent-tower acp, lines read",
        rates[rates.len() / 2],
        rates[rates.len() - 1],
        cpu.iter().sum::<f64>() / cpu.len() as f64,
    );
}

fn main() {
    let words = std::env::var("ACP_WORDS").unwrap_or_else(|_| "10000".to_owned());
    let rounds: usize = std::env::var("ACP_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(15)
        .max(WARM_UP + 1);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    if !dir.join("node_modules/@agentclientprotocol/sdk").exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .expect("npm is installed");
        assert!(status.success(), "npm ci in {}", dir.display());
    }
    println!(
        "ACP over stdio, {words} words a prompt, {rounds} rounds, the official TypeScript client"
    );
    let ours = agent();
    for (name, agent) in [
        (
            "agent-tower acp --store none",
            vec![ours.as_str(), "acp", "--store", "none"],
        ),
        ("the SDK's own agent (Node)", vec!["--sdk-agent"]),
    ] {
        let out = Command::new("node")
            .arg(dir.join("acp-updates.mjs"))
            .args([words.as_str(), &rounds.to_string()])
            .args(&agent)
            .current_dir(&dir)
            .env("RUST_LOG", "warn")
            .output()
            .expect("node is installed");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let measured: Vec<serde_json::Value> = stdout
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .skip(WARM_UP)
            .collect();
        let number = |round: &serde_json::Value, field: &str| round[field].as_f64();
        let mut rates: Vec<f64> = measured
            .iter()
            .filter_map(|r| number(r, "updates_per_s"))
            .collect();
        rates.sort_by(f64::total_cmp);
        let client_cpu = measured
            .iter()
            .filter_map(|r| number(r, "client_cpu"))
            .sum::<f64>()
            / measured.len() as f64;
        let agent_us: Vec<f64> = measured
            .iter()
            .filter_map(|r| Some(number(r, "agent_cpu_us")? / number(r, "chunks")?))
            .collect();
        let agent = if agent_us.is_empty() {
            String::from("n/a")
        } else {
            format!(
                "{:.2} µs",
                agent_us.iter().sum::<f64>() / agent_us.len() as f64
            )
        };
        println!(
            "  {name:<30} median {:>7.0} updates/s, best {:>7.0}; client at {:>3.0} % of a core; agent CPU per update {agent}",
            rates[rates.len() / 2],
            rates[rates.len() - 1],
            client_cpu * 100.0,
        );
    }
    line_reader(words.parse().expect("ACP_WORDS is a number"), rounds);
}
