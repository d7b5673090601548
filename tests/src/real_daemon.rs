//! The real `airlockd` binary as a process of its own, for the load suite and the daemon's
//! faults: its RSS and descriptors are the daemon's alone (not the test's), it can be SIGKILLed,
//! given rlimits, a mount namespace or an `LD_PRELOAD`, and started again on the same state.
//!
//! Its directory holds `policy.toml`, the socket `airlock.sock`, the state directory `state/`
//! (`$STATE_DIRECTORY`: the tool servers' scratch directories, `state/journal`, `state/audit`)
//! and the daemon's log `airlockd.log` (outside `state/`, so a full state directory still logs).

use crate::binaries;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `[daemon]` line that keeps a root daemon's tool servers as root (see [`policy`]).
pub const SERVERS_AS_ME: &str = "server_user = \"root\"\n";

/// A policy for [`RealDaemon`]: the caller as principal with every tool, the journal and the
/// audit log under `dir/state`, `pool_size` pre-started workers, and `extra` appended (sources,
/// more settings). Its tool servers run as the test's own user (`server_user = "root"` when
/// that is root): the test's binaries may lie where `nobody`, a root daemon's default, cannot
/// reach them (a checkout under a 0700 directory). The default is tested on its own
/// (tests/tests/e2e/server_confinement.rs).
pub fn policy(dir: &Path, pool_size: usize, extra: &str) -> String {
    let state = dir.join("state");
    format!(
        "[daemon]\npool_size = {pool_size}\nshutdown_grace_ms = 2000\n{SERVERS_AS_ME}\
         [audit]\ndirectory = \"{state}/audit\"\n\
         [journal]\ndirectory = \"{state}/journal\"\n\
         [[principal]]\nname = \"local\"\nusers = [\"@daemon\", 0]\nallow = [\"*\"]\n{extra}",
        state = state.display(),
    )
}

/// `policy` (from [`policy`]) with `line` added to its `[daemon]` table, e.g.
/// `worker_start = "exec"`.
pub fn with_daemon_setting(policy: &str, line: &str) -> String {
    policy.replacen("[daemon]\n", &format!("[daemon]\n{line}\n"), 1)
}

/// A `[[server]]` entry running the fault server (`airlock-mcp-fault-server`) with `args` over
/// stdio as `tools.<name>`, confined as the daemon's default says.
pub fn fault_server_entry(name: &str, call_timeout_ms: u64, args: &[&str]) -> String {
    format!(
        "[[server]]\nname = \"{name}\"\ncommand = \"{}\"\nargs = {args:?}\ncall_timeout_ms = {call_timeout_ms}\nmax_concurrent_calls = 64\n",
        crate::fault_server::binary().display()
    )
}

/// The directory of the `airlockd` built with this test or bench (which must exist).
fn this_build() -> PathBuf {
    binaries::airlockd()
        .parent()
        .expect("airlockd's directory")
        .to_owned()
}

/// A running `airlockd`; dropping it SIGKILLs it.
#[derive(Debug)]
pub struct RealDaemon {
    pub dir: PathBuf,
    pub socket: PathBuf,
    child: Option<Child>,
}

impl RealDaemon {
    /// Writes `policy` to `dir/policy.toml` and starts `airlockd` on it; `adjust` may add to
    /// the command (environment, `pre_exec`). Waits until `/v1/health` answers.
    pub fn start(dir: &Path, policy: &str, adjust: impl FnOnce(&mut Command)) -> RealDaemon {
        Self::start_build(dir, policy, &this_build(), adjust)
    }

    /// [`RealDaemon::start`] with the `airlockd` and `airlock-worker` of another build
    /// (`target/<profile>/`), for benches that compare builds.
    pub fn start_build(
        dir: &Path,
        policy: &str,
        build: &Path,
        adjust: impl FnOnce(&mut Command),
    ) -> RealDaemon {
        let file = dir.join("policy.toml");
        std::fs::write(&file, policy).expect("write the policy");
        let mut daemon = Self::spawn(dir, build, adjust);
        daemon.wait_until_serving();
        daemon
    }

    /// Starts `airlockd` again on the policy, socket and state directory `dir` already has.
    pub fn restart(dir: &Path) -> RealDaemon {
        let mut daemon = Self::spawn(dir, &this_build(), |_| {});
        daemon.wait_until_serving();
        daemon
    }

    fn spawn(dir: &Path, build: &Path, adjust: impl FnOnce(&mut Command)) -> RealDaemon {
        let socket = dir.join("airlock.sock");
        let state = dir.join("state");
        std::fs::create_dir_all(&state).expect("state directory");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("airlockd.log"))
            .expect("daemon log");
        let mut cmd = Command::new(build.join("airlockd"));
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--worker")
            .arg(build.join("airlock-worker"))
            .arg("--config")
            .arg(dir.join("policy.toml"))
            .env("STATE_DIRECTORY", &state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        adjust(&mut cmd);
        // A test that dies must not leave a daemon behind: it goes with the thread that started
        // it, so start it from the test's own thread (not a pool thread that may end).
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec here.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start airlockd");
        RealDaemon {
            dir: dir.to_owned(),
            socket,
            child: Some(child),
        }
    }

    fn wait_until_serving(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "airlockd exited at start ({status}); its log:\n{}",
                    self.log()
                );
            }
            if health(&self.socket).is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "airlockd did not serve within 30 s; its log:\n{}",
            self.log()
        );
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Runs `code` through the real CLI (`airlock exec --json -e`) and returns the response it
    /// printed; panics with the CLI's output and the daemon's log when it printed none.
    pub fn exec_json(&self, code: &str) -> serde_json::Value {
        let out = Command::new(binaries::airlock_cli())
            .arg("--socket")
            .arg(&self.socket)
            .args(["exec", "--json", "-e", code])
            .output()
            .expect("run the airlock CLI");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.log()
            )
        })
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("airlockd.log")).unwrap_or_default()
    }

    /// Whether the process is still running (it may have exited on its own).
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL: no cleanup at all. Waits for it (and reaps it).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait for a clean exit; the exit status.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: kill(2) on our own child's pid, which is not reaped yet.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        child.wait().ok()
    }
}

impl Drop for RealDaemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `GET /v1/health` on `socket` as JSON, if the daemon answers it (blocking; a fresh
/// connection each time).
pub fn health(socket: &Path) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(socket).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /v1/health HTTP/1.1\r\nhost: airlock\r\nconnection: close\r\n\r\n")
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    if !response.starts_with("HTTP/1.1 200") {
        return None;
    }
    // The body is one JSON object, whether sent with a length or in one chunk.
    let body = response.split_once("\r\n\r\n")?.1;
    let (start, end) = (body.find('{')?, body.rfind('}')?);
    serde_json::from_str(&body[start..=end]).ok()
}
