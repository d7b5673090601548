//! MCP over Streamable HTTP, progress notifications, and the protocol revision each real peer
//! negotiates: server-everything (npm) speaks up to 2025-11-25 with `initialize`; the Python
//! SDK 2.x servers (PyPI) speak 2026-07-28 with `server/discover`.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionRequest, RequestLanguage, Status};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::mcp_peers::{HttpServerEverything, python_module_server, server_everything};
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::json;
use std::sync::Arc;

async fn daemon_with(server: &Arc<McpServer>) -> TestDaemon {
    TestDaemon::start_with(DaemonOptions::default().source(server.clone())).await
}

fn mcp(config: airlock_policy::ToolServer) -> Arc<McpServer> {
    Arc::new(McpServer::new(config, Arc::new(SecretStore::empty())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_call_a_streamable_http_server() {
    let Some(http) = HttpServerEverything::start("programs_call_a_streamable_http_server") else {
        return;
    };
    let server = mcp(http.config("remote"));
    let d = daemon_with(&server).await;
    let r = d
        .exec(
            r#"
const echoed = await tools.remote.echo({ message: "over http" });
const sums = await Promise.all([1, 2, 3].map((a) => tools.remote.get_sum({ a, b: 10 })));
let bad = null;
// Not a literal, so it passes the contract check and meets the schema check at call time.
const x: unknown = "x";
try { await tools.remote.get_sum({ a: x as number, b: 1 }) } catch (e) { bad = e.code }
({ echoed, sums, bad })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["echoed"], json!("Echo: over http"));
    assert_eq!(r.result["sums"][2], json!("The sum of 3 and 10 is 13."));
    assert_eq!(r.result["bad"], json!("invalid_arguments"));
    assert_eq!(
        server.protocol_version().await.as_deref(),
        Some("2025-11-25"),
        "server-everything's newest revision"
    );
}

/// A Streamable HTTP server that went away fails the call clearly; once it is back, the next
/// call connects again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_that_restarts_is_reconnected() {
    let Some(http) = HttpServerEverything::start("an_http_server_that_restarts_is_reconnected")
    else {
        return;
    };
    let mut config = http.config("remote");
    config.call_timeout_ms = 1_500;
    let server = mcp(config);
    let d = daemon_with(&server).await;
    let ok = d.exec(r#"await tools.remote.echo({ message: "1" })"#).await;
    assert_eq!(ok.status, Status::Ok, "{ok:?}");
    let port = http.port();
    drop(http);
    let down = d.exec(r#"await tools.remote.echo({ message: "2" })"#).await;
    assert_eq!(down.status, Status::Error, "{down:?}");
    let err = down.tool_calls[0].error.as_ref().unwrap();
    assert!(
        ["upstream_error", "server_unavailable"].contains(&err.code.as_str()),
        "{err:?}"
    );
    let back = HttpServerEverything::start_on(port, "reconnect").unwrap();
    let again = d.exec(r#"await tools.remote.echo({ message: "3" })"#).await;
    assert_eq!(again.status, Status::Ok, "{again:?}");
    assert_eq!(again.result, json!("Echo: 3"));
    // A restart between two calls: the new server does not know the old session. The spec
    // says it answers 404, and rmcp then starts a new session by itself; server-everything
    // answers 400 with an error that has no request id, so the call cannot learn of it and
    // times out. The ping that follows a timeout finds the connection dead, and the call
    // after that connects afresh.
    drop(back);
    let _back = HttpServerEverything::start_on(port, "reconnect").unwrap();
    let stale = d.exec(r#"await tools.remote.echo({ message: "4" })"#).await;
    assert_eq!(stale.status, Status::Error, "{stale:?}");
    assert_eq!(
        stale.tool_calls[0].error.as_ref().unwrap().code.as_str(),
        "timeout"
    );
    let fresh = d.exec(r#"await tools.remote.echo({ message: "5" })"#).await;
    assert_eq!(fresh.status, Status::Ok, "{fresh:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_progress_streams_to_the_agent() {
    let Some(config) = server_everything("everything", "tool_progress_streams_to_the_agent") else {
        return;
    };
    let server = mcp(config);
    let d = daemon_with(&server).await;
    let mut c = d.client().await;
    let mut events = Vec::new();
    let r = c
        .execute_streaming(
            &ExecutionRequest {
                code: "await tools.everything.trigger_long_running_operation({ duration: 0.3, steps: 3 })".into(),
                language: RequestLanguage::Typescript,
                timeout_ms: Some(20_000),
                session: None,
                replay: None,
                ..Default::default()
            },
            |e| events.push(serde_json::to_value(e).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let progress: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "tool_progress")
        .collect();
    assert_eq!(progress.len(), 3, "{events:#?}");
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["tool"], "everything.trigger_long_running_operation");
        assert_eq!(p["id"], 1);
        assert_eq!(p["progress"], json!(i as f64 + 1.0));
        assert_eq!(p["total"], json!(3.0));
    }
    // Progress comes between the call's start and its end.
    let pos = |kind: &str| events.iter().position(|e| e["event"] == kind).unwrap();
    assert!(pos("tool_call_started") < pos("tool_progress"));
    assert!(pos("tool_progress") < pos("tool_call_finished"));
    assert_eq!(
        server.protocol_version().await.as_deref(),
        Some("2025-11-25")
    );
}

/// The Python SDK 2.x negotiates the newest revision, which has no `initialize`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pypi_server_negotiates_the_2026_revision() {
    let Some(config) = python_module_server(
        "time",
        "mcp_server_time",
        &["--local-timezone", "UTC"],
        "a_pypi_server_negotiates_the_2026_revision",
    ) else {
        return;
    };
    let server = mcp(config);
    let d = daemon_with(&server).await;
    let r = d
        .exec(r#"await tools.time.get_current_time({ timezone: "UTC" })"#)
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        server.protocol_version().await.as_deref(),
        Some("2026-07-28")
    );
}
