//! `airlock health`: the daemon's health answer, pretty-printed.

use crate::EXIT_REQUEST_FAILED;
use crate::daemon::connect;
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

/// `airlock health`: exit 3 when the daemon answers with an error status.
pub async fn run(socket: Option<PathBuf>) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let (status, body) = client.get("/v1/health").await?;
    println!("{}", pretty(body));
    Ok(if status.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_REQUEST_FAILED)
    })
}

/// The answer pretty-printed when it is JSON, else as it came.
fn pretty(body: String) -> String {
    serde_json::from_str::<serde_json::Value>(&body)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_pretty_printed_and_anything_else_kept() {
        assert_eq!(
            pretty(r#"{"ok":true,"workers":2}"#.to_owned()),
            "{\n  \"ok\": true,\n  \"workers\": 2\n}"
        );
        assert_eq!(pretty("bad gateway".to_owned()), "bad gateway");
    }
}
