//! The worker's seccomp policy, kept as reviewed data: one line per syscall, each with the
//! reason it is needed. Changing this file changes the attack surface of every worker, so a
//! new entry needs a reason a reviewer can check against the code that makes the call.
//!
//! # Two filters
//!
//! The worker installs two seccomp filters. For every syscall the kernel runs *all* installed
//! filters and takes the most restrictive answer (`KILL_PROCESS` > `ERRNO` > `ALLOW`), so:
//!
//! 1. [`errno_filter`] (default `ALLOW`) answers the filesystem syscalls in
//!    [`REFUSED_WITH_EPERM`] with `EPERM`. libc may still try one of these on some rare path
//!    (the design measured zoneinfo lookups from `Date`); a clean error lets that path degrade
//!    instead of killing the program. `EPERM` rather than `EACCES` so that every refusal the
//!    escape tests see is either `SIGSYS` or `EPERM` and cannot be confused with Landlock's
//!    `EACCES`.
//! 2. [`kill_filter`] (default `KILL_PROCESS`) allows exactly [`ALLOWED`] plus the
//!    [`REFUSED_WITH_EPERM`] syscalls. It must let the latter through, or its kill would win
//!    over filter 1's errno; filter 1 then turns them into `EPERM`.
//!
//! The errno filter is installed *first*: installing a filter needs `prctl` and `seccomp`,
//! which the kill filter (rightly) does not allow, so nothing can be installed after it.
//!
//! A worker forked by the zygote inherits the errno filter and the zygote's kill filter (which
//! also allows [`ZYGOTE_ONLY`]) and adds a third, [`forked_worker_filter`], that kills exactly
//! [`ZYGOTE_ONLY`]'s syscalls: together they allow what [`kill_filter`] allows.
//!
//! Every filter starts with seccompiler's architecture check (any other `AUDIT_ARCH_*`, e.g.
//! 32-bit `int 0x80` calls on x86_64, is killed). x32 syscalls share `AUDIT_ARCH_X86_64` but
//! carry bit 30 in their number, so they match no entry of the kill filter and are killed.

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

/// The architecture the filters are compiled for: the one this binary was built for.
#[cfg(target_arch = "x86_64")]
pub const TARGET_ARCH: TargetArch = TargetArch::x86_64;
/// The architecture the filters are compiled for: the one this binary was built for.
#[cfg(target_arch = "aarch64")]
pub const TARGET_ARCH: TargetArch = TargetArch::aarch64;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the airlock worker's seccomp policy is written for x86_64 and aarch64 only");

/// The IPC socket's fd number, as a seccomp comparison value.
const IPC_FD: u64 = airlock_proto::IPC_FD as u64;

/// One reviewed line of the policy.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "name and reason are for reviewers and the unit tests"
    )
)]
pub struct SyscallRule {
    /// `libc::SYS_*` for the target architecture.
    pub nr: libc::c_long,
    /// The syscall's name, for reviews and diagnostics.
    pub name: &'static str,
    /// If present, the syscall matches only when this holds; otherwise the filter's default
    /// action applies (kill).
    pub arg: Option<ArgCondition>,
    /// Why the worker needs this syscall.
    pub reason: &'static str,
}

/// A condition on one syscall argument. Comparisons use the low 32 bits (`Dword`): every
/// argument checked here is an `int`/`unsigned int` or a flag word whose bits of interest are
/// in the low half, and the kernel itself truncates `fd` arguments to 32 bits.
#[derive(Debug, Clone, Copy)]
pub enum ArgCondition {
    /// `arg == value`.
    Equals { arg: u8, value: u64 },
    /// `(arg & mask) == value`.
    MaskedEquals { arg: u8, mask: u64, value: u64 },
}

const fn rule(nr: libc::c_long, name: &'static str, reason: &'static str) -> SyscallRule {
    SyscallRule {
        nr,
        name,
        arg: None,
        reason,
    }
}

const fn rule_if(
    nr: libc::c_long,
    name: &'static str,
    arg: ArgCondition,
    reason: &'static str,
) -> SyscallRule {
    SyscallRule {
        nr,
        name,
        arg: Some(arg),
        reason,
    }
}

