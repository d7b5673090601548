//! MCP servers that misbehave, through the real daemon: the fault-injection server
//! (`airlock-mcp-fault-server`, `rmcp`'s server side) crashes mid-call, closes stdout in the
//! middle of an answer, hangs, answers 50 MB, writes what is not JSON-RPC, fails to start, and
//! changes its tool list while it runs. In every case the program gets a clear error in
//! `tool_calls[i].error` (and, uncaught, in `error`), the daemon keeps serving, and a crashed
//! server is started again for the next call.
//!
//! Every test holds [`serial`]: the servers are children of this test process, and the tests
//! look them up by name (and one measures this process's peak memory).

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::{SettingValue, ToolServer};
use airlock_supervisor::agent_api::{ExecutionEvent, ExecutionRequest, ExecutionResponse, Status};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::ToolError;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::fault_server::{self, HttpFaultServer};
use airlock_tests::processes::{alive, servers_named, wait_until};
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Short, so the faults that end in a timeout keep the suite fast.
const CALL_TIMEOUT_MS: u64 = 500;

async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

async fn daemon(mut config: ToolServer) -> TestDaemon {
    config.call_timeout_ms = CALL_TIMEOUT_MS;
    TestDaemon::start_with(DaemonOptions::default().source(Arc::new(McpServer::new(
        config,
        Arc::new(SecretStore::empty()),
    ))))
    .await
}

/// A daemon with the fault server (stdio) as `tools.fault`.
async fn daemon_with_fault_server(args: &[&str]) -> TestDaemon {
    daemon(fault_server::stdio("fault", args)).await
}

/// The same with a call timeout long enough for the server to write 50 MB: the daemon must
/// see the oversized answer, not give up first.
async fn daemon_for_big_results(args: &[&str]) -> TestDaemon {
    let mut config = fault_server::stdio("fault", args);
    config.call_timeout_ms = BIG_CALL_TIMEOUT_MS;
    TestDaemon::start_with(DaemonOptions::default().source(Arc::new(McpServer::new(
        config,
        Arc::new(SecretStore::empty()),
    ))))
    .await
}

const BIG_CALL_TIMEOUT_MS: u64 = 20_000;

/// Running fault servers started by this test process's daemon.
fn fault_servers() -> Vec<i32> {
    servers_named(std::process::id(), "airlock-mcp-fault-server")
}

/// The error of the execution's only tool call.
fn only_call_error(r: &ExecutionResponse) -> ToolError {
    assert_eq!(r.tool_calls.len(), 1, "{r:?}");
    assert_eq!(r.tool_calls[0].outcome.as_str(), "error", "{r:?}");
    r.tool_calls[0].error.clone().unwrap()
}

/// The uncaught `ToolError` reached the agent as the execution's error, with the call's text.
fn assert_uncaught(r: &ExecutionResponse, err: &ToolError) {
    assert_eq!(r.status, Status::Error, "{r:?}");
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.name.as_deref(), Some("ToolError"), "{e:?}");
    assert!(e.message.contains(&err.message), "{e:?}");
}

async fn echo_works(d: &TestDaemon, text: &str) {
    let r = d
        .exec(&format!("await tools.fault.echo({{ text: {text:?} }})"))
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!(text));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fault_servers_ordinary_tools_work_and_report_progress() {
    let _serial = serial().await;
    let d = daemon_with_fault_server(&[]).await;
    let r = d
        .exec(
            r#"
const echoed = await tools.fault.echo({ text: "hello" });
const slept = await tools.fault.sleep({ ms: 10 });
const written = await tools.fault.stderr({ text: "a line for the daemon's log" });
({ echoed, slept, written })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        r.result,
        json!({"echoed": "hello", "slept": "slept", "written": "written"})
    );

    // Progress notifications reach an agent that streams, in order, as `tool_progress`.
    let mut progress = Vec::new();
    let request = ExecutionRequest {
        code: "await tools.fault.progress({ steps: 3, delay_ms: 5 })".into(),
        language: Default::default(),
        timeout_ms: None,
        session: None,
        replay: None,
        ..Default::default()
    };
    let r = d
        .client()
        .await
        .execute_streaming(&request, |event| {
            if let ExecutionEvent::ToolProgress {
                progress: p,
                total,
                message,
                ..
            } = event
            {
                progress.push((*p, *total, message.clone()));
            }
        })
        .await
        .unwrap();
    assert_eq!(r.result, json!("done"), "{r:?}");
    assert_eq!(
        progress,
        (1..=3)
            .map(|i| (f64::from(i), Some(3.0), Some(format!("step {i} of 3"))))
            .collect::<Vec<_>>()
    );
    d.stop().await;
}

