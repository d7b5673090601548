//! A fake `airlock-worker` for fault injection in the end-to-end tests. It completes the
//! handshake like a real worker (without any lockdown: it never runs untrusted code), reads
//! the `Start` message, and then misbehaves as the program text asks:
//!
//! - `garbage`: answers with a frame whose message tag does not exist;
//! - `oversized`: announces a frame larger than the protocol maximum;
//! - `truncated`: sends half a frame and exits;
//! - `hang`: never answers;
//! - `exit`: exits with code 0 without a `Done`;
//! - `slowloris`: sends a valid `Done` one byte per second;
//! - `duplicate-id`: sends two `ToolCall`s with id 1;
//! - `decreasing-id`: sends `ToolCall` id 5, then id 2;
//! - `oversized-args`: sends a `ToolCall` whose arguments exceed `MAX_TOOL_ARGS_BYTES`;
//! - `references-twice`: sends `ToolReferences` twice without waiting for the verdict;
//! - `call-before-verdict`: sends `ToolReferences` the contract check refuses, then a
//!   `ToolCall` at once (whichever the supervisor reads first, the call is one it must not
//!   make);
//! - `references-after-call`: sends `ToolReferences` after the verdict and a `ToolCall`;
//! - `after-done`: answers `Done` with `"fake"`, then a console line and a `ToolCall`;
//! - `scm-rights`: answers `Done` with `"fake"` in a message that also carries file
//!   descriptors (`SCM_RIGHTS`: an open file and both ends of a pipe);
//! - anything else: answers `Done` with `"fake"`.

use airlock_proto::frame::blocking::{read_message, write_message};
use airlock_proto::{
    ConsoleLevel, LockdownReport, MAX_FRAME_LEN, MAX_TOOL_ARGS_BYTES, Outcome, PROTOCOL_VERSION,
    SourcePosition, SupervisorMessage, ToolReference, ToolReferences, WorkerMessage, WorkerStats,
    encode,
};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;

fn main() {
    // It plays a worker started by exec; as a zygote it would misread the fork requests, so
    // it refuses the role the way a mismatched worker binary does (the daemon then execs).
    if std::env::args().any(|a| a == "--zygote") {
        std::process::exit(64);
    }
    // SAFETY: airlockd starts workers with their socket on fd 3 and nothing else owns it.
    let mut sock = unsafe { UnixStream::from_raw_fd(3) };
    let ready = WorkerMessage::Ready {
        protocol_version: PROTOCOL_VERSION,
        lockdown: LockdownReport {
            landlock_abi: 0,
            landlock_fully_enforced: false,
            seccomp_allowed_syscalls: 0,
            forked: false,
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
        "slowloris" => {
            let Ok(frame) = encode(&done()) else { return };
            for byte in frame {
                if sock.write_all(&[byte]).is_err() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
        "duplicate-id" => {
            let _ = write_message(&mut sock, &call(1, "{}".into()));
            let _ = write_message(&mut sock, &call(1, "{}".into()));
        }
        "decreasing-id" => {
            let _ = write_message(&mut sock, &call(5, "{}".into()));
            let _ = write_message(&mut sock, &call(2, "{}".into()));
        }
        "oversized-args" => {
            let big = format!("{{\"s\":\"{}\"}}", "x".repeat(MAX_TOOL_ARGS_BYTES));
            let _ = write_message(&mut sock, &call(1, big));
        }
        "references-twice" => {
            let _ = write_message(&mut sock, &references());
            let _ = write_message(&mut sock, &references());
        }
        "call-before-verdict" => {
            let _ = write_message(&mut sock, &references_to("nope"));
            let _ = write_message(&mut sock, &call(1, "{}".into()));
        }
        "references-after-call" => {
            let _ = write_message(&mut sock, &references());
            let Ok(SupervisorMessage::Proceed) =
                read_message::<SupervisorMessage>(&mut sock, MAX_FRAME_LEN)
            else {
                return;
            };
            let _ = write_message(&mut sock, &call(1, "{}".into()));
            let _ = write_message(&mut sock, &references());
        }
        "after-done" => {
            let _ = write_message(&mut sock, &done());
            let _ = write_message(
                &mut sock,
                &WorkerMessage::Console {
                    level: ConsoleLevel::Log,
                    text: "after done".into(),
                },
            );
            let _ = write_message(&mut sock, &call(1, "{}".into()));
        }
        "never-reads" => {
            // Many calls whose results (echoes of 8 KiB each) fill the socket long before
            // they are all answered, and no read: the deadline must still end it.
            let args = format!("{{\"s\":\"{}\"}}", "x".repeat(8 * 1024));
            for id in 1..=1000 {
                let echo = WorkerMessage::ToolCall {
                    id,
                    tool: "test.echo".into(),
                    args_json: args.clone(),
                    at: None,
                };
                if write_message(&mut sock, &echo).is_err() {
                    return;
                }
            }
        }
        "scm-rights" => {
            let Ok(frame) = encode(&done()) else { return };
            let _ = send_with_fds(&sock, &frame);
        }
        _ => {
            let _ = write_message(&mut sock, &done());
            return;
        }
    }
    std::thread::sleep(std::time::Duration::from_secs(60));
}

fn done() -> WorkerMessage {
    WorkerMessage::Done {
        outcome: Outcome::Ok {
            value_json: "\"fake\"".into(),
        },
        stats: WorkerStats::default(),
    }
}

/// The literal call `tools.test.count()`, which the contract check lets through.
fn references() -> WorkerMessage {
    references_to("count")
}

/// The literal call `tools.test.<name>()`.
fn references_to(name: &str) -> WorkerMessage {
    WorkerMessage::ToolReferences(ToolReferences {
        calls: vec![ToolReference {
            namespace: "test".into(),
            name: name.into(),
            at: SourcePosition { line: 1, column: 1 },
            argument: None,
        }],
    })
}

fn call(id: u32, args_json: String) -> WorkerMessage {
    WorkerMessage::ToolCall {
        id,
        tool: "test.count".into(),
        args_json,
        at: None,
    }
}

/// Sends `bytes` in one `sendmsg` whose control message passes three descriptors: a file
/// opened here and both ends of a new pipe.
fn send_with_fds(sock: &UnixStream, bytes: &[u8]) -> std::io::Result<()> {
    let file = std::fs::File::open("/proc/self/status")?;
    let mut pipe = [0 as libc::c_int; 2];
    // SAFETY: `pipe` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fds = [file.as_raw_fd(), pipe[0], pipe[1]];
    let fd_bytes = std::mem::size_of_val(&fds);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at `control`, which is CMSG_SPACE(fd_bytes) long, so the
    // first header and its data fit; the data is written within that space.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fd_bytes);
    }
    // SAFETY: `msg` and everything it points to live until sendmsg returns.
    let rc = unsafe { libc::sendmsg(sock.as_raw_fd(), &raw const msg, 0) };
    // SAFETY: the pipe's descriptors are ours; the peer holds its own copies if it took them.
    unsafe {
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
