//! `agent-tower`: an AG-UI server and an ACP agent built only from the library's layers.

use std::time::Duration;

use agent_tower::{
    BoxError,
    agui::capabilities::Capabilities,
    demo,
    demo::DemoStack,
    map_error::Detail,
    model::{
        BoxModel, IdleTimeoutLayer, RetryPolicy,
        anthropic::{self, Anthropic},
        boxed,
        budget::{BudgetLayer, Ledger, Limit, MemoryLedger},
        cost::{CostLayer, PriceTable, Prices},
        fallback::Fallback,
        gemini::{self, Gemini},
        openai::OpenAi,
        rate_limit::RateLimitLayer,
        scripted::ScriptedModel,
    },
    permission::{Action, Approve, Glob, InterruptApprover, Mode, Policy},
    runs::{PrincipalLimits, Runs},
    server::{AguiServer, BearerTokens, BusyThread, Connections, Scope},
    stack::Stack,
    subagent::AgentTool,
    tool::{
        ToolCall, ToolKind, ToolRouter,
        demo::demo_tools,
        mcp::{McpConnection, McpServer},
    },
    transport::OnDisconnect,
};
use clap::{Parser, Subcommand, ValueEnum};
use tokio_util::sync::CancellationToken;

/// Serves an agent to web frontends (`serve`: AG-UI over HTTP) and to code editors (`acp`: ACP
/// over stdio), with its model, tools, rules and durable runs from flags or a config file.
#[derive(Debug, Parser)]
#[command(version, about, args_override_self = true)]
struct Cli {
    /// A TOML file of settings: `log-format` at the top, the agent's flags (model,
    /// instructions, tools, rules) in `[agent]` for both commands, each command's own in its table
    /// (`[serve]`, `[acp]`), under their long names (`addr = "0.0.0.0:8000"`, `allow-host =
    /// ["agents.example.com"]`, a flag without value as `true`). A flag's environment variable,
    /// when set, wins over the file, and the command line over both; repeated flags add to the
    /// file's.
    #[arg(
        help_heading = "Logs, traces, metrics",
        long,
        global = true,
        env = "AGENT_TOWER_CONFIG",
        value_name = "FILE"
    )]
    config: Option<std::path::PathBuf>,
    /// How logs are written to stderr: `text` for people, `json` (one object per line) for log
    /// collectors.
    #[arg(help_heading = "Logs, traces, metrics", long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Exports the spans of runs, model calls and tool calls (OpenTelemetry GenAI conventions) to
    /// this OTLP/HTTP collector (`http://localhost:4318`; `/v1/traces` is added). Off when absent.
    #[arg(
        help_heading = "Logs, traces, metrics",
        long,
        global = true,
        env = "AGENT_TOWER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    otlp_endpoint: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// How long the responses still open once runs are handed over have to end (each has been told
/// to), when the drain took all its time.
const RESPONSES_END: Duration = Duration::from_secs(1);

/// The log filter when `RUST_LOG` is not set: this program at INFO, its dependencies' chatter
/// (MCP handshakes, SQL statements, HTTP internals) only when it is a warning. rmcp's transport
/// worker reports a lost server as a dump of its Rust types; the MCP connection says the same in
/// a sentence (the server, and why each attempt to start it again failed).
const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn,rmcp::transport::worker=off,sqlx=warn,hyper=warn,\
     reqwest=warn,tower_http=warn,agent_tower::trace=off";

/// The OTLP exporter of the spans, when `--otlp-endpoint` names a collector.
fn otlp(endpoint: &str) -> Result<opentelemetry_sdk::trace::SdkTracerProvider, BoxError> {
    use opentelemetry_otlp::WithExportConfig;
    let endpoint = endpoint.trim_end_matches('/');
    let endpoint = if endpoint.ends_with("/v1/traces") {
        endpoint.to_owned()
    } else {
        format!("{endpoint}/v1/traces")
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(&endpoint)
        .build()
        .map_err(|e| format!("cannot export spans to {endpoint}: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("agent-tower")
        .build();
    Ok(opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve an agent over AG-UI: `POST <path>` streams SSE (or NDJSON, or AG-UI protobuf, when the
    /// client prefers them in `Accept`), `GET /ws` is the
    /// WebSocket transport, `GET /health` answers `{"status":"ok"}`.
    ///
    /// The agent is the model (`--model`), its instructions, the tools it is offered (the demo
    /// tools `get_time`, `add`, `write_document`, `plan` and `remember` with the scripted model,
    /// MCP servers' with `--mcp`) and the rules of their calls (`--allow`, `--ask`, `--deny`): a
    /// call asked about stops the run at an interrupt, answered with `resume[]` or `POST
    /// /interrupts/{id}/resolve`. Logs go to stderr (`--log-format text|json`, filtered
    /// with `RUST_LOG`, default `info`): one line per request (method, path, status, duration),
    /// one per run when it ends (thread, run, events, duration, outcome, code), one per refused
    /// run. SIGTERM or Ctrl-C stops accepting, gives the runs in flight their terminal event and
    /// exits.
    Serve(Box<Serve>),
    /// Serve an agent to a code editor (Zed, any ACP client) over stdio: JSON-RPC on stdin and
    /// stdout, logs on stderr.
    ///
    /// The agent is defined as in `serve` (model, instructions, tools, rules); in the session
    /// mode `ask` (the default) it also asks the editor before any tool that writes
    /// (`write_document` and `remember` of the demo tools). Prompts with the word `slowly` stream for ten
    /// seconds (to try cancelling); `/mode auto|ask|read-only` switches mode.
    Acp(Box<Acp>),
    /// Copy a SQLite store to a new file while servers go on using it (a consistent snapshot of
    /// every committed run). Restore by stopping the servers and putting the copy in the store's
    /// place, without its old `-wal` and `-shm` files. A PostgreSQL store is backed up with
    /// `pg_dump`.
    Backup(Backup),
    /// Delete the runs that ended before a time (their events, their decided interrupts), while
    /// servers go on using the store; threads keep their latest conversation.
    Prune(Prune),
    /// Write a thread to stdout as JSON lines: first the thread (its principal, conversation and
    /// state), then every event of its runs, oldest first, each as `{"runId", "seq", "event"}`.
    Export(Export),
    /// Write the schedules of a store to stdout as JSON lines, by name: each with its spec, its
    /// next occurrence and the run its last one began.
    Schedules(StoreUrl),
    /// Write the webhooks of a store to stdout as JSON lines, the newest first: what each told,
    /// where (without its query), delivered or not, its attempts and last error.
    Webhooks(WebhookList),
}

#[derive(Debug, clap::Args)]
struct WebhookList {
    #[command(flatten)]
    store: StoreUrl,
    /// Only this run's.
    #[arg(long = "run", value_name = "RUN_ID")]
    run: Option<String>,
    /// The most listed.
    #[arg(long, default_value_t = 100)]
    limit: usize,
}

/// The store an operator's command works on.
#[derive(Debug, clap::Args)]
struct StoreUrl {
    /// The store: `sqlite://path` or `postgres://…` (`backup` takes SQLite only).
    #[arg(
        long = "store",
        default_value = "sqlite://agent-tower.db",
        env = "AGENT_TOWER_STORE"
    )]
    url: String,
}

#[derive(Debug, clap::Args)]
struct Backup {
    #[command(flatten)]
    store: StoreUrl,
    /// The new file (it must not exist).
    to: std::path::PathBuf,
}

#[derive(Debug, clap::Args)]
struct Export {
    #[command(flatten)]
    store: StoreUrl,
    /// The thread to export.
    thread: String,
}

#[derive(Debug, clap::Args)]
struct Prune {
    #[command(flatten)]
    store: StoreUrl,
    /// Deletes the runs that ended longer ago than this (e.g. `30d`), as `serve --retain-runs`
    /// does every hour.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    older_than: Duration,
    /// Also deletes the threads idle for longer than this (e.g. `90d`), as `serve
    /// --retain-threads` does.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    threads_older_than: Option<Duration>,
}

#[derive(Debug, clap::Args)]
struct Acp {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    settings: AgentSettings,
    /// The most model turns per prompt.
    #[arg(help_heading = "Model", long, default_value_t = 16)]
    max_turns: u32,
    /// How much of an error the editor sees: `none`, `code`, `message`, `full`.
    #[arg(help_heading = "Model", long, default_value = "message", value_parser = parse_detail)]
    error_detail: Detail,
    /// The mode new sessions start in (default: `ask`; with `--agent`, `auto`: the bridged agent
    /// says what needs asking, and runs its tools itself).
    #[arg(help_heading = "Agent", long, value_enum)]
    mode: Option<ModeChoice>,
    /// Another agent to serve instead of the model and tools: `agui:<url>` bridges an AG-UI
    /// endpoint (LangGraph, CrewAI, Mastra, `agent-tower serve`, …): its text, reasoning and tool
    /// calls become session updates, its interrupts `session/request_permission`. `a2a:<url>`
    /// bridges an A2A agent (its card at `<url>/.well-known/agent-card.json`): each session is
    /// one of its contexts, its questions (`input-required`) the turn's answer. `acp:<ws url>`
    /// fronts an ACP agent served across the network (another `agent-tower serve`'s
    /// `wss://…/acp`): its permission requests are asked here.
    #[arg(help_heading = "Bridged agent", long, value_parser = parse_editor_agent)]
    agent: Option<EditorAgent>,
    /// The environment variable holding the bearer token `--agent` sends (never logged).
    #[arg(help_heading = "Bridged agent", long)]
    agent_token_env: Option<String>,
    /// Where sessions are kept, so that `session/load` finds them after a restart:
    /// `sqlite://path`, `postgres://…`, or `none` (this process only). Default:
    /// `sessions.db` in `$XDG_DATA_HOME/agent-tower` (`~/.local/share/agent-tower`). In a store
    /// given here, sessions belong to a principal (`--principal`): another's are unknown.
    #[arg(help_heading = "Store", long, env = "AGENT_TOWER_ACP_STORE")]
    store: Option<String>,
    /// Whom sessions in a `--store` belong to. Default: the machine's user, `local:{user}`
    /// (`$USER`, else `$LOGNAME`, else `uid-{uid}`). Naming the principal of another way in (a
    /// token's name, `jwt:{sub}@{issuer}`) shares its threads on purpose.
    #[arg(
        help_heading = "Store",
        long,
        env = "AGENT_TOWER_ACP_PRINCIPAL",
        value_name = "NAME"
    )]
    principal: Option<String>,
    /// How long this process may stay silent before its turns count as lost and the next process
    /// on the store (an `acp` or a `serve`) continues them (e.g. `30s`).
    #[arg(help_heading = "Store", long, default_value = "30s", value_parser = parse_lease, value_name = "DURATION")]
    lease: Duration,
    #[command(flatten)]
    durability: DurabilityArg,
}

/// How far a store's commits go (`serve` and `acp`).
#[derive(Debug, clap::Args)]
struct DurabilityArg {
    /// How far a commit of the `--store` goes before its events are sent on: `full` (on disk:
    /// no crash loses what a client was sent), `relaxed` (in the database, flushed to disk
    /// within a second on SQLite, by the server within 600 ms on PostgreSQL: a crash of this
    /// process loses nothing, a crash of the machine may take back that window's steps, which
    /// runs then take again) or `eager` (sent first, committed as `relaxed` within 20 ms: a
    /// crash of this process takes back what a run sent since its last commit, and the run,
    /// continued, sends its cut step again). `relaxed` sends each token without waiting for a
    /// disk, `eager` without waiting for the database.
    #[arg(
        help_heading = "Store",
        long,
        value_enum,
        default_value = "full",
        env = "AGENT_TOWER_DURABILITY"
    )]
    durability: DurabilityChoice,
}

/// `--durability`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum DurabilityChoice {
    /// On disk before a client is sent it.
    Full,
    /// In the database before a client is sent it, on disk within a short window.
    Relaxed,
    /// Sent, then in the database within 20 ms, then on disk as `relaxed`.
    Eager,
}

impl DurabilityArg {
    fn level(&self) -> agent_tower::store::Durability {
        match self.durability {
            DurabilityChoice::Full => agent_tower::store::Durability::Full,
            DurabilityChoice::Relaxed => agent_tower::store::Durability::Relaxed,
            DurabilityChoice::Eager => agent_tower::store::Durability::Eager,
        }
    }

