//! How a stdio server is started confined: the [`Profile`] made from its `[[server]]` entry
//! (what it may read and write, its network, its rlimits), and the `airlock-confine` launcher
//! that applies it and execs the server (see the `airlock-confine` crate for the layers).
//!
//! What a server may read: the system (`/usr`, `/lib*`, `/bin`, `/sbin`, `/etc`), what its
//! command really runs (`what_runs`: the command found on its `PATH`, the file a symbolic
//! link leads to, a script's `#!` interpreter, `/usr/bin/env X` resolved through the `PATH`,
//! a virtualenv's base interpreter from its `pyvenv.cfg`, each with its install prefix:
//! `/opt/node` for `/opt/node/bin/node`, the whole `node_modules` for a file in one, the
//! virtualenv for a file in one, the pyenv version or uv-managed Python of an interpreter),
//! the package files its arguments name, its `cwd`, and the policy's `read`. What it may
//! write: its scratch directory (also its `HOME` and `TMPDIR`) and the policy's `write`.
//!
//! No entry may contain what the daemon protects: its state directory (with every server's
//! scratch and the audit log), its policy directory, its socket's directory and its systemd
//! credentials. An automatic entry that would is narrowed to the command's own directory; a
//! policy entry that would refuses the server, naming both.

use crate::secrets::store::SecretStore;
use crate::tools::ToolError;
use crate::tools::sources::settings::Settings;
use airlock_confine::{Mode, Network, Profile, RunAs, ServerLimits};
use airlock_policy::{
    ConfineMode, Confinement, DaemonSettings, ServerNetwork, ServerTransport, ToolServer,
};
use std::path::{Path, PathBuf};

/// Directories of the system every server may read and execute.
const SYSTEM: &[&str] = &["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc"];

/// Files and directories under the system's directories (which every server may read) that
/// hold secrets of the host, each covered in every server's mount namespace (an empty
/// directory, or `/dev/null` over a file), with why. A `read` or `write` entry of the policy
/// that names one (or a path inside one) leaves that one uncovered for that server.
const SYSTEM_SECRETS: &[(&str, &str)] = &[
    ("/etc/shadow", "password hashes"),
    ("/etc/shadow-", "the previous password hashes"),
    ("/etc/gshadow", "group password hashes"),
    ("/etc/gshadow-", "the previous group password hashes"),
    ("/etc/security/opasswd", "old password hashes"),
    ("/etc/ssl/private", "TLS private keys"),
    ("/etc/letsencrypt", "certificates' private keys"),
    ("/etc/krb5.keytab", "Kerberos keys of the host"),
    ("/etc/wireguard", "WireGuard private keys"),
    ("/etc/ipsec.secrets", "IPsec keys"),
    ("/etc/ppp/chap-secrets", "PPP passwords"),
    ("/etc/ppp/pap-secrets", "PPP passwords"),
    (
        "/etc/NetworkManager/system-connections",
        "Wi-Fi and VPN passwords",
    ),
    ("/etc/credstore", "systemd credentials"),
    ("/etc/credstore.encrypted", "systemd credentials"),
    ("/etc/sudoers", "who may become root"),
    ("/etc/sudoers.d", "who may become root"),
];

/// The SSH host's private keys (`/etc/ssh/ssh_host_*_key`; the `.pub` files stay readable).
fn ssh_host_keys() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/etc/ssh") else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ssh_host_") && n.ends_with("_key"))
        })
        .collect()
}

/// The host's secrets that exist here and that `confinement` does not grant by name.
fn system_secrets(confinement: &Confinement) -> Vec<PathBuf> {
    let granted = |secret: &Path| {
        confinement
            .read
            .iter()
            .chain(&confinement.write)
            .any(|p| p.starts_with(secret))
    };
    SYSTEM_SECRETS
        .iter()
        .map(|(path, _)| PathBuf::from(path))
        .chain(ssh_host_keys())
        .filter(|p| std::fs::symlink_metadata(p).is_ok() && !granted(p))
        .collect()
}

/// Where confined servers are launched from and keep their files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerHost {
    /// The `airlock-confine` binary.
    pub launcher: PathBuf,
    /// Each server's scratch directory is `<scratch_root>/<name>` (mode 0700).
    pub scratch_root: PathBuf,
    /// What no server may reach (state, policy, socket, credentials): no read or write
    /// entry may contain one.
    pub protected: Vec<PathBuf>,
    /// What is also covered in each server's mount namespace: the policy files, the socket
    /// and the credentials (the state directory is reachable only through the server's own
    /// scratch, and covering it would cover that too).
    pub hidden: Vec<PathBuf>,
    /// The account confined servers run as unless their entry names a `user`: for a daemon
    /// running as root, `[daemon] server_user` or `nobody`; `None` for any other daemon (its
    /// servers run as its own user).
    pub server_user: Option<String>,
}

impl ServerHost {
    /// The launcher beside `worker` (cargo and the packages put the binaries in one
    /// directory), scratch directories under `state/servers`.
    /// `hidden` are the policy files, the socket and the credentials directory.
    pub fn new(worker: &Path, state: &Path, hidden: Vec<PathBuf>) -> ServerHost {
        let mut protected = hidden.clone();
        protected.push(state.to_owned());
        ServerHost {
            launcher: worker.with_file_name("airlock-confine"),
            scratch_root: state.join("servers"),
            protected: with_real_paths(protected),
            hidden,
            server_user: None,
        }
    }

