//! Approvals, end to end: a principal's `approve` patterns make a call wait for a person's
//! decision. The execution waits holding no worker (`pending_approvals`, with the code around
//! the call); an approver the policy names decides (`POST /v1/approvals/<id>`), and the
//! execution goes on by itself, every earlier call answered from the journal; a denial or an
//! expiry is a `ToolError` `denied` in the program.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::{DaemonOptions, TestDaemon, another_principal};
use bytes::Bytes;
use serde_json::{Value, json};
use std::time::Duration;

/// A daemon whose principal needs approval for `test.add`, decided by `approvers`. The test
/// is both the agent and, when `approvers` names it, the approver: `self_approve` lets it
/// decide its own executions' calls.
async fn daemon(approvers: Vec<u32>, ttl_ms: u64) -> TestDaemon {
    TestDaemon::start_with(DaemonOptions::default().policy(move |p| {
        for principal in &mut p.principals {
            principal.approve = vec!["test.add".into()];
        }
        p.approvals.approvers = approvers.iter().map(u32::to_string).collect();
        p.approvals.uids = approvers;
        p.approvals.ttl_ms = ttl_ms;
        p.approvals.self_approve = true;
    }))
    .await
}

fn me() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

async fn post(d: &TestDaemon, path: &str, body: Value) -> (u16, Value) {
    let mut c = d.client().await;
    let (status, text) = c.post(path, Bytes::from(body.to_string())).await.unwrap();
    (status.as_u16(), serde_json::from_str(&text).unwrap())
}

