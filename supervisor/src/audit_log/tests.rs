// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::agent_api::{CallOutcome, ExecutionErrorKind, Status, ToolErrorCode, Verdict};
use crate::audit_log::argument_summary::tests::no_redaction;
use crate::audit_log::query::{
    AuditQuery, format_approval_json_lines, format_approval_table, format_json_lines, format_table,
    read, read_approvals,
};
use crate::secrets::scanner::SecretScanner;
use rusqlite::Connection;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::time::{SystemTime, UNIX_EPOCH};

const FLUSH: Duration = Duration::from_secs(10);

fn at(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds)
}

/// An execution started at `started` (seconds since the epoch) with calls to `tools`.
fn execution(id: &str, principal: &str, started: u64, tools: &[&str]) -> ExecutionRecord {
    ExecutionRecord {
        execution_id: id.to_owned(),
        principal: principal.to_owned(),
        peer_uid: 1000,
        peer_pid: Some(4242),
        code_sha256: CodeHash::of(id),
        status: Status::Ok,
        error_kind: None,
        queued_ms: 0.5,
        run_ms: 3.25,
        total_ms: 4.0,
        redactions: Vec::new(),
        started: at(started),
        finished: at(started) + Duration::from_millis(4),
        tool_calls: tools
            .iter()
            .enumerate()
            .map(|(i, tool)| {
                ToolCallRecord::new(
                    i as u32 + 1,
                    tool,
                    &json!({"owner": "octo", "body": "x".repeat(100)}),
                    CallOutcome::Ok,
                    None,
                    1.5,
                    at(started),
                    &no_redaction,
                )
            })
            .collect(),
    }
}

/// A token of the shape the scanner's `github-token` rule finds.
// Split so the scanner's false-positive survey of the project's sources does not count it.
const GITHUB_TOKEN: &str = concat!("ghp_", "hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES");

/// An approval of call `call` of `execution_id`, decided at `decided` (seconds since the epoch)
/// by `alice` (uid 1000), or with no decider when `decision` is `expired`.
fn approval(
    id: &str,
    execution_id: &str,
    principal: &str,
    call: u32,
    tool: &str,
    decision: &str,
    decided: u64,
) -> ApprovalRecord {
    let expired = decision == "expired";
    let mut record = ApprovalRecord::new(
        id,
        execution_id,
        principal,
        call,
        tool,
        &json!({"repo": "octo/hello", "body": "x".repeat(100)}),
        Verdict::parse(decision).unwrap(),
        (!expired).then_some("alice"),
        (!expired).then_some(1000),
        None,
        &no_redaction,
    );
    record.at = at(decided);
    record
}

/// Every record, however many.
fn unlimited() -> AuditQuery {
    AuditQuery {
        limit: usize::MAX,
        ..AuditQuery::default()
    }
}

fn all_approvals(dir: &Path) -> Vec<ApprovalRow> {
    read_approvals(dir, &unlimited()).unwrap()
}

fn open(dir: &Path) -> AuditLog {
    AuditLog::open_in(dir, 256 << 20, 4).unwrap()
}

fn all(dir: &Path) -> Vec<ExecutionRow> {
    read(dir, &unlimited()).unwrap()
}

#[test]
fn schema_version_wal_indexes_and_modes() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("state/airlock");
    let log = open(&dir);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(FILE_NAME)), 0o600);
    log.record(execution("ex_1", "local", 1000, &["a.b"]))
        .unwrap();
    assert!(log.flush(FLUSH));
    // SQLite gives the WAL the database's mode.
    assert_eq!(mode(&dir.join("audit.sqlite-wal")), 0o600);

    let conn = Connection::open(dir.join(FILE_NAME)).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(journal, "wal");
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'index') ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for expected in [
        "executions",
        "executions_by_id",
        "executions_by_principal",
        "executions_by_time",
        "tool_calls",
        "tool_calls_by_execution",
        "tool_calls_by_tool",
        "redactions",
        "redactions_by_execution",
        "approvals",
        "approvals_by_execution",
        "approvals_by_time",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    let plan = |sql: &str| -> String {
        conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
            .join("; ")
    };
    // The tool filter uses its index.
    let by_tool = plan("SELECT execution_id FROM tool_calls WHERE tool GLOB 'a.*'");
    assert!(by_tool.contains("tool_calls_by_tool"), "{by_tool}");
    // So do an execution's approvals and the time filter.
    let by_execution = plan("SELECT * FROM approvals WHERE execution_id = 'ex_1'");
    assert!(
        by_execution.contains("approvals_by_execution"),
        "{by_execution}"
    );
    let by_time = plan("SELECT * FROM approvals WHERE at >= 5 ORDER BY at DESC");
    assert!(by_time.contains("approvals_by_time"), "{by_time}");
}

/// A log of an older schema: one execution (`ex_old`, with a call) written by today's writer,
/// then taken back by `downgrade` (SQL that drops what the newer versions added).
fn an_old_log(downgrade: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    log.record(execution("ex_old", "local", 1000, &["a.b"]))
        .unwrap();
    assert!(log.flush(FLUSH));
    drop(log);
    Connection::open(dir.path().join(FILE_NAME))
        .unwrap()
        .execute_batch(downgrade)
        .unwrap();
    dir
}

