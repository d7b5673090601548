//! The journal's own tests: a session's run against the store and the intent log.
use super::*;

fn journal() -> (tempfile::TempDir, Arc<Journal>) {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite::SqliteStore::open(dir.path()).unwrap();
    let (log, _, _) = log::IntentLog::open(dir.path()).unwrap();
    let journal = Journal::new(Arc::new(store), log, JournalSettings::default());
    (dir, Arc::new(journal))
}

/// A new session of principal `p`.
fn new_session(journal: &Journal) -> SessionRow {
    let determinism = airlock_proto::Determinism {
        clock_ms: 1,
        seed: [0; 32],
    };
    journal.create_session("p", determinism).unwrap()
}

/// A session's records answer the same whether the execution read them at once or looks
/// each call up in the store (a session too large to read at once).
#[test]
fn records_read_at_once_and_looked_up_one_by_one_answer_alike() {
    let (_dir, journal) = journal();
    let row = new_session(&journal);
    let first = SessionRun::new(journal.clone(), &row, "e1".into(), ReplayMode::All);
    let args = serde_json::json!({ "b": 1, "a": [1, 2] });
    for _ in 0..2 {
        let (key, position) = first.key("t.x", &args);
        assert!(matches!(
            first.lookup(&key, position).unwrap(),
            Lookup::Live { resend: false, .. }
        ));
        first.sent(&key, false).unwrap();
        assert_eq!(first.outcome(&key, Ok("{\"n\":1}"), 7), None);
    }
    // The second occurrence was sent and never answered (the daemon died).
    let (key, _) = first.key("t.x", &args);
    first.sent(&key, false).unwrap();
    let row = journal.session(&row.id, "p").unwrap();
    assert_eq!(row.calls, 3);
    // Its row, its execution-less calls' rows and keys, and the two results.
    assert!(row.bytes > 14, "{}", row.bytes);
    let too_many = SessionRow {
        calls: PRELOAD_MAX_CALLS + 1,
        ..row.clone()
    };
    for (session, preloaded) in [(&row, true), (&too_many, false)] {
        let run = SessionRun::new(journal.clone(), session, "e2".into(), ReplayMode::All);
        assert_eq!(run.records.is_some(), preloaded);
        let mut answers = Vec::new();
        for _ in 0..4 {
            let (key, position) = run.key("t.x", &args);
            answers.push(run.lookup(&key, position).unwrap());
        }
        let replay = Lookup::Replay {
            result: "{\"n\":1}".into(),
            clock_ms: 7,
        };
        assert_eq!(answers[..2], [replay.clone(), replay], "{preloaded}");
        assert!(
            matches!(answers[2], Lookup::Live { resend: true, .. }),
            "{preloaded}: {:?}",
            answers[2]
        );
        assert!(
            matches!(answers[3], Lookup::Live { resend: false, .. }),
            "{preloaded}: {:?}",
            answers[3]
        );
    }
}

/// The intent log is folded by the call that takes it past its bound, not only when the
/// execution ends, so what a fold reads into memory stays bounded.
#[test]
fn a_large_log_is_folded_by_the_call_that_passes_the_bound() {
    let (_dir, journal) = journal();
    let row = new_session(&journal);
    let run = SessionRun::new(journal.clone(), &row, "e1".into(), ReplayMode::All);
    let big = format!(
        "\"{}\"",
        "x".repeat(usize::try_from(FOLD_AT_BYTES).unwrap())
    );
    let (key, _) = run.key("t.x", &serde_json::json!({}));
    run.sent(&key, false).unwrap();
    assert!(journal.log.unfolded_bytes() > 0);
    assert_eq!(run.outcome(&key, Ok(&big), 2), None);
    assert_eq!(journal.log.unfolded_bytes(), 0);
    let recorded = journal.store.records(&row.id).unwrap();
    assert!(
        matches!(&recorded[0].1.state, CallState::Ok { result, .. } if result.len() == big.len())
    );
}

