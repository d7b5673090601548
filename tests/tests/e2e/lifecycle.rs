//! Process lifecycle: reaping, graceful shutdown, and no orphans when the daemon dies.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::processes::{alive, wait_until, worker_children};
use airlock_tests::{DaemonOptions, TestDaemon, binaries};
use serde_json::json;
use std::process::{Command, Stdio};

/// The real `airlockd` binary: SIGKILL it and its workers and the zygote must die with it
/// (PDEATHSIG).
#[test]
fn workers_die_with_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("a.sock");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[daemon]\npool_size = 2\nserver_user = \"root\"\n[[principal]]\nname = \"local\"\nusers = [\"@daemon\"]\nallow = [\"*\"]\n",
    )
    .unwrap();
    let mut daemon = binaries::airlockd_command(&socket)
        .arg("--config")
        .arg(&policy)
        .spawn()
        .unwrap();
    let pid = daemon.id();
    let mut workers = Vec::new();
    let found = wait_until(20, || {
        workers = worker_children(pid);
        workers.len() >= 2
    });
    if !found {
        let _ = daemon.kill();
        panic!("the daemon never started its pool: {workers:?}");
    }
    // The pool's workers were forked by the zygote; it must die with the daemon too.
    let zygotes = airlock_tests::processes::children_named(pid, "airlock-zygote");
    assert_eq!(zygotes.len(), 1, "{zygotes:?}");
    workers.extend(zygotes);
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    assert!(
        wait_until(5, || workers.iter().all(|w| !alive(*w))),
        "workers or the zygote outlived the daemon: {workers:?}"
    );
}

/// The real binaries end to end: `airlockd` on a policy file, the `airlock` CLI against it,
/// SIGTERM for a clean exit.
#[test]
fn cli_runs_programs_against_the_real_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("a.sock");
    let mut daemon = binaries::airlockd_command(&socket).spawn().unwrap();
    assert!(wait_until(20, || socket.exists()), "no socket appeared");
    let cli = |args: &[&str], stdin: Option<&str>| {
        let mut child = Command::new(binaries::airlock_cli())
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(text) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    let (code, out, err) = cli(&["exec", "-e", "console.log('hi'); 6 * 7"], None);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "hi\n42\n");

    let file = dir.path().join("prog.ts");
    std::fs::write(&file, "const n: number = 3;\nn * n").unwrap();
    let (code, out, _) = cli(&["exec", file.to_str().unwrap()], None);
    assert_eq!((code, out.as_str()), (Some(0), "9\n"));

    let (code, out, _) = cli(&["exec"], Some("[1, 2].map(x => x + 1)"));
    assert_eq!(code, Some(0));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        json!([2, 3])
    );

    let (code, out, _) = cli(&["exec", "--json", "-e", "'j'"], None);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], json!("ok"));
    assert_eq!(v["result"], json!("j"));

    let (code, _, err) = cli(&["exec", "-e", "null.x"], None);
    assert_eq!(code, Some(1));
    assert!(err.contains("error[runtime]: TypeError"), "{err}");

    let (code, _, err) = cli(
        &["exec", "--timeout-ms", "200", "-e", "while(true){}"],
        None,
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("error[timeout]"), "{err}");

    let (code, out, _) = cli(&["health"], None);
    assert_eq!(code, Some(0));
    assert!(out.contains("\"status\": \"ok\""));

    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let status = daemon.wait().unwrap();
    assert!(status.success(), "airlockd exited with {status}");
    assert!(!socket.exists(), "socket file left behind");
}

