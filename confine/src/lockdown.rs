//! The layers of a server's confinement, each a function the launcher calls in order (see
//! `src/bin/airlock-confine.rs` for the sequence and why it is in that order).
//!
//! Every layer either succeeds or says which layer failed and why ([`LayerError`]); in
//! best-effort mode the launcher reports the failure as a warning and goes on without it,
//! otherwise the server does not start.

use crate::denied_syscalls;
use crate::profile::{Network, Profile};
use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};
use std::ffi::CString;
use std::io;
use std::path::Path;

/// The newest Landlock ABI this code knows; older kernels get what they have (and a ruleset
/// that is not enforced at all is a failed layer).
const LANDLOCK_ABI: ABI = ABI::V6;

/// A layer of the confinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Descriptors,
    User,
    UserNamespace,
    MountNamespace,
    PidNamespace,
    NetworkNamespace,
    Proc,
    Rlimits,
    Landlock,
    Capabilities,
    NoNewPrivs,
    Seccomp,
}

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::Descriptors => "closing inherited descriptors",
            Layer::User => "switching to the server's user",
            Layer::UserNamespace => "user namespace",
            Layer::MountNamespace => "mount namespace",
            Layer::PidNamespace => "pid namespace",
            Layer::NetworkNamespace => "network namespace (`network` other than \"host\")",
            Layer::Proc => "a /proc of its own",
            Layer::Rlimits => "rlimits",
            Layer::Landlock => "Landlock",
            Layer::Capabilities => "dropping capabilities",
            Layer::NoNewPrivs => "no_new_privs",
            Layer::Seccomp => "seccomp",
        }
    }
}

/// A layer that could not be applied.
#[derive(Debug, thiserror::Error)]
#[error("{}: {cause}", layer.name())]
pub struct LayerError {
    pub layer: Layer,
    pub cause: String,
}

fn failed(layer: Layer, cause: impl std::fmt::Display) -> LayerError {
    LayerError {
        layer,
        cause: cause.to_string(),
    }
}

fn last_error(layer: Layer, what: &str) -> LayerError {
    failed(layer, format!("{what}: {}", io::Error::last_os_error()))
}

/// Which namespaces the launcher is in now.
#[derive(Debug, Clone, Copy, Default)]
pub struct Namespaces {
    pub user: bool,
    pub mount: bool,
    pub pid: bool,
    pub network: bool,
}

/// For a launcher started by root: from now on the server's account, with no supplementary
/// group, for good (real, effective and saved ids), so that the user namespace made next maps
/// that account and the server's files are reached with its rights, not root's. The
/// parent-death signal, which a change of credentials clears, is set again, and the daemon
/// checked to be still there.
pub fn become_user(run_as: &crate::RunAs) -> Result<(), LayerError> {
    // SAFETY: getppid cannot fail.
    let daemon = unsafe { libc::getppid() };
    // SAFETY: setgroups with a count of 0 reads no memory; setresgid and setresuid take ids.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 {
            return Err(last_error(Layer::User, "setgroups"));
        }
        if libc::setresgid(run_as.gid, run_as.gid, run_as.gid) != 0 {
            return Err(last_error(Layer::User, "setresgid"));
        }
        if libc::setresuid(run_as.uid, run_as.uid, run_as.uid) != 0 {
            return Err(last_error(Layer::User, "setresuid"));
        }
    }
    // A process whose ids changed is not dumpable, which makes its /proc/self files root's:
    // it could not write its own uid_map for the user namespace.
    if prctl(libc::PR_SET_DUMPABLE, 1) != 0 {
        return Err(last_error(Layer::User, "PR_SET_DUMPABLE"));
    }
    if prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL.cast_unsigned().into()) != 0 {
        return Err(last_error(Layer::User, "PR_SET_PDEATHSIG"));
    }
    // SAFETY: getppid cannot fail.
    if unsafe { libc::getppid() } != daemon {
        return Err(failed(
            Layer::User,
            "the daemon ended while the server started",
        ));
    }
    // SAFETY: getuid and geteuid cannot fail.
    let (uid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
    if uid != run_as.uid || euid != run_as.uid {
        return Err(failed(
            Layer::User,
            format!("still uid {uid} (effective {euid})"),
        ));
    }
    Ok(())
}

