//! The credential store end to end: the real `airlock secret` CLI on the kernel keyring, and the
//! real `airlockd` handing secrets to `@modelcontextprotocol/server-everything` over stdio.
//!
//! The security test puts a canary value in the store, runs programs that go through every
//! path a value could escape by (results, tool errors, policy refusals, schema errors, a server
//! whose secret is missing, thrown errors, the tool-call trace, streamed events, console output,
//! health and metrics) and then searches everything returned and the daemon's whole log, at the
//! most verbose level, for the canary.
//!
//! Keyring tests use names unique to this process and delete them, so they neither see nor
//! touch real secrets of the user running the tests.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::ServerTransport;
use airlock_supervisor::agent_api::{
    ExecutionEvent, ExecutionRequest, ExecutionResponse, RedactionPlace, RequestLanguage, Status,
};
use airlock_supervisor::client::Client;
use airlock_supervisor::secrets::store::KernelKeyring;
use airlock_tests::binaries;
use airlock_tests::mcp_peers::server_everything;
use airlock_tests::processes::wait_until;
use serde_json::json;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A name no other test (or person) uses: `airlock-e2e-<tag>-<pid>-<random>`.
fn unique(tag: &str) -> String {
    format!("airlock-e2e-{tag}-{}-{}", std::process::id(), random_hex(4))
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut buf)
        .unwrap();
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Gives the command's process a new, empty anonymous session keyring, as systemd's default
/// `KeyringMode=private` does for a service (and `pam_keyinit` for a `sudo`), so a test shows
/// that the CLI and the daemon do not need to share a session.
fn in_new_session_keyring(cmd: &mut Command) -> &mut Command {
    // SAFETY: runs in the child between fork and exec and makes one system call, which is
    // async-signal-safe; the NULL name asks for an anonymous keyring.
    unsafe {
        cmd.pre_exec(|| {
            let id = libc::syscall(
                libc::SYS_keyctl,
                libc::KEYCTL_JOIN_SESSION_KEYRING as libc::c_long,
                std::ptr::null::<libc::c_char>(),
            );
            if id < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// The kernel keyring, or `None` (with the skip reported) where keyctl is blocked.
fn keyring_or_skip(test: &str) -> Option<KernelKeyring> {
    let keyring = KernelKeyring::new();
    match keyring.available() {
        Ok(()) => Some(keyring),
        Err(e) => {
            eprintln!("SKIPPED {test}: {e}");
            None
        }
    }
}

/// Deletes a keyring secret when the test ends, however it ends.
struct KeyringCleanup(String);

impl Drop for KeyringCleanup {
    fn drop(&mut self) {
        let _ = KernelKeyring::new().delete(&self.0);
    }
}

/// `airlock ARGS` with `stdin`, in a session keyring of its own: (exit code, stdout, stderr).
fn airlock_cli(args: &[&str], stdin: &str) -> (Option<i32>, String, String) {
    let mut child = in_new_session_keyring(&mut Command::new(binaries::airlock_cli()))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The CLI may refuse before reading stdin (bad arguments): a broken pipe is its answer.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_cli_sets_lists_and_deletes_secrets_without_showing_values() {
    let Some(keyring) =
        keyring_or_skip("the_cli_sets_lists_and_deletes_secrets_without_showing_values")
    else {
        return;
    };
    let name = unique("cli");
    let _cleanup = KeyringCleanup(name.clone());
    let value = format!("cli-value-{}", random_hex(12));

    let (code, out, err) = airlock_cli(&["secret", "set", &name], &format!("{value}\n"));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains(&format!("stored secret `{name}`")), "{err}");
    assert!(!out.contains(&value) && !err.contains(&value), "{out}{err}");
    // Stored without the newline `echo` adds, readable from this (another) session.
    assert_eq!(keyring.get(&name).unwrap().unwrap().as_str(), value);

    let (code, out, err) = airlock_cli(&["secret", "list"], "");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.lines().any(|l| l == format!("{name}\tkernel-keyring")),
        "{out}"
    );
    assert!(!out.contains(&value) && !err.contains(&value), "{out}{err}");

    // A value on the command line is refused, and not repeated back.
    let on_argv = format!("argv-value-{}", random_hex(8));
    let (code, out, err) = airlock_cli(&["secret", "set", &name, &on_argv], "ignored\n");
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("never from the command line"), "{err}");
    assert!(!out.contains(&on_argv) && !err.contains(&on_argv), "{err}");
    assert_eq!(keyring.get(&name).unwrap().unwrap().as_str(), value);

    // An empty value is refused (and leaves the old one).
    let (code, _, err) = airlock_cli(&["secret", "set", &name], "\n");
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("the value is empty"), "{err}");
    let (code, _, err) = airlock_cli(&["secret", "set", "no/slashes"], "x");
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("not a valid secret name"), "{err}");

    let (code, _, err) = airlock_cli(&["secret", "delete", &name], "");
    assert_eq!(code, Some(0), "{err}");
    let (_, out, _) = airlock_cli(&["secret", "list"], "");
    assert!(!out.contains(&name), "{out}");
    assert!(keyring.get(&name).unwrap().is_none());
    let (code, _, err) = airlock_cli(&["secret", "delete", &name], "");
    assert_eq!(code, Some(3));
    assert!(err.contains(&format!("no secret `{name}`")), "{err}");
}