fn schema_version(path: &Path) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// A log written by the first schema (no `redactions` table) is still read, and the writer
/// upgrades it in place when it opens it.
#[test]
fn a_version_1_log_is_read_and_upgraded() {
    let dir = an_old_log(
        "DROP INDEX redactions_by_execution; DROP TABLE redactions; PRAGMA user_version = 1",
    );
    let rows = all(dir.path());
    assert_eq!(rows.len(), 1);
    assert!(rows[0].output_redactions.is_empty() && rows[0].tool_calls[0].redactions.is_empty());

    let log = open(dir.path());
    let mut new = execution("ex_new", "local", 2000, &["a.b"]);
    new.redactions = vec![RedactionRecord {
        call_index: None,
        place: "result",
        rule: "jwt".into(),
        pointer: Some(String::new()),
        secret: None,
    }];
    log.record(new).unwrap();
    assert!(log.flush(FLUSH));
    assert_eq!(schema_version(&dir.path().join(FILE_NAME)), SCHEMA_VERSION);
    let rows = all(dir.path());
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].output_redactions[0].rule, "jwt");
    assert_eq!(rows[0].redactions, 1);
}

#[test]
fn a_newer_schema_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let path = dir.path().join(FILE_NAME);
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    let error = AuditLog::open_in(dir.path(), 1 << 20, 1)
        .unwrap_err()
        .to_string();
    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(error.contains("schema version 99"), "{error}");
    let error = read(dir.path(), &AuditQuery::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("schema version 99"), "{error}");
}

#[test]
fn records_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let mut failed = execution("ex_2", "ci", 2000, &["github.get_issue", "slack.post"]);
    failed.status = Status::Error;
    failed.error_kind = Some(ExecutionErrorKind::Runtime);
    failed.redactions = vec![
        RedactionRecord {
            call_index: Some(2),
            place: "result",
            rule: "known-secret".into(),
            pointer: Some("/text".into()),
            secret: Some("slack-bot-token".into()),
        },
        RedactionRecord {
            call_index: None,
            place: "stderr",
            rule: "github-token".into(),
            pointer: None,
            secret: None,
        },
    ];
    failed.tool_calls[1].outcome = CallOutcome::Error;
    failed.tool_calls[1].error_code = Some(ToolErrorCode::Denied);
    log.record(execution("ex_1", "local", 1000, &[])).unwrap();
    log.record(failed.clone()).unwrap();
    assert!(log.flush(FLUSH));
    assert_eq!(log.status().written, 2);
    assert_eq!(log.status().state, AuditState::Ok);

    let rows = all(dir.path());
    assert_eq!(rows.len(), 2);
    let row = &rows[0];
    assert_eq!(row.execution_id, "ex_2");
    assert_eq!(row.started, "1970-01-01T00:33:20.000Z");
    assert_eq!(row.finished, "1970-01-01T00:33:20.004Z");
    assert_eq!(row.principal, "ci");
    assert_eq!((row.peer_uid, row.peer_pid), (1000, Some(4242)));
    assert_eq!(row.code_sha256, CodeHash::of("ex_2").to_hex());
    assert_eq!(row.status, "error");
    assert_eq!(row.error_kind.as_deref(), Some("runtime"));
    assert_eq!((row.queued_ms, row.run_ms, row.total_ms), (0.5, 3.25, 4.0));
    assert_eq!((row.tool_call_count, row.redactions), (2, 2));
    let calls: Vec<_> = row
        .tool_calls
        .iter()
        .map(|c| {
            (
                c.call_index,
                c.tool.as_str(),
                c.outcome.as_str(),
                c.error_code.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (1, "github.get_issue", "ok", None),
            (2, "slack.post", "error", Some("denied"))
        ]
    );
    assert_eq!(
        row.tool_calls[0].arguments,
        "{body: string(100), owner: string(4) \"octo\"}"
    );
    // Each redaction comes back under its call, or the output's, with rule and place.
    assert!(row.tool_calls[0].redactions.is_empty());
    assert_eq!(
        row.tool_calls[1].redactions,
        [RedactionRow {
            place: "result".into(),
            rule: "known-secret".into(),
            pointer: Some("/text".into()),
            secret: Some("slack-bot-token".into()),
        }]
    );
    assert_eq!(
        row.output_redactions,
        [RedactionRow {
            place: "stderr".into(),
            rule: "github-token".into(),
            pointer: None,
            secret: None,
        }]
    );
    let table = format_table(&rows);
    assert!(
        table.contains("redacted: known-secret in result at /text (secret `slack-bot-token`)")
            && table.contains("redacted from the output: github-token in stderr"),
        "{table}"
    );
    assert_eq!(rows[1].execution_id, "ex_1");
    assert!(rows[1].tool_calls.is_empty());

    // Both output forms carry the record.
    let json: serde_json::Value =
        serde_json::from_str(format_json_lines(&rows).lines().next().unwrap()).unwrap();
    assert_eq!(json["execution_id"], "ex_2");
    assert_eq!(json["tool_calls"][1]["error_code"], "denied");
    let table = format_table(&rows);
    assert!(table.starts_with("STARTED (UTC)"), "{table}");
    assert!(table.contains("error (runtime)"), "{table}");
    assert!(
        table.contains("#2 slack.post  error (denied)  1.5ms"),
        "{table}"
    );
}