    /// Where a daemon on `settings` launches its servers from and keeps their files, and what
    /// none of them may reach: the one place this is decided, for `airlockd` and for `airlock
    /// policy explain --config` (which describes what a daemon started beside it would do).
    ///
    /// `worker` is the daemon's worker binary (the launcher is beside it); `state` its state
    /// directory, else systemd's or the user's, else `airlock` in the temporary directory;
    /// `policy` its policy file (covered with its drop-in directory); `protected` more paths
    /// no server may reach (the socket); `data` the audit log's and the journal's own
    /// directories, when they have them. `$CREDENTIALS_DIRECTORY` is covered when it is set.
    pub fn of_daemon(
        worker: &Path,
        state: Option<PathBuf>,
        policy: Option<&Path>,
        settings: &DaemonSettings,
        mut protected: Vec<PathBuf>,
        data: Vec<PathBuf>,
    ) -> ServerHost {
        let state = state
            .or_else(|| crate::audit_log::default_directory(|k| std::env::var_os(k)).ok())
            .unwrap_or_else(|| std::env::temp_dir().join("airlock"));
        // The audit log's and the journal's own directories, when they have them, are covered
        // like the policy; not one that holds the state directory, where the servers' scratch
        // directories are (no grant may contain it all the same: ServerHost protects the state).
        protected.extend(data.into_iter().filter(|dir| !state.starts_with(dir)));
        if let Some(path) = policy {
            protected.push(path.to_owned());
            protected.push(airlock_policy::policy_file::drop_in_directory(path));
        }
        if let Some(credentials) = std::env::var_os("CREDENTIALS_DIRECTORY") {
            protected.push(PathBuf::from(credentials));
        }
        ServerHost::new(worker, &state, protected).with_server_user(server_user(settings))
    }

    /// The same, with the account its confined servers run as by default (see
    /// [`ServerHost::server_user`]).
    pub fn with_server_user(mut self, user: Option<String>) -> ServerHost {
        self.server_user = user;
        self
    }

    /// For a source made outside a daemon (tests, `airlock` subcommands): the launcher beside
    /// this executable (or one directory up, for cargo's `deps/`), scratch directories under
    /// the temporary directory.
    pub fn discover() -> ServerHost {
        let exe = std::env::current_exe().unwrap_or_default();
        let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
        let launcher = [
            dir.clone(),
            dir.parent().map(Path::to_path_buf).unwrap_or_default(),
        ]
        .into_iter()
        .map(|d| d.join("airlock-confine"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| dir.join("airlock-confine"));
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let state = std::env::temp_dir().join(format!("airlock-{uid}"));
        ServerHost {
            launcher,
            scratch_root: state.join("servers"),
            protected: with_real_paths(vec![state]),
            hidden: Vec::new(),
            server_user: None,
        }
    }
}

/// Why a server cannot run as the account its entry (or the host's default) names.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunAsError {
    #[error(
        "its user \"{0}\" does not exist on this host: create it, or name another in `user` (or `[daemon] server_user`)"
    )]
    NoSuchUser(String),
    #[error("looking up its user \"{name}\": {cause}")]
    Lookup {
        name: String,
        cause: nix::errno::Errno,
    },
    #[error(
        "it is to run as user \"{name}\" (uid {uid}), and only a daemon running as root can start it so (this one runs as uid {daemon}): remove its `user`, or run airlockd as root"
    )]
    NotRoot { name: String, uid: u32, daemon: u32 },
}

/// The account a server runs as, when it is not the daemon's own: its `user`, else the host's
/// default (a root daemon's `server_user` or `nobody`). A daemon that is not root cannot
/// switch: a `user` other than its own refuses the server.
fn run_as(confinement: &Confinement, host: &ServerHost) -> Result<Option<RunAs>, RunAsError> {
    run_as_from(confinement, host, airlock_policy::account::effective_uid())
}

/// [`run_as`] for a daemon running as uid `daemon`.
fn run_as_from(
    confinement: &Confinement,
    host: &ServerHost,
    daemon: u32,
) -> Result<Option<RunAs>, RunAsError> {
    let Some(name) = account(confinement, host) else {
        return Ok(None);
    };
    let user = match name.parse::<u32>() {
        Ok(uid) => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .map(|found| found.unwrap_or_else(|| numeric_user(uid))),
        Err(_) => nix::unistd::User::from_name(name)
            .and_then(|found| found.ok_or(nix::errno::Errno::ENOENT)),
    }
    .map_err(|cause| match cause {
        nix::errno::Errno::ENOENT => RunAsError::NoSuchUser(name.clone()),
        cause => RunAsError::Lookup {
            name: name.clone(),
            cause,
        },
    })?;
    if user.uid.as_raw() == daemon {
        return Ok(None);
    }
    if daemon != 0 {
        return Err(RunAsError::NotRoot {
            name: name.clone(),
            uid: user.uid.as_raw(),
            daemon,
        });
    }
    Ok(Some(RunAs {
        name: name.clone(),
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
    }))
}

