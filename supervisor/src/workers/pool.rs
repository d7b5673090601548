//! Pre-started, already locked-down workers, so an execution does not pay for `exec`, the
//! lockdown and engine start-up.
//!
//! Each worker still runs exactly one execution and then exits: the pool only moves the
//! start-up earlier, it never reuses a process that has seen untrusted code. A worker is
//! added to the pool only after it has sent `Ready`, which it does only after every
//! lockdown layer is in force.

use crate::workers::process::{SpawnError, SpawnedWorker, Spawner, WorkerCeiling, WorkerProcess};
use airlock_proto::frame::{FrameDecoder, FrameError, decode, encode};
use airlock_proto::{
    LockdownReport, MAX_FRAME_LEN, PROTOCOL_VERSION, STAY_AWAKE, SupervisorMessage, WorkerMessage,
};
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::Notify;
use tracing::{debug, warn};

/// How long the pool waits before replacing a worker an execution took. The execution is
/// usually answered by then: on a small machine, a fork and the new worker's warm-up started
/// at once compete with writing that answer and with the client reading it (measured on 2
/// cores: the pre-started p50 at the client fell by about a tenth, see docs/performance.md).
/// Executions never wait for it: with the pool empty, each starts its own worker.
const REFILL_DELAY: Duration = Duration::from_millis(1);

/// How long after a worker's `Done` the daemon hangs up on it (so it exits) and asks the pool
/// to replace it, when that execution was the only one running: its answer is usually out by
/// then, and on a small machine the worker's exit (unmapping its memory) competes with
/// writing the answer and with the client reading it (measured on 2 cores, see
/// docs/performance.md). Under load the hang-up is at once: there the delay only kept processes
/// alive longer and cost throughput.
pub const AFTER_ANSWER: Duration = Duration::from_millis(1);

/// How long the daemon waits awake for a worker's next message when its execution is the
/// only one running ([`WorkerChannel::spin_for_message`]), before it sleeps until woken. A
/// trivial program's `Done` comes 0.1–0.25 ms after its `Start` on 2 cores; being woken for it
/// instead costs tens of microseconds more (see docs/performance.md). Bounded so that a program
/// doing real work costs the daemon at most this much CPU.
pub const SPIN_FOR_WORKER: Duration = Duration::from_micros(300);

/// How long a new worker may take to lock down and say `Ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum WorkerStartError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("worker {pid} {exit} before it was ready{hint}")]
    DiedBeforeReady {
        pid: i32,
        exit: String,
        hint: &'static str,
    },
    #[error("worker {pid} did not become ready within {0:?}", READY_TIMEOUT)]
    ReadyTimeout { pid: i32 },
    #[error(
        "worker {pid} speaks protocol version {got}, this daemon speaks {want}; the worker binary does not belong to this airlockd"
    )]
    ProtocolMismatch { pid: i32, got: u32, want: u32 },
    #[error("worker {pid} broke the handshake: {detail}")]
    Handshake { pid: i32, detail: String },
}

/// A locked-down worker waiting for its one execution.
#[derive(Debug)]
pub struct ReadyWorker {
    pub process: WorkerProcess,
    pub channel: WorkerChannel,
    pub lockdown: LockdownReport,
    /// How long exec + lockdown + engine start took.
    pub start_duration: Duration,
    /// When it was last told `StayAwake` ([`WorkerPool::wake_next`]).
    woken: Option<Instant>,
}

