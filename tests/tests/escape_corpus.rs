//! The end-to-end escape corpus (docs/escape-corpus.md): hostile programs, hostile agents on
//! the socket and a compromised worker, each against the real daemon, each with the safe
//! outcome it must end in. The worker-side cases (syscalls, engine) live in
//! `worker/tests/escape.rs` and the engine's unit tests.
//!
//! Every test holds [`serial`]: the daemon runs inside this test process, and the memory and
//! descriptor checks measure this process.

// Test code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::agent_api::{
    CallOutcome, ExecutionRequest, ExecutionResponse, RequestLanguage, Status,
};
use airlock_supervisor::secrets::store::SecretStore;
use airlock_supervisor::tools::sources::mcp::McpServer;
use airlock_tests::processes::{children_named, fd_count, vm_rss_kib, wait_until};
use airlock_tests::{DaemonOptions, TestDaemon, binaries, fault_server, raw_http};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// A daemon with the in-process `test` tools and the fault server as `f` (whose `echo`
/// requires `{ text: string }`, so schema checks are real).
async fn corpus_daemon() -> TestDaemon {
    TestDaemon::start_with(DaemonOptions::default().source(Arc::new(McpServer::new(
        fault_server::stdio("f", &[]),
        Arc::new(SecretStore::empty()),
    ))))
    .await
}

type Check = fn(&ExecutionResponse) -> Result<(), String>;

/// One hostile program and the outcome it must end in.
struct Case {
    name: &'static str,
    code: &'static str,
    timeout_ms: u64,
    check: Check,
}

fn ensure(cond: bool, what: &str, r: &ExecutionResponse) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(format!(
            "{what}: status {:?}, result {}, error {:?}, calls {:?}",
            r.status,
            r.result,
            r.error.as_ref().map(|e| (&e.kind, &e.message)),
            r.tool_calls
                .iter()
                .map(|c| (&c.tool, &c.args, &c.outcome))
                .collect::<Vec<_>>()
        ))
    }
}

