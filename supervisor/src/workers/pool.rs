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
    LockdownReport, MAX_FRAME_LEN, PROTOCOL_VERSION, SupervisorMessage, WorkerMessage,
};
use std::collections::VecDeque;
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
}

/// The framed socket to one worker.
///
/// Messages to a running worker are queued ([`WorkerChannel::queue`]) and written while
/// [`WorkerChannel::recv`] waits for the worker's next message, never by a write that waits on
/// its own. A worker that sends many tool calls at once may block on its write until the
/// supervisor reads; had the supervisor blocked on its write of a result meanwhile (the worker
/// not reading yet), neither side would move again, and the execution's deadline (polled by the
/// same loop) would never fire. Reading and writing in one wait keeps both directions moving,
/// and a worker that never reads only grows the queue, which holds results the supervisor holds
/// anyway (at most `max_tool_calls` of them, each a bounded frame) until the deadline ends it.
#[derive(Debug)]
pub struct WorkerChannel {
    stream: UnixStream,
    decoder: FrameDecoder,
    read_buf: Vec<u8>,
    /// Frames queued for the worker; `out[written..]` is not written yet.
    out: Vec<u8>,
    written: usize,
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
            out: Vec::new(),
            written: 0,
        }
    }

    /// Sends one message and waits until it is written: for a worker that is reading (the
    /// `Start` of an execution). To a running worker, [`WorkerChannel::queue`].
    pub async fn send(&mut self, msg: &SupervisorMessage) -> Result<(), ChannelError> {
        let frame = encode(msg)?;
        self.stream.write_all(&frame).await?;
        Ok(())
    }

    /// Queues one message for the worker; [`WorkerChannel::recv`] writes it.
    pub fn queue(&mut self, msg: &SupervisorMessage) -> Result<(), ChannelError> {
        let frame = encode(msg)?;
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
        }
        self.out.extend_from_slice(&frame);
        Ok(())
    }

    /// Next message from the worker, writing queued messages meanwhile. Cancel-safe: bytes
    /// already read stay in the decoder, and a write either happened (and is counted) or did
    /// not start.
    pub async fn recv(&mut self) -> Result<WorkerMessage, ChannelError> {
        loop {
            if let Some(payload) = self.decoder.next_payload()? {
                return Ok(decode(&payload)?);
            }
            self.read_buf.clear();
            let (mut reader, mut writer) = self.stream.split();
            let pending = self.written < self.out.len();
            tokio::select! {
                read = reader.read_buf(&mut self.read_buf) => {
                    if read? == 0 {
                        self.decoder.finish()?;
                        return Err(ChannelError::Closed);
                    }
                    self.decoder.feed(&self.read_buf);
                }
                wrote = writer.write(&self.out[self.written..]), if pending => match wrote {
                    Ok(n) => self.written += n,
                    // The worker closed its end: what it still sent is read; what was queued
                    // for it has nobody to read it.
                    Err(e) => {
                        debug!(error = %e, "could not write to the worker; dropping what was queued");
                        self.written = self.out.len();
                    }
                },
            }
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

pub(crate) fn message_name(msg: &WorkerMessage) -> &'static str {
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