/// The framed socket to one worker.
#[derive(Debug)]
pub struct WorkerChannel {
    stream: UnixStream,
    decoder: FrameDecoder,
    read_buf: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("worker socket i/o failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("worker sent a malformed frame: {0}")]
    Frame(#[from] FrameError),
    #[error("worker closed its socket")]
    Closed,
}

impl WorkerChannel {
    fn new(stream: UnixStream) -> Self {
        WorkerChannel {
            stream,
            decoder: FrameDecoder::new(MAX_FRAME_LEN),
            // Room for 64 KiB per read, never zeroed: `read_buf` fills the spare capacity (a
            // zeroed buffer cost a 64 KiB memset per worker).
            read_buf: Vec::with_capacity(64 * 1024),
        }
    }

    pub async fn send(&mut self, msg: &SupervisorMessage) -> Result<(), ChannelError> {
        let frame = encode(msg)?;
        self.stream.write_all(&frame).await?;
        Ok(())
    }

    /// Sends `msg` now, without waiting: `Ok` when the whole frame went out, or none of it
    /// did because the socket buffer is full (the message is then simply not sent). A frame
    /// only partly written is an error: the stream can no longer be trusted to stay in step,
    /// so the worker must go.
    fn send_now(&self, msg: &SupervisorMessage) -> Result<(), ChannelError> {
        let frame = encode(msg)?;
        // SAFETY: `frame` is valid for its length; the fd is this channel's socket, open for
        // as long as `self.stream` is. MSG_NOSIGNAL: a dead worker is an error, not SIGPIPE.
        let n = unsafe {
            libc::send(
                self.stream.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        match usize::try_from(n) {
            Ok(n) if n == frame.len() => Ok(()),
            Ok(_) => Err(ChannelError::Io(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                "a frame was only partly written",
            ))),
            Err(_) => {
                let err = std::io::Error::last_os_error();
                if err.kind() == std::io::ErrorKind::WouldBlock {
                    Ok(())
                } else {
                    Err(err.into())
                }
            }
        }
    }

    /// Waits up to `budget` for the worker's next bytes without giving up the thread: reads
    /// them as they arrive, so that the next [`WorkerChannel::recv`] need not wait to be
    /// woken (tens of microseconds on a small machine). `true` when something arrived (or
    /// the worker hung up, which `recv` then reports). Only for an execution running alone
    /// (`WorkerPool::in_use`): the runtime thread does nothing else meanwhile.
    pub fn spin_for_message(&mut self, budget: Duration) -> bool {
        if self.decoder.has_payload() {
            return true;
        }
        let until = Instant::now() + budget;
        self.read_buf.clear();
        loop {
            let spare = self.read_buf.spare_capacity_mut();
            // SAFETY: `spare` is writable memory of the length given; the fd is this
            // channel's socket. recv writes at most that many bytes.
            let n = unsafe {
                libc::recv(
                    self.stream.as_raw_fd(),
                    spare.as_mut_ptr().cast(),
                    spare.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            match usize::try_from(n) {
                Ok(0) => return true,
                Ok(n) => {
                    // SAFETY: recv initialised the first `n` bytes of the spare capacity.
                    unsafe { self.read_buf.set_len(n) };
                    self.decoder.feed(&self.read_buf);
                    return true;
                }
                Err(_) => {
                    let err = std::io::Error::last_os_error();
                    if err.kind() != std::io::ErrorKind::WouldBlock {
                        // `recv` will meet the same error and report it.
                        return true;
                    }
                }
            }
            if Instant::now() >= until {
                return false;
            }
            // Not a bare spin: on a small machine the worker may be waiting for this very CPU.
            std::thread::yield_now();
        }
    }

    /// Next message from the worker. Cancel-safe: bytes already read stay in the decoder.
    pub async fn recv(&mut self) -> Result<WorkerMessage, ChannelError> {
        loop {
            if let Some(payload) = self.decoder.next_payload()? {
                return Ok(decode(&payload)?);
            }
            self.read_buf.clear();
            let n = self.stream.read_buf(&mut self.read_buf).await?;
            if n == 0 {
                self.decoder.finish()?;
                return Err(ChannelError::Closed);
            }
            self.decoder.feed(&self.read_buf);
        }
    }
}

/// Starts one worker and waits for its `Ready`; `pooled` when it will wait in the pool.
pub async fn start_worker(
    spawner: &Spawner,
    ceiling: WorkerCeiling,
    pooled: bool,
    extra_args: Vec<String>,
) -> Result<ReadyWorker, WorkerStartError> {
    let started = Instant::now();
    let SpawnedWorker {
        mut process,
        socket,
    } = spawner.spawn(ceiling, pooled, extra_args).await?;
    let pid = process.pid();
    socket
        .set_nonblocking(true)
        .map_err(|e| WorkerStartError::Handshake {
            pid,
            detail: e.to_string(),
        })?;
    let stream = UnixStream::from_std(socket).map_err(|e| WorkerStartError::Handshake {
        pid,
        detail: e.to_string(),
    })?;
    let mut channel = WorkerChannel::new(stream);
    let first = tokio::time::timeout(READY_TIMEOUT, channel.recv()).await;
    let msg = match first {
        Err(_) => {
            process.kill_and_reap(Duration::from_secs(1)).await;
            return Err(WorkerStartError::ReadyTimeout { pid });
        }
        Ok(Err(ChannelError::Closed)) | Ok(Err(ChannelError::Io(_))) => {
            let exit = process.kill_and_reap(Duration::from_secs(2)).await;
            let (exit, hint) = match exit {
                Some(e) if e.code == Some(70) => (
                    e.describe(),
                    ": the worker could not lock itself down (is Landlock enabled in this kernel? see docs/sandbox.md)",
                ),
                Some(e) if e.code == Some(64) => (
                    e.describe(),
                    ": the worker binary does not match this airlockd",
                ),
                Some(e) => (e.describe(), ""),
                None => ("vanished".to_owned(), ""),
            };
            return Err(WorkerStartError::DiedBeforeReady { pid, exit, hint });
        }
        Ok(Err(e)) => {
            process.kill_and_reap(Duration::from_secs(1)).await;
            return Err(WorkerStartError::Handshake {
                pid,
                detail: e.to_string(),
            });
        }
        Ok(Ok(msg)) => msg,
    };
    match msg {
        WorkerMessage::Ready {
            protocol_version,
            lockdown,
        } if protocol_version == PROTOCOL_VERSION => {
            debug!(
                pid,
                ?lockdown,
                elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
                "worker ready"
            );
            Ok(ReadyWorker {
                process,
                channel,
                lockdown,
                start_duration: started.elapsed(),
                woken: None,
            })
        }
        WorkerMessage::Ready {
            protocol_version, ..
        } => {
            process.kill_and_reap(Duration::from_secs(1)).await;
            Err(WorkerStartError::ProtocolMismatch {
                pid,
                got: protocol_version,
                want: PROTOCOL_VERSION,
            })
        }
        other => {
            process.kill_and_reap(Duration::from_secs(1)).await;
            Err(WorkerStartError::Handshake {
                pid,
                detail: format!("expected Ready, got {}", message_name(&other)),
            })
        }
    }
}

pub fn message_name(msg: &WorkerMessage) -> &'static str {
    match msg {
        WorkerMessage::Ready { .. } => "Ready",
        WorkerMessage::ToolReferences(_) => "ToolReferences",
        WorkerMessage::ToolCall { .. } => "ToolCall",
        WorkerMessage::Idle { .. } => "Idle",
        WorkerMessage::Console { .. } => "Console",
        WorkerMessage::Progress { .. } => "Progress",
        WorkerMessage::Done { .. } => "Done",
    }
}

/// Where a checked-out worker came from, for the execution's stats.
#[derive(Debug, Clone, Copy)]
pub struct Checkout {
    pub from_pool: bool,
    /// Time the execution waited for a worker (zero when the pool had one ready).
    pub wait: Duration,
}

#[derive(Debug)]
struct PoolInner {
    spawner: Spawner,
    ceiling: WorkerCeiling,
    target: usize,
    idle: Mutex<VecDeque<ReadyWorker>>,
    starting: AtomicUsize,
    /// Workers checked out and not yet given back by `replenish`: the executions running.
    in_use: AtomicUsize,
    refill: Arc<Notify>,
    closed: AtomicBool,
    last_lockdown: Mutex<Option<LockdownReport>>,
    last_error: Mutex<Option<String>>,
}

/// The pool of pre-started workers.
#[derive(Debug, Clone)]
pub struct WorkerPool {
    inner: Arc<PoolInner>,
}

/// A snapshot for `/v1/health`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PoolStatus {
    pub target: usize,
    pub idle: usize,
    pub starting: usize,
    pub worker: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lockdown: Option<LockdownReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl WorkerPool {
    /// Creates the pool and starts filling it in the background.
    pub fn start(spawner: Spawner, ceiling: WorkerCeiling, target: usize) -> WorkerPool {
        let pool = WorkerPool {
            inner: Arc::new(PoolInner {
                spawner,
                ceiling,
                target,
                idle: Mutex::new(VecDeque::with_capacity(target)),
                starting: AtomicUsize::new(0),
                in_use: AtomicUsize::new(0),
                refill: Arc::new(Notify::new()),
                closed: AtomicBool::new(false),
                last_lockdown: Mutex::new(None),
                last_error: Mutex::new(None),
            }),
        };
        if target > 0 {
            let weak = Arc::downgrade(&pool.inner);
            tokio::spawn(refill_loop(weak));
        }
        pool
    }

    pub fn ceiling(&self) -> WorkerCeiling {
        self.inner.ceiling
    }

    /// A worker for one execution: a pre-started one if available, else a new one.
    pub async fn checkout(&self) -> Result<(ReadyWorker, Checkout), WorkerStartError> {
        let started = Instant::now();
        if let Some(pooled) = self.take_idle() {
            return Ok(pooled);
        }
        let worker =
            start_worker(&self.inner.spawner, self.inner.ceiling, false, Vec::new()).await?;
        *lock(&self.inner.last_lockdown) = Some(worker.lockdown.clone());
        self.inner.in_use.fetch_add(1, Ordering::Relaxed);
        Ok((
            worker,
            Checkout {
                from_pool: false,
                wait: started.elapsed(),
            },
        ))
    }

    /// A pre-started worker for one execution, if one is idle and alive; never starts one
    /// and never waits. Counts as a [`WorkerPool::checkout`] (one [`WorkerPool::replenish`]
    /// follows).
    pub fn take_idle(&self) -> Option<(ReadyWorker, Checkout)> {
        let started = Instant::now();
        // The refill is deliberately not started here but by `replenish` once the execution
        // is over: starting a worker costs a few milliseconds of CPU (exec, dynamic loading,
        // lockdown, engine start), and on a small machine it would compete with the very
        // execution that just took a pooled worker.
        // The newest worker first: it finished its warm-up last, so more of the engine's
        // memory is still in the CPU's caches than an older one's (on 2 cores, about 20–40 µs
        // of a trivial execution in steady use; see docs/performance.md).
        loop {
            let mut worker = lock(&self.inner.idle).pop_back()?;
            // A pooled worker may have died while idle (killed from outside, OOM killer).
            if matches!(worker.process.try_reap(), Ok(None)) {
                self.inner.in_use.fetch_add(1, Ordering::Relaxed);
                return Some((
                    worker,
                    Checkout {
                        from_pool: true,
                        wait: started.elapsed(),
                    },
                ));
            }
            warn!(
                pid = worker.process.pid(),
                "pooled worker died while idle; trying the next"
            );
            self.inner.refill.notify_one();
        }
    }

    /// Gives back an execution's place and asks the pool to top itself up in the background;
    /// called once per checkout, when its worker is gone or hung up on.
    pub fn replenish(&self) {
        // Every checkout that gave a worker is followed by exactly one replenish.
        let _ = self
            .inner
            .in_use
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        self.inner.refill.notify_one();
    }

    /// An execution is about to be admitted: when none is running, tells the worker the next
    /// `checkout` will take ([`SupervisorMessage::StayAwake`]) so that it is awake by the time
    /// its `Start` comes. Never waits. Under load nothing is sent: the workers would only
    /// compete with the executions running for the CPUs. A worker told less than
    /// [`STAY_AWAKE`] ago is awake still and is not told again (the HTTP door wakes it as a
    /// request's first bytes arrive, and again, as a fallback, in the request's handler).
    pub fn wake_next(&self) {
        if self.in_use() > 0 {
            return;
        }
        let mut idle = lock(&self.inner.idle);
        let Some(next) = idle.back_mut() else {
            return;
        };
        let now = Instant::now();
        if next
            .woken
            .is_some_and(|at| now.saturating_duration_since(at) < STAY_AWAKE)
        {
            return;
        }
        match next.channel.send_now(&SupervisorMessage::StayAwake) {
            Ok(()) => next.woken = Some(now),
            Err(e) => {
                // A dead worker, or a frame half written: either way it cannot take an
                // execution. Dropping it kills and reaps it; the pool replaces it.
                warn!(pid = next.process.pid(), error = %e, "dropping a pooled worker that could not be woken");
                let broken = idle.pop_back();
                drop(idle);
                drop(broken);
                self.inner.refill.notify_one();
            }
        }
    }

    /// How many executions hold a worker now (checked out, not yet replenished).
    pub fn in_use(&self) -> usize {
        self.inner.in_use.load(Ordering::Relaxed)
    }

    /// Starts a worker outside the pool, e.g. with test-only arguments.
    pub async fn start_unpooled(
        &self,
        extra_args: Vec<String>,
    ) -> Result<ReadyWorker, WorkerStartError> {
        start_worker(&self.inner.spawner, self.inner.ceiling, false, extra_args).await
    }

    pub fn status(&self) -> PoolStatus {
        PoolStatus {
            target: self.inner.target,
            idle: lock(&self.inner.idle).len(),
            starting: self.inner.starting.load(Ordering::Relaxed),
            worker: self.inner.spawner.worker_path().display().to_string(),
            lockdown: lock(&self.inner.last_lockdown).clone(),
            last_error: lock(&self.inner.last_error).clone(),
        }
    }

    /// Stops refilling and kills every idle worker.
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.refill.notify_one();
        let idle: Vec<ReadyWorker> = lock(&self.inner.idle).drain(..).collect();
        for mut w in idle {
            // Tell it to exit cleanly; SIGKILL if it does not.
            let _ = w.channel.send(&SupervisorMessage::Cancel).await;
            if tokio::time::timeout(Duration::from_millis(200), w.process.wait())
                .await
                .is_err()
            {
                w.process.kill_and_reap(Duration::from_secs(1)).await;
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a VecDeque of workers inconsistent.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn refill_loop(weak: std::sync::Weak<PoolInner>) {
    let mut failures: u32 = 0;
    loop {
        let Some(inner) = weak.upgrade() else { return };
        if inner.closed.load(Ordering::SeqCst) {
            return;
        }
        let have = lock(&inner.idle).len();
        if have >= inner.target {
            // notify_one stores a permit when no one waits, so a checkout between this check
            // and the await is not missed.
            let refill = inner.refill.clone();
            drop(inner);
            refill.notified().await;
            tokio::time::sleep(REFILL_DELAY).await;
            continue;
        }
        inner.starting.fetch_add(1, Ordering::Relaxed);
        let result = start_worker(&inner.spawner, inner.ceiling, true, Vec::new()).await;
        inner.starting.fetch_sub(1, Ordering::Relaxed);
        match result {
            Ok(worker) => {
                failures = 0;
                *lock(&inner.last_lockdown) = Some(worker.lockdown.clone());
                *lock(&inner.last_error) = None;
                if inner.closed.load(Ordering::SeqCst) {
                    continue;
                }
                lock(&inner.idle).push_back(worker);
            }
            Err(e) => {
                failures += 1;
                // Back off so a broken worker binary does not turn into a fork loop.
                let delay = Duration::from_millis(100u64 << failures.min(6));
                if failures == 1 {
                    tracing::error!(error = %e, "cannot start a pool worker; retrying with backoff");
                }
                *lock(&inner.last_error) = Some(e.to_string());
                drop(inner);
                tokio::time::sleep(delay).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_proto::frame::decode_packet;

    fn idle(results: u32) -> Vec<u8> {
        encode(&WorkerMessage::Idle { results }).unwrap()
    }

    #[tokio::test]
    async fn spin_for_message_reads_what_arrives_and_gives_up_after_its_budget() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let mut channel = WorkerChannel::new(ours);

        // Nothing comes: false, after the budget and not before.
        let started = Instant::now();
        assert!(!channel.spin_for_message(Duration::from_micros(300)));
        assert!(started.elapsed() >= Duration::from_micros(300));

        // A message already there is read at once and `recv` returns it.
        theirs.write_all(&idle(1)).await.unwrap();
        assert!(channel.spin_for_message(Duration::from_secs(10)));
        assert_eq!(
            channel.recv().await.unwrap(),
            WorkerMessage::Idle { results: 1 }
        );

        // Two in one read: the second is already whole, so there is nothing to wait for.
        let mut two = idle(2);
        two.extend(idle(3));
        theirs.write_all(&two).await.unwrap();
        assert!(channel.spin_for_message(Duration::from_secs(10)));
        assert_eq!(
            channel.recv().await.unwrap(),
            WorkerMessage::Idle { results: 2 }
        );
        let started = Instant::now();
        assert!(channel.spin_for_message(Duration::from_secs(10)));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            channel.recv().await.unwrap(),
            WorkerMessage::Idle { results: 3 }
        );

        // A message arriving while it spins (from another thread) ends the spin early.
        let writer = std::thread::spawn({
            let theirs = theirs.into_std().unwrap();
            move || {
                std::thread::sleep(Duration::from_millis(20));
                theirs.set_nonblocking(false).unwrap();
                std::io::Write::write_all(&mut &theirs, &idle(4)).unwrap();
                theirs
            }
        });
        let started = Instant::now();
        assert!(channel.spin_for_message(Duration::from_secs(10)));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            channel.recv().await.unwrap(),
            WorkerMessage::Idle { results: 4 }
        );

        // The worker hanging up ends it too; `recv` reports it.
        drop(writer.join().unwrap());
        assert!(channel.spin_for_message(Duration::from_secs(10)));
        assert!(matches!(channel.recv().await, Err(ChannelError::Closed)));
    }

    #[tokio::test]
    async fn send_now_writes_a_whole_frame_or_reports_the_dead_worker() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let channel = WorkerChannel::new(ours);
        channel.send_now(&SupervisorMessage::StayAwake).unwrap();
        let theirs = theirs.into_std().unwrap();
        theirs.set_nonblocking(false).unwrap();
        let mut frame = [0u8; 64];
        let n = std::io::Read::read(&mut &theirs, &mut frame).unwrap();
        assert_eq!(
            decode_packet::<SupervisorMessage>(&frame[..n], MAX_FRAME_LEN).unwrap(),
            SupervisorMessage::StayAwake
        );
        drop(theirs);
        assert!(channel.send_now(&SupervisorMessage::StayAwake).is_err());
    }
}