/// The account a daemon running as root starts its confined servers as (unless an entry names
/// its own `user`): `[daemon] server_user`, else `nobody`. Root's servers never keep uid 0 by
/// default: the files of the host's root would be theirs to read. Other daemons' servers run
/// as the daemon's user.
pub fn server_user(settings: &DaemonSettings) -> Option<String> {
    (airlock_policy::account::effective_uid() == 0).then(|| {
        settings
            .server_user
            .clone()
            .unwrap_or_else(|| "nobody".to_owned())
    })
}

/// The account a server is to run as, as the policy names it: its `user`, else the host's
/// default ([`ServerHost::server_user`]).
pub(crate) fn account<'a>(
    confinement: &'a Confinement,
    host: &'a ServerHost,
) -> Option<&'a String> {
    confinement.user.as_ref().or(host.server_user.as_ref())
}

/// A uid with no entry in the user database: its own number as its group.
fn numeric_user(uid: u32) -> nix::unistd::User {
    nix::unistd::User {
        name: uid.to_string(),
        passwd: std::ffi::CString::default(),
        uid: nix::unistd::Uid::from_raw(uid),
        gid: nix::unistd::Gid::from_raw(uid),
        gecos: std::ffi::CString::default(),
        dir: PathBuf::from("/"),
        shell: PathBuf::from("/bin/false"),
    }
}

/// `paths` and, for each that is reached through a symbolic link, the path it really is: a
/// grant is compared with both, so neither a link to the state directory nor a state
/// directory reached through a link slips past.
fn with_real_paths(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out = Vec::with_capacity(paths.len() * 2);
    for path in paths {
        let real = std::fs::canonicalize(&path).ok().filter(|r| *r != path);
        out.push(path);
        out.extend(real);
    }
    out
}

/// What a stdio server is started as.
#[derive(Debug, Clone, Copy)]
pub struct ServerCommand<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: Option<&'a Path>,
    /// The `PATH` of its environment, if the policy gives one (else the daemon's).
    pub path_env: Option<&'a str>,
}

/// The launcher's profile for a server (its scratch directory is made by
/// `make_scratch`).
pub fn profile(
    name: &str,
    confinement: &Confinement,
    started: &ServerCommand<'_>,
    host: &ServerHost,
    settings: &Settings<'_>,
) -> Result<Profile, ToolError> {
    profile_granted(name, confinement, started, host, settings).map(|(profile, _)| profile)
}

/// [`profile`], with why each path it may read was granted (for `airlock policy explain`):
/// one reason per path of `read`, in its order.
pub(crate) fn profile_granted(
    name: &str,
    confinement: &Confinement,
    started: &ServerCommand<'_>,
    host: &ServerHost,
    settings: &Settings<'_>,
) -> Result<(Profile, Vec<String>), ToolError> {
    let ServerCommand {
        command,
        args,
        cwd,
        path_env,
    } = *started;
    let unavailable = |why: String| settings.unavailable(why);
    let scratch = host.scratch_root.join(name);

    // Each path with the rule that granted it (the first rule, when several do).
    let mut read: Vec<(PathBuf, String)> = SYSTEM
        .iter()
        .map(|dir| (PathBuf::from(dir), "the system".to_owned()))
        .collect();
    for (i, found) in what_runs(command, path_env).into_iter().enumerate() {
        let why = if i == 0 {
            format!("the command, {}", found.display())
        } else {
            format!("what the command runs: {}", found.display())
        };
        read.push((narrowed(root_of(&found), &found, host), why));
    }
    for arg in args
        .iter()
        .map(Path::new)
        .filter(|a| a.is_absolute() && a.exists())
    {
        let why = format!("named in `args`: {}", arg.display());
        read.push((narrowed(package_root(arg), arg, host), why));
    }
    if let Some(dir) = cwd {
        read.push((narrowed(dir.to_owned(), dir, host), "its `cwd`".to_owned()));
    }
    for path in confinement.read.iter().chain(&confinement.write) {
        if !path.exists() {
            return Err(unavailable(format!(
                "{} (named in its `read` or `write`) does not exist",
                path.display()
            )));
        }
        // Compared as written and as the path really is: Landlock grants what a link leads to.
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        if let Some(inside) = host.protected.iter().find(|p| {
            p.starts_with(path)
                || path.starts_with(p)
                || p.starts_with(&real)
                || real.starts_with(p)
        }) {
            return Err(unavailable(format!(
                "its `read` or `write` path {} overlaps {}, which no server may reach (the daemon's state, policy, socket or credentials)",
                path.display(),
                inside.display()
            )));
        }
    }
    read.extend(
        confinement
            .read
            .iter()
            .map(|p| (p.clone(), "`read` in the policy".to_owned())),
    );
    // Sorted by path; the sort is stable, so a path granted twice keeps its first reason.
    read.sort_by(|a, b| a.0.cmp(&b.0));
    read.dedup_by(|later, earlier| later.0 == earlier.0);
    let (read, reasons): (Vec<PathBuf>, Vec<String>) = read.into_iter().unzip();
    let run_as = run_as(confinement, host).map_err(|e| unavailable(e.to_string()))?;
    let profile = Profile {
        name: name.to_owned(),
        mode: match confinement.mode {
            ConfineMode::BestEffort => Mode::BestEffort,
            ConfineMode::Strict | ConfineMode::Off => Mode::Strict,
        },
        read,
        write: confinement.write.clone(),
        workdir: cwd.map_or_else(|| scratch.clone(), Path::to_path_buf),
        hide: host
            .hidden
            .iter()
            .cloned()
            .chain(system_secrets(confinement))
            .collect(),
        scratch,
        network: match confinement.network {
            ServerNetwork::Host => Network::Host,
            ServerNetwork::None => Network::None,
            ServerNetwork::Allow(_) => Network::Proxy,
        },
        limits: ServerLimits {
            memory_bytes: confinement.memory_bytes,
            open_files: confinement.open_files,
            processes: confinement.processes,
        },
        run_as,
    };
    Ok((profile, reasons))
}

