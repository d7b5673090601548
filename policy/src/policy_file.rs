//! The policy file as a whole: reading it, the top-level tables, the checks that span tables
//! (unique principal names), admission of a peer, and [`PolicyError`], the error every other module
//! reports through.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use toml::de::DeTable;

use crate::account::AccountError;
use crate::audit_settings::AuditSettings;
use crate::byte_size::ByteSizeError;
use crate::daemon_settings::DaemonSettings;
use crate::document::{Source, TableReader};
use crate::file_mode::FileModeError;
use crate::graphql_source::GraphQlSource;
use crate::limit_settings::LimitSettings;
use crate::openapi_source::OpenApiSource;
use crate::principal::Principal;
use crate::source_location::Location;
use crate::tool_pattern::ToolPatternError;
use crate::tool_server::ToolServer;

/// The policy built into the daemon, used when no policy file is given. It is also the annotated
/// example shipped in the docs.
pub const EMBEDDED_DEFAULT_TOML: &str = include_str!("../default.toml");

/// The `origin` of the embedded default policy.
pub const EMBEDDED_ORIGIN: &str = "<embedded default>";

/// Keys accepted at the top level of a policy file.
const TOP_LEVEL_KEYS: &[&str] = &[
    "daemon",
    "limits",
    "principal",
    "server",
    "openapi",
    "graphql",
    "audit",
];

/// A validated policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `[daemon]`.
    pub daemon: DaemonSettings,
    /// `[limits]`.
    pub limits: LimitSettings,
    /// `[[principal]]` tables in file order; the first that matches a peer wins.
    pub principals: Vec<Principal>,
    /// `[[server]]` tables: the tool servers, in file order.
    pub servers: Vec<ToolServer>,
    /// `[[openapi]]` tables: the OpenAPI tool sources, in file order.
    pub openapi: Vec<OpenApiSource>,
    /// `[[graphql]]` tables: the GraphQL sources, in file order.
    pub graphql: Vec<GraphQlSource>,
    /// `[audit]`.
    pub audit: AuditSettings,
    /// The file path the policy came from, or `<embedded default>`.
    pub origin: String,
}

/// Why a policy was rejected. `Display` starts with `file:line:column:` wherever the position is
/// known, then names the dotted key (`limits.memory`, `principal[1].users[2]`).
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("{}: cannot read policy file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The text is not valid TOML.
    #[error("{at}: invalid TOML: {message}")]
    Syntax {
        /// Where the parser stopped.
        at: Location,
        /// The parser's explanation.
        message: String,
    },
    /// A key this format does not know (often a typo).
    #[error(
        "{at}: unknown key `{name}` in {} (expected one of: {}){}",
        table_label(key, name),
        expected.join(", "),
        suggestion.map(|s| format!("; did you mean `{s}`?")).unwrap_or_default()
    )]
    UnknownKey {
        /// Where the key is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// The key as written (the last segment of `key`).
        name: String,
        /// The keys its table accepts.
        expected: &'static [&'static str],
        /// A known key that is a likely intended spelling.
        suggestion: Option<&'static str>,
    },
    /// A value of the wrong TOML type.
    #[error("{at}: {key}: expected {expected}, found {found}")]
    WrongType {
        /// Where the value is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// What the format wants there.
        expected: &'static str,
        /// The TOML type that was written.
        found: &'static str,
    },
    /// A required key is missing.
    #[error("{at}: {key}: missing required key in {table}")]
    MissingKey {
        /// Where the table starts.
        at: Location,
        /// The dotted path of the missing key.
        key: String,
        /// The table that lacks it.
        table: String,
    },
    /// A number outside its allowed range.
    #[error("{at}: {key}: {value} is out of range (allowed: {allowed})")]
    OutOfRange {
        /// Where the value is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// The value as written.
        value: String,
        /// The allowed range.
        allowed: String,
    },
    /// A size string that does not parse.
    #[error("{at}: {key}: {source}")]
    InvalidSize {
        /// Where the value is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// What is wrong with it.
        source: ByteSizeError,
    },
    /// A permission string that does not parse.
    #[error("{at}: {key}: {source}")]
    InvalidMode {
        /// Where the value is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// What is wrong with it.
        source: FileModeError,
    },
    /// An unusable `allow`/`deny` pattern.
    #[error("{at}: {key}: {source}")]
    InvalidToolPattern {
        /// Where the value is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// What is wrong with it.
        source: ToolPatternError,
    },
    /// Any other invalid value (relative path, timeout above the maximum, bad name, ...).
    #[error("{at}: {key}: {reason}")]
    InvalidValue {
        /// Where the value is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// A principal with neither users nor groups.
    #[error(
        "{at}: {key}: principal \"{name}\" admits nobody: give it at least one entry in `users` or `groups`"
    )]
    NoMembers {
        /// Where the principal (or its empty list) is.
        at: Location,
        /// The principal's path, e.g. `principal[0]`.
        key: String,
        /// The principal's name.
        name: String,
    },
    /// Two principals with the same name.
    #[error("{at}: {key}: duplicate {what} name \"{name}\" (first defined at line {first_line})")]
    DuplicateName {
        /// Where the second name is.
        at: Location,
        /// Its dotted path, e.g. `principal[2].name`.
        key: String,
        /// `principal` or `server`.
        what: &'static str,
        /// The name.
        name: String,
        /// Line of the first table with this name.
        first_line: usize,
    },
    /// A user name the user database does not know.
    #[error("{at}: {key}: unknown user \"{name}\" (not in the user database)")]
    UnknownUser {
        /// Where the name is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// The name.
        name: String,
    },
    /// A group name the group database does not know.
    #[error("{at}: {key}: unknown group \"{name}\" (not in the group database)")]
    UnknownGroup {
        /// Where the name is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// The name.
        name: String,
    },
    /// The user or group database could not be queried.
    #[error("{at}: {key}: cannot resolve \"{name}\": {source}")]
    AccountLookup {
        /// Where the name is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// The name.
        name: String,
        /// The failure.
        source: AccountError,
    },
}

