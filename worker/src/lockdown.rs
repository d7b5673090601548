//! The worker's lockdown layers (design §4). `main` calls [`prepare_process`] first (steps
//! 1–2: file descriptors, environment, working directory, rlimits, parent death, dumpable,
//! capabilities),
//! then initialises the engine, then calls [`lock`] (steps 4–6: no_new_privs, Landlock,
//! seccomp). Only after `lock` returns does the worker read an untrusted byte.
//!
//! A zygote (`--zygote`, see `zygote.rs`) takes the same steps without the per-execution
//! limits and with a kill filter that also allows forking; each worker it forks then takes
//! the remaining steps itself in [`enter_forked_worker`] (parent death, its own socket on
//! fd 3, its limits, a filter that kills the zygote's extra syscalls) before it reads an
//! untrusted byte.
//!
//! Every layer fails closed: if one cannot be applied the worker exits instead of running
//! with less protection. Everything here works for an unprivileged user, because
//! `PR_SET_NO_NEW_PRIVS` is what lets an unprivileged process install Landlock and seccomp.
//! Step 3 of the design (namespaces) is optional and not implemented: it needs privileges an
//! ordinary user does not have, and Landlock + seccomp already deny the network.

use crate::syscall_allowlist;
use airlock_proto::{IPC_FD, LockdownReport};
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, RulesetAttr, RulesetStatus, Scope,
};
use std::ffi::OsString;
use std::io;
use std::os::fd::RawFd;

/// The newest Landlock ABI this build knows how to ask for. Rights of newer ABIs than the
/// running kernel supports are dropped by the crate's best-effort mode (and then reported as
/// `landlock_fully_enforced: false`); what the kernel knows is always handled.
const LANDLOCK_ABI: ABI = ABI::V9;

/// `LANDLOCK_CREATE_RULESET_VERSION` from `<linux/landlock.h>`.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1 << 0;

/// `RLIMIT_NOFILE` while the engine is initialised and the Landlock ruleset is built: room
/// for the ruleset fd and for the zoneinfo file glibc opens once during engine init. [`lock`]
/// lowers it to [`FINAL_NOFILE`] once those are closed.
const PREPARE_NOFILE: u64 = 8;
/// Final `RLIMIT_NOFILE`: fds 0–3 are open, so no new descriptor can be created at all.
const FINAL_NOFILE: u64 = 4;

/// The zygote's `RLIMIT_NOFILE` after lockdown: fds 0–3 plus the one new worker's socket that
/// arrives with each fork request (closed before the next request is read).
const ZYGOTE_NOFILE: u64 = 5;

const PARENT_PID: &str = "--parent-pid";
const ZYGOTE: &str = "--zygote";
const MEMORY_CEILING: &str = "--memory-ceiling";
const CPU_SECONDS: &str = "--cpu-seconds";
/// Exists only in `escape-probe` builds; see [`LockdownConfig::probe_skip_seccomp`].
#[cfg(feature = "escape-probe")]
const PROBE_SKIP_SECCOMP: &str = "--probe-skip-seccomp";

