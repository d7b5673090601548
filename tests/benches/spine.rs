//! The spine benchmark: latency, throughput, tool-call round trips and worker memory,
//! measured side by side in one run through the real socket with real confined workers, with
//! workers forked by the zygote and started by `exec` (`[daemon] worker_start`) one after the
//! other in the same run.
//!
//! Run: `cargo build --release && cargo bench -p airlock-tests --bench spine`
//! (set `AIRLOCK_BENCH_QUICK=1` for a shorter run). Airlock against `deno run`, pydantic-monty
//! and the floor under both is the comparisons bench of its own crate
//! (`cargo bench -p airlock-benches --bench comparisons`, `benches/comparisons.rs`).
//! `AIRLOCK_BENCH_POOL_ONLY=1` measures only the pre-started workers' latency and where it goes.
//! `AIRLOCK_BENCH_BUILD=dist` times the Debian package's build (`packaging/debian/build` leaves
//! it in `target/dist/`) instead of README's.
//!
//! What is timed is what ships: every daemon but one is the release `airlockd` that
//! `cargo build --release` put beside this bench's executable (`target/release/airlockd`), run
//! as a process of its own with its own log, on a policy file. A daemon compiled into this bench
//! would not be that binary: cargo compiles the bench's copy of the daemon's crates in the
//! bench's own graph and profile. The one exception is the tool-call round trips, which need the
//! in-process test tools (`tools.test`): they run on a daemon inside this bench, logging through
//! `airlockd`'s own subscriber.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::WorkerStart;
use airlock_supervisor::daemon::logging::{self, LogFormat};
use airlock_supervisor::secrets::scanner::{SecretScanner, SharedScanner};
use airlock_tests::bench::{
    Gap, Parts, TRIVIAL, connect, latency, latency_parts, require_build, run_ok, run_python_ok,
    summary, throughput,
};
use airlock_tests::real_daemon::{self, RealDaemon};
use airlock_tests::{DaemonOptions, TestDaemon, binaries, processes};
use std::path::Path;
use std::time::Instant;

/// The `airlockd` and worker of `build` (`target/release/` unless `AIRLOCK_BENCH_BUILD` names
/// another profile's directory) on a policy with `pool` pre-started workers started as `start`
/// says, its policy, socket, state and log in `parent/name`.
fn start_airlockd(
    build: &Path,
    parent: &Path,
    name: &str,
    pool: usize,
    start: WorkerStart,
) -> RealDaemon {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).expect("the daemon's directory");
    let start = match start {
        WorkerStart::Fork => "fork",
        WorkerStart::Exec => "exec",
    };
    let policy = real_daemon::with_daemon_setting(
        &real_daemon::policy(&dir, pool, ""),
        &format!("worker_start = \"{start}\""),
    );
    RealDaemon::start_build(&dir, &policy, build, |_| {})
}

/// Prints the pre-started worker's latency and where it went.
fn report_pool(label: &str, gap: Gap, parts: Parts, n: usize) {
    let (p50, p99) = summary(parts.client);
    let what = match gap {
        Gap::Idle => "after 10 ms idle",
        Gap::Busy => "in steady use   ",
    };
    println!(
        "[{label}] trivial execution, pre-started worker, {what}: p50 {p50:7.3} ms   p99 {p99:7.3} ms   (n={n})"
    );
    let part = |xs: Vec<f64>| summary(xs).0;
    println!(
        "[{label}]     its parts (p50): daemon total_ms {:.3}, worker round trip {:.3}, TypeScript {:.3}, evaluation {:.3} ms",
        part(parts.total),
        part(parts.run),
        part(parts.compile),
        part(parts.engine),
    );
}

