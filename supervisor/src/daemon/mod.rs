//! The daemon as a whole: [`run`] serves the agent API on a listener until a shutdown
//! future resolves, then drains. `airlockd`'s `main` is a thin wrapper around it, and tests
//! call it in-process with their own listener and tool sources. Beside it: the socket's
//! default place and safe binding (`socket_path`) and systemd's notify protocol and socket
//! activation (`systemd`).
//!
//! This is where the parts are put together; nothing below it imports it.

pub mod socket_path;
pub mod systemd;

use crate::api::http::serve_connection;
use crate::audit_log::{AuditLog, AuditLogError, AuditStatus};
use crate::generation::{
    PolicyGeneration, PolicyLoader, ReloadReport, SourceFailure, unix_now, warning_lines,
};
use crate::metrics::{Gauges, Metrics};
use crate::rate_limiter::RateLimiter;
use crate::secrets::scanner::SharedScanner;
use crate::secrets::store::SecretStore;
use crate::tools::ToolRegistry;
use crate::workers::pool::{PoolStatus, WorkerPool};
use crate::workers::process::{Spawner, WorkerCeiling};
use airlock_policy::{LimitSettings, Policy, Principal};
use serde::Serialize;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::UnixListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tracing::{debug, error, info, warn};

/// Everything `run` needs besides the listener.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub policy: Policy,
    /// The `airlock-worker` binary to exec for every execution.
    pub worker_path: PathBuf,
    /// Tool sources besides the policy's (an embedder's, or tests' fault injection); they are
    /// kept across reloads. The policy's own sources are built by `run`.
    pub tools: ToolRegistry,
    /// The credentials the policy's sources may reference.
    pub secrets: Arc<SecretStore>,
    /// The policy file to read again on reload; `None` (the embedded default, or a policy made
    /// in code) makes reload refuse with an explanation.
    pub policy_path: Option<PathBuf>,
    /// Reload on SIGHUP. `airlockd` sets it; in-process tests leave it off because a signal
    /// reaches the whole test process.
    pub reload_on_sighup: bool,
    /// The scanner the daemon's log writer uses; `run` puts the policy's scanner in it (and
    /// the new one on every reload), so the log never carries a secret the daemon holds.
    pub log_scanner: Option<SharedScanner>,
}

impl DaemonConfig {
    /// A config with no extra sources, no secrets, no policy file and no SIGHUP handling.
    pub fn new(policy: Policy, worker_path: PathBuf) -> DaemonConfig {
        DaemonConfig {
            policy,
            worker_path,
            tools: ToolRegistry::new(),
            secrets: Arc::new(SecretStore::empty()),
            policy_path: None,
            reload_on_sighup: false,
            log_scanner: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(
        "worker binary {0} does not exist or is not executable; build it (cargo build) or set daemon.worker_path in the policy"
    )]
    WorkerMissing(PathBuf),
    #[error("cannot start the worker spawner thread: {0}")]
    Spawner(std::io::Error),
    #[error("cannot build the secret scanner, and the daemon does not serve without it: {0}")]
    Scanner(String),
    #[error(
        "{0}; fix it, set [audit] directory to a private directory, or (knowingly) turn the audit trail off with [audit] enabled = false"
    )]
    Audit(AuditLogError),
}

/// Shared state of a running daemon.
#[derive(Debug)]
pub struct DaemonState {
    /// The policy in force and what was built from it; replaced whole by a reload.
    current: RwLock<Arc<PolicyGeneration>>,
    /// Sources the embedder added, carried into every generation.
    extra: ToolRegistry,
    secrets: Arc<SecretStore>,
    loader: Option<PolicyLoader>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    last_reload: std::sync::Mutex<Option<ReloadReport>>,
    spawner: Spawner,
    /// The daemon's effective uid: besides root, the only peer that may ask for a reload.
    daemon_uid: u32,
    log_scanner: Option<SharedScanner>,
    /// Per-principal execution and tool-call rates.
    pub rates: RateLimiter,
    slots: Arc<Semaphore>,
    max_slots: usize,
    next_id: AtomicU64,
    executions_total: AtomicU64,
    started: Instant,
    pub metrics: Metrics,
    /// The audit trail (`[audit]`): `audit.record(…)` never waits; `audit.status()` for health.
    pub audit: AuditLog,
}

impl DaemonState {
    /// The generation in force now. Hold the returned `Arc` for as long as its rules must
    /// apply (an execution holds it to its end).
    pub fn generation(&self) -> Arc<PolicyGeneration> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn admit(&self, uid: u32, gid: u32, groups: &[u32]) -> Option<Arc<Principal>> {
        self.generation().admit(uid, gid, groups)
    }