#[derive(Debug, thiserror::Error)]
pub enum LockdownError {
    #[error("unknown argument {0:?}")]
    UnknownArgument(OsString),
    #[error("argument {0} is given more than once")]
    DuplicateArgument(&'static str),
    #[error("argument {0} needs a value")]
    MissingValue(&'static str),
    #[error("invalid value {value:?} for {flag}: expected a positive integer")]
    InvalidValue { flag: &'static str, value: OsString },
    #[error("missing required argument {0}")]
    MissingArgument(&'static str),
    #[error(
        "argument {0} does not go with --zygote (a zygote's workers get their limits per fork)"
    )]
    NotForZygote(&'static str),
    #[error("fd 3 (the ipc socket) is not open")]
    IpcFdMissing,
    #[error("fd 3 is not a unix socket")]
    IpcFdNotUnixSocket,
    #[error("fd {0} is not open (the supervisor must point fds 0-2 at /dev/null)")]
    StdFdMissing(i32),
    #[error("{what} failed: {source}")]
    Syscall {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("the parent process is gone (parent pid is {actual}, expected {expected})")]
    ParentGone { expected: i32, actual: i32 },
    #[error("landlock is unavailable ({0}); the worker refuses to run without it")]
    LandlockUnavailable(String),
    #[error("landlock: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("building the seccomp filter failed: {0}")]
    SeccompBuild(#[from] seccompiler::BackendError),
}

/// The process's execution domain. systemd's `LockPersonality=yes` makes even the read-only
/// query `personality(0xffffffff)` fail with EPERM; then `/proc/self/personality` still tells.
fn current_persona() -> Result<libc::c_ulong, LockdownError> {
    // SAFETY: 0xffffffff only queries the persona.
    let persona = unsafe { libc::personality(0xffff_ffff) };
    if persona != -1 {
        return Ok(persona as libc::c_ulong);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EPERM) {
        return Err(LockdownError::Syscall {
            what: "personality",
            source: err,
        });
    }
    let text = std::fs::read_to_string("/proc/self/personality").map_err(|source| {
        LockdownError::Syscall {
            what: "read /proc/self/personality",
            source,
        }
    })?;
    libc::c_ulong::from_str_radix(text.trim(), 16).map_err(|_| LockdownError::Syscall {
        what: "parse /proc/self/personality",
        source: io::Error::other(format!("unexpected contents {text:?}")),
    })
}

/// Turns a libc return value of -1 into the errno it set.
fn check(what: &'static str, rc: libc::c_long) -> Result<libc::c_long, LockdownError> {
    if rc == -1 {
        Err(LockdownError::Syscall {
            what,
            source: io::Error::last_os_error(),
        })
    } else {
        Ok(rc)
    }
}

/// What the supervisor tells the worker on its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockdownConfig {
    /// The supervisor's pid; the worker refuses to run if its parent is someone else.
    pub parent_pid: i32,
    /// A worker for one execution, or a zygote that forks them.
    pub role: Role,
    /// TEST ONLY (`escape-probe` builds): apply every layer except seccomp, so the escape
    /// tests can show that Landlock refuses on its own. The flag does not exist in release
    /// builds: there the argument parser rejects `--probe-skip-seccomp` as unknown.
    #[cfg(feature = "escape-probe")]
    pub probe_skip_seccomp: bool,
}

/// What the process becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// One worker for one execution, with its limits.
    Worker(Ceiling),
    /// A zygote: locks down without per-execution limits, then forks workers on request.
    Zygote,
}

/// A worker's resource limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ceiling {
    /// `RLIMIT_AS`: the hard ceiling on the worker's address space.
    pub memory_ceiling_bytes: u64,
    /// `RLIMIT_CPU` soft limit (SIGXCPU); the hard limit (SIGKILL) is one second later.
    pub cpu_seconds: u64,
}

impl LockdownConfig {
    /// Parses exactly `--parent-pid N --memory-ceiling BYTES --cpu-seconds N` (a worker) or
    /// `--parent-pid N --zygote` (a zygote), in any order.
    /// Unknown, repeated or missing arguments are errors: a mismatch means the supervisor and
    /// worker binaries come from different builds.
    pub fn from_args(args: impl Iterator<Item = OsString>) -> Result<Self, LockdownError> {
        fn value<T: std::str::FromStr + PartialOrd + Default>(
            flag: &'static str,
            v: Option<OsString>,
        ) -> Result<T, LockdownError> {
            let v = v.ok_or(LockdownError::MissingValue(flag))?;
            match v.to_str().and_then(|s| s.parse::<T>().ok()) {
                Some(n) if n > T::default() => Ok(n),
                _ => Err(LockdownError::InvalidValue { flag, value: v }),
            }
        }
        fn set_once<T>(
            slot: &mut Option<T>,
            flag: &'static str,
            v: T,
        ) -> Result<(), LockdownError> {
            if slot.replace(v).is_some() {
                return Err(LockdownError::DuplicateArgument(flag));
            }
            Ok(())
        }

        let mut parent_pid = None;
        let mut zygote = None;
        let mut memory_ceiling_bytes = None;
        let mut cpu_seconds = None;
        #[cfg(feature = "escape-probe")]
        let mut probe_skip_seccomp = None;

        let mut args = args;
        while let Some(arg) = args.next() {
            match arg.to_str() {
                Some(PARENT_PID) => set_once(
                    &mut parent_pid,
                    PARENT_PID,
                    value::<i32>(PARENT_PID, args.next())?,
                )?,
                Some(ZYGOTE) => set_once(&mut zygote, ZYGOTE, true)?,
                Some(MEMORY_CEILING) => set_once(
                    &mut memory_ceiling_bytes,
                    MEMORY_CEILING,
                    value::<u64>(MEMORY_CEILING, args.next())?,
                )?,
                Some(CPU_SECONDS) => {
                    let n = value::<u64>(CPU_SECONDS, args.next())?;
                    // The hard limit is n + 1, which must not overflow.
                    if n == u64::MAX {
                        return Err(LockdownError::InvalidValue {
                            flag: CPU_SECONDS,
                            value: n.to_string().into(),
                        });
                    }
                    set_once(&mut cpu_seconds, CPU_SECONDS, n)?
                }
                #[cfg(feature = "escape-probe")]
                Some(PROBE_SKIP_SECCOMP) => {
                    set_once(&mut probe_skip_seccomp, PROBE_SKIP_SECCOMP, true)?
                }
                _ => return Err(LockdownError::UnknownArgument(arg)),
            }
        }

        let parent_pid = parent_pid.ok_or(LockdownError::MissingArgument(PARENT_PID))?;
        let role = if zygote.is_some() {
            if memory_ceiling_bytes.is_some() {
                return Err(LockdownError::NotForZygote(MEMORY_CEILING));
            }
            if cpu_seconds.is_some() {
                return Err(LockdownError::NotForZygote(CPU_SECONDS));
            }
            // The probe's Landlock-only mode exists for exec'd workers; a zygote always
            // installs seccomp.
            #[cfg(feature = "escape-probe")]
            if probe_skip_seccomp.is_some() {
                return Err(LockdownError::NotForZygote(PROBE_SKIP_SECCOMP));
            }
            Role::Zygote
        } else {
            Role::Worker(Ceiling {
                memory_ceiling_bytes: memory_ceiling_bytes
                    .ok_or(LockdownError::MissingArgument(MEMORY_CEILING))?,
                cpu_seconds: cpu_seconds.ok_or(LockdownError::MissingArgument(CPU_SECONDS))?,
            })
        };
        Ok(LockdownConfig {
            parent_pid,
            role,
            #[cfg(feature = "escape-probe")]
            probe_skip_seccomp: probe_skip_seccomp.unwrap_or(false),
        })
    }
}

/// Design §4 steps 1–2. Must run first in `main`, while the process is single-threaded.
pub fn prepare_process(cfg: &LockdownConfig) -> Result<(), LockdownError> {
    // Step 1a: fd 3 must be the inherited socket before anything else touches descriptors;
    // if it is missing we must not mistake some other descriptor for the channel.
    check_ipc_fd()?;

    // Step 1b: fds 0-2 must be open (at /dev/null). If one were closed, the next descriptor
    // created before lockdown (e.g. glibc's zoneinfo file during engine init) would land on
    // it and later be written to as "stdout". Rust's runtime already reopens closed 0-2 on
    // /dev/null before main; this check keeps the invariant from depending on that.
    for fd in 0..=2 {
        if !fd_is_open(fd) {
            return Err(LockdownError::StdFdMissing(fd));
        }
    }

    // Step 1c: close every inherited descriptor above the IPC socket, whatever the parent
    // leaked. close_range (Linux 5.9) does it in one call; failing to close is fatal.
    // SAFETY: close_range only closes descriptors; nothing in this process owns an fd above
    // 3 yet (std opens none at startup), so no Rust object is left with a dangling fd.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            4 as libc::c_uint,
            libc::c_uint::MAX,
            0 as libc::c_uint,
        )
    };
    check("close_range", rc)?;

    // Step 1d: the environment is the supervisor's business, not the program's. One variable
    // goes back: TZ=UTC0, so the program's local time is UTC whatever the host's zone and a
    // session replays the same on any host. No zoneinfo file is named "UTC0", so glibc
    // falls back to reading it as a POSIX rule: offset 0, whatever files exist. Set before the
    // engine's date warm-up, which is where glibc first reads the zone.
    clear_environment()?;
    // SAFETY: still single-threaded (see clear_environment).
    unsafe { std::env::set_var("TZ", "UTC0") };

    // Step 1e: a working directory inherited from the supervisor is a reference into its
    // filesystem view; "/" is meaningless once Landlock denies every path.
    std::env::set_current_dir("/").map_err(|source| LockdownError::Syscall {
        what: "chdir(\"/\")",
        source,
    })?;

    // Step 2: rlimits. Core dumps first, so that nothing after this point can leave an image
    // of the process on disk. Limits are only ever lowered (see `lower_rlimit`).
    lower_rlimit(libc::RLIMIT_CORE, 0, 0)?;
    // No file may grow: any write to a regular file raises SIGXFSZ.
    lower_rlimit(libc::RLIMIT_FSIZE, 0, 0)?;
    // A few spare descriptors until lock() has closed the Landlock ruleset fd; lock()
    // then lowers this to FINAL_NOFILE (ZYGOTE_NOFILE for a zygote).
    lower_rlimit(libc::RLIMIT_NOFILE, PREPARE_NOFILE, PREPARE_NOFILE)?;
    // A zygote must still fork, and its own CPU time and address space are not an
    // execution's: each worker it forks sets these itself (`enter_forked_worker`).
    match cfg.role {
        Role::Worker(ceiling) => lower_execution_limits(ceiling)?,
        // Named apart from its workers, for operators and for whoever counts workers in ps.
        Role::Zygote => set_name(c"airlock-zygote")?,
    }

    // A persona with READ_IMPLIES_EXEC inherited from the parent would make every
    // PROT_READ mapping executable and defeat the seccomp rule against PROT_EXEC.
    // `personality` is not allowed after lockdown, so it cannot be set again later.
    let persona = current_persona()?;
    if persona & libc::READ_IMPLIES_EXEC as libc::c_ulong != 0 {
        let cleared = persona & !(libc::READ_IMPLIES_EXEC as libc::c_ulong);
        // SAFETY: changes only the execution-domain flags of this process.
        let rc = unsafe { libc::personality(cleared) };
        check("personality", libc::c_long::from(rc))?;
    }

    // Parent death (see `die_with_parent`).
    die_with_parent(cfg.parent_pid)?;

    // Not dumpable: no core dump, no ptrace attach and no /proc/<pid>/mem access by other
    // processes of the same user.
    // SAFETY: plain prctl with integer arguments.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) };
    check("prctl(PR_SET_DUMPABLE)", libc::c_long::from(rc))?;

    // No capability, whoever started the daemon: a worker of a root daemon inherits root's
    // full sets. After the rlimits and the persona, which a capability could have mattered
    // to, and before no_new_privs, Landlock and seccomp, which need none.
    drop_capabilities()?;

    Ok(())
}