#[test]
fn filters() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    log.record(execution("ex_1", "local", 1000, &["github.get_issue"]))
        .unwrap();
    log.record(execution(
        "ex_2",
        "ci",
        2000,
        &["slack.post", "github.list"],
    ))
    .unwrap();
    log.record(execution("ex_3", "ci", 3000, &["time.now"]))
        .unwrap();
    assert!(log.flush(FLUSH));
    let ids = |query: AuditQuery| -> Vec<String> {
        read(dir.path(), &query)
            .unwrap()
            .into_iter()
            .map(|r| r.execution_id)
            .collect()
    };
    assert_eq!(ids(AuditQuery::default()), ["ex_3", "ex_2", "ex_1"]);
    assert_eq!(
        ids(AuditQuery {
            since: Some(at(2000)),
            ..AuditQuery::default()
        }),
        ["ex_3", "ex_2"]
    );
    assert_eq!(
        ids(AuditQuery {
            principal: Some("ci".into()),
            ..AuditQuery::default()
        }),
        ["ex_3", "ex_2"]
    );
    assert_eq!(
        ids(AuditQuery {
            tool: Some("github.*".into()),
            ..AuditQuery::default()
        }),
        ["ex_2", "ex_1"]
    );
    assert_eq!(
        ids(AuditQuery {
            execution: Some("ex_2".into()),
            ..AuditQuery::default()
        }),
        ["ex_2"]
    );
    assert_eq!(
        ids(AuditQuery {
            limit: 1,
            ..AuditQuery::default()
        }),
        ["ex_3"]
    );
    assert_eq!(
        ids(AuditQuery {
            principal: Some("ci".into()),
            tool: Some("*.post".into()),
            ..AuditQuery::default()
        }),
        ["ex_2"]
    );
    // With a tool filter only the matching calls are listed; the count stays the total.
    let rows = read(
        dir.path(),
        &AuditQuery {
            tool: Some("github.*".into()),
            ..AuditQuery::default()
        },
    )
    .unwrap();
    assert_eq!(rows[0].tool_calls.len(), 1);
    assert_eq!(rows[0].tool_calls[0].tool, "github.list");
    assert_eq!(rows[0].tool_call_count, 2);
    // GLOB's other wildcards are refused, not silently used.
    let error = read(
        dir.path(),
        &AuditQuery {
            tool: Some("github.?".into()),
            ..AuditQuery::default()
        },
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("only `*` is a wildcard"),
        "{error}"
    );
}

#[test]
fn reading_a_directory_without_a_log_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let error = read(dir.path(), &AuditQuery::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains(&dir.path().display().to_string()), "{error}");
    assert!(error.contains("--dir"), "{error}");
}

#[test]
fn rotation_keeps_the_newest_files_and_queries_read_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let max_size = 64 << 10;
    let log = AuditLog::open_in(dir.path(), max_size, 2).unwrap();
    // Write until the log has rotated more often than it keeps files.
    let n = record_until_rotated_twice(&log, dir.path(), 3000, |n| {
        log.record(execution(&format!("ex_{n}"), "local", n, &["a.b", "c.d"]))
            .unwrap();
    });
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.ends_with("-wal") && !n.ends_with("-shm"))
        .collect();
    names.sort();
    assert_eq!(names, ["audit.sqlite", "audit.sqlite.1", "audit.sqlite.2"]);
    // Rotated files were taken out of WAL mode first: no -wal can be mistaken for a newer
    // file's.
    assert!(!dir.path().join("audit.sqlite.1-wal").exists());
    for name in &names {
        let size = std::fs::metadata(dir.path().join(name)).unwrap().len();
        // One batch may take a file past the threshold before the check.
        assert!(size <= max_size * 3, "{name}: {size}");
        let mode = std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
    let rows = all(dir.path());
    let newest: Vec<_> = rows
        .iter()
        .map(|r| r.execution_id.clone())
        .take(2)
        .collect();
    assert_eq!(newest, [format!("ex_{n}"), format!("ex_{}", n - 1)]);
    // What is left is the newest, contiguous run of executions: the oldest files were dropped.
    let oldest_kept: u64 = rows.last().unwrap().execution_id[3..].parse().unwrap();
    assert!(oldest_kept > 1, "nothing was rotated away");
    assert_eq!(rows.len() as u64, n - oldest_kept + 1);
    assert_eq!(log.status().dropped, 0);
}

/// Records `record(n)` for n = 1, 2, … (flushing every 100) until the log in `dir` has rotated
/// twice and at least `at_least` were recorded; returns the last n, everything flushed.
fn record_until_rotated_twice(
    log: &AuditLog,
    dir: &Path,
    at_least: u64,
    record: impl Fn(u64),
) -> u64 {
    let mut n = 0u64;
    while !dir.join("audit.sqlite.2").exists() || n < at_least {
        n += 1;
        record(n);
        if n.is_multiple_of(100) {
            assert!(log.flush(FLUSH));
        }
        assert!(n < 100_000, "never rotated");
    }
    assert!(log.flush(FLUSH));
    n
}

/// A reader that holds the current file open keeps it from leaving WAL mode; the writer goes
/// on writing and rotates after the reader is gone.
#[test]
fn rotation_waits_for_readers() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open_in(dir.path(), 64 << 10, 2).unwrap();
    log.record(execution("ex_0", "local", 1, &[])).unwrap();
    assert!(log.flush(FLUSH));
    let reader = Connection::open_with_flags(
        dir.path().join(FILE_NAME),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let count = |c: &Connection| -> i64 {
        c.query_row("SELECT count(*) FROM executions", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&reader), 1);
    for n in 1..=1000 {
        log.record(execution(&format!("ex_{n}"), "local", n + 1, &["a.b"]))
            .unwrap();
    }
    assert!(log.flush(FLUSH));
    assert!(!dir.path().join("audit.sqlite.1").exists());
    assert_eq!(count(&reader), 1001);
    drop(reader);
    log.record(execution("ex_last", "local", 5000, &[]))
        .unwrap();
    assert!(log.flush(FLUSH));
    assert!(dir.path().join("audit.sqlite.1").exists());
    assert_eq!(all(dir.path()).len(), 1002);
}

