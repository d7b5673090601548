//! Programs built to break a parser, sent to the real `airlockd` binary (a separate process, so
//! a daemon that dies fails the test instead of aborting the test binary).
//!
//! The daemon never parses a program: the worker does, after lockdown, and its nesting guard
//! answers these with a syntax error. Before that move, one 12 KB program of nested brackets
//! that mentioned `tools` overflowed the stack of the daemon's contract check and killed it.

use airlock_supervisor::agent_api::{ExecutionRequest, RequestLanguage, Status};
use airlock_supervisor::client::Client;
use airlock_tests::binaries;
use airlock_tests::processes::{alive, wait_until};
use std::path::Path;

/// Nesting depth of every program below: far past any parser's recursion budget.
const LEVELS: usize = 100_000;

/// `(name, program)` for each shape of deep nesting, with and without tool references.
fn hostile_programs() -> Vec<(String, String)> {
    let n = LEVELS;
    let shapes = [
        (
            "arrays",
            format!("const a = {}{};", "[".repeat(n), "]".repeat(n)),
        ),
        (
            "objects",
            format!("const a = {}1{};", "{a:".repeat(n), "}".repeat(n)),
        ),
        (
            "parentheses",
            format!("const a = {}1{};", "(".repeat(n), ")".repeat(n)),
        ),
        (
            "template literals",
            format!("const a = {}x{};", "`${".repeat(n), "}`".repeat(n)),
        ),
        (
            "typescript types",
            format!(
                "let a: {}string{} = null!;",
                "Array<".repeat(n),
                ">".repeat(n)
            ),
        ),
        (
            "tuple types",
            format!("type T = {}string{};", "[".repeat(n), "]".repeat(n)),
        ),
        (
            "arrow functions",
            format!("const f = {}1;", "() => ".repeat(n)),
        ),
        ("unary operators", format!("const a = {}1;", "!".repeat(n))),
    ];
    let mut programs = Vec::new();
    for (shape, code) in shapes {
        programs.push((shape.to_owned(), code.clone()));
        // The contract check only looked at programs that mention `tools`.
        programs.push((
            format!("{shape}, with a tool reference"),
            format!("tools.x;\n{code}\nawait tools.x.y({{ z: 1 }});"),
        ));
    }
    // The deep part inside a tool call's literal argument.
    programs.push((
        "arrays inside a tool call's argument".into(),
        format!(
            "await tools.x.y({{ z: {}{} }});",
            "[".repeat(n),
            "]".repeat(n)
        ),
    ));
    programs
}

async fn execute(socket: &Path, code: &str) -> airlock_supervisor::agent_api::ExecutionResponse {
    let mut client = Client::connect(socket).await.expect("the daemon answers");
    client
        .execute(&ExecutionRequest {
            code: code.to_owned(),
            language: RequestLanguage::Typescript,
            timeout_ms: Some(10_000),
            session: None,
            replay: None,
            ..Default::default()
        })
        .await
        .expect("the daemon answers the execution")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_programs_are_refused_and_the_daemon_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("a.sock");
    // The embedded default policy, as a new user runs it.
    let mut daemon = binaries::airlockd_command(&socket).spawn().unwrap();
    let pid = daemon.id() as i32;
    assert!(wait_until(20, || socket.exists()), "no socket appeared");

    for (shape, code) in hostile_programs() {
        let r = execute(&socket, &code).await;
        assert_eq!(r.status, Status::Error, "{shape}: {r:?}");
        let e = r.error.as_ref().unwrap();
        // The worker's nesting guard, with what to do about it.
        assert_eq!(e.kind.as_str(), "syntax", "{shape}: {e:?}");
        assert!(
            e.message.contains("nest") && e.message.contains("deep"),
            "{shape}: {e:?}"
        );
        assert!(r.tool_calls.is_empty(), "{shape}: {r:?}");
        assert!(alive(pid), "{shape}: the daemon died");
        // And the next program runs normally.
        let next = execute(&socket, "const n: number = 6; n * 7").await;
        assert_eq!(next.status, Status::Ok, "after {shape}: {next:?}");
        assert_eq!(next.result, serde_json::json!(42));
    }

    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = daemon.wait().unwrap();
    assert!(status.success(), "airlockd exited with {status}");
}

/// The issue's own reproduction: 12 KB, the contract check's old trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twelve_kilobyte_program_of_the_report_does_not_stop_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("a.sock");
    let mut daemon = binaries::airlockd_command(&socket).spawn().unwrap();
    let pid = daemon.id() as i32;
    assert!(wait_until(20, || socket.exists()), "no socket appeared");
    let code = format!(
        "tools.x; const a = {}{};",
        "[".repeat(6000),
        "]".repeat(6000)
    );
    let r = execute(&socket, &code).await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    assert!(alive(pid), "the daemon died");
    let next = execute(&socket, "1 + 1").await;
    assert_eq!(next.result, serde_json::json!(2), "{next:?}");
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert!(daemon.wait().unwrap().success());
}