/// Only the IPC socket: reading or writing any other fd (stdin, stdout, stderr) is a kill.
const ON_IPC_FD: ArgCondition = ArgCondition::Equals {
    arg: 0,
    value: IPC_FD,
};

/// `fcntl(fd, F_GETFD)`: reads the close-on-exec flag, nothing else.
const F_GETFD_ONLY: ArgCondition = ArgCondition::Equals {
    arg: 1,
    value: libc::F_GETFD as u64,
};

/// `prot` (arg 2 of `mmap` and `mprotect`) without `PROT_EXEC`: the engine is an interpreter
/// (no JIT), so no page ever needs to become executable after lockdown.
const NOT_EXEC: ArgCondition = ArgCondition::MaskedEquals {
    arg: 2,
    mask: libc::PROT_EXEC as u64,
    value: 0,
};

/// `getrusage(RUSAGE_SELF, …)`: the process's own usage, not its children's or a thread's.
const RUSAGE_SELF_ONLY: ArgCondition = ArgCondition::Equals {
    arg: 0,
    value: libc::RUSAGE_SELF as u64,
};

/// Everything the locked-down worker may do. `LockdownReport::seccomp_allowed_syscalls` is
/// the length of this table.
#[rustfmt::skip]
pub const ALLOWED: &[SyscallRule] = &[
    // The IPC channel.
    rule_if(libc::SYS_read, "read", ON_IPC_FD, "receive Start and tool results on fd 3"),
    rule_if(libc::SYS_write, "write", ON_IPC_FD, "send Ready, tool calls, console and Done on fd 3"),
    rule_if(libc::SYS_recvfrom, "recvfrom", ON_IPC_FD, "std's UnixStream::read is recv(2), i.e. recvfrom, on fd 3"),
    rule_if(libc::SYS_sendto, "sendto", ON_IPC_FD, "std's UnixStream::write is send(MSG_NOSIGNAL), i.e. sendto, on fd 3 (a connected stream socket refuses any address)"),
    rule_if(libc::SYS_fcntl, "fcntl", F_GETFD_ONLY, "std's OwnedFd drop checks the fd is still open with F_GETFD (debug-assertion builds); reads one flag"),
    rule(libc::SYS_close, "close", "dropping the ipc stream at exit; closing an fd grants nothing"),
    // Memory management (the design measured brk, mmap, mremap, munmap during evaluation).
    rule(libc::SYS_brk, "brk", "glibc malloc grows the main heap"),
    rule_if(libc::SYS_mmap, "mmap", NOT_EXEC, "glibc malloc: large blocks and extra arenas, never executable"),
    rule_if(libc::SYS_mprotect, "mprotect", NOT_EXEC, "glibc malloc commits reserved PROT_NONE arena pages, never executable"),
    rule(libc::SYS_munmap, "munmap", "glibc free of large blocks"),
    rule(libc::SYS_mremap, "mremap", "glibc realloc of large blocks (keeps the mapping's protection)"),
    rule(libc::SYS_madvise, "madvise", "glibc free returns memory with MADV_DONTNEED"),
    // Synchronisation, time, randomness.
    rule(libc::SYS_futex, "futex", "std and glibc locks (uncontended in a single thread, but the slow path must not kill)"),
    rule(libc::SYS_clock_gettime, "clock_gettime", "Date.now, performance timing and the CPU deadline (vDSO fallback)"),
    rule(libc::SYS_clock_getres, "clock_getres", "clock resolution queries (vDSO fallback)"),
    rule(libc::SYS_gettimeofday, "gettimeofday", "QuickJS reads the time with gettimeofday (vDSO fallback)"),
    rule(libc::SYS_getrandom, "getrandom", "Math.random seeding and std's hash seeds"),
    // Signals: only what Rust's runtime needs on its own thread.
    rule(libc::SYS_rt_sigreturn, "rt_sigreturn", "return from a signal handler (stack-overflow guard)"),
    rule(libc::SYS_rt_sigprocmask, "rt_sigprocmask", "glibc blocks signals around abort and exit"),
    rule(libc::SYS_sigaltstack, "sigaltstack", "Rust's stack-overflow guard installs and removes its alternate stack"),
    // Process information and exit.
    rule(libc::SYS_getpid, "getpid", "glibc and std identify the process (no information beyond the pid)"),
    rule_if(libc::SYS_getrusage, "getrusage", RUSAGE_SELF_ONLY, "a forked worker reports its own peak RSS in Done (its own usage only)"),
    rule(libc::SYS_exit, "exit", "thread exit"),
    rule(libc::SYS_exit_group, "exit_group", "process exit"),
];

