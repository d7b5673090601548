//! The load suite, shared by the bench (`benches/load.rs`, 10,000 executions) and the short run
//! in CI (`tests/load.rs`): many concurrent clients drive the real `airlockd` ([`RealDaemon`])
//! with a mix of programs, every answer is checked, and the daemon's RSS and descriptors are
//! sampled while nothing is in flight (after a warm-up, in the middle, at the end).
//!
//! The mix, by execution number `i` modulo 100:
//! - 0..40: a trivial program (`i * 2`);
//! - 40..70: one brokered call to the fault server's `echo` (a real stdio MCP server);
//! - 70..85: three parallel `echo` calls (`Promise.all`);
//! - 85..95: a program that throws (`runtime`, with its message);
//! - 95..99: a call of a tool the server does not have, caught by the program (`unknown_tool`);
//! - 99: an endless loop with a 300 ms timeout (`timeout`).

use crate::processes::{servers_named, wait_until, worker_children, zombie_children};
use crate::real_daemon::{self, RealDaemon};
use airlock_supervisor::agent_api::{ExecutionRequest, ExecutionResponse, Status};
use airlock_supervisor::client::Client;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Pre-started workers of the load daemon.
pub const POOL_SIZE: usize = 4;
/// The program timeout of the executions meant to time out.
const SHORT_TIMEOUT_MS: u64 = 300;

#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub executions: usize,
    pub clients: usize,
    /// How long one request may go unanswered before it counts as hung.
    pub request_deadline: Duration,
}

impl LoadOptions {
    /// `executions` from 32 clients, `AIRLOCK_LOAD_EXECUTIONS` overriding the count.
    pub fn from_env(default_executions: usize) -> LoadOptions {
        let executions = std::env::var("AIRLOCK_LOAD_EXECUTIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default_executions);
        LoadOptions {
            executions,
            clients: 32,
            request_deadline: Duration::from_secs(60),
        }
    }
}

/// The daemon's resources at one point, with nothing in flight.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub after_executions: usize,
    pub rss_kib: u64,
    pub fds: usize,
}

#[derive(Debug, Default)]
pub struct LoadReport {
    pub executions: usize,
    pub clients: usize,
    pub elapsed: Duration,
    /// Milliseconds per request, sorted.
    pub latencies_ms: Vec<f64>,
    /// Requests answered with something other than their expected answer (or not at all:
    /// the connection failed), with what came.
    pub lost: Vec<String>,
    /// Requests without an answer within the deadline.
    pub hung: Vec<usize>,
    /// Warm-up, middle, end.
    pub samples: Vec<Sample>,
    /// Zombie children of the daemon after the run (none once the reaper had its chance).
    pub zombies: Vec<i32>,
    /// Worker processes beyond the pool after the run.
    pub extra_workers: Vec<i32>,
    /// Fault server processes after the run (one server, however many calls).
    pub fault_servers: Vec<i32>,
}

