//! Faults of the daemon's own world, each against the real `airlockd` binary (a process of its
//! own, [`RealDaemon`]): SIGKILLed under load and started again; out of descriptors and out of
//! memory when it starts a worker; its state directory's disk full; the wall clock jumping.
//! In each case what the agent sees is checked (a clear error, or the right answer), the
//! daemon keeps running, and it serves normally once the resource is back.
//!
//! The spawn faults are checked at the API (what the agent gets), not inside the spawner, so
//! they hold however workers are started.
//!
//! Every test holds [`serial`]: they count the processes of their daemon, and two spinning
//! loads at once would make the machine's two cores the bottleneck of the other's deadlines.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionRequest, ExecutionResponse, Status};
use airlock_supervisor::client::{Client, ClientError};
use airlock_tests::processes::{
    alive, children_named, runs_as_root, servers_named, wait_until, worker_children,
};
use airlock_tests::real_daemon::{self, RealDaemon, fault_server_entry, health};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const FAULT_SERVER: &str = "airlock-mcp-fault-server";

fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("airlock-daemon-faults-")
        .tempdir()
        .unwrap()
}

/// One execution on a connection of its own; `Err` when the daemon did not answer.
async fn exec(
    socket: PathBuf,
    code: String,
    timeout_ms: u64,
    session: Option<String>,
) -> Result<ExecutionResponse, ClientError> {
    let mut c = Client::connect(&socket).await?;
    c.execute(&ExecutionRequest {
        code,
        timeout_ms: Some(timeout_ms),
        session,
        ..Default::default()
    })
    .await
}

/// One execution that must be answered within 60 s (a hang fails the test, not the runner).
fn run(
    rt: &tokio::runtime::Runtime,
    socket: &Path,
    code: &str,
    timeout_ms: u64,
) -> Result<ExecutionResponse, ClientError> {
    rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(60),
            exec(socket.to_owned(), code.to_owned(), timeout_ms, None),
        )
        .await
        .unwrap_or_else(|_| panic!("no answer within 60 s to {code:?}"))
    })
}

fn assert_serves(rt: &tokio::runtime::Runtime, daemon: &RealDaemon) {
    let r = run(rt, &daemon.socket, "const n: number = 20; n + 22", 30_000).unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}\n{}", daemon.log());
    assert_eq!(r.result, json!(42));
}

/// The real `airlockd` is SIGKILLed with 24 executions in flight: 12 hold a call at a stdio
/// MCP server (the fault server with `--linger`, which does not exit when its stdin closes,
/// so only the parent-death signal can end it) and 12 spin in their workers. Every client
/// sees the connection fail (none hangs), every worker, launcher and server process is gone
/// (workers and servers die by `PR_SET_PDEATHSIG`), and a daemon started again on the same
/// policy, state directory and socket path (the stale socket file is still there) serves
/// programs and tool calls.
#[test]
fn a_daemon_sigkilled_under_load_leaves_no_process_behind_and_serves_again_on_its_socket() {
    let _serial = serial();
    let dir = tempdir();
    // 24 at once, of one principal: more than its default share.
    let extra = format!(
        "{}[limits]\nmax_running_executions = 24\n",
        fault_server_entry("fault", 120_000, &["--linger"])
    );
    let mut daemon = RealDaemon::start(
        dir.path(),
        &real_daemon::policy(dir.path(), 2, &extra),
        |_| {},
    );
    let pid = daemon.pid();
    let rt = runtime();
    let running: Vec<_> = (0..24)
        .map(|i| {
            let code = if i % 2 == 0 {
                "await tools.fault.sleep({ ms: 120000 })"
            } else {
                "let n = 0; while (true) { n++ }"
            };
            rt.spawn(exec(daemon.socket.clone(), code.to_owned(), 120_000, None))
        })
        .collect();
    assert!(
        wait_until(60, || worker_children(pid).len() >= 24
            && !servers_named(pid, FAULT_SERVER).is_empty()),
        "24 executions never ran at once: workers {:?}, servers {:?}\n{}",
        worker_children(pid),
        servers_named(pid, FAULT_SERVER),
        daemon.log()
    );
    let mut processes = worker_children(pid);
    let launchers = children_named(pid, "airlock-confine");
    processes.extend(&launchers);
    let servers = servers_named(pid, FAULT_SERVER);
    processes.extend(&servers);
    assert!(processes.iter().all(|p| alive(*p)));

    daemon.kill();
    for task in running {
        let answer = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(20), task).await })
            .expect("a client hung after the daemon died")
            .unwrap();
        assert!(answer.is_err(), "an answer from a dead daemon: {answer:?}");
    }
    assert!(
        wait_until(10, || processes.iter().all(|p| !alive(*p))),
        "left behind: {:?} (workers and launchers {:?}, servers {servers:?})",
        processes.iter().filter(|p| alive(**p)).collect::<Vec<_>>(),
        launchers
    );

    assert!(
        daemon.socket.exists(),
        "the stale socket file is still there"
    );
    let daemon = RealDaemon::restart(dir.path());
    assert_serves(&rt, &daemon);
    let r = run(
        &rt,
        &daemon.socket,
        "await tools.fault.echo({ text: \"again\" })",
        30_000,
    )
    .unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}\n{}", daemon.log());
    assert_eq!(r.result, json!("again"));
    assert_eq!(servers_named(daemon.pid(), FAULT_SERVER).len(), 1);
}

