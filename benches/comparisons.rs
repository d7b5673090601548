//! The comparisons: Airlock's trivial execution against `deno run` of the same program (when
//! `deno` is on PATH) and against pydantic-monty's pool (when `pydantic_monty` is importable),
//! beside Airlock's pre-started workers timed again by a Python client in a process of its own
//! (`airlock_client.py`), as monty is timed from Python, and the two alternating in pairs from
//! one Python process (`paired_with_monty.py`, Airlock's side also through the shipped Python
//! package when httpx is installed); the floor under both: the same hops with none of Airlock's
//! code (`airlock-bench-floor.rs`), timed in the same rounds (`floor_with_monty.py`); and a
//! tight loop on Airlock, the floor's pool of fresh processes and monty (`tight_with_monty.py`).
//! Airlock's own figures (latency, throughput, tool calls, memory) are the spine bench's
//! (`cargo bench -p airlock-tests --bench spine`); this one measures again only the paths the
//! comparisons are against, in the same run.
//!
//! Run: `cargo build --release && cargo bench -p airlock-benches --bench comparisons`
//! (set `AIRLOCK_BENCH_QUICK=1` for a shorter run). `AIRLOCK_BENCH_BUILD=dist` times the
//! Debian package's build (`packaging/debian/build` leaves it in `target/dist/`) instead of
//! README's.
//!
//! What is timed is what ships: the release `airlockd` that `cargo build --release` put beside
//! this bench's executable (`target/release/airlockd`), run as a process of its own with its
//! own log, on a policy file.

// Bench code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::WorkerStart;
use airlock_tests::bench::{Gap, TRIVIAL, latency, latency_parts, require_build, summary};
use airlock_tests::binaries;
use airlock_tests::real_daemon::{self, RealDaemon};
use std::path::Path;
use std::time::{Duration, Instant};

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

fn deno_latency(n: usize) -> Option<Vec<f64>> {
    let deno = which("deno")?;
    let dir = tempfile::tempdir().ok()?;
    let script = dir.path().join("trivial.ts");
    std::fs::write(&script, format!("console.log({TRIVIAL});\n")).ok()?;
    let mut out = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let status = std::process::Command::new(&deno)
            .args(["run", "--quiet", "--no-prompt"])
            .arg(&script)
            .env("DENO_DIR", dir.path().join("deno-dir"))
            .stdout(std::process::Stdio::null())
            .status()
            .ok()?;
        if !status.success() {
            return None;
        }
        out.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Some(out)
}

fn monty_latency(n: usize, gap: Gap) -> Option<(f64, f64)> {
    // Not installed is the usual failure: the caller says so, without the traceback.
    let args = [n.to_string().into(), gap.sleep_ms().to_string().into()];
    python_percentiles("monty_checkout.py", &args).ok()
}

/// The command line `airlock_client.py` and `paired_with_monty.py` share:
/// `SOCKET N GAP_MS POOL`.
fn client_args(
    socket: &std::path::Path,
    n: usize,
    pool: usize,
    gap: Gap,
) -> [std::ffi::OsString; 4] {
    [
        socket.as_os_str().to_owned(),
        n.to_string().into(),
        gap.sleep_ms().to_string().into(),
        pool.to_string().into(),
    ]
}

/// Airlock's pre-started workers timed by `benches/airlock_client.py`: a separate Python
/// process, as pydantic-monty is timed from Python (p50, p99 in ms).
fn python_client_latency(
    socket: &std::path::Path,
    n: usize,
    pool: usize,
    gap: Gap,
) -> Option<(f64, f64)> {
    let args = client_args(socket, n, pool, gap);
    python_percentiles("airlock_client.py", &args)
        .map_err(|stderr| println!("python client failed: {stderr}"))
        .ok()
}

/// Runs `benches/<script>` with `args` under `python3` and reads the `p50_ms p99_ms` line it
/// prints; `Err` holds its stderr when it fails.
fn python_percentiles(script: &str, args: &[std::ffi::OsString]) -> Result<(f64, f64), String> {
    match python_figures(script, args)?[..] {
        [p50, p99, ..] => Ok((p50, p99)),
        _ => Err(format!("{script} printed fewer than two figures")),
    }
}

/// Runs `benches/{script}` with `args` and reads the figures it prints on one line; `Err`
/// carries its stderr (or what was wrong with its output).
fn python_figures(script: &str, args: &[std::ffi::OsString]) -> Result<Vec<f64>, String> {
    python_figures_in(script, args, "typescript")
}

