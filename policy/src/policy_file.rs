//! The policy file as a whole: reading it, the top-level tables, the checks that span tables
//! (unique principal names, approvers for every principal that has calls approved), and
//! admission of a peer.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use toml::de::DeTable;

use crate::approval_settings::ApprovalSettings;
use crate::audit_settings::AuditSettings;
use crate::daemon_settings::DaemonSettings;
use crate::document::{Source, TableReader};
use crate::error::{PolicyError, PolicyWarning};
use crate::information_flow::{self, InformationFlow};
use crate::journal_settings::JournalSettings;
use crate::limit_settings::LimitSettings;
use crate::principal::Principal;
use crate::secret_scanning::SecretScanning;
use crate::source_location::Location;
use crate::sources::graphql::GraphQlSource;
use crate::sources::openapi::OpenApiSource;
use crate::sources::server::{ConfineMode, ServerTransport, ToolServer};

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
    "secret_scanning",
    "audit",
    "journal",
    "approvals",
    "flow",
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
    /// `[secret_scanning]`: redact (default) or fail calls whose results carry secrets.
    pub secret_scanning: SecretScanning,
    /// `[audit]`.
    pub audit: AuditSettings,
    /// `[journal]`: the replay journal of sessions.
    pub journal: JournalSettings,
    /// `[approvals]`: who may decide the calls principals' `approve` patterns make wait.
    pub approvals: ApprovalSettings,
    /// The sources' `trust` and `sink` keys and the `[[flow]]` rules.
    pub information_flow: InformationFlow,
    /// The file path the policy came from, or `<embedded default>`.
    pub origin: String,
    /// The drop-in files merged into it, in the order they were read.
    pub drop_ins: Vec<String>,
    /// Valid but noteworthy settings (shown by `airlock policy check` and logged at load).
    pub warnings: Vec<PolicyWarning>,
}

impl Policy {
    /// Reads and validates the policy file at `path` together with its drop-ins
    /// (`policy.d/*.toml` beside it, in name order). Every problem found is reported: one is
    /// returned as itself, several as [`PolicyError::Several`].
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        Policy::load_all(path).map_err(PolicyError::from_problems)
    }

    /// Like [`Policy::load`], with every problem as its own error (`airlock policy check`).
    pub fn load_all(path: &Path) -> Result<Policy, Vec<PolicyError>> {
        let files = policy_files(path)?;
        parse_files(&files)
    }

    /// Validates policy text; `origin` names it in errors (a path, or `<embedded default>`).
    /// Drop-ins are not read.
    pub fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
        let file = PolicyText {
            origin: origin.to_owned(),
            text: text.to_owned(),
        };
        parse_files(std::slice::from_ref(&file)).map_err(PolicyError::from_problems)
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

    /// Every file this policy was read from: the main file, then the drop-ins.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.origin.as_str()).chain(self.drop_ins.iter().map(String::as_str))
    }
}

/// The directory of drop-ins for the policy file at `path`: `policy.d` beside it.
pub fn drop_in_directory(path: &Path) -> PathBuf {
    path.parent()
        .unwrap_or_else(|| Path::new(""))
        .join(DROP_IN_DIRECTORY)
}

/// Name of the drop-in directory beside the main policy file.
pub const DROP_IN_DIRECTORY: &str = "policy.d";

/// One policy file's text and the name errors give it.
pub(crate) struct PolicyText {
    pub(crate) origin: String,
    pub(crate) text: String,
}

/// Reads the main policy file and its drop-ins, refusing any that others could write.
fn policy_files(path: &Path) -> Result<Vec<PolicyText>, Vec<PolicyError>> {
    let mut errors = Vec::new();
    let mut files = Vec::new();
    match read_policy_text(path) {
        Ok(file) => files.push(file),
        Err(e) => errors.push(e),
    }
    let dir = drop_in_directory(path);
    match std::fs::metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => errors.push(PolicyError::Read { path: dir, source }),
        Ok(meta) if !meta.is_dir() => errors.push(PolicyError::Read {
            path: dir,
            source: io::Error::other("not a directory"),
        }),
        Ok(meta) => {
            if let Err(e) = check_not_writable_by_others(&dir, &meta) {
                errors.push(e);
            }
            match drop_in_paths(&dir) {
                Ok(paths) => {
                    for path in paths {
                        match read_policy_text(&path) {
                            Ok(file) => files.push(file),
                            Err(e) => errors.push(e),
                        }
                    }
                }
                Err(source) => errors.push(PolicyError::Read { path: dir, source }),
            }
        }
    }
    if errors.is_empty() {
        Ok(files)
    } else {
        Err(errors)
    }
}

