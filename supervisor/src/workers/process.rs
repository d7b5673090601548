//! One worker process from the supervisor's side: how it is started, watched, killed and
//! reaped.
//!
//! Workers are forked by the zygote (`zygote.rs`), or, when there is no zygote (it could not
//! start, it failed, the policy says `worker_start = "exec"`, or a test passes extra
//! arguments), started by `posix_spawn` (vfork + `exec`) of the worker binary. Both happen on
//! one dedicated spawner thread.
//! That thread matters: `PR_SET_PDEATHSIG` fires when the *thread* that forked the child
//! exits, not the process, so forking from a tokio worker or blocking-pool thread (which can
//! come and go) would kill workers at random. The spawner thread lives as long as the daemon.
//!
//! Exit is observed through a pidfd, which also makes `kill` immune to pid reuse, and every
//! child is reaped with `waitpid` so no zombie outlives its execution.

use super::zygote::{Zygote, ZygoteError};
use airlock_proto::IPC_FD;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};
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

/// How new workers are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMode {
    /// Forked by the zygote, falling back to `exec` while the zygote is unavailable.
    Fork,
    /// Always `exec` of the worker binary (no zygote is started).
    Exec,
}

/// The spawner thread's own state: the zygote, and when to try starting one again.
struct Launcher {
    path: PathBuf,
    mode: StartMode,
    zygote: Option<Zygote>,
    /// While set and in the future, workers are exec'd: the last zygote failed.
    retry_zygote_at: Option<Instant>,
    /// How long the next wait after a zygote failure is (doubles, up to a minute).
    backoff: Duration,
}

impl Launcher {
    fn spawn(
        &mut self,
        ceiling: WorkerCeiling,
        pooled: bool,
        extra_args: &[String],
    ) -> Result<SpawnedWorker, SpawnError> {
        // Test-only arguments go to an exec'd worker: the zygote takes none.
        if self.mode == StartMode::Fork && extra_args.is_empty() {
            match self.fork(ceiling, pooled) {
                Ok(spawned) => return Ok(spawned),
                // Still waiting after the last failure: exec, without another warning.
                Err(ZygoteError::Backoff) => {}
                // Out of descriptors in this process, not a fault of the zygote: exec would
                // need a socket pair too, so the execution hears of it (and can retry).
                Err(ZygoteError::Socket(e)) => return Err(SpawnError::SocketPair(e)),
                Err(e) => {
                    self.zygote = None;
                    self.retry_zygote_at = Some(Instant::now() + self.backoff);
                    tracing::warn!(
                        error = %e,
                        retry_in_ms = u64::try_from(self.backoff.as_millis()).unwrap_or(u64::MAX),
                        "the zygote cannot fork workers; starting them by exec meanwhile"
                    );
                    self.backoff = (self.backoff * 2).min(Duration::from_secs(60));
                }
            }
        }
        spawn_blocking(&self.path, ceiling, extra_args)
    }

    fn fork(&mut self, ceiling: WorkerCeiling, pooled: bool) -> Result<SpawnedWorker, ZygoteError> {
        let zygote = match &mut self.zygote {
            Some(zygote) => zygote,
            None if self.retry_zygote_at.is_some_and(|at| Instant::now() < at) => {
                return Err(ZygoteError::Backoff);
            }
            None => self.zygote.insert(Zygote::start(&self.path)?),
        };
        let (ours, theirs) = StdUnixStream::pair().map_err(ZygoteError::Socket)?;
        let pid = zygote.fork(ceiling, pooled, &theirs)?;
        // The zygote's copy was closed after the fork; the worker holds the only other one.
        drop(theirs);
        self.retry_zygote_at = None;
        self.backoff = FIRST_ZYGOTE_BACKOFF;
        let process = WorkerProcess::watch(pid).map_err(ZygoteError::Io)?;
        Ok(SpawnedWorker {
            process,
            socket: ours,
        })
    }
}

/// The first wait before trying a failed zygote again.
const FIRST_ZYGOTE_BACKOFF: Duration = Duration::from_secs(1);

/// A started worker process and the supervisor's end of its socket.
#[derive(Debug)]
pub struct SpawnedWorker {
    pub process: WorkerProcess,
    pub socket: StdUnixStream,
}

struct SpawnRequest {
    ceiling: WorkerCeiling,
    /// The worker goes to the pool (see `ForkRequest::warm_up`).
    pooled: bool,
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
    /// Starts the spawner thread for `worker_path`. The zygote, if `mode` wants one, is
    /// started on the first request, from that thread.
    pub fn start(worker_path: PathBuf, mode: StartMode) -> io::Result<Spawner> {
        let (tx, rx) = std_mpsc::channel::<SpawnRequest>();
        let mut launcher = Launcher {
            path: worker_path.clone(),
            mode,
            zygote: None,
            retry_zygote_at: None,
            backoff: FIRST_ZYGOTE_BACKOFF,
        };
        std::thread::Builder::new()
            .name("airlock-spawner".into())
            .spawn(move || {
                while let Ok(req) = rx.recv() {
                    let result = launcher.spawn(req.ceiling, req.pooled, &req.extra_args);
                    let _ = req.reply.send(result);
                }
                // Every pool is gone: the zygote ends with its control socket, reaped here.
                drop(launcher);
            })?;
        Ok(Spawner { tx, worker_path })
    }