/// Filesystem syscalls answered with `EPERM` by [`errno_filter`] (and let through by
/// [`kill_filter`] so that the errno answer is the one that counts). Landlock would refuse
/// every path anyway; seccomp answers first so no path is ever resolved.
#[rustfmt::skip]
pub const REFUSED_WITH_EPERM: &[SyscallRule] = &[
    #[cfg(target_arch = "x86_64")]
    rule(libc::SYS_open, "open", "libc may try to open a file (e.g. zoneinfo); refuse without killing"),
    rule(libc::SYS_openat, "openat", "libc may try to open a file (e.g. zoneinfo); refuse without killing"),
    rule(libc::SYS_openat2, "openat2", "newer libc open path; refuse without killing"),
    #[cfg(target_arch = "x86_64")]
    rule(libc::SYS_stat, "stat", "libc may stat a file; refuse without killing"),
    #[cfg(target_arch = "x86_64")]
    rule(libc::SYS_lstat, "lstat", "libc may lstat a file; refuse without killing"),
    rule(libc::SYS_fstat, "fstat", "libc may fstat an fd (stdio buffering); refuse without killing"),
    rule(libc::SYS_newfstatat, "newfstatat", "libc's stat family; refuse without killing"),
    rule(libc::SYS_statx, "statx", "std's metadata calls; refuse without killing"),
    #[cfg(target_arch = "x86_64")]
    rule(libc::SYS_access, "access", "libc may probe a file; refuse without killing"),
    rule(libc::SYS_faccessat, "faccessat", "libc may probe a file; refuse without killing"),
    rule(libc::SYS_faccessat2, "faccessat2", "libc may probe a file; refuse without killing"),
    #[cfg(target_arch = "x86_64")]
    rule(libc::SYS_readlink, "readlink", "libc may resolve a link; refuse without killing"),
    rule(libc::SYS_readlinkat, "readlinkat", "libc may resolve a link; refuse without killing"),
    rule(libc::SYS_lseek, "lseek", "libc may seek a file it believes open; refuse without killing"),
];

/// Number of entries in [`ALLOWED`], as reported in `LockdownReport`.
/// `clone(CLONE_PARENT | SIGCHLD, 0, …)`: a plain fork whose child becomes the daemon's, not
/// the zygote's. Any other flag (threads, namespaces, `CLONE_VM`, …) is a kill.
const FORK_FOR_THE_DAEMON: ArgCondition = ArgCondition::Equals {
    arg: 0,
    value: (libc::CLONE_PARENT | libc::SIGCHLD) as u64,
};

/// `dup3(fd, 3, 0)`: the new worker puts its own socket where the zygote's control socket was.
const ONTO_IPC_FD: ArgCondition = ArgCondition::Equals {
    arg: 1,
    value: IPC_FD,
};

/// `prlimit64(0, …)`: the process's own limits (`setrlimit`/`getrlimit` in glibc).
const OWN_LIMITS: ArgCondition = ArgCondition::Equals { arg: 0, value: 0 };

/// `prctl(PR_SET_PDEATHSIG, …)`: the one `prctl` a new worker makes.
const PDEATHSIG_ONLY: ArgCondition = ArgCondition::Equals {
    arg: 0,
    value: libc::PR_SET_PDEATHSIG as u64,
};

/// `prctl(PR_SET_NAME, …)`: the process's own name (`comm`), nothing else.
const SET_NAME_ONLY: ArgCondition = ArgCondition::Equals {
    arg: 0,
    value: libc::PR_SET_NAME as u64,
};

