//! The daemon's side of the zygote (`airlock-worker --zygote`, see the worker's `zygote.rs`):
//! a locked-down process that has started the engine and forks one new worker per request,
//! so a worker costs a fork instead of an `exec`, the dynamic loader and the engine's start.
//!
//! Used only from the spawner thread (`process.rs`), with blocking I/O and timeouts: that
//! thread must stay the zygote's parent for the parent-death signal of the zygote and of every
//! worker it forks (they are the daemon's children through `CLONE_PARENT`, parented to the
//! thread that started the zygote).
//!
//! Every failure here is an error the caller answers by starting the worker by `exec`
//! instead; the zygote is a speed-up, never a requirement.

use super::process::{WorkerCeiling, posix_spawn_worker, reap_blocking};
use airlock_proto::{
    ForkReply, ForkRequest, PROTOCOL_VERSION, WorkerMessage, decode_packet, encode,
};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::Path;
use std::time::Duration;

/// How long a new zygote may take to lock down and say `Ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one fork may take to be answered. A fork is well under a millisecond; a zygote
/// this slow is stuck and is replaced.
const FORK_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest packet the zygote sends (a `Ready` or a `ForkReply` frame is tens of bytes).
const MAX_PACKET: u32 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum ZygoteError {
    #[error("cannot create the zygote's control socket: {0}")]
    Socket(io::Error),
    #[error("cannot start the zygote: {0}")]
    Exec(io::Error),
    #[error("the zygote did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the zygote's control socket failed: {0}")]
    Io(io::Error),
    #[error("the zygote closed its control socket")]
    Closed,
    #[error("the zygote sent a malformed message: {0}")]
    Malformed(String),
    #[error(
        "the zygote speaks protocol version {got}, this daemon speaks {want}; the worker binary does not belong to this airlockd"
    )]
    ProtocolMismatch { got: u32, want: u32 },
    #[error("the zygote failed a moment ago; waiting before starting another")]
    Backoff,
    #[error("the zygote could not {step}: {}", io::Error::from_raw_os_error(*errno))]
    Refused { step: String, errno: i32 },
}

/// A running zygote: its pid (our child) and its control socket. Dropping it closes the
/// socket, which ends the zygote, and reaps it.
#[derive(Debug)]
pub struct Zygote {
    pid: i32,
    control: OwnedFd,
}

impl Zygote {
    /// Starts the zygote and waits for its `Ready`.
    pub fn start(worker: &Path) -> Result<Zygote, ZygoteError> {
        let (ours, theirs) = seqpacket_pair().map_err(ZygoteError::Socket)?;
        let args = [
            "--parent-pid".to_owned(),
            std::process::id().to_string(),
            "--zygote".to_owned(),
        ];
        let pid =
            posix_spawn_worker(worker, &args, theirs.as_raw_fd()).map_err(ZygoteError::Exec)?;
        drop(theirs);
        // Owned from here: an error below drops it, which ends and reaps the process.
        let zygote = Zygote { pid, control: ours };
        match zygote.receive::<WorkerMessage>(READY_TIMEOUT)? {
            WorkerMessage::Ready {
                protocol_version,
                lockdown,
            } if protocol_version == PROTOCOL_VERSION => {
                tracing::debug!(pid, ?lockdown, "zygote ready");
                Ok(zygote)
            }
            WorkerMessage::Ready {
                protocol_version, ..
            } => Err(ZygoteError::ProtocolMismatch {
                got: protocol_version,
                want: PROTOCOL_VERSION,
            }),
            _ => Err(ZygoteError::Malformed("expected Ready".into())),
        }
    }

