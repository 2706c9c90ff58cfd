//! The integration tests, one binary: each file of `tests/` is a module here, compiled with the
//! features it needs (`cargo test --all-features` runs them all).

mod support;

#[cfg(feature = "cli")]
mod a2a_bridge;
#[cfg(feature = "cli")]
mod a2a_door;
#[cfg(all(feature = "acp", feature = "test-util", feature = "demo"))]
mod acp;
#[cfg(feature = "cli")]
mod acp_clients;
#[cfg(feature = "cli")]
mod acp_remote;
#[cfg(feature = "cli")]
mod agent_config;
#[cfg(all(feature = "agui", feature = "test-util"))]
mod agui;
#[cfg(feature = "anthropic")]
mod anthropic;
#[cfg(all(feature = "server", feature = "test-util", feature = "demo"))]
mod auth;
#[cfg(all(feature = "agui", feature = "test-util"))]
mod balance;
#[cfg(feature = "cli")]
mod bridge;
#[cfg(all(feature = "server", feature = "demo"))]
mod browser;
#[cfg(all(feature = "cli", feature = "store"))]
mod budgets;
#[cfg(all(
    feature = "agui",
    feature = "acp",
    feature = "truncate",
    feature = "map-error",
    feature = "post-process",
    feature = "state",
    feature = "trace"
))]
mod builders;
#[cfg(feature = "cli")]
mod cli_errors;
#[cfg(feature = "cli")]
mod config;
#[cfg(all(feature = "server", feature = "demo"))]
mod connections;
#[cfg(feature = "cli")]
mod copilotkit;
#[cfg(feature = "cli")]
mod dev_page;
mod docs;
#[cfg(all(feature = "store", feature = "server", feature = "demo"))]
mod durable;
#[cfg(all(
    feature = "fuzzing",
    feature = "server",
    feature = "openai",
    feature = "anthropic",
    feature = "gemini",
    feature = "acp"
))]
mod fuzz_seeds;
#[cfg(feature = "gemini")]
mod gemini;
#[cfg(feature = "cli")]
mod js_client;
#[cfg(all(feature = "jwt", feature = "demo"))]
mod jwt;
#[cfg(feature = "cli")]
mod logs;
#[cfg(all(feature = "map-error", feature = "test-util"))]
mod map_error;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(feature = "cli")]
mod mcp_door;
#[cfg(feature = "cli")]
mod metrics;
#[cfg(feature = "openai")]
mod openai;
#[cfg(feature = "cli")]
mod otlp;
#[cfg(all(feature = "agui", feature = "permission", feature = "test-util"))]
mod permission;
#[cfg(all(feature = "agui", feature = "post-process", feature = "test-util"))]
mod post_process;
#[cfg(all(feature = "store", feature = "server", feature = "demo"))]
mod principals;
#[cfg(feature = "proto")]
mod proto;
mod readme;
#[cfg(feature = "cli")]
mod release;
#[cfg(all(feature = "cli", feature = "test-util"))]
mod restart;
#[cfg(all(feature = "runs", feature = "test-util"))]
mod runs;
#[cfg(feature = "cli")]
mod schedules;
#[cfg(feature = "cli")]
mod serve_openai;
#[cfg(feature = "cli")]
mod serve_providers;
#[cfg(all(feature = "server", feature = "test-util", feature = "demo"))]
mod server;
#[cfg(feature = "cli")]
mod signals;
#[cfg(all(feature = "store", feature = "server", feature = "demo"))]
mod spine;
#[cfg(feature = "store")]
mod store;
#[cfg(all(feature = "store", feature = "server", feature = "demo"))]
mod store_down;
#[cfg(all(feature = "stack", feature = "subagent", feature = "test-util"))]
mod subagent;
#[cfg(all(feature = "cli", feature = "test-util"))]
mod takeover;
#[cfg(all(
    feature = "trace",
    feature = "server",
    feature = "test-util",
    feature = "demo"
))]
mod trace;
#[cfg(all(feature = "agui", feature = "truncate", feature = "test-util"))]
mod truncate;
#[cfg(all(feature = "stack", feature = "typed-tools", feature = "test-util"))]
mod typed_tools;
#[cfg(feature = "cli")]
mod webhooks;
