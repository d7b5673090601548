//! The SQLite store's own tests.
use super::schema::SCHEMA;
use super::*;
use crate::journal::store::{Bounds, Full};
use crate::journal::usage;

/// Bounds no test here reaches.
const WIDE: Bounds = Bounds {
    total_bytes: 1 << 40,
    principal_bytes: 1 << 40,
    session_bytes: 1 << 40,
    principal_sessions: 1000,
};

fn room() -> Room<'static> {
    Room {
        bounds: WIDE,
        busy: &[],
    }
}

fn store() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("j")).unwrap();
    (dir, store)
}

fn session(id: &str, used_ms: u64) -> SessionRow {
    SessionRow {
        id: id.into(),
        principal: "local".into(),
        created_ms: used_ms,
        used_ms,
        clock_ms: 5,
        seed: [9; 32],
        bytes: 0,
        calls: 0,
    }
}

fn sent(s: &SqliteStore, session: &str, key: &CallKey, execution: &str, read_only: bool) {
    s.apply(
        &[LogRecord::Sent {
            session: session.into(),
            key: key.clone(),
            execution: execution.into(),
            read_only,
            at_ms: 2,
        }],
        room(),
    )
    .unwrap();
}

fn answered(s: &SqliteStore, session: &str, key: &CallKey, result: &str, clock_ms: u64) {
    s.apply(
        &[LogRecord::Outcome {
            session: session.into(),
            key: key.clone(),
            outcome: Outcome::Ok {
                result: result.into(),
                clock_ms,
            },
            at_ms: 3,
        }],
        room(),
    )
    .unwrap();
}

/// Execution `id` of session `s1`, running.
fn running(id: &str) -> ExecutionRow {
    ExecutionRow {
        id: id.into(),
        session: "s1".into(),
        principal: "local".into(),
        status: ExecutionState::Running,
        language: "typescript".into(),
        code: "1".into(),
        timeout_ms: None,
        replay: "all".into(),
        started_ms: 1,
        finished_ms: None,
        replayed_calls: 0,
        live_calls: 0,
        resumed_by: None,
    }
}

fn key(n: u32) -> CallKey {
    CallKey {
        tool: "t.x".into(),
        args_hash: "h".into(),
        occurrence: n,
    }
}

#[test]
fn the_file_is_private_and_a_call_goes_from_sent_to_ok() {
    let (dir, s) = store();
    let mode = std::fs::metadata(dir.path().join("j").join(FILE_NAME))
        .unwrap()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    s.create_session(&session("s1", 1), room()).unwrap();
    assert_eq!(s.lookup("s1", &key(0)).unwrap(), None);
    sent(&s, "s1", &key(0), "ex1", true);
    assert_eq!(
        s.lookup("s1", &key(0)).unwrap().unwrap().state,
        CallState::Sent
    );
    answered(&s, "s1", &key(0), "{\"n\":1}", 77);
    let ok = CallState::Ok {
        result: "{\"n\":1}".into(),
        clock_ms: 77,
    };
    let row = s.lookup("s1", &key(0)).unwrap().unwrap();
    assert_eq!(row.state, ok);
    assert!(row.read_only);
    assert_eq!(row.sends, 1);
    assert_eq!(s.records("s1").unwrap(), vec![(key(0), row.clone())]);
    // The session's row, the call's row (64 and its key) and its result.
    let counted = usage::SESSION_ROW_BYTES + 64 + 3 + 1 + 3;
    assert_eq!(s.session("s1").unwrap().unwrap().bytes, counted + 7);
    // Sent again (a replay asked for fresh reads): the old result no longer counts.
    sent(&s, "s1", &key(0), "ex2", true);
    let row = s.lookup("s1", &key(0)).unwrap().unwrap();
    assert_eq!((row.state, row.sends), (CallState::Sent, 2));
    assert_eq!(s.session("s1").unwrap().unwrap().bytes, counted);
    let other = CallKey {
        args_hash: "other".into(),
        ..key(0)
    };
    assert_eq!(s.lookup("s1", &other).unwrap(), None);
}