    /// Says that `--durability relaxed` or `eager` does nothing without a store.
    fn ignored(&self) {
        let level = match self.durability {
            DurabilityChoice::Full => return,
            DurabilityChoice::Relaxed => "relaxed",
            DurabilityChoice::Eager => "eager",
        };
        tracing::warn!("--durability {level} is ignored: nothing is kept on disk without a store");
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeChoice {
    /// Ask before tools that write.
    Ask,
    /// Run tools as the policy allows.
    Auto,
    /// Refuse tools that write.
    ReadOnly,
}

#[derive(Debug, clap::Args)]
struct Serve {
    /// The address to listen on: `host:port`, the host a name (`localhost`) or an IP address
    /// (`0.0.0.0`, `[::1]`).
    #[arg(help_heading = "Serving", long, default_value = "127.0.0.1:8000", env = "AGENT_TOWER_ADDR", value_parser = parse_addr)]
    addr: String,
    /// The path runs are posted to (starts with `/`).
    #[arg(help_heading = "Serving", long, default_value = "/", value_parser = parse_path)]
    path: String,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    settings: AgentSettings,
    /// Silence before a `: ping` keep-alive comment (e.g. `15s`).
    #[arg(help_heading = "Serving", long, default_value = "15s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    keep_alive: Duration,
    /// The largest accepted request body (`1MiB`, `512KiB`, or bytes).
    #[arg(help_heading = "Limits", long, default_value = "1MiB", value_parser = parse_bytes::<usize>, value_name = "BYTES")]
    body_limit: usize,
    /// What happens to a run whose client disconnects: cancel it once nobody has re-joined it
    /// for the re-join grace, or let it continue.
    #[arg(help_heading = "Serving", long, value_enum, default_value_t = DisconnectChoice::Cancel)]
    on_disconnect: DisconnectChoice,
    /// How long a run whose client disconnected waits to be re-joined (a reloaded page) before
    /// it is cancelled, when that client said it re-joins (`Prefer: rejoin`; a plain client's
    /// run is cancelled at once), at most 1h; 0s cancels at once.
    #[arg(help_heading = "Serving", long, default_value = "30s", value_parser = parse_rejoin_grace, value_name = "DURATION")]
    rejoin_grace: Duration,
    /// What happens to a second run on a thread that already has an active one.
    #[arg(help_heading = "Serving", long, value_enum, default_value_t = BusyChoice::Reject)]
    busy_thread: BusyChoice,
    /// An origin browsers may call from (CORS); repeat for several. Off when absent.
    #[arg(help_heading = "Security", long = "allow-origin")]
    allow_origins: Vec<String>,
    /// Another agent to serve instead of the model and tools: `acp:<command> [args…]` starts an
    /// ACP agent (Claude Code's `claude-agent-acp`, `codex-acp`, `gemini --experimental-acp`,
    /// `agent-tower acp`, …) and bridges it: its messages, thoughts and tool calls become AG-UI
    /// events, its permission requests go through this server's policy and interrupts.
    /// `acp:<ws url>` bridges an ACP agent served there (another `agent-tower serve`'s `/acp`).
    /// `a2a:<url>` bridges an A2A agent (its card at `<url>/.well-known/agent-card.json`): each
    /// thread is one of its contexts, its questions (`input-required`) the run's answer.
    #[arg(help_heading = "Bridged agent", long, value_parser = parse_agent)]
    agent: Option<WebAgent>,
    /// The environment variable holding the bearer token `--agent a2a:` or `acp:<ws url>` sends
    /// (never logged).
    #[arg(help_heading = "Bridged agent", long)]
    agent_token_env: Option<String>,
    /// How long the `--agent` has to answer ACP `initialize` once started (at most 10m); past
    /// it the server does not start.
    #[arg(help_heading = "Bridged agent", long, default_value = "30s", value_parser = parse_agent_start_timeout, value_name = "DURATION")]
    agent_start_timeout: Duration,
    /// A variable of the `--agent`'s environment: `NAME` passes this process's value on (its
    /// provider key, say), `NAME=VALUE` sets one. Repeat for several. Besides these the agent
    /// gets only PATH, HOME, USER, SHELL, the locale, TERM, TZ, TMPDIR and the XDG directories:
    /// never this server's tokens or keys unless named.
    #[arg(help_heading = "Bridged agent", long = "agent-env", value_parser = parse_env_setting)]
    agent_env: Vec<(String, Option<String>)>,
    /// The authentication method the `--agent` is authenticated with once started, one its ACP
    /// `initialize` answer lists (codex-acp: `openai-api-key`). An agent that requires one
    /// refuses runs without it (`auth_required`).
    #[arg(help_heading = "Bridged agent", long)]
    agent_auth: Option<String>,
    /// Does not serve the development page (a chat with this server at `GET /` in a browser).
    #[arg(help_heading = "Serving", long)]
    no_ui: bool,
    /// Does not offer the agent to MCP clients at `/mcp` (one tool: its calls are runs of the
    /// caller, with the same tokens, limits and approvals as the web's).
    #[arg(help_heading = "Serving", long)]
    no_mcp: bool,
    /// Does not offer the agent to other agents over A2A (the card at
    /// `/.well-known/agent-card.json`, the bindings at `/a2a`: each task a run of the caller).
    #[arg(help_heading = "Serving", long)]
    no_a2a: bool,
    /// Does not let editors reach the agent over ACP at `/acp` (a WebSocket, or Streamable HTTP:
    /// each session a thread of the caller, each prompt a run, with the same tokens, limits and
    /// approvals as the web's).
    #[arg(help_heading = "Serving", long)]
    no_acp: bool,
    /// A host name (as in `Host`, without port) the server answers to besides the loopback
    /// names; repeat for several. Bound to a non-loopback address without any, every name is
    /// answered (a warning says so).
    #[arg(help_heading = "Security", long = "allow-host")]
    allow_hosts: Vec<String>,
    /// The environment variable holding the bearer tokens clients must send (`Authorization:
    /// Bearer …`) on every route but `/health` and `/ready`; several separated by commas or
    /// spaces, each of at least 16 characters, each `name:token` to name the principal it
    /// authenticates (else it is named `token-` and 8 hex digits of its digest). Each principal
    /// sees only its own threads and runs. Off when absent, with --operator-token-env,
    /// --front-token-env and --token-file: then everyone shares one space.
    #[arg(help_heading = "Security", long)]
    auth_token_env: Option<String>,
    /// The environment variable holding the operator tokens (as --auth-token-env): they see every
    /// thread and run, read `/interrupts` and answer interrupts out of band.
    #[arg(help_heading = "Security", long)]
    operator_token_env: Option<String>,
    /// The environment variable holding the tokens of trusted fronts (as --auth-token-env): a
    /// backend that authenticated its users names the one it acts for in the
    /// `X-Agent-Tower-User` header of each request (its principal: `{front}/{user}`).
    #[arg(help_heading = "Security", long)]
    front_token_env: Option<String>,
    /// A file of tokens, one a line: `run NAME TOKEN`, `operator NAME TOKEN` or `front NAME
    /// TOKEN` (blank lines and `#` comments ignored); readable by its owner only.
    #[arg(help_heading = "Security", long)]
    token_file: Option<std::path::PathBuf>,
    /// Accepts JSON Web Tokens signed by the keys at this JWKS (an `https://` URL, or a file):
    /// its principal is `jwt:{sub}@{issuer}` (the `sub` claim, or --jwt-claim), a user. Needs
    /// --jwt-issuer and --jwt-audience.
    #[arg(help_heading = "Security", long, requires_all = ["jwt_issuer", "jwt_audience"])]
    jwt_jwks: Option<String>,
    /// The issuer (`iss`) the JSON Web Tokens must come from.
    #[arg(help_heading = "Security", long, requires = "jwt_jwks")]
    jwt_issuer: Option<String>,
    /// The audience (`aud`) the JSON Web Tokens must be for.
    #[arg(help_heading = "Security", long, requires = "jwt_jwks")]
    jwt_audience: Option<String>,
    /// The claim that names a JSON Web Token's principal.
    #[arg(help_heading = "Security", long, default_value = "sub")]
    jwt_claim: String,
    /// The algorithms a JSON Web Token may be signed with, comma-separated.
    #[arg(
        help_heading = "Security",
        long,
        value_delimiter = ',',
        default_value = "RS256,ES256,EdDSA"
    )]
    jwt_algorithms: Vec<String>,
    /// How long a client may take to send a request head; also how long an idle keep-alive
    /// connection stays open.
    #[arg(help_heading = "Limits", long, default_value = "10s", value_parser = parse_timeout, value_name = "DURATION")]
    header_timeout: Duration,
    /// How long a client may take to send a whole request body (`408` past it).
    #[arg(help_heading = "Limits", long, default_value = "30s", value_parser = parse_timeout, value_name = "DURATION")]
    body_timeout: Duration,
    /// How long a write to a client may stay blocked (it stopped reading) before its
    /// connection is closed.
    #[arg(help_heading = "Limits", long, default_value = "30s", value_parser = parse_timeout, value_name = "DURATION")]
    write_timeout: Duration,
    /// The most connections open at once; more wait in the listen backlog.
    #[arg(help_heading = "Limits", long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// The most messages one request may carry (`422` past it).
    #[arg(help_heading = "Limits", long, default_value_t = 1_000)]
    max_messages: usize,
    /// The most runs live at once; one more gets `503 overloaded` with `Retry-After`.
    #[arg(help_heading = "Limits", long, default_value_t = 10_000)]
    max_live_runs: usize,
    /// The most events one run may log; past it the run ends with `run_too_large`.
    #[arg(help_heading = "Limits", long, default_value_t = 500_000)]
    max_run_events: u64,
    /// The most bytes of events (their JSON) one run may log; past it the run ends with
    /// `run_too_large`.
    #[arg(help_heading = "Limits", long, default_value = "64MiB", value_parser = parse_bytes::<u64>, value_name = "BYTES")]
    max_run_bytes: u64,
    /// The most runs one principal (a token's, a front's user) may have live at once; one more
    /// gets `429 too_many_live_runs`. Operators are not limited. Unlimited when absent.
    #[arg(help_heading = "Limits", long)]
    principal_live_runs: Option<usize>,
    /// The most runs one principal may begin a minute; more get `429 rate_limited` with
    /// `Retry-After`. Unlimited when absent.
    #[arg(help_heading = "Limits", long)]
    principal_runs_per_minute: Option<u32>,
    /// The most bytes of events one principal's runs may log a day (UTC): a run past it ends
    /// with `quota_exceeded`, new ones get `429`. Unlimited when absent.
    #[arg(help_heading = "Limits", long, value_parser = parse_bytes::<u64>, value_name = "BYTES")]
    principal_log_bytes_per_day: Option<u64>,
    /// Takes the principal FROM, named by one way in, as TO, named by another, on purpose
    /// (`jwt:alice@https://id.example/=alice`: alice's JWT sees the threads of her token); repeat
    /// for several. Without it, no two ways in name the same principal.
    #[arg(help_heading = "Security", long = "principal-alias", value_name = "FROM=TO", value_parser = parse_alias)]
    principal_aliases: Vec<(String, String)>,
    /// A group of principals the metrics count runs and tokens by, as `GROUP=NAME,NAME…`;
    /// repeat for several. Principals in none count under `other`.
    #[arg(help_heading = "Logs, traces, metrics", long = "metrics-group", value_parser = parse_metrics_group)]
    metrics_groups: Vec<(String, Vec<String>)>,

    /// The most model turns per run.
    #[arg(help_heading = "Model", long, default_value_t = 16)]
    max_turns: u32,
    /// How much of an error clients see in `RUN_ERROR`: `none` (a generic sentence), `code`
    /// (the error code and a generic sentence), `message` (the code and the error's message),
    /// `full` (the message and every cause).
    #[arg(help_heading = "Model", long, default_value = "message", value_parser = parse_detail)]
    error_detail: Detail,
    /// Where runs, their events and pending interrupts are kept: `sqlite://path` (created if
    /// missing), `postgres://…` (several instances may share it), or `memory` (also `none`: this
    /// process only, bounded by `--memory-runs` and `--memory-bytes`). Interrupts, re-joins and
    /// replays work with every store.
    #[arg(
        help_heading = "Store",
        long,
        default_value = "sqlite://agent-tower.db",
        env = "AGENT_TOWER_STORE"
    )]
    store: String,
    #[command(flatten)]
    durability: DurabilityArg,
    /// With `--store memory`: the most ended runs kept, the oldest forgotten first.
    #[arg(
        help_heading = "Store",
        long,
        default_value_t = 10_000,
        value_name = "RUNS"
    )]
    memory_runs: usize,
    /// With `--store memory`: the most bytes of events kept (ended runs are forgotten to make
    /// room; a live run past it stops with `run_too_large`).
    #[arg(help_heading = "Store", long, default_value = "256MiB", value_parser = parse_bytes::<usize>, value_name = "BYTES")]
    memory_bytes: usize,
    /// With a SQLite `--store`: the free space its disk must keep for `/ready` to answer `200`
    /// (below it, `503` before the disk is full and writes fail).
    #[arg(help_heading = "Store", long, default_value = "64MiB", value_parser = parse_bytes::<u64>, value_name = "BYTES")]
    store_min_free: u64,
    /// How long runs are kept once they ended (e.g. `30d`): older ones (their events, their
    /// decided interrupts) are deleted every hour, a few at a time. Threads keep their latest
    /// conversation; runs waiting for a decision are kept. Unset: every run is kept.
    #[arg(help_heading = "Store", long, value_parser = humantime::parse_duration, env = "AGENT_TOWER_RETAIN_RUNS", value_name = "DURATION")]
    retain_runs: Option<Duration>,
    /// How long threads are kept once idle (e.g. `90d`): older ones (their conversation, state
    /// and what is left of their runs) are deleted every hour, unless a run of theirs runs or
    /// waits for a decision. Unset: every thread is kept.
    #[arg(
        help_heading = "Store",
        long,
        value_parser = humantime::parse_duration,
        env = "AGENT_TOWER_RETAIN_THREADS",
        value_name = "DURATION"
    )]
    retain_threads: Option<Duration>,
    /// How long a run's owner may stay silent before its run counts as lost (e.g. `30s`).
    #[arg(help_heading = "Store", long, default_value = "30s", value_parser = parse_lease, value_name = "DURATION")]
    lease: Duration,
    /// After SIGTERM or Ctrl-C, how long runs in flight may go on, and open responses take to
    /// end, before the process exits. On a store, runs still going then are handed over:
    /// another instance (or this one, restarted) continues them. In memory, each run in flight
    /// gets its terminal event at once.
    #[arg(help_heading = "Serving", long, default_value = "10s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    drain_timeout: Duration,
    /// How long an interrupt (a call of `remember` waiting for approval) can be resumed.
    #[arg(help_heading = "Agent", long, default_value = "24h", value_parser = parse_interrupt_ttl, value_name = "DURATION")]
    interrupt_ttl: Duration,
    #[command(flatten)]
    webhooks: WebhookArgs,
    /// A schedule, as `NAME={JSON}`: `{"cron": "0 9 * * MON-FRI", "timeZone": "Europe/Paris",
    /// "prompt": "…"}` (or `"at"`, an RFC 3339 instant, for once; `"threadId"` to continue one
    /// thread; `"principal"`; `"missed"`: `skip` or `makeUp`; `"grace"`, `1m` by default).
    /// Repeat for several. Each occurrence is begun once by the instances on the store. In the
    /// config file, a table `[serve.schedule.NAME]`.
    #[arg(help_heading = "Schedules", long = "schedule", value_name = NAMED_JSON, value_parser = parse_schedule)]
    schedules: Vec<agent_tower::schedule::Schedule>,
}

/// The value of a flag of named JSON settings (`--schedule`, `--subagent`), which the config file
/// also takes as a table of tables.
const NAMED_JSON: &str = "NAME={JSON}";

/// A `--schedule`: `NAME={JSON}`.
fn parse_schedule(text: &str) -> Result<agent_tower::schedule::Schedule, String> {
    let (name, spec) = text.split_once('=').ok_or("a schedule is `NAME={JSON}`")?;
    let spec = serde_json::from_str(spec).map_err(|e| format!("schedule `{name}`: {e}"))?;
    agent_tower::schedule::Schedule::new(name, spec).map_err(|e| e.to_string())
}

