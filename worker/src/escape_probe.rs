//! TEST ONLY (feature `escape-probe`): after the real lockdown, attempt the forbidden operation
//! named by the program text and report how the sandbox answered.
//!
//! Every attempt is a raw `libc::syscall` (or a libc call that maps to exactly one syscall),
//! so nothing is optimised away or routed through a different syscall by a wrapper. The
//! possible endings:
//!
//! - the kernel kills the process with `SIGSYS` (seccomp's default action): this function
//!   never returns; that is the expected result for most attacks;
//! - the syscall fails with `EPERM` (seccomp's errno filter, or Landlock scoping) →
//!   `SandboxViolation`;
//! - with `landlock-only:` (worker started with `--probe-skip-seccomp`), the syscall fails
//!   with Landlock's `EACCES` → `SandboxViolation`;
//! - any other errno → `Internal` (the attempt failed for an unrelated reason, which proves
//!   nothing about the sandbox);
//! - success → `Ok("ESCAPED: <attack>")`, which the tests treat as a failure.

use crate::lockdown;
use airlock_proto::{ErrorKind, ExecError, IPC_FD, Outcome, StartExecution, WorkerStats};
use libc::c_long;

/// Every attack this probe knows, plus the two helpers `noop` (answers `"alive"`) and `sleep`
/// (blocks reading fd 3 until the supervisor closes it).
pub const ATTACKS: &[&str] = &[
    "noop",
    "sleep",
    "open-etc-passwd",
    "openat-etc-passwd",
    "connect-localhost",
    "execve",
    "fork",
    "clone3",
    "ptrace-parent",
    "kill-parent",
    "unshare",
    "mount",
    "io-uring-setup",
    "bpf",
    "userfaultfd",
    "keyctl",
    "memfd-create",
    "mmap-exec",
    "mprotect-exec",
    "write-stderr",
    "write-other-fd",
    "read-stdin",
    "write-stdin",
    "write-fd-4",
    // The x32 ABI exists only on x86_64.
    #[cfg(target_arch = "x86_64")]
    "x32-getpid",
    #[cfg(target_arch = "x86_64")]
    "x32-openat",
    "ioctl-tiocsti",
    "process-vm-readv",
    "perf-event-open",
    "personality",
    "prctl-set-dumpable",
    "prctl-set-seccomp",
    "prctl-clear-no-new-privs",
    // What only the zygote may do (syscall_allowlist::ZYGOTE_ONLY): a worker, forked or not,
    // must not.
    "clone-parent",
    "recvmsg-ipc",
    "dup3-onto-ipc",
    "prlimit-own-nofile",
    "prctl-set-pdeathsig",
    "prctl-set-name",
    "seccomp-add-filter",
];

/// Prefix that selects the Landlock-only variant of an attack. Only valid when the worker was
/// started with `--probe-skip-seccomp` (which exists only in `escape-probe` builds).
pub const LANDLOCK_ONLY: &str = "landlock-only:";

