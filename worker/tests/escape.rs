//! The escape corpus, run directly against a probe worker (`--features escape-probe`): every
//! attack runs in its own freshly locked-down worker and must end in `SIGSYS` (seccomp's
//! kill) or a `SandboxViolation` (a refusal with `EPERM`, or Landlock's `EACCES` in the
//! Landlock-only runs). Any other ending — an escape, an unrelated errno, a crash — fails.
//!
//! Run with `cargo test -p airlock-worker --no-default-features --features escape-probe
//! --test escape -- --nocapture` to see which layer stopped each attack.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]
#![cfg(feature = "escape-probe")]

mod common;

use airlock_proto::frame::blocking::IoFrameError;
use airlock_proto::{ErrorKind, Outcome, SupervisorMessage, WorkerMessage};
use common::{Fd3, Worker, Zygote, proc_status_field, spawn, standard_args, start_message};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;

/// The attacks the design's escape list requires; the probe may know more.
const REQUIRED: &[&str] = &[
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
    "write-stderr",
    "write-other-fd",
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
    "clone-parent",
    "recvmsg-ipc",
    "dup3-onto-ipc",
    "prlimit-own-nofile",
    "prctl-set-pdeathsig",
    "prctl-set-name",
    "seccomp-add-filter",
];

/// How one attack ended.
#[derive(Debug)]
enum Ending {
    /// Killed by seccomp.
    Sigsys,
    /// Done with a SandboxViolation (the message names the errno).
    Refused(String),
    /// Anything else, described.
    Other(String),
}

fn probe_worker(skip_seccomp: bool) -> Worker {
    let mut args = standard_args();
    if skip_seccomp {
        args.push(OsString::from("--probe-skip-seccomp"));
    }
    let mut w = spawn(&args, Fd3::Socket);
    w.expect_ready();
    w
}

fn attempt(code: &str, skip_seccomp: bool) -> Ending {
    ending(probe_worker(skip_seccomp), code)
}

/// How `code` ends in `w`, a worker that has sent `Ready`.
fn ending(mut w: Worker, code: &str) -> Ending {
    w.send(&start_message(code));
    let reply = w.recv();
    let status = w.wait();
    match reply {
        Err(IoFrameError::Closed) if status.signal() == Some(libc::SIGSYS) => Ending::Sigsys,
        Ok(WorkerMessage::Done {
            outcome: Outcome::Error(e),
            ..
        }) if e.kind == ErrorKind::SandboxViolation && status.code() == Some(0) => {
            Ending::Refused(e.message)
        }
        other => Ending::Other(format!("reply {other:?}, worker {status:?}")),
    }
}

/// Runs one probe and returns its Done outcome (for the helper attacks).
fn done_outcome(code: &str, skip_seccomp: bool) -> Outcome {
    let mut w = probe_worker(skip_seccomp);
    w.send(&start_message(code));
    let reply = w.recv();
    let status = w.wait();
    match reply {
        Ok(WorkerMessage::Done { outcome, .. }) if status.code() == Some(0) => outcome,
        other => panic!("{code}: reply {other:?}, worker {status:?}"),
    }
}

/// The probe's own list, from its answer to an unknown attack, so this test cannot drift
/// from `escape_probe::ATTACKS`.
fn probe_attacks() -> Vec<String> {
    let Outcome::Error(e) = done_outcome("no-such-attack", false) else {
        panic!("an unknown attack must be an error");
    };
    assert_eq!(e.kind, ErrorKind::Internal);
    let list = e
        .message
        .split_once("valid attacks: ")
        .and_then(|(_, rest)| rest.split_once(" (each"))
        .map(|(list, _)| list)
        .unwrap_or_else(|| panic!("no attack list in {:?}", e.message));
    list.split(", ").map(str::to_owned).collect()
}

#[test]
fn probe_worker_is_alive() {
    let outcome = done_outcome("noop", false);
    assert_eq!(
        outcome,
        Outcome::Ok {
            value_json: "\"alive\"".to_owned()
        }
    );
}

#[test]
fn every_attack_is_stopped() {
    every_attack_is_stopped_in(|attack| attempt(attack, false));
}