/// Where runs' ends are told (`serve`).
#[derive(Debug, clap::Args)]
struct WebhookArgs {
    /// A URL told of every run's end and of every run that waits for a person (`POST`, signed
    /// after the Standard Webhooks specification with the secret of `--webhook-secret-env`,
    /// at least once); repeat for several.
    #[arg(help_heading = "Webhooks", long = "webhook", value_name = "URL", value_parser = parse_webhook_url)]
    webhook_urls: Vec<agent_tower::webhook::Url>,
    /// A prefix under which a run may name its own webhook (`forwardedProps.webhook.url`):
    /// the same scheme, host and port, a path that begins with the prefix's; repeat for
    /// several. A run naming another is refused. None when absent.
    #[arg(help_heading = "Webhooks", long = "webhook-allow", value_name = "URL", value_parser = parse_webhook_url)]
    webhook_allowed: Vec<agent_tower::webhook::Url>,
    /// The environment variable holding the secret webhooks are signed with (`whsec_` and
    /// base64, as the Standard Webhooks libraries take it; never logged).
    #[arg(
        help_heading = "Webhooks",
        long = "webhook-secret-env",
        default_value = "AGENT_TOWER_WEBHOOK_SECRET",
        value_name = "NAME"
    )]
    webhook_secret_env: String,
    /// The waits after each failed attempt, comma-separated: one attempt more than waits, then
    /// the webhook is given up.
    #[arg(help_heading = "Webhooks", long = "webhook-retries", value_delimiter = ',', default_value = "5s,5m,30m,2h,5h,10h,10h", value_parser = humantime::parse_duration, value_name = "DURATIONS")]
    webhook_retries: Vec<Duration>,
    /// How long a webhook's receiver has to answer an attempt. A webhook an instance was
    /// sending when it died is sent again (by any instance on the store) three times as long
    /// after that attempt began.
    #[arg(help_heading = "Webhooks", long = "webhook-timeout", default_value = "10s", value_parser = parse_timeout, value_name = "DURATION")]
    webhook_timeout: Duration,
}

impl WebhookArgs {
    /// What the engine tells, and who delivers it; `None` when no webhook is set.
    fn webhooks(
        &self,
    ) -> Result<Option<(agent_tower::webhook::Webhooks, agent_tower::webhook::Secret)>, BoxError>
    {
        if self.webhook_urls.is_empty() && self.webhook_allowed.is_empty() {
            return Ok(None);
        }
        let secret = std::env::var(&self.webhook_secret_env).map_err(|_| {
            format!(
                "--webhook and --webhook-allow sign with the secret in ${}, which is not set \
                 (`whsec_` and base64, as the Standard Webhooks libraries take it)",
                self.webhook_secret_env
            )
        })?;
        let secret = secret
            .parse()
            .map_err(|error| format!("${}: {error}", self.webhook_secret_env))?;
        let webhooks = self
            .webhook_urls
            .iter()
            .fold(agent_tower::webhook::Webhooks::new(), |webhooks, url| {
                webhooks.url(url.clone())
            });
        let webhooks = self
            .webhook_allowed
            .iter()
            .fold(webhooks, |webhooks, prefix| webhooks.allow(prefix.clone()));
        Ok(Some((webhooks, secret)))
    }
}

/// A webhook's URL (or prefix): `http://` or `https://` with a host.
fn parse_webhook_url(text: &str) -> Result<agent_tower::webhook::Url, String> {
    let url: agent_tower::webhook::Url = text.parse().map_err(|e| format!("`{text}`: {e}"))?;
    agent_tower::webhook::check_url(&url).map_err(|e| e.to_string())?;
    Ok(url)
}

/// What the agent is besides its model: its instructions, the tools it is offered and the rules
/// of their calls. The same in `serve` and `acp` (and in the config file's `[agent]` table).
#[derive(Debug, clap::Args)]
struct AgentSettings {
    /// The agent's name, as clients are told it: the tool MCP clients call (`/mcp`), `GET
    /// /capabilities`, an editor's agent info. Letters, digits, `_`, `-` and `.`, at most 128;
    /// `agent-tower` when absent.
    #[arg(help_heading = "Agent", long, value_parser = parse_agent_name)]
    name: Option<String>,
    /// What the agent does, in a sentence or two, as clients are told it (the MCP tool's
    /// description, `GET /capabilities`).
    #[arg(help_heading = "Agent", long)]
    description: Option<String>,
    /// The agent's instructions (its system prompt), given to the model first in every turn.
    #[arg(help_heading = "Agent", long, conflicts_with = "instructions_file")]
    instructions: Option<String>,
    /// A file holding the agent's instructions.
    #[arg(help_heading = "Agent", long, value_name = "FILE")]
    instructions_file: Option<std::path::PathBuf>,
    /// Offers the demo tools (`get_time`, `add`, `write_document`, `plan`, `remember`) with any
    /// model; the scripted model always has them.
    #[arg(help_heading = "Agent", long)]
    demo_tools: bool,
    /// Offers only the tools whose name matches this glob (`*` any run of characters, `?` one):
    /// `files__read_*`, `get_time`, a `--subagent`'s name. Repeat for several; every tool and
    /// sub-agent when absent. A glob that matches no tool is refused at start.
    #[arg(help_heading = "Agent", long = "tool", value_name = "GLOB")]
    tools: Vec<String>,
    /// Tools whose calls run without asking, by glob. Repeat for several.
    #[arg(help_heading = "Agent", long, value_name = "GLOB")]
    allow: Vec<String>,
    /// Tools whose calls wait for a person (an interrupt in `serve`, a permission request in an
    /// editor), by glob. Repeat for several.
    #[arg(help_heading = "Agent", long, value_name = "GLOB")]
    ask: Vec<String>,
    /// Tools whose calls are refused (the model is told), by glob. Repeat for several.
    ///
    /// The rules: `deny` first, then `ask`, then `allow`; a tool none of them names is asked
    /// about if it comes from an MCP server that does not mark it read-only (and for the demo
    /// tools, `remember`), and runs otherwise. In `acp`, the session mode comes on top: `ask`
    /// asks before any tool that writes, `read-only` refuses them. A rule that names no tool is
    /// refused at start (in `acp` it is kept with a warning, for the tools an editor's MCP
    /// servers lend a session).
    #[arg(help_heading = "Agent", long, value_name = "GLOB")]
    deny: Vec<String>,
    /// A sub-agent the agent may hand a task to, offered to its model as a tool of that name:
    /// `NAME={"description": …, "instructions": …, "tools": [GLOB, …]}` (`instructions-file`
    /// instead of `instructions` reads them from a file). It runs on the same model, with the
    /// tools its globs select among the agent's (none when absent), under the same rules; it
    /// sees only the task it is given, and clients see its run inside the agent's. In the config
    /// file, a table `[agent.subagent.NAME]`. Repeat for several.
    #[arg(help_heading = "Agent", long = "subagent", value_name = NAMED_JSON, value_parser = parse_subagent)]
    subagents: Vec<Subagent>,
}

impl AgentSettings {
    /// The instructions, read from their file if given as one.
    fn instructions(&self) -> Result<Option<String>, BoxError> {
        instructions(
            self.instructions.as_ref(),
            self.instructions_file.as_deref(),
        )
        .map_err(|e| format!("--instructions-file {e}").into())
    }

    /// Refuses what a bridged agent (`--agent`) cannot take: it has its own instructions and
    /// tools. Its calls still follow the rules.
    fn check_bridged(&self) -> Result<(), BoxError> {
        let own = [
            ("--instructions", self.instructions.is_some()),
            ("--instructions-file", self.instructions_file.is_some()),
            ("--demo-tools", self.demo_tools),
            ("--tool", !self.tools.is_empty()),
            ("--subagent", !self.subagents.is_empty()),
        ];
        match own.iter().find(|(_, given)| *given) {
            Some((flag, _)) => Err(format!(
                "{flag}: a bridged agent (--agent) has its own instructions and tools"
            )
            .into()),
            None => Ok(()),
        }
    }

    /// The tools `--tool` selects among `tools` (the agent's own and its sub-agents).
    fn offered(&self, tools: ToolRouter) -> Result<ToolRouter, BoxError> {
        if self.tools.is_empty() {
            return Ok(tools);
        }
        select("--tool", &self.tools, tools)
    }

    /// Refuses a rule (`--deny`, `--ask`, `--allow`) that names none of the tools `names`: a
    /// typo would leave the tool it meant on its default. Where an editor's MCP servers may lend
    /// a session more tools (`lent`), such a rule may be for one of theirs: it is kept, with a
    /// warning.
    fn check_rules(&self, names: &[String], lent: bool) -> Result<(), BoxError> {
        let rules = [
            ("--deny", &self.deny),
            ("--ask", &self.ask),
            ("--allow", &self.allow),
        ];
        for (flag, patterns) in rules {
            match unmatched(flag, patterns, names) {
                Err(refused) if lent => {
                    tracing::warn!("{refused} (kept for the tools an editor's MCP servers lend)");
                }
                checked => checked?,
            }
        }
        Ok(())
    }

    /// The rules given, most cautious first, then `defaults`.
    fn policy(&self, defaults: &[(String, Action)]) -> Policy {
        let given = [
            (&self.deny, Action::Deny),
            (&self.ask, Action::Ask),
            (&self.allow, Action::Allow),
        ];
        let mut policy = Policy::new();
        for (patterns, action) in given {
            for pattern in patterns {
                policy = policy.rule(pattern, action);
            }
        }
        for (name, action) in defaults {
            policy = policy.rule(name, *action);
        }
        policy
    }
}

/// The tools of `tools` that one of `globs` matches, refusing a glob that matches none (`flag`
/// names where it was given).
fn select(flag: &str, globs: &[String], tools: ToolRouter) -> Result<ToolRouter, BoxError> {
    let names: Vec<String> = tools.specs().into_iter().map(|spec| spec.name).collect();
    unmatched(flag, globs, &names)?;
    let globs: Vec<Glob> = globs.iter().map(Glob::new).collect();
    Ok(tools.retain(|spec| globs.iter().any(|glob| glob.matches(&spec.name))))
}

/// A sub-agent of the command's agent (`--subagent NAME={JSON}`).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Subagent {
    /// The tool's name, given before `=`.
    #[serde(skip)]
    name: String,
    /// What it is for, as the agent's model is told (the tool's description).
    description: String,
    /// Its instructions.
    instructions: Option<String>,
    /// A file holding its instructions.
    #[serde(rename = "instructions-file")]
    instructions_file: Option<std::path::PathBuf>,
    /// Globs selecting its tools among the agent's.
    #[serde(default)]
    tools: Vec<String>,
}

impl Subagent {
    /// Its instructions, read from their file if given as one.
    fn instructions(&self) -> Result<Option<String>, BoxError> {
        instructions(
            self.instructions.as_ref(),
            self.instructions_file.as_deref(),
        )
        .map_err(|e| format!("--subagent {}: {e}", self.name).into())
    }
}

/// Instructions given as `text`, else read from `file`; a file that cannot be read is named with
/// the cause.
fn instructions(
    text: Option<&String>,
    file: Option<&std::path::Path>,
) -> Result<Option<String>, String> {
    match (text, file) {
        (Some(text), _) => Ok(Some(text.clone())),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        (None, None) => Ok(None),
    }
}