/// A new user namespace in which the caller keeps its own uid and gid (so files keep their
/// owners), with full capabilities inside it for the steps that follow.
pub fn enter_user_namespace() -> Result<(), LayerError> {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    if raw_unshare(libc::CLONE_NEWUSER) != 0 {
        return Err(last_error(Layer::UserNamespace, "unshare(CLONE_NEWUSER)"));
    }
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| failed(Layer::UserNamespace, format!("{file}: {e}")))
    };
    // Required before an unprivileged process may write its gid_map.
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(())
}

/// One `unshare` for one namespace.
pub fn unshare(flag: libc::c_int, layer: Layer) -> Result<(), LayerError> {
    if raw_unshare(flag) != 0 {
        return Err(last_error(layer, "unshare"));
    }
    Ok(())
}

/// `unshare` as the raw system call with its flags widened to the kernel's `unsigned long`.
/// Not glibc's `unshare(int)`: its wrapper hands the register on as it is, and the kernel
/// reads all 64 bits, so whatever an optimised caller left in the upper half became
/// unknown flags and `EINVAL` (seen in release builds: `CLONE_NEWNS|0x10100000000`).
fn raw_unshare(flags: libc::c_int) -> libc::c_long {
    // The flags are a bit set: reinterpret, never sign-extend.
    let flags = libc::c_ulong::from(flags.cast_unsigned());
    // SAFETY: unshare takes flags only.
    unsafe { libc::syscall(libc::SYS_unshare, flags) }
}

/// `prctl` with every argument as the `unsigned long` the kernel reads (it is variadic in C:
/// an `int` passed there leaves the upper half of its register undefined).
fn prctl(option: libc::c_int, arg: libc::c_ulong) -> libc::c_int {
    let zero: libc::c_ulong = 0;
    // SAFETY: the options used here take integer arguments only.
    unsafe { libc::prctl(option, arg, zero, zero, zero) }
}

/// A pipe whose write end only the launcher holds: its end-of-file tells the server the
/// launcher is gone. (In the new pid namespace `getppid` is 0, so it cannot tell.)
#[derive(Debug)]
pub struct LauncherAlive {
    read: libc::c_int,
    write: libc::c_int,
}

impl LauncherAlive {
    /// Made before `fork`.
    pub fn new() -> Result<LauncherAlive, LayerError> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(last_error(Layer::PidNamespace, "pipe2"));
        }
        Ok(LauncherAlive {
            read: fds[0],
            write: fds[1],
        })
    }

    /// In the launcher after `fork`: keeps the write end until it exits.
    pub fn hold(self) {
        // SAFETY: closing the read end, which this process does not use.
        unsafe { libc::close(self.read) };
    }

    /// In the child after `fork`: dies with the launcher from now on, and checks that the
    /// launcher did not die before that was set up.
    pub fn die_with_launcher(self) -> Result<(), LayerError> {
        // SAFETY: closing the write end, which only the launcher keeps.
        unsafe { libc::close(self.write) };
        if prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL.cast_unsigned().into()) != 0 {
            return Err(last_error(Layer::PidNamespace, "PR_SET_PDEATHSIG"));
        }
        let mut poll = libc::pollfd {
            fd: self.read,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll reads one pollfd; a timeout of 0 never blocks.
        let ready = unsafe { libc::poll(&mut poll, 1, 0) };
        // SAFETY: the read end is done with.
        unsafe { libc::close(self.read) };
        if ready != 0 {
            return Err(failed(
                Layer::PidNamespace,
                "the launcher ended before the server started",
            ));
        }
        Ok(())
    }
}

/// Mounts stay in this namespace, and a `/proc` of the new pid namespace replaces the host's,
/// so the server sees only its own processes.
pub fn mount_own_proc() -> Result<(), LayerError> {
    let root = CString::new("/").map_err(|e| failed(Layer::Proc, e))?;
    let proc_ = CString::new("/proc").map_err(|e| failed(Layer::Proc, e))?;
    let kind = CString::new("proc").map_err(|e| failed(Layer::Proc, e))?;
    // SAFETY: the strings are NUL-terminated and live across the calls.
    unsafe {
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(last_error(Layer::Proc, "making mounts private"));
        }
        if libc::mount(
            kind.as_ptr(),
            proc_.as_ptr(),
            kind.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) != 0
        {
            return Err(last_error(Layer::Proc, "mounting /proc"));
        }
    }
    Ok(())
}