/// `airlockd --example` on the embedded default: it runs examples/hello.ts through its own
/// socket and prints what the program did, its brokered call of the daemon's built-in search
/// included, then keeps serving.
#[test]
fn the_example_flag_runs_hello_ts_with_a_brokered_tool_call() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("a.sock");
    let mut daemon = binaries::airlockd_command(&socket)
        .arg("--example")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = daemon.stdout.take().unwrap();
    let (lines, printed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while let Ok(line) =
        printed.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        let last = line.starts_with("--- airlockd keeps serving");
        out.push(line);
        if last {
            break;
        }
    }
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let status = daemon.wait().unwrap();
    let out = out.join("\n");
    assert!(
        out.starts_with("--- examples/hello.ts ran in a sandboxed worker (Ok, "),
        "{out}"
    );
    for expected in [
        "hello from the sandbox: 3 planets have moons",
        "tools.airlock.search_tools found 2 tool(s): airlock.search_tools, airlock.read_sdk",
        "tool call 1: airlock.search_tools (ok, ",
        "\"totalMoons\": 98",
        "--- airlockd keeps serving on ",
    ] {
        assert!(out.contains(expected), "{expected:?} missing from:\n{out}");
    }
    assert!(!out.contains("error:"), "{out}");
    assert!(status.success(), "airlockd exited with {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_no_principal_admits_are_refused_clearly() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.principals[0].uids = vec![4_000_000];
        p.principals[0].gids = vec![];
    }))
    .await;
    let err = d.try_exec("1", None).await.unwrap_err().to_string();
    assert!(err.contains("403"), "{err}");
    assert!(err.contains("not admitted"), "{err}");
    assert!(err.contains("principal"), "{err}");
}

/// `Type=notify`: READY=1 once serving, WATCHDOG=1 pings at half of WATCHDOG_USEC, and
/// STOPPING=1 on SIGTERM, all on the datagram socket named by NOTIFY_SOCKET.
#[test]
fn notifies_systemd_of_readiness_watchdog_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("a.sock");
    let notify_path = dir.path().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut daemon = binaries::airlockd_command(&socket)
        .env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", "200000")
        .spawn()
        .unwrap();
    let next = || {
        let mut buf = [0u8; 256];
        let n = notify
            .recv(&mut buf)
            .expect("no notification from airlockd");
        String::from_utf8_lossy(&buf[..n]).trim_end().to_owned()
    };
    assert_eq!(next(), "READY=1");
    assert!(socket.exists(), "READY before the socket was bound");
    assert_eq!(next(), "WATCHDOG=1");
    assert_eq!(next(), "WATCHDOG=1");
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let mut seen = next();
    while seen == "WATCHDOG=1" {
        seen = next();
    }
    assert_eq!(seen, "STOPPING=1");
    assert!(daemon.wait().unwrap().success());
}

/// Socket activation (`airlockd.socket`): the daemon serves the listening socket it inherits
/// (LISTEN_FDS) and leaves the socket file to its owner when it exits.
#[test]
fn serves_an_inherited_systemd_socket() {
    let Some(activate) = [
        "/usr/bin/systemd-socket-activate",
        "/bin/systemd-socket-activate",
    ]
    .into_iter()
    .map(std::path::PathBuf::from)
    .find(|p| p.exists()) else {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_SYSTEMD_ANALYZE").is_none(),
            "systemd-socket-activate is missing: install the Debian package `systemd`"
        );
        eprintln!(
            "SKIPPED serves_an_inherited_systemd_socket: systemd-socket-activate is not installed"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("activated.sock");
    let mut activator = Command::new(activate)
        .arg("--listen")
        .arg(&socket)
        .arg(format!(
            "--setenv=STATE_DIRECTORY={}",
            binaries::audit_directory(&socket).display()
        ))
        .arg(binaries::airlockd())
        .arg("--worker")
        .arg(binaries::worker())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(20, || socket.exists()), "no socket appeared");
    let out = Command::new(binaries::airlock_cli())
        .arg("--socket")
        .arg(&socket)
        .args(["exec", "-e", "'activated'"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "\"activated\"\n");
    // systemd-socket-activate execs the daemon in place, so this pid is airlockd now.
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(activator.id() as i32, libc::SIGTERM) };
    assert!(activator.wait().unwrap().success());
    assert!(
        socket.exists(),
        "airlockd removed a socket it did not create"
    );
}