#[test]
fn concurrent_readers_while_writing() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    log.record(execution("ex_0", "local", 1, &[])).unwrap();
    assert!(log.flush(FLUSH));
    let total = 3000u64;
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            for n in 1..=total {
                // A full queue is not an error here: wait for room like a patient caller.
                while log
                    .record(execution(&format!("ex_{n}"), "local", n + 1, &["a.b"]))
                    .is_err()
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            assert!(log.flush(FLUSH));
            done.store(true, Ordering::SeqCst);
        });
        let readers: Vec<_> = (0..3)
            .map(|_| {
                scope.spawn(|| {
                    let mut last = 0;
                    let mut reads = 0;
                    while !done.load(Ordering::SeqCst) || reads == 0 {
                        let rows = all(dir.path());
                        assert!(rows.len() >= last, "a reader saw records disappear");
                        // Each execution is read whole, with its call.
                        for row in &rows[..rows.len().min(5)] {
                            assert_eq!(row.tool_calls.len() as u32, row.tool_call_count);
                        }
                        last = rows.len();
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        writer.join().unwrap();
        for reader in readers {
            assert!(reader.join().unwrap() > 0);
        }
    });
    assert_eq!(all(dir.path()).len() as u64, total + 1);
    assert_eq!(log.status().dropped, 0);
}

/// Offers twenty records (`offer(log, n)`, n from 0) to a log whose queue holds 4 while its
/// writer is stuck behind another connection's lock, then releases the lock and offers one
/// more (`offer(log, 20)`). Checks what holds for every kind of record: no offer waited, the
/// records dropped were counted and each said so, the status named the file while degraded
/// and is clear after, and `read_back(dir)` finds every record written. Returns the log's
/// directory, the warnings and the status while degraded.
fn fill_a_blocked_queue(
    offer: impl Fn(&AuditLog, u32) -> Result<(), AuditWarning>,
    read_back: fn(&Path) -> usize,
) -> (tempfile::TempDir, Vec<String>, AuditStatus) {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open_with_capacity(dir.path(), 256 << 20, 4, 4).unwrap();
    let blocker = Connection::open(dir.path().join(FILE_NAME)).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    let mut warnings = Vec::new();
    for n in 0..20 {
        if let Err(w) = offer(&log, n) {
            warnings.push(w.0);
        }
    }
    // Twenty try_sends while the writer waits on the lock: none waited for it.
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let degraded = log.status();
    assert_eq!(degraded.state, AuditState::Degraded);
    // How many the writer took into its batch before it blocked depends on scheduling (a CI
    // run saw 5); what must hold is that the rest were dropped, each with a warning.
    assert!(degraded.dropped >= 1, "{degraded:?}");
    // Every dropped record said so (and records taken while degraded say so too).
    assert!(warnings.len() as u64 >= degraded.dropped, "{degraded:?}");
    let path = dir.path().join(FILE_NAME).display().to_string();
    assert!(
        degraded.reason.as_ref().unwrap().contains(&path),
        "{degraded:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("queue is full")),
        "{warnings:?}"
    );
    blocker.execute_batch("COMMIT").unwrap();
    assert!(log.flush(FLUSH));
    offer(&log, 20).unwrap();
    assert!(log.flush(FLUSH));
    let status = log.status();
    assert_eq!(status.state, AuditState::Ok, "{status:?}");
    assert_eq!(status.written + status.dropped, 21);
    assert_eq!(read_back(dir.path()) as u64, status.written);
    (dir, warnings, degraded)
}

/// The writer stuck behind a lock fills the queue: records are dropped and counted, the status
/// names the file, `record` never waits; once the lock is gone writes succeed and the status
/// clears.
#[test]
fn a_full_queue_drops_counts_and_says_so() {
    let (_dir, _, degraded) = fill_a_blocked_queue(
        |log, n| log.record(execution(&format!("ex_{n}"), "local", n.into(), &[])),
        |dir| all(dir).len(),
    );
    assert!(degraded.metrics_text().contains("airlock_audit_degraded 1"));
    assert!(degraded.metrics_text().contains(&format!(
        "airlock_audit_records_dropped_total {}",
        degraded.dropped
    )));
}

/// A real "file too large" from the kernel: the test runs itself again in a child process with
/// `RLIMIT_FSIZE` lowered (and SIGXFSZ ignored, so writes fail with EFBIG instead of killing
/// it); writes past the limit fail, the log degrades naming the file, and after the limit is
/// raised again the next write succeeds and the status clears.
#[test]
fn a_file_size_limit_degrades_the_log_until_writes_succeed_again() {
    const CHILD: &str = "AIRLOCK_AUDIT_FSIZE_CHILD";
    if let Some(dir) = std::env::var_os(CHILD) {
        fsize_child(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = run_in_child(
        "a_file_size_limit_degrades_the_log_until_writes_succeed_again",
        CHILD,
        dir.path(),
    );
    assert!(stdout.contains("FSIZE-CHILD-DONE"), "{stdout}\n{stderr}");
    show_degradation(&stdout);
}

/// Runs the test `name` again in a child process of this test binary with `env` set to `dir`
/// (each attempt that changes process-wide limits or namespaces runs in its own process);
/// the child must succeed. Returns its stdout and stderr.
fn run_in_child(name: &str, env: &str, dir: &Path) -> (String, String) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &format!("audit_log::tests::{name}"),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(env, dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

/// What the child saw (visible with --nocapture).
fn show_degradation(stdout: &str) {
    println!(
        "{}",
        stdout
            .lines()
            .find(|l| l.contains("degraded after"))
            .unwrap_or("")
    );
}

fn fsize_child(dir: &Path) {
    let log = AuditLog::open_in(dir, 256 << 20, 4).unwrap();
    log.record(execution("ex_first", "local", 1, &[])).unwrap();
    assert!(log.flush(FLUSH));
    let current = std::fs::metadata(dir.join(FILE_NAME)).unwrap().len()
        + std::fs::metadata(dir.join("audit.sqlite-wal")).map_or(0, |m| m.len());
    // SAFETY: setting a signal disposition to SIG_IGN and a resource limit of this (child test)
    // process; no handler runs.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit {
            rlim_cur: current + 64 * 1024,
            rlim_max: libc::RLIM_INFINITY,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    let mut n = 0;
    while log.status().state == AuditState::Ok {
        n += 1;
        assert!(n < 100_000, "the size limit never bit");
        let _ = log.record(execution(&format!("ex_{n}"), "local", n + 1, &["a.b"; 8]));
        if n.is_multiple_of(50) {
            assert!(log.flush(FLUSH));
        }
    }
    let status = log.status();
    let reason = status.reason.clone().unwrap();
    println!("degraded after {n} records: {reason}");
    assert!(
        reason.contains(&dir.join(FILE_NAME).display().to_string()),
        "{reason}"
    );
    assert!(reason.contains("lost"), "{reason}");
    assert!(status.dropped > 0);
    // The warning an execution gets while degraded. Records still queued when the loop saw the
    // log degrade may yet be committed (a batch can fit in pages a checkpoint freed), which
    // makes the log healthy until its next failed write: record until the warning comes, with
    // the size limit still in place.
    let warning = (0..100)
        .find_map(|i| {
            let warned = log
                .record(execution(
                    &format!("ex_degraded_{i}"),
                    "local",
                    999_999,
                    &["a.b"; 8],
                ))
                .err();
            if warned.is_none() {
                assert!(log.flush(FLUSH));
            }
            warned
        })
        .expect("the log never reported itself degraded again under the size limit");
    assert!(warning.0.contains("may not be recorded"), "{warning}");
    // SAFETY: as above.
    unsafe {
        let limit = libc::rlimit {
            rlim_cur: libc::RLIM_INFINITY,
            rlim_max: libc::RLIM_INFINITY,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    assert!(log.flush(FLUSH));
    // The warning may or may not come: the writer can commit before `record` returns.
    let _ = log.record(execution("ex_recovered", "local", 1_000_000, &[]));
    assert!(log.flush(FLUSH));
    assert_eq!(log.status().state, AuditState::Ok);
    let rows = all(dir);
    assert_eq!(rows[0].execution_id, "ex_recovered");
    assert_eq!(rows.last().unwrap().execution_id, "ex_first");
    println!("FSIZE-CHILD-DONE");
}

/// A real full file system: in a child process with its own mount namespace, the log lives on
/// a 1 MiB tmpfs that a filler file then fills. Writes fail with SQLITE_FULL, the log degrades
/// naming the file; once the filler is deleted the next write succeeds. Needs the right to
/// create a mount namespace (root, or CAP_SYS_ADMIN): skipped, and saying so, without it.
#[test]
fn a_full_file_system_degrades_the_log_until_space_is_freed() {
    const CHILD: &str = "AIRLOCK_AUDIT_TMPFS_CHILD";
    if let Some(dir) = std::env::var_os(CHILD) {
        tmpfs_child(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = run_in_child(
        "a_full_file_system_degrades_the_log_until_space_is_freed",
        CHILD,
        dir.path(),
    );
    if let Some(skipped) = stdout.lines().find(|l| l.contains("SKIPPED")) {
        eprintln!("{skipped}");
        return;
    }
    assert!(stdout.contains("TMPFS-CHILD-DONE"), "{stdout}\n{stderr}");
    show_degradation(&stdout);
}

fn tmpfs_child(dir: &Path) {
    use std::ffi::CString;
    use std::io::Write as _;
    let target = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: namespace and mount calls with valid NUL-terminated strings; they change only
    // this child test process, whose mounts vanish with it.
    let mounted = unsafe {
        // The raw call with the flags as the kernel's `unsigned long` (glibc's `unshare(int)`
        // passes the upper half of the register on unset).
        libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNS as libc::c_ulong) == 0
            && libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
            && libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                c"size=1m,mode=0700".as_ptr().cast(),
            ) == 0
    };
    if !mounted {
        println!(
            "SKIPPED a_full_file_system_degrades_the_log_until_space_is_freed: cannot mount a tmpfs here ({})",
            std::io::Error::last_os_error()
        );
        return;
    }
    let log = AuditLog::open_in(dir, 256 << 20, 4).unwrap();
    log.record(execution("ex_first", "local", 1, &[])).unwrap();
    assert!(log.flush(FLUSH));
    // Fill what is left of the file system.
    let filler_path = dir.join("filler");
    let mut filler = std::fs::File::create(&filler_path).unwrap();
    let chunk = [0u8; 4096];
    while filler.write_all(&chunk).is_ok() {}
    drop(filler);
    let mut n = 0;
    while log.status().state == AuditState::Ok {
        n += 1;
        assert!(n < 100_000, "the full file system never showed");
        let _ = log.record(execution(&format!("ex_{n}"), "local", n + 1, &["a.b"; 8]));
        assert!(log.flush(FLUSH));
    }
    let reason = log.status().reason.unwrap();
    println!("degraded after {n} records: {reason}");
    assert!(
        reason.contains(&dir.join(FILE_NAME).display().to_string()),
        "{reason}"
    );
    assert!(reason.contains("full"), "{reason}");
    // While the file system is full, every execution gets the warning.
    let warning = log
        .record(execution("ex_still_full", "local", 999_999, &[]))
        .unwrap_err();
    assert!(warning.0.contains("database or disk is full"), "{warning}");
    assert!(log.flush(FLUSH));
    std::fs::remove_file(&filler_path).unwrap();
    // The warning may or may not come: the writer can commit before `record` returns.
    let _ = log.record(execution("ex_recovered", "local", 1_000_000, &[]));
    assert!(log.flush(FLUSH));
    assert_eq!(log.status().state, AuditState::Ok, "{:?}", log.status());
    let rows = all(dir);
    assert_eq!(rows[0].execution_id, "ex_recovered");
    assert_eq!(rows.last().unwrap().execution_id, "ex_first");
    println!("TMPFS-CHILD-DONE");
}

#[test]
fn a_directory_others_may_write_is_refused_by_name() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("shared");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o775)).unwrap();
    let error = AuditLog::open_in(&dir, 1 << 20, 1).unwrap_err().to_string();
    assert!(error.contains(&dir.display().to_string()), "{error}");
    assert!(
        error.contains("writable by group or others (mode 0775)"),
        "{error}"
    );
    assert!(!dir.join(FILE_NAME).exists());

    let file = parent.path().join("file");
    std::fs::write(&file, "").unwrap();
    let error = AuditLog::open_in(&file, 1 << 20, 1)
        .unwrap_err()
        .to_string();
    assert!(error.contains("is not a directory"), "{error}");
}

#[test]
fn an_existing_file_with_a_loose_mode_is_tightened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    std::fs::write(&path, "").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(open(dir.path()));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_disabled_log_records_nothing() {
    let settings = AuditSettings {
        enabled: false,
        ..AuditSettings::default()
    };
    let log = AuditLog::open(&settings, None).unwrap();
    assert_eq!(log.record(execution("ex_1", "local", 1, &[])), Ok(()));
    assert_eq!(
        log.record_approval(approval("ap_1", "ex_1", "local", 1, "a.b", "approved", 1)),
        Ok(())
    );
    assert!(log.flush(FLUSH));
    assert_eq!(log.status().state, AuditState::Disabled);
}

#[test]
fn settings_choose_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let settings = AuditSettings {
        directory: Some(dir.path().join("audit")),
        ..AuditSettings::default()
    };
    let log = AuditLog::open(&settings, None).unwrap();
    assert_eq!(
        log.status().path,
        Some(dir.path().join("audit").join(FILE_NAME))
    );
}

#[test]
fn the_default_directory_follows_systemd_then_xdg_then_home() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    };
    let all_set = env(&[
        ("STATE_DIRECTORY", "/var/lib/airlock:/var/lib/other"),
        ("XDG_STATE_HOME", "/home/a/.state"),
        ("HOME", "/home/a"),
    ]);
    assert_eq!(
        default_directory(all_set).unwrap(),
        Path::new("/var/lib/airlock")
    );
    assert_eq!(
        default_directory(env(&[
            ("XDG_STATE_HOME", "/home/a/.state"),
            ("HOME", "/home/a")
        ]))
        .unwrap(),
        Path::new("/home/a/.state/airlock")
    );
    // A relative XDG_STATE_HOME is ignored, as the XDG spec asks.
    assert_eq!(
        default_directory(env(&[("XDG_STATE_HOME", "state"), ("HOME", "/home/a")])).unwrap(),
        Path::new("/home/a/.local/state/airlock")
    );
    let error = default_directory(env(&[])).unwrap_err().to_string();
    assert!(error.contains("[audit] directory"), "{error}");
}

/// Closing the last handle writes what is queued before the writer thread ends.
#[test]
fn dropping_the_log_writes_what_is_queued() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for n in 0..500 {
        log.record(execution(&format!("ex_{n}"), "local", n, &["a.b"]))
            .unwrap();
    }
    drop(log);
    assert_eq!(all(dir.path()).len(), 500);
}

