//! The session store: `store.set(key, value)` in one execution, `await store.get(key)` in the
//! next of the same session (TypeScript and Python), kept in the journal, replayed like a tool
//! result, bounded with errors that name the bound, scanned for secrets, readable through
//! `GET /v1/sessions/<id>/store` by its own principal only, and an error outside a session.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{
    ExecutionRequest, ExecutionResponse, ReplayMode, RequestLanguage, Status,
};
use airlock_tests::{DaemonOptions, TestDaemon, another_principal};
use serde_json::{Value, json};

async fn run(
    d: &TestDaemon,
    language: RequestLanguage,
    code: &str,
    session: &str,
    replay: Option<ReplayMode>,
) -> ExecutionResponse {
    d.client()
        .await
        .execute(&ExecutionRequest {
            code: code.to_owned(),
            language,
            session: Some(session.to_owned()),
            replay,
            ..Default::default()
        })
        .await
        .unwrap()
}

async fn store_of(d: &TestDaemon, session: &str) -> (u16, Value) {
    let (status, text) = d
        .client()
        .await
        .get(&format!("/v1/sessions/{session}/store"))
        .await
        .unwrap();
    (status.as_u16(), serde_json::from_str(&text).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_set_in_one_execution_is_read_in_the_next_typescript() {
    let d = TestDaemon::start().await;
    let ts = RequestLanguage::Typescript;
    let first = run(
        &d,
        ts,
        "await store.set('issues', { open: [1, 2, 3], note: 'kept' }); 'stored'",
        "new",
        None,
    )
    .await;
    assert_eq!(first.status, Status::Ok, "{:?}", first.error);
    let session = first.session.clone().unwrap();
    let second = run(
        &d,
        ts,
        "const v: any = await store.get('issues'); ({ v, missing: await store.get('nothing') })",
        &session,
        None,
    )
    .await;
    assert_eq!(second.status, Status::Ok, "{:?}", second.error);
    assert_eq!(
        second.result,
        json!({"v": {"open": [1, 2, 3], "note": "kept"}, "missing": null})
    );
    let (status, body) = store_of(&d, &session).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["keys"], json!(1));
    assert_eq!(
        body["values"]["issues"],
        json!({"open": [1, 2, 3], "note": "kept"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_set_in_one_execution_is_read_in_the_next_python() {
    let d = TestDaemon::start().await;
    let py = RequestLanguage::Python;
    let first = run(
        &d,
        py,
        "await store.set('rows', {'a': [1, 2]})\n'stored'",
        "new",
        None,
    )
    .await;
    assert_eq!(first.status, Status::Ok, "{:?}", first.error);
    let session = first.session.clone().unwrap();
    let second = run(
        &d,
        py,
        "v = await store.get('rows')\nw = await store.get(key='none')\n[v, w]",
        &session,
        None,
    )
    .await;
    assert_eq!(second.status, Status::Ok, "{:?}", second.error);
    assert_eq!(second.result, json!([{"a": [1, 2]}, null]));
    // The two languages share a session's store.
    let ts = run(
        &d,
        RequestLanguage::Typescript,
        "await store.get('rows')",
        &session,
        Some(ReplayMode::None),
    )
    .await;
    assert_eq!(ts.result, json!({"a": [1, 2]}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_run_replays_the_values_it_read() {
    let d = TestDaemon::start().await;
    let ts = RequestLanguage::Typescript;
    let first = run(&d, ts, "await store.set('n', 1)", "new", None).await;
    let session = first.session.clone().unwrap();
    let read = "await store.get('n')";
    let r1 = run(&d, ts, read, &session, None).await;
    assert_eq!(r1.result, json!(1));
    run(&d, ts, "await store.set('n', 2)", &session, None).await;
    // The same read again in the session: answered from the record, as a tool's result is.
    let replayed = run(&d, ts, read, &session, None).await;
    assert_eq!(replayed.result, json!(1), "{replayed:?}");
    assert_eq!(replayed.replayed_calls, 1);
    // Without replay it reads the store as it is now.
    let live = run(&d, ts, read, &session, Some(ReplayMode::None)).await;
    assert_eq!(live.result, json!(2), "{live:?}");
    assert_eq!(live.replayed_calls, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounds_are_refused_with_errors_that_name_them() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.limits.max_tool_calls = 5000;
    }))
    .await;
    let ts = RequestLanguage::Typescript;
    let code = r#"
const errors: any[] = [];
async function attempt(f: () => Promise<unknown>) {
  try { await f(); errors.push(null); } catch (e: any) { errors.push([e.code, e.message, e.hint]); }
}
await attempt(() => store.set("k".repeat(300), 1));
await attempt(() => store.set("", 1));
await attempt(() => store.set("big", "x".repeat(1100000)));
for (let i = 0; i < 1000; i++) await store.set("key" + i, i);
await attempt(() => store.set("one-too-many", 1));
await attempt(() => store.set("key7", "overwriting is fine"));
errors
"#;
    let r = run(&d, ts, code, "new", None).await;
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    let errors = r.result.as_array().unwrap();
    let message = |i: usize| errors[i][1].as_str().unwrap().to_owned();
    assert_eq!(errors[0][0], json!("invalid_arguments"));
    assert!(
        message(0).contains("over the 256-byte limit"),
        "{}",
        message(0)
    );
    assert!(message(1).contains("empty"), "{}", message(1));
    assert!(
        message(2).contains("over the 1048576-byte limit of one value"),
        "{}",
        message(2)
    );
    assert!(
        errors[2][2].as_str().unwrap().contains("split the value"),
        "{:?}",
        errors[2]
    );
    assert!(
        message(3).contains("keeps 1000 store keys, its limit"),
        "{}",
        message(3)
    );
    assert!(
        errors[3][2]
            .as_str()
            .unwrap()
            .contains("\"session\": \"new\""),
        "{:?}",
        errors[3]
    );
    assert_eq!(errors[4], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_a_session_the_store_is_an_error_naming_the_fix() {
    let d = TestDaemon::start().await;
    let r = d
        .exec("try { await store.get('k') } catch (e: any) { [e.code, e.message, e.hint] }")
        .await;
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    let message = r.result[1].as_str().unwrap();
    assert!(message.contains("per session"), "{message}");
    let hint = r.result[2].as_str().unwrap();
    assert!(hint.contains("\"session\": \"new\""), "{hint}");
    // Uncaught, in Python too, the program's error says it.
    let mut c = d.client().await;
    let py = c
        .execute(&ExecutionRequest {
            code: "await store.set('k', 1)".into(),
            language: RequestLanguage::Python,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(py.status, Status::Error);
    let error = py.error.unwrap();
    assert!(error.message.contains("per session"), "{error:?}");
    assert!(
        error
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("\"session\": \"new\""),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_shaped_value_is_redacted_before_it_is_kept() {
    let d = TestDaemon::start().await;
    let r = run(
        &d,
        RequestLanguage::Typescript,
        "await store.set('token', 'token: gh' + 'p_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES'); await store.get('token')",
        "new",
        None,
    )
    .await;
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    assert_eq!(r.result, json!("token: [REDACTED:github-token]"));
    let session = r.session.clone().unwrap();
    let key = run(
        &d,
        RequestLanguage::Typescript,
        "try { await store.set('gh' + 'p_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES', 1) } catch (e: any) { e.message }",
        &session,
        None,
    )
    .await;
    let message = key.result.as_str().unwrap();
    assert!(
        message.contains("looks like a secret (github-token)"),
        "{message}"
    );
    let (_, body) = store_of(&d, &session).await;
    assert_eq!(body["keys"], json!(1), "{body}");
    assert_eq!(
        body["values"]["token"],
        json!("token: [REDACTED:github-token]")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principal_cannot_read_a_sessions_store() {
    if !another_principal::can_run("another_principal_cannot_read_a_sessions_store") {
        return;
    }
    let d = TestDaemon::start_with(
        DaemonOptions::default().policy(|p| another_principal::admit(p, &["test.*"])),
    )
    .await;
    another_principal::open_socket(&d);
    let mine = run(
        &d,
        RequestLanguage::Typescript,
        "await store.set('mine', 'private')",
        "new",
        None,
    )
    .await;
    let session = mine.session.unwrap();
    let (status, body) = another_principal::get(&d, &format!("/v1/sessions/{session}/store")).await;
    assert_eq!(status, 404, "{body}");
    assert!(!body.contains("private"), "{body}");
    let (status, _) = another_principal::get(&d, "/v1/sessions/ses_none/store").await;
    assert_eq!(status, 404);
    assert_eq!(store_of(&d, &session).await.0, 200);
}
