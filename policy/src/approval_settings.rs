//! The `[approvals]` table: who may decide the calls that a principal's `approve` patterns make
//! wait, and how long such a call waits before it expires as denied.
//!
//! Approvers are local users and groups, resolved when the policy is loaded exactly like a
//! principal's `users` and `groups`, so a decision counts only from a peer whose socket
//! credentials the kernel vouches for, never from a name a client claims.
//!
//! An approver does not decide the calls of its own executions unless `self_approve` says so:
//! an agent that runs as an approver would otherwise approve what it asked for itself.

use toml::de::DeValue;

use crate::document::{Field, TableReader};
use crate::duration::{DAY_MS, HOUR_MS, SECOND_MS};
use crate::error::PolicyError;
use crate::principal::{ANY_USER, DAEMON_USER, MAX_ID, group_named, push_unique, user_id};

/// Settings of approvals (`[approvals]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalSettings {
    /// The approvers as written, in file order (`"alice"`, `"@daemon"`, `"@ops"`; a uid
    /// written as an integer as its decimal digits), for messages and `airlock policy check`.
    pub approvers: Vec<String>,
    /// The uids of the users named (names and `@daemon` resolved), without duplicates.
    pub uids: Vec<u32>,
    /// The gids of the `@group`s named, without duplicates.
    pub gids: Vec<u32>,
    /// How long a call waits for a decision before it expires as denied (key `ttl`).
    pub ttl_ms: u64,
    /// Whether an approver may decide the calls of executions it started itself, or that run
    /// as the principal it is admitted as (key `self_approve`, default `false`).
    pub self_approve: bool,
}

impl ApprovalSettings {
    /// Keys accepted in `[approvals]`.
    pub(crate) const KEYS: &'static [&'static str] = &["approvers", "ttl", "self_approve"];
    /// Default `ttl` (1 h): long enough for a person to notice, short enough that a forgotten
    /// request does not hold its execution for a day.
    pub const DEFAULT_TTL_MS: u64 = HOUR_MS;
    /// Smallest `ttl` (1 s).
    pub const MIN_TTL_MS: u64 = SECOND_MS;
    /// Largest `ttl` (30 days).
    pub const MAX_TTL_MS: u64 = 30 * DAY_MS;

    /// Whether a peer with these credentials (uid, primary gid, supplementary gids, as the
    /// kernel reports them) may approve or deny a waiting call: it is a named user or a member
    /// of a named group. Nobody may when no approvers are named.
    pub fn may_decide(&self, uid: u32, gid: u32, groups: &[u32]) -> bool {
        self.uids.contains(&uid)
            || self.gids.contains(&gid)
            || groups.iter().any(|g| self.gids.contains(g))
    }

    /// Whether anyone at all may decide (`approvers` is not empty).
    pub fn has_approvers(&self) -> bool {
        !self.approvers.is_empty()
    }

    /// Whether some approver, as written, is also admitted by a principal with these members
    /// (`any_user`, uids, gids): a user named in both, a group named in both, or a principal
    /// that admits everyone. Group membership is not looked up: an approver admitted only
    /// through a group it belongs to is not seen here (the daemon still refuses its decision
    /// on its own executions' calls).
    pub fn overlaps(&self, any_user: bool, uids: &[u32], gids: &[u32]) -> bool {
        self.has_approvers()
            && (any_user
                || uids.iter().any(|u| self.uids.contains(u))
                || gids.iter().any(|g| self.gids.contains(g)))
    }

    pub(crate) fn read(table: &TableReader<'_>) -> Result<Self, PolicyError> {
        let mut settings = ApprovalSettings::default();
        if let Some(field) = table.get("approvers") {
            for entry in field.array("an array of user names, uids and \"@group\" names")? {
                let written = read_approver(&entry, &mut settings)?;
                settings.approvers.push(written);
            }
        }
        if let Some(field) = table.get("ttl") {
            settings.ttl_ms = field.duration_ms_in(Self::MIN_TTL_MS..=Self::MAX_TTL_MS)?;
        }
        if let Some(field) = table.get("self_approve") {
            settings.self_approve = field.boolean()?;
        }
        Ok(settings)
    }
}

