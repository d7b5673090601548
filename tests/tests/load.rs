//! The short load run of CI: 1,000 executions (`AIRLOCK_LOAD_EXECUTIONS` to change it) from 32
//! concurrent clients against the real `airlockd`, the same suite as `benches/load.rs`. It
//! fails on a lost or hung execution, a zombie, a stray worker or tool server, or growth of
//! the daemon's RSS or descriptors; `--nocapture` shows the figures.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::load::{self, LoadOptions};

#[test]
fn a_thousand_executions_from_32_clients_lose_nothing_and_leave_nothing() {
    let options = LoadOptions::from_env(1_000);
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
