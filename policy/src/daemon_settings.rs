//! The `[daemon]` table: where the daemon listens, how many workers it keeps ready, how it stops.

use std::path::PathBuf;

use toml::de::DeValue;

use crate::document::{Field, TableReader};
use crate::error::PolicyError;
use crate::file_mode::{MAX_FILE_MODE, format_file_mode, parse_file_mode};

/// Settings of the daemon process itself (`[daemon]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonSettings {
    /// Path of the listening Unix socket; `None` lets the daemon choose its default location.
    /// Ignored when systemd passes a listening socket (socket activation).
    pub socket: Option<PathBuf>,
    /// Permission bits of the socket file; default `0o660`.
    pub socket_mode: u32,
    /// Number of pre-started, locked-down workers kept ready; `0` disables the pool.
    pub pool_size: usize,
    /// The worker binary; `None` means `airlock-worker` next to the `airlockd` binary.
    pub worker_path: Option<PathBuf>,
    /// How long a stopping daemon lets running executions finish before killing them.
    pub shutdown_grace_ms: u64,
    /// Executions running at once across all clients; more wait in a queue.
    pub max_concurrent_executions: usize,
    /// How new workers are started (`worker_start`): forked by a zygote (default) or by
    /// `exec` of the worker binary. Read once at start-up, like `socket`.
    pub worker_start: WorkerStart,
    /// Where the daemon keeps everything it keeps (the audit log, the journal, learned types,
    /// tool servers' scratch directories); `None`: `$STATE_DIRECTORY`, else
    /// `$XDG_STATE_HOME/airlock`, else `~/.local/state/airlock`. Read once at start-up.
    pub state_directory: Option<PathBuf>,
    /// The account a root daemon runs its confined stdio servers as, unless a server names
    /// its own `user` (a name or a uid); `None`: `nobody`. Ignored by a daemon that does not
    /// run as root (its servers run as its own user).
    pub server_user: Option<String>,
    /// Connections open at once, all principals together (`max_connections`); one more is
    /// answered `503` and closed before anything of it is read. Each principal's own
    /// `limits.max_connections` bounds its part.
    pub max_connections: u32,
    /// How long a connection may take to send a request's head, and stay idle between
    /// requests (`idle_timeout`), before it is closed.
    pub idle_timeout_ms: u64,
    /// How long a request's body may take to arrive once its head has (`body_timeout`); a
    /// slower one is answered `400` and the connection closed.
    pub body_timeout_ms: u64,
    /// How long an answer may wait for its reader (`write_timeout`): a connection that reads
    /// none of it for that long is closed, so a slow reader holds no more than the socket's
    /// buffer and the one answer being written.
    pub write_timeout_ms: u64,
}

/// `[daemon] worker_start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkerStart {
    /// `"fork"`: a locked-down zygote that has started the engine forks each new worker.
    #[default]
    Fork,
    /// `"exec"`: each worker is a new `exec` of the worker binary (its own address-space
    /// layout, at the cost of the loader and the engine's start per worker).
    Exec,
}

