//! The zygote (`airlock-worker --zygote`) under a minimal hand-written supervisor: each
//! forked worker is a fresh process, as locked down as an exec'd one (same filters plus the
//! zygote's, same limits, only fds 0-3), the daemon's child, with its own socket; the
//! zygote's refusals and its end.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]
#![cfg(feature = "engine")]

mod common;

use airlock_proto::{ForkReply, ForkRequest, Outcome, WorkerMessage, encode};
use common::{Zygote, assert_no_capabilities, proc_status_field, start_message};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap()
        .trim()
        .to_owned()
}

fn limit(pid: u32, name: &str) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no {name} in {limits}"));
    let mut fields = line[name.len()..].split_whitespace();
    (
        fields.next().unwrap().to_owned(),
        fields.next().unwrap().to_owned(),
    )
}

fn open_fds(pid: u32) -> Vec<i32> {
    let mut fds: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect();
    fds.sort_unstable();
    fds
}

fn run(w: &mut common::Worker, code: &str) -> (Outcome, airlock_proto::WorkerStats) {
    w.send(&start_message(code));
    match w.recv() {
        Ok(WorkerMessage::Done { outcome, stats }) => (outcome, stats),
        other => panic!("expected Done, got {other:?}"),
    }
}

#[test]
fn a_forked_worker_is_locked_down_like_an_execd_one() {
    let mut zygote = Zygote::start();
    assert!(!zygote.lockdown.forked);
    assert_eq!(comm(zygote.pid()), "airlock-zygote");
    let mut w = zygote.fork(512 << 20, 7);
    let report = w.expect_ready();
    assert!(report.forked);
    assert_eq!(report.landlock_abi, zygote.lockdown.landlock_abi);
    let pid = w.pid();
    // CLONE_PARENT: the worker is our child, not the zygote's.
    assert_eq!(
        proc_status_field(pid, "PPid"),
        std::process::id().to_string()
    );
    assert_eq!(comm(pid), "airlock-worker");
    assert_eq!(proc_status_field(pid, "NoNewPrivs"), "1");
    assert_eq!(proc_status_field(pid, "Seccomp"), "2");
    // Dropped by the zygote before it forked (as root, every one of them).
    assert_no_capabilities(zygote.pid());
    assert_no_capabilities(pid);
    // The errno filter and the zygote's kill filter, inherited, and the worker's own.
    assert_eq!(proc_status_field(pid, "Seccomp_filters"), "3");
    assert_eq!(open_fds(pid), vec![0, 1, 2, 3]);
    assert_eq!(
        limit(pid, "Max address space"),
        ("536870912".into(), "536870912".into())
    );
    assert_eq!(limit(pid, "Max cpu time"), ("7".into(), "8".into()));
    assert_eq!(limit(pid, "Max open files"), ("4".into(), "4".into()));
    assert_eq!(limit(pid, "Max processes"), ("0".into(), "0".into()));
    assert_eq!(limit(pid, "Max core file size"), ("0".into(), "0".into()));
    // The zygote keeps its own: no per-execution limits, room for one socket.
    assert_eq!(
        limit(zygote.pid(), "Max open files"),
        ("5".into(), "5".into())
    );
    assert_eq!(open_fds(zygote.pid()), vec![0, 1, 2, 3]);

    let (outcome, stats) = run(&mut w, "[1, 2, 3].map((x) => x * 2)");
    assert_eq!(
        outcome,
        Outcome::Ok {
            value_json: "[2,4,6]".into()
        }
    );
    assert!(stats.peak_rss_bytes > 1 << 20, "{stats:?}");
    // A forked worker exits after Done without waiting for the hang-up.
    let status = w.wait();
    assert_eq!(status.code(), Some(0));
    assert_eq!(zygote.stop().code(), Some(0));
}

#[test]
fn each_fork_is_a_fresh_process() {
    let mut zygote = Zygote::start();
    let mut first = zygote.fork(1 << 30, 10);
    first.expect_ready();
    let (outcome, _) = run(&mut first, "globalThis.leak = 42; Math.random()");
    let Outcome::Ok { value_json: r1 } = outcome else {
        panic!("{outcome:?}")
    };
    let mut second = zygote.fork(1 << 30, 10);
    second.expect_ready();
    assert_ne!(first.pid(), second.pid());
    let (outcome, _) = run(&mut second, "[typeof leak, Math.random()]");
    // Nothing of the first execution is in the second; the same seed gives the same value.
    assert_eq!(
        outcome,
        Outcome::Ok {
            value_json: format!("[\"undefined\",{r1}]")
        }
    );
}

#[test]
fn a_worker_socket_is_held_by_the_worker_alone() {
    let mut zygote = Zygote::start();
    let mut w = zygote.fork(1 << 30, 10);
    w.expect_ready();
    // SAFETY: kill of our own child.
    unsafe { libc::kill(w.pid() as i32, libc::SIGKILL) };
    assert_eq!(w.wait().signal(), Some(libc::SIGKILL));
    // The zygote closed its copy after the fork: the socket ends with the worker.
    assert!(matches!(
        w.recv(),
        Err(airlock_proto::frame::blocking::IoFrameError::Closed)
    ));
    // And the zygote goes on forking.
    zygote.fork(1 << 30, 10).expect_ready();
}

#[test]
fn a_request_without_a_socket_is_refused_and_the_zygote_serves_on() {
    let mut zygote = Zygote::start();
    let frame = encode(&ForkRequest {
        memory_ceiling_bytes: 1 << 30,
        cpu_seconds: 10,
        warm_up: false,
    })
    .unwrap();
    zygote.send_raw(&frame, None);
    match zygote.receive_reply() {
        Some(ForkReply::Refused { step, errno }) => {
            assert!(step.contains("socket"), "{step}");
            assert_eq!(errno, libc::EBADF);
        }
        other => panic!("expected Refused, got {other:?}"),
    }
    zygote.fork(1 << 30, 10).expect_ready();
}

#[test]
fn a_malformed_request_ends_the_zygote() {
    let mut zygote = Zygote::start();
    let (_ours, theirs) = UnixStream::pair().unwrap();
    use std::os::fd::AsRawFd;
    zygote.send_raw(b"\x02\x00\x00\x00\xff\xff", Some(theirs.as_raw_fd()));
    assert_eq!(zygote.receive_packet(), None);
    assert_eq!(zygote.wait().code(), Some(71));
}

#[test]
fn the_zygote_exits_when_the_daemon_hangs_up() {
    let zygote = Zygote::start();
    assert_eq!(zygote.stop().code(), Some(0));
}