pub fn run(start: &StartExecution) -> (Outcome, WorkerStats) {
    let name = start.code.trim();
    let (attack, landlock_only) = match name.strip_prefix(LANDLOCK_ONLY) {
        Some(rest) => (rest, true),
        None => (name, false),
    };
    if !ATTACKS.contains(&attack) {
        return internal(format!(
            "unknown attack {name:?}; valid attacks: {} (each may be prefixed with {LANDLOCK_ONLY})",
            ATTACKS.join(", ")
        ));
    }
    let Some(ctx) = lockdown::probe_context() else {
        return internal("the probe ran before lockdown".to_owned());
    };
    // A mismatch would make the result meaningless: an attack meant to test seccomp would
    // run without it, or a Landlock-only attack would be answered by seccomp.
    if landlock_only != ctx.seccomp_skipped && !matches!(attack, "noop" | "sleep") {
        return internal(if landlock_only {
            format!("{name}: landlock-only attacks need a worker started with --probe-skip-seccomp")
        } else {
            format!("{name}: this worker runs without seccomp; use {LANDLOCK_ONLY}{attack}")
        });
    }
    if landlock_only {
        // RLIMIT_NOFILE is 4 with fds 0-3 open, so open/socket would fail with EMFILE before
        // Landlock is even asked. Free slot 0 (stdin, /dev/null) so the refusal we observe is
        // Landlock's own.
        // SAFETY: fd 0 is /dev/null and owned by no Rust object in this process.
        unsafe { libc::close(0) };
    }

    let probe = Probe {
        name,
        landlock_only,
    };
    let outcome = match attack {
        "noop" => Outcome::Ok {
            value_json: "\"alive\"".to_owned(),
        },
        "sleep" => sleep_on_ipc_fd(),
        "open-etc-passwd" => probe.open_etc_passwd(),
        "openat-etc-passwd" => probe.openat_etc_passwd(),
        "connect-localhost" => probe.connect_localhost(),
        "execve" => probe.execve(),
        "fork" => probe.fork(),
        "clone3" => probe.clone3(),
        "ptrace-parent" => probe.ptrace_parent(ctx.parent_pid),
        "kill-parent" => probe.kill_parent(ctx.parent_pid),
        "unshare" => probe.unshare(),
        "mount" => probe.mount(),
        "io-uring-setup" => probe.io_uring_setup(),
        "bpf" => probe.bpf(),
        "userfaultfd" => probe.userfaultfd(),
        "keyctl" => probe.keyctl(),
        "memfd-create" => probe.memfd_create(),
        "mmap-exec" => probe.mmap_exec(),
        "mprotect-exec" => probe.mprotect_exec(),
        "write-stderr" => probe.write_fd(2),
        "write-other-fd" => probe.write_fd(1),
        "read-stdin" => probe.read_stdin(),
        "write-stdin" => probe.write_fd(0),
        "write-fd-4" => probe.write_fd(4),
        "x32-getpid" => probe.x32(libc::SYS_getpid, [0; 3]),
        "x32-openat" => probe.x32_openat(),
        "ioctl-tiocsti" => probe.ioctl_tiocsti(),
        "process-vm-readv" => probe.process_vm_readv(ctx.parent_pid),
        "perf-event-open" => probe.perf_event_open(),
        "personality" => probe.personality(),
        "prctl-set-dumpable" => probe.prctl(libc::PR_SET_DUMPABLE, 1),
        "prctl-set-seccomp" => probe.prctl(libc::PR_SET_SECCOMP, 0),
        "prctl-clear-no-new-privs" => probe.prctl(libc::PR_SET_NO_NEW_PRIVS, 0),
        "clone-parent" => probe.clone_parent(),
        "recvmsg-ipc" => probe.recvmsg_ipc(),
        "dup3-onto-ipc" => probe.dup3_onto_ipc(),
        "prlimit-own-nofile" => probe.prlimit_own_nofile(),
        "prctl-set-pdeathsig" => probe.prctl(libc::PR_SET_PDEATHSIG, 0),
        "prctl-set-name" => probe.prctl_set_name(),
        "seccomp-add-filter" => probe.seccomp_add_filter(),
        other => internal_outcome(format!("attack {other:?} is listed but not implemented")),
    };
    (outcome, stats())
}

fn internal_outcome(message: String) -> Outcome {
    Outcome::Error(ExecError::new(ErrorKind::Internal, message))
}

fn internal(message: String) -> (Outcome, WorkerStats) {
    (internal_outcome(message), WorkerStats::default())
}

fn stats() -> WorkerStats {
    WorkerStats::default()
}

/// Blocks in `read` on the IPC fd, discarding whatever arrives, until the peer closes it.
fn sleep_on_ipc_fd() -> Outcome {
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: `buf` is valid for `buf.len()` bytes of writes.
        let rc = unsafe { libc::syscall(libc::SYS_read, IPC_FD, buf.as_mut_ptr(), buf.len()) };
        if rc <= 0 {
            return Outcome::Ok {
                value_json: "\"alive\"".to_owned(),
            };
        }
    }
}

fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EFAULT => "EFAULT",
        libc::EEXIST => "EEXIST",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::ENOTTY => "ENOTTY",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ENETUNREACH => "ENETUNREACH",
        _ => return format!("errno {errno}"),
    };
    name.to_owned()
}

struct Probe<'a> {
    /// The attack as requested (with its `landlock-only:` prefix, if any).
    name: &'a str,
    landlock_only: bool,
}

