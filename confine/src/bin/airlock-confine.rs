//! `airlock-confine --profile <json> -- <command> [args…]`: confines itself and execs a tool
//! server. Started only by `airlockd`, with the server's environment, stdin/stdout/stderr and,
//! on fd 3, the write end of a status pipe.
//!
//! The sequence, in order (each step needs the ones before it):
//!
//! 0. every inherited descriptor but stdin, stdout, stderr and the status socket closed;
//! 1. for a daemon running as root, the server's own account (`user`, else `[daemon]
//!    server_user`, else `nobody`): no supplementary groups, real, effective and saved ids;
//!    then a user namespace (own uid and gid mapped to themselves), which gives the capabilities
//!    the next steps need without any on the host; then mount and pid namespaces, and an empty
//!    network namespace for `network = "none"` or a list; for a list, its loopback up and a
//!    listener on `127.0.0.1:3128` handed to the daemon on the status socket: the daemon's
//!    proxy is the namespace's one way out;
//! 2. `fork`: the child is pid 1 of the new pid namespace (the parent only waits for it and
//!    passes its exit status on, so the daemon sees the server's);
//! 3. in the child: die with the parent; private mounts and a `/proc` of its own, so the
//!    server sees no other process (not the daemon's `environ`, not its memory); the daemon's
//!    policy files, socket and credentials covered (they may lie under `/etc`, and a socket
//!    is reached by its path alone);
//! 4. rlimits;
//! 5. Landlock: read and execute the system, the install prefix and package files and the
//!    policy's `read`; write its scratch directory and the policy's `write`; nothing else: not
//!    the daemon's state, policy, socket or credentials, nor another server's scratch. Scoped:
//!    no signals to and no abstract sockets of processes outside;
//! 6. every capability dropped (in the namespace and for what it execs);
//! 7. `no_new_privs`;
//! 8. seccomp: the deny list (`ptrace`, `process_vm_readv`, the keyring, `bpf`,
//!    `perf_event_open`, mounts, modules, new namespaces, …);
//! 9. exec the server. The status pipe is close-on-exec: end-of-file tells the daemon it runs.
//!
//! A failed layer is reported on the status pipe (`error: <layer>: <why>`) and the launcher
//! exits 70; in best-effort mode it is a `warning:` and the sequence goes on without it, but
//! for the network namespace: a `network` the policy limits is never left open.

use airlock_confine::lockdown::{self, LauncherAlive, Layer, LayerError, Namespaces};
use airlock_confine::{Mode, Network, PROXY_LISTENER_LINE, Profile, STATUS_FD};
use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

/// Exit codes the daemon reads when the status pipe says nothing.
const USAGE: u8 = 64;
const CONFINEMENT_FAILED: u8 = 70;

