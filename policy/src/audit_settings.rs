//! The `[audit]` table: where the daemon keeps its audit log of executions and tool calls, and
//! how large the log may grow before it is rotated.
//!
//! The default directory depends on the environment the daemon runs in (`$STATE_DIRECTORY`,
//! `$XDG_STATE_HOME`, `$HOME`), so the policy only records whether the operator chose one; the
//! supervisor resolves the default where it starts.

use std::path::PathBuf;

use crate::daemon_settings::absolute_path;
use crate::document::TableReader;
use crate::error::PolicyError;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Settings of the audit log (`[audit]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSettings {
    /// Whether executions and tool calls are recorded at all.
    pub enabled: bool,
    /// Directory of `audit.sqlite` and its rotated files; `None` lets the daemon choose
    /// (`$STATE_DIRECTORY`, else `$XDG_STATE_HOME/airlock`, else `~/.local/state/airlock`).
    pub directory: Option<PathBuf>,
    /// Size of the current database file past which it is rotated (key `max_size`).
    pub max_size_bytes: u64,
    /// Rotated files kept (`audit.sqlite.1` … `audit.sqlite.<keep>`); `0` keeps none.
    pub keep: u32,
}

impl AuditSettings {
    /// Keys accepted in `[audit]`.
    pub(crate) const KEYS: &'static [&'static str] = &["enabled", "directory", "max_size", "keep"];
    /// Default `max_size`.
    pub const DEFAULT_MAX_SIZE_BYTES: u64 = 256 * MIB;
    /// Smallest `max_size`: below this a rotation would happen every few executions.
    pub const MIN_MAX_SIZE_BYTES: u64 = 64 * KIB;
    /// Largest `max_size`.
    pub const MAX_MAX_SIZE_BYTES: u64 = 64 * GIB;
    /// Default `keep`.
    pub const DEFAULT_KEEP: u32 = 4;
    /// Largest `keep`: every query opens every kept file.
    pub const MAX_KEEP: u32 = 100;

    pub(crate) fn read(table: &TableReader<'_>) -> Result<Self, PolicyError> {
        let defaults = AuditSettings::default();
        Ok(AuditSettings {
            enabled: match table.get("enabled") {
                Some(field) => field.boolean()?,
                None => defaults.enabled,
            },
            directory: match table.get("directory") {
                Some(field) => Some(absolute_path(&field)?),
                None => defaults.directory,
            },
            max_size_bytes: match table.get("max_size") {
                Some(field) => {
                    field.byte_size_in(Self::MIN_MAX_SIZE_BYTES..=Self::MAX_MAX_SIZE_BYTES)?
                }
                None => defaults.max_size_bytes,
            },
            keep: match table.get("keep") {
                Some(field) => {
                    let keep = field.u64_in(0..=u64::from(Self::MAX_KEEP))?;
                    u32::try_from(keep)
                        .map_err(|_| field.out_of_range(format!("0..={}", Self::MAX_KEEP)))?
                }
                None => defaults.keep,
            },
        })
    }
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            enabled: true,
            directory: None,
            max_size_bytes: Self::DEFAULT_MAX_SIZE_BYTES,
            keep: Self::DEFAULT_KEEP,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Policy;
    use crate::document::test_support::{assert_refused, parse};

    fn audit(text: &str) -> Result<AuditSettings, PolicyError> {
        parse(text).map(|policy| policy.audit)
    }

    #[test]
    fn defaults_when_the_table_is_absent_or_empty() {
        assert_eq!(audit("").unwrap(), AuditSettings::default());
        assert_eq!(audit("[audit]\n").unwrap(), AuditSettings::default());
        let defaults = AuditSettings::default();
        assert!(defaults.enabled);
        assert_eq!(defaults.directory, None);
        assert_eq!(defaults.max_size_bytes, 256 << 20);
        assert_eq!(defaults.keep, 4);
    }

    #[test]
    fn the_embedded_default_spells_out_the_defaults() {
        assert_eq!(Policy::embedded_default().audit, AuditSettings::default());
    }

    #[test]
    fn every_key_is_read() {
        let settings = audit(
            "[audit]\nenabled = false\ndirectory = \"/var/lib/airlock/audit\"\nmax_size = \"1MiB\"\nkeep = 0\n",
        )
        .unwrap();
        assert_eq!(
            settings,
            AuditSettings {
                enabled: false,
                directory: Some(PathBuf::from("/var/lib/airlock/audit")),
                max_size_bytes: 1 << 20,
                keep: 0,
            }
        );
        assert_eq!(
            audit("[audit]\nmax_size = 65536\n").unwrap().max_size_bytes,
            65536
        );
    }

    /// Each bad value is reported at its own line and column, naming `audit.<key>`.
    #[test]
    fn errors_are_located_and_name_the_key() {
        let cases: &[(&str, usize, usize, &str, &str)] = &[
            (
                "[audit]\nenabled = \"yes\"\n",
                2,
                11,
                "audit.enabled",
                "true or false",
            ),
            (
                "[audit]\ndirectory = \"state/audit\"\n",
                2,
                13,
                "audit.directory",
                "not absolute",
            ),
            (
                "[audit]\nmax_size = \"1KiB\"\n",
                2,
                12,
                "audit.max_size",
                "64KiB",
            ),
            (
                "[audit]\nmax_size = \"lots\"\n",
                2,
                12,
                "audit.max_size",
                "lots",
            ),
            ("[audit]\nkeep = 101\n", 2, 8, "audit.keep", "0..=100"),
            ("[audit]\nkeep = -1\n", 2, 8, "audit.keep", "0..=100"),
            ("[audit]\nkept = 1\n", 2, 1, "kept", "keep"),
            ("audit = 3\n", 1, 9, "audit", "table"),
        ];
        for &(text, line, column, key, detail) in cases {
            assert_refused(text, &format!("{line}:{column}"), key, detail);
        }
    }
}