impl Default for ApprovalSettings {
    /// No approvers (so no principal may have `approve` patterns), calls wait 1 h, nobody
    /// decides its own executions' calls.
    fn default() -> Self {
        ApprovalSettings {
            approvers: Vec::new(),
            uids: Vec::new(),
            gids: Vec::new(),
            ttl_ms: Self::DEFAULT_TTL_MS,
            self_approve: false,
        }
    }
}

/// Resolves one `approvers` entry into `settings`' uids or gids; returns it as written.
fn read_approver(
    entry: &Field<'_>,
    settings: &mut ApprovalSettings,
) -> Result<String, PolicyError> {
    match entry.value() {
        DeValue::String(name) if name == ANY_USER => Err(entry.invalid(
            "\"*\" cannot approve: whoever approves decides what agents may do; name the users or \"@group\"s who may",
        )),
        DeValue::String(name) if name.starts_with('@') && name != DAEMON_USER => {
            push_unique(&mut settings.gids, approver_group(entry, &name[1..])?);
            Ok(name.to_string())
        }
        DeValue::String(name) => {
            push_unique(&mut settings.uids, user_id(entry)?);
            Ok(name.to_string())
        }
        DeValue::Integer(_) => {
            let uid = user_id(entry)?;
            push_unique(&mut settings.uids, uid);
            Ok(uid.to_string())
        }
        _ => Err(entry.wrong_type("a user name, a uid, \"@daemon\" or \"@group\"")),
    }
}