/// Programs that attack the bridge, the engine and the tool names.
const PROGRAM_CASES: &[Case] = &[
    Case {
        name: "builtins-poisoned-before-calls",
        code: r#"
JSON.stringify = () => '{"evil":true}';
JSON.parse = () => ({ evil: true });
Array.prototype.push = function () { throw new Error("push poisoned") };
Array.prototype.join = () => "poisoned";
Map.prototype.get = () => undefined;
Reflect.apply = () => { throw new Error("apply poisoned") };
Function.prototype.call = () => "poisoned";
Function.prototype.apply = () => "poisoned";
Object.defineProperty = () => { throw new Error("defineProperty poisoned") };
const r = await tools.test.echo({ a: 1 });
console.log("seen", { b: 2 });
progress({ p: 1 });
r
"#,
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Ok
                    && r.result == json!({"a": 1})
                    && r.tool_calls.len() == 1
                    && r.tool_calls[0].args == json!({"a": 1})
                    && r.stdout == "seen { b: 2 }\n",
                "the bridge uses its own captured built-ins",
                r,
            )
        },
    },
    Case {
        name: "to-json-on-object-prototype",
        code: r#"
Object.prototype.toJSON = function () { return "x" };
let code = "none";
try { await tools.test.echo({ a: 1 }) } catch (e: any) { code = e.code }
code
"#,
        timeout_ms: 5_000,
        check: |r| {
            // The serialised copy (the string "x") is what was checked and refused.
            ensure(
                r.result == json!("invalid_arguments")
                    && r.tool_calls.len() == 1
                    && r.tool_calls[0].args == json!("x"),
                "the checked copy is the serialised one",
                r,
            )
        },
    },
    Case {
        name: "then-on-object-prototype",
        code: r#"
(Object.prototype as any).then = function (resolve: any) { delete (Object.prototype as any).then; resolve("hijacked") };
const r = await tools.test.echo({ a: 1 });
r
"#,
        timeout_ms: 5_000,
        check: |r| {
            // Only the program's own realm is affected: one call, sent as written.
            ensure(
                r.status == Status::Ok
                    && r.result == json!("hijacked")
                    && r.tool_calls.len() == 1
                    && r.tool_calls[0].args == json!({"a": 1}),
                "a thenable prototype changes only what the program sees",
                r,
            )
        },
    },
    Case {
        name: "then-in-tool-result",
        code: r#"const r = await tools.test.echo({ then: "not a function", x: 1 }); r"#,
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.result == json!({"then": "not a function", "x": 1}),
                "a result with a `then` key is data",
                r,
            )
        },
    },
    Case {
        name: "overwrite-tools-console-progress",
        code: r#"
const g: any = globalThis;
const attempts: string[] = [];
try { g.tools = null; attempts.push("assigned") } catch { attempts.push("assign refused") }
try { delete g.tools; attempts.push(typeof g.tools) } catch { attempts.push("delete refused") }
try { Object.defineProperty(g, "tools", { value: 1 }); attempts.push("redefined") } catch { attempts.push("redefine refused") }
try { g.tools.test = 1; attempts.push("namespace assigned") } catch { attempts.push("namespace refused") }
g.console = { log: () => attempts.push("fake console") };
g.progress = () => attempts.push("fake progress");
console.log("x");
progress(1);
const r = await tools.test.echo({ ok: true });
[attempts, r]
"#,
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Ok
                    && r.result
                        == json!([["assign refused", "delete refused", "redefine refused", "namespace refused", "fake console", "fake progress"], {"ok": true}])
                    && r.stdout.is_empty(),
                "tools cannot be replaced; console and progress replacements stay in the program",
                r,
            )
        },
    },
    Case {
        name: "getter-double-fetch",
        code: r#"
let reads = 0;
const args = { get text() { reads++; return reads === 1 ? "benign" : (42 as any) } };
const r = await tools.f.echo(args);
[r, reads]
"#,
        timeout_ms: 10_000,
        check: |r| {
            // The schema (`text: string`) was checked on the copy made by the one read.
            ensure(
                r.status == Status::Ok
                    && r.result == json!(["benign", 1])
                    && r.tool_calls.len() == 1
                    && r.tool_calls[0].args == json!({"text": "benign"})
                    && r.tool_calls[0].outcome.as_str() == "ok",
                "arguments are read once; that copy is checked and sent",
                r,
            )
        },
    },
    Case {
        name: "proxy-double-fetch",
        code: r#"
let gets = 0;
const args = new Proxy({ text: "x" }, {
  get(t, k) { if (k === "text") { gets++; return gets === 1 ? "benign" : 42 } return Reflect.get(t, k) },
  ownKeys() { return gets === 0 ? ["text"] : ["text", "extra"] },
  getOwnPropertyDescriptor(t, k) { return { value: (t as any)[k], enumerable: true, configurable: true, writable: true } },
});
const r = await tools.f.echo(args);
[r, gets]
"#,
        timeout_ms: 10_000,
        check: |r| {
            ensure(
                r.status == Status::Ok
                    && r.result == json!(["benign", 1])
                    && r.tool_calls.len() == 1
                    && r.tool_calls[0].args == json!({"text": "benign"}),
                "a proxy is read once",
                r,
            )
        },
    },
    Case {
        name: "cyclic-arguments",
        code: r#"
const a: any = { text: "x" }; a.self = a;
let message = "";
try { await tools.f.echo(a) } catch (e: any) { message = e.name + ": " + e.message }
message
"#,
        timeout_ms: 5_000,
        check: |r| {
            let m = r.result.as_str().unwrap_or("");
            ensure(
                m.starts_with(
                    "TypeError: tools.f.echo: the arguments cannot be serialised to JSON",
                ) && r.tool_calls.is_empty(),
                "a cycle is a clear TypeError and nothing is sent",
                r,
            )
        },
    },
    Case {
        name: "arguments-1e5-deep",
        code: r#"
let d: any = {};
for (let i = 0; i < 100000; i++) d = { a: d };
let message = "";
try { await tools.test.echo(d) } catch (e: any) { message = e.name + ": " + e.message }
message
"#,
        timeout_ms: 10_000,
        check: |r| {
            let m = r.result.as_str().unwrap_or("");
            ensure(
                m.starts_with("TypeError: tools.test.echo: the arguments cannot be serialised")
                    && r.tool_calls.is_empty(),
                "10^5 levels: a clear TypeError in the program, no crash",
                r,
            )
        },
    },
    Case {
        name: "arguments-200-deep",
        code: r#"
let d: any = {};
for (let i = 0; i < 200; i++) d = { a: d };
let code = "";
try { await tools.test.echo(d) } catch (e: any) { code = e.code + ": " + e.message }
code
"#,
        timeout_ms: 5_000,
        check: |r| {
            let m = r.result.as_str().unwrap_or("");
            ensure(
                m.starts_with("invalid_arguments: test.echo: arguments of `test.echo`: JSON nested more than 128 levels deep"),
                "deeper than the supervisor parses: a clear invalid_arguments error",
                r,
            )
        },
    },
    Case {
        name: "result-200-deep",
        code: "let d: any = {}; for (let i = 0; i < 200; i++) d = { a: d }; d",
        timeout_ms: 5_000,
        check: |r| {
            let e = r.error.as_ref();
            ensure(
                e.is_some_and(|e| {
                    e.kind.as_str() == "result_not_json"
                        && e.message.contains("nested more than 128 levels")
                }),
                "a too-deep result is the program's error, not a protocol failure",
                r,
            )
        },
    },
    Case {
        name: "lone-surrogate-in-arguments",
        code: r#"
let code = "";
try { await tools.test.echo({ s: "a\ud800b" }) } catch (e: any) { code = e.code + ": " + e.message }
const fixed = await tools.test.echo({ s: "a\ud800b".toWellFormed() });
[code, fixed]
"#,
        timeout_ms: 5_000,
        check: |r| {
            let m = r.result[0].as_str().unwrap_or("");
            ensure(
                m.contains("invalid_arguments")
                    && m.contains("lone UTF-16 surrogate")
                    && r.result[1] == json!({"s": "a\u{fffd}b"}),
                "a lone surrogate is named, and the hint's repair works",
                r,
            )
        },
    },
    Case {
        name: "lone-surrogate-in-result",
        code: r#"["x", "a\udc00b"]"#,
        timeout_ms: 5_000,
        check: |r| {
            let e = r.error.as_ref();
            ensure(
                e.is_some_and(|e| {
                    e.kind.as_str() == "result_not_json" && e.message.contains("surrogate")
                }),
                "a lone surrogate in the result is the program's error",
                r,
            )
        },
    },
    Case {
        name: "redos-user-regex",
        code: "/(a+)+$/.test('a'.repeat(40) + '!')",
        timeout_ms: 500,
        check: |r| {
            ensure(
                r.status == Status::Timeout,
                "catastrophic backtracking ends at the deadline",
                r,
            )
        },
    },
    Case {
        name: "atomics-wait",
        code: "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60000)",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.error
                    .as_ref()
                    .is_some_and(|e| e.message == "cannot block in this thread"),
                "Atomics.wait refuses to block",
                r,
            )
        },
    },
    Case {
        name: "eval-and-function",
        code: r#"
const viaEval = eval("typeof tools.test.echo + typeof require + typeof toolCall + typeof natives");
const viaIndirect = (0, eval)("typeof process + typeof consoleWrite");
const viaFunction = new Function("return [this === globalThis, typeof mapStack, typeof fetch]")();
const r = await eval("tools.test.echo({ via: 'eval' })");
[viaEval, viaIndirect, viaFunction, r]
"#,
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.result
                    == json!([
                        "functionundefinedundefinedundefined",
                        "undefinedundefined",
                        [true, "undefined", "undefined"],
                        {"via": "eval"}
                    ])
                    && r.tool_calls.len() == 1
                    && r.tool_calls[0].tool == "test.echo",
                "eval and Function reach nothing plain code cannot",
                r,
            )
        },
    },
    Case {
        name: "tool-names-traversal-nul-homoglyph",
        code: r#"
const t: any = tools;
const names: [string, string][] = [
  ["../etc", "passwd"], ["test/../test", "echo"], ["test", "../echo"], ["test", "echo/.."],
  ["test\0", "echo"], ["test", "echo\0"], ["te\u0455t", "echo"], ["test", "\u0435cho"],
  ["test", "e\u0301cho"], ["\uff54\uff45\uff53\uff54", "echo"], ["test", "ech\u200bo"],
  ["TEST", "echo"], ["test", "x".repeat(100000)], [".", "echo"], ["", "echo"],
];
const codes: string[] = [];
for (const [ns, name] of names) {
  try { await t[ns][name]({}); codes.push("called") } catch (e: any) { codes.push(e.code) }
}
codes
"#,
        timeout_ms: 10_000,
        check: |r| {
            let codes = r.result.as_array().cloned().unwrap_or_default();
            ensure(
                codes.len() == 15 && codes.iter().all(|c| c == "unknown_tool"),
                "every look-alike name is an unknown tool",
                r,
            )
        },
    },
    Case {
        name: "tool-name-homoglyph-literal",
        code: "await tools.t\u{0435}st.echo({})",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.error
                    .as_ref()
                    .is_some_and(|e| e.kind.as_str() == "contract")
                    && r.tool_calls.is_empty(),
                "the contract check refuses a look-alike namespace before anything runs",
                r,
            )
        },
    },
    Case {
        name: "a-thousand-calls-at-once",
        // Their results fill the socket to the worker while it is still sending calls: the
        // supervisor must read and write at once, or both sides wait forever.
        code: "const rs = await Promise.all(Array.from({ length: 1000 }, (_, i) => tools.f.echo({ text: 'x'.repeat(4096) + i }))); rs.length",
        timeout_ms: 20_000,
        check: |r| {
            ensure(
                r.status == Status::Ok && r.result == json!(1000),
                "a thousand calls at once all come back",
                r,
            )
        },
    },
];