/// The server exits (code 3) while it holds the call: the call fails at once, and the next
/// call starts a new server process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_crashes_mid_call_fails_the_call_and_is_started_again() {
    let _serial = serial().await;
    let d = daemon_with_fault_server(&[]).await;
    echo_works(&d, "before").await;
    let before = fault_servers();
    assert_eq!(before.len(), 1, "{before:?}");

    let t = Instant::now();
    let r = d.exec("await tools.fault.crash({})").await;
    let err = only_call_error(&r);
    assert_eq!(err.code.as_str(), "upstream_error", "{err:?}");
    assert!(
        err.message.contains("calling fault.crash failed")
            && err.message.contains("closed before it answered"),
        "{err:?}"
    );
    assert_uncaught(&r, &err);
    // Noticed from the closed pipe, not from the call timeout.
    assert!(
        t.elapsed() < Duration::from_millis(CALL_TIMEOUT_MS),
        "{:?}",
        t.elapsed()
    );
    assert!(wait_until(5, || !alive(before[0])));

    // The daemon kept serving, with a new server.
    echo_works(&d, "after").await;
    let after = fault_servers();
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after[0], before[0]);
    d.stop().await;
}

/// The server writes half of its answer and then closes stdout (the process lives on): the
/// call fails at once with `upstream_error`, not at the call timeout; the server that can no
/// longer answer is ended and the next call starts a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_stdout_mid_message_fails_the_call_and_is_started_again() {
    let _serial = serial().await;
    let d = daemon_with_fault_server(&[]).await;
    echo_works(&d, "before").await;
    let before = fault_servers();
    assert_eq!(before.len(), 1, "{before:?}");

    let t = Instant::now();
    let r = d.exec("await tools.fault.cut({})").await;
    let err = only_call_error(&r);
    assert_eq!(err.code.as_str(), "upstream_error", "{err:?}");
    assert!(
        err.message.contains("calling fault.cut failed")
            && err.message.contains("closed before it answered"),
        "{err:?}"
    );
    assert_uncaught(&r, &err);
    assert!(
        t.elapsed() < Duration::from_millis(CALL_TIMEOUT_MS),
        "noticed from the closed pipe, not the call timeout: {:?}",
        t.elapsed()
    );
    // The old process, still running with its stdout gone, is not kept.
    assert!(
        wait_until(5, || !alive(before[0])),
        "the server whose stdout closed still runs"
    );

    echo_works(&d, "after").await;
    let after = fault_servers();
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after[0], before[0]);
    d.stop().await;
}

/// A call that is never answered fails at the server's `call_timeout_ms` with a clear
/// `timeout`; the program's other calls to the same server are not held up, and the daemon
/// keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_call_times_out_without_holding_up_other_calls() {
    let _serial = serial().await;
    let d = daemon_with_fault_server(&[]).await;
    let r = d
        .exec(
            r#"
const [hung, echoed] = await Promise.allSettled([
  tools.fault.hang({}),
  tools.fault.echo({ text: "meanwhile" }),
]);
({ hung: hung.reason.code, echoed: echoed.value })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!({"hung": "timeout", "echoed": "meanwhile"}));
    let err = r.tool_calls[0].error.as_ref().unwrap();
    assert_eq!(
        err.message,
        format!("fault.hang did not answer within {CALL_TIMEOUT_MS} ms")
    );
    assert!(err.hint.as_deref().unwrap().contains("call_timeout_ms"));
    assert!(r.tool_calls[0].duration_ms >= CALL_TIMEOUT_MS as f64);
    assert!(r.tool_calls[1].duration_ms < CALL_TIMEOUT_MS as f64);
    echo_works(&d, "after").await;
    d.stop().await;
}

