//! A tool server reaches only what the operator gave it. The real `airlockd` binary runs two
//! stdio servers from a policy file: `other`, given a secret from the daemon's systemd
//! credentials, and `escape`, a hostile server (`airlock-mcp-escape-server`) that tries each
//! reach of the report that filed this work: the daemon's environment and memory through
//! /proc, `ptrace` and `process_vm_readv` of it, its credentials, a key in the kernel keyring,
//! its policy and socket, its state (the audit log), the other server's scratch directory,
//! writing outside its own, and (with `network = "none"`) the network.
//!
//! Confined, every attempt is blocked. Unconfined (`confine = false`, the control), the same
//! server reaches the policy, the state, the credentials and the outside of its scratch: the
//! test can tell the two apart. Run as root and, through setpriv, as user `nobody`.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::binaries;
use airlock_tests::processes::wait_until;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const CANARY: &str = "other-server-canary-3f9a1c";

/// Who runs the daemon.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RunAs {
    Me,
    Nobody,
}

struct Scenario {
    dir: tempfile::TempDir,
    run_as: RunAs,
}

impl Scenario {
    fn new(run_as: RunAs) -> Scenario {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Scenario { dir, run_as }
    }

    /// The workspace binary `name`, from where the daemon's user can run it (`nobody` cannot
    /// reach `target/` in a checkout under a 0700 directory), and the servers too: a daemon
    /// running as root runs them as `nobody`, its default.
    fn binary(&self, name: &str) -> PathBuf {
        match (self.run_as, name) {
            (RunAs::Me, "airlockd" | "airlock-worker") => binaries::built(name),
            _ => binaries::for_other_users().join(name),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Makes `rel` a directory the daemon's user owns, mode 0700 (or 0755 for `open`).
    fn own_dir(&self, rel: &str, mode: u32) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        self.chown(&path);
        path
    }

    fn chown(&self, path: &Path) {
        if self.run_as == RunAs::Nobody {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: chown of a path we just made; the string is NUL-terminated.
            assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
        }
    }

    /// Runs the daemon with `confine` for the escape server, has the escape server try every
    /// reach, and returns its report.
    fn attempt(&self, confine: &str) -> serde_json::Map<String, Value> {
        let credentials = self.own_dir("credentials", 0o700);
        std::fs::write(credentials.join("other-token"), CANARY).unwrap();
        self.chown(&credentials.join("other-token"));
        let state = self.own_dir("state", 0o700);
        let run = self.own_dir("run", 0o755);
        let policy_dir = self.own_dir("policy", 0o755);
        let policy = policy_dir.join("policy.toml");
        let uid = match self.run_as {
            RunAs::Me => {
                // SAFETY: getuid cannot fail.
                unsafe { libc::getuid() }
            }
            RunAs::Nobody => 65534,
        };
        std::fs::write(
            &policy,
            format!(
                r#"
[[principal]]
name = "local"
users = [{uid}, 0]
allow = ["*"]

[[server]]
name = "other"
command = "{fault}"
env = {{ TOKEN = {{ secret = "other-token" }} }}

[[server]]
name = "escape"
command = "{escape}"
{network}
confine = {confine}
"#,
                fault = self.binary("airlock-mcp-fault-server").display(),
                escape = self.binary("airlock-mcp-escape-server").display(),
                // Without the confinement there is no namespace to cut the network (and the
                // policy refuses the pair).
                network = if confine == "false" {
                    ""
                } else {
                    "network = \"none\""
                },
            ),
        )
        .unwrap();
        std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o644)).unwrap();
        self.chown(&policy);
        let socket = run.join("a.sock");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut daemon = self
            .command(&self.binary("airlockd"))
            .arg("--config")
            .arg(&policy)
            .arg("--socket")
            .arg(&socket)
            .arg("--worker")
            // airlock-confine, which starts the servers, is found beside it.
            .arg(self.binary("airlock-worker"))
            .env("STATE_DIRECTORY", &state)
            .env("CREDENTIALS_DIRECTORY", &credentials)
            .env_remove("XDG_RUNTIME_DIR")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(wait_until(20, || socket.exists()), "no socket appeared");
        let outside = self.path("outside-written");
        let args = serde_json::json!({
            "daemon_pid": daemon.id(),
            "credentials_dir": credentials,
            "policy_file": policy,
            "socket": socket,
            "state_file": state.join("audit.sqlite"),
            "other_scratch": state.join("servers/other"),
            "outside_write": outside,
            "keyring_key": "airlock:other-token",
            "tcp": listener.local_addr().unwrap().to_string(),
            "read_files": ["/etc/shadow", "/etc/gshadow"],
        });
        let code = format!(
            "await tools.other.echo({{ text: 'start the other server' }});\nconst r: any = await tools.escape.attempts({args});
typeof r === 'string' ? JSON.parse(r) : r"
        );
        let out = Command::new(binaries::airlock_cli())
            .arg("--socket")
            .arg(&socket)
            .args(["exec", "--json", "-e", &code])
            .output()
            .unwrap();
        let _ = daemon.kill();
        let _ = daemon.wait();
        let response: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(response["status"], "ok", "{response:#}");
        response["result"].as_object().unwrap().clone()
    }

    fn command(&self, program: &Path) -> Command {
        match self.run_as {
            RunAs::Me => Command::new(program),
            RunAs::Nobody => {
                let mut cmd = Command::new("setpriv");
                cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                    .arg(program);
                cmd
            }
        }
    }
}