/// The server's scratch directory `scratch` (and the directory of all of them), mode 0700.
pub(crate) fn make_scratch(
    scratch: &Path,
    host: &ServerHost,
    run_as: Option<&RunAs>,
    settings: &Settings<'_>,
) -> Result<(), ToolError> {
    make_private_dir(&host.scratch_root)
        .and_then(|()| make_private_dir(scratch))
        .and_then(|()| match run_as {
            None => Ok(()),
            Some(user) => hand_over(scratch, &host.scratch_root, user),
        })
        .map_err(|e| {
            settings.unavailable(format!(
                "cannot make its scratch directory {}: {e}",
                scratch.display()
            ))
        })
}

/// A scratch directory for a server that runs as another account: its own (and what an earlier
/// run left in it), and the way to it open to be passed through (mode 0711 on the scratch root
/// and the state directory above it: no listing, and every file there is 0600 or 0700 of the
/// daemon's, which the server's account cannot open; Landlock grants it nothing there either).
fn hand_over(scratch: &Path, scratch_root: &Path, user: &RunAs) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::fs::PermissionsExt;
    let (uid, gid) = (Some(user.uid), Some(user.gid));
    std::os::unix::fs::lchown(scratch, uid, gid)?;
    // What a run as the daemon's own user left (its uid): only such entries, never through a
    // link, and never a file with other names (a hard link a server made to a file elsewhere
    // must not change that file's owner). Bounded: the server chose the depth.
    let daemon = airlock_policy::account::effective_uid();
    let mut pending = vec![(scratch.to_owned(), 0usize)];
    while let Some((dir, depth)) = pending.pop() {
        if depth > 64 {
            continue;
        }
        for entry in std::fs::read_dir(&dir)?.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            let ours = meta.uid() == daemon && (meta.is_dir() || meta.nlink() == 1);
            if !ours {
                continue;
            }
            let path = entry.path();
            std::os::unix::fs::lchown(&path, uid, gid)?;
            if meta.is_dir() {
                pending.push((path, depth + 1));
            }
        }
    }
    for dir in [Some(scratch_root), scratch_root.parent()]
        .into_iter()
        .flatten()
    {
        let mode = std::fs::metadata(dir)?.permissions().mode() & 0o7777;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o011))?;
    }
    Ok(())
}

/// What `airlock policy explain` shows of a `[[server]]`: for a stdio server, [`describe`]
/// with the `PATH` it would get (its `env`, its `inherit_env` read from this process's
/// environment, else the base); `None` for a `url` server.
pub fn describe_server(
    server: &ToolServer,
    host: &ServerHost,
    store: &SecretStore,
) -> Option<String> {
    let ServerTransport::Stdio {
        command,
        args,
        cwd,
        env,
        inherit_env,
    } = &server.transport
    else {
        return None;
    };
    let path = super::environment::path_of(env, inherit_env, super::environment::daemon_variable);
    let started = ServerCommand {
        command,
        args,
        cwd: cwd.as_deref(),
        path_env: Some(&path),
    };
    let settings = Settings {
        kind: "tool server",
        name: &server.name,
        store,
    };
    Some(describe(
        &server.name,
        &server.confinement,
        &started,
        host,
        &settings,
    ))
}

/// What `airlock policy explain --server NAME` shows of any `[[server]]`: [`describe_server`]
/// for a stdio server (without credentials: a description never reads them), a line saying so
/// for a `url` server.
pub fn server_description(server: &ToolServer, host: &ServerHost) -> String {
    describe_server(server, host, &SecretStore::empty()).unwrap_or_else(|| {
        format!(
            "server `{}`: a Streamable HTTP server, reached at its url; nothing is started or confined",
            server.name
        )
    })
}

