//! The stacks the `agent-tower` command runs: the [scripted model](crate::model::scripted) and
//! the [demo tools](crate::tool::demo) with every layer around them, as a deployment would stack
//! them. They are here to read, to try the server and the ACP agent without a model, and to test
//! against; build your own stack from the layers rather than on these types, whose shape follows
//! the command.
//!
//! - [`serve`]: what `agent-tower serve` runs over AG-UI.
//! - [`acp`]: what `agent-tower acp` runs for an editor.

pub mod acp;
pub mod serve;