/// A `--subagent`: `NAME={JSON}`, its name one every model takes as a tool's.
fn parse_subagent(text: &str) -> Result<Subagent, String> {
    let (name, spec) = text
        .split_once('=')
        .ok_or(r#"a sub-agent is `NAME={"description": …}`"#)?;
    if !is_name(name, 64, b"_-") {
        return Err(format!(
            "sub-agent `{name}`: a name is 1 to 64 letters, digits, `_` or `-` (models call it as \
             a tool)"
        ));
    }
    let mut subagent: Subagent =
        serde_json::from_str(spec).map_err(|e| format!("sub-agent `{name}`: {e}"))?;
    if subagent.description.trim().is_empty() {
        return Err(format!(
            "sub-agent `{name}`: its description tells the agent's model what it is for; it is empty"
        ));
    }
    if subagent.instructions.is_some() && subagent.instructions_file.is_some() {
        return Err(format!(
            "sub-agent `{name}`: `instructions` or `instructions-file`, not both"
        ));
    }
    subagent.name = name.to_owned();
    Ok(subagent)
}

/// Refuses the first glob of `flag` among `patterns` that matches none of `names`, naming them.
fn unmatched(flag: &str, patterns: &[String], names: &[String]) -> Result<(), BoxError> {
    let matches_none = |pattern: &&String| {
        let glob = Glob::new(pattern.as_str());
        !names.iter().any(|name| glob.matches(name))
    };
    match patterns.iter().find(matches_none) {
        Some(pattern) if names.is_empty() => {
            Err(format!("{flag} {pattern}: no tool matches; there are none").into())
        }
        Some(pattern) => Err(format!(
            "{flag} {pattern}: no tool matches; the tools are {}",
            names.join(", ")
        )
        .into()),
        None => Ok(()),
    }
}

/// The model, and how calls to it are bounded and retried.
#[derive(Debug, clap::Args)]
struct ModelArgs {
    /// `scripted` (deterministic and offline: it echoes, calls the tools it is asked to call,
    /// reasons when asked to "think", and streams N filler tokens when a run's `forwardedProps`
    /// is `{"scripted": {"tokens": N}}`), `openai:<model>` for any OpenAI-compatible server at
    /// `--base-url` (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter),
    /// `anthropic:<model>` for Anthropic's Messages API, or `gemini:<model>` for Google's Gemini
    /// API.
    #[arg(help_heading = "Model", long, default_value = "scripted", env = "AGENT_TOWER_MODEL", value_parser = parse_model)]
    model: ModelChoice,
    /// Lets clients tune the scripted model with `forwardedProps.scripted` (`tokens`,
    /// `delay_ms`: answers of any length, for load tests); off by default, so that no client
    /// makes the server write gigabytes.
    #[arg(help_heading = "Model", long)]
    scripted_knobs: bool,
    /// The provider's base URL, where its paths start (`…/chat/completions`, `…/messages`,
    /// `…/models/…`); default the provider's own.
    #[arg(help_heading = "Model", long, env = "AGENT_TOWER_BASE_URL")]
    base_url: Option<String>,
    /// The environment variable holding the API key (never logged); default `OPENAI_API_KEY`,
    /// `ANTHROPIC_API_KEY` or `GEMINI_API_KEY`.
    #[arg(help_heading = "Model", long, value_name = "VARIABLE")]
    api_key_env: Option<String>,
    /// A model to ask when the one before it fails before its first token (rate limited,
    /// overloaded, unreachable, a server error, timed out): `openai:<model>`,
    /// `anthropic:<model>` or `gemini:<model>`, then `@<base URL>` if not the provider's own;
    /// its key in its provider's default variable. Repeat for several, asked in order.
    #[arg(help_heading = "Model", long, value_name = "MODEL[@URL]", value_parser = parse_fallback)]
    fallback: Vec<FallbackModel>,
    /// A model that names each new thread once its first run answered (a title of a few words
    /// for thread and session lists; a name someone gave stays): `openai:<model>`,
    /// `anthropic:<model>` or `gemini:<model>`, then `@<base URL>` if not the provider's own.
    /// Of `--model`'s provider, it is reached as that model is (`--base-url`,
    /// `--api-key-env`); its calls count against the same budgets. Without it, a thread is
    /// titled by the first line of its first prompt.
    #[arg(help_heading = "Model", long, value_name = "MODEL[@URL]", value_parser = parse_fallback)]
    title_model: Option<FallbackModel>,
    /// A model's prices, over the published ones: `model=input,output[,cached input[,cache
    /// write]]` in US dollars per million tokens (the model's exact name, which prices its dated
    /// snapshots too; `name-*` for every model starting `name-`). A priced run's usage carries
    /// its cost. Repeat for several.
    #[arg(help_heading = "Model", long, value_name = "MODEL=PRICES", value_parser = parse_price)]
    price: Vec<(String, Prices)>,
    /// What one run may spend on models, `0.50usd` or `200000tokens`; the step that reaches it
    /// ends the run with `RUN_ERROR` code `budget_exceeded`.
    #[arg(help_heading = "Model", long, value_name = "BUDGET", value_parser = parse_budget)]
    run_budget: Option<Limit>,
    /// What one principal's runs may spend on models in a day (UTC), `5usd` or
    /// `2000000tokens`.
    #[arg(help_heading = "Model", long, value_name = "BUDGET", value_parser = parse_budget)]
    daily_budget: Option<Limit>,
    /// At most this many calls a minute to each model (a fallback has its own count); a call
    /// over it waits up to 10 s, else fails with `rate_limited`.
    #[arg(help_heading = "Model", long, value_name = "REQUESTS")]
    requests_per_minute: Option<u32>,
    /// At most this many tokens a minute to each model, counted from the usage it reports.
    #[arg(help_heading = "Model", long, value_name = "TOKENS")]
    tokens_per_minute: Option<u64>,
    /// Thinking for an `anthropic:` or `gemini:` model, shown as reasoning, with at most this
    /// many tokens of it per step (at least 1024, and less than `--max-tokens`); Anthropic's
    /// signed thinking is kept and sent back.
    #[arg(help_heading = "Model", long, value_name = "TOKENS", value_parser = clap::value_parser!(u32).range(1024..))]
    thinking_budget: Option<u32>,
    /// How long the provider may take to send the first token of an answer, per attempt
    /// (reading a long prompt included); past it the call is tried again (`--retries`), as
    /// nothing has reached the client yet.
    #[arg(help_heading = "Model", long, default_value = "60s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    model_timeout: Duration,
    /// How long the model's stream may stay silent between tokens (a bridged agent's from its
    /// start and between its messages; its tools run as long as they take). Past it the run
    /// ends with `RUN_ERROR` code `timeout`.
    #[arg(help_heading = "Model", long, default_value = "60s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    idle_timeout: Duration,
    /// Retries of a call that failed before its first token (rate limited, overloaded, a server
    /// error, unreachable, cut off, timed out).
    #[arg(help_heading = "Model", long, default_value_t = 2)]
    retries: u32,
    /// The sampling temperature sent with each call (the provider's default when absent).
    #[arg(help_heading = "Model", long, value_parser = parse_temperature)]
    temperature: Option<f64>,
    /// The most tokens of one answer (the provider's default when absent).
    #[arg(help_heading = "Model", long, value_name = "TOKENS")]
    max_tokens: Option<u32>,
    /// The model's context window, in tokens: what an editor is told the conversation uses
    /// out of (ACP `usage_update`).
    #[arg(
        help_heading = "Model",
        long,
        default_value_t = 128_000,
        value_name = "TOKENS"
    )]
    context_window: u64,
    /// An MCP server whose tools the agent is offered, as `{name}__{tool}`:
    /// `name=command args…` (spawned, stdio) or `name=http://…` (streamable HTTP). Repeat for
    /// several.
    #[arg(help_heading = "Agent", long = "mcp")]
    mcp: Vec<McpServer>,
    /// An environment variable for a spawned `--mcp` server: `name=KEY=VALUE` sets one,
    /// `name=KEY` passes this process's value on. Repeat for several. Besides these the server
    /// gets only PATH, HOME, USER, SHELL, the locale, TERM, TZ, TMPDIR and the XDG directories.
    #[arg(help_heading = "Agent", long = "mcp-env", value_parser = parse_mcp_setting)]
    mcp_env: Vec<McpSetting>,
    /// A header for an HTTP `--mcp` server, its value read from an environment variable (so that
    /// no secret is on the command line): `name=Header-Name=VARIABLE`. Repeat for several.
    #[arg(help_heading = "Agent", long = "mcp-header-env", value_parser = parse_mcp_setting)]
    mcp_header_env: Vec<McpSetting>,
}

/// `server=key=value` (or `server=key`): a setting of one `--mcp` server.
#[derive(Debug, Clone)]
struct McpSetting {
    server: String,
    key: String,
    value: Option<String>,
}

fn parse_mcp_setting(value: &str) -> Result<McpSetting, String> {
    let (server, setting) = value
        .split_once('=')
        .filter(|(server, _)| !server.is_empty())
        .ok_or("`server=KEY=VALUE` (or `server=KEY`), the server named as in its --mcp")?;
    let (key, value) = parse_env_setting(setting)?;
    Ok(McpSetting {
        server: server.to_owned(),
        key,
        value,
    })
}

/// `NAME=VALUE` (a value set) or `NAME` (this process's value passed on).
fn parse_env_setting(value: &str) -> Result<(String, Option<String>), String> {
    let (name, value) = match value.split_once('=') {
        Some((name, value)) => (name, Some(value.to_owned())),
        None => (value, None),
    };
    if name.is_empty() || name.contains('\0') {
        return Err("`NAME=VALUE` or `NAME` (a variable of this process passed on)".to_owned());
    }
    Ok((name.to_owned(), value))
}

#[derive(Debug, Clone)]
enum ModelChoice {
    Scripted,
    OpenAi(String),
    Anthropic(String),
    Gemini(String),
}

impl ModelChoice {
    /// The name its calls are counted under in a rate limit that instances share: the same
    /// `--model` (and URL) on every instance.
    fn counted_as(&self, base_url: Option<&str>) -> String {
        let named = match self {
            Self::Scripted => "scripted".to_owned(),
            Self::OpenAi(name) => format!("openai:{name}"),
            Self::Anthropic(name) => format!("anthropic:{name}"),
            Self::Gemini(name) => format!("gemini:{name}"),
        };
        match base_url {
            Some(url) => format!("{named}@{url}"),
            None => named,
        }
    }
}

/// The agent `serve` serves instead of its own (`--agent`).
#[derive(Debug, Clone)]
enum WebAgent {
    /// An ACP agent, started as a command.
    Acp(agent_tower::acp::client::AcpCommand),
    /// An A2A agent, by the URL its card is found at.
    A2a(String),
}

/// The agent `acp` serves instead of its own (`--agent`).
#[derive(Debug, Clone)]
enum EditorAgent {
    /// An AG-UI endpoint.
    Agui(String),
    /// An A2A agent, by the URL its card is found at.
    A2a(String),
    /// An ACP agent served across the network.
    Acp(agent_tower::acp::client::AcpCommand),
}

/// `--agent` of `acp`: `agui:<url>`, `a2a:<url>` or `acp:<ws url>`.
fn parse_editor_agent(value: &str) -> Result<EditorAgent, String> {
    if let Some(url) = value.strip_prefix("agui:") {
        agent_tower::agui::client::AguiBridge::new(url).map_err(|e| e.to_string())?;
        return Ok(EditorAgent::Agui(url.to_owned()));
    }
    if let Some(url) = value.strip_prefix("a2a:") {
        return a2a_url(url).map(EditorAgent::A2a);
    }
    if let Some(url) = value.strip_prefix("acp:") {
        return agent_tower::acp::client::AcpCommand::remote(url)
            .map(EditorAgent::Acp)
            .map_err(|e| format!("{e}: an editor's own agent is a command already"));
    }
    Err(
        "`agui:<url>` (the URL runs are posted to), `a2a:<url>` (where its card is) or \
         `acp:<ws url>` (an ACP agent served there)"
            .to_owned(),
    )
}

/// `--agent` of `serve`: `acp:<command> [args…]` or `a2a:<url>`.
fn parse_agent(value: &str) -> Result<WebAgent, String> {
    if let Some(line) = value.strip_prefix("acp:") {
        return agent_tower::acp::client::AcpCommand::parse(line)
            .map(WebAgent::Acp)
            .map_err(|e| e.to_string());
    }
    if let Some(url) = value.strip_prefix("a2a:") {
        return a2a_url(url).map(WebAgent::A2a);
    }
    Err("`acp:<command> [args…]` or `a2a:<url>` (where its card is)".to_owned())
}

/// The URL of an A2A agent, if it is an http(s) one.
fn a2a_url(url: &str) -> Result<String, String> {
    match url.split_once("://") {
        Some(("http" | "https", rest)) if !rest.is_empty() => Ok(url.to_owned()),
        _ => Err(format!("`{url}` is not an http(s) URL")),
    }
}

/// The bearer token `--agent-token-env` names, as an `Authorization` value.
fn agent_authorization(variable: Option<&String>) -> Result<Option<String>, BoxError> {
    Ok(agent_token(variable)?.map(|token| format!("Bearer {token}")))
}

/// The token `--agent-token-env` names, as it is set.
fn agent_token(variable: Option<&String>) -> Result<Option<String>, BoxError> {
    variable
        .map(|variable| {
            std::env::var(variable)
                .map_err(|_| format!("--agent-token-env: `{variable}` is not set").into())
        })
        .transpose()
}

/// The stack of the ACP agent of `command` (`--agent acp:`), opened with the token
/// `--agent-token-env` names (`token_env`) when it is across the network: its turns are the
/// model's (silent for at most the model's idle timeout), it runs its own tools, and what it asks
/// permission for is asked as `settings`' rules say; and the bridge, for readiness.
async fn acp_backend(
    mut command: agent_tower::acp::client::AcpCommand,
    token_env: Option<&String>,
    model: &ModelArgs,
    settings: &AgentSettings,
) -> Result<(agent_tower::acp::client::AcpBridge, Backend), BoxError> {
    settings.check_bridged()?;
    if let Some(token) = agent_token(token_env)? {
        command = command.bearer_token(token);
    }
    let bridge = agent_tower::acp::client::AcpBridge::spawn(command.clone()).await?;
    tracing::info!("serving an ACP agent: {command:?}");
    let backend = bridged(
        bridge.model(),
        bridge.tools(),
        bridge.asked(),
        "acp",
        model.idle_timeout,
        settings.policy(&[]),
    );
    Ok((bridge, backend))
}

/// The stack of the A2A agent at `url` (`--agent a2a:`): its answers are the model's (silent
/// for at most the model's idle timeout), under `settings`' rules; it runs its own tools.
async fn a2a_backend(
    url: &str,
    authorization: Option<&str>,
    model: &ModelArgs,
    settings: &AgentSettings,
) -> Result<Backend, BoxError> {
    settings.check_bridged()?;
    let headers: Vec<(&str, &str)> = authorization
        .map(|a| ("authorization", a))
        .into_iter()
        .collect();
    let bridge = agent_tower::a2a::client::A2aBridge::connect(url, &headers).await?;
    tracing::info!(%url, agent = %bridge.card().name, "serving an A2A agent");
    let no_tools = tower::service_fn(|call: ToolCall| async move {
        Err::<agent_tower::tool::ToolOutput, BoxError>(
            format!(
                "the A2A agent runs its own tools; `{}` is not one here",
                call.name
            )
            .into(),
        )
    });
    let (idle, rules) = (model.idle_timeout, settings.policy(&[]));
    Ok(bridged(
        bridge.model(),
        no_tools,
        |_| false,
        "a2a",
        idle,
        rules,
    ))
}

fn parse_model(value: &str) -> Result<ModelChoice, String> {
    match value.split_once(':') {
        None if value == "scripted" => Ok(ModelChoice::Scripted),
        Some(("openai", name)) if !name.is_empty() => Ok(ModelChoice::OpenAi(name.to_owned())),
        Some(("anthropic", name)) if !name.is_empty() => {
            Ok(ModelChoice::Anthropic(name.to_owned()))
        }
        Some(("gemini", name)) if !name.is_empty() => Ok(ModelChoice::Gemini(name.to_owned())),
        _ => Err(
            "one of `scripted`, `openai:<model name>`, `anthropic:<model name>` or \
             `gemini:<model name>`"
                .to_owned(),
        ),
    }
}

impl ModelArgs {
    /// Every tool of the command (the demo tools with the scripted model or `--demo-tools`,
    /// every `--mcp` server's), the rules that apply to them when no rule given names them, and
    /// whether the demo tools are among them.
    async fn tools(
        &self,
        demo: bool,
    ) -> Result<(ToolRouter, Vec<(String, Action)>, bool), BoxError> {
        let demo = demo || matches!(self.model, ModelChoice::Scripted);
        let mut tools = if demo {
            demo_tools()
        } else {
            ToolRouter::new()
        };
        let mut defaults = Vec::new();
        if !(self.mcp.is_empty() && self.mcp_env.is_empty() && self.mcp_header_env.is_empty()) {
            let mcp = McpConnection::tools_of(&self.mcp_servers()?).await?;
            tracing::info!(
                servers = self.mcp.len(),
                tools = mcp.specs().len(),
                "MCP servers connected"
            );
            // A tool its server does not mark read-only is asked about whatever the mode,
            // unless a rule says otherwise; the read-only ones follow the mode.
            defaults.extend(
                mcp.specs()
                    .into_iter()
                    .filter(|spec| spec.kind != Some(ToolKind::Read))
                    .map(|spec| (spec.name, Action::Ask)),
            );
            tools = tools.merge(mcp);
        }
        if demo {
            defaults.push(("remember".to_owned(), Action::Ask));
        }
        Ok((tools, defaults, demo))
    }