/// The real `airlockd` on a policy file, its stderr (the whole log) captured in a file.
struct RealDaemon {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl RealDaemon {
    /// `configure` adds environment, flags, or a new session keyring.
    fn start(policy: &str, configure: impl FnOnce(&mut Command)) -> RealDaemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("a.sock");
        let policy_path = dir.path().join("policy.toml");
        std::fs::write(&policy_path, policy).unwrap();
        let log = dir.path().join("airlockd.log");
        let mut cmd = Command::new(binaries::airlockd());
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--worker")
            .arg(binaries::worker())
            .arg("--config")
            .arg(&policy_path)
            .env_remove("CREDENTIALS_DIRECTORY")
            .env("STATE_DIRECTORY", binaries::audit_directory(&socket))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        configure(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        if !wait_until(20, || socket.exists()) {
            let _ = child.kill();
            panic!(
                "airlockd never bound its socket:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        RealDaemon {
            child,
            socket,
            log,
            dir,
        }
    }

    fn policy_path(&self) -> PathBuf {
        self.dir.path().join("policy.toml")
    }

    async fn exec(&self, code: &str) -> ExecutionResponse {
        Client::connect(&self.socket)
            .await
            .unwrap()
            .execute(&request(code))
            .await
            .unwrap()
    }

    /// SIGTERM, wait, and the whole log (colour codes removed).
    fn stop(mut self) -> String {
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        let log = without_colours(&std::fs::read_to_string(&self.log).unwrap());
        assert!(status.success(), "airlockd exited with {status}:\n{log}");
        log
    }
}

impl Drop for RealDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `text` without ANSI SGR sequences (`ESC [ … m`), which the text log format contains.
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn request(code: &str) -> ExecutionRequest {
    ExecutionRequest {
        code: code.to_owned(),
        language: RequestLanguage::Typescript,
        timeout_ms: Some(60_000),
        session: None,
        replay: None,
        ..Default::default()
    }
}

/// node and server-everything's entry point as TOML strings, or `None` when not installed.
fn everything(test: &str) -> Option<(String, String)> {
    let config = server_everything("everything", test)?;
    let ServerTransport::Stdio { command, args, .. } = config.transport else {
        unreachable!("server_everything is a stdio server")
    };
    Some((command, args[0].clone()))
}

/// A `[[server]]` running server-everything with this inline `env` table.
fn server_toml(name: &str, node: &str, entry: &str, env: &str) -> String {
    format!(
        "[[server]]\nname = \"{name}\"\ncommand = {node:?}\nargs = [{entry:?}, \"stdio\"]\nenv = {env}\ncall_timeout_ms = 30000\n\n"
    )
}

fn principal(allow: &[&str], deny: &[&str]) -> String {
    format!(
        "[daemon]\npool_size = 1\nserver_user = \"root\"\n\n[[principal]]\nname = \"local\"\nusers = [\"@daemon\"]\nallow = {allow:?}\ndeny = {deny:?}\n\n"
    )
}

/// A secret set with the CLI in one session keyring is given, through the policy's
/// `{ secret = "…" }`, to a server of a daemon started later in another session keyring (as
/// under systemd's `KeyringMode=private`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyring_secret_set_by_the_cli_reaches_a_server_of_a_later_daemon() {
    let test = "a_keyring_secret_set_by_the_cli_reaches_a_server_of_a_later_daemon";
    let Some(_) = keyring_or_skip(test) else {
        return;
    };
    let Some((node, entry)) = everything(test) else {
        return;
    };
    let name = unique("keyring");
    let _cleanup = KeyringCleanup(name.clone());
    let value = format!("keyring-value-{}", random_hex(12));
    let (code, _, err) = airlock_cli(&["secret", "set", &name], &value);
    assert_eq!(code, Some(0), "{err}");

