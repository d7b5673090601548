//! How many connections each principal, and all principals together, hold open; the answer a
//! connection gets when it is not served; and the write deadline of every served one.
//!
//! A connection is counted from the moment its peer's credentials are read until it closes.
//! Every open connection costs the daemon a descriptor and a task, so one principal's flood
//! must not take what the others need: each principal may hold `limits.max_connections`, all
//! together `[daemon] max_connections`, and the last eighth of the daemon's connections goes
//! only to principals holding less than an equal share of them.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The open connections, by principal.
#[derive(Debug, Default)]
pub struct ConnectionCounts {
    inner: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: u32,
    by_principal: HashMap<String, u32>,
}

/// Why a connection is not served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "principal `{principal}` has {max} connections open, its limit (limits.max_connections)"
    )]
    Principal { principal: String, max: u32 },
    #[error("the daemon has {open} connections open, and the rest are kept for other principals")]
    Daemon { open: u32 },
}

impl Refusal {
    /// What the agent can do about it.
    pub fn hint(&self) -> &'static str {
        match self {
            Refusal::Principal { .. } => {
                "close connections you do not use, or send requests one after another on a kept connection; retry in 1 s"
            }
            Refusal::Daemon { .. } => "retry in 1 s",
        }
    }
}

/// One counted connection; dropping it frees its place.
#[derive(Debug)]
pub struct Held {
    counts: Arc<ConnectionCounts>,
    principal: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut counts = self
            .counts
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.by_principal.get_mut(&self.principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_principal.remove(&self.principal);
            }
        }
    }
}

impl ConnectionCounts {
    /// Counts a connection of `principal`, if it may have one more: below its own
    /// `principal_max`, below the daemon's `daemon_max`, and, within the last eighth of
    /// those, only while it holds less than an equal share.
    pub fn take(
        self: &Arc<Self>,
        principal: &str,
        principal_max: u32,
        daemon_max: u32,
    ) -> Result<Held, Refusal> {
        let mut counts = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = counts.by_principal.get(principal).copied().unwrap_or(0);
        if mine >= principal_max {
            return Err(Refusal::Principal {
                principal: principal.to_owned(),
                max: principal_max,
            });
        }
        let free = daemon_max.saturating_sub(counts.total);
        let reserve = daemon_max / 8;
        let holders = u32::try_from(counts.by_principal.len()).unwrap_or(u32::MAX);
        let active = holders.saturating_add(u32::from(mine == 0)).max(1);
        // An equal share counts one principal more than those connected: the next to come.
        let share = daemon_max / (active + 1);
        if free == 0 || (free <= reserve && mine >= share) {
            return Err(Refusal::Daemon { open: counts.total });
        }
        counts.total += 1;
        *counts.by_principal.entry(principal.to_owned()).or_insert(0) += 1;
        Ok(Held {
            counts: self.clone(),
            principal: principal.to_owned(),
        })
    }

    /// Connections open now, all principals together.
    pub fn open(&self) -> u32 {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }
}

/// The whole answer to a connection that is not served, written before anything of it is
/// read: the status line, `Connection: close` (and `Retry-After` for 429 and 503), and the
/// API's error body.
pub fn refusal_bytes(status: u16, code: &str, message: &str, hint: &str) -> Vec<u8> {
    let reason = match status {
        403 => "Forbidden",
        429 => "Too Many Requests",
        _ => "Service Unavailable",
    };
    let body = serde_json::json!({
        "error": { "code": code, "message": message, "hint": hint }
    })
    .to_string();
    let retry = if status == 403 {
        ""
    } else {
        "Retry-After: 1\r\n"
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{retry}\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A connection whose writes must make progress: one that stays unwritable (its reader reads
/// nothing) for `timeout` fails, and hyper closes it. A slow reader so holds at most the
/// socket's buffer and the one answer being written, and only for that long.
#[derive(Debug)]
pub(super) struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub(super) fn new(inner: S, timeout: Duration) -> WriteDeadline<S> {
        WriteDeadline {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// What a write that returned `polled` means: progress clears the deadline; no progress
    /// starts it (or, once it has passed, fails the write).
    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let timeout = self.timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if stalled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client read nothing of its answer within [daemon] write_timeout",
            )));
        }
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::{ConnectionCounts, Refusal};
    use std::sync::Arc;

    #[test]
    fn a_principal_gets_its_own_limit_and_the_last_eighth_is_kept_for_others() {
        let counts = Arc::new(ConnectionCounts::default());
        let mut held = Vec::new();
        // Daemon: 16; the last 2 go only to principals under an equal share.
        for _ in 0..14 {
            held.push(counts.take("a", 100, 16).unwrap());
        }
        assert!(matches!(
            counts.take("a", 100, 16),
            Err(Refusal::Daemon { open: 14 })
        ));
        held.push(counts.take("b", 100, 16).unwrap());
        held.push(counts.take("c", 100, 16).unwrap());
        assert!(counts.take("d", 100, 16).is_err(), "all 16 are open");
        held.truncate(10);
        assert_eq!(counts.open(), 10);
        let mine = Arc::new(ConnectionCounts::default());
        let _one = mine.take("p", 1, 16).unwrap();
        assert_eq!(
            mine.take("p", 1, 16).unwrap_err(),
            Refusal::Principal {
                principal: "p".into(),
                max: 1
            }
        );
    }
}