/// After a call timed out, a server that still answers is kept (it may hold state, like an
/// added tool), and the program hears of the timeout at the timeout.
async fn a_timed_out_call_keeps_the_server(args: &[&str]) {
    let d = daemon_with_fault_server(args).await;
    echo_works(&d, "before").await;
    let server = fault_servers();
    assert_eq!(server.len(), 1, "{server:?}");
    let r = d.exec("await tools.fault.hang({})").await;
    let call = &r.tool_calls[0];
    assert_eq!(
        call.error.as_ref().unwrap().code.as_str(),
        "timeout",
        "{r:?}"
    );
    assert!(
        call.duration_ms < (CALL_TIMEOUT_MS + 300) as f64,
        "the timeout reached the program after {} ms",
        call.duration_ms
    );
    echo_works(&d, "after").await;
    assert_eq!(fault_servers(), server, "the server was restarted");
    d.stop().await;
}

/// Before 2026-07-28 the daemon's `ping` after a timeout finds the server alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_keeps_a_pre_2026_server_running() {
    let _serial = serial().await;
    a_timed_out_call_keeps_the_server(&["--legacy"]).await;
}

/// The same with a server that speaks 2026-07-28 (the default of rmcp's server and of this
/// one). It fails today: that revision has no `ping` (rmcp's server answers -32601), so
/// `McpServer::discard_if_unresponsive` (supervisor/src/mcp_server.rs) takes the healthy
/// server for dead after every timed-out call and discards the connection: the server's state
/// is lost, calls of other executions in flight on it fail, and `discard` awaits the child's
/// shutdown on the call's path while holding the connection lock (rmcp waits up to 3 s, then
/// SIGTERMs, a server that does not exit when its stdin closes), so the timeout can reach the
/// program seconds late and every other call to that server waits too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_keeps_a_2026_server_running() {
    let _serial = serial().await;
    a_timed_out_call_keeps_the_server(&[]).await;
}

/// Peak resident memory of this process (the in-process daemon), after resetting the peak
/// to the current size; `None` where the kernel refuses the reset.
fn reset_peak_rss() -> Option<u64> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    peak_rss()
}

fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// 50 MB is over the 32 MiB worker frame limit and over the 33 MiB the daemon reads from a
/// stdio server in one message: the transport drops the line without buffering all of it, so
/// the daemon's memory stays bounded, and the call fails as `result_too_large` when its
/// timeout passes. A 10 MiB result still arrives whole.
/// (`--legacy`: with a 2026-07-28 server the timeout would also restart it, see
/// `a_timed_out_call_keeps_a_2026_server_running`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_mb_result_fails_the_call_without_hurting_the_daemon() {
    let _serial = serial().await;
    let d = daemon_for_big_results(&["--legacy"]).await;
    echo_works(&d, "started").await;
    let server = fault_servers();

    let before = reset_peak_rss();
    let t = Instant::now();
    let r = d.exec("(await tools.fault.big({ mb: 50 })).length").await;
    let elapsed = t.elapsed();
    let err = only_call_error(&r);
    assert_eq!(err.code.as_str(), "result_too_large", "{err:?}");
    assert_uncaught(&r, &err);
    // Refused when read, not when the call's timeout passes (half of it leaves room for a
    // loaded machine: it took 6.4 s once while two builds ran beside it).
    assert!(
        elapsed < Duration::from_millis(BIG_CALL_TIMEOUT_MS / 2),
        "{elapsed:?}"
    );
    if let (Some(before), Some(peak)) = (before, peak_rss()) {
        // Holding the result, its JSON value and a frame would be 150 MB and more.
        let grew = peak.saturating_sub(before);
        assert!(
            grew < 100 << 20,
            "the daemon's peak memory grew by {} MiB for a 50 MB result",
            grew >> 20
        );
    }

    let r = d.exec("(await tools.fault.big({ mb: 10 })).length").await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!(10 << 20));
    echo_works(&d, "after").await;
    assert_eq!(fault_servers(), server);
    d.stop().await;
}