    /// The `--mcp` servers with their `--mcp-env` and `--mcp-header-env` settings.
    fn mcp_servers(&self) -> Result<Vec<McpServer>, String> {
        fn named<'a>(
            servers: &'a mut [McpServer],
            flag: &str,
            name: &str,
        ) -> Result<&'a mut McpServer, String> {
            let server = servers.iter_mut().find(|s| s.name() == name);
            server.ok_or_else(|| format!("{flag} {name}=…: no --mcp server is named `{name}`"))
        }
        let mut servers = self.mcp.clone();
        for setting in &self.mcp_env {
            let McpServer::Stdio { env, inherit, .. } =
                named(&mut servers, "--mcp-env", &setting.server)?
            else {
                return Err(format!(
                    "--mcp-env {}=…: that server is reached over HTTP; its headers go in \
                     --mcp-header-env",
                    setting.server
                ));
            };
            match &setting.value {
                Some(value) => env.push((setting.key.clone(), value.clone())),
                None => inherit.push(setting.key.clone()),
            }
        }
        for setting in &self.mcp_header_env {
            let server = named(&mut servers, "--mcp-header-env", &setting.server)?;
            let variable = setting.value.as_deref().ok_or_else(|| {
                format!(
                    "--mcp-header-env {}={}: `name=Header-Name=VARIABLE`, the variable holding \
                     the header's value",
                    setting.server, setting.key
                )
            })?;
            let value = std::env::var(variable).map_err(|_| {
                format!(
                    "--mcp-header-env {}={}={variable}: the variable {variable} is not set",
                    setting.server, setting.key
                )
            })?;
            let McpServer::Http { headers, .. } = server else {
                return Err(format!(
                    "--mcp-header-env {}=…: that server is spawned; its settings go in --mcp-env",
                    setting.server
                ));
            };
            headers.push((setting.key.clone(), value));
        }
        Ok(servers)
    }

    /// The model service: the scripted model, or the provider behind a first-answer timeout,
    /// retries before the first token and an idle timeout on its stream.
    /// The spans' names for this model.
    fn trace(&self) -> agent_tower::trace::TraceLayer {
        let trace = agent_tower::trace::TraceLayer::new();
        match &self.model {
            ModelChoice::Scripted => trace.model("scripted").provider("agent_tower.scripted"),
            ModelChoice::OpenAi(name) => trace.model(name.clone()).provider("openai"),
            ModelChoice::Anthropic(name) => trace.model(name.clone()).provider("anthropic"),
            ModelChoice::Gemini(name) => trace.model(name.clone()).provider("gcp.gemini"),
        }
    }

    /// The model service: the scripted model, or the provider (and its fallbacks), each
    /// behind a first-token timeout, a rate limit and retries before the first token, priced,
    /// within the budgets, with an idle timeout on the stream.
    fn service(&self, books: &ModelBooks) -> BoxModel {
        let thinks = |choice: &ModelChoice| {
            matches!(choice, ModelChoice::Anthropic(_) | ModelChoice::Gemini(_))
        };
        if self.thinking_budget.is_some()
            && !thinks(&self.model)
            && !self.fallback.iter().any(|f| thinks(&f.model))
        {
            tracing::warn!(
                "--thinking-budget is ignored: the model is not an anthropic: or gemini: one"
            );
        }
        if matches!(self.model, ModelChoice::Scripted) {
            if let Some(base_url) = &self.base_url {
                tracing::warn!(
                    %base_url,
                    "--base-url (or AGENT_TOWER_BASE_URL) is ignored: the model is scripted; \
                     name one with --model openai:<model>, anthropic:<model> or \
                     gemini:<model>"
                );
            }
            if self.fallback.is_empty() {
                let scripted = boxed(ScriptedModel::new().client_knobs(self.scripted_knobs));
                let limited = self.run_budget.is_some()
                    || self.daily_budget.is_some()
                    || self.requests_per_minute.is_some()
                    || self.tokens_per_minute.is_some();
                if !limited {
                    return scripted;
                }
                // The scripted model reports its tokens: budgets and rate limits in tokens act on
                // it; it has no price.
                for (flag, limit) in [
                    ("--run-budget", self.run_budget),
                    ("--daily-budget", self.daily_budget),
                ] {
                    if matches!(limit, Some(Limit::Cost(_))) {
                        tracing::warn!(
                            "{flag} in dollars cannot act: the scripted model has no price; \
                             give it in tokens"
                        );
                    }
                }
                let counted = ModelChoice::Scripted.counted_as(None);
                return self.within_budgets(self.bounded(scripted, &counted, books), books);
            }
        } else if self.scripted_knobs {
            tracing::warn!("--scripted-knobs is ignored: the model is not the scripted one");
        }
        let primary = self.provider(
            &self.model,
            self.base_url.as_deref(),
            self.api_key_env.as_deref(),
        );
        let counted = self.model.counted_as(self.base_url.as_deref());
        let primary = self.bounded(primary, &counted, books);
        let model = if self.fallback.is_empty() {
            primary
        } else {
            let fallbacks = self.fallback.iter().map(|f| {
                let model = self.provider(&f.model, f.base_url.as_deref(), None);
                self.bounded(model, &f.model.counted_as(f.base_url.as_deref()), books)
            });
            let mut fallback = Fallback::new(std::iter::once(primary).chain(fallbacks));
            if let Some(metrics) = &books.metrics {
                fallback = fallback.observer(metrics.clone());
            }
            boxed(fallback)
        };
        self.within_budgets(model, books)
    }

    /// The budgets of `--run-budget` and `--daily-budget`, counted in `ledger`.
    fn budget(&self, ledger: impl Ledger) -> BudgetLayer {
        let mut budget = BudgetLayer::new().ledger(ledger);
        if let Some(limit) = self.run_budget {
            budget = budget.per_run(limit);
        }
        if let Some(limit) = self.daily_budget {
            budget = budget.per_principal_per_day(limit);
        }
        budget
    }

    /// `model` priced, within the budgets of `books`, with an idle timeout on its stream.
    fn within_budgets(&self, model: BoxModel, books: &ModelBooks) -> BoxModel {
        let budget = books.budget.clone();
        boxed(
            tower::ServiceBuilder::new()
                .layer(IdleTimeoutLayer::new(self.idle_timeout))
                .layer(budget)
                .layer(CostLayer::new(self.prices()))
                .service(model),
        )
    }

    /// The published prices, with `--price`'s over them.
    fn prices(&self) -> PriceTable {
        self.price
            .iter()
            .fold(PriceTable::published(), |table, (model, prices)| {
                table.price(model.clone(), *prices)
            })
    }

    /// One model of `choice` at `base_url` (else its provider's), its key in `key_env` (else
    /// its provider's variable).
    fn provider(
        &self,
        choice: &ModelChoice,
        base_url: Option<&str>,
        key_env: Option<&str>,
    ) -> BoxModel {
        let key = |default: &'static str| api_key_env(key_env.unwrap_or(default));
        match choice {
            ModelChoice::Scripted => boxed(ScriptedModel::new().client_knobs(self.scripted_knobs)),
            ModelChoice::OpenAi(name) => {
                let base_url = base_url.unwrap_or(OPENAI_BASE_URL);
                tracing::info!(model = %name, %base_url, "OpenAI-compatible model");
                boxed(OpenAi::new(base_url, name.clone()).api_key_env(key("OPENAI_API_KEY")))
            }
            ModelChoice::Anthropic(name) => {
                let base_url = base_url.unwrap_or(anthropic::BASE_URL);
                tracing::info!(model = %name, %base_url, "Anthropic model");
                let mut model = Anthropic::new(name.clone())
                    .base_url(base_url)
                    .api_key_env(key("ANTHROPIC_API_KEY"));
                if let Some(budget) = self.thinking_budget {
                    model = model.thinking(budget);
                }
                boxed(model)
            }
            ModelChoice::Gemini(name) => {
                let base_url = base_url.unwrap_or(gemini::BASE_URL);
                tracing::info!(model = %name, %base_url, "Gemini model");
                let mut model = Gemini::new(name.clone())
                    .base_url(base_url)
                    .api_key_env(key("GEMINI_API_KEY"));
                if let Some(budget) = self.thinking_budget {
                    model = model.thinking(budget);
                }
                boxed(model)
            }
        }
    }

    /// The `--title-model`, reached as `--model` is when of its provider, behind the same limits.
    fn titles(&self, books: &ModelBooks) -> Option<BoxModel> {
        let title = self.title_model.as_ref()?;
        let same = std::mem::discriminant(&title.model) == std::mem::discriminant(&self.model);
        let base_url = title
            .base_url
            .as_deref()
            .or(self.base_url.as_deref().filter(|_| same));
        let key_env = self.api_key_env.as_deref().filter(|_| same);
        let model = self.provider(&title.model, base_url, key_env);
        let counted = title.model.counted_as(base_url);
        Some(self.within_budgets(self.bounded(model, &counted, books), books))
    }

    /// `model` behind its rate limit (its calls counted as `counted` in the store, when there is
    /// one) and a first-token timeout, retried before its first token, what it holds back and
    /// tries again counted in `books`' metrics.
    fn bounded(&self, model: BoxModel, counted: &str, books: &ModelBooks) -> BoxModel {
        let mut limit = RateLimitLayer::new();
        if let Some(store) = &books.store {
            limit = limit.shared(store.clone(), counted);
        }
        if let Some(requests) = self.requests_per_minute {
            limit = limit.requests_per_minute(requests);
        }
        if let Some(tokens) = self.tokens_per_minute {
            limit = limit.tokens_per_minute(tokens);
        }
        let mut retry = RetryPolicy::new(self.retries);
        if let Some(metrics) = &books.metrics {
            limit = limit.observer(metrics.clone());
            retry = retry.observer(metrics.clone());
        }
        boxed(
            tower::ServiceBuilder::new()
                .retry(retry)
                .layer(limit)
                .timeout(self.model_timeout)
                .service(model),
        )
    }
}

/// `variable`, the one holding a provider's key, with a warning when it is not set.
fn api_key_env(variable: &str) -> &str {
    if std::env::var_os(variable).is_none() {
        tracing::warn!(
            variable,
            "no API key: the variable is not set, requests go without one (fine for a local \
             server, refused by hosted ones)"
        );
    }
    variable
}

/// `provider:model`, then `@base URL` optionally: a `--fallback` model.
#[derive(Debug, Clone)]
struct FallbackModel {
    model: ModelChoice,
    base_url: Option<String>,
}

fn parse_fallback(value: &str) -> Result<FallbackModel, String> {
    let (model, base_url) = match value.split_once('@') {
        Some((model, url)) if url.starts_with("http://") || url.starts_with("https://") => {
            (model, Some(url.to_owned()))
        }
        Some(_) => return Err("`provider:model@http(s)://…`: the base URL is not one".to_owned()),
        None => (value, None),
    };
    Ok(FallbackModel {
        model: parse_model(model)?,
        base_url,
    })
}

/// `model=input,output[,cached input[,cache write]]`, US dollars per million tokens.
fn parse_price(value: &str) -> Result<(String, Prices), String> {
    let shape = || {
        format!(
            "`model=input,output[,cached input[,cache write]]` in US dollars per million tokens \
             (not `{value}`)"
        )
    };
    let (model, prices) = value
        .split_once('=')
        .filter(|(model, _)| !model.is_empty())
        .ok_or_else(shape)?;
    let prices: Vec<f64> = prices
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|p| p.is_finite() && *p >= 0.0)
        })
        .collect::<Option<_>>()
        .ok_or_else(shape)?;
    let mut parsed = match prices[..] {
        [input, output, ..] if prices.len() <= 4 => Prices::new(input, output),
        _ => return Err(shape()),
    };
    if let Some(&cached) = prices.get(2) {
        parsed = parsed.cached_input(cached);
    }
    if let Some(&written) = prices.get(3) {
        parsed = parsed.cache_write(written);
    }
    Ok((model.to_owned(), parsed))
}

/// `0.50usd` (or `$0.50`) or `200000tokens`: a budget.
fn parse_budget(value: &str) -> Result<Limit, String> {
    let shape = || format!("`0.50usd` (or `$0.50`) or `200000tokens` (not `{value}`)");
    let value = value.trim();
    if let Some(tokens) = value.strip_suffix("tokens") {
        return tokens
            .trim()
            .parse()
            .map(Limit::tokens)
            .map_err(|_| shape());
    }
    let usd = value
        .strip_prefix('$')
        .or_else(|| value.strip_suffix("usd"))
        .or_else(|| value.strip_suffix("USD"))
        .ok_or_else(shape)?;
    let usd: f64 = usd.trim().parse().map_err(|_| shape())?;
    if usd.is_finite() && usd > 0.0 {
        Ok(Limit::usd(usd))
    } else {
        Err(shape())
    }
}

/// A size: a whole number of bytes, or of `KiB`, `MiB`, `GiB` (powers of 1,024) or `kB`, `MB`,
/// `GB` (of 1,000), in any case.
fn parse_bytes<T: TryFrom<u64>>(value: &str) -> Result<T, String> {
    let text = value.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let unit_size: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "kib" => 1 << 10,
        "mb" => 1_000_000,
        "mib" => 1 << 20,
        "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "`{value}` is not a size: a whole number of bytes, or of KiB, MiB, GiB, kB, MB, \
                 GB (`64MiB`)"
            ));
        }
    };
    let count: u64 = number
        .parse()
        .map_err(|_| format!("`{value}` is not a size: it starts with no whole number"))?;
    count
        .checked_mul(unit_size)
        .and_then(|bytes| T::try_from(bytes).ok())
        .ok_or_else(|| format!("`{value}` is too large"))
}

/// A sampling temperature: a number from 0 to 2.
fn parse_temperature(value: &str) -> Result<f64, String> {
    let temperature: f64 = value
        .parse()
        .map_err(|_| format!("`{value}` is not a number"))?;
    if (0.0..=2.0).contains(&temperature) {
        Ok(temperature)
    } else {
        Err(format!("{temperature} is not between 0 and 2"))
    }
}

/// Where `openai:` models are, unless `--base-url` says otherwise.
const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DisconnectChoice {
    /// Cancel the run once nobody has re-joined it for the re-join grace.
    Cancel,
    /// Let the run finish without the client.
    Continue,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BusyChoice {
    /// Answer 409 Conflict.
    Reject,
    /// Wait for the active run to end.
    Queue,
    /// Cancel the active run, then start once it ended.
    Interrupt,
    /// Cancel the active run and leave out what it added to the thread, then start.
    Rollback,
}

fn parse_detail(value: &str) -> Result<Detail, String> {
    value.parse()
}

/// `host:port`, checked for its shape; the host is resolved when the server binds.
fn parse_addr(value: &str) -> Result<String, String> {
    let shape =
        || format!("`host:port`, such as `127.0.0.1:8000` or `localhost:8000` (not `{value}`)");
    let (host, port) = value.rsplit_once(':').ok_or_else(shape)?;
    // An IPv6 address is bracketed (`[::1]:8000`): `::1:8000` could be read two ways.
    let valid_host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(ipv6) => ipv6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => !host.is_empty() && !host.contains([':', '/', ' ', '[', ']']),
    };
    if valid_host && port.parse::<u16>().is_ok() {
        Ok(value.to_owned())
    } else {
        Err(shape())
    }
}

