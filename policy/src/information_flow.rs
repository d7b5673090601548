//! Information flow: which tools' results third parties can write (`trust = "untrusted"` on a
//! source), which tools' calls have consequences (`sink = true`, or a list of the source's tool
//! patterns), and the `[[flow]]` rules that say what happens when text from the first reaches
//! the arguments of the second (`deny`, `approve` or `log`), for a whole call or one argument
//! (`to = ["email.send#to"]`).
//!
//! The policy only describes; the supervisor records untrusted results and checks sink calls
//! (`supervisor/src/tools/flow/`).

use crate::document::TableReader;
use crate::error::{PolicyError, PolicyWarning};
use crate::principal::ToolRule;
use crate::source_location::Location;
use crate::tool_pattern::{may_match_with_prefix, tool_matches, validate_tool_pattern};

/// The shortest run of characters taken from an untrusted result that counts as a flow when it
/// appears in a sink's argument (documented in docs/policy-reference.md).
pub const MIN_MATCH_CHARS: usize = 8;

/// The sources' `trust`/`sink` keys and the `[[flow]]` rules, together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InformationFlow {
    /// Tools whose results third parties can write: `<source>.*` for a source with
    /// `trust = "untrusted"`.
    pub untrusted: Vec<ToolRule>,
    /// Tools whose calls have consequences: `<source>.*` for `sink = true`, `<source>.<p>`
    /// for each pattern of `sink = ["p", ...]`.
    pub sinks: Vec<ToolRule>,
    /// `[[flow]]` rules, in file order.
    pub rules: Vec<FlowRule>,
}

/// One `[[flow]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRule {
    /// Its `name`, or `flow[<index>]` (its place among the `[[flow]]` tables).
    pub name: String,
    /// Patterns of the tools the data comes from.
    pub from: Vec<ToolRule>,
    /// The sinks (and arguments) it may not reach unchecked.
    pub to: Vec<FlowTarget>,
    pub action: FlowAction,
    /// Where the table is; `None` for rules made in code.
    pub at: Option<Location>,
}

/// One entry of a rule's `to`: a tool pattern, and perhaps one argument of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowTarget {
    pub tool: ToolRule,
    /// `email.send#to`: `["to"]`; `x.y#message.to`: `["message", "to"]`. `None`: every
    /// argument.
    pub argument: Option<Vec<String>>,
}

/// What a rule does with a flow it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FlowAction {
    /// The call is made; the flow is in the trace and the audit log.
    Log,
    /// The call waits for an approver's decision (`[approvals]`).
    Approve,
    /// The call fails with `flow_denied`.
    Deny,
}

impl FlowAction {
    pub fn as_str(self) -> &'static str {
        match self {
            FlowAction::Log => "log",
            FlowAction::Approve => "approve",
            FlowAction::Deny => "deny",
        }
    }
}

impl FlowTarget {
    /// Parses `tool` or `tool#argument.path`.
    pub fn parse(written: &str) -> Result<FlowTarget, String> {
        let (tool, argument) = match written.split_once('#') {
            None => (written, None),
            Some((tool, argument)) => {
                if argument.contains('#') {
                    return Err(format!(
                        "\"{written}\" has more than one `#`: write `tool#argument`, e.g. \"email.send#to\""
                    ));
                }
                let path: Vec<String> = argument.split('.').map(str::to_owned).collect();
                if path.iter().any(|p| {
                    p.is_empty() || p.contains('*') || p.chars().any(|c| c.is_whitespace())
                }) {
                    return Err(format!(
                        "\"{written}\": the argument after `#` must be a property name, or names joined by `.` (e.g. \"email.send#to\", \"mail.send#message.to\"), without `*` or spaces"
                    ));
                }
                (tool, Some(path))
            }
        };
        validate_tool_pattern(tool).map_err(|e| e.to_string())?;
        Ok(FlowTarget {
            tool: ToolRule::from(tool),
            argument,
        })
    }

    /// Whether this target covers the argument at `path` (its object keys from the top, array
    /// indices left out) of a call of `tool`.
    pub fn covers(&self, tool: &str, path: &[&str]) -> bool {
        tool_matches(&self.tool.pattern, tool)
            && match &self.argument {
                None => true,
                Some(want) => {
                    want.len() <= path.len() && want.iter().zip(path).all(|(w, p)| w == p)
                }
            }
    }
}

