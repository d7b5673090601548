//! The audit log from the outside: the real `airlock audit` binary reading a database the test
//! filled, and the real `airlockd` creating (or refusing) its audit directory.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{CallOutcome, Status, Verdict};
use airlock_supervisor::audit_log::{
    ApprovalRecord, AuditLog, CodeHash, ExecutionRecord, ToolCallRecord,
};
use airlock_tests::binaries;
use airlock_tests::processes::wait_until;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, SystemTime};

fn hide_token(text: &str) -> Cow<'_, str> {
    if text.contains("ghp_") {
        Cow::Owned("[REDACTED:github-token]".into())
    } else {
        Cow::Borrowed(text)
    }
}

fn record(id: &str, principal: &str, started: SystemTime, tools: &[&str]) -> ExecutionRecord {
    ExecutionRecord {
        execution_id: id.into(),
        principal: principal.into(),
        peer_uid: 1000,
        peer_pid: Some(7),
        code_sha256: CodeHash::of(id),
        status: Status::Ok,
        error_kind: None,
        queued_ms: 0.1,
        run_ms: 2.0,
        total_ms: 2.5,
        redactions: Vec::new(),
        started,
        finished: started + Duration::from_millis(3),
        tool_calls: tools
            .iter()
            .enumerate()
            .map(|(i, tool)| {
                ToolCallRecord::new(
                    i as u32 + 1,
                    tool,
                    &json!({"repo": "octo/hello", "token": "ghp_0123456789abcdef", "body": "x".repeat(500)}),
                    CallOutcome::Ok,
                    None,
                    1.25,
                    started,
                    &hide_token,
                )
            })
            .collect(),
    }
}

/// Fills `dir` with three executions: two days ago, one hour ago, now.
fn fill(dir: &Path) {
    let now = SystemTime::now();
    let log = AuditLog::open_in(dir, 256 << 20, 4).unwrap();
    let day = Duration::from_secs(86_400);
    log.record(record("ex_old", "local", now - 2 * day, &["time.now"]))
        .unwrap();
    log.record(record(
        "ex_hour",
        "ci",
        now - Duration::from_secs(3600),
        &["github.get_issue", "slack.post"],
    ))
    .unwrap();
    log.record(record("ex_now", "ci", now, &["github.list"]))
        .unwrap();
    // Dropping the last handle writes everything queued.
    drop(log);
}

fn audit(dir: &Path, args: &[&str]) -> Output {
    Command::new(binaries::airlock_cli())
        .arg("audit")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

fn json_lines(out: &Output) -> Vec<Value> {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The string `key` of every row.
fn column(rows: &[Value], key: &str) -> Vec<String> {
    rows.iter()
        .map(|r| r[key].as_str().unwrap().to_owned())
        .collect()
}

fn ids(rows: &[Value]) -> Vec<String> {
    column(rows, "execution_id")
}

/// The lines of the table `airlock audit` prints with `args` (printed too, for a failure).
fn table(dir: &Path, args: &[&str]) -> Vec<String> {
    let out = audit(dir, args);
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8(out.stdout).unwrap();
    println!("{table}");
    table.lines().map(str::to_owned).collect()
}

#[test]
fn the_cli_reads_and_filters_the_log() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());

    let rows = json_lines(&audit(dir.path(), &["--json"]));
    assert_eq!(ids(&rows), ["ex_now", "ex_hour", "ex_old"]);
    let hour = &rows[1];
    assert_eq!(hour["principal"], "ci");
    assert_eq!(hour["code_sha256"], CodeHash::of("ex_hour").to_hex());
    assert_eq!(hour["tool_call_count"], 2);
    let arguments = hour["tool_calls"][0]["arguments"].as_str().unwrap();
    // Short values pass through the redaction; long ones are never stored.
    assert_eq!(
        arguments,
        "{body: string(500), repo: string(10) \"octo/hello\", token: string(20) \"[REDACTED:github-token]\"}"
    );

    let since = |w: &str| ids(&json_lines(&audit(dir.path(), &["--json", "--since", w]))).len();
    assert_eq!(since("90m"), 2);
    assert_eq!(since("1w"), 3);
    assert_eq!(since("2099-01-01T00:00:00Z"), 0);
    let rows = json_lines(&audit(dir.path(), &["--json", "--principal", "local"]));
    assert_eq!(ids(&rows), ["ex_old"]);
    let rows = json_lines(&audit(dir.path(), &["--json", "--tool", "github.*"]));
    assert_eq!(ids(&rows), ["ex_now", "ex_hour"]);
    assert_eq!(rows[1]["tool_calls"].as_array().unwrap().len(), 1);
    let rows = json_lines(&audit(dir.path(), &["--json", "--execution", "ex_hour"]));
    assert_eq!(ids(&rows), ["ex_hour"]);
    let rows = json_lines(&audit(dir.path(), &["--json", "--limit", "1"]));
    assert_eq!(ids(&rows), ["ex_now"]);

    // The table: a header, one line per execution, its calls indented below.
    let lines = table(dir.path(), &["--principal", "ci"]);
    assert!(lines[0].starts_with("STARTED (UTC)"), "{lines:#?}");
    assert!(
        lines[1].contains("ex_now") && lines[1].contains(" ci "),
        "{lines:#?}"
    );
    assert!(
        lines[2]
            .trim_start()
            .starts_with("#1 github.list  ok  1.2ms"),
        "{lines:#?}"
    );
    assert!(lines[3].contains("ex_hour"), "{lines:#?}");
    assert_eq!(lines.len(), 6, "{lines:#?}");
}

