//! Where the agent socket lives and how it is created safely.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error(
        "no socket path: XDG_RUNTIME_DIR is not set and the daemon is not running as root; pass --socket PATH"
    )]
    NoDefault,
    #[error("cannot create socket directory {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("another airlockd is already serving {0}; stop it or choose another --socket")]
    InUse(PathBuf),
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    #[error("cannot bind {path}: {source}")]
    Bind { path: PathBuf, source: io::Error },
    #[error("cannot set mode {mode:o} on {path}: {source}")]
    Chmod {
        path: PathBuf,
        mode: u32,
        source: io::Error,
    },
}

/// Where the daemon binds when neither `--socket` nor `daemon.socket` says: under systemd,
/// `$RUNTIME_DIRECTORY/airlock.sock` (the unit's `RuntimeDirectory=airlock`, so a dedicated
/// service user needs no XDG runtime dir); otherwise `/run/airlock/airlock.sock` for root and
/// `$XDG_RUNTIME_DIR/airlock/airlock.sock` for other users.
pub fn default_socket_path() -> Result<PathBuf, SocketError> {
    if let Some(dir) = std::env::var_os("RUNTIME_DIRECTORY").filter(|d| !d.is_empty()) {
        // systemd may list several directories separated by ':'; the first is ours.
        let first = dir
            .to_string_lossy()
            .split(':')
            .next()
            .unwrap_or_default()
            .to_owned();
        if !first.is_empty() {
            return Ok(Path::new(&first).join("airlock.sock"));
        }
    }
    user_socket_path()
}

/// The per-user default, ignoring systemd: `/run/airlock/airlock.sock` for root,
/// `$XDG_RUNTIME_DIR/airlock/airlock.sock` otherwise.
fn user_socket_path() -> Result<PathBuf, SocketError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(PathBuf::from(SYSTEM_SOCKET));
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => Ok(Path::new(&dir).join("airlock").join("airlock.sock")),
        _ => Err(SocketError::NoDefault),
    }
}

/// The system daemon's socket (`airlockd.socket`, `RuntimeDirectory=airlock`).
pub(crate) const SYSTEM_SOCKET: &str = "/run/airlock/airlock.sock";

/// The socket a client should use when none is given: the user's own daemon if its socket
/// exists, else the system daemon's, else the user default (so the error names it).
pub fn client_socket_path() -> Result<PathBuf, SocketError> {
    match user_socket_path() {
        Ok(p) if p.exists() => Ok(p),
        user => {
            let system = PathBuf::from(SYSTEM_SOCKET);
            if system.exists() {
                Ok(system)
            } else {
                user.or(Ok(system))
            }
        }
    }
}

/// Binds the agent socket at `path` with permissions `mode`, replacing a stale socket left
/// by a daemon that died but never a live one or a non-socket file.
pub fn bind(path: &Path, mode: u32) -> Result<std::os::unix::net::UnixListener, SocketError> {
    if let Some(dir) = path.parent().filter(|d| !d.exists()) {
        std::fs::create_dir_all(dir).map_err(|source| SocketError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
        // Traversable for the socket's group; the socket's own mode does the gating.
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(SocketError::InUse(path.to_owned()));
            }
            let _ = std::fs::remove_file(path);
        }
        Ok(_) => return Err(SocketError::NotASocket(path.to_owned())),
        Err(_) => {}
    }
    let listener =
        std::os::unix::net::UnixListener::bind(path).map_err(|source| SocketError::Bind {
            path: path.to_owned(),
            source,
        })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        SocketError::Chmod {
            path: path.to_owned(),
            mode,
            source,
        }
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| SocketError::Bind {
            path: path.to_owned(),
            source,
        })?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_replaces_stale_and_refuses_live_or_foreign() {
        let dir = std::env::temp_dir().join(format!("airlock-sock-{}", std::process::id()));
        let path = dir.join("nested").join("a.sock");
        let l = bind(&path, 0o660).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        assert!(matches!(bind(&path, 0o660), Err(SocketError::InUse(_))));
        drop(l);
        // The file is still there but nobody listens: stale, so it is replaced.
        bind(&path, 0o600).unwrap();
        let file = dir.join("plain");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(
            bind(&file, 0o660),
            Err(SocketError::NotASocket(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
