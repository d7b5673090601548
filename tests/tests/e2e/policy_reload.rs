//! Operators' policy at run time: reload (socket and SIGHUP) keeps the last good policy on any
//! problem, running executions finish under the policy they started with, drop-ins, per-principal
//! limits and rate limits, and `airlock policy check|explain` / `airlock reload`.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::Status;
use airlock_tests::{DaemonOptions, TestDaemon, binaries};
use bytes::Bytes;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A policy directory whose files have safe permissions (0644 files, 0755 directories).
struct PolicyDir {
    dir: tempfile::TempDir,
}

impl PolicyDir {
    fn new(main: &str) -> PolicyDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let d = PolicyDir { dir };
        d.write("policy.toml", main);
        d
    }

    fn main(&self) -> PathBuf {
        self.dir.path().join("policy.toml")
    }

    fn write(&self, name: &str, text: &str) {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent()
            && !parent.exists()
        {
            std::fs::create_dir(parent).unwrap();
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // Write beside and rename, as editors and config management do: a reload never sees
        // half a file.
        let tmp = path.with_extension("tmp-write");
        std::fs::write(&tmp, text).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }
}

fn principal(allow: &str, extra: &str) -> String {
    format!(
        "[daemon]\nserver_user = \"root\"\n[[principal]]\nname = \"local\"\nusers = [\"@daemon\", 0]\nallow = [{allow}]\n{extra}\n"
    )
}

async fn reload(d: &TestDaemon) -> (u16, Value) {
    let (status, body) = d
        .client()
        .await
        .post("/v1/reload", Bytes::new())
        .await
        .unwrap();
    (status.as_u16(), serde_json::from_str(&body).unwrap())
}

async fn health(d: &TestDaemon) -> Value {
    let (_, body) = d.client().await.get("/v1/health").await.unwrap();
    serde_json::from_str(&body).unwrap()
}

