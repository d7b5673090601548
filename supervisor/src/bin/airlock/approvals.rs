//! `airlock approvals`, `approve` and `deny`: the calls that wait for an approver, and an
//! approver's decision on one.

use crate::daemon::{answer_json, connect, path_segment};
use anyhow::Result;
use bytes::Bytes;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// `airlock approvals`: the calls that wait, with their arguments and code excerpt.
pub async fn list(socket: Option<PathBuf>) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let (status, body) = client.get("/v1/approvals").await?;
    let value = answer_json(status, &body)?;
    print!("{}", listing(&value));
    Ok(ExitCode::SUCCESS)
}

/// What `airlock approvals` prints of the daemon's answer.
fn listing(value: &serde_json::Value) -> String {
    let mut out = String::new();
    let approvals = value["approvals"].as_array().cloned().unwrap_or_default();
    if approvals.is_empty() {
        out.push_str("no approvals wait\n");
    }
    for a in approvals {
        let _ = writeln!(
            out,
            "{}  {}  call {} of {} ({})",
            a["id"].as_str().unwrap_or_default(),
            a["tool"].as_str().unwrap_or_default(),
            a["call"],
            a["execution"].as_str().unwrap_or_default(),
            a["principal"].as_str().unwrap_or_default(),
        );
        let _ = writeln!(out, "    args: {}", a["args"]);
        if let Some(excerpt) = a["excerpt"].as_str() {
            for line in excerpt.lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    out
}

/// `airlock approve|deny ID`: an approver's decision.
pub async fn decide(
    socket: Option<PathBuf>,
    decision: &str,
    id: &str,
    reason: Option<String>,
) -> Result<ExitCode> {
    let mut client = connect(socket).await?;
    let body = serde_json::json!({ "decision": decision, "reason": reason });
    let (status, body) = client
        .post(
            &format!("/v1/approvals/{}", path_segment(id)),
            Bytes::from(body.to_string()),
        )
        .await?;
    let value = answer_json(status, &body)?;
    println!("{}", decided(id, &value));
    Ok(ExitCode::SUCCESS)
}

/// The line `airlock approve|deny ID` prints of the daemon's answer.
fn decided(id: &str, value: &serde_json::Value) -> String {
    format!(
        "{id}: {}; execution {} is {}",
        value["decision"].as_str().unwrap_or_default(),
        value["execution"].as_str().unwrap_or_default(),
        value["status"].as_str().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_approvals() {
        assert_eq!(
            listing(&serde_json::json!({ "approvals": [] })),
            "no approvals wait\n"
        );
        assert_eq!(listing(&serde_json::json!({})), "no approvals wait\n");
    }

    #[test]
    fn approvals_with_their_arguments_and_excerpt() {
        let value = serde_json::json!({ "approvals": [{
            "id": "a1",
            "tool": "github.merge",
            "call": 2,
            "execution": "e9",
            "principal": "agents",
            "args": { "pr": 7 },
            "excerpt": "  3 > await tools.github.merge({ pr: 7 })\n  4   return 1"
        }, {
            "id": "a2",
            "tool": "fs.write",
            "call": 1,
            "execution": "e10",
            "principal": "ops",
            "args": {}
        }]});
        assert_eq!(
            listing(&value),
            "a1  github.merge  call 2 of e9 (agents)\n    args: {\"pr\":7}\n      3 > await tools.github.merge({ pr: 7 })\n      4   return 1\n\
             a2  fs.write  call 1 of e10 (ops)\n    args: {}\n"
        );
    }

    #[test]
    fn a_decision() {
        let value = serde_json::json!({
            "decision": "denied", "execution": "e9", "status": "running"
        });
        assert_eq!(decided("a1", &value), "a1: denied; execution e9 is running");
        assert_eq!(
            decided("a1", &serde_json::json!({})),
            "a1: ; execution  is "
        );
    }
}