/// `CAP_SETPCAP`, which emptying the bounding set needs.
const CAP_SETPCAP: u32 = 8;

/// `_LINUX_CAPABILITY_VERSION_3` of `<linux/capability.h>`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// This process's effective, permitted and inheritable sets (`capget`).
fn capabilities() -> Result<[CapData; 2], LockdownError> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two data structs for a version 3 header.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    check("capget", rc)?;
    Ok(data)
}

/// Empties every capability set, in the order each step needs: the ambient set; the bounding
/// set while `CAP_SETPCAP` is still held (a worker without it holds nothing it could drop,
/// and may not touch the bounding set); then the permitted, effective and inheritable sets.
/// Read back afterwards: the worker refuses to run with any capability left.
fn drop_capabilities() -> Result<(), LockdownError> {
    // SAFETY: plain prctl with integer arguments.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    check("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", libc::c_long::from(rc))?;
    if capabilities()?[0].effective & (1 << CAP_SETPCAP) != 0 {
        // One entry per capability the kernel knows; past the last one PR_CAPBSET_READ
        // fails with EINVAL.
        let mut cap: libc::c_ulong = 0;
        // SAFETY: plain prctl with integer arguments.
        while unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) } >= 0 {
            // SAFETY: plain prctl with integer arguments.
            let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
            check("prctl(PR_CAPBSET_DROP)", libc::c_long::from(rc))?;
            cap += 1;
        }
    }
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let none = [CapData::default(); 2];
    // SAFETY: capset reads a version 3 header and two data structs.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header, none.as_ptr()) };
    check("capset", rc)?;
    let left = capabilities()?;
    if left
        .iter()
        .any(|d| d.effective != 0 || d.permitted != 0 || d.inheritable != 0)
    {
        return Err(LockdownError::Syscall {
            what: "capset",
            source: io::Error::other("capabilities are left after dropping them all"),
        });
    }
    Ok(())
}

