//! What an editor is told about a tool call: title, kind, locations, plans.

use std::{collections::HashMap, path::PathBuf};

use agent_client_protocol::v1::schema::{
    self as acp, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, ToolCallLocation,
};
use serde_json::Value;

use crate::tool::{ToolCall, ToolKind, ToolSpec};

/// The kinds of the tools a layer knows, for calls of tools it was told about.
#[derive(Debug, Clone, Default)]
pub(crate) struct Kinds(HashMap<String, ToolKind>);

impl Kinds {
    pub(crate) fn learn(&mut self, specs: &[ToolSpec]) {
        for spec in specs {
            self.0.insert(spec.name.clone(), spec.effective_kind());
        }
    }

    pub(crate) fn of(&self, tool: &str) -> ToolKind {
        self.0
            .get(tool)
            .copied()
            .unwrap_or_else(|| ToolKind::guess(tool))
    }

    /// The kind of `call`'s tool: a tool the layer was told about, else one its run lends (an
    /// editor's MCP servers), else a guess from its name.
    pub(crate) fn of_call(&self, call: &ToolCall) -> ToolKind {
        call.kind_given(self.0.get(&call.name).copied())
    }
}

/// Our kind in ACP's vocabulary (the same words).
pub(crate) fn acp_kind(kind: ToolKind) -> acp::ToolKind {
    match kind {
        ToolKind::Read => acp::ToolKind::Read,
        ToolKind::Edit => acp::ToolKind::Edit,
        ToolKind::Delete => acp::ToolKind::Delete,
        ToolKind::Move => acp::ToolKind::Move,
        ToolKind::Search => acp::ToolKind::Search,
        ToolKind::Execute => acp::ToolKind::Execute,
        ToolKind::Think => acp::ToolKind::Think,
        ToolKind::Fetch => acp::ToolKind::Fetch,
        ToolKind::SwitchMode => acp::ToolKind::SwitchMode,
        ToolKind::Other => acp::ToolKind::Other,
    }
}

const PATH_ARGUMENTS: [&str; 6] = [
    "path",
    "file_path",
    "filePath",
    "file",
    "filename",
    "target",
];

/// The file a call works on, from the usual argument names.
fn path(arguments: &Value) -> Option<&str> {
    PATH_ARGUMENTS
        .iter()
        .find_map(|key| arguments.get(key).and_then(Value::as_str))
        .filter(|path| !path.is_empty())
}

/// The title an editor shows: the tool's name, and the file it works on when there is one; the
/// question a [`Question`](crate::permission::Question) asks.
pub(crate) fn title(tool: &str, arguments: &Value) -> String {
    if let Some(question) = crate::permission::Question::of(tool, arguments) {
        return question.message;
    }
    match path(arguments) {
        Some(path) => format!("{tool} {path}"),
        None => tool.to_owned(),
    }
}

/// The `tool_call` update that announces a call of `tool` with `arguments`: its title, kind,
/// input and locations, status `pending`.
pub(crate) fn announced(id: String, tool: &str, kind: ToolKind, arguments: Value) -> acp::ToolCall {
    acp::ToolCall::new(id, title(tool, &arguments))
        .name(tool.to_owned())
        .kind(acp_kind(kind))
        .locations(locations(&arguments))
        .raw_input(arguments)
}

/// Where the call works, so that an editor can follow it: a path argument, with its line.
pub(crate) fn locations(arguments: &Value) -> Vec<ToolCallLocation> {
    let Some(path) = path(arguments) else {
        return Vec::new();
    };
    let line = ["line", "line_number", "start_line"]
        .iter()
        .find_map(|key| arguments.get(key).and_then(Value::as_u64))
        .and_then(|line| u32::try_from(line).ok());
    vec![ToolCallLocation::new(PathBuf::from(path)).line(line)]
}

/// The tool names whose calls are plans.
const PLAN_TOOLS: [&str; 6] = [
    "plan",
    "todo",
    "todos",
    "todo_write",
    "write_todos",
    "update_plan",
];

/// A call of a plan tool as the complete plan: tools named `plan`, `todo`, `todo_write`,
/// `write_todos` or `update_plan` whose arguments carry a list under `entries`, `todos`, `plan`
/// or `steps`; each item a string or an object with `content` (or `step`, `title`), and
/// optionally `status` (`pending`, `in_progress`, `completed`) and `priority` (`high`, `medium`,
/// `low`).
pub(crate) fn plan(tool: &str, arguments: &Value) -> Option<Plan> {
    if !PLAN_TOOLS.contains(&tool) {
        return None;
    }
    let items = ["entries", "todos", "plan", "steps"]
        .iter()
        .find_map(|key| arguments.get(key).and_then(Value::as_array))?;
    let entries = items.iter().filter_map(entry).collect();
    Some(Plan::new(entries))
}

fn entry(item: &Value) -> Option<PlanEntry> {
    if let Some(content) = item.as_str() {
        return Some(PlanEntry::new(
            content,
            PlanEntryPriority::Medium,
            PlanEntryStatus::Pending,
        ));
    }
    let content = ["content", "step", "title", "description"]
        .iter()
        .find_map(|key| item.get(key).and_then(Value::as_str))?;
    let status = match item.get("status").and_then(Value::as_str) {
        Some("in_progress" | "in-progress" | "active" | "running") => PlanEntryStatus::InProgress,
        Some("completed" | "done" | "complete") => PlanEntryStatus::Completed,
        _ => PlanEntryStatus::Pending,
    };
    let priority = match item.get("priority").and_then(Value::as_str) {
        Some("high") => PlanEntryPriority::High,
        Some("low") => PlanEntryPriority::Low,
        _ => PlanEntryPriority::Medium,
    };
    Some(PlanEntry::new(content, priority, status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_give_titles_and_locations() {
        let args = json!({"path": "/src/lib.rs", "line": 12});
        assert_eq!(title("read_file", &args), "read_file /src/lib.rs");
        let locations = locations(&args);
        assert_eq!(locations.len(), 1);
        assert_eq!(locations[0].path, PathBuf::from("/src/lib.rs"));
        assert_eq!(locations[0].line, Some(12));
        assert!(super::locations(&json!({"a": 1})).is_empty());
        assert_eq!(title("add", &json!({"a": 1})), "add");
    }

    #[test]
    fn plan_tools_become_complete_plans() {
        let plan = plan(
            "todo_write",
            &json!({"todos": [
                {"content": "read", "status": "completed", "priority": "high"},
                {"content": "write", "status": "in_progress"},
                "test",
            ]}),
        )
        .expect("a plan");
        let statuses: Vec<_> = plan.entries.iter().map(|e| e.status.clone()).collect();
        assert_eq!(
            statuses,
            [
                PlanEntryStatus::Completed,
                PlanEntryStatus::InProgress,
                PlanEntryStatus::Pending
            ]
        );
        assert_eq!(plan.entries[0].priority, PlanEntryPriority::High);
        assert_eq!(plan.entries[2].content, "test");
        assert!(super::plan("add", &json!({"todos": []})).is_none());
    }
}
