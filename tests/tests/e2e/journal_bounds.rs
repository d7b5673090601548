//! The journal's bounds, end to end (the real daemon in-process, real workers): everything it
//! keeps counts against a principal's and the journal's bounds (sessions, code, answers),
//! one principal's writes never evict another principal's session, and what the journal
//! deletes or no longer needs (a deleted session, an ended execution's code) is not left
//! readable in its files, nor is a secret an agent posted in an answer.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::{DaemonOptions, TestDaemon, another_principal};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Instant;

/// A made-up token of GitHub's classic shape (never a real credential), in two parts so this
/// file does not look like it holds one.
const GITHUB_TOKEN: &str = concat!("ghp_", "hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES");

/// `POST path` with a JSON body: the status and the body as JSON.
async fn post(d: &TestDaemon, path: &str, body: &Value) -> (u16, Value) {
    d.post_json(path, body).await
}

/// Asserts a refusal of a bound: 429, `journal_full`, naming `key`, with what to do next.
#[track_caller]
fn assert_full(status: u16, body: &Value, key: &str) {
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], json!("journal_full"), "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(key), "{body}");
    assert!(
        body["error"]["hint"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "{body}"
    );
}

/// Whether any of the journal's files (the database, its write-ahead log, the intent log)
/// holds `needle`, read as bytes.
fn files_hold(state: &Path, needle: &str) -> bool {
    ["journal.sqlite", "journal.sqlite-wal", "journal.log"]
        .iter()
        .filter_map(|name| std::fs::read(state.join(name)).ok())
        .any(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
}

/// 1. Sessions and programs count: a principal holds at most `max_sessions`, and a session
/// at most `max_session_size` (a program counts while it may run again); past them the
/// request is refused with 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_code_are_bounded_per_principal() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.journal.max_sessions = 3;
        p.journal.max_session_size_bytes = 1 << 20;
    }))
    .await;
    let mut first = None;
    for _ in 0..3 {
        let (status, r) = post(
            &d,
            "/v1/executions",
            &json!({ "code": "1", "session": "new" }),
        )
        .await;
        assert_eq!(status, 200, "{r}");
        first.get_or_insert(r["session"].as_str().unwrap().to_owned());
    }
    let (status, r) = post(
        &d,
        "/v1/executions",
        &json!({ "code": "1", "session": "new" }),
    )
    .await;
    assert_full(status, &r, "max_sessions");
    // A program is kept while it may run again: one of 1.1 MB does not fit in the session.
    let code = format!("const pad = \"{}\"; pad.length", "p".repeat(1_100_000));
    let session = first.unwrap();
    let (status, r) = post(
        &d,
        "/v1/executions",
        &json!({ "code": code, "session": session }),
    )
    .await;
    assert_full(status, &r, "max_session_size");
    // Once it has ended only its hash is kept: 700 KB programs run one after another.
    let code = format!("const pad = \"{}\"; pad.length", "p".repeat(700_000));
    for _ in 0..2 {
        let (status, r) = post(
            &d,
            "/v1/executions",
            &json!({ "code": code, "session": session }),
        )
        .await;
        assert_eq!(status, 200, "{r}");
    }
}

/// A program that asks its client for one chunk after another until told it is done.
const CHUNKS: &str = r#"
let total = 0;
for (let i = 0; ; i++) {
  const r: any = await tools.client.chunk({ i });
  if (r.done) break;
  total += r.data.length;
}
return total;
"#;

fn chunk_tool() -> Value {
    json!([{ "name": "chunk", "description": "the next chunk", "input_schema": { "type": "object" } }])
}

/// Answers the one pending call of waiting response `r` with `ok`.
async fn answer_chunk(d: &TestDaemon, r: &Value, ok: Value) -> (u16, Value) {
    assert_eq!(r["status"], json!("waiting"), "{r}");
    let id = r["id"].as_str().unwrap();
    let call = r["pending_calls"][0]["id"].clone();
    post(
        d,
        &format!("/v1/executions/{id}/results"),
        &json!({ "results": [{ "id": call, "ok": ok }] }),
    )
    .await
}

/// 1. Answers count: answers that would take the waiting execution's session past
/// `max_session_size` are refused (429), and it waits on for smaller ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_past_the_bound_are_refused_and_the_execution_waits_on() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.journal.max_session_size_bytes = 1 << 20;
    }))
    .await;
    let (status, mut r) = post(
        &d,
        "/v1/executions",
        &json!({ "code": CHUNKS, "client_tools": chunk_tool() }),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    let data = "d".repeat(300_000);
    for _ in 0..3 {
        let (status, next) = answer_chunk(&d, &r, json!({ "data": data })).await;
        assert_eq!(status, 200, "{next}");
        r = next;
    }
    let (status, refused) = answer_chunk(&d, &r, json!({ "data": data })).await;
    assert_full(status, &refused, "max_session_size");
    let (status, done) = answer_chunk(&d, &r, json!({ "done": true })).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"], json!(900_000), "{done}");
}