/// Every state is kept as the word journals have always held, and read back from it: a row an
/// earlier daemon wrote reads the same; a word that names no state is an error, not a guess.
#[test]
fn execution_states_are_kept_as_their_words() {
    let (_dir, s) = store();
    s.create_session(&session("s1", 1), room()).unwrap();
    for (n, state) in ExecutionState::ALL.into_iter().enumerate() {
        let id = format!("ex{n}");
        s.begin_execution(&running(&id), room()).unwrap();
        s.with(|c| {
            c.execute(
                "UPDATE executions SET status = ?2 WHERE id = ?1",
                params![id, state.as_str()],
            )
        })
        .unwrap();
        assert_eq!(s.execution(&id).unwrap().unwrap().status, state);
        let word: String = s
            .with(|c| {
                c.query_row("SELECT status FROM executions WHERE id = ?1", [&id], |r| {
                    r.get(0)
                })
            })
            .unwrap();
        assert_eq!(ExecutionState::parse(&word), Some(state));
        assert_eq!(
            serde_json::to_value(state).unwrap(),
            serde_json::json!(state.as_str())
        );
    }
    s.with(|c| {
        c.execute(
            "UPDATE executions SET status = 'paused' WHERE id = 'ex0'",
            [],
        )
    })
    .unwrap();
    let error = s.execution("ex0").unwrap_err().to_string();
    assert!(
        error.contains("`paused` is not an execution's status"),
        "{error}"
    );
}

#[test]
fn running_executions_become_interrupted_and_deleting_a_session_takes_everything() {
    let (_dir, s) = store();
    s.create_session(&session("s1", 1), room()).unwrap();
    s.begin_execution(&running("ex1"), room()).unwrap();
    assert_eq!(s.interrupt_running().unwrap(), 1);
    let listed = s
        .executions("local", Some(ExecutionState::Interrupted), 10)
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].code, "1");
    assert!(s.executions("other", None, 10).unwrap().is_empty());
    sent(&s, "s1", &key(0), "ex1", false);
    assert!(s.delete_session("s1").unwrap());
    assert!(!s.delete_session("s1").unwrap());
    // What the intent log still held for it is dropped when folded, not an error.
    sent(&s, "s1", &key(1), "ex1", false);
    answered(&s, "s1", &key(1), "1", 0);
    assert!(s.records("s1").unwrap().is_empty());
    assert_eq!(s.execution("ex1").unwrap(), None);
    assert_eq!(s.lookup("s1", &key(0)).unwrap(), None);
}

#[test]
fn only_the_last_finished_execution_keeps_its_call_order() {
    let (_dir, s) = store();
    s.create_session(&session("s1", 1), room()).unwrap();
    assert!(s.last_call_order("s1").unwrap().is_empty());
    let order = |n: usize| -> Vec<(String, String)> {
        (0..n).map(|i| ("t.x".into(), format!("h{i}"))).collect()
    };
    for (id, n) in [("e1", 3), ("e2", 2)] {
        s.begin_execution(&running(id), room()).unwrap();
        s.finish_execution(id, ExecutionState::Ok, 10, 0, 0, &order(n))
            .unwrap();
        assert_eq!(s.last_call_order("s1").unwrap(), order(n));
    }
    let kept: i64 = s
        .with(|c| {
            c.query_row(
                "SELECT count(*) FROM executions WHERE call_order IS NOT NULL",
                [],
                |r| r.get(0),
            )
        })
        .unwrap();
    assert_eq!(kept, 1);
}

/// The size as the two `PRAGMA`s say it now, bypassing what `size_bytes` keeps.
fn size_now(s: &SqliteStore) -> u64 {
    s.with(size_of).unwrap()
}