    pub fn worker_path(&self) -> &std::path::Path {
        &self.worker_path
    }

    /// Starts one worker; `pooled` when it will wait in the pool rather than run an execution
    /// that waits for it. `extra_args` exist for test-only worker builds.
    pub async fn spawn(
        &self,
        ceiling: WorkerCeiling,
        pooled: bool,
        extra_args: Vec<String>,
    ) -> Result<SpawnedWorker, SpawnError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(SpawnRequest {
                ceiling,
                pooled,
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
    let (ours, mut theirs) = StdUnixStream::pair().map_err(SpawnError::SocketPair)?;
    if theirs.as_raw_fd() == IPC_FD {
        // A dup2 onto the same number would keep FD_CLOEXEC; move it out of the way first.
        theirs = theirs.try_clone().map_err(SpawnError::SocketPair)?;
    }
    let mut args = vec![
        "--parent-pid".to_owned(),
        std::process::id().to_string(),
        "--memory-ceiling".to_owned(),
        ceiling.memory_ceiling_bytes.to_string(),
        "--cpu-seconds".to_owned(),
        ceiling.cpu_seconds.to_string(),
    ];
    args.extend(extra_args.iter().cloned());
    let pid =
        posix_spawn_worker(path, &args, theirs.as_raw_fd()).map_err(|source| SpawnError::Exec {
            path: path.to_owned(),
            source,
        })?;
    drop(theirs);
    let process = WorkerProcess::watch(pid).map_err(|source| SpawnError::Pidfd { pid, source })?;
    Ok(SpawnedWorker {
        process,
        socket: ours,
    })
}

/// Starts the worker binary with `posix_spawn`: glibc implements it with
/// `clone(CLONE_VM | CLONE_VFORK)`, so unlike `fork` it copies no page tables and leaves no
/// copy-on-write faults behind in the daemon, which would otherwise cost every execution
/// hundreds of page faults in a process as large as a tokio daemon. The child gets an empty
/// environment, `/dev/null` on 0–2, `ipc_fd` on fd 3, no blocked signals and default
/// dispositions (the daemon ignores SIGPIPE; ignored signals would survive exec).
///
/// `PR_SET_PDEATHSIG` cannot be set between vfork and exec; the worker sets it itself first
/// thing and then checks that its parent is still the pid it was given, which closes the
/// window in which the daemon could die unnoticed.
pub(super) fn posix_spawn_worker(
    path: &std::path::Path,
    args: &[String],
    ipc_fd: RawFd,
) -> io::Result<i32> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    let to_c =
        |bytes: &[u8]| CString::new(bytes).map_err(|_| io::Error::other("NUL byte in argument"));
    let program = to_c(path.as_os_str().as_bytes())?;
    let mut owned = vec![program.clone()];
    for a in args {
        owned.push(to_c(a.as_bytes())?);
    }
    let mut argv: Vec<*mut libc::c_char> = owned.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv.push(std::ptr::null_mut());
    let envp: [*mut libc::c_char; 1] = [std::ptr::null_mut()];

    let mut actions = SpawnFileActions::new()?;
    actions.open(0, c"/dev/null", libc::O_RDONLY)?;
    actions.open(1, c"/dev/null", libc::O_WRONLY)?;
    actions.open(2, c"/dev/null", libc::O_WRONLY)?;
    // dup2 clears FD_CLOEXEC on the new descriptor, so only fd 3 crosses the exec.
    actions.dup2(ipc_fd, IPC_FD)?;
    let attr = SpawnAttr::new()?;

    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is valid for the call: the program and argv strings are owned by
    // `owned`, argv and envp are NULL-terminated, and the actions and attributes were
    // initialised by their constructors.
    let rc = unsafe {
        libc::posix_spawn(
            &mut pid,
            program.as_ptr(),
            &actions.0,
            &attr.0,
            argv.as_ptr(),
            envp.as_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(pid)
}

/// `posix_spawn_file_actions_t`, destroyed on drop.
struct SpawnFileActions(libc::posix_spawn_file_actions_t);

impl SpawnFileActions {
    fn new() -> io::Result<Self> {
        // SAFETY: an all-zero value is a valid argument to init, which overwrites it.
        let mut actions: libc::posix_spawn_file_actions_t = unsafe { std::mem::zeroed() };
        // SAFETY: `actions` is a valid, writable file-actions object.
        check_spawn(unsafe { libc::posix_spawn_file_actions_init(&mut actions) })?;
        Ok(SpawnFileActions(actions))
    }

    fn open(&mut self, fd: RawFd, path: &std::ffi::CStr, flags: libc::c_int) -> io::Result<()> {
        // SAFETY: initialised actions; glibc copies the path.
        check_spawn(unsafe {
            libc::posix_spawn_file_actions_addopen(&mut self.0, fd, path.as_ptr(), flags, 0)
        })
    }

    fn dup2(&mut self, from: RawFd, to: RawFd) -> io::Result<()> {
        // SAFETY: initialised actions; both descriptors are plain integers here.
        check_spawn(unsafe { libc::posix_spawn_file_actions_adddup2(&mut self.0, from, to) })
    }
}

impl Drop for SpawnFileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new` and destroyed exactly once.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

/// `posix_spawnattr_t` with an empty signal mask and default dispositions, destroyed on drop.
struct SpawnAttr(libc::posix_spawnattr_t);

impl SpawnAttr {
    fn new() -> io::Result<Self> {
        // SAFETY: an all-zero value is a valid argument to init, which overwrites it.
        let mut attr: libc::posix_spawnattr_t = unsafe { std::mem::zeroed() };
        // SAFETY: `attr` is a valid, writable attributes object.
        check_spawn(unsafe { libc::posix_spawnattr_init(&mut attr) })?;
        let mut attr = SpawnAttr(attr);
        // SAFETY: sigset_t is plain data initialised by sigemptyset/sigfillset.
        let (mut none, mut all): (libc::sigset_t, libc::sigset_t) =
            unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        let ptr: *mut libc::posix_spawnattr_t = &mut attr.0;
        // SAFETY: valid sigsets and an initialised attributes object.
        unsafe {
            libc::sigemptyset(&mut none);
            libc::sigfillset(&mut all);
            check_spawn(libc::posix_spawnattr_setsigmask(ptr, &none))?;
            check_spawn(libc::posix_spawnattr_setsigdefault(ptr, &all))?;
            check_spawn(libc::posix_spawnattr_setflags(
                ptr,
                // Two flag bits (0x08 | 0x04): the C API takes them as a short.
                #[allow(clippy::cast_possible_truncation)]
                {
                    (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as libc::c_short
                },
            ))?;
        }
        Ok(attr)
    }
}

impl Drop for SpawnAttr {
    fn drop(&mut self) {
        // SAFETY: initialised in `new` and destroyed exactly once.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

fn check_spawn(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

pub(super) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // A descriptor is an int; the syscall's `long` only widens it.
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(super) fn reap_blocking(pid: i32) -> io::Result<WorkerExit> {
    let mut status = 0;
    loop {
        // SAFETY: a valid pointer to a local; pid is our unreaped child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(WorkerExit::from_wait(status));
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
}

impl WorkerExit {
    fn from_wait(status: i32) -> WorkerExit {
        let (code, signal) = if libc::WIFEXITED(status) {
            (Some(libc::WEXITSTATUS(status)), None)
        } else if libc::WIFSIGNALED(status) {
            (None, Some(libc::WTERMSIG(status)))
        } else {
            (None, None)
        };
        WorkerExit { code, signal }
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

pub(crate) fn signal_name(sig: i32) -> String {
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
    /// Takes charge of `pid`, a child of this process not yet reaped (so the pid is ours):
    /// opens its pidfd. Without one it cannot be watched, so it is killed and reaped instead.
    fn watch(pid: i32) -> io::Result<WorkerProcess> {
        match pidfd_open(pid) {
            Ok(pidfd) => Ok(WorkerProcess {
                pid,
                pidfd: Some(pidfd),
                watcher: None,
                exit: None,
            }),
            Err(e) => {
                // SAFETY: plain kill(2) of our unreaped child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                let _ = reap_blocking(pid);
                Err(e)
            }
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Lowers the worker's CPU priority to niceness `nice` (a worker is single-threaded, so
    /// its one thread is the process). Raising one's own child's niceness needs no privilege;
    /// a failure only leaves it at the priority it had, and is logged.
    pub fn lower_priority(&self, nice: i32) {
        if self.exit.is_some() {
            return;
        }
        let Ok(pid) = libc::id_t::try_from(self.pid) else {
            return;
        };
        // SAFETY: setpriority(2) with integers only, on our child that is not reaped yet (its
        // pid cannot have been reused).
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, pid, nice) } != 0 {
            tracing::debug!(pid = self.pid, nice, error = %io::Error::last_os_error(), "cannot lower a worker's priority");
        }
    }

    /// The process's peak resident set size (`VmHWM`), while it is still running.
    ///
    /// Read from /proc rather than taken from `getrusage`/`wait4`: Linux carries `ru_maxrss`
    /// over `execve` from the address space being replaced, and for a `posix_spawn`ed child
    /// that is the daemon's own, so it would report the daemon's size.
    pub fn peak_rss_bytes(&self) -> Option<u64> {
        if self.exit.is_some() {
            return None;
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
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
        // SAFETY: a valid pointer to a local; pid is our unreaped child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if r == self.pid {
            let exit = WorkerExit::from_wait(status);
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
