//! A TypeError on a tool's result, end to end: the real daemon, a real worker and the npm
//! memory server. The response's error keeps the engine's message and adds where the value
//! came from and what it is (`explanation`), and the hint leads with it.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::{ServerTransport, SettingValue};
use airlock_supervisor::agent_api::Status;
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::{DaemonOptions, TestDaemon, mcp_peers};
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_on_a_tool_result_is_explained() {
    let store = tempfile::tempdir().unwrap();
    let Some(mut memory) = mcp_peers::npm_server(
        "memory",
        "server-memory",
        &[],
        "a_missing_key_on_a_tool_result_is_explained",
    ) else {
        return;
    };
    let file = store.path().join("memory.jsonl");
    if let ServerTransport::Stdio { env, .. } = &mut memory.transport {
        env.push((
            "MEMORY_FILE_PATH".into(),
            SettingValue::Literal(file.display().to_string()),
        ));
    }
    memory.confinement.write = vec![store.path().to_owned()];
    let d = TestDaemon::start_with(DaemonOptions::default().source(Arc::new(McpServer::new(
        memory,
        Arc::new(SecretStore::empty()),
    ))))
    .await;
    let r = d
        .exec(
            "const g: any = await tools.memory.read_graph({});\nreturn g.nodes.map((n: any) => n.name);",
        )
        .await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let error = r.error.as_ref().unwrap();
    assert_eq!(error.name.as_deref(), Some("TypeError"), "{error:?}");
    assert_eq!(error.message, "cannot read property 'map' of undefined");
    let explanation = error.explanation.as_deref().unwrap_or_default();
    assert!(
        explanation.starts_with("g.nodes is undefined: g is the result of tools.memory.read_graph (line 1), an object with keys "),
        "{error:?}"
    );
    assert!(
        explanation.contains("entities") && explanation.contains("relations"),
        "{error:?}"
    );
    let hint = error.hint.as_deref().unwrap_or_default();
    assert!(hint.starts_with(explanation), "{error:?}");
    assert!(hint.contains("servers/memory/read_graph.ts"), "{error:?}");
    d.stop().await;
}

/// A free `require`, `fetch`, timer, `process` or `fs` is refused before the program runs:
/// the tool call before it is never sent, and the error says what to use instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_host_apis_are_refused_before_any_tool_call() {
    use airlock_supervisor::agent_api::ExecutionErrorKind;
    let d = TestDaemon::start().await;
    for (code, name, instead) in [
        (
            "await tools.test.echo({ message: 'first' });\nconst fs = require('fs');\nfs",
            "require",
            "tools.<server>.<tool>(args)",
        ),
        (
            "await tools.test.echo({ message: 'first' });\nconst r = await fetch('https://example.com');\nr",
            "fetch",
            "no network",
        ),
        (
            "await tools.test.echo({ message: 'first' });\nawait new Promise((done) => setTimeout(done, 10));",
            "setTimeout",
            "progress(value)",
        ),
        (
            "await tools.test.echo({ message: 'first' });\nprocess.env.TOKEN",
            "process",
            "credentials",
        ),
    ] {
        let r = d.exec(code).await;
        assert_eq!(r.status, Status::Error, "{code}: {r:?}");
        assert!(r.tool_calls.is_empty(), "{code}: a call was sent: {r:?}");
        let error = r.error.as_ref().unwrap();
        assert_eq!(error.kind, ExecutionErrorKind::Syntax, "{error:?}");
        assert_eq!(error.line, Some(2), "{error:?}");
        assert!(
            error
                .message
                .starts_with(&format!("`{name}` is not available: ")),
            "{error:?}"
        );
        assert!(error.message.contains(instead), "{error:?}");
    }
    // The program's own `process` and a property named `fetch` still run, and call the tool.
    let r = d
        .exec("const process = (m: string) => tools.test.echo({ message: m });\nconst o = { fetch: 1 };\nawait process('x');\no.fetch")
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.tool_calls.len(), 1, "{r:?}");
    d.stop().await;
}