#[test]
fn the_size_is_read_again_when_rows_change() {
    let (_dir, s) = store();
    let empty = s.size_bytes().unwrap();
    assert_eq!(empty, size_now(&s));
    s.create_session(&session("big", 1), room()).unwrap();
    sent(&s, "big", &key(0), "e", false);
    answered(&s, "big", &key(0), &"x".repeat(64 * 1024), 0);
    let grown = s.size_bytes().unwrap();
    assert!(grown > empty, "{grown} after 64 KiB, {empty} before");
    assert_eq!(grown, size_now(&s));
    assert_eq!(s.size_bytes().unwrap(), grown);
    // Rows deleted: the pages stay in the file (no VACUUM), and the size still agrees.
    assert!(s.delete_session("big").unwrap());
    assert_eq!(s.size_bytes().unwrap(), size_now(&s));
}

/// Session `id` of `principal`, last used at `used_ms`.
fn session_of(id: &str, principal: &str, used_ms: u64) -> SessionRow {
    SessionRow {
        principal: principal.into(),
        ..session(id, used_ms)
    }
}

/// A session of `principal` with one result of `bytes` bytes recorded.
fn filled(s: &SqliteStore, id: &str, principal: &str, used_ms: u64, bytes: usize) {
    s.create_session(&session_of(id, principal, used_ms), room())
        .unwrap();
    sent(s, id, &key(0), "e", false);
    answered(s, id, &key(0), &"x".repeat(bytes), 0);
}

fn bytes_of(s: &SqliteStore, id: &str) -> u64 {
    s.session(id).unwrap().unwrap().bytes
}

/// The sweep takes stale sessions, then a principal's own oldest past its bound, and never a
/// busy one, one that waits, or another principal's to make room.
#[test]
fn eviction_takes_stale_then_the_offenders_oldest_but_never_a_busy_one() {
    let (_dir, s) = store();
    for (id, principal, used) in [
        ("old", "a", 1),
        ("b1", "b", 40),
        ("mid", "a", 50),
        ("new", "a", 100),
    ] {
        filled(&s, id, principal, used, 1000);
    }
    let bounds = Bounds {
        principal_bytes: 2500,
        ..WIDE
    };
    // "old" is stale but busy: kept; "mid" goes to bring `a` under its bound; `b` is `b`'s.
    let busy = ["old".to_owned()];
    let evicted = s
        .evict(
            10,
            Room {
                bounds,
                busy: &busy,
            },
        )
        .unwrap();
    assert_eq!(evicted, vec!["mid".to_owned()]);
    assert!(s.session("b1").unwrap().is_some());
    // Over the journal's bound with each principal within its own: the one keeping the
    // most gives first.
    let bounds = Bounds {
        total_bytes: 3000,
        ..WIDE
    };
    let evicted = s.evict(0, Room { bounds, busy: &[] }).unwrap();
    assert_eq!(evicted, vec!["old".to_owned()]);
    assert!(s.session("b1").unwrap().is_some());
    assert_eq!(
        s.evict(1000, room()).unwrap(),
        vec!["b1".to_owned(), "new".to_owned()]
    );
}

