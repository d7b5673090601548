//! Sessions and the replay journal, end to end (the real daemon in-process, real workers): a
//! re-run of edited code in its session answers the calls already made from the journal, so
//! a side effect happens once however often the agent iterates.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ReplayMode, Status};
use airlock_supervisor::client::ClientError;
use airlock_tests::ledger::Ledger;
use airlock_tests::{DaemonOptions, TestDaemon, another_principal};
use serde_json::{Value, json};
use std::sync::Arc;

async fn daemon(ledger: &Arc<Ledger>) -> TestDaemon {
    let mut options = DaemonOptions::default();
    options.sources.push(ledger.clone());
    TestDaemon::start_with(options).await
}

/// The agent's loop: the program creates three records, then fails; each edit changes only
/// what comes after the last good line, until it works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_running_edited_code_in_its_session_creates_each_record_once() {
    let ledger = Arc::new(Ledger::default());
    let d = daemon(&ledger).await;
    let head = r#"
const a: any = await tools.ledger.create({ name: "invoice-1" });
const b: any = await tools.ledger.create({ name: "invoice-2" });
const c: any = await tools.ledger.create({ name: "invoice-3" });
"#;
    let first = d
        .exec_in(
            &format!("{head}throw new Error('line 40 is wrong');"),
            "new",
            None,
        )
        .await
        .unwrap();
    assert_eq!(first.status, Status::Error, "{first:?}");
    let session = first.session.clone().expect("a new session's id");
    assert!(session.starts_with("ses_"), "{session}");
    assert_eq!(first.replayed_calls, 0);
    assert!(first.tool_calls.iter().all(|c| !c.replayed));
    assert_eq!(ledger.records().len(), 3);

    let edits = [
        "throw new Error('still wrong');",
        "const total: number = a.seq + b.seq + c.nope.length;",
        "console.log('almost'); throw new TypeError('again');",
        "const names: any = [a, b, c].map((r: any) => r.name); names.nope.length;",
        "[a.seq, b.seq, c.seq]",
    ];
    for (i, tail) in edits.iter().enumerate() {
        let r = d
            .exec_in(&format!("{head}{tail}"), &session, None)
            .await
            .unwrap();
        assert_eq!(r.session.as_deref(), Some(session.as_str()));
        assert_eq!(r.replayed_calls, 3, "run {}: {r:?}", i + 2);
        assert_eq!(r.tool_calls.len(), 3);
        assert!(
            r.tool_calls.iter().all(|c| c.replayed),
            "{:?}",
            r.tool_calls
        );
        if i + 1 == edits.len() {
            assert_eq!(r.status, Status::Ok, "{r:?}");
            // The records the first run created, answered from the journal.
            assert_eq!(r.result, json!([1, 2, 3]));
        } else {
            assert_eq!(r.status, Status::Error, "{r:?}");
        }
    }
    assert_eq!(ledger.records().len(), 3, "{:?}", ledger.records());

    // A new call after the good lines runs live and is recorded; a changed call too.
    let r = d
        .exec_in(
            &format!(
                "{head}const d: any = await tools.ledger.create({{ name: \"invoice-4\" }}); d.seq"
            ),
            &session,
            None,
        )
        .await
        .unwrap();
    assert_eq!((r.status, r.replayed_calls), (Status::Ok, 3), "{r:?}");
    assert!(!r.tool_calls[3].replayed);
    assert_eq!(r.result, json!(4));
    assert_eq!(ledger.records().len(), 4);

    // Without the session the same code is one-shot: it runs every call again.
    let one_shot = d.exec(head).await;
    assert_eq!(one_shot.session, None);
    assert_eq!(one_shot.replayed_calls, 0);
    assert_eq!(ledger.records().len(), 7);
}

/// Twenty calls at once, identical ones among them, finishing in a different order each run:
/// each is replayed with its own recorded result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_replay_by_key_whatever_order_they_finished_in() {
    let ledger = Arc::new(Ledger::default());
    let d = daemon(&ledger).await;
    // n: 0..19; calls 0-4 and 5-9 have identical arguments pairwise (name only).
    let code = r#"