/// `--approvals`: the decisions, newest first, filtered like executions, as JSON lines and as a
/// table; without it the output is the executions as before.
#[test]
fn the_cli_shows_approval_decisions() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let now = SystemTime::now();
    let log = AuditLog::open_in(dir.path(), 256 << 20, 4).unwrap();
    let mut approved = ApprovalRecord::new(
        "ap_1",
        "ex_hour",
        "ci",
        1,
        "github.get_issue",
        &json!({"repo": "octo/hello", "token": "ghp_0123456789abcdef"}),
        Verdict::Approved,
        Some("alice"),
        Some(1000),
        Some("fine"),
        &hide_token,
    );
    approved.at = now - Duration::from_secs(1800);
    let mut expired = ApprovalRecord::new(
        "ap_2",
        "ex_now",
        "ci",
        1,
        "github.list",
        &json!({}),
        Verdict::Expired,
        None,
        None,
        None,
        &hide_token,
    );
    expired.at = now;
    log.record_approval(approved).unwrap();
    log.record_approval(expired).unwrap();
    drop(log);

    let rows = json_lines(&audit(dir.path(), &["--approvals", "--json"]));
    assert_eq!(column(&rows, "approval_id"), ["ap_2", "ap_1"]);
    assert_eq!(rows[0]["decision"], "expired");
    assert_eq!(rows[0]["decided_by"], Value::Null);
    assert_eq!(rows[1]["decided_by"], "alice");
    assert_eq!(rows[1]["decider_uid"], 1000);
    assert_eq!(rows[1]["reason"], "fine");
    assert_eq!(rows[1]["call_index"], 1);
    assert_eq!(
        rows[1]["arguments"],
        "{repo: string(10) \"octo/hello\", token: string(20) \"[REDACTED:github-token]\"}"
    );
    let selected = |args: &[&str]| {
        let mut all = vec!["--approvals", "--json"];
        all.extend_from_slice(args);
        column(&json_lines(&audit(dir.path(), &all)), "approval_id")
    };
    assert_eq!(selected(&["--since", "10m"]), ["ap_2"]);
    assert_eq!(selected(&["--execution", "ex_hour"]), ["ap_1"]);
    assert_eq!(selected(&["--tool", "github.get_*"]), ["ap_1"]);
    assert_eq!(selected(&["--limit", "1"]), ["ap_2"]);
    assert!(selected(&["--principal", "local"]).is_empty());

    let lines = table(dir.path(), &["--approvals"]);
    assert!(lines[0].starts_with("DECIDED (UTC)"), "{lines:#?}");
    assert!(
        lines[1].contains("expired") && lines[1].ends_with("#1 github.list"),
        "{lines:#?}"
    );
    assert!(
        lines[3].contains("approved  alice (uid 1000)"),
        "{lines:#?}"
    );
    assert_eq!(lines[5], "    reason: fine", "{lines:#?}");
    assert_eq!(lines.len(), 6, "{lines:#?}");

    // Without --approvals: the executions, as before.
    let rows = json_lines(&audit(dir.path(), &["--json"]));
    assert_eq!(ids(&rows), ["ex_now", "ex_hour", "ex_old"]);
}