/// A decision comes back whole: the arguments only as their summary, and a secret-shaped
/// value (in the arguments and in the reason) only as the scanner's marker, nowhere in the
/// files.
#[test]
fn an_approval_decision_round_trips_summarised_and_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let scanner = SecretScanner::new([]).unwrap();
    let redact: Redact<'_> = &|text| scanner.scan_text(text).0;
    let record = ApprovalRecord::new(
        "ap_1",
        "ex_1",
        "ci",
        2,
        "github.delete_repo",
        &json!({"repo": "octo/hello", "token": GITHUB_TOKEN, "body": "x".repeat(500)}),
        Verdict::Approved,
        Some("alice"),
        Some(1000),
        Some(&format!("fine, {GITHUB_TOKEN} is revoked\nanyway")),
        redact,
    );
    assert_eq!(record.arguments.redactions, 1);
    // The same summary a tool call of these arguments gets.
    assert_eq!(
        record.arguments.text,
        ToolCallRecord::new(
            2,
            "github.delete_repo",
            &json!({"repo": "octo/hello", "token": GITHUB_TOKEN, "body": "x".repeat(500)}),
            CallOutcome::Ok,
            None,
            1.0,
            at(1),
            redact,
        )
        .arguments
    );
    let decided = record.at;
    log.record(execution("ex_1", "ci", 1000, &["github.delete_repo"]))
        .unwrap();
    log.record_approval(record).unwrap();
    assert!(log.flush(FLUSH));
    assert_eq!(log.status().written, 2);
    assert_eq!(log.status().state, AuditState::Ok);

    let rows = all_approvals(dir.path());
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.approval_id, "ap_1");
    assert_eq!(row.at, timestamp::format_utc(timestamp::unix_ms(decided)));
    assert_eq!(row.execution_id, "ex_1");
    assert_eq!(row.principal, "ci");
    assert_eq!(
        (row.call_index, row.tool.as_str()),
        (2, "github.delete_repo")
    );
    assert_eq!(
        row.arguments,
        "{body: string(500), repo: string(10) \"octo/hello\", token: string(40) \"[REDACTED:github-token]\"}"
    );
    assert_eq!(row.decision, "approved");
    assert_eq!(row.decided_by.as_deref(), Some("alice"));
    assert_eq!(row.decider_uid, Some(1000));
    assert_eq!(
        row.reason.as_deref(),
        Some("fine, [REDACTED:github-token] is revoked\nanyway")
    );
    // The executions' view is unchanged by it.
    assert_eq!(all(dir.path()).len(), 1);

    // Neither the token nor the long argument reached a file.
    drop(log);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(GITHUB_TOKEN));
        assert!(!text.contains(&"x".repeat(500)));
    }

    let table = format_approval_table(&rows);
    println!("{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("DECIDED (UTC)  "), "{table}");
    let cells: Vec<&str> = lines[1]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells,
        [
            row.at.as_str(),
            "approved",
            "alice (uid 1000)",
            "ap_1",
            "ex_1",
            "ci",
            "#2 github.delete_repo"
        ],
        "{table}"
    );
    assert_eq!(
        lines[2],
        "    arguments: {body: string(500), repo: string(10) \"octo/hello\", token: string(40) \"[REDACTED:github-token]\"}"
    );
    // The newline of the reason cannot start a line of its own.
    assert_eq!(
        lines[3],
        "    reason: fine, [REDACTED:github-token] is revoked\\u{a}anyway"
    );
    assert_eq!(lines.len(), 4, "{table}");
    let json: serde_json::Value =
        serde_json::from_str(format_approval_json_lines(&rows).trim_end()).unwrap();
    assert_eq!(
        json,
        json!({
            "approval_id": "ap_1",
            "at": row.at,
            "execution_id": "ex_1",
            "principal": "ci",
            "call_index": 2,
            "tool": "github.delete_repo",
            "arguments": row.arguments,
            "decision": "approved",
            "decided_by": "alice",
            "decider_uid": 1000,
            "reason": row.reason,
        })
    );
}