impl LoadReport {
    pub fn throughput(&self) -> f64 {
        self.latencies_ms.len() as f64 / self.elapsed.as_secs_f64()
    }

    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.latencies_ms.is_empty() {
            return f64::NAN;
        }
        let idx = ((self.latencies_ms.len() as f64 - 1.0) * p).round() as usize;
        self.latencies_ms[idx]
    }

    /// The figures, one line each.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "{} executions from {} clients in {:.1} s: {:.0} executions/s, latency p50 {:.1} ms, p99 {:.1} ms\n\
             lost {}, hung {}, zombies {}, workers beyond the pool {}, fault servers {}\n",
            self.executions,
            self.clients,
            self.elapsed.as_secs_f64(),
            self.throughput(),
            self.percentile_ms(0.5),
            self.percentile_ms(0.99),
            self.lost.len(),
            self.hung.len(),
            self.zombies.len(),
            self.extra_workers.len(),
            self.fault_servers.len(),
        );
        for (name, s) in ["start", "middle", "end"].iter().zip(&self.samples) {
            // The daemon is not dumpable: only root may list its descriptors.
            let fds = if s.fds == 0 {
                "fds unreadable (not root)".to_owned()
            } else {
                format!("{} fds", s.fds)
            };
            out.push_str(&format!(
                "daemon at {name:6} (after {:5} executions): RSS {:7.1} MiB, {fds}\n",
                s.after_executions,
                s.rss_kib as f64 / 1024.0,
            ));
        }
        for l in self.lost.iter().take(5) {
            out.push_str(&format!("lost: {l}\n"));
        }
        out
    }

    /// Panics, with the figures, on a lost or hung execution, a zombie, a stray process, or
    /// growth of the daemon's RSS (more than 32 MiB and 25 % from the warm-up to the end) or
    /// descriptors (more than 8).
    pub fn assert_healthy(&self) {
        let summary = self.summary();
        assert!(self.lost.is_empty(), "lost executions\n{summary}");
        assert!(
            self.hung.is_empty(),
            "hung executions {:?}\n{summary}",
            self.hung
        );
        assert!(self.zombies.is_empty(), "zombie children\n{summary}");
        assert!(
            self.extra_workers.is_empty(),
            "workers left behind\n{summary}"
        );
        assert!(self.fault_servers.len() <= 1, "fault servers\n{summary}");
        let (first, last) = (self.samples[0], self.samples[self.samples.len() - 1]);
        // Allocator arenas and caches settle at a level that depends on how many threads ran
        // at once, so the bound is generous; a leak of even 4 KiB per execution over 10,000
        // executions (39 MiB) breaks it.
        let grown = last.rss_kib.saturating_sub(first.rss_kib);
        assert!(
            grown <= 32 * 1024 || grown * 4 <= first.rss_kib,
            "the daemon's RSS grew by {grown} KiB\n{summary}"
        );
        assert!(
            last.fds <= first.fds + 8,
            "the daemon's descriptors grew\n{summary}"
        );
    }
}

/// The daemon the suite runs against: the fault server as `tools.fault`, `POOL_SIZE` workers.
pub fn start_daemon(dir: &Path) -> RealDaemon {
    let policy = real_daemon::policy(
        dir,
        POOL_SIZE,
        &real_daemon::fault_server_entry("fault", 10_000, &[]),
    );
    RealDaemon::start(dir, &policy, |_| {})
}

/// Whether an answer is the one expected.
type Check = Box<dyn Fn(&ExecutionResponse) -> bool + Send>;

/// Execution `i`'s request and the check of its answer.
fn case(i: usize) -> (ExecutionRequest, Check) {
    let request = |code: String, timeout_ms: u64| ExecutionRequest {
        code,
        timeout_ms: Some(timeout_ms),
        ..Default::default()
    };
    let ok = |r: &ExecutionResponse, value: Value| r.status == Status::Ok && r.result == value;
    match i % 100 {
        0..40 => (
            request(format!("const n: number = {i}; n * 2"), 30_000),
            Box::new(move |r| ok(r, json!(i * 2))),
        ),
        40..70 => (
            request(
                format!("await tools.fault.echo({{ text: \"e{i}\" }})"),
                30_000,
            ),
            Box::new(move |r| ok(r, json!(format!("e{i}")))),
        ),
        70..85 => (
            request(
                format!(
                    "const all = await Promise.all([1, 2, 3].map((k) => tools.fault.echo({{ text: `{i}-${{k}}` }})));\nall.join(\",\")"
                ),
                30_000,
            ),
            Box::new(move |r| ok(r, json!(format!("{i}-1,{i}-2,{i}-3")))),
        ),
        85..95 => (
            request(format!("throw new Error(\"boom {i}\")"), 30_000),
            Box::new(move |r| {
                r.status == Status::Error
                    && r.error.as_ref().is_some_and(|e| {
                        e.kind.as_str() == "runtime" && e.message.contains(&format!("boom {i}"))
                    })
            }),
        ),
        // A computed name, so the contract check lets it run and the call itself fails (a
        // literal unknown name is refused before the program runs).
        95..99 => (
            request(
                format!(
                    "try {{ await tools.fault[\"no_such_\" + \"tool\"]({{ n: {i} }}); \"answered\" }} catch (e: any) {{ `${{e.code}} {i}` }}"
                ),
                30_000,
            ),
            Box::new(move |r| ok(r, json!(format!("unknown_tool {i}")))),
        ),
        _ => (
            request("while (true) {}".to_owned(), SHORT_TIMEOUT_MS),
            Box::new(|r| {
                r.status == Status::Timeout
                    && r.error
                        .as_ref()
                        .is_some_and(|e| e.kind.as_str() == "timeout")
            }),
        ),
    }
}