/// What `airlock policy explain` shows of a stdio server: how it would be confined, or why
/// it would not start.
pub fn describe(
    name: &str,
    confinement: &Confinement,
    started: &ServerCommand<'_>,
    host: &ServerHost,
    settings: &Settings<'_>,
) -> String {
    if confinement.mode == ConfineMode::Off {
        return format!("server `{name}`: unconfined (confine = false)");
    }
    match profile_granted(name, confinement, started, host, settings) {
        Err(e) => format!("server `{name}`: would not start: {}", e.message),
        Ok((p, reasons)) => {
            let reads: String = p
                .read
                .iter()
                .zip(&reasons)
                .map(|(path, why)| format!("\n    {} ({why})", path.display()))
                .collect();
            let list = |paths: &[PathBuf]| {
                if paths.is_empty() {
                    return "-".to_owned();
                }
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let limit = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
            format!(
                "server `{name}`: confined ({}), network {}, runs as {}\n  reads and executes:{reads}\n  writes (`write` in the policy): {}\n  scratch, read and written (HOME, TMPDIR): {}\n  covered: {}\n  rlimits: memory {}, open files {}, processes {}",
                if p.mode == Mode::Strict {
                    "every layer"
                } else {
                    "best effort"
                },
                confinement.network.describe(),
                p.run_as.as_ref().map_or_else(
                    || "the daemon's user".to_owned(),
                    |u| format!("user {} (uid {}, gid {})", u.name, u.uid, u.gid)
                ),
                list(&p.write),
                p.scratch.display(),
                list(&p.hide),
                limit(p.limits.memory_bytes),
                limit(p.limits.open_files),
                limit(p.limits.processes),
            )
        }
    }
}

/// Everything the launcher wrote on its status socket until it closed it (at the server's
/// exec, or its own exit), at most 64 KiB, and the proxy's listening socket if it handed one
/// over (`SCM_RIGHTS`, received close-on-exec so no other child inherits it).
pub(crate) async fn read_status(
    pipe: std::os::unix::net::UnixStream,
) -> std::io::Result<(Vec<u8>, Option<std::net::TcpListener>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    pipe.set_nonblocking(true)?;
    let pipe = tokio::net::UnixStream::from_std(pipe)?;
    let mut said = Vec::new();
    let mut listener: Option<OwnedFd> = None;
    let mut chunk = [0u8; 4096];
    // Bounded: a launcher writes a few lines; more is not read.
    while said.len() < 64 * 1024 {
        let (n, fds) = pipe
            .async_io(tokio::io::Interest::READABLE, || {
                let mut space = nix::cmsg_space!([std::os::fd::RawFd; 2]);
                let mut iov = [std::io::IoSliceMut::new(&mut chunk)];
                let message = recvmsg::<()>(
                    pipe.as_raw_fd(),
                    &mut iov,
                    Some(&mut space),
                    MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
                )
                .map_err(std::io::Error::from)?;
                let mut fds = Vec::new();
                for control in message.cmsgs().map_err(std::io::Error::from)? {
                    if let ControlMessageOwned::ScmRights(received) = control {
                        fds.extend(received);
                    }
                }
                Ok((message.bytes, fds))
            })
            .await?;
        for fd in fds {
            // SAFETY: the kernel just installed this descriptor for this process; nothing
            // else owns it.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // The first one is the proxy's; any other is closed here.
            if listener.is_none() {
                listener = Some(fd);
            }
        }
        if n == 0 {
            break;
        }
        said.extend_from_slice(&chunk[..n]);
    }
    let announced = String::from_utf8_lossy(&said)
        .lines()
        .any(|l| l == airlock_confine::PROXY_LISTENER_LINE);
    Ok((
        said,
        listener
            .filter(|_| announced)
            .map(std::net::TcpListener::from),
    ))
}

/// `dir` with mode 0700, created if missing; an existing one must be a directory of ours.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {
            // `recursive` leaves an existing directory as it is: it must be a directory of
            // ours, closed to others (but for passing through, which a server of another
            // account may need: see `hand_over`).
            let meta = std::fs::symlink_metadata(dir)?;
            if !meta.is_dir() {
                return Err(std::io::Error::other("it exists and is not a directory"));
            }
            let traverse = meta.permissions().mode() & 0o011;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700 | traverse))
        }
        Err(e) => Err(e),
    }
}

/// The executable `command` names: as given when it has a `/` (if it exists), else the first
/// match on the server's `PATH` (or the daemon's).
pub(crate) fn resolve(command: &str, path_env: Option<&str>) -> Option<PathBuf> {
    if command.contains('/') {
        let path = PathBuf::from(command);
        return path.exists().then_some(path);
    }
    let path = path_env
        .map(str::to_owned)
        .or_else(|| std::env::var("PATH").ok())?;
    path.split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(command))
        .find(|p| p.is_file())
}

/// Interpreters followed from a command (a script whose interpreter is a script…).
const MAX_HOPS: usize = 4;