/// [`python_figures`] with Airlock's side running `language` (`AIRLOCK_BENCH_LANGUAGE`).
fn python_figures_in(
    script: &str,
    args: &[std::ffi::OsString],
    language: &str,
) -> Result<Vec<f64>, String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(args)
        .env("AIRLOCK_BENCH_LANGUAGE", language)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .map(str::parse::<f64>)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| format!("unexpected output: {}", text.trim()))
}

/// What `paired_with_monty` reads: p50s in ms, shares of pairs in which Airlock's execution
/// was the faster.
struct Paired {
    airlock: f64,
    monty: f64,
    share: f64,
    /// The same client reading the answer's JSON with orjson, when it is installed.
    orjson: Option<(f64, f64)>,
    /// The shipped Python package (`clients/python`), when httpx is installed.
    package: Option<(f64, f64)>,
}

/// Airlock's pre-started workers and pydantic-monty's pool timed in alternating pairs from one
/// Python process (`benches/paired_with_monty.py`).
fn paired_with_monty(
    socket: &std::path::Path,
    n: usize,
    pool: usize,
    gap: Gap,
    language: &str,
) -> Option<Paired> {
    let args = client_args(socket, n, pool, gap);
    // A client the script could not time prints NaN for its figures.
    let timed = |p50: f64, share: f64| (!p50.is_nan()).then_some((p50, share));
    let figures =
        python_figures_in("paired_with_monty.py", &args, language).and_then(|f| match f[..] {
            [
                airlock,
                _,
                monty,
                _,
                share,
                orjson,
                _,
                orjson_share,
                package,
                _,
                package_share,
            ] => Ok(Paired {
                airlock,
                monty,
                share,
                orjson: timed(orjson, orjson_share),
                package: timed(package, package_share),
            }),
            _ => Err(format!(
                "paired_with_monty.py printed {} figures, not 11",
                f.len()
            )),
        });
    figures
        .map_err(|stderr| println!("paired run failed: {stderr}"))
        .ok()
}

/// The floor under a pre-started execution, timed in rounds beside Airlock and monty from one
/// Python process (`benches/floor_with_monty.py`): the `airlock-bench-floor` servers answer
/// with two hops (`direct`, `hyper`) and with four through a fresh pre-forked process
/// (`relay`, `relay-at-once`). The seven p50s in ms, in the script's order.
fn floor_with_monty(socket: &std::path::Path, n: usize, pool: usize, gap: Gap) -> Option<Vec<f64>> {
    let modes = ["direct", "hyper", "relay", "relay-at-once"];
    let floors = Floors::start(modes.map(|mode| (mode, mode, &[] as &[&str])));
    let mut args = vec![socket.as_os_str().to_owned()];
    args.extend(floors.sockets());
    let [_, n, gap, pool] = client_args(socket, n, pool, gap);
    args.extend([n, gap, pool]);
    python_figures("floor_with_monty.py", &args)
        .and_then(|f| match f.len() {
            7 => Ok(f),
            len => Err(format!("floor_with_monty.py printed {len} figures, not 7")),
        })
        .map_err(|stderr| println!("floor run failed: {stderr}"))
        .ok()
}

/// `airlock-bench-floor` servers, each on a socket of its own in a temporary directory; killed
/// when dropped.
struct Floors {
    dir: tempfile::TempDir,
    servers: Vec<(String, std::process::Child)>,
}