/// An approval nobody decided in time is recorded as expired, with no decider and no reason.
#[test]
fn an_expired_approval_has_no_decider() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    log.record_approval(approval(
        "ap_late",
        "ex_1",
        "ci",
        1,
        "payments.refund",
        "expired",
        2000,
    ))
    .unwrap();
    assert!(log.flush(FLUSH));
    let rows = all_approvals(dir.path());
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.decision, "expired");
    assert_eq!((&row.decided_by, row.decider_uid), (&None, None));
    assert_eq!(row.reason, None);
    assert_eq!(row.at, "1970-01-01T00:33:20.000Z");
    let table = format_approval_table(&rows);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[1],
        "1970-01-01T00:33:20.000Z  expired   -   ap_late   ex_1       ci         #1 payments.refund"
    );
    assert_eq!(lines.len(), 3, "no reason line: {table}");
    let json: serde_json::Value =
        serde_json::from_str(format_approval_json_lines(&rows).trim_end()).unwrap();
    assert_eq!(json["decided_by"], serde_json::Value::Null);
    assert_eq!(json["decider_uid"], serde_json::Value::Null);
    assert_eq!(json["reason"], serde_json::Value::Null);
    // A decider known only by uid is shown once.
    let mut by_uid = approval("ap_uid", "ex_1", "ci", 2, "a.b", "denied", 2001);
    by_uid.decided_by = Some("uid 4000".into());
    by_uid.decider_uid = Some(4000);
    log.record_approval(by_uid).unwrap();
    assert!(log.flush(FLUSH));
    let table = format_approval_table(&all_approvals(dir.path()));
    assert!(table.contains("  denied    uid 4000  ap_uid"), "{table}");
    assert_eq!(
        format_approval_table(&[]),
        "DECIDED (UTC)  DECISION  BY  APPROVAL  EXECUTION  PRINCIPAL  CALL\n(no approval decisions match)\n"
    );
}

