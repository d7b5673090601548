//! Bad programs and faults: each ends in a clear error within the deadline, and the daemon
//! keeps serving the next request.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{ExecutionResponse, Status};
use airlock_tests::processes::{children_named, wait_until};
use airlock_tests::{DaemonOptions, TestDaemon};
use serde_json::json;
use std::time::Instant;

/// Runs `code` with a short deadline, checks that the answer came within it (plus slack for
/// a loaded machine), and that the daemon still runs the next program.
async fn expect_failure(d: &TestDaemon, code: &str, timeout_ms: u64) -> ExecutionResponse {
    let started = Instant::now();
    let r = d.exec_timeout(code, timeout_ms).await;
    let elapsed = started.elapsed().as_millis() as u64;
    assert!(
        elapsed < timeout_ms + 3_000,
        "answer took {elapsed} ms for a {timeout_ms} ms deadline"
    );
    assert_ne!(r.status, Status::Ok, "expected a failure: {r:?}");
    let err = r.error.as_ref().expect("error present");
    assert!(!err.message.is_empty());
    let next = d.exec("'next'").await;
    assert_eq!(
        next.result,
        json!("next"),
        "daemon did not serve the next request"
    );
    r
}

fn kind(r: &ExecutionResponse) -> &str {
    r.error.as_ref().unwrap().kind.as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_loop_times_out() {
    let d = TestDaemon::start().await;
    let r = expect_failure(&d, "while (true) {}", 500).await;
    assert_eq!(r.status, Status::Timeout);
    assert_eq!(kind(&r), "timeout");
    assert!(r.error.unwrap().hint.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_loop_in_try_finally_and_catch_times_out() {
    let d = TestDaemon::start().await;
    let r = expect_failure(
        &d,
        "try { while (true) {} } finally { while (true) {} }",
        500,
    )
    .await;
    assert_eq!(r.status, Status::Timeout);
    let r = expect_failure(&d, "for(;;) { try { while (true) {} } catch (e) { } }", 500).await;
    assert_eq!(r.status, Status::Timeout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promise_job_flood_times_out() {
    let d = TestDaemon::start().await;
    let r = expect_failure(
        &d,
        "function f() { Promise.resolve().then(f) } f(); await new Promise(() => {})",
        500,
    )
    .await;
    assert_eq!(r.status, Status::Timeout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_tool_call_times_out_the_program() {
    let d = TestDaemon::start().await;
    let r = expect_failure(&d, "await tools.test.sleep({ ms: 10000 })", 500).await;
    assert_eq!(r.status, Status::Timeout);
    assert_eq!(r.tool_calls.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_is_a_stack_overflow() {
    let d = TestDaemon::start().await;
    let r = expect_failure(&d, "function f(n) { return f(n + 1) + 1 } f(0)", 5000).await;
    assert_eq!(kind(&r), "stack_overflow", "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_bombs_hit_the_memory_limit() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.limits.memory_bytes = 64 << 20;
    }))
    .await;
    let r = expect_failure(&d, "'x'.repeat(2 ** 30)", 5000).await;
    assert!(matches!(kind(&r), "memory_limit" | "runtime"), "{r:?}");
    let r = expect_failure(
        &d,
        "const a = []; while (true) a.push(new Array(1e6).fill(1.5))",
        10000,
    )
    .await;
    assert_eq!(kind(&r), "memory_limit", "{r:?}");
    let r = expect_failure(&d, "let s = 'ab'; while (true) s = s + s", 10000).await;
    assert!(matches!(kind(&r), "memory_limit" | "runtime"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_console_output_is_stopped_at_the_output_limit() {
    let d = TestDaemon::start_with(DaemonOptions::default().policy(|p| {
        p.limits.max_output_bytes = 64 * 1024;
    }))
    .await;
    let r = expect_failure(&d, "while (true) console.log('spam '.repeat(100))", 5000).await;
    assert_eq!(kind(&r), "output_limit", "{r:?}");
    assert!(
        r.stdout.len() <= 64 * 1024,
        "stdout is {} bytes",
        r.stdout.len()
    );
    assert!(r.stdout.starts_with("spam spam"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_json_results_are_explained() {
    let d = TestDaemon::start().await;
    let r = expect_failure(&d, "10n ** 20n", 5000).await;
    assert_eq!(kind(&r), "result_not_json");
    assert!(
        r.error.as_ref().unwrap().message.contains("BigInt"),
        "{r:?}"
    );
    let r = expect_failure(&d, "const a: any = {}; a.self = a; a", 5000).await;
    assert_eq!(kind(&r), "result_not_json");
    assert!(r.error.as_ref().unwrap().message.contains("cycle"), "{r:?}");
    let r = expect_failure(&d, "(function named() {})", 5000).await;
    assert_eq!(kind(&r), "result_not_json");
    // Documented conversion, not an error: undefined becomes null.
    let r = d.exec("undefined").await;
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.result, json!(null));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syntax_errors_carry_line_and_column() {
    let d = TestDaemon::start().await;
    let r = expect_failure(&d, "const a = 1;\nconst b = ;\n", 5000).await;
    let err = r.error.unwrap();
    assert_eq!(err.kind.as_str(), "syntax");
    assert_eq!(err.line, Some(2), "{err:?}");
    assert!(err.column.is_some());
    assert!(err.hint.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_errors_carry_the_position_in_the_submitted_code() {
    let d = TestDaemon::start().await;
    let r = expect_failure(
        &d,
        "const x: number = 1;\n\nconst o: any = null;\no.field.deeper;\n",
        5000,
    )
    .await;
    let err = r.error.unwrap();
    assert_eq!(err.kind.as_str(), "runtime");
    assert_eq!(err.name.as_deref(), Some("TypeError"));
    assert_eq!(err.line, Some(4), "{err:?}");
    // The code around the failing line, so the program can be fixed from the answer alone.
    let excerpt = err.excerpt.unwrap();
    assert!(excerpt.contains("> 4 | o.field.deeper;"), "{excerpt}");
    assert!(excerpt.contains("  2 | "), "{excerpt}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_megabyte_program_runs() {
    let d = TestDaemon::start().await;
    // ~10 MB: one big array literal of numbers, summed.
    let mut code = String::with_capacity(10 << 20);
    code.push_str("const data = [");
    let mut n = 0u64;
    while code.len() < 10 << 20 {
        code.push_str("123456,");
        n += 1;
    }
    code.push_str("0];\ndata.length");
    let r = d.exec_timeout(&code, 60_000).await;
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    assert_eq!(r.result, json!(n + 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_require_import_or_fetch() {
    let d = TestDaemon::start().await;
    let r = d
        .exec(
            r#"
const seen: Record<string, string> = {};
seen.require = typeof (globalThis as any).require;
seen.fetch = typeof (globalThis as any).fetch;
seen.process = typeof (globalThis as any).process;
seen.std = typeof (globalThis as any).std;
seen.os = typeof (globalThis as any).os;
seen
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    for key in ["require", "fetch", "process", "std", "os"] {
        assert_eq!(r.result[key], json!("undefined"), "{key}: {}", r.result);
    }
    // `import()` is refused before the program runs, even behind a try.
    for m in ["os", "std", "fs", "node:fs"] {
        let r = d
            .exec(&format!(
                "let seen = 'loaded';\ntry {{ await import({m:?}); }} catch (e) {{ seen = 'refused'; }}\nseen"
            ))
            .await;
        assert_eq!(r.status, Status::Error, "{m}: {r:?}");
        let e = r.error.as_ref().unwrap();
        assert!(
            e.message.starts_with("`import()` is not available"),
            "{m}: {e:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_functions_lead_nowhere_but_the_sandbox() {
    let d = TestDaemon::start().await;
    let r = d
        .exec(
            r#"
const f: any = (tools as any).test.echo;
const viaCtor = f.constructor("return typeof globalThis.require + typeof globalThis.process")();
const logCtor = (console.log as any).constructor("return this")() === globalThis;
const proto = Object.getPrototypeOf(f) === Function.prototype;
({ viaCtor, logCtor, proto })
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        r.result,
        json!({"viaCtor": "undefinedundefined", "logCtor": true, "proto": true})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_breaks_the_protocol_is_stopped() {
    let fake = std::path::PathBuf::from(env!("CARGO_BIN_EXE_airlock-fake-worker"));
    let d = TestDaemon::start_with(DaemonOptions::default().worker(fake)).await;
    assert_eq!(d.exec_timeout("ok", 5000).await.result, json!("fake"));
    for (program, expect_kind, expect_text) in [
        ("garbage", "internal", "protocol"),
        ("oversized", "internal", "protocol"),
        ("truncated", "internal", "stream ended inside a frame"),
        ("exit", "worker_crashed", "exited with code 0"),
    ] {
        let r = d.exec_timeout(program, 5000).await;
        assert_eq!(r.status, Status::Error, "{program}: {r:?}");
        let err = r.error.unwrap();
        assert_eq!(err.kind.as_str(), expect_kind, "{program}: {err:?}");
        assert!(
            err.message.contains(expect_text),
            "{program}: {}",
            err.message
        );
    }
    // A worker that never answers is killed at the deadline.
    let r = d.exec_timeout("hang", 300).await;
    assert_eq!(r.status, Status::Timeout);
    // Every fake was killed and reaped: none is left behind.
    assert!(wait_until(5, || children_named(
        std::process::id(),
        "airlock-fake-worker"
    )
    .is_empty()));
    assert_eq!(d.exec_timeout("ok", 5000).await.result, json!("fake"));
}

/// A tool source that panics: in `call` (namespace `boom`), or already when listing its tools
/// (namespace `broken`, which the contract check lists too).
#[derive(Debug)]
struct Panicking(&'static str);

impl airlock_supervisor::tools::ToolSource for Panicking {
    fn namespace(&self) -> &str {
        self.0
    }

    fn tools(&self) -> airlock_supervisor::tools::ToolsFuture<'_> {
        Box::pin(async move {
            assert_ne!(self.0, "broken", "a source that panics when listed");
            Ok(vec![airlock_supervisor::tools::ToolDescriptor {
                name: "now".into(),
                description: "panics".into(),
                input_schema: json!({"type": "object"}),
                output_schema: None,
                read_only: false,
            }]
            .into())
        })
    }

    fn call<'a>(
        &'a self,
        _tool: &'a str,
        _args: serde_json::Value,
        _ctx: &'a airlock_supervisor::tools::CallContext,
    ) -> airlock_supervisor::tools::ToolFuture<'a> {
        Box::pin(async { panic!("a source that panics when called") })
    }
}

/// A panic inside the daemon (here, a tool source's) fails the one call it happened in, as an
/// `internal` error the program can catch; the execution, the daemon and the next program go
/// on. (Before, the panicked call was never answered and its program hung to its deadline.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_source_fails_only_its_call() {
    let d = TestDaemon::start_with(
        DaemonOptions::default()
            .source(std::sync::Arc::new(Panicking("boom")))
            .source(std::sync::Arc::new(Panicking("broken"))),
    )
    .await;
    for namespace in ["boom", "broken"] {
        let started = Instant::now();
        let r = d
            .exec_timeout(
                &format!(
                    "try {{ await tools.{namespace}.now({{}}) }} catch (e) {{ [e.code, e.message] }}"
                ),
                20_000,
            )
            .await;
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{namespace}: the program waited {:?} for the panicked call",
            started.elapsed()
        );
        assert_eq!(r.status, Status::Ok, "{namespace}: {r:?}");
        assert_eq!(r.result[0], json!("internal"), "{namespace}: {r:?}");
        assert_eq!(r.tool_calls[0].outcome.as_str(), "error");
    }
    assert_eq!(d.exec("'next'").await.result, json!("next"));
}