/// Every file starting `command` executes or needs, in order: the command as found, the file
/// its symbolic links lead to, and for a script the interpreter of its `#!` line
/// (`/usr/bin/env [-S] X` resolved through `path_env`), followed the same way; for a file in
/// a virtualenv, the base interpreter its `pyvenv.cfg` names (`home`). At most [`MAX_HOPS`]
/// interpreters deep, each file once.
pub(crate) fn what_runs(command: &str, path_env: Option<&str>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let push = |out: &mut Vec<PathBuf>, file: PathBuf| {
        if !out.contains(&file) {
            out.push(file);
        }
    };
    let mut next = resolve(command, path_env);
    for _ in 0..=MAX_HOPS {
        let Some(found) = next.take() else { break };
        let real = found.canonicalize().ok();
        let home = venv_home(&found).or_else(|| real.as_deref().and_then(venv_home));
        push(&mut out, found);
        if let Some(real) = &real {
            push(&mut out, real.clone());
        }
        if let Some(home) = home {
            let real_home = home.canonicalize().unwrap_or_else(|_| home.clone());
            push(&mut out, home);
            push(&mut out, real_home);
        }
        let Some(real) = real else { break };
        next = interpreter(&real, path_env).filter(|i| !out.contains(i));
    }
    out
}

/// The interpreter a script's `#!` line names (`/usr/bin/env X` as X on `path_env`).
fn interpreter(script: &Path, path_env: Option<&str>) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let mut file = std::fs::File::open(script).ok()?;
    let n = file.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n')?];
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if Path::new(first).file_name().is_some_and(|n| n == "env") {
        // `env [-S] [NAME=value…] X …`: X, found on the PATH env would search.
        let program = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        return resolve(program, path_env);
    }
    Some(PathBuf::from(first))
}

/// For a file in a virtualenv (a directory with `pyvenv.cfg` above it), the base Python its
/// `home` names: the interpreter the virtualenv's `bin/python` links to lives there.
fn venv_home(file: &Path) -> Option<PathBuf> {
    let venv = file.ancestors().find(|a| a.join("pyvenv.cfg").is_file())?;
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| value.trim().to_owned())
    })?;
    let home = PathBuf::from(home);
    home.is_absolute().then_some(home)
}

/// What a file the command runs needs readable besides itself: the outermost `node_modules`
/// or the virtualenv it is in, else its install prefix (a `home` directory of a virtualenv is
/// a `bin` directory, so its prefix is the Python installation).
fn root_of(file: &Path) -> PathBuf {
    let in_package = file.ancestors().any(|a| {
        a.file_name().is_some_and(|n| n == "node_modules") || a.join("pyvenv.cfg").is_file()
    });
    if in_package {
        return package_root(file);
    }
    if file.is_dir() {
        return match file.file_name().and_then(|n| n.to_str()) {
            Some("bin" | "sbin") => file.parent().unwrap_or(file).to_owned(),
            _ => file.to_owned(),
        };
    }
    install_prefix(file)
}

/// `/opt/node` for `/opt/node/bin/node`; the directory itself for a file elsewhere.
fn install_prefix(executable: &Path) -> PathBuf {
    let dir = executable.parent().unwrap_or(Path::new("/"));
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("bin" | "sbin") => dir.parent().unwrap_or(dir).to_owned(),
        _ => dir.to_owned(),
    }
}

/// What a script argument needs besides itself: the outermost `node_modules` it is in, the
/// virtualenv (a directory with `pyvenv.cfg`) it is in, or its directory.
fn package_root(file: &Path) -> PathBuf {
    let ancestors: Vec<&Path> = file.ancestors().collect();
    if let Some(modules) = ancestors
        .iter()
        .rev()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
    {
        return modules.to_path_buf();
    }
    if let Some(venv) = ancestors.iter().find(|a| a.join("pyvenv.cfg").is_file()) {
        return venv.to_path_buf();
    }
    if file.is_dir() {
        file.to_owned()
    } else {
        file.parent().unwrap_or(Path::new("/")).to_owned()
    }
}

