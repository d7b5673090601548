//! Fuzzing the policy parser (`tests/fuzz/policy/`, docs/testing.md "Fuzzing").
//!
//! Each input is read twice: as policy text (split at NUL bytes into the main file and up to
//! three drop-ins, as [`Policy::load`] reads a directory), and as choices that write a TOML
//! document from the policy's own tables, keys and value shapes, so most of those reach
//! validation rather than stopping at TOML syntax. Beyond "no panic": every error is located
//! inside the file it names, and a policy that parses keeps its files in order.
//!
//! [`target`] is the one input's checks: `cargo test` replays the seeds through it
//! (`fuzz_seeds_policy`), and the libFuzzer build (`fuzz/libfuzzer/`, `--cfg fuzzing`) calls it
//! for every input, both on a 2 MiB stack.

use crate::policy_file::{PolicyText, parse_files};
use airlock_fuzz::{Fuzz, Outcome, Unstructured};

const MAIN: &str = "/etc/airlock/policy.toml";

const TABLES: &[&str] = &[
    "daemon",
    "limits",
    "audit",
    "journal",
    "approvals",
    "secret_scanning",
];
const ARRAYS: &[&str] = &["principal", "server", "openapi", "graphql", "flow"];
/// Every key the policy's tables know (the `KEYS` lists of `policy/src`), and a few it does not.
const KEYS: &[&str] = &[
    "action",
    "from",
    "sink",
    "to",
    "trust",
    "allow",
    "approve",
    "approvers",
    "args",
    "auth",
    "base_url",
    "call_timeout_ms",
    "command",
    "confine",
    "cwd",
    "deny",
    "directory",
    "enabled",
    "endpoint",
    "env",
    "exclude",
    "executions_per_minute",
    "fail",
    "groups",
    "header",
    "headers",
    "include",
    "inherit_env",
    "keep",
    "limits",
    "max_code",
    "write_timeout",
    "idle_timeout",
    "body_timeout",
    "max_connections",
    "max_queued_executions",
    "max_running_executions",
    "max_concurrent_calls",
    "max_concurrent_executions",
    "max_output",
    "max_output_tokens",
    "max_principal_size",
    "max_session_size",
    "max_sessions",
    "max_size",
    "max_timeout_ms",
    "max_tool_calls",
    "max_waiting_executions",
    "memory",
    "name",
    "network",
    "open_files",
    "password",
    "pool_size",
    "processes",
    "query",
    "read",
    "schema",
    "selection_depth",
    "self_approve",
    "server_user",
    "session_ttl_hours",
    "shutdown_grace_ms",
    "socket",
    "socket_mode",
    "spec",
    "stack",
    "start",
    "timeout_ms",
    "token",
    "tool_calls_per_minute",
    "ttl",
    "type",
    "url",
    "username",
    "users",
    "value",
    "waiting_ttl",
    "worker_path",
    "write",
    "unknown_key",
    "Name",
];
/// String values the policy gives meaning to (sizes, durations, modes, patterns, names).
const WORDS: &[&str] = &[
    "",
    "*",
    "**",
    "github.*",
    "github.delete_*",
    "airlock.*",
    "tools.x",
    "local",
    "agents",
    "@daemon",
    "@ops",
    "root",
    "nobody",
    "0660",
    "0777",
    "9999",
    "1MiB",
    "256MiB",
    "16GiB",
    "0B",
    "1.5KiB",
    "18446744073709551615B",
    "99999999999999999999TiB",
    "15m",
    "24h",
    "0s",
    "1ms",
    "-1s",
    "999999999999h",
    "stdio",
    "http",
    "on_demand",
    "eager",
    "none",
    "host",
    "redact",
    "fail",
    "bearer",
    "basic",
    "api_key",
    "sdl",
    "introspection",
    "https://example.invalid/api",
    "http://127.0.0.1:1/mcp",
    "/run/airlock/airlock.sock",
    "/usr/bin/env",
    "relative/path",
    "/tmp",
    "${SECRET}",
    "secret:token",
    "env:HOME",
    "a\nb",
    "é",
];

/// The target's settings: its seeds, dictionary, max length and stack.
pub fn fuzz() -> Fuzz {
    // A 2 MiB stack, a test thread's: a quarter of the daemon's main thread, which loads the
    // policy, so deep nesting shows long before it could matter.
    let fuzz = Fuzz::new("policy").stack(2 << 20);
    fuzz.max_len(32 * 1024).dictionary(&[
        "[daemon]\n",
        "[limits]\n",
        "[[principal]]\n",
        "[[server]]\n",
        "[[openapi]]\n",
        "[[graphql]]\n",
        "[audit]\n",
        "[journal]\n",
        "[approvals]\n",
        "[secret_scanning]\n",
        "[principal.limits]\n",
        " = ",
        "\"",
        "'''",
        "\"\"\"",
        "[",
        "]",
        "{",
        "}",
        ",",
        "\n",
        "\0",
        "#",
        ".",
        "= { a = 1 }",
        "1979-05-27T07:32:00Z",
        "inf",
        "nan",
        "0x7f",
        "0o777",
        "1_000",
        "\\u0000",
        "\\U0010FFFF",
    ])
}