/// What the daemon should do with a 50 MB result: refuse it at once as `result_too_large`
/// (supervisor/src/execution.rs has that error for results over the frame limit). It used to
/// end as `timeout`: rmcp's stdio transport drops messages over 16 MiB by default. The daemon
/// now reads up to 64 MiB from a stdio server (`MAX_STDIO_MESSAGE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_mb_result_is_refused_as_too_large() {
    let _serial = serial().await;
    let d = daemon_for_big_results(&[]).await;
    let t = Instant::now();
    let r = d.exec("await tools.fault.big({ mb: 50 })").await;
    let err = only_call_error(&r);
    assert_eq!(err.code.as_str(), "result_too_large", "{err:?}");
    assert!(err.message.contains("over 33 MiB"), "{err:?}");
    // The only call waiting learns of it as soon as the line passes the limit, not at its
    // timeout.
    assert!(
        t.elapsed() < Duration::from_millis(BIG_CALL_TIMEOUT_MS / 2),
        "{:?}",
        t.elapsed()
    );
    // Results under the worker's frame limit but over rmcp's default 16 MiB line limit arrive.
    let r = d.exec("(await tools.fault.big({ mb: 20 })).length").await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!(20 << 20));
    d.stop().await;
}

/// Three ways of breaking the JSON-RPC stream (see the server's `garbage` tool):
/// - a line that is not JSON: rmcp's client ignores it (as the other SDKs do), so the call
///   ends at the call timeout;
/// - JSON that is no JSON-RPC message: rmcp answers the server with an Invalid Request error
///   and drops it; again the call times out;
/// - a response to the call whose result is not a tool result: the call fails at once as
///   `upstream_error` ("Unexpected response type").
///
/// The server is not restarted, and the calls beside them are unaffected. (`--legacy`: with a
/// 2026-07-28 server the timeouts would also restart it, see
/// `a_timed_out_call_keeps_a_2026_server_running`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_rpc_fails_the_call_and_the_server_keeps_serving() {
    let _serial = serial().await;
    let d = daemon_with_fault_server(&["--legacy"]).await;
    let r = d
        .exec(
            r#"
const settled = await Promise.allSettled([
  tools.fault.garbage({ kind: "text" }),
  tools.fault.garbage({ kind: "shape" }),
  tools.fault.garbage({ kind: "result" }),
  tools.fault.echo({ text: "beside" }),
]);
settled.map((s) => s.status === "fulfilled" ? s.value : s.reason.code)
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        r.result,
        json!(["timeout", "timeout", "upstream_error", "beside"])
    );
    let result_err = r.tool_calls[2].error.as_ref().unwrap();
    assert!(
        result_err
            .message
            .starts_with("calling fault.garbage failed:"),
        "{result_err:?}"
    );
    assert!(r.tool_calls[2].duration_ms < CALL_TIMEOUT_MS as f64);

    let server = fault_servers();
    assert_eq!(server.len(), 1, "{server:?}");
    echo_works(&d, "after").await;
    assert_eq!(fault_servers(), server);
    d.stop().await;
}