impl DaemonSettings {
    /// Keys accepted in `[daemon]`.
    pub(crate) const KEYS: &'static [&'static str] = &[
        "socket",
        "socket_mode",
        "pool_size",
        "worker_path",
        "shutdown_grace_ms",
        "max_concurrent_executions",
        "worker_start",
        "state_directory",
        "server_user",
        "max_connections",
        "idle_timeout",
        "body_timeout",
        "write_timeout",
    ];
    /// Default `socket_mode`.
    pub const DEFAULT_SOCKET_MODE: u32 = 0o660;
    /// Default `pool_size`.
    pub const DEFAULT_POOL_SIZE: usize = 2;
    /// Largest `pool_size`.
    pub const MAX_POOL_SIZE: usize = 256;
    /// Default `shutdown_grace_ms`.
    pub const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 10_000;
    /// Largest `shutdown_grace_ms` (10 minutes).
    pub const MAX_SHUTDOWN_GRACE_MS: u64 = 600_000;
    /// Default `max_concurrent_executions`.
    pub const DEFAULT_MAX_CONCURRENT_EXECUTIONS: usize = 64;
    /// Largest `max_concurrent_executions`.
    pub const MAX_CONCURRENT_EXECUTIONS: usize = 4096;
    /// Default `max_connections`.
    pub const DEFAULT_MAX_CONNECTIONS: u32 = 1024;
    /// Largest `max_connections`.
    pub const MAX_CONNECTIONS: u32 = 65_536;
    /// Default `idle_timeout` (30 s).
    pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 30_000;
    /// Default `body_timeout` (30 s).
    pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 30_000;
    /// Default `write_timeout` (30 s).
    pub const DEFAULT_WRITE_TIMEOUT_MS: u64 = 30_000;
    /// Smallest connection timeout (1 s).
    pub const MIN_CONNECTION_TIMEOUT_MS: u64 = 1_000;
    /// Largest connection timeout (1 h).
    pub const MAX_CONNECTION_TIMEOUT_MS: u64 = 3_600_000;
    /// Longest socket path: `sun_path` holds 108 bytes including the terminating NUL.
    pub const MAX_SOCKET_PATH_BYTES: usize = 107;

    pub(crate) fn read(table: &TableReader<'_>) -> Result<Self, PolicyError> {
        let defaults = DaemonSettings::default();
        Ok(DaemonSettings {
            socket: match table.get("socket") {
                Some(field) => Some(socket_path(&field)?),
                None => defaults.socket,
            },
            socket_mode: match table.get("socket_mode") {
                Some(field) => socket_mode(&field)?,
                None => defaults.socket_mode,
            },
            pool_size: match table.get("pool_size") {
                Some(field) => usize_in(&field, 0, Self::MAX_POOL_SIZE)?,
                None => defaults.pool_size,
            },
            worker_path: match table.get("worker_path") {
                Some(field) => Some(absolute_path(&field)?),
                None => defaults.worker_path,
            },
            shutdown_grace_ms: match table.get("shutdown_grace_ms") {
                Some(field) => field.u64_in(0..=Self::MAX_SHUTDOWN_GRACE_MS)?,
                None => defaults.shutdown_grace_ms,
            },
            max_concurrent_executions: match table.get("max_concurrent_executions") {
                Some(field) => usize_in(&field, 1, Self::MAX_CONCURRENT_EXECUTIONS)?,
                None => defaults.max_concurrent_executions,
            },
            worker_start: match table.get("worker_start") {
                Some(field) => match field.string("\"fork\" or \"exec\"")? {
                    "fork" => WorkerStart::Fork,
                    "exec" => WorkerStart::Exec,
                    other => {
                        return Err(field.invalid(format!(
                            "\"{other}\" is not a way to start workers: use \"fork\" (a zygote forks them, the default) or \"exec\""
                        )));
                    }
                },
                None => defaults.worker_start,
            },
            state_directory: match table.get("state_directory") {
                Some(field) => Some(absolute_path(&field)?),
                None => defaults.state_directory,
            },
            server_user: table.get("server_user").map(|f| account(&f)).transpose()?,
            max_connections: match table.get("max_connections") {
                Some(field) => field.u32_in(1..=Self::MAX_CONNECTIONS)?,
                None => defaults.max_connections,
            },
            idle_timeout_ms: connection_timeout(table, "idle_timeout", defaults.idle_timeout_ms)?,
            body_timeout_ms: connection_timeout(table, "body_timeout", defaults.body_timeout_ms)?,
            write_timeout_ms: connection_timeout(
                table,
                "write_timeout",
                defaults.write_timeout_ms,
            )?,
        })
    }
}

impl Default for DaemonSettings {
    fn default() -> Self {
        DaemonSettings {
            socket: None,
            socket_mode: Self::DEFAULT_SOCKET_MODE,
            pool_size: Self::DEFAULT_POOL_SIZE,
            worker_path: None,
            shutdown_grace_ms: Self::DEFAULT_SHUTDOWN_GRACE_MS,
            max_concurrent_executions: Self::DEFAULT_MAX_CONCURRENT_EXECUTIONS,
            worker_start: WorkerStart::default(),
            state_directory: None,
            server_user: None,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            idle_timeout_ms: Self::DEFAULT_IDLE_TIMEOUT_MS,
            body_timeout_ms: Self::DEFAULT_BODY_TIMEOUT_MS,
            write_timeout_ms: Self::DEFAULT_WRITE_TIMEOUT_MS,
        }
    }
}

/// An account as `user` and `server_user` take it: a user name (letters, digits, `_`, `-`,
/// `.`, not starting with `-`, at most 32 bytes) or a numeric uid. Whether it exists is
/// checked when a server starts (the account database may change).
pub(crate) fn account(field: &Field<'_>) -> Result<String, PolicyError> {
    let text = field.string("a user name or a uid")?;
    let all_digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let valid = if all_digits {
        text.parse::<u32>().is_ok()
    } else {
        !text.is_empty()
            && text.len() <= 32
            && !text.starts_with('-')
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    };
    if !valid {
        return Err(field.invalid(format!("\"{text}\" is neither a user name nor a uid")));
    }
    Ok(text.to_owned())
}

