//! The worker's lockdown, observed from outside: these tests act as a minimal supervisor and
//! exec the real `airlock-worker` binary. They do not depend on the engine: everything they
//! check happens before a program is started.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

mod common;

use airlock_proto::SupervisorMessage;
use airlock_proto::frame::blocking::IoFrameError;
use common::{
    Fd3, Worker, assert_no_capabilities, is_root, proc_status_field, spawn, spawn_capturing_stderr,
    standard_args,
};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;

const USAGE: i32 = 64;
const LOCKDOWN_FAILED: i32 = 70;

#[test]
fn sends_ready_with_protocol_version_and_landlock_abi() {
    let mut w = spawn(&standard_args(), Fd3::Socket);
    let report = w.expect_ready();
    assert!(report.landlock_abi >= 1, "{report:?}");
    assert!(report.seccomp_allowed_syscalls > 0, "{report:?}");
    w.send(&SupervisorMessage::Cancel);
    assert_eq!(w.wait().code(), Some(0));
}

/// Under systemd's `LockPersonality=yes` even the read-only personality query fails with
/// EPERM; the worker must read `/proc/self/personality` instead of refusing to run.
#[test]
fn runs_when_the_personality_is_locked() {
    let mut w = spawn(&standard_args(), Fd3::SocketPersonalityLocked);
    w.expect_ready();
    w.send(&SupervisorMessage::Cancel);
    assert_eq!(w.wait().code(), Some(0));
}

/// While the worker waits for Start (after Ready, before any untrusted byte), the kernel
/// shows both seccomp filters and no_new_privs, the rlimits are in force, and only fds 0-3
/// are open (a descriptor leaked on fd 7 was closed).
#[test]
fn ready_worker_is_filtered_and_holds_only_its_four_fds() {
    let mut w = spawn(&standard_args(), Fd3::SocketAndLeak);
    w.expect_ready();
    let pid = w.pid();

    assert_eq!(
        proc_status_field(pid, "Seccomp"),
        "2",
        "seccomp filter mode"
    );
    assert_eq!(
        proc_status_field(pid, "Seccomp_filters"),
        "2",
        "errno + kill filter"
    );
    assert_eq!(proc_status_field(pid, "NoNewPrivs"), "1");
    // As root (CI), this is the worker of a root daemon: it must have dropped them all.
    assert_no_capabilities(pid);

    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    for (name, soft, hard) in [
        ("Max cpu time", "10", "11"),
        ("Max file size", "0", "0"),
        ("Max processes", "0", "0"),
        ("Max open files", "4", "4"),
        ("Max core file size", "0", "0"),
        ("Max address space", "1073741824", "1073741824"),
    ] {
        let line = limits
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} in {limits}"));
        let values: Vec<&str> = line[name.len()..].split_whitespace().collect();
        assert_eq!(&values[..2], &[soft, hard], "{name}");
    }

    let fd_dir = format!("/proc/{pid}/fd");
    if is_root() {
        let mut fds: Vec<(u32, String)> = std::fs::read_dir(&fd_dir)
            .expect("read fd dir")
            .map(|e| {
                let e = e.expect("fd entry");
                let n = e
                    .file_name()
                    .to_str()
                    .expect("utf-8")
                    .parse()
                    .expect("number");
                let target = std::fs::read_link(e.path()).expect("readlink");
                (n, target.to_string_lossy().into_owned())
            })
            .collect();
        fds.sort();
        let numbers: Vec<u32> = fds.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, [0, 1, 2, 3], "{fds:?}");
        for (n, target) in &fds[..3] {
            assert_eq!(target, "/dev/null", "fd {n}");
        }
        assert!(fds[3].1.starts_with("socket:["), "{fds:?}");
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).expect("cwd");
        assert_eq!(cwd, std::path::Path::new("/"));
    } else {
        // Non-dumpable: another process of the same user may not look inside.
        let err = std::fs::read_dir(&fd_dir).expect_err("fd dir must be private");
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    }

    w.send(&SupervisorMessage::Cancel);
    assert_eq!(w.wait().code(), Some(0));
}