#[test]
fn approval_filters() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for record in [
        approval(
            "ap_1",
            "ex_1",
            "local",
            1,
            "github.delete_repo",
            "approved",
            1000,
        ),
        approval("ap_2", "ex_2", "ci", 1, "payments.refund", "denied", 2000),
        approval("ap_3", "ex_2", "ci", 2, "github.merge", "expired", 3000),
        approval("ap_4", "ex_3", "ci", 1, "github.merge", "approved", 3000),
    ] {
        log.record_approval(record).unwrap();
    }
    assert!(log.flush(FLUSH));
    let ids = |query: AuditQuery| -> Vec<String> {
        read_approvals(dir.path(), &query)
            .unwrap()
            .into_iter()
            .map(|r| r.approval_id)
            .collect()
    };
    // Newest first; at the same time, the later record first.
    assert_eq!(ids(AuditQuery::default()), ["ap_4", "ap_3", "ap_2", "ap_1"]);
    assert_eq!(
        ids(AuditQuery {
            since: Some(at(2000)),
            ..AuditQuery::default()
        }),
        ["ap_4", "ap_3", "ap_2"]
    );
    assert_eq!(
        ids(AuditQuery {
            principal: Some("local".into()),
            ..AuditQuery::default()
        }),
        ["ap_1"]
    );
    assert_eq!(
        ids(AuditQuery {
            execution: Some("ex_2".into()),
            ..AuditQuery::default()
        }),
        ["ap_3", "ap_2"]
    );
    assert_eq!(
        ids(AuditQuery {
            tool: Some("github.*".into()),
            principal: Some("ci".into()),
            ..AuditQuery::default()
        }),
        ["ap_4", "ap_3"]
    );
    assert_eq!(
        ids(AuditQuery {
            limit: 2,
            ..AuditQuery::default()
        }),
        ["ap_4", "ap_3"]
    );
    let error = read_approvals(
        dir.path(),
        &AuditQuery {
            tool: Some("github.?".into()),
            ..AuditQuery::default()
        },
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("only `*` is a wildcard"),
        "{error}"
    );
    // No log at all: the same message as for executions.
    let empty = tempfile::tempdir().unwrap();
    let error = read_approvals(empty.path(), &AuditQuery::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("--dir"), "{error}");
}