    pub fn policy_origin(&self) -> String {
        self.generation().policy.origin.clone()
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
        let pool = self.generation().pool.status();
        let mut text = self.metrics.render(Gauges {
            running: self.max_slots - self.slots.available_permits(),
            max_concurrent: self.max_slots,
            pool_idle: pool.idle,
            pool_target: pool.target,
            pool_starting: pool.starting,
            uptime_s: self.started.elapsed().as_secs(),
        });
        text.push_str(&self.audit.status().metrics_text());
        text
    }

    /// Whether a peer may ask for a reload: root, or the daemon's own user (both could send
    /// SIGHUP anyway).
    pub fn may_reload(&self, uid: u32) -> bool {
        uid == 0 || uid == self.daemon_uid
    }

    /// Reads the policy files again and, if every part of them is valid, makes them the
    /// policy in force. On any problem the current policy stays and the report says why.
    pub async fn reload(&self) -> ReloadReport {
        let _one_at_a_time = self.reloading.lock().await;
        let current = self.generation();
        let mut report = ReloadReport {
            ok: false,
            at: unix_now(),
            generation: current.number,
            files: current.policy.files().map(str::to_owned).collect(),
            problems: Vec::new(),
            warnings: Vec::new(),
            restart_needed: Vec::new(),
        };
        let Some(loader) = &self.loader else {
            report.problems.push(format!(
                "the daemon runs on {} and has no policy file to read again; start airlockd with --config FILE to use reload",
                current.policy.origin
            ));
            return self.finish_reload(report);
        };
        // Reading documents and building sources is blocking file work.
        let built = {
            let loader = loader.clone();
            let secrets = self.secrets.clone();
            let extra = self.extra.clone();
            let current = current.clone();
            tokio::task::spawn_blocking(move || loader.next_generation(&current, &secrets, &extra))
                .await
        };
        let (mut next, restart_needed) = match built {
            Ok(Ok(next)) => next,
            Ok(Err(problems)) => {
                report.problems = problems;
                return self.finish_reload(report);
            }
            Err(e) => {
                report.problems.push(format!("the reload task failed: {e}"));
                return self.finish_reload(report);
            }
        };
        let ceiling = worker_ceiling(&next.policy.limits);
        let replaced_pool = if ceiling != current.pool.ceiling()
            || next.policy.daemon.pool_size != current.policy.daemon.pool_size
        {
            next.pool =
                WorkerPool::start(self.spawner.clone(), ceiling, next.policy.daemon.pool_size);
            Some(current.pool.clone())
        } else {
            None
        };
        start_eager_sources(&next);
        report.ok = true;
        report.generation = next.number;
        report.files = next.policy.files().map(str::to_owned).collect();
        report.warnings = warning_lines(&next.policy.warnings);
        report.restart_needed = restart_needed;
        for warning in &report.warnings {
            warn!("{warning}");
        }
        if let Some(log) = &self.log_scanner {
            log.replace(next.scanner.clone());
        }
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(next);
        if let Some(old) = replaced_pool {
            // Its idle workers have the old ceilings; running executions keep the workers
            // they have.
            old.close().await;
        }
        self.finish_reload(report)
    }

    fn finish_reload(&self, report: ReloadReport) -> ReloadReport {
        if report.ok {
            info!(
                generation = report.generation,
                files = report.files.len(),
                "policy reloaded"
            );
            if !report.restart_needed.is_empty() {
                warn!(keys = %report.restart_needed.join(", "), "these settings changed but take effect only when airlockd restarts");
            }
        } else {
            error!(
                problems = %report.problems.join("\n"),
                "policy reload failed; the previous policy stays in force"
            );
        }
        *self
            .last_reload
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(report.clone());
        report
    }