const calls = [];
for (let i = 0; i < 20; i++) {
  const args = i < 10 ? { name: "same-" + (i % 5), n: i % 5 } : { name: "item-" + i, n: i };
  calls.push(tools.ledger.create(args));
}
const results: any[] = await Promise.all(calls);
results.map((r) => r.seq)
"#;
    ledger.set_reverse(true);
    let first = d.exec_in(code, "new", None).await.unwrap();
    assert_eq!(first.status, Status::Ok, "{first:?}");
    let session = first.session.clone().unwrap();
    let order_first = first.result.clone();
    assert_eq!(ledger.records().len(), 20);

    // The same program again, completions now in the other order: every result is the one
    // recorded for that call, so the program sees exactly what it saw the first time.
    ledger.set_reverse(false);
    let again = d.exec_in(code, &session, None).await.unwrap();
    assert_eq!(again.status, Status::Ok, "{again:?}");
    assert_eq!(again.replayed_calls, 20);
    assert_eq!(again.result, order_first);
    assert_eq!(ledger.records().len(), 20);

    // Asked to replay nothing, it runs live (new sequence numbers) and records those.
    let fresh = d
        .exec_in(code, &session, Some(ReplayMode::None))
        .await
        .unwrap();
    assert_eq!((fresh.status, fresh.replayed_calls), (Status::Ok, 0));
    assert_eq!(ledger.records().len(), 40);
    assert_ne!(fresh.result, order_first);
    let replayed = d.exec_in(code, &session, None).await.unwrap();
    assert_eq!(replayed.result, fresh.result);
    assert_eq!(ledger.records().len(), 40);
}

/// A failed call is not replayed: it runs again. A divergent re-run is told so in the trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_calls_run_again_and_divergence_is_marked() {
    let ledger = Arc::new(Ledger::default());
    let d = daemon(&ledger).await;
    let code = |last: &str| {
        format!(
            r#"
await tools.ledger.create({{ name: "a" }});
let flaky: any = null;
try {{ flaky = await tools.ledger.flaky({{ name: "f" }}) }} catch (e: any) {{ flaky = e.code }}
await tools.ledger.create({{ name: "{last}" }});
flaky
"#
        )
    };
    let r = d.exec_in(&code("b"), "new", None).await.unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!("upstream_error"));
    let session = r.session.unwrap();
    let r = d.exec_in(&code("c"), &session, None).await.unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(r.tool_calls[0].replayed);
    // The call that failed is made again, live, and succeeds this time.
    assert!(!r.tool_calls[1].replayed);
    assert_eq!(r.result["name"], json!("f"), "{r:?}");
    // The last call changed: live, and the trace says the journal had it otherwise.
    assert!(!r.tool_calls[2].replayed);
    let note = r.tool_calls[2].divergence.as_deref().unwrap_or_default();
    assert!(note.contains("other arguments"), "{:?}", r.tool_calls[2]);
    assert!(r.tool_calls[0].divergence.is_none());
    assert_eq!(ledger.records().len(), 4);
    // Now the flaky call succeeded once, it is replayed.
    let r = d.exec_in(&code("c"), &session, None).await.unwrap();
    assert_eq!(r.replayed_calls, 3, "{r:?}");
    assert_eq!(ledger.records().len(), 4);
}