/// `seccomp(SECCOMP_SET_MODE_FILTER, …)`: adding a filter can only take rights away.
const ADD_FILTER_ONLY: ArgCondition = ArgCondition::Equals {
    arg: 0,
    value: libc::SECCOMP_SET_MODE_FILTER as u64,
};

/// What the zygote (`airlock-worker --zygote`) may do on top of [`ALLOWED`]: receive a fork
/// request, fork, and let the child finish its own lockdown. The zygote never runs untrusted
/// code; its children install the worker's own kill filter ([`kill_filter`]) before they send
/// `Ready`, and stacked filters take the most restrictive answer, so a program runs under
/// exactly the worker's allowlist. These entries exist for the few steps between the fork
/// and that filter (see `lockdown::enter_forked_worker`).
#[rustfmt::skip]
pub const ZYGOTE_ONLY: &[SyscallRule] = &[
    rule_if(libc::SYS_recvmsg, "recvmsg", ON_IPC_FD, "the zygote receives a fork request with the new worker's socket attached (SCM_RIGHTS) on fd 3"),
    rule_if(libc::SYS_clone, "clone", FORK_FOR_THE_DAEMON, "the zygote forks one new worker per request, as the daemon's child"),
    rule_if(libc::SYS_prctl, "prctl", PDEATHSIG_ONLY, "a new worker dies with the daemon (the parent-death signal is not inherited across fork)"),
    rule_if(libc::SYS_prctl, "prctl", SET_NAME_ONLY, "a new worker takes back the name airlock-worker from the zygote's airlock-zygote (what ps and the tests see)"),
    rule(libc::SYS_getppid, "getppid", "a new worker checks that its parent is still the daemon after setting the parent-death signal"),
    rule_if(libc::SYS_dup3, "dup3", ONTO_IPC_FD, "a new worker moves its own socket onto fd 3, closing the zygote's control socket in the same step"),
    rule_if(libc::SYS_prlimit64, "prlimit64", OWN_LIMITS, "a new worker sets its own memory, CPU, process and descriptor limits"),
    rule_if(libc::SYS_seccomp, "seccomp", ADD_FILTER_ONLY, "a new worker installs the worker's kill filter, which allows none of this table"),
];

pub fn allowed_count() -> u32 {
    u32::try_from(ALLOWED.len()).unwrap_or(u32::MAX)
}

fn to_seccomp_rules(rule: &SyscallRule) -> Result<Vec<SeccompRule>, BackendError> {
    let Some(arg) = rule.arg else {
        // An empty rule chain matches the syscall unconditionally.
        return Ok(Vec::new());
    };
    let condition = match arg {
        ArgCondition::Equals { arg, value } => {
            SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)?
        }
        ArgCondition::MaskedEquals { arg, mask, value } => SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(mask),
            value,
        )?,
    };
    Ok(vec![SeccompRule::new(vec![condition])?])
}

/// The main filter: default kill-process; allows [`ALLOWED`] (with their argument conditions)
/// and passes [`REFUSED_WITH_EPERM`] on to the errno filter.
pub fn kill_filter() -> Result<BpfProgram, BackendError> {
    kill_filter_of(ALLOWED.iter())
}

fn kill_filter_of<'a>(
    allowed: impl Iterator<Item = &'a SyscallRule>,
) -> Result<BpfProgram, BackendError> {
    // A syscall may be listed once per condition (the zygote's two `prctl`s); the conditions
    // are alternatives. An empty chain matches unconditionally, so it absorbs the others.
    let mut rules: BTreeMap<libc::c_long, Vec<SeccompRule>> = BTreeMap::new();
    for r in allowed {
        let chain = to_seccomp_rules(r)?;
        match rules.entry(r.nr) {
            Entry::Vacant(slot) => {
                slot.insert(chain);
            }
            Entry::Occupied(mut slot) => {
                if slot.get().is_empty() || chain.is_empty() {
                    slot.get_mut().clear();
                } else {
                    slot.get_mut().extend(chain);
                }
            }
        }
    }
    for r in REFUSED_WITH_EPERM {
        rules.insert(r.nr, Vec::new());
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::KillProcess,
        SeccompAction::Allow,
        TARGET_ARCH,
    )?;
    filter.try_into()
}

