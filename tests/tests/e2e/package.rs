//! The installed Debian package (`packaging/debian/build`, then `dpkg -i`): its files where
//! docs/systemd.md says, its user and directories made, its policy valid, its units verified,
//! its worker linked statically, and a program run by the installed daemon as the `airlock`
//! user through the installed CLI.
//!
//! These check the system the package was installed on, so they skip (saying so) where it is
//! not installed, unless `AIRLOCK_REQUIRE_PACKAGE=1` is set, as `.ci/run` does after it built
//! and installed the package.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::{binaries, processes};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const DAEMON: &str = "/usr/bin/airlockd";
const CLI: &str = "/usr/bin/airlock";
const WORKER: &str = "/usr/libexec/airlock/airlock-worker";
const LAUNCHER: &str = "/usr/libexec/airlock/airlock-confine";
const POLICY: &str = "/etc/airlock/policy.toml";
const UNITS: &str = "/usr/lib/systemd/system";

/// Whether the package is installed (dpkg knows it). When it is not: fail if CI requires it,
/// else report the skip on stderr.
fn installed(test: &str) -> bool {
    let known = Command::new("dpkg-query")
        .args(["-W", "-f", "${Status}", "airlock"])
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout.ends_with(b"installed"));
    if known {
        return true;
    }
    assert!(
        std::env::var_os("AIRLOCK_REQUIRE_PACKAGE").is_none(),
        "AIRLOCK_REQUIRE_PACKAGE is set, but the package `airlock` is not installed: \
         run packaging/debian/build and `dpkg -i target/debian/airlock_*.deb`"
    );
    eprintln!(
        "SKIPPED {test}: the Debian package is not installed (packaging/debian/build, then \
         dpkg -i target/debian/airlock_*.deb)"
    );
    false
}

/// uid and gid of the system user `name` (from getent, as the system resolves it).
fn user_ids(name: &str) -> (u32, u32) {
    let out = Command::new("getent")
        .args(["passwd", name])
        .output()
        .unwrap();
    assert!(out.status.success(), "no user {name}");
    let line = String::from_utf8(out.stdout).unwrap();
    let fields: Vec<&str> = line.trim().split(':').collect();
    (fields[2].parse().unwrap(), fields[3].parse().unwrap())
}

#[test]
fn the_package_puts_its_files_user_and_directories_where_the_docs_say() {
    if !installed("the_package_puts_its_files_user_and_directories_where_the_docs_say") {
        return;
    }
    for (path, mode) in [
        (DAEMON, 0o755),
        (CLI, 0o755),
        (WORKER, 0o755),
        (LAUNCHER, 0o755),
        ("/usr/lib/sysusers.d/airlock.conf", 0o644),
        ("/usr/lib/tmpfiles.d/airlock.conf", 0o644),
        ("/usr/lib/systemd/system/airlockd.service", 0o644),
        ("/usr/lib/systemd/system/airlockd.socket", 0o644),
        ("/usr/share/doc/airlock/systemd.md", 0o644),
        ("/usr/share/doc/airlock/policy-reference.md", 0o644),
    ] {
        let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(meta.permissions().mode() & 0o7777, mode, "{path}");
        assert_eq!(meta.uid(), 0, "{path} is root's");
    }
    let (uid, gid) = user_ids("airlock");
    assert_ne!(uid, 0);
    // The policy: root writes it, the daemon's group reads it, nobody else sees it.
    let policy = std::fs::metadata(POLICY).unwrap();
    assert_eq!(policy.permissions().mode() & 0o7777, 0o640);
    assert_eq!((policy.uid(), policy.gid()), (0, gid));
    let etc = std::fs::metadata("/etc/airlock").unwrap();
    assert_eq!(etc.permissions().mode() & 0o7777, 0o750);
    assert_eq!((etc.uid(), etc.gid()), (0, gid));
    // The state directory is the daemon's.
    let state = std::fs::metadata("/var/lib/airlock").unwrap();
    assert_eq!(state.permissions().mode() & 0o7777, 0o750);
    assert_eq!((state.uid(), state.gid()), (uid, gid));
    // The policy is a conffile: an upgrade keeps the operator's edits.
    let conffiles = Command::new("dpkg-query")
        .args(["-W", "-f", "${Conffiles}", "airlock"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&conffiles.stdout).contains(POLICY),
        "{POLICY} is not a conffile"
    );
}