/// The limits that belong to one execution: no new processes, the address-space ceiling and
/// the CPU time.
fn lower_execution_limits(ceiling: Ceiling) -> Result<(), LockdownError> {
    // No new processes (enforced for root's uid too once the worker holds no capability; see
    // `drop_capabilities`); seccomp kills fork/clone for everyone anyway.
    lower_rlimit(libc::RLIMIT_NPROC, 0, 0)?;
    // Address-space ceiling: the engine's own heap limit is lower; this is the backstop.
    lower_rlimit(
        libc::RLIMIT_AS,
        ceiling.memory_ceiling_bytes,
        ceiling.memory_ceiling_bytes,
    )?;
    // CPU: SIGXCPU at the soft limit, SIGKILL one second later if it is ignored.
    lower_rlimit(
        libc::RLIMIT_CPU,
        ceiling.cpu_seconds,
        ceiling.cpu_seconds.saturating_add(1),
    )
}

/// Design §4 steps 4–6. Call after the engine exists and before the first untrusted read.
pub fn lock(cfg: &LockdownConfig) -> Result<LockdownReport, LockdownError> {
    // Step 4: no_new_privs. Required before an unprivileged process may install Landlock or
    // seccomp, and it makes sure no later execve (which seccomp kills anyway) could gain
    // privileges through setuid bits or file capabilities.
    // SAFETY: plain prctl with integer arguments.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) };
    check("prctl(PR_SET_NO_NEW_PRIVS)", libc::c_long::from(rc))?;

    // Step 5: Landlock. Ask the kernel for its ABI first (for the report, and to refuse
    // early with a clear message when Landlock is missing); this syscall is not possible
    // once seccomp is in place.
    let landlock_abi = kernel_landlock_abi()?;
    let landlock_status = restrict_with_landlock()?;
    // The crate's best-effort mode silently becomes a no-op without kernel support; that
    // is exactly the downgrade the design forbids.
    if landlock_status == RulesetStatus::NotEnforced {
        return Err(LockdownError::LandlockUnavailable(
            "the ruleset was not enforced".to_owned(),
        ));
    }

    // The Landlock ruleset fd is closed now (restrict_self consumed it), so fds 0-3 are the
    // only open descriptors and the limit can drop to 4: no new fd can ever be created. A
    // zygote keeps room for the one socket each fork request brings.
    let nofile = match cfg.role {
        Role::Worker(_) => FINAL_NOFILE,
        Role::Zygote => ZYGOTE_NOFILE,
    };
    lower_rlimit(libc::RLIMIT_NOFILE, nofile, nofile)?;

    #[cfg(feature = "escape-probe")]
    let _ = PROBE_CONTEXT.set(ProbeContext {
        parent_pid: cfg.parent_pid,
        seccomp_skipped: cfg.probe_skip_seccomp,
    });
    #[cfg(feature = "escape-probe")]
    let skip_seccomp = cfg.probe_skip_seccomp;
    #[cfg(not(feature = "escape-probe"))]
    let skip_seccomp = {
        let _ = cfg;
        false
    };

    // Step 6: seccomp, last, because installing it ends the ability to make any of the calls
    // above. Both programs are compiled before either is installed, so a compile error
    // cannot leave the process half-filtered. The errno filter goes in first: installing a
    // filter needs prctl and seccomp, which the kill filter does not allow (see
    // syscall_allowlist for why there are two). TSYNC applies them to every thread; there
    // is only one, and TSYNC fails loudly if that ever stops being true.
    // A zygote's kill filter also allows what forking and a new worker's first steps need
    // (syscall_allowlist::ZYGOTE_ONLY); every forked worker takes those away again with a
    // filter of its own (syscall_allowlist::forked_worker_filter) before its first untrusted
    // read.
    if !skip_seccomp {
        let errno = syscall_allowlist::errno_filter()?;
        let kill = match cfg.role {
            Role::Worker(_) => syscall_allowlist::kill_filter()?,
            Role::Zygote => syscall_allowlist::zygote_kill_filter()?,
        };
        install_filter(&errno)?;
        install_filter(&kill)?;
    }

    Ok(LockdownReport {
        landlock_abi,
        landlock_fully_enforced: landlock_status == RulesetStatus::FullyEnforced,
        seccomp_allowed_syscalls: syscall_allowlist::allowed_count(),
        forked: false,
    })
}

