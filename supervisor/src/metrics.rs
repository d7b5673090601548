//! Prometheus metrics for `GET /metrics`: what happened to executions, tool calls and workers,
//! in the text exposition format. Counters are plain atomics; the few labelled families
//! (status, error kind, tool outcome) sit behind one mutex that is taken once per execution.

use crate::agent_api::{CoercionPlace, CoercionRule, ExecutionResponse, Status};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds (seconds) of the execution-duration histogram buckets.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Debug, Default)]
pub struct Metrics {
    refused_connections: AtomicU64,
    rate_limited_executions: AtomicU64,
    labelled: Mutex<Labelled>,
}

#[derive(Debug, Default)]
struct Labelled {
    executions_by_status: BTreeMap<&'static str, u64>,
    errors_by_kind: BTreeMap<String, u64>,
    tool_calls_by_outcome: BTreeMap<String, u64>,
    /// Coercions by place and rule (a fixed set of labels: 2 places × 7 rules).
    coercions: BTreeMap<(&'static str, &'static str), u64>,
    duration_buckets: Vec<u64>,
    duration_sum: f64,
    duration_count: u64,
    from_pool: u64,
}

/// Values owned elsewhere that the exposition includes as gauges.
#[derive(Debug, Clone, Copy)]
pub struct Gauges {
    pub running: usize,
    pub max_concurrent: usize,
    pub pool_idle: usize,
    pub pool_target: usize,
    pub pool_starting: usize,
    pub uptime_s: u64,
}

impl Metrics {
    pub fn connection_refused(&self) {
        self.refused_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// An execution refused by its principal's `executions_per_minute`.
    pub fn rate_limited(&self) {
        self.rate_limited_executions.fetch_add(1, Ordering::Relaxed);
    }

    /// Records one finished execution.
    pub fn record(&self, response: &ExecutionResponse) {
        let mut m = self
            .labelled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let status = match response.status {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::Cancelled => "cancelled",
            Status::Waiting => "waiting",
            Status::Queued => "queued",
            Status::Running => "running",
        };
        *m.executions_by_status.entry(status).or_default() += 1;
        if let Some(err) = &response.error {
            *m.errors_by_kind
                .entry(err.kind.as_str().to_owned())
                .or_default() += 1;
        }
        for call in &response.tool_calls {
            *m.tool_calls_by_outcome
                .entry(call.outcome.as_str().to_owned())
                .or_default() += 1;
            for c in &call.coercions {
                *m.coercions
                    .entry((c.place.as_str(), c.rule.as_str()))
                    .or_default() += 1;
            }
        }
        let seconds = response.stats.total_ms / 1e3;
        if m.duration_buckets.is_empty() {
            m.duration_buckets = vec![0; DURATION_BUCKETS.len()];
        }
        for (i, bound) in DURATION_BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                m.duration_buckets[i] += 1;
            }
        }
        m.duration_sum += seconds;
        m.duration_count += 1;
        if response.stats.worker_from_pool {
            m.from_pool += 1;
        }
    }

    /// The Prometheus text exposition (version 0.0.4).
    pub fn render(&self, gauges: Gauges) -> String {
        let m = self
            .labelled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = String::with_capacity(4096);
        let name = header(
            &mut out,
            "airlock_executions_total",
            "counter",
            "Finished executions by status.",
        );
        // Every way an execution's run ends: a waiting one ends a run too (it holds no
        // worker), and runs again when its answer comes.
        for status in ["ok", "error", "timeout", "cancelled", "waiting"] {
            let n = m.executions_by_status.get(status).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}{{status=\"{status}\"}} {n}");
        }
        let name = header(
            &mut out,
            "airlock_execution_errors_total",
            "counter",
            "Failed executions by error kind.",
        );
        for (kind, n) in &m.errors_by_kind {
            let _ = writeln!(out, "{name}{{kind=\"{kind}\"}} {n}");
        }
        let name = header(
            &mut out,
            "airlock_tool_calls_total",
            "counter",
            "Tool calls by outcome (ok, error, pending at the end of the execution).",
        );
        for (outcome, n) in &m.tool_calls_by_outcome {
            let _ = writeln!(out, "{name}{{outcome=\"{outcome}\"}} {n}");
        }
        let name = header(
            &mut out,
            "airlock_coercions_total",
            "counter",
            "Values coerced to a tool's schema (coerce = \"safe\"), by place (arguments, result) and rule.",
        );
        for place in [CoercionPlace::Arguments, CoercionPlace::Result] {
            for rule in CoercionRule::ALL {
                let (place, rule) = (place.as_str(), rule.as_str());
                let n = m.coercions.get(&(place, rule)).copied().unwrap_or(0);
                let _ = writeln!(out, "{name}{{place=\"{place}\",rule=\"{rule}\"}} {n}");
            }
        }
        let name = header(
            &mut out,
            "airlock_execution_duration_seconds",
            "histogram",
            "Wall-clock time of executions, queueing and worker start included.",
        );
        for (i, bound) in DURATION_BUCKETS.iter().enumerate() {
            let n = m.duration_buckets.get(i).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {n}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", m.duration_count);
        let _ = writeln!(out, "{name}_sum {}", m.duration_sum);
        let _ = writeln!(out, "{name}_count {}", m.duration_count);
        single(
            &mut out,
            "airlock_executions_from_pool_total",
            "counter",
            "Executions that got a pre-started worker.",
            m.from_pool,
        );
        single(
            &mut out,
            "airlock_connections_refused_total",
            "counter",
            "Connections no principal admits.",
            self.refused_connections.load(Ordering::Relaxed),
        );
        single(
            &mut out,
            "airlock_executions_rate_limited_total",
            "counter",
            "Executions refused because the principal's executions_per_minute was used up.",
            self.rate_limited_executions.load(Ordering::Relaxed),
        );
        for (name, help, value) in [
            (
                "airlock_executions_running",
                "Executions running now.",
                gauges.running,
            ),
            (
                "airlock_executions_max_concurrent",
                "The policy's max_concurrent_executions.",
                gauges.max_concurrent,
            ),
            (
                "airlock_pool_idle_workers",
                "Pre-started workers waiting.",
                gauges.pool_idle,
            ),
            (
                "airlock_pool_target_workers",
                "The policy's pool_size.",
                gauges.pool_target,
            ),
            (
                "airlock_pool_starting_workers",
                "Pool workers being started.",
                gauges.pool_starting,
            ),
        ] {
            single(&mut out, name, "gauge", help, value);
        }
        single(
            &mut out,
            "airlock_uptime_seconds",
            "gauge",
            "Seconds since the daemon started.",
            gauges.uptime_s,
        );
        out
    }
}