/// The zygote's kill filter: [`ALLOWED`], [`ZYGOTE_ONLY`] and the [`REFUSED_WITH_EPERM`]
/// syscalls (for the errno filter installed before it); anything else kills.
pub fn zygote_kill_filter() -> Result<BpfProgram, BackendError> {
    kill_filter_of(ALLOWED.iter().chain(ZYGOTE_ONLY))
}

/// What a worker forked from the zygote installs on top of the zygote's filters: default
/// allow, and a kill for every syscall in [`ZYGOTE_ONLY`], whatever its arguments.
///
/// Stacked filters take the most restrictive answer, and the zygote's kill filter already
/// kills everything outside [`ALLOWED`], [`ZYGOTE_ONLY`] and [`REFUSED_WITH_EPERM`]. Taking
/// [`ZYGOTE_ONLY`] away leaves exactly what [`kill_filter`] allows (the tables share no
/// syscall, so no condition of [`ALLOWED`] is touched). The result is the same as stacking
/// [`kill_filter`] itself, but this program is a few instructions long, not a few hundred: the
/// kernel translates and JIT-compiles every filter a process installs, and a forked worker
/// paid ~20 µs of CPU for the full one (218 instructions; this one has 40).
pub fn forked_worker_filter() -> Result<BpfProgram, BackendError> {
    let rules = ZYGOTE_ONLY.iter().map(|r| (r.nr, Vec::new())).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::KillProcess,
        TARGET_ARCH,
    )?;
    filter.try_into()
}