#[test]
fn bad_command_lines_exit_with_usage() {
    let with = |extra: &[&str]| {
        let mut args = standard_args();
        args.extend(extra.iter().map(OsString::from));
        args
    };
    let cases: Vec<(&str, Vec<OsString>)> = vec![
        ("no arguments", vec![]),
        ("unknown argument", with(&["--verbose"])),
        ("repeated argument", with(&["--cpu-seconds", "5"])),
        ("missing value", with(&["--cpu-seconds"])),
        (
            "not a number",
            vec![
                "--parent-pid",
                "x",
                "--memory-ceiling",
                "1",
                "--cpu-seconds",
                "1",
            ]
            .into_iter()
            .map(OsString::from)
            .collect(),
        ),
        ("missing argument", standard_args()[..4].to_vec()),
        // The test-only flag must not exist in a release worker.
        #[cfg(not(feature = "escape-probe"))]
        (
            "probe flag in a release build",
            with(&["--probe-skip-seccomp"]),
        ),
    ];
    for (what, args) in cases {
        let mut w = spawn_capturing_stderr(&args, Fd3::Socket);
        let status = w.wait();
        let stderr = w.stderr();
        assert_eq!(
            status.code(),
            Some(USAGE),
            "{what}: {status:?}, stderr: {stderr}"
        );
        assert!(matches!(w.recv(), Err(IoFrameError::Closed)), "{what}");
    }
}

/// Every refusal: exit 70, a reason on stderr, and no Ready on the socket.
fn assert_lockdown_refused(mut w: Worker, expected_in_stderr: &str) {
    let status = w.wait();
    let stderr = w.stderr();
    assert_eq!(
        status.code(),
        Some(LOCKDOWN_FAILED),
        "{status:?}, stderr: {stderr}"
    );
    assert!(
        stderr.contains(expected_in_stderr),
        "stderr {stderr:?} should mention {expected_in_stderr:?}"
    );
    assert!(
        matches!(w.recv(), Err(IoFrameError::Closed)),
        "no message may be sent"
    );
}

#[test]
fn missing_ipc_fd_is_refused_without_ready() {
    // The socket sits on fd 4: the worker must neither find nor use it.
    let w = spawn_capturing_stderr(&standard_args(), Fd3::SocketOnFd4);
    assert_lockdown_refused(w, "fd 3 (the ipc socket) is not open");
}

#[test]
fn ipc_fd_that_is_not_a_socket_is_refused() {
    let w = spawn_capturing_stderr(&standard_args(), Fd3::DevNull);
    assert_lockdown_refused(w, "fd 3 is not a unix socket");
}

/// A closed stdin must not let a later descriptor take its number. (Rust's runtime already
/// reopens closed fds 0-2 on /dev/null before `main`; the worker checks again.)
#[test]
fn closed_stdin_ends_up_on_dev_null() {
    let mut w = spawn(&standard_args(), Fd3::SocketStdinClosed);
    w.expect_ready();
    if is_root() {
        let target = std::fs::read_link(format!("/proc/{}/fd/0", w.pid())).expect("fd 0");
        assert_eq!(target, std::path::Path::new("/dev/null"));
    }
    w.send(&SupervisorMessage::Cancel);
    assert_eq!(w.wait().code(), Some(0));
}

#[test]
fn wrong_parent_pid_is_refused() {
    // Stands in for "the supervisor died before the worker armed PDEATHSIG".
    let mut args = standard_args();
    args[1] = OsString::from("1");
    let w = spawn_capturing_stderr(&args, Fd3::Socket);
    assert_lockdown_refused(w, "the parent process is gone");
}

#[test]
fn cancel_before_start_exits_cleanly() {
    let mut w = spawn(&standard_args(), Fd3::Socket);
    w.expect_ready();
    w.send(&SupervisorMessage::Cancel);
    let status = w.wait();
    assert_eq!(
        status.code(),
        Some(0),
        "{status:?} (signal {:?})",
        status.signal()
    );
}

#[test]
fn supervisor_hang_up_before_start_exits_cleanly() {
    let mut w = spawn(&standard_args(), Fd3::Socket);
    w.expect_ready();
    w.sock.shutdown(std::net::Shutdown::Both).expect("shutdown");
    let status = w.wait();
    assert_eq!(
        status.code(),
        Some(0),
        "{status:?} (signal {:?})",
        status.signal()
    );
}
