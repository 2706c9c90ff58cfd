//! The session modes (`ask`, `auto`, `read-only`), the `mode` config option that mirrors them,
//! and the slash commands the agent advertises.

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode, SessionModeState,
    UnstructuredCommandInput,
};

use crate::permission::Mode;

/// The session modes: id, name, description, and the permission [`Mode`] each one runs in.
const MODES: [(&str, &str, &str, Mode); 3] = [
    (
        "ask",
        "Ask",
        "Asks before every tool that writes.",
        Mode::Interactive,
    ),
    (
        "auto",
        "Auto",
        "Runs tools as the permission policy allows.",
        Mode::Agentic,
    ),
    (
        "read-only",
        "Read-only",
        "Refuses every tool that writes.",
        Mode::ReadOnly,
    ),
];

pub(super) fn mode_id(mode: Mode) -> &'static str {
    MODES
        .iter()
        .find(|(.., m)| *m == mode)
        .map_or("auto", |(id, ..)| id)
}

pub(super) fn mode_of(id: &str) -> Option<Mode> {
    MODES
        .iter()
        .find(|(m, ..)| *m == id)
        .map(|(.., mode)| *mode)
}

pub(super) fn mode_state(mode: Mode) -> SessionModeState {
    let modes = MODES
        .iter()
        .map(|(id, name, description, _)| SessionMode::new(*id, *name).description(*description))
        .collect();
    SessionModeState::new(mode_id(mode), modes)
}

/// The `mode` config option: the same modes as `modes`, kept in sync.
pub(super) fn config_options(mode: Mode) -> Vec<SessionConfigOption> {
    let options: Vec<_> = MODES
        .iter()
        .map(|(id, name, description, _)| {
            SessionConfigSelectOption::new(*id, *name).description(*description)
        })
        .collect();
    vec![
        SessionConfigOption::select("mode", "Mode", mode_id(mode), options)
            .category(SessionConfigOptionCategory::Mode),
    ]
}

pub(super) fn commands() -> AvailableCommandsUpdate {
    AvailableCommandsUpdate::new(vec![
        AvailableCommand::new("mode", "Switch the session's mode: ask, auto or read-only.").input(
            AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(
                "ask | auto | read-only",
            )),
        ),
    ])
}
