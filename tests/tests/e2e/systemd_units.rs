//! The shipped systemd units stay valid and tightly sandboxed.
//!
//! `systemd-analyze` works on unit files without a running systemd (design §4, measured with
//! systemd 252), so this runs anywhere the Debian package `systemd` is installed. Without it
//! each test says loudly that it was skipped — unless `AIRLOCK_REQUIRE_SYSTEMD_ANALYZE=1` is
//! set, as `.ci/run` does (after installing `systemd`), in which case a missing tool fails the
//! test: in CI a sandbox regression must never pass silently.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The highest `systemd-analyze security` exposure we accept (0 = fully locked, 10 = nothing).
const MAX_EXPOSURE: f64 = 2.5;

fn unit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives inside the workspace")
        .join("systemd")
}

/// Whether the systemd tools are here. When they are not: fail if CI requires them, else
/// report the skip on stderr.
fn systemd_tools_present(test: &str) -> bool {
    let present = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if present {
        return true;
    }
    assert!(
        std::env::var_os("AIRLOCK_REQUIRE_SYSTEMD_ANALYZE").is_none(),
        "`systemd-analyze` is not on PATH: install the Debian package `systemd` \
         (`apt-get install -y systemd`; .ci/run installs it)"
    );
    eprintln!(
        "SKIPPED {test}: systemd-analyze is not installed (apt-get install systemd); \
         set AIRLOCK_REQUIRE_SYSTEMD_ANALYZE=1 to make this a failure"
    );
    false
}