fn main() {
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let n = if quick { 50 } else { 300 };
    // Only the pre-started worker's latency and its parts (for working on that path).
    let pool_only = std::env::var_os("AIRLOCK_BENCH_POOL_ONLY").is_some();
    // What is timed is what `cargo build --release` left in target/release (or, with
    // AIRLOCK_BENCH_BUILD=dist, what packaging/debian/build left in target/dist), not what this
    // bench was compiled from: refuse binaries older than their sources.
    let (build, rebuild) = match std::env::var("AIRLOCK_BENCH_BUILD") {
        Ok(profile) if profile == "dist" => (
            binaries::target_profile_dir()
                .parent()
                .expect("the target directory")
                .join("dist"),
            "packaging/debian/build",
        ),
        Ok(other) if other != "release" => {
            eprintln!("AIRLOCK_BENCH_BUILD={other}: say release or dist");
            std::process::exit(2);
        }
        _ => (binaries::target_profile_dir(), "cargo build --release"),
    };
    require_build(&build, rebuild);
    println!(
        "airlock spine benchmark ({}; daemon and worker from {})",
        if quick { "quick" } else { "full" },
        build.display(),
    );
    // Policies, sockets, state and logs of the daemons below.
    let dir = tempfile::Builder::new()
        .prefix("airlock-spine-")
        .tempdir()
        .expect("a directory for the daemons");
    // The in-process daemon of the tool-call round trips logs as airlockd does: each
    // execution's span costs ~10 µs at `info`.
    let log = SharedScanner::new(SecretScanner::new([]).expect("the log's secret scanner"));
    logging::init(LogFormat::Text, log.clone()).expect("the log subscriber");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // 1–3 for each way of starting workers, side by side in this one run.
        let mut daemons = Vec::new();
        for (label, start) in [("fork", WorkerStart::Fork), ("exec", WorkerStart::Exec)] {
            // 1. A new worker per execution, started when the request comes.
            if !pool_only {
                let mut fresh = start_airlockd(&build, dir.path(), &format!("{label}-fresh"), 0, start);
                let _ = latency(&fresh.socket, 5, 0).await; // warm the page cache (and start the zygote)
                let (fresh_p50, fresh_p99) = summary(latency(&fresh.socket, n, 0).await);
                println!("[{label}] trivial execution, no pre-started worker: p50 {fresh_p50:7.3} ms   p99 {fresh_p99:7.3} ms   (n={n})");
                fresh.stop();
            }

            // 2. Pre-started pool, after idling and in steady use.
            let mut pooled = start_airlockd(&build, dir.path(), label, 4, start);
            let _ = latency(&pooled.socket, 5, 4).await;
            for gap in [Gap::Idle, Gap::Busy] {
                let parts = latency_parts(&pooled.socket, n, 4, gap).await;
                report_pool(label, gap, parts, n);
            }
            if pool_only {
                pooled.stop();
                continue;
            }

            // 3. Throughput with 32 concurrent clients: three rounds of under a second each
            //    (one is at the mercy of whatever else the machine does that second); the
            //    median, all three, and how many of all came back ok.
            let mut rates = Vec::new();
            let (mut ok, mut total) = (0, 0);
            let cpu_before = processes::cpu_seconds_with_children(pooled.pid());
            for _ in 0..3 {
                let (rate, round_ok, round_total, _) =
                    throughput(&pooled.socket, 32, if quick { 20 } else { 60 }).await;
                rates.push(rate);
                ok += round_ok;
                total += round_total;
            }
            // What the daemon and its workers (the zygote, the pool, every worker reaped)
            // spent per execution: less at the machine's mercy than executions per second.
            let cpu = processes::cpu_seconds_with_children(pooled.pid()) - cpu_before;
            let mut sorted = rates.clone();
            sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!(
                "[{label}] throughput, 32 concurrent clients:        {:7.0} executions/s   (median of {:.0}, {:.0}, {:.0}; {ok}/{total} ok; daemon and workers {:.0} µs of CPU per execution)",
                sorted[1],
                rates[0],
                rates[1],
                rates[2],
                cpu / total as f64 * 1e6
            );
            daemons.push(pooled);
        }
        if daemons.is_empty() {
            return; // AIRLOCK_BENCH_POOL_ONLY
        }
        let mut pooled = daemons.swap_remove(0);

        // Baseline: an HTTP round trip on the socket that starts no worker.
        let mut hc = connect(&pooled.socket).await;
        let mut health = Vec::new();
        for _ in 0..n {
            let t = Instant::now();
            hc.get("/v1/health").await.expect("health");
            health.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let (h50, h99) = summary(health);
        println!("baseline: GET /v1/health round trip:   p50 {h50:7.3} ms   p99 {h99:7.3} ms");

        // 4. Brokered tool-call round trip: 1,000 sequential calls to an in-process tool, on a
        //    daemon inside this bench (the one figure not timed on the release airlockd).
        let in_process = TestDaemon::start_with(DaemonOptions::default().pool(4).log(log.clone())).await;
        let mut c = in_process.client().await;
        let runs = if quick { 5 } else { 15 };
        let mut per_call_us = Vec::new();
        for _ in 0..runs {
            let base = run_ok(&mut c, "let s = 0; for (let i = 0; i < 1000; i++) { s += await Promise.resolve(i) } s").await;
            let calls = run_ok(&mut c, "let s = 0; for (let i = 0; i < 1000; i++) { s += await tools.test.add({ a: i, b: 1 }) } s").await;
            per_call_us.push((calls.stats.run_ms - base.stats.run_ms) * 1e3 / 1000.0);
        }
        let (call_p50, _) = summary(per_call_us);
        println!("tool call round trip, in-process daemon (1,000 sequential, mean per call; p50 over {runs} runs): {call_p50:6.1} µs");
        // The same from Python, in the same rounds' daemon: the loop without calls is the base.
        let mut per_call_us = Vec::new();
        for _ in 0..runs {
            let base = run_python_ok(&mut c, "s = 0\nfor i in range(1000):\n    s += i + 1\ns").await;
            let calls = run_python_ok(&mut c, "s = 0\nfor i in range(1000):\n    s += await tools.test.add(a=i, b=1)\ns").await;
            per_call_us.push((calls.stats.run_ms - base.stats.run_ms) * 1e3 / 1000.0);
        }
        let (call_p50, _) = summary(per_call_us);
        println!("tool call round trip from Python, in-process daemon (1,000 sequential, mean per call; p50 over {runs} runs): {call_p50:6.1} µs");

        // 5. 100 parallel calls to a tool that sleeps 100 ms.
        let r = run_ok(&mut c, "await Promise.all(Array.from({ length: 100 }, () => tools.test.sleep({ ms: 100 }))); 1").await;
        println!("100 parallel 100 ms calls (Promise.all), in-process daemon: {:7.1} ms run time", r.stats.run_ms);
        in_process.stop().await;

        // 6. Worker memory.
        let mut c = connect(&pooled.socket).await;
        let r = run_ok(&mut c, TRIVIAL).await;
        let rss = r.stats.peak_rss_bytes.unwrap_or(0) as f64 / (1 << 20) as f64;
        println!("worker peak RSS (trivial program):     {rss:7.2} MiB");
        let r = run_python_ok(&mut c, "1 + 1").await;
        let rss = r.stats.peak_rss_bytes.unwrap_or(0) as f64 / (1 << 20) as f64;
        println!("worker peak RSS (trivial Python program): {rss:7.2} MiB");
        pooled.stop();
        for mut d in daemons {
            d.stop();
        }
    });
}
