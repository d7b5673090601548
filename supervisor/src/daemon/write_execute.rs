//! The daemon refuses itself memory that is both writable and executable (`PR_SET_MDWE`), and
//! does not pass that on. systemd's `MemoryDenyWriteExecute=` would reach every child: tool
//! servers are often Node programs, whose V8 JIT needs such memory and aborts without it
//! (`SetPermissions`). Workers need no flag from here: their own seccomp filter refuses
//! `PROT_EXEC` in `mmap` and `mprotect` outright (worker/src/syscall_allowlist.rs).

/// What became of the daemon's own W^X.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteExecute {
    /// Refused to the daemon, not inherited by its children.
    Refused,
    /// The kernel cannot refuse it without its children inheriting the refusal (Linux before
    /// 6.6 has no `PR_MDWE_NO_INHERIT`): not set, so that tool servers run.
    KernelLacksNoInherit,
}

/// Sets `PR_SET_MDWE` (`PR_MDWE_REFUSE_EXEC_GAIN | PR_MDWE_NO_INHERIT`) on this process.
/// Once set it cannot be undone, so this is for `airlockd`'s `main`, not a library caller.
pub fn deny_write_execute() -> std::io::Result<WriteExecute> {
    let flags = libc::PR_MDWE_REFUSE_EXEC_GAIN | libc::PR_MDWE_NO_INHERIT;
    // SAFETY: prctl with integer arguments only; it changes this process's memory policy.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_MDWE,
            libc::c_ulong::from(flags),
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        return Ok(WriteExecute::Refused);
    }
    let error = std::io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::EINVAL) {
        return Ok(WriteExecute::KernelLacksNoInherit);
    }
    Err(error)
}
