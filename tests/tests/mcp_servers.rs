//! Real MCP servers as tool sources: `@modelcontextprotocol/server-everything` from npm over
//! stdio, started and supervised by the daemon, called from sandboxed programs.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::Status;
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::mcp_peers::server_everything;
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::json;
use std::sync::Arc;

/// The in-process tests hold this for their whole run: their servers are children of this test
/// process, and one test counting or killing "its" server must not see another test's.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

async fn daemon_with_everything(test: &str) -> Option<TestDaemon> {
    let config = server_everything("everything", test)?;
    Some(
        TestDaemon::start_with(DaemonOptions::default().source(Arc::new(McpServer::new(
            config,
            Arc::new(SecretStore::empty()),
        ))))
        .await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_call_tools_of_a_real_stdio_mcp_server() {
    let _serial = serial().await;
    let Some(d) = daemon_with_everything("programs_call_tools_of_a_real_stdio_mcp_server").await
    else {
        return;
    };
    let r = d
        .exec(
            r#"
const echoed = await tools.everything.echo({ message: "hello" });
// `get-sum` is reachable under its sanitised name; the server receives `get-sum`.
const sum = await tools.everything.get_sum({ a: 2, b: 40 });
const weather = await tools.everything.get_structured_content({ location: "Chicago" });
({ echoed, sum, weather })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["echoed"], json!("Echo: hello"));
    assert_eq!(r.result["sum"], json!("The sum of 2 and 40 is 42."));
    // structuredContent wins over the text rendering of the same data.
    assert!(
        r.result["weather"]["temperature"].is_number(),
        "{}",
        r.result
    );
    assert_eq!(r.tool_calls.len(), 3);
    assert!(
        r.tool_calls.iter().all(|c| c.outcome.as_str() == "ok"),
        "{:?}",
        r.tool_calls
    );
    assert_eq!(r.tool_calls[1].tool, "everything.get_sum");
    // A program that succeeded answers with its value; the tools' results stay out of it.
    assert!(r.tool_calls.iter().all(|c| c.result.is_none()), "{r:?}");

    // A failed one shows what each call gave the program, so the failure can be explained
    // without running it again.
    let r = d
        .exec(
            r#"
const echoed = await tools.everything.echo({ message: "hello" });
const weather = await tools.everything.get_structured_content({ location: "Chicago" });
weather.temp.toFixed(1)
"#,
        )
        .await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    assert_eq!(r.tool_calls[0].result, Some(json!("Echo: hello")));
    assert!(!r.tool_calls[0].result_truncated);
    assert_eq!(
        r.tool_calls[1]
            .result
            .as_ref()
            .map(|w| w["temperature"].is_number()),
        Some(true),
        "{:?}",
        r.tool_calls[1]
    );

    // A name guessed from the task: the server announces list changes, but its list is the
    // contract (no `dynamic_tools`), so nothing runs; the refusal names the tool whose
    // description says it sums.
    let r = d
        .exec(
            r#"
try { await tools.everything.add({ a: 1, b: 2 }) } catch (e) { ({ code: e.code, hint: e.hint }) }
"#,
        )
        .await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.kind.as_str(), "contract", "{e:?}");
    assert!(r.tool_calls.is_empty(), "{r:?}");
    assert!(
        e.hint
            .as_deref()
            .unwrap_or_default()
            .contains("tools.everything.get_sum"),
        "{e:?}"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_arrive_as_typed_content_and_bad_calls_as_tool_errors() {
    let _serial = serial().await;
    let Some(d) =
        daemon_with_everything("images_arrive_as_typed_content_and_bad_calls_as_tool_errors").await
    else {
        return;
    };
    let r = d
        .exec(
            r#"
const image = await tools.everything.get_tiny_image({});
// Arguments and names that are not literals in the call, so the contract check cannot
// judge them before the run (sdk_discovery.rs covers that); here the call-time checks act.
const two: unknown = "two";
const misspelt = "eccho";
let bad;
try { await tools.everything.get_sum({ a: two as number, b: 1 }) } catch (e) { bad = { name: e.name, code: e.code, message: e.message, hint: e.hint } }
let unknown;
try { await (tools.everything as any)[misspelt]({}) } catch (e) { unknown = { code: e.code, hint: e.hint } }
({ kinds: image.map((c: any) => c.type), mime: image.find((c: any) => c.type === "image").mimeType, bad, unknown })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.result["kinds"]
            .as_array()
            .unwrap()
            .contains(&json!("image")),
        "{}",
        r.result
    );
    assert_eq!(r.result["mime"], json!("image/png"));
    // Checked against the tool's inputSchema before anything was sent.
    assert_eq!(r.result["bad"]["name"], json!("ToolError"), "{}", r.result);
    assert_eq!(
        r.result["bad"]["code"],
        json!("invalid_arguments"),
        "{}",
        r.result
    );
    let message = r.result["bad"]["message"].as_str().unwrap();
    assert!(
        message.contains("`a`") && message.contains("\"two\""),
        "{message}"
    );
    assert!(
        r.result["bad"]["hint"]
            .as_str()
            .unwrap()
            .contains("a: number"),
        "{}",
        r.result
    );
    assert_eq!(r.result["unknown"]["code"], json!("unknown_tool"));
    assert_eq!(
        r.result["unknown"]["hint"],
        json!("did you mean tools.everything.echo?")
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_to_one_server_run_concurrently() {
    let _serial = serial().await;
    let Some(d) = daemon_with_everything("parallel_calls_to_one_server_run_concurrently").await
    else {
        return;
    };
    let r = d
        .exec(
            "const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => tools.everything.echo({ message: String(i) }))); rs.join(',')",
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let expected: Vec<String> = (0..20).map(|i| format!("Echo: {i}")).collect();
    assert_eq!(r.result, json!(expected.join(",")));
    d.stop().await;
}

/// The real `airlockd` on a policy with one eager `[[server]]` named `everything` running
/// `command args`; returns the daemon, its socket, and the directory that holds both.
fn airlockd_with_server(
    command: &str,
    args: &[String],
    pool_size: usize,
) -> (std::process::Child, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("a.sock");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[daemon]\npool_size = {pool_size}\n\n[[principal]]\nname = \"local\"\nusers = [\"@daemon\"]\nallow = [\"everything.*\"]\n\n[[server]]\nname = \"everything\"\ncommand = {command:?}\nargs = {args:?}\nstart = \"eager\"\n"
        ),
    )
    .unwrap();
    let daemon = airlock_tests::binaries::airlockd_command(&socket)
        .arg("--config")
        .arg(&policy)
        .spawn()
        .unwrap();
    (daemon, socket, dir)
}

/// The real `airlockd` with a `[[server]]` in its policy file: the CLI's program calls it, and
/// SIGTERM leaves no server process behind.
#[test]
fn airlockd_runs_servers_from_its_policy_file() {
    use airlock_policy::ServerTransport;
    use airlock_tests::binaries;
    use airlock_tests::processes::wait_until;
    use std::process::{Command, Stdio};

    let Some(config) =
        server_everything("everything", "airlockd_runs_servers_from_its_policy_file")
    else {
        return;
    };
    let ServerTransport::Stdio { command, args, .. } = &config.transport else {
        unreachable!("server_everything is a stdio server")
    };
    let (mut daemon, socket, _dir) = airlockd_with_server(command, args, 1);
    assert!(wait_until(20, || socket.exists()), "no socket appeared");
    let out = Command::new(binaries::airlock_cli())
        .arg("--socket")
        .arg(&socket)
        .args([
            "exec",
            "-e",
            "await tools.everything.echo({ message: 'via policy' })",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "\"Echo: via policy\"\n"
    );
    let servers = airlock_tests::processes::servers_named(daemon.id(), "node");
    assert_eq!(servers.len(), 1, "expected one running server: {servers:?}");
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    assert!(daemon.wait().unwrap().success());
    // server-everything does not exit when its stdin closes: the daemon must end it.
    assert!(
        wait_until(5, || !airlock_tests::processes::alive(servers[0])),
        "the MCP server {} outlived the daemon",
        servers[0]
    );
}

/// PyPI's `mcp-server-time` (the Python SDK 2.x, which speaks spec revision 2026-07-28 as
/// well as the older ones): the same brokering works with the newer protocol era.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_sdk_server_from_pypi_works_too() {
    let _serial = serial().await;
    let Some(config) = airlock_tests::mcp_peers::python_module_server(
        "time",
        "mcp_server_time",
        &["--local-timezone", "UTC"],
        "a_python_sdk_server_from_pypi_works_too",
    ) else {
        return;
    };
    let d = TestDaemon::start_with(DaemonOptions::default().source(Arc::new(McpServer::new(
        config,
        Arc::new(SecretStore::empty()),
    ))))
    .await;
    let r = d
        .exec(
            r#"
const now = await tools.time.get_current_time({ timezone: "Europe/Paris" });
const converted = await tools.time.convert_time({ source_timezone: "UTC", time: "12:00", target_timezone: "Asia/Tokyo" });
({ tz: now.timezone, target: converted.target.timezone, hour: converted.target.datetime.slice(11, 13) })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        r.result,
        json!({"tz": "Europe/Paris", "target": "Asia/Tokyo", "hour": "21"})
    );
    d.stop().await;
}

/// A daemon killed with SIGKILL (no shutdown) still takes its servers with it, even a server
/// that does not exit when its stdin closes (here: a shell that runs server-everything and then
/// keeps sleeping, so only the parent-death signal can end it).
#[test]
fn servers_die_with_a_killed_daemon() {
    use airlock_policy::ServerTransport;
    use airlock_tests::processes::{alive, servers_named, wait_until};

    let Some(config) = server_everything("everything", "servers_die_with_a_killed_daemon") else {
        return;
    };
    let ServerTransport::Stdio { command, args, .. } = &config.transport else {
        unreachable!("server_everything is a stdio server")
    };
    let script = format!("{command} {} stdio; exec sleep 600", args[0]);
    let (mut daemon, _socket, _dir) =
        airlockd_with_server("/bin/sh", &["-c".to_owned(), script], 0);
    let mut servers = Vec::new();
    let started = wait_until(20, || {
        servers = servers_named(daemon.id(), "sh");
        !servers.is_empty()
    });
    if !started {
        let _ = daemon.kill();
        panic!("the eager server never started");
    }
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let survived = !wait_until(5, || !alive(servers[0]));
    if survived {
        // SAFETY: kill(2) of the leftover process this test caused.
        unsafe { libc::kill(servers[0], libc::SIGKILL) };
    }
    assert!(
        !survived,
        "the MCP server {} outlived the killed daemon",
        servers[0]
    );
}

/// A server that dies between calls is started again by the next call, and the program that
/// was running when it died gets a clear error rather than a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_server_is_started_again_on_the_next_call() {
    let _serial = serial().await;
    use airlock_tests::processes::{alive, servers_named, wait_until};

    let Some(d) =
        daemon_with_everything("a_crashed_server_is_started_again_on_the_next_call").await
    else {
        return;
    };
    let first = d
        .exec("await tools.everything.echo({ message: 'one' })")
        .await;
    assert_eq!(first.result, json!("Echo: one"), "{first:?}");
    let me = std::process::id();
    let servers = servers_named(me, "node");
    assert_eq!(servers.len(), 1, "{servers:?}");
    // SAFETY: kill(2) of the server process this test's daemon started.
    unsafe { libc::kill(servers[0], libc::SIGKILL) };
    assert!(wait_until(5, || !alive(servers[0])));

    let mut second = d
        .exec("await tools.everything.echo({ message: 'two' })")
        .await;
    if second.status != Status::Ok {
        // The first call after the crash may still see the dead connection (the transport
        // notices the closed pipe asynchronously); it must fail cleanly, and the next one work.
        let err = second.tool_calls[0].error.clone().unwrap();
        assert!(
            ["upstream_error", "server_unavailable"].contains(&err.code.as_str()),
            "{err:?}"
        );
        second = d
            .exec("await tools.everything.echo({ message: 'two' })")
            .await;
    }
    assert_eq!(second.result, json!("Echo: two"), "{second:?}");
    let restarted = servers_named(me, "node");
    assert_eq!(restarted.len(), 1, "{restarted:?}");
    assert_ne!(restarted[0], servers[0]);
    d.stop().await;
}

/// PyPI's `mcp-server-git` on a repository the test makes: the program reads its log and
/// status. Its environment is only what the policy gives (here `PATH`, so GitPython finds git).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_server_from_pypi_reads_a_repository() {
    let _serial = serial().await;
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(repo.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "git {args:?} failed");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.path().join("a.txt"), "hello\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "first commit from the test"]);
    std::fs::write(repo.path().join("b.txt"), "untracked\n").unwrap();

    let repo_path = repo.path().display().to_string();
    let Some(mut config) = airlock_tests::mcp_peers::python_module_server(
        "git",
        "mcp_server_git",
        &["--repository", &repo_path],
        "the_git_server_from_pypi_reads_a_repository",
    ) else {
        return;
    };
    let airlock_policy::ServerTransport::Stdio { env, .. } = &mut config.transport else {
        unreachable!("python_module_server is a stdio server")
    };
    env.push((
        "PATH".into(),
        airlock_policy::SettingValue::Literal("/usr/local/bin:/usr/bin:/bin".into()),
    ));
    let d = TestDaemon::start_with(DaemonOptions::default().source(Arc::new(McpServer::new(
        config,
        Arc::new(SecretStore::empty()),
    ))))
    .await;
    let r = d
        .exec(&format!(
            r#"
const repo = {repo_path:?};
const log = await tools.git.git_log({{ repo_path: repo, max_count: 5 }});
const status = await tools.git.git_status({{ repo_path: repo }});
({{ log: JSON.stringify(log), status: String(status) }})
"#
        ))
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.result["log"]
            .as_str()
            .unwrap()
            .contains("first commit from the test"),
        "{}",
        r.result
    );
    assert!(
        r.result["status"].as_str().unwrap().contains("b.txt"),
        "{}",
        r.result
    );

    // A name without its prefix is found by the search, before anything runs.
    let r = d
        .exec(&format!(
            "await tools.git.status({{ repo_path: {repo_path:?} }});"
        ))
        .await;
    let error = r.error.as_ref().expect("the program is refused");
    assert_eq!(error.kind.as_str(), "contract", "{r:?}");
    assert!(
        error
            .hint
            .as_deref()
            .is_some_and(|h| h.starts_with("did you mean tools.git.git_status()")),
        "{r:?}"
    );
    d.stop().await;
}