/// Runs every case on `d`; returns the failures. After each case the daemon must still run a
/// trivial program.
async fn run_cases(d: &TestDaemon, cases: &[Case]) -> Vec<String> {
    run_cases_in(d, cases, RequestLanguage::Typescript).await
}

/// [`run_cases`] for programs in `language`.
async fn run_cases_in(d: &TestDaemon, cases: &[Case], language: RequestLanguage) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        let started = Instant::now();
        let r = d
            .client()
            .await
            .execute(&ExecutionRequest {
                code: case.code.to_owned(),
                language,
                timeout_ms: Some(case.timeout_ms),
                ..Default::default()
            })
            .await
            .expect("execution request failed");
        let elapsed = started.elapsed();
        eprintln!(
            "{}: {:?} {:?} in {elapsed:?}",
            case.name,
            r.status,
            r.error.as_ref().map(|e| (&e.kind, &e.message))
        );
        if let Err(e) = (case.check)(&r) {
            failures.push(format!("{}: {e}", case.name));
        }
        if elapsed > Duration::from_millis(case.timeout_ms + 3_000) {
            failures.push(format!("{}: took {elapsed:?}", case.name));
        }
        let next = d.exec("'next'").await;
        if next.result != json!("next") {
            failures.push(format!(
                "{}: the daemon did not serve the next program",
                case.name
            ));
        }
    }
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_programs_end_in_their_safe_outcome() {
    let _serial = serial().await;
    let d = corpus_daemon().await;
    let failures = run_cases(&d, PROGRAM_CASES).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // No look-alike name reached the `test` tools: only the calls the cases meant to make.
    let calls = d.tools.calls.load(Ordering::Relaxed);
    // Six calls were meant to succeed (the poisoned built-ins, the thenable prototype, the
    // `then` result, the overwrite attempts, the repaired surrogate, eval); refused ones never
    // reach a tool.
    assert_eq!(calls, 6, "calls that reached the test tools");
}

