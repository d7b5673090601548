//! The secret scanner in the execution path: tool results are scanned before the program sees
//! them (redacted, or the call failed for sources the policy lists), agent-bound output is
//! scanned, the trace says which rule fired and where but never the value, and every execution
//! lands in the audit trail.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{RedactionPlace, Status};
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::{Value, json};

/// A made-up token of GitHub's classic shape (never a real credential). Written in two parts
/// so this file itself does not look like it holds one (the scanner's false-positive test
/// reads the project's sources).
const GITHUB_TOKEN: &str = concat!("ghp_", "hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES");
/// A credential the daemon holds (through a policy reference), high-entropy.
const CANARY: &str = "airlock-canary-Qm9vZ2xlIGlzIG5vdCBhIHNlY3JldA-7f3a9c";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_shaped_results_are_redacted_before_the_program_sees_them() {
    let d = TestDaemon::start().await;
    let r = d
        .exec(&format!(
            "const r = await tools.test.echo({{ note: 'token: {GITHUB_TOKEN}' }}); \
             return {{ sawToken: r.note.includes('ghp_'), note: r.note }}"
        ))
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["sawToken"], json!(false), "{r:?}");
    assert_eq!(r.result["note"], json!("token: [REDACTED:github-token]"));
    // The trace names the rule and the place, never the value.
    let call = &r.tool_calls[0];
    let places: Vec<(RedactionPlace, &str, Option<&str>)> = call
        .redactions
        .iter()
        .map(|x| (x.place, x.rule.as_str(), x.pointer.as_deref()))
        .collect();
    // In the result the program got, and in its arguments as the trace shows them.
    assert_eq!(
        places,
        [
            (RedactionPlace::Result, "github-token", Some("/note")),
            (RedactionPlace::Arguments, "github-token", Some("/note"))
        ],
        "{call:?}"
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("redacted from tool results")),
        "{:?}",
        r.warnings
    );
    // The program's own arguments are agent-bound too: the trace does not echo the token.
    let trace = serde_json::to_string(&r.tool_calls).unwrap();
    assert!(!trace.contains(GITHUB_TOKEN), "{trace}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_bound_output_is_scanned() {
    let d = TestDaemon::start().await;
    let r = d
        .exec(&format!(
            "console.log('leaking {GITHUB_TOKEN} now'); throw new Error('bad {GITHUB_TOKEN}')"
        ))
        .await;
    assert_eq!(r.status, Status::Error);
    assert_eq!(r.stdout, "leaking [REDACTED:github-token] now\n");
    let error = r.error.unwrap();
    assert!(
        error.message.contains("[REDACTED:github-token]") && !error.message.contains("ghp_"),
        "{error:?}"
    );
    assert!(
        !error.excerpt.unwrap_or_default().contains(GITHUB_TOKEN),
        "the code excerpt is scanned too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_set_to_fail_fails_the_call_instead() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.secret_scanning.fail = vec!["test".into()];
    }))
    .await;
    let r = d
        .exec(&format!(
            "try {{ await tools.test.echo({{ t: '{GITHUB_TOKEN}' }}); return 'returned' }} \
             catch (e) {{ return {{ code: e.code, message: e.message }} }}"
        ))
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["code"], json!("secret_in_result"));
    let message = r.result["message"].as_str().unwrap();
    assert!(
        message.contains("carried 1 secret(s) (github-token)"),
        "{message}"
    );
    assert!(!message.contains("ghp_"));
}