/// A write past its principal's bound deletes that principal's own oldest idle session, never
/// another's; past what that can free, or past the session's bound or the count of
/// sessions, it is refused.
#[test]
fn a_write_makes_room_only_from_its_own_principal() {
    let (_dir, s) = store();
    filled(&s, "b1", "b", 1, 2000);
    filled(&s, "a1", "a", 2, 2000);
    filled(&s, "a2", "a", 3, 2000);
    let a = |n: u64| Bounds {
        principal_bytes: n,
        total_bytes: 1 << 30,
        session_bytes: 1 << 30,
        principal_sessions: 3,
    };
    let (_, used) = s.usage("a").unwrap();
    // Room for a new session of `a`: its oldest goes, `b`'s stays although older.
    s.create_session(
        &session_of("a3", "a", 4),
        Room {
            bounds: a(used),
            busy: &[],
        },
    )
    .unwrap();
    assert!(s.session("a1").unwrap().is_none());
    assert!(s.session("b1").unwrap().is_some());
    // Nothing of `a` may go (busy): refused, naming the key.
    let busy = ["a2".to_owned(), "a3".to_owned()];
    let (_, used) = s.usage("a").unwrap();
    let e = s
        .create_session(
            &session_of("a4", "a", 5),
            Room {
                bounds: a(used),
                busy: &busy,
            },
        )
        .unwrap_err();
    assert!(matches!(e, StoreError::Full(Full::Principal { .. })), "{e}");
    assert!(e.to_string().contains("max_principal_size"), "{e}");
    // The journal's bound, `b` keeping most of it: `a` is refused, `b` untouched.
    let total = Bounds {
        total_bytes: s.usage("a").unwrap().1 + s.usage("b").unwrap().1,
        ..WIDE
    };
    let e = s
        .create_session(
            &session_of("a4", "a", 5),
            Room {
                bounds: total,
                busy: &busy,
            },
        )
        .unwrap_err();
    assert!(matches!(e, StoreError::Full(Full::Total { .. })), "{e}");
    assert!(s.session("b1").unwrap().is_some());
    // The count of sessions.
    let two = Bounds {
        principal_sessions: 2,
        ..WIDE
    };
    let e = s
        .create_session(
            &session_of("a4", "a", 5),
            Room {
                bounds: two,
                busy: &[],
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("max_sessions"), "{e}");
    // The session's own bound: a program that would pass it.
    let small = Bounds {
        session_bytes: bytes_of(&s, "a3") + 100,
        ..WIDE
    };
    let mut big = running("e9");
    big.session = "a3".into();
    big.principal = "a".into();
    big.code = "x".repeat(200);
    let e = s
        .begin_execution(
            &big,
            Room {
                bounds: small,
                busy: &[],
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("max_session_size"), "{e}");
}

/// Everything a session keeps counts (its row, results, code, responses, waits, answers,
/// approvals), and leaves the count when it is deleted or replaced.
#[test]
fn everything_a_session_keeps_counts() {
    let (_dir, s) = store();
    s.create_session(&session("s1", 1), room()).unwrap();
    let empty = bytes_of(&s, "s1");
    assert_eq!(empty, usage::SESSION_ROW_BYTES);
    let mut e = running("e1");
    e.code = "c".repeat(10_000);
    s.begin_execution(&e, room()).unwrap();
    let with_code = bytes_of(&s, "s1");
    assert!(with_code >= empty + 10_000, "{with_code}");
    s.save_response("e1", &"r".repeat(5000), &"v".repeat(5000), 99, room())
        .unwrap();
    assert!(bytes_of(&s, "s1") >= with_code + 10_000);
    // Replaced by a smaller one: counted down.
    s.save_response("e1", "{}", "", 99, room()).unwrap();
    assert!(bytes_of(&s, "s1") < with_code + 200);
    s.save_waiting(&waiting("e1", 100), 16, room()).unwrap();
    s.finish_execution("e1", ExecutionState::Waiting, 2, 0, 0, &[])
        .unwrap();
    let before = bytes_of(&s, "s1");
    let answer = AnswerRow {
        call: 1,
        tool: "t".into(),
        result: Ok("a".repeat(20_000)),
        redactions: "[]".into(),
        clock_ms: 3,
    };
    assert!(
        s.claim_waiting("e1", std::slice::from_ref(&answer), room())
            .unwrap()
    );
    assert!(bytes_of(&s, "s1") >= before + 20_000);
    assert_eq!(s.answers("e1").unwrap(), vec![answer]);
    assert_eq!(s.answered("e1").unwrap(), vec![(1, "t".to_owned())]);
    // It ended: its wait, answers and code go (the code becomes its hash).
    s.finish_execution("e1", ExecutionState::Ok, 3, 0, 0, &[])
        .unwrap();
    s.drop_waiting("e1").unwrap();
    assert!(s.answers("e1").unwrap().is_empty());
    let code = s.execution("e1").unwrap().unwrap().code;
    assert!(
        code.starts_with(CODE_HASH_PREFIX) && code.len() == 71,
        "{code}"
    );
    assert!(bytes_of(&s, "s1") < empty + 1000, "{}", bytes_of(&s, "s1"));
    // Deleting the session takes everything, counted or not.
    assert!(s.delete_session("s1").unwrap());
    assert_eq!(s.usage("local").unwrap(), (0, 0));
}

/// A result the principal's bound cannot take is not kept: the call stays `sent`.
#[test]
fn a_result_past_the_bound_is_not_kept() {
    let (_dir, s) = store();
    s.create_session(&session("s1", 1), room()).unwrap();
    sent(&s, "s1", &key(0), "e", false);
    let tight = Bounds {
        principal_bytes: 2000,
        ..WIDE
    };
    s.apply(
        &[LogRecord::Outcome {
            session: "s1".into(),
            key: key(0),
            outcome: Outcome::Ok {
                result: "x".repeat(4000),
                clock_ms: 1,
            },
            at_ms: 3,
        }],
        Room {
            bounds: tight,
            busy: &[],
        },
    )
    .unwrap();
    assert_eq!(
        s.lookup("s1", &key(0)).unwrap().unwrap().state,
        CallState::Sent
    );
    assert!(bytes_of(&s, "s1") < 2000);
}

/// A file written by a daemon of schema version 1 (no `calls.attempt`, results counted only)
/// or 2 (no `sessions.bytes`) is brought up to date when this one opens it: its records kept,
/// each call at its first attempt, and everything it holds counted.
#[test]
fn a_file_of_an_older_version_is_upgraded_and_counted_when_opened() {
    for version in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        {
            let c = Connection::open(path.join(FILE_NAME)).unwrap();
            // The older tables: the schema without `bytes` and the answers (and, for version
            // 1, without `attempt`).
            let mut old = SCHEMA.replace(",\n    bytes INTEGER NOT NULL DEFAULT 128", "");
            if version == 1 {
                let attempt = old.find("    -- The attempt its next send is").unwrap();
                let end = attempt + old[attempt..].find("DEFAULT 0,\n").unwrap() + 11;
                old.replace_range(attempt..end, "");
            }
            let old = &old[..old.find("-- The client's answers").unwrap()];
            c.execute_batch(&format!("{old} PRAGMA user_version = {version};"))
                .unwrap();
            let call = if version == 1 {
                "INSERT INTO calls VALUES ('s1', 't.x', 'h', 0, 'ok', 'xxxxxxxxxx', 1, 0, 1, 'e', 1);"
            } else {
                "INSERT INTO calls (session, tool, args_hash, occurrence, state, result, clock_ms, read_only, sends, execution, updated_ms) VALUES ('s1', 't.x', 'h', 0, 'ok', 'xxxxxxxxxx', 1, 0, 1, 'e', 1);"
            };
            c.execute_batch(&format!(
                "INSERT INTO sessions VALUES ('s1', 'local', 1, 1, 1, x'00'); {call}"
            ))
            .unwrap();
        }
        let s = SqliteStore::open(&path).unwrap();
        let counted = bytes_of(&s, "s1");
        assert_eq!(
            counted,
            usage::SESSION_ROW_BYTES + 64 + 3 + 1 + 1 + 10,
            "version {version}"
        );
        let row = s.lookup("s1", &key(0)).unwrap().unwrap();
        assert_eq!(row.attempt, 0, "version {version}");
        // An answer makes the next send a new attempt; a failure without one does not.
        sent(&s, "s1", &key(0), "e2", false);
        answered(&s, "s1", &key(0), "2", 8);
        assert_eq!(s.lookup("s1", &key(0)).unwrap().unwrap().attempt, 1);
        sent(&s, "s1", &key(0), "e3", false);
        s.apply(
            &[LogRecord::Outcome {
                session: "s1".into(),
                key: key(0),
                outcome: Outcome::Unsettled,
                at_ms: 4,
            }],
            room(),
        )
        .unwrap();
        let row = s.lookup("s1", &key(0)).unwrap().unwrap();
        assert_eq!(
            (row.state, row.attempt, row.sends),
            (CallState::Failed, 1, 3)
        );
        assert!(bytes_of(&s, "s1") > usage::SESSION_ROW_BYTES);
    }
}

fn waiting(execution: &str, expires_ms: u64) -> WaitingRow {
    WaitingRow {
        execution: execution.into(),
        principal: "local".into(),
        client_tools: "[]".into(),
        answers: "{}".into(),
        pending: "[]".into(),
        peer: "{}".into(),
        clock_ms: 5,
        seed: [3; 32],
        expires_ms,
    }
}

/// A waiting execution is taken by one request at a time, counted per principal, kept by
/// eviction, waits again after a restart cut off its re-run, and expires.
#[test]
fn waiting_executions_are_claimed_once_survive_restarts_and_expire() {
    let (_dir, s) = store();
    s.create_session(&session("s1", 1), room()).unwrap();
    for id in ["w1", "w2"] {
        s.begin_execution(&running(id), room()).unwrap();
        s.save_waiting(&waiting(id, 100), 16, room()).unwrap();
        s.finish_execution(id, ExecutionState::Waiting, 2, 0, 0, &[])
            .unwrap();
    }
    assert_eq!(s.count_waiting("local").unwrap(), 2);
    assert_eq!(s.waiting_totals().unwrap(), (2, 0));
    assert_eq!(s.waiting("w1").unwrap().unwrap().seed, [3; 32]);
    // Kept whatever its age: its re-run replays what the session recorded.
    let nothing = Bounds {
        total_bytes: 0,
        ..WIDE
    };
    assert!(
        s.evict(
            u64::MAX,
            Room {
                bounds: nothing,
                busy: &[]
            }
        )
        .unwrap()
        .is_empty()
    );
    let answer = AnswerRow {
        call: 1,
        tool: "t".into(),
        result: Err("{}".into()),
        redactions: "[]".into(),
        clock_ms: 3,
    };
    assert!(
        s.claim_waiting("w1", std::slice::from_ref(&answer), room())
            .unwrap()
    );
    assert!(
        !s.claim_waiting("w1", &[], room()).unwrap(),
        "claimed twice"
    );
    assert_eq!(s.count_waiting("local").unwrap(), 1);
    // The daemon died during the re-run: it waits again, its answers kept.
    assert_eq!(s.interrupt_running().unwrap(), 0);
    assert_eq!(
        s.execution("w1").unwrap().unwrap().status,
        ExecutionState::Waiting
    );
    assert_eq!(s.answers("w1").unwrap(), vec![answer]);
    assert!(s.end_waiting("w2", ExecutionState::Cancelled, 50).unwrap());
    assert!(!s.end_waiting("w2", ExecutionState::Cancelled, 50).unwrap());
    assert_eq!(s.expire_waiting(99).unwrap(), Vec::<String>::new());
    assert_eq!(s.expire_waiting(101).unwrap(), vec!["w1".to_owned()]);
    assert_eq!(
        s.execution("w1").unwrap().unwrap().status,
        ExecutionState::Expired
    );
    assert!(s.waiting("w1").unwrap().is_none());
}

/// An approval is asked for once per call, decided once, expires undecided, and its
/// execution's kept response goes with its time.
#[test]
fn approvals_are_asked_once_decided_once_and_expire() {
    let (_dir, s) = store();
    s.create_session(&session("s1", 1), room()).unwrap();
    s.begin_execution(&running("e1"), room()).unwrap();
    let ask = |id: &str, call: u32| ApprovalRow {
        id: id.into(),
        execution: "e1".into(),
        principal: "local".into(),
        call,
        tool: "pay.send".into(),
        args: "{}".into(),
        args_hash: "h".into(),
        excerpt: None,
        line: Some(2),
        requested_ms: 10,
        expires_ms: 20,
        decision: None,
        decided_by: None,
        reason: None,
        decided_ms: None,
    };
    let first = s.ask_approvals(&[ask("a1", 1), ask("a2", 2)]).unwrap();
    assert_eq!(
        first.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        ["a1", "a2"]
    );
    // Asked again by a re-run: the same approval, not a new one.
    let again = s.ask_approvals(&[ask("a9", 1)]).unwrap();
    assert_eq!(again[0].id, "a1");
    assert_eq!(s.undecided_approvals(None).unwrap().len(), 2);
    assert_eq!(s.undecided_approvals(Some("other")).unwrap().len(), 0);
    assert_eq!(s.waiting_totals().unwrap().1, 2);
    assert!(
        s.decide_approval("a1", "approved", Some("alice"), None, 15)
            .unwrap()
    );
    assert!(
        !s.decide_approval("a1", "denied", Some("bob"), None, 16)
            .unwrap()
    );
    let a1 = s.approval("a1").unwrap().unwrap();
    assert_eq!(
        (a1.decision.as_deref(), a1.decided_by.as_deref()),
        (Some("approved"), Some("alice"))
    );
    let expired = s.expire_approvals(21).unwrap();
    assert_eq!(
        expired.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        ["a2"]
    );
    assert_eq!(
        s.approval("a2").unwrap().unwrap().decision.as_deref(),
        Some("expired")
    );
    s.save_response("e1", "{}", "", 30, room()).unwrap();
    assert!(s.response("e1").unwrap().is_some());
    s.expire_waiting(31).unwrap();
    assert!(s.response("e1").unwrap().is_none());
}

#[test]
fn the_session_store_keeps_values_within_its_bounds_and_counts_them() {
    use crate::journal::session_store::{MAX_BYTES, MAX_KEYS, StoreBound};
    let (_dir, s) = store();
    s.create_session(&session("s1", 1), room()).unwrap();
    s.create_session(&session("s2", 1), room()).unwrap();
    let empty = bytes_of(&s, "s1");
    assert_eq!(s.store_value("s1", "k").unwrap(), None);
    s.set_store_value("s1", "k", "[1,2]", 5).unwrap().unwrap();
    assert_eq!(s.store_value("s1", "k").unwrap().as_deref(), Some("[1,2]"));
    assert_eq!(s.store_value("s2", "k").unwrap(), None, "per session");
    assert!(bytes_of(&s, "s1") >= empty + 6, "counted in the session");
    s.set_store_value("s1", "k", "3", 6).unwrap().unwrap();
    assert_eq!(
        s.store_values("s1").unwrap(),
        [("k".to_owned(), "3".to_owned())]
    );
    for i in 1..MAX_KEYS {
        s.set_store_value("s1", &format!("k{i}"), "0", 7)
            .unwrap()
            .unwrap();
    }
    assert!(matches!(
        s.set_store_value("s1", "one-more", "0", 8).unwrap(),
        Err(StoreBound::TooManyKeys { .. })
    ));
    // An existing key may still be written.
    s.set_store_value("s1", "k1", "1", 8).unwrap().unwrap();
    let big = "x".repeat(usize::try_from(MAX_BYTES).unwrap() / 2);
    s.set_store_value("s2", "a", &big, 9).unwrap().unwrap();
    assert!(matches!(
        s.set_store_value("s2", "b", &big, 9).unwrap(),
        Err(StoreBound::SessionFull { .. })
    ));
    // Deleting the session takes its store.
    assert!(s.delete_session("s1").unwrap());
    assert!(s.store_values("s1").unwrap().is_empty());
}