fn parse_path(value: &str) -> Result<String, String> {
    if value.starts_with('/') {
        Ok(value.to_owned())
    } else {
        Err(format!("a path starts with `/` (`/{value}`?)"))
    }
}

/// A duration within `min..=max`.
fn duration_within(value: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let duration = humantime::parse_duration(value).map_err(|e| e.to_string())?;
    if duration < min || duration > max {
        return Err(format!(
            "between {} and {}",
            humantime::format_duration(min),
            humantime::format_duration(max)
        ));
    }
    Ok(duration)
}

fn parse_lease(value: &str) -> Result<Duration, String> {
    // Renewed every third of it: shorter than a second would be a heartbeat storm.
    duration_within(
        value,
        Duration::from_secs(1),
        Duration::from_secs(24 * 3600),
    )
}

fn parse_agent_start_timeout(value: &str) -> Result<Duration, String> {
    duration_within(value, Duration::from_secs(1), Duration::from_secs(600))
}

fn parse_rejoin_grace(value: &str) -> Result<Duration, String> {
    duration_within(value, Duration::ZERO, Duration::from_secs(3600))
}

fn parse_interrupt_ttl(value: &str) -> Result<Duration, String> {
    duration_within(
        value,
        Duration::from_secs(1),
        Duration::from_secs(10 * 365 * 24 * 3600),
    )
}

fn parse_timeout(value: &str) -> Result<Duration, String> {
    duration_within(
        value,
        Duration::from_millis(100),
        Duration::from_secs(24 * 3600),
    )
}

/// jemalloc, with its background thread: against glibc's allocator on the load bench, memory
/// gives back what a burst of streams used once they close (53 MB resident after 10,000 closed,
/// against 311 MB), holds an idle stream in less (27 KiB against 31) and serves short runs
/// faster, durable ones most (SQLite's writer thread frees what the runtime's threads allocate).
/// With the feature `jemalloc`: its build is long, and a first try of the command needs none.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("agent-tower: cannot start: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // The error and its causes, as sentences: not a `Debug` dump.
            let mut message = format!("agent-tower: {error}");
            let mut source = error.source();
            while let Some(cause) = source {
                // Errors that print their cause and also give it as `source` say it once.
                let cause_text = cause.to_string();
                if !message.ends_with(&cause_text) {
                    message.push_str(&format!(": {cause_text}"));
                }
                source = cause.source();
            }
            eprintln!("{message}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The command line with the config file's settings put before the command line's own (so that
/// the command line wins), if a config file is named by `--config` or `AGENT_TOWER_CONFIG`.
fn with_config(args: Vec<std::ffi::OsString>) -> Result<Vec<std::ffi::OsString>, BoxError> {
    let named = args
        .iter()
        .enumerate()
        .find_map(|(at, arg)| {
            let arg = arg.to_str()?;
            if arg == "--config" {
                args.get(at + 1).map(std::path::PathBuf::from)
            } else {
                arg.strip_prefix("--config=").map(std::path::PathBuf::from)
            }
        })
        .or_else(|| std::env::var_os("AGENT_TOWER_CONFIG").map(Into::into));
    let Some(path) = named else {
        return Ok(args);
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("the config file {} is not valid TOML: {e}", path.display()))?;
    let command = args.iter().position(|arg| arg == "serve" || arg == "acp");
    // A flag's environment variable, when set, wins over the file (the command line over both).
    let cli = <Cli as clap::CommandFactory>::command();
    let subcommand = command.and_then(|at| cli.find_subcommand(args[at].to_str()?));
    let from_env = |command: &clap::Command, flag: &str| {
        long_flag(command, flag)
            .and_then(clap::Arg::get_env)
            .is_some_and(|variable| std::env::var_os(variable).is_some())
    };
    let mut global = Vec::new();
    let mut agent = Vec::new();
    let mut commands = Vec::new();
    for (key, value) in &table {
        let out = match value {
            // `[agent]` is for both commands, before the command's own table.
            toml::Value::Table(_) if key == "agent" => &mut agent,
            toml::Value::Table(_) if key == "serve" || key == "acp" => {
                if command.is_none_or(|at| args[at] != key.as_str()) {
                    continue;
                }
                &mut commands
            }
            value => {
                let arg = known(&cli, key, None, &path)?;
                if !from_env(&cli, key) {
                    push_flag(&mut global, arg, value, &path)?;
                }
                continue;
            }
        };
        let (Some(subcommand), toml::Value::Table(flags)) = (subcommand, value) else {
            continue;
        };
        for (flag, value) in flags {
            if key == "agent" {
                shared(&cli, flag, &path)?;
            }
            let arg = known(subcommand, flag, Some(key), &path)?;
            if !from_env(subcommand, flag) {
                push_flag(out, arg, value, &path)?;
            }
        }
    }
    agent.extend(commands);
    let commands = agent;
    let mut merged = args;
    if let Some(at) = command {
        merged.splice(at + 1..at + 1, commands);
    }
    merged.splice(1..1, global);
    Ok(merged)
}

/// The argument of `command` whose long name is `flag`.
fn long_flag<'a>(command: &'a clap::Command, flag: &str) -> Option<&'a clap::Arg> {
    command
        .get_arguments()
        .find(|arg| arg.get_long() == Some(flag))
}

/// Refuses a setting of the config file's `[agent]` table that is a flag of one command only (it
/// would break the other one on the same file), naming the table it belongs in.
fn shared(cli: &clap::Command, flag: &str, path: &std::path::Path) -> Result<(), BoxError> {
    let owners: Vec<&clap::Command> = ["serve", "acp"]
        .into_iter()
        .filter_map(|name| cli.find_subcommand(name))
        .filter(|command| long_flag(command, flag).is_some())
        .collect();
    match owners[..] {
        [only] => Err(format!(
            "the config file {}: `{flag}` in [agent] is a setting of `agent-tower {name}` alone; \
             [agent] holds what both commands take: put it in [{name}]",
            path.display(),
            name = only.get_name()
        )
        .into()),
        _ => Ok(()),
    }
}

/// The flag of `command` a setting of the config file (in `table`, or at the top) is, refused
/// when `command` has none (naming the file and the setting).
fn known<'a>(
    command: &'a clap::Command,
    flag: &str,
    table: Option<&str>,
    path: &std::path::Path,
) -> Result<&'a clap::Arg, BoxError> {
    if let Some(arg) = long_flag(command, flag) {
        return Ok(arg);
    }
    let place = table.map(|t| format!(" in [{t}]")).unwrap_or_default();
    let name = match command.get_name() {
        "agent-tower" => "agent-tower".to_owned(),
        sub => format!("agent-tower {sub}"),
    };
    Err(format!(
        "the config file {}: unknown setting `{flag}`{place}; the settings are the long flags of \
         `{name} --help`, without their dashes",
        path.display()
    )
    .into())
}

/// `--flag value` for the flag `arg` (a value per element for an array; `--flag` alone for
/// `true`, nothing for `false`; for a flag of named JSON settings, `--flag NAME={JSON}` per table
/// of a table, as `[agent.subagent.NAME]` and `[serve.schedule.NAME]` give them).
fn push_flag(
    out: &mut Vec<std::ffi::OsString>,
    arg: &clap::Arg,
    value: &toml::Value,
    path: &std::path::Path,
) -> Result<(), BoxError> {
    let flag = arg.get_long().unwrap_or_default();
    let text = |value: &toml::Value| match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        other => Err(format!(
            "the config file {}: `{flag}` must be a string, a number, a boolean or a list of them (it is {})",
            path.display(),
            other.type_str()
        )),
    };
    let named = arg
        .get_value_names()
        .is_some_and(|names| names.iter().any(|name| name == NAMED_JSON));
    match value {
        toml::Value::Table(settings) if named => {
            for (name, setting) in settings {
                if !setting.is_table() {
                    return Err(format!(
                        "the config file {}: `{flag}.{name}` must be a table (it is {})",
                        path.display(),
                        setting.type_str()
                    )
                    .into());
                }
                out.push(format!("--{flag}").into());
                out.push(format!("{name}={}", json_of(setting)).into());
            }
        }
        toml::Value::Boolean(true) => out.push(format!("--{flag}").into()),
        toml::Value::Boolean(false) => {}
        toml::Value::Array(items) => {
            for item in items {
                out.push(format!("--{flag}").into());
                out.push(text(item)?.into());
            }
        }
        value => {
            out.push(format!("--{flag}").into());
            out.push(text(value)?.into());
        }
    }
    Ok(())
}

/// A value of the config file as JSON (a date and time as its RFC 3339 text).
fn json_of(value: &toml::Value) -> serde_json::Value {
    use serde_json::Value as Json;
    match value {
        toml::Value::String(s) => Json::from(s.as_str()),
        toml::Value::Integer(i) => Json::from(*i),
        toml::Value::Float(f) => Json::from(*f),
        toml::Value::Boolean(b) => Json::from(*b),
        toml::Value::Datetime(at) => Json::from(at.to_string()),
        toml::Value::Array(items) => items.iter().map(json_of).collect(),
        toml::Value::Table(entries) => entries
            .iter()
            .map(|(key, value)| (key.clone(), json_of(value)))
            .collect(),
    }
}

async fn run() -> Result<(), BoxError> {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::{Layer as _, layer::SubscriberExt as _, util::SubscriberInitExt as _};

    let cli = Cli::parse_from(with_config(std::env::args_os().collect())?);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| DEFAULT_LOG_FILTER.into());
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match cli.log_format {
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        LogFormat::Json => logs.json().flatten_event(true).boxed(),
    };
    let provider = cli.otlp_endpoint.as_deref().map(otlp).transpose()?;
    let spans = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("agent-tower"))
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target("agent_tower::trace", tracing::Level::INFO),
            )
    });
    tracing_subscriber::registry()
        .with(logs.with_filter(filter))
        .with(spans)
        .init();
    let ran = match cli.command {
        Command::Serve(serve) => run_server(*serve).await,
        Command::Acp(acp) => run_acp(*acp).await,
        Command::Prune(prune) => {
            let store = agent_tower::store::RunStore::open(&prune.store.url).await?;
            let pruned = store.prune(ago(prune.older_than)).await?;
            tracing::info!(store = %store_name(&prune.store.url), pruned, "runs deleted");
            if let Some(age) = prune.threads_older_than {
                let pruned = store.prune_threads(ago(age)).await?;
                tracing::info!(store = %store_name(&prune.store.url), pruned, "threads deleted");
            }
            Ok(())
        }
        Command::Export(export) => export_thread(&export).await,
        Command::Schedules(store) => list_operations(&store, None).await,
        Command::Webhooks(list) => list_operations(&list.store, Some(&list)).await,
        Command::Backup(backup) => {
            let bytes = agent_tower::store::backup(&backup.store.url, &backup.to).await?;
            tracing::info!(
                store = %store_name(&backup.store.url),
                to = %backup.to.display(),
                bytes,
                "the store was copied"
            );
            Ok(())
        }
    };
    if let Some(provider) = provider {
        // The spans still batched go out before the process ends.
        if let Err(error) = tokio::task::spawn_blocking(move || provider.shutdown()).await? {
            tracing::warn!(%error, "the last spans could not be exported");
        }
    }
    ran
}

async fn run_acp(args: Acp) -> Result<(), BoxError> {
    let max_turns =
        std::num::NonZeroU32::new(args.max_turns).ok_or("--max-turns must be at least 1")?;
    let authorization = agent_authorization(args.agent_token_env.as_ref())?;
    let bridge = match &args.agent {
        Some(EditorAgent::A2a(url)) => {
            Some(a2a_backend(url, authorization.as_deref(), &args.model, &args.settings).await?)
        }
        Some(EditorAgent::Acp(command)) => {
            let token = args.agent_token_env.as_ref();
            let (_, backend) =
                acp_backend(command.clone(), token, &args.model, &args.settings).await?;
            Some(backend)
        }
        Some(EditorAgent::Agui(url)) => {
            let mut bridge = agent_tower::agui::client::AguiBridge::new(url)?;
            if let Some(authorization) = &authorization {
                bridge = bridge.header("authorization", authorization)?;
            }
            tracing::info!(%url, "serving an AG-UI agent");
            args.settings.check_bridged()?;
            Some(bridged(
                bridge.model(),
                bridge.tools(),
                bridge.interrupted(),
                "agui",
                args.model.idle_timeout,
                args.settings.policy(&[]),
            ))
        }
        None => None,
    };
    // The store first: budgets count in it.
    let (store, user) = match args.store.clone() {
        Some(none) if none == "none" => (none, None),
        // A store given may be shared with other users: an editor on stdio is a principal, the
        // machine's user unless named. The default one is this user's own file.
        Some(store) => (store, Some(acp_principal(args.principal.as_deref())?)),
        None => {
            if args.principal.is_some() {
                tracing::warn!("--principal is ignored: the sessions are in this user's own file");
            }
            (default_session_store()?, None)
        }
    };
    let store = if store == "none" {
        args.durability.ignored();
        None
    } else {
        tracing::info!(store = %store_name(&store), "sessions are kept in the store");
        let store = agent_tower::store::RunStore::open(&store).await?;
        store.durability(args.durability.level());
        Some(store)
    };
    let books = ModelBooks {
        budget: budget_of(store.as_ref(), &args.model),
        metrics: None,
        store: store.clone(),
    };
    // An editor's session may bring MCP servers of its own, whose tools the rules may name.
    // The editor is asked what the rules ask about, the sub-agents' calls included.
    let approver = agent_tower::acp::AcpApprover::new();
    let stack = agent_stack(
        bridge,
        &args.model,
        &args.settings,
        true,
        &books,
        approver.clone(),
    )
    .await?
    .max_turns(max_turns)
    .detail(args.error_detail);
    let tools = stack.tools().specs();
    let agent = agent_tower::acp::AcpAgent::new(stack.build())
        .approver(approver)
        .tools(&tools);
    let default_mode = if args.agent.is_some() {
        ModeChoice::Auto
    } else {
        ModeChoice::Ask
    };
    let mode = match args.mode.unwrap_or(default_mode) {
        ModeChoice::Ask => Mode::Interactive,
        ModeChoice::Auto => Mode::Agentic,
        ModeChoice::ReadOnly => Mode::ReadOnly,
    };
    let mut agent = agent.default_mode(mode);
    if let Some(name) = &args.settings.name {
        agent = agent.info(name, env!("CARGO_PKG_VERSION"), name);
    }
    if let Some(user) = user {
        agent = agent.principal(user);
    }
    if let Some(store) = store {
        agent = agent.engine(|runs| runs.log(store).lease(args.lease));
    }
    if let Some(titles) = args.model.titles(&books) {
        agent = agent.engine(|runs| runs.title_model(titles));
    }
    tracing::info!("serving ACP on stdio");
    agent
        .serve_io(tokio::io::stdin(), tokio::io::stdout())
        .await?;
    Ok(())
}