/// A daemon holding CANARY: the policy references the secret (a server that is never
/// started), so the daemon holds it and its scanner knows it.
async fn canary_daemon() -> TestDaemon {
    TestDaemon::start_with(
        DaemonOptions::default()
            .secret("canary", CANARY)
            .policy(|p| {
                let mut policy = airlock_policy::Policy::parse(
                    "[[server]]\nname = \"holder\"\ncommand = \"/bin/false\"\nenv = { TOKEN = { secret = \"canary\" } }\n",
                    "test",
                )
                .unwrap();
                p.servers.append(&mut policy.servers);
            }),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_secrets_are_caught_in_encoded_forms() {
    use base64::Engine as _;
    let d = canary_daemon().await;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("x:{CANARY}"));
    let hex: String = CANARY.bytes().map(|b| format!("{b:02x}")).collect();
    let r = d
        .exec(&format!(
            "const a = await tools.test.echo({{ b64: '{encoded}', hex: '{hex}', half: '{}' }}); \
             return a",
            &CANARY[..24]
        ))
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let text = serde_json::to_string(&r.result).unwrap();
    assert!(
        !text.contains(&hex) && !text.contains(&encoded[4..]),
        "{text}"
    );
    assert!(text.contains("[REDACTED:known-secret]"), "{text}");
    let rules: Vec<&str> = r.tool_calls[0]
        .redactions
        .iter()
        .filter(|x| x.place == RedactionPlace::Result)
        .map(|x| x.rule.as_str())
        .collect();
    assert!(
        rules.iter().all(|rule| *rule == "known-secret"),
        "{rules:?}"
    );
    assert!(rules.len() >= 3, "base64, hex and a fragment: {rules:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executions_reach_the_audit_trail() {
    let d = TestDaemon::start().await;
    let r = d.exec("await tools.test.echo({ a: 1 }); 42").await;
    assert_eq!(r.status, Status::Ok);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let (_, body) = d.client().await.get("/v1/health").await.unwrap();
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["audit"]["state"], json!("ok"), "{health}");
    // Written by the log's own thread: wait for it.
    let mut written = 0;
    for _ in 0..200 {
        let (_, body) = d.client().await.get("/v1/health").await.unwrap();
        let health: Value = serde_json::from_str(&body).unwrap();
        written = health["audit"]["written"].as_u64().unwrap_or(0);
        if written >= 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        written >= 1,
        "the execution was never written to the audit log"
    );
    let (_, metrics) = d.client().await.get("/metrics").await.unwrap();
    assert!(metrics.contains("airlock_audit"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_progress_messages_are_scanned_before_the_agent_sees_them() {
    use airlock_supervisor::agent_api::{ExecutionEvent, ExecutionRequest, RequestLanguage};
    let d = TestDaemon::start().await;
    let request = ExecutionRequest {
        code: format!(
            "await tools.test.progress({{ steps: 2, message: 'using {GITHUB_TOKEN} now' }}); 1"
        ),
        language: RequestLanguage::Typescript,
        timeout_ms: None,
        session: None,
        replay: None,
        ..Default::default()
    };
    let mut messages = Vec::new();
    let r = d
        .client()
        .await
        .execute_streaming(&request, |event| {
            if let ExecutionEvent::ToolProgress { message, .. } = event {
                messages.push(message.clone());
            }
        })
        .await
        .unwrap();
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        messages,
        vec![Some("using [REDACTED:github-token] now".to_owned()); 2]
    );
    // The call's trace lists what was replaced in its progress, without a pointer (a progress
    // message is not part of the result).
    let call = &r.tool_calls[0];
    let rules: Vec<(&str, Option<&str>)> = call
        .redactions
        .iter()
        .filter(|r| r.place == RedactionPlace::Progress)
        .map(|r| (r.rule.as_str(), r.pointer.as_deref()))
        .collect();
    assert_eq!(rules, [("github-token", None); 2], "{call:?}");
}

/// Every redaction is in the audit log with its rule, place and pointer (and, for a known
/// secret, the secret's name), under its call or the program's output; the values are in no
/// file of the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redactions_reach_the_audit_log_by_rule_and_place_never_by_value() {
    let d = canary_daemon().await;
    let r = d
        .exec(&format!(
            "const a = await tools.test.echo({{ deep: {{ key: '{CANARY}' }} }}); \
             console.error('printed {GITHUB_TOKEN}'); a"
        ))
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    // The response's own lists, as the agent sees them: no secret name.
    assert_eq!(r.redactions.len(), 1, "{:?}", r.redactions);
    assert!(r.redactions.iter().all(|x| x.secret.is_none()));
    let response = serde_json::to_string(&r).unwrap();
    assert!(!response.contains("canary\""), "{response}");

    let rows = d.audited_executions().await;
    let row = rows.first().expect("the execution reached the audit log");
    let call: Vec<(&str, &str, Option<&str>, Option<&str>)> = row.tool_calls[0]
        .redactions
        .iter()
        .map(|x| {
            (
                x.place.as_str(),
                x.rule.as_str(),
                x.pointer.as_deref(),
                x.secret.as_deref(),
            )
        })
        .collect();
    // The program's arguments held the canary too (the trace shows them redacted).
    assert!(
        call.contains(&("result", "known-secret", Some("/deep/key"), Some("canary"))),
        "{call:?}"
    );
    assert!(
        call.contains(&(
            "arguments",
            "known-secret",
            Some("/deep/key"),
            Some("canary")
        )),
        "{call:?}"
    );
    let output: Vec<(&str, &str)> = row
        .output_redactions
        .iter()
        .map(|x| (x.place.as_str(), x.rule.as_str()))
        .collect();
    // The result is the echo's already-redacted value: only the console line is new.
    assert_eq!(output, [("stderr", "github-token")]);
    assert_eq!(row.redactions as usize, call.len() + output.len());
    for entry in std::fs::read_dir(d.audit_directory()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        for value in [CANARY, GITHUB_TOKEN] {
            assert!(
                !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
                "a secret's value is in the audit log"
            );
        }
    }
}
