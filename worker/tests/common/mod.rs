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
    process: Process,
    pub sock: UnixStream,
}

/// How the worker process was made: by exec (a `Child`), or forked by a zygote (its pid;
/// the zygote forks with CLONE_PARENT, so it is this test process's child all the same).
enum Process {
    Exec(Child),
    Forked { pid: i32, exit: Option<ExitStatus> },
}

impl Process {
    fn try_wait(&mut self) -> Option<ExitStatus> {
        match self {
            Process::Exec(child) => child.try_wait().expect("try_wait"),
            Process::Forked { pid, exit } => {
                if exit.is_none() {
                    let mut status = 0;
                    // SAFETY: a valid pointer to a local; the pid is our unreaped child.
                    let r = unsafe { libc::waitpid(*pid, &raw mut status, libc::WNOHANG) };
                    if r == *pid {
                        *exit = Some(std::os::unix::process::ExitStatusExt::from_raw(status));
                    }
                }
                *exit
            }
        }
    }

    fn kill(&mut self) {
        match self {
            Process::Exec(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Process::Forked { pid, exit: None } => {
                // SAFETY: kill and waitpid of our own unreaped child.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                    libc::waitpid(*pid, std::ptr::null_mut(), 0);
                }
            }
            Process::Forked { .. } => {}
        }
    }
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
    Worker {
        process: Process::Exec(child),
        sock: ours,
    }
}

/// A zygote (`airlock-worker --zygote`) started as airlockd starts it: a `SOCK_SEQPACKET`
/// control socket on fd 3, fds 0-2 on /dev/null. It has sent its `Ready` when this returns.
pub struct Zygote {
    child: Child,
    control: std::os::fd::OwnedFd,
    pub lockdown: airlock_proto::LockdownReport,
}

impl Zygote {
    pub fn start() -> Zygote {
        Zygote::start_with(&[
            OsString::from("--parent-pid"),
            OsString::from(std::process::id().to_string()),
            OsString::from("--zygote"),
        ])
    }

    pub fn start_with(args: &[OsString]) -> Zygote {
        use std::os::fd::{FromRawFd, OwnedFd};
        let mut fds = [0; 2];
        // SAFETY: a valid array for the kernel to fill.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "socketpair: {}", std::io::Error::last_os_error());
        // SAFETY: just returned by the kernel, owned by nothing else.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let child_fd = theirs.as_raw_fd();
        let mut cmd = Command::new(WORKER);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only dup2/fcntl between fork and exec.
        unsafe { cmd.pre_exec(move || move_fd(child_fd, 3)) };
        let child = cmd.spawn().expect("spawn the zygote");
        drop(theirs);
        let mut zygote = Zygote {
            child,
            control: ours,
            lockdown: airlock_proto::LockdownReport {
                landlock_abi: 0,
                landlock_fully_enforced: false,
                seccomp_allowed_syscalls: 0,
                forked: false,
            },
        };
        let ready = zygote.receive_packet().map(|p| {
            airlock_proto::decode_packet::<WorkerMessage>(&p, 4096).expect("one Ready frame")
        });
        match ready {
            Some(WorkerMessage::Ready { lockdown, .. }) => zygote.lockdown = lockdown,
            other => panic!("expected the zygote's Ready, got {other:?}"),
        }
        zygote
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `packet` as is, with `fd` attached when given.
    pub fn send_raw(&mut self, packet: &[u8], fd: Option<RawFd>) {
        let mut control = [0u64; 4];
        let mut iov = libc::iovec {
            iov_base: packet.as_ptr().cast_mut().cast(),
            iov_len: packet.len(),
        };
        // SAFETY: zeroed msghdr, then pointers to live locals.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        if let Some(fd) = fd {
            msg.msg_control = control.as_mut_ptr().cast();
            // SAFETY: arithmetic only, then writes inside `control` (32 bytes ≥ 24).
            unsafe {
                msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
                let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(4) as usize;
                libc::CMSG_DATA(cmsg).cast::<RawFd>().write_unaligned(fd);
            }
        }
        // SAFETY: `msg` points at live buffers.
        let n =
            unsafe { libc::sendmsg(self.control.as_raw_fd(), &raw const msg, libc::MSG_NOSIGNAL) };
        assert_eq!(
            n,
            packet.len() as isize,
            "sendmsg: {}",
            std::io::Error::last_os_error()
        );
    }

