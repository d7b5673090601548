//! A minimal supervisor for tests: starts the built `airlock-worker` binary directly, with
//! its end of a socket pair on fd 3, and speaks the framed protocol to it.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use airlock_proto::frame::blocking::{IoFrameError, read_message, write_message};
use airlock_proto::{
    Language, Limits, MAX_FRAME_LEN, StartExecution, SupervisorMessage, WorkerMessage,
};
use std::ffi::OsString;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const WORKER: &str = env!("CARGO_BIN_EXE_airlock-worker");
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The command line airlockd passes, for our own pid.
pub fn standard_args() -> Vec<OsString> {
    [
        "--parent-pid".to_owned(),
        std::process::id().to_string(),
        "--memory-ceiling".to_owned(),
        "1073741824".to_owned(),
        "--cpu-seconds".to_owned(),
        "10".to_owned(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

/// What the child finds on fd 3 (and around it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fd3 {
    /// The socket on fd 3, as airlockd does it.
    Socket,
    /// The socket on fd 3, plus a leaked copy on fd 7 without close-on-exec.
    SocketAndLeak,
    /// Nothing on fd 3; the socket is on fd 4 instead (so we can see whether it writes).
    SocketOnFd4,
    /// `/dev/null` on fd 3: open, but not a socket.
    DevNull,
    /// The socket on fd 3, but stdin closed.
    SocketStdinClosed,
    /// The socket on fd 3, and `personality()` answers EPERM, as under systemd's
    /// `LockPersonality=yes`.
    SocketPersonalityLocked,
}

pub struct Worker {
    pub child: Child,
    pub sock: UnixStream,
}

/// Makes `from` appear as `to` in the child, without close-on-exec.
///
/// # Safety
/// Only for use between fork and exec (async-signal-safe calls only).
unsafe fn move_fd(from: RawFd, to: RawFd) -> std::io::Result<()> {
    if from == to {
        // dup2 would be a no-op and leave FD_CLOEXEC set: clear it instead.
        // SAFETY: fcntl on an fd we own; async-signal-safe.
        if unsafe { libc::fcntl(to, libc::F_SETFD, 0) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
    } else {
        // SAFETY: dup2 on fds we own; the new fd has FD_CLOEXEC cleared; async-signal-safe.
        if unsafe { libc::dup2(from, to) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A seccomp filter that fails `personality()` with EPERM, like systemd's LockPersonality.
fn personality_lock_filter() -> seccompiler::BpfProgram {
    let rules = std::collections::BTreeMap::from([(libc::SYS_personality, Vec::new())]);
    let filter = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(libc::EPERM as u32),
        std::env::consts::ARCH.try_into().expect("supported arch"),
    )
    .expect("filter");
    filter.try_into().expect("compile filter")
}

/// Spawns the worker with `args` as airlockd does: fds 0-2 on /dev/null.
pub fn spawn(args: &[OsString], fd3: Fd3) -> Worker {
    spawn_with_stderr(args, fd3, Stdio::null())
}

/// Like [`spawn`], but stderr is a pipe (read it with [`Worker::stderr`]) so refusals can be
/// checked and explained.
pub fn spawn_capturing_stderr(args: &[OsString], fd3: Fd3) -> Worker {
    spawn_with_stderr(args, fd3, Stdio::piped())
}

fn spawn_with_stderr(args: &[OsString], fd3: Fd3, stderr: Stdio) -> Worker {
    spawn_with(args, fd3, stderr, || Ok(()))
}

/// Like [`spawn`], with `setup` run in the child before exec, after the descriptors are in
/// place. It runs between fork and exec: only async-signal-safe calls, nothing allocated.
pub fn spawn_with(
    args: &[OsString],
    fd3: Fd3,
    stderr: Stdio,
    mut setup: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static,
) -> Worker {
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    ours.set_read_timeout(Some(TIMEOUT)).expect("read timeout");
    let child_fd = theirs.as_raw_fd();
    let dev_null = std::fs::File::open("/dev/null").expect("open /dev/null");
    let null_fd = dev_null.as_raw_fd();

    // Built before fork: the child may only apply it (no allocation between fork and exec).
    let lock_personality = personality_lock_filter();
    let mut cmd = Command::new(WORKER);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
    // calls (dup2, fcntl, close) on descriptors this test owns.
    unsafe {
        cmd.pre_exec(move || {
            match fd3 {
                Fd3::Socket | Fd3::SocketStdinClosed => move_fd(child_fd, 3)?,
                Fd3::SocketPersonalityLocked => {
                    move_fd(child_fd, 3)?;
                    seccompiler::apply_filter(&lock_personality)
                        .map_err(|e| std::io::Error::other(e.to_string()))?;
                }
                Fd3::SocketAndLeak => {
                    move_fd(child_fd, 3)?;
                    move_fd(child_fd, 7)?;
                }
                Fd3::SocketOnFd4 => {
                    move_fd(child_fd, 4)?;
                    // SAFETY: fd 3 is either a close-on-exec fd of ours or not open.
                    libc::close(3);
                }
                Fd3::DevNull => move_fd(null_fd, 3)?,
            }
            if fd3 == Fd3::SocketStdinClosed {
                // SAFETY: closing stdin of the child only.
                libc::close(0);
            }
            setup()
        });
    }
    let child = cmd.spawn().expect("spawn airlock-worker");
    drop(theirs);
    drop(dev_null);
    Worker { child, sock: ours }
}

impl Worker {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn recv(&mut self) -> Result<WorkerMessage, IoFrameError> {
        read_message(&mut self.sock, MAX_FRAME_LEN)
    }

    pub fn send(&mut self, msg: &SupervisorMessage) {
        write_message(&mut self.sock, msg).expect("send to worker");
    }

    /// Reads the Ready message, panicking (with the worker's stderr) on anything else.
    pub fn expect_ready(&mut self) -> airlock_proto::LockdownReport {
        match self.recv() {
            Ok(WorkerMessage::Ready {
                protocol_version,
                lockdown,
            }) => {
                assert_eq!(protocol_version, airlock_proto::PROTOCOL_VERSION);
                lockdown
            }
            other => {
                let status = self.wait();
                panic!(
                    "expected Ready, got {other:?}; worker {status:?}, stderr: {}",
                    self.stderr()
                )
            }
        }
    }

    /// Hangs up (as airlockd does once it has the worker's answer) and waits for the worker
    /// to exit, killing it after [`TIMEOUT`].
    pub fn wait(&mut self) -> ExitStatus {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("worker {} did not exit within {TIMEOUT:?}", self.pid());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Everything the worker wrote to stderr (call after it exited).
    pub fn stderr(&mut self) -> String {
        use std::io::Read;
        let mut s = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = err.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Never leave a worker behind, whatever the test did.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn start_message(code: &str) -> SupervisorMessage {
    SupervisorMessage::Start(StartExecution {
        execution_id: "test".to_owned(),
        language: Language::JavaScript,
        code: code.to_owned(),
        limits: Limits {
            timeout_ms: 5_000,
            memory_bytes: 64 << 20,
            stack_bytes: 1 << 20,
            max_tool_calls: 0,
            max_output_bytes: 1 << 16,
        },
        determinism: airlock_proto::Determinism {
            clock_ms: 1_790_000_000_000,
            seed: [7; 32],
        },
        report_idle: false,
    })
}

/// The value of `field` in `/proc/<pid>/status` (e.g. `Seccomp`).
pub fn proc_status_field(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
        .trim()
        .to_owned()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}
