//! Principals: who may connect (by uid, primary gid or supplementary gid, as the kernel reports
//! them for the socket peer), which tools they may call, which of those calls wait for an
//! approver's decision, the limits their executions run under, and how often they may run
//! programs and call tools.

use std::fmt;

use toml::de::DeValue;

use crate::account::{AccountError, effective_uid, gid_of_group, uid_of_user};
use crate::document::{Field, TableReader};
use crate::error::PolicyError;
use crate::limit_settings::LimitSettings;
use crate::source_location::Location;
use crate::tool_pattern::{
    matches_every_with_prefix, may_match_with_prefix, tool_matches, validate_tool_pattern,
};

/// One `allow`, `deny` or `approve` pattern and where it was written (for
/// `airlock policy explain`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRule {
    /// The pattern, e.g. `github.*`.
    pub pattern: String,
    /// Where it is written; `None` for rules made in code (tests).
    pub at: Option<Location>,
}

impl From<&str> for ToolRule {
    fn from(pattern: &str) -> Self {
        ToolRule {
            pattern: pattern.to_owned(),
            at: None,
        }
    }
}

impl PartialEq<&str> for ToolRule {
    fn eq(&self, other: &&str) -> bool {
        self.pattern == *other
    }
}

impl fmt::Display for ToolRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.at {
            Some(at) => write!(f, "\"{}\" ({at})", self.pattern),
            None => write!(f, "\"{}\"", self.pattern),
        }
    }
}

/// Which rule decides whether a principal may call a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolDecision<'a> {
    /// An `allow` pattern matches and no `deny` pattern does.
    Allowed(&'a ToolRule),
    /// A `deny` pattern matches (whatever `allow` says).
    Denied(&'a ToolRule),
    /// No `allow` pattern matches: nothing is granted by default.
    NotAllowed,
}

/// How often a principal may start executions and call tools (`0`/absent = no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// Executions started per minute.
    pub executions_per_minute: Option<u32>,
    /// Tool calls per minute, over all of the principal's executions.
    pub tool_calls_per_minute: Option<u32>,
}

/// A named set of local users and groups and the tools they may call (`[[principal]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Unique name, used in logs, traces and metrics.
    pub name: String,
    /// Admitted user ids (names and `@daemon` already resolved), without duplicates.
    pub uids: Vec<u32>,
    /// Admitted group ids (primary or supplementary), without duplicates.
    pub gids: Vec<u32>,
    /// `users = ["*"]`: every local user is admitted (accepted with a warning).
    pub any_user: bool,
    /// Tool patterns this principal may call.
    pub allow: Vec<ToolRule>,
    /// Tool patterns this principal may never call, whatever `allow` says.
    pub deny: Vec<ToolRule>,
    /// Tool patterns whose calls wait for an approver's decision (`[approvals]`) before they
    /// are made. Approval only adds a step: a tool must still be allowed, and `deny` still wins.
    pub approve: Vec<ToolRule>,
    /// The limits its executions run under: `[limits]`, narrowed by the principal's own
    /// `limits` table.
    pub limits: LimitSettings,
    /// Its rate limits.
    pub rates: RateLimits,
    /// Where its `[[principal]]` table starts; `None` for principals made in code.
    pub at: Option<Location>,
}

/// The `users` entry that stands for the daemon's own effective uid.
pub const DAEMON_USER: &str = "@daemon";

/// Longest principal name.
pub const MAX_NAME_LEN: usize = 64;

