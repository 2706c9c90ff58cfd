//! The Agent Card: who the agent is, where and how it is reached, what it needs of a caller.

use std::collections::HashMap;

use a2a_types::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, HttpAuthSecurityScheme,
    SecurityScheme, TRANSPORT_PROTOCOL_HTTP_JSON, TRANSPORT_PROTOCOL_JSONRPC, VERSION,
};
use axum::http::HeaderMap;

use crate::agui::capabilities::Identity;

/// The name of the bearer scheme in the card.
const BEARER: &str = "bearer";

/// The card of the agent `identity` names, reached at `base` (`https://host`): both bindings at
/// [`PATH`](super::PATH), streaming, no push notifications, and the bearer scheme when the server
/// authenticates.
pub(super) fn card(identity: &Identity, base: &str, authenticated: bool) -> AgentCard {
    let name = identity
        .name
        .clone()
        .unwrap_or_else(|| "agent-tower".to_owned());
    let description = identity
        .description
        .clone()
        .unwrap_or_else(|| "An agent: it answers, and may call its own tools to.".to_owned());
    let url = format!("{base}{}", super::PATH);
    let interface = |binding: &str| AgentInterface {
        url: url.clone(),
        protocol_binding: binding.to_owned(),
        protocol_version: VERSION.to_owned(),
        tenant: None,
    };
    let bearer = authenticated.then(|| {
        let scheme = SecurityScheme::HttpAuth(HttpAuthSecurityScheme {
            scheme: "Bearer".to_owned(),
            description: Some("A token of this server (or a JWT of its issuer).".to_owned()),
            bearer_format: None,
        });
        HashMap::from([(BEARER.to_owned(), scheme)])
    });
    let modes = |modes: &[&str]| modes.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>();
    AgentCard {
        name: name.clone(),
        description: description.clone(),
        version: identity
            .version
            .clone()
            .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned()),
        supported_interfaces: vec![
            interface(TRANSPORT_PROTOCOL_JSONRPC),
            interface(TRANSPORT_PROTOCOL_HTTP_JSON),
        ],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: None,
            extended_agent_card: Some(false),
        },
        default_input_modes: modes(&["text/plain", "application/json"]),
        default_output_modes: modes(&["text/plain"]),
        skills: vec![AgentSkill {
            id: name.clone(),
            name,
            description,
            tags: vec!["agent".to_owned()],
            examples: None,
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }],
        provider: None,
        documentation_url: identity.documentation_url.clone(),
        icon_url: None,
        security_requirements: bearer
            .is_some()
            .then(|| vec![HashMap::from([(BEARER.to_owned(), Vec::new())])]),
        security_schemes: bearer,
        signatures: None,
    }
}

/// Where the client reached the server: `https://` when a proxy in front says so
/// (`X-Forwarded-Proto`), and the `Host` it asked for (the server refuses hosts it does not
/// serve before this).
pub(super) fn base(headers: &HeaderMap) -> String {
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .filter(|proto| matches!(*proto, "http" | "https"))
        .unwrap_or("http");
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    format!("{scheme}://{host}")
}
