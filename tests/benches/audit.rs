//! Audit log benchmark: what the execution path pays to record an execution, and how many
//! records per second the writer thread sustains. Prints, asserts nothing.
//!
//! ```sh
//! cargo bench -p airlock-tests --bench audit        # AIRLOCK_BENCH_QUICK=1 for a shorter run
//! ```
//!
//! 1. `ExecutionRecord::from_response` (SHA-256 of a 2 KiB program, two argument summaries) —
//!    done on the execution path, once per execution.
//! 2. `AuditLog::record` (the `try_send`) with room in the queue — the rest of the execution
//!    path's cost.
//! 3. The writer: records (each with two tool calls) sent as fast as the queue takes them,
//!    timed until the last is committed, on the file system of the temporary directory.

// Benchmark code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{
    ExecutionResponse, ExecutionStats, PeerInfo, Status, ToolCallRecord as TraceCall,
};
use airlock_supervisor::audit_log::{AuditLog, CodeHash, ExecutionRecord};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::time::{Duration, Instant, SystemTime};

fn no_redaction(text: &str) -> Cow<'_, str> {
    Cow::Borrowed(text)
}

fn response(n: u64) -> ExecutionResponse {
    let call = |id: u32, tool: &str| TraceCall {
        id,
        tool: tool.into(),
        args: json!({"owner": "octo", "repo": "hello-world", "number": 42, "body": "x".repeat(300)}),
        outcome: airlock_supervisor::agent_api::CallOutcome::Ok,
        error: None,
        result: None,
        result_truncated: false,
        started_ms: f64::from(id),
        duration_ms: 1.5,
        replayed: false,
        divergence: None,
        redactions: Vec::new(),
        coercions: Vec::new(),
        flows: Vec::new(),
    };
    ExecutionResponse {
        id: format!("ex_bench_{n}"),
        status: Status::Ok,
        result: Value::Null,
        stdout: String::new(),
        stderr: String::new(),
        error: None,
        tool_calls: vec![call(1, "github.get_issue"), call(2, "slack.post_message")],
        session: None,
        replayed_calls: 0,
        resumed_from: None,
        pending_calls: Vec::new(),
        pending_approvals: Vec::new(),
        determinism: None,
        stats: ExecutionStats {
            queue_ms: 0.1,
            run_ms: 2.0,
            total_ms: 2.5,
            ..ExecutionStats::default()
        },
        peer: PeerInfo {
            uid: 1000,
            gid: 1000,
            pid: Some(1),
        },
        principal: "local".into(),
        redactions: Vec::new(),
        warnings: Vec::new(),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn main() {
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let n: u64 = if quick { 20_000 } else { 200_000 };
    let code = "const r = await tools.github.get_issue({owner: 'octo'});\n".repeat(36);
    println!("audit log benchmark: {n} executions, each with 2 tool calls");

    // 1. Building the record.
    let responses: Vec<_> = (0..n).map(response).collect();
    let started = SystemTime::now();
    let t = Instant::now();
    let records: Vec<ExecutionRecord> = responses
        .iter()
        .map(|r| ExecutionRecord::from_response(r, CodeHash::of(&code), started, &no_redaction))
        .collect();
    let build = t.elapsed();
    println!(
        "  ExecutionRecord::from_response ({} B program): {:.2} µs per execution",
        code.len(),
        build.as_secs_f64() * 1e6 / n as f64
    );

    // 2. try_send with room in the queue (capacity n, so nothing is dropped).
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open_with_capacity(dir.path(), 64 << 30, 4, n as usize).unwrap();
    let mut costs = Vec::with_capacity(n as usize);
    for record in records.iter().cloned() {
        let t = Instant::now();
        let sent = log.record(record);
        costs.push(t.elapsed());
        assert!(sent.is_ok());
    }
    assert!(log.flush(Duration::from_secs(600)));
    costs.sort_unstable();
    println!(
        "  AuditLog::record (try_send): p50 {:?}, p99 {:?}, max {:?}",
        percentile(&costs, 0.5),
        percentile(&costs, 0.99),
        costs.last().unwrap()
    );
    // The first log goes before the second is written: two full logs of this size at once
    // filled a machine's disk.
    drop(log);
    drop(dir);

    // 3. Writer throughput with the default queue: the sender retries when the queue is full.
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open_in(dir.path(), 64 << 30, 4).unwrap();
    let mut full = 0u64;
    let t = Instant::now();
    for record in records {
        let mut record = Some(record);
        while let Some(r) = record.take() {
            if log.record(r.clone()).is_err() {
                // The queue was full: this copy was dropped; send it again after a moment.
                full += 1;
                std::thread::yield_now();
                record = Some(r);
            }
        }
    }
    assert!(log.flush(Duration::from_secs(600)));
    let elapsed = t.elapsed();
    let size = std::fs::metadata(dir.path().join("audit.sqlite"))
        .unwrap()
        .len()
        + std::fs::metadata(dir.path().join("audit.sqlite-wal")).map_or(0, |m| m.len());
    println!(
        "  writer: {n} executions ({} tool calls) committed in {:.2} s = {:.0} executions/s; queue full {full} times; {:.1} MiB on disk ({} B per execution)",
        2 * n,
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        size as f64 / (1 << 20) as f64,
        size / n
    );
}