/// The reaches every confined server must be refused.
const REACHES: &[&str] = &[
    "daemon_environ",
    "daemon_mem",
    "ptrace_daemon",
    "process_vm_readv_daemon",
    "signal_daemon",
    "credentials",
    "policy_file",
    "policy_directory",
    "daemon_socket",
    "state_file",
    "other_scratch",
    "write_outside_scratch",
    "keyring",
    "network",
];

fn assert_all_blocked(report: &serde_json::Map<String, Value>, who: &str) {
    for reach in REACHES {
        let outcome = report[*reach].as_str().unwrap_or("missing");
        assert!(
            outcome.starts_with("blocked"),
            "{who}: the confined server reached {reach}: {outcome}\n{report:#?}"
        );
        assert!(!outcome.contains(CANARY), "{who}: {reach}: {outcome}");
    }
    assert!(
        report["own_scratch_write (must be REACHED)"]
            .as_str()
            .unwrap()
            .starts_with("REACHED"),
        "{who}: the server could not use its own scratch directory: {report:#?}"
    );
    // The host's password hashes are covered, even for a server of a daemon running as root
    // (whose server keeps uid 0, the files' owner).
    for file in ["/etc/shadow", "/etc/gshadow"] {
        let outcome = report[&format!("read {file}")]
            .as_str()
            .unwrap_or("missing");
        assert!(
            !outcome.contains("root:"),
            "{who}: the confined server read {file}: {outcome}"
        );
    }
    // The keyring is refused by seccomp (EPERM), not merely empty.
    assert!(
        report["keyring"]
            .as_str()
            .unwrap()
            .contains("Operation not permitted"),
        "{who}: {report:#?}"
    );
}

/// Adds the canary as `airlock:other-token` to this user's keyring, as `airlock secret set`
/// would.
fn add_keyring_canary() {
    let kind = std::ffi::CString::new("user").unwrap();
    let name = std::ffi::CString::new("airlock:other-token").unwrap();
    const KEY_SPEC_USER_KEYRING: libc::c_long = -4;
    // SAFETY: add_key reads two strings and CANARY.len() bytes of payload.
    let key = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            kind.as_ptr(),
            name.as_ptr(),
            CANARY.as_ptr(),
            CANARY.len(),
            KEY_SPEC_USER_KEYRING,
        )
    };
    assert!(key > 0, "add_key: {}", std::io::Error::last_os_error());
}

#[test]
fn a_confined_server_reaches_nothing_it_was_not_given() {
    add_keyring_canary();
    let scenario = Scenario::new(RunAs::Me);
    let report = scenario.attempt("true");
    eprintln!("{report:#?}");
    assert_all_blocked(&report, "confined");
    // A daemon running as root runs its servers as `nobody` (`[daemon] server_user`'s default).
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(
            report["ids (must be REACHED)"], "REACHED: uid 65534 gid 65534",
            "{report:#?}"
        );
    }
    assert!(!scenario.path("outside-written").exists());
}

