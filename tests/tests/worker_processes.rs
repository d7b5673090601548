//! Tests that look at this test process's worker children through `/proc`. Every test in
//! this file holds [`serial`] for its whole run: tests in one file share a process, and a test
//! counting or killing "its" worker must not see another test's.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionEvent, ExecutionRequest, Status};
use airlock_supervisor::client::Client;
use airlock_tests::processes::{
    busy_worker_children, wait_until, worker_children, zombie_children,
};
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::json;
use std::time::Duration;
use tokio::sync::{Mutex, MutexGuard};

async fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::const_new(());
    LOCK.lock().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_from_outside_is_reported() {
    let _serial = serial().await;
    let d = TestDaemon::start().await;
    let daemon_pid = std::process::id();
    // Only a worker that appears after this point can be the one running our program.
    let before = worker_children(daemon_pid);
    // The kill must land once the program runs, not while its worker is still starting (a
    // worker that dies before its handshake is a start failure, reported as `internal`): the
    // stream's `ToolCallStarted` says the worker is past the handshake and inside the program.
    let in_call = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let exec = {
        let socket = d.socket.clone();
        let in_call = in_call.clone();
        tokio::spawn(async move {
            let mut c = airlock_supervisor::client::Client::connect(&socket)
                .await
                .unwrap();
            let request = airlock_supervisor::agent_api::ExecutionRequest {
                code: "await tools.test.sleep({ ms: 20000 })".into(),
                timeout_ms: Some(30_000),
                ..Default::default()
            };
            c.execute_streaming(&request, |event| {
                if matches!(
                    event,
                    airlock_supervisor::agent_api::ExecutionEvent::ToolCallStarted { .. }
                ) {
                    in_call.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            })
            .await
            .unwrap()
        })
    };
    let mut victims = Vec::new();
    assert!(
        wait_until(10, || {
            victims = worker_children(daemon_pid);
            victims.retain(|p| !before.contains(p));
            in_call.load(std::sync::atomic::Ordering::SeqCst) && !victims.is_empty()
        }),
        "no worker reached the tool call"
    );
    // SAFETY: kill(2) of a child process of this test.
    unsafe { libc::kill(victims[0], libc::SIGKILL) };
    let r = exec.await.unwrap();
    assert_eq!(r.status, Status::Error);
    let err = r.error.unwrap();
    assert_eq!(err.kind.as_str(), "worker_crashed");
    assert!(err.message.contains("SIGKILL"), "{}", err.message);
    assert_eq!(d.exec("'next'").await.result, json!("next"));
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_worker_is_reaped() {
    let _serial = serial().await;
    let d = TestDaemon::start().await;
    for i in 0..10 {
        let r = d.exec(&format!("{i} * 2")).await;
        assert_eq!(r.result, json!(i * 2));
    }
    let _ = d.exec_timeout("while(true){}", 200).await;
    let me = std::process::id();
    assert!(
        wait_until(5, || zombie_children(me).is_empty()
            && worker_children(me).is_empty()),
        "zombies: {:?}, workers: {:?}",
        zombie_children(me),
        worker_children(me)
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_lets_running_executions_finish() {
    let _serial = serial().await;
    let d = TestDaemon::start_with(DaemonOptions::default().pool(1)).await;
    let socket = d.socket.clone();
    // Told when the program is inside its tool call, so that the stop comes mid-execution.
    let (inside, called) = tokio::sync::oneshot::channel();
    let running = tokio::spawn(async move {
        let mut c = Client::connect(&socket).await.unwrap();
        let mut inside = Some(inside);
        c.execute_streaming(
            &ExecutionRequest {
                code: "await tools.test.sleep({ ms: 700 }); 'finished'".into(),
                language: Default::default(),
                timeout_ms: Some(10_000),
                session: None,
                replay: None,
                ..Default::default()
            },
            |event| {
                if matches!(event, ExecutionEvent::ToolCallStarted { .. }) {
                    inside.take().map(|tx| tx.send(()));
                }
            },
        )
        .await
    });
    called.await.expect("the program's tool call started");
    let socket = d.socket.clone();
    d.stop().await;
    let r = running
        .await
        .unwrap()
        .expect("the running execution was cut off");
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.result, json!("finished"));
    // New connections are refused once the daemon is gone.
    assert!(Client::connect(&socket).await.is_err());
    let me = std::process::id();
    assert!(
        wait_until(5, || worker_children(me).is_empty()),
        "pool workers left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_worker_is_locked_down_with_only_the_ipc_socket_open() {
    let _serial = serial().await;
    let d = TestDaemon::start_with(DaemonOptions::default().pool(1)).await;
    d.wait_for_idle_workers(1).await;
    let mut pids = Vec::new();
    assert!(wait_until(10, || {
        pids = worker_children(std::process::id());
        !pids.is_empty()
    }));
    let pid = pids[0];
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("Seccomp:\t2"), "{status}");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    // No capability, even as the worker of a daemon run by root (CI runs as root): each set
    // empty, the bounding set too where the daemon could drop it (it holds CAP_SETPCAP, 8).
    let ours = std::fs::read_to_string("/proc/self/status").unwrap();
    let effective = ours
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:\t"))
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap();
    let setpcap = effective & (1 << 8) != 0;
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"]
        .into_iter()
        .chain(setpcap.then_some("CapBnd"))
    {
        assert!(
            status.contains(&format!("{set}:\t0000000000000000")),
            "{set}: {status}"
        );
    }
    let mut fds: Vec<(u32, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .map(|e| {
            let n: u32 = e.file_name().to_string_lossy().parse().unwrap();
            let target = std::fs::read_link(e.path())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (n, target)
        })
        .collect();
    fds.sort();
    assert_eq!(fds.len(), 4, "{fds:?}");
    for (n, target) in &fds[..3] {
        assert_eq!(target, "/dev/null", "fd {n}");
    }
    assert_eq!(fds[3].0, 3);
    assert!(fds[3].1.starts_with("socket:["), "{fds:?}");
    d.stop().await;
}

/// Starts an endless program from a client task, kills that task (the client hangs up), and
/// checks that the program's worker goes away instead of running to its 60 s deadline.
async fn hanging_up_cancels_the_execution(streaming: bool) {
    let _serial = serial().await;
    let d = TestDaemon::start().await;
    let me = std::process::id();
    let before = worker_children(me);
    let socket = d.socket.clone();
    let client = tokio::spawn(async move {
        let mut c = Client::connect(&socket).await.unwrap();
        let request = ExecutionRequest {
            code: "console.log('started'); while (true) {}".into(),
            language: Default::default(),
            timeout_ms: Some(60_000),
            session: None,
            replay: None,
            ..Default::default()
        };
        if streaming {
            let _ = c.execute_streaming(&request, |_| {}).await;
        } else {
            let _ = c.execute(&request).await;
        }
    });
    // The program's worker is the one in its endless loop, on a CPU (pre-started ones wait).
    let mut ours = Vec::new();
    assert!(wait_until(10, || {
        ours = busy_worker_children(me);
        ours.retain(|p| !before.contains(p));
        !ours.is_empty()
    }));
    client.abort();
    let _ = client.await;
    assert!(
        wait_until(5, || worker_children(me).iter().all(|p| !ours.contains(p))),
        "the worker kept running after its client left"
    );
    d.stop().await;
}

/// A streaming client that hangs up cancels its execution: the worker does not keep running a
/// program whose result nobody will read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_client_that_hangs_up_cancels_the_execution() {
    hanging_up_cancels_the_execution(true).await;
}

/// The same for a plain (non-streaming) request (hyper drops the request's future).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_client_that_hangs_up_cancels_the_execution() {
    hanging_up_cancels_the_execution(false).await;
}

async fn health(d: &TestDaemon) -> serde_json::Value {
    let (_, body) = d.client().await.get("/v1/health").await.unwrap();
    serde_json::from_str(&body).unwrap()
}

/// The live `airlock-zygote` children of this process.
fn zygotes() -> Vec<i32> {
    airlock_tests::processes::children_named(std::process::id(), "airlock-zygote")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_are_forked_by_one_zygote_that_is_replaced_when_it_dies() {
    let _serial = serial().await;
    let d = TestDaemon::start_with(DaemonOptions::default().pool(0)).await;
    let r = d.exec("'first'").await;
    assert_eq!(r.result, json!("first"));
    let health = health(&d).await;
    assert_eq!(
        health["pool"]["lockdown"]["forked"],
        json!(true),
        "{health}"
    );
    // A forked worker measures itself: the peak RSS still comes back.
    assert!(
        r.stats.peak_rss_bytes.unwrap_or(0) > 1 << 20,
        "{:?}",
        r.stats
    );
    let first = zygotes();
    assert_eq!(first.len(), 1, "one zygote: {first:?}");
    // Killed from outside (OOM killer, an operator): the next worker still comes, from a
    // new zygote (after the daemon noticed, through exec in the meantime).
    // SAFETY: kill(2) of a child process of this test.
    unsafe { libc::kill(first[0], libc::SIGKILL) };
    for i in 0..5 {
        assert_eq!(d.exec(&format!("{i}")).await.result, json!(i));
    }
    // A new zygote is started by the first request after a short backoff (a second).
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        assert_eq!(d.exec("'again'").await.result, json!("again"));
        let now = zygotes();
        if now.len() == 1 && now[0] != first[0] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no new zygote: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(wait_until(5, || zombie_children(std::process::id()).is_empty()));
    d.stop().await;
    // The zygote ends with the daemon and is reaped.
    assert!(wait_until(5, || zygotes().is_empty()), "{:?}", zygotes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_start_exec_starts_no_zygote() {
    let _serial = serial().await;
    let d = TestDaemon::start_with(
        DaemonOptions::default()
            .pool(1)
            .policy(|p| p.daemon.worker_start = airlock_policy::WorkerStart::Exec),
    )
    .await;
    assert_eq!(d.exec("6 * 7").await.result, json!(42));
    let health = health(&d).await;
    assert_eq!(
        health["pool"]["lockdown"]["forked"],
        json!(false),
        "{health}"
    );
    assert!(zygotes().is_empty(), "{:?}", zygotes());
    d.stop().await;
}

/// A daemon with a pool of one whose pre-started worker was killed while it waited, and is
/// gone; the pool has not noticed.
async fn its_one_pooled_worker_killed() -> TestDaemon {
    let d = TestDaemon::start_with(DaemonOptions::default().pool(1)).await;
    d.wait_for_idle_workers(1).await;
    let idle = worker_children(std::process::id());
    assert_eq!(idle.len(), 1, "{idle:?}");
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(idle[0], libc::SIGKILL) }, 0);
    assert!(wait_until(5, || !worker_children(std::process::id())
        .contains(&idle[0])));
    d
}

/// A pooled worker killed while it waits: the execution that takes it finds it dead, drops it
/// instead of handing it the program, and still runs; the pool refills and the next execution
/// takes a pre-started worker again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_worker_killed_while_idle_is_not_given_the_program() {
    let _serial = serial().await;
    let d = its_one_pooled_worker_killed().await;
    let r = d.exec("1 + 1").await;
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    assert_eq!(r.result, json!(2));
    assert!(!r.stats.worker_from_pool, "{:?}", r.stats);
    d.wait_for_idle_workers(1).await;
    let r = d.exec("2 + 2").await;
    assert_eq!(r.result, json!(4));
    assert!(r.stats.worker_from_pool, "{:?}", r.stats);
}

/// An execution that finds every execution slot taken waits for one before it takes a worker:
/// a worker is taken only once the execution holds its slot (`execution/worker.rs`), so
/// `max_concurrent_executions` bounds the workers taken too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_waiting_for_a_slot_takes_no_worker() {
    let _serial = serial().await;
    let d = std::sync::Arc::new(
        TestDaemon::start_with(
            DaemonOptions::default()
                .pool(2)
                .policy(|p| p.daemon.max_concurrent_executions = 1),
        )
        .await,
    );
    d.wait_for_idle_workers(2).await;
    // The one slot, held until the deadline; its worker is replaced only once it ends.
    let busy = {
        let d = d.clone();
        tokio::spawn(async move { d.exec_timeout("while (true) {}", 1_500).await })
    };
    for _ in 0..100 {
        if d.idle_workers().await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(d.idle_workers().await, 1);
    let waiting = {
        let d = d.clone();
        tokio::spawn(async move { d.exec("1 + 1").await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());
    assert_eq!(
        d.idle_workers().await,
        1,
        "the waiting execution took the idle worker without a slot"
    );
    let r = waiting.await.unwrap();
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    assert_eq!(r.result, json!(2));
    assert!(r.stats.queue_ms >= 300.0, "{:?}", r.stats);
    let r = busy.await.unwrap();
    assert_eq!(r.status, Status::Timeout, "{:?}", r.error);
}