/// The gid of an `@group` approver: a group name, or a gid in digits (how to name a group
/// called `daemon`, since `"@daemon"` is the daemon's user as in `users`).
fn approver_group(entry: &Field<'_>, group: &str) -> Result<u32, PolicyError> {
    if group.is_empty() {
        return Err(entry
            .invalid("\"@\" names no group: write \"@\" and a group name or gid, e.g. \"@ops\""));
    }
    if group.bytes().all(|b| b.is_ascii_digit()) {
        return group
            .parse::<u32>()
            .ok()
            .filter(|gid| *gid <= MAX_ID)
            .ok_or_else(|| entry.out_of_range(format!("\"@0\"..=\"@{MAX_ID}\"")));
    }
    group_named(entry, group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;
    use crate::account::effective_uid;
    use crate::document::test_support::{FILE, assert_refused, parse};

    fn approvals(text: &str) -> Result<ApprovalSettings, PolicyError> {
        parse(text).map(|policy| policy.approvals)
    }

    #[test]
    fn defaults_when_the_table_is_absent_or_empty() {
        let defaults = ApprovalSettings::default();
        assert!(defaults.approvers.is_empty() && !defaults.has_approvers());
        assert!(defaults.uids.is_empty() && defaults.gids.is_empty());
        assert_eq!(defaults.ttl_ms, 3_600_000);
        assert_eq!(approvals("").unwrap(), defaults);
        assert_eq!(approvals("[approvals]\n").unwrap(), defaults);
        assert!(
            !defaults.may_decide(0, 0, &[0]),
            "nobody decides by default"
        );
    }

    #[test]
    fn the_embedded_default_spells_out_the_defaults() {
        assert_eq!(
            Policy::embedded_default().approvals,
            ApprovalSettings::default()
        );
    }

    #[test]
    fn approvers_resolve_like_principal_users_and_groups() {
        let settings = approvals(
            "[approvals]\napprovers = [\"root\", 1000, \"@daemon\", \"@root\", \"@4242\", 0x3e8, \"@root\"]\nttl = \"15m\"\n",
        )
        .unwrap();
        assert_eq!(
            settings.approvers,
            ["root", "1000", "@daemon", "@root", "@4242", "1000", "@root"],
            "as written, integers in decimal"
        );
        let mut uids = vec![0, 1000];
        if !uids.contains(&effective_uid()) {
            uids.push(effective_uid());
        }
        assert_eq!(settings.uids, uids, "resolved and deduplicated");
        assert_eq!(settings.gids, [0, 4242]);
        assert_eq!(settings.ttl_ms, 900_000);
        assert!(settings.has_approvers());
    }

    #[test]
    fn ttl_takes_the_policy_durations_within_bounds() {
        let cases: &[(&str, u64)] = &[
            ("\"1s\"", 1_000),
            ("\"30s\"", 30_000),
            ("\"2h\"", 7_200_000),
            ("\"30d\"", 30 * DAY_MS),
            ("600", 600_000),
        ];
        for &(written, ms) in cases {
            let settings = approvals(&format!("[approvals]\nttl = {written}\n")).unwrap();
            assert_eq!(settings.ttl_ms, ms, "{written}");
        }
    }

    #[test]
    fn may_decide_by_uid_primary_gid_or_supplementary_gid() {
        let settings = ApprovalSettings {
            approvers: vec!["alice".into(), "@ops".into()],
            uids: vec![1000],
            gids: vec![50],
            ..ApprovalSettings::default()
        };
        assert!(settings.may_decide(1000, 1, &[]));
        assert!(settings.may_decide(1, 50, &[]));
        assert!(settings.may_decide(1, 1, &[7, 50]));
        assert!(!settings.may_decide(1, 1, &[7, 8]));
        assert!(
            !settings.may_decide(50, 1000, &[]),
            "uids and gids are not mixed up"
        );
    }

    /// Each bad value is reported at its own line and column, naming `approvals.<key>`.
    #[test]
    fn errors_are_located_and_name_the_key() {
        let cases: &[(&str, usize, usize, &str, &str)] = &[
            (
                "[approvals]\napprovers = [\"airlock-no-such-user\"]\n",
                2,
                14,
                "approvals.approvers[0]",
                "unknown user \"airlock-no-such-user\"",
            ),
            (
                "[approvals]\napprovers = [\"root\", \"@airlock-no-such-group\"]\n",
                2,
                22,
                "approvals.approvers[1]",
                "unknown group \"airlock-no-such-group\"",
            ),
            (
                "[approvals]\napprovers = [\"*\"]\n",
                2,
                14,
                "approvals.approvers[0]",
                "name the users or \"@group\"s who may",
            ),
            (
                "[approvals]\napprovers = [\"@\"]\n",
                2,
                14,
                "approvals.approvers[0]",
                "e.g. \"@ops\"",
            ),
            (
                "[approvals]\napprovers = [\"@4294967295\"]\n",
                2,
                14,
                "approvals.approvers[0]",
                "out of range",
            ),
            (
                "[approvals]\napprovers = [-1]\n",
                2,
                14,
                "approvals.approvers[0]",
                "out of range",
            ),
            (
                "[approvals]\napprovers = [true]\n",
                2,
                14,
                "approvals.approvers[0]",
                "\"@group\"",
            ),
            (
                "[approvals]\napprovers = \"alice\"\n",
                2,
                13,
                "approvals.approvers",
                "an array of user names",
            ),
            (
                "[approvals]\nttl = \"0s\"\n",
                2,
                7,
                "approvals.ttl",
                "1s..=30d",
            ),
            (
                "[approvals]\nttl = \"31d\"\n",
                2,
                7,
                "approvals.ttl",
                "1s..=30d",
            ),
            (
                "[approvals]\nttl = \"1 hour\"\n",
                2,
                7,
                "approvals.ttl",
                "unknown unit `hour`",
            ),
            (
                "[approvals]\nttl = \"60\"\n",
                2,
                7,
                "approvals.ttl",
                "add a unit",
            ),
            (
                "[approvals]\napprover = [\"root\"]\n",
                2,
                1,
                "approver",
                "did you mean `approvers`",
            ),
            ("approvals = 3\n", 1, 13, "approvals", "table"),
        ];
        for &(text, line, column, key, detail) in cases {
            assert_refused(text, &format!("{line}:{column}"), key, detail);
        }
    }

    #[test]
    fn approve_patterns_need_someone_to_approve() {
        let principal = "[[principal]]\nname = \"agents\"\nusers = [0]\nallow = [\"*\"]\napprove = [\"github.delete_*\", \"payments.*\"]\n";
        let message = approvals(principal).unwrap_err().to_string();
        assert!(
            message.starts_with(&format!("{FILE}:5:11: principal[0].approve: ")),
            "{message}"
        );
        assert!(
            message.contains("principal `agents` needs approvals for \"github.delete_*\", \"payments.*\" but [approvals] names no approvers"),
            "{message}"
        );
        assert!(message.contains("[approvals] approvers = ["), "{message}");
        let message = approvals(&format!("[approvals]\napprovers = []\n\n{principal}"))
            .unwrap_err()
            .to_string();
        assert!(message.contains("names no approvers"), "{message}");

        // With approvers, or with nothing to approve, the policy is valid.
        let policy = Policy::parse(
            &format!("[approvals]\napprovers = [\"root\"]\n\n{principal}"),
            FILE,
        )
        .unwrap();
        assert!(policy.principals[0].needs_approval("payments.refund"));
        assert!(policy.approvals.may_decide(0, 1, &[]));
        Policy::parse(
            "[[principal]]\nname = \"a\"\nusers = [0]\napprove = []\n",
            FILE,
        )
        .unwrap();
    }

    #[test]
    fn self_approve_is_off_unless_the_policy_says_so() {
        assert!(
            !approvals("[approvals]\napprovers = [0]\n")
                .unwrap()
                .self_approve
        );
        assert!(
            approvals("[approvals]\napprovers = [0]\nself_approve = true\n")
                .unwrap()
                .self_approve
        );
        assert_refused(
            "[approvals]\nself_approve = \"yes\"\n",
            "2:16",
            "approvals.self_approve",
            "expected true or false",
        );
    }

    /// A principal whose members include an approver, with calls that wait and
    /// `self_approve` off, is worth a warning at its `approve`: that approver cannot decide
    /// them. Not when it may, when nothing waits, or when no member is an approver.
    #[test]
    fn a_principal_that_is_also_an_approver_of_its_own_calls_is_warned_about() {
        let warnings = |text: &str| {
            Policy::parse(text, FILE)
                .unwrap()
                .warnings
                .iter()
                .map(ToString::to_string)
                .filter(|w| w.contains("self_approve"))
                .collect::<Vec<_>>()
        };
        let agents = |members: &str, approve: &str| {
            format!(
                "[[principal]]\nname = \"agents\"\n{members}\nallow = [\"*\"]\napprove = [{approve}]\n"
            )
        };
        let by_uid = format!(
            "[approvals]\napprovers = [4242]\n\n{}",
            agents("users = [4242]", "\"payments.*\"")
        );
        let found = warnings(&by_uid);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(&format!("{FILE}:8:11: warning: principal `agents` admits")),
            "{found:?}"
        );
        assert!(found[0].contains("\"payments.*\""), "{found:?}");
        assert!(
            found[0].contains("another approver must decide them"),
            "{found:?}"
        );
        assert!(
            found[0].contains("`[approvals] self_approve = true`"),
            "{found:?}"
        );
        let by_group = format!(
            "[approvals]\napprovers = [\"@4242\"]\n\n{}",
            agents("groups = [4242]", "\"x.*\"")
        );
        assert_eq!(warnings(&by_group).len(), 1);
        let everyone = format!(
            "[approvals]\napprovers = [4242]\n\n{}",
            agents("users = [\"*\"]", "\"x.*\"")
        );
        assert_eq!(warnings(&everyone).len(), 1);

        let allowed = format!(
            "[approvals]\napprovers = [4242]\nself_approve = true\n\n{}",
            agents("users = [4242]", "\"x.*\"")
        );
        assert!(warnings(&allowed).is_empty());
        let nothing_waits = format!(
            "[approvals]\napprovers = [4242]\n\n{}",
            agents("users = [4242]", "")
        );
        assert!(warnings(&nothing_waits).is_empty());
        let someone_else = format!(
            "[approvals]\napprovers = [4243, \"@4243\"]\n\n{}",
            agents("users = [4242]\ngroups = [4242]", "\"x.*\"")
        );
        assert!(warnings(&someone_else).is_empty());
    }

    #[test]
    fn a_broken_approvals_table_is_not_reported_twice() {
        let message = approvals(
            "[approvals]\napprovers = [\"airlock-no-such-user\"]\n\n[[principal]]\nname = \"a\"\nusers = [0]\napprove = [\"x.*\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(message.lines().count(), 1, "{message}");
        assert!(message.contains("unknown user"), "{message}");
    }

    #[test]
    fn approve_patterns_are_checked_like_allow() {
        let message = approvals(
            "[approvals]\napprovers = [0]\n\n[[principal]]\nname = \"a\"\nusers = [0]\napprove = [\"github.*\", \"github.get_?\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            message.starts_with(&format!("{FILE}:7:24: principal[0].approve[1]: ")),
            "{message}"
        );
        assert!(message.contains("only `*` is a wildcard"), "{message}");
        let message = approvals("[[principal]]\nname = \"a\"\nusers = [0]\napprove = \"x.*\"\n")
            .unwrap_err()
            .to_string();
        assert!(message.contains("an array of tool patterns"), "{message}");
    }
}