/// A server that exits before the handshake: the call fails as `server_unavailable` naming the
/// server, the next one within the back-off is refused without spawning it again, and the
/// daemon's other tools keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_to_start_is_unavailable_and_backs_off() {
    let _serial = serial().await;
    let d = daemon_with_fault_server(&["--fail-start"]).await;
    let r = d.exec("await tools.fault.echo({ text: 'x' })").await;
    let err = only_call_error(&r);
    assert_eq!(err.code.as_str(), "server_unavailable", "{err:?}");
    // The contract check lists the tools of the namespaces a program names before it runs,
    // which is the first start attempt; the call then meets the back-off, which repeats why.
    assert!(
        err.message
            .starts_with("tool server `fault` is unavailable")
            && err.message.contains("the MCP handshake failed"),
        "{err:?}"
    );
    // The server's own last words, and a hint that points at them.
    assert!(
        err.message
            .contains("its stderr ended with: airlock-mcp-fault-server: --fail-start: exiting before the handshake"),
        "{err:?}"
    );
    assert!(
        err.hint.as_deref().unwrap().contains("last words"),
        "{err:?}"
    );
    assert_uncaught(&r, &err);

    let r = d.exec("await tools.fault.echo({ text: 'x' })").await;
    let err = only_call_error(&r);
    assert_eq!(err.code.as_str(), "server_unavailable", "{err:?}");
    assert!(
        err.message.contains("failed to start 1 time(s) in a row")
            && err.message.contains("next attempt in"),
        "{err:?}"
    );

    let r = d
        .exec("await tools.test.echo({ text: 'still here' })")
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    d.stop().await;
}

/// `--require-env`: the server gets the base environment (`LANG` here) and what its
/// `[[server]]` entry gives it, nothing else of the daemon's unless `inherit_env` names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_gets_exactly_the_environment_its_entry_gives() {
    let _serial = serial().await;
    let d = daemon_with_fault_server(&["--require-env", "LANG"]).await;
    echo_works(&d, "started with the base environment").await;
    d.stop().await;

    // A variable this process (the daemon's) has and the base does not.
    let base = ["PATH", "HOME", "TMPDIR", "LANG"];
    let (own, _) = std::env::vars()
        .find(|(k, _)| !base.contains(&k.as_str()))
        .expect("the test process has a variable of its own");
    let args = ["--require-env", own.as_str()];
    let d = daemon_with_fault_server(&args).await;
    let r = d.exec("await tools.fault.echo({ text: 'x' })").await;
    assert_eq!(
        only_call_error(&r).code.as_str(),
        "server_unavailable",
        "{r:?}"
    );
    d.stop().await;

    let mut config = fault_server::stdio("fault", &args);
    let airlock_policy::ServerTransport::Stdio { inherit_env, .. } = &mut config.transport else {
        unreachable!("a stdio server")
    };
    inherit_env.push(own.clone());
    let d = daemon(config).await;
    echo_works(&d, "started with the variable it inherits").await;
    d.stop().await;

    let mut config = fault_server::stdio("fault", &args);
    let airlock_policy::ServerTransport::Stdio { env, .. } = &mut config.transport else {
        unreachable!("a stdio server")
    };
    env.push((own, SettingValue::Literal("given".into())));
    let d = daemon(config).await;
    echo_works(&d, "started with its environment").await;
    d.stop().await;
}

/// `add_tool` adds a tool and sends `notifications/tools/list_changed`: the daemon lists the
/// tools again, and the new tool becomes callable without a restart. (rmcp's client opens a
/// `subscriptions/listen` stream for it on protocol 2026-07-28, takes it unasked before.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_added_while_the_server_runs_becomes_callable() {
    // 2026-07-28: the change arrives on the `subscriptions/listen` stream the daemon opened.
    tool_added_becomes_callable(&[], false).await;
}

/// The same with a server of the 2025 revisions, which sends the notification unasked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_added_to_a_pre_2026_server_becomes_callable() {
    tool_added_becomes_callable(&["--legacy"], false).await;
}

