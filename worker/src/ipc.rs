//! The worker's end of the socket pair on fd 3: blocking, one frame at a time.
//!
//! The worker is single-threaded and only ever blocks here, waiting for tool results, so a
//! plain blocking `read` is all the I/O it needs (and all the seccomp filter allows).

use airlock_proto::frame::blocking::{IoFrameError, read_message, write_message};
use airlock_proto::{IPC_FD, MAX_FRAME_LEN, SupervisorMessage, WorkerMessage};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Ipc {
    stream: UnixStream,
}

impl Ipc {
    /// Takes ownership of fd 3.
    ///
    /// # Safety
    /// The caller must have verified that fd 3 is open, is the inherited socket, and is not
    /// owned by anything else in this process.
    pub unsafe fn from_inherited_fd() -> Ipc {
        // SAFETY: guaranteed by the caller (see above); nothing else wraps fd 3.
        let stream = unsafe { UnixStream::from_raw_fd(IPC_FD) };
        Ipc { stream }
    }

    /// Wraps one end of a socket pair, for tests that play the supervisor in-process.
    #[cfg(all(test, feature = "engine"))]
    pub fn from_stream(stream: UnixStream) -> Ipc {
        Ipc { stream }
    }

    pub fn send(&mut self, msg: &WorkerMessage) -> Result<(), IoFrameError> {
        write_message(&mut self.stream, msg)
    }

    pub fn recv(&mut self) -> Result<SupervisorMessage, IoFrameError> {
        read_message(&mut self.stream, MAX_FRAME_LEN)
    }

    /// Returns as soon as the supervisor has sent something more (or hung up), or after
    /// `budget`, whichever is first, without ever sleeping: the next [`Ipc::recv`] then reads
    /// without waiting to be woken. Nothing is consumed.
    pub fn stay_awake(&mut self, budget: Duration) {
        let until = Instant::now() + budget;
        let mut byte = 0u8;
        loop {
            // SAFETY: `byte` is a valid one-byte buffer; fd 3 is this process's socket. The
            // filter allows recvfrom on fd 3 with any flags; MSG_PEEK leaves the byte queued.
            let n = unsafe {
                libc::recv(
                    self.stream.as_raw_fd(),
                    (&raw mut byte).cast(),
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            // Data (1), the supervisor hanging up (0) or an error other than "nothing yet":
            // `recv` has something to report either way.
            if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock {
                return;
            }
            if Instant::now() >= until {
                return;
            }
            // Not a bare spin: on a small machine the daemon thread about to send `Start`
            // may be waiting for this very CPU.
            std::thread::yield_now();
        }
    }
}