/// The control: the same attempts against an unconfined server do reach what the confined
/// one could not, so the test above can fail.
#[test]
fn an_unconfined_server_reaches_them_which_is_why_confinement_is_the_default() {
    add_keyring_canary();
    let scenario = Scenario::new(RunAs::Me);
    let report = scenario.attempt("false");
    eprintln!("{report:#?}");
    let mut reaches = vec![
        "policy_file",
        "credentials",
        "state_file",
        "write_outside_scratch",
        "keyring",
        "daemon_socket",
    ];
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        reaches.push("read /etc/shadow");
    }
    for reach in reaches {
        assert!(
            report[reach].as_str().unwrap().starts_with("REACHED"),
            "unconfined, {reach} should be reachable: {report:#?}"
        );
    }
    // Even unconfined, the daemon itself is not dumpable: its memory and environment stay
    // closed to processes of its user.
    for reach in ["daemon_environ", "daemon_mem"] {
        let outcome = report[reach].as_str().unwrap();
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            assert!(outcome.starts_with("blocked"), "{reach}: {outcome}");
        }
    }
}

#[test]
fn a_confined_server_reaches_nothing_as_an_ordinary_user_either() {
    if !airlock_tests::processes::runs_as_root(
        "a_confined_server_reaches_nothing_as_an_ordinary_user_either",
        "to run the daemon as user nobody",
    ) {
        return;
    }
    let scenario = Scenario::new(RunAs::Nobody);
    let airlockd = scenario.binary("airlockd");
    let probe = scenario
        .command(&airlockd)
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        probe.status.success(),
        "user nobody cannot run {}: {}",
        airlockd.display(),
        String::from_utf8_lossy(&probe.stderr)
    );
    let report = scenario.attempt("true");
    // No key was added to nobody's keyring; seccomp still refuses the call itself.
    assert_all_blocked(&report, "confined, as nobody");
}

/// What the daemon protects is compared as it really is: a `read` path that is a symbolic
/// link to the state directory, and a journal directory of its own outside the state
/// directory, refuse the server (before, both were granted, and the server read
/// `journal.sqlite`).
#[test]
fn links_and_data_directories_of_their_own_are_protected_too() {
    use airlock_tests::real_daemon::RealDaemon;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let state = root.join("state");
    let journal = root.join("journal-elsewhere");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::create_dir_all(&journal).unwrap();
    std::os::unix::fs::symlink(&state, root.join("looks-harmless")).unwrap();
    let escape = binaries::built("airlock-mcp-escape-server");
    let policy = format!(
        "[daemon]\nserver_user = \"root\"\n[journal]\ndirectory = \"{journal}\"\n\
         [[principal]]\nname = \"local\"\nusers = [\"@daemon\", 0]\nallow = [\"*\"]\n\
         [[server]]\nname = \"linked\"\ncommand = \"{escape}\"\nread = [\"{link}\"]\n\
         [[server]]\nname = \"journal\"\ncommand = \"{escape}\"\nread = [\"{journal}\"]\n",
        journal = journal.display(),
        escape = escape.display(),
        link = root.join("looks-harmless").display(),
    );
    let mut daemon = RealDaemon::start(root, &policy, |_| {});
    for server in ["linked", "journal"] {
        let code = format!(
            "try {{ await tools.{server}.attempts({{}}); 'started' }} catch (e: any) {{ e.message }}"
        );
        let response = daemon.exec_json(&code);
        let said = response["result"].as_str().unwrap_or_default();
        assert!(
            said.contains("which no server may reach"),
            "{server}: {response:#}\n{}",
            daemon.log()
        );
    }
    daemon.kill();
}

/// A root daemon's server runs as `nobody`; a command `nobody` cannot reach (under a 0700
/// directory, as in root's home) is refused with the account named and how to fix it.
#[test]
fn a_command_the_server_s_account_cannot_reach_names_the_account() {
    use airlock_tests::real_daemon::RealDaemon;
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIPPED a_command_the_server_s_account_cannot_reach_names_the_account: needs root"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = root.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let command = private.join("airlock-mcp-escape-server");
    std::fs::copy(binaries::built("airlock-mcp-escape-server"), &command).unwrap();
    let policy = format!(
        "[[principal]]\nname = \"local\"\nusers = [\"@daemon\", 0]\nallow = [\"*\"]\n\
         [[server]]\nname = \"hidden\"\ncommand = \"{}\"\n",
        command.display()
    );
    let mut daemon = RealDaemon::start(root, &policy, |_| {});
    let said = daemon
        .exec_json("await tools.hidden.attempts({})")
        .to_string();
    daemon.kill();
    assert!(
        said.contains("to run as user \\\"nobody\\\"")
            && said.contains("must let that account pass"),
        "{said}"
    );
}