/// How messages name the table that holds `key` (whose last segment is `name`): `[daemon]`,
/// `principal[0]`, or `the top level`.
fn table_label(key: &str, name: &str) -> String {
    let table = key
        .strip_suffix(name)
        .and_then(|table| table.strip_suffix('.'))
        .unwrap_or_default();
    if table.is_empty() {
        "the top level".to_owned()
    } else if table.ends_with(']') {
        table.to_owned()
    } else {
        format!("[{table}]")
    }
}

impl PolicyError {
    /// Where in the file the problem is (`None` when the file could not be read).
    pub fn location(&self) -> Option<&Location> {
        match self {
            PolicyError::Read { .. } => None,
            PolicyError::Syntax { at, .. }
            | PolicyError::UnknownKey { at, .. }
            | PolicyError::WrongType { at, .. }
            | PolicyError::MissingKey { at, .. }
            | PolicyError::OutOfRange { at, .. }
            | PolicyError::InvalidSize { at, .. }
            | PolicyError::InvalidMode { at, .. }
            | PolicyError::InvalidToolPattern { at, .. }
            | PolicyError::InvalidValue { at, .. }
            | PolicyError::NoMembers { at, .. }
            | PolicyError::DuplicateName { at, .. }
            | PolicyError::UnknownUser { at, .. }
            | PolicyError::UnknownGroup { at, .. }
            | PolicyError::AccountLookup { at, .. } => Some(at),
        }
    }

    /// The dotted key path the problem is about (`None` for read and syntax errors).
    pub fn key(&self) -> Option<&str> {
        match self {
            PolicyError::Read { .. } | PolicyError::Syntax { .. } => None,
            PolicyError::UnknownKey { key, .. }
            | PolicyError::WrongType { key, .. }
            | PolicyError::MissingKey { key, .. }
            | PolicyError::OutOfRange { key, .. }
            | PolicyError::InvalidSize { key, .. }
            | PolicyError::InvalidMode { key, .. }
            | PolicyError::InvalidToolPattern { key, .. }
            | PolicyError::InvalidValue { key, .. }
            | PolicyError::NoMembers { key, .. }
            | PolicyError::DuplicateName { key, .. }
            | PolicyError::UnknownUser { key, .. }
            | PolicyError::UnknownGroup { key, .. }
            | PolicyError::AccountLookup { key, .. } => Some(key),
        }
    }
}