/// The `*.toml` files of a drop-in directory in byte order of their names. Hidden files and
/// other extensions (editor backups, `.rpmsave`, `.disabled`) are not policy.
fn drop_in_paths(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.as_encoded_bytes();
        if name.starts_with(b".") || !name.ends_with(b".toml") {
            continue;
        }
        paths.push(entry.path());
    }
    paths.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(paths)
}

fn read_policy_text(path: &Path) -> Result<PolicyText, PolicyError> {
    let read_error = |source| PolicyError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_error)?;
    check_not_writable_by_others(path, &meta)?;
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    Ok(PolicyText {
        origin: path.display().to_string(),
        text,
    })
}

/// Whoever can write the policy decides what agents may do, so a file or drop-in directory
/// that group or others can write is refused rather than trusted.
fn check_not_writable_by_others(path: &Path, meta: &std::fs::Metadata) -> Result<(), PolicyError> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(PolicyError::WritableByOthers {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Validates one or more policy files as one policy: the first is the main file, the rest
/// are drop-ins. Each table is read on its own, so one bad table does not hide the problems
/// of the next.
pub(crate) fn parse_files(files: &[PolicyText]) -> Result<Policy, Vec<PolicyError>> {
    let mut errors = Vec::new();
    let mut warnings = Vec::new();

    let mut documents = Vec::new();
    for (index, file) in files.iter().enumerate() {
        let source = Source {
            text: &file.text,
            origin: &file.origin,
        };
        match DeTable::parse(&file.text) {
            Ok(document) => documents.push((index, source, document)),
            Err(error) => errors.push(syntax_error(source, &error)),
        }
    }
    let mut roots = Vec::new();
    for (index, source, document) in &documents {
        let (root, unknown) = TableReader::root_reporting(*source, document, TOP_LEVEL_KEYS);
        errors.extend(unknown);
        roots.push((*index, root));
    }

    // [daemon] and [audit] configure the process itself (socket, pool, its own record): they
    // live in the main file only.
    let daemon = read_single_table(
        &roots,
        "daemon",
        "a table ([daemon])",
        DaemonSettings::KEYS,
        Placement::MainFile {
            why: "it configures the daemon process itself",
        },
        &mut errors,
        DaemonSettings::read,
    );
    let audit = read_single_table(
        &roots,
        "audit",
        "a table ([audit])",
        AuditSettings::KEYS,
        Placement::MainFile {
            why: "it configures the daemon's own record",
        },
        &mut errors,
        AuditSettings::read,
    );
    let journal = read_single_table(
        &roots,
        "journal",
        "a table ([journal])",
        JournalSettings::KEYS,
        Placement::MainFile {
            why: "it configures the daemon's own store",
        },
        &mut errors,
        JournalSettings::read,
    );
    // [limits] may be set in one file, whichever: two files setting it would make the result
    // depend on file names in a way nobody reads off the files.
    let limits = read_single_table(
        &roots,
        "limits",
        "a table ([limits])",
        LimitSettings::KEYS,
        Placement::OneFile {
            hint: "set the limits in one file",
        },
        &mut errors,
        LimitSettings::read,
    );
    let limits = limits.unwrap_or_default();
    // [approvals] names who may decide for every principal, wherever they are written: like
    // [limits], one file.
    let errors_before_approvals = errors.len();
    let approvals = read_single_table(
        &roots,
        "approvals",
        "a table ([approvals])",
        ApprovalSettings::KEYS,
        Placement::OneFile {
            hint: "name the approvers in one file",
        },
        &mut errors,
        ApprovalSettings::read,
    );
    // A broken [approvals] is reported as itself, not again at every principal's `approve`.
    let no_approvers = errors.len() == errors_before_approvals
        && approvals.as_ref().is_none_or(|a| !a.has_approvers());

    let mut principals: Vec<Principal> = Vec::new();
    let mut first_names: HashMap<String, Location> = HashMap::new();
    for (_, root) in &roots {
        let Some(field) = root.get("principal") else {
            continue;
        };
        let entries = match field.array("an array of tables ([[principal]])") {
            Ok(entries) => entries,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for entry in entries {
            let read = entry
                .table("a table ([[principal]])", Principal::KEYS)
                .and_then(|table| {
                    let principal = Principal::read(&table, &limits)?;
                    let name_at = table.require("name")?.location();
                    if no_approvers
                        && !principal.approve.is_empty()
                        && let Some(approve) = table.get("approve")
                    {
                        errors.push(approve.invalid(unapproved_message(&principal)));
                    }
                    if let Some(approvals) = &approvals
                        && !approvals.self_approve
                        && !principal.approve.is_empty()
                        && approvals.overlaps(principal.any_user, &principal.uids, &principal.gids)
                        && let Some(approve) = table.get("approve")
                    {
                        warnings.push(PolicyWarning {
                            at: approve.location(),
                            message: self_approval_message(&principal),
                        });
                    }
                    Ok((principal, name_at, format!("{}.name", table.path())))
                });
            let (principal, name_at, key) = match read {
                Ok(read) => read,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            if let Some(first) = first_names.get(&principal.name) {
                errors.push(PolicyError::DuplicateName {
                    first: Box::new(first.clone()),
                    at: name_at,
                    key,
                    what: "principal",
                    name: principal.name,
                });
                continue;
            }
            if principal.any_user {
                warnings.push(PolicyWarning {
                    at: name_at.clone(),
                    message: format!(
                        "principal \"{}\" admits every local user (users = [\"*\"]): any process on this machine may run programs with its tools; list users or groups instead unless that is what you want",
                        principal.name
                    ),
                });
            }
            first_names.insert(principal.name.clone(), name_at);
            principals.push(principal);
        }
    }

    // Every source is a namespace in programs: names are unique across all kinds and files.
    let mut flow = InformationFlow::default();
    let mut names: HashMap<String, Location> = HashMap::new();
    let servers = read_sources(
        &roots,
        SourceKind {
            key: "server",
            array: "an array of tables ([[server]])",
            table: "a table ([[server]])",
            keys: ToolServer::KEYS,
            what: "server",
        },
        &mut names,
        &mut errors,
        &mut flow,
        ToolServer::read,
        |s| &s.name,
    );
    for server in &servers {
        if server.confinement.mode == ConfineMode::Off
            && matches!(server.transport, ServerTransport::Stdio { .. })
            && let Some(at) = names.get(&server.name)
        {
            warnings.push(PolicyWarning {
                at: at.clone(),
                message: format!(
                    "server \"{}\" runs unconfined (confine = false): it can read and change everything this daemon's user can, other servers' secrets and the daemon's own state included; give it `read`/`write` paths and confine it instead, unless you trust every release of it",
                    server.name
                ),
            });
        }
    }
    let openapi = read_sources(
        &roots,
        SourceKind {
            key: "openapi",
            array: "an array of tables ([[openapi]])",
            table: "a table ([[openapi]])",
            keys: OpenApiSource::KEYS,
            what: "tool source",
        },
        &mut names,
        &mut errors,
        &mut flow,
        OpenApiSource::read,
        |s| &s.name,
    );
    let graphql = read_sources(
        &roots,
        SourceKind {
            key: "graphql",
            array: "an array of tables ([[graphql]])",
            table: "a table ([[graphql]])",
            keys: GraphQlSource::KEYS,
            what: "tool source",
        },
        &mut names,
        &mut errors,
        &mut flow,
        GraphQlSource::read,
        |s| &s.name,
    );

    // After every file's sources are known: the table names them.
    let known = |name: &str| names.contains_key(name);
    let secret_scanning = read_single_table(
        &roots,
        "secret_scanning",
        "a table ([secret_scanning])",
        SecretScanning::KEYS,
        Placement::OneFile {
            hint: "set it in one file",
        },
        &mut errors,
        |table| SecretScanning::read(table, &known),
    );

    // [[flow]] rules, in any file: each names its own sources and sinks.
    for (_, root) in &roots {
        let Some(field) = root.get("flow") else {
            continue;
        };
        let entries = match field.array("an array of tables ([[flow]])") {
            Ok(entries) => entries,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for entry in entries {
            let index = flow.rules.len();
            match entry
                .table("a table ([[flow]])", InformationFlow::FLOW_KEYS)
                .and_then(|table| information_flow::read_flow_rule(&table, index, !no_approvers))
            {
                Ok(rule) => flow.rules.push(rule),
                Err(e) => errors.push(e),
            }
        }
    }
    let source_names: Vec<&str> = names.keys().map(String::as_str).collect();
    information_flow::unmatched_warnings(&flow, &source_names, &mut warnings);

    if !errors.is_empty() {
        // In reading order: by file, then by place.
        errors.sort_by_key(|e| {
            e.location().map(|at| {
                let file = files.iter().position(|f| f.origin == at.origin);
                (file, at.line, at.column)
            })
        });
        return Err(errors);
    }
    let mut origins = files.iter().map(|f| f.origin.clone());
    Ok(Policy {
        daemon: daemon.unwrap_or_default(),
        limits,
        principals,
        servers,
        openapi,
        graphql,
        secret_scanning: secret_scanning.unwrap_or_default(),
        audit: audit.unwrap_or_default(),
        journal: journal.unwrap_or_default(),
        approvals: approvals.unwrap_or_default(),
        information_flow: flow,
        origin: origins.next().unwrap_or_default(),
        drop_ins: origins.collect(),
        warnings,
    })
}

/// Why a principal with `approve` patterns is refused when nobody may approve: its calls would
/// wait until they expire, every one of them denied.
fn unapproved_message(principal: &Principal) -> String {
    let patterns = approve_patterns(principal);
    format!(
        "principal `{}` needs approvals for {patterns} but [approvals] names no approvers, so every such call would wait and expire denied: add `[approvals] approvers = [\"user\", \"@group\"]` naming who may decide, or remove `approve`",
        principal.name
    )
}

/// The warning for a principal that admits one of the approvers while `self_approve` is off.
fn self_approval_message(principal: &Principal) -> String {
    format!(
        "principal `{}` admits a user or group that [approvals] also names as an approver, and [approvals] self_approve is off: that approver's decisions on the calls of this principal's executions ({}) are refused, so another approver must decide them; name approvers who are not this principal's members, or set `[approvals] self_approve = true` if they may approve their own executions' calls",
        principal.name,
        approve_patterns(principal)
    )
}

fn approve_patterns(principal: &Principal) -> String {
    principal
        .approve
        .iter()
        .map(|rule| format!("\"{}\"", rule.pattern))
        .collect::<Vec<_>>()
        .join(", ")
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

/// Where a table that a policy holds at most once may be written.
enum Placement {
    /// Only in the main file; `why` ends the message for one in a drop-in.
    MainFile { why: &'static str },
    /// In any one file; `hint` ends the message for a second one.
    OneFile { hint: &'static str },
}

/// Reads the table `key` (`[daemon]`, `[limits]`, ...) that a policy holds at most once,
/// reporting one in a file where it may not be, or a second one.
fn read_single_table<T>(
    roots: &[(usize, TableReader<'_>)],
    key: &str,
    expected: &'static str,
    keys: &'static [&'static str],
    placement: Placement,
    errors: &mut Vec<PolicyError>,
    read: impl Fn(&TableReader<'_>) -> Result<T, PolicyError>,
) -> Option<T> {
    let mut value = None;
    let mut first: Option<Location> = None;
    for (index, root) in roots {
        let Some(field) = root.get(key) else {
            continue;
        };
        match (&placement, &first) {
            (Placement::MainFile { why }, _) if *index > 0 => {
                errors.push(field.invalid(format!(
                    "[{key}] may only be set in the main policy file, not in a drop-in: {why}"
                )));
                continue;
            }
            (Placement::OneFile { hint }, Some(first)) => {
                errors.push(field.invalid(format!("[{key}] is already set at {first}: {hint}")));
                continue;
            }
            _ => {}
        }
        first = Some(field.location());
        match field.table(expected, keys).and_then(|table| read(&table)) {
            Ok(read) => value = Some(read),
            Err(e) => errors.push(e),
        }
    }
    value
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

/// Reads every table of one kind in every file, refusing a name already used by any source
/// (`names` maps the names seen so far to where they were first given).
fn read_sources<T>(
    roots: &[(usize, TableReader<'_>)],
    kind: SourceKind,
    names: &mut HashMap<String, Location>,
    errors: &mut Vec<PolicyError>,
    flow: &mut InformationFlow,
    read: impl Fn(&TableReader<'_>) -> Result<T, PolicyError>,
    name_of: impl Fn(&T) -> &String,
) -> Vec<T> {
    let mut out = Vec::new();
    for (_, root) in roots {
        let Some(field) = root.get(kind.key) else {
            continue;
        };
        let entries = match field.array(kind.array) {
            Ok(entries) => entries,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for entry in entries {
            let read = entry.table(kind.table, kind.keys).and_then(|table| {
                let source = read(&table)?;
                information_flow::read_source_keys(&table, name_of(&source), flow)?;
                let name_at = table.require("name")?.location();
                Ok((source, name_at, format!("{}.name", table.path())))
            });
            let (source, name_at, key) = match read {
                Ok(read) => read,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let name = name_of(&source).clone();
            if let Some(first) = names.get(&name) {
                errors.push(PolicyError::DuplicateName {
                    first: Box::new(first.clone()),
                    at: name_at,
                    key,
                    what: kind.what,
                    name,
                });
                continue;
            }
            names.insert(name, name_at);
            out.push(source);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_nested_without_end_are_refused_on_a_small_stack() {
        // The TOML parser's recursion limit, pinned on a 2 MiB stack (a reload parses on a
        // blocking-pool thread of that size): drop-ins may be written by others.
        let errors = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                let n = 100_000;
                [
                    format!("x = {}1{}", "[".repeat(n), "]".repeat(n)),
                    format!("x = {}1{}", "{a = ".repeat(n), "}".repeat(n)),
                ]
                .iter()
                .map(|text| Policy::parse(text, "deep.toml").unwrap_err().to_string())
                .collect::<Vec<_>>()
            })
            .unwrap()
            .join()
            .expect("the TOML parser overflowed a 2 MiB stack");
        for error in errors {
            assert!(error.contains("recursion"), "{error}");
        }
    }
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
worker_start = "exec"
state_directory = "/var/lib/airlock"

[limits]
timeout_ms = 1000
max_timeout_ms = 60000
memory = "64MiB"
stack = "512KiB"
max_tool_calls = 10
max_output = 65536
max_code = "1MB"
max_waiting_executions = 4
waiting_ttl = "2h"

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
                worker_start: crate::WorkerStart::Exec,
                state_directory: Some("/var/lib/airlock".into()),
                server_user: None,
                ..DaemonSettings::default()
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
                max_waiting_executions: 4,
                waiting_ttl_ms: 7_200_000,
                ..LimitSettings::default()
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
             max_concurrent_executions, worker_start, state_directory, server_user, max_connections, \
             idle_timeout, body_timeout, write_timeout); did you mean `pool_size`?"
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
    fn worker_start_is_fork_or_exec() {
        assert_eq!(
            parse("[daemon]\nworker_start = \"fork\"\n")
                .unwrap()
                .daemon
                .worker_start,
            crate::WorkerStart::Fork
        );
        assert_eq!(
            parse("").unwrap().daemon.worker_start,
            crate::WorkerStart::Fork
        );
        let message = error_at(
            "[daemon]\nworker_start = \"spawn\"\n",
            2,
            16,
            "daemon.worker_start",
        );
        assert!(message.contains("use \"fork\""), "{message}");
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

    // ---- drop-ins, permissions, every problem -------------------------------------------------

    /// A policy directory: `policy.toml` and `policy.d/<name>` files, all mode 0644.
    fn policy_dir(main: &str, drop_ins: &[(&str, &str)]) -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let write = |path: &Path, text: &str| {
            std::fs::write(path, text).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        };
        write(&dir.path().join("policy.toml"), main);
        if !drop_ins.is_empty() {
            let d = dir.path().join("policy.d");
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
            for (name, text) in drop_ins {
                write(&d.join(name), text);
            }
        }
        dir
    }

    const MAIN: &str = "[limits]\nmemory = \"128MiB\"\n\n[[principal]]\nname = \"ops\"\nusers = [0]\nallow = [\"*\"]\n";

    #[test]
    fn drop_ins_are_merged_in_name_order() {
        let dir = policy_dir(
            MAIN,
            &[
                (
                    "20-agents.toml",
                    "[[principal]]\nname = \"agents\"\ngroups = [0]\nallow = [\"time.*\"]\n",
                ),
                (
                    "10-time.toml",
                    "[[server]]\nname = \"time\"\ncommand = \"/bin/true\"\n",
                ),
                ("30-ignored.toml.disabled", "this is not toml"),
                (".hidden.toml", "neither is this"),
            ],
        );
        let policy = Policy::load(&dir.path().join("policy.toml")).unwrap();
        let names: Vec<_> = policy.principals.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["ops", "agents"]);
        assert_eq!(policy.servers.len(), 1);
        let files: Vec<_> = policy
            .files()
            .map(|f| f.rsplit('/').next().unwrap())
            .collect();
        assert_eq!(files, ["policy.toml", "10-time.toml", "20-agents.toml"]);
        // Drop-in principals narrow the limits of whichever file sets [limits].
        assert_eq!(policy.principals[1].limits.memory_bytes, 128 << 20);
    }

    #[test]
    fn a_name_reused_in_a_drop_in_names_both_files() {
        let dir = policy_dir(
            MAIN,
            &[(
                "agents.toml",
                "[[principal]]\nname = \"ops\"\nusers = [1]\n",
            )],
        );
        let error = Policy::load(&dir.path().join("policy.toml")).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains(
                "policy.d/agents.toml:2:8: principal[0].name: duplicate principal name \"ops\""
            ),
            "{message}"
        );
        assert!(message.contains("first defined at /"), "{message}");
        assert!(message.contains("policy.toml:5:8"), "{message}");
    }

    #[test]
    fn daemon_settings_stay_in_the_main_file_and_limits_in_one() {
        let dir = policy_dir(
            MAIN,
            &[(
                "x.toml",
                "[daemon]\npool_size = 1\n\n[limits]\nmemory = \"64MiB\"\n",
            )],
        );
        let errors = Policy::load_all(&dir.path().join("policy.toml")).unwrap_err();
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2, "{messages:#?}");
        assert!(
            messages[0]
                .contains("x.toml:1:1: daemon: [daemon] may only be set in the main policy file"),
            "{messages:#?}"
        );
        assert!(
            messages[1].contains("x.toml:4:1: limits: [limits] is already set at /"),
            "{messages:#?}"
        );
    }

    #[test]
    fn every_problem_is_reported_with_its_place() {
        let dir = policy_dir(
            "[limits]\nmemroy = 1\n\n[[principal]]\nname = \"a\"\nusers = [0]\nallow = [\"a?\"]\n\n[[principal]]\nname = \"b\"\n",
            &[
                ("bad.toml", "[[server]\n"),
                ("ok.toml", "[[server]]\nname = \"s\"\n"),
            ],
        );
        let errors = Policy::load_all(&dir.path().join("policy.toml")).unwrap_err();
        let places: Vec<String> = errors
            .iter()
            .map(|e| {
                let at = e.location().unwrap();
                format!(
                    "{}:{}:{}",
                    at.origin.rsplit('/').next().unwrap(),
                    at.line,
                    at.column
                )
            })
            .collect();
        // The syntax error of one file does not hide the others' problems, nor one table's
        // problem the next table's.
        assert_eq!(
            places,
            [
                "policy.toml:2:1",
                "policy.toml:7:10",
                "policy.toml:9:1",
                "bad.toml:1:10",
                "ok.toml:1:1"
            ],
            "{errors:#?}"
        );
        let joined = PolicyError::from_problems(errors).to_string();
        assert_eq!(joined.lines().count(), 5, "{joined}");
    }

    #[test]
    fn a_policy_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = policy_dir(MAIN, &[("a.toml", "")]);
        let main = dir.path().join("policy.toml");
        assert!(Policy::load(&main).is_ok());
        for (path, mode) in [
            (main.clone(), 0o664),
            (main.clone(), 0o646),
            (dir.path().join("policy.d"), 0o775),
            (dir.path().join("policy.d/a.toml"), 0o666),
        ] {
            let before = std::fs::metadata(&path).unwrap().permissions();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let message = Policy::load(&main).unwrap_err().to_string();
            assert!(
                message.contains("refusing a policy that group or others can write")
                    && message.contains(&format!("{}: ", path.display()))
                    && message.contains("chmod go-w"),
                "{message}"
            );
            std::fs::set_permissions(&path, before).unwrap();
        }
    }

    // ---- principal limits, rates, `*` -----------------------------------------------------------

    #[test]
    fn principal_limits_narrow_the_policy_limits() {
        let policy = parse(
            "[limits]\nmemory = \"128MiB\"\nmax_tool_calls = 50\n\n[[principal]]\nname = \"a\"\nusers = [0]\nexecutions_per_minute = 30\ntool_calls_per_minute = 0\n[principal.limits]\nmemory = \"32MiB\"\ntimeout_ms = 60000\n",
        )
        .unwrap();
        let p = &policy.principals[0];
        assert_eq!(p.limits.memory_bytes, 32 << 20);
        assert_eq!(p.limits.max_tool_calls, 50, "inherited");
        // timeout_ms is a default within the principal's max, not a ceiling.
        assert_eq!(p.limits.timeout_ms, 60_000);
        assert_eq!(p.rates.executions_per_minute, Some(30));
        assert_eq!(p.rates.tool_calls_per_minute, None, "0 = no limit");

        let message = error_at(
            "[limits]\nmemory = \"128MiB\"\n\n[[principal]]\nname = \"a\"\nusers = [0]\nlimits = { memory = \"1GiB\" }\n",
            7,
            21,
            "principal[0].limits.memory",
        );
        assert!(
            message.contains("1GiB is more than the policy's limits.memory (128MiB)"),
            "{message}"
        );
        error_at(
            "[[principal]]\nname = \"a\"\nusers = [0]\nexecutions_per_minute = -1\n",
            4,
            25,
            "principal[0].executions_per_minute",
        );
    }

    #[test]
    fn a_principal_for_every_user_is_accepted_with_a_warning() {
        let policy =
            parse("[[principal]]\nname = \"all\"\nusers = [\"*\"]\nallow = [\"time.*\"]\n")
                .unwrap();
        assert!(policy.admit(4242, 4242, &[]).is_some());
        assert_eq!(policy.warnings.len(), 1);
        let warning = policy.warnings[0].to_string();
        assert!(
            warning.starts_with(&format!(
                "{FILE}:2:8: warning: principal \"all\" admits every local user"
            )),
            "{warning}"
        );
        assert!(parse(MAIN).unwrap().warnings.is_empty());
    }

    #[test]
    fn secret_scanning_names_sources_to_fail() {
        let policy = parse(
            "[[server]]\nname = \"gh\"\ncommand = \"/bin/true\"\n\n[secret_scanning]\nfail = [\"gh\"]\n",
        )
        .unwrap();
        use crate::secret_scanning::SecretAction;
        assert_eq!(policy.secret_scanning.action("gh"), SecretAction::Fail);
        assert_eq!(policy.secret_scanning.action("other"), SecretAction::Redact);
        let message = error_at(
            "[secret_scanning]\nfail = [\"nope\"]\n",
            2,
            9,
            "secret_scanning.fail[0]",
        );
        assert!(
            message.contains("no tool source is named \"nope\""),
            "{message}"
        );
    }
}