/// A connection timeout: a duration from 1 s to 1 h.
fn connection_timeout(
    table: &TableReader<'_>,
    key: &str,
    default: u64,
) -> Result<u64, PolicyError> {
    match table.get(key) {
        Some(field) => field.duration_ms_in(
            DaemonSettings::MIN_CONNECTION_TIMEOUT_MS..=DaemonSettings::MAX_CONNECTION_TIMEOUT_MS,
        ),
        None => Ok(default),
    }
}

fn usize_in(field: &Field<'_>, min: usize, max: usize) -> Result<usize, PolicyError> {
    let n = field.u64_in(min as u64..=max as u64)?;
    usize::try_from(n).map_err(|_| field.out_of_range(format!("{min}..={max}")))
}

/// An absolute path without NUL bytes (`worker_path`, `[audit] directory`).
pub(crate) fn absolute_path(field: &Field<'_>) -> Result<PathBuf, PolicyError> {
    let path = field.string("an absolute path string")?;
    if !path.starts_with('/') {
        return Err(field.invalid(format!(
            "path \"{path}\" is not absolute (it must start with `/`)"
        )));
    }
    if path.contains('\0') {
        return Err(field.invalid("path contains a NUL character"));
    }
    Ok(PathBuf::from(path))
}

fn socket_path(field: &Field<'_>) -> Result<PathBuf, PolicyError> {
    let path = absolute_path(field)?;
    let len = path.as_os_str().len();
    if len > DaemonSettings::MAX_SOCKET_PATH_BYTES {
        return Err(field.invalid(format!(
            "socket path is {len} bytes long; Unix socket paths can be at most {} bytes",
            DaemonSettings::MAX_SOCKET_PATH_BYTES
        )));
    }
    Ok(path)
}

fn socket_mode(field: &Field<'_>) -> Result<u32, PolicyError> {
    match field.value() {
        DeValue::String(text) => parse_file_mode(text).map_err(|source| PolicyError::InvalidMode {
            at: field.location(),
            key: field.path().to_owned(),
            source,
        }),
        // `socket_mode = 0o660` is a TOML octal integer and means what it says.
        DeValue::Integer(n) if n.radix() == 8 => {
            let mode = field.integer("an octal mode")?;
            u32::try_from(mode)
                .ok()
                .filter(|&mode| mode <= MAX_FILE_MODE)
                .ok_or_else(|| field.out_of_range(format!("0o0..=0o{MAX_FILE_MODE:o}")))
        }
        // A decimal `660` would silently mean 0o1224: refuse and say how to write it.
        DeValue::Integer(_) => Err(field.invalid(format!(
            "write the mode as an octal string such as \"{}\" (or the TOML octal integer 0o660), not the decimal integer {}",
            format_file_mode(DaemonSettings::DEFAULT_SOCKET_MODE),
            field.as_written()
        ))),
        _ => Err(field.wrong_type("an octal mode string such as \"0660\"")),
    }
}

#[cfg(test)]
mod tests {
    use crate::document::test_support::{assert_refused, parse};

    #[test]
    fn connection_limits_and_timeouts_have_defaults_and_are_read() {
        let defaults = parse("").unwrap().daemon;
        assert_eq!(defaults.max_connections, 1024);
        assert_eq!(defaults.idle_timeout_ms, 30_000);
        assert_eq!(defaults.write_timeout_ms, 30_000);
        assert_eq!(defaults.body_timeout_ms, 30_000);
        let read =
            parse("[daemon]\nmax_connections = 10\nidle_timeout = \"2m\"\nwrite_timeout = 5\n")
                .unwrap()
                .daemon;
        assert_eq!(read.max_connections, 10);
        assert_eq!(read.idle_timeout_ms, 120_000);
        assert_eq!(read.write_timeout_ms, 5_000, "an integer is seconds");
    }

    #[test]
    fn connection_limits_and_timeouts_out_of_bounds_name_the_key() {
        let cases: &[(&str, &str, &str)] = &[
            ("max_connections = 0", "daemon.max_connections", "1..=65536"),
            ("idle_timeout = \"0s\"", "daemon.idle_timeout", "1s..=1h"),
            ("idle_timeout = \"2h\"", "daemon.idle_timeout", "1s..=1h"),
            ("write_timeout = 0", "daemon.write_timeout", "1s..=1h"),
            ("body_timeout = \"61m\"", "daemon.body_timeout", "1s..=1h"),
            (
                "write_timeout = true",
                "daemon.write_timeout",
                "a duration such as",
            ),
        ];
        for &(line, key, detail) in cases {
            assert_refused(&format!("[daemon]\n{line}\n"), "2", key, detail);
        }
    }
}