/// Approval decisions rotate with the executions, and queries read them from every file.
#[test]
fn rotated_files_keep_their_approvals_readable() {
    let dir = tempfile::tempdir().unwrap();
    // Keeps more files than the loop makes, so nothing is rotated away.
    let log = AuditLog::open_in(dir.path(), 64 << 10, 8).unwrap();
    let n = record_until_rotated_twice(&log, dir.path(), 0, |n| {
        log.record(execution(&format!("ex_{n}"), "local", n, &["a.b"]))
            .unwrap();
        log.record_approval(approval(
            &format!("ap_{n}"),
            &format!("ex_{n}"),
            "local",
            1,
            "a.b",
            if n.is_multiple_of(2) {
                "approved"
            } else {
                "denied"
            },
            n,
        ))
        .unwrap();
    });
    assert!(!dir.path().join("audit.sqlite.9").exists());
    // The rotated files hold approvals of their own.
    for name in ["audit.sqlite.1", "audit.sqlite.2"] {
        let count: i64 = Connection::open(dir.path().join(name))
            .unwrap()
            .query_row("SELECT count(*) FROM approvals", [], |r| r.get(0))
            .unwrap();
        assert!(count > 0, "{name}");
    }
    let rows = all_approvals(dir.path());
    assert_eq!(rows.len() as u64, n);
    let ids: Vec<String> = rows.iter().map(|r| r.approval_id.clone()).collect();
    let expected: Vec<String> = (1..=n).rev().map(|i| format!("ap_{i}")).collect();
    assert_eq!(ids, expected);
    assert_eq!(log.status().dropped, 0);
    assert_eq!(log.status().written, 2 * n);
}

/// Approval decisions share the queue: when it is full they are dropped, counted, and the
/// warning says which record was lost; `record_approval` never waits.
#[test]
fn a_full_queue_drops_approval_decisions_and_counts_them() {
    // Each decided a second after the one before, so the last offered is the newest.
    let (dir, warnings, _) = fill_a_blocked_queue(
        |log, n| {
            log.record_approval(approval(
                &format!("ap_{n}"),
                "ex_1",
                "ci",
                n,
                "a.b",
                "approved",
                n.into(),
            ))
        },
        |dir| all_approvals(dir).len(),
    );
    assert!(
        warnings.iter().any(|w| w.contains("queue is full")
            && w.contains("this approval decision was not recorded")),
        "{warnings:?}"
    );
    assert_eq!(all_approvals(dir.path())[0].approval_id, "ap_20");
}

/// A log written before approvals were recorded (schema version 2) is read (it has no
/// decisions), and the writer adds the table when it opens it.
#[test]
fn a_version_2_log_is_read_and_gets_approvals() {
    let dir = an_old_log(
        "DROP INDEX approvals_by_execution; DROP INDEX approvals_by_time;
         DROP TABLE approvals; PRAGMA user_version = 2",
    );
    assert!(all_approvals(dir.path()).is_empty());
    assert_eq!(all(dir.path()).len(), 1);

    let log = open(dir.path());
    log.record_approval(approval(
        "ap_1", "ex_new", "local", 1, "a.b", "approved", 2000,
    ))
    .unwrap();
    assert!(log.flush(FLUSH));
    assert_eq!(schema_version(&dir.path().join(FILE_NAME)), SCHEMA_VERSION);
    assert_eq!(all_approvals(dir.path())[0].approval_id, "ap_1");
    assert_eq!(all(dir.path()).len(), 1);
}

/// The writer's connection wipes what it deletes (`secure_delete` is a setting of the
/// connection, not of the file, so it is read from the writer's own).
#[test]
fn the_writer_wipes_what_it_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let conn = database::open_for_writing(&dir.path().join(FILE_NAME)).unwrap();
    let on: i64 = conn
        .query_row("PRAGMA secure_delete", [], |r| r.get(0))
        .unwrap();
    assert_eq!(on, 1);
}