    let policy = principal(&["everything.*"], &[])
        + &server_toml(
            "everything",
            &node,
            &entry,
            &format!("{{ GIVEN = {{ secret = \"{name}\" }}, PLAIN = \"literal\" }}"),
        );
    let daemon = RealDaemon::start(&policy, |cmd| {
        in_new_session_keyring(cmd);
    });
    // server-everything's get-env returns the server's whole environment. The daemon redacts
    // the secret values it gave the server from everything the server answers, so the marker
    // in place of GIVEN proves the server held exactly that value, and that it did not reach
    // the program.
    let r = daemon.exec("await tools.everything.get_env({})").await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["GIVEN"], json!("[redacted]"), "{}", r.result);
    assert!(!r.result.to_string().contains(&value), "{}", r.result);
    assert_eq!(r.result["PLAIN"], json!("literal"));
    // Nothing else of the daemon's environment is inherited: the base (PATH, HOME, TMPDIR,
    // LANG) and what the entry gives.
    assert_eq!(
        r.result["PATH"],
        json!(airlock_policy::BASE_PATH),
        "{}",
        r.result
    );
    let mut names: Vec<&str> = r
        .result
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["GIVEN", "HOME", "LANG", "PATH", "PLAIN", "TMPDIR"],
        "{}",
        r.result
    );
    let log = daemon.stop();
    assert!(!log.contains(&value), "{log}");
}

/// systemd credentials: the server whose secret is there works; the one whose secret is
/// missing fails with an error naming the secret (start-up warned about it, naming server, key
/// and secret), and a third server in the same daemon is unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_fails_only_the_server_that_needs_it() {
    let test = "a_missing_secret_fails_only_the_server_that_needs_it";
    let Some((node, entry)) = everything(test) else {
        return;
    };
    let present = unique("present");
    let absent = unique("absent");
    let value = format!("credential-value-{}", random_hex(12));
    let policy = principal(&["*"], &[])
        + &server_toml(
            "withsecret",
            &node,
            &entry,
            &format!("{{ TOKEN = {{ secret = \"{present}\" }} }}"),
        )
        + &server_toml(
            "missing",
            &node,
            &entry,
            &format!("{{ TOKEN = {{ secret = \"{absent}\" }} }}"),
        )
        + &server_toml("plain", &node, &entry, "{}");
    let creds = tempfile::tempdir().unwrap();
    // As `echo value > file` writes it: the newline is not part of the value.
    std::fs::write(creds.path().join(&present), format!("{value}\n")).unwrap();
    let creds_path = creds.path().to_owned();
    let daemon = RealDaemon::start(&policy, |cmd| {
        cmd.env("CREDENTIALS_DIRECTORY", &creds_path);
    });

    let r = daemon
        .exec(
            r#"
const attempt = async (f: () => Promise<unknown>) => {
  try { return { ok: await f() } } catch (e: any) { return { code: e.code, message: e.message, hint: e.hint } }
};
({
  withsecret: await attempt(() => tools.withsecret.echo({ message: "one" })),
  env: await attempt(() => tools.withsecret.get_env({})),
  missing: await attempt(() => tools.missing.echo({ message: "two" })),
  plain: await attempt(() => tools.plain.echo({ message: "three" })),
})
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        r.result["withsecret"]["ok"],
        json!("Echo: one"),
        "{}",
        r.result
    );
    // Redacted because it is exactly the secret (see the keyring test).
    assert_eq!(
        r.result["env"]["ok"]["TOKEN"],
        json!("[redacted]"),
        "{}",
        r.result
    );
    assert_eq!(
        r.result["plain"]["ok"],
        json!("Echo: three"),
        "{}",
        r.result
    );
    let missing = &r.result["missing"];
    assert_eq!(missing["code"], json!("server_unavailable"), "{missing}");
    let message = missing["message"].as_str().unwrap();
    assert!(message.contains("`missing`"), "{message}");
    assert!(message.contains("env.TOKEN"), "{message}");
    assert!(message.contains(&format!("secret `{absent}`")), "{message}");
    assert!(
        message.contains(&creds_path.join(&absent).display().to_string()),
        "where it looked: {message}"
    );
    assert!(
        missing["hint"]
            .as_str()
            .unwrap()
            .contains(&format!("airlock secret set {absent}")),
        "{missing}"
    );

    // --check-config says the same before a start, and still succeeds.
    let check = Command::new(binaries::airlockd())
        .arg("--check-config")
        .arg(daemon.policy_path())
        .env("CREDENTIALS_DIRECTORY", &creds_path)
        .output()
        .unwrap();
    let check_err = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{check_err}");
    assert!(
        check_err.contains(&format!(
            "warning: server `missing`: env.TOKEN needs secret `{absent}`"
        )),
        "{check_err}"
    );
    assert!(!check_err.contains("`withsecret`"), "{check_err}");

    let log = daemon.stop();
    let warning = log
        .lines()
        .find(|l| l.contains("WARN") && l.contains("server=missing"))
        .unwrap_or_else(|| panic!("no start-up warning for the missing secret:\n{log}"));
    assert!(warning.contains("setting=env.TOKEN"), "{warning}");
    assert!(warning.contains(&format!("secret={absent}")), "{warning}");
    assert!(
        !log.lines()
            .any(|l| l.contains("WARN") && l.contains("server=withsecret")),
        "{log}"
    );
}

