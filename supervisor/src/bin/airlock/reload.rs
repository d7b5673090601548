//! `airlock reload`: makes the daemon read its policy again, and says what came of it.

use crate::EXIT_PROGRAM_FAILED;
use crate::daemon::connect;
use airlock_supervisor::generation::ReloadReport;
use anyhow::{Result, bail};
use bytes::Bytes;
use std::path::PathBuf;
use std::process::ExitCode;

/// `airlock reload`: exit 1 when the daemon keeps its policy.
pub async fn run(socket: Option<PathBuf>) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let (status, body) = client.post("/v1/reload", Bytes::new()).await?;
    let Ok(report) = serde_json::from_str::<ReloadReport>(&body) else {
        bail!("the daemon answered {status}: {body}");
    };
    let (stdout, stderr) = printed(&report);
    eprint!("{stderr}");
    print!("{stdout}");
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PROGRAM_FAILED)
    })
}

/// What `airlock reload` prints of the daemon's report: (stdout, stderr). The warnings (on
/// stderr) come first.
fn printed(report: &ReloadReport) -> (String, String) {
    let mut stdout = String::new();
    let mut stderr = String::new();
    for warning in &report.warnings {
        stderr.push_str(&format!("{warning}\n"));
    }
    if report.ok {
        stdout.push_str(&format!(
            "policy reloaded: generation {} from {}\n",
            report.generation,
            report.files.join(", ")
        ));
        if !report.restart_needed.is_empty() {
            stdout.push_str(&format!(
                "changed, but only applied when airlockd restarts: {}\n",
                report.restart_needed.join(", ")
            ));
        }
    } else {
        stderr.push_str(&format!(
            "reload failed; the daemon keeps the policy it has (generation {}):\n",
            report.generation
        ));
        for problem in &report.problems {
            stderr.push_str(&format!("{problem}\n"));
        }
    }
    (stdout, stderr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(v: serde_json::Value) -> ReloadReport {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_reload_that_worked() {
        let (stdout, stderr) = printed(&report(serde_json::json!({
            "ok": true, "at": 1, "generation": 3,
            "files": ["/etc/airlock/policy.toml", "/etc/airlock/policy.d/a.toml"],
            "problems": [], "warnings": ["w1"], "restart_needed": []
        })));
        assert_eq!(
            stdout,
            "policy reloaded: generation 3 from /etc/airlock/policy.toml, /etc/airlock/policy.d/a.toml\n"
        );
        assert_eq!(stderr, "w1\n");
        let (stdout, stderr) = printed(&report(serde_json::json!({
            "ok": true, "at": 1, "generation": 4, "files": ["p.toml"],
            "problems": [], "warnings": [], "restart_needed": ["daemon.socket", "daemon.group"]
        })));
        assert_eq!(
            stdout,
            "policy reloaded: generation 4 from p.toml\nchanged, but only applied when airlockd restarts: daemon.socket, daemon.group\n"
        );
        assert_eq!(stderr, "");
    }

    #[test]
    fn a_reload_that_failed() {
        let (stdout, stderr) = printed(&report(serde_json::json!({
            "ok": false, "at": 1, "generation": 2, "files": ["p.toml"],
            "problems": ["p.toml:3:1: unknown key `x`", "p.toml:9:2: bad"],
            "warnings": ["w"], "restart_needed": []
        })));
        assert_eq!(stdout, "");
        assert_eq!(
            stderr,
            "w\nreload failed; the daemon keeps the policy it has (generation 2):\np.toml:3:1: unknown key `x`\np.toml:9:2: bad\n"
        );
    }
}
