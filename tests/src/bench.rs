//! What the benches share: requests of a trivial program through the real socket, percentiles,
//! a pre-started pool waited for, concurrent clients, and the check that the binaries a bench
//! times are not older than their sources.

// Bench code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionRequest, ExecutionResponse, Status};
use airlock_supervisor::client::Client;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const TRIVIAL: &str = "1 + 1";

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

pub fn summary(mut xs: Vec<f64>) -> (f64, f64) {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (percentile(&xs, 0.5), percentile(&xs, 0.99))
}

pub fn request(code: &str, timeout_ms: u64) -> ExecutionRequest {
    ExecutionRequest {
        code: code.to_owned(),
        language: Default::default(),
        timeout_ms: Some(timeout_ms),
        session: None,
        replay: None,
        ..Default::default()
    }
}

pub async fn run_ok(c: &mut Client, code: &str) -> ExecutionResponse {
    let r = c.execute(&request(code, 30_000)).await.expect("request");
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    r
}

/// [`run_ok`] for a Python program.
pub async fn run_python_ok(c: &mut Client, code: &str) -> ExecutionResponse {
    let mut request = request(code, 30_000);
    request.language = airlock_supervisor::agent_api::RequestLanguage::Python;
    let r = c.execute(&request).await.expect("request");
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    r
}

pub async fn connect(socket: &Path) -> Client {
    Client::connect(socket)
        .await
        .expect("connect to the daemon")
}

/// Trivial-program latency through the socket; with `pool`, waits before each request until
/// the pool is full again, so every execution takes a pre-started worker.
pub async fn latency(socket: &Path, n: usize, pool: usize) -> Vec<f64> {
    latency_parts(socket, n, pool, Gap::Idle).await.client
}

/// What the machine does between two measured executions of a pre-started worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Gap {
    /// The pool is polled every 10 ms until it is full again, and then the client sleeps
    /// 10 ms more, so the daemon, the worker and the CPUs sat idle right before the request
    /// (caches cold), as pydantic-monty's pool does before its run: an agent's request after
    /// a pause. (Before, the request went right after the health request that found the pool
    /// full, which had just woken the daemon.)
    Idle,
    /// The pool is polled back to back until it is full, then the next execution goes at
    /// once: a daemon in steady use (as pydantic-monty's loop below runs).
    Busy,
}

impl Gap {
    /// The sleep between polls of the pool and, once it is full, before the request, in ms:
    /// the same for the Rust client here and for the Python scripts (`GAP_MS`), so that
    /// "after idle" means one thing in every line.
    pub fn sleep_ms(self) -> u64 {
        match self {
            Gap::Idle => 10,
            Gap::Busy => 0,
        }
    }
}

/// Where a trivial execution's time went, one sample per execution, in ms: at the client,
/// the daemon's `total_ms`, the worker's round trip (`run_ms`), and inside the worker the
/// TypeScript pipeline (`compile_us`) and the evaluation (`engine_run_us`).
#[derive(Debug, Default)]
pub struct Parts {
    pub client: Vec<f64>,
    pub total: Vec<f64>,
    pub run: Vec<f64>,
    pub compile: Vec<f64>,
    pub engine: Vec<f64>,
}

/// Waits until `n` pre-started workers are idle, asking `/v1/health` on `c`.
pub async fn wait_for_pool(c: &mut Client, n: usize, gap: Gap) {
    loop {
        let (_, body) = c.get("/v1/health").await.expect("health");
        let health: serde_json::Value = serde_json::from_str(&body).expect("health json");
        let full = health["pool"]["idle"].as_u64().unwrap_or(0) as usize >= n;
        if gap == Gap::Idle {
            tokio::time::sleep(Duration::from_millis(gap.sleep_ms())).await;
        }
        if full {
            return;
        }
    }
}

pub async fn latency_parts(socket: &Path, n: usize, pool: usize, gap: Gap) -> Parts {
    let mut c = connect(socket).await;
    let mut health = connect(socket).await;
    let mut out = Parts::default();
    for _ in 0..n {
        if pool > 0 {
            wait_for_pool(&mut health, pool, gap).await;
        }
        let t = Instant::now();
        let r = run_ok(&mut c, TRIVIAL).await;
        out.client.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(r.stats.worker_from_pool, pool > 0);
        out.total.push(r.stats.total_ms);
        out.run.push(r.stats.run_ms);
        out.compile
            .push(r.stats.compile_us.unwrap_or(0) as f64 / 1e3);
        out.engine
            .push(r.stats.engine_run_us.unwrap_or(0) as f64 / 1e3);
    }
    out
}

/// `clients` concurrent clients each running `per_client` trivial programs back to back;
/// returns executions/s, how many came back ok, how many were sent and the seconds taken.
pub async fn throughput(
    socket: &Path,
    clients: usize,
    per_client: usize,
) -> (f64, usize, usize, f64) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let socket = socket.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut c = connect(&socket).await;
            let mut ok = 0usize;
            for _ in 0..per_client {
                let r = c.execute(&request(TRIVIAL, 30_000)).await;
                if r.is_ok_and(|r| r.status == Status::Ok) {
                    ok += 1;
                }
            }
            ok
        }));
    }
    let mut ok = 0;
    for t in tasks {
        ok += t.await.expect("client task");
    }
    let elapsed = started.elapsed().as_secs_f64();
    (ok as f64 / elapsed, ok, clients * per_client, elapsed)
}

/// `Err` names a source file newer than `binary` (from the dep-info file cargo wrote beside it,
/// the list cargo itself rebuilds from), with `rebuild`, the command that builds it again.
pub fn check_fresh(binary: &Path, rebuild: &str) -> Result<(), String> {
    let built = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(binary_time) = built(binary) else {
        return Ok(());
    };
    let mut name = binary.as_os_str().to_owned();
    name.push(".d");
    let dep_info = std::fs::read_to_string(&name).unwrap_or_default();
    // `target: dep dep ...`, a space inside a path escaped as `\ `.
    let deps = dep_info
        .split_once(": ")
        .map_or("", |(_, deps)| deps)
        .replace("\\ ", "\0");
    for dep in deps.split_whitespace() {
        let dep = PathBuf::from(dep.replace('\0', " "));
        if built(&dep).is_some_and(|t| t > binary_time) {
            return Err(format!(
                "{} is older than {}: run `{rebuild}` first",
                binary.display(),
                dep.display()
            ));
        }
    }
    Ok(())
}

/// Exits (status 2) naming what to run when `build`'s `airlockd` or `airlock-worker` is missing
/// or older than one of its sources: a bench times the binaries a build left, not what the
/// bench itself was compiled from. `rebuild` is the command that makes them.
pub fn require_build(build: &Path, rebuild: &str) {
    for name in ["airlockd", "airlock-worker"] {
        let binary = build.join(name);
        if !binary.is_file() {
            eprintln!("{} is missing: run `{rebuild}` first", binary.display());
            std::process::exit(2);
        }
        if let Err(stale) = check_fresh(&binary, rebuild) {
            eprintln!("{stale}");
            std::process::exit(2);
        }
    }
}

/// The benches' runtime: two worker threads, as the machine has two cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}
