//! The zygote: a locked-down process that has started the engine and then only forks, one
//! new worker per request (`airlock-worker --zygote`, started once by `airlockd`).
//!
//! Every execution still gets a fresh process with its own address space that has never run
//! anything; what it skips is `exec`, the dynamic loader, the engine's start and compiling
//! the seccomp filters. The zygote itself never reads a program, a tool result or anything
//! else from an agent: it reads only fork requests from the daemon.
//!
//! The protocol, on fd 3 (a `SOCK_SEQPACKET` socket, so one packet is one message):
//! 1. the zygote sends `WorkerMessage::Ready` once it is locked down;
//! 2. per request: the daemon sends a [`ForkRequest`] frame with the new worker's socket
//!    attached (`SCM_RIGHTS`); the zygote forks with `CLONE_PARENT`, so the new worker is
//!    the daemon's child (the daemon reaps it and reads its exit status), and answers
//!    [`ForkReply::Forked`] with its pid, or [`ForkReply::Refused`];
//! 3. the daemon closing the socket ends the zygote.
//!
//! The forked child returns from [`serve`] into `main`, which finishes its lockdown
//! ([`lockdown::enter_forked_worker`]) and goes on exactly like an exec'd worker.

use crate::lockdown::{self, Ceiling};
use crate::syscall_allowlist;
use airlock_proto::frame::{FrameError, decode_packet, encode};
use airlock_proto::{ForkReply, ForkRequest, IPC_FD, LockdownReport, WorkerMessage};
use std::io;
use std::os::fd::RawFd;

/// Largest fork request packet: a `ForkRequest` frame is a few bytes; anything longer is not
/// one (the packet is truncated and refused).
const MAX_REQUEST: u32 = 64;

/// What [`serve`] returns to `main`.
#[derive(Debug)]
pub enum Served {
    /// This process is a newly forked worker: its lockdown is finished (or failed); whether it
    /// should warm up before `Ready` ([`ForkRequest::warm_up`]).
    Worker(Result<LockdownReport, lockdown::LockdownError>, bool),
    /// The zygote is done: the daemon hung up (`Ok`) or broke the protocol.
    Exit(Result<(), ZygoteError>),
}

#[derive(Debug, thiserror::Error)]
pub enum ZygoteError {
    #[error("{what} on the control socket failed: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("the daemon sent a malformed fork request: {0}")]
    BadRequest(String),
    #[error("compiling the worker's seccomp filter failed: {0}")]
    Filter(#[from] seccompiler::BackendError),
}

/// Announces the zygote, then forks one worker per request until the daemon hangs up.
pub fn serve(parent_pid: i32, report: &LockdownReport) -> Served {
    // Compiled once, here, so that no forked worker pays for it; each installs it as is.
    let worker_filter = match syscall_allowlist::forked_worker_filter() {
        Ok(f) => f,
        Err(e) => return Served::Exit(Err(e.into())),
    };
    let ready = WorkerMessage::Ready {
        protocol_version: airlock_proto::PROTOCOL_VERSION,
        lockdown: report.clone(),
    };
    if let Err(e) = send_packet(encode(&ready)) {
        return Served::Exit(Err(e));
    }
    loop {
        let (request, socket) = match receive_request() {
            Ok(Some(received)) => received,
            Ok(None) => return Served::Exit(Ok(())),
            Err(e) => return Served::Exit(Err(e)),
        };
        let Some(socket) = socket else {
            let reply = ForkReply::Refused {
                step: "receive the worker's socket".into(),
                errno: libc::EBADF,
            };
            if let Err(e) = send_packet(encode(&reply)) {
                return Served::Exit(Err(e));
            }
            continue;
        };
        // SAFETY: a plain fork: the zygote is single-threaded (the engine starts no
        // threads), so the child holds no lock another thread could have held. glibc's
        // `fork` cannot add CLONE_PARENT, hence the raw syscall; no atfork handlers are
        // registered in this process. The child returns 0 and continues on a copy of this
        // stack.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone,
                (libc::CLONE_PARENT | libc::SIGCHLD) as libc::c_ulong,
                0usize,
                0usize,
                0usize,
                0usize,
            )
        };
        if pid == 0 {
            let ceiling = Ceiling {
                memory_ceiling_bytes: request.memory_ceiling_bytes,
                cpu_seconds: request.cpu_seconds,
            };
            return Served::Worker(
                lockdown::enter_forked_worker(parent_pid, ceiling, socket, &worker_filter, report),
                request.warm_up,
            );
        }
        let reply = match i32::try_from(pid) {
            Ok(pid) if pid > 0 => ForkReply::Forked { pid },
            _ => ForkReply::Refused {
                step: "fork".into(),
                errno: io::Error::last_os_error().raw_os_error().unwrap_or(0),
            },
        };
        // The new worker has its own copy; the zygote must not keep one (it would hold the
        // worker's socket open after the worker dies).
        // SAFETY: `socket` was received by this process and nothing else owns it.
        unsafe { libc::close(socket) };
        if let Err(e) = send_packet(encode(&reply)) {
            return Served::Exit(Err(e));
        }
    }
}

