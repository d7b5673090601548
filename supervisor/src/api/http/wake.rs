//! A connection that wakes a pre-started worker as an execution request's first bytes are
//! read ([`WakesWorker`]), before hyper has parsed the request and routed it to its handler.
//!
//! After a pause, the daemon's thread takes tens of microseconds to parse a request and reach
//! the handler, and the worker tens more to wake from sleep on another CPU; telling it
//! `StayAwake` from here lets the two overlap. The handler still calls
//! [`crate::workers::pool::WorkerPool::wake_next`] for a request whose first read began
//! elsewhere (a request split across reads); a worker told less than
//! [`airlock_proto::STAY_AWAKE`] ago is not told again.

use crate::generation::Generations;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;

/// What an execution request begins with (`POST /v1/executions`, and its `/resume` and
/// `/results` forms).
const EXECUTION_REQUEST: &[u8] = b"POST /v1/executions";

/// An agent's connection. Reads and writes pass through untouched.
#[derive(Debug)]
pub(super) struct WakesWorker {
    stream: UnixStream,
    /// The generations whose pool to wake; `None` for a peer no principal admits, whose
    /// requests are all refused.
    generations: Option<Arc<Generations>>,
}

impl WakesWorker {
    pub(super) fn new(stream: UnixStream, generations: Option<Arc<Generations>>) -> WakesWorker {
        WakesWorker {
            stream,
            generations,
        }
    }
}

impl AsyncRead for WakesWorker {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.stream).poll_read(cx, buf);
        // A read that begins an execution request. (One that begins inside a body with these
        // bytes only wakes a worker for nothing, for at most STAY_AWAKE.)
        if let (Poll::Ready(Ok(())), Some(generations)) = (&read, &self.generations)
            && buf
                .filled()
                .get(before..)
                .is_some_and(|new| new.starts_with(EXECUTION_REQUEST))
        {
            generations.current().pool.wake_next();
        }
        read
    }
}

impl AsyncWrite for WakesWorker {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
