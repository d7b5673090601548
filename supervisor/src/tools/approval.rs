//! Approvals: calls of tools a principal's policy marks `approve = [...]` wait for a person's
//! decision. The call pipeline holds such a call (after the journal: a call answered from the
//! record changes nothing and needs no one's yes) until the execution has a decision for it;
//! an approval is asked for the call, not the tool, so the same call made again by a re-run
//! gets the decision already made.

pub use crate::agent_api::Verdict;
use crate::agent_api::{ToolError, ToolErrorCode};
use std::collections::HashMap;

/// The decision on one call of an execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The tool it was asked for (a decision for another tool at that call id does not apply:
    /// the program took another path).
    pub tool: String,
    /// The hash of the arguments it was asked for (likewise).
    pub args_hash: String,
    pub verdict: Verdict,
    pub by: Option<String>,
    pub reason: Option<String>,
}

impl Decision {
    /// What the program gets for a call that was not approved; `None` when it was.
    pub fn refusal(&self) -> Option<ToolError> {
        let reason = self
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        match self.verdict {
            Verdict::Approved => None,
            Verdict::Denied => Some(
                ToolError::new(
                    ToolErrorCode::Denied,
                    format!(
                        "{} denied this call of `{}`{reason}",
                        self.by.as_deref().unwrap_or("an approver"),
                        self.tool
                    ),
                )
                .with_hint("do without it, or ask the approver what they would accept"),
            ),
            Verdict::Expired => Some(
                ToolError::new(
                    ToolErrorCode::Denied,
                    format!(
                        "nobody approved this call of `{}` in time, so it is denied",
                        self.tool
                    ),
                )
                .with_hint("run it again when an approver is there to decide ([approvals] ttl)"),
            ),
        }
    }
}

/// The decisions an execution's calls have, by call id.
#[derive(Debug, Clone, Default)]
pub struct Decisions {
    pub by_call: HashMap<u32, Decision>,
}

impl Decisions {
    /// The decision on call `id` of `tool` with arguments hashed `args_hash`.
    pub fn get(&self, id: u32, tool: &str, args_hash: &str) -> Option<&Decision> {
        self.by_call
            .get(&id)
            .filter(|d| d.tool == tool && d.args_hash == args_hash)
    }
}

/// `apr_` and 96 random bits: an approval's id.
pub fn new_approval_id() -> String {
    let seed = crate::determinism::random_seed();
    format!("apr_{}", crate::journal::canonical::hex(&seed[..12]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_and_expiries_are_denied_tool_errors_that_say_who_and_why() {
        let decision = |verdict, by: Option<&str>| Decision {
            tool: "pay.send".into(),
            args_hash: "h".into(),
            verdict,
            by: by.map(str::to_owned),
            reason: Some("too much".into()),
        };
        assert!(
            decision(Verdict::Approved, Some("alice"))
                .refusal()
                .is_none()
        );
        let denied = decision(Verdict::Denied, Some("alice")).refusal().unwrap();
        assert_eq!(denied.code, ToolErrorCode::Denied);
        assert_eq!(
            denied.message,
            "alice denied this call of `pay.send` (too much)"
        );
        let expired = decision(Verdict::Expired, None).refusal().unwrap();
        assert_eq!(expired.code, ToolErrorCode::Denied);
        assert!(expired.message.contains("in time"), "{}", expired.message);
        let mut decisions = Decisions::default();
        decisions
            .by_call
            .insert(3, decision(Verdict::Approved, Some("a")));
        assert!(decisions.get(3, "pay.send", "h").is_some());
        assert!(decisions.get(3, "pay.send", "other").is_none());
        assert!(decisions.get(3, "pay.other", "h").is_none());
        assert!(new_approval_id().starts_with("apr_"));
        assert_eq!(new_approval_id().len(), 4 + 24);
    }
}