async fn get(d: &TestDaemon, path: &str) -> Value {
    let mut c = d.client().await;
    let (status, text) = c.get(path).await.unwrap();
    assert_eq!(status.as_u16(), 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

async fn metrics(d: &TestDaemon) -> String {
    let (status, text) = d.client().await.get("/metrics").await.unwrap();
    assert_eq!(status.as_u16(), 200, "{text}");
    text
}

/// Polls the execution until it has ended.
async fn finished(d: &TestDaemon, id: &str) -> Value {
    for _ in 0..400 {
        let r = get(d, &format!("/v1/executions/{id}")).await;
        if !["waiting", "running", "queued"].contains(&r["status"].as_str().unwrap_or_default()) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("execution {id} did not end");
}

/// The approval decisions in the daemon's audit log, once its writer has written them.
async fn audited_approvals(d: &TestDaemon) -> Vec<airlock_supervisor::audit_log::ApprovalRow> {
    for _ in 0..200 {
        let rows = airlock_supervisor::audit_log::query::read_approvals(
            &d.audit_directory(),
            &Default::default(),
        )
        .unwrap_or_default();
        if !rows.is_empty() {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Vec::new()
}

fn decision(approve: bool, reason: Option<&str>) -> Value {
    json!({ "decision": if approve { "approve" } else { "deny" }, "reason": reason })
}

const ONE: &str = r#"const before = await tools.test.echo({ text: "first" });
const sum = await tools.test.add({ a: 1, b: 2 });
return { before, sum };"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_is_made_and_the_execution_goes_on_by_itself() {
    let d = daemon(vec![me()], 3_600_000).await;
    let (status, r) = post(&d, "/v1/executions", json!({ "code": ONE })).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["status"], json!("waiting"), "{r}");
    let pending = r["pending_approvals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{r}");
    let approval = &pending[0];
    assert_eq!(approval["tool"], json!("test.add"));
    assert_eq!(approval["args"], json!({ "a": 1, "b": 2 }));
    assert_eq!(approval["line"], json!(2), "{approval}");
    let excerpt = approval["excerpt"].as_str().unwrap();
    assert!(
        excerpt.contains("> 2 | const sum = await tools.test.add"),
        "{excerpt}"
    );
    let id = approval["id"].as_str().unwrap().to_owned();
    let execution = r["id"].as_str().unwrap().to_owned();
    // Listed for the approver, with the same id.
    let listed = get(&d, "/v1/approvals").await;
    assert_eq!(listed["approvals"][0]["id"], json!(id), "{listed}");
    // The execution shows the waiting response while it waits.
    assert_eq!(
        get(&d, &format!("/v1/executions/{execution}")).await["status"],
        json!("waiting")
    );
    // And the operator sees it waiting.
    let waiting = metrics(&d).await;
    assert!(
        waiting.contains("airlock_executions_waiting 1\n")
            && waiting.contains("airlock_approvals_pending 1\n"),
        "{waiting}"
    );

    let (status, decided) = post(&d, &format!("/v1/approvals/{id}"), decision(true, None)).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["decision"], json!("approved"));
    assert_eq!(decided["status"], json!("running"));
    let done = finished(&d, &execution).await;
    assert_eq!(done["status"], json!("ok"), "{done}");
    assert_eq!(done["result"]["sum"], json!(3), "{done}");
    // The call before the approval ran once: the re-run answered it from the journal.
    let echo = done["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == json!("test.echo"))
        .unwrap();
    assert_eq!(echo["replayed"], json!(true), "{done}");
    let after = metrics(&d).await;
    assert!(
        after.contains("airlock_executions_waiting 0\n")
            && after.contains("airlock_approvals_pending 0\n"),
        "{after}"
    );
    // The decision is in the audit log, with who made it.
    let audited = audited_approvals(&d).await;
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert_eq!(audited[0].approval_id, id);
    assert_eq!(audited[0].decision, "approved");
    assert_eq!(audited[0].decider_uid, Some(me()));
    assert!(audited[0].decided_by.is_some());
    assert_eq!(audited[0].tool, "test.add");
    // A decision stands once taken.
    let (status, again) = post(&d, &format!("/v1/approvals/{id}"), decision(false, None)).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(get(&d, "/v1/approvals").await["approvals"], json!([]));
}

/// A principal with `approve` patterns runs each execution in a session, in case a call needs
/// an approver; one whose calls needed none leaves no session behind (they piled up: one per
/// execution), and one that waited keeps its session for the re-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_executions_that_waited_for_an_approver_keep_a_session() {
    let d = daemon(vec![me()], 3_600_000).await;
    for _ in 0..5 {
        let (status, r) = post(
            &d,
            "/v1/executions",
            json!({ "code": "await tools.test.echo({ a: 1 }); 1 + 1" }),
        )
        .await;
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["status"], json!("ok"), "{r}");
        assert!(r.get("session").is_none(), "{r}");
    }
    assert_eq!(get(&d, "/v1/sessions").await["sessions"], json!([]));
    let (_, r) = post(&d, "/v1/executions", json!({ "code": ONE })).await;
    assert_eq!(r["status"], json!("waiting"), "{r}");
    let session = r["session"]
        .as_str()
        .expect("a waiting execution's session");
    let sessions = get(&d, "/v1/sessions").await["sessions"].clone();
    assert_eq!(sessions.as_array().map(Vec::len), Some(1), "{sessions}");
    assert_eq!(sessions[0]["id"], json!(session), "{sessions}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_is_a_denied_tool_error_with_the_reason() {
    let d = daemon(vec![me()], 3_600_000).await;
    let code = r#"try { await tools.test.add({ a: 1, b: 2 }); return "made"; }
catch (e) { return { name: e.name, code: e.code, message: e.message }; }"#;
    let (_, r) = post(&d, "/v1/executions", json!({ "code": code })).await;
    let id = r["pending_approvals"][0]["id"].as_str().unwrap().to_owned();
    let (status, _) = post(
        &d,
        &format!("/v1/approvals/{id}"),
        decision(false, Some("not on a Friday")),
    )
    .await;
    assert_eq!(status, 200);
    let done = finished(&d, r["id"].as_str().unwrap()).await;
    assert_eq!(done["result"]["name"], json!("ToolError"), "{done}");
    assert_eq!(done["result"]["code"], json!("denied"), "{done}");
    let message = done["result"]["message"].as_str().unwrap();
    assert!(message.contains("not on a Friday"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_nobody_decides_expires_as_denied() {
    let d = daemon(vec![me()], 1_000).await;
    let (_, r) = post(
        &d,
        "/v1/executions",
        json!({ "code": "await tools.test.add({ a: 1, b: 2 })" }),
    )
    .await;
    assert_eq!(r["status"], json!("waiting"), "{r}");
    let done = finished(&d, r["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], json!("error"), "{done}");
    assert_eq!(done["error"]["name"], json!("ToolError"), "{done}");
    let message = done["error"]["message"].as_str().unwrap();
    assert!(message.contains("in time"), "{message}");
    let audited = audited_approvals(&d).await;
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert_eq!(audited[0].decision, "expired");
    assert_eq!(audited[0].decided_by, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_calls_needing_approval_come_as_one_batch() {
    let d = daemon(vec![me()], 3_600_000).await;
    let code = r#"const r = await Promise.allSettled([
  tools.test.add({ a: 1, b: 1 }),
  tools.test.add({ a: 2, b: 2 }),
  tools.test.add({ a: 3, b: 3 }),
]);
return r.map((x) => x.status === "fulfilled" ? x.value : x.reason.code);"#;
    let (_, r) = post(&d, "/v1/executions", json!({ "code": code })).await;
    let pending = r["pending_approvals"].as_array().unwrap().clone();
    assert_eq!(pending.len(), 3, "{r}");
    let execution = r["id"].as_str().unwrap().to_owned();
    for (i, approval) in pending.iter().enumerate() {
        let approve = i != 1;
        let (status, decided) = post(
            &d,
            &format!("/v1/approvals/{}", approval["id"].as_str().unwrap()),
            decision(approve, None),
        )
        .await;
        assert_eq!(status, 200, "{decided}");
        // It goes on only once the last of the batch is decided.
        let expected = if i == 2 { "running" } else { "waiting" };
        assert_eq!(decided["status"], json!(expected), "{decided}");
    }
    let done = finished(&d, &execution).await;
    assert_eq!(done["result"], json!([2, "denied", 6]), "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_approver_the_policy_names_may_decide() {
    // The approver is someone else.
    let d = daemon(vec![me() + 4242], 3_600_000).await;
    let (_, r) = post(
        &d,
        "/v1/executions",
        json!({ "code": "await tools.test.add({ a: 1, b: 2 })" }),
    )
    .await;
    let id = r["pending_approvals"][0]["id"].as_str().unwrap().to_owned();
    let (status, refused) = post(&d, &format!("/v1/approvals/{id}"), decision(true, None)).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(
        refused["error"]["code"],
        json!("not_permitted"),
        "{refused}"
    );
    // Still waiting, and the principal sees its own approval (it is not an approver).
    let listed = get(&d, "/v1/approvals").await;
    assert_eq!(listed["approvals"][0]["id"], json!(id), "{listed}");
    assert_eq!(
        get(&d, &format!("/v1/executions/{}", r["id"].as_str().unwrap())).await["status"],
        json!("waiting")
    );
}

/// An approver does not decide the calls of its own executions unless the policy says so
/// (`self_approve`): its decision is refused with what to do instead, and the call waits on;
/// another approver (uid 65534, through the real CLI) decides it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_may_not_decide_its_own_executions_calls() {
    if !another_principal::can_run("an_approver_may_not_decide_its_own_executions_calls") {
        return;
    }
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        for principal in &mut p.principals {
            principal.approve = vec!["test.add".into()];
        }
        another_principal::admit(p, &["test.*"]);
        p.approvals.approvers = vec![me().to_string(), another_principal::UID.to_string()];
        p.approvals.uids = vec![me(), another_principal::UID];
    }))
    .await;
    another_principal::open_socket(&d);
    let (_, r) = post(
        &d,
        "/v1/executions",
        json!({ "code": "await tools.test.add({ a: 1, b: 2 })" }),
    )
    .await;
    assert_eq!(r["status"], json!("waiting"), "{r}");
    let id = r["pending_approvals"][0]["id"].as_str().unwrap().to_owned();
    let execution = r["id"].as_str().unwrap().to_owned();
    for approve in [true, false] {
        let (status, refused) =
            post(&d, &format!("/v1/approvals/{id}"), decision(approve, None)).await;
        assert_eq!(status, 403, "{refused}");
        assert_eq!(
            refused["error"]["code"],
            json!("not_permitted"),
            "{refused}"
        );
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("own execution") && message.contains("principal `local`"),
            "{refused}"
        );
        let hint = refused["error"]["hint"].as_str().unwrap();
        assert!(
            hint.contains("another approver must decide it")
                && hint.contains("[approvals] self_approve = true"),
            "{refused}"
        );
    }
    assert_eq!(
        get(&d, &format!("/v1/executions/{execution}")).await["status"],
        json!("waiting")
    );
    assert!(d.tools.calls.load(std::sync::atomic::Ordering::Relaxed) == 0);

    // Another approver may.
    let (ok, out) = another_principal::cli(&d, &["approve", &id]).await;
    assert!(ok, "{out}");
    let done = finished(&d, &execution).await;
    assert_eq!(done["result"], json!(3), "{done}");
    d.stop().await;
}

/// `airlock policy check` and `airlockd --check-config` warn about a principal whose members
/// include an approver while `self_approve` is off.
#[test]
fn the_policy_check_warns_about_a_principal_that_approves_its_own_calls() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.toml");
    let write = |self_approve: &str| {
        std::fs::write(
            &file,
            format!(
                "[approvals]\napprovers = [0]\n{self_approve}\n[[principal]]\nname = \"agents\"\nusers = [0]\nallow = [\"*\"]\napprove = [\"payments.*\"]\n"
            ),
        )
        .unwrap();
    };
    let checks = || {
        let (code, out, err) =
            airlock_tests::binaries::run_cli(&["policy", "check", file.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{out}{err}");
        let daemon = std::process::Command::new(airlock_tests::binaries::airlockd())
            .arg("--check-config")
            .arg(&file)
            .output()
            .unwrap();
        assert!(daemon.status.success(), "{daemon:?}");
        [
            format!("{out}{err}"),
            format!(
                "{}{}",
                String::from_utf8_lossy(&daemon.stdout),
                String::from_utf8_lossy(&daemon.stderr)
            ),
        ]
    };
    write("");
    for text in checks() {
        assert!(
            text.contains("policy.toml:8:11: warning: principal `agents` admits a user or group that [approvals] also names as an approver"),
            "{text}"
        );
        assert!(text.contains("self_approve = true"), "{text}");
    }
    write("self_approve = true");
    for text in checks() {
        assert!(!text.contains("also names as an approver"), "{text}");
    }
}

/// Runs the `airlock` CLI against `d`: its exit code and everything it printed.
async fn cli(d: &TestDaemon, args: &[&str]) -> (i32, String) {
    let out = tokio::process::Command::new(airlock_tests::binaries::airlock_cli())
        .arg("--socket")
        .arg(d.socket_path())
        .args(args)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The approver's side from the command line: `airlock approvals` lists what waits with the
/// code around the call, `airlock deny ID --reason` and `airlock approve ID` decide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_approves_and_denies() {
    let d = daemon(vec![me()], 3_600_000).await;
    let code = r#"const a = await tools.test.add({ a: 1, b: 2 }).catch((e) => e.message);
const b = await tools.test.add({ a: 5, b: 5 }).catch((e) => e.message);
return [a, b];"#;
    let (_, r) = post(&d, "/v1/executions", json!({ "code": code })).await;
    let execution = r["id"].as_str().unwrap().to_owned();
    let first = r["pending_approvals"][0]["id"].as_str().unwrap().to_owned();
    let (code_, listed) = cli(&d, &["approvals"]).await;
    assert_eq!(code_, 0, "{listed}");
    assert!(
        listed.contains(&first) && listed.contains("test.add"),
        "{listed}"
    );
    assert!(
        listed.contains("> 1 | const a = await tools.test.add"),
        "{listed}"
    );
    let (code_, out) = cli(&d, &["deny", &first, "--reason", "too small"]).await;
    assert_eq!(code_, 0, "{out}");
    assert!(out.contains("denied"), "{out}");
    // The execution went on to its second call, which waits in turn.
    let mut second = None;
    for _ in 0..200 {
        let r = get(&d, &format!("/v1/executions/{execution}")).await;
        if let Some(id) = r["pending_approvals"][0]["id"]
            .as_str()
            .filter(|id| *id != first)
        {
            second = Some(id.to_owned());
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let second = second.expect("the second call waits for approval");
    let (code_, out) = cli(&d, &["approve", &second]).await;
    assert_eq!(code_, 0, "{out}");
    let done = finished(&d, &execution).await;
    let result = done["result"].as_array().unwrap();
    assert!(result[0].as_str().unwrap().contains("too small"), "{done}");
    assert_eq!(result[1], json!(10), "{done}");
    let (code_, out) = cli(&d, &["approvals"]).await;
    assert_eq!(code_, 0, "{out}");
    assert!(out.contains("no approvals wait"), "{out}");
}

/// The same from Python: the call waits with its line and excerpt, an approval lets the
/// program go on (the earlier call answered from the journal), and a denial raises in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_program_waits_for_its_approver_too() {
    let d = daemon(vec![me()], 3_600_000).await;
    let code = "before = await tools.test.echo(text='first')\nsum = await tools.test.add(a=1, b=2)\n{'before': before, 'sum': sum}";
    let body = json!({ "code": code, "language": "python" });
    let (status, r) = post(&d, "/v1/executions", body.clone()).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["status"], json!("waiting"), "{r}");
    let approval = &r["pending_approvals"][0];
    assert_eq!(approval["tool"], json!("test.add"), "{r}");
    assert_eq!(approval["args"], json!({ "a": 1, "b": 2 }), "{r}");
    assert_eq!(approval["line"], json!(2), "{approval}");
    let excerpt = approval["excerpt"].as_str().unwrap_or_default();
    assert!(
        excerpt.contains("> 2 | sum = await tools.test.add"),
        "{excerpt}"
    );
    let id = approval["id"].as_str().unwrap().to_owned();
    let execution = r["id"].as_str().unwrap().to_owned();
    let (status, decided) = post(&d, &format!("/v1/approvals/{id}"), decision(true, None)).await;
    assert_eq!(status, 200, "{decided}");
    let done = finished(&d, &execution).await;
    assert_eq!(done["status"], json!("ok"), "{done}");
    // The test tool answers `3.0`, which Python keeps a float.
    assert_eq!(done["result"]["sum"].as_f64(), Some(3.0), "{done}");
    let echo = done["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == json!("test.echo"))
        .unwrap();
    assert_eq!(echo["replayed"], json!(true), "{done}");

    // Denied: the program sees the denial as an exception it can catch.
    let code = "try:\n    await tools.test.add(a=1, b=2)\n    out = 'made'\nexcept Exception as e:\n    out = str(e)\nout";
    let (_, r) = post(
        &d,
        "/v1/executions",
        json!({ "code": code, "language": "python" }),
    )
    .await;
    let id = r["pending_approvals"][0]["id"].as_str().unwrap().to_owned();
    let execution = r["id"].as_str().unwrap().to_owned();
    let (status, _) = post(
        &d,
        &format!("/v1/approvals/{id}"),
        decision(false, Some("not today")),
    )
    .await;
    assert_eq!(status, 200);
    let done = finished(&d, &execution).await;
    assert_eq!(done["status"], json!("ok"), "{done}");
    let text = done["result"].as_str().unwrap_or_default();
    assert!(
        text.contains("denied") && text.contains("not today"),
        "{done}"
    );
}