    /// Forks one worker whose socket is `worker_end` (warmed up before `Ready` if it will wait
    /// in the pool); returns its pid. The worker is this process's child and sends its own
    /// `Ready` on the other end of `worker_end`'s pair.
    pub fn fork(
        &self,
        ceiling: WorkerCeiling,
        warm_up: bool,
        worker_end: &StdUnixStream,
    ) -> Result<i32, ZygoteError> {
        let request = ForkRequest {
            memory_ceiling_bytes: ceiling.memory_ceiling_bytes,
            cpu_seconds: ceiling.cpu_seconds,
            warm_up,
        };
        let frame = encode(&request).map_err(|e| ZygoteError::Malformed(e.to_string()))?;
        send_with_fd(self.control.as_raw_fd(), &frame, worker_end.as_raw_fd())
            .map_err(ZygoteError::Io)?;
        match self.receive::<ForkReply>(FORK_TIMEOUT)? {
            ForkReply::Forked { pid } if pid > 0 => Ok(pid),
            ForkReply::Forked { pid } => Err(ZygoteError::Malformed(format!("pid {pid}"))),
            ForkReply::Refused { step, errno } => Err(ZygoteError::Refused { step, errno }),
        }
    }

    /// Reads one packet, waiting at most `timeout`.
    fn receive<T: serde::de::DeserializeOwned>(&self, timeout: Duration) -> Result<T, ZygoteError> {
        let fd = self.control.as_raw_fd();
        let mut pollfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        loop {
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&raw mut pollfd, 1, ms) };
            if rc > 0 {
                break;
            }
            if rc == 0 {
                return Err(ZygoteError::Timeout(timeout));
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(ZygoteError::Io(err));
            }
        }
        let mut packet = [0u8; MAX_PACKET as usize];
        // SAFETY: the buffer is valid for its length; MSG_TRUNC makes the kernel return the
        // packet's real length, so an oversized one is noticed.
        let n = unsafe {
            libc::recv(
                fd,
                packet.as_mut_ptr().cast(),
                packet.len(),
                libc::MSG_TRUNC | libc::MSG_DONTWAIT,
            )
        };
        let n = usize::try_from(n).map_err(|_| ZygoteError::Io(io::Error::last_os_error()))?;
        if n == 0 {
            return Err(ZygoteError::Closed);
        }
        if n > packet.len() {
            return Err(ZygoteError::Malformed(format!("a packet of {n} bytes")));
        }
        decode_packet(&packet[..n], MAX_PACKET).map_err(|e| ZygoteError::Malformed(e.to_string()))
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        // Closing the control socket ends the zygote's loop; if it does not end, kill it.
        // Either way it is reaped here: it is our child, and the spawner thread that owns it
        // may block for a moment.
        // SAFETY: shutdown on a descriptor we own.
        unsafe { libc::shutdown(self.control.as_raw_fd(), libc::SHUT_RDWR) };
        let mut status = 0;
        for _ in 0..100 {
            // SAFETY: a valid pointer to a local; the pid is our unreaped child.
            if unsafe { libc::waitpid(self.pid, &raw mut status, libc::WNOHANG) } != 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        // SAFETY: plain kill(2) of our unreaped child (so the pid is still ours).
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        let _ = reap_blocking(self.pid);
    }
}

/// A close-on-exec `SOCK_SEQPACKET` pair: message boundaries, so one packet is one frame.
fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: a valid two-element array for the kernel to fill.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned these two descriptors and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The size of one descriptor in an `SCM_RIGHTS` message (an `int`).
const FD_BYTES: u32 = 4;
const _: () = assert!(std::mem::size_of::<RawFd>() == FD_BYTES as usize);

/// Sends `bytes` as one packet with `fd` attached (`SCM_RIGHTS`).
fn send_with_fd(socket: RawFd, bytes: &[u8], fd: RawFd) -> io::Result<()> {
    // u64 alignment for the cmsghdr.
    let mut control = [0u64; 4];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is arithmetic.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(FD_BYTES) } as usize;
    // SAFETY: the control buffer (32 bytes) holds CMSG_SPACE(4) = 24 bytes; CMSG_FIRSTHDR
    // points into it and CMSG_DATA at its payload, which holds one int.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(FD_BYTES) as usize;
        libc::CMSG_DATA(cmsg).cast::<RawFd>().write_unaligned(fd);
    }
    loop {
        // SAFETY: `msg` points at live buffers of the lengths it states.
        let n = unsafe { libc::sendmsg(socket, &raw const msg, libc::MSG_NOSIGNAL) };
        if usize::try_from(n).ok() == Some(bytes.len()) {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if n < 0 && err.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return Err(if n < 0 {
            err
        } else {
            io::Error::other("short send")
        });
    }
}