/// What a re-run is compared with is kept in the journal: a daemon started after the last run
/// still tells a re-run that took another path, and past the journal's `max_size` a run that
/// would keep more is refused (its principal has no idle session to give up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn divergence_survives_a_restart_and_a_full_journal_refuses_clearly() {
    let ledger = Arc::new(Ledger::default());
    let state = tempfile::tempdir().unwrap();
    let on_state = |max_size: Option<u64>| {
        let mut options = DaemonOptions::default();
        options.sources.push(ledger.clone());
        options.state_directory = Some(state.path().to_owned());
        if let Some(bytes) = max_size {
            options = options.policy(move |p| p.journal.max_size_bytes = bytes);
        }
        options
    };
    let code = |name: &str| format!("await tools.ledger.create({{ name: \"{name}\" }})");
    let first = TestDaemon::start_with(on_state(None)).await;
    let r = first.exec_in(&code("a"), "new", None).await.unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let session = r.session.unwrap();
    first.stop().await;
    let second = TestDaemon::start_with(on_state(None)).await;
    let r = second.exec_in(&code("b"), &session, None).await.unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(!r.tool_calls[0].replayed);
    let note = r.tool_calls[0].divergence.as_deref().unwrap_or_default();
    assert!(note.contains("other arguments"), "{:?}", r.tool_calls[0]);
    second.stop().await;
    // A journal of at most one byte (a policy that lowered `max_size`): the principal has no
    // other session to give up, so the run is refused, naming the key, and nothing is lost.
    let third = TestDaemon::start_with(on_state(Some(1))).await;
    match third.exec_in(&code("b"), &session, None).await {
        Err(ClientError::Api {
            status, message, ..
        }) => {
            assert_eq!(status.as_u16(), 429);
            assert!(message.contains("max_size"), "{message}");
        }
        other => panic!("expected a 429, got {other:?}"),
    }
    let (status, body) = third
        .client()
        .await
        .get(&format!("/v1/sessions/{session}"))
        .await
        .unwrap();
    assert_eq!(status.as_u16(), 200, "{body}");
    assert_eq!(ledger.records().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_session_is_a_clear_404_and_sessions_can_be_listed_shown_and_deleted() {
    let ledger = Arc::new(Ledger::default());
    let d = daemon(&ledger).await;
    match d.exec_in("1", "ses_doesnotexist", None).await {
        Err(ClientError::Api {
            status,
            code,
            message,
            hint,
        }) => {
            assert_eq!(status.as_u16(), 404);
            assert_eq!(code, "not_found");
            assert!(message.contains("ses_doesnotexist"), "{message}");
            assert!(hint.unwrap().contains("\"new\""));
        }
        other => panic!("expected a 404, got {other:?}"),
    }
    let r = d
        .exec_in("await tools.ledger.create({ name: 'x' })", "new", None)
        .await
        .unwrap();
    let session = r.session.unwrap();
    let mut c = d.client().await;
    let (status, body) = c.get("/v1/sessions").await.unwrap();
    assert_eq!(status.as_u16(), 200, "{body}");
    let listed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(listed["sessions"][0]["id"], json!(session));
    assert_eq!(listed["sessions"][0]["calls"], json!(1));
    let (status, body) = c.get(&format!("/v1/sessions/{session}")).await.unwrap();
    assert_eq!(status.as_u16(), 200, "{body}");
    let shown: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(shown["calls"][0]["tool"], json!("ledger.create"));
    assert_eq!(shown["calls"][0]["state"], json!("ok"));
    assert_eq!(shown["executions"][0]["id"], json!(r.id));
    assert_eq!(shown["executions"][0]["status"], json!("ok"));
    let (status, _) = c.delete(&format!("/v1/sessions/{session}")).await.unwrap();
    assert_eq!(status.as_u16(), 200);
    let (status, _) = c.get(&format!("/v1/sessions/{session}")).await.unwrap();
    assert_eq!(status.as_u16(), 404);
    // The health and metrics say the journal works, and count.
    let (_, health) = c.get("/v1/health").await.unwrap();
    let health: Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["journal"]["status"], json!("ok"), "{health}");
    let (_, metrics) = c.get("/metrics").await.unwrap();
    assert!(metrics.contains("airlock_journal_up 1\n"), "{metrics}");
    assert!(
        metrics.contains("airlock_tool_calls_journaled_total 1\n"),
        "{metrics}"
    );
}

