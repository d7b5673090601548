//! README's build against the packaged one: the same code built by `cargo build --release`
//! (cargo's 16 codegen units, no LTO, incremental; the worker linked dynamically) and as
//! `packaging/debian/build` builds it for the Debian package (the `dist` profile: fat LTO, one
//! codegen unit; the worker linked statically), timed side by side. Each round runs both
//! builds, in turn, on the same requests, and the order alternates from round to round, so
//! that both meet the machine in the same minutes (docs/performance.md, "Release and dist
//! builds").
//!
//! Run: `cargo build --release && packaging/debian/build && cargo bench -p airlock-tests --bench
//! builds` (`AIRLOCK_BENCH_QUICK=1` for a shorter run).

// Bench code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::bench::{
    Gap, latency, latency_parts, require_build, runtime, summary, throughput,
};
use airlock_tests::real_daemon::{self, RealDaemon};
use airlock_tests::{binaries, processes};
use std::path::{Path, PathBuf};

/// One build's daemons: one with a pool of four pre-started workers, one with none.
struct Build {
    name: &'static str,
    pooled: RealDaemon,
    fresh: RealDaemon,
}

impl Build {
    fn start(parent: &Path, name: &'static str, dir: &Path) -> Build {
        let start = |pool: usize| {
            let home = parent.join(format!("{name}-{pool}"));
            std::fs::create_dir(&home).expect("the daemon's directory");
            RealDaemon::start_build(&home, &real_daemon::policy(&home, pool, ""), dir, |_| {})
        };
        Build {
            name,
            pooled: start(4),
            fresh: start(0),
        }
    }
}

/// What one build did in one round.
#[derive(Default)]
struct Figures {
    idle: f64,
    busy: f64,
    fresh: f64,
    rate: f64,
    cpu_us: f64,
}

async fn round(build: &Build, n: usize, per_client: usize) -> Figures {
    let idle = summary(
        latency_parts(&build.pooled.socket, n, 4, Gap::Idle)
            .await
            .client,
    )
    .0;
    let busy = summary(
        latency_parts(&build.pooled.socket, n, 4, Gap::Busy)
            .await
            .client,
    )
    .0;
    let fresh = summary(latency(&build.fresh.socket, n, 0).await).0;
    // What the daemon and everything it started spent per execution: less at the mercy of
    // the machine's other tenants than executions per second.
    let cpu_before = processes::cpu_seconds_with_children(build.pooled.pid());
    let (rate, ok, total, _) = throughput(&build.pooled.socket, 32, per_client).await;
    let cpu = processes::cpu_seconds_with_children(build.pooled.pid()) - cpu_before;
    assert_eq!(ok, total, "{}: {ok} of {total} executions ok", build.name);
    Figures {
        idle,
        busy,
        fresh,
        rate,
        cpu_us: cpu / total as f64 * 1e6,
    }
}

fn main() {
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let (n, per_client, rounds) = if quick { (50, 10, 2) } else { (300, 60, 4) };
    let release = binaries::target_profile_dir();
    let dist: PathBuf = release.parent().expect("the target directory").join("dist");
    require_build(&release, "cargo build --release");
    require_build(&dist, "packaging/debian/build");
    let linking = |dir: &Path| {
        if binaries::dynamically_linked(&dir.join("airlock-worker")) {
            "worker dynamic"
        } else {
            "worker static"
        }
    };
    println!(
        "airlock builds benchmark ({}): release = {} ({}), dist = {} ({})",
        if quick { "quick" } else { "full" },
        release.display(),
        linking(&release),
        dist.display(),
        linking(&dist),
    );
    let parent = tempfile::Builder::new()
        .prefix("airlock-builds-")
        .tempdir()
        .expect("a directory for the daemons");
    let builds = [
        Build::start(parent.path(), "release", &release),
        Build::start(parent.path(), "dist", &dist),
    ];
    runtime().block_on(async {
        // Warm both: page cache, zygotes, pools.
        for b in &builds {
            let _ = latency(&b.pooled.socket, 5, 4).await;
            let _ = latency(&b.fresh.socket, 5, 0).await;
        }
        let mut ratios: Vec<[f64; 5]> = Vec::new();
        for r in 0..rounds {
            let mut figures = [Figures::default(), Figures::default()];
            // Alternate which build goes first.
            let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                figures[i] = round(&builds[i], n, per_client).await;
            }
            for (b, f) in builds.iter().zip(&figures) {
                println!(
                    "round {}: {:7}  pre-started after 10 ms idle p50 {:.3} ms, in steady use {:.3} ms, no pre-started worker {:.3} ms; 32 clients {:.0} executions/s, {:.0} µs of CPU per execution",
                    r + 1,
                    b.name,
                    f.idle,
                    f.busy,
                    f.fresh,
                    f.rate,
                    f.cpu_us
                );
            }
            let [a, b] = &figures;
            ratios.push([
                a.idle / b.idle,
                a.busy / b.busy,
                a.fresh / b.fresh,
                b.rate / a.rate,
                a.cpu_us / b.cpu_us,
            ]);
        }
        let median = |k: usize| {
            let mut xs: Vec<f64> = ratios.iter().map(|r| r[k]).collect();
            xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
            xs[xs.len() / 2]
        };
        println!(
            "dist over release (median of {rounds} rounds; > 1 means dist is better): after idle {:.2}×, steady {:.2}×, no pre-started worker {:.2}×, executions/s {:.2}×, CPU per execution {:.2}×",
            median(0),
            median(1),
            median(2),
            median(3),
            median(4)
        );
    });
}
