//! Reload: the holder of the generation in force ([`Generations`]), which reads the policy
//! files again and, when every part of them is valid, makes the next generation current.
//! Executions keep the generation they started with.

use super::{PolicyGeneration, SourceContext, SourceFailure, unix_now, warning_lines};
use crate::secrets::scanner::SharedScanner;
use crate::workers::pool::WorkerPool;
use crate::workers::process::{Spawner, WorkerCeiling};
use airlock_policy::{LimitSettings, Policy, Principal};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use tracing::{error, info, warn};

/// The generation in force, and how to make the next one.
#[derive(Debug)]
pub struct Generations {
    /// The policy in force and what was built from it; replaced whole by a reload.
    current: RwLock<Arc<PolicyGeneration>>,
    /// What every generation builds its sources with.
    context: SourceContext,
    loader: Option<PolicyLoader>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    last_reload: Mutex<Option<ReloadReport>>,
    spawner: Spawner,
    /// The daemon's effective uid: besides root, the only peer that may ask for a reload.
    daemon_uid: u32,
    log_scanner: Option<SharedScanner>,
}

impl Generations {
    /// Holds `first`. `policy_path` is the file a reload reads again (`None`: reload refuses,
    /// saying why).
    pub fn new(
        first: PolicyGeneration,
        context: SourceContext,
        policy_path: Option<PathBuf>,
        spawner: Spawner,
        log_scanner: Option<SharedScanner>,
    ) -> Generations {
        Generations {
            current: RwLock::new(Arc::new(first)),
            context,
            loader: policy_path.map(|path| PolicyLoader { path }),
            reloading: tokio::sync::Mutex::new(()),
            last_reload: Mutex::new(None),
            spawner,
            daemon_uid: airlock_policy::account::effective_uid(),
            log_scanner,
        }
    }

    /// The generation in force now. Hold the returned `Arc` for as long as its rules must
    /// apply (an execution holds it to its end).
    pub fn current(&self) -> Arc<PolicyGeneration> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn admit(&self, uid: u32, gid: u32, groups: &[u32]) -> Option<Arc<Principal>> {
        self.current().admit(uid, gid, groups)
    }

    /// What every generation builds its sources with.
    pub fn context(&self) -> &SourceContext {
        &self.context
    }

    /// Whether a peer is the daemon's operator: root, or the daemon's own user (both could
    /// send SIGHUP anyway). It may reload, and read what concerns every principal: the tool
    /// servers, the policy's decisions, the metrics.
    pub fn may_reload(&self, uid: u32) -> bool {
        uid == 0 || uid == self.daemon_uid
    }

    /// The last reload attempt, failed or not.
    pub fn last_reload(&self) -> Option<ReloadReport> {
        self.last_reload
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Reads the policy files again and, if every part of them is valid, makes them the
    /// policy in force. On any problem the current policy stays and the report says why.
    pub async fn reload(&self) -> ReloadReport {
        let _one_at_a_time = self.reloading.lock().await;
        let current = self.current();
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
            let context = self.context.clone();
            let current = current.clone();
            tokio::task::spawn_blocking(move || loader.next_generation(&current, &context)).await
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
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
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
            .unwrap_or_else(PoisonError::into_inner) = Some(report.clone());
        report
    }
}

/// Starts the servers the policy wants started with the daemon, without waiting for them.
pub fn start_eager_sources(generation: &PolicyGeneration) {
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

/// Where a reload reads the policy from.
#[derive(Debug, Clone)]
pub struct PolicyLoader {
    /// The main policy file; drop-ins are read from `policy.d` beside it.
    pub path: PathBuf,
}

/// The outcome of a reload, as `POST /v1/reload` and `GET /v1/health` report it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ReloadReport {
    /// Whether the new policy is now in force.
    pub ok: bool,
    /// When the reload was attempted (seconds since the Unix epoch).
    pub at: u64,
    /// The generation in force after the attempt.
    pub generation: u64,
    /// The policy files read.
    pub files: Vec<String>,
    /// Every problem that made the reload fail (empty when it succeeded).
    pub problems: Vec<String>,
    /// Warnings about the new policy.
    pub warnings: Vec<String>,
    /// `[daemon]` keys that changed but take effect only when the daemon restarts.
    pub restart_needed: Vec<String>,
}

impl PolicyLoader {
    /// Reads and validates the policy files and builds the next generation from them, or says
    /// every reason it cannot.
    pub fn next_generation(
        &self,
        current: &PolicyGeneration,
        context: &SourceContext,
    ) -> Result<(PolicyGeneration, Vec<String>), Vec<String>> {
        let policy = Policy::load_all(&self.path)
            .map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        let restart_needed = daemon_changes(&current.policy, &policy);
        // The caller replaces the pool if the new limits need other ceilings.
        let pool = current.pool.clone();
        let next = PolicyGeneration::build(
            current.number + 1,
            policy,
            context,
            pool,
            Some(current),
            SourceFailure::RejectsGeneration,
        )
        .map_err(|problems| {
            problems
                .iter()
                .map(|p| format!("tool source `{}`: {}", p.source, p.message))
                .collect::<Vec<_>>()
        })?;
        current.retire(&next);
        Ok((next, restart_needed))
    }
}

/// The `[daemon]` keys whose new value needs a restart (the socket is bound, the semaphore
/// sized, the worker binary and how workers start chosen once). `pool_size` is applied by a
/// reload.
fn daemon_changes(old: &Policy, new: &Policy) -> Vec<String> {
    let (a, b) = (&old.daemon, &new.daemon);
    let mut changed = Vec::new();
    if a.socket != b.socket {
        changed.push("daemon.socket".to_owned());
    }
    if a.socket_mode != b.socket_mode {
        changed.push("daemon.socket_mode".to_owned());
    }
    if a.worker_path != b.worker_path {
        changed.push("daemon.worker_path".to_owned());
    }
    if a.shutdown_grace_ms != b.shutdown_grace_ms {
        changed.push("daemon.shutdown_grace_ms".to_owned());
    }
    if a.max_concurrent_executions != b.max_concurrent_executions {
        changed.push("daemon.max_concurrent_executions".to_owned());
    }
    if a.worker_start != b.worker_start {
        changed.push("daemon.worker_start".to_owned());
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_once_at_start_need_a_restart() {
        let old = Policy::embedded_default();
        let mut new = Policy::embedded_default();
        new.daemon.pool_size = 9;
        assert!(
            daemon_changes(&old, &new).is_empty(),
            "pool_size is reloaded"
        );
        new.daemon.worker_start = airlock_policy::WorkerStart::Exec;
        new.daemon.max_concurrent_executions = 3;
        assert_eq!(
            daemon_changes(&old, &new),
            ["daemon.max_concurrent_executions", "daemon.worker_start"]
        );
    }
}