/// The steps a worker forked from the zygote takes before its first untrusted read, in this
/// order. Everything else (fds 0–2, environment, working directory, core and file-size
/// limits, non-dumpable, no_new_privs, Landlock, the errno filter and the zygote's kill
/// filter) it inherited from the zygote, which took those steps before it forked.
///
/// `socket` is the new worker's own end of its socket pair (the zygote received it with the
/// fork request); `worker_filter` is [`syscall_allowlist::forked_worker_filter`], compiled by
/// the zygote before it forked.
pub fn enter_forked_worker(
    parent_pid: i32,
    ceiling: Ceiling,
    socket: RawFd,
    worker_filter: &seccompiler::BpfProgram,
    zygote_report: &LockdownReport,
) -> Result<LockdownReport, LockdownError> {
    // 1. Parent death: not inherited across fork. The parent is the daemon (CLONE_PARENT),
    //    and the signal fires when the daemon's thread that started the zygote exits, as for
    //    an exec'd worker.
    die_with_parent(parent_pid)?;

    // 2. Its own socket onto fd 3. dup3 closes the zygote's control socket (the old fd 3) in
    //    the same step, so this process never holds both; then the received copy goes.
    // SAFETY: dup3 and close on descriptors this process holds; nothing in this process owns
    // fd 3 (the zygote's loop works on the raw number) or `socket`.
    let rc = unsafe { libc::dup3(socket, IPC_FD, 0) };
    check("dup3(socket, 3)", libc::c_long::from(rc))?;
    // SAFETY: as above.
    let rc = unsafe { libc::close(socket) };
    check("close(socket)", libc::c_long::from(rc))?;

    // 3. Its own name back (a fork inherits the zygote's), then this execution's limits; fds
    //    0-3 are all that is open, so no new one can be made.
    set_name(c"airlock-worker")?;
    lower_execution_limits(ceiling)?;
    lower_rlimit(libc::RLIMIT_NOFILE, FINAL_NOFILE, FINAL_NOFILE)?;

    // 4. The forked worker's filter, last: it kills every call of the zygote's own table
    //    (syscall_allowlist::ZYGOTE_ONLY): the calls above, another filter, a fork. Stacked on
    //    the zygote's kill filter, the stricter answer wins, so from here this process may do
    //    exactly what an exec'd worker may. (It is that short because the kernel compiles each
    //    filter a process installs; the zygote's already rules out everything else.)
    #[cfg(feature = "escape-probe")]
    let skip_seccomp = probe_context().is_some_and(|c| c.seccomp_skipped);
    #[cfg(not(feature = "escape-probe"))]
    let skip_seccomp = false;
    if !skip_seccomp {
        install_filter(worker_filter)?;
    }

    Ok(LockdownReport {
        forked: true,
        ..zygote_report.clone()
    })
}