/// Poisoning in one execution is invisible to the next: every execution has a fresh worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisoning_does_not_outlive_its_execution() {
    let _serial = serial().await;
    let d = corpus_daemon().await;
    let r = d
        .exec("(Object.prototype as any).poisoned = 1; (globalThis as any).leak = 2; JSON.stringify = () => 'x'; 1")
        .await;
    assert_eq!(r.result, json!(1));
    let r = d
        .exec("[typeof ({} as any).poisoned, typeof (globalThis as any).leak, JSON.stringify({a: 1})]")
        .await;
    assert_eq!(r.result, json!(["undefined", "undefined", "{\"a\":1}"]));
}

/// Every property name reachable from the global object (its prototype chain, each global's
/// own keys and each constructor's prototype) against `tests/snapshots/global-surface.txt`. A
/// new name fails until the snapshot is updated on purpose:
/// `AIRLOCK_UPDATE_SNAPSHOTS=1 cargo test -p airlock-tests --test escape_corpus global`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_surface_matches_the_approved_snapshot() {
    let _serial = serial().await;
    let d = corpus_daemon().await;
    let r = d
        .exec(
            r#"
const lines: string[] = [];
const key = (k: string | symbol) => typeof k === "symbol" ? `[${k.description}]` : k;
const keys = (o: object) => Reflect.ownKeys(o).map(key).sort();
let o: any = globalThis;
for (let depth = 0; o !== null; depth++, o = Object.getPrototypeOf(o)) {
  for (const k of keys(o)) lines.push(`globalThis${".[[Prototype]]".repeat(depth)}.${k}`);
}
for (const name of keys(globalThis)) {
  if (name === "globalThis") continue;
  const v = Object.getOwnPropertyDescriptor(globalThis, name)?.value;
  if (v === null || (typeof v !== "object" && typeof v !== "function")) continue;
  for (const k of keys(v)) lines.push(`${name}.${k}`);
  const p = typeof v === "function" ? Object.getOwnPropertyDescriptor(v, "prototype")?.value : undefined;
  if (p !== null && typeof p === "object") for (const k of keys(p)) lines.push(`${name}.prototype.${k}`);
}
lines.join("\n") + "\n"
"#,
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{:?}", r.error);
    let actual = r.result.as_str().unwrap().to_owned();
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/global-surface.txt");
    if std::env::var_os("AIRLOCK_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
    }
    let approved = std::fs::read_to_string(&path).unwrap_or_default();
    let approved_set: std::collections::BTreeSet<&str> = approved.lines().collect();
    let actual_set: std::collections::BTreeSet<&str> = actual.lines().collect();
    let added: Vec<_> = actual_set.difference(&approved_set).collect();
    let removed: Vec<_> = approved_set.difference(&actual_set).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the sandbox's global surface changed; review, then update {} on purpose\nnew: {added:?}\ngone: {removed:?}",
        path.display()
    );
}

