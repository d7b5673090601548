//! What an agent sees for working programs: results, console, TypeScript, tool calls, trace,
//! stats, streaming, and the JSON API's own errors.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionEvent, ExecutionRequest, RequestLanguage, Status};
use airlock_tests::{DaemonOptions, TestDaemon};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_expression_is_the_result() {
    let d = TestDaemon::start().await;
    let r = d.exec("1 + 1").await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!(2));
    assert!(r.error.is_none());
    assert!(r.id.starts_with("ex_"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_with_types_console_and_top_level_await() {
    let d = TestDaemon::start().await;
    let r = d
        .exec(
            r#"
interface User { name: string; role: "admin" | "user" }
const users: User[] = [{ name: "ana", role: "admin" }, { name: "bo", role: "user" }];
const admins = users.filter((u: User): boolean => u.role === "admin");
console.log("admins:", admins.length);
console.warn("careful");
const n = await Promise.resolve(41);
return { admins: admins.map(a => a.name), n: n + 1 };
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!({"admins": ["ana"], "n": 42}));
    assert_eq!(r.stdout, "admins: 1\n");
    assert_eq!(r.stderr, "careful\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_example_runs() {
    let d = TestDaemon::start().await;
    let code = include_str!("../../../examples/hello.ts");
    let r = d.exec(code).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["planets"], json!(["Earth", "Mars", "Jupiter"]));
    assert_eq!(r.result["totalMoons"], json!(98));
    assert!(r.stdout.contains("3 planets have moons"));
    // Its one tool call, brokered: the daemon's own search found itself first.
    assert_eq!(r.result["tools"][0], "airlock.search_tools", "{}", r.result);
    assert!(
        r.stdout
            .contains("tools.airlock.search_tools found 2 tool(s): airlock.search_tools"),
        "{}",
        r.stdout
    );
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].tool, "airlock.search_tools");
    assert_eq!(
        r.tool_calls[0].outcome,
        airlock_supervisor::agent_api::CallOutcome::Ok
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_language_is_accepted() {
    let d = TestDaemon::start().await;
    let mut c = d.client().await;
    let r = c
        .execute(&ExecutionRequest {
            code: "const a = [3,1,2]; a.sort(); a".into(),
            language: RequestLanguage::Javascript,
            timeout_ms: Some(5000),
            session: None,
            replay: None,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(r.result, json!([1, 2, 3]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_are_brokered_and_traced() {
    let d = TestDaemon::start().await;
    let r = d
        .exec(
            r#"
const sum = await tools.test.add({ a: 2, b: 3 });
const echoed = await tools.test.echo({ hello: "world", n: [1, 2] });
return { sum, echoed };
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        r.result,
        json!({"sum": 5, "echoed": {"hello": "world", "n": [1, 2]}})
    );
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[0].id, 1);
    assert_eq!(r.tool_calls[0].tool, "test.add");
    assert_eq!(r.tool_calls[0].args, json!({"a": 2, "b": 3}));
    assert_eq!(r.tool_calls[0].outcome.as_str(), "ok");
    assert_eq!(r.tool_calls[1].tool, "test.echo");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tool_calls_run_concurrently() {
    let d = TestDaemon::start().await;
    // Five calls of 300 ms each: sequentially 1.5 s; concurrently about 300 ms.
    let r = d
        .exec(
            r#"
const results = await Promise.all([1,2,3,4,5].map(() => tools.test.sleep({ ms: 300 })));
results.length
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!(5));
    assert_eq!(r.tool_calls.len(), 5);
    assert!(
        r.stats.run_ms < 1200.0,
        "five 300 ms calls took {} ms: they did not overlap",
        r.stats.run_ms
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_reach_the_program_as_tool_error() {
    let d = TestDaemon::start().await;
    let r = d
        .exec(
            r#"
try {
  await tools.test.fail({ message: "upstream said no" });
  "not reached"
} catch (e) {
  ({ name: e.name, isToolError: e instanceof ToolError, code: e.code, message: e.message })
}
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["name"], json!("ToolError"));
    assert_eq!(r.result["isToolError"], json!(true));
    assert_eq!(r.result["code"], json!("upstream_error"));
    assert!(
        r.result["message"]
            .as_str()
            .unwrap()
            .contains("upstream said no")
    );
    assert_eq!(r.tool_calls[0].outcome.as_str(), "error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_fail_with_suggestions() {
    let d = TestDaemon::start().await;
    // Written literally, the contract check refuses it before it runs (sdk_discovery.rs);
    // reached dynamically, it fails at call time.
    let r = d
        .exec("const name = 'ech';\nawait (tools.test as any)[name]({})")
        .await;
    assert_eq!(r.status, Status::Error);
    let err = r.error.unwrap();
    assert_eq!(err.name.as_deref(), Some("ToolError"), "{err:?}");
    assert!(err.message.contains("ech"), "{}", err.message);
    let call = &r.tool_calls[0];
    let tool_err = call.error.as_ref().unwrap();
    assert_eq!(tool_err.code.as_str(), "unknown_tool");
    assert_eq!(
        tool_err.hint.as_deref(),
        Some("did you mean tools.test.echo?")
    );
    // The program's own error says it too: the fix is one read away.
    assert_eq!(err.hint.as_deref(), Some("did you mean tools.test.echo?"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_outside_the_principals_grant_are_denied() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.principals[0].allow = vec!["test.echo".into()];
    }))
    .await;
    let r = d
        .exec("const a = await tools.test.echo({x: 1}); let b; try { await tools.test.add({a:1,b:2}) } catch (e) { b = e.code } ({a, b})")
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!({"a": {"x": 1}, "b": "denied"}));
    // The denied call never reached the tool.
    assert_eq!(d.tools.calls.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_call_cap_is_enforced() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.limits.max_tool_calls = 3;
    }))
    .await;
    let r = d
        .exec("for (let i = 0; i < 10; i++) { await tools.test.count({}) }")
        .await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    assert!(d.tools.calls.load(std::sync::atomic::Ordering::Relaxed) <= 3);
    assert_eq!(r.error.unwrap().kind.as_str(), "tool_call_limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_records_peer_principal_and_stats() {
    let d = TestDaemon::start().await;
    let r = d.exec("'x'").await;
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    assert_eq!(r.peer.uid, uid);
    assert_eq!(r.peer.gid, gid);
    assert_eq!(r.peer.pid, Some(std::process::id() as i32));
    assert_eq!(r.principal, "local");
    assert!(r.stats.total_ms > 0.0);
    assert!(r.stats.run_ms > 0.0);
    assert!(!r.stats.worker_from_pool);
    assert!(r.stats.peak_rss_bytes.unwrap_or(0) > 0, "{:?}", r.stats);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pooled_workers_are_used_once_each() {
    let d = TestDaemon::start_with(DaemonOptions::default().pool(2)).await;
    d.wait_for_idle_workers(2).await;
    let a = d
        .exec("globalThis.marker = 1; typeof globalThis.marker")
        .await;
    assert!(a.stats.worker_from_pool);
    let b = d.exec("typeof globalThis.marker").await;
    // A fresh process each time: nothing of the first program survives.
    assert_eq!(b.result, json!("undefined"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_delivers_events_before_the_result() {
    let d = TestDaemon::start().await;
    let mut c = d.client().await;
    let mut events = Vec::new();
    let r = c
        .execute_streaming(
            &ExecutionRequest {
                code: r#"console.log("one"); progress(0.5); await tools.test.echo({}); console.error("two"); 7"#.into(),
                language: RequestLanguage::Typescript,
                timeout_ms: Some(5000),
                session: None,
                replay: None,
                ..Default::default()
            },
            |e| events.push(serde_json::to_value(e).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(r.result, json!(7));
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "started",
            "console",
            "progress",
            "tool_call_started",
            "tool_call_finished",
            "console"
        ],
        "{events:?}"
    );
    assert_eq!(events[1]["text"], json!("one"));
    assert_eq!(events[2]["value"], json!(0.5));
    assert_eq!(events[5]["stream"], json!("stderr"));
    let _ = ExecutionEvent::Progress { value: Value::Null };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_reports_pool_and_policy() {
    let d = TestDaemon::start_with(DaemonOptions::default().pool(1)).await;
    d.wait_for_idle_workers(1).await;
    let (status, body) = d.client().await.get("/v1/health").await.unwrap();
    assert_eq!(status, 200);
    let h: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(h["status"], json!("ok"));
    assert_eq!(h["pool"]["target"], json!(1));
    assert!(
        h["pool"]["lockdown"]["landlock_abi"].as_u64().unwrap() >= 1,
        "{h}"
    );
}

async fn raw(d: &TestDaemon, method: &str, path: &str, body: &str) -> (u16, Value) {
    let mut c = d.client().await;
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "airlock")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let resp = c.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_json_errors_and_the_daemon_keeps_serving() {
    let d = TestDaemon::start().await;
    let (s, b) = raw(&d, "POST", "/v1/executions", "{not json").await;
    assert_eq!(s, 400);
    assert_eq!(b["error"]["code"], json!("invalid_json"));
    assert!(b["error"]["hint"].as_str().unwrap().contains("code"));

    let (s, b) = raw(
        &d,
        "POST",
        "/v1/executions",
        r#"{"code": "1", "langauge": "js"}"#,
    )
    .await;
    assert_eq!(s, 400);
    assert!(
        b["error"]["message"].as_str().unwrap().contains("langauge"),
        "{b}"
    );

    let (s, b) = raw(
        &d,
        "POST",
        "/v1/executions",
        r#"{"code": "1", "timeout_ms": 999999999}"#,
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(b["error"]["code"], json!("invalid_timeout"));

    let (s, b) = raw(&d, "GET", "/v1/nope", "").await;
    assert_eq!(s, 404);
    assert_eq!(b["error"]["code"], json!("not_found"));

    let (s, b) = raw(&d, "DELETE", "/v1/executions", "").await;
    assert_eq!(s, 405);
    assert_eq!(b["error"]["code"], json!("method_not_allowed"));

    assert_eq!(d.exec("'still here'").await.result, json!("still here"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_over_the_size_limit_are_refused_before_any_worker_runs() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.limits.max_code_bytes = 64 * 1024;
    }))
    .await;
    let code = format!("'{}'", "a".repeat(100 * 1024));
    let err = d.try_exec(&code, None).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("program_too_large") || msg.contains("limit"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_executions_errors_and_tool_calls() {
    let d = TestDaemon::start().await;
    d.exec("await tools.test.echo({})").await;
    d.exec("syntax error here(").await;
    let (status, text) = d.client().await.get("/metrics").await.unwrap();
    assert_eq!(status, 200);
    assert!(
        text.contains("airlock_executions_total{status=\"ok\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("airlock_executions_total{status=\"error\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("airlock_execution_errors_total{kind=\"syntax\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("airlock_tool_calls_total{outcome=\"ok\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("airlock_execution_duration_seconds_count 2\n"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_says_when_each_call_was_made() {
    let d = TestDaemon::start().await;
    let r = d
        .exec(
            "await tools.test.sleep({ ms: 120 }); \
             await Promise.all([tools.test.echo({ a: 1 }), tools.test.echo({ a: 2 })]); 1",
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let [sleep, first, second] = &r.tool_calls[..] else {
        panic!("{:?}", r.tool_calls);
    };
    // The echoes were made after the sleep had ended, together.
    assert!(
        first.started_ms >= sleep.started_ms + 120.0,
        "{:?}",
        r.tool_calls
    );
    assert!(second.started_ms >= first.started_ms);
    assert!(
        second.started_ms < first.started_ms + 100.0,
        "{:?}",
        r.tool_calls
    );
    assert!(second.started_ms + second.duration_ms <= r.stats.total_ms);
}

/// `DELETE /v1/executions/<id>` stops a running execution of the caller's: it ends as
/// `cancelled`, with the calls it made; an id that runs no execution is a clear 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_execution_can_be_cancelled_by_id() {
    let d = TestDaemon::start().await;
    let mut runner = d.client().await;
    let (id_tx, id_rx) = tokio::sync::oneshot::channel::<String>();
    let running = tokio::spawn(async move {
        let mut id = None;
        let mut id_tx = Some(id_tx);
        runner
            .execute_streaming(
                &ExecutionRequest {
                    code: "await tools.test.sleep({ ms: 20000 }); 'finished'".into(),
                    language: RequestLanguage::Typescript,
                    timeout_ms: Some(30_000),
                    session: None,
                    replay: None,
                    ..Default::default()
                },
                |event| match event {
                    ExecutionEvent::Started { id: started, .. } => id = Some(started.clone()),
                    // Once the call is under way, so the trace has it.
                    ExecutionEvent::ToolCallStarted { .. } => {
                        if let (Some(tx), Some(id)) = (id_tx.take(), id.take()) {
                            let _ = tx.send(id);
                        }
                    }
                    _ => {}
                },
            )
            .await
            .unwrap()
    });
    let id = id_rx.await.unwrap();
    let mut c = d.client().await;
    let e = c.cancel("ex_not_running").await.unwrap_err();
    assert!(e.to_string().contains("no running execution"), "{e}");
    let asked = std::time::Instant::now();
    c.cancel(&id).await.unwrap();
    let r = running.await.unwrap();
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(10),
        "the cancellation took {:?}",
        asked.elapsed()
    );
    assert_eq!(r.status, Status::Cancelled, "{r:?}");
    let err = r.error.as_ref().unwrap();
    assert_eq!(err.kind.as_str(), "cancelled");
    assert!(err.message.contains("cancelled on request"), "{err:?}");
    assert_eq!(r.tool_calls.len(), 1, "{r:?}");
    // It has ended: cancelling again finds nothing.
    assert!(c.cancel(&id).await.is_err());
    assert_eq!(d.exec("1 + 1").await.result, json!(2));
}
