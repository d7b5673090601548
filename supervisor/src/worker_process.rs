//! One worker process from the supervisor's side: how it is started, watched, killed and
//! reaped.
//!
//! Workers are started by `exec` of the worker binary from one dedicated spawner thread.
//! That thread matters: `PR_SET_PDEATHSIG` fires when the *thread* that forked the child
//! exits, not the process, so forking from a tokio worker or blocking-pool thread (which can
//! come and go) would kill workers at random. The spawner thread lives as long as the daemon.
//!
//! Exit is observed through a pidfd, which also makes `kill` immune to pid reuse, and every
//! child is reaped with `wait4` so no zombie outlives its execution.

use airlock_proto::IPC_FD;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

/// Resource ceilings a worker is started with (the rlimits it applies to itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerCeiling {
    pub memory_ceiling_bytes: u64,
    pub cpu_seconds: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot start worker binary {path}: {source}")]
    Exec { path: PathBuf, source: io::Error },
    #[error("cannot create the worker's socket pair: {0}")]
    SocketPair(io::Error),
    #[error("pidfd_open for worker {pid} failed: {source}")]
    Pidfd { pid: i32, source: io::Error },
    #[error("the worker spawner thread is gone (daemon shutting down)")]
    SpawnerGone,
}

/// A started worker process and the supervisor's end of its socket.
#[derive(Debug)]
pub struct SpawnedWorker {
    pub process: WorkerProcess,
    pub socket: StdUnixStream,
}

struct SpawnRequest {
    ceiling: WorkerCeiling,
    extra_args: Vec<String>,
    reply: oneshot::Sender<Result<SpawnedWorker, SpawnError>>,
}

/// Handle to the dedicated thread that forks and execs workers.
#[derive(Debug, Clone)]
pub struct Spawner {
    tx: std_mpsc::Sender<SpawnRequest>,
    worker_path: PathBuf,
}

impl std::fmt::Debug for SpawnRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnRequest")
            .field("ceiling", &self.ceiling)
            .finish()
    }
}

impl Spawner {
    /// Starts the spawner thread for `worker_path`.
    pub fn start(worker_path: PathBuf) -> io::Result<Spawner> {
        let (tx, rx) = std_mpsc::channel::<SpawnRequest>();
        let path = worker_path.clone();
        std::thread::Builder::new()
            .name("airlock-spawner".into())
            .spawn(move || {
                while let Ok(req) = rx.recv() {
                    let result = spawn_blocking(&path, req.ceiling, &req.extra_args);
                    let _ = req.reply.send(result);
                }
            })?;
        Ok(Spawner { tx, worker_path })
    }

    pub fn worker_path(&self) -> &std::path::Path {
        &self.worker_path
    }

    /// Starts one worker. `extra_args` exist for test-only worker builds.
    pub async fn spawn(
        &self,
        ceiling: WorkerCeiling,
        extra_args: Vec<String>,
    ) -> Result<SpawnedWorker, SpawnError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(SpawnRequest {
                ceiling,
                extra_args,
                reply,
            })
            .map_err(|_| SpawnError::SpawnerGone)?;
        rx.await.map_err(|_| SpawnError::SpawnerGone)?
    }
}

fn spawn_blocking(
    path: &std::path::Path,
    ceiling: WorkerCeiling,
    extra_args: &[String],
) -> Result<SpawnedWorker, SpawnError> {
    // Both ends are created close-on-exec; only the child's copy dup2'ed onto fd 3 survives
    // the exec, so no other worker (or later child) can inherit either end.
    let (ours, theirs) = StdUnixStream::pair().map_err(SpawnError::SocketPair)?;
    let child_fd: RawFd = theirs.as_raw_fd();
    let mut cmd = Command::new(path);
    cmd.arg("--parent-pid")
        .arg(std::process::id().to_string())
        .arg("--memory-ceiling")
        .arg(ceiling.memory_ceiling_bytes.to_string())
        .arg("--cpu-seconds")
        .arg(ceiling.cpu_seconds.to_string())
        .args(extra_args)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs in the child between fork and exec and only calls
    // async-signal-safe functions (dup2, fcntl, prctl), touching no locks or allocations.
    unsafe {
        cmd.pre_exec(move || {
            if child_fd == IPC_FD {
                // Already in place: just clear close-on-exec so it survives the exec.
                if libc::fcntl(IPC_FD, libc::F_SETFD, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(child_fd, IPC_FD) == -1 {
                // dup2 leaves the new descriptor without FD_CLOEXEC.
                return Err(io::Error::last_os_error());
            }
            // Set before exec so there is no window in which the daemon can die unnoticed;
            // the worker re-checks its parent pid after exec.
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) == -1
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|source| SpawnError::Exec {
        path: path.to_owned(),
        source,
    })?;
    drop(theirs);
    let pid = child.id() as i32;
    let pidfd = pidfd_open(pid).map_err(|source| {
        // Without a pidfd we cannot watch it; do not leave it running.
        // SAFETY: plain kill(2) of a child we have not reaped yet (so the pid is ours).
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let _ = reap_blocking(pid);
        SpawnError::Pidfd { pid, source }
    })?;
    Ok(SpawnedWorker {
        process: WorkerProcess {
            pid,
            pidfd: Some(pidfd),
            watcher: None,
            exit: None,
        },
        socket: ours,
    })
}

fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn reap_blocking(pid: i32) -> io::Result<WorkerExit> {
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to locals; pid is our unreaped child.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return Ok(WorkerExit::from_wait(status, &usage));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// How a worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Peak resident set size of the worker, from `wait4`.
    pub peak_rss_bytes: u64,
}

impl WorkerExit {
    fn from_wait(status: i32, usage: &libc::rusage) -> WorkerExit {
        let (code, signal) = if libc::WIFEXITED(status) {
            (Some(libc::WEXITSTATUS(status)), None)
        } else if libc::WIFSIGNALED(status) {
            (None, Some(libc::WTERMSIG(status)))
        } else {
            (None, None)
        };
        WorkerExit {
            code,
            signal,
            peak_rss_bytes: (usage.ru_maxrss.max(0) as u64) * 1024,
        }
    }

    /// A short description for error messages and logs.
    pub fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exited with code {c}"),
            (_, Some(s)) => format!("was killed by {}", signal_name(s)),
            _ => "ended".to_owned(),
        }
    }
}

pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGSYS => "SIGSYS",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGBUS => "SIGBUS",
        libc::SIGTERM => "SIGTERM",
        libc::SIGILL => "SIGILL",
        _ => return format!("signal {sig}"),
    };
    name.to_owned()
}