/// What the escape probe needs to know about the lockdown it runs under.
/// Arms `PR_SET_PDEATHSIG(SIGKILL)`, then checks that the parent is still `parent_pid`. The
/// signal is armed *before* the check, so there is no window in which the supervisor dies
/// after the check but before the signal is armed; if it already died, this process was
/// re-parented and getppid() no longer matches. The kernel sends the signal when the *thread*
/// that forked us exits, not the whole process: airlockd must start workers (and the zygote)
/// from a thread that lives as long as they do.
fn die_with_parent(parent_pid: i32) -> Result<(), LockdownError> {
    // SAFETY: plain prctl with integer arguments.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    check("prctl(PR_SET_PDEATHSIG)", libc::c_long::from(rc))?;
    // SAFETY: getppid cannot fail and has no side effects.
    let actual = unsafe { libc::getppid() };
    if actual != parent_pid {
        return Err(LockdownError::ParentGone {
            expected: parent_pid,
            actual,
        });
    }
    Ok(())
}

/// Sets the process's name (`comm`, at most 15 bytes), as `ps` shows it.
fn set_name(name: &std::ffi::CStr) -> Result<(), LockdownError> {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string that outlives the call.
    let rc = unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0) };
    check("prctl(PR_SET_NAME)", libc::c_long::from(rc))?;
    Ok(())
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, filter)`, called directly for
/// every filter: seccompiler's `apply_filter_all_threads` first sets no_new_privs with `prctl`
/// (step 4 did that already, and a forked worker inherits it), which the zygote's filter does
/// not allow.
fn install_filter(filter: &seccompiler::BpfProgram) -> Result<(), LockdownError> {
    let program = libc::sock_fprog {
        len: u16::try_from(filter.len()).map_err(|_| LockdownError::Syscall {
            what: "seccomp",
            source: io::Error::from_raw_os_error(libc::E2BIG),
        })?,
        filter: filter.as_ptr().cast_mut().cast(),
    };
    // SAFETY: `program` points at `filter`'s instructions, which outlive the call (the kernel
    // copies them); the flags ask for every thread to be filtered (there is one).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &raw const program,
        )
    };
    check("seccomp(SECCOMP_SET_MODE_FILTER)", rc)?;
    Ok(())
}

#[cfg(feature = "escape-probe")]
#[derive(Debug, Clone, Copy)]
pub struct ProbeContext {
    /// The supervisor's pid (the probe cannot call getppid under seccomp).
    pub parent_pid: i32,
    /// Whether `--probe-skip-seccomp` left seccomp out.
    pub seccomp_skipped: bool,
}

#[cfg(feature = "escape-probe")]
static PROBE_CONTEXT: std::sync::OnceLock<ProbeContext> = std::sync::OnceLock::new();

/// The lockdown as [`lock`] applied it, or `None` before `lock` has run.
#[cfg(feature = "escape-probe")]
pub fn probe_context() -> Option<ProbeContext> {
    PROBE_CONTEXT.get().copied()
}

fn fd_is_open(fd: libc::c_int) -> bool {
    // SAFETY: F_GETFD only reads the descriptor flags; an invalid fd yields EBADF.
    unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
}

fn check_ipc_fd() -> Result<(), LockdownError> {
    if !fd_is_open(IPC_FD) {
        return Err(LockdownError::IpcFdMissing);
    }
    // SAFETY: all-zero is a valid `struct stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid, writable `struct stat`.
    let rc = unsafe { libc::fstat(IPC_FD, &mut st) };
    check("fstat(3)", libc::c_long::from(rc))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(LockdownError::IpcFdNotUnixSocket);
    }
    let mut domain: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `domain` and `len` are valid for writes and `len` holds the buffer size.
    let rc = unsafe {
        libc::getsockopt(
            IPC_FD,
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&raw mut domain).cast(),
            &mut len,
        )
    };
    check("getsockopt(SO_DOMAIN)", libc::c_long::from(rc))?;
    if domain != libc::AF_UNIX {
        return Err(LockdownError::IpcFdNotUnixSocket);
    }
    Ok(())
}