/// Request targets that try to leave the SDK: only SDK files are ever served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_paths_cannot_leave_the_sdk() {
    let _serial = serial().await;
    let d = corpus_daemon().await;
    let readme = raw_http::get(&d.socket, b"/v1/sdk/README.md").unwrap();
    assert_eq!(readme.status, 200, "{readme:?}");
    let overlong = format!("/v1/sdk/{}", "a/".repeat(20_000));
    let targets: Vec<&[u8]> = vec![
        b"/v1/sdk/../../../../etc/passwd",
        b"/v1/sdk/..%2f..%2f..%2f..%2fetc%2fpasswd",
        b"/v1/sdk/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        b"/v1/sdk/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        b"/v1/sdk/servers/../../../../proc/self/environ",
        b"/v1/sdk/README.md%00.ts",
        b"/v1/sdk/%00",
        b"/v1/sdk/README.md\0",
        b"/v1/sdk//etc/passwd",
        b"/v1/sdk/%c0%ae%c0%ae/etc/passwd",
        b"/v1/sdk/servers/t%D0%B5st/echo.ts",
        b"/v1/tools/search?q=..%2f..%2fetc%2fpasswd%00",
        overlong.as_bytes(),
    ];
    for target in targets {
        let shown = String::from_utf8_lossy(target)
            .chars()
            .take(60)
            .collect::<String>();
        let resp = raw_http::get(&d.socket, target).unwrap();
        assert!(
            matches!(resp.status, 200 | 400 | 404 | 414 | 431),
            "{shown}: {resp:?}"
        );
        assert!(!resp.body.contains("root:"), "{shown}: served a host file");
        assert!(
            !resp.body.contains("PATH="),
            "{shown}: served an environment"
        );
        if resp.status == 200 {
            assert!(target.starts_with(b"/v1/tools/search"), "{shown}: {resp:?}");
        }
    }
    assert_eq!(d.exec("'alive'").await.result, json!("alive"));
}

/// A caller no principal admits gets one clear 403 from the daemon (not a permission error
/// from the file system: the socket is opened up for this test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unadmitted_uid_is_refused() {
    let _serial = serial().await;
    if !airlock_tests::processes::runs_as_root(
        "an_unadmitted_uid_is_refused",
        "to connect as uid 65534",
    ) {
        return;
    }
    let d = corpus_daemon().await;
    use std::os::unix::fs::PermissionsExt;
    let dir = d.socket.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    // From where uid 65534 can run it (the checkout may sit under a 0700 directory).
    let mut cmd = std::process::Command::new(binaries::for_other_users().join("airlock"));
    cmd.arg("--socket").arg(&d.socket).args(["exec", "-e", "1"]);
    // std drops the supplementary groups (setgroups(0)) before setgid/setuid when a uid is set.
    use std::os::unix::process::CommandExt;
    let out = cmd.uid(65534).gid(65534).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("uid 65534") && text.contains("not admitted"),
        "expected the daemon's not_admitted answer: {text}"
    );
    assert_eq!(d.tools.calls.load(Ordering::Relaxed), 0);
    assert_eq!(d.exec("'alive'").await.result, json!("alive"));
}

/// A compromised worker against the supervisor (the fake worker plays it): each attack ends
/// with the worker stopped, a clear error, no descriptor kept, and the next execution served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compromised_worker_cannot_harm_the_supervisor() {
    let _serial = serial().await;
    let fake = std::path::PathBuf::from(env!("CARGO_BIN_EXE_airlock-fake-worker"));
    let d = TestDaemon::start_with(DaemonOptions::default().worker(fake)).await;
    assert_eq!(d.exec_timeout("ok", 5000).await.result, json!("fake"));
    let fds_before = fd_count(std::process::id());
    for (program, timeout_ms, expect) in [
        ("slowloris", 1_000, "timeout"),
        ("never-reads", 1_000, "timeout"),
        ("duplicate-id", 5_000, "tool call id 1 after id 1"),
        ("decreasing-id", 5_000, "tool call id 2 after id 5"),
        ("oversized-args", 5_000, "over the 16777216 byte limit"),
        ("references-twice", 5_000, "tool references out of order"),
        (
            "call-before-verdict",
            5_000,
            "tool call 1 before the contract check's verdict",
        ),
        (
            "references-after-call",
            5_000,
            "tool references out of order",
        ),
    ] {
        let started = Instant::now();
        let r = d.exec_timeout(program, timeout_ms).await;
        assert!(
            started.elapsed() < Duration::from_millis(timeout_ms + 3_000),
            "{program}: took {:?}",
            started.elapsed()
        );
        let err = r
            .error
            .as_ref()
            .unwrap_or_else(|| panic!("{program}: {r:?}"));
        if expect == "timeout" {
            assert_eq!(r.status, Status::Timeout, "{program}: {err:?}");
        } else {
            assert_eq!(err.kind.as_str(), "internal", "{program}: {err:?}");
            assert!(err.message.contains(expect), "{program}: {}", err.message);
            assert!(err.hint.is_some());
        }
        assert_eq!(
            d.exec_timeout("ok", 5000).await.result,
            json!("fake"),
            "{program}"
        );
    }
    // Messages after Done are never read: the answer is Done's.
    let r = d.exec_timeout("after-done", 5000).await;
    assert_eq!(r.result, json!("fake"), "{r:?}");
    assert!(r.stdout.is_empty() && r.tool_calls.is_empty(), "{r:?}");
    // Descriptors passed with SCM_RIGHTS are not taken: the daemon reads with read(2), and
    // the kernel closes descriptors nobody received.
    for _ in 0..20 {
        let r = d.exec_timeout("scm-rights", 5000).await;
        assert_eq!(r.result, json!("fake"), "{r:?}");
    }
    assert!(wait_until(5, || children_named(
        std::process::id(),
        "airlock-fake-worker"
    )
    .is_empty()));
    // Reaping tasks hold a worker's pidfd for a moment after the answer.
    wait_until(5, || fd_count(std::process::id()) <= fds_before);
    let fds_after = fd_count(std::process::id());
    assert!(
        fds_after <= fds_before,
        "descriptors grew from {fds_before} to {fds_after}: {:?}",
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .collect::<Vec<_>>()
    );
}