impl InformationFlow {
    /// Keys of a `[[flow]]` table.
    pub(crate) const FLOW_KEYS: &'static [&'static str] = &["name", "from", "to", "action"];

    /// Whether anything is configured (nothing is recorded or checked otherwise).
    pub fn is_empty(&self) -> bool {
        self.untrusted.is_empty() && self.sinks.is_empty() && self.rules.is_empty()
    }

    /// Whether a rule makes calls wait for an approver (`action = "approve"`).
    pub fn asks_approval(&self) -> bool {
        self.rules.iter().any(|r| r.action == FlowAction::Approve)
    }

    /// Whether the results of `tool` are recorded: its source is untrusted, or a rule's
    /// `from` names it.
    pub fn records(&self, tool: &str) -> bool {
        self.untrusted
            .iter()
            .chain(self.rules.iter().flat_map(|r| r.from.iter()))
            .any(|r| tool_matches(&r.pattern, tool))
    }

    /// Whether calls of `tool` are checked: it is a sink, or a rule's `to` names it.
    pub fn checks(&self, tool: &str) -> bool {
        self.sinks.iter().any(|r| tool_matches(&r.pattern, tool))
            || self
                .rules
                .iter()
                .flat_map(|r| r.to.iter())
                .any(|t| tool_matches(&t.tool.pattern, tool))
    }

    /// What these settings say of `tool`, a line each (`airlock policy explain`).
    pub fn explain(&self, tool: &str) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(rule) = self
            .untrusted
            .iter()
            .find(|r| tool_matches(&r.pattern, tool))
        {
            lines.push(format!(
                "its results are untrusted (trust = \"untrusted\", {rule}): text from them is recorded and checked against sink calls"
            ));
        }
        if let Some(rule) = self.sinks.iter().find(|r| tool_matches(&r.pattern, tool)) {
            lines.push(format!(
                "it is a sink ({rule}): its arguments are checked for text from untrusted results before it is called"
            ));
        }
        for rule in &self.rules {
            let from = rule.from.iter().any(|f| tool_matches(&f.pattern, tool));
            let to: Vec<String> = rule
                .to
                .iter()
                .filter(|t| tool_matches(&t.tool.pattern, tool))
                .map(|t| match &t.argument {
                    Some(path) => format!("argument `{}`", path.join(".")),
                    None => "every argument".to_owned(),
                })
                .collect();
            let at = rule
                .at
                .as_ref()
                .map(|at| format!(" ({at})"))
                .unwrap_or_default();
            if from {
                lines.push(format!(
                    "flow rule \"{}\"{at}: text from its results reaching {} is {}",
                    rule.name,
                    rule.to
                        .iter()
                        .map(|t| format!(
                            "\"{}{}\"",
                            t.tool.pattern,
                            t.argument
                                .as_ref()
                                .map(|p| format!("#{}", p.join(".")))
                                .unwrap_or_default()
                        ))
                        .collect::<Vec<_>>()
                        .join(", "),
                    action_words(rule.action)
                ));
            }
            if !to.is_empty() {
                lines.push(format!(
                    "flow rule \"{}\"{at}: text from {} in {} is {}",
                    rule.name,
                    rule.from
                        .iter()
                        .map(|f| format!("\"{}\"", f.pattern))
                        .collect::<Vec<_>>()
                        .join(", "),
                    to.join(", "),
                    action_words(rule.action)
                ));
            }
        }
        lines
    }

    /// The strictest rule for a flow from a result of `source` into the argument at `path`
    /// of a call of `sink` (deny over approve over log; the first in file order among equals).
    pub fn rule_for(&self, source: &str, sink: &str, path: &[&str]) -> Option<&FlowRule> {
        let mut best: Option<&FlowRule> = None;
        for rule in &self.rules {
            if rule.from.iter().any(|f| tool_matches(&f.pattern, source))
                && rule.to.iter().any(|t| t.covers(sink, path))
                && best.is_none_or(|b| rule.action > b.action)
            {
                best = Some(rule);
            }
        }
        best
    }

    /// The strictest action of the rules that would apply to some flow into a call of `sink`
    /// from any of `sources` (whatever the argument): what a check that could not be made
    /// falls back to.
    pub fn strictest_for(&self, sources: &[&str], sink: &str) -> Option<&FlowRule> {
        let mut best: Option<&FlowRule> = None;
        for rule in &self.rules {
            if sources
                .iter()
                .any(|s| rule.from.iter().any(|f| tool_matches(&f.pattern, s)))
                && rule.to.iter().any(|t| tool_matches(&t.tool.pattern, sink))
                && best.is_none_or(|b| rule.action > b.action)
            {
                best = Some(rule);
            }
        }
        best
    }
}