const ECHO_OR_CODE: &str =
    "try { await tools.test.echo({x: 1}); return 'called' } catch (e) { return e.code }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_reload_applies_and_a_bad_one_keeps_the_last_good_policy() {
    let policy = PolicyDir::new(&principal("\"test.echo\"", ""));
    let d = TestDaemon::start_with(DaemonOptions::default().policy_file(policy.main())).await;
    assert_eq!(d.exec(ECHO_OR_CODE).await.result, json!("called"));
    assert_eq!(health(&d).await["policy_generation"], json!(1));

    // A narrower grant, applied by reload.
    policy.write("policy.toml", &principal("\"test.add\"", ""));
    let (status, report) = reload(&d).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["ok"], json!(true));
    assert_eq!(report["generation"], json!(2));
    assert_eq!(d.exec(ECHO_OR_CODE).await.result, json!("denied"));

    // Two problems in two files: both reported with their places; nothing changes.
    policy.write(
        "policy.toml",
        &(principal("\"test.echo\"", "") + "\n[limits]\nmemroy = \"1MiB\"\n"),
    );
    policy.write("policy.d/50-broken.toml", "[[server]\nname = \"x\"\n");
    let (status, report) = reload(&d).await;
    assert_eq!(status, 422, "{report}");
    assert_eq!(report["ok"], json!(false));
    assert_eq!(report["generation"], json!(2), "the last good policy stays");
    let problems: Vec<String> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].contains("policy.toml:10:1: unknown key `memroy` in [limits]"),
        "{problems:#?}"
    );
    assert!(
        problems[1].contains("policy.d/50-broken.toml:1:10: invalid TOML"),
        "{problems:#?}"
    );
    assert_eq!(
        d.exec(ECHO_OR_CODE).await.result,
        json!("denied"),
        "still generation 2's grant"
    );
    let h = health(&d).await;
    assert_eq!(h["policy_generation"], json!(2));
    assert_eq!(h["last_reload"]["ok"], json!(false), "{h}");
    assert_eq!(h["last_reload"]["problems"].as_array().unwrap().len(), 2);

    // A file others can write is refused the same way.
    std::fs::remove_file(policy.dir.path().join("policy.d/50-broken.toml")).unwrap();
    policy.write("policy.toml", &principal("\"test.echo\"", ""));
    std::fs::set_permissions(policy.main(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let (status, report) = reload(&d).await;
    assert_eq!(status, 422, "{report}");
    assert!(
        report["problems"][0]
            .as_str()
            .unwrap()
            .contains("refusing a policy that group or others can write (mode 0666)"),
        "{report}"
    );

    // Fixed: the reload applies, drop-ins included.
    std::fs::set_permissions(policy.main(), std::fs::Permissions::from_mode(0o644)).unwrap();
    policy.write(
        "policy.d/10-more.toml",
        "[[principal]]\nname = \"others\"\nusers = [\"*\"]\nallow = []\n",
    );
    let (status, report) = reload(&d).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["generation"], json!(3));
    assert_eq!(report["files"].as_array().unwrap().len(), 2);
    assert!(
        report["warnings"][0]
            .as_str()
            .unwrap()
            .contains("admits every local user"),
        "{report}"
    );
    assert_eq!(d.exec(ECHO_OR_CODE).await.result, json!("called"));
    let h = health(&d).await;
    assert_eq!(h["last_reload"]["ok"], json!(true));
    assert_eq!(h["policy_files"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_execution_finishes_under_the_policy_it_started_with() {
    let policy = PolicyDir::new(&principal("\"test.*\"", ""));
    let d = TestDaemon::start_with(DaemonOptions::default().policy_file(policy.main())).await;
    let socket = d.socket_path().to_owned();
    let running = tokio::spawn(async move {
        let mut client = airlock_supervisor::client::Client::connect(&socket)
            .await
            .unwrap();
        client
            .execute(&airlock_supervisor::agent_api::ExecutionRequest {
                code: format!("await tools.test.sleep({{ms: 1500}}); {ECHO_OR_CODE}"),
                language: Default::default(),
                timeout_ms: None,
                session: None,
                replay: None,
                ..Default::default()
            })
            .await
            .unwrap()
    });
    // Wait until it is inside its first tool call, then take the grant away.
    for _ in 0..200 {
        if d.tools.calls.load(std::sync::atomic::Ordering::Relaxed) >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    policy.write("policy.toml", &principal("", ""));
    assert_eq!(reload(&d).await.0, 200);
    assert_eq!(
        d.exec(ECHO_OR_CODE).await.result,
        json!("denied"),
        "new executions get the new policy"
    );
    let r = running.await.unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        r.result,
        json!("called"),
        "the running one keeps the grant it started with"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_policy_file_reload_says_why_it_cannot() {
    let d = TestDaemon::start().await;
    let (status, report) = reload(&d).await;
    assert_eq!(status, 422);
    assert!(
        report["problems"][0]
            .as_str()
            .unwrap()
            .contains("has no policy file to read again; start airlockd with --config FILE"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executions_per_minute_answer_429_with_retry_after() {
    let policy = PolicyDir::new(&principal("\"test.*\"", "executions_per_minute = 2"));
    let d = TestDaemon::start_with(DaemonOptions::default().policy_file(policy.main())).await;
    assert_eq!(d.exec("1").await.status, Status::Ok);
    assert_eq!(d.exec("2").await.status, Status::Ok);
    let mut c = d.client().await;
    let req = hyper::Request::post("/v1/executions")
        .header("host", "airlock")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(Bytes::from(r#"{"code":"3"}"#)))
        .unwrap();
    let resp = c.send(req).await.unwrap();
    assert_eq!(resp.status(), 429);
    let retry_after: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["error"]["code"], json!("rate_limited"));
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("principal `local` may start 2 executions per minute"),
        "{error}"
    );
    assert!(
        error["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("executions_per_minute")
    );
    let (_, metrics) = d.client().await.get("/metrics").await.unwrap();
    assert!(
        metrics.contains("airlock_executions_rate_limited_total 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_per_minute_and_principal_limits_apply_to_the_principal() {
    let policy = PolicyDir::new(
        &(principal(
            "\"test.*\"",
            "tool_calls_per_minute = 3\n[principal.limits]\nmax_output = \"2KiB\"",
        ) + "\n[limits]\nmax_output = \"1MiB\"\n"),
    );
    let d = TestDaemon::start_with(DaemonOptions::default().policy_file(policy.main())).await;
    let r = d
        .exec(
            "const out = []; for (let i = 0; i < 5; i++) { try { await tools.test.echo({i}); out.push('ok') } catch (e) { out.push(e.code + ': ' + e.message) } } out",
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let out = r.result.as_array().unwrap();
    assert_eq!(out[..3], [json!("ok"), json!("ok"), json!("ok")]);
    assert!(
        out[3].as_str().unwrap().starts_with(
            "rate_limited: test.echo: principal `local` may make 3 tool calls per minute"
        ),
        "{out:?}"
    );
    assert_eq!(d.tools.calls.load(std::sync::atomic::Ordering::Relaxed), 3);

    // The principal's 2 KiB output limit, not [limits]' 1 MiB.
    let r = d
        .exec("for (let i = 0; i < 40; i++) console.log('x'.repeat(100))")
        .await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    assert_eq!(r.error.unwrap().kind.as_str(), "output_limit");
}

#[test]
fn airlockd_reloads_on_sighup() {
    let policy = PolicyDir::new(&principal("\"test.*\"", ""));
    let socket = policy.dir.path().join("airlock.sock");
    let mut daemon = binaries::airlockd_command(&socket)
        .arg("--config")
        .arg(policy.main())
        .spawn()
        .unwrap();
    let generation = |socket: &Path| -> Option<u64> {
        let out = std::process::Command::new(binaries::airlock_cli())
            .arg("--socket")
            .arg(socket)
            .arg("health")
            .output()
            .ok()?;
        let health: Value = serde_json::from_slice(&out.stdout).ok()?;
        health["policy_generation"].as_u64()
    };
    // The signal goes as soon as the socket exists: the policy has been read by then, but the
    // daemon is still building what it serves. A SIGHUP in that window once ended the daemon
    // (SIGHUP's default action) because the handler was installed only later, by a task.
    assert!(
        airlock_tests::processes::wait_until_every(
            20,
            std::time::Duration::from_micros(200),
            || socket.exists()
        ),
        "airlockd did not bind its socket"
    );
    policy.write("policy.toml", &principal("\"time.*\"", ""));
    // SAFETY: kill(2) on a child we spawned and have not reaped.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGHUP) };
    assert!(
        airlock_tests::processes::wait_until(20, || generation(&socket) == Some(2)),
        "SIGHUP did not reload the policy"
    );
    // `airlock reload` says the same over the socket, and exits 1 with the problems on a bad
    // policy.
    policy.write("policy.toml", "[[principal]]\nname = 1\n");
    let out = std::process::Command::new(binaries::airlock_cli())
        .arg("--socket")
        .arg(&socket)
        .arg("reload")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("reload failed; the daemon keeps the policy it has (generation 2)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("policy.toml:2:8: principal[0].name: expected a string"),
        "{stderr}"
    );
    assert_eq!(generation(&socket), Some(2));
    assert!(daemon.try_wait().unwrap().is_none(), "the daemon survives");
    let _ = daemon.kill();
    let _ = daemon.wait();
}

#[test]
fn airlock_policy_check_and_explain() {
    let policy = PolicyDir::new(
        "[[principal]]\nname = \"agents\"\nusers = [0]\nallow = [\"github.*\"]\ndeny = [\"github.delete_*\"]\n",
    );
    let cli = binaries::run_cli;
    let main = policy.main();
    let main = main.to_str().unwrap();
    let (code, stdout, stderr) = cli(&["policy", "check", main]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("principal `agents`"), "{stdout}");

    let (code, stdout, _) = cli(&[
        "policy",
        "explain",
        "--config",
        main,
        "--uid",
        "0",
        "github.delete_repo",
    ]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("uid 0 is root"), "{stdout}");
    assert!(
        stdout.contains("github.delete_repo: DENIED by deny pattern \"github.delete_*\" ("),
        "{stdout}"
    );
    assert!(stdout.contains("policy.toml:5:9)"), "{stdout}");
    let (code, stdout, _) = cli(&[
        "policy",
        "explain",
        "--config",
        main,
        "--uid",
        "0",
        "github.get_issue",
    ]);
    assert_eq!(code, Some(0), "{stdout}");

    policy.write(
        "policy.d/x.toml",
        "[[principal]]\nname = \"agents\"\nusers = [1]\n[[openapi]]\nname = \"api\"\nspec = \"/nonexistent/openapi.json\"\nbase_url = \"https://api.example.com\"\n",
    );
    let (code, _, stderr) = cli(&["policy", "check", main]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "x.toml:2:8: principal[0].name: duplicate principal name \"agents\" (first defined at "
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 problem(s); airlockd would refuse this policy"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_document_on_reload_is_named_and_the_sources_stay() {
    let policy = PolicyDir::new(&principal("\"*\"", ""));
    let spec = policy.dir.path().join("api.json");
    std::fs::write(
        &spec,
        r#"{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {}}"#,
    )
    .unwrap();
    let with_api = |spec: &Path| {
        principal("\"*\"", "")
            + &format!(
                "\n[[openapi]]\nname = \"api\"\nspec = \"{}\"\nbase_url = \"http://127.0.0.1:9\"\n",
                spec.display()
            )
    };
    policy.write("policy.toml", &with_api(&spec));
    let d = TestDaemon::start_with(DaemonOptions::default().policy_file(policy.main())).await;
    assert_eq!(d.exec(ECHO_OR_CODE).await.result, json!("called"));

    // The document breaks: the reload names the file and the place, and nothing changes.
    std::fs::write(&spec, "{\"openapi\": \"3.1.0\",\n  \"paths\": [oops\n").unwrap();
    let (status, report) = reload(&d).await;
    assert_eq!(status, 422, "{report}");
    let problem = report["problems"][0].as_str().unwrap();
    assert!(problem.contains("tool source `api`"), "{problem}");
    assert!(problem.contains("api.json"), "{problem}");
    assert!(
        problem.contains(":2:"),
        "the line of the mistake: {problem}"
    );
    assert_eq!(report["generation"], json!(1));
    assert_eq!(d.exec(ECHO_OR_CODE).await.result, json!("called"));
}

/// A caller the policy admits, but who is neither root nor the daemon's user, may run programs
/// and may not reload: `airlock reload` as uid 65534 gets the daemon's 403 and its hint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_is_refused_to_an_admitted_user_who_is_not_root_or_the_daemon() {
    if !airlock_tests::processes::runs_as_root(
        "reload_is_refused_to_an_admitted_user_who_is_not_root_or_the_daemon",
        "to connect as uid 65534",
    ) {
        return;
    }
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.principals.push(airlock_policy::Principal::new(
            "nobody",
            vec![65534],
            &["test.*"],
        ));
    }))
    .await;
    // Opened up so that the daemon, not the file system, answers.
    let dir = d.socket.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let as_nobody = |args: &[&str]| binaries::cli_as_nobody(&d.socket, args);
    // Admitted: it may run a program.
    let (ok, text) = as_nobody(&["exec", "-e", "40 + 2"]);
    assert!(ok && text.contains("42"), "{text}");
    // Not permitted to reload.
    let (ok, text) = as_nobody(&["reload"]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("uid 65534 may not reload") && text.contains("SIGHUP"),
        "{text}"
    );
    // Nor to see or start the tool servers (their command lines and stderr are the
    // operator's).
    for args in [&["servers"][..], &["server", "test", "any"][..]] {
        let (ok, text) = as_nobody(args);
        assert!(!ok, "{text}");
        assert!(
            text.contains("uid 65534 may not see or start the policy's tool servers"),
            "{text}"
        );
    }
    let (_, body) = d.client().await.get("/v1/health").await.unwrap();
    let health: Value = serde_json::from_str(&body).unwrap();
    assert!(health["last_reload"].is_null(), "{health}");
}

/// `[daemon] state_directory` places everything the daemon keeps that its own tables do not
/// place elsewhere: with `[audit]` and `[journal]` directories set, learned types and tool
/// servers' scratch directories went to `~/.local/state/airlock` before, shared by every
/// daemon of the user. `airlock policy explain` asks the running daemon and shows its paths.
#[test]
fn one_state_directory_and_explain_asks_the_running_daemon() {
    use airlock_tests::real_daemon::{RealDaemon, fault_server_entry};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let home = d.join("home");
    std::fs::create_dir(&home).unwrap();
    let policy = format!(
        "[daemon]\nstate_directory = \"{kept}\"\nserver_user = \"root\"\n\
         [audit]\ndirectory = \"{d}/audit\"\n[journal]\ndirectory = \"{d}/journal\"\n\
         [[principal]]\nname = \"local\"\nusers = [\"@daemon\", 0]\nallow = [\"*\"]\n\
         [[principal]]\nname = \"others\"\nusers = [65534]\nallow = [\"*\"]\n{server}",
        kept = d.join("kept").display(),
        d = d.display(),
        server = fault_server_entry("fault", 10_000, &[]),
    );
    let daemon = RealDaemon::start(d, &policy, |cmd| {
        // Nothing in the environment says where: the policy does.
        cmd.env_remove("STATE_DIRECTORY")
            .env_remove("XDG_STATE_HOME")
            .env("HOME", &home);
    });
    let socket = daemon.socket.to_str().unwrap().to_owned();
    let cli = |args: &[&str]| binaries::run_cli(&[&["--socket", &socket][..], args].concat());
    let (code, stdout, stderr) = cli(&["exec", "-e", "await tools.fault.echo({ text: 'hi' })"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}\n{}", daemon.log());
    let kept = d.join("kept");
    assert!(kept.join("learned.sqlite").is_file(), "{}", daemon.log());
    assert!(kept.join("servers/fault").is_dir(), "{}", daemon.log());
    assert!(d.join("audit/audit.sqlite").is_file());
    assert!(
        !home.join(".local").exists(),
        "something went to the user's state directory"
    );

    let (code, stdout, stderr) = cli(&["policy", "explain", "--uid", "0", "fault.echo"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    for line in [
        format!("policy in force: {}", d.join("policy.toml").display()),
        format!("state directory: {}", kept.display()),
        format!("  audit log: {}/audit", d.display()),
        format!("  journal: {}/journal", d.display()),
        format!("  learned types: {}", kept.join("learned.sqlite").display()),
        format!(
            "  tool servers' scratch directories: {}",
            kept.join("servers").display()
        ),
    ] {
        assert!(stdout.contains(&line), "{line} missing from:\n{stdout}");
    }
    assert!(stdout.contains("fault.echo"), "{stdout}");
    assert!(stdout.contains("server `fault`"), "{stdout}");
    // Another principal may use the daemon but not read every principal's decisions.
    if airlock_tests::processes::runs_as_root(
        "one_state_directory_and_explain_asks_the_running_daemon",
        "to ask as uid 65534",
    ) {
        // Reachable by every user (the daemon tells them apart by their credentials).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&daemon.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        let (ok, text) = binaries::cli_as_nobody(
            &daemon.socket,
            &["policy", "explain", "--uid", "0", "fault.echo"],
        );
        assert!(!ok, "{text}");
        assert!(
            text.contains("may not read the policy's decisions"),
            "{text}"
        );
    }
}
