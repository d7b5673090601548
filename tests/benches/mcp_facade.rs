//! The MCP facade's overhead: the same program (one brokered tool call) run through the plain
//! HTTP API (`POST /v1/executions`), through the facade's `execute` at `/mcp` on the socket,
//! and through `airlock mcp` on stdio, interleaved in one run against one daemon, each
//! execution on a pre-started worker. Reports the p50s and the facade's p50 minus the HTTP
//! API's.
//!
//! Run: `cargo build --release && cargo bench -p airlock-tests --bench mcp_facade`
//! (`AIRLOCK_BENCH_QUICK=1` for a shorter run).

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionRequest, Status};
use airlock_tests::{DaemonOptions, TestDaemon, binaries};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const PROGRAM: &str = "const r = await tools.test.add({ a: 40, b: 2 }); r";
const POOL: usize = 2;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs[xs.len() / 2]
}

fn tools_call(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": { "name": "execute", "arguments": { "code": PROGRAM } }
    })
}

fn check(answer: &Value) {
    assert_eq!(
        answer["result"]["structuredContent"]["result"],
        json!(42),
        "{answer}"
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = if std::env::var_os("AIRLOCK_BENCH_QUICK").is_some() {
        50
    } else {
        300
    };
    let d = TestDaemon::start_with(DaemonOptions::default().pool(POOL)).await;
    let mut http = d.client().await;
    let mut mcp = d.client().await;
    let mut stdio = tokio::process::Command::new(binaries::airlock_cli())
        .arg("--socket")
        .arg(&d.socket)
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = stdio.stdin.take().unwrap();
    let mut stdout = BufReader::new(stdio.stdout.take().unwrap()).lines();
    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "bench", "version": "1" } }
    });
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    stdout.next_line().await.unwrap().unwrap();

    let request = ExecutionRequest::code(PROGRAM);
    let (mut plain, mut facade, mut relayed) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n as u64 {
        // Round-robin, each on a full pool, so the three see the same machine.
        d.wait_for_idle_workers(POOL).await;
        let t = Instant::now();
        let r = http.execute(&request).await.unwrap();
        plain.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(r.status, Status::Ok);

        d.wait_for_idle_workers(POOL).await;
        let body = Bytes::from(tools_call(i).to_string());
        let t = Instant::now();
        let req = hyper::Request::post("/mcp")
            .header("host", "airlock")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(Full::new(body))
            .unwrap();
        let resp = mcp.send(req).await.unwrap();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        facade.push(t.elapsed().as_secs_f64() * 1e3);
        check(&serde_json::from_slice(&bytes).unwrap());

        d.wait_for_idle_workers(POOL).await;
        let t = Instant::now();
        stdin
            .write_all(format!("{}\n", tools_call(i + 1)).as_bytes())
            .await
            .unwrap();
        let line = stdout.next_line().await.unwrap().unwrap();
        relayed.push(t.elapsed().as_secs_f64() * 1e3);
        check(&serde_json::from_str(&line).unwrap());
    }
    // The floor of each door, without an execution: GET /v1/health against an MCP ping.
    let (mut health, mut ping) = (Vec::new(), Vec::new());
    for i in 0..n as u64 {
        let t = Instant::now();
        let (status, _) = http.get("/v1/health").await.unwrap();
        health.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(status.is_success());
        let body = json!({ "jsonrpc": "2.0", "id": i, "method": "ping" }).to_string();
        let t = Instant::now();
        let req = hyper::Request::post("/mcp")
            .header("host", "airlock")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let resp = mcp.send(req).await.unwrap();
        let _ = resp.into_body().collect().await.unwrap();
        ping.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (health, ping) = (median(health), median(ping));
    let (plain, facade, relayed) = (median(plain), median(facade), median(relayed));
    println!("execute of one brokered call, p50 over {n} runs each (interleaved):");
    println!("  HTTP API  POST /v1/executions   {plain:.3} ms");
    println!(
        "  MCP       POST /mcp (execute)    {facade:.3} ms   overhead {:+.3} ms",
        facade - plain
    );
    println!(
        "  MCP stdio airlock mcp            {relayed:.3} ms   overhead {:+.3} ms",
        relayed - plain
    );
    println!("without an execution, p50 over {n} each:");
    println!("  HTTP API  GET /v1/health         {health:.3} ms");
    println!(
        "  MCP       POST /mcp (ping)       {ping:.3} ms   overhead {:+.3} ms",
        ping - health
    );
    drop(stdin);
    let _ = stdio.wait().await;
    d.stop().await;
}