/// A journal whose store cannot be written (here a trigger that fails every insert, as a full
/// disk would): the calls already taken are kept in the intent log, health says what is
/// wrong, the next request in a session gets `503 journal_unavailable`, executions without a
/// session go on, and once the store works again nothing recorded is lost. (The daemon holds
/// its journal exclusively while it runs, so the file is broken between two daemons on one
/// state directory. A log that cannot be written fails the call itself before it is sent:
/// the journal's unit tests do that on /dev/full.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_journal_fails_only_session_calls() {
    let ledger = Arc::new(Ledger::default());
    let state = tempfile::tempdir().unwrap();
    let on_state = || {
        let mut options = DaemonOptions::default();
        options.sources.push(ledger.clone());
        options.state_directory = Some(state.path().to_owned());
        options
    };
    let code = "await tools.ledger.create({ name: 'x' }); await tools.ledger.create({ name: 'y' })";
    let first = TestDaemon::start_with(on_state()).await;
    let r = first
        .exec_in("await tools.ledger.create({ name: 'x' })", "new", None)
        .await
        .unwrap();
    let session = r.session.unwrap();
    first.stop().await;
    let file = state.path().join("journal.sqlite");
    let conn = rusqlite::Connection::open(&file).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER full BEFORE INSERT ON calls BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
    )
    .unwrap();
    drop(conn);
    let d = TestDaemon::start_with(on_state()).await;
    let r = d.exec_in(code, &session, None).await.unwrap();
    assert_eq!((r.status, r.replayed_calls), (Status::Ok, 1), "{r:?}");
    assert_eq!(ledger.records().len(), 2);
    let (_, health) = d.client().await.get("/v1/health").await.unwrap();
    let health: Value = serde_json::from_str(&health).unwrap();
    assert_eq!(
        health["journal"]["status"],
        json!("unavailable"),
        "{health}"
    );
    assert!(
        health["journal"]["error"]
            .as_str()
            .unwrap()
            .contains("disk is full")
    );
    match d.exec_in(code, &session, None).await {
        Err(ClientError::Api { status, code, .. }) => {
            assert_eq!(
                (status.as_u16(), code.as_str()),
                (503, "journal_unavailable")
            );
        }
        other => panic!("expected 503 journal_unavailable, got {other:?}"),
    }
    // One-shot executions are untouched.
    let r = d.exec("await tools.ledger.create({ name: 'z' })").await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(ledger.records().len(), 3);
    d.stop().await;
    // The store works again: what the log kept is folded in when the daemon starts, so the
    // call made while the store was broken is replayed, not made again.
    let conn = rusqlite::Connection::open(&file).unwrap();
    conn.execute_batch("DROP TRIGGER full;").unwrap();
    drop(conn);
    let d = TestDaemon::start_with(on_state()).await;
    let r = d.exec_in(code, &session, None).await.unwrap();
    assert_eq!((r.status, r.replayed_calls), (Status::Ok, 2), "{r:?}");
    assert_eq!(ledger.records().len(), 3);
    let (_, health) = d.client().await.get("/v1/health").await.unwrap();
    let health: Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["journal"]["status"], json!("ok"), "{health}");
}

/// The clock and the random numbers are the session's: a re-run takes the same path, so the
/// call built from them has the same arguments and is replayed, not made again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_and_randomness_are_replayed_with_the_calls() {
    let ledger = Arc::new(Ledger::default());
    let d = daemon(&ledger).await;
    let code = r#"