/// The daemon's memory and descriptors stay flat across the corpus: after one warm-up pass
/// (allocator arenas, lazily started fault server, caches), three more passes may not grow
/// VmRSS by more than [`RSS_GROWTH_LIMIT_KIB`] nor leave a descriptor behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_and_descriptors_stay_flat_across_the_corpus() {
    let _serial = serial().await;
    let d = corpus_daemon().await;
    let me = std::process::id();
    let failures = run_cases(&d, PROGRAM_CASES).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let rss_warm = vm_rss_kib(me);
    let fds_warm = fd_count(me);
    for _ in 0..3 {
        let failures = run_cases(&d, PROGRAM_CASES).await;
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
    let rss_after = vm_rss_kib(me);
    // Reaping tasks hold a worker's pidfd for a moment after the answer.
    wait_until(5, || fd_count(me) <= fds_warm);
    let fds_after = fd_count(me);
    eprintln!(
        "VmRSS warm {rss_warm} KiB, after 3 passes {rss_after} KiB; fds {fds_warm} -> {fds_after}"
    );
    assert!(
        rss_after <= rss_warm + RSS_GROWTH_LIMIT_KIB,
        "VmRSS grew from {rss_warm} KiB to {rss_after} KiB over three corpus passes"
    );
    assert!(
        fds_after <= fds_warm,
        "descriptors grew from {fds_warm} to {fds_after}"
    );
}

/// Allowed VmRSS growth over three passes after the warm-up. One pass moves up to ~20 MB
/// through the daemon (the deep and poisoned cases' JSON, a 100 kB tool name echoed in an
/// error, stdout), which glibc may keep in its arenas rather than return; a leak of even one
/// response per case would grow RSS by far more than this over 54 executions.
const RSS_GROWTH_LIMIT_KIB: u64 = 16 * 1024;

/// Error kinds as the agent API writes them.
fn kind(r: &ExecutionResponse) -> &str {
    r.error.as_ref().map_or("", |e| e.kind.as_str())
}

/// Everything the response carries as text (result, error, stdout), to look for what must not
/// be there.
fn all_text(r: &ExecutionResponse) -> String {
    format!(
        "{} {} {:?} {}",
        r.result,
        r.stdout,
        r.error.as_ref().map(|e| (&e.message, &e.hint)),
        r.stderr
    )
}