fn clear_environment() -> Result<(), LockdownError> {
    let keys: Vec<OsString> = std::env::vars_os().map(|(k, _)| k).collect();
    let mut malformed = false;
    for key in keys {
        // remove_var panics on names std could never have set ("", "=...", NUL); those are
        // swept by clearenv below instead.
        let bytes = key.as_encoded_bytes();
        if bytes.is_empty() || bytes.contains(&b'=') || bytes.contains(&0) {
            malformed = true;
            continue;
        }
        // SAFETY: the worker is still single-threaded (prepare_process runs first in main,
        // before anything can spawn a thread), so no other thread can read the environment
        // concurrently.
        unsafe { std::env::remove_var(&key) };
    }
    if malformed {
        // SAFETY: single-threaded, as above; clearenv drops the remaining entries.
        let rc = unsafe { libc::clearenv() };
        check("clearenv", libc::c_long::from(rc))?;
    }
    if std::env::vars_os().next().is_some() {
        return Err(LockdownError::Syscall {
            what: "clearing the environment",
            source: io::Error::other("variables remain"),
        });
    }
    Ok(())
}

/// Sets `resource` to `soft`/`hard`, never raising the current hard limit: an unprivileged
/// worker may not raise it, and a lower inherited limit is at least as strict.
fn lower_rlimit(
    resource: libc::__rlimit_resource_t,
    soft: u64,
    hard: u64,
) -> Result<(), LockdownError> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `current` is a valid, writable rlimit.
    let rc = unsafe { libc::getrlimit(resource, &mut current) };
    check("getrlimit", libc::c_long::from(rc))?;
    let hard = hard.min(current.rlim_max);
    let new = libc::rlimit {
        rlim_cur: soft.min(hard),
        rlim_max: hard,
    };
    // SAFETY: `new` is a valid rlimit; lowering limits has no memory-safety effect.
    let rc = unsafe { libc::setrlimit(resource, &new) };
    check("setrlimit", libc::c_long::from(rc))?;
    Ok(())
}

/// The Landlock ABI version of the running kernel (not capped at what the crate knows).
fn kernel_landlock_abi() -> Result<u32, LockdownError> {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag, the kernel only
    // returns a number; no memory is read or written and no fd is created.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 1 {
        // ENOSYS: not built into the kernel; EOPNOTSUPP: disabled at boot.
        return Err(LockdownError::LandlockUnavailable(
            io::Error::last_os_error().to_string(),
        ));
    }
    u32::try_from(rc).map_err(|_| LockdownError::LandlockUnavailable(format!("abi {rc}")))
}