const tag = Math.floor(Math.random() * 1e9);
const at = Date.now();
const made: any = await tools.ledger.create({ name: "run-" + tag + "-" + at });
const after = Date.now();
const id = crypto.randomUUID();
({ tag, at, after, id, seq: made.seq })
"#;
    let first = d.exec_in(code, "new", None).await.unwrap();
    assert_eq!(first.status, Status::Ok, "{first:?}");
    let session = first.session.clone().unwrap();
    // Time moved when the call was answered, not before.
    assert!(first.result["after"].as_u64() >= first.result["at"].as_u64());
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let again = d.exec_in(code, &session, None).await.unwrap();
    assert_eq!(again.replayed_calls, 1, "{again:?}");
    assert_eq!(again.result, first.result);
    assert_eq!(ledger.records().len(), 1);

    // Replaying nothing: a new clock and seed, a new record; the next re-run replays those.
    let fresh = d
        .exec_in(code, &session, Some(ReplayMode::None))
        .await
        .unwrap();
    assert_eq!(fresh.replayed_calls, 0);
    assert_ne!(fresh.result["tag"], first.result["tag"]);
    assert_eq!(ledger.records().len(), 2);
    let replayed = d.exec_in(code, &session, None).await.unwrap();
    assert_eq!(replayed.result, fresh.result);
    assert_eq!(ledger.records().len(), 2);

    // One-shot executions each get their own seed.
    let (a, b) = (d.exec(code).await, d.exec(code).await);
    assert_ne!(a.result["tag"], b.result["tag"]);
}

/// `"replay": "writes"`: reads run again and see fresh data, writes are replayed. Every live
/// call of a session carries an idempotency key; one made again on purpose (`"none"`) a new
/// one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_reads_replay_writes_and_each_live_call_carries_a_key() {
    let ledger = Arc::new(Ledger::default());
    let d = daemon(&ledger).await;
    let code = r#"
await tools.ledger.create({ name: "mine" });
const all: any = await tools.ledger.list({});
all.length
"#;
    let first = d.exec_in(code, "new", None).await.unwrap();
    assert_eq!(first.result, json!(1), "{first:?}");
    let session = first.session.unwrap();
    // Someone else adds a record meanwhile.
    d.exec("await tools.ledger.create({ name: 'theirs' })")
        .await;
    let all = d.exec_in(code, &session, None).await.unwrap();
    assert_eq!(
        (all.result.clone(), all.replayed_calls),
        (json!(1), 2),
        "{all:?}"
    );
    let writes = d
        .exec_in(code, &session, Some(ReplayMode::Writes))
        .await
        .unwrap();
    assert_eq!(writes.result, json!(2), "{writes:?}");
    assert!(writes.tool_calls[0].replayed && !writes.tool_calls[1].replayed);
    assert_eq!(ledger.records().len(), 2);

    // The session's create went out with a key; one-shot calls carry none; the same call
    // made again on purpose (replaying nothing) carries a new one.
    d.exec_in(code, &session, Some(ReplayMode::None))
        .await
        .unwrap();
    let keys = ledger.keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 3, "{keys:?}");
    let key = keys[0].clone().expect("a session's call carries a key");
    assert!(key.starts_with("airlock-"), "{key}");
    assert_eq!(keys[1], None);
    let again = keys[2].clone().expect("a session's call carries a key");
    assert!(again.starts_with("airlock-") && again != key, "{keys:?}");
}

/// A service that honours idempotency keys answers a key it saw with its first answer. A
/// session's call made again on purpose reaches it as a new request: `"replay": "none"` and
/// the retry of a failure it reported each go out with a new key, so it acts again instead
/// of answering from its cache. A call replayed from the journal does not reach it at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_made_again_on_purpose_reach_a_service_that_honours_keys() {
    let ledger = Arc::new(Ledger::default());
    ledger.honour_keys();
    let d = daemon(&ledger).await;
    let create = "await tools.ledger.create({ name: 'mine' })";
    let first = d.exec_in(create, "new", None).await.unwrap();
    let session = first.session.clone().unwrap();
    assert_eq!(first.result["seq"], json!(1), "{first:?}");
    let replayed = d.exec_in(create, &session, None).await.unwrap();
    assert_eq!(replayed.replayed_calls, 1, "{replayed:?}");
    let again = d
        .exec_in(create, &session, Some(ReplayMode::None))
        .await
        .unwrap();
    assert_eq!(
        again.result["seq"],
        json!(2),
        "the service answered from its cache: {again:?}"
    );
    assert_eq!(ledger.records().len(), 2);

    // `flaky` says it failed the first time; a re-run of the session retries it.
    let flaky =
        "try { return await tools.ledger.flaky({ name: 'f' }) } catch (e: any) { return e.code }";
    let failed = d.exec_in(flaky, "new", None).await.unwrap();
    let session = failed.session.clone().unwrap();
    assert_eq!(failed.result, json!("upstream_error"), "{failed:?}");
    let retried = d.exec_in(flaky, &session, None).await.unwrap();
    assert_eq!(
        retried.result,
        json!({ "seq": 3, "name": "f" }),
        "the retry was answered with the cached failure: {retried:?}"
    );
    assert_eq!(ledger.records().len(), 3);
}