/// Writes one metric family of a single value: its HELP and TYPE lines, then the value.
pub(crate) fn single(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    value: impl std::fmt::Display,
) {
    let name = header(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// Writes the HELP and TYPE lines of one metric family and returns its name.
fn header(out: &mut String, name: &str, kind: &str, help: &str) -> String {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_api::{ExecutionError, ExecutionErrorKind, ExecutionStats, PeerInfo};

    fn response(
        status: Status,
        kind: Option<ExecutionErrorKind>,
        total_ms: f64,
    ) -> ExecutionResponse {
        ExecutionResponse {
            id: "ex".into(),
            status,
            result: serde_json::Value::Null,
            stdout: String::new(),
            stderr: String::new(),
            error: kind.map(|kind| ExecutionError {
                kind,
                name: None,
                message: String::new(),
                line: None,
                column: None,
                stack: None,
                excerpt: None,
                hint: None,
                explanation: None,
            }),
            tool_calls: Vec::new(),
            session: None,
            replayed_calls: 0,
            resumed_from: None,
            pending_calls: Vec::new(),
            pending_approvals: Vec::new(),
            determinism: None,
            stats: ExecutionStats {
                total_ms,
                ..ExecutionStats::default()
            },
            peer: PeerInfo {
                uid: 0,
                gid: 0,
                pid: None,
            },
            principal: "p".into(),
            redactions: Vec::new(),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn counts_statuses_kinds_and_durations() {
        let m = Metrics::default();
        let mut coerced = response(Status::Ok, None, 2.0);
        coerced.tool_calls.push(crate::agent_api::ToolCallRecord {
            id: 1,
            tool: "s.t".into(),
            args: serde_json::json!({"n": 1}),
            outcome: crate::agent_api::CallOutcome::Ok,
            error: None,
            result: None,
            result_truncated: false,
            started_ms: 0.0,
            duration_ms: 0.0,
            replayed: false,
            divergence: None,
            redactions: Vec::new(),
            coercions: vec![crate::agent_api::Coercion {
                place: CoercionPlace::Arguments,
                pointer: "/n".into(),
                from: serde_json::json!("1"),
                to: Some(serde_json::json!(1)),
                rule: CoercionRule::NumberFromString,
            }],
            flows: Vec::new(),
        });
        m.record(&coerced);
        m.record(&response(
            Status::Error,
            Some(ExecutionErrorKind::Syntax),
            3.0,
        ));
        m.record(&response(
            Status::Timeout,
            Some(ExecutionErrorKind::Timeout),
            1500.0,
        ));
        m.record(&response(
            Status::Cancelled,
            Some(ExecutionErrorKind::Cancelled),
            1.0,
        ));
        m.connection_refused();
        let text = m.render(Gauges {
            running: 1,
            max_concurrent: 64,
            pool_idle: 2,
            pool_target: 2,
            pool_starting: 0,
            uptime_s: 5,
        });
        assert!(
            text.contains("airlock_executions_total{status=\"ok\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("airlock_executions_total{status=\"timeout\"} 1\n"));
        assert!(
            text.contains("airlock_executions_total{status=\"cancelled\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("airlock_executions_total{status=\"waiting\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("airlock_execution_errors_total{kind=\"syntax\"} 1\n"));
        // The cancelled one (1 ms) is in the histogram too.
        assert!(text.contains("airlock_execution_duration_seconds_bucket{le=\"0.0025\"} 2\n"));
        assert!(text.contains("airlock_execution_duration_seconds_bucket{le=\"0.005\"} 3\n"));
        assert!(text.contains("airlock_execution_duration_seconds_bucket{le=\"2.5\"} 4\n"));
        assert!(text.contains("airlock_execution_duration_seconds_count 4\n"));
        assert!(text.contains("airlock_connections_refused_total 1\n"));
        assert!(
            text.contains(
                "airlock_coercions_total{place=\"arguments\",rule=\"number_from_string\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("airlock_coercions_total{place=\"result\",rule=\"enum_case\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("airlock_pool_idle_workers 2\n"));
        // Every sample line belongs to a family announced with HELP and TYPE.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            let base = name
                .trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count");
            assert!(
                text.contains(&format!("# TYPE {base} ")),
                "{name} has no TYPE"
            );
        }
    }
}