impl Policy {
    /// Reads and validates the policy file at `path`.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        Policy::parse(&text, &path.display().to_string())
    }

    /// Validates policy text; `origin` names it in errors (a path, or `<embedded default>`).
    pub fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        let source = Source { text, origin };
        let document = DeTable::parse(text).map_err(|error| syntax_error(source, &error))?;
        let root = TableReader::root(source, &document, TOP_LEVEL_KEYS)?;

        let daemon = match root.get("daemon") {
            Some(field) => {
                DaemonSettings::read(&field.table("a table ([daemon])", DaemonSettings::KEYS)?)?
            }
            None => DaemonSettings::default(),
        };
        let limits = match root.get("limits") {
            Some(field) => {
                LimitSettings::read(&field.table("a table ([limits])", LimitSettings::KEYS)?)?
            }
            None => LimitSettings::default(),
        };
        let audit = match root.get("audit") {
            Some(field) => {
                AuditSettings::read(&field.table("a table ([audit])", AuditSettings::KEYS)?)?
            }
            None => AuditSettings::default(),
        };

        let mut principals = Vec::new();
        let mut first_lines: HashMap<String, usize> = HashMap::new();
        if let Some(field) = root.get("principal") {
            for entry in field.array("an array of tables ([[principal]])")? {
                let table = entry.table("a table ([[principal]])", Principal::KEYS)?;
                let principal = Principal::read(&table)?;
                let name_at = table.require("name")?.location();
                if let Some(&first_line) = first_lines.get(&principal.name) {
                    return Err(PolicyError::DuplicateName {
                        at: name_at,
                        key: format!("{}.name", table.path()),
                        what: "principal",
                        name: principal.name,
                        first_line,
                    });
                }
                first_lines.insert(principal.name.clone(), name_at.line);
                principals.push(principal);
            }
        }

        // Every source is a namespace in programs: names are unique across all kinds.
        let mut names: HashMap<String, usize> = HashMap::new();
        let servers = read_sources(
            &root,
            SourceKind {
                key: "server",
                array: "an array of tables ([[server]])",
                table: "a table ([[server]])",
                keys: ToolServer::KEYS,
                what: "server",
            },
            &mut names,
            ToolServer::read,
            |s| &s.name,
        )?;
        let openapi = read_sources(
            &root,
            SourceKind {
                key: "openapi",
                array: "an array of tables ([[openapi]])",
                table: "a table ([[openapi]])",
                keys: OpenApiSource::KEYS,
                what: "tool source",
            },
            &mut names,
            OpenApiSource::read,
            |s| &s.name,
        )?;
        let graphql = read_sources(
            &root,
            SourceKind {
                key: "graphql",
                array: "an array of tables ([[graphql]])",
                table: "a table ([[graphql]])",
                keys: GraphQlSource::KEYS,
                what: "tool source",
            },
            &mut names,
            GraphQlSource::read,
            |s| &s.name,
        )?;

        Ok(Policy {
            daemon,
            limits,
            principals,
            servers,
            openapi,
            graphql,
            audit,
            origin: origin.to_owned(),
        })
    }

    /// The policy built into the daemon (`policy/default.toml`): one principal, `local`, for the
    /// daemon's own user and root, allowed every tool; defaults for everything else.
    pub fn embedded_default() -> Policy {
        match Policy::parse(EMBEDDED_DEFAULT_TOML, EMBEDDED_ORIGIN) {
            Ok(policy) => policy,
            // Unreachable in a tested build: `embedded_default_parses` guards it.
            Err(error) => panic!("the embedded default policy is invalid: {error}"),
        }
    }

    /// The first principal (in file order) that admits a peer with this uid, primary gid or any
    /// of these supplementary gids; `None` means the peer must be turned away.
    pub fn admit(&self, uid: u32, gid: u32, supplementary_gids: &[u32]) -> Option<&Principal> {
        self.principals
            .iter()
            .find(|principal| principal.admits(uid, gid, supplementary_gids))
    }
}

