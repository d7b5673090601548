//! The daemon's side of systemd: readiness and watchdog notifications, and socket
//! activation. Every function is a no-op when not started by systemd.

use std::os::fd::{FromRawFd, RawFd};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

pub(crate) fn notify_ready() {
    if let Err(e) = sd_notify::notify(&[sd_notify::NotifyState::Ready]) {
        debug!(error = %e, "sd_notify READY failed (not under systemd?)");
    }
}

pub(crate) fn notify_stopping() {
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
}

/// Pings the systemd watchdog at half its interval while the runtime is alive. The ping
/// comes from the async runtime itself, so a wedged runtime stops pinging and systemd
/// restarts the daemon.
pub(crate) fn spawn_watchdog() -> Option<JoinHandle<()>> {
    let interval = sd_notify::watchdog_enabled()?;
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval / 2);
        loop {
            tick.tick().await;
            if let Err(e) = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]) {
                warn!(error = %e, "watchdog ping failed");
            }
        }
    }))
}

/// The listening socket systemd passed us (`airlockd.socket`), if any.
pub fn inherited_listener() -> std::io::Result<Option<std::os::unix::net::UnixListener>> {
    let mut fds = sd_notify::listen_fds()?;
    let Some(fd) = fds.next() else {
        return Ok(None);
    };
    if fds.len() > 0 {
        warn!("systemd passed more than one socket; using the first");
    }
    Ok(Some(listener_from_fd(fd)?))
}

fn listener_from_fd(fd: RawFd) -> std::io::Result<std::os::unix::net::UnixListener> {
    // SAFETY: sd_notify::listen_fds verified LISTEN_PID is us and that this fd is within the
    // range systemd passed; nothing else in the process owns it.
    let listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) };
    listener.local_addr()?; // fails if it is not a Unix socket
    listener.set_nonblocking(true)?;
    Ok(listener)
}
