//! Real MCP servers from npm and PyPI for the end-to-end tests, installed by `.ci/run`
//! (`npm ci --prefix tests/mcp-peers`). Without them a test says it was skipped, unless
//! `AIRLOCK_REQUIRE_MCP_PEERS=1` (set by `.ci/run`) makes that a failure.

use airlock_policy::{ServerTransport, StartMode, ToolServer};
use std::path::PathBuf;

/// `@modelcontextprotocol/server-everything`'s entry point, if installed.
pub fn server_everything_entry() -> Option<PathBuf> {
    let entry = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    entry.exists().then_some(entry)
}

/// The absolute path of `node`, if on PATH.
pub fn node() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join("node"))
        .find(|p| p.is_file())
}

/// A `[[server]]` running server-everything over stdio, or `None` (with the skip reported)
/// when node or the package is missing.
pub fn server_everything(name: &str, test: &str) -> Option<ToolServer> {
    let (Some(node), Some(entry)) = (node(), server_everything_entry()) else {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "server-everything is not installed: run `npm ci --prefix tests/mcp-peers` (.ci/run does)"
        );
        eprintln!(
            "SKIPPED {test}: node or @modelcontextprotocol/server-everything is missing (npm ci --prefix tests/mcp-peers)"
        );
        return None;
    };
    Some(ToolServer {
        name: name.to_owned(),
        transport: ServerTransport::Stdio {
            command: node.display().to_string(),
            args: vec![entry.display().to_string(), "stdio".to_owned()],
            cwd: None,
            env: Vec::new(),
        },
        start: StartMode::Lazy,
        call_timeout_ms: 30_000,
        max_concurrent_calls: 16,
    })
}
