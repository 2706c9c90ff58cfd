use std::{collections::HashMap, sync::Arc};

use crate::tool::{Access, ToolCall, ToolKind, ToolSpec};

/// What the policy says about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Run it.
    Allow,
    /// Ask the approver first.
    Ask,
    /// Refuse it; the model is told.
    Deny,
}

/// How cautious the policy is with tools that write; named as an editor names it (`auto`,
/// `ask`, `read-only`) in JSON.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Mode {
    /// Rules and the default decide.
    #[default]
    #[serde(rename = "auto")]
    Agentic,
    /// Like agentic, but a writing tool the rules would allow is asked about.
    #[serde(rename = "ask")]
    Interactive,
    /// Writing tools are denied, whatever the rules say.
    #[serde(rename = "read-only")]
    ReadOnly,
}

impl Mode {
    /// The more cautious of `self` and `other`.
    #[must_use]
    pub fn stricter(self, other: Self) -> Self {
        let rank = |mode: Self| match mode {
            Self::Agentic => 0,
            Self::Interactive => 1,
            Self::ReadOnly => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }

    /// The mode a run's request asks for (`forwardedProps.permission.mode`): a floor, never
    /// more permissive than what the server gives the run. It is how a run keeps its editor
    /// session's mode when another instance continues it after a crash.
    fn requested(run: &crate::context::RunContext) -> Option<Self> {
        let props = run.extensions.get::<crate::context::ForwardedProps>()?;
        serde_json::from_value(props.0.get("permission")?.get("mode")?.clone()).ok()
    }
}

/// A tool-name pattern: `*` matches any run of characters, `?` one character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob(String);

impl Glob {
    /// A pattern such as `delete_*`, `*_file` or `read_?`.
    pub fn new(pattern: impl Into<String>) -> Self {
        Self(pattern.into())
    }

    /// Whether `name` matches.
    #[must_use]
    pub fn matches(&self, name: &str) -> bool {
        // Iterative wildcard matching with backtracking to the last `*`.
        let (p, n): (Vec<char>, Vec<char>) = (self.0.chars().collect(), name.chars().collect());
        let (mut pi, mut ni) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while ni < n.len() {
            if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
                pi += 1;
                ni += 1;
            } else if pi < p.len() && p[pi] == '*' {
                star = Some((pi, ni));
                pi += 1;
            } else if let Some((star_p, star_n)) = star {
                pi = star_p + 1;
                ni = star_n + 1;
                star = Some((star_p, star_n + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|&c| c == '*')
    }
}

/// Decides, per tool name, whether a call runs, is asked about or is refused.
///
/// The first rule whose pattern matches decides; without one, the default does (allow, unless
/// set). The [`Mode`] then applies to tools that write: read-only denies them, interactive turns
/// an allow into an ask. Whether a tool writes comes from its [`ToolSpec::kind`] (given with
/// [`tools`](Policy::tools)), or a guess from its name.
///
/// ```
/// use agent_tower::permission::{Action, Mode, Policy};
/// use agent_tower::tool::{ToolKind, ToolSpec};
///
/// let policy = Policy::new()
///     .rule("delete_*", Action::Deny)
///     .rule("send_email", Action::Ask)
///     .mode(Mode::Interactive)
///     .tools(&[ToolSpec::new("write_note", "..").kind(ToolKind::Edit)]);
/// assert_eq!(policy.decide("delete_repo"), Action::Deny);
/// assert_eq!(policy.decide("send_email"), Action::Ask);
/// assert_eq!(policy.decide("write_note"), Action::Ask, "interactive: writes are asked about");
/// assert_eq!(policy.decide("read_file"), Action::Allow);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<(Glob, Action)>,
    default: Option<Action>,
    mode: Mode,
    kinds: HashMap<String, ToolKind>,
    asks: Option<AskIf>,
}

/// A predicate over calls that asks for the ones it picks. It is only ever called, never left
/// half-changed by a panic: the policy stays unwind-safe whatever it captures.
#[derive(Clone)]
struct AskIf(Arc<dyn Fn(&ToolCall) -> bool + Send + Sync + std::panic::RefUnwindSafe>);

impl std::fmt::Debug for AskIf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AskIf(..)")
    }
}

impl Policy {
    /// No rules, allow by default, agentic.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule after the existing ones.
    #[must_use]
    pub fn rule(mut self, pattern: &str, action: Action) -> Self {
        self.rules.push((Glob::new(pattern), action));
        self
    }

