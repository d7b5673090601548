//! Python programs against the real daemon and real workers: results, print, tool calls with
//! keyword arguments, `asyncio.gather` as one batch, tool errors, the contract check, syntax
//! and import errors, the limits (the daemon alive after each), replay in a session, events
//! streamed, secrets redacted both ways and near misses coerced. Client tools, approvals,
//! detached runs and learned types in Python are tested beside their TypeScript tests.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::{ServerTransport, SettingValue};
use airlock_supervisor::agent_api::{ExecutionRequest, ExecutionResponse, RequestLanguage, Status};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::{DaemonOptions, TestDaemon, mcp_peers};
use serde_json::json;
use std::sync::Arc;

async fn py(d: &TestDaemon, code: &str) -> ExecutionResponse {
    py_with(d, code, None, None).await
}

async fn py_with(
    d: &TestDaemon,
    code: &str,
    timeout_ms: Option<u64>,
    session: Option<&str>,
) -> ExecutionResponse {
    d.client()
        .await
        .execute(&ExecutionRequest {
            code: code.to_owned(),
            language: RequestLanguage::Python,
            timeout_ms,
            session: session.map(str::to_owned),
            ..Default::default()
        })
        .await
        .expect("execution request failed")
}

/// The daemon still answers (a trivial program runs) after whatever the last one did.
async fn still_alive(d: &TestDaemon) {
    let r = py(d, "40 + 2").await;
    assert_eq!((r.status, r.result), (Status::Ok, json!(42)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_print_and_the_last_expression() {
    let d = TestDaemon::start().await;
    let r = py(
        &d,
        "names = ['ana', 'bo']\nprint('hello', len(names))\n{'names': names, 'n': len(names)}",
    )
    .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!({"names": ["ana", "bo"], "n": 2}));
    assert_eq!(r.stdout, "hello 2\n");
    // Measured, for the report: a trivial program's worker, Python and TypeScript.
    let ts = d.exec("1").await;
    println!(
        "peak RSS, trivial program: python {} bytes, typescript {} bytes",
        r.stats.peak_rss_bytes.unwrap_or(0),
        ts.stats.peak_rss_bytes.unwrap_or(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_with_keyword_arguments() {
    let d = TestDaemon::start().await;
    let r = py(&d, "r = await tools.test.add(a=40, b=2)\ne = await tools.test.echo(x=[1, 'y'], ok=True)\n[r, e]").await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!([42.0, {"x": [1, "y"], "ok": true}]));
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[0].args, json!({"a": 40, "b": 2}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gather_is_one_batch() {
    let d = TestDaemon::start().await;
    let r = py(
        &d,
        "import asyncio\nrs = await asyncio.gather(tools.test.sleep(ms=300), tools.test.sleep(ms=300), tools.test.sleep(ms=300))\n[x['slept'] for x in rs]",
    )
    .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result, json!([300, 300, 300]));
    let ids: Vec<u32> = r.tool_calls.iter().map(|c| c.id).collect();
    assert_eq!(ids, [1, 2, 3]);
    // All three went out before the first answer: each started before any could finish.
    let first_end = r
        .tool_calls
        .iter()
        .map(|c| c.started_ms + c.duration_ms)
        .fold(f64::INFINITY, f64::min);
    for call in &r.tool_calls {
        assert!(call.started_ms < first_end, "{:?}", r.tool_calls);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_caught_and_uncaught() {
    let d = TestDaemon::start().await;
    let r = py(
        &d,
        "try:\n    await tools.test.fail(message='boom')\n    r = 'no'\nexcept RuntimeError as e:\n    r = str(e)\nr",
    )
    .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let text = r.result.as_str().unwrap();
    assert!(
        text.starts_with("test.fail: boom (code: upstream_error"),
        "{text}"
    );

    let r = py(&d, "x = 1\nawait tools.test.fail(message='boom')").await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let e = r.error.unwrap();
    assert_eq!(e.kind.as_str(), "runtime");
    assert_eq!(e.name.as_deref(), Some("ToolError"));
    assert_eq!(e.message, "test.fail: boom");
    assert_eq!(e.line, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_is_refused_before_anything_runs() {
    let d = TestDaemon::start().await;
    let r = py(
        &d,
        "print('ran')\nawait tools.test.echo(x=1)\nawait tools.test.ad(a=1, b=2)",
    )
    .await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let e = r.error.unwrap();
    assert_eq!(e.kind.as_str(), "contract", "{e:?}");
    assert_eq!(e.message, "`tools.test` has no tool `ad`");
    assert_eq!(e.hint.as_deref(), Some("did you mean tools.test.add()?"));
    assert_eq!(e.line, Some(3));
    assert_eq!(r.stdout, "");
    assert!(r.tool_calls.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syntax_and_import_errors_say_where_and_what() {
    let d = TestDaemon::start().await;
    let r = py(&d, "x = 1\nif x\n    y = 2").await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let e = r.error.unwrap();
    assert_eq!(e.kind.as_str(), "syntax", "{e:?}");
    assert_eq!(e.line, Some(2));
    assert!(e.column.is_some());
    assert!(e.hint.unwrap().contains("Python"));

    let r = py(&d, "import requests\nrequests.get('https://example.com')").await;
    let e = r.error.unwrap();
    assert_eq!(e.line, Some(1));
    assert!(e.message.contains("asyncio, base64"), "{e:?}");
    assert!(e.message.contains("call tools"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_end_programs_and_the_daemon_lives_on() {
    let d = TestDaemon::start().await;
    let r = py_with(&d, "while True:\n    pass", Some(300), None).await;
    assert_eq!(r.status, Status::Timeout, "{r:?}");
    still_alive(&d).await;

    let r = py(&d, "xs = []\nwhile True:\n    xs.append('x' * 100000)").await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    assert_eq!(r.error.unwrap().kind.as_str(), "memory_limit");
    still_alive(&d).await;

    let r = py(&d, "def f(n):\n    return f(n + 1)\nf(0)").await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let e = r.error.unwrap();
    assert_eq!(e.kind.as_str(), "stack_overflow", "{e:?}");
    assert_eq!(e.line, Some(2));
    still_alive(&d).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_replays_to_the_same_result_clock_and_order() {
    let d = TestDaemon::start().await;
    let code = "from datetime import datetime, timezone\nt0 = datetime.now(timezone.utc).isoformat()\nn = await tools.test.count()\nt1 = datetime.now(timezone.utc).isoformat()\ns = list({'pear', 'apple', 'fig'})\n[n, t0, t1, s, hash('airlock')]";
    let first = py_with(&d, code, None, Some("new")).await;
    assert_eq!(first.status, Status::Ok, "{first:?}");
    let session = first.session.clone().expect("a new session's id");
    let again = py_with(&d, code, None, Some(&session)).await;
    assert_eq!(again.status, Status::Ok, "{again:?}");
    assert_eq!(again.result, first.result);
    assert!(again.tool_calls[0].replayed, "{:?}", again.tool_calls);
    // The tool ran once: the re-run's answer came from the journal.
    assert_eq!(d.tools.calls.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// The daemon with the npm memory server (its graph in `store`), or `None` when the server
/// is not installed (the skip is reported).
async fn with_memory(store: &std::path::Path, test: &str) -> Option<TestDaemon> {
    let mut memory = mcp_peers::npm_server("memory", "server-memory", &[], test)?;
    if let ServerTransport::Stdio { env, .. } = &mut memory.transport {
        env.push((
            "MEMORY_FILE_PATH".into(),
            SettingValue::Literal(store.join("memory.jsonl").display().to_string()),
        ));
    }
    memory.confinement.write = vec![store.to_owned()];
    Some(
        TestDaemon::start_with(DaemonOptions::default().source(Arc::new(McpServer::new(
            memory,
            Arc::new(SecretStore::empty()),
        ))))
        .await,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_on_tool_values_are_explained_in_python_terms() {
    let store = tempfile::tempdir().unwrap();
    let Some(d) = with_memory(
        store.path(),
        "errors_on_tool_values_are_explained_in_python_terms",
    )
    .await
    else {
        return;
    };
    // A key the result lacks.
    let r = py(
        &d,
        "r = await tools.memory.read_graph()\nnames = [n['name'] for n in r[\"nodes\"]]",
    )
    .await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    let e = r.error.unwrap();
    assert_eq!(e.name.as_deref(), Some("KeyError"), "{e:?}");
    assert_eq!((e.line, e.column), (Some(2), Some(29)), "{e:?}");
    let explanation = e.explanation.clone().unwrap_or_default();
    assert!(
        explanation.starts_with("r[\"nodes\"]: KeyError — r is the result of tools.memory.read_graph (line 1), a dict with keys entities, relations"),
        "{e:?}"
    );
    assert!(
        e.hint.unwrap().starts_with(&explanation),
        "the hint leads with it"
    );
    assert!(e.excerpt.is_some(), "{explanation}");

    // An attribute on a dict.
    let r = py(&d, "r = await tools.memory.read_graph()\nlen(r.entities)").await;
    let e = r.error.unwrap();
    assert_eq!(e.name.as_deref(), Some("AttributeError"), "{e:?}");
    let explanation = e.explanation.unwrap_or_default();
    assert!(
        explanation.starts_with("r.entities: AttributeError — r is the result of tools.memory.read_graph (line 1), a dict with keys entities, relations")
            && explanation.ends_with("read with r[\"entities\"]"),
        "{explanation}"
    );

    // A coroutine used as a value: the call was not awaited.
    let r = py(&d, "r = tools.memory.read_graph()\nr['entities']").await;
    let e = r.error.unwrap();
    assert_eq!(e.name.as_deref(), Some("TypeError"), "{e:?}");
    let explanation = e.explanation.unwrap_or_default();
    assert!(
        explanation
            .contains("r is the coroutine of tools.memory.read_graph (line 1), not its result")
            && explanation.contains("add `await`"),
        "{explanation}"
    );
    assert!(
        e.hint.unwrap().contains("x = await tools."),
        "a Python hint"
    );
    d.stop().await;
}

/// `print` and `progress` stream as events before the result, in the order the program made
/// them, around the tool call's events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_and_progress_stream_before_the_result() {
    let d = TestDaemon::start().await;
    let mut events = Vec::new();
    let r = d
        .client()
        .await
        .execute_streaming(
            &ExecutionRequest {
                code: "print('one')\nprogress(0.5)\nawait tools.test.echo()\nprint('two')\n7"
                    .into(),
                language: RequestLanguage::Python,
                timeout_ms: Some(5000),
                ..Default::default()
            },
            |e| events.push(serde_json::to_value(e).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(r.result, json!(7), "{r:?}");
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "started",
            "console",
            "progress",
            "tool_call_started",
            "tool_call_finished",
            "console"
        ],
        "{events:?}"
    );
    assert_eq!(events[1]["text"], json!("one"));
    assert_eq!(events[2]["value"], json!(0.5));
}

/// A secret-shaped tool result is redacted before the Python program sees it, and what the
/// program prints or raises is scanned on its way to the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_redacted_both_ways() {
    // Made up, of GitHub's classic shape, in two parts so the sources do not hold one.
    let token = concat!("ghp_", "hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES");
    let d = TestDaemon::start().await;
    let r = py(
        &d,
        &format!(
            "r = await tools.test.echo(note='token: {token}')\n{{'saw': 'ghp_' in r['note'], 'note': r['note']}}"
        ),
    )
    .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.result["saw"], json!(false), "{r:?}");
    assert_eq!(r.result["note"], json!("token: [REDACTED:github-token]"));
    assert!(!serde_json::to_string(&r).unwrap().contains(token));

    let r = py(
        &d,
        &format!("print('leaking {token} now')\nraise ValueError('bad {token}')"),
    )
    .await;
    assert_eq!(r.status, Status::Error, "{r:?}");
    assert_eq!(r.stdout, "leaking [REDACTED:github-token] now\n");
    assert!(!serde_json::to_string(&r).unwrap().contains(token), "{r:?}");
}

/// Near misses in Python's keyword arguments are coerced as TypeScript's are (a numeric
/// string for a number, a number for a string) and the coercion is in the warnings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_misses_are_coerced() {
    let test = "near_misses_are_coerced";
    let Some(everything) = mcp_peers::server_everything("everything", test) else {
        return;
    };
    let d = TestDaemon::start_with(DaemonOptions::default().source(Arc::new(McpServer::new(
        everything,
        Arc::new(SecretStore::empty()),
    ))))
    .await;
    let r = py(
        &d,
        "s = await tools.everything.get_sum(a='100', b=2)\ne = await tools.everything.echo(message=5)\n[s, e]",
    )
    .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        r.result,
        json!(["The sum of 100 and 2 is 102.", "Echo: 5"]),
        "{r:?}"
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("coerc")),
        "{:?}",
        r.warnings
    );
}
