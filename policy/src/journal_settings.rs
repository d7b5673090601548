//! The `[journal]` table: the replay journal of sessions (every tool call of a session's
//! executions, so re-running edited code answers the calls already made from the record
//! instead of repeating their side effects), where it is kept and how much of it.
//!
//! As with `[audit]`, the default directory depends on the environment the daemon starts in,
//! so the policy only records whether the operator chose one.

use std::path::PathBuf;

use crate::daemon_settings::absolute_path;
use crate::document::TableReader;
use crate::error::PolicyError;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Settings of the replay journal (`[journal]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalSettings {
    /// Whether sessions are offered at all; without them every execution is one-shot.
    pub enabled: bool,
    /// Directory of `journal.sqlite`; `None` lets the daemon choose (the state directory, as
    /// for `[audit]`).
    pub directory: Option<PathBuf>,
    /// A session not used for this long is deleted (key `session_ttl_hours`).
    pub session_ttl_hours: u64,
    /// Everything the journal keeps, all principals together (key `max_size`): a write that
    /// would pass it deletes its own principal's least recently used idle sessions, or is
    /// refused; never another principal's.
    pub max_size_bytes: u64,
    /// Everything one session keeps (results, code, responses, answers) may not pass this; a
    /// call whose result would is still answered, but not recorded; a program or answers
    /// that would are refused (key `max_session_size`).
    pub max_session_size_bytes: u64,
    /// Everything the journal keeps for one principal (key `max_principal_size`; at most
    /// `max_size` applies).
    pub max_principal_size_bytes: u64,
    /// Sessions one principal may hold at once; a new one past it is refused (key
    /// `max_sessions`).
    pub max_sessions: u64,
}

impl JournalSettings {
    /// Keys accepted in `[journal]`.
    pub(crate) const KEYS: &'static [&'static str] = &[
        "enabled",
        "directory",
        "session_ttl_hours",
        "max_size",
        "max_session_size",
        "max_principal_size",
        "max_sessions",
    ];
    pub const DEFAULT_SESSION_TTL_HOURS: u64 = 7 * 24;
    /// A year: a session is a working context, not an archive.
    pub const MAX_SESSION_TTL_HOURS: u64 = 365 * 24;
    pub const DEFAULT_MAX_SIZE_BYTES: u64 = GIB;
    pub const DEFAULT_MAX_SESSION_SIZE_BYTES: u64 = 64 * MIB;
    /// A quarter of the default `max_size`: four principals filling theirs leave room.
    pub const DEFAULT_MAX_PRINCIPAL_SIZE_BYTES: u64 = 256 * MIB;
    pub const DEFAULT_MAX_SESSIONS: u64 = 256;
    /// Largest `max_sessions`: each is a row the daemon reads when it evicts.
    pub const MAX_SESSIONS: u64 = 100_000;
    /// Smallest size caps: one large tool result must fit.
    pub const MIN_SIZE_BYTES: u64 = MIB;
    pub const MAX_SIZE_BYTES: u64 = 1024 * GIB;

    pub(crate) fn read(table: &TableReader<'_>) -> Result<Self, PolicyError> {
        let defaults = JournalSettings::default();
        let size = |key: &str, default: u64| -> Result<u64, PolicyError> {
            match table.get(key) {
                Some(field) => field.byte_size_in(Self::MIN_SIZE_BYTES..=Self::MAX_SIZE_BYTES),
                None => Ok(default),
            }
        };
        Ok(JournalSettings {
            enabled: match table.get("enabled") {
                Some(field) => field.boolean()?,
                None => defaults.enabled,
            },
            directory: match table.get("directory") {
                Some(field) => Some(absolute_path(&field)?),
                None => defaults.directory,
            },
            session_ttl_hours: match table.get("session_ttl_hours") {
                Some(field) => field.u64_in(1..=Self::MAX_SESSION_TTL_HOURS)?,
                None => defaults.session_ttl_hours,
            },
            max_size_bytes: size("max_size", defaults.max_size_bytes)?,
            max_session_size_bytes: size("max_session_size", defaults.max_session_size_bytes)?,
            max_principal_size_bytes: size(
                "max_principal_size",
                defaults.max_principal_size_bytes,
            )?,
            max_sessions: match table.get("max_sessions") {
                Some(field) => field.u64_in(1..=Self::MAX_SESSIONS)?,
                None => defaults.max_sessions,
            },
        })
    }
}

impl Default for JournalSettings {
    fn default() -> Self {
        JournalSettings {
            enabled: true,
            directory: None,
            session_ttl_hours: Self::DEFAULT_SESSION_TTL_HOURS,
            max_size_bytes: Self::DEFAULT_MAX_SIZE_BYTES,
            max_session_size_bytes: Self::DEFAULT_MAX_SESSION_SIZE_BYTES,
            max_principal_size_bytes: Self::DEFAULT_MAX_PRINCIPAL_SIZE_BYTES,
            max_sessions: Self::DEFAULT_MAX_SESSIONS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;
    use crate::document::test_support::{assert_refused, parse};

    fn journal(text: &str) -> Result<JournalSettings, PolicyError> {
        parse(text).map(|policy| policy.journal)
    }

    #[test]
    fn defaults_and_the_embedded_default_agree() {
        assert_eq!(journal("").unwrap(), JournalSettings::default());
        assert_eq!(
            Policy::embedded_default().journal,
            JournalSettings::default()
        );
    }

    #[test]
    fn every_key_is_read() {
        let settings = journal(
            "[journal]\nenabled = false\ndirectory = \"/var/lib/airlock/journal\"\nsession_ttl_hours = 2\nmax_size = \"2GiB\"\nmax_session_size = \"8MiB\"\nmax_principal_size = \"16MiB\"\nmax_sessions = 9\n",
        )
        .unwrap();
        assert_eq!(
            settings,
            JournalSettings {
                enabled: false,
                directory: Some(PathBuf::from("/var/lib/airlock/journal")),
                session_ttl_hours: 2,
                max_size_bytes: 2 << 30,
                max_session_size_bytes: 8 << 20,
                max_principal_size_bytes: 16 << 20,
                max_sessions: 9,
            }
        );
    }

    #[test]
    fn errors_are_located_and_name_the_key() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "[journal]\nenabled = 1\n",
                "journal.enabled",
                "true or false",
            ),
            (
                "[journal]\ndirectory = \"j\"\n",
                "journal.directory",
                "not absolute",
            ),
            (
                "[journal]\nsession_ttl_hours = 0\n",
                "journal.session_ttl_hours",
                "1..=",
            ),
            (
                "[journal]\nmax_size = \"1KiB\"\n",
                "journal.max_size",
                "1MiB",
            ),
            (
                "[journal]\nmax_principal_size = \"10KiB\"\n",
                "journal.max_principal_size",
                "1MiB",
            ),
            (
                "[journal]\nmax_sessions = 0\n",
                "journal.max_sessions",
                "1..=",
            ),
            ("[journal]\nttl = 1\n", "ttl", "session_ttl_hours"),
        ];
        for &(text, key, detail) in cases {
            assert_refused(text, "2", key, detail);
        }
    }
}
