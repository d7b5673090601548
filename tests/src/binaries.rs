//! Paths of the binaries cargo built for this workspace.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// `target/<profile>/` (the directory that holds the workspace's binaries), derived from the
/// running test or bench executable, which lives in `target/<profile>/deps/`.
pub fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("exe dir");
    if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().expect("profile dir").to_owned()
    } else {
        deps.to_owned()
    }
}

fn built(name: &str) -> PathBuf {
    let path = target_profile_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace first (`cargo test --workspace` builds every binary: each binary's package has an integration test)",
        path.display()
    );
    path
}

pub fn worker() -> PathBuf {
    built("airlock-worker")
}

pub fn airlockd() -> PathBuf {
    built("airlockd")
}

/// The launcher that confines tool servers.
pub fn confine() -> PathBuf {
    built("airlock-confine")
}

pub fn airlock_cli() -> PathBuf {
    built("airlock")
}

/// A private audit directory for the daemon listening on `socket`: `<socket>.audit` next to it
/// (created by the daemon, mode 0700), so tests never write to the user's state directory.
pub fn audit_directory(socket: &std::path::Path) -> PathBuf {
    socket.with_extension("audit")
}

/// The test-only escape-probe worker (`--features escape-probe`, no engine), built once per
/// test run into its own target directory so the feature can never leak into the normal
/// worker binary.
pub fn escape_probe_worker() -> PathBuf {
    static PROBE: OnceLock<PathBuf> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .expect("workspace root")
                .to_owned();
            let target_dir = target_profile_dir()
                .parent()
                .expect("target dir")
                .join("escape-probe");
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .current_dir(&workspace)
                .args([
                    "build",
                    "--quiet",
                    "-p",
                    "airlock-worker",
                    "--no-default-features",
                    "--features",
                    "escape-probe",
                    "--target-dir",
                ])
                .arg(&target_dir)
                .env_remove("CARGO_TARGET_DIR")
                .env_remove("RUSTFLAGS")
                .status()
                .expect("run cargo to build the escape probe");
            assert!(status.success(), "building the escape-probe worker failed");
            target_dir.join("debug").join("airlock-worker")
        })
        .clone()
}

/// `airlockd --socket SOCKET --worker <built worker>`, output discarded: the real daemon
/// binary as an operator starts it, for tests that need a separate process. Its audit log goes
/// to [`audit_directory`]`(socket)` (as `$STATE_DIRECTORY`, the way systemd would say it).
pub fn airlockd_command(socket: &std::path::Path) -> Command {
    let mut cmd = Command::new(airlockd());
    cmd.arg("--socket")
        .arg(socket)
        .arg("--worker")
        .arg(worker())
        .env("STATE_DIRECTORY", audit_directory(socket))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd
}