/// The checks on one input, the entry point of the seed replay and of the libFuzzer binary;
/// the outcome is which errors (or success) it led to.
pub fn target(data: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(data);
    let files: Vec<PolicyText> = text
        .split('\0')
        .take(4)
        .enumerate()
        .map(|(i, text)| PolicyText {
            origin: origin(i),
            text: text.to_owned(),
        })
        .collect();
    let raw = check(&files);
    let built = toml_document(&mut Unstructured::new(data));
    let structured = check(&[PolicyText {
        origin: MAIN.into(),
        text: built,
    }]);
    raw.and(structured)
}

fn origin(index: usize) -> String {
    if index == 0 {
        MAIN.into()
    } else {
        format!("/etc/airlock/policy.d/{index:02}.toml")
    }
}

fn check(files: &[PolicyText]) -> Outcome {
    match parse_files(files) {
        Ok(policy) => {
            assert_eq!(policy.origin, files[0].origin);
            assert_eq!(policy.drop_ins.len(), files.len() - 1);
            for principal in &policy.principals {
                assert!(!principal.name.is_empty(), "a principal without a name");
            }
            Outcome::of(&format!(
                "ok {} {} {} {} {}",
                policy.principals.len().min(2),
                policy.servers.len().min(2),
                policy.openapi.len().min(2),
                policy.graphql.len().min(2),
                policy.warnings.len().min(2)
            ))
        }
        Err(errors) => {
            assert!(!errors.is_empty(), "refused without an error");
            // The first problem's kind and how many there are: every combination of kinds
            // would be a new outcome, and the pool would churn.
            let mut outcome = Outcome::hash_of(&errors.len().min(4));
            for (index, error) in errors.iter().enumerate() {
                if let Some(at) = error.location() {
                    let Some(file) = files.iter().find(|f| f.origin == at.origin) else {
                        panic!("{error}: located in a file that was not read");
                    };
                    // One line past the last: an error at the end of a file ending in "\n".
                    let lines = file.text.split('\n').count() + 1;
                    assert!(
                        at.line >= 1 && at.line <= lines,
                        "{error}: line {} of a file of {lines} lines",
                        at.line
                    );
                    assert!(at.column >= 1, "{error}: column 0");
                }
                // The kind of problem: not where (the text before the first colon), nor the
                // names and values it quotes.
                let message = error.to_string();
                let what = message.split_once(": ").map_or(&*message, |(_, m)| m);
                let kind = what.split(['`', '"']).next().unwrap_or(what);
                if index == 0 {
                    outcome = outcome.and(Outcome::of(kind));
                }
            }
            outcome
        }
    }
}

/// A TOML document written from `u`'s choices: tables and arrays of tables of the policy,
/// keys it knows, values of every TOML type.
fn toml_document(u: &mut Unstructured<'_>) -> String {
    let mut out = String::new();
    let sections = u.int_in_range(0..=8u8).unwrap_or(0);
    for _ in 0..sections {
        match u.int_in_range(0..=3u8).unwrap_or(0) {
            0 => {
                let table = u.choose(TABLES).copied().unwrap_or("limits");
                out.push_str(&format!("[{table}]\n"));
            }
            1 | 2 => {
                let array = u.choose(ARRAYS).copied().unwrap_or("principal");
                out.push_str(&format!("[[{array}]]\n"));
            }
            _ => {
                let array = u.choose(ARRAYS).copied().unwrap_or("principal");
                let key = u.choose(KEYS).copied().unwrap_or("env");
                out.push_str(&format!("[{array}.{key}]\n"));
            }
        }
        let pairs = u.int_in_range(0..=6u8).unwrap_or(0);
        for _ in 0..pairs {
            let key = u.choose(KEYS).copied().unwrap_or("name");
            let value = toml_value(u, 3);
            out.push_str(&format!("{key} = {value}\n"));
        }
    }
    out
}

fn toml_value(u: &mut Unstructured<'_>, depth: usize) -> String {
    match u.int_in_range(0..=9u8).unwrap_or(0) {
        0 => u.arbitrary::<bool>().unwrap_or(false).to_string(),
        1 => u.arbitrary::<i64>().unwrap_or(0).to_string(),
        2 => u.int_in_range(-2..=70_000i64).unwrap_or(1).to_string(),
        3 => {
            let f: f64 = u.arbitrary().unwrap_or(0.5);
            if f.is_finite() {
                format!("{f:?}")
            } else {
                "inf".into()
            }
        }
        4 => toml_string(&u.arbitrary::<String>().unwrap_or_default()),
        5 if depth > 0 => {
            let n = u.int_in_range(0..=4u8).unwrap_or(0);
            let items: Vec<String> = (0..n).map(|_| toml_value(u, depth - 1)).collect();
            format!("[{}]", items.join(", "))
        }
        6 if depth > 0 => {
            let n = u.int_in_range(0..=3u8).unwrap_or(0);
            let items: Vec<String> = (0..n)
                .map(|_| {
                    let key = u.choose(KEYS).copied().unwrap_or("a");
                    format!("{key} = {}", toml_value(u, depth - 1))
                })
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        _ => toml_string(u.choose(WORDS).copied().unwrap_or("")),
    }
}

/// A TOML basic string of `text`, escaped.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[test]
fn fuzz_seeds_policy() {
    fuzz().replay(target);
}
