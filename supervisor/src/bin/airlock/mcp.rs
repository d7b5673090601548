//! `airlock mcp`: relays MCP between stdin/stdout and the daemon's `/mcp`.

use crate::daemon::daemon_socket;
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// `airlock mcp`: until stdin ends.
pub async fn run(socket: Option<PathBuf>) -> Result<ExitCode> {
    let socket = daemon_socket(socket)?;
    let (input, output) = airlock_supervisor::api::mcp::relay::stdio();
    airlock_supervisor::api::mcp::relay::relay(&socket, input, output).await?;
    Ok(ExitCode::SUCCESS)
}
