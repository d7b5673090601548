//! Paths of the binaries cargo built for this workspace.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
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

/// `target/<profile>/<name>`, which must exist.
pub fn built(name: &str) -> PathBuf {
    let path = target_profile_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace first (`cargo test --workspace` builds every binary: each binary's package has an integration test)",
        path.display()
    );
    path
}

/// Whether the ELF file at `path` asks for a dynamic loader (a `PT_INTERP` program header): a
/// statically linked worker does not.
pub fn dynamically_linked(path: &Path) -> bool {
    let bytes = std::fs::read(path).expect("read the binary");
    assert_eq!(
        &bytes[..4],
        b"\x7fELF",
        "{} is not an ELF file",
        path.display()
    );
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]) as usize;
    let phoff = u64::from_le_bytes(bytes[32..40].try_into().expect("8 bytes")) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) == 3 // PT_INTERP
    })
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

/// Runs `airlock args…` to its end: its exit code, stdout and stderr.
pub fn run_cli(args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(airlock_cli())
        .args(args)
        .output()
        .expect("run airlock");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The binaries a test runs as another user (`nobody`), with the paths it gives a daemon running
/// as that user: the daemon, the CLI, the worker with the launcher the daemon finds beside it,
/// and the tool servers such a daemon starts.
const FOR_OTHER_USERS: &[&str] = &[
    "airlockd",
    "airlock",
    "airlock-worker",
    "airlock-confine",
    "airlock-mcp-fault-server",
    "airlock-mcp-escape-server",
];

/// A directory every user can traverse that holds [`FOR_OTHER_USERS`], for a test that runs
/// one of them as another user. `target/<profile>/` when others can reach and run the binaries
/// there; else (a checkout under a 0700 directory, as `mktemp -d` makes one, where the exec
/// fails with EACCES) a mode 0755 directory under the temporary directory with the binaries
/// linked or copied in, made once per test process and removed when it exits.
pub fn for_other_users() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let profile = target_profile_dir();
        let binaries: Vec<PathBuf> = FOR_OTHER_USERS.iter().map(|name| built(name)).collect();
        if traversable_by_others(&profile) && binaries.iter().all(|b| runnable_by_others(b)) {
            return profile;
        }
        // The pid tells whose it is; tempfile's random suffix keeps parallel test processes
        // (and a stale directory of a reused pid, or one someone else made) apart.
        let dir = tempfile::Builder::new()
            .prefix(&format!("airlock-binaries-{}-", std::process::id()))
            .tempdir()
            .expect("make a directory for the binaries under the temporary directory")
            .keep();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
            .expect("open the binaries' directory to other users");
        for (name, binary) in FOR_OTHER_USERS.iter().zip(&binaries) {
            let to = dir.join(name);
            // A hard link costs nothing (the debug binaries are hundreds of MB each) but
            // shares the file's mode, so it serves only a file others may already run.
            if runnable_by_others(binary) && std::fs::hard_link(binary, &to).is_ok() {
                continue;
            }
            std::fs::copy(binary, &to).expect("copy a binary for other users");
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))
                .expect("make the copied binary runnable by other users");
        }
        let _ = COPIES.set(dir.clone());
        // SAFETY: registers a function that takes no arguments and does not unwind (it ignores
        // every error); atexit has no other precondition.
        unsafe { libc::atexit(remove_copies) };
        dir
    })
    .clone()
}

/// The directory [`for_other_users`] made, if it made one (never `target/<profile>/`).
static COPIES: OnceLock<PathBuf> = OnceLock::new();

/// Removes [`COPIES`] when the test process exits (copies can take a GB a process); a process
/// killed before that leaves it to the system's cleaning of the temporary directory.
extern "C" fn remove_copies() {
    if let Some(dir) = COPIES.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Whether every directory from `/` down to `dir` lets others through (o+x).
fn traversable_by_others(dir: &Path) -> bool {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    dir.ancestors().all(|a| mode(a) & 0o001 != 0)
}

/// Whether others may read and execute `file` (o+rx).
fn runnable_by_others(file: &Path) -> bool {
    mode(file) & 0o005 == 0o005
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).map_or(0, |m| m.permissions().mode())
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

/// Runs the `airlock` CLI as uid/gid 65534 (nobody) against the daemon at `socket`: whether
/// it succeeded, and what it printed (stdout, then stderr). Root only (it changes user).
pub fn cli_as_nobody(socket: &Path, args: &[&str]) -> (bool, String) {
    use std::os::unix::process::CommandExt as _;
    // From where uid 65534 can run it (the checkout may sit under a 0700 directory).
    let out = Command::new(for_other_users().join("airlock"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run the airlock CLI as nobody");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