/// Where a command's model calls are accounted for: the budgets they spend against, the
/// metrics of the calls held by a rate limit, tried again or sent to a fallback (none without a
/// server to serve them), and the store their rate limits count in (none: each process counts
/// for itself).
struct ModelBooks {
    budget: BudgetLayer,
    metrics: Option<agent_tower::metrics::Metrics>,
    /// Where the rate limits count, when instances share them.
    store: Option<agent_tower::store::RunStore>,
}

/// The budgets of `model`'s flags, counted in `store`, shared by its instances and kept across
/// restarts; in this process without one (said at start when there is a budget).
fn budget_of(store: Option<&agent_tower::store::RunStore>, model: &ModelArgs) -> BudgetLayer {
    match store {
        Some(store) => model.budget(store.clone()),
        None => {
            let limited = model.run_budget.is_some()
                || model.daily_budget.is_some()
                || model.requests_per_minute.is_some()
                || model.tokens_per_minute.is_some();
            if limited {
                tracing::info!(
                    "budgets and rate limits are counted by this process alone (no store): \
                     other instances count their own, and a restart starts them again"
                );
            }
            model.budget(MemoryLedger::new())
        }
    }
}

/// Whom an editor's sessions in a shared store belong to: `named`, else the machine's user
/// (`local:{user}`, a name no other way in gives: `$USER`, else `$LOGNAME`, else the user id).
fn acp_principal(named: Option<&str>) -> Result<agent_tower::context::Principal, BoxError> {
    let name = match named {
        Some(name) => name.to_owned(),
        None => {
            let user = ["USER", "LOGNAME"]
                .iter()
                .find_map(|variable| std::env::var(variable).ok().filter(|u| !u.is_empty()));
            #[cfg(unix)]
            let user = user.or_else(|| Some(format!("uid-{}", rustix::process::getuid().as_raw())));
            let user = user.ok_or(
                "--store may be shared: name whose sessions these are with --principal (neither \
                 $USER nor $LOGNAME is set)",
            )?;
            format!("local:{user}")
        }
    };
    agent_tower::context::Principal::user(&name)
        .map_err(|e| format!("--principal `{name}`: {e}").into())
}

/// `sessions.db` in the user's data directory (created if missing).
fn default_session_store() -> Result<String, BoxError> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(std::path::PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".local/share"))
        })
        .ok_or(
            "neither $XDG_DATA_HOME nor $HOME is set: pass --store sqlite://path or --store none",
        )?;
    let dir = data.join("agent-tower");
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create {}: {e}; pass --store", dir.display()))?;
    Ok(format!("sqlite://{}", dir.join("sessions.db").display()))
}

/// The store's URL without its password.
fn store_name(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://…{}", &url[..scheme], &url[at..]),
        _ => url.to_owned(),
    }
}

/// What a command serves: the model, the tools, what is asked about, and the spans' names.
type Backend = (BoxModel, ToolRouter, Policy, agent_tower::trace::TraceLayer);

/// The stack of an agent bridged over `protocol` (`--agent`): its model side (silent for at most
/// `idle` while it streams), its tool side (for every call), and a person asked about the calls
/// `asks` picks, besides what `rules` say.
fn bridged<M, T, F>(
    model: M,
    tools: T,
    asks: F,
    protocol: &'static str,
    idle: Duration,
    rules: Policy,
) -> Backend
where
    M: agent_tower::model::ModelService + Clone + Send + Sync + 'static,
    M::Error: Into<BoxError>,
    M::Future: Send + 'static,
    M::Events: Send + 'static,
    M::StreamError: Into<BoxError>,
    T: tower::Service<ToolCall, Response = agent_tower::tool::ToolOutput>
        + Clone
        + Send
        + Sync
        + 'static,
    T::Error: Into<BoxError>,
    T::Future: Send + 'static,
    F: Fn(&ToolCall) -> bool + Send + Sync + 'static,
{
    (
        boxed(
            tower::ServiceBuilder::new()
                .layer(IdleTimeoutLayer::new(idle))
                .service(model),
        ),
        ToolRouter::new().fallback(tools),
        rules.ask_if(asks),
        agent_tower::trace::TraceLayer::new()
            .model(protocol)
            .provider(protocol),
    )
}

/// The stack a command runs: the bridged agent `bridged`, or the agent the flags define (its
/// model, instructions, tools, sub-agents and rules; `lent`: sessions may bring tools of their
/// own), its calls accounted for in `books`, what its rules ask about (its sub-agents' included)
/// asked of `approver`.
async fn agent_stack<A>(
    bridged: Option<Backend>,
    model: &ModelArgs,
    settings: &AgentSettings,
    lent: bool,
    books: &ModelBooks,
    approver: A,
) -> Result<DemoStack<BoxModel, A>, BoxError>
where
    A: Approve + Clone + Send + Sync + 'static,
    A::Error: Into<BoxError>,
    A::Future: Send + 'static,
{
    let mut options = agent_tower::model::ModelOptions::default();
    options.temperature = model.temperature;
    options.max_output_tokens = model.max_tokens;
    // One agent of the command (the agent, or one of its sub-agents) with every layer.
    let stack = |service, tools, demo, policy, trace, instructions: Option<String>| {
        let stack = if demo {
            demo::stack(service, tools)
        } else {
            Stack::new(service, tools).model_layer(demo::citations())
        };
        let stack = stack
            .policy(policy)
            .trace(trace)
            .model_options(options.clone())
            .acp(agent_tower::acp::AcpLayer::new().context_window(model.context_window))
            .approver(approver.clone());
        match instructions {
            Some(instructions) => stack.instructions(instructions),
            None => stack,
        }
    };
    if let Some((service, tools, policy, trace)) = bridged {
        return Ok(stack(
            service,
            tools,
            false,
            policy,
            trace,
            settings.instructions()?,
        ));
    }
    let (all, defaults, demo) = model.tools(settings.demo_tools).await?;
    let (service, policy, trace) = (
        model.service(books),
        settings.policy(&defaults),
        model.trace(),
    );
    let names = |tools: &ToolRouter| tools.specs().into_iter().map(|spec| spec.name);
    let mut offered = all.clone();
    let mut named = Vec::new();
    for subagent in &settings.subagents {
        let name = &subagent.name;
        if offered.specs().iter().any(|spec| &spec.name == name) {
            return Err(format!("--subagent {name}: the agent has a tool of that name").into());
        }
        let tools = select(
            &format!("--subagent {name}: tool"),
            &subagent.tools,
            all.clone(),
        )?;
        named.extend(names(&tools));
        let instructions = subagent.instructions()?;
        let agent = stack(
            service.clone(),
            tools,
            demo,
            policy.clone(),
            trace.clone(),
            instructions,
        )
        .build();
        offered = offered.tool(AgentTool::new(name, &subagent.description, agent));
    }
    let offered = settings.offered(offered)?;
    named.extend(names(&offered));
    named.sort();
    named.dedup();
    settings.check_rules(&named, lent)?;
    Ok(stack(
        service,
        offered,
        demo,
        policy,
        trace,
        settings.instructions()?,
    ))
}

/// Whether `name` is 1 to `max` ASCII letters, digits and bytes of `also`: what clients and
/// models take as a tool's name.
fn is_name(name: &str, max: usize, also: &[u8]) -> bool {
    (1..=max).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || also.contains(&b))
}

/// A name MCP takes as a tool's (`--name`).
fn parse_agent_name(name: &str) -> Result<String, String> {
    if is_name(name, 128, b"_-.") {
        Ok(name.to_owned())
    } else {
        Err(
            "a name is 1 to 128 letters, digits, `_`, `-` or `.` (MCP clients call it as a tool)"
                .to_owned(),
        )
    }
}

/// What `GET /capabilities` declares: the stack's, under the agent's name. A bridged agent's
/// tools are its own, called inside it: only its approvals are known, and they take no edited
/// arguments (ACP's permission answer is an option, not new arguments: an edited call is refused).
fn command_capabilities(
    stack: Capabilities,
    bridged: bool,
    settings: &AgentSettings,
) -> Capabilities {
    let identity = agent_tower::agui::capabilities::Identity {
        name: Some(
            settings
                .name
                .clone()
                .unwrap_or_else(|| "agent-tower".to_owned()),
        ),
        description: settings.description.clone(),
        kind: Some("agent-tower".to_owned()),
        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        ..Default::default()
    };
    let human_in_the_loop =
        stack
            .human_in_the_loop
            .map(|asks| agent_tower::agui::capabilities::HumanInTheLoop {
                approve_with_edits: if bridged {
                    Some(false)
                } else {
                    asks.approve_with_edits
                },
                ..asks
            });
    Capabilities {
        identity: Some(identity),
        tools: if bridged { None } else { stack.tools },
        execution: if bridged { None } else { stack.execution },
        human_in_the_loop,
        ..stack
    }
}

