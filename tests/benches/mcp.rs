//! The MCP benchmark: what brokering a tool call through Airlock costs on top of calling the
//! same stdio MCP server directly, and how many calls to one server overlap, measured side by
//! side in one run.
//!
//! 1. Per-call overhead: `N` sequential `echo` calls to `@modelcontextprotocol/server-everything`
//!    from one sandboxed program (`for … await tools.everything.echo(…)`), against `N`
//!    sequential `call_tool`s from a direct `rmcp` client (same lifecycle negotiation as the
//!    daemon) to its own server-everything child. "Broker" is the daemon's own time per call
//!    (`tool_calls[i].duration_ms`: policy check, schema check, MCP round trip); "end to end"
//!    adds the worker ⇄ supervisor hop and the program's JavaScript (run time of the calling
//!    program minus that of the same loop without calls, over `N`). Target: broker ≤ 1.3×
//!    direct.
//! 2. Concurrency: 100 `sleep {ms: 100}` calls to the fault server with `Promise.all`
//!    (`max_concurrent_calls` 128). Target: under 300 ms.
//! 3. Confinement: the time from a server's first use to its tool list (start, handshake,
//!    `tools/list`), and the time of one `echo` call on the running server, confined
//!    (`airlock-confine`: namespaces, Landlock, seccomp) and unconfined, alternating in one run,
//!    for the fault server (a small Rust binary) and server-everything (Node). Target: ≤ 10 ms
//!    added to the start, call time unchanged.
//!
//! Run: `npm ci --prefix tests/mcp-peers && cargo bench -p airlock-tests --bench mcp`
//! (`AIRLOCK_BENCH_QUICK=1` for a shorter run). Without node or server-everything, part 1 says
//! it was not measured.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::{ConfineMode, ServerTransport, ToolServer};
use airlock_supervisor::agent_api::{ExecutionRequest, ExecutionResponse, Status};
use airlock_supervisor::client::Client;
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_supervisor::tools::{CallContext, ToolSource};
use airlock_tests::{DaemonOptions, TestDaemon, fault_server, mcp_peers};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::TokioChildProcess;
use std::sync::Arc;
use std::time::Instant;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

/// (p50, mean) in the unit given.
fn summary(mut xs: Vec<f64>) -> (f64, f64) {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    (percentile(&xs, 0.5), mean)
}

async fn run_ok(c: &mut Client, code: &str) -> ExecutionResponse {
    let request = ExecutionRequest {
        code: code.to_owned(),
        language: Default::default(),
        timeout_ms: Some(60_000),
        session: None,
        replay: None,
        ..Default::default()
    };
    let r = c.execute(&request).await.expect("request");
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    r
}

async fn daemon_with(config: ToolServer) -> TestDaemon {
    TestDaemon::start_with(
        DaemonOptions::default()
            .pool(1)
            .source(Arc::new(McpServer::new(
                config,
                Arc::new(SecretStore::empty()),
            ))),
    )
    .await
}

/// Per-call times (µs) of `n` sequential calls through the daemon over `runs` programs:
/// (broker times, end-to-end mean per call of each run).
async fn brokered(config: ToolServer, n: usize, runs: usize) -> (Vec<f64>, Vec<f64>) {
    let d = daemon_with(config).await;
    let mut c = d.client().await;
    // Starts the server and warms both sides.
    let calls = format!(
        "for (let i = 0; i < {n}; i++) {{ await tools.everything.echo({{ message: String(i) }}) }} 1"
    );
    let base = format!("for (let i = 0; i < {n}; i++) {{ await Promise.resolve(String(i)) }} 1");
    run_ok(&mut c, &calls).await;
    let mut broker = Vec::new();
    let mut end_to_end = Vec::new();
    for _ in 0..runs {
        d.wait_for_idle_workers(1).await;
        let without = run_ok(&mut c, &base).await;
        d.wait_for_idle_workers(1).await;
        let with = run_ok(&mut c, &calls).await;
        assert_eq!(with.tool_calls.len(), n);
        broker.extend(with.tool_calls.iter().map(|t| t.duration_ms * 1e3));
        end_to_end.push((with.stats.run_ms - without.stats.run_ms) * 1e3 / n as f64);
    }
    d.stop().await;
    (broker, end_to_end)
}

/// Per-call times (µs) of `n * runs` sequential `call_tool`s from a direct rmcp client.
async fn direct(config: &ToolServer, n: usize, runs: usize) -> Vec<f64> {
    let ServerTransport::Stdio { command, args, .. } = &config.transport else {
        unreachable!("server_everything is a stdio server")
    };
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).kill_on_drop(true);
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn server-everything");
    // The daemon's negotiation: server/discover first, `initialize` if the server is older.
    let client = ()
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: None,
            },
        )
        .await
        .expect("MCP handshake");
    let call = |i: usize| {
        let mut arguments = serde_json::Map::new();
        arguments.insert("message".into(), i.to_string().into());
        CallToolRequestParams::new("echo").with_arguments(arguments)
    };
    for i in 0..n {
        client.call_tool(call(i)).await.expect("warm-up call");
    }
    let mut out = Vec::with_capacity(n * runs);
    for i in 0..n * runs {
        let t = Instant::now();
        client.call_tool(call(i)).await.expect("call");
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let _ = client.cancel().await;
    out
}