/// `wide`, unless it contains something protected: then the directory of `exact` (or
/// `exact` itself), which cannot.
fn narrowed(wide: PathBuf, exact: &Path, host: &ServerHost) -> PathBuf {
    let covers_protected = |p: &Path| host.protected.iter().any(|x| x.starts_with(p));
    if !covers_protected(&wide) {
        return wide;
    }
    let dir = if exact.is_dir() {
        exact.to_owned()
    } else {
        exact.parent().unwrap_or(Path::new("/")).to_owned()
    };
    if covers_protected(&dir) {
        exact.to_owned()
    } else {
        dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::store::SecretStore;

    fn host(root: &Path) -> ServerHost {
        ServerHost::new(
            &root.join("bin/airlock-worker"),
            &root.join("state"),
            vec![root.join("policy"), root.join("run")],
        )
    }

    #[test]
    fn the_host_s_secrets_are_covered_unless_granted_by_name() {
        let root = tempfile::tempdir().unwrap();
        let host = host(root.path());
        let started = ServerCommand {
            command: "/bin/sh",
            args: &[],
            cwd: None,
            path_env: None,
        };
        let mut confinement = Confinement::default();
        let covered = profile("t", &confinement, &started, &host, &settings())
            .unwrap()
            .hide;
        // This machine has /etc/shadow (every Linux system does).
        assert!(
            covered.contains(&PathBuf::from("/etc/shadow")),
            "{covered:?}"
        );
        assert!(covered.contains(&root.path().join("policy")));
        confinement.read = vec![PathBuf::from("/etc/shadow")];
        let granted = profile("t", &confinement, &started, &host, &settings())
            .unwrap()
            .hide;
        assert!(
            !granted.contains(&PathBuf::from("/etc/shadow")),
            "{granted:?}"
        );
    }

    #[test]
    fn a_daemon_that_is_not_root_refuses_a_server_of_another_user() {
        let root = tempfile::tempdir().unwrap();
        let host = host(root.path());
        let confinement = Confinement {
            user: Some("root".into()),
            ..Confinement::default()
        };
        // A daemon running as uid 65534 cannot switch to root: the server is refused, naming
        // the account and both ways out.
        let refused = run_as_from(&confinement, &host, 65534)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("\"root\" (uid 0)"), "{refused}");
        assert!(refused.contains("runs as uid 65534"), "{refused}");
        assert!(refused.contains("remove its `user`"), "{refused}");
        // Its own account needs no switch; root switches to any.
        assert!(run_as_from(&confinement, &host, 0).unwrap().is_none());
        let nobody = Confinement {
            user: Some("65534".into()),
            ..Confinement::default()
        };
        assert!(run_as_from(&nobody, &host, 65534).unwrap().is_none());
        let switched = run_as_from(&nobody, &host, 0).unwrap().unwrap();
        assert_eq!(switched.uid, 65534);
        // An account that does not exist says so.
        let missing = Confinement {
            user: Some("no-such-account-here".into()),
            ..Confinement::default()
        };
        let refused = run_as_from(&missing, &host, 0).unwrap_err().to_string();
        assert!(refused.contains("does not exist on this host"), "{refused}");
    }

    #[test]
    fn a_link_to_what_the_daemon_protects_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        std::fs::create_dir_all(root.join("state/servers")).unwrap();
        std::fs::create_dir_all(root.join("elsewhere")).unwrap();
        // A link to the state directory, and a state directory reached through a link.
        std::os::unix::fs::symlink(root.join("state"), root.join("looks-harmless")).unwrap();
        std::os::unix::fs::symlink(root.join("elsewhere"), root.join("state-link")).unwrap();
        for (state, read) in [
            (root.join("state"), root.join("looks-harmless")),
            (root.join("state-link"), root.join("elsewhere")),
        ] {
            let host = ServerHost::new(&root.join("bin/airlock-worker"), &state, Vec::new());
            let confinement = Confinement {
                read: vec![read.clone()],
                ..Confinement::default()
            };
            let started = ServerCommand {
                command: "/bin/sh",
                args: &[],
                cwd: None,
                path_env: None,
            };
            let refused = profile("t", &confinement, &started, &host, &settings()).unwrap_err();
            assert!(
                refused.message.contains("which no server may reach"),
                "{}: {}",
                read.display(),
                refused.message
            );
        }
    }

    fn settings() -> Settings<'static> {
        static STORE: std::sync::OnceLock<SecretStore> = std::sync::OnceLock::new();
        Settings {
            kind: "tool server",
            name: "t",
            store: STORE.get_or_init(SecretStore::empty),
        }
    }

    fn make(
        confinement: &Confinement,
        command: &str,
        args: &[String],
        root: &Path,
    ) -> Result<Profile, ToolError> {
        let store = SecretStore::empty();
        let settings = Settings {
            kind: "tool server",
            name: "t",
            store: &store,
        };
        let started = ServerCommand {
            command,
            args,
            cwd: None,
            path_env: None,
        };
        profile("t", confinement, &started, &host(root), &settings)
    }

    #[test]
    fn reads_the_system_the_prefix_and_the_package_and_writes_only_its_scratch() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let entry = root.join("app/node_modules/@x/server/dist/index.js");
        std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
        std::fs::write(&entry, "").unwrap();
        let node = root.join("opt/node/bin/node");
        std::fs::create_dir_all(node.parent().unwrap()).unwrap();
        std::fs::write(&node, "").unwrap();
        let p = make(
            &Confinement::default(),
            node.to_str().unwrap(),
            &[entry.display().to_string()],
            root,
        )
        .unwrap();
        make_scratch(&p.scratch, &host(root), None, &settings()).unwrap();
        assert!(p.read.contains(&PathBuf::from("/usr")));
        assert!(p.read.contains(&root.join("opt/node")), "{:?}", p.read);
        assert!(
            p.read.contains(&root.join("app/node_modules")),
            "{:?}",
            p.read
        );
        assert!(p.write.is_empty());
        assert_eq!(p.scratch, root.join("state/servers/t"));
        assert_eq!(p.workdir, p.scratch);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p.scratch).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn nothing_protected_is_reachable() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // A command installed right in the daemon's state directory's parent: its prefix
        // would cover the state, so only its own directory is readable.
        let tool = root.join("bin/tool");
        std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
        std::fs::write(&tool, "").unwrap();
        let p = make(&Confinement::default(), tool.to_str().unwrap(), &[], root).unwrap();
        assert!(
            !p.read.iter().any(|r| root.join("state").starts_with(r)),
            "{:?}",
            p.read
        );
        assert!(p.read.contains(&root.join("bin")), "{:?}", p.read);
        // A policy path that would reach it refuses the server.
        let wide = Confinement {
            read: vec![root.to_owned()],
            ..Confinement::default()
        };
        let e = make(&wide, tool.to_str().unwrap(), &[], root).unwrap_err();
        assert!(
            e.message.contains("which no server may reach"),
            "{}",
            e.message
        );
        let missing = Confinement {
            write: vec![root.join("nope")],
            ..Confinement::default()
        };
        let e = make(&missing, tool.to_str().unwrap(), &[], root).unwrap_err();
        assert!(e.message.contains("does not exist"), "{}", e.message);
    }

    fn executable(path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn link(target: &Path, link: &Path) {
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, link).unwrap();
    }

    /// A virtualenv's console script: its `#!` names the virtualenv's `bin/python`, a link to
    /// a Python installed elsewhere (pyenv's layout), which `pyvenv.cfg` names as `home`.
    #[test]
    fn a_virtualenv_console_script_gets_the_virtualenv_and_its_base_python() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let base = root.join("pyenv/versions/3.12.4");
        executable(&base.join("bin/python3.12"), "");
        std::fs::create_dir_all(base.join("lib/python3.12")).unwrap();
        let venv = root.join("srv/venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!(
                "home = {}\ninclude-system-site-packages = false\n",
                base.join("bin").display()
            ),
        )
        .unwrap();
        link(&base.join("bin/python3.12"), &venv.join("bin/python"));
        let script = venv.join("bin/mcp-server-time");
        executable(
            &script,
            &format!(
                "#!{}\nimport sys\nfrom mcp_server_time import main\nsys.exit(main())\n",
                venv.join("bin/python").display()
            ),
        );
        let runs = what_runs(script.to_str().unwrap(), Some("/usr/bin:/bin"));
        assert!(runs.contains(&venv.join("bin/python")), "{runs:?}");
        assert!(runs.contains(&base.join("bin/python3.12")), "{runs:?}");
        let p = make(&Confinement::default(), script.to_str().unwrap(), &[], root).unwrap();
        assert!(p.read.contains(&venv), "{:?}", p.read);
        assert!(p.read.contains(&base), "{:?}", p.read);
        // Nothing wider than the two.
        assert!(
            !p.read
                .iter()
                .any(|r| r == root || r == &root.join("srv") || r == &root.join("pyenv")),
            "{:?}",
            p.read
        );
    }

    /// npm's bin link: a link into the package, whose `#!/usr/bin/env node` is found on the
    /// server's PATH.
    #[test]
    fn an_npm_bin_link_gets_its_node_modules_and_the_node_on_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let modules = root.join("app/node_modules");
        let entry = modules.join("@x/server/dist/index.js");
        executable(
            &entry,
            "#!/usr/bin/env -S node --enable-source-maps\nconsole.log(1)\n",
        );
        link(
            Path::new("../@x/server/dist/index.js"),
            &modules.join(".bin/x-server"),
        );
        let node = root.join("opt/node-22/bin/node");
        executable(&node, "");
        let path = format!("{}:/usr/bin:/bin", node.parent().unwrap().display());
        let command = modules.join(".bin/x-server");
        let runs = what_runs(command.to_str().unwrap(), Some(&path));
        assert!(runs.contains(&entry.canonicalize().unwrap()), "{runs:?}");
        assert!(runs.contains(&node), "{runs:?}");
        let started = ServerCommand {
            command: command.to_str().unwrap(),
            args: &[],
            cwd: None,
            path_env: Some(&path),
        };
        let p = profile(
            "t",
            &Confinement::default(),
            &started,
            &host(root),
            &settings(),
        )
        .unwrap();
        assert!(
            p.read.contains(&modules.canonicalize().unwrap()),
            "{:?}",
            p.read
        );
        assert!(p.read.contains(&root.join("opt/node-22")), "{:?}", p.read);
        // `airlock policy explain` says which rule granted each path.
        let shown = describe(
            "t",
            &Confinement::default(),
            &started,
            &host(root),
            &settings(),
        );
        assert!(
            shown.contains(&format!(
                "\n    {} (the command, {})",
                modules.canonicalize().unwrap().display(),
                command.display()
            )),
            "{shown}"
        );
        assert!(
            shown.contains(&format!(
                "\n    {} (what the command runs: {})",
                root.join("opt/node-22").display(),
                node.display()
            )),
            "{shown}"
        );
        assert!(shown.contains("\n    /usr (the system)"), "{shown}");
    }

    /// A command on the PATH, a script whose interpreter is a script, and a loop of links
    /// end; a missing command runs nothing.
    #[test]
    fn following_a_command_ends() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let a = root.join("a/bin/a");
        let b = root.join("b/bin/b");
        executable(&a, &format!("#!{}\n", b.display()));
        executable(&b, &format!("#!{}\n", a.display()));
        let path = format!(
            "{}:{}",
            root.join("a/bin").display(),
            root.join("b/bin").display()
        );
        let runs = what_runs("a", Some(&path));
        assert_eq!(runs, vec![a.clone(), b.clone()], "{runs:?}");
        link(&root.join("loop2"), &root.join("loop1"));
        link(&root.join("loop1"), &root.join("loop2"));
        assert!(what_runs(root.join("loop1").to_str().unwrap(), None).is_empty());
        assert!(what_runs("no-such-command-here", Some(&path)).is_empty());
    }
}