impl Principal {
    /// Keys accepted in a `[[principal]]` table.
    pub(crate) const KEYS: &'static [&'static str] = &[
        "name",
        "users",
        "groups",
        "allow",
        "deny",
        "approve",
        "limits",
        "executions_per_minute",
        "tool_calls_per_minute",
    ];

    /// Largest `executions_per_minute` / `tool_calls_per_minute`.
    pub const MAX_PER_MINUTE: u32 = 1_000_000;

    /// A principal made in code (tests, tools): the given members and rules, the default
    /// limits, no rate limits, no call waiting for approval.
    pub fn new(name: &str, uids: Vec<u32>, allow: &[&str]) -> Principal {
        Principal {
            name: name.to_owned(),
            uids,
            gids: Vec::new(),
            any_user: false,
            allow: allow.iter().map(|p| ToolRule::from(*p)).collect(),
            deny: Vec::new(),
            approve: Vec::new(),
            limits: LimitSettings::default(),
            rates: RateLimits::default(),
            at: None,
        }
    }

    /// Whether this principal may call `tool` (`server.tool`): some `allow` pattern matches and no
    /// `deny` pattern does. Nothing is allowed by default.
    pub fn allows_tool(&self, tool: &str) -> bool {
        matches!(self.decide(tool), ToolDecision::Allowed(_))
    }

    /// Whether this principal may call some tool of `namespace`, as far as its patterns say
    /// without the namespace's tools: an `allow` pattern may match a name in it and no `deny`
    /// pattern matches every name in it. What it may be told exists (suggestions, lists of
    /// namespaces); whether a tool is allowed is [`Principal::allows_tool`]'s.
    pub fn may_call_in(&self, namespace: &str) -> bool {
        let prefix = format!("{namespace}.");
        !self
            .deny
            .iter()
            .any(|rule| matches_every_with_prefix(&rule.pattern, &prefix))
            && self
                .allow
                .iter()
                .any(|rule| may_match_with_prefix(&rule.pattern, &prefix))
    }

    /// Whether this principal may call every tool of `namespace`, whatever its names: an
    /// `allow` pattern matches every name in it and no `deny` pattern may match one.
    pub fn may_call_all_in(&self, namespace: &str) -> bool {
        let prefix = format!("{namespace}.");
        self.allow
            .iter()
            .any(|rule| matches_every_with_prefix(&rule.pattern, &prefix))
            && !self
                .deny
                .iter()
                .any(|rule| may_match_with_prefix(&rule.pattern, &prefix))
    }

    /// The rule that decides whether this principal may call `tool`: the first matching `deny`
    /// pattern, else the first matching `allow` pattern, else nothing (refused).
    pub fn decide(&self, tool: &str) -> ToolDecision<'_> {
        let matches = |rule: &&ToolRule| tool_matches(&rule.pattern, tool);
        if let Some(rule) = self.deny.iter().find(matches) {
            return ToolDecision::Denied(rule);
        }
        match self.allow.iter().find(matches) {
            Some(rule) => ToolDecision::Allowed(rule),
            None => ToolDecision::NotAllowed,
        }
    }

    /// Whether a call of `tool` (`namespace.tool`) waits for an approver's decision before it
    /// is made: some `approve` pattern matches. Says nothing about whether the call is allowed
    /// (ask [`Principal::decide`] first).
    pub fn needs_approval(&self, tool: &str) -> bool {
        self.approval_rule(tool).is_some()
    }

    /// The first `approve` pattern that matches `tool`, if any: what makes its calls wait
    /// (named by `airlock policy explain` and in the approval request).
    pub fn approval_rule(&self, tool: &str) -> Option<&ToolRule> {
        self.approve
            .iter()
            .find(|rule| tool_matches(&rule.pattern, tool))
    }

    /// Whether a peer with these credentials belongs to this principal.
    pub fn admits(&self, uid: u32, gid: u32, supplementary_gids: &[u32]) -> bool {
        self.any_user
            || self.uids.contains(&uid)
            || self.gids.contains(&gid)
            || supplementary_gids.iter().any(|g| self.gids.contains(g))
    }

    /// Reads one `[[principal]]` table, resolving user and group names; `global` is the
    /// policy's `[limits]`, which the principal's own `limits` may only lower.
    pub(crate) fn read(
        table: &TableReader<'_>,
        global: &LimitSettings,
    ) -> Result<Self, PolicyError> {
        let name_field = table.require("name")?;
        let name = name_field.string("a string")?;
        if name.is_empty()
            || name.len() > MAX_NAME_LEN
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        {
            return Err(name_field.invalid(format!(
                "invalid principal name \"{name}\": use 1 to {MAX_NAME_LEN} characters from A-Z, a-z, 0-9, `_`, `.` and `-`"
            )));
        }

        let users = table.get("users");
        let groups = table.get("groups");
        let mut uids = Vec::new();
        let mut any_user = false;
        if let Some(users) = &users {
            for entry in users.array("an array of user names and uids")? {
                if matches!(entry.value(), DeValue::String(s) if s == ANY_USER) {
                    any_user = true;
                    continue;
                }
                push_unique(&mut uids, user_id(&entry)?);
            }
        }
        let mut gids = Vec::new();
        if let Some(groups) = &groups {
            for entry in groups.array("an array of group names and gids")? {
                push_unique(&mut gids, group_id(&entry)?);
            }
        }
        if uids.is_empty() && gids.is_empty() && !any_user {
            return Err(PolicyError::NoMembers {
                at: users
                    .or(groups)
                    .map_or_else(|| table.location(), |f| f.location()),
                key: table.path().to_owned(),
                name: name.to_owned(),
            });
        }

        let limits = match table.get("limits") {
            Some(field) => LimitSettings::read_narrowing(
                &field.table("a table ([principal.limits])", LimitSettings::KEYS)?,
                global,
            )?,
            None => global.clone(),
        };
        let per_minute = |key: &str| -> Result<Option<u32>, PolicyError> {
            match table.get(key) {
                None => Ok(None),
                Some(field) => {
                    let n = field.u64_in(0..=u64::from(Self::MAX_PER_MINUTE))?;
                    // In range by the check above; 0 means "no limit", like leaving it out.
                    Ok(u32::try_from(n).ok().filter(|n| *n > 0))
                }
            }
        };
        Ok(Principal {
            name: name.to_owned(),
            uids,
            gids,
            any_user,
            allow: tool_patterns(table.get("allow"))?,
            deny: tool_patterns(table.get("deny"))?,
            approve: tool_patterns(table.get("approve"))?,
            limits,
            rates: RateLimits {
                executions_per_minute: per_minute("executions_per_minute")?,
                tool_calls_per_minute: per_minute("tool_calls_per_minute")?,
            },
            at: Some(table.location()),
        })
    }
}