/// Runs executions `range` from `clients` concurrent clients (each its own connection, taking
/// the next number until none is left).
async fn drive(
    socket: &Path,
    range: std::ops::Range<usize>,
    clients: usize,
    deadline: Duration,
    report: &mut LoadReport,
) {
    let next = Arc::new(AtomicUsize::new(range.start));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let socket: PathBuf = socket.to_owned();
        let next = next.clone();
        let end = range.end;
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut lost = Vec::new();
            let mut hung = Vec::new();
            let mut client: Option<Client> = None;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    break;
                }
                let (request, check) = case(i);
                let started = Instant::now();
                let c = match client.take() {
                    Some(c) if !c.is_closed() => c,
                    _ => match Client::connect(&socket).await {
                        Ok(c) => c,
                        Err(e) => {
                            lost.push(format!("#{i}: cannot connect: {e}"));
                            continue;
                        }
                    },
                };
                let mut c = c;
                match tokio::time::timeout(deadline, c.execute(&request)).await {
                    Err(_) => hung.push(i),
                    Ok(Err(e)) => lost.push(format!("#{i}: request failed: {e}")),
                    Ok(Ok(r)) => {
                        latencies.push(started.elapsed().as_secs_f64() * 1e3);
                        if check(&r) {
                            client = Some(c);
                        } else {
                            lost.push(format!(
                                "#{i}: unexpected answer to {:?}: status {:?}, result {}, error {:?}",
                                request.code, r.status, r.result, r.error
                            ));
                            client = Some(c);
                        }
                    }
                }
            }
            (latencies, lost, hung)
        }));
    }
    for t in tasks {
        let (latencies, lost, hung) = t.await.expect("client task");
        report.latencies_ms.extend(latencies);
        report.lost.extend(lost);
        report.hung.extend(hung);
    }
}

/// The daemon's RSS and descriptors once it is idle again: no worker but the pool's, the pool
/// full (workers still being reaped or started hold descriptors).
async fn sample(daemon: &RealDaemon, after_executions: usize) -> Sample {
    let pid = daemon.pid();
    let socket = daemon.socket.clone();
    let settled = tokio::task::spawn_blocking(move || {
        wait_until(30, || {
            worker_children(pid).len() == POOL_SIZE
                && zombie_children(pid).is_empty()
                && real_daemon::health(&socket)
                    .is_some_and(|h| h["pool"]["idle"].as_u64() == Some(POOL_SIZE as u64))
        })
    })
    .await
    .expect("settle");
    assert!(
        settled,
        "the daemon did not settle (pool full, nothing to reap) within 30 s"
    );
    Sample {
        after_executions,
        rss_kib: crate::processes::vm_rss_kib(pid),
        fds: crate::processes::fd_count(pid),
    }
}

/// The whole suite against `daemon`: a warm-up (a tenth of the executions, at most 1,000, not
/// counted), then the executions in two halves, sampled after the warm-up and each half.
pub async fn run(daemon: &RealDaemon, options: &LoadOptions) -> LoadReport {
    let mut report = LoadReport {
        executions: options.executions,
        clients: options.clients,
        ..Default::default()
    };
    let warm_up = (options.executions / 10).clamp(100, 1_000);
    // The warm-up's figures are not reported, but a wrong answer there is still a failure.
    let mut warm = LoadReport::default();
    drive(
        &daemon.socket,
        1_000_000..1_000_000 + warm_up,
        options.clients,
        options.request_deadline,
        &mut warm,
    )
    .await;
    report.lost.extend(warm.lost);
    report.hung.extend(warm.hung);
    report.samples.push(sample(daemon, 0).await);

    let half = options.executions / 2;
    let mut busy = Duration::ZERO;
    for (range, after) in [
        (0..half, half),
        (half..options.executions, options.executions),
    ] {
        let t = Instant::now();
        drive(
            &daemon.socket,
            range,
            options.clients,
            options.request_deadline,
            &mut report,
        )
        .await;
        busy += t.elapsed();
        report.samples.push(sample(daemon, after).await);
    }
    // Throughput counts the time executions ran, not the pauses for sampling.
    report.elapsed = busy;
    report
        .latencies_ms
        .sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));

    let pid = daemon.pid();
    report.zombies = zombie_children(pid);
    report.extra_workers = worker_children(pid).into_iter().skip(POOL_SIZE).collect();
    report.fault_servers = servers_named(pid, "airlock-mcp-fault-server");
    report
}
