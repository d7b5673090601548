//! The load benchmark: 10,000 executions from 32 concurrent clients against the real `airlockd`
//! (a mix of trivial programs, brokered calls to a stdio MCP server, programs that throw, calls
//! the contract check refuses, and timeouts; see `airlock_tests::load`), every answer checked.
//! Prints throughput, latency p50/p99 and the daemon's RSS and descriptors after the warm-up,
//! in the middle and at the end, and fails on a lost or hung execution, a zombie, a stray
//! process or growth.
//!
//! Run: `cargo build --release && cargo bench -p airlock-tests --bench load`
//! (`AIRLOCK_LOAD_EXECUTIONS=N` for another count).

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::binaries;
use airlock_tests::load::{self, LoadOptions};

fn main() {
    let options = LoadOptions::from_env(10_000);
    println!(
        "airlock load benchmark: {} executions, {} clients (airlockd {})",
        options.executions,
        options.clients,
        binaries::airlockd().display()
    );
    let dir = tempfile::Builder::new()
        .prefix("airlock-load-")
        .tempdir()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let daemon = load::start_daemon(dir.path());
    let report = rt.block_on(load::run(&daemon, &options));
    print!("{}", report.summary());
    report.assert_healthy();
}