/// `dynamic_tools = true`: a call of a tool the list lacks is let run, with a warning, and
/// fails only when reached if the tool is still missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_dynamic_tools_lets_an_unknown_tool_run() {
    tool_added_becomes_callable(&[], true).await;
}

async fn tool_added_becomes_callable(args: &[&str], dynamic_tools: bool) {
    let _serial = serial().await;
    let mut config = fault_server::stdio("fault", args);
    config.dynamic_tools = dynamic_tools;
    let d = daemon(config).await;
    let r = d.exec("await tools.fault.added({ a: 1 })").await;
    if dynamic_tools {
        assert_eq!(only_call_error(&r).code.as_str(), "unknown_tool", "{r:?}");
        assert!(
            r.warnings.iter().any(|w| w.contains("may add tools")),
            "{r:?}"
        );
    } else {
        assert_refused_as_unknown(&r, "added");
    }
    let server = fault_servers();

    let r = d
        .exec("await tools.fault.add_tool({ name: 'added' })")
        .await;
    assert_eq!(r.result, json!("added added"), "{r:?}");
    // The notification is handled asynchronously: allow it a moment to arrive.
    let mut last = None;
    for _ in 0..40 {
        let r = d.exec("await tools.fault.added({ a: 1 })").await;
        if r.status == Status::Ok {
            last = Some(r);
            break;
        }
        if dynamic_tools {
            assert_eq!(only_call_error(&r).code.as_str(), "unknown_tool", "{r:?}");
        } else {
            assert_refused_as_unknown(&r, "added");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = last.expect("the added tool never became callable");
    assert_eq!(r.result, json!({"a": 1}));
    assert_eq!(fault_servers(), server, "no restart was needed");
    d.stop().await;
}

/// The program was refused by the contract check, before any call, for naming `tool`.
fn assert_refused_as_unknown(r: &ExecutionResponse, tool: &str) {
    assert_eq!(r.status, Status::Error, "{r:?}");
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.kind.as_str(), "contract", "{e:?}");
    assert!(e.message.contains(tool), "{e:?}");
    assert!(
        r.tool_calls.is_empty(),
        "a call ran before the refusal: {r:?}"
    );
}

/// A server that announces list changes (as servers built on the official SDKs do) is
/// refused an unknown tool before the program runs: its earlier calls, side effects
/// included, never happen, and the answer names the tool it meant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_is_refused_before_the_first_call_runs() {
    let _serial = serial().await;
    let d = daemon_with_fault_server(&[]).await;
    // `add_tool` is the side effect: had it run, `marker` would exist.
    let r = d
        .exec("await tools.fault.add_tool({ name: 'marker' }); await tools.fault.echoo({ text: 'x' })")
        .await;
    assert_refused_as_unknown(&r, "echoo");
    let e = r.error.as_ref().unwrap();
    assert!(
        e.hint.as_deref().is_some_and(|h| h.contains("echo")),
        "{e:?}"
    );
    // Listed afresh after the bound: `marker` was never added.
    tokio::time::sleep(Duration::from_millis(5_200)).await;
    let r = d.exec("await tools.fault.marker({})").await;
    assert_refused_as_unknown(&r, "marker");
    d.stop().await;
}

/// A tool added without `list_changed` (a missed notification) is found once the list is
/// older than the check's bound: the check lists again before refusing a name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_added_without_notice_is_found_when_the_list_is_old() {
    let _serial = serial().await;
    let d = daemon_with_fault_server(&[]).await;
    let r = d
        .exec("await tools.fault.add_tool({ name: 'late', quiet: true })")
        .await;
    assert_eq!(r.result, json!("added late"), "{r:?}");
    let r = d.exec("await tools.fault.late({ a: 2 })").await;
    assert_refused_as_unknown(&r, "late");
    tokio::time::sleep(Duration::from_millis(5_200)).await;
    let r = d.exec("await tools.fault.late({ a: 2 })").await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!({"a": 2}));
    d.stop().await;
}

