//! `airlock session list|show|delete`: the daemon's answer about the caller's sessions, as JSON.

use crate::args::SessionCommand;
use crate::daemon::{answer_json, connect, path_segment};
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// `airlock session list|show|delete`.
pub async fn run(socket: Option<PathBuf>, action: SessionCommand) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let (status, body) = match &action {
        SessionCommand::List => client.get("/v1/sessions").await?,
        SessionCommand::Show { id } => {
            client
                .get(&format!("/v1/sessions/{}", path_segment(id)))
                .await?
        }
        SessionCommand::Delete { id } => {
            client
                .delete(&format!("/v1/sessions/{}", path_segment(id)))
                .await?
        }
    };
    let value = answer_json(status, &body)?;
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(ExitCode::SUCCESS)
}