fn main() -> ExitCode {
    let (profile, command) = match parse_args(std::env::args_os().skip(1)) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("airlock-confine: {e}");
            eprintln!(
                "airlock-confine is started by airlockd for each tool server; it is not meant to be run by hand"
            );
            return ExitCode::from(USAGE);
        }
    };
    let mut status = Status::open();
    let strict = profile.mode == Mode::Strict;
    // A layer that failed: the end in strict mode, a warning in best-effort mode.
    let layer = |result: Result<(), LayerError>, status: &mut Status| -> bool {
        match result {
            Ok(()) => true,
            Err(e) if strict => {
                status.say("error", &e);
                false
            }
            Err(e) => {
                status.say("warning", &e);
                true
            }
        }
    };

    // 0. Nothing inherited but stdio and the status socket reaches the server.
    if !layer(
        lockdown::close_inherited(STATUS_FD.cast_unsigned() + 1),
        &mut status,
    ) {
        return ExitCode::from(CONFINEMENT_FAILED);
    }

    // 1. For a root daemon, the server's account first: the user namespace maps the uid
    //    the launcher has when it is made. Never best effort: the account is a grant.
    if let Some(run_as) = &profile.run_as
        && let Err(e) = lockdown::become_user(run_as)
    {
        status.say("error", &e);
        return ExitCode::from(CONFINEMENT_FAILED);
    }

    // Namespaces. The user namespace comes first: it grants the rest without privileges.
    let mut ns = Namespaces::default();
    let user = lockdown::enter_user_namespace();
    ns.user = user.is_ok();
    if !layer(user, &mut status) {
        return ExitCode::from(CONFINEMENT_FAILED);
    }
    for (flag, which, wanted) in [
        (libc::CLONE_NEWNS, Layer::MountNamespace, true),
        (libc::CLONE_NEWPID, Layer::PidNamespace, true),
        (
            libc::CLONE_NEWNET,
            Layer::NetworkNamespace,
            lockdown::wants_own_network(&profile),
        ),
    ] {
        if !wanted {
            continue;
        }
        let result = lockdown::unshare(flag, which);
        let ok = result.is_ok();
        match which {
            Layer::MountNamespace => ns.mount = ok,
            Layer::PidNamespace => ns.pid = ok,
            _ => ns.network = ok,
        }
        // The network is what the policy grants, not a hardening layer: without its
        // namespace the server would have the host's, so this one fails in every mode.
        if let (Err(e), Layer::NetworkNamespace) = (&result, which) {
            status.say("error", e);
            return ExitCode::from(CONFINEMENT_FAILED);
        }
        if !layer(result, &mut status) {
            return ExitCode::from(CONFINEMENT_FAILED);
        }
    }
    // The proxy's socket, made here in the new namespace and handed to the daemon, which
    // accepts on it from then on; the launcher keeps no copy.
    if profile.network == Network::Proxy {
        let handed = status
            .socket()
            .ok_or_else(|| LayerError {
                layer: Layer::NetworkNamespace,
                cause: "no status socket to hand the proxy's listener to".into(),
            })
            .and_then(|socket| {
                let listener = lockdown::proxy_listener()?;
                lockdown::send_descriptor(socket, PROXY_LISTENER_LINE, listener.as_raw_fd())
            });
        if let Err(e) = handed {
            status.say("error", &e);
            return ExitCode::from(CONFINEMENT_FAILED);
        }
    }

    // 2. The child is pid 1 of the new pid namespace; this process only waits for it.
    let alive = match LauncherAlive::new() {
        Ok(alive) => alive,
        Err(e) => {
            status.say("error", &e);
            return ExitCode::from(CONFINEMENT_FAILED);
        }
    };
    // SAFETY: the launcher is single-threaded (nothing above starts a thread), so the child may
    // do anything after fork.
    let child = unsafe { libc::fork() };
    if child < 0 {
        status.say(
            "error",
            &LayerError {
                layer: Layer::PidNamespace,
                cause: format!("fork: {}", std::io::Error::last_os_error()),
            },
        );
        return ExitCode::from(CONFINEMENT_FAILED);
    }
    if child > 0 {
        // The status pipe is the child's to close (on exec).
        drop(status);
        alive.hold();
        // stdin, stdout and stderr are the server's alone: were the launcher to keep copies,
        // a server that closes its stdout (mid-message, say) would never be seen to, and its
        // calls would wait for their timeout instead of failing at once. The launcher writes
        // nothing from here on.
        // SAFETY: closing descriptors this process no longer uses; it opens none after this.
        unsafe {
            libc::close(0);
            libc::close(1);
            libc::close(2);
        }
        return wait_for(child);
    }

    // 3. Die with the launcher; a /proc of its own.
    if !layer(alive.die_with_launcher(), &mut status) {
        return ExitCode::from(CONFINEMENT_FAILED);
    }
    if ns.mount && ns.pid && !layer(lockdown::mount_own_proc(), &mut status) {
        return ExitCode::from(CONFINEMENT_FAILED);
    }
    // The daemon's policy files, socket and credentials covered.
    if ns.mount && !layer(lockdown::hide_protected(&profile), &mut status) {
        return ExitCode::from(CONFINEMENT_FAILED);
    }
    // 4-8, in this order: Landlock and dropping capabilities need nothing after them;
    // seccomp (which refuses `mount` and `unshare`) comes last but one, after no_new_privs.
    let steps: [&dyn Fn() -> Result<(), LayerError>; 5] = [
        &|| lockdown::set_rlimits(&profile),
        &|| lockdown::restrict_filesystem(&profile).map(|_| ()),
        &lockdown::drop_capabilities,
        &lockdown::no_new_privs,
        &lockdown::install_seccomp,
    ];
    for step in steps {
        if !layer(step(), &mut status) {
            return ExitCode::from(CONFINEMENT_FAILED);
        }
    }

    // 9. Exec. The status pipe closes with it (close-on-exec).
    if let Err(e) = std::env::set_current_dir(&profile.workdir) {
        status.say_text(
            "error",
            &format!("cannot enter {}: {e}", profile.workdir.display()),
        );
        return ExitCode::from(CONFINEMENT_FAILED);
    }
    let error = exec(&command);
    status.say_text(
        "error",
        &format!("cannot start `{}`: {error}", command[0].to_string_lossy()),
    );
    ExitCode::from(CONFINEMENT_FAILED)
}