#[test]
fn the_installed_policy_and_units_check() {
    if !installed("the_installed_policy_and_units_check") {
        return;
    }
    let check = Command::new(DAEMON)
        .args(["--check-config", POLICY])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "airlockd --check-config {POLICY}:\n{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("{UNITS}/airlockd.service"))
        .arg(format!("{UNITS}/airlockd.socket"))
        .env("SYSTEMD_COLORS", "0")
        .output()
        .expect("systemd-analyze (the package depends on systemd)");
    let stderr = String::from_utf8_lossy(&verify.stderr);
    // Without a booted systemd, verify may warn about the host; only lines about our units
    // are ours.
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("airlockd.") || l.contains("airlock"))
        .collect();
    assert!(
        verify.status.success() && ours.is_empty(),
        "systemd-analyze verify on the installed units:\n{stderr}"
    );
}

/// A directory the `airlock` user owns, for the daemon's socket and state.
fn directory_for(uid: u32, gid: u32) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("airlock-package-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
    dir
}

#[test]
fn the_installed_daemon_runs_a_program_as_the_airlock_user_in_a_static_worker() {
    if !installed("the_installed_daemon_runs_a_program_as_the_airlock_user_in_a_static_worker") {
        return;
    }
    // The packaged worker is linked statically (docs/sandbox.md, "A statically linked worker").
    assert!(
        !binaries::dynamically_linked(Path::new(WORKER)),
        "{WORKER} asks for a dynamic loader"
    );
    let (uid, gid) = user_ids("airlock");
    let dir = directory_for(uid, gid);
    let socket = dir.path().join("airlock.sock");
    let state: PathBuf = dir.path().join("state");
    // As the unit starts it: the airlock user, the installed policy, no --worker (the daemon
    // finds its worker in /usr/libexec/airlock), its state directory given by systemd.
    let daemon = Command::new(DAEMON)
        .arg("--config")
        .arg(POLICY)
        .arg("--socket")
        .arg(&socket)
        .env_clear()
        .env("STATE_DIRECTORY", &state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // std drops root's supplementary groups when it sets the uid.
        .uid(uid)
        .gid(gid)
        .spawn()
        .unwrap();
    std::fs::create_dir(&state).unwrap();
    std::os::unix::fs::chown(&state, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let serving = processes::wait_until(30, || socket.exists());
    let run = serving.then(|| {
        // Root is admitted by the installed policy's principal (users = ["@daemon", 0]).
        Command::new(CLI)
            .arg("--socket")
            .arg(&socket)
            .args(["exec", "-e", "const n: number = 6; n * 7"])
            .output()
            .unwrap()
    });
    // The pre-started workers, each a child of the daemon (forked by its zygote with
    // CLONE_PARENT), map no shared library.
    // A worker may end between being listed and being read (the one that ran the program
    // is reaped and replaced): list and read again until every one listed could be read.
    let pid = daemon.id();
    let mut workers = Vec::new();
    let mut maps: Vec<String> = Vec::new();
    processes::wait_until(10, || {
        workers = processes::worker_children(pid);
        maps = workers
            .iter()
            .map(|w| std::fs::read_to_string(format!("/proc/{w}/maps")).unwrap_or_default())
            .collect();
        !workers.is_empty() && maps.iter().all(|m| !m.is_empty())
    });
    // SAFETY: kill with a valid pid and signal.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let out = daemon.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        serving,
        "the installed airlockd did not bind {}:\n{log}",
        socket.display()
    );
    let run = run.unwrap();
    assert!(
        run.status.success() && String::from_utf8_lossy(&run.stdout).trim() == "42",
        "airlock exec through the installed daemon:\n{}{}\ndaemon log:\n{log}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(!workers.is_empty(), "no pre-started worker:\n{log}");
    for (pid, maps) in workers.iter().zip(&maps) {
        assert!(!maps.is_empty(), "worker {pid}: no /proc maps");
        let libraries: Vec<&str> = maps.lines().filter(|l| l.contains(".so")).collect();
        assert!(
            libraries.is_empty(),
            "worker {pid} maps shared libraries:\n{}",
            libraries.join("\n")
        );
    }
    assert!(
        out.status.success(),
        "airlockd stopped with {}:\n{log}",
        out.status
    );
}