/// Covers each path of `profile.hide` that exists: an empty read-only `tmpfs` over a
/// directory, a read-only bind of `/dev/null` over anything else (a file, a socket).
pub fn hide_protected(profile: &Profile) -> Result<(), LayerError> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_encoded_bytes()).map_err(|e| failed(Layer::MountNamespace, e))
    };
    let tmpfs = c(Path::new("tmpfs"))?;
    let null = c(Path::new("/dev/null"))?;
    let options = c(Path::new("size=4k,mode=000"))?;
    for path in &profile.hide {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        let target = c(path)?;
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        // SAFETY: the strings are NUL-terminated and live across the calls.
        let rc = unsafe {
            if meta.is_dir() {
                libc::mount(
                    tmpfs.as_ptr(),
                    target.as_ptr(),
                    tmpfs.as_ptr(),
                    flags | libc::MS_RDONLY,
                    options.as_ptr().cast(),
                )
            } else {
                let bound = libc::mount(
                    null.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                );
                if bound == 0 {
                    libc::mount(
                        std::ptr::null(),
                        target.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                        std::ptr::null(),
                    )
                } else {
                    bound
                }
            }
        };
        if rc != 0 {
            return Err(last_error(
                Layer::MountNamespace,
                &format!("covering {}", path.display()),
            ));
        }
    }
    Ok(())
}

/// The profile's rlimits.
pub fn set_rlimits(profile: &Profile) -> Result<(), LayerError> {
    let limits = [
        (libc::RLIMIT_AS, profile.limits.memory_bytes),
        (libc::RLIMIT_NOFILE, profile.limits.open_files),
        (libc::RLIMIT_NPROC, profile.limits.processes),
        // A crashing server leaves no core file with its secrets in it.
        (libc::RLIMIT_CORE, Some(0)),
    ];
    for (resource, value) in limits {
        let Some(value) = value else { continue };
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(last_error(Layer::Rlimits, "setrlimit"));
        }
    }
    Ok(())
}

/// Files the servers need wherever they run: read-only devices and the server's own
/// `/proc`, and `/dev/null` to write to.
const DEVICES_READ: &[&str] = &["/dev/zero", "/dev/urandom", "/dev/random", "/proc"];
const DEVICES_WRITE: &[&str] = &["/dev/null"];

/// Landlock: read and execute `profile.read` (and the devices above), everything in
/// `profile.write` and the scratch directory, nothing else; no signals to and no abstract
/// sockets of processes outside the server. Paths that do not exist are left out (a system
/// without `/lib64`).
pub fn restrict_filesystem(profile: &Profile) -> Result<RulesetStatus, LayerError> {
    let abi = LANDLOCK_ABI;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let landlock = |e: landlock::RulesetError| failed(Layer::Landlock, e);
    let mut ruleset = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(landlock)?
        .scope(Scope::from_all(abi))
        .map_err(landlock)?
        .create()
        .map_err(landlock)?;
    let rules = profile
        .read
        .iter()
        .map(|p| (p.as_path(), read))
        .chain(DEVICES_READ.iter().map(|p| (Path::new(*p), read)))
        .chain(
            DEVICES_WRITE
                .iter()
                .map(|p| (Path::new(*p), read | AccessFs::WriteFile)),
        )
        .chain(profile.write.iter().map(|p| (p.as_path(), all)))
        .chain(std::iter::once((profile.scratch.as_path(), all)));
    for (path, access) in rules {
        let Ok(fd) = PathFd::new(path) else { continue };
        // A file (not a directory) takes only the rights files have.
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(landlock)?;
    }
    let status = ruleset.restrict_self().map_err(landlock)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(failed(
            Layer::Landlock,
            "the kernel does not enforce Landlock (it is not built in or not enabled with lsm=)",
        ));
    }
    Ok(status.ruleset)
}

/// No capability now or after exec: the bounding set and the inheritable and ambient sets
/// are emptied (root regains capabilities on exec only from the bounding set), then the
/// process's own sets.
pub fn drop_capabilities() -> Result<(), LayerError> {
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL.cast_unsigned().into(),
    );
    let mut cap: libc::c_ulong = 0;
    // The bounding set has one entry per capability the kernel knows; past the last one
    // PR_CAPBSET_READ fails.
    while prctl(libc::PR_CAPBSET_READ, cap) >= 0 {
        if prctl(libc::PR_CAPBSET_DROP, cap) != 0 {
            return Err(last_error(Layer::Capabilities, "PR_CAPBSET_DROP"));
        }
        cap += 1;
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a version 3 header and two data structs.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(last_error(Layer::Capabilities, "capset"));
    }
    Ok(())
}