/// A journal that cannot take a record (a full disk) fails the call before anything is
/// sent, with `journal_unavailable`, and health says why.
#[test]
fn a_full_disk_fails_the_call_before_it_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite::SqliteStore::open(dir.path()).unwrap();
    let full = std::fs::OpenOptions::new()
        .append(true)
        .open("/dev/full")
        .unwrap();
    let journal = Arc::new(Journal::new(
        Arc::new(store),
        log::IntentLog::on_file(full),
        JournalSettings::default(),
    ));
    let row = new_session(&journal);
    let run = SessionRun::new(journal.clone(), &row, "e1".into(), ReplayMode::All);
    let (key, position) = run.key("t.x", &serde_json::json!({}));
    assert!(matches!(
        run.lookup(&key, position).unwrap(),
        Lookup::Live { .. }
    ));
    let e = run.sent(&key, false).unwrap_err();
    assert_eq!(e.code, ToolErrorCode::JournalUnavailable);
    assert!(e.message.contains("No space"), "{}", e.message);
    let health = journal.health();
    assert_eq!(health.status, JournalStatus::Unavailable);
    assert!(health.error.unwrap().contains("No space"));
    assert_eq!(run.live.load(Ordering::Relaxed), 0);
}

/// The journal is the daemon's alone while it runs: a second daemon on the same directory
/// is refused with a message that says so.
#[test]
fn a_second_daemon_on_the_same_journal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = sqlite::SqliteStore::open(dir.path()).unwrap();
    let second = sqlite::SqliteStore::open(dir.path())
        .unwrap_err()
        .to_string();
    assert!(second.contains("second airlockd"), "{second}");
}

/// A call's idempotency key is the same whenever the same attempt is sent (again after
/// the daemon died, or after no answer came), and new when the call is made again after
/// an answer: `"replay": "none"`, or a retry of a failure the tool reported.
#[test]
fn a_call_made_again_on_purpose_gets_a_new_key_and_a_resent_one_keeps_its_own() {
    let (_dir, journal) = journal();
    let session = new_session(&journal);
    let args = serde_json::json!({ "a": 1 });
    let reported = ToolError::new(ToolErrorCode::UpstreamError, "busy").reported_by_tool();
    let timeout = ToolError::new(ToolErrorCode::Timeout, "no answer");
    // One execution making the call: the key it went out with (`None`: replayed), after
    // recording `outcome` (`None`: the daemon died while it was in flight).
    let execution = |replay, outcome: Option<Result<&str, &ToolError>>| {
        let row = journal.session(&session.id, "p").unwrap();
        let run = SessionRun::new(journal.clone(), &row, "e".into(), replay);
        let (key, position) = run.key("t.x", &args);
        match run.lookup(&key, position).unwrap() {
            Lookup::Replay { .. } => None,
            Lookup::Live {
                idempotency_key, ..
            } => {
                run.sent(&key, false).unwrap();
                if let Some(outcome) = outcome {
                    assert_eq!(run.outcome(&key, outcome, 1), None);
                }
                Some(idempotency_key)
            }
        }
    };
    let first = execution(ReplayMode::All, Some(Ok("1"))).unwrap();
    assert_eq!(execution(ReplayMode::All, Some(Ok("1"))), None);
    let again = execution(ReplayMode::None, Some(Ok("2"))).unwrap();
    assert_ne!(again, first, "made again on purpose");
    let in_flight = execution(ReplayMode::None, None).unwrap();
    assert!(![&first, &again].contains(&&in_flight));
    assert_eq!(
        execution(ReplayMode::All, Some(Err(&timeout))),
        Some(in_flight.clone()),
        "sent again after the daemon died"
    );
    assert_eq!(
        execution(ReplayMode::All, Some(Err(&reported))),
        Some(in_flight.clone()),
        "sent again after no answer came"
    );
    let retried = execution(ReplayMode::All, Some(Ok("3"))).unwrap();
    assert!(
        ![&first, &again, &in_flight].contains(&&retried),
        "a retry of a failure the tool reported"
    );
    assert_eq!(execution(ReplayMode::All, None), None);
    // The first attempt's key is what it always was, so sessions recorded before attempts
    // were counted keep their keys.
    let run = SessionRun::new(journal.clone(), &session, "e".into(), ReplayMode::All);
    let (key, _) = run.key("t.x", &args);
    let mut h = Sha256::new();
    for part in [
        session.id.as_bytes(),
        b"t.x",
        key.args_hash.as_bytes(),
        b"0",
    ] {
        h.update(part);
        h.update([0]);
    }
    assert_eq!(
        first,
        format!("airlock-{}", &canonical::hex(&h.finalize())[..32])
    );
}
