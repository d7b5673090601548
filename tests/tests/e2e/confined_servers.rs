//! Real MCP servers from npm run confined (the default), with the directories the policy gives
//! them: the filesystem server reads and writes its `write` directory and nothing else, the
//! memory server keeps its graph in a `write` directory, sequential-thinking needs nothing.
//! (server-everything and the PyPI time and git servers run confined in their own test files.)

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::{ServerTransport, SettingValue, ToolServer};
use airlock_supervisor::agent_api::Status;
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::{DaemonOptions, TestDaemon, mcp_peers};
use std::sync::Arc;

async fn daemon_with(servers: Vec<ToolServer>) -> TestDaemon {
    let mut options = DaemonOptions::default();
    for server in servers {
        options = options.source(Arc::new(McpServer::new(
            server,
            Arc::new(SecretStore::empty()),
        )));
    }
    TestDaemon::start_with(options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filesystem_server_writes_only_where_it_was_allowed() {
    let shared = tempfile::tempdir().unwrap();
    let given = tempfile::tempdir().unwrap();
    let dir = shared.path().display().to_string();
    let read_only = given.path().display().to_string();
    std::fs::write(given.path().join("note.txt"), "read me").unwrap();
    let Some(mut files) = mcp_peers::npm_server(
        "files",
        "server-filesystem",
        &[&dir, &read_only],
        "the_filesystem_server_writes_only_where_it_was_allowed",
    ) else {
        return;
    };
    files.confinement.write = vec![shared.path().to_owned()];
    let d = daemon_with(vec![files]).await;
    let r = d
        .exec(&format!(
            r#"
const written = await tools.files.write_file({{ path: "{dir}/hello.txt", content: "confined" }});
const back = await tools.files.read_text_file({{ path: "{dir}/hello.txt" }});
const other = await tools.files.read_text_file({{ path: "{read_only}/note.txt" }});
let denied: unknown = null;
try {{ await tools.files.write_file({{ path: "{read_only}/escape.txt", content: "no" }}) }}
catch (e: any) {{ denied = e.message }}
({{ back, other, denied }})
"#
        ))
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.result["back"].to_string().contains("confined"),
        "{}",
        r.result
    );
    // A directory named in its arguments is readable…
    assert!(
        r.result["other"].to_string().contains("read me"),
        "{}",
        r.result
    );
    // …but only `write` is writable: Landlock refuses the rest, whatever the server allows.
    let denied = r.result["denied"].as_str().unwrap_or_default();
    assert!(
        denied.contains("EACCES") || denied.contains("permission denied"),
        "{}",
        r.result
    );
    assert!(!given.path().join("escape.txt").exists());
    assert_eq!(
        std::fs::read_to_string(shared.path().join("hello.txt")).unwrap(),
        "confined"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_and_sequential_thinking_servers_run_confined() {
    let store = tempfile::tempdir().unwrap();
    let test = "the_memory_and_sequential_thinking_servers_run_confined";
    let (Some(mut memory), Some(thinking)) = (
        mcp_peers::npm_server("memory", "server-memory", &[], test),
        mcp_peers::npm_server("thinking", "server-sequential-thinking", &[], test),
    ) else {
        return;
    };
    // Its graph goes where the policy lets it write (its package directory is read-only).
    let file = store.path().join("memory.jsonl");
    if let ServerTransport::Stdio { env, .. } = &mut memory.transport {
        env.push((
            "MEMORY_FILE_PATH".into(),
            SettingValue::Literal(file.display().to_string()),
        ));
    }
    memory.confinement.write = vec![store.path().to_owned()];
    let d = daemon_with(vec![memory, thinking]).await;
    let r = d
        .exec(
            r#"
await tools.memory.create_entities({ entities: [{ name: "airlock", entityType: "project", observations: ["confined"] }] });
const graph: any = await tools.memory.read_graph({});
const thought: any = await tools.thinking.sequentialthinking({ thought: "one step", thoughtNumber: 1, totalThoughts: 1, nextThoughtNeeded: false });
({ graph, thought })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(
        r.result["graph"].to_string().contains("airlock"),
        "{}",
        r.result
    );
    assert!(!r.result["thought"].is_null(), "{}", r.result);
    assert!(
        std::fs::read_to_string(&file).unwrap().contains("airlock"),
        "the memory server did not write its graph"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_does_not_exist_is_named_and_the_server_stays_down() {
    let Some(mut thinking) = mcp_peers::npm_server(
        "thinking",
        "server-sequential-thinking",
        &[],
        "a_grant_that_does_not_exist_is_named_and_the_server_stays_down",
    ) else {
        return;
    };
    let gone = tempfile::tempdir().unwrap().path().join("never-made");
    thinking.confinement.write = vec![gone.clone()];
    let d = daemon_with(vec![thinking]).await;
    let r = d
        .exec(
            r#"await tools.thinking.sequentialthinking({ thought: "x", thoughtNumber: 1, totalThoughts: 1, nextThoughtNeeded: false })"#,
        )
        .await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let message = r.error.as_ref().unwrap().message.clone();
    assert!(message.contains("unavailable"), "{message}");
    assert_eq!(message.matches("is unavailable").count(), 1, "{message}");
    assert!(
        message.contains(&gone.display().to_string()) && message.contains("does not exist"),
        "{message}"
    );
    d.stop().await;
}