/// Sends one encoded message as one packet, without SIGPIPE if the daemon is gone.
fn send_packet(frame: Result<Vec<u8>, FrameError>) -> Result<(), ZygoteError> {
    let frame = frame.map_err(|e| ZygoteError::BadRequest(e.to_string()))?;
    // SAFETY: `frame` is valid for its length; fd 3 is the control socket.
    let n = unsafe {
        libc::send(
            IPC_FD,
            frame.as_ptr().cast(),
            frame.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if usize::try_from(n).ok() != Some(frame.len()) {
        return Err(ZygoteError::Io {
            what: "send",
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Control-message space for exactly one descriptor.
const CMSG_SPACE_ONE_FD: usize = 24;

/// Reads one fork request and the descriptor attached to it. `Ok(None)`: the daemon hung up.
/// A request without exactly one descriptor gives `(request, None)`; any extra descriptors
/// are closed.
fn receive_request() -> Result<Option<(ForkRequest, Option<RawFd>)>, ZygoteError> {
    let mut data = [0u8; MAX_REQUEST as usize];
    // u64 alignment for the cmsghdr that the kernel writes here.
    let mut control = [0u64; CMSG_SPACE_ONE_FD / 8];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    let n = loop {
        // SAFETY: `msg` points at live buffers of the lengths it states.
        let n = unsafe { libc::recvmsg(IPC_FD, &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(ZygoteError::Io {
                what: "recvmsg",
                source: err,
            });
        }
    };
    let fds = received_fds(&msg);
    if n == 0 && fds.is_empty() {
        return Ok(None);
    }
    let mut fds = fds.into_iter();
    let socket = fds.next();
    for extra in fds {
        // SAFETY: received by this process just now; nothing else owns it.
        unsafe { libc::close(extra) };
    }
    let len = usize::try_from(n).unwrap_or(0);
    let request = if msg.msg_flags & libc::MSG_TRUNC != 0 {
        Err(ZygoteError::BadRequest(
            "a packet longer than any fork request".into(),
        ))
    } else {
        decode_packet::<ForkRequest>(&data[..len], MAX_REQUEST)
            .map_err(|e| ZygoteError::BadRequest(e.to_string()))
    };
    match request {
        Ok(request) => Ok(Some((request, socket))),
        Err(e) => {
            if let Some(fd) = socket {
                // SAFETY: received by this process just now; nothing else owns it.
                unsafe { libc::close(fd) };
            }
            Err(e)
        }
    }
}

/// The descriptors in `msg`'s `SCM_RIGHTS` control messages.
fn received_fds(msg: &libc::msghdr) -> Vec<RawFd> {
    let mut fds = Vec::new();
    // SAFETY: `msg` was filled by recvmsg; the CMSG_* macros walk its control buffer within
    // msg_controllen, and each SCM_RIGHTS payload holds (len - CMSG_LEN(0)) / 4 ints.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let payload = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..payload / std::mem::size_of::<RawFd>() {
                    fds.push(data.add(i).read_unaligned());
                }
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    fds
}