impl Floors {
    /// Starts one server per `(name, mode, extra arguments)` and waits until all listen.
    fn start<'a>(floors: impl IntoIterator<Item = (&'a str, &'a str, &'a [&'a str])>) -> Floors {
        let dir = tempfile::tempdir().expect("a directory for the floor's sockets");
        let servers: Vec<_> = floors
            .into_iter()
            .map(|(name, mode, extra)| {
                let server = std::process::Command::new(binaries::built("airlock-bench-floor"))
                    .arg(mode)
                    .arg(dir.path().join(format!("{name}.sock")))
                    .args(extra)
                    .spawn()
                    .expect("airlock-bench-floor");
                (name.to_owned(), server)
            })
            .collect();
        let floors = Floors { dir, servers };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !floors.sockets().iter().all(|p| Path::new(p).exists()) {
            assert!(
                Instant::now() < deadline,
                "airlock-bench-floor did not bind its sockets"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        floors
    }

    /// The servers' sockets, in the order they were started.
    fn sockets(&self) -> Vec<std::ffi::OsString> {
        self.servers
            .iter()
            .map(|(name, _)| {
                self.dir
                    .path()
                    .join(format!("{name}.sock"))
                    .into_os_string()
            })
            .collect()
    }
}

impl Drop for Floors {
    fn drop(&mut self) {
        for (_, server) in &mut self.servers {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}

/// What `tight_with_monty` reads: p50s in ms of a tight loop on each path, and the share of
/// Airlock's executions that found a pre-started worker.
struct Tight {
    airlock: f64,
    floor_small: f64,
    floor_worker_sized: f64,
    monty: f64,
    from_pool: f64,
}

/// A tight loop (each request sent as soon as the last one answered, no wait for the pool) on
/// Airlock, on two `airlock-bench-floor` pools of fresh pre-forked processes (`relay-pool`:
/// small, and with a worker-sized heap), and on monty's pool, in rotating blocks from one
/// Python process (`benches/tight_with_monty.py`).
fn tight_with_monty(socket: &std::path::Path, n: usize) -> Option<Tight> {
    // 4 MiB filled, 84 pages written by each forked process: a forked worker's page faults
    // from fork to exit (docs/performance.md, "A forked worker's CPU").
    let floors = Floors::start([
        ("small", "relay-pool", &[] as &[&str]),
        ("worker-sized", "relay-pool", &["4096", "84"]),
    ]);
    let mut args = vec![socket.as_os_str().to_owned()];
    args.extend(floors.sockets());
    args.extend([n.to_string().into(), "3".into()]);
    python_figures("tight_with_monty.py", &args)
        .and_then(|f| match f[..] {
            [airlock, floor_small, floor_worker_sized, monty, from_pool] => Ok(Tight {
                airlock,
                floor_small,
                floor_worker_sized,
                monty,
                from_pool,
            }),
            _ => Err(format!(
                "tight_with_monty.py printed {} figures, not 5",
                f.len()
            )),
        })
        .map_err(|stderr| println!("tight loop run failed: {stderr}"))
        .ok()
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn main() {
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let n = if quick { 50 } else { 300 };
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
        "airlock comparisons ({}; daemon and worker from {})",
        if quick { "quick" } else { "full" },
        build.display(),
    );
    // Policies, sockets, state and logs of the daemons below.
    let dir = tempfile::Builder::new()
        .prefix("airlock-comparisons-")
        .tempdir()
        .expect("a directory for the daemons");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // Airlock's paths the comparisons are against, measured in this run: a new worker per
        // execution (forked by the zygote, and exec'd), and pre-started forked workers after
        // idling and in steady use.
        let mut slowest_p50 = 0.0f64;
        for (label, start) in [("fork", WorkerStart::Fork), ("exec", WorkerStart::Exec)] {
            let mut fresh = start_airlockd(&build, dir.path(), &format!("{label}-fresh"), 0, start);
            let _ = latency(&fresh.socket, 5, 0).await; // warm the page cache (and start the zygote)
            let (p50, p99) = summary(latency(&fresh.socket, n, 0).await);
            println!("[{label}] trivial execution, no pre-started worker: p50 {p50:7.3} ms   p99 {p99:7.3} ms   (n={n})");
            slowest_p50 = slowest_p50.max(p50);
            fresh.stop();
        }
        let mut pooled = start_airlockd(&build, dir.path(), "fork", 4, WorkerStart::Fork);
        let _ = latency(&pooled.socket, 5, 4).await;
        // [after idling, in steady use]
        let mut fork_pool_p50 = [f64::NAN; 2];
        for (i, gap) in [Gap::Idle, Gap::Busy].into_iter().enumerate() {
            let (p50, p99) = summary(latency_parts(&pooled.socket, n, 4, gap).await.client);
            let what = match gap {
                Gap::Idle => "after 10 ms idle",
                Gap::Busy => "in steady use   ",
            };
            println!("[fork] trivial execution, pre-started worker, {what}: p50 {p50:7.3} ms   p99 {p99:7.3} ms   (n={n})");
            fork_pool_p50[i] = p50;
            if gap == Gap::Idle {
                slowest_p50 = slowest_p50.max(p50);
            }
        }

        // deno, if installed.
        match deno_latency(if quick { 10 } else { 30 }) {
            Some(d) => {
                let (deno_p50, _) = summary(d);
                println!(
                    "deno run of the same program:          p50 {deno_p50:7.3} ms   → {:.1}× Airlock's slowest path above ({slowest_p50:.3} ms)",
                    deno_p50 / slowest_p50,
                );
            }
            None => println!("deno run: not measured (deno is not on PATH; `pip install deno` provides it)"),
        }
        // pydantic-monty's subprocess pool (checkout + run), if installed, with the same
        //    gaps as Airlock's pre-started workers above; and those workers timed again from
        //    Python in a process of its own (`benches/airlock_client.py`), as monty is timed.
        let mut monty_installed = false;
        for (i, gap) in [Gap::Idle, Gap::Busy].into_iter().enumerate() {
            let what = match gap {
                Gap::Idle => "10 ms idle before each",
                Gap::Busy => "back to back         ",
            };
            let python = python_client_latency(&pooled.socket, n, 4, gap);
            if let Some((p50, p99)) = python {
                println!(
                    "[fork] pre-started worker, Python client in its own process, {what}: p50 {p50:7.3} ms   p99 {p99:7.3} ms"
                );
            }
            match monty_latency(n, gap) {
                Some((p50, p99)) => {
                    monty_installed = true;
                    println!(
                        "pydantic-monty pool checkout+run, {what}: p50 {p50:7.3} ms   p99 {p99:7.3} ms   → Airlock's pre-started forked worker is {:.2}× faster (Rust client above){}",
                        p50 / fork_pool_p50[i],
                        python.map_or(String::new(), |(py50, _)| format!(", {:.2}× (Python client)", p50 / py50)),
                    )
                }
                None => {
                    println!("pydantic-monty: not measured (`pip install pydantic-monty` provides it)");
                    break;
                }
            }
            // The same two, alternating in one process: both meet the machine in the same
            // moment, where the lines above ran one after the other.
            // The same pairs with the program run by Airlock's Python engine: the same
            // interpreter family as monty's pool, the same `1 + 1`.
            if let Some(p) = paired_with_monty(&pooled.socket, n, 4, gap, "python") {
                println!(
                    "paired, alternating in one Python process, {what}, Airlock running Python: Airlock p50 {:7.3} ms, monty p50 {:7.3} ms   → {:.2}×, Airlock the faster in {:.0}% of pairs",
                    p.airlock,
                    p.monty,
                    p.monty / p.airlock,
                    p.share * 100.0,
                );
            }
            if let Some(p) = paired_with_monty(&pooled.socket, n, 4, gap, "typescript") {
                println!(
                    "paired, alternating in one Python process, {what}: Airlock p50 {:7.3} ms, monty p50 {:7.3} ms   → {:.2}×, Airlock the faster in {:.0}% of pairs",
                    p.airlock,
                    p.monty,
                    p.monty / p.airlock,
                    p.share * 100.0,
                );
                match p.orjson {
                    Some((orjson, share)) => println!(
                        "  interleaved with those pairs, Airlock's client decoding JSON with orjson (native, as monty's extension decodes): p50 {orjson:7.3} ms   → {:.2}×, the faster in {:.0}% of pairs",
                        p.monty / orjson,
                        share * 100.0,
                    ),
                    None => println!(
                        "  (orjson not installed: `pip install orjson` adds Airlock's client decoding JSON natively to these rounds)"
                    ),
                }
                match p.package {
                    Some((package, share)) => println!(
                        "  interleaved with those pairs, the shipped Python package (clients/python, Client.execute, a typed response): p50 {package:7.3} ms   → {:.2}×, the faster in {:.0}% of pairs",
                        p.monty / package,
                        share * 100.0,
                    ),
                    None => println!(
                        "  (httpx not installed: `pip install httpx` adds the shipped Python package to these rounds)"
                    ),
                }
            }
            // What the machine costs for the same hops with none of Airlock's code, in the
            // same rounds as Airlock and monty.
            if let Some(f) = floor_with_monty(&pooled.socket, n, 4, gap) {
                println!(
                    "floor, rounds in one Python process, {what}: two hops {:.3} ms (through hyper {:.3}), four hops through a fresh pre-forked process {:.3} ms (torn down at once {:.3}); Airlock health {:.3} ms, execution {:.3} ms; monty {:.3} ms",
                    f[0], f[1], f[2], f[3], f[4], f[5], f[6],
                );
            }
        }
        // A tight loop: the next request as soon as the last one answered, so that every
        //    execution's fresh process (its fork, copies and exit) is paid within the loop, as
        //    monty's reused process is not; beside the floor's pool of fresh processes.
        if let Some(t) = monty_installed
            .then(|| tight_with_monty(&pooled.socket, if quick { 100 } else { 500 }))
            .flatten()
        {
            println!(
                "tight loop (the next request as soon as the last answered, no wait for the pool; blocks in one Python process): Airlock p50 {:.3} ms ({:.0}% found a pre-started worker); the floor's pool of 4 fresh pre-forked processes with none of Airlock's code {:.3} ms, with a worker-sized heap (4 MiB, 84 pages copied per process) {:.3} ms; monty {:.3} ms   → Airlock {:.2}×, the floor {:.2}× / {:.2}×",
                t.airlock,
                t.from_pool * 100.0,
                t.floor_small,
                t.floor_worker_sized,
                t.monty,
                t.monty / t.airlock,
                t.monty / t.floor_small,
                t.monty / t.floor_worker_sized,
            );
        }
        pooled.stop();
    });
}