/// `no_new_privs`: nothing the server execs gains privileges (set-uid files, file
/// capabilities), and seccomp may be installed without privileges.
pub fn no_new_privs() -> Result<(), LayerError> {
    if prctl(libc::PR_SET_NO_NEW_PRIVS, 1) != 0 {
        return Err(last_error(Layer::NoNewPrivs, "PR_SET_NO_NEW_PRIVS"));
    }
    Ok(())
}

/// The deny-list filters of [`denied_syscalls`].
pub fn install_seccomp() -> Result<(), LayerError> {
    let seccomp = |e: &dyn std::fmt::Display| failed(Layer::Seccomp, e);
    let eperm = denied_syscalls::eperm_filter().map_err(|e| seccomp(&e))?;
    let clone3 = denied_syscalls::clone3_filter().map_err(|e| seccomp(&e))?;
    seccompiler::apply_filter(&eperm).map_err(|e| seccomp(&e))?;
    seccompiler::apply_filter(&clone3).map_err(|e| seccomp(&e))?;
    Ok(())
}

/// Whether this profile needs a network namespace of its own.
pub fn wants_own_network(profile: &Profile) -> bool {
    profile.network != Network::Host
}

/// Closes every descriptor from `first` up: the server gets its stdin, stdout and stderr and
/// nothing else that the daemon, or whoever started the daemon, left open without
/// close-on-exec.
pub fn close_inherited(first: libc::c_uint) -> Result<(), LayerError> {
    // SAFETY: close_range takes integers; the descriptors closed are not used after this.
    if unsafe { libc::close_range(first, libc::c_uint::MAX, 0) } != 0 {
        return Err(last_error(Layer::Descriptors, "close_range"));
    }
    Ok(())
}

/// In the new network namespace: the loopback up, and a listening socket on
/// `127.0.0.1:PROXY_PORT` for the daemon's proxy (close-on-exec: the server never holds it).
pub fn proxy_listener() -> Result<std::net::TcpListener, LayerError> {
    // SAFETY: a datagram socket only to carry the interface ioctls; closed below.
    let control = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if control < 0 {
        return Err(last_error(Layer::NetworkNamespace, "socket"));
    }
    // SAFETY: ifreq is plain data; zeroed is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *to = libc::c_char::from_ne_bytes([*from]);
    }
    // SAFETY: SIOCGIFFLAGS and SIOCSIFFLAGS read and write the ifreq, which outlives the calls;
    // the union's flags member is the one these requests use.
    let up = unsafe {
        libc::ioctl(control, libc::SIOCGIFFLAGS, &mut request) == 0 && {
            let flags = libc::c_int::from(request.ifr_ifru.ifru_flags) | libc::IFF_UP;
            request.ifr_ifru.ifru_flags = flags as libc::c_short;
            libc::ioctl(control, libc::SIOCSIFFLAGS, &request) == 0
        }
    };
    let error = (!up).then(|| last_error(Layer::NetworkNamespace, "bringing up the loopback"));
    // SAFETY: closing the socket made above.
    unsafe { libc::close(control) };
    if let Some(error) = error {
        return Err(error);
    }
    std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, crate::PROXY_PORT)).map_err(|e| {
        failed(
            Layer::NetworkNamespace,
            format!("listening on 127.0.0.1:{}: {e}", crate::PROXY_PORT),
        )
    })
}

/// Sends `line` with the descriptor `fd` attached (`SCM_RIGHTS`) on the Unix socket
/// `socket`.
pub fn send_descriptor(socket: libc::c_int, line: &str, fd: libc::c_int) -> Result<(), LayerError> {
    let mut bytes = format!("{line}\n").into_bytes();
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let fd_size = std::mem::size_of::<libc::c_int>();
    // SAFETY: CMSG_SPACE computes a size from a constant.
    let space = unsafe { libc::CMSG_SPACE(fd_size as libc::c_uint) } as usize;
    // u64 words keep the buffer aligned for cmsghdr.
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: msghdr is plain data; zeroed is a valid value.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = space;
    // SAFETY: the control buffer holds one header with room for one descriptor (CMSG_SPACE
    // above), so CMSG_FIRSTHDR is non-null and CMSG_DATA points inside the buffer.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(fd_size as libc::c_uint) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<libc::c_int>(), fd);
    }
    // SAFETY: the message's buffers live across the call.
    let sent = unsafe { libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(last_error(
            Layer::NetworkNamespace,
            "handing the proxy's socket to the daemon",
        ));
    }
    Ok(())
}
