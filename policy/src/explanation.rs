//! `airlock policy explain`: which principal admits a caller and which rule decides whether it
//! may call a tool, with the file and line of each, so an operator can see why without reading
//! every drop-in.

use std::fmt;

use crate::duration::format_duration_ms;
use crate::policy_file::Policy;
use crate::principal::{Principal, ToolDecision};

/// The caller an explanation is about, as the kernel would report it on the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// Why a caller may or may not call a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Explanation<'a> {
    /// No principal admits the caller: it is refused at connect.
    NotAdmitted { caller: Caller },
    /// The admitting principal and its decision for the tool.
    Decided {
        caller: Caller,
        principal: &'a Principal,
        /// How the principal matched: `uid 1000`, `group 27`, `users = ["*"]`.
        matched_by: String,
        tool: String,
        decision: ToolDecision<'a>,
        /// What the information-flow settings say of the tool (`trust`, `sink`, `[[flow]]`):
        /// one line each, none when they do not name it.
        flow: Vec<String>,
    },
}

impl Explanation<'_> {
    /// Whether the call would be allowed.
    pub fn allowed(&self) -> bool {
        matches!(
            self,
            Explanation::Decided {
                decision: ToolDecision::Allowed(_),
                ..
            }
        )
    }
}

impl Policy {
    /// Explains the decision for `caller` calling `tool` (`server.tool`).
    pub fn explain(&self, caller: Caller, tool: &str) -> Explanation<'_> {
        let Some(principal) = self.admit(caller.uid, caller.gid, &caller.groups) else {
            return Explanation::NotAdmitted { caller };
        };
        let matched_by = if principal.uids.contains(&caller.uid) {
            format!("uid {}", caller.uid)
        } else if principal.gids.contains(&caller.gid) {
            format!("primary group {}", caller.gid)
        } else if let Some(g) = caller.groups.iter().find(|g| principal.gids.contains(g)) {
            format!("supplementary group {g}")
        } else {
            "users = [\"*\"]".to_owned()
        };
        Explanation::Decided {
            flow: self.information_flow.explain(tool),
            decision: principal.decide(tool),
            caller,
            principal,
            matched_by,
            tool: tool.to_owned(),
        }
    }
}

impl fmt::Display for Explanation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Explanation::NotAdmitted { caller } => write!(
                f,
                "uid {} (gid {}, groups {:?}) is not admitted by any principal: its connections are refused.\nAdd the user or one of its groups to a [[principal]] to admit it.",
                caller.uid, caller.gid, caller.groups
            ),
            Explanation::Decided {
                principal,
                matched_by,
                tool,
                decision,
                flow,
                ..
            } => {
                let at = principal
                    .at
                    .as_ref()
                    .map(|at| format!(" ({at})"))
                    .unwrap_or_default();
                writeln!(
                    f,
                    "admitted by principal \"{}\"{at}, matched by {matched_by} (principals are tried in file order; the first that matches decides)",
                    principal.name
                )?;
                match decision {
                    ToolDecision::Allowed(rule) => {
                        write!(f, "{tool}: ALLOWED by allow pattern {rule}")?;
                        if let Some(approve) = principal.approval_rule(tool) {
                            write!(
                                f,
                                ", each call waiting for an approver's decision (approve pattern {approve})"
                            )?;
                        }
                    }
                    ToolDecision::Denied(rule) => write!(
                        f,
                        "{tool}: DENIED by deny pattern {rule} (deny wins over allow)"
                    )?,
                    ToolDecision::NotAllowed => write!(
                        f,
                        "{tool}: DENIED: no allow pattern of \"{}\" matches it (nothing is granted by default)",
                        principal.name
                    )?,
                }
                for line in flow {
                    write!(f, "\ninformation flow: {line}")?;
                }
                let l = &principal.limits;
                write!(
                    f,
                    "\nlimits: timeout {} ms (max {} ms), memory {} MiB, {} tool calls, output {} KiB and {} tokens, {} waiting executions for up to {}",
                    l.timeout_ms,
                    l.max_timeout_ms,
                    l.memory_bytes >> 20,
                    l.max_tool_calls,
                    l.max_output_bytes >> 10,
                    l.max_output_tokens,
                    l.max_waiting_executions,
                    format_duration_ms(l.waiting_ttl_ms)
                )?;
                let rate = |n: Option<u32>| n.map_or("no limit".to_owned(), |n| n.to_string());
                write!(
                    f,
                    "\nrates: executions per minute: {}, tool calls per minute: {}",
                    rate(principal.rates.executions_per_minute),
                    rate(principal.rates.tool_calls_per_minute)
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
[[principal]]
name = "ops"
users = [0]
allow = ["*"]

[[principal]]
name = "agents"
groups = [27]
allow = ["github.*"]
deny = ["github.delete_*"]
approve = ["github.merge_*"]
tool_calls_per_minute = 100

[approvals]
approvers = [0]
"#;

    fn caller(uid: u32, groups: &[u32]) -> Caller {
        Caller {
            uid,
            gid: uid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn names_the_principal_and_the_deciding_rule_with_their_places() {
        let policy = Policy::parse(POLICY, "/etc/airlock/policy.toml").unwrap();
        let denied = policy.explain(caller(1000, &[27]), "github.delete_repo");
        assert!(!denied.allowed());
        let text = denied.to_string();
        assert!(text.contains("admitted by principal \"agents\" (/etc/airlock/policy.toml:7:1), matched by supplementary group 27"), "{text}");
        assert!(text.contains("github.delete_repo: DENIED by deny pattern \"github.delete_*\" (/etc/airlock/policy.toml:11:9)"), "{text}");
        assert!(text.contains("tool calls per minute: 100"), "{text}");

        let allowed = policy.explain(caller(1000, &[27]), "github.get_issue");
        assert!(allowed.allowed());
        assert!(
            allowed
                .to_string()
                .contains("ALLOWED by allow pattern \"github.*\" (/etc/airlock/policy.toml:10:10)")
        );

        assert!(!allowed.to_string().contains("approver"));
        assert!(
            allowed
                .to_string()
                .contains("16 waiting executions for up to 1d")
        );

        let waits = policy.explain(caller(1000, &[27]), "github.merge_pr");
        assert!(waits.allowed());
        assert!(
            waits.to_string().contains("github.merge_pr: ALLOWED by allow pattern \"github.*\" (/etc/airlock/policy.toml:10:10), each call waiting for an approver's decision (approve pattern \"github.merge_*\" (/etc/airlock/policy.toml:12:12))"),
            "{waits}"
        );

        let nothing = policy.explain(caller(1000, &[27]), "time.now");
        assert!(
            nothing
                .to_string()
                .contains("no allow pattern of \"agents\" matches it")
        );

        let root = policy.explain(caller(0, &[27]), "github.delete_repo");
        assert!(root.allowed(), "the first matching principal decides");

        let stranger = policy.explain(caller(4242, &[]), "github.get_issue");
        assert!(!stranger.allowed());
        assert!(
            stranger
                .to_string()
                .contains("is not admitted by any principal")
        );
    }
}