/// The same corpus in workers forked by a zygote: each attack in its own fork, which must be
/// as confined as an exec'd worker (the zygote's extra syscalls — fork, prctl, dup3,
/// prlimit64, seccomp, recvmsg — are covered by the worker's own filter on top).
#[test]
fn every_attack_is_stopped_in_a_forked_worker() {
    let mut zygote = Zygote::start();
    every_attack_is_stopped_in(|attack| {
        let mut w = zygote.fork(1 << 30, 10);
        assert!(w.expect_ready().forked);
        ending(w, attack)
    });
    // The zygote itself survived every attack of its children.
    assert_eq!(zygote.stop().code(), Some(0));
}

fn every_attack_is_stopped_in(mut attempt: impl FnMut(&str) -> Ending) {
    let attacks = probe_attacks();
    for required in REQUIRED {
        assert!(
            attacks.iter().any(|a| a == required),
            "probe lacks {required}"
        );
    }

    let mut failures = Vec::new();
    for attack in attacks
        .iter()
        .filter(|a| !matches!(a.as_str(), "noop" | "sleep"))
    {
        let ending = attempt(attack);
        eprintln!("{attack:>20}: {ending:?}");
        match ending {
            Ending::Sigsys => {}
            // With seccomp in force, its errno filter is the only thing that may answer.
            Ending::Refused(m) if m.contains("EPERM") => {}
            Ending::Refused(m) => {
                failures.push(format!("{attack}: refused, but not by seccomp: {m}"))
            }
            Ending::Other(what) => failures.push(format!("{attack}: {what}")),
        }
    }
    assert!(failures.is_empty(), "not stopped:\n{}", failures.join("\n"));
}

/// Landlock on its own (seccomp skipped by the test-only flag) refuses the filesystem,
/// network and exec attempts with EACCES, and signals to the supervisor with EPERM
/// (signal scoping).
#[test]
fn landlock_alone_refuses_files_network_exec_and_signals() {
    let mut failures = Vec::new();
    for (attack, errno) in [
        ("open-etc-passwd", "EACCES"),
        ("openat-etc-passwd", "EACCES"),
        ("connect-localhost", "EACCES"),
        ("execve", "EACCES"),
        ("kill-parent", "EPERM"),
    ] {
        let code = format!("landlock-only:{attack}");
        let ending = attempt(&code, true);
        eprintln!("{code:>36}: {ending:?}");
        match ending {
            Ending::Refused(m) if m.contains(errno) => {}
            Ending::Refused(m) => failures.push(format!("{code}: expected {errno}, got {m}")),
            Ending::Sigsys => failures.push(format!("{code}: killed by SIGSYS without seccomp")),
            Ending::Other(what) => failures.push(format!("{code}: {what}")),
        }
    }
    assert!(failures.is_empty(), "not refused:\n{}", failures.join("\n"));
}

#[test]
fn landlock_only_attacks_need_the_flag_and_vice_versa() {
    for (code, skip) in [
        ("landlock-only:openat-etc-passwd", false),
        ("openat-etc-passwd", true),
    ] {
        match done_outcome(code, skip) {
            Outcome::Error(e) if e.kind == ErrorKind::Internal => {}
            other => panic!("{code} (skip seccomp: {skip}): {other:?}"),
        }
    }
}

/// A probe blocked in `read` on fd 3 after Start is still filtered, then finishes when the
/// supervisor closes its side.
#[test]
fn running_probe_is_filtered() {
    let mut w = probe_worker(false);
    w.send(&start_message("sleep"));
    // Give it a moment to be inside the probe's read loop.
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(proc_status_field(w.pid(), "Seccomp"), "2");
    assert_eq!(proc_status_field(w.pid(), "NoNewPrivs"), "1");
    w.send(&SupervisorMessage::Cancel);
    w.sock
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    match w.recv() {
        Ok(WorkerMessage::Done {
            outcome: Outcome::Ok { value_json },
            stats,
        }) => {
            assert_eq!(value_json, "\"alive\"");
            let _ = stats;
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(w.wait().code(), Some(0));
}