fn main() {
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let (n, runs) = if quick { (200, 3) } else { (500, 10) };
    println!(
        "airlock MCP benchmark ({}; worker {})",
        if quick { "quick" } else { "full" },
        airlock_tests::binaries::worker().display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // 1. Per-call overhead against server-everything.
        match mcp_peers::server_everything("everything", "the MCP benchmark") {
            Some(config) => {
                let direct_us = direct(&config, n, runs).await;
                let (broker_us, e2e_us) = brokered(config, n, runs).await;
                let (d50, dmean) = summary(direct_us);
                let (b50, bmean) = summary(broker_us);
                let (_, emean) = summary(e2e_us);
                println!(
                    "server-everything echo, direct rmcp client:  p50 {d50:7.1} µs   mean {dmean:7.1} µs   (n={})",
                    n * runs
                );
                println!(
                    "server-everything echo, through Airlock:     p50 {b50:7.1} µs   mean {bmean:7.1} µs   (broker time per call) → {:.2}× direct (p50), {:.2}× (mean)",
                    b50 / d50,
                    bmean / dmean
                );
                println!(
                    "server-everything echo, end to end per call:                 mean {emean:7.1} µs   (program run time with calls minus without, / {n}) → {:.2}× direct (mean)",
                    emean / dmean
                );
            }
            None => println!(
                "per-call overhead: not measured (run `npm ci --prefix tests/mcp-peers`; node must be on PATH)"
            ),
        }

        // 2. 100 parallel 100 ms calls to one server.
        let mut config = fault_server::stdio("fault", &[]);
        config.max_concurrent_calls = 128;
        let d = daemon_with(config).await;
        let mut c = d.client().await;
        run_ok(&mut c, "await tools.fault.echo({ text: 'start the server' })").await;
        let mut walls = Vec::new();
        let mut runs_ms = Vec::new();
        for _ in 0..if quick { 3 } else { 10 } {
            d.wait_for_idle_workers(1).await;
            let t = Instant::now();
            let r = run_ok(
                &mut c,
                "(await Promise.all(Array.from({ length: 100 }, () => tools.fault.sleep({ ms: 100 })))).length",
            )
            .await;
            walls.push(t.elapsed().as_secs_f64() * 1e3);
            runs_ms.push(r.stats.run_ms);
            assert_eq!(r.result, serde_json::json!(100));
        }
        let (w50, _) = summary(walls.clone());
        let wmax = walls.iter().cloned().fold(f64::NAN, f64::max);
        let (r50, _) = summary(runs_ms);
        println!(
            "100 parallel sleep(100 ms) calls to one stdio server (Promise.all): run p50 {r50:6.1} ms   request wall p50 {w50:6.1} ms   max {wmax:6.1} ms   (target < 300 ms)"
        );
        d.stop().await;

        // 3. Confined against unconfined: start and call.
        let rounds = if quick { 5 } else { 15 };
        let mut servers = vec![("fault server", fault_server::stdio("fault", &[]), "echo", serde_json::json!({ "text": "x" }))];
        if let Some(config) = mcp_peers::server_everything("everything", "the MCP benchmark") {
            servers.push(("server-everything", config, "echo", serde_json::json!({ "message": "x" })));
        }
        for (label, config, tool, args) in servers {
            let mut start = [Vec::new(), Vec::new()];
            let mut call = [Vec::new(), Vec::new()];
            for _ in 0..rounds {
                for (i, mode) in [ConfineMode::Off, ConfineMode::Strict].into_iter().enumerate() {
                    let mut config = config.clone();
                    config.confinement.mode = mode;
                    let server = McpServer::new(config, Arc::new(SecretStore::empty()));
                    let t = Instant::now();
                    server.tools().await.expect("the server starts");
                    start[i].push(t.elapsed().as_secs_f64() * 1e3);
                    let ctx = CallContext::new("bench", "bench", 1);
                    for _ in 0..20 {
                        let t = Instant::now();
                        server.call(tool, args.clone(), &ctx).await.into_result().expect("the call succeeds");
                        call[i].push(t.elapsed().as_secs_f64() * 1e6);
                    }
                    server.shutdown().await;
                }
            }
            let [open_start, confined_start] = start.map(|xs| summary(xs).0);
            let [open_call, confined_call] = call.map(|xs| summary(xs).0);
            println!(
                "{label}: start p50 unconfined {open_start:6.1} ms, confined {confined_start:6.1} ms (+{:.1} ms); call p50 unconfined {open_call:6.1} µs, confined {confined_call:6.1} µs ({:.2}×)",
                confined_start - open_start,
                confined_call / open_call
            );
        }
    });
}