fn action_words(action: FlowAction) -> &'static str {
    match action {
        FlowAction::Deny => "denied (the call fails with `flow_denied`)",
        FlowAction::Approve => "held for an approver's decision",
        FlowAction::Log => "logged (the call is made)",
    }
}

/// Reads a source's `trust` and `sink` keys into `flow`; `name` is the source's name.
pub(crate) fn read_source_keys(
    table: &TableReader<'_>,
    name: &str,
    flow: &mut InformationFlow,
) -> Result<(), PolicyError> {
    if let Some(field) = table.get("trust") {
        match field.string("\"trusted\" or \"untrusted\"")? {
            "untrusted" => flow.untrusted.push(ToolRule {
                pattern: format!("{name}.*"),
                at: Some(field.location()),
            }),
            "trusted" => {}
            other => {
                return Err(field.invalid(format!(
                    "unknown trust \"{other}\": write \"untrusted\" for a source whose results third parties can write (web pages, mail, issue comments), or \"trusted\" (the default)"
                )));
            }
        }
    }
    if let Some(field) = table.get("sink") {
        match field.value() {
            toml::de::DeValue::Boolean(true) => flow.sinks.push(ToolRule {
                pattern: format!("{name}.*"),
                at: Some(field.location()),
            }),
            toml::de::DeValue::Boolean(false) => {}
            _ => {
                for entry in
                    field.array("true, false, or an array of the source's tool patterns")?
                {
                    let pattern = entry.string("a tool pattern such as \"send_*\"")?;
                    validate_tool_pattern(pattern).map_err(|source| {
                        PolicyError::InvalidToolPattern {
                            at: entry.location(),
                            key: entry.path().to_owned(),
                            source,
                        }
                    })?;
                    flow.sinks.push(ToolRule {
                        pattern: format!("{name}.{pattern}"),
                        at: Some(entry.location()),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Reads one `[[flow]]` table; `index` is its place among them (its default name).
/// `approvers`: whether `[approvals]` names anyone (an `approve` rule needs someone).
pub(crate) fn read_flow_rule(
    table: &TableReader<'_>,
    index: usize,
    approvers: bool,
) -> Result<FlowRule, PolicyError> {
    let name = match table.get("name") {
        Some(field) => {
            let name = field.string("a rule name")?;
            if name.is_empty() || name.len() > 100 || name.chars().any(char::is_control) {
                return Err(
                    field.invalid("a rule name is 1 to 100 characters, without control characters")
                );
            }
            name.to_owned()
        }
        None => format!("flow[{index}]"),
    };
    let from_field = table.require("from")?;
    let mut from = Vec::new();
    for entry in from_field.array("an array of tool patterns of untrusted tools")? {
        let pattern = entry.string("a tool pattern such as \"web.*\"")?;
        validate_tool_pattern(pattern).map_err(|source| PolicyError::InvalidToolPattern {
            at: entry.location(),
            key: entry.path().to_owned(),
            source,
        })?;
        from.push(ToolRule {
            pattern: pattern.to_owned(),
            at: Some(entry.location()),
        });
    }
    let to_field = table.require("to")?;
    let mut to = Vec::new();
    for entry in to_field.array("an array of sink patterns (\"tool\" or \"tool#argument\")")? {
        let written = entry.string("a sink pattern such as \"email.send#to\"")?;
        let mut target = FlowTarget::parse(written).map_err(|reason| entry.invalid(reason))?;
        target.tool.at = Some(entry.location());
        to.push(target);
    }
    if from.is_empty() || to.is_empty() {
        let empty = if from.is_empty() {
            from_field
        } else {
            to_field
        };
        return Err(empty.invalid("a flow rule needs at least one pattern in `from` and in `to`"));
    }
    let action_field = table.require("action")?;
    let action = match action_field.string("\"deny\", \"approve\" or \"log\"")? {
        "deny" => FlowAction::Deny,
        "approve" => FlowAction::Approve,
        "log" => FlowAction::Log,
        other => {
            return Err(action_field.invalid(format!(
                "unknown action \"{other}\": write \"deny\" (the call fails), \"approve\" (it waits for an approver) or \"log\" (it is made and recorded)"
            )));
        }
    };
    if action == FlowAction::Approve && !approvers {
        return Err(action_field.invalid(
            "action \"approve\" needs someone to approve, and [approvals] names no approvers, so every such call would wait and expire denied: add `[approvals] approvers = [\"user\", \"@group\"]`, or use \"deny\"",
        ));
    }
    Ok(FlowRule {
        name,
        from,
        to,
        action,
        at: Some(table.location()),
    })
}

/// Warnings for rule patterns that name no source of the policy (a misspelt namespace): like
/// a grant for a source that does not exist, such a rule never applies.
pub(crate) fn unmatched_warnings(
    flow: &InformationFlow,
    sources: &[&str],
    warnings: &mut Vec<PolicyWarning>,
) {
    let names_a_source = |pattern: &str| {
        sources
            .iter()
            .chain(
                crate::sources::RESERVED_NAMESPACES
                    .iter()
                    .map(|(name, _)| name),
            )
            .any(|s| may_match_with_prefix(pattern, &format!("{s}.")))
    };
    for rule in &flow.rules {
        let patterns = rule
            .from
            .iter()
            .map(|r| ("from", r))
            .chain(rule.to.iter().map(|t| ("to", &t.tool)));
        for (key, pattern) in patterns {
            if !names_a_source(&pattern.pattern)
                && let Some(at) = &pattern.at
            {
                warnings.push(PolicyWarning {
                    at: at.clone(),
                    message: format!(
                        "flow rule \"{}\": `{key}` pattern \"{}\" matches no tool source of this policy, so it never applies; check the namespace against the [[server]], [[openapi]] and [[graphql]] names",
                        rule.name, pattern.pattern
                    ),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::test_support::{assert_refused, parse};

    const SOURCES: &str = r#"
[[principal]]
name = "p"
users = [1000]
allow = ["*"]

[[server]]
name = "web"
command = "/usr/bin/true"
trust = "untrusted"

[[server]]
name = "email"
command = "/usr/bin/true"
sink = ["send", "delete_*"]
"#;

    #[test]
    fn sources_and_rules_are_read() {
        let policy = parse(&format!(
            "{SOURCES}
[[flow]]
name = \"no-exfil\"
from = [\"web.*\"]
to = [\"email.send#to\", \"email.delete_*\"]
action = \"deny\"

[[flow]]
from = [\"web.*\"]
to = [\"email.send\"]
action = \"log\"
"
        ))
        .unwrap();
        let flow = &policy.information_flow;
        let patterns =
            |rules: &[ToolRule]| rules.iter().map(|r| r.pattern.clone()).collect::<Vec<_>>();
        assert_eq!(patterns(&flow.untrusted), ["web.*"]);
        assert_eq!(patterns(&flow.sinks), ["email.send", "email.delete_*"]);
        assert_eq!(flow.rules.len(), 2);
        assert_eq!(flow.rules[0].name, "no-exfil");
        assert_eq!(flow.rules[1].name, "flow[1]");
        assert_eq!(flow.rules[0].to[0].argument, Some(vec!["to".to_owned()]));
        assert!(flow.records("web.fetch"));
        assert!(!flow.records("email.send"));
        assert!(flow.checks("email.send"));
        assert!(flow.checks("email.delete_all"));
        assert!(!flow.checks("web.fetch"));
        // The recipient: deny wins; the body: only the log rule.
        let to = flow.rule_for("web.fetch", "email.send", &["to"]).unwrap();
        assert_eq!(to.action, FlowAction::Deny);
        let body = flow.rule_for("web.fetch", "email.send", &["body"]).unwrap();
        assert_eq!(body.action, FlowAction::Log);
        assert!(flow.rule_for("email.read", "email.send", &["to"]).is_none());
        assert!(policy.warnings.is_empty(), "{:?}", policy.warnings);
    }

    #[test]
    fn argument_targets() {
        let t = FlowTarget::parse("mail.send#message.to").unwrap();
        assert!(t.covers("mail.send", &["message", "to"]));
        assert!(t.covers("mail.send", &["message", "to", "address"]));
        assert!(!t.covers("mail.send", &["message"]));
        assert!(!t.covers("mail.send", &["message", "body"]));
        assert!(!t.covers("mail.other", &["message", "to"]));
        assert!(FlowTarget::parse("a.b#").is_err());
        assert!(FlowTarget::parse("a.b#x#y").is_err());
        assert!(FlowTarget::parse("a.b#x..y").is_err());
        assert!(FlowTarget::parse("a.b#x*").is_err());
        assert!(FlowTarget::parse("a.b?#x").is_err());
    }

    #[test]
    fn bad_keys_are_refused_naming_them() {
        assert_refused(
            &format!(
                "{SOURCES}\n[[flow]]\nfrom = [\"web.*\"]\nto = [\"email.send\"]\naction = \"block\"\n"
            ),
            "20:10",
            "flow[0].action",
            "unknown action \"block\"",
        );
        assert_refused(
            &format!(
                "{SOURCES}\n[[flow]]\nfrom = [\"web.*\"]\nto = [\"email.send#\"]\naction = \"deny\"\n"
            ),
            "19:7",
            "flow[0].to[0]",
            "the argument after `#`",
        );
        assert_refused(
            &format!("{SOURCES}\n[[flow]]\nfrom = [\"web.*\"]\naction = \"deny\"\n"),
            "17",
            "flow[0].to",
            "",
        );
        assert_refused(
            &SOURCES.replace("trust = \"untrusted\"", "trust = \"maybe\""),
            "10:9",
            "server[0].trust",
            "unknown trust \"maybe\"",
        );
        assert_refused(
            &SOURCES.replace("sink = [\"send\", \"delete_*\"]", "sink = [\"se?nd\"]"),
            "15:9",
            "server[1].sink[0]",
            "",
        );
    }

    #[test]
    fn approve_needs_approvers_and_explain_says_what_applies() {
        let rule = "\n[[flow]]\nname = \"ask\"\nfrom = [\"web.*\"]\nto = [\"email.send#to\"]\naction = \"approve\"\n";
        assert_refused(
            &format!("{SOURCES}{rule}"),
            "21:10",
            "flow[0].action",
            "[approvals] names no approvers",
        );
        let policy = parse(&format!("{SOURCES}{rule}\n[approvals]\napprovers = [0]\n")).unwrap();
        let flow = &policy.information_flow;
        assert!(flow.asks_approval());
        let web = flow.explain("web.fetch");
        assert_eq!(web.len(), 2, "{web:?}");
        assert!(web[0].starts_with("its results are untrusted"), "{web:?}");
        assert!(
            web[1].contains("reaching \"email.send#to\" is held for an approver"),
            "{web:?}"
        );
        let send = flow.explain("email.send");
        assert_eq!(send.len(), 2, "{send:?}");
        assert!(send[0].starts_with("it is a sink"), "{send:?}");
        assert!(
            send[1].contains("from \"web.*\" in argument `to`"),
            "{send:?}"
        );
        assert!(flow.explain("email.read").is_empty());
        let caller = crate::Caller {
            uid: 1000,
            gid: 1000,
            groups: vec![],
        };
        let text = policy.explain(caller, "email.send").to_string();
        assert!(text.contains("\ninformation flow: it is a sink"), "{text}");
    }

    #[test]
    fn a_pattern_naming_no_source_is_a_warning() {
        let policy = parse(&format!(
            "{SOURCES}\n[[flow]]\nfrom = [\"wbe.*\"]\nto = [\"email.send\"]\naction = \"deny\"\n"
        ))
        .unwrap();
        assert_eq!(policy.warnings.len(), 1, "{:?}", policy.warnings);
        let warning = policy.warnings[0].to_string();
        assert!(
            warning.contains("\"wbe.*\" matches no tool source"),
            "{warning}"
        );
    }
}