    /// What happens to a tool no rule matches.
    #[must_use]
    pub fn default_action(mut self, action: Action) -> Self {
        self.default = Some(action);
        self
    }

    /// Asks about every call `predicate` picks (unless a rule or the mode denies it), whatever
    /// the rules by name say: for calls whose source knows they need a person, such as an agent
    /// bridged over ACP that asked permission for them
    /// ([`AcpBridge::asked`](crate::acp::client::AcpBridge::asked)).
    ///
    /// ```
    /// use agent_tower::permission::{Action, Policy};
    /// use agent_tower::tool::ToolCall;
    ///
    /// let policy = Policy::new().ask_if(|call: &ToolCall| call.arguments["path"] == "/etc/passwd");
    /// let call = |path: &str| ToolCall::new("read_file", serde_json::json!({"path": path}));
    /// assert_eq!(policy.decide_for(&call("/etc/passwd")), Action::Ask);
    /// assert_eq!(policy.decide_for(&call("notes.txt")), Action::Allow);
    /// ```
    #[must_use]
    pub fn ask_if<F>(mut self, predicate: F) -> Self
    where
        F: Fn(&ToolCall) -> bool + Send + Sync + 'static,
    {
        let predicate = std::panic::AssertUnwindSafe(predicate);
        self.asks = Some(AskIf(Arc::new(move |call: &ToolCall| {
            let predicate = &predicate; // the whole wrapper, not its field
            (predicate.0)(call)
        })));
        self
    }

    /// The mode.
    #[must_use]
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Learns what these tools do (their declared kinds).
    #[must_use]
    pub fn tools(mut self, specs: &[ToolSpec]) -> Self {
        for spec in specs {
            self.kinds.insert(spec.name.clone(), spec.effective_kind());
        }
        self
    }

    /// What `tool` does: its declared kind, else a guess from its name.
    #[must_use]
    pub fn kind(&self, tool: &str) -> ToolKind {
        self.kinds
            .get(tool)
            .copied()
            .unwrap_or_else(|| ToolKind::guess(tool))
    }

    /// Whether `tool` writes.
    #[must_use]
    pub fn access(&self, tool: &str) -> Access {
        self.kind(tool).access()
    }

    /// Whether a call of one of `tools` may be asked about: a rule, the default or the mode
    /// asks about one of them, or calls are picked by [`ask_if`](Policy::ask_if).
    #[must_use]
    pub fn may_ask(&self, tools: &[ToolSpec]) -> bool {
        self.asks.is_some()
            || tools
                .iter()
                .any(|spec| self.decide(&spec.name) == Action::Ask)
    }

    /// What to do with a call of `tool`.
    #[must_use]
    pub fn decide(&self, tool: &str) -> Action {
        self.decide_in(tool, self.access(tool), self.mode)
    }

    /// What to do with `call`: as [`decide`](Policy::decide), in the [`Mode`] the call's run
    /// brings in its extensions if it brings one (an editor session switched to read-only), else
    /// the policy's own, made stricter by the mode its request asks for
    /// (`forwardedProps.permission.mode`, which can only narrow it). A
    /// [`Question`](super::Question) is always asked.
    #[must_use]
    pub fn decide_for(&self, call: &ToolCall) -> Action {
        if call.name == super::Question::TOOL {
            // A question is the person's to answer: no rule or mode answers it for them.
            return Action::Ask;
        }
        let mode = call.run.extensions.get::<Mode>().copied();
        let mode = mode.unwrap_or(self.mode);
        let mode = Mode::requested(&call.run).map_or(mode, |floor| mode.stricter(floor));
        // A tool the call's run lends (an editor's MCP servers) is what its spec says.
        let access = call
            .kind_given(self.kinds.get(&call.name).copied())
            .access();
        match self.decide_in(&call.name, access, mode) {
            Action::Allow if self.asks.as_ref().is_some_and(|asks| (asks.0)(call)) => Action::Ask,
            action => action,
        }
    }