/// A worker process that may still be running. Dropping it kills and reaps the process.
#[derive(Debug)]
pub struct WorkerProcess {
    pid: i32,
    pidfd: Option<OwnedFd>,
    /// The pidfd once registered with the runtime (on the first `wait`).
    watcher: Option<AsyncFd<OwnedFd>>,
    exit: Option<WorkerExit>,
}

impl WorkerProcess {
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Sends SIGKILL (through the pidfd, so a recycled pid can never be hit).
    pub fn kill(&self) {
        if self.exit.is_some() {
            return;
        }
        let raw = match (&self.pidfd, &self.watcher) {
            (Some(fd), _) => Some(fd.as_raw_fd()),
            (None, Some(w)) => Some(w.get_ref().as_raw_fd()),
            (None, None) => None,
        };
        if let Some(raw) = raw {
            // SAFETY: pidfd_send_signal with a valid pidfd, no siginfo, no flags.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    raw,
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            }
        }
    }

    /// Waits until the process has exited and reaps it. Cancel-safe: the pidfd stays owned
    /// by `self` until the exit is recorded.
    pub async fn wait(&mut self) -> io::Result<WorkerExit> {
        if let Some(exit) = self.exit {
            return Ok(exit);
        }
        if self.watcher.is_none() {
            let Some(fd) = self.pidfd.take() else {
                return Err(io::Error::other("worker pidfd missing"));
            };
            // SAFETY: the AsyncFd takes ownership of the OwnedFd, so the descriptor stays open
            // and refers to this process for as long as it is registered.
            self.watcher = Some(unsafe {
                AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)?
            });
        }
        if let Some(watcher) = &self.watcher {
            // A pidfd becomes readable once the process has exited; it never stops being
            // readable, so the guard is not cleared.
            let _guard = watcher.readable().await?;
        }
        let exit = self
            .try_reap()?
            .ok_or_else(|| io::Error::other("pidfd readable but child not reapable"))?;
        Ok(exit)
    }

    /// Reaps the process if it has exited, without blocking.
    pub fn try_reap(&mut self) -> io::Result<Option<WorkerExit>> {
        if let Some(exit) = self.exit {
            return Ok(Some(exit));
        }
        let mut status = 0;
        // SAFETY: rusage is plain data that wait4 fills in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to locals; pid is our unreaped child.
        let r = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == self.pid {
            let exit = WorkerExit::from_wait(status, &usage);
            self.exit = Some(exit);
            self.pidfd = None;
            self.watcher = None;
            return Ok(Some(exit));
        }
        if r == 0 {
            return Ok(None);
        }
        Err(io::Error::last_os_error())
    }

    /// Kills the process and waits for it, at most `limit` (SIGKILL cannot be ignored, so
    /// this only takes long if the kernel is slow to tear the process down).
    pub async fn kill_and_reap(&mut self, limit: Duration) -> Option<WorkerExit> {
        self.kill();
        tokio::time::timeout(limit, self.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if self.exit.is_some() {
            return;
        }
        self.kill();
        if matches!(self.try_reap(), Ok(Some(_))) {
            return;
        }
        // Reap in the background so no zombie is left; SIGKILL was already sent, so this
        // takes a moment at most. A plain thread rather than the runtime's blocking pool: this
        // drop may run while the runtime itself is shutting down, when that pool no longer
        // runs new work.
        let pid = self.pid;
        let pidfd = self.pidfd.take();
        // Deregister from the reactor here, while the runtime is still ours to use.
        drop(self.watcher.take());
        let reaper = move || {
            let _ = reap_blocking(pid);
            drop(pidfd);
        };
        if std::thread::Builder::new()
            .name("airlock-reaper".into())
            .spawn(reaper)
            .is_err()
        {
            let _ = reap_blocking(pid);
        }
    }
}
