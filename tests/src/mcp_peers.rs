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

/// The Python interpreter that has `module` importable (PyPI MCP servers are run as
/// `python -m <module>`, so the daemon's cleared environment needs no shims), or `None` with
/// the skip reported.
pub fn python_module_server(
    name: &str,
    module: &str,
    args: &[&str],
    test: &str,
) -> Option<ToolServer> {
    let python = std::process::Command::new("python3")
        .args([
            "-c",
            &format!("import sys, {module}; print(sys.executable)"),
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let Some(python) = python else {
        assert!(
            std::env::var_os("AIRLOCK_REQUIRE_MCP_PEERS").is_none(),
            "the Python module {module} is not installed (.ci/run installs it with pip)"
        );
        eprintln!(
            "SKIPPED {test}: python3 with {module} is missing (pip install the PyPI package)"
        );
        return None;
    };
    let mut full_args = vec!["-m".to_owned(), module.to_owned()];
    full_args.extend(args.iter().map(|a| (*a).to_owned()));
    Some(ToolServer {
        name: name.to_owned(),
        transport: ServerTransport::Stdio {
            command: python,
            args: full_args,
            cwd: None,
            env: Vec::new(),
        },
        start: StartMode::Lazy,
        call_timeout_ms: 30_000,
        max_concurrent_calls: 16,
    })
}