impl Probe<'_> {
    /// Classifies the result of one raw syscall. Must be called right after it, before
    /// anything else can overwrite errno.
    fn judge(&self, syscall: &str, rc: c_long) -> Result<c_long, Outcome> {
        if rc != -1 {
            return Ok(rc);
        }
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let kind_and_message = match errno {
            libc::EPERM => (
                ErrorKind::SandboxViolation,
                format!("{}: {syscall} refused with EPERM", self.name),
            ),
            // Landlock's answer; only meaningful when Landlock is the only layer in force.
            libc::EACCES if self.landlock_only => (
                ErrorKind::SandboxViolation,
                format!("{}: {syscall} refused with EACCES (landlock)", self.name),
            ),
            _ => (
                ErrorKind::Internal,
                format!(
                    "{}: {syscall} failed with {} (not a sandbox refusal)",
                    self.name,
                    errno_name(errno)
                ),
            ),
        };
        Err(Outcome::Error(ExecError::new(
            kind_and_message.0,
            kind_and_message.1,
        )))
    }

    /// The attack's outcome from one syscall's return: refused, or escaped.
    fn verdict(&self, syscall: &str, rc: c_long) -> Outcome {
        match self.judge(syscall, rc) {
            Ok(_) => self.escaped(),
            Err(refused) => refused,
        }
    }

    fn escaped(&self) -> Outcome {
        Outcome::Ok {
            value_json: format!("\"ESCAPED: {}\"", self.name),
        }
    }

    /// Judges a syscall that returns a new fd; closes it if the attack succeeded.
    fn fd_attempt(&self, syscall: &str, rc: c_long) -> Outcome {
        match self.judge(syscall, rc) {
            Ok(fd) => {
                // SAFETY: `fd` was just returned to us by the kernel and is owned by nothing.
                unsafe { libc::close(fd as libc::c_int) };
                self.escaped()
            }
            Err(refused) => refused,
        }
    }

    fn open_etc_passwd(&self) -> Outcome {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the path is a NUL-terminated literal; open only reads it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_open,
                c"/etc/passwd".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        // aarch64 has no open(2); glibc's open() is openat(AT_FDCWD, ...) there.
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: the path is a NUL-terminated literal; openat only reads it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                c"/etc/passwd".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        self.fd_attempt("open", rc)
    }

    fn openat_etc_passwd(&self) -> Outcome {
        // SAFETY: the path is a NUL-terminated literal; openat only reads it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                c"/etc/passwd".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        self.fd_attempt("openat", rc)
    }

    fn connect_localhost(&self) -> Outcome {
        // SAFETY: socket takes only integers.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_socket,
                libc::AF_INET,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
            )
        };
        let fd = match self.judge("socket", rc) {
            Ok(fd) => fd,
            Err(refused) => return refused,
        };
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 9u16.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: `addr` is a valid sockaddr_in and the length matches it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_connect,
                fd,
                (&raw const addr).cast::<libc::sockaddr>(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        let outcome = self.verdict("connect", rc);
        // SAFETY: `fd` is the socket created above and owned by nothing else.
        unsafe { libc::close(fd as libc::c_int) };
        outcome
    }

    fn execve(&self) -> Outcome {
        let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        // SAFETY: path, argv and envp are NUL-terminated and outlive the call. On success
        // the process image is replaced (the test sees an exit without Done: an escape).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_execve,
                c"/bin/true".as_ptr(),
                argv.as_ptr(),
                envp.as_ptr(),
            )
        };
        self.verdict("execve", rc)
    }

    /// Judges a fork-like syscall; a child that comes into existence exits at once.
    fn child_attempt(&self, syscall: &str, rc: c_long) -> Outcome {
        if rc == 0 {
            // SAFETY: we are the new child; leave immediately without running any Rust code
            // of the parent's (no destructors, no Done message from two processes).
            unsafe { libc::syscall(libc::SYS_exit_group, 0) };
        }
        self.verdict(syscall, rc)
    }

    fn fork(&self) -> Outcome {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: fork takes no arguments; the child exits in child_attempt.
        let rc = unsafe { libc::syscall(libc::SYS_fork) };
        // aarch64 has no fork(2); a clone with only SIGCHLD is exactly fork.
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: no thread flags, no new stack: fork semantics; the child exits at once.
        let rc = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD, 0, 0, 0, 0) };
        self.child_attempt("fork", rc)
    }

    fn clone3(&self) -> Outcome {
        // struct clone_args (Linux 5.5+, 88 bytes): flags, pidfd, child_tid, parent_tid,
        // exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup.
        let mut args = [0u64; 11];
        args[4] = libc::SIGCHLD as u64;
        // SAFETY: `args` is a valid clone_args of the size given; fork semantics, and the
        // child exits at once in child_attempt.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                args.as_mut_ptr(),
                std::mem::size_of_val(&args),
            )
        };
        self.child_attempt("clone3", rc)
    }

    fn ptrace_parent(&self, parent: i32) -> Outcome {
        // SAFETY: PTRACE_ATTACH takes a pid only; on success we detach again below.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_ptrace,
                libc::PTRACE_ATTACH,
                parent,
                0usize,
                0usize,
            )
        };
        match self.judge("ptrace", rc) {
            Ok(_) => {
                // SAFETY: as above; undo the attach so the parent is not left stopped.
                unsafe {
                    libc::syscall(
                        libc::SYS_ptrace,
                        libc::PTRACE_DETACH,
                        parent,
                        0usize,
                        0usize,
                    )
                };
                self.escaped()
            }
            Err(refused) => refused,
        }
    }

    fn kill_parent(&self, parent: i32) -> Outcome {
        // SIGCONT: harmless to a running process, so even a successful escape does no damage.
        // SAFETY: kill takes only integers.
        let rc = unsafe { libc::syscall(libc::SYS_kill, parent, libc::SIGCONT) };
        self.verdict("kill", rc)
    }

    fn unshare(&self) -> Outcome {
        // SAFETY: unshare takes only flags.
        let rc = unsafe { libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER) };
        self.verdict("unshare", rc)
    }

    fn mount(&self) -> Outcome {
        // SAFETY: all strings are NUL-terminated literals; data is null.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mount,
                c"tmpfs".as_ptr(),
                c"/tmp".as_ptr(),
                c"tmpfs".as_ptr(),
                0 as libc::c_ulong,
                std::ptr::null::<libc::c_void>(),
            )
        };
        self.verdict("mount", rc)
    }

    fn io_uring_setup(&self) -> Outcome {
        // struct io_uring_params is 120 bytes; all-zero asks for defaults.
        let mut params = [0u8; 120];
        // SAFETY: `params` is a writable io_uring_params-sized buffer.
        let rc = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
        self.fd_attempt("io_uring_setup", rc)
    }

    fn bpf(&self) -> Outcome {
        // union bpf_attr for BPF_MAP_CREATE: map_type, key_size, value_size, max_entries.
        let mut attr = [0u32; 32];
        attr[0] = 2; // BPF_MAP_TYPE_ARRAY
        attr[1] = 4;
        attr[2] = 4;
        attr[3] = 1;
        // SAFETY: `attr` is a 128-byte bpf_attr; BPF_MAP_CREATE (0) only reads it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                0,
                attr.as_mut_ptr(),
                std::mem::size_of_val(&attr),
            )
        };
        self.fd_attempt("bpf", rc)
    }

    fn userfaultfd(&self) -> Outcome {
        // SAFETY: userfaultfd takes only flags.
        let rc = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) };
        self.fd_attempt("userfaultfd", rc)
    }

    fn keyctl(&self) -> Outcome {
        // KEYCTL_GET_KEYRING_ID (0) of KEY_SPEC_SESSION_KEYRING (-3), without creating it.
        // SAFETY: keyctl with these arguments takes only integers.
        let rc = unsafe { libc::syscall(libc::SYS_keyctl, 0, -3, 0) };
        self.verdict("keyctl", rc)
    }

    fn memfd_create(&self) -> Outcome {
        // SAFETY: the name is a NUL-terminated literal.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_memfd_create,
                c"airlock-probe".as_ptr(),
                libc::MFD_CLOEXEC,
            )
        };
        self.fd_attempt("memfd_create", rc)
    }

    fn mmap_exec(&self) -> Outcome {
        // SAFETY: a fresh anonymous mapping touches no existing memory.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mmap,
                std::ptr::null::<libc::c_void>(),
                4096usize,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0usize,
            )
        };
        match self.judge("mmap", rc) {
            Ok(addr) => {
                // SAFETY: unmaps exactly the mapping created above.
                unsafe { libc::syscall(libc::SYS_munmap, addr, 4096usize) };
                self.escaped()
            }
            Err(refused) => refused,
        }
    }

    fn mprotect_exec(&self) -> Outcome {
        // A writable mapping is allowed; making it executable afterwards must not be.
        // SAFETY: a fresh anonymous mapping touches no existing memory.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mmap,
                std::ptr::null::<libc::c_void>(),
                4096usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0usize,
            )
        };
        let addr = match self.judge("mmap", rc) {
            Ok(addr) => addr,
            Err(refused) => return refused,
        };
        // SAFETY: changes the protection of the private mapping created above only.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mprotect,
                addr,
                4096usize,
                libc::PROT_READ | libc::PROT_EXEC,
            )
        };
        let outcome = self.verdict("mprotect", rc);
        // SAFETY: unmaps exactly the mapping created above.
        unsafe { libc::syscall(libc::SYS_munmap, addr, 4096usize) };
        outcome
    }

    fn write_fd(&self, fd: libc::c_int) -> Outcome {
        let byte = b"x";
        // SAFETY: `byte` is valid for one byte of reads.
        let rc = unsafe { libc::syscall(libc::SYS_write, fd, byte.as_ptr(), 1usize) };
        self.verdict("write", rc)
    }

    fn read_stdin(&self) -> Outcome {
        let mut byte = [0u8; 1];
        // SAFETY: `byte` is valid for one byte of writes.
        let rc = unsafe { libc::syscall(libc::SYS_read, 0, byte.as_mut_ptr(), 1usize) };
        self.verdict("read", rc)
    }

    /// A syscall number with `__X32_SYSCALL_BIT` set: the x32 ABI shares x86_64's audit
    /// architecture, so only the filter's number match keeps it out.
    #[cfg(target_arch = "x86_64")]
    fn x32(&self, nr: c_long, args: [usize; 3]) -> Outcome {
        const X32_SYSCALL_BIT: c_long = 0x4000_0000;
        // SAFETY: the arguments are integers or NUL-terminated literals (x32_openat); if the
        // kernel ran the call it could only read them.
        let rc = unsafe { libc::syscall(nr | X32_SYSCALL_BIT, args[0], args[1], args[2]) };
        self.verdict("x32 syscall", rc)
    }

    /// aarch64 has no x32 ABI; the attack does not apply there.
    #[cfg(not(target_arch = "x86_64"))]
    fn x32(&self, _nr: c_long, _args: [usize; 3]) -> Outcome {
        internal_outcome(format!(
            "{}: there is no x32 ABI on this architecture",
            self.name
        ))
    }

    fn x32_openat(&self) -> Outcome {
        self.x32(
            libc::SYS_openat,
            [
                libc::AT_FDCWD as usize,
                c"/etc/passwd".as_ptr() as usize,
                libc::O_RDONLY as usize,
            ],
        )
    }

    fn ioctl_tiocsti(&self) -> Outcome {
        // Pushing a byte into a terminal's input queue; fd 0 is /dev/null (not a tty), so
        // even an allowed ioctl would fail with ENOTTY, which the judge reports as Internal.
        let byte = b"x";
        // SAFETY: TIOCSTI reads one byte from the pointer, which is valid.
        let rc = unsafe { libc::syscall(libc::SYS_ioctl, 0, libc::TIOCSTI, byte.as_ptr()) };
        self.verdict("ioctl(TIOCSTI)", rc)
    }

    fn process_vm_readv(&self, parent: i32) -> Outcome {
        let mut buf = [0u8; 8];
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // Any address: a refusal must come before the kernel looks at the other process.
        let remote = libc::iovec {
            iov_base: 0x1000 as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: `local` points at `buf`, valid for its length; the remote side is only
        // read by the kernel if the call were permitted.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_process_vm_readv,
                parent,
                &raw const local,
                1usize,
                &raw const remote,
                1usize,
                0usize,
            )
        };
        self.verdict("process_vm_readv", rc)
    }

    fn perf_event_open(&self) -> Outcome {
        // struct perf_event_attr: type (u32), size (u32), config (u64), ...; 128 bytes
        // covers PERF_ATTR_SIZE_VER7. PERF_TYPE_SOFTWARE / PERF_COUNT_SW_CPU_CLOCK.
        let mut attr = [0u64; 16];
        attr[0] = 1 | ((std::mem::size_of_val(&attr) as u64) << 32);
        // SAFETY: `attr` is a zeroed perf_event_attr of the declared size; the call only
        // reads it. pid 0 / cpu -1: this process on any cpu.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_mut_ptr(),
                0,
                -1,
                -1,
                0usize,
            )
        };
        self.fd_attempt("perf_event_open", rc)
    }

    fn personality(&self) -> Outcome {
        // ADDR_NO_RANDOMIZE: turning ASLR off for a later exec.
        // SAFETY: personality takes one integer.
        let rc = unsafe { libc::syscall(libc::SYS_personality, 0x0040000usize) };
        self.verdict("personality", rc)
    }

    /// The zygote's fork: a child of the supervisor, as only the zygote may make.
    fn clone_parent(&self) -> Outcome {
        // SAFETY: fork semantics (no new stack, no thread flags); the child exits at once.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_clone,
                libc::CLONE_PARENT | libc::SIGCHLD,
                0usize,
                0usize,
                0usize,
                0usize,
            )
        };
        self.child_attempt("clone(CLONE_PARENT)", rc)
    }

    /// `recvmsg` on the IPC socket, as the zygote receives descriptors (non-blocking, so an
    /// allowed call would come back at once with EAGAIN instead of waiting).
    fn recvmsg_ipc(&self) -> Outcome {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        // SAFETY: a zeroed msghdr pointing at one live byte, no control buffer.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        // SAFETY: `msg` points at live buffers.
        let rc =
            unsafe { libc::syscall(libc::SYS_recvmsg, IPC_FD, &raw mut msg, libc::MSG_DONTWAIT) };
        // EAGAIN: the call was allowed and found nothing; that is an escape all the same.
        if rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
            return self.escaped();
        }
        self.verdict("recvmsg", rc)
    }

    /// `dup3(0, 3, 0)`: replacing the IPC socket, as a forked worker does before its filter.
    fn dup3_onto_ipc(&self) -> Outcome {
        // SAFETY: plain descriptor numbers; on success fd 3 is stdin's copy (we then fail).
        let rc = unsafe { libc::syscall(libc::SYS_dup3, 0, IPC_FD, 0) };
        self.verdict("dup3", rc)
    }

    /// `prlimit64(0, RLIMIT_NOFILE, {4, 4}, NULL)`: even setting the same limit is refused.
    fn prlimit_own_nofile(&self) -> Outcome {
        let limit = libc::rlimit {
            rlim_cur: 4,
            rlim_max: 4,
        };
        // SAFETY: a valid rlimit for the kernel to read, no old-value pointer.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_prlimit64,
                0,
                libc::RLIMIT_NOFILE,
                &raw const limit,
                std::ptr::null_mut::<libc::rlimit>(),
            )
        };
        self.verdict("prlimit64", rc)
    }

    fn prctl_set_name(&self) -> Outcome {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string that outlives the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_prctl,
                libc::PR_SET_NAME,
                c"escaped".as_ptr(),
                0usize,
                0usize,
                0usize,
            )
        };
        self.verdict("prctl(PR_SET_NAME)", rc)
    }

    /// Adding a seccomp filter (an allow-all one): only the zygote's children may, once.
    fn seccomp_add_filter(&self) -> Outcome {
        // BPF_RET | BPF_K, SECCOMP_RET_ALLOW.
        let allow = [libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0x7fff_0000,
        }];
        let program = libc::sock_fprog {
            len: 1,
            filter: allow.as_ptr().cast_mut(),
        };
        // SAFETY: a valid one-instruction program that outlives the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &raw const program,
            )
        };
        self.verdict("seccomp", rc)
    }

    fn prctl(&self, option: libc::c_int, value: usize) -> Outcome {
        // SAFETY: these prctl options take integers only.
        let rc = unsafe { libc::syscall(libc::SYS_prctl, option, value, 0usize, 0usize, 0usize) };
        self.verdict("prctl", rc)
    }
}