async fn run_server(args: Serve) -> Result<(), BoxError> {
    let max_turns =
        std::num::NonZeroU32::new(args.max_turns).ok_or("--max-turns must be at least 1")?;
    // What waits for a person (an interrupt, resumable for --interrupt-ttl): what the rules ask
    // about, or of a bridged agent what it asks permission for.
    let mut acp_agent = None;
    let acp_agent_set_up = !args.agent_env.is_empty() || args.agent_auth.is_some();
    if acp_agent_set_up && !matches!(args.agent, Some(WebAgent::Acp(_))) {
        return Err("--agent-env and --agent-auth set up an --agent acp:…; there is none".into());
    }
    let takes_token = match &args.agent {
        Some(WebAgent::A2a(_)) => true,
        Some(WebAgent::Acp(command)) => command.is_remote(),
        None => false,
    };
    if args.agent_token_env.is_some() && !takes_token {
        return Err(
            "--agent-token-env is the token of an --agent a2a:… or acp:<ws url>; there is none"
                .into(),
        );
    }
    let bridge = match &args.agent {
        Some(WebAgent::A2a(url)) => {
            let authorization = agent_authorization(args.agent_token_env.as_ref())?;
            Some(a2a_backend(url, authorization.as_deref(), &args.model, &args.settings).await?)
        }
        Some(WebAgent::Acp(command)) => {
            tracing::info!(timeout = %humantime::format_duration(args.agent_start_timeout), "starting the ACP agent: {command:?}");
            let mut command = command.clone().start_timeout(args.agent_start_timeout);
            for (name, value) in &args.agent_env {
                command = match value {
                    Some(value) => command.env(name, value),
                    None => command.inherit_env(name),
                };
            }
            if let Some(method) = &args.agent_auth {
                command = command.authenticate(method);
            }
            let token = args.agent_token_env.as_ref();
            let (bridge, backend) =
                acp_backend(command, token, &args.model, &args.settings).await?;
            acp_agent = Some(bridge);
            Some(backend)
        }
        None => None,
    };
    let bridged = bridge.is_some();
    // The store first: budgets count in it.
    let store = if matches!(args.store.as_str(), "none" | "memory") {
        None
    } else {
        Some(agent_tower::store::RunStore::open(&args.store).await?)
    };
    let metrics = agent_tower::metrics::Metrics::with_groups(metrics_groups(&args.metrics_groups)?);
    let books = ModelBooks {
        budget: budget_of(store.as_ref(), &args.model),
        metrics: Some(metrics.clone()),
        store: store.clone(),
    };
    let approver = InterruptApprover::new(args.interrupt_ttl);
    let stack = agent_stack(bridge, &args.model, &args.settings, false, &books, approver)
        .await?
        .max_turns(max_turns)
        .detail(args.error_detail);
    let capabilities = command_capabilities(stack.capabilities(), bridged, &args.settings);
    let runs = CancellationToken::new();
    let mut engine = Runs::new(stack.build())
        .busy_thread(match args.busy_thread {
            BusyChoice::Reject => BusyThread::Reject,
            BusyChoice::Queue => BusyThread::Queue,
            BusyChoice::Interrupt => BusyThread::Interrupt,
            BusyChoice::Rollback => BusyThread::Rollback,
        })
        .max_run(args.max_run_events, args.max_run_bytes)
        .max_live_runs(args.max_live_runs)
        .per_principal(principal_limits(&args))
        .shutdown_token(runs.clone())
        .lease(args.lease);
    if let Some(titles) = args.model.titles(&books) {
        engine = engine.title_model(titles);
    }
    // Every setting is checked, and the store opened, before the address is taken.
    let tokens = bearer_tokens(&args)?;
    let jwt = match (&args.jwt_jwks, &args.jwt_issuer, &args.jwt_audience) {
        (Some(jwks), Some(issuer), Some(audience)) => Some(
            agent_tower::server::Jwt::new(jwks, issuer, audience)
                .await?
                .algorithms(&args.jwt_algorithms)?
                .principal_claim(&args.jwt_claim),
        ),
        (None, None, None) => None,
        // Half a JWT setting would be ignored, and the server open to whoever it meant to keep out.
        _ => {
            return Err(
                "--jwt-jwks, --jwt-issuer and --jwt-audience go together: give all three \
                        (or none)"
                    .into(),
            );
        }
    };
    let mut kept = None;
    let memory_bounds = [
        ("--memory-runs", args.memory_runs != 10_000),
        ("--memory-bytes", args.memory_bytes != 256 * 1024 * 1024),
    ];
    if let Some(store) = store {
        for (flag, _) in memory_bounds.iter().filter(|(_, given)| *given) {
            tracing::warn!("{flag} is ignored: runs are kept in the store");
        }
        tracing::info!(store = %store_name(&args.store), "runs are kept in the store");
        store.on_commit(metrics.store_commits());
        store.min_free_disk(args.store_min_free);
        store.durability(args.durability.level());
        kept = Some(store.clone());
        if args.retain_runs.is_some() || args.retain_threads.is_some() {
            let ages = (args.retain_runs, args.retain_threads);
            tokio::spawn(retain(store.clone(), ages, runs.clone()));
        }
        engine = engine.log(store);
    } else {
        tracing::info!(
            runs = args.memory_runs,
            bytes = args.memory_bytes,
            "runs are kept in memory (bounded, until the process exits)"
        );
        engine = engine.log(
            agent_tower::runs::MemoryLog::new()
                .max_runs(args.memory_runs)
                .max_bytes(args.memory_bytes),
        );
        args.durability.ignored();
        if args.retain_runs.is_some() || args.retain_threads.is_some() {
            tracing::warn!(
                "--retain-runs and --retain-threads are ignored: runs in memory are bounded, and \
                 gone when the process exits"
            );
        }
    }
    if let Some((webhooks, secret)) = args.webhooks.webhooks()? {
        if kept.is_none() {
            tracing::warn!(
                "webhooks not delivered when the process exits are lost with --store memory"
            );
        }
        engine = engine.notify(webhooks);
        let deliverer = agent_tower::webhook::Deliverer::new(engine.run_log().clone(), secret)
            .schedule(args.webhooks.webhook_retries.clone())
            .timeout(args.webhooks.webhook_timeout)
            .observer(metrics.webhooks());
        tokio::spawn(deliverer.run(runs.clone()));
    }
    // The schedules of the store (`--schedule`'s and those put through `/schedules`) are begun
    // by every instance, each occurrence once.
    let scheduler = agent_tower::schedule::Scheduler::new(engine.clone());
    for schedule in &args.schedules {
        scheduler.put(schedule).await?;
    }
    tokio::spawn(scheduler.run(runs.clone()));
    let draining = engine.clone();
    let mut server = AguiServer::with_runs(engine)
        .budget(books.budget)
        .path(args.path.clone())
        .keep_alive(args.keep_alive.max(Duration::from_secs(1)))
        .body_limit(args.body_limit)
        .body_timeout(args.body_timeout)
        .max_messages(args.max_messages)
        .on_disconnect(match args.on_disconnect {
            DisconnectChoice::Cancel => OnDisconnect::Cancel,
            DisconnectChoice::Continue => OnDisconnect::Continue,
        })
        .rejoin_grace(args.rejoin_grace)
        .allow_origins(&args.allow_origins)?
        .allow_hosts(&args.allow_hosts)?
        .metrics(metrics)
        .capabilities(capabilities)
        .ready_unless(move || {
            let down = acp_agent.as_ref()?.availability().err()?;
            Some(agent_tower::server::NotReady::new(
                down.kind().code(),
                down.to_string(),
            ))
        })
        .access_log(true)
        .dev_page(!args.no_ui)
        .mcp(!args.no_mcp)
        .a2a(!args.no_a2a)
        .acp(!args.no_acp);
    let authenticated = tokens.is_some() || jwt.is_some();
    if let Some(tokens) = tokens {
        server = server.auth(tokens);
    }
    if let Some(jwt) = jwt {
        server = server.authenticate(jwt);
    }
    for (from, to) in &args.principal_aliases {
        server = server
            .principal_alias(from, to)
            .map_err(|e| format!("--principal-alias {from}={to}: {e}"))?;
    }
    let listener = tokio::net::TcpListener::bind(args.addr.as_str())
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
    let bound = listener.local_addr()?;
    if !authenticated && !bound.ip().is_loopback() {
        tracing::warn!(
            addr = %bound,
            "bound beyond loopback without --auth-token-env: anyone who reaches the address can \
             start runs and answer interrupts"
        );
    }
    if args.allow_hosts.is_empty() && !bound.ip().is_loopback() {
        tracing::warn!(
            addr = %bound,
            "bound beyond loopback without --allow-host: every Host is answered; list the names \
             clients use to refuse DNS rebinding"
        );
        server = server.allow_any_host();
    }
    let router = server.into_router();

    tracing::info!(
        addr = %bound,
        path = %args.path,
        "serving AG-UI (POST {} for runs, GET /ws, GET /health, GET /ready, GET /metrics)",
        args.path
    );
    if !args.no_mcp {
        tracing::info!("serving MCP at /mcp: the agent as one tool");
    }
    if !args.no_a2a {
        tracing::info!(
            "serving A2A at /a2a (JSON-RPC and HTTP+JSON), its card at /.well-known/agent-card.json"
        );
    }
    if !args.no_acp {
        tracing::info!("serving ACP at /acp: editors over a WebSocket or Streamable HTTP");
    }
    let (stopping, stopped) = tokio::sync::oneshot::channel();
    let connections = Connections::new()
        .header_timeout(args.header_timeout)
        .write_timeout(args.write_timeout)
        .max_connections(args.max_connections as usize);
    // The engine, not the connections, decides what becomes of the runs in flight.
    let serving = tokio::spawn(connections.serve(
        listener,
        router,
        CancellationToken::new(),
        async move {
            let signal = shutdown_signal().await;
            tracing::info!(%signal, "shutting down: no new runs; runs in flight go on until the drain timeout");
            let _ = stopping.send(());
        },
    ));
    if stopped.await.is_err() {
        // The server stopped by itself.
        return Ok(serving.await??);
    }
    let drain = args.drain_timeout;
    let deadline = tokio::time::Instant::now() + drain;
    match draining.hand_over(drain).await {
        Ok(0) => {}
        Ok(runs) => tracing::info!(runs, "runs in flight were handed over"),
        Err(error) => {
            tracing::warn!(%error, "runs in flight could not be released: they are continued elsewhere once this instance's lease runs out")
        }
    }
    runs.cancel();
    // Every response has been told to end (its run ended, or goes on elsewhere): they end at an
    // event boundary, given a moment to be written even when the drain took all its time.
    let responses_end = deadline.max(tokio::time::Instant::now() + RESPONSES_END);
    if tokio::time::timeout_at(responses_end, serving)
        .await
        .is_err()
    {
        tracing::warn!(
            drain_timeout = %humantime::format_duration(drain),
            "responses still open after the drain timeout: exiting"
        );
    }
    if let Some(store) = kept {
        // The file alone then holds every run: a copy of it is a backup.
        match store.checkpoint().await {
            Ok(()) => tracing::debug!("the store's log was folded into its file"),
            Err(error) => tracing::warn!(%error, "the store's log stays beside its file"),
        }
    }
    Ok(())
}

/// `agent-tower export`: the thread, then its runs' events, as JSON lines on stdout.
/// `agent-tower schedules` (no `webhooks`) or `agent-tower webhooks`: their JSON lines.
async fn list_operations(store: &StoreUrl, webhooks: Option<&WebhookList>) -> Result<(), BoxError> {
    use agent_tower::runs::{Outbox, ScheduleBook};
    use std::io::Write;
    let opened = agent_tower::store::RunStore::open(&store.url).await?;
    let lines: Vec<serde_json::Value> = match webhooks {
        None => (opened.list().await?.iter())
            .map(agent_tower::runs::ScheduleRecord::json)
            .collect(),
        Some(list) => {
            let run = list.run.as_deref().map(agent_tower::id::RunId::from);
            (opened.notices(run.as_ref(), list.limit).await?.iter())
                .map(agent_tower::runs::NoticeRecord::json)
                .collect()
        }
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in lines {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

async fn export_thread(export: &Export) -> Result<(), BoxError> {
    use agent_tower::runs::RunLog;
    use std::io::Write;
    let store = agent_tower::store::RunStore::open(&export.store.url).await?;
    let thread = agent_tower::id::ThreadId::from(export.thread.as_str());
    let Some(record) = store.thread(&thread).await? else {
        return Err(format!("no thread `{}` in the store", export.thread).into());
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let head = serde_json::json!({
        "threadId": record.thread_id.as_str(),
        "principal": record.principal,
        "messages": record.messages,
        "state": record.state,
    });
    writeln!(out, "{head}")?;
    let mut events = 0_u64;
    for run in &record.runs {
        let mut after = 0;
        while let Some(page) = store.read(&run.run_id, after, 512).await? {
            let Some(last) = page.events.last() else {
                break;
            };
            after = last.seq;
            for event in &page.events {
                let line = format!(
                    r#"{{"runId":{},"seq":{},"event":{}}}"#,
                    serde_json::to_string(run.run_id.as_str())?,
                    event.seq,
                    event.json_str()
                );
                writeln!(out, "{line}")?;
                events += 1;
            }
        }
    }
    out.flush()?;
    drop(out);
    tracing::info!(thread = %export.thread, runs = record.runs.len(), events, "thread exported");
    Ok(())
}

/// `age` before now.
fn ago(age: Duration) -> std::time::SystemTime {
    std::time::SystemTime::now()
        .checked_sub(age)
        .unwrap_or(std::time::UNIX_EPOCH)
}

/// Deletes what `store` keeps past its retention (`ages`: of ended runs, of idle threads), now
/// and then every hour (or every such age, when shorter), until `stop`.
async fn retain(
    store: agent_tower::store::RunStore,
    ages: (Option<Duration>, Option<Duration>),
    stop: CancellationToken,
) {
    let (runs, threads) = ages;
    let shortest = runs
        .into_iter()
        .chain(threads)
        .min()
        .unwrap_or(Duration::MAX);
    let every = shortest
        .min(Duration::from_secs(3600))
        .max(Duration::from_secs(1));
    loop {
        if let Some(age) = runs {
            match store.prune(ago(age)).await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "runs past their retention deleted"),
                Err(error) => {
                    tracing::warn!(%error, "runs past their retention could not be deleted")
                }
            }
        }
        if let Some(age) = threads {
            match store.prune_threads(ago(age)).await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "threads past their retention deleted"),
                Err(error) => {
                    tracing::warn!(%error, "threads past their retention could not be deleted");
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// The tokens named by `--auth-token-env` and `--operator-token-env`, if any.
/// What each principal may use, as the command's options say.
fn principal_limits(args: &Serve) -> PrincipalLimits {
    let mut limits = PrincipalLimits::new();
    limits.live_runs = args.principal_live_runs;
    limits.runs_per_minute = args.principal_runs_per_minute;
    limits.log_bytes_per_day = args.principal_log_bytes_per_day;
    if limits != PrincipalLimits::new() && matches!(args.store.as_str(), "none" | "memory") {
        tracing::info!(
            "principals' limits are counted by this process alone (no store): other instances \
             count their own, and a restart starts them again"
        );
    }
    limits
}

/// Who a token authenticates, as the command's options say.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    Run,
    Operator,
    Front,
}

impl TokenKind {
    fn add(
        self,
        tokens: BearerTokens,
        name: Option<&str>,
        token: &str,
    ) -> Result<BearerTokens, BoxError> {
        match (self, name) {
            (Self::Run, None) => tokens.add(Scope::Run, token),
            (Self::Run, Some(name)) => tokens.add_named(name, Scope::Run, token),
            (Self::Operator, None) => tokens.add(Scope::Operator, token),
            (Self::Operator, Some(name)) => tokens.add_named(name, Scope::Operator, token),
            (Self::Front, name) => tokens.add_front(name.unwrap_or("front"), token),
        }
    }
}

/// `FROM=TO`, split at the last `=` (a JWT's issuer may hold one; a principal's name does not).
fn parse_alias(value: &str) -> Result<(String, String), String> {
    match value.rsplit_once('=') {
        Some((from, to)) if !from.is_empty() && !to.is_empty() => {
            Ok((from.to_owned(), to.to_owned()))
        }
        _ => Err(format!(
            "`{value}` is not `FROM=TO` (two principals' names)"
        )),
    }
}

fn parse_metrics_group(value: &str) -> Result<(String, Vec<String>), String> {
    let (group, names) = value.split_once('=').ok_or("expected GROUP=NAME,NAME…")?;
    let names: Vec<String> = names
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        return Err(format!("the group `{group}` names no principal"));
    }
    Ok((group.trim().to_owned(), names))
}

fn metrics_groups(
    groups: &[(String, Vec<String>)],
) -> Result<agent_tower::metrics::PrincipalGroups, BoxError> {
    groups
        .iter()
        .try_fold(
            agent_tower::metrics::PrincipalGroups::new(),
            |all, (group, names)| all.group(group, names),
        )
        .map_err(|e| format!("--metrics-group: {e}").into())
}

fn bearer_tokens(args: &Serve) -> Result<Option<BearerTokens>, BoxError> {
    let mut tokens = BearerTokens::new();
    for (kind, flag, var) in [
        (TokenKind::Run, "--auth-token-env", &args.auth_token_env),
        (
            TokenKind::Operator,
            "--operator-token-env",
            &args.operator_token_env,
        ),
        (TokenKind::Front, "--front-token-env", &args.front_token_env),
    ] {
        let Some(var) = var else { continue };
        let value = std::env::var(var)
            .map_err(|_| format!("{flag} names `{var}`, which is not set (or not UTF-8)"))?;
        let mut any = false;
        for entry in value
            .split([',', ' ', '\n', '\t'])
            .filter(|t| !t.is_empty())
        {
            let (name, token) = match entry.split_once(':') {
                Some((name, token)) => (Some(name), token),
                None => (None, entry),
            };
            tokens = kind
                .add(tokens, name, token)
                .map_err(|e| format!("{flag} `{var}`: {e}"))?;
            any = true;
        }
        if !any {
            return Err(format!("{flag} names `{var}`, which holds no token").into());
        }
    }
    if let Some(path) = &args.token_file {
        tokens = token_file(tokens, path)?;
    }
    if tokens.is_empty() {
        return Ok(None);
    }
    if !tokens.has(Scope::Operator) {
        tracing::warn!(
            "no operator token: /interrupts and the answers given out of band are refused to every \
             token, and each principal sees only its own threads"
        );
    }
    Ok(Some(tokens))
}

/// The tokens of the file at `path` (`run|operator|front NAME TOKEN` lines), added to `tokens`.
fn token_file(mut tokens: BearerTokens, path: &std::path::Path) -> Result<BearerTokens, BoxError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--token-file {shown} cannot be read: {e}"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)?.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "--token-file {shown} may be read by others (mode {:o}): `chmod 600` it",
                mode & 0o777
            )
            .into());
        }
    }
    let mut any = false;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        any = true;
        let at = |why: String| format!("--token-file {shown}, line {}: {why}", number + 1);
        let words: Vec<&str> = line.split_whitespace().collect();
        let [kind, name, token] = words[..] else {
            return Err(at("expected `run|operator|front NAME TOKEN`".to_owned()).into());
        };
        let kind = match kind {
            "run" => TokenKind::Run,
            "operator" => TokenKind::Operator,
            "front" => TokenKind::Front,
            other => {
                return Err(at(format!("`{other}` is not run, operator or front")).into());
            }
        };
        tokens = kind
            .add(tokens, Some(name), token)
            .map_err(|e| at(e.to_string()))?;
    }
    if !any {
        // Authentication would silently be off: everyone would share one space.
        return Err(format!("--token-file {shown} holds no token").into());
    }
    Ok(tokens)
}

/// SIGTERM (`docker stop`, systemd, Kubernetes) or Ctrl-C; its name.
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = tokio::signal::ctrl_c() => "SIGINT",
            },
            Err(error) => {
                tracing::warn!(%error, "SIGTERM cannot be handled; Ctrl-C still can");
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}