/// Hostile Python programs: the interpreter's own limits, the host's refusals of files,
/// processes and imports, introspection, and the bridge.
const PYTHON_CASES: &[Case] = &[
    Case {
        name: "py-list-growth",
        code: "x = []\nwhile True:\n    x.append('a' * 1000)",
        timeout_ms: 10_000,
        check: |r| {
            ensure(
                kind(r) == "memory_limit",
                "a growing list hits the memory limit",
                r,
            )
        },
    },
    Case {
        name: "py-string-times-huge",
        code: "'x' * 10**10",
        timeout_ms: 10_000,
        check: |r| ensure(kind(r) == "memory_limit", "a 10 GB string is refused", r),
    },
    Case {
        name: "py-bytes-doubling",
        code: "b = b'x'\nwhile True:\n    b = b + b",
        timeout_ms: 10_000,
        check: |r| {
            ensure(
                kind(r) == "memory_limit",
                "doubling bytes hits the memory limit",
                r,
            )
        },
    },
    Case {
        name: "py-busy-loop",
        code: "while True:\n    pass",
        timeout_ms: 1_000,
        check: |r| ensure(kind(r) == "timeout", "a busy loop times out", r),
    },
    Case {
        name: "py-nested-comprehension",
        code: "[[i * j for i in range(10**5)] for j in range(10**5)]",
        timeout_ms: 2_000,
        check: |r| {
            ensure(
                matches!(kind(r), "memory_limit" | "timeout"),
                "a 10^10-element comprehension is stopped",
                r,
            )
        },
    },
    Case {
        name: "py-huge-power",
        code: "10**10**8",
        timeout_ms: 2_000,
        check: |r| {
            ensure(
                matches!(kind(r), "memory_limit" | "timeout"),
                "a hundred-million-digit integer is stopped",
                r,
            )
        },
    },
    Case {
        name: "py-power-of-power",
        code: "2**(2**40)",
        timeout_ms: 2_000,
        check: |r| {
            ensure(
                matches!(kind(r), "memory_limit" | "timeout"),
                "2**(2**40) is stopped",
                r,
            )
        },
    },
    Case {
        name: "py-deep-recursion",
        code: "def f(n):\n    return f(n + 1)\nf(0)",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                kind(r) == "stack_overflow",
                "unbounded recursion is stopped",
                r,
            )
        },
    },
    Case {
        name: "py-regex-blow-up",
        code: "import re\nre.match('(a+)+$', 'a' * 40 + 'b')",
        timeout_ms: 2_000,
        check: |r| {
            ensure(
                (r.status == Status::Ok && r.result.is_null()) || kind(r) == "timeout",
                "a catastrophic pattern ends (no match) or times out",
                r,
            )
        },
    },
    Case {
        name: "py-open-file",
        code: "open('/etc/passwd').read()",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Error && !all_text(r).contains("root:"),
                "open() reads nothing",
                r,
            )
        },
    },
    Case {
        name: "py-pathlib-read",
        code: "from pathlib import Path\nPath('/proc/self/environ').read_text()",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Error && !all_text(r).contains("PATH="),
                "pathlib reads nothing",
                r,
            )
        },
    },
    Case {
        name: "py-os-system",
        code: "import os\nos.system('touch /tmp/airlock-py-escape')",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Error
                    && !std::path::Path::new("/tmp/airlock-py-escape").exists(),
                "os.system runs nothing",
                r,
            )
        },
    },
    Case {
        name: "py-os-environ",
        code: "import os\n[dict(os.environ), os.getenv('PATH'), os.getenv('HOME', 'none')]",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Ok && r.result == json!([{}, null, "none"]),
                "the environment is empty",
                r,
            )
        },
    },
    Case {
        name: "py-os-listdir",
        code: "import os\nos.listdir('/')",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Error && !all_text(r).contains("etc"),
                "no directory is listed",
                r,
            )
        },
    },
    Case {
        name: "py-dunder-import",
        code: "__import__('subprocess').run(['id'])",
        timeout_ms: 5_000,
        check: |r| ensure(r.status == Status::Error, "__import__ gives nothing", r),
    },
    Case {
        name: "py-importlib",
        code: "import importlib\nimportlib.import_module('socket')",
        timeout_ms: 5_000,
        check: |r| ensure(r.status == Status::Error, "importlib is not there", r),
    },
    Case {
        name: "py-eval-exec-compile",
        code: "out = []\nfor f in ['eval', 'exec', 'compile']:\n    try:\n        out.append(str(globals()[f]))\n    except Exception as e:\n        out.append(type(e).__name__)\nout",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Error
                    || r.result.as_array().is_some_and(|a| {
                        a.iter()
                            .all(|v| !v.as_str().unwrap_or("").contains("built-in"))
                    }),
                "no dynamic code evaluation",
                r,
            )
        },
    },
    Case {
        name: "py-eval-direct",
        code: "eval(\"__import__('os').system('id')\")",
        timeout_ms: 5_000,
        check: |r| ensure(r.status == Status::Error, "eval is not there", r),
    },
    Case {
        name: "py-subclasses",
        code: "().__class__.__bases__[0].__subclasses__()",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Error,
                "no walk from object to its subclasses",
                r,
            )
        },
    },
    Case {
        name: "py-builtins-and-frames",
        code: "import sys\nsys._getframe().f_back.f_globals",
        timeout_ms: 5_000,
        check: |r| ensure(r.status == Status::Error, "no frame objects", r),
    },
    Case {
        name: "py-builtins-dict",
        code: "__builtins__.__dict__['open']('/etc/shadow').read()",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Error && !all_text(r).contains("root:"),
                "no builtins module to reach through",
                r,
            )
        },
    },
    Case {
        name: "py-tool-object-introspection",
        code: "[str(type(tools)), hasattr(tools, '__dict__'), str(tools.test)]",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                !all_text(r).contains("0x") && r.tool_calls.is_empty(),
                "the tools object shows no address and calls nothing",
                r,
            )
        },
    },
    Case {
        name: "py-non-json-arguments",
        code: "out = []\nfor v in [{1, 2}, lambda: 1, float('nan'), b'\\xff', range(3)]:\n    try:\n        await tools.test.echo(v=v)\n        out.append('sent')\n    except Exception as e:\n        out.append(type(e).__name__)\nout",
        timeout_ms: 5_000,
        check: |r| {
            ensure(
                r.status == Status::Error
                    || r.result.as_array().is_some_and(|a| {
                        a.iter().filter(|v| *v == &json!("sent")).count() == r.tool_calls.len()
                    }),
                "values that are not JSON are refused before they are sent",
                r,
            )
        },
    },
    Case {
        name: "py-huge-arguments",
        code: "await tools.test.echo(blob='x' * (17 * 1024 * 1024))",
        timeout_ms: 10_000,
        check: |r| {
            ensure(
                r.status == Status::Error && r.tool_calls.is_empty(),
                "arguments over 16 MiB are refused in the worker",
                r,
            )
        },
    },
    Case {
        name: "py-ten-thousand-calls",
        code: "for i in range(10000):\n    await tools.test.echo(i=i)",
        timeout_ms: 20_000,
        check: |r| {
            ensure(
                kind(r) == "tool_call_limit",
                "the call limit stops the loop",
                r,
            )
        },
    },
    Case {
        name: "py-gather-thousand",
        code: "import asyncio\nrs = await asyncio.gather(*[tools.test.echo(i=i) for i in range(1000)])\nlen(rs)",
        timeout_ms: 20_000,
        check: |r| {
            ensure(
                kind(r) == "tool_call_limit" || r.result == json!(1000),
                "a gather of 1000 calls ends",
                r,
            )
        },
    },
    Case {
        name: "py-odd-tool-names",
        code: "out = []\nfor ns, name in [('te\\x00st', 'echo'), ('test', 'ech\\x00o'), ('t\\u0435st', 'echo'), ('test', '\\u0435cho'), ('test', 'x' * 100000)]:\n    try:\n        await getattr(getattr(tools, ns), name)(a=1)\n        out.append('called')\n    except Exception as e:\n        out.append(type(e).__name__)\nout",
        timeout_ms: 10_000,
        check: |r| {
            ensure(
                r.tool_calls.iter().all(|c| c.outcome != CallOutcome::Ok),
                "no look-alike name reaches a tool",
                r,
            )
        },
    },
    Case {
        name: "py-print-flood",
        code: "while True:\n    print('x' * 1000)",
        timeout_ms: 10_000,
        check: |r| {
            ensure(
                kind(r) == "output_limit",
                "a print flood hits the output limit",
                r,
            )
        },
    },
    Case {
        name: "py-except-hides-timeout",
        code: "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass",
        timeout_ms: 1_000,
        check: |r| {
            ensure(
                kind(r) == "timeout",
                "catching everything does not outlive the timeout",
                r,
            )
        },
    },
    Case {
        name: "py-except-hides-memory",
        code: "n = 0\nwhile True:\n    try:\n        x = 'a' * 10**9\n    except BaseException:\n        n += 1",
        timeout_ms: 2_000,
        check: |r| {
            ensure(
                matches!(kind(r), "memory_limit" | "timeout"),
                "catching MemoryError does not make room",
                r,
            )
        },
    },
    Case {
        name: "py-deep-nested-result",
        code: "x = []\nfor i in range(100000):\n    x = [x]\nx",
        timeout_ms: 10_000,
        check: |r| {
            ensure(
                r.status == Status::Error,
                "a 100000-deep result is refused",
                r,
            )
        },
    },
    Case {
        name: "py-deep-nested-argument",
        code: "x = []\nfor i in range(100000):\n    x = [x]\nawait tools.test.echo(x=x)",
        timeout_ms: 10_000,
        check: |r| {
            ensure(
                r.status == Status::Error && r.tool_calls.is_empty(),
                "a 100000-deep argument is refused in the worker",
                r,
            )
        },
    },
    Case {
        name: "py-cyclic-result",
        code: "x = []\nx.append(x)\nx",
        timeout_ms: 5_000,
        check: |r| ensure(r.status == Status::Error, "a cyclic result is refused", r),
    },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_python_programs_end_in_their_safe_outcome() {
    let _serial = serial().await;
    let d = corpus_daemon().await;
    let failures = run_cases_in(&d, PYTHON_CASES, RequestLanguage::Python).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
