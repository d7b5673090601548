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