/// (soft, hard) of the daemon's `resource`, after setting the soft limit to `soft`.
fn set_soft_limit(pid: u32, resource: libc::__rlimit_resource_t, soft: u64) -> (u64, u64) {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: reads the limit into `old`, a valid rlimit.
    let got = unsafe { libc::prlimit(pid as i32, resource, std::ptr::null(), &mut old) };
    assert_eq!(got, 0, "{}", std::io::Error::last_os_error());
    let new = libc::rlimit {
        rlim_cur: soft.min(old.rlim_max),
        rlim_max: old.rlim_max,
    };
    // SAFETY: `new` is a valid rlimit for the daemon, our own child.
    let set = unsafe { libc::prlimit(pid as i32, resource, &new, std::ptr::null_mut()) };
    assert_eq!(set, 0, "{}", std::io::Error::last_os_error());
    (old.rlim_cur, old.rlim_max)
}

/// The address space process `pid` has now (`VmSize`), in bytes.
fn vm_size_bytes(pid: u32) -> u64 {
    let kib: u64 = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// The open descriptor numbers of process `pid`.
fn open_fds(pid: u32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The execution failed because no worker could be started, and says what to do.
fn assert_clear_spawn_failure(r: &ExecutionResponse, cause: &str) {
    assert_eq!(r.status, Status::Error, "{r:?}");
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.kind.as_str(), "internal", "{e:?}");
    assert!(
        e.message.contains("could not start a sandboxed worker") && e.message.contains(cause),
        "{e:?}"
    );
    let hint = e.hint.as_deref().unwrap_or_default();
    assert!(
        hint.contains("run the program again") && hint.contains("not a problem with the program"),
        "the hint tells the agent to retry: {e:?}"
    );
}

/// `EMFILE` at spawn: the running daemon's `RLIMIT_NOFILE` is lowered (prlimit) to its lowest
/// free descriptor number, so it can open no descriptor at all; the request comes on a
/// connection it accepted before, so the first thing that fails is the worker's socket pair.
/// The execution fails with `internal`, a message naming "Too many open files" and a hint to
/// run it again; the daemon keeps running, and serves again once the limit is back. Root only:
/// the daemon is not dumpable, so only root may read its descriptors.
#[test]
fn emfile_at_spawn_fails_the_execution_clearly_and_the_daemon_serves_again() {
    if !runs_as_root(
        "emfile_at_spawn_fails_the_execution_clearly_and_the_daemon_serves_again",
        "to read the daemon's /proc/<pid>/fd (it is not dumpable)",
    ) {
        return;
    }
    let _serial = serial();
    let dir = tempdir();
    let daemon = RealDaemon::start(dir.path(), &real_daemon::policy(dir.path(), 0, ""), |_| {});
    let rt = runtime();
    let pid = daemon.pid();
    let request = |code: &str| ExecutionRequest {
        code: code.to_owned(),
        timeout_ms: Some(30_000),
        ..Default::default()
    };
    rt.block_on(async {
        // One connection for everything: no other connection's descriptor is freed while the
        // limit is low. The first execution opens for good whatever executions open lazily.
        let mut c = Client::connect(&daemon.socket).await.unwrap();
        let r = c.execute(&request("1")).await.unwrap();
        assert_eq!(r.status, Status::Ok, "{r:?}");
        // That execution's worker socket and pidfd are released in the background, after the
        // answer: wait until they are, or a descriptor closed after the limit is set would
        // make room below it.
        assert!(wait_until(10, || worker_children(pid).is_empty()));
        let mut open = open_fds(pid);
        assert!(wait_until(10, || {
            std::thread::sleep(Duration::from_millis(50));
            let now = open_fds(pid);
            std::mem::replace(&mut open, now) == open
        }));
        let lowest_free = (0..).find(|n| !open.contains(n)).unwrap();
        let (soft, _) = set_soft_limit(pid, libc::RLIMIT_NOFILE, lowest_free);
        let r = tokio::time::timeout(Duration::from_secs(60), c.execute(&request("1 + 1")))
            .await
            .expect("no answer within 60 s")
            .unwrap();
        assert_clear_spawn_failure(&r, "Too many open files");
        set_soft_limit(pid, libc::RLIMIT_NOFILE, soft);
        let r = c.execute(&request("2 + 2")).await.unwrap();
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(r.result, json!(4));
    });
    assert_serves(&rt, &daemon);
}

/// Out of memory at spawn, as an address-space limit produces it: the running daemon's
/// `RLIMIT_AS` is set to the address space it already has (prlimit), so the next new mapping
/// fails with `ENOMEM` — the first one an execution needs is the stack glibc's `posix_spawn`
/// maps for the worker's child, so the errno the agent hears of is `ENOMEM` ("Cannot allocate
/// memory") from the spawn; the daemon's small allocations still come from heaps it mapped
/// earlier. (The kernel's own `ENOMEM` from `fork`/`clone`, when it has no memory for a task,
/// cannot be produced for one process; `EAGAIN` from `RLIMIT_NPROC` is not enforced for root.)
/// The daemon keeps running and serves again once the limit is lifted.
///
/// With the zygote (`worker_start = "fork"`, the default) the daemon maps nothing to start a
/// worker once the zygote runs, so the same limit leaves executions running: that is checked
/// too.
#[test]
fn enomem_at_spawn_fails_the_execution_clearly_and_the_daemon_serves_again() {
    let _serial = serial();
    let dir = tempdir();
    let policy = real_daemon::with_daemon_setting(
        &real_daemon::policy(dir.path(), 0, ""),
        "worker_start = \"exec\"",
    );
    let daemon = RealDaemon::start(dir.path(), &policy, |_| {});
    let rt = runtime();
    assert_serves(&rt, &daemon);
    let pid = daemon.pid();
    let (soft, _) = set_soft_limit(pid, libc::RLIMIT_AS, vm_size_bytes(pid));
    let r = run(&rt, &daemon.socket, "1 + 1", 30_000).unwrap();
    assert_clear_spawn_failure(&r, "Cannot allocate memory");
    set_soft_limit(pid, libc::RLIMIT_AS, soft);
    assert_serves(&rt, &daemon);
}

/// The daemon's own `ENOMEM` under the zygote: once the zygote runs, a new worker is a fork of
/// the zygote (whose memory is its own), so the daemon at its address-space limit still gets
/// workers and executions run.
#[test]
fn with_the_zygote_the_daemons_enomem_does_not_stop_executions() {
    let _serial = serial();
    let dir = tempdir();
    let daemon = RealDaemon::start(dir.path(), &real_daemon::policy(dir.path(), 0, ""), |_| {});
    let rt = runtime();
    assert_serves(&rt, &daemon);
    let pid = daemon.pid();
    let (soft, _) = set_soft_limit(pid, libc::RLIMIT_AS, vm_size_bytes(pid));
    let r = run(&rt, &daemon.socket, "1 + 1", 30_000).unwrap();
    set_soft_limit(pid, libc::RLIMIT_AS, soft);
    assert_eq!(r.status, Status::Ok, "{r:?}\n{}", daemon.log());
    assert_eq!(r.result, json!(2));
    assert_serves(&rt, &daemon);
}

/// Polls `GET /v1/health` until `cond` holds for it (up to `secs` seconds); the last answer.
fn health_until(
    socket: &Path,
    secs: u64,
    mut cond: impl FnMut(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    wait_until(secs, || {
        last = health(socket).unwrap_or_default();
        cond(&last)
    });
    last
}

/// Fills the file system under `dir` (seen through the daemon's mount namespace) with one file
/// until a write fails with `ENOSPC`.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = vec![0x55u8; 64 * 1024];
    loop {
        match file.write_all(&chunk).and_then(|()| file.sync_all()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    // Whatever a smaller write could still take, too.
    for size in [4096usize, 512, 1] {
        while file.write_all(&chunk[..size]).is_ok() && file.sync_all().is_ok() {}
    }
    path
}

/// The state directory's disk full: the daemon runs in a mount namespace of its own where its
/// state directory (journal, audit log, servers' scratch) is an 8 MiB tmpfs, and the test fills
/// it through `/proc/<pid>/root`. As docs/audit.md and docs/agent-api.md say: executions
/// without a session go on (`ok`); the audit log turns `degraded` with `SQLITE_FULL` named in
/// `/v1/health` and as a warning in each response; a session request (its next run, a new
/// session) is refused `503 journal_unavailable` naming the full disk, with a hint to run
/// one-shot meanwhile, and `journal.status: "unavailable"` in health; nothing crashes. Once the
/// filler is deleted, the audit log is `ok` again and the session's run goes on, its recorded
/// call replayed. Root only (a mount namespace and a tmpfs).
#[test]
fn a_full_state_directory_degrades_audit_and_sessions_clearly_and_recovers() {
    if !runs_as_root(
        "a_full_state_directory_degrades_audit_and_sessions_clearly_and_recovers",
        "to mount a small tmpfs in a mount namespace of the daemon's",
    ) {
        return;
    }
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::process::CommandExt as _;
    let _serial = serial();
    let dir = tempdir();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let target = std::ffi::CString::new(state.as_os_str().as_bytes()).unwrap();
    let extra = fault_server_entry("fault", 10_000, &[]);
    let daemon = RealDaemon::start(
        dir.path(),
        &real_daemon::policy(dir.path(), 0, &extra),
        move |cmd| {
            // SAFETY: unshare and mount are async-signal-safe system calls; `target` was made
            // before the fork.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::unshare(libc::CLONE_NEWNS) != 0
                        || libc::mount(
                            c"none".as_ptr(),
                            c"/".as_ptr(),
                            std::ptr::null(),
                            libc::MS_REC | libc::MS_PRIVATE,
                            std::ptr::null(),
                        ) != 0
                        || libc::mount(
                            c"airlock-full".as_ptr(),
                            target.as_ptr(),
                            c"tmpfs".as_ptr(),
                            0,
                            c"size=8m,mode=0700".as_ptr().cast(),
                        ) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        },
    );
    let rt = runtime();
    let socket = daemon.socket.clone();
    // A session with a call recorded, before the disk fills (which also starts the server,
    // with its scratch directory).
    let first = rt
        .block_on(exec(
            socket.clone(),
            "await tools.fault.echo({ text: \"one\" })".into(),
            30_000,
            Some("new".into()),
        ))
        .unwrap();
    assert_eq!(first.status, Status::Ok, "{first:?}\n{}", daemon.log());
    let session = first.session.clone().unwrap();

    let inside = PathBuf::from(format!("/proc/{}/root", daemon.pid()))
        .join(state.strip_prefix("/").unwrap());
    let filler = fill(&inside);

    // Executions without a session go on; the audit log says it cannot write, soon (its
    // writer thread commits what queued up), both in health and in the responses.
    let mut warned = None;
    for i in 0..200 {
        let r = run(&rt, &socket, &format!("{i} + 1"), 30_000).unwrap();
        assert_eq!(r.status, Status::Ok, "{r:?}\n{}", daemon.log());
        assert_eq!(r.result, json!(i + 1));
        if let Some(w) = r.warnings.iter().find(|w| w.contains("audit")) {
            warned = Some(w.clone());
            break;
        }
    }
    let warned = warned.unwrap_or_else(|| panic!("no audit warning\n{}", daemon.log()));
    assert!(warned.contains("full"), "{warned}");
    let h = health_until(&socket, 10, |h| h["audit"]["state"] == "degraded");
    assert_eq!(h["audit"]["state"], "degraded", "{h}");
    assert!(
        h["audit"]["reason"].as_str().unwrap().contains("full"),
        "{h}"
    );

    // The session: its next run (a new call, and code too big for the pages the journal
    // already has) is refused while its records cannot be brought up to date, or its new call
    // fails clearly; never a crash or a hang. A new session likewise.
    let padding = format!("// {}\n", "x".repeat(1 << 20));
    let code = format!(
        "{padding}const a = await tools.fault.echo({{ text: \"one\" }});\nconst b = await tools.fault.echo({{ text: \"two\" }});\n[a, b]"
    );
    let again = rt.block_on(exec(
        socket.clone(),
        code.clone(),
        30_000,
        Some(session.clone()),
    ));
    let new_session = rt.block_on(exec(
        socket.clone(),
        format!("{padding}await tools.fault.echo({{ text: \"new\" }})"),
        30_000,
        Some("new".into()),
    ));
    let brief = |r: &Result<ExecutionResponse, ClientError>| match r {
        Err(e) => format!("refused: {e}"),
        Ok(r) => format!(
            "{:?} {} {:?} {:?}",
            r.status,
            r.result,
            r.error,
            r.tool_calls.iter().map(|c| &c.error).collect::<Vec<_>>()
        ),
    };
    println!(
        "disk full: the session's next run: {}\nnew session: {}",
        brief(&again),
        brief(&new_session)
    );
    let journal_refused = |r: &Result<ExecutionResponse, ClientError>| match r {
        Err(ClientError::Api {
            status,
            code,
            message,
            hint,
        }) => {
            status.as_u16() == 503
                && code == "journal_unavailable"
                && message.contains("disk is full")
                && hint.as_deref().is_some_and(|h| h.contains("one-shot"))
        }
        Err(_) => false,
        Ok(r) => format!("{:?}", r.error).contains("journal_unavailable"),
    };
    assert!(
        journal_refused(&again) && journal_refused(&new_session),
        "{}\n{}\n{}",
        brief(&again),
        brief(&new_session),
        daemon.log()
    );
    let h = health(&socket).unwrap();
    assert_eq!(h["journal"]["status"], "unavailable", "{h}");

    // Space again: the audit log and the journal recover by themselves.
    std::fs::remove_file(&filler).unwrap();
    assert_serves(&rt, &daemon);
    let h = health_until(&socket, 10, |h| {
        h["audit"]["state"] == "ok" && h["journal"]["status"] == "ok"
    });
    assert_eq!(h["audit"]["state"], "ok", "{h}");
    let resumed = rt
        .block_on(exec(socket.clone(), code, 30_000, Some(session)))
        .unwrap();
    assert_eq!(resumed.status, Status::Ok, "{resumed:?}\n{}", daemon.log());
    assert_eq!(resumed.result, json!(["one", "two"]));
    assert!(resumed.tool_calls[0].replayed, "{:?}", resumed.tool_calls);
    let h = health_until(&socket, 10, |h| h["journal"]["status"] == "ok");
    assert_eq!(h["journal"]["status"], "ok", "{h}");
    assert!(!daemon.log().contains("panicked"), "{}", daemon.log());
}

/// libfaketime from the Debian package `faketime` (`.ci/run` installs it).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Writes libfaketime's offset (`+1d`, `-2d`, …) for the daemon to read.
fn set_offset(file: &Path, offset: &str) {
    // Written aside and renamed, so the daemon never reads half a line.
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, format!("{offset}\n")).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// The wall clock jumps while executions and timeouts run: the daemon runs under libfaketime
/// (`LD_PRELOAD`, offset read from a file, `FAKETIME_DONT_FAKE_MONOTONIC=1`), which moves
/// `CLOCK_REALTIME` as an NTP step or `date -s` would and leaves `CLOCK_MONOTONIC` alone.
/// While a spinning program (2 s timeout) and a call to a hanging tool server (1.5 s call
/// timeout) run, the clock jumps a day forward, then two days back: both timeouts fire after
/// their full time (not early at the forward jump, not never after the backward one), the
/// daemon keeps serving. A program's `Date.now()` is the daemon's wall clock at its start
/// (the determinism clock), so it follows the jump, as do the audit log's timestamps
/// (printed); the workers themselves never see libfaketime (they get an empty environment).
#[test]
fn a_wall_clock_jump_neither_fires_timeouts_early_nor_stops_them() {
    if !Path::new(LIBFAKETIME).exists() {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_FAKETIME").is_none(),
            "AIRLOCK_REQUIRE_FAKETIME is set but {LIBFAKETIME} is missing"
        );
        eprintln!("SKIPPED a_wall_clock_jump_…: needs {LIBFAKETIME} (apt-get install faketime)");
        return;
    }
    let _serial = serial();
    let dir = tempdir();
    let offset = dir.path().join("faketime");
    set_offset(&offset, "+0");
    let extra = fault_server_entry("fault", 1_500, &[]);
    let daemon = RealDaemon::start(
        dir.path(),
        &real_daemon::policy(dir.path(), 1, &extra),
        |cmd| {
            cmd.env("LD_PRELOAD", LIBFAKETIME)
                .env("FAKETIME_TIMESTAMP_FILE", &offset)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
                // Read the file again at most once a second.
                .env("FAKETIME_CACHE_DURATION", "1");
        },
    );
    let rt = runtime();
    let socket = daemon.socket.clone();
    let real_now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as f64
    };
    const DAY_MS: f64 = 86_400_000.0;

    for (jump, expected_offset) in [("+1d", DAY_MS), ("-1d", -DAY_MS)] {
        let started = Instant::now();
        let spinning = rt.spawn(exec(
            socket.clone(),
            "let n = 0; while (true) { n++ }".into(),
            2_000,
            None,
        ));
        let hanging = rt.spawn(exec(
            socket.clone(),
            "try { await tools.fault.hang({}); \"answered\" } catch (e: any) { e.code }".into(),
            30_000,
            None,
        ));
        // Both are running, then the clock jumps.
        let h = health_until(&socket, 30, |h| {
            h["executions"]["running"].as_u64().unwrap_or(0) >= 2
        });
        assert!(h["executions"]["running"].as_u64().unwrap_or(0) >= 2, "{h}");
        set_offset(&offset, jump);
        let spun = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), spinning).await })
            .expect("the timeout never fired")
            .unwrap()
            .unwrap();
        let spun_after = started.elapsed();
        let hung = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), hanging).await })
            .expect("the call timeout never fired")
            .unwrap()
            .unwrap();
        let hung_after = started.elapsed();
        assert_eq!(spun.status, Status::Timeout, "{spun:?}");
        assert!(
            spun_after >= Duration::from_millis(2_000),
            "{jump}: fired early, {spun_after:?}"
        );
        assert_eq!(hung.status, Status::Ok, "{hung:?}");
        assert_eq!(hung.result, json!("timeout"), "{hung:?}");
        assert!(
            hung_after >= Duration::from_millis(1_500),
            "{jump}: fired early, {hung_after:?}"
        );
        assert!(
            hung.tool_calls[0].duration_ms >= 1_500.0 && hung.tool_calls[0].duration_ms < 10_000.0,
            "{jump}: the call's duration is measured on the monotonic clock: {:?}",
            hung.tool_calls[0]
        );

        // The daemon's wall clock, as a program sees it, has jumped (libfaketime took effect).
        let r = run(&rt, &socket, "Date.now()", 30_000).unwrap();
        assert_eq!(r.status, Status::Ok, "{r:?}");
        let seen = r.result.as_f64().unwrap() - real_now_ms();
        assert!(
            (seen - expected_offset).abs() < 60_000.0,
            "{jump}: the program's clock is off by {seen} ms"
        );
        println!(
            "after {jump}: timeout fired after {spun_after:?}, call timeout after {hung_after:?}, program clock off by {:.1} h",
            seen / 3_600_000.0
        );
    }
    assert_serves(&rt, &daemon);
    let audit = dir.path().join("state").join("audit");
    let rows = airlock_supervisor::audit_log::query::read(&audit, &Default::default()).unwrap();
    for row in rows.iter().take(8) {
        println!("audit row: {row:?}");
    }
}
