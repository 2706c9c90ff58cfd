//! A2A 1.0 ([a2a-protocol.org](https://a2a-protocol.org)) on the calling side: [`client`], any A2A
//! agent as a model service. (The serving side, the agent offered to other agents, is the
//! server's A2A door: [`AguiServer::a2a`](crate::server::AguiServer::a2a).)

pub mod client;
