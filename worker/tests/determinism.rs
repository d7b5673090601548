//! The program's clock and randomness in the real, locked-down worker: they come from the
//! supervisor's `Start` and `ToolResult`s, need no system call the seccomp filter refuses
//! (no `getrandom`, no clock read), and two workers given the same inputs answer alike, byte
//! for byte.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]
#![cfg(feature = "engine")]

mod common;

use airlock_proto::{
    Determinism, Language, Limits, Outcome, StartExecution, SupervisorMessage, WorkerMessage,
};
use common::{Fd3, spawn, standard_args};
use std::os::unix::process::ExitStatusExt;

const CLOCK_MS: u64 = 1_000_000_000_000;

/// The limits every program here runs with: ample for a few lines.
const LIMITS: Limits = Limits {
    timeout_ms: 10_000,
    memory_bytes: 64 << 20,
    stack_bytes: 1 << 20,
    max_tool_calls: 1,
    max_output_bytes: 1 << 16,
};

const PROGRAM: &str = r#"
const before = [Date.now(), Date(), new Date().toString(), performance.now(), Math.random(),
  crypto.randomUUID(), Array.from(crypto.getRandomValues(new Uint32Array(4)))];
let x = 0;
for (let i = 0; i < 200000; i++) x += i;
const still = Date.now();
const answer = await tools.clock.tick({});
({ before, still, answer, after: [Date.now(), performance.now(), Math.random()] })
"#;

/// Runs [`PROGRAM`] in a fresh worker and returns everything it sent, in order.
fn run(seed: [u8; 32]) -> Vec<WorkerMessage> {
    let mut w = spawn(&standard_args(), Fd3::Socket);
    w.expect_ready();
    w.send(&SupervisorMessage::Start(StartExecution {
        execution_id: "determinism".to_owned(),
        language: Language::JavaScript,
        code: PROGRAM.to_owned(),
        limits: LIMITS,
        determinism: Determinism {
            clock_ms: CLOCK_MS,
            seed,
        },
        report_idle: false,
    }));
    let mut seen = Vec::new();
    loop {
        let message = w.recv().unwrap_or_else(|e| {
            let status = w.wait();
            panic!(
                "worker stopped answering ({e}): {status:?}, signal {:?}",
                status.signal()
            )
        });
        match &message {
            WorkerMessage::ToolReferences(_) => w.send(&SupervisorMessage::Proceed),
            WorkerMessage::ToolCall { id, .. } => w.send(&SupervisorMessage::ToolResult {
                id: *id,
                result: Ok("\"tick\"".to_owned()),
                clock_ms: CLOCK_MS + 1_500,
            }),
            _ => {}
        }
        let done = matches!(message, WorkerMessage::Done { .. });
        seen.push(message);
        if done {
            break;
        }
    }
    let status = w.wait();
    assert_eq!(status.code(), Some(0), "{status:?}");
    seen
}

fn value(messages: &[WorkerMessage]) -> &str {
    match messages.last() {
        Some(WorkerMessage::Done {
            outcome: Outcome::Ok { value_json },
            ..
        }) => value_json,
        other => panic!("expected a value, got {other:?}"),
    }
}

#[test]
fn locked_down_workers_run_on_the_supervisors_clock_and_seed() {
    let first = run([3; 32]);
    let again = run([3; 32]);
    let other_seed = run([4; 32]);

    let v = value(&first);
    assert!(
        v.starts_with(&format!("{{\"before\":[{CLOCK_MS},")),
        "the clock starts at the supervisor's: {v}"
    );
    assert!(
        v.contains(&format!(
            "\"still\":{CLOCK_MS},\"answer\":\"tick\",\"after\":[{},1500,",
            CLOCK_MS + 1_500
        )),
        "the clock moves with the answer, and only then: {v}"
    );
    // Every message, not only the value, is the same (but the stats: they are timings).
    let without_stats = |messages: &[WorkerMessage]| -> Vec<String> {
        messages
            .iter()
            .map(|m| match m {
                WorkerMessage::Done { outcome, .. } => format!("{outcome:?}"),
                other => format!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(without_stats(&first), without_stats(&again));
    assert_ne!(value(&first), value(&other_seed));
}

/// A time zone file (TZif version 1) for a fixed offset of +09:00 named JST: one type, no
/// transitions.
fn plus_nine_zone() -> Vec<u8> {
    let mut tzif = b"TZif".to_vec();
    tzif.push(0); // version 1
    tzif.extend_from_slice(&[0; 15]);
    // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
    for count in [0u32, 0, 0, 0, 1, 4] {
        tzif.extend_from_slice(&count.to_be_bytes());
    }
    tzif.extend_from_slice(&(9 * 3600i32).to_be_bytes()); // utoff
    tzif.extend_from_slice(&[0, 0]); // isdst, desigidx
    tzif.extend_from_slice(b"JST\0");
    tzif
}

/// The program's local time is UTC whatever the host's zone: a worker started where
/// /etc/localtime says +09:00 (a mount namespace with that file bound over it) still says
/// midnight for the epoch, so a session replays the same on any host. Root only (a mount
/// namespace); skipped, with a message, elsewhere or where there is no /etc/localtime.
#[test]
fn local_time_is_utc_whatever_the_hosts_zone() {
    if !common::is_root() {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_ROOT").is_none(),
            "AIRLOCK_REQUIRE_ROOT is set but the tests do not run as root"
        );
        eprintln!(
            "SKIPPED local_time_is_utc_whatever_the_hosts_zone: needs root for a mount namespace"
        );
        return;
    }
    if !std::path::Path::new("/etc/localtime").exists() {
        eprintln!(
            "SKIPPED local_time_is_utc_whatever_the_hosts_zone: no /etc/localtime to stand in for"
        );
        return;
    }
    let zone = std::env::temp_dir().join(format!("airlock-zone-{}", std::process::id()));
    std::fs::write(&zone, plus_nine_zone()).unwrap();
    let source = std::ffi::CString::new(zone.as_os_str().as_encoded_bytes()).unwrap();
    let target = c"/etc/localtime";
    let mut w = common::spawn_with(
        &standard_args(),
        Fd3::Socket,
        std::process::Stdio::null(),
        move || {
            // SAFETY: raw system calls on strings made before the fork; nothing allocated.
            unsafe {
                if libc::unshare(libc::CLONE_NEWNS) != 0
                    || libc::mount(
                        std::ptr::null(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) != 0
                    || libc::mount(
                        source.as_ptr(),
                        target.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        },
    );
    w.expect_ready();
    w.send(&SupervisorMessage::Start(StartExecution {
        execution_id: "zone".to_owned(),
        language: Language::JavaScript,
        code: "const d = new Date(0); [d.getHours(), d.getTimezoneOffset(), d.toString()]"
            .to_owned(),
        limits: LIMITS,
        determinism: Determinism {
            clock_ms: CLOCK_MS,
            seed: [0; 32],
        },
        report_idle: false,
    }));
    let mut seen = Vec::new();
    loop {
        let message = w.recv().expect("the worker answers");
        if let WorkerMessage::ToolReferences(_) = message {
            w.send(&SupervisorMessage::Proceed);
        }
        let done = matches!(message, WorkerMessage::Done { .. });
        seen.push(message);
        if done {
            break;
        }
    }
    let _ = std::fs::remove_file(&zone);
    let v = value(&seen);
    assert!(v.starts_with("[0,0,\"Thu Jan 01 1970 00:00:00 GMT"), "{v}");
}