/// The errno filter: default allow (the kill filter decides everything else); answers
/// [`REFUSED_WITH_EPERM`] with `EPERM`.
pub fn errno_filter() -> Result<BpfProgram, BackendError> {
    let rules = REFUSED_WITH_EPERM
        .iter()
        .map(|r| (r.nr, Vec::new()))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TARGET_ARCH,
    )?;
    filter.try_into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn all_rules() -> impl Iterator<Item = &'static SyscallRule> {
        ALLOWED.iter().chain(REFUSED_WITH_EPERM)
    }

    #[test]
    fn no_syscall_is_listed_twice() {
        let mut seen = HashSet::new();
        for r in all_rules() {
            assert!(seen.insert(r.nr), "{} ({}) is listed twice", r.name, r.nr);
        }
    }

    #[test]
    fn every_entry_has_a_reason_and_a_name() {
        for r in all_rules() {
            assert!(!r.reason.trim().is_empty(), "{} has no reason", r.name);
            assert!(!r.name.is_empty(), "syscall {} has no name", r.nr);
        }
    }

    #[test]
    fn dangerous_syscalls_are_not_allowed() {
        let allowed: HashSet<_> = all_rules().map(|r| r.nr).collect();
        for nr in [
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_clone,
            libc::SYS_clone3,
            libc::SYS_socket,
            libc::SYS_connect,
            libc::SYS_ptrace,
            libc::SYS_kill,
            libc::SYS_tgkill,
            libc::SYS_prctl,
            libc::SYS_seccomp,
            libc::SYS_unshare,
            libc::SYS_mount,
            libc::SYS_io_uring_setup,
            libc::SYS_bpf,
            libc::SYS_userfaultfd,
            libc::SYS_keyctl,
            libc::SYS_memfd_create,
            libc::SYS_personality,
            libc::SYS_pkey_mprotect,
        ] {
            assert!(!allowed.contains(&nr), "syscall {nr} must not be allowed");
        }
    }

    #[test]
    fn conditions_are_the_reviewed_ones() {
        for r in ALLOWED {
            match r.name {
                "read" | "write" | "recvfrom" | "sendto" => {
                    assert!(matches!(
                        r.arg,
                        Some(ArgCondition::Equals { arg: 0, value: 3 })
                    ))
                }
                "fcntl" => assert!(matches!(
                    r.arg,
                    Some(ArgCondition::Equals { arg: 1, value }) if value == libc::F_GETFD as u64
                )),
                "getrusage" => assert!(matches!(
                    r.arg,
                    Some(ArgCondition::Equals { arg: 0, value }) if value == libc::RUSAGE_SELF as u64
                )),
                "mmap" | "mprotect" => assert!(matches!(
                    r.arg,
                    Some(ArgCondition::MaskedEquals { arg: 2, mask, value: 0 })
                        if mask == libc::PROT_EXEC as u64
                )),
                _ => assert!(r.arg.is_none(), "{} has an unexpected condition", r.name),
            }
        }
    }

    #[test]
    fn filters_compile_for_the_host_arch() {
        let kill = kill_filter().expect("kill filter compiles");
        let errno = errno_filter().expect("errno filter compiles");
        assert!(!kill.is_empty());
        assert!(!errno.is_empty());
        // The kernel's BPF limit is 4096 instructions; stay far below it.
        assert!(
            kill.len() < 1024,
            "kill filter has {} instructions",
            kill.len()
        );
    }

    #[test]
    fn the_zygote_adds_only_conditioned_fork_steps() {
        let worker: HashSet<_> = all_rules().map(|r| r.nr).collect();
        for r in ZYGOTE_ONLY {
            assert!(
                !worker.contains(&r.nr),
                "{} is already a worker syscall",
                r.name
            );
            assert!(!r.reason.trim().is_empty(), "{} has no reason", r.name);
            // Only getppid (no arguments, no effect) goes unconditioned.
            assert!(
                r.arg.is_some() || r.nr == libc::SYS_getppid,
                "{} must be conditioned",
                r.name
            );
        }
        let fork = ZYGOTE_ONLY
            .iter()
            .find(|r| r.nr == libc::SYS_clone)
            .unwrap();
        assert!(matches!(
            fork.arg,
            Some(ArgCondition::Equals { arg: 0, value }) if value == (libc::CLONE_PARENT | libc::SIGCHLD) as u64
        ));
        // Never threads, namespaces, clone3 (whose flags seccomp cannot read), or exec.
        for nr in [
            libc::SYS_clone3,
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_fork,
            libc::SYS_vfork,
        ] {
            assert!(
                ZYGOTE_ONLY.iter().all(|r| r.nr != nr),
                "syscall {nr} in the zygote table"
            );
        }
        let zygote = zygote_kill_filter().expect("zygote filter compiles");
        assert!(zygote.len() > kill_filter().unwrap().len());
        assert!(
            zygote.len() < 1024,
            "zygote filter has {} instructions",
            zygote.len()
        );
    }

    #[test]
    fn a_forked_worker_takes_away_exactly_the_zygote_table() {
        // The forked worker's filter kills each ZYGOTE_ONLY syscall and nothing else; since no
        // worker syscall is in that table (the_zygote_adds_only_conditioned_fork_steps), the
        // zygote's kill filter under it leaves exactly kill_filter's allowlist.
        let worker: HashSet<_> = all_rules().map(|r| r.nr).collect();
        assert!(ZYGOTE_ONLY.iter().all(|r| !worker.contains(&r.nr)));
        let forked = forked_worker_filter().expect("the forked worker's filter compiles");
        let full = kill_filter().unwrap();
        assert!(
            forked.len() * 4 < full.len(),
            "{} instructions against the full filter's {}",
            forked.len(),
            full.len()
        );
        // Each distinct syscall of the table appears in it as a comparison with its number.
        let distinct: HashSet<_> = ZYGOTE_ONLY.iter().map(|r| r.nr).collect();
        for nr in &distinct {
            let k = u32::try_from(*nr).unwrap();
            assert!(
                forked.iter().any(|i| i.k == k && i.code & 0x07 == 0x05),
                "syscall {nr} is not compared in the forked worker's filter"
            );
        }
    }

    #[test]
    fn reported_count_is_the_table_length() {
        assert_eq!(allowed_count() as usize, ALLOWED.len());
    }
}
