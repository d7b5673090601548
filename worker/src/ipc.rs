//! The worker's end of the socket pair on fd 3: blocking, one frame at a time.
//!
//! The worker is single-threaded and only ever blocks here, waiting for tool results, so a
//! plain blocking `read` is all the I/O it needs (and all the seccomp filter allows).

use airlock_proto::frame::blocking::{IoFrameError, read_message, write_message};
use airlock_proto::{IPC_FD, MAX_FRAME_LEN, SupervisorMessage, WorkerMessage};
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;

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
}
