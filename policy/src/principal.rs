//! Principals: who may connect (by uid, primary gid or supplementary gid, as the kernel reports
//! them for the socket peer) and which tools they may call.

use toml::de::DeValue;

use crate::account::{AccountError, effective_uid, gid_of_group, uid_of_user};
use crate::document::{Field, TableReader};
use crate::policy_file::PolicyError;
use crate::tool_pattern::{tool_matches, validate_tool_pattern};

/// A named set of local users and groups and the tools they may call (`[[principal]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Unique name, used in logs, traces and metrics.
    pub name: String,
    /// Admitted user ids (names and `@daemon` already resolved), without duplicates.
    pub uids: Vec<u32>,
    /// Admitted group ids (primary or supplementary), without duplicates.
    pub gids: Vec<u32>,
    /// Tool patterns this principal may call.
    pub allow: Vec<String>,
    /// Tool patterns this principal may never call, whatever `allow` says.
    pub deny: Vec<String>,
}

/// The `users` entry that stands for the daemon's own effective uid.
pub const DAEMON_USER: &str = "@daemon";

/// Longest principal name.
pub const MAX_NAME_LEN: usize = 64;

impl Principal {
    /// Keys accepted in a `[[principal]]` table.
    pub(crate) const KEYS: &'static [&'static str] = &["name", "users", "groups", "allow", "deny"];

    /// Whether this principal may call `tool` (`server.tool`): some `allow` pattern matches and no
    /// `deny` pattern does. Nothing is allowed by default.
    pub fn allows_tool(&self, tool: &str) -> bool {
        let matches = |pattern: &String| tool_matches(pattern, tool);
        self.allow.iter().any(matches) && !self.deny.iter().any(matches)
    }

    /// Whether a peer with these credentials belongs to this principal.
    pub fn admits(&self, uid: u32, gid: u32, supplementary_gids: &[u32]) -> bool {
        self.uids.contains(&uid)
            || self.gids.contains(&gid)
            || supplementary_gids.iter().any(|g| self.gids.contains(g))
    }

    /// Reads one `[[principal]]` table, resolving user and group names.
    pub(crate) fn read(table: &TableReader<'_>) -> Result<Self, PolicyError> {
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
        if let Some(users) = &users {
            for entry in users.array("an array of user names and uids")? {
                push_unique(&mut uids, user_id(&entry)?);
            }
        }
        let mut gids = Vec::new();
        if let Some(groups) = &groups {
            for entry in groups.array("an array of group names and gids")? {
                push_unique(&mut gids, group_id(&entry)?);
            }
        }
        if uids.is_empty() && gids.is_empty() {
            return Err(PolicyError::NoMembers {
                at: users
                    .or(groups)
                    .map_or_else(|| table.location(), |f| f.location()),
                key: table.path().to_owned(),
                name: name.to_owned(),
            });
        }

        Ok(Principal {
            name: name.to_owned(),
            uids,
            gids,
            allow: tool_patterns(table.get("allow"))?,
            deny: tool_patterns(table.get("deny"))?,
        })
    }
}

fn push_unique(ids: &mut Vec<u32>, id: u32) {
    if !ids.contains(&id) {
        ids.push(id);
    }
}

/// uid/gid `u32::MAX` is `(uid_t)-1`, which the kernel uses as "no id"; never admit it.
const MAX_ID: u32 = u32::MAX - 1;

fn numeric_id(entry: &Field<'_>) -> Result<u32, PolicyError> {
    let n = entry.u64_in(0..=u64::from(MAX_ID))?;
    u32::try_from(n).map_err(|_| entry.out_of_range(format!("0..={MAX_ID}")))
}

fn user_id(entry: &Field<'_>) -> Result<u32, PolicyError> {
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
        DeValue::String(name) => match gid_of_group(name) {
            Ok(Some(gid)) => Ok(gid),
            Ok(None) => Err(PolicyError::UnknownGroup {
                at: entry.location(),
                key: entry.path().to_owned(),
                name: name.to_string(),
            }),
            Err(source) => Err(lookup_failed(entry, name, source)),
        },
        _ => Err(entry.wrong_type("a group name or a gid")),
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

fn tool_patterns(field: Option<Field<'_>>) -> Result<Vec<String>, PolicyError> {
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
            Ok(pattern.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(allow: &[&str], deny: &[&str]) -> Principal {
        Principal {
            name: "p".to_owned(),
            uids: vec![1000],
            gids: vec![50],
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
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
    fn admission_by_uid_gid_or_supplementary_gid() {
        let p = principal(&[], &[]);
        assert!(p.admits(1000, 1, &[]));
        assert!(p.admits(1, 50, &[]));
        assert!(p.admits(1, 1, &[7, 50]));
        assert!(!p.admits(1, 1, &[7, 8]));
    }
}
