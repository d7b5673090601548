//! The daemon as a whole: [`run`] serves the agent API on a listener until a shutdown
//! future resolves, then drains. `airlockd`'s `main` is a thin wrapper around it, and tests
//! call it in-process with their own listener and tool sources.

use crate::audit_log::{AuditLog, AuditLogError};
use crate::control_socket::serve_connection;
use crate::execution::ExecutionEnv;
use crate::metrics::{Gauges, Metrics};
use crate::tool_catalogue::{CatalogueView, ToolCatalogue};
use crate::tool_source::ToolRegistry;
use crate::worker_pool::{PoolStatus, WorkerPool};
use crate::worker_process::{Spawner, WorkerCeiling};
use airlock_policy::{LimitSettings, Policy, Principal};
use serde::Serialize;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::UnixListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// Everything `run` needs besides the listener.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub policy: Policy,
    /// The `airlock-worker` binary to exec for every execution.
    pub worker_path: PathBuf,
    pub tools: ToolRegistry,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(
        "worker binary {0} does not exist or is not executable; build it (cargo build) or set daemon.worker_path in the policy"
    )]
    WorkerMissing(PathBuf),
    #[error("cannot start the worker spawner thread: {0}")]
    Spawner(std::io::Error),
    #[error(
        "{0}; fix it, set [audit] directory to a private directory, or (knowingly) turn the audit trail off with [audit] enabled = false"
    )]
    Audit(AuditLogError),
}

/// Shared state of a running daemon.
#[derive(Debug)]
pub struct DaemonState {
    policy: Arc<Policy>,
    principals: Vec<Arc<Principal>>,
    env: ExecutionEnv,
    slots: Arc<Semaphore>,
    max_slots: usize,
    next_id: AtomicU64,
    executions_total: AtomicU64,
    started: Instant,
    pub metrics: Metrics,
    /// The tools as SDK files and a search index, per principal (`GET /v1/sdk`, search).
    pub catalogue: ToolCatalogue,
    /// The audit trail (`[audit]`): `audit.record(…)` never waits; `audit.status()` for health.
    pub audit: AuditLog,
}

impl DaemonState {
    pub fn admit(&self, uid: u32, gid: u32, groups: &[u32]) -> Option<Arc<Principal>> {
        let admitted = self.policy.admit(uid, gid, groups)?;
        self.principals
            .iter()
            .find(|p| p.name == admitted.name)
            .cloned()
    }

    pub fn policy_origin(&self) -> &str {
        &self.policy.origin
    }

    pub fn limits(&self) -> &LimitSettings {
        &self.policy.limits
    }

    pub fn execution_env(&self) -> ExecutionEnv {
        self.env.clone()
    }

    /// Waits for a free execution slot; fails only once the daemon is shutting down.
    pub async fn execution_slot(&self) -> Result<OwnedSemaphorePermit, tokio::sync::AcquireError> {
        let permit = self.slots.clone().acquire_owned().await?;
        self.executions_total.fetch_add(1, Ordering::Relaxed);
        Ok(permit)
    }

    /// A unique, roughly time-ordered execution id.
    pub fn next_execution_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        format!("ex_{ms:x}_{n}")
    }

    /// `GET /metrics`.
    pub fn metrics_text(&self) -> String {
        let pool = self.env.pool.status();
        self.metrics.render(Gauges {
            running: self.max_slots - self.slots.available_permits(),
            max_concurrent: self.max_slots,
            pool_idle: pool.idle,
            pool_target: pool.target,
            pool_starting: pool.starting,
            uptime_s: self.started.elapsed().as_secs(),
        })
    }

    /// The SDK and search index for `principal` (may start lazily started servers).
    pub async fn catalogue_view(&self, principal: &Principal) -> CatalogueView {
        self.catalogue.view(&self.env.tools, principal).await
    }

    pub fn health(&self) -> Health {
        Health {
            status: "ok",
            version: env!("CARGO_PKG_VERSION"),
            uptime_s: self.started.elapsed().as_secs(),
            policy: self.policy.origin.clone(),
            pool: self.env.pool.status(),
            executions: ExecutionCounts {
                running: self.max_slots - self.slots.available_permits(),
                total: self.executions_total.load(Ordering::Relaxed),
                max_concurrent: self.max_slots,
            },
        }
    }
}

