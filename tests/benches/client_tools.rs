//! The client-owned tools benchmark: what one call of a tool the agent's client answers costs,
//! end to end, side by side in one run with the same program calling an in-process tool of the
//! daemon (real daemon, real workers, real socket).
//!
//! Run: `cargo build --release && cargo bench -p airlock-tests --bench client_tools`
//! (`AIRLOCK_BENCH_QUICK=1` for a shorter run). Each round runs, interleaved, the program
//! `return await tools.<ns>.add({ a: 1, b: 2 })` three ways and times the whole round trip as
//! the agent sees it (wall clock around the HTTP requests):
//! - in-process: `tools.test.add`, one `POST /v1/executions` → `ok`;
//! - client, stateful: `tools.client.add`, `POST /v1/executions` → `waiting`, then
//!   `POST /v1/executions/{id}/results` → `ok` (the daemon keeps the waiting execution in its
//!   journal and re-runs the program with the answer);
//! - client, stateless: `POST /v1/executions` with `client_results: []` → `waiting`, then the
//!   same program again with the answer in `client_results` and the waiting response's
//!   `determinism` → `ok` (the daemon keeps nothing).
//!
//! The answer is computed by the bench itself (the client's own time is nil). The p50 and p90
//! over the rounds are printed, and each client form's p50 as a ratio of the in-process one.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::client::Client;
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};
use std::time::Instant;

const IN_PROCESS: &str = "return await tools.test.add({ a: 1, b: 2 })";
const CLIENT: &str = "return await tools.client.add({ a: 1, b: 2 })";

fn client_tools() -> Value {
    json!([{
        "name": "add",
        "description": "Adds a and b.",
        "input_schema": {
            "type": "object",
            "properties": { "a": { "type": "number" }, "b": { "type": "number" } },
            "required": ["a", "b"]
        }
    }])
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

/// p50 and p90.
fn summary(mut xs: Vec<f64>) -> (f64, f64) {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (percentile(&xs, 0.5), percentile(&xs, 0.9))
}

async fn post(c: &mut Client, path: &str, body: &Value) -> Value {
    let (status, text) = c.post(path, body.to_string().into()).await.unwrap();
    assert_eq!(status.as_u16(), 200, "POST {path}: {text}");
    serde_json::from_str(&text).unwrap()
}

fn assert_ok(r: &Value) {
    assert_eq!(r["status"], json!("ok"), "{r}");
    assert_eq!(r["result"], json!(3), "{r}");
}

/// The answers to a waiting response's pending calls (the `add` the client owns).
fn answers(waiting: &Value) -> Vec<Value> {
    assert_eq!(waiting["status"], json!("waiting"), "{waiting}");
    let pending = waiting["pending_calls"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{waiting}");
    pending
        .iter()
        .map(|call| {
            let args = &call["args"];
            let sum = args["a"].as_f64().unwrap() + args["b"].as_f64().unwrap();
            json!({ "id": call["id"], "ok": sum })
        })
        .collect()
}

/// One in-process call: milliseconds.
async fn in_process(c: &mut Client) -> f64 {
    let t = Instant::now();
    let r = post(c, "/v1/executions", &json!({ "code": IN_PROCESS })).await;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert_ok(&r);
    ms
}

/// One client call, stateful: milliseconds.
async fn stateful(c: &mut Client) -> f64 {
    let t = Instant::now();
    let waiting = post(
        c,
        "/v1/executions",
        &json!({ "code": CLIENT, "client_tools": client_tools() }),
    )
    .await;
    let id = waiting["id"].as_str().unwrap().to_owned();
    let results = answers(&waiting);
    let done = post(
        c,
        &format!("/v1/executions/{id}/results"),
        &json!({ "results": results }),
    )
    .await;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert_ok(&done);
    ms
}

/// One client call, stateless: milliseconds.
async fn stateless(c: &mut Client) -> f64 {
    let t = Instant::now();
    let waiting = post(
        c,
        "/v1/executions",
        &json!({ "code": CLIENT, "client_tools": client_tools(), "client_results": [] }),
    )
    .await;
    let results = answers(&waiting);
    let done = post(
        c,
        "/v1/executions",
        &json!({
            "code": CLIENT,
            "client_tools": client_tools(),
            "client_results": results,
            "determinism": waiting["determinism"],
        }),
    )
    .await;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert_ok(&done);
    ms
}

fn main() {
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let rounds = if quick { 30 } else { 200 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let d = TestDaemon::start_with(DaemonOptions {
            pool_size: 2,
            ..DaemonOptions::default()
        })
        .await;
        let mut c = d.client().await;
        // Warm up: the pool, the tool list, the journal file.
        for _ in 0..3 {
            in_process(&mut c).await;
            stateful(&mut c).await;
            stateless(&mut c).await;
        }
        let (mut local, mut kept, mut resent) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            local.push(in_process(&mut c).await);
            kept.push(stateful(&mut c).await);
            resent.push(stateless(&mut c).await);
        }
        let (local, kept, resent) = (summary(local), summary(kept), summary(resent));
        println!(
            "one tool call, whole round trip as the agent sees it; p50 / p90 over {rounds} rounds:"
        );
        println!(
            "  in-process tool (tools.test.add):            {:7.2} ms / {:7.2} ms",
            local.0, local.1
        );
        println!(
            "  client tool, stateful (POST .../results):    {:7.2} ms / {:7.2} ms   ({:.2}x in-process)",
            kept.0,
            kept.1,
            kept.0 / local.0
        );
        println!(
            "  client tool, stateless (client_results):     {:7.2} ms / {:7.2} ms   ({:.2}x in-process)",
            resent.0,
            resent.1,
            resent.0 / local.0
        );
    });
}