/// The `users` entry that admits every local user.
pub const ANY_USER: &str = "*";

pub(crate) fn push_unique(ids: &mut Vec<u32>, id: u32) {
    if !ids.contains(&id) {
        ids.push(id);
    }
}

/// uid/gid `u32::MAX` is `(uid_t)-1`, which the kernel uses as "no id"; never admit it.
pub(crate) const MAX_ID: u32 = u32::MAX - 1;

fn numeric_id(entry: &Field<'_>) -> Result<u32, PolicyError> {
    let n = entry.u64_in(0..=u64::from(MAX_ID))?;
    u32::try_from(n).map_err(|_| entry.out_of_range(format!("0..={MAX_ID}")))
}

/// The uid a `users` entry names: a uid, a user name or `"@daemon"`.
pub(crate) fn user_id(entry: &Field<'_>) -> Result<u32, PolicyError> {
    match entry.value() {
        DeValue::Integer(_) => numeric_id(entry),
        DeValue::String(name) if name == DAEMON_USER => Ok(effective_uid()),
        DeValue::String(name) if name.starts_with('@') => Err(entry.invalid(format!(
            "unknown special user \"{name}\" (the only one is \"{DAEMON_USER}\")"
        ))),
        DeValue::String(name) => match uid_of_user(name) {
            Ok(Some(uid)) => Ok(uid),
            Ok(None) => Err(PolicyError::UnknownUser {
                at: entry.location(),
                key: entry.path().to_owned(),
                name: name.to_string(),
            }),
            Err(source) => Err(lookup_failed(entry, name, source)),
        },
        _ => Err(entry.wrong_type("a user name, a uid or \"@daemon\"")),
    }
}

fn group_id(entry: &Field<'_>) -> Result<u32, PolicyError> {
    match entry.value() {
        DeValue::Integer(_) => numeric_id(entry),
        DeValue::String(name) => group_named(entry, name),
        _ => Err(entry.wrong_type("a group name or a gid")),
    }
}

/// The gid of the group `name`, written at `entry` (a `groups` entry, or an `@group` approver).
pub(crate) fn group_named(entry: &Field<'_>, name: &str) -> Result<u32, PolicyError> {
    match gid_of_group(name) {
        Ok(Some(gid)) => Ok(gid),
        Ok(None) => Err(PolicyError::UnknownGroup {
            at: entry.location(),
            key: entry.path().to_owned(),
            name: name.to_owned(),
        }),
        Err(source) => Err(lookup_failed(entry, name, source)),
    }
}

fn lookup_failed(entry: &Field<'_>, name: &str, source: AccountError) -> PolicyError {
    PolicyError::AccountLookup {
        at: entry.location(),
        key: entry.path().to_owned(),
        name: name.to_owned(),
        source,
    }
}