/// 3. One principal filling the journal evicts only its own sessions: another principal's
/// session survives it, and the sweep of a daemon started afterwards, and still replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_filling_the_journal_never_evicts_another_principals_session() {
    if !another_principal::can_run(
        "a_principal_filling_the_journal_never_evicts_another_principals_session",
    ) {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let on_state = || {
        let mut options = DaemonOptions::default().policy(|p| {
            another_principal::admit(p, &["test.*"]);
            p.journal.max_size_bytes = 1 << 20;
        });
        options.state_directory = Some(state.path().to_owned());
        options
    };
    let code = "await tools.test.echo({ n: 1 })";
    let first = TestDaemon::start_with(on_state()).await;
    another_principal::open_socket(&first);
    let (ok, text) = another_principal::cli(&first, &["exec", "--new-session", "-e", code]).await;
    assert!(ok, "{text}");
    let at = text
        .find("ses_")
        .unwrap_or_else(|| panic!("no session id: {text}"));
    let theirs = text[at..at + 36].to_owned();
    // Six sessions of 300 KB results: more than the whole journal may keep.
    for _ in 0..6 {
        let r = first
            .exec_in("await tools.test.big({ bytes: 300000 })", "new", None)
            .await
            .unwrap();
        assert!(r.error.is_none(), "{r:?}");
    }
    first.stop().await;
    // A new daemon sweeps at the first end of an execution of a session.
    let second = TestDaemon::start_with(on_state()).await;
    another_principal::open_socket(&second);
    let r = second
        .exec_in("await tools.test.big({ bytes: 300000 })", "new", None)
        .await
        .unwrap();
    assert!(r.error.is_none(), "{r:?}");
    let (ok, text) =
        another_principal::cli(&second, &["exec", "--session", &theirs, "-e", code]).await;
    assert!(ok, "the other principal's session is gone: {text}");
}

/// 7. Code that would be kept in the journal (it runs in a session, or may wait) is scanned
/// first and refused when it holds a secret; a client's answer is kept only as scanned: a
/// token pasted into either is not in the journal's files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_and_answers_leave_no_secret_in_the_journal() {
    let d = TestDaemon::start().await;
    let state = d.state_directory();
    let code = format!("const key = \"{GITHUB_TOKEN}\"; key.length");
    // Outside a session nothing keeps the code: it runs.
    let r = d.exec(&code).await;
    assert!(r.error.is_none(), "{r:?}");
    // In a session, and in an execution that waits for its client (kept while it waits, which
    // is where the token sat in the journal before), it is refused, naming the rule and line.
    let (status, r) = post(
        &d,
        "/v1/executions",
        &json!({ "code": code, "session": "new" }),
    )
    .await;
    assert_eq!(status, 422, "{r}");
    assert_eq!(r["error"]["code"], json!("secret_in_code"), "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("line 1") && message.contains("github"),
        "{r}"
    );
    assert!(!message.contains(GITHUB_TOKEN), "{r}");
    assert!(r["error"]["hint"].as_str().is_some(), "{r}");
    let waits = format!("{CHUNKS}\n// {GITHUB_TOKEN}");
    let (status, r) = post(
        &d,
        "/v1/executions",
        &json!({ "code": waits, "client_tools": chunk_tool() }),
    )
    .await;
    assert_eq!(status, 422, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("line "),
        "{r}"
    );
    assert!(
        !files_hold(&state, GITHUB_TOKEN),
        "the code's token is kept"
    );

    // Waiting again after the answer: the answer is kept for the next re-run.
    let (status, r) = post(
        &d,
        "/v1/executions",
        &json!({ "code": CHUNKS, "client_tools": chunk_tool() }),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    let (status, next) = answer_chunk(&d, &r, json!({ "data": GITHUB_TOKEN })).await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["status"], json!("waiting"), "{next}");
    assert!(
        !files_hold(&state, GITHUB_TOKEN),
        "the answer's token is kept"
    );
    let (status, done) = answer_chunk(&d, &next, json!({ "done": true })).await;
    assert_eq!(status, 200, "{done}");
    // The program got the redacted answer on both runs.
    assert_ne!(done["result"], json!(GITHUB_TOKEN.len()), "{done}");
}

/// secure_delete: a deleted session's results are not left readable in the journal's files
/// (neither in free pages of the database nor in its write-ahead log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_session_leaves_nothing_readable() {
    let d = TestDaemon::start().await;
    let marker = "MARKER-7f3a9c1e5b";
    // Built at run time, so only the result holds it whole.
    let r = d
        .exec_in(
            "await tools.test.echo({ m: 'MARKER-' + '7f3a9c1e5b', pad: 'x'.repeat(20000) })",
            "new",
            None,
        )
        .await
        .unwrap();
    assert!(r.error.is_none(), "{r:?}");
    let session = r.session.unwrap();
    assert!(
        files_hold(&d.state_directory(), marker),
        "the result was not recorded"
    );
    let (status, text) = d
        .client()
        .await
        .delete(&format!("/v1/sessions/{session}"))
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 200, "{text}");
    assert!(
        !files_hold(&d.state_directory(), marker),
        "a deleted result is readable"
    );
}

/// A measurement, run by hand (`cargo test -p airlock-tests --test journal_bounds -- --ignored
/// --nocapture`): how long the re-run after each of 40 answers of 1 MB takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: prints the re-run time of each answer"]
async fn rerun_time_per_answer() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.journal.max_session_size_bytes = 1 << 30;
        p.journal.max_principal_size_bytes = 1 << 30;
        p.limits.timeout_ms = 120_000;
        p.limits.memory_bytes = 1 << 30;
    }))
    .await;
    let (status, mut r) = post(
        &d,
        "/v1/executions",
        &json!({ "code": CHUNKS, "client_tools": chunk_tool() }),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    let data = "d".repeat(1_000_000);
    for n in 1..=40 {
        let started = Instant::now();
        let (status, next) = answer_chunk(&d, &r, json!({ "data": data })).await;
        assert_eq!(status, 200, "{next}");
        println!("answer {n}: {:?}", started.elapsed());
        r = next;
    }
}