/// `AIRLOCK_SECRET_<NAME>` is read only with `--dev-secrets-from-env`, which warns that it is
/// for development only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_secrets_need_the_development_flag() {
    let test = "environment_secrets_need_the_development_flag";
    let Some((node, entry)) = everything(test) else {
        return;
    };
    let name = unique("dev.env");
    let var = airlock_supervisor::secrets::store::env_var_name(&name);
    let value = format!("env-value-{}", random_hex(12));
    let policy = principal(&["everything.*"], &[])
        + &server_toml(
            "everything",
            &node,
            &entry,
            &format!("{{ FROM_ENV = {{ secret = \"{name}\" }} }}"),
        );
    let program = r#"
try { (await tools.everything.get_env({})).FROM_ENV } catch (e: any) { "error: " + e.message }
"#;

    let without = RealDaemon::start(&policy, |cmd| {
        cmd.env(&var, &value);
    });
    let r = without.exec(program).await;
    let text = r.result.as_str().unwrap_or_default().to_owned();
    assert!(text.starts_with("error: "), "{r:?}");
    assert!(text.contains(&format!("secret `{name}`")), "{text}");
    // Without the flag the environment is not even mentioned as a place to look.
    assert!(!text.contains(&var), "{text}");
    let log = without.stop();
    assert!(!log.contains("development only"), "{log}");

    let with = RealDaemon::start(&policy, |cmd| {
        cmd.env(&var, &value).arg("--dev-secrets-from-env");
    });
    let r = with.exec(program).await;
    // Redacted because it is exactly the secret (see the keyring test).
    assert_eq!(r.result, json!("[redacted]"), "{r:?}");
    // And said so: the call lists the redaction (a known secret, in its result, where), and
    // the response warns of it, as for any secret the scanner finds.
    let call = &r.tool_calls[0];
    assert!(
        call.redactions.iter().any(|red| red.rule == "known-secret"
            && red.place == RedactionPlace::Result
            && red.pointer.as_deref() == Some("/FROM_ENV")),
        "{call:?}"
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("redacted from tool results")),
        "{:?}",
        r.warnings
    );
    let log = with.stop();
    let warning = log
        .lines()
        .find(|l| l.contains("--dev-secrets-from-env"))
        .unwrap_or_else(|| panic!("no development-only warning:\n{log}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("development only"), "{warning}");
    assert!(!log.contains(&value), "{log}");
}

/// The sha256 of `text` as `sha256sum` prints it for stdin.
fn sha256sum(text: &str) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

/// A server-everything that starts only if `API_TOKEN` holds the canary (compared by hash, so
/// the policy, which the daemon may log, never contains the value), or, with `leak`, that first
/// prints its token to stderr as a careless server might.
fn guarded_server(name: &str, node: &str, entry: &str, canary: &str, env: &str) -> String {
    let script = format!(
        "test \"$(printf %s \"$API_TOKEN\" | sha256sum)\" = \"{}\" || {{ echo 'API_TOKEN is not the canary' >&2; exit 1; }}; exec \"$0\" \"$@\"",
        sha256sum(canary)
    );
    format!(
        "[[server]]\nname = \"{name}\"\ncommand = \"/bin/sh\"\nargs = [\"-c\", {script:?}, {node:?}, {entry:?}, \"stdio\"]\nenv = {env}\ncall_timeout_ms = 30000\n\n"
    )
}

/// Programs that exercise every way out: results, errors of every kind, the trace, console
/// output, streamed events.
const PROBE: &str = r#"
const out: any = {};
const attempt = async (name: string, f: () => Promise<unknown>) => {
  try { out[name] = { ok: await f() } }
  catch (e: any) { out[name] = { name: e?.name, code: e?.code, message: String(e?.message), hint: e?.hint, stack: String(e?.stack) } }
};
await attempt("echo", () => tools.vault.echo({ message: "$API_TOKEN ${API_TOKEN} %API_TOKEN%" }));
await attempt("sum", () => tools.vault.get_sum({ a: 1, b: 2 }));
await attempt("structured", () => tools.vault.get_structured_content({ location: "Chicago" }));
await attempt("envDenied", () => tools.vault.get_env({}));
// Not a literal, so the contract check lets it through to the schema check at call time.
const notANumber: any = "API_TOKEN";
await attempt("badArgs", () => tools.vault.get_sum({ a: notANumber, b: 1 }));
await attempt("unknownTool", () => (tools.vault as any).print_env({}));
await attempt("unknownServer", () => (tools as any).secrets.get({ name: "canary" }));
await attempt("missingSecret", () => tools.halfconfigured.echo({ message: "x" }));
await attempt("progress", () => tools.vault.trigger_long_running_operation({ duration: 0.2, steps: 2 }));
await attempt("annotated", () => tools.vault.get_annotated_message({ messageType: "error", includeImage: false }));
out.globals = Object.getOwnPropertyNames(globalThis).sort();
out.process = typeof (globalThis as any).process;
console.log(JSON.stringify(out));
console.error("to stderr", JSON.stringify(out.envDenied));
out
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_secret_never_reaches_programs_responses_or_the_log() {
    let test = "a_canary_secret_never_reaches_programs_responses_or_the_log";
    let Some((node, entry)) = everything(test) else {
        return;
    };
    let canary = format!("canary-{}", random_hex(16));
    let secret = unique("canary");
    let absent = unique("absent");
    let env = format!(
        "{{ API_TOKEN = {{ secret = \"{secret}\" }}, PATH = \"/usr/local/bin:/usr/bin:/bin\" }}"
    );
    let half_env = format!(
        "{{ API_TOKEN = {{ secret = \"{secret}\" }}, OTHER = {{ secret = \"{absent}\" }} }}"
    );
    // get-env would hand the server's environment to the program: a policy that gives a
    // server a secret must deny such a tool, and this one does.
    let policy = principal(&["vault.*", "halfconfigured.*"], &["vault.get_env"])
        + &guarded_server("vault", &node, &entry, &canary, &env)
        + &server_toml("halfconfigured", &node, &entry, &half_env);
    let creds = tempfile::tempdir().unwrap();
    std::fs::write(creds.path().join(&secret), format!("{canary}\n")).unwrap();
    let creds_path = creds.path().to_owned();
    let daemon = RealDaemon::start(&policy, |cmd| {
        cmd.env("CREDENTIALS_DIRECTORY", &creds_path)
            // Everything the daemon and its libraries (rmcp included) can log.
            .env("AIRLOCK_LOG", "trace");
    });

    let mut returned = Vec::new();
    let plain = daemon.exec(PROBE).await;
    // The canary did reach the server (it starts only with the right API_TOKEN)...
    assert_eq!(plain.status, Status::Ok, "{plain:?}");
    assert_eq!(plain.result["sum"]["ok"], json!("The sum of 1 and 2 is 3."));
    assert!(
        plain.result["progress"].get("ok").is_some(),
        "{}",
        plain.result
    );
    // ... and every refusal and error happened as intended.
    assert_eq!(
        plain.result["envDenied"]["code"],
        json!("denied"),
        "{}",
        plain.result
    );
    assert_eq!(plain.result["badArgs"]["code"], json!("invalid_arguments"));
    assert_eq!(plain.result["unknownTool"]["code"], json!("unknown_tool"));
    assert_eq!(
        plain.result["missingSecret"]["code"],
        json!("server_unavailable")
    );
    assert!(
        plain.result["missingSecret"]["message"]
            .as_str()
            .unwrap()
            .contains(&absent),
        "{}",
        plain.result
    );
    assert_eq!(plain.result["process"], json!("undefined"));
    returned.push(serde_json::to_string(&plain).unwrap());

    // Streamed: every event as it arrived.
    let mut events = Vec::new();
    let streamed = Client::connect(&daemon.socket)
        .await
        .unwrap()
        .execute_streaming(&request(PROBE), |e: &ExecutionEvent| {
            events.push(serde_json::to_string(e).unwrap())
        })
        .await
        .unwrap();
    assert_eq!(streamed.status, Status::Ok, "{streamed:?}");
    assert!(events.len() > 5, "{events:?}");
    returned.extend(events);
    returned.push(serde_json::to_string(&streamed).unwrap());

    // A program that fails after tool calls: the error response and its trace.
    let failed = daemon
        .exec("await tools.vault.echo({ message: 'x' }); await tools.halfconfigured.echo({ message: 'y' })")
        .await;
    assert_eq!(failed.status, Status::Error, "{failed:?}");
    assert_eq!(failed.tool_calls.len(), 2, "{failed:?}");
    returned.push(serde_json::to_string(&failed).unwrap());
    let thrown = daemon
        .exec("const r = await tools.vault.echo({ message: 'z' }); throw new Error('boom ' + r)")
        .await;
    assert_eq!(thrown.status, Status::Error, "{thrown:?}");
    returned.push(serde_json::to_string(&thrown).unwrap());

    for path in ["/v1/health", "/metrics"] {
        let (_, body) = Client::connect(&daemon.socket)
            .await
            .unwrap()
            .get(path)
            .await
            .unwrap();
        returned.push(body);
    }

    let check = Command::new(binaries::airlockd())
        .arg("--check-config")
        .arg(daemon.policy_path())
        .env("CREDENTIALS_DIRECTORY", &creds_path)
        .output()
        .unwrap();
    assert!(check.status.success());
    returned.push(String::from_utf8_lossy(&check.stdout).into_owned());
    returned.push(String::from_utf8_lossy(&check.stderr).into_owned());

    let log = daemon.stop();
    // The log is the real thing: trace level, the servers' traffic included (rmcp's own
    // TRACE message dumps are filtered out by airlockd; its DEBUG events stay).
    assert!(
        log.contains("server=vault") && log.contains(" DEBUG "),
        "{log}"
    );
    assert!(log.len() > 10_000, "suspiciously short log:\n{log}");
    for (i, text) in returned.iter().enumerate() {
        assert!(
            !text.contains(&canary),
            "the canary reached the agent in returned item {i}: {text}"
        );
    }
    if let Some(line) = log.lines().find(|l| l.contains(&canary)) {
        panic!("the canary is in the daemon's log: {line}");
    }
}

/// A server that prints its own token to stderr: the daemon logs server stderr line by line,
/// so the token would be written to the log unless the daemon redacts the values it gave the
/// server (`secret_store::redact`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_a_server_prints_to_stderr_is_not_logged() {
    let test = "a_secret_a_server_prints_to_stderr_is_not_logged";
    let Some((node, entry)) = everything(test) else {
        return;
    };
    let canary = format!("canary-{}", random_hex(16));
    let secret = unique("stderr");
    let script = "echo \"debug: API_TOKEN=$API_TOKEN\" >&2; exec \"$0\" \"$@\"";
    let policy = principal(&["careless.*"], &[])
        + &format!(
            "[[server]]\nname = \"careless\"\ncommand = \"/bin/sh\"\nargs = [\"-c\", {script:?}, {node:?}, {entry:?}, \"stdio\"]\nenv = {{ API_TOKEN = {{ secret = \"{secret}\" }} }}\n"
        );
    let creds = tempfile::tempdir().unwrap();
    std::fs::write(creds.path().join(&secret), &canary).unwrap();
    let creds_path: &Path = creds.path();
    let daemon = RealDaemon::start(&policy, |cmd| {
        cmd.env("CREDENTIALS_DIRECTORY", creds_path);
    });
    let r = daemon
        .exec("await tools.careless.echo({ message: 'hi' })")
        .await;
    assert_eq!(r.result, json!("Echo: hi"), "{r:?}");
    let log = daemon.stop();
    assert!(log.contains("debug: API_TOKEN="), "{log}");
    if let Some(line) = log.lines().find(|l| l.contains(&canary)) {
        panic!("the canary is in the daemon's log: {line}");
    }
}