/// Runs a systemd tool, failing the test with an install hint when it is missing.
fn run(program: &str, args: &[&str]) -> Output {
    match Command::new(program)
        .args(args)
        .env("SYSTEMD_COLORS", "0")
        .env("SYSTEMD_PAGER", "")
        .output()
    {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "`{program}` is not on PATH: install the Debian package `systemd` \
             (`apt-get install -y systemd`; .ci/run installs it). These tests need it to check \
             systemd/*.service and must not pass without it."
        ),
        Err(e) => panic!("cannot run `{program}`: {e}"),
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A scratch directory removed when dropped.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "airlock-systemd-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        ScratchDir(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read_unit(name: &str) -> String {
    let path = unit_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn service_exposure_is_at_most_2_5() {
    if !systemd_tools_present("service_exposure_is_at_most_2_5") {
        return;
    }
    let unit = unit_dir().join("airlockd.service");
    let unit = unit.to_str().expect("UTF-8 path");
    let output = run(
        "systemd-analyze",
        &["security", "--offline=true", "--no-pager", unit],
    );
    let report = text(&output);
    assert!(
        output.status.success(),
        "systemd-analyze security failed:\n{report}"
    );
    let exposure = report
        .lines()
        .find_map(|line| {
            let (_, rest) = line.split_once("Overall exposure level for ")?;
            let (_, value) = rest.split_once(": ")?;
            value.split_whitespace().next()?.parse::<f64>().ok()
        })
        .unwrap_or_else(|| panic!("no overall exposure in the report:\n{report}"));
    assert!(
        exposure <= MAX_EXPOSURE,
        "airlockd.service exposure is {exposure}, above {MAX_EXPOSURE}; report:\n{report}"
    );
}

#[test]
fn units_pass_systemd_analyze_verify() {
    if !systemd_tools_present("units_pass_systemd_analyze_verify") {
        return;
    }
    // `verify` insists that ExecStart= binaries exist; point them at /bin/true in a copy so
    // that every other complaint (unknown keys, bad values) still fails the test.
    let scratch = ScratchDir::new("verify");
    let mut paths = Vec::new();
    for name in ["airlockd.service", "airlockd.socket"] {
        let unit = read_unit(name)
            .replace("/usr/bin/airlockd", "/bin/true")
            .replace("/bin/kill", "/bin/true");
        let path = scratch.0.join(name);
        std::fs::write(&path, unit).expect("write unit copy");
        paths.push(path.to_str().expect("UTF-8 path").to_owned());
    }
    let mut args = vec!["verify"];
    args.extend(paths.iter().map(String::as_str));
    let output = run("systemd-analyze", &args);
    let report = text(&output);
    assert!(
        output.status.success() && report.trim().is_empty(),
        "systemd-analyze verify complained:\n{report}"
    );
}

#[test]
fn service_keeps_the_settings_the_daemon_depends_on() {
    let service = read_unit("airlockd.service");
    let directives: Vec<&str> = service
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#') && line.contains('='))
        .collect();
    let has = |directive: &str| directives.contains(&directive);
    for required in [
        "Type=notify",
        "NotifyAccess=main",
        "WatchdogSec=30s",
        "ExecStartPre=/usr/bin/airlockd --check-config /etc/airlock/policy.toml",
        "ExecStart=/usr/bin/airlockd --config /etc/airlock/policy.toml",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "User=airlock",
        "Group=airlock",
        "RuntimeDirectory=airlock",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=",
        "SystemCallFilter=landlock_create_ruleset landlock_add_rule landlock_restrict_self seccomp",
    ] {
        assert!(has(required), "airlockd.service lost `{required}`");
    }
    // Settings that would break the daemon or its workers (see the comments in the unit).
    for forbidden in [
        "DynamicUser=yes",
        // Peers would all appear as `nobody` in SO_PEERCRED: no principal could match.
        "PrivateUsers=yes",
        // Inherited by tool servers: Node's JIT aborts under it (airlockd sets PR_SET_MDWE
        // on itself, not inherited).
        "MemoryDenyWriteExecute=yes",
    ] {
        assert!(
            !has(forbidden),
            "airlockd.service must not set `{forbidden}`"
        );
    }
}

#[test]
fn socket_unit_matches_the_service() {
    let socket = read_unit("airlockd.socket");
    for required in [
        "ListenStream=/run/airlock/airlock.sock",
        "SocketMode=0660",
        "SocketUser=airlock",
        "SocketGroup=airlock",
    ] {
        assert!(
            socket.lines().any(|line| line.trim() == required),
            "airlockd.socket lost `{required}`"
        );
    }
}

#[test]
fn sysusers_and_tmpfiles_snippets_apply() {
    if !systemd_tools_present("sysusers_and_tmpfiles_snippets_apply") {
        return;
    }
    let scratch = ScratchDir::new("root");
    let root = scratch.0.to_str().expect("UTF-8 path");
    std::fs::create_dir_all(scratch.0.join("etc")).expect("create etc");
    let sysusers = unit_dir().join("sysusers.d/airlock.conf");
    let output = run(
        "systemd-sysusers",
        &[
            &format!("--root={root}"),
            sysusers.to_str().expect("UTF-8 path"),
        ],
    );
    assert!(
        output.status.success(),
        "systemd-sysusers failed:\n{}",
        text(&output)
    );
    let passwd = std::fs::read_to_string(scratch.0.join("etc/passwd")).expect("passwd written");
    let user = passwd
        .lines()
        .find(|line| line.starts_with("airlock:"))
        .unwrap_or_else(|| panic!("no airlock user in:\n{passwd}"));
    let fields: Vec<&str> = user.split(':').collect();
    assert_eq!(fields[5], "/var/lib/airlock", "home directory: {user}");
    assert!(fields[6].ends_with("nologin"), "login shell: {user}");
    let group = std::fs::read_to_string(scratch.0.join("etc/group")).expect("group written");
    assert!(
        group.lines().any(|line| line.starts_with("airlock:")),
        "no airlock group in:\n{group}"
    );

    // Creating directories owned by another user needs root (CI runs as root).
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: skipping the tmpfiles half of this test");
        return;
    }
    let tmpfiles = unit_dir().join("tmpfiles.d/airlock.conf");
    let output = run(
        "systemd-tmpfiles",
        &[
            &format!("--root={root}"),
            "--create",
            tmpfiles.to_str().expect("UTF-8 path"),
        ],
    );
    assert!(
        output.status.success(),
        "systemd-tmpfiles failed:\n{}",
        text(&output)
    );
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let airlock_gid: u32 = group
        .lines()
        .find(|line| line.starts_with("airlock:"))
        .and_then(|line| line.split(':').nth(2))
        .and_then(|gid| gid.parse().ok())
        .expect("airlock gid");
    for (dir, uid_is_root) in [("etc/airlock", true), ("var/lib/airlock", false)] {
        let meta = std::fs::metadata(scratch.0.join(dir)).expect("directory created");
        assert_eq!(meta.permissions().mode() & 0o7777, 0o750, "{dir} mode");
        assert_eq!(meta.gid(), airlock_gid, "{dir} group");
        assert_eq!(meta.uid() == 0, uid_is_root, "{dir} owner");
    }
}