/// A ruleset that handles every filesystem right, TCP bind/connect, and abstract-socket and
/// signal scoping, with no rule at all: nothing is allowed. Newer parts are best effort
/// (the caller refuses a result of `NotEnforced`).
fn restrict_with_landlock() -> Result<RulesetStatus, LockdownError> {
    let status = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(LANDLOCK_ABI))?
        .handle_access(AccessNet::from_all(LANDLOCK_ABI))?
        .scope(Scope::from_all(LANDLOCK_ABI))?
        .create()?
        .restrict_self()?;
    Ok(status.ruleset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<LockdownConfig, LockdownError> {
        LockdownConfig::from_args(args.iter().map(OsString::from))
    }

    #[test]
    fn parses_all_arguments_in_any_order() {
        let cfg = parse(&[
            "--cpu-seconds",
            "10",
            "--parent-pid",
            "42",
            "--memory-ceiling",
            "1073741824",
        ])
        .unwrap();
        assert_eq!(cfg.parent_pid, 42);
        assert_eq!(
            cfg.role,
            Role::Worker(Ceiling {
                memory_ceiling_bytes: 1 << 30,
                cpu_seconds: 10
            })
        );
    }

    #[test]
    fn a_zygote_takes_its_parent_and_no_limits() {
        let cfg = parse(&["--zygote", "--parent-pid", "7"]).unwrap();
        assert_eq!((cfg.parent_pid, cfg.role), (7, Role::Zygote));
        assert!(matches!(
            parse(&["--zygote", "--parent-pid", "7", "--cpu-seconds", "1"]),
            Err(LockdownError::NotForZygote("--cpu-seconds"))
        ));
        assert!(matches!(
            parse(&["--zygote", "--parent-pid", "7", "--memory-ceiling", "1"]),
            Err(LockdownError::NotForZygote("--memory-ceiling"))
        ));
        assert!(matches!(
            parse(&["--zygote", "--zygote", "--parent-pid", "7"]),
            Err(LockdownError::DuplicateArgument("--zygote"))
        ));
        assert!(matches!(
            parse(&["--zygote"]),
            Err(LockdownError::MissingArgument("--parent-pid"))
        ));
    }

    #[test]
    fn rejects_bad_command_lines() {
        let full = [
            "--parent-pid",
            "1",
            "--memory-ceiling",
            "1",
            "--cpu-seconds",
            "1",
        ];
        assert!(parse(&full).is_ok());
        assert!(matches!(
            parse(&full[..4]),
            Err(LockdownError::MissingArgument("--cpu-seconds"))
        ));
        assert!(matches!(
            parse(&full[..5]),
            Err(LockdownError::MissingValue("--cpu-seconds"))
        ));
        let mut extra = full.to_vec();
        extra.push("--verbose");
        assert!(matches!(
            parse(&extra),
            Err(LockdownError::UnknownArgument(_))
        ));
        let mut twice = full.to_vec();
        twice.extend(["--parent-pid", "2"]);
        assert!(matches!(
            parse(&twice),
            Err(LockdownError::DuplicateArgument("--parent-pid"))
        ));
        for bad in ["0", "-1", "x", "", "18446744073709551615"] {
            let args = [
                "--parent-pid",
                "1",
                "--memory-ceiling",
                "1",
                "--cpu-seconds",
                bad,
            ];
            assert!(
                matches!(parse(&args), Err(LockdownError::InvalidValue { .. })),
                "{bad:?} accepted"
            );
        }
    }

    #[cfg(not(feature = "escape-probe"))]
    #[test]
    fn release_builds_do_not_know_the_probe_flag() {
        let args = [
            "--parent-pid",
            "1",
            "--memory-ceiling",
            "1",
            "--cpu-seconds",
            "1",
            "--probe-skip-seccomp",
        ];
        assert!(matches!(
            parse(&args),
            Err(LockdownError::UnknownArgument(_))
        ));
    }

    #[cfg(feature = "escape-probe")]
    #[test]
    fn probe_builds_accept_the_probe_flag() {
        let args = [
            "--probe-skip-seccomp",
            "--parent-pid",
            "1",
            "--memory-ceiling",
            "1",
            "--cpu-seconds",
            "1",
        ];
        assert!(parse(&args).unwrap().probe_skip_seccomp);
    }
}