/// A session and its executions belong to the principal that made them: another principal
/// (here uid 65534, through the real CLI) can neither run in it, read it, delete it, nor
/// resume its executions; each answer is the same 404 as for an id that does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principal_cannot_use_read_or_resume_a_session() {
    if !another_principal::can_run("another_principal_cannot_use_read_or_resume_a_session") {
        return;
    }
    let ledger = Arc::new(Ledger::default());
    let mut options =
        DaemonOptions::default().policy(|p| another_principal::admit(p, &["ledger.*"]));
    options.sources.push(ledger.clone());
    let d = TestDaemon::start_with(options).await;
    another_principal::open_socket(&d);
    let mine = d
        .exec_in("await tools.ledger.create({ name: 'mine' })", "new", None)
        .await
        .unwrap();
    let session = mine.session.clone().unwrap();
    let code = "await tools.ledger.create({ name: 'mine' })";
    for args in [
        vec!["exec", "--session", session.as_str(), "-e", code],
        vec!["session", "show", session.as_str()],
        vec!["session", "delete", session.as_str()],
        vec!["resume", mine.id.as_str()],
    ] {
        let (ok, text) = another_principal::cli(&d, &args).await;
        another_principal::assert_not_found(ok, &text, &format!("{args:?}"));
    }
    let (ok, text) = another_principal::cli(&d, &["session", "list"]).await;
    assert!(ok && !text.contains(&session), "{text}");
    // Its own new session works, and nothing of the first one was replayed or touched.
    let (ok, text) = another_principal::cli(&d, &["exec", "--new-session", "-e", code]).await;
    assert!(ok, "{text}");
    assert_eq!(ledger.records().len(), 2);
    let again = d.exec_in(code, &session, None).await.unwrap();
    assert_eq!(again.replayed_calls, 1, "{again:?}");
}

/// How an execution of a session ends while one of its calls is still in flight.
#[derive(Debug, Clone, Copy)]
enum Ending {
    /// `Promise.all` rejects at once, beside a call that takes 400 ms.
    Rejection,
    /// The program's deadline (200 ms) passes during the call.
    Timeout,
    /// `DELETE /v1/executions/<id>` while the call is in flight.
    Cancel,
    /// The client hangs up while the call is in flight.
    HangUp,
}