/// `--profile <json> -- <command> [args…]`.
fn parse_args(
    mut args: impl Iterator<Item = OsString>,
) -> Result<(Profile, Vec<OsString>), String> {
    let mut profile = None;
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--profile") => {
                let text = args.next().ok_or("--profile needs a value")?;
                let text = text.to_str().ok_or("--profile is not UTF-8")?;
                profile = Some(Profile::from_json(text).map_err(|e| format!("--profile: {e}"))?);
            }
            Some("--") => break,
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    let command: Vec<OsString> = args.collect();
    if command.is_empty() {
        return Err("no command after --".into());
    }
    Ok((profile.ok_or("--profile is missing")?, command))
}

/// Waits for the server and ends the way it ended.
fn wait_for(child: libc::pid_t) -> ExitCode {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status int.
        let r = unsafe { libc::waitpid(child, &mut status, 0) };
        if r == child {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return ExitCode::from(CONFINEMENT_FAILED);
        }
    }
    if libc::WIFEXITED(status) {
        return ExitCode::from(u8::try_from(libc::WEXITSTATUS(status)).unwrap_or(1));
    }
    // Killed by a signal: die of the same one, so the daemon's log says which.
    let signal = libc::WTERMSIG(status);
    // SAFETY: resetting a disposition and raising a signal on ourselves.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
    ExitCode::from(128u8.saturating_add(u8::try_from(signal).unwrap_or(0)))
}

/// `execvp`; returns only on failure.
fn exec(command: &[OsString]) -> std::io::Error {
    let Ok(args) = command
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
    else {
        return std::io::Error::from_raw_os_error(libc::EINVAL);
    };
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // SAFETY: argv is a NULL-terminated array of NUL-terminated strings that outlive the call.
    unsafe { libc::execvp(argv[0], argv.as_ptr()) };
    std::io::Error::last_os_error()
}

/// The status pipe on fd 3, if the daemon gave one.
struct Status(Option<std::fs::File>);

impl Status {
    fn open() -> Status {
        // SAFETY: F_GETFD only asks whether fd 3 is open.
        let open = unsafe { libc::fcntl(STATUS_FD, libc::F_GETFD) } >= 0;
        if open {
            // Closed by the exec of the server: end-of-file is how the daemon learns it runs.
            // SAFETY: F_SETFD on an open descriptor.
            unsafe { libc::fcntl(STATUS_FD, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
        // SAFETY: fd 3 is open and ours (the daemon passes it for this); nothing else owns it.
        Status(open.then(|| unsafe { std::fs::File::from_raw_fd(STATUS_FD) }))
    }

    /// The status socket's descriptor, if the daemon gave one.
    fn socket(&self) -> Option<libc::c_int> {
        self.0.as_ref().map(AsRawFd::as_raw_fd)
    }

    fn say(&mut self, kind: &str, error: &LayerError) {
        self.say_text(kind, &error.to_string());
    }

    fn say_text(&mut self, kind: &str, text: &str) {
        let line = format!("{kind}: {text}\n");
        match &mut self.0 {
            Some(pipe) => {
                let _ = pipe.write_all(line.as_bytes());
            }
            None => eprint!("airlock-confine: {line}"),
        }
    }
}