/// `GET /v1/health`.
#[derive(Debug, Serialize)]
pub struct Health {
    pub status: &'static str,
    pub version: &'static str,
    pub uptime_s: u64,
    pub policy: String,
    pub pool: PoolStatus,
    pub executions: ExecutionCounts,
}

#[derive(Debug, Serialize)]
pub struct ExecutionCounts {
    pub running: usize,
    pub total: u64,
    pub max_concurrent: usize,
}

/// The ceilings pool workers are started with, derived from the policy's limits: the
/// address-space limit leaves room above the engine heap for the binary, the stack and the
/// TypeScript compiler's arena; the CPU limit is a backstop behind the wall-clock deadline.
pub fn worker_ceiling(limits: &LimitSettings) -> WorkerCeiling {
    WorkerCeiling {
        memory_ceiling_bytes: limits
            .memory_bytes
            .saturating_mul(2)
            .saturating_add(512 << 20),
        cpu_seconds: limits.max_timeout_ms.div_ceil(1000) + 2,
    }
}

/// Serves the agent API on `listener` until `shutdown` resolves, then stops accepting, lets
/// running executions finish for up to `daemon.shutdown_grace_ms`, and kills what remains.
pub async fn run(
    config: DaemonConfig,
    listener: UnixListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    if !is_executable(&config.worker_path) {
        return Err(DaemonError::WorkerMissing(config.worker_path));
    }
    let policy = Arc::new(config.policy);
    // Before anything starts: a daemon that cannot keep its audit trail does not serve. (Opening
    // touches the disk once, at startup; records are written by the log's own thread.)
    let audit = AuditLog::open(&policy.audit).map_err(DaemonError::Audit)?;
    for source in config.tools.sources().filter(|s| s.starts_eagerly()) {
        let source = source.clone();
        tokio::spawn(async move {
            if let Err(e) = source.tools().await {
                tracing::error!(server = source.namespace(), error = %e, "eager start failed; the server will be retried on first use");
            }
        });
    }
    let tools = config.tools.clone();
    let spawner = Spawner::start(config.worker_path.clone()).map_err(DaemonError::Spawner)?;
    let pool = WorkerPool::start(
        spawner,
        worker_ceiling(&policy.limits),
        policy.daemon.pool_size,
    );
    let max_slots = policy.daemon.max_concurrent_executions;
    let state = Arc::new(DaemonState {
        principals: policy.principals.iter().cloned().map(Arc::new).collect(),
        policy: policy.clone(),
        env: ExecutionEnv {
            pool: pool.clone(),
            tools: config.tools,
        },
        slots: Arc::new(Semaphore::new(max_slots)),
        max_slots,
        next_id: AtomicU64::new(1),
        executions_total: AtomicU64::new(0),
        catalogue: ToolCatalogue::default(),
        started: Instant::now(),
        metrics: Metrics::default(),
        audit,
    });
    info!(
        policy = %policy.origin,
        worker = %config.worker_path.display(),
        pool_size = policy.daemon.pool_size,
        "airlockd serving"
    );
    crate::systemd::notify_ready();
    let watchdog = crate::systemd::spawn_watchdog();

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(state.clone(), stream, shutdown_rx.clone()));
                }
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut shutdown => break,
        }
    }

    info!("shutting down: no new connections; waiting for running executions");
    crate::systemd::notify_stopping();
    drop(listener);
    let _ = shutdown_tx.send(true);
    let grace = Duration::from_millis(policy.daemon.shutdown_grace_ms);
    let drained = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        warn!(
            grace_ms = grace.as_millis() as u64,
            "grace period over; stopping the remaining executions"
        );
        // Aborting a connection task drops its execution, which kills and reaps its worker.
        connections.shutdown().await;
    }
    state.slots.close();
    pool.close().await;
    for source in tools.sources() {
        source.shutdown().await;
    }
    if let Some(w) = watchdog {
        w.abort();
    }
    debug!("shutdown complete");
    Ok(())
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
