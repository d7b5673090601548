//! The `airlock-confine` binary run as the daemon runs it: a profile and a command. (These also
//! make `cargo test --workspace` build the binary, which the end-to-end tests in `tests/` start
//! through the daemon; a package without integration tests has its binary left unbuilt.)
//!
//! Each test is its own launcher process, so a layer that fails cannot leak into another test.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_confine::{Mode, Network, Profile, RunAs, ServerLimits};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const LAUNCHER: &str = env!("CARGO_BIN_EXE_airlock-confine");

/// A strict profile reading the system and writing `scratch` only.
fn profile(scratch: &Path) -> Profile {
    Profile {
        name: "probe".into(),
        mode: Mode::Strict,
        read: ["/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc"]
            .iter()
            .map(PathBuf::from)
            .collect(),
        write: Vec::new(),
        scratch: scratch.to_owned(),
        workdir: scratch.to_owned(),
        hide: Vec::new(),
        network: Network::None,
        limits: ServerLimits::default(),
        run_as: None,
    }
}

fn confined(profile: &Profile, script: &str) -> Output {
    Command::new(LAUNCHER)
        .arg("--profile")
        .arg(profile.to_json())
        .args(["--", "/bin/sh", "-c", script])
        .output()
        .unwrap()
}

#[test]
fn without_a_profile_it_refuses_and_says_who_starts_it() {
    let out = Command::new(LAUNCHER)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--profile is missing"), "{stderr}");
    assert!(stderr.contains("started by airlockd"), "{stderr}");
}

#[test]
fn the_server_is_pid_one_writes_only_its_scratch_and_cannot_gain_privileges() {
    let scratch = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let script = format!(
        "echo pid=$$; \
         echo inside > ok.txt && echo wrote-scratch; \
         echo escape > {outside}/escape.txt 2>/dev/null && echo wrote-outside; \
         grep NoNewPrivs /proc/self/status; \
         grep CapEff /proc/self/status; \
         ls /proc | grep -c '^[0-9]'",
        outside = outside.path().display()
    );
    let out = confined(&profile(scratch.path()), &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("pid=1\n"), "{stdout}");
    assert!(stdout.contains("wrote-scratch"), "{stdout}");
    assert!(!stdout.contains("wrote-outside"), "{stdout}");
    assert!(!outside.path().join("escape.txt").exists());
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("ok.txt")).unwrap(),
        "inside\n"
    );
    assert!(stdout.contains("NoNewPrivs:\t1"), "{stdout}");
    assert!(stdout.contains("CapEff:\t0000000000000000"), "{stdout}");
    // Its own /proc: the shell, grep and ls, not the host's processes.
    let visible: usize = stdout.lines().last().unwrap().trim().parse().unwrap();
    assert!(visible <= 4, "{visible} processes visible: {stdout}");
}

#[test]
fn the_servers_exit_status_is_passed_on() {
    let scratch = tempfile::tempdir().unwrap();
    let out = confined(&profile(scratch.path()), "exit 7");
    assert_eq!(out.status.code(), Some(7), "{out:?}");
}

#[test]
fn a_command_that_does_not_exist_is_named() {
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(LAUNCHER)
        .arg("--profile")
        .arg(profile(scratch.path()).to_json())
        .args(["--", "/nonexistent/server"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(70), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot start `/nonexistent/server`"),
        "{stderr}"
    );
}

/// Started by root with an account to run as, the server has that account's ids and rights
/// (root's files are not its own), with no supplementary group.
#[test]
fn a_root_launcher_runs_the_server_as_its_account() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED a_root_launcher_runs_the_server_as_its_account: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    std::os::unix::fs::chown(&scratch, Some(65534), Some(65534)).unwrap();
    // The way to it open to the account, as the daemon leaves a state directory.
    std::fs::set_permissions(
        dir.path(),
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o711),
    )
    .unwrap();
    let mut p = profile(&scratch);
    p.run_as = Some(RunAs {
        name: "nobody".into(),
        uid: 65534,
        gid: 65534,
    });
    let out = confined(&p, "id -u; id -G; cat /etc/shadow 2>&1 | head -c 200; echo");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = said.lines();
    assert_eq!(lines.next(), Some("65534"), "{said}");
    assert_eq!(
        lines.next(),
        Some("65534"),
        "no supplementary group: {said}"
    );
    assert!(said.contains("Permission denied"), "{said}");
}