    pub fn health(&self) -> Health {
        let generation = self.generation();
        Health {
            status: "ok",
            version: env!("CARGO_PKG_VERSION"),
            uptime_s: self.started.elapsed().as_secs(),
            policy: generation.policy.origin.clone(),
            policy_files: generation.policy.files().map(str::to_owned).collect(),
            policy_generation: generation.number,
            policy_loaded_at: generation.loaded_at,
            policy_warnings: warning_lines(&generation.policy.warnings),
            last_reload: self
                .last_reload
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            audit: self.audit.status(),
            pool: generation.pool.status(),
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
    /// The main policy file in force (or `<embedded default>`).
    pub policy: String,
    /// Every file of the policy in force: the main file, then the drop-ins.
    pub policy_files: Vec<String>,
    /// 1 at start, one more per successful reload.
    pub policy_generation: u64,
    /// When the policy in force was loaded (seconds since the Unix epoch).
    pub policy_loaded_at: u64,
    pub policy_warnings: Vec<String>,
    /// The last reload attempt, failed or not; `null` before the first.
    pub last_reload: Option<ReloadReport>,
    /// The audit trail: `ok`, `degraded` (with the reason, naming the file) or `disabled`.
    pub audit: AuditStatus,
    pub pool: PoolStatus,
    pub executions: ExecutionCounts,
}

#[derive(Debug, Serialize)]
pub struct ExecutionCounts {
    pub running: usize,
    pub total: u64,
    pub max_concurrent: usize,
}

/// Starts the servers the policy wants started with the daemon, without waiting for them.
fn start_eager_sources(generation: &PolicyGeneration) {
    for source in generation.tools.sources().filter(|s| s.starts_eagerly()) {
        let source = source.clone();
        tokio::spawn(async move {
            if let Err(e) = source.tools().await {
                tracing::error!(server = source.namespace(), error = %e, "eager start failed; the server will be retried on first use");
            }
        });
    }
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
    let policy = config.policy;
    let daemon_settings = policy.daemon.clone();
    for warning in &policy.warnings {
        warn!("{warning}");
    }
    // Before anything starts: a daemon that cannot keep its audit trail does not serve. (Opening
    // touches the disk once, at startup; records are written by the log's own thread.) The
    // audit settings are read once: a reload does not move the record.
    let audit = AuditLog::open(&policy.audit).map_err(DaemonError::Audit)?;
    let spawner = Spawner::start(config.worker_path.clone()).map_err(DaemonError::Spawner)?;
    let pool = WorkerPool::start(
        spawner.clone(),
        worker_ceiling(&policy.limits),
        daemon_settings.pool_size,
    );
    let extra = config.tools;
    // A source that cannot be loaded at start costs only itself; the daemon serves the rest.
    let generation = PolicyGeneration::build(
        1,
        policy,
        &config.secrets,
        &extra,
        pool,
        None,
        SourceFailure::DropsSource,
    )
    .map_err(|problems| {
        DaemonError::Scanner(
            problems
                .iter()
                .map(|p| format!("{}: {}", p.source, p.message))
                .collect::<Vec<_>>()
                .join("; "),
        )
    })?;
    if let Some(log) = &config.log_scanner {
        log.replace(generation.scanner.clone());
    }
    start_eager_sources(&generation);
    let max_slots = daemon_settings.max_concurrent_executions;
    info!(
        policy = %generation.policy.origin,
        drop_ins = generation.policy.drop_ins.len(),
        worker = %config.worker_path.display(),
        pool_size = daemon_settings.pool_size,
        "airlockd serving"
    );
    let state = Arc::new(DaemonState {
        current: RwLock::new(Arc::new(generation)),
        extra,
        secrets: config.secrets,
        loader: config.policy_path.map(|path| PolicyLoader { path }),
        reloading: tokio::sync::Mutex::new(()),
        last_reload: std::sync::Mutex::new(None),
        spawner,
        daemon_uid: airlock_policy::account::effective_uid(),
        log_scanner: config.log_scanner,
        rates: RateLimiter::default(),
        slots: Arc::new(Semaphore::new(max_slots)),
        max_slots,
        next_id: AtomicU64::new(1),
        executions_total: AtomicU64::new(0),
        started: Instant::now(),
        metrics: Metrics::default(),
        audit,
    });
    crate::daemon::systemd::notify_ready();
    let watchdog = crate::daemon::systemd::spawn_watchdog();
    let reloader = config
        .reload_on_sighup
        .then(|| tokio::spawn(reload_on_sighup(state.clone())));

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
    crate::daemon::systemd::notify_stopping();
    if let Some(task) = reloader {
        task.abort();
    }
    drop(listener);
    let _ = shutdown_tx.send(true);
    let grace = Duration::from_millis(daemon_settings.shutdown_grace_ms);
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
    let generation = state.generation();
    generation.pool.close().await;
    generation.shutdown_sources().await;
    if let Some(w) = watchdog {
        w.abort();
    }
    debug!("shutdown complete");
    Ok(())
}

/// Reloads the policy on every SIGHUP (`systemctl reload airlockd`).
async fn reload_on_sighup(state: Arc<DaemonState>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(hup) => hup,
        Err(e) => {
            warn!(error = %e, "cannot handle SIGHUP; reload with `airlock reload` instead");
            return;
        }
    };
    while hup.recv().await.is_some() {
        info!("SIGHUP received: reloading the policy");
        state.reload().await;
    }
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