#[test]
fn the_cli_explains_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = audit(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no audit log in"), "{stderr}");

    fill(dir.path());
    let out = audit(dir.path(), &["--since", "yesterday"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot read the time \"yesterday\""),
        "{stderr}"
    );

    let out = audit(dir.path(), &["--tool", "github.[a]"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("only `*` is a wildcard"), "{stderr}");
}

/// `--config` finds the directory in the daemon's policy.
#[test]
fn the_cli_finds_the_directory_in_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let audit_dir = dir.path().join("audit");
    fill(&audit_dir);
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!("[audit]\ndirectory = \"{}\"\n", audit_dir.display()),
    )
    .unwrap();
    let out = Command::new(binaries::airlock_cli())
        .args(["audit", "--json", "--config"])
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(json_lines(&out).len(), 3);
}

/// The real daemon creates its audit directory (0700) and database (0600) at start, and
/// refuses to start on a directory others may write, naming it.
#[test]
fn the_daemon_opens_its_log_and_refuses_a_shared_directory() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("a.sock");
    let mut daemon = binaries::airlockd_command(&socket).spawn().unwrap();
    let audit_dir = binaries::audit_directory(&socket);
    // The socket is bound before the daemon opens its audit log: wait for the log itself.
    let ready = wait_until(20, || {
        socket.exists() && audit_dir.join("audit.sqlite").exists()
    });
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(ready, "no socket and audit log appeared");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&audit_dir), 0o700);
    assert_eq!(mode(&audit_dir.join("audit.sqlite")), 0o600);

    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[audit]\ndirectory = \"{}\"\n[[principal]]\nname = \"local\"\nusers = [\"@daemon\"]\nallow = [\"*\"]\n",
            shared.display()
        ),
    )
    .unwrap();
    let out = binaries::airlockd_command(&dir.path().join("b.sock"))
        .arg("--config")
        .arg(&policy)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&shared.display().to_string()), "{stderr}");
    assert!(stderr.contains("writable by group or others"), "{stderr}");
    assert!(stderr.contains("enabled = false"), "{stderr}");
}

/// A client that hangs up mid-execution (streaming, or waiting for the whole response): the
/// program is stopped at once (not at its deadline), and the execution, with the calls it
/// made, is still in the audit log, as `cancelled`.
async fn hanging_up_is_audited(streaming: bool) {
    use airlock_tests::TestDaemon;
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    let d = TestDaemon::start().await;
    let socket = d.socket_path().to_owned();
    let tools = d.tools.clone();
    let hung_up = tokio::task::spawn_blocking(move || {
        let body = serde_json::json!({
            "code": "await tools.test.echo({ a: 1 }); await tools.test.sleep({ ms: 60000 }); 1",
            "timeout_ms": 90000,
        })
        .to_string();
        let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let accept = if streaming {
            "Accept: application/x-ndjson\r\n"
        } else {
            ""
        };
        write!(
            stream,
            "POST /v1/executions HTTP/1.1\r\nHost: airlock\r\n{accept}\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        if streaming {
            // Read events until the second call (the long sleep) has started.
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            loop {
                line.clear();
                assert!(reader.read_line(&mut line).unwrap() > 0, "stream ended");
                if line.contains("tool_call_started") && line.contains("test.sleep") {
                    break;
                }
            }
        } else {
            // Nothing to read before the end: wait until the sleep has been called.
            assert!(airlock_tests::processes::wait_until(10, || {
                tools.calls.load(Ordering::Relaxed) >= 2
            }));
            drop(stream);
        }
        Instant::now()
    })
    .await
    .unwrap();

    let rows = d.audited_executions().await;
    let stopped_after = hung_up.elapsed();
    assert_eq!(rows.len(), 1, "the execution never reached the audit log");
    let row = &rows[0];
    assert_eq!(row.status, "cancelled", "{row:?}");
    assert_eq!(row.error_kind.as_deref(), Some("cancelled"));
    let calls: Vec<(&str, &str)> = row
        .tool_calls
        .iter()
        .map(|c| (c.tool.as_str(), c.outcome.as_str()))
        .collect();
    assert_eq!(calls, [("test.echo", "ok"), ("test.sleep", "pending")]);
    // Stopped when the client left, not 60 s later when the sleep would have ended.
    assert!(
        row.total_ms < 20_000.0 && stopped_after < Duration::from_secs(20),
        "{row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_whose_streaming_client_hangs_up_is_stopped_and_audited() {
    hanging_up_is_audited(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_whose_plain_client_hangs_up_is_stopped_and_audited() {
    hanging_up_is_audited(false).await;
}