    fn decide_in(&self, tool: &str, access: Access, mode: Mode) -> Action {
        let action = self
            .rules
            .iter()
            .find(|(glob, _)| glob.matches(tool))
            .map(|(_, action)| *action)
            .or(self.default)
            .unwrap_or(Action::Allow);
        match (mode, access, action) {
            (Mode::ReadOnly, Access::Write, _) => Action::Deny,
            (Mode::Interactive, Access::Write, Action::Allow) => Action::Ask,
            (_, _, action) => action,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (pattern, name, matches) in [
            ("delete_*", "delete_file", true),
            ("delete_*", "undelete_file", false),
            ("*_file", "read_file", true),
            ("*_file", "read_files", false),
            ("read_?", "read_x", true),
            ("read_?", "read_xy", false),
            ("*", "", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("exact", "exact", true),
        ] {
            assert_eq!(
                Glob::new(pattern).matches(name),
                matches,
                "{pattern} ~ {name}"
            );
        }
    }

    #[test]
    fn first_rule_wins_then_default() {
        let policy = Policy::new()
            .rule("read_secret", Action::Deny)
            .rule("read_*", Action::Allow)
            .default_action(Action::Ask);
        assert_eq!(policy.decide("read_secret"), Action::Deny);
        assert_eq!(policy.decide("read_file"), Action::Allow);
        assert_eq!(policy.decide("launch"), Action::Ask);
    }

    #[test]
    fn modes_apply_to_writing_tools_only() {
        let specs = [
            ToolSpec::new("shell", "").kind(ToolKind::Execute),
            ToolSpec::new("grep", "").kind(ToolKind::Search),
        ];
        let readonly = Policy::new()
            .mode(Mode::ReadOnly)
            .rule("*", Action::Allow)
            .tools(&specs);
        assert_eq!(readonly.decide("shell"), Action::Deny);
        assert_eq!(readonly.decide("grep"), Action::Allow);
        assert_eq!(
            readonly.decide("delete_all"),
            Action::Deny,
            "the name says it writes"
        );
        let interactive = Policy::new().mode(Mode::Interactive).tools(&specs);
        assert_eq!(interactive.decide("shell"), Action::Ask);
        assert_eq!(interactive.decide("grep"), Action::Allow);
        let agentic = Policy::new().tools(&specs);
        assert_eq!(agentic.decide("shell"), Action::Allow);
    }

    #[test]
    fn a_run_may_bring_its_own_mode() {
        let policy = Policy::new().tools(&[ToolSpec::new("shell", "").kind(ToolKind::Execute)]);
        let mut call = ToolCall::new("shell", serde_json::json!({}));
        assert_eq!(policy.decide_for(&call), Action::Allow);
        call.run.extensions.insert(Mode::ReadOnly);
        assert_eq!(policy.decide_for(&call), Action::Deny);
        call.run.extensions.insert(Mode::Interactive);
        assert_eq!(policy.decide_for(&call), Action::Ask);
    }

    #[test]
    fn a_request_may_narrow_the_mode_and_never_widen_it() {
        let policy = Policy::new()
            .mode(Mode::Interactive)
            .tools(&[ToolSpec::new("shell", "").kind(ToolKind::Execute)]);
        let asking = |mode: &str| {
            let mut call = ToolCall::new("shell", serde_json::json!({}));
            call.run
                .extensions
                .insert(crate::context::ForwardedProps(serde_json::json!({
                    "permission": {"mode": mode},
                })));
            call
        };
        assert_eq!(policy.decide_for(&asking("auto")), Action::Ask, "not wider");
        assert_eq!(policy.decide_for(&asking("read-only")), Action::Deny);
        assert_eq!(policy.decide_for(&asking("nonsense")), Action::Ask);
        // The session's own mode, lent in process, is narrowed the same way.
        let mut lent = asking("ask");
        lent.run.extensions.insert(Mode::Agentic);
        assert_eq!(policy.decide_for(&lent), Action::Ask);
        let mut lent = asking("auto");
        lent.run.extensions.insert(Mode::Agentic);
        assert_eq!(policy.decide_for(&lent), Action::Allow);
    }

    #[test]
    fn a_question_is_asked_whatever_the_rules_and_the_mode() {
        let policy = Policy::new().rule("*", Action::Allow);
        let question = super::super::Question::new("Spend $500 on ads?");
        let mut call = ToolCall::new(super::super::Question::TOOL, question.arguments());
        assert_eq!(policy.decide_for(&call), Action::Ask);
        call.run.extensions.insert(Mode::ReadOnly);
        assert_eq!(policy.decide_for(&call), Action::Ask);
        let denying = Policy::new().default_action(Action::Deny);
        assert_eq!(denying.decide_for(&call), Action::Ask);
    }
}
