//! ACP over stdio: how many `agent_message_chunk` updates per second `agent-tower acp` delivers
//! to the official TypeScript client, next to an agent written with that SDK's own agent side.
//!
//! ```text
//! cargo bench --bench acp_updates --features cli
//! ```
//!
//! The client is `tests/conformance/acp-updates.mjs` (`@agentclientprotocol/sdk`, pinned in
//! `tests/conformance/package.json`, installed with `npm ci` when missing), run with Node. Each
//! round prompts a new session with W words; the scripted model echoes them, one chunk a word,
//! and the round is timed from the prompt's request to its response, every chunk checked. Reports
//! the median and best round of each agent, the share of a core the client used (near 100 %: the
//! client is the limit, not the agent) and the agent's own CPU time per update.
//!
//! Environment: `ACP_WORDS` (10000), `ACP_ROUNDS` (15; the first five warm Node's JIT up and are
//! not counted).

use std::{path::Path, process::Command};

const AGENT: &str = env!("CARGO_BIN_EXE_agent-tower");
const WARM_UP: usize = 5;

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
    for (name, agent) in [
        (
            "agent-tower acp --store none",
            vec![AGENT, "acp", "--store", "none"],
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
}