fn syntax_error(source: Source<'_>, error: &toml::de::Error) -> PolicyError {
    let span = error.span();
    // toml reports a span for all parse errors; the start of the file is a safe fallback.
    let at = source.locate(span.as_ref().map_or(0, |span| span.start));
    let mut message = error.message().trim().to_owned();
    let culprit = span
        .and_then(|span| source.text.get(span))
        .filter(|s| !s.is_empty() && !s.contains('\n'));
    if let (Some(culprit), true) = (culprit, message == "duplicate key") {
        message = format!("duplicate key `{culprit}` (a key or table may be defined only once)");
    }
    PolicyError::Syntax { at, message }
}

/// One kind of tool-source table (`[[server]]`, `[[openapi]]`, `[[graphql]]`).
struct SourceKind {
    key: &'static str,
    array: &'static str,
    table: &'static str,
    keys: &'static [&'static str],
    /// How a duplicate name is described ("duplicate server name").
    what: &'static str,
}

/// Reads every table of one kind, refusing a name already used by any source (`names` maps
/// the names seen so far to their lines).
fn read_sources<T>(
    root: &TableReader<'_>,
    kind: SourceKind,
    names: &mut HashMap<String, usize>,
    read: impl Fn(&TableReader<'_>) -> Result<T, PolicyError>,
    name_of: impl Fn(&T) -> &String,
) -> Result<Vec<T>, PolicyError> {
    let mut out = Vec::new();
    let Some(field) = root.get(kind.key) else {
        return Ok(out);
    };
    for entry in field.array(kind.array)? {
        let table = entry.table(kind.table, kind.keys)?;
        let source = read(&table)?;
        let name = name_of(&source).clone();
        let name_at = table.require("name")?.location();
        if let Some(&first_line) = names.get(&name) {
            return Err(PolicyError::DuplicateName {
                at: name_at,
                key: format!("{}.name", table.path()),
                what: kind.what,
                name,
                first_line,
            });
        }
        names.insert(name, name_at.line);
        out.push(source);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::effective_uid;

    const FILE: &str = "/etc/airlock/policy.toml";

    fn parse(text: &str) -> Result<Policy, PolicyError> {
        Policy::parse(text, FILE)
    }

    /// Parses `text`, expecting an error at `line:column` about `key`; returns the message.
    #[track_caller]
    fn error_at(text: &str, line: usize, column: usize, key: &str) -> String {
        let error = parse(text).expect_err("policy should be rejected");
        let message = error.to_string();
        let prefix = format!("{FILE}:{line}:{column}: ");
        assert!(
            message.starts_with(&prefix),
            "{message:?} should start with {prefix:?}"
        );
        assert!(message.contains(key), "{message:?} should name {key:?}");
        assert_eq!(
            error.location().map(|at| (at.line, at.column)),
            Some((line, column))
        );
        assert!(
            message.chars().next().is_some_and(|c| c == '/'),
            "message should start with the file"
        );
        message
    }

    // ---- the embedded default -----------------------------------------------------------------

    #[test]
    fn embedded_default_parses() {
        let policy = Policy::parse(EMBEDDED_DEFAULT_TOML, EMBEDDED_ORIGIN).unwrap();
        assert_eq!(policy, Policy::embedded_default());
        assert_eq!(policy.origin, "<embedded default>");
        assert_eq!(policy.daemon, DaemonSettings::default());
        assert_eq!(policy.limits, LimitSettings::default());
        assert_eq!(policy.principals.len(), 1);
        let local = &policy.principals[0];
        assert_eq!(local.name, "local");
        assert!(local.uids.contains(&effective_uid()));
        assert!(local.uids.contains(&0));
        assert!(local.gids.is_empty());
        assert_eq!(local.allow, ["*"]);
        assert!(local.deny.is_empty());
        assert!(local.allows_tool("github.delete_repo"));
    }

    #[test]
    fn embedded_default_admits_the_daemon_user_and_root_only() {
        let policy = Policy::embedded_default();
        assert!(policy.admit(effective_uid(), 12345, &[]).is_some());
        assert!(policy.admit(0, 0, &[]).is_some());
        if effective_uid() != 54321 {
            assert!(policy.admit(54321, 54321, &[0]).is_none());
        }
    }

    // ---- a complete file ----------------------------------------------------------------------

    const FULL: &str = r#"
[daemon]
socket = "/run/airlock/airlock.sock"
socket_mode = "0600"
pool_size = 0
worker_path = "/usr/libexec/airlock/airlock-worker"
shutdown_grace_ms = 2500
max_concurrent_executions = 8

[limits]
timeout_ms = 1000
max_timeout_ms = 60000
memory = "64MiB"
stack = "512KiB"
max_tool_calls = 10
max_output = 65536
max_code = "1MB"

[[principal]]
name = "agents"
users = ["@daemon", 0, "root", 1000]
groups = ["root", 990]
allow = ["github.*", "time.get_current_time"]
deny = ["github.delete_*"]

[[principal]]
name = "ci"
groups = [2000]
"#;

    #[test]
    fn full_file_round_trip() {
        let policy = parse(FULL).unwrap();
        assert_eq!(policy.origin, FILE);
        assert_eq!(
            policy.daemon,
            DaemonSettings {
                socket: Some("/run/airlock/airlock.sock".into()),
                socket_mode: 0o600,
                pool_size: 0,
                worker_path: Some("/usr/libexec/airlock/airlock-worker".into()),
                shutdown_grace_ms: 2500,
                max_concurrent_executions: 8,
            }
        );
        assert_eq!(
            policy.limits,
            LimitSettings {
                timeout_ms: 1000,
                max_timeout_ms: 60_000,
                memory_bytes: 64 << 20,
                stack_bytes: 512 << 10,
                max_tool_calls: 10,
                max_output_bytes: 65536,
                max_code_bytes: 1_000_000,
            }
        );
        let agents = &policy.principals[0];
        let mut expected_uids = vec![effective_uid()];
        for uid in [0, 1000] {
            if !expected_uids.contains(&uid) {
                expected_uids.push(uid);
            }
        }
        assert_eq!(agents.uids, expected_uids, "resolved and deduplicated");
        assert_eq!(agents.gids, [0, 990]);
        assert_eq!(agents.allow, ["github.*", "time.get_current_time"]);
        assert_eq!(agents.deny, ["github.delete_*"]);
        assert_eq!(policy.principals[1].uids, Vec::<u32>::new());
        assert_eq!(policy.principals[1].gids, [2000]);
    }

    #[test]
    fn empty_file_means_defaults_and_nobody_admitted() {
        let policy = parse("").unwrap();
        assert_eq!(policy.daemon, DaemonSettings::default());
        assert_eq!(policy.limits, LimitSettings::default());
        assert!(policy.principals.is_empty());
        assert!(policy.admit(0, 0, &[]).is_none());
    }

    #[test]
    fn default_timeout_follows_a_lower_maximum() {
        let policy = parse("[limits]\nmax_timeout_ms = 5000\n").unwrap();
        assert_eq!(policy.limits.timeout_ms, 5000);
    }

    #[test]
    fn octal_integer_socket_mode_and_inline_tables() {
        let policy = parse("daemon = { socket_mode = 0o640 }\n").unwrap();
        assert_eq!(policy.daemon.socket_mode, 0o640);
    }

    #[test]
    fn sizes_accept_binary_decimal_and_plain_bytes() {
        let policy = parse(
            "[limits]\nmemory = \"1GiB\"\nstack = \"2MB\"\nmax_output = \"4096 KiB\"\nmax_code = 2048\n",
        )
        .unwrap();
        assert_eq!(policy.limits.memory_bytes, 1 << 30);
        assert_eq!(policy.limits.stack_bytes, 2_000_000);
        assert_eq!(policy.limits.max_output_bytes, 4 << 20);
        assert_eq!(policy.limits.max_code_bytes, 2048);
    }

    // ---- admission ----------------------------------------------------------------------------

    #[test]
    fn admit_picks_the_first_matching_principal() {
        let policy = parse(
            r#"
[[principal]]
name = "by-uid"
users = [1000]
[[principal]]
name = "by-group"
groups = [50, 60]
[[principal]]
name = "also-uid-1000"
users = [1000, 1001]
"#,
        )
        .unwrap();
        let name = |uid, gid, supplementary: &[u32]| {
            policy
                .admit(uid, gid, supplementary)
                .map(|p| p.name.as_str())
        };
        assert_eq!(name(1000, 50, &[]), Some("by-uid"));
        assert_eq!(name(7, 50, &[]), Some("by-group"));
        assert_eq!(name(7, 8, &[9, 60]), Some("by-group"));
        assert_eq!(name(1001, 8, &[]), Some("also-uid-1000"));
        assert_eq!(name(7, 8, &[9]), None);
    }

    // ---- errors -------------------------------------------------------------------------------

    #[test]
    fn read_error_names_the_file() {
        let error = Policy::load(Path::new("/nonexistent/airlock/policy.toml")).unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with("/nonexistent/airlock/policy.toml: cannot read policy file: "),
            "{message}"
        );
        assert!(error.location().is_none());
    }

    #[test]
    fn load_reads_a_file() {
        let path =
            std::env::temp_dir().join(format!("airlock-policy-test-{}.toml", std::process::id()));
        std::fs::write(&path, "[daemon]\npool_size = 3\n").unwrap();
        let policy = Policy::load(&path);
        std::fs::remove_file(&path).unwrap();
        let policy = policy.unwrap();
        assert_eq!(policy.daemon.pool_size, 3);
        assert_eq!(policy.origin, path.display().to_string());
    }

    #[test]
    fn syntax_errors_are_located() {
        let message = error_at("[daemon]\npool_size = \n", 2, 13, "");
        assert!(message.contains("invalid TOML"), "{message}");
        let message = error_at(
            "[daemon]\npool_size = 1\npool_size = 2\n",
            3,
            1,
            "pool_size",
        );
        assert!(message.contains("duplicate key `pool_size`"), "{message}");
    }

    #[test]
    fn unknown_keys_are_named_with_their_table_and_alternatives() {
        let message = error_at(
            "\n[daemon]\nsocket_mode = \"0660\"\npol_size = 2\n",
            4,
            1,
            "pol_size",
        );
        assert_eq!(
            message,
            "/etc/airlock/policy.toml:4:1: unknown key `pol_size` in [daemon] (expected one of: \
             socket, socket_mode, pool_size, worker_path, shutdown_grace_ms, \
             max_concurrent_executions); did you mean `pool_size`?"
        );
        error_at("[limits]\nmemroy = \"1GiB\"\n", 2, 1, "[limits]");
        let message = error_at("deamon = {}\n", 1, 1, "deamon");
        assert!(message.contains("the top level"), "{message}");
        assert!(message.contains("did you mean `daemon`?"), "{message}");
        error_at(
            "[[principal]]\nname = \"a\"\nusers = [0]\nalow = []\n",
            4,
            1,
            "principal[0]",
        );
        // A sub-table inside a principal is an unknown key of that principal.
        error_at(
            "[[principal]]\nname = \"a\"\nusers = [0]\n[principal.extra]\nx = 1\n",
            4,
            12,
            "extra",
        );
    }

    #[test]
    fn unknown_keys_are_reported_in_file_order() {
        // `zzz` comes first in the file although `aaa` sorts first.
        error_at("[daemon]\nzzz = 1\naaa = 2\n", 2, 1, "zzz");
    }

    #[test]
    fn wrong_types() {
        let message = error_at("[daemon]\npool_size = \"2\"\n", 2, 13, "daemon.pool_size");
        assert!(
            message.contains("expected an integer, found string"),
            "{message}"
        );
        error_at("[limits]\nmemory = 1.5\n", 2, 10, "limits.memory");
        error_at("daemon = 3\n", 1, 10, "daemon");
        error_at("[daemon]\nsocket = 5\n", 2, 10, "daemon.socket");
        error_at(
            "[daemon]\nsocket_mode = true\n",
            2,
            15,
            "daemon.socket_mode",
        );
        let message = error_at("[principal]\nname = \"x\"\n", 1, 1, "principal");
        assert!(message.contains("[[principal]]"), "{message}");
        error_at(
            "[[principal]]\nname = \"a\"\nusers = [0, \"root\", 1.0]\n",
            3,
            21,
            "principal[0].users[2]",
        );
        error_at(
            "[[principal]]\nname = \"a\"\ngroups = \"root\"\n",
            3,
            10,
            "principal[0].groups",
        );
        error_at(
            "[[principal]]\nname = \"a\"\nusers = [0]\nallow = [1]\n",
            4,
            10,
            "principal[0].allow[0]",
        );
        error_at(
            "[[principal]]\nname = 7\nusers = [0]\n",
            2,
            8,
            "principal[0].name",
        );
        error_at("principal = [1]\n", 1, 14, "principal[0]");
    }

    #[test]
    fn out_of_range_values() {
        let message = error_at("[daemon]\npool_size = 257\n", 2, 13, "daemon.pool_size");
        assert!(
            message.contains("257 is out of range (allowed: 0..=256)"),
            "{message}"
        );
        error_at("[daemon]\npool_size = -1\n", 2, 13, "daemon.pool_size");
        error_at(
            "[daemon]\nmax_concurrent_executions = 0\n",
            2,
            29,
            "daemon.max_concurrent_executions",
        );
        error_at(
            "[daemon]\nshutdown_grace_ms = 600001\n",
            2,
            21,
            "daemon.shutdown_grace_ms",
        );
        error_at("[limits]\ntimeout_ms = 0\n", 2, 14, "limits.timeout_ms");
        error_at(
            "[limits]\nmax_timeout_ms = 86400001\n",
            2,
            18,
            "limits.max_timeout_ms",
        );
        let message = error_at("[limits]\nmemory = \"4MiB\"\n", 2, 10, "limits.memory");
        assert!(
            message.contains("\"4MiB\" is out of range (allowed: 8MiB..=64GiB)"),
            "{message}"
        );
        error_at("[limits]\nstack = \"16MiB\"\n", 2, 9, "limits.stack");
        error_at("[limits]\nstack = \"128KiB\"\n", 2, 9, "limits.stack");
        error_at("[limits]\nmax_code = \"17MiB\"\n", 2, 12, "limits.max_code");
        error_at("[limits]\nmax_output = 100\n", 2, 14, "limits.max_output");
        error_at(
            "[limits]\nmax_tool_calls = 1000001\n",
            2,
            18,
            "limits.max_tool_calls",
        );
        error_at("[limits]\nmemory = -1\n", 2, 10, "limits.memory");
        error_at(
            "[[principal]]\nname = \"a\"\nusers = [4294967295]\n",
            3,
            10,
            "principal[0].users[0]",
        );
        error_at(
            "[daemon]\npool_size = 99999999999999999999999\n",
            2,
            13,
            "daemon.pool_size",
        );
    }

    #[test]
    fn timeout_above_the_maximum() {
        let message = error_at(
            "[limits]\nmax_timeout_ms = 1000\ntimeout_ms = 2000\n",
            3,
            14,
            "limits.timeout_ms",
        );
        assert!(message.contains("max_timeout_ms"), "{message}");
    }

    #[test]
    fn invalid_sizes() {
        let message = error_at("[limits]\nmemory = \"256 MiBs\"\n", 2, 10, "limits.memory");
        assert!(message.contains("unknown unit `MiBs`"), "{message}");
        let message = error_at("[limits]\nmemory = \"1.5GiB\"\n", 2, 10, "limits.memory");
        assert!(message.contains("fractions"), "{message}");
        let message = error_at(
            "[limits]\nmax_output = \"1mb\"\n",
            2,
            14,
            "limits.max_output",
        );
        assert!(message.contains("did you mean `MB`"), "{message}");
    }

    #[test]
    fn invalid_socket_modes() {
        let message = error_at(
            "[daemon]\nsocket_mode = \"0689\"\n",
            2,
            15,
            "daemon.socket_mode",
        );
        assert!(message.contains("octal"), "{message}");
        let message = error_at(
            "[daemon]\nsocket_mode = \"4770\"\n",
            2,
            15,
            "daemon.socket_mode",
        );
        assert!(message.contains("setuid"), "{message}");
        let message = error_at("[daemon]\nsocket_mode = 660\n", 2, 15, "daemon.socket_mode");
        assert!(message.contains("\"0660\""), "{message}");
        error_at(
            "[daemon]\nsocket_mode = 0o1777\n",
            2,
            15,
            "daemon.socket_mode",
        );
    }

    #[test]
    fn invalid_paths() {
        let message = error_at(
            "[daemon]\nsocket = \"airlock.sock\"\n",
            2,
            10,
            "daemon.socket",
        );
        assert!(message.contains("not absolute"), "{message}");
        error_at(
            "[daemon]\nworker_path = \"bin/worker\"\n",
            2,
            15,
            "daemon.worker_path",
        );
        let long = format!("[daemon]\nsocket = \"/{}\"\n", "s".repeat(107));
        let message = error_at(&long, 2, 10, "daemon.socket");
        assert!(message.contains("at most 107 bytes"), "{message}");
        parse(&format!("[daemon]\nsocket = \"/{}\"\n", "s".repeat(106))).unwrap();
    }

    #[test]
    fn principal_needs_a_name() {
        let message = error_at("\n[[principal]]\nusers = [0]\n", 2, 1, "principal[0].name");
        assert!(message.contains("missing required key"), "{message}");
        let message = error_at(
            "[[principal]]\nname = \"a b\"\nusers = [0]\n",
            2,
            8,
            "principal[0].name",
        );
        assert!(message.contains("invalid principal name"), "{message}");
        error_at(
            "[[principal]]\nname = \"\"\nusers = [0]\n",
            2,
            8,
            "principal[0].name",
        );
    }

    #[test]
    fn principal_needs_members() {
        let message = error_at("[[principal]]\nname = \"lonely\"\n", 1, 1, "principal[0]");
        assert!(message.contains("admits nobody"), "{message}");
        error_at(
            "[[principal]]\nname = \"a\"\nusers = []\ngroups = []\n",
            3,
            9,
            "principal[0]",
        );
    }

    #[test]
    fn duplicate_principal_names() {
        let message = error_at(
            "[[principal]]\nname = \"a\"\nusers = [0]\n\n[[principal]]\nname = \"b\"\nusers = [1]\n\n[[principal]]\nname = \"a\"\nusers = [2]\n",
            10,
            8,
            "principal[2].name",
        );
        assert!(
            message.contains("duplicate principal name \"a\" (first defined at line 2)"),
            "{message}"
        );
    }

    #[test]
    fn unknown_users_and_groups() {
        let message = error_at(
            "[[principal]]\nname = \"a\"\nusers = [\"@daemon\", 0, \"airlock-no-such-user\"]\n",
            3,
            24,
            "principal[0].users[2]",
        );
        assert!(
            message.contains("unknown user \"airlock-no-such-user\""),
            "{message}"
        );
        let message = error_at(
            "[[principal]]\nname = \"a\"\ngroups = [\"airlock-no-such-group\"]\n",
            3,
            11,
            "principal[0].groups[0]",
        );
        assert!(message.contains("unknown group"), "{message}");
        let message = error_at(
            "[[principal]]\nname = \"a\"\nusers = [\"@root\"]\n",
            3,
            10,
            "principal[0].users[0]",
        );
        assert!(message.contains("@daemon"), "{message}");
        let message = error_at(
            "[[principal]]\nname = \"a\"\nusers = [\"ro\\u0000ot\"]\n",
            3,
            10,
            "principal[0].users[0]",
        );
        assert!(message.contains("NUL"), "{message}");
    }

    #[test]
    fn invalid_tool_patterns() {
        let message = error_at(
            "[[principal]]\nname = \"a\"\nusers = [0]\ndeny = [\"github.*\", \"github.get_?\"]\n",
            4,
            21,
            "principal[0].deny[1]",
        );
        assert!(message.contains("only `*` is a wildcard"), "{message}");
        error_at(
            "[[principal]]\nname = \"a\"\nusers = [0]\nallow = [\"\"]\n",
            4,
            10,
            "principal[0].allow[0]",
        );
    }

    #[test]
    fn error_stays_small_enough_for_result_large_err() {
        // Callers in other crates return `Result<_, PolicyError>`; clippy's `result_large_err`
        // fires at 128 bytes.
        assert!(
            std::mem::size_of::<PolicyError>() < 128,
            "{}",
            std::mem::size_of::<PolicyError>()
        );
    }

    #[test]
    fn key_accessor() {
        let error = parse("[limits]\nmemory = \"x\"\n").unwrap_err();
        assert_eq!(error.key(), Some("limits.memory"));
        let error = parse("[limits\n").unwrap_err();
        assert_eq!(error.key(), None);
        assert!(error.location().is_some());
    }
}
