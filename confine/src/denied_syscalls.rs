//! The seccomp policy of a confined server, as reviewed data: a server is a whole Node or
//! Python program, so the filter allows everything but the calls below, each with the reason
//! it is refused. They fail with `EPERM` (a program that probes, say, `perf_event_open` goes on
//! without it) rather than killing the server.
//!
//! `clone3` fails with `ENOSYS` instead: its flags are in memory, where seccomp cannot look, and
//! libc then falls back to `clone`, whose namespace flags the filter does see.

use seccompiler::{
    BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

#[cfg(target_arch = "x86_64")]
const TARGET_ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const TARGET_ARCH: TargetArch = TargetArch::aarch64;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the server seccomp policy is written for x86_64 and aarch64 only");

/// One refused syscall.
#[derive(Debug, Clone, Copy)]
pub struct Denied {
    pub nr: libc::c_long,
    pub name: &'static str,
    pub reason: &'static str,
}

const fn deny(nr: libc::c_long, name: &'static str, reason: &'static str) -> Denied {
    Denied { nr, name, reason }
}

/// Refused with `EPERM`, whatever the arguments.
pub const DENIED: &[Denied] = &[
    deny(
        libc::SYS_ptrace,
        "ptrace",
        "no reading or steering another process (the daemon, another server)",
    ),
    deny(
        libc::SYS_process_vm_readv,
        "process_vm_readv",
        "no reading another process's memory",
    ),
    deny(
        libc::SYS_process_vm_writev,
        "process_vm_writev",
        "no writing another process's memory",
    ),
    deny(
        libc::SYS_kcmp,
        "kcmp",
        "no probing another process's descriptors and memory",
    ),
    deny(
        libc::SYS_keyctl,
        "keyctl",
        "the kernel keyring holds `airlock secret set` keys, readable by the daemon's uid",
    ),
    deny(libc::SYS_add_key, "add_key", "no keyring at all"),
    deny(libc::SYS_request_key, "request_key", "no keyring at all"),
    deny(
        libc::SYS_bpf,
        "bpf",
        "no kernel programs (tracing the daemon, bypassing filters)",
    ),
    deny(
        libc::SYS_perf_event_open,
        "perf_event_open",
        "no observing other processes or the kernel",
    ),
    deny(
        libc::SYS_userfaultfd,
        "userfaultfd",
        "a tool for winning kernel races",
    ),
    deny(
        libc::SYS_io_uring_setup,
        "io_uring_setup",
        "a second way to make syscalls, outside this filter",
    ),
    deny(
        libc::SYS_io_uring_enter,
        "io_uring_enter",
        "see io_uring_setup",
    ),
    deny(
        libc::SYS_io_uring_register,
        "io_uring_register",
        "see io_uring_setup",
    ),
    deny(
        libc::SYS_mount,
        "mount",
        "no changing what the server sees of the filesystem",
    ),
    deny(
        libc::SYS_umount2,
        "umount2",
        "no unmounting the server's /proc to see the host's",
    ),
    deny(libc::SYS_pivot_root, "pivot_root", "no changing the root"),
    deny(libc::SYS_chroot, "chroot", "no changing the root"),
    deny(libc::SYS_open_tree, "open_tree", "the new mount API"),
    deny(libc::SYS_move_mount, "move_mount", "the new mount API"),
    deny(libc::SYS_fsopen, "fsopen", "the new mount API"),
    deny(libc::SYS_fsconfig, "fsconfig", "the new mount API"),
    deny(libc::SYS_fsmount, "fsmount", "the new mount API"),
    deny(libc::SYS_fspick, "fspick", "the new mount API"),
    deny(
        libc::SYS_mount_setattr,
        "mount_setattr",
        "the new mount API",
    ),
    deny(
        libc::SYS_setns,
        "setns",
        "no joining another process's namespaces",
    ),
    deny(
        libc::SYS_unshare,
        "unshare",
        "no new namespaces: a new user namespace gives capabilities back",
    ),
    deny(
        libc::SYS_open_by_handle_at,
        "open_by_handle_at",
        "opens files by handle, around path checks",
    ),
    deny(
        libc::SYS_name_to_handle_at,
        "name_to_handle_at",
        "see open_by_handle_at",
    ),
    deny(libc::SYS_init_module, "init_module", "no kernel modules"),
    deny(libc::SYS_finit_module, "finit_module", "no kernel modules"),
    deny(
        libc::SYS_delete_module,
        "delete_module",
        "no kernel modules",
    ),
    deny(libc::SYS_kexec_load, "kexec_load", "no new kernel"),
    deny(
        libc::SYS_kexec_file_load,
        "kexec_file_load",
        "no new kernel",
    ),
    deny(libc::SYS_reboot, "reboot", "no rebooting the host"),
    deny(libc::SYS_swapon, "swapon", "no swap changes"),
    deny(libc::SYS_swapoff, "swapoff", "no swap changes"),
    deny(
        libc::SYS_syslog,
        "syslog",
        "the kernel log may hold other processes' secrets",
    ),
    deny(libc::SYS_acct, "acct", "no process accounting"),
    deny(libc::SYS_quotactl, "quotactl", "no quota changes"),
];

/// `clone` flags that make a new namespace: refused (`EPERM`) like `unshare`.
pub const NAMESPACE_FLAGS: &[(u64, &str)] = &[
    (libc::CLONE_NEWUSER as u64, "CLONE_NEWUSER"),
    (libc::CLONE_NEWNS as u64, "CLONE_NEWNS"),
    (libc::CLONE_NEWPID as u64, "CLONE_NEWPID"),
    (libc::CLONE_NEWNET as u64, "CLONE_NEWNET"),
    (libc::CLONE_NEWIPC as u64, "CLONE_NEWIPC"),
    (libc::CLONE_NEWUTS as u64, "CLONE_NEWUTS"),
    (libc::CLONE_NEWCGROUP as u64, "CLONE_NEWCGROUP"),
];

/// The filter answering [`DENIED`] and namespace-making `clone`s with `EPERM`.
pub fn eperm_filter() -> Result<BpfProgram, BackendError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|d| (d.nr, Vec::new())).collect();
    let clone_flags = NAMESPACE_FLAGS
        .iter()
        .map(|(flag, _)| {
            SeccompRule::new(vec![SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(*flag),
                *flag,
            )?])
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_flags);
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TARGET_ARCH,
    )?
    .try_into()
}

/// The filter answering `clone3` with `ENOSYS`, so libc falls back to `clone`.
pub fn clone3_filter() -> Result<BpfProgram, BackendError> {
    let rules = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        TARGET_ARCH,
    )?
    .try_into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_has_a_reason_and_no_syscall_is_listed_twice() {
        let mut seen = std::collections::BTreeSet::new();
        for d in DENIED {
            assert!(!d.reason.is_empty() && !d.name.is_empty());
            assert!(seen.insert(d.nr), "{} listed twice", d.name);
        }
    }

    #[test]
    fn the_reaches_of_the_report_are_denied() {
        // The calls a compromised server used to take the daemon's secrets.
        for nr in [
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_mount,
            libc::SYS_init_module,
            libc::SYS_finit_module,
        ] {
            assert!(DENIED.iter().any(|d| d.nr == nr), "{nr} is not denied");
        }
    }

    #[test]
    fn filters_compile_for_the_host_arch() {
        assert!(!eperm_filter().unwrap().is_empty());
        assert!(!clone3_filter().unwrap().is_empty());
    }
}
