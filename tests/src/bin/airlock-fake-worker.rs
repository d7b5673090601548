//! A fake `airlock-worker` for fault injection in the end-to-end tests. It completes the
//! handshake like a real worker (without any lockdown: it never runs untrusted code), reads
//! the `Start` message, and then misbehaves as the program text asks:
//!
//! - `garbage`: answers with a frame whose message tag does not exist;
//! - `oversized`: announces a frame larger than the protocol maximum;
//! - `truncated`: sends half a frame and exits;
//! - `hang`: never answers;
//! - `exit`: exits with code 0 without a `Done`;
//! - anything else: answers `Done` with `"fake"`.

use airlock_proto::frame::blocking::{read_message, write_message};
use airlock_proto::{
    LockdownReport, MAX_FRAME_LEN, Outcome, PROTOCOL_VERSION, SupervisorMessage, WorkerMessage,
    WorkerStats,
};
use std::io::Write;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;

fn main() {
    // SAFETY: airlockd starts workers with their socket on fd 3 and nothing else owns it.
    let mut sock = unsafe { UnixStream::from_raw_fd(3) };
    let ready = WorkerMessage::Ready {
        protocol_version: PROTOCOL_VERSION,
        lockdown: LockdownReport {
            landlock_abi: 0,
            landlock_fully_enforced: false,
            seccomp_allowed_syscalls: 0,
        },
    };
    if write_message(&mut sock, &ready).is_err() {
        return;
    }
    let Ok(SupervisorMessage::Start(start)) =
        read_message::<SupervisorMessage>(&mut sock, MAX_FRAME_LEN)
    else {
        return;
    };
    match start.code.trim() {
        "garbage" => {
            let _ = sock.write_all(&[4, 0, 0, 0, 200, 1, 2, 3]);
        }
        "oversized" => {
            let _ = sock.write_all(&(MAX_FRAME_LEN + 1).to_le_bytes());
        }
        "truncated" => {
            let _ = sock.write_all(&[100, 0, 0, 0, 1, 2]);
            return;
        }
        "exit" => return,
        "hang" => {}
        _ => {
            let _ = write_message(
                &mut sock,
                &WorkerMessage::Done {
                    outcome: Outcome::Ok {
                        value_json: "\"fake\"".into(),
                    },
                    stats: WorkerStats::default(),
                },
            );
            return;
        }
    }
    std::thread::sleep(std::time::Duration::from_secs(60));
}
