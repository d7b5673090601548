//! `GET /v1/health` and `GET /metrics`: the daemon's state, assembled from the generation in
//! force, the execution service and the audit trail.

use super::HttpState;
use crate::audit_log::AuditStatus;
use crate::generation::{ReloadReport, warning_lines};
use crate::journal::{JournalHealth, JournalState, JournalStatus};
use crate::metrics::Gauges;
use crate::workers::pool::PoolStatus;
use serde::Serialize;

/// `GET /v1/health`.
#[derive(Debug, Serialize)]
pub struct Health {
    pub status: &'static str,
    pub version: &'static str,
    pub uptime_s: u64,
    /// The main policy file in force (or `<embedded default>`).
    pub policy: String,
    /// 1 at start, one more per successful reload.
    pub policy_generation: u64,
    /// When the policy in force was loaded (seconds since the Unix epoch).
    pub policy_loaded_at: u64,
    /// The audit trail: `ok`, `degraded` (with the reason, naming the file) or `disabled`.
    pub audit: AuditStatus,
    /// Sessions' replay journal: `ok`, `disabled` or `unavailable` (with the reason).
    pub journal: JournalHealth,
    /// What only the operator (root, the daemon's user) is shown: every principal's counts,
    /// the policy's files, warnings (which name principals and tools) and last reload.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<DaemonWide>,
}

/// The parts of `GET /v1/health` that are every principal's, for the operator.
#[derive(Debug, Serialize)]
pub struct DaemonWide {
    /// Every file of the policy in force: the main file, then the drop-ins.
    pub policy_files: Vec<String>,
    pub policy_warnings: Vec<String>,
    /// The last reload attempt, failed or not; `null` before the first.
    pub last_reload: Option<ReloadReport>,
    pub pool: PoolStatus,
    pub executions: ExecutionCounts,
}

#[derive(Debug, Serialize)]
pub struct ExecutionCounts {
    pub running: usize,
    pub total: u64,
    pub max_concurrent: usize,
}

/// `GET /v1/health`; with the daemon-wide parts for the `operator` only (another principal
/// learns nothing there of the others' executions or of the policy's warnings).
pub(super) fn health(state: &HttpState, operator: bool) -> Health {
    let generation = state.generations.current();
    let daemon = operator.then(|| {
        let (running, total, max_concurrent) = state.executions.counts();
        DaemonWide {
            policy_files: generation.policy.files().map(str::to_owned).collect(),
            policy_warnings: warning_lines(&generation.policy.warnings),
            last_reload: state.generations.last_reload(),
            pool: generation.pool.status(),
            executions: ExecutionCounts {
                running,
                total,
                max_concurrent,
            },
        }
    });
    Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        uptime_s: state.started.elapsed().as_secs(),
        policy: generation.policy.origin.clone(),
        policy_generation: generation.number,
        policy_loaded_at: generation.loaded_at,
        audit: state.executions.audit.status(),
        journal: state.executions.journal.health(),
        daemon,
    }
}

/// `GET /metrics` (Prometheus text).
pub(super) fn metrics_text(state: &HttpState) -> String {
    let pool = state.generations.current().pool.status();
    let (running, _, max_concurrent) = state.executions.counts();
    let mut text = state.executions.metrics.render(Gauges {
        running,
        max_concurrent,
        pool_idle: pool.idle,
        pool_target: pool.target,
        pool_starting: pool.starting,
        uptime_s: state.started.elapsed().as_secs(),
    });
    text.push_str(&state.executions.audit.status().metrics_text());
    text.push_str(&journal_metrics(&state.executions.journal));
    if let Some(types) = state.generations.current().catalogue.learning().types() {
        text.push_str(&types.metrics_text());
    }
    text
}

/// The journal's counters (Prometheus text): calls answered from it and calls recorded live,
/// its size, and whether it works.
fn journal_metrics(journal: &JournalState) -> String {
    use crate::metrics::single;
    use std::sync::atomic::Ordering;
    let health = journal.health();
    let mut text = String::new();
    single(
        &mut text,
        "airlock_journal_up",
        "gauge",
        "Whether the sessions' journal works (0 when disabled or unavailable).",
        u8::from(health.status == JournalStatus::Ok),
    );
    if let JournalState::Ready(j) = journal {
        single(
            &mut text,
            "airlock_tool_calls_replayed_total",
            "counter",
            "Tool calls of sessions answered from the journal.",
            j.replayed_calls.load(Ordering::Relaxed),
        );
        single(
            &mut text,
            "airlock_tool_calls_journaled_total",
            "counter",
            "Tool calls of sessions made live and recorded.",
            j.journaled_calls.load(Ordering::Relaxed),
        );
        single(
            &mut text,
            "airlock_journal_bytes",
            "gauge",
            "Bytes of recorded results in the journal.",
            health.bytes.unwrap_or(0),
        );
        // Read at scrape time from the journal's tables, where waiting work is kept.
        if let Ok((executions, approvals)) = j.store().waiting_totals() {
            single(
                &mut text,
                "airlock_executions_waiting",
                "gauge",
                "Executions waiting for a client's results or an approver's decision.",
                executions,
            );
            single(
                &mut text,
                "airlock_approvals_pending",
                "gauge",
                "Approvals waiting for a decision.",
                approvals,
            );
        }
    }
    text
}
