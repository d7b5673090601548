//! [`PolicyError`], the error every part of the policy reports through, and [`PolicyWarning`].
//!
//! A leaf of the crate: the tables' modules all report here, so it may import only the small
//! value types its variants carry, never a table's module.

use crate::account::AccountError;
use crate::byte_size::ByteSizeError;
use crate::duration::DurationError;
use crate::file_mode::FileModeError;
use crate::source_location::Location;
use crate::tool_pattern::ToolPatternError;
use std::io;
use std::path::PathBuf;

/// Why a policy was rejected. `Display` starts with `file:line:column:` wherever the position is
/// known, then names the dotted key (`limits.memory`, `principal[1].users[2]`).
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// Several problems, each on its own line (what [`Policy::load`] returns for more than one).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Several(Vec<PolicyError>),
    /// A policy file or drop-in directory that others could change.
    #[error(
        "{}: refusing a policy that group or others can write (mode {mode:04o}): whoever can write it decides what agents may do; run `chmod go-w {}`",
        path.display(),
        path.display()
    )]
    WritableByOthers {
        /// The file or directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
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
    /// A duration string that does not parse.
    #[error("{at}: {key}: {source}")]
    InvalidDuration {
        /// Where the value is.
        at: Location,
        /// Its dotted path.
        key: String,
        /// What is wrong with it.
        source: DurationError,
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
    /// Two principals (or two tool sources) with the same name.
    #[error(
        "{at}: {key}: duplicate {what} name \"{name}\" (first defined at {})",
        first_place(first, at)
    )]
    DuplicateName {
        /// Where the second name is.
        at: Location,
        /// Its dotted path, e.g. `principal[2].name`.
        key: String,
        /// `principal` or `server`.
        what: &'static str,
        /// The name.
        name: String,
        /// Where the name was first given (boxed: keeps the error small).
        first: Box<Location>,
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

/// How a duplicate's first definition is named: `line N` in the same file, else the full place.
fn first_place(first: &Location, at: &Location) -> String {
    if first.origin == at.origin {
        format!("line {}", first.line)
    } else {
        first.to_string()
    }
}

impl PolicyError {
    /// One problem as itself, several as [`PolicyError::Several`].
    pub fn from_problems(mut problems: Vec<PolicyError>) -> PolicyError {
        if problems.len() == 1 {
            problems.remove(0)
        } else {
            PolicyError::Several(problems)
        }
    }

    /// Where in the file the problem is (`None` when the file could not be read).
    pub fn location(&self) -> Option<&Location> {
        match self {
            PolicyError::Several(errors) => errors.first().and_then(PolicyError::location),
            PolicyError::Read { .. } | PolicyError::WritableByOthers { .. } => None,
            PolicyError::Syntax { at, .. }
            | PolicyError::UnknownKey { at, .. }
            | PolicyError::WrongType { at, .. }
            | PolicyError::MissingKey { at, .. }
            | PolicyError::OutOfRange { at, .. }
            | PolicyError::InvalidSize { at, .. }
            | PolicyError::InvalidDuration { at, .. }
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
            PolicyError::Several(errors) => errors.first().and_then(PolicyError::key),
            PolicyError::Read { .. }
            | PolicyError::WritableByOthers { .. }
            | PolicyError::Syntax { .. } => None,
            PolicyError::UnknownKey { key, .. }
            | PolicyError::WrongType { key, .. }
            | PolicyError::MissingKey { key, .. }
            | PolicyError::OutOfRange { key, .. }
            | PolicyError::InvalidSize { key, .. }
            | PolicyError::InvalidDuration { key, .. }
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

/// Something valid but worth the operator's attention (a `*` principal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyWarning {
    /// Where it is.
    pub at: Location,
    /// What is worth attention, and what to do about it.
    pub message: String,
}

impl std::fmt::Display for PolicyWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: warning: {}", self.at, self.message)
    }
}