/// Runs the first execution of a new session so that it ends `ending` while its call to
/// `ledger.create` (named `name`, 400 ms) is in flight; returns the session.
async fn end_with_a_call_in_flight(d: &TestDaemon, name: &str, ending: Ending) -> String {
    use airlock_supervisor::agent_api::{ExecutionEvent, ExecutionRequest};
    let create = format!("tools.ledger.create({{ name: \"{name}\", delay_ms: 400 }})");
    let code = match ending {
        Ending::Rejection => {
            format!("await Promise.all([{create}, Promise.reject(new Error('a sibling failed'))]);")
        }
        _ => format!("await {create};"),
    };
    let request = ExecutionRequest {
        code,
        session: Some("new".into()),
        timeout_ms: Some(match ending {
            Ending::Timeout => 200,
            _ => 30_000,
        }),
        ..Default::default()
    };
    match ending {
        Ending::Rejection | Ending::Timeout => {
            let r = d.client().await.execute(&request).await.unwrap();
            assert_ne!(r.status, Status::Ok, "{r:?}");
            r.session.expect("the session")
        }
        Ending::Cancel | Ending::HangUp => {
            // The execution's id and session come first; the call's start tells when it is
            // in flight.
            let before = session_ids(d).await;
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let mut client = d.client().await;
            let streaming = tokio::spawn(async move {
                client
                    .execute_streaming(&request, |event| {
                        let _ = tx.send(event.clone());
                    })
                    .await
            });
            let mut id = None;
            while let Some(event) = rx.recv().await {
                match event {
                    ExecutionEvent::Started { id: started, .. } => id = Some(started),
                    ExecutionEvent::ToolCallStarted { .. } => break,
                    _ => {}
                }
            }
            let id = id.expect("a started event");
            match ending {
                Ending::Cancel => {
                    let (status, body) = d
                        .client()
                        .await
                        .delete(&format!("/v1/executions/{id}"))
                        .await
                        .unwrap();
                    assert_eq!(status.as_u16(), 202, "{body}");
                    let r = streaming.await.unwrap().unwrap();
                    assert_eq!(r.status, Status::Cancelled, "{r:?}");
                    r.session.expect("the session")
                }
                _ => {
                    streaming.abort();
                    let _ = streaming.await;
                    // The one session the daemon lists now that it did not before.
                    let new: Vec<String> = session_ids(d)
                        .await
                        .into_iter()
                        .filter(|s| !before.contains(s))
                        .collect();
                    assert_eq!(new.len(), 1, "{new:?}");
                    // The agent runs again once the daemon has seen the hang-up (a client
                    // learns it from its cut connection; the daemon from its closed socket).
                    let session = new[0].clone();
                    let path = format!("/v1/sessions/{session}");
                    for _ in 0..200 {
                        let (_, body) = d.client().await.get(&path).await.unwrap();
                        let v: Value = serde_json::from_str(&body).unwrap();
                        if v["executions"][0]["status"] != json!("running") {
                            break;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                    session
                }
            }
        }
    }
}

/// The ids of the sessions the daemon lists for the caller.
async fn session_ids(d: &TestDaemon) -> Vec<String> {
    let (_, body) = d.client().await.get("/v1/sessions").await.unwrap();
    let v: Value = serde_json::from_str(&body).unwrap();
    v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A side effect in flight when its execution ends is not sent again by the re-run: the call
/// settles, its outcome is recorded, and the edited program in the same session gets it from
/// the journal (the ledger counts one record), whichever way the first run ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_when_its_execution_ends_is_replayed_not_sent_again() {
    let ledger = Arc::new(Ledger::default());
    let d = daemon(&ledger).await;
    for (ending, name) in [
        (Ending::Rejection, "rejected"),
        (Ending::Timeout, "timed-out"),
        (Ending::Cancel, "cancelled"),
        (Ending::HangUp, "hung-up"),
    ] {
        let session = end_with_a_call_in_flight(&d, name, ending).await;
        // At once: the re-run waits for the call to settle rather than send it again.
        let r = d
            .exec_in(
                &format!(
                    "const r: any = await tools.ledger.create({{ name: \"{name}\", delay_ms: 400 }}); r.name"
                ),
                &session,
                None,
            )
            .await
            .unwrap();
        assert_eq!(r.status, Status::Ok, "{ending:?}: {r:?}");
        assert_eq!(r.result, json!(name), "{ending:?}");
        assert!(r.tool_calls[0].replayed, "{ending:?}: {:?}", r.tool_calls);
        let sent = ledger
            .records()
            .iter()
            .filter(|rec| rec["name"] == json!(name))
            .count();
        assert_eq!(sent, 1, "{ending:?}: {:?}", ledger.records());
    }
}