/// The HTTP mode, through the daemon's Streamable HTTP client: ordinary calls work, and a body
/// that is not JSON-RPC fails the call at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_mode_serves_the_daemon_and_its_garbage_fails_the_call() {
    let _serial = serial().await;
    let server = HttpFaultServer::start(&[]).unwrap();
    let d = daemon(server.config("fault")).await;
    echo_works(&d, "over http").await;
    let r = d.exec("await tools.fault.garbage({})").await;
    let err = only_call_error(&r);
    assert_eq!(err.code.as_str(), "upstream_error", "{err:?}");
    assert!(err.message.contains("this is not JSON-RPC"), "{err:?}");
    echo_works(&d, "after").await;
    d.stop().await;
}

/// A server whose `tools/list` never ends (a `nextCursor` on every page) is given up after a
/// bounded number of pages: its calls fail as `server_unavailable` saying why, the daemon's
/// memory does not grow with the pages, and its other tools keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_that_never_ends_is_refused() {
    let _serial = serial().await;
    let d = daemon_with_fault_server(&["--endless-pages"]).await;
    let r = d.exec("await tools.fault.page_0({})").await;
    let err = only_call_error(&r);
    assert_eq!(err.code.as_str(), "server_unavailable", "{err:?}");
    assert!(
        err.message
            .contains("tools/list did not end after 100 pages"),
        "{err:?}"
    );
    let r = d
        .exec("await tools.test.echo({ text: 'still here' })")
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    d.stop().await;
}

/// A call's idempotency key reaches the server in the `tools/call` request's `_meta` under
/// `airlock/idempotency-key`, beside rmcp's own keys, over stdio in both protocol eras and over
/// Streamable HTTP; without a key the `_meta` has no such entry. The server's
/// `readOnlyHint: true` marks its tool read-only, in the listing and in the registry's
/// resolution; a tool without the hint is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idempotency_key_reaches_the_server_in_meta_and_read_only_hints_are_kept() {
    use airlock_supervisor::tools::{CallContext, IDEMPOTENCY_META_KEY, ToolRegistry, ToolSource};
    let _serial = serial().await;
    let http = HttpFaultServer::start(&[]).unwrap();
    for (label, config) in [
        ("stdio", fault_server::stdio("fault", &[])),
        (
            "stdio --legacy",
            fault_server::stdio("fault", &["--legacy"]),
        ),
        ("http", http.config("fault")),
    ] {
        let server = Arc::new(McpServer::new(config, Arc::new(SecretStore::empty())));
        let keyed = CallContext::new("e", "p", 1).with_idempotency_key("journal-key-7");
        let meta = server
            .call("meta", json!({}), &keyed)
            .await
            .into_result()
            .unwrap();
        assert_eq!(
            meta[IDEMPOTENCY_META_KEY],
            json!("journal-key-7"),
            "{label}: {meta}"
        );
        // rmcp's progress token is still there: the key was added, nothing replaced.
        assert!(meta.get("progressToken").is_some(), "{label}: {meta}");
        let meta = server
            .call("meta", json!({}), &CallContext::new("e", "p", 2))
            .await
            .into_result()
            .unwrap();
        assert!(meta.get(IDEMPOTENCY_META_KEY).is_none(), "{label}: {meta}");

        let tools = server.tools().await.unwrap();
        let marked: Vec<&str> = tools
            .iter()
            .filter(|t| t.read_only)
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(marked, ["meta"], "{label}");
        let mut registry = ToolRegistry::new();
        registry.register(server.clone());
        let anyone = airlock_policy::Principal::new("p", vec![], &["*"]);
        assert!(
            registry
                .resolve("fault.meta", &anyone)
                .await
                .unwrap()
                .read_only,
            "{label}"
        );
        assert!(
            !registry
                .resolve("fault.echo", &anyone)
                .await
                .unwrap()
                .read_only,
            "{label}"
        );
        server.shutdown().await;
    }
}