    /// The next packet from the zygote; `None` once it closed the socket.
    pub fn receive_packet(&mut self) -> Option<Vec<u8>> {
        let mut buf = [0u8; 4096];
        let mut pollfd = libc::pollfd {
            fd: self.control.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&raw mut pollfd, 1, TIMEOUT.as_millis() as i32) };
        assert_eq!(ready, 1, "the zygote did not answer within {TIMEOUT:?}");
        // SAFETY: the buffer is valid for its length.
        let n = unsafe {
            libc::recv(
                self.control.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
            )
        };
        assert!(n >= 0, "recv: {}", std::io::Error::last_os_error());
        if n == 0 {
            return None;
        }
        Some(buf[..n as usize].to_vec())
    }

    /// The next fork reply; `None` once the zygote closed the socket.
    pub fn receive_reply(&mut self) -> Option<airlock_proto::ForkReply> {
        let packet = self.receive_packet()?;
        Some(airlock_proto::decode_packet(&packet, 4096).expect("one ForkReply frame"))
    }

    /// Asks for one worker with the given limits; returns it (not yet Ready-checked).
    pub fn fork(&mut self, memory_ceiling_bytes: u64, cpu_seconds: u64) -> Worker {
        let (ours, theirs) = UnixStream::pair().expect("socketpair");
        ours.set_read_timeout(Some(TIMEOUT)).expect("read timeout");
        let request = airlock_proto::ForkRequest {
            memory_ceiling_bytes,
            cpu_seconds,
            // As for a pooled worker.
            warm_up: true,
        };
        let frame = airlock_proto::encode(&request).expect("encode");
        self.send_raw(&frame, Some(theirs.as_raw_fd()));
        drop(theirs);
        match self.receive_reply() {
            Some(airlock_proto::ForkReply::Forked { pid }) => Worker {
                process: Process::Forked { pid, exit: None },
                sock: ours,
            },
            other => panic!("expected Forked, got {other:?}"),
        }
    }

    /// Hangs up and waits for the zygote's exit.
    pub fn stop(mut self) -> ExitStatus {
        // SAFETY: shutdown of our own descriptor.
        unsafe { libc::shutdown(self.control.as_raw_fd(), libc::SHUT_RDWR) };
        self.child.wait().expect("wait for the zygote")
    }

    /// Waits for the zygote's exit without hanging up.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "the zygote did not exit");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    pub fn pid(&self) -> u32 {
        match &self.process {
            Process::Exec(child) => child.id(),
            Process::Forked { pid, .. } => *pid as u32,
        }
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
            if let Some(status) = self.process.try_wait() {
                return status;
            }
            if Instant::now() > deadline {
                self.process.kill();
                panic!("worker {} did not exit within {TIMEOUT:?}", self.pid());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Everything the worker wrote to stderr (call after it exited).
    pub fn stderr(&mut self) -> String {
        use std::io::Read;
        let mut s = String::new();
        let Process::Exec(child) = &mut self.process else {
            return s;
        };
        if let Some(mut err) = child.stderr.take() {
            let _ = err.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Never leave a worker behind, whatever the test did.
        if self.process.try_wait().is_none() {
            self.process.kill();
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

/// Process `pid` holds no capability: its inheritable, permitted, effective and ambient sets
/// are empty, and so is its bounding set where the test process could have passed one on that
/// the worker can drop (it holds `CAP_SETPCAP`, as root does: a root daemon's workers inherit
/// every capability unless they drop them).
pub fn assert_no_capabilities(pid: u32) {
    let none = "0000000000000000";
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert_eq!(proc_status_field(pid, set), none, "{set} of {pid}");
    }
    let ours = u64::from_str_radix(&proc_status_field(std::process::id(), "CapEff"), 16)
        .expect("CapEff in hex");
    if ours & (1 << 8) != 0 {
        assert_eq!(proc_status_field(pid, "CapBnd"), none, "CapBnd of {pid}");
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}
