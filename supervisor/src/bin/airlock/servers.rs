//! `airlock servers` and `airlock server test NAME`: the policy's tool servers as the running
//! daemon sees them, and a trial start of one.

use crate::EXIT_PROGRAM_FAILED;
use crate::daemon::{answer_json, connect, path_segment};
use anyhow::Result;
use bytes::Bytes;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// `airlock servers`: each server's state, process, tools and confinement.
pub async fn list(socket: Option<PathBuf>, json: bool) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let (status, body) = client.get("/v1/servers").await?;
    let v = answer_json(status, &body)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let servers = v["servers"].as_array().cloned().unwrap_or_default();
    if servers.is_empty() {
        println!("the policy in force has no [[server]]");
    }
    for server in &servers {
        print!("{}", describe(server));
    }
    Ok(ExitCode::SUCCESS)
}

/// One server of `airlock servers`, as a few indented lines.
fn describe(server: &serde_json::Value) -> String {
    let text = |key: &str| server[key].as_str().unwrap_or_default().to_owned();
    let state = match text("state").as_str() {
        "ready" => format!(
            "ready, pid {}, {} tool(s), protocol {}",
            server["pid"],
            server["tools"],
            text("protocol")
        ),
        "failed" => format!(
            "failed {} time(s) in a row, next try in {} ms",
            server["failures"], server["next_retry_ms"]
        ),
        "not_started" => "not started (it starts on first use)".to_owned(),
        other => other.replace('_', " "),
    };
    let mut out = String::new();
    let _ = writeln!(out, "{} ({}): {state}", text("name"), text("transport"));
    let _ = writeln!(out, "  runs: {}", text("target"));
    let _ = writeln!(out, "  confinement: {}", text("confinement"));
    if let Some(error) = server["last_error"].as_str() {
        let _ = writeln!(out, "  last error: {error}");
    }
    if let Some(hint) = server["hint"].as_str() {
        let _ = writeln!(out, "  hint: {hint}");
    }
    if let Some(stderr) = server["stderr"].as_str() {
        let _ = writeln!(out, "  stderr: {stderr}");
    }
    out
}

/// `airlock server test NAME`: starts a fresh instance as the daemon would and reports it.
/// Exit 1 if it does not start.
pub async fn test(socket: Option<PathBuf>, name: &str, json: bool) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let path = format!("/v1/servers/{}/test", path_segment(name));
    let (status, body) = client.post(&path, Bytes::new()).await?;
    let v = answer_json(status, &body)?;
    let ok = v["ok"].as_bool().unwrap_or(false);
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if ok {
        println!("{}", started(name, &v));
    } else {
        eprint!("{}", not_started(name, &v));
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PROGRAM_FAILED)
    })
}

/// The line of `airlock server test` for a server that started.
fn started(name: &str, v: &serde_json::Value) -> String {
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|n| n.as_str()).collect())
        .unwrap_or_default();
    format!(
        "server `{name}` started and listed {} tool(s) in {} ms (protocol {}): {}",
        tools.len(),
        v["ready_ms"],
        v["protocol"].as_str().unwrap_or("?"),
        tools.join(", ")
    )
}

/// The lines (for stderr) of `airlock server test` for a server that did not start.
fn not_started(name: &str, v: &serde_json::Value) -> String {
    let mut out = format!(
        "server `{name}` did not start ({} ms): {}\n",
        v["ready_ms"],
        v["error"].as_str().unwrap_or_default()
    );
    if let Some(hint) = v["hint"].as_str() {
        let _ = writeln!(out, "hint: {hint}");
    }
    if let Some(stderr) = v["stderr"].as_str() {
        let _ = writeln!(out, "its stderr ended with: {stderr}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_server() {
        let server = serde_json::json!({
            "name": "github", "transport": "stdio", "state": "ready", "pid": 4242, "tools": 12,
            "protocol": "2025-06-18", "target": "npx github-mcp", "confinement": "landlock, seccomp"
        });
        assert_eq!(
            describe(&server),
            "github (stdio): ready, pid 4242, 12 tool(s), protocol 2025-06-18\n  runs: npx github-mcp\n  confinement: landlock, seccomp\n"
        );
    }

    #[test]
    fn a_failed_server_with_its_error_hint_and_stderr() {
        let server = serde_json::json!({
            "name": "fs", "transport": "stdio", "state": "failed", "failures": 3,
            "next_retry_ms": 8000, "target": "fs-server", "confinement": "none",
            "last_error": "exited with 1", "hint": "is it installed?", "stderr": "no such file"
        });
        assert_eq!(
            describe(&server),
            "fs (stdio): failed 3 time(s) in a row, next try in 8000 ms\n  runs: fs-server\n  confinement: none\n  last error: exited with 1\n  hint: is it installed?\n  stderr: no such file\n"
        );
    }

    #[test]
    fn other_states() {
        let state = |state: &str| {
            describe(&serde_json::json!({ "name": "s", "transport": "http", "state": state }))
                .lines()
                .next()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            state("not_started"),
            "s (http): not started (it starts on first use)"
        );
        assert_eq!(state("starting"), "s (http): starting");
        assert_eq!(state("shutting_down"), "s (http): shutting down");
    }

    #[test]
    fn a_test_that_started() {
        let v = serde_json::json!({
            "ok": true, "tools": ["list", "get"], "ready_ms": 120, "protocol": "2025-06-18"
        });
        assert_eq!(
            started("github", &v),
            "server `github` started and listed 2 tool(s) in 120 ms (protocol 2025-06-18): list, get"
        );
        assert_eq!(
            started("x", &serde_json::json!({ "ok": true })),
            "server `x` started and listed 0 tool(s) in null ms (protocol ?): "
        );
    }

    #[test]
    fn a_test_that_did_not_start() {
        let v = serde_json::json!({
            "ok": false, "ready_ms": 30, "error": "exited with 127", "hint": "install it",
            "stderr": "sh: fs-server: not found"
        });
        assert_eq!(
            not_started("fs", &v),
            "server `fs` did not start (30 ms): exited with 127\nhint: install it\nits stderr ended with: sh: fs-server: not found\n"
        );
        assert_eq!(
            not_started(
                "fs",
                &serde_json::json!({ "ok": false, "ready_ms": 1, "error": "e" })
            ),
            "server `fs` did not start (1 ms): e\n"
        );
    }
}
