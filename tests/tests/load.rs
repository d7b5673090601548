//! The load run: 1,000 executions from 32 concurrent clients against the real `airlockd` (CI's
//! bounded form), 10,000 in the long mode (`AIRLOCK_LONG=1`, as `benches/load.rs` runs them);
//! `AIRLOCK_LOAD_EXECUTIONS` sets any other count. It fails on a lost or hung execution, a
//! zombie, a stray worker or tool server, or growth of the daemon's RSS or descriptors;
//! `--nocapture` shows the figures.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::load::{self, LoadOptions};

#[test]
fn executions_from_32_clients_lose_nothing_and_leave_nothing() {
    let long = std::env::var_os("AIRLOCK_LONG").is_some_and(|v| v == "1");
    let options = LoadOptions::from_env(if long { 10_000 } else { 1_000 });
    let dir = tempfile::Builder::new()
        .prefix("airlock-load-")
        .tempdir()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Started from this thread, which outlives the run (the daemon dies with the thread that
    // started it).
    let daemon = load::start_daemon(dir.path());
    let report = rt.block_on(load::run(&daemon, &options));
    println!("{}", report.summary());
    report.assert_healthy();
}