/// The daemon does not need root: as an unprivileged user (here `nobody`, via setpriv) it
/// binds its socket, locks its workers down and runs programs. Runs only when the tests run as
/// root (to drop to another user) and setpriv is installed.
#[test]
fn runs_as_an_ordinary_user() {
    if !airlock_tests::processes::runs_as_root(
        "runs_as_an_ordinary_user",
        "to run the daemon as user nobody",
    ) {
        return;
    }
    let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
    else {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_ROOT").is_none(),
            "AIRLOCK_REQUIRE_ROOT is set but setpriv is missing: install the Debian package \
             `util-linux`"
        );
        eprintln!("SKIPPED runs_as_an_ordinary_user: setpriv (util-linux) is not installed");
        return;
    };
    let as_nobody = |program: &std::path::Path| {
        let mut cmd = Command::new(setpriv);
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(program);
        cmd
    };
    // From where nobody can run them (the checkout may sit under a 0700 directory); the
    // daemon finds airlock-confine beside the worker.
    let airlockd = binaries::for_other_users().join("airlockd");
    let worker = binaries::for_other_users().join("airlock-worker");
    let probe = as_nobody(&airlockd).arg("--version").output().unwrap();
    assert!(
        probe.status.success(),
        "user nobody cannot run {}: {}",
        airlockd.display(),
        String::from_utf8_lossy(&probe.stderr).trim()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: chown of a directory we just created; the path is a valid C string.
    let rc = unsafe { libc::chown(path.as_ptr(), 65534, 65534) };
    assert_eq!(rc, 0);
    let socket = dir.path().join("user.sock");
    let mut daemon = as_nobody(&airlockd)
        .arg("--socket")
        .arg(&socket)
        .arg("--worker")
        .arg(&worker)
        .env_remove("XDG_RUNTIME_DIR")
        // In the nobody-owned directory: nobody cannot write the caller's home.
        .env("STATE_DIRECTORY", binaries::audit_directory(&socket))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(20, || socket.exists()), "no socket appeared");
    // Root is admitted by the embedded default, and may open the nobody-owned 0660 socket.
    let out = Command::new(binaries::airlock_cli())
        .arg("--socket")
        .arg(&socket)
        .args(["exec", "--json", "-e", "'unprivileged'"])
        .output()
        .unwrap();
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"], json!("unprivileged"));
    assert_eq!(v["peer"]["uid"], json!(0));
}

/// A CLI whose stream is cut before the result (here the daemon is killed while the program
/// waits for a tool) says which execution and which session it was, and how to run again
/// without repeating what was done; before, it said only `unexpected EOF during chunk size
/// line`.
#[test]
fn a_cli_cut_off_from_its_execution_names_the_execution_and_session() {
    use airlock_tests::real_daemon::{self, RealDaemon};
    let dir = tempfile::tempdir().unwrap();
    let policy = real_daemon::policy(
        dir.path(),
        1,
        &real_daemon::fault_server_entry("fault", 60_000, &[]),
    );
    let mut daemon = RealDaemon::start(dir.path(), &policy, |_| {});
    let cli = Command::new(binaries::airlock_cli())
        .arg("--socket")
        .arg(&daemon.socket)
        .args([
            "exec",
            "--session",
            "new",
            "-e",
            "await tools.fault.sleep({ ms: 30000 })",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The program is inside its call once the fault server runs (it is started lazily, by the
    // call).
    assert!(
        wait_until(20, || !airlock_tests::processes::servers_named(
            daemon.pid(),
            "airlock-mcp-fau"
        )
        .is_empty()),
        "the fault server never started:\n{}",
        daemon.log()
    );
    daemon.kill();
    let out = cli.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the connection to the daemon was cut before execution ex_"),
        "{stderr}"
    );
    assert!(stderr.contains("airlock status ex_"), "{stderr}");
    assert!(
        stderr.contains("it ran in session ses_") && stderr.contains("airlock exec --session ses_"),
        "{stderr}"
    );
}