fn tool_patterns(field: Option<Field<'_>>) -> Result<Vec<ToolRule>, PolicyError> {
    let Some(field) = field else {
        return Ok(Vec::new());
    };
    field
        .array("an array of tool patterns")?
        .iter()
        .map(|entry| {
            let pattern = entry.string("a tool pattern string such as \"github.*\"")?;
            validate_tool_pattern(pattern).map_err(|source| PolicyError::InvalidToolPattern {
                at: entry.location(),
                key: entry.path().to_owned(),
                source,
            })?;
            Ok(ToolRule {
                pattern: pattern.to_owned(),
                at: Some(entry.location()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(allow: &[&str], deny: &[&str]) -> Principal {
        Principal {
            gids: vec![50],
            deny: deny.iter().map(|s| ToolRule::from(*s)).collect(),
            ..Principal::new("p", vec![1000], allow)
        }
    }

    #[test]
    fn nothing_is_allowed_by_default() {
        assert!(!principal(&[], &[]).allows_tool("time.get_current_time"));
        assert!(!principal(&[], &["*"]).allows_tool("time.get_current_time"));
    }

    #[test]
    fn allow_patterns() {
        let p = principal(&["github.*", "time.get_current_time"], &[]);
        assert!(p.allows_tool("github.get_issue"));
        assert!(p.allows_tool("github.repos.list"));
        assert!(p.allows_tool("time.get_current_time"));
        assert!(!p.allows_tool("time.convert_time"));
        assert!(!p.allows_tool("gitlab.get_issue"));
    }

    #[test]
    fn deny_wins_over_allow() {
        let p = principal(&["github.*"], &["github.delete_*"]);
        assert!(p.allows_tool("github.get_issue"));
        assert!(!p.allows_tool("github.delete_repo"));
        let everything_denied = principal(&["*"], &["*"]);
        assert!(!everything_denied.allows_tool("time.get_current_time"));
    }

    #[test]
    fn the_deciding_rule_is_named() {
        let p = principal(&["github.*", "github.get_issue"], &["github.delete_*"]);
        assert_eq!(
            p.decide("github.get_issue"),
            ToolDecision::Allowed(&p.allow[0])
        );
        assert_eq!(
            p.decide("github.delete_repo"),
            ToolDecision::Denied(&p.deny[0])
        );
        assert_eq!(p.decide("time.now"), ToolDecision::NotAllowed);
    }

    #[test]
    fn which_namespaces_a_principal_may_call_in() {
        let p = principal(
            &["github.*", "time.now", "*.search"],
            &["secret.*", "github.delete_*"],
        );
        assert!(p.may_call_in("github") && !p.may_call_all_in("github"));
        assert!(p.may_call_in("time") && !p.may_call_all_in("time"));
        // `*.search` may name a tool anywhere, except where every name is denied.
        assert!(p.may_call_in("docs") && !p.may_call_all_in("docs"));
        assert!(!p.may_call_in("secret"));
        let narrow = principal(&["github.*", "time.now"], &[]);
        assert!(narrow.may_call_all_in("github"));
        assert!(!narrow.may_call_in("secret") && !narrow.may_call_in("git"));
        assert!(principal(&["*"], &[]).may_call_all_in("anything"));
        assert!(!principal(&[], &[]).may_call_in("github"));
    }

    #[test]
    fn approve_patterns_make_calls_wait() {
        let p = Principal {
            approve: ["github.delete_*", "payments.*"]
                .iter()
                .map(|s| ToolRule::from(*s))
                .collect(),
            ..principal(&["*"], &[])
        };
        assert!(p.needs_approval("github.delete_repo"));
        assert!(p.needs_approval("payments.refund"));
        assert!(p.needs_approval("payments.cards.charge"));
        assert!(!p.needs_approval("github.get_issue"));
        assert!(!p.needs_approval("payment.refund"));
        assert_eq!(p.approval_rule("payments.refund"), Some(&p.approve[1]));
        assert_eq!(p.approval_rule("time.now"), None);
        // Approval and permission are separate questions.
        assert!(p.allows_tool("github.delete_repo"));
    }

    #[test]
    fn principals_made_in_code_need_no_approval() {
        let p = Principal::new("p", vec![1000], &["*"]);
        assert!(p.approve.is_empty());
        assert!(!p.needs_approval("github.delete_repo"));
    }

    #[test]
    fn any_user_admits_everyone() {
        let mut p = principal(&[], &[]);
        assert!(!p.admits(4242, 4242, &[]));
        p.any_user = true;
        assert!(p.admits(4242, 4242, &[]));
    }

    #[test]
    fn admission_by_uid_gid_or_supplementary_gid() {
        let p = principal(&[], &[]);
        assert!(p.admits(1000, 1, &[]));
        assert!(p.admits(1, 50, &[]));
        assert!(p.admits(1, 1, &[7, 50]));
        assert!(!p.admits(1, 1, &[7, 8]));
    }
}
