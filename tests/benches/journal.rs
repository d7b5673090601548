//! The journal benchmark: what a session adds to a tool call, and what a replayed call costs,
//! side by side in one run with a live one-shot call to the same in-process tool (real daemon,
//! real workers, real socket).
//!
//! Run: `cargo build --release && cargo bench -p airlock-tests --bench journal`
//! (`AIRLOCK_BENCH_QUICK=1` for a shorter run). Each round runs, interleaved: a baseline
//! program without calls, 1,000 sequential calls one-shot, the same 1,000 calls in a new
//! session (every call live and journaled), and the same program again in that session
//! (every call replayed). Per-call figures are (run time - baseline) / 1,000; the p50 over
//! the rounds is printed.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionRequest, ExecutionResponse, Status};
use airlock_supervisor::client::Client;
use airlock_tests::{DaemonOptions, TestDaemon};

const CALLS: &str =
    "let s = 0; for (let i = 0; i < 1000; i++) { s += await tools.test.add({ a: i, b: 1 }) } s";
const BASE: &str = "let s = 0; for (let i = 0; i < 1000; i++) { s += await Promise.resolve(i) } s";

fn p50(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs[xs.len() / 2]
}

async fn run(c: &mut Client, code: &str, session: Option<&str>) -> ExecutionResponse {
    let r = c
        .execute(&ExecutionRequest {
            code: code.to_owned(),
            language: Default::default(),
            timeout_ms: Some(60_000),
            session: session.map(str::to_owned),
            replay: None,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    r
}

/// The journal's own operations, without a daemon: where a journaled call's time goes.
fn store_operations() {
    use airlock_supervisor::journal::canonical;
    use airlock_supervisor::journal::log::IntentLog;
    use airlock_supervisor::journal::sqlite::SqliteStore;
    use airlock_supervisor::journal::store::{
        Bounds, CallKey, JournalStore, LogRecord, Outcome, Room, SessionRow,
    };
    use std::time::Instant;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    // The default bounds: what a daemon holds every write to.
    let room = Room {
        bounds: Bounds {
            total_bytes: 1 << 30,
            principal_bytes: 256 << 20,
            session_bytes: 64 << 20,
            principal_sessions: 256,
        },
        busy: &[],
    };
    store
        .create_session(
            &SessionRow {
                id: "s".into(),
                principal: "p".into(),
                created_ms: 0,
                used_ms: 0,
                clock_ms: 0,
                seed: [0; 32],
                bytes: 0,
                calls: 0,
            },
            room,
        )
        .unwrap();
    let n = 2000u32;
    let args: Vec<serde_json::Value> = (0..n)
        .map(|i| serde_json::json!({ "a": i, "b": 1 }))
        .collect();
    let t = Instant::now();
    let keys: Vec<CallKey> = args
        .iter()
        .map(|a| CallKey {
            tool: "test.add".into(),
            args_hash: canonical::hash(a),
            occurrence: 0,
        })
        .collect();
    let hash = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let t = Instant::now();
    for k in &keys {
        store.lookup("s", k).unwrap();
    }
    let miss = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let (log, _, _) = IntentLog::open(dir.path()).unwrap();
    let sent_record = |k: &CallKey| LogRecord::Sent {
        session: "s".into(),
        key: k.clone(),
        execution: "e".into(),
        read_only: false,
        at_ms: 1,
    };
    let outcome_record = |k: &CallKey| LogRecord::Outcome {
        session: "s".into(),
        key: k.clone(),
        outcome: Outcome::Ok {
            result: "2".into(),
            clock_ms: 1,
        },
        at_ms: 1,
    };
    let t = Instant::now();
    for k in &keys {
        log.append(&sent_record(k)).unwrap();
    }
    let sent = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let t = Instant::now();
    for k in &keys {
        log.append(&outcome_record(k)).unwrap();
    }
    let outcome = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let t = Instant::now();
    log.fold(|records| store.apply(records, room)).unwrap();
    let fold = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    // For comparison: the same records committed one transaction each, as before the log.
    let t = Instant::now();
    for k in &keys {
        let again = CallKey {
            occurrence: 1,
            ..k.clone()
        };
        store.apply(&[sent_record(&again)], room).unwrap();
        store.apply(&[outcome_record(&again)], room).unwrap();
    }
    let committed = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let t = Instant::now();
    for k in &keys {
        store.lookup("s", k).unwrap();
    }
    let hit = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    println!(
        "store, per call: canonical hash {hash:.1} µs, lookup miss {miss:.1} µs, log \"sent\" {sent:.1} µs, log outcome {outcome:.1} µs, fold both into SQLite {fold:.1} µs, lookup hit {hit:.1} µs; both committed one transaction each {committed:.1} µs"
    );
}

fn main() {
    store_operations();
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let rounds = if quick { 7 } else { 21 };
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
        run(&mut c, CALLS, None).await;
        run(&mut c, CALLS, Some("new")).await;
        let (mut live, mut journaled, mut replayed) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let base = run(&mut c, BASE, None).await.stats.run_ms;
            let per_call = |r: &ExecutionResponse| (r.stats.run_ms - base) * 1e3 / 1000.0;
            live.push(per_call(&run(&mut c, CALLS, None).await));
            let recorded = run(&mut c, CALLS, Some("new")).await;
            assert_eq!(recorded.replayed_calls, 0);
            journaled.push(per_call(&recorded));
            let again = run(&mut c, CALLS, recorded.session.as_deref()).await;
            assert_eq!(again.replayed_calls, 1000);
            replayed.push(per_call(&again));
        }
        let (live, journaled, replayed) = (p50(live), p50(journaled), p50(replayed));
        println!("tool call, mean per call over 1,000 sequential calls; p50 over {rounds} rounds:");
        println!("  live, one-shot:           {live:7.1} µs");
        println!(
            "  live, journaled session:  {journaled:7.1} µs   (journaling adds {:+.1} µs)",
            journaled - live
        );
        println!(
            "  replayed from journal:    {replayed:7.1} µs   ({:.2}x the live call)",
            replayed / live
        );
    });
}
