//! `airlock servers` and `airlock server test NAME` against the real `airlockd`: each server's
//! state from not started to ready or failed (with its last stderr lines and the hint), and a
//! fresh instance started, listed and stopped without touching the running one.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionRequest, Status};
use airlock_supervisor::client::Client;
use airlock_tests::binaries;
use airlock_tests::real_daemon::RealDaemon;
use serde_json::Value;
use std::path::Path;

/// `airlock --socket S args…`: exit code, stdout, stderr.
fn cli(socket: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let socket = socket.to_str().unwrap();
    let mut all = vec!["--socket", socket];
    all.extend_from_slice(args);
    binaries::run_cli(&all)
}

fn servers(socket: &Path) -> Vec<Value> {
    let (code, out, err) = cli(socket, &["servers", "--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v["servers"].as_array().unwrap().clone()
}

fn named<'a>(servers: &'a [Value], name: &str) -> &'a Value {
    servers.iter().find(|s| s["name"] == name).unwrap()
}

#[test]
fn servers_are_listed_with_their_state_and_tested_on_demand() {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-peers/node_modules/.bin/mcp-server-sequential-thinking");
    if airlock_tests::mcp_peers::npm_server(
        "thinking",
        "server-sequential-thinking",
        &[],
        "servers_are_listed_with_their_state_and_tested_on_demand",
    )
    .is_none()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let policy = format!(
        r#"[daemon]
server_user = "root"
pool_size = 1

[[principal]]
name = "local"
users = ["@daemon"]
allow = ["thinking.*", "broken.*"]

[[server]]
name = "thinking"
command = "{}"

[[server]]
name = "broken"
command = "sh"
args = ["-c", "echo 'Error: THINKING_API_KEY is not set' >&2; exit 1"]
"#,
        bin.display()
    );
    let mut daemon = RealDaemon::start(dir.path(), &policy, |_| {});
    let socket = daemon.socket.clone();

    let before = servers(&socket);
    assert_eq!(
        named(&before, "thinking")["state"],
        "not_started",
        "{before:?}"
    );
    assert_eq!(
        named(&before, "broken")["state"],
        "not_started",
        "{before:?}"
    );
    assert_eq!(
        named(&before, "thinking")["confinement"],
        "every layer, network host"
    );

    // A fresh instance: started, listed, stopped; the daemon's own is still not started.
    let (code, out, err) = cli(&socket, &["server", "test", "thinking"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("server `thinking` started and listed 1 tool(s) in ")
            && out.contains("sequentialthinking"),
        "{out}"
    );
    assert_eq!(named(&servers(&socket), "thinking")["state"], "not_started");

    // One that cannot start says why, in the server's own words.
    let (code, out, err) = cli(&socket, &["server", "test", "broken"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("server `broken` did not start"), "{err}");
    assert!(err.contains("Error: THINKING_API_KEY is not set"), "{err}");
    let (code, _, err) = cli(&socket, &["server", "test", "nope"]);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("no [[server]] named `nope`") && err.contains("thinking, broken"),
        "{err}"
    );

    // Used by a program: the one ready with its process and tools, the other failed.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut client = Client::connect(&socket).await.unwrap();
        for (code, status) in [
            (r#"await tools.thinking.sequentialthinking({ thought: "x", thoughtNumber: 1, totalThoughts: 1, nextThoughtNeeded: false })"#, Status::Ok),
            ("await tools.broken.anything({})", Status::Error),
        ] {
            let request = ExecutionRequest {
                code: code.to_owned(),
                timeout_ms: Some(30_000),
                ..Default::default()
            };
            let r = client.execute(&request).await.unwrap();
            assert_eq!(r.status, status, "{r:?}");
        }
    });
    let after = servers(&socket);
    let thinking = named(&after, "thinking");
    assert_eq!(thinking["state"], "ready", "{thinking}");
    assert_eq!(thinking["tools"], 1, "{thinking}");
    assert!(thinking["pid"].as_u64().is_some(), "{thinking}");
    let broken = named(&after, "broken");
    assert_eq!(broken["state"], "failed", "{broken}");
    assert_eq!(broken["failures"], 1, "{broken}");
    assert!(
        broken["stderr"]
            .as_str()
            .unwrap_or_default()
            .contains("THINKING_API_KEY is not set"),
        "{broken}"
    );
    assert!(
        broken["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("last words"),
        "{broken}"
    );
    // What the daemon lets the server read, each path with the rule that granted it.
    let (code, out, err) = cli(&socket, &["policy", "explain", "--server", "thinking"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("server `thinking`: confined (every layer), network host")
            && out.contains("    /usr (the system)")
            && out.contains(&format!(
                "/mcp-peers/node_modules (the command, {})",
                bin.display()
            )),
        "{out}"
    );
    let (code, _, err) = cli(&socket, &["policy", "explain", "--server", "nope"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("no [[server]] named `nope`"), "{err}");
    let (code, out, _) = cli(&socket, &["servers"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("broken (stdio): failed 1 time(s) in a row, next try in "),
        "{out}"
    );
    assert!(out.contains("thinking (stdio): ready, pid "), "{out}");
    daemon.stop();
}

/// A server that prints the secret it was given on stderr: the daemon's log has its line with
/// the value redacted, and so do the program's error and `airlock servers`.
#[test]
fn a_server_s_secret_never_reaches_the_log_from_its_stderr() {
    let value = "leak-4f9a8b7c6d5e3a21";
    let dir = tempfile::tempdir().unwrap();
    let policy = r#"[daemon]
server_user = "root"
pool_size = 1

[[principal]]
name = "local"
users = ["@daemon"]
allow = ["leaky.*"]

[[server]]
name = "leaky"
command = "sh"
args = ["-c", "echo \"starting with token $TOKEN\" >&2; exit 1"]
env = { TOKEN = { secret = "leak-token" } }
"#;
    let mut daemon = RealDaemon::start(dir.path(), policy, |cmd| {
        cmd.arg("--dev-secrets-from-env")
            .env("AIRLOCK_SECRET_LEAK_TOKEN", value);
    });
    let socket = daemon.socket.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = runtime.block_on(async {
        let mut client = Client::connect(&socket).await.unwrap();
        let request = ExecutionRequest {
            code: "await tools.leaky.anything({})".to_owned(),
            timeout_ms: Some(30_000),
            ..Default::default()
        };
        client.execute(&request).await.unwrap()
    });
    assert_eq!(r.status, Status::Error, "{r:?}");
    let message = &r.error.as_ref().unwrap().message;
    assert!(
        message.contains("starting with token [redacted]"),
        "{message}"
    );
    let (code, out, err) = cli(&socket, &["servers"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("starting with token [redacted]"), "{out}");
    daemon.stop();
    let log = daemon.log();
    assert!(log.contains("starting with token [redacted]"), "{log}");
    for shown in [&log, message, &out] {
        assert!(!shown.contains(value), "the secret was shown: {shown}");
    }
}
