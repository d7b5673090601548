//! Engine tests: a real engine per test and a fake supervisor on the other end of a socket
//! pair. No lockdown is applied here (that is `tests/lockdown.rs`'s job).

use super::*;
use airlock_proto::frame::blocking::{IoFrameError, read_message, write_message};
use airlock_proto::{ConsoleLevel, Language, MAX_FRAME_LEN, ToolFailure, WorkerMessage};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The clock and seed every test run starts with.
const TEST_DETERMINISM: airlock_proto::Determinism = airlock_proto::Determinism {
    clock_ms: 1_790_000_000_000,
    seed: [7; 32],
};

fn limits() -> Limits {
    Limits {
        timeout_ms: 5_000,
        memory_bytes: 64 * 1024 * 1024,
        stack_bytes: 1024 * 1024,
        max_tool_calls: 100,
        max_output_bytes: 1024 * 1024,
    }
}

/// What the fake supervisor saw, and the engine's answer.
#[derive(Debug)]
struct Run {
    outcome: Outcome,
    stats: WorkerStats,
    messages: Vec<WorkerMessage>,
    /// Tool results the engine ignored (unknown or repeated ids).
    ignored_results: u32,
    /// The `ToolReferences` message, if the program sent one (answered by the harness, not
    /// part of `messages`).
    references: Option<ToolReferences>,
}

impl Run {
    fn value(&self) -> &str {
        match &self.outcome {
            Outcome::Ok { value_json } => value_json,
            Outcome::Error(e) => panic!(
                "expected a value, got {e:#?}\nmessages: {:?}",
                self.messages
            ),
        }
    }

    fn error(&self) -> &ExecError {
        match &self.outcome {
            Outcome::Error(e) => e,
            Outcome::Ok { value_json } => panic!("expected an error, got {value_json}"),
        }
    }

    fn console(&self) -> Vec<(ConsoleLevel, String)> {
        self.messages
            .iter()
            .filter_map(|m| match m {
                WorkerMessage::Console { level, text } => Some((*level, text.clone())),
                _ => None,
            })
            .collect()
    }

    fn console_text(&self) -> Vec<String> {
        self.console().into_iter().map(|(_, t)| t).collect()
    }

    fn tool_calls(&self) -> Vec<(u32, String, String)> {
        self.messages
            .iter()
            .filter_map(|m| match m {
                WorkerMessage::ToolCall {
                    id,
                    tool,
                    args_json,
                    ..
                } => Some((*id, tool.clone(), args_json.clone())),
                _ => None,
            })
            .collect()
    }
}

/// Runs `code` with a supervisor that answers each message through `respond` (which sees
/// every message received so far and returns the replies to send now).
fn run_with(
    code: &str,
    language: Language,
    limits: Limits,
    respond: impl FnMut(&[WorkerMessage]) -> Vec<SupervisorMessage> + Send + 'static,
) -> Run {
    run_judged(code, language, limits, SupervisorMessage::Proceed, respond)
}

/// [`run_with`], with `verdict` as the answer to the program's `ToolReferences` (the contract
/// check's go or refusal).
fn run_judged(
    code: &str,
    language: Language,
    limits: Limits,
    verdict: SupervisorMessage,
    respond: impl FnMut(&[WorkerMessage]) -> Vec<SupervisorMessage> + Send + 'static,
) -> Run {
    run_full(
        code,
        language,
        limits,
        TEST_DETERMINISM,
        verdict,
        false,
        respond,
    )
}

/// [`run_with`] from JavaScript, with `determinism` instead of [`TEST_DETERMINISM`].
fn run_determined(
    code: &str,
    determinism: airlock_proto::Determinism,
    respond: impl FnMut(&[WorkerMessage]) -> Vec<SupervisorMessage> + Send + 'static,
) -> Run {
    run_full(
        code,
        Language::JavaScript,
        limits(),
        determinism,
        SupervisorMessage::Proceed,
        false,
        respond,
    )
}

fn run_full(
    code: &str,
    language: Language,
    limits: Limits,
    determinism: airlock_proto::Determinism,
    verdict: SupervisorMessage,
    report_idle: bool,
    respond: impl FnMut(&[WorkerMessage]) -> Vec<SupervisorMessage> + Send + 'static,
) -> Run {
    run_engine(
        code,
        language,
        limits,
        determinism,
        verdict,
        report_idle,
        true,
        respond,
    )
}

/// [`run_full`], with the remembering of tool results (for explanations) on or off.
#[allow(clippy::too_many_arguments)]
fn run_engine(
    code: &str,
    language: Language,
    limits: Limits,
    determinism: airlock_proto::Determinism,
    verdict: SupervisorMessage,
    report_idle: bool,
    tracking: bool,
    mut respond: impl FnMut(&[WorkerMessage]) -> Vec<SupervisorMessage> + Send + 'static,
) -> Run {
    let (worker_end, mut supervisor_end) = UnixStream::pair().expect("socketpair");
    supervisor_end
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let supervisor = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut references = None;
        loop {
            match read_message::<WorkerMessage>(&mut supervisor_end, MAX_FRAME_LEN) {
                Ok(WorkerMessage::ToolReferences(refs)) => {
                    assert!(seen.is_empty(), "tool references after {seen:?}");
                    assert!(references.is_none(), "tool references sent twice");
                    references = Some(refs);
                    if write_message(&mut supervisor_end, &verdict).is_err() {
                        return (seen, references);
                    }
                }
                Ok(msg) => {
                    seen.push(msg);
                    for reply in respond(&seen) {
                        if write_message(&mut supervisor_end, &reply).is_err() {
                            return (seen, references);
                        }
                    }
                }
                // The worker is done (a reset: it exited with replies still unread).
                Err(IoFrameError::Closed) => return (seen, references),
                Err(IoFrameError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return (seen, references);
                }
                Err(e) => panic!("supervisor side: {e}"),
            }
        }
    });
    let start = StartExecution {
        execution_id: "test".to_owned(),
        language,
        code: code.to_owned(),
        limits,
        determinism,
        report_idle,
    };
    // The worker runs programs on its 8 MiB main thread; give the engine the same.
    let worker = std::thread::Builder::new()
        .stack_size(8 * 1024 * 1024)
        .spawn(move || {
            let engine = Engine::new().expect("engine");
            engine.bridge.set_tracking(tracking);
            let bridge = Rc::clone(&engine.bridge);
            let mut ipc = Ipc::from_stream(worker_end);
            let (outcome, stats) = engine.run(start, &mut ipc);
            (outcome, stats, bridge.ignored_results())
        })
        .expect("spawn");
    let (outcome, stats, ignored_results) = worker.join().expect("engine thread panicked");
    let (messages, references) = supervisor.join().expect("supervisor thread panicked");
    Run {
        outcome,
        stats,
        messages,
        ignored_results,
        references,
    }
}

/// A supervisor that answers every tool call with `answer(tool, args_json)`.
fn answering(
    answer: impl Fn(&str, &str) -> Result<String, ToolFailure> + Send + 'static,
) -> impl FnMut(&[WorkerMessage]) -> Vec<SupervisorMessage> + Send + 'static {
    move |seen| match seen.last() {
        Some(WorkerMessage::ToolCall {
            id,
            tool,
            args_json,
            ..
        }) => vec![SupervisorMessage::ToolResult {
            id: *id,
            result: answer(tool, args_json),
            clock_ms: TEST_DETERMINISM.clock_ms,
        }],
        _ => vec![],
    }
}

fn silent(_: &[WorkerMessage]) -> Vec<SupervisorMessage> {
    vec![]
}

fn js(code: &str) -> Run {
    run_with(code, Language::JavaScript, limits(), silent)
}

fn ts(code: &str) -> Run {
    run_with(code, Language::TypeScript, limits(), silent)
}

fn js_limits(code: &str, limits: Limits) -> Run {
    run_with(code, Language::JavaScript, limits, silent)
}

fn short_timeout() -> Limits {
    Limits {
        timeout_ms: 200,
        ..limits()
    }
}

// -----------------------------------------------------------------------------------------
// Values

#[test]
fn one_plus_one() {
    let run = js("1+1");
    assert_eq!(run.value(), "2");
    assert!(run.stats.run_us > 0 || run.stats.compile_us > 0);
    assert!(run.stats.heap_used_bytes > 0);
}

#[test]
fn typescript_program() {
    let run = ts(r#"
interface Item { name: string; price: number }
enum Unit { Eur = "EUR" }
const items: Item[] = [{ name: "a", price: 2 }, { name: "b", price: 3 }];
function total<T extends Item>(xs: T[]): number { return xs.reduce((s, x) => s + x.price, 0) }
({ total: total(items), unit: Unit.Eur, first: items[0]!.name as string }) satisfies object
"#);
    assert_eq!(run.value(), r#"{"total":5,"unit":"EUR","first":"a"}"#);
}

#[test]
fn top_level_return_await_and_last_expression() {
    assert_eq!(
        js("const x = await Promise.resolve(41); x + 1").value(),
        "42"
    );
    assert_eq!(js("if (true) return 'early';\n'late'").value(), "\"early\"");
    assert_eq!(js("let a = 1;").value(), "null");
    assert_eq!(js("").value(), "null");
    assert_eq!(js("'hello'").value(), "\"hello\"");
}

#[test]
fn result_conversion_rules() {
    assert_eq!(js("undefined").value(), "null");
    assert_eq!(js("NaN").value(), "null");
    assert_eq!(
        js("[1, undefined, () => 1, Infinity]").value(),
        "[1,null,null,null]"
    );
    assert_eq!(
        js("({ a: undefined, f() {}, s: Symbol('x'), n: null })").value(),
        r#"{"n":null}"#
    );
    assert_eq!(js("new Date(0)").value(), "\"1970-01-01T00:00:00.000Z\"");
    assert_eq!(js("({ m: new Map([[1, 2]]) })").value(), r#"{"m":{}}"#);
    assert_eq!(js("({ toJSON() { return undefined } })").value(), "null");
    // The program replacing JSON.stringify does not change the conversion.
    assert_eq!(
        js("JSON.stringify = () => 'nope'; ({ a: 1 })").value(),
        r#"{"a":1}"#
    );
}

/// An array of Promises (`xs.map(async …)` without `Promise.all`) would come out as `[{}, …]`:
/// refused, saying how to wait for them.
#[test]
fn promises_in_the_result_are_refused() {
    let run = run_with(
        "const zones = ['UTC', 'Asia/Tokyo'];\nconst times = zones.map(async (z) => await tools.time.get_current_time({ timezone: z }));\ntimes",
        Language::TypeScript,
        limits(),
        answering(|_, _| Ok("{}".to_owned())),
    );
    let e = run.error().clone();
    assert_eq!(e.kind, ErrorKind::ResultNotJson, "{e:?}");
    assert_eq!(
        e.message,
        "the program's result is an array holding 2 Promise(s) (the first at $[0]), each an \
         async call's value that was not awaited; wait for them: `await Promise.all(xs.map(async \
         …))`, or `await` each call"
    );
    let e = js("({ done: true, items: [1, Promise.resolve(2)] })")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::ResultNotJson, "{e:?}");
    assert!(
        e.message.starts_with(
            "the program's result holds 1 Promise(s) in $.items (the first at $.items[1])"
        ),
        "{}",
        e.message
    );
    let e = js("({ p: Promise.resolve(1) })").error().clone();
    assert!(
        e.message
            .starts_with("the program's result holds a Promise at $.p,"),
        "{}",
        e.message
    );
    // Empty objects that are not Promises are still results.
    assert_eq!(js("[{}, { a: {} }]").value(), "[{},{\"a\":{}}]");
}

#[test]
fn results_that_are_not_json() {
    let e = js("({ total: 10n })").error().clone();
    assert_eq!(e.kind, ErrorKind::ResultNotJson);
    assert_eq!(
        e.message,
        "the program's result contains a BigInt at $.total; convert it with Number() or String()"
    );
    let e = js("1n").error().clone();
    assert_eq!(
        e.message,
        "the program's result is a BigInt; convert it with Number() or String()"
    );
    let e = js("const a = { b: { list: [1] } }; a.b.list.push(a); a")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::ResultNotJson);
    assert!(
        e.message.contains("contains a cycle at $.b.list[1]"),
        "{}",
        e.message
    );
    let e = js("const o = {}; o['odd key'] = o; o").error().clone();
    assert!(e.message.contains("at $[\"odd key\"]"), "{}", e.message);
    let e = js("(function named() {})").error().clone();
    assert_eq!(e.kind, ErrorKind::ResultNotJson);
    assert!(
        e.message.starts_with("the program's result is a function"),
        "{}",
        e.message
    );
    assert_eq!(js("Symbol('s')").error().kind, ErrorKind::ResultNotJson);
}

#[test]
fn exceptions_during_result_conversion_are_runtime_errors() {
    let e = js("({ get boom() { throw new TypeError('no') } })")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::Runtime);
    assert_eq!(e.name.as_deref(), Some("TypeError"));
    assert!(
        e.message.starts_with("no (thrown while converting"),
        "{}",
        e.message
    );
    assert_eq!((e.line, e.column), (Some(1), Some(27)), "{e:?}");
}

#[test]
fn oversized_results_are_refused() {
    let e = js("'x'.repeat(17 * 1024 * 1024)").error().clone();
    assert_eq!(e.kind, ErrorKind::ResultNotJson);
    assert!(e.message.contains("over the 16 MiB limit"), "{}", e.message);
}

// -----------------------------------------------------------------------------------------
// Errors and positions

/// A program spliced into the wrapper as it was written (JavaScript already): the engine
/// counts bytes, the position counts UTF-16 code units as the agent's editor does, and a
/// column after the spliced `return (` is the agent's.
#[test]
fn positions_in_a_spliced_program_count_utf16_units() {
    let e = ts("const s = 'é😀';\nconst o = null; s.length + o.x")
        .error()
        .clone();
    assert_eq!(e.name.as_deref(), Some("TypeError"), "{e:?}");
    assert_eq!((e.line, e.column), (Some(2), Some(28)), "{e:?}");
    // The same through the code generator (TypeScript syntax on another line) agrees.
    let printed = ts("const s: string = 'é😀';\nconst o = null; s.length + o.x")
        .error()
        .clone();
    assert_eq!(
        (printed.line, printed.column),
        (Some(2), Some(28)),
        "{printed:?}"
    );
    let e = ts("const s = 'é😀'; const o = null; o.x").error().clone();
    assert_eq!((e.line, e.column), (Some(1), Some(34)), "{e:?}");
    let e = ts("function f() {\n  const t = '€'; return t.a.b\n}\nf()")
        .error()
        .clone();
    assert_eq!((e.line, e.column), (Some(2), Some(25)), "{e:?}");
    assert!(
        e.stack
            .as_deref()
            .is_some_and(|s| s.contains("program.ts:2:25")),
        "{e:?}"
    );
}

#[test]
fn runtime_errors_carry_original_positions() {
    let run = ts(
        "interface A { x: number }\n\nconst a: A = { x: 1 };\nfunction f(v: any): number {\n  return v.missing.deep;\n}\nf(a)",
    );
    let e = run.error();
    assert_eq!(e.kind, ErrorKind::Runtime);
    assert_eq!(e.name.as_deref(), Some("TypeError"));
    assert_eq!(e.message, "cannot read property 'deep' of undefined");
    assert_eq!((e.line, e.column), (Some(5), Some(10)), "{e:#?}");
    let stack = e.stack.as_deref().expect("stack");
    assert!(
        stack.starts_with("TypeError: cannot read property"),
        "{stack}"
    );
    assert!(stack.contains("at f (program.ts:5:10)"), "{stack}");
    assert!(stack.contains("at <anonymous> (program.ts:7:"), "{stack}");
    assert!(
        !stack.contains("<airlock>") && !stack.contains("<eval>"),
        "{stack}"
    );
}

#[test]
fn thrown_errors_after_await_and_thrown_values() {
    let e = js("await null;\n  throw new RangeError('bad ' + 1)")
        .error()
        .clone();
    assert_eq!(
        (e.kind, e.name.as_deref()),
        (ErrorKind::Runtime, Some("RangeError"))
    );
    assert_eq!(e.message, "bad 1");
    assert_eq!(e.line, Some(2));

    let e = js("throw 'plain string'").error().clone();
    assert_eq!((e.kind, e.name.clone()), (ErrorKind::Runtime, None));
    assert_eq!(e.message, "plain string");
    let e = js("throw null").error().clone();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::Runtime, "uncaught null")
    );
    let e = js("throw { code: 42 }").error().clone();
    assert_eq!(e.message, "uncaught { code: 42 }");
}

#[test]
fn program_sees_mapped_stacks() {
    let run = ts("type T = number;\nconst e: Error = new Error('x');\ne.stack");
    let stack = run.value();
    assert!(stack.contains("program.ts:2:"), "{stack}");
    assert!(!stack.contains("<airlock>"), "{stack}");
}

#[test]
fn engine_syntax_errors_are_syntax_errors() {
    // oxc's errors, with oxc's positions.
    let e = js("let x = 1;\nlet = = 2;").error().clone();
    assert_eq!(e.kind, ErrorKind::Syntax);
    assert_eq!(e.line, Some(2));
    // Syntax oxc accepts but QuickJS does not (an auto-accessor, from the decorators
    // proposal): QuickJS's error, mapped back to the agent's code.
    let e = ts("const a: number = 1;\n\nclass A { accessor x = 1 }")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::Syntax);
    assert_eq!(e.name.as_deref(), Some("SyntaxError"));
    assert_eq!(e.line, Some(3), "{e:?}");
    // `import.meta` was another; it is refused before the engine now, saying what to do.
    let e = ts("const a: number = 1;\n\nimport.meta.url")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::Syntax);
    assert_eq!((e.line, e.column), (Some(3), Some(1)), "{e:?}");
    assert!(
        e.message.contains("`import.meta` is not available"),
        "{e:?}"
    );
    let e = js("const f = () => import.meta;").error().clone();
    assert!(
        e.message.contains("`import.meta` is not available"),
        "{e:?}"
    );
    // `new.target`, the other meta property, runs.
    assert_eq!(
        js("function F() { this.t = new.target === F }\nnew F().t").value(),
        "true"
    );
    // Decorators were another; they are refused before the engine now, saying what to do.
    let e = ts("const a = 1;\n\n@sealed\nclass A {}\nfunction sealed(c: any) {}")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::Syntax);
    assert_eq!((e.line, e.column), (Some(3), Some(1)), "{e:?}");
    assert!(e.message.contains("decorators are not available"), "{e:?}");
}

#[test]
fn modern_syntax_runs() {
    let run = js(
        "{ using r = { [Symbol.dispose]() { console.log('disposed') } }; }\nconst re = /(?<y>\\d{4})/v;\n[Object.groupBy([1, 2, 3], x => x % 2 ? 'odd' : 'even'), '2024'.match(re).groups.y, [3, 1, 2].toSorted()]",
    );
    assert_eq!(run.value(), r#"[{"odd":[1,3],"even":[2]},"2024",[1,2,3]]"#);
    assert_eq!(run.console_text(), ["disposed"]);
}

#[test]
fn modules_are_not_available() {
    let e = ts("import { x } from './servers/github';\nx")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::Syntax);
    assert!(e.message.contains("tools.<server>.<tool>"), "{}", e.message);
    // `import()` is refused before the program runs, not when reached.
    let run = js("console.log('ran');\nawait import('os')");
    let e = run.error().clone();
    assert_eq!(
        (e.kind, e.line, e.column),
        (ErrorKind::Syntax, Some(2), Some(7))
    );
    assert!(
        e.message.starts_with("`import()` is not available"),
        "{}",
        e.message
    );
    assert!(run.console_text().is_empty());
}

#[test]
fn host_apis_are_absent() {
    let run = js(
        "[typeof require, typeof fetch, typeof setTimeout, typeof setInterval, typeof process, \
         typeof std, typeof os, typeof Deno, typeof XMLHttpRequest, typeof WebSocket, typeof print]",
    );
    assert_eq!(
        run.value(),
        r#"["undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined","undefined"]"#
    );
    // A free use is refused before the program runs (typescript/unavailable.rs).
    let e = js("require('fs')").error().clone();
    assert_eq!(e.kind, ErrorKind::Syntax);
    assert!(
        e.message.starts_with("`require` is not available"),
        "{}",
        e.message
    );
}

/// A free `require`, `fetch`, timer, `process` or `fs` is refused before anything runs: no
/// tool call is sent, no console line written, whatever comes first in the program.
#[test]
fn unavailable_host_apis_are_refused_before_the_program_runs() {
    for (code, name, line, column, instead) in [
        (
            "const r = await tools.memory.read_graph({});\nconst fs = require('fs');",
            "require",
            2,
            12,
            "tools.<server>.<tool>(args)",
        ),
        (
            "console.log('a');\nawait tools.x.y({});\nconst r = await fetch('https://x');",
            "fetch",
            3,
            17,
            "tools.<server>.<tool>(args)",
        ),
        (
            "await tools.x.y({});\nsetTimeout(() => {}, 10);",
            "setTimeout",
            2,
            1,
            "progress(value)",
        ),
        (
            "await tools.x.y({});\nawait new Promise((r) => setInterval(r, 5));",
            "setInterval",
            2,
            26,
            "no timers",
        ),
        (
            "await tools.x.y({});\nconst token = process.env.TOKEN;",
            "process",
            2,
            15,
            "credentials stay in the daemon",
        ),
        (
            "await tools.x.y({});\nfs.readFileSync('/etc/passwd');",
            "fs",
            2,
            1,
            "no file system",
        ),
    ] {
        let run = run_with(
            code,
            Language::TypeScript,
            limits(),
            answering(|_, _| Ok("{}".to_owned())),
        );
        let e = run.error().clone();
        assert_eq!(e.kind, ErrorKind::Syntax, "{code}: {e:?}");
        assert_eq!(
            (e.line, e.column),
            (Some(line), Some(column)),
            "{code}: {e:?}"
        );
        assert!(
            e.message
                .starts_with(&format!("`{name}` is not available: ")),
            "{code}: {}",
            e.message
        );
        assert!(e.message.contains(instead), "{code}: {}", e.message);
        assert!(run.tool_calls().is_empty(), "{code}: {:?}", run.messages);
        assert!(run.console_text().is_empty(), "{code}");
        // Nothing was even judged: the refusal comes before the contract check.
        assert!(run.references.is_none(), "{code}");
    }
}

/// Only free uses count: the program's own names, properties, keys, strings, types and
/// `typeof` feature tests run as before.
#[test]
fn declared_names_and_properties_are_not_refused() {
    for code in [
        "const process = (x: number) => x * 2;\nprocess(2)",
        "function run(fs: any) { return fs.length; }\nrun([1, 2])",
        "const o = { require: 1, fetch: 2, 'setTimeout': 3 };\nconst x: any = { fetch: () => 4 };\n[o.require, o.fetch, x.fetch(), 'process.env']",
        "let setTimeout = (f: () => number) => f();\nsetTimeout(() => 1)",
        "[typeof require, typeof fetch, typeof process === 'undefined']",
        "type P = typeof process;\nconst n: number = 1;\nn",
        "class fs { static x = 1 }\nfs.x",
        "const { fetch } = { fetch: () => 5 };\nfetch()",
        "try { throw 1 } catch (process) { process }",
        "(globalThis as any).fetch === undefined",
    ] {
        let run = ts(code);
        assert!(
            matches!(run.outcome, Outcome::Ok { .. }),
            "{code}: {:?}",
            run.outcome
        );
    }
}

#[test]
fn global_names_snapshot() {
    let run = js("Object.getOwnPropertyNames(globalThis).sort()");
    let names: Vec<String> = serde_json_lite(run.value());
    let expected = [
        "AggregateError",
        "Array",
        "ArrayBuffer",
        "AsyncDisposableStack",
        "Atomics",
        "BigInt",
        "BigInt64Array",
        "BigUint64Array",
        "Boolean",
        "DOMException",
        "DataView",
        "Date",
        "DisposableStack",
        "Error",
        "EvalError",
        "FinalizationRegistry",
        "Float16Array",
        "Float32Array",
        "Float64Array",
        "Function",
        "Infinity",
        "Int16Array",
        "Int32Array",
        "Int8Array",
        "InternalError",
        "Iterator",
        "JSON",
        "Map",
        "Math",
        "NaN",
        "Number",
        "Object",
        "Promise",
        "Proxy",
        "RangeError",
        "ReferenceError",
        "Reflect",
        "RegExp",
        "Set",
        "SharedArrayBuffer",
        "String",
        "SuppressedError",
        "Symbol",
        "SyntaxError",
        "ToolError",
        "TypeError",
        "URIError",
        "Uint16Array",
        "Uint32Array",
        "Uint8Array",
        "Uint8ClampedArray",
        "WeakMap",
        "WeakRef",
        "WeakSet",
        "atob",
        "btoa",
        "console",
        "crypto",
        "decodeURI",
        "decodeURIComponent",
        "encodeURI",
        "encodeURIComponent",
        "escape",
        "eval",
        "globalThis",
        "isFinite",
        "isNaN",
        "parseFloat",
        "parseInt",
        "performance",
        "progress",
        "queueMicrotask",
        "store",
        "tools",
        "undefined",
        "unescape",
    ];
    assert_eq!(names, expected);
}

/// Parses a JSON array of strings (the tests avoid a serde_json dependency).
fn serde_json_lite(json: &str) -> Vec<String> {
    json.trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|s| s.trim_matches('"').to_owned())
        .collect()
}

#[test]
fn bridge_functions_expose_nothing_of_the_host() {
    let run = js(r#"
const g = console.log.constructor('return this')();
const checks = {
  sameGlobal: g === globalThis,
  toolProto: Object.getPrototypeOf(tools.a.b) === Function.prototype,
  toolCtor: tools.a.b.constructor === Function,
  toolName: tools.a.b.name,
  toolsProto: Object.getPrototypeOf(tools),
  toolsKeys: Object.keys(tools).length + Object.getOwnPropertyNames(tools.x).length,
  thenProbe: tools.then === undefined && tools.x.then === undefined && tools.toJSON === undefined,
  symbolProbe: tools[Symbol.iterator] === undefined,
  json: JSON.stringify(tools),
  notConstructible: (() => { try { new tools.a.b(); return false } catch { return true } })(),
  readOnly: (() => { try { tools.a = 1; return false } catch { return true } })(),
  progressProto: Object.getPrototypeOf(progress) === Function.prototype,
  logSource: Function.prototype.toString.call(console.log).includes('consoleWrite'),
  noNatives: typeof toolCall + typeof consoleWrite + typeof mapStack + typeof natives,
};
checks
"#);
    assert_eq!(
        run.value(),
        r#"{"sameGlobal":true,"toolProto":true,"toolCtor":true,"toolName":"b","toolsProto":null,"toolsKeys":0,"thenProbe":true,"symbolProbe":true,"json":"{}","notConstructible":true,"readOnly":true,"progressProto":true,"logSource":true,"noNatives":"undefinedundefinedundefinedundefined"}"#
    );
}

#[test]
fn awaiting_tools_itself_does_not_hang() {
    let run = js("const t = await tools; const n = await tools.github; [typeof t, typeof n]");
    assert_eq!(run.value(), r#"["object","object"]"#);
    assert!(run.tool_calls().is_empty());
}

// -----------------------------------------------------------------------------------------
// Console and progress

#[test]
fn console_levels_and_formatting() {
    let run = js(r#"
console.log('plain', 42, -0, 10n, true, null, undefined, Symbol('s'));
console.info({ a: [1, 'two', { b: null }], 'k-2': new Map([['x', 1]]), s: new Set([1]) });
console.warn(function named() {}, () => {}, class K {}, new Date(0), /re/g);
console.error(new TypeError('bad'));
console.debug('%s is %d years and %j', 'Bob', 42, { x: 1 }, 'extra');
const cyc = { name: 'c' }; cyc.self = cyc; console.log(cyc);
console.log(tools, tools.github, tools.github.search);
console.log(Object.create(null), new (class Point { constructor() { this.x = 1 } })(), [1, , 3]);
console.log(new Uint8Array([1, 2]), { get g() { return 1 } }, [[[[[[[[[[1]]]]]]]]]]);
console.log();
"#);
    let console = run.console();
    let texts: Vec<&str> = console.iter().map(|(_, t)| t.as_str()).collect();
    let levels: Vec<ConsoleLevel> = console.iter().map(|(l, _)| *l).collect();
    assert_eq!(
        levels,
        [
            ConsoleLevel::Log,
            ConsoleLevel::Info,
            ConsoleLevel::Warn,
            ConsoleLevel::Error,
            ConsoleLevel::Debug,
            ConsoleLevel::Log,
            ConsoleLevel::Log,
            ConsoleLevel::Log,
            ConsoleLevel::Log,
            ConsoleLevel::Log,
        ]
    );
    assert_eq!(texts[0], "plain 42 -0 10n true null undefined Symbol(s)");
    assert_eq!(
        texts[1],
        r#"{ a: [1, "two", { b: null }], "k-2": Map(1) { "x" => 1 }, s: Set(1) { 1 } }"#
    );
    assert_eq!(
        texts[2],
        "[Function: named] [Function (anonymous)] [class K] 1970-01-01T00:00:00.000Z /re/g"
    );
    assert!(
        texts[3].starts_with("TypeError: bad\n    at <anonymous> (program.js:5:19)"),
        "{}",
        texts[3]
    );
    assert_eq!(texts[4], r#"Bob is 42 years and {"x":1} extra"#);
    assert_eq!(texts[5], r#"{ name: "c", self: [Circular] }"#);
    assert_eq!(texts[6], "[tools] [tools.github] [Function: search]");
    assert_eq!(texts[7], "{} Point { x: 1 } [1, <empty>, 3]");
    assert_eq!(
        texts[8],
        "Uint8Array(2) [1, 2] { g: [Getter] } [[[[[[[[[Array]]]]]]]]]"
    );
    assert_eq!(texts[9], "");
}

#[test]
fn console_is_sent_immediately_and_in_order() {
    // The log before the tool call reaches the supervisor before the call does.
    let run = run_with(
        "console.log('before'); const r = await tools.a.b({}); console.log('after', r); r",
        Language::JavaScript,
        limits(),
        answering(|_, _| Ok("7".to_owned())),
    );
    assert_eq!(run.value(), "7");
    let order: Vec<String> = run
        .messages
        .iter()
        .map(|m| match m {
            WorkerMessage::Console { text, .. } => format!("console:{text}"),
            WorkerMessage::ToolCall { tool, .. } => format!("call:{tool}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(order, ["console:before", "call:a.b", "console:after 7"]);
}

#[test]
fn huge_console_output_stops_the_program() {
    let limits = Limits {
        max_output_bytes: 1000,
        ..limits()
    };
    let run = js_limits(
        "let caught = 0;\nfor (let i = 0; i < 1e6; i++) { try { console.log('line ' + i + ' ' + 'x'.repeat(50)) } catch { caught++ } }\ncaught",
        limits,
    );
    let e = run.error();
    assert_eq!(e.kind, ErrorKind::OutputLimit);
    assert_eq!(
        e.message,
        "console output exceeded the 1000-byte limit; print less, or return data as the result"
    );
    assert_eq!(e.line, Some(2), "{e:?}");
    let sent: usize = run.console_text().iter().map(|t| t.len() + 1).sum();
    assert!(sent <= 1000, "{sent}");
    assert!(sent >= 900, "what fits is sent: {sent}");
    // The last message is the truncated part of the line that crossed the limit.
    assert!(
        run.console_text()
            .last()
            .is_some_and(|t| t.starts_with("line "))
    );
}

#[test]
fn oversized_messages_are_cut_or_refused() {
    let limits = Limits {
        max_output_bytes: 64 * 1024 * 1024,
        ..limits()
    };
    let run = run_with(
        "console.log('z'.repeat(3 << 20));\nconst errors = [];\ntry { progress('p'.repeat(2 << 20)) } catch (e) { errors.push(e.message) }\ntry { await tools.a.b({ s: 'q'.repeat(17 << 20) }) } catch (e) { errors.push(e.message) }\nerrors",
        Language::JavaScript,
        limits,
        answering(|_, _| Ok("null".to_owned())),
    );
    assert_eq!(
        run.value(),
        r#"["progress(): the value is 2097154 bytes of JSON, over the 1 MiB limit","tools.a.b: the arguments are 17825800 bytes of JSON, over the 16 MiB limit"]"#
    );
    let console = run.console_text();
    assert_eq!(console.len(), 1);
    assert!(console[0].len() < (1 << 20) + 100);
    assert!(console[0].ends_with("[message cut: 3145728 bytes, over the 1 MiB per-message limit]"));
    assert!(run.tool_calls().is_empty());
}

#[test]
fn progress_messages() {
    let run = js("progress({ done: 1, of: 3 }); progress(); progress('half'); 1");
    let progress: Vec<String> = run
        .messages
        .iter()
        .filter_map(|m| match m {
            WorkerMessage::Progress { value_json } => Some(value_json.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(progress, [r#"{"done":1,"of":3}"#, "null", "\"half\""]);
    let e = js("progress({ n: 1n })").error().clone();
    assert_eq!(e.name.as_deref(), Some("TypeError"));
    assert!(
        e.message
            .starts_with("progress(): the value cannot be serialised"),
        "{}",
        e.message
    );
}

#[test]
fn lone_surrogates_in_console_text_do_not_break_anything() {
    let run = js("console.log('a\\ud800b'); 'ok'");
    assert_eq!(run.value(), "\"ok\"");
    assert_eq!(run.console_text().len(), 1);
}

// -----------------------------------------------------------------------------------------
// Tool calls

#[test]
fn tool_call_round_trip() {
    let run = run_with(
        "const r = await tools.github.search_issues({ q: 'bug', n: 2 });\nr.items.length",
        Language::TypeScript,
        limits(),
        answering(|tool, args| {
            assert_eq!(tool, "github.search_issues");
            assert_eq!(args, r#"{"q":"bug","n":2}"#);
            Ok(r#"{"items":[1,2,3]}"#.to_owned())
        }),
    );
    assert_eq!(run.value(), "3");
    assert_eq!(
        run.tool_calls(),
        [(
            1,
            "github.search_issues".to_owned(),
            r#"{"q":"bug","n":2}"#.to_owned()
        )]
    );
}

#[test]
fn promise_all_sends_every_call_before_blocking() {
    // The supervisor answers nothing until it holds all three calls: if the worker blocked
    // after the first, this would never finish.
    let run = run_with(
        "const [a, b, c] = await Promise.all([tools.s.one({}), tools.s.two(), tools.t.three({ x: 1 })]);\n[a, b, c]",
        Language::JavaScript,
        limits(),
        |seen| {
            let calls: Vec<u32> = seen
                .iter()
                .filter_map(|m| match m {
                    WorkerMessage::ToolCall { id, .. } => Some(*id),
                    _ => None,
                })
                .collect();
            if calls.len() == 3 && matches!(seen.last(), Some(WorkerMessage::ToolCall { .. })) {
                // Answer out of order.
                calls
                    .iter()
                    .rev()
                    .map(|id| SupervisorMessage::ToolResult {
                        id: *id,
                        result: Ok(format!("{}", id * 10)),
                        clock_ms: TEST_DETERMINISM.clock_ms,
                    })
                    .collect()
            } else {
                vec![]
            }
        },
    );
    assert_eq!(run.value(), "[10,20,30]");
    let calls = run.tool_calls();
    assert_eq!(
        calls,
        [
            (1, "s.one".to_owned(), "{}".to_owned()),
            (2, "s.two".to_owned(), "{}".to_owned()),
            (3, "t.three".to_owned(), r#"{"x":1}"#.to_owned()),
        ]
    );
}

#[test]
fn tool_errors_reject_with_tool_error() {
    let failing = || {
        answering(|_, _| {
            Err(ToolFailure {
                code: "upstream_error".to_owned(),
                message: "the API said no".to_owned(),
                hint: Some("try later".to_owned()),
            })
        })
    };
    let run = run_with(
        "try { await tools.api.get({ id: 1 }) } catch (e) {\n  return [e instanceof ToolError, e instanceof Error, e.name, e.code, e.tool, e.hint, e.message]\n}",
        Language::JavaScript,
        limits(),
        failing(),
    );
    assert_eq!(
        run.value(),
        r#"[true,true,"ToolError","upstream_error","api.get","try later","api.get: the API said no"]"#
    );

    // Uncaught: a Runtime error named ToolError, at the call that failed.
    let run = run_with(
        "const a = 1;\n\nasync function load() {\n  return await tools.api.get({});\n}\nawait load()",
        Language::TypeScript,
        limits(),
        failing(),
    );
    let e = run.error();
    assert_eq!(
        (e.kind, e.name.as_deref()),
        (ErrorKind::Runtime, Some("ToolError"))
    );
    assert_eq!(e.message, "api.get: the API said no");
    assert_eq!(e.line, Some(4), "{e:#?}");
    let stack = e.stack.as_deref().unwrap_or_default();
    assert!(stack.contains("at load (program.ts:4:"), "{stack}");
    assert!(!stack.contains("<airlock>"), "{stack}");
    // The program sees the same stack.
    let run = run_with(
        "try { await tools.api.get({}) } catch (e) { return e.stack }",
        Language::JavaScript,
        limits(),
        failing(),
    );
    assert!(run.value().contains("program.js:1:"), "{}", run.value());
}

#[test]
fn arguments_are_serialised_once() {
    let run = run_with(
        r#"
let reads = 0;
const args = { get q() { reads++; return 'v' + reads } };
await tools.a.b(args);
const bad = [];
for (const v of [{ n: 1n }, (() => { const o = {}; o.o = o; return o })(), () => 1]) {
  try { await tools.a.c(v) } catch (e) { bad.push(e.name + ': ' + e.message) }
}
[reads, bad]
"#,
        Language::JavaScript,
        limits(),
        answering(|_, _| Ok("null".to_owned())),
    );
    let value = run.value();
    assert!(
        value.starts_with("[1,[\"TypeError: tools.a.c: the arguments cannot be serialised to JSON"),
        "{value}"
    );
    assert!(
        value.contains("TypeError: tools.a.c: the arguments must be JSON data, not a function"),
        "{value}"
    );
    // Only the serialisable call was sent, with the value read once.
    assert_eq!(
        run.tool_calls(),
        [(1, "a.b".to_owned(), r#"{"q":"v1"}"#.to_owned())]
    );
}

#[test]
fn tool_call_limit() {
    let limits = Limits {
        max_tool_calls: 2,
        ..limits()
    };
    let program =
        "const out = [];\nfor (let i = 0; i < 3; i++) out.push(await tools.a.b({ i }));\nout";
    let run = run_with(
        program,
        Language::JavaScript,
        limits,
        answering(|_, _| Ok("1".to_owned())),
    );
    let e = run.error();
    assert_eq!(e.kind, ErrorKind::ToolCallLimit);
    assert_eq!(e.name.as_deref(), Some("ToolError"));
    assert!(
        e.message
            .starts_with("the program started more than 2 tool calls"),
        "{}",
        e.message
    );
    assert_eq!(run.tool_calls().len(), 2);

    // Caught, the limit error is just a rejected call.
    let run = run_with(
        "await tools.a.b(); await tools.a.b();\ntry { await tools.a.b() } catch (e) { return e.code }",
        Language::JavaScript,
        limits,
        answering(|_, _| Ok("1".to_owned())),
    );
    assert_eq!(run.value(), "\"tool_call_limit\"");
}

#[test]
fn unknown_and_repeated_results_are_ignored() {
    let run = run_with(
        "const a = await tools.a.b({});\nconst c = await tools.a.c({});\n[a, c]",
        Language::JavaScript,
        limits(),
        |seen| match seen.last() {
            Some(WorkerMessage::ToolCall { id: 1, .. }) => vec![
                SupervisorMessage::ToolResult {
                    id: 99,
                    result: Ok("0".to_owned()),
                    clock_ms: TEST_DETERMINISM.clock_ms,
                },
                SupervisorMessage::ToolResult {
                    id: 1,
                    result: Ok("\"first\"".to_owned()),
                    clock_ms: TEST_DETERMINISM.clock_ms,
                },
                SupervisorMessage::ToolResult {
                    id: 1,
                    result: Ok("\"again\"".to_owned()),
                    clock_ms: TEST_DETERMINISM.clock_ms,
                },
            ],
            Some(WorkerMessage::ToolCall { id, .. }) => vec![SupervisorMessage::ToolResult {
                id: *id,
                result: Ok("\"second\"".to_owned()),
                clock_ms: TEST_DETERMINISM.clock_ms,
            }],
            _ => vec![],
        },
    );
    assert_eq!(run.value(), r#"["first","second"]"#);
    assert_eq!(run.ignored_results, 2);
}

#[test]
fn invalid_json_from_the_supervisor_rejects_the_call() {
    let run = run_with(
        "try { await tools.a.b() } catch (e) { return e.code }",
        Language::JavaScript,
        limits(),
        answering(|_, _| Ok("{not json".to_owned())),
    );
    assert_eq!(run.value(), "\"invalid_result\"");
}

#[test]
fn cancel_stops_a_waiting_program() {
    let run = run_with(
        "await tools.slow.op({})",
        Language::JavaScript,
        limits(),
        |seen| match seen.last() {
            Some(WorkerMessage::ToolCall { .. }) => vec![SupervisorMessage::Cancel],
            _ => vec![],
        },
    );
    assert_eq!(run.error().kind, ErrorKind::Cancelled);
}

/// `Start` and `Proceed` only come before the program runs; one while it waits
/// for a tool's answer is a broken or compromised supervisor, and the run ends as an internal
/// error naming the message, not as a result.
#[test]
fn a_message_that_belongs_before_the_program_is_an_internal_error_while_it_runs() {
    let second_start = SupervisorMessage::Start(StartExecution {
        execution_id: "again".to_owned(),
        language: Language::JavaScript,
        code: "2".to_owned(),
        limits: limits(),
        determinism: TEST_DETERMINISM,
        report_idle: false,
    });
    for (message, named) in [
        (second_start, "a second Start"),
        (SupervisorMessage::Proceed, "Proceed"),
    ] {
        let mut reply = Some(message);
        let run = run_with(
            "await tools.slow.op({}); 'should not finish'",
            Language::JavaScript,
            limits(),
            move |seen| match seen.last() {
                Some(WorkerMessage::ToolCall { .. }) => reply.take().into_iter().collect(),
                _ => vec![],
            },
        );
        let error = run.error();
        assert_eq!(error.kind, ErrorKind::Internal, "{named}: {error:?}");
        assert!(error.message.contains(named), "{named}: {}", error.message);
    }
}

#[test]
fn a_closed_channel_is_an_internal_error() {
    let (worker_end, supervisor_end) = UnixStream::pair().expect("socketpair");
    drop(supervisor_end);
    let start = StartExecution {
        execution_id: "t".to_owned(),
        language: Language::JavaScript,
        code: "console.log('x'); 1".to_owned(),
        limits: limits(),
        determinism: TEST_DETERMINISM,
        report_idle: false,
    };
    let engine = Engine::new().expect("engine");
    let (outcome, _) = engine.run(start, &mut Ipc::from_stream(worker_end));
    match outcome {
        Outcome::Error(e) => assert_eq!(e.kind, ErrorKind::Internal, "{e:?}"),
        other => panic!("{other:?}"),
    }
}

// -----------------------------------------------------------------------------------------
// Limits

#[test]
fn deadlock() {
    let e = js("await new Promise(() => {})").error().clone();
    assert_eq!(e.kind, ErrorKind::Deadlock);
    assert_eq!(
        e.message,
        "the program awaits a promise that can never settle: no tool call is pending and nothing else can resolve it"
    );
}

#[test]
fn infinite_loops_time_out() {
    for program in [
        "while (true) {}",
        "try { while (true) {} } finally { while (true) {} }",
        "try { while (true) {} } catch (e) {}\n1",
        "for (;;) { try { while (true) {} } catch { } }",
        "await null; while (true) {}",
        "function f() { Promise.resolve().then(f) }\nf();\nawait new Promise(() => {})",
        "const spin = async () => { for (;;) await null }; await spin()",
    ] {
        let started = Instant::now();
        let run = js_limits(program, short_timeout());
        let elapsed = started.elapsed();
        let e = run.error();
        assert_eq!(e.kind, ErrorKind::Timeout, "{program}: {e:?}");
        assert_eq!(
            e.message,
            "the program ran past its 200 ms deadline; break the work up into smaller executions, or raise timeout_ms"
        );
        assert!(
            elapsed < Duration::from_secs(3),
            "{program}: took {elapsed:?}"
        );
    }
}

#[test]
fn memory_bombs_hit_the_memory_limit() {
    let e = js("let a = [];\nwhile (true) a.push(new Array(1e6).fill(1))")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::MemoryLimit, "{e:?}");
    assert_eq!(
        e.message,
        "the program exceeded its 64 MiB memory limit; process the data in smaller pieces (the limit is the policy's limits.memory, which only the operator can raise)"
    );
    // The key named is one that exists: the policy's, not the wire's `memory_bytes`.
    assert!(!e.message.contains("_bytes"), "{}", e.message);
    let e = js("const parts = [];\nwhile (true) parts.push('x'.repeat(1 << 20) + parts.length)")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::MemoryLimit, "{e:?}");
    let e = js("'x'.repeat(2 ** 29)").error().clone();
    assert_eq!(e.kind, ErrorKind::MemoryLimit, "{e:?}");
    // Over QuickJS's maximum string length: a RangeError before any allocation.
    let e = js("'x'.repeat(2 ** 30)").error().clone();
    assert_eq!(
        (e.kind, e.name.as_deref()),
        (ErrorKind::Runtime, Some("RangeError")),
        "{e:?}"
    );
    // Catching the out-of-memory error does not help a program that keeps allocating.
    let e = js("const keep = [];\nfor (;;) { try { keep.push('y'.repeat(1 << 20) + keep.length) } catch (e) { keep.push(e) } }")
        .error()
        .clone();
    assert!(
        matches!(e.kind, ErrorKind::MemoryLimit | ErrorKind::Timeout),
        "{e:?}"
    );
}

#[test]
fn deep_recursion_is_a_stack_overflow() {
    let e = js("function f(n) { return f(n + 1) + 1 }\nf(0)")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::StackOverflow, "{e:?}");
    assert_eq!(e.name.as_deref(), Some("RangeError"));
    assert!(
        e.message
            .starts_with("the program exceeded its 1 MiB stack limit"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("limits.stack") && !e.message.contains("_bytes"),
        "{}",
        e.message
    );
    assert_eq!(e.line, Some(1));
    // Catchable, like in other engines: the program can recover.
    let run = js("function f() { f() }\ntry { f() } catch (e) { return e.name }");
    assert_eq!(run.value(), "\"RangeError\"");
    // Deep data structures in JSON.stringify and console.log are stopped too.
    let e = js("let o = {}; for (let i = 0; i < 1e5; i++) o = { o };\no")
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::StackOverflow, "{e:?}");
}

#[test]
fn stack_limit_is_clamped() {
    // 0 would mean "no limit" to QuickJS; the engine still stops runaway recursion.
    let limits = Limits {
        stack_bytes: 0,
        ..limits()
    };
    let e = js_limits("function f() { return f() + 1 }\nf()", limits)
        .error()
        .clone();
    assert_eq!(e.kind, ErrorKind::StackOverflow);
}

#[test]
fn big_programs_compile_and_run() {
    // ~10 MB: a long array literal plus many statements.
    let mut code = String::from("const data = [");
    for i in 0..1_000_000 {
        code.push_str(&format!("{i},"));
    }
    code.push_str("];\nlet sum = 0;\n");
    while code.len() < 10 * 1024 * 1024 {
        code.push_str("sum += data[1] + data[2] * 2 - data[3];\n");
    }
    code.push_str("sum");
    let started = Instant::now();
    let run = run_with(&code, Language::TypeScript, limits_for_big(), silent);
    let elapsed = started.elapsed();
    let value: i64 = run.value().parse().expect("number");
    assert!(value > 0);
    eprintln!(
        "10 MB program: total {elapsed:?}, compile {} µs, run {} µs",
        run.stats.compile_us, run.stats.run_us,
    );
    let budget = if cfg!(debug_assertions) { 60 } else { 5 };
    assert!(elapsed < Duration::from_secs(budget), "{elapsed:?}");
}

fn limits_for_big() -> Limits {
    Limits {
        timeout_ms: 60_000,
        memory_bytes: 512 * 1024 * 1024,
        ..limits()
    }
}

#[test]
fn date_and_random_work() {
    let run = js(
        "[typeof Date.now(), new Date(0).toISOString(), Math.random() < 1, typeof performance.now(), new Date(2020, 0, 1).getFullYear()]",
    );
    assert_eq!(
        run.value(),
        r#"["number","1970-01-01T00:00:00.000Z",true,"number",2020]"#
    );
}

#[test]
fn unhandled_floating_promises_do_not_change_the_result() {
    let run = js(
        "Promise.reject(new Error('ignored')); Promise.resolve().then(() => console.log('later')); 5",
    );
    assert_eq!(run.value(), "5");
    assert_eq!(run.console_text(), ["later"]);
}

#[test]
fn repeated_runs_in_one_process_do_not_leak_state() {
    for i in 0..3 {
        let run = js(&format!(
            "globalThis.count = (globalThis.count ?? 0) + 1; [count, {i}]"
        ));
        assert_eq!(run.value(), format!("[1,{i}]"));
    }
}

#[test]
fn trivial_program_timing() {
    // Warm up, then time prepare + run of a trivial program (the figure the design's
    // per-execution budget cares about). Printed, not asserted: debug builds are slow.
    let _ = js("1");
    let run = js("1 + 1");
    eprintln!(
        "trivial program: compile {} µs, run {} µs, heap {} KiB",
        run.stats.compile_us,
        run.stats.run_us,
        run.stats.heap_used_bytes >> 10
    );
    assert_eq!(run.value(), "2");
}

/// Timing probe for `Engine::new`'s phases; run with
/// `cargo test --release -p airlock-worker engine_start_phases -- --ignored --nocapture`.
#[test]
#[ignore = "measurement, not a check"]
fn engine_start_phases() {
    use rquickjs::{Context, Runtime};
    let t = Instant::now();
    let rt = Runtime::new().unwrap();
    let ctx = Context::full(&rt).unwrap();
    let t_ctx = t.elapsed();
    let t2 = Instant::now();
    ctx.with(|c| {
        let _: rquickjs::Function = c.eval(super::PRELUDE).unwrap();
    });
    let t_prelude = t2.elapsed();
    let t4 = Instant::now();
    ctx.with(|c| {
        let _ = super::load_prelude(&c).unwrap();
    });
    let t_bytecode = t4.elapsed();
    let t3 = Instant::now();
    let _engine = Engine::new().unwrap();
    eprintln!(
        "runtime+context {t_ctx:?}, prelude parse+eval {t_prelude:?}, prelude from bytecode {t_bytecode:?}, whole Engine::new {:?}",
        t3.elapsed()
    );
}

/// build.rs names the compiled prelude `<airlock>`; stack filtering relies on that name.
#[test]
fn precompiled_prelude_carries_the_prelude_filename() {
    assert_eq!(super::bridge::PRELUDE_FILENAME, "<airlock>");
    let name = super::bridge::PRELUDE_FILENAME.as_bytes();
    assert!(
        super::PRELUDE_BYTECODE
            .windows(name.len())
            .any(|w| w == name),
        "prelude bytecode does not mention {:?}",
        super::bridge::PRELUDE_FILENAME
    );
}

// -----------------------------------------------------------------------------------------
// Escape corpus, engine side (docs/escape-corpus.md)

/// Catastrophic backtracking in a user regex: QuickJS's regex engine polls the interrupt
/// handler while it backtracks, so the engine's own deadline stops it (no kill needed).
#[test]
fn regex_backtracking_is_interrupted_at_the_deadline() {
    for program in [
        "/(a+)+$/.test('a'.repeat(40) + '!')",
        "/^(\\w+\\s?)*$/.test('an aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!')",
        "'x'.repeat(30).replace(/(x|x)*y/g, '')",
    ] {
        let started = Instant::now();
        let run = js_limits(program, short_timeout());
        let elapsed = started.elapsed();
        assert_eq!(
            run.error().kind,
            ErrorKind::Timeout,
            "{program}: {:?}",
            run.outcome
        );
        assert!(
            elapsed < Duration::from_secs(2),
            "{program}: took {elapsed:?}"
        );
    }
}

/// `Atomics.wait` would block the only thread where no interrupt can reach it; QuickJS
/// refuses to block (the runtime is not marked as able to), so it throws at once.
#[test]
fn atomics_wait_cannot_block() {
    let started = Instant::now();
    let e = js_limits(
        "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60000)",
        short_timeout(),
    )
    .error()
    .clone();
    assert_eq!(e.kind, ErrorKind::Runtime, "{e:?}");
    assert_eq!(e.message, "cannot block in this thread");
    assert!(started.elapsed() < Duration::from_secs(1));
    // A SharedArrayBuffer is only memory: with one thread there is nobody to share it with.
    let run = js(
        "const b = new SharedArrayBuffer(8); const a = new Int32Array(b); Atomics.add(a, 0, 5); \
         [Atomics.load(a, 0), Atomics.notify(a, 0, 1), typeof postMessage, typeof Worker]",
    );
    assert_eq!(run.value(), r#"[5,0,"undefined","undefined"]"#);
}

/// Lone surrogates leave the engine as `\uXXXX` escapes inside JSON (well-formed
/// `JSON.stringify`); what the supervisor does with them is tested end to end.
#[test]
fn lone_surrogates_are_escaped_in_json() {
    let run = js("['\\ud800', 'a\\udc00b', '\\ud83d\\ude00']");
    assert_eq!(run.value(), r#"["\ud800","a\udc00b","😀"]"#);
}

#[test]
fn literal_tool_calls_are_judged_before_anything_runs() {
    let code = "console.log('before');\nawait tools.a.b({ x: 1 })";
    // Go: the program runs and makes its call.
    let run = run_with(
        code,
        Language::TypeScript,
        limits(),
        answering(|_, _| Ok("2".into())),
    );
    assert_eq!(run.value(), "2");
    let references = run.references.as_ref().expect("the references were sent");
    assert_eq!(references.calls.len(), 1);
    assert_eq!(references.calls[0].namespace, "a");
    // Refused: nothing of the program ran, not even its first console line.
    let run = run_judged(
        code,
        Language::TypeScript,
        limits(),
        SupervisorMessage::Cancel,
        answering(|_, _| Ok("2".into())),
    );
    assert_eq!(run.error().kind, ErrorKind::Cancelled);
    assert!(run.references.is_some());
    assert!(run.messages.is_empty(), "{:?}", run.messages);
    // A program without literal tool calls is not held up.
    let run = run_with("1 + 1", Language::TypeScript, limits(), |_| vec![]);
    assert_eq!(run.value(), "2");
    assert!(run.references.is_none());
}

// -----------------------------------------------------------------------------------------
// The clock and randomness (determinism.rs): the supervisor's, never the system's

/// A clock far from the host's, so a value read from the system could not pass for it.
const OLD_CLOCK_MS: u64 = 1_000_000_000_000; // 2001-09-09T01:46:40Z

fn determinism(clock_ms: u64, seed: u8) -> airlock_proto::Determinism {
    airlock_proto::Determinism {
        clock_ms,
        seed: [seed; 32],
    }
}

/// A supervisor that answers the n-th tool call (from 0) with `null` and clock `clocks[n]`.
fn answering_at(
    clocks: Vec<u64>,
) -> impl FnMut(&[WorkerMessage]) -> Vec<SupervisorMessage> + Send + 'static {
    let mut answered = 0;
    move |seen| match seen.last() {
        Some(WorkerMessage::ToolCall { id, .. }) => {
            let clock_ms = clocks[answered];
            answered += 1;
            vec![SupervisorMessage::ToolResult {
                id: *id,
                result: Ok("null".to_owned()),
                clock_ms,
            }]
        }
        _ => vec![],
    }
}

#[test]
fn the_clock_starts_at_the_supervisors_and_stands_still_during_computation() {
    let run = run_determined(
        r#"
const a = Date.now();
const b = new Date().getTime();
let x = 0;
for (let i = 0; i < 3_000_000; i++) x += i % 7;
[a, b, Date.now(), new Date().valueOf(), +new Date(), performance.now(), performance.timeOrigin,
 new Date().toISOString()]
"#,
        determinism(OLD_CLOCK_MS, 1),
        silent,
    );
    assert_eq!(
        run.value(),
        r#"[1000000000000,1000000000000,1000000000000,1000000000000,1000000000000,0,1000000000000,"2001-09-09T01:46:40.000Z"]"#
    );
}

#[test]
fn date_called_as_a_function_is_the_clock_as_text() {
    let run = run_determined(
        r#"
const s = Date();
[typeof s, s === new Date().toString(), s === new Date(Date.now()).toString(),
 Date(0, 1, 2) === s, new Date(Date.parse(s)).getTime() === Date.now()]
"#,
        determinism(OLD_CLOCK_MS, 1),
        silent,
    );
    assert_eq!(run.value(), "[\"string\",true,true,true,true]");
}

#[test]
fn the_clock_moves_only_forward_and_only_with_tool_results() {
    let c = OLD_CLOCK_MS;
    // The second answer carries an earlier clock: the program's clock stays where it is.
    let run = run_determined(
        r#"
const t = [Date.now()];
await tools.x.y({});
t.push(Date.now(), new Date().getTime(), performance.now());
let x = 0;
for (let i = 0; i < 1_000_000; i++) x += i;
t.push(Date.now());
await tools.x.y({});
t.push(Date.now());
await tools.x.y({});
t.push(Date.now(), performance.now(), performance.timeOrigin);
t
"#,
        determinism(c, 1),
        answering_at(vec![c + 5_000, c + 1_000, c + 9_000]),
    );
    let (c1, c2) = (c + 5_000, c + 9_000);
    assert_eq!(
        run.value(),
        format!("[{c},{c1},{c1},5000,{c1},{c1},{c2},9000,{c}]")
    );
}

#[test]
fn the_clock_moves_before_the_answered_code_runs() {
    // Every continuation of the answered call, `then` callbacks as much as code after the
    // `await`, sees the new time; code that ran before the answer saw the old one.
    let c = OLD_CLOCK_MS;
    let run = run_determined(
        r#"
const seen = [];
const p = tools.x.y({}).then(() => seen.push(Date.now()));
seen.push(Date.now());
await p;
seen.push(Date.now());
seen
"#,
        determinism(c, 1),
        answering_at(vec![c + 42]),
    );
    assert_eq!(run.value(), format!("[{c},{},{}]", c + 42, c + 42));
}

#[test]
fn results_that_answer_nothing_do_not_move_the_clock() {
    let c = OLD_CLOCK_MS;
    let run = run_determined(
        "await tools.x.y({}); Date.now()",
        determinism(c, 1),
        move |seen| match seen.last() {
            Some(WorkerMessage::ToolCall { id, .. }) => vec![
                SupervisorMessage::ToolResult {
                    id: id + 100,
                    result: Ok("1".to_owned()),
                    clock_ms: c + 50_000,
                },
                SupervisorMessage::ToolResult {
                    id: *id,
                    result: Ok("2".to_owned()),
                    clock_ms: c + 10,
                },
            ],
            _ => vec![],
        },
    );
    assert_eq!(run.value(), (c + 10).to_string());
    assert_eq!(run.ignored_results, 1);
}

#[test]
fn a_clock_past_the_end_of_time_is_the_last_valid_date() {
    let run = run_determined(
        "[Date.now(), new Date().toISOString()]",
        determinism(u64::MAX, 1),
        silent,
    );
    assert_eq!(
        run.value(),
        r#"[8640000000000000,"+275760-09-13T00:00:00.000Z"]"#
    );
}

#[test]
fn everything_else_about_date_is_the_engines() {
    let run = run_determined(
        r#"
class D extends Date {
  year() { return this.getUTCFullYear(); }
}
const d = new D(Date.UTC(2001, 1, 3));
const original = Object.getOwnPropertyDescriptor(globalThis, 'Date');
({
  zero: new Date(0).getTime(),
  fields: [new Date(2020, 0, 15, 10, 30).getMonth(), new Date(2020, 0, 15, 10, 30).getMinutes()],
  twoDigitYear: new Date(99, 0).getFullYear(),
  iso: new Date("2020-01-02T03:04:05.678Z").getTime(),
  copy: new Date(new Date(5)).getTime(),
  undefinedArgument: Number.isNaN(new Date(undefined).getTime()),
  invalid: String(new Date(NaN)),
  utc: Date.UTC(2020, 0, 1),
  parse: Date.parse("2020-01-01T00:00:00Z"),
  instance: new Date() instanceof Date && new Date(3) instanceof Date,
  ctor: new Date().constructor === Date,
  protoCtor: Date.prototype.constructor === Date,
  protoOf: Object.getPrototypeOf(new Date()) === Date.prototype,
  typeofDate: typeof Date,
  nameLength: [Date.name, Date.length, Date.now.name, Date.now.length],
  subclass: d instanceof D && d instanceof Date && d.year() === 2001 && Object.getPrototypeOf(D) === Date,
  subclassNow: new D().getTime() === Date.now() && new D() instanceof D,
  reflect: Reflect.construct(Date, []).getTime() === Date.now() && Reflect.construct(Date, [7], Array).getTime === undefined,
  tag: Object.prototype.toString.call(new Date()),
  json: JSON.stringify({ d: new Date(0) }),
  statics: Object.getOwnPropertyNames(Date).sort(),
  prototypeLocked: (({ writable, enumerable, configurable }) => !writable && !enumerable && !configurable)(Object.getOwnPropertyDescriptor(Date, 'prototype')),
  global: [original.writable, original.enumerable, original.configurable],
  nowIsNoConstructor: (() => { try { new Date.now(); return false } catch (e) { return e instanceof TypeError } })(),
  getterCheck: (() => { try { Date.prototype.getTime.call({}); return false } catch (e) { return e instanceof TypeError } })(),
  setters: (() => { const x = new Date(0); x.setUTCFullYear(2000); return x.toISOString() })(),
  primitive: new Date(0)[Symbol.toPrimitive]('number'),
  subtraction: new Date(10) - new Date(4),
})
"#,
        determinism(OLD_CLOCK_MS, 1),
        silent,
    );
    assert_eq!(
        run.value(),
        concat!(
            r#"{"zero":0,"fields":[0,30],"twoDigitYear":1999,"iso":1577934245678,"copy":5,"#,
            r#""undefinedArgument":true,"invalid":"Invalid Date","utc":1577836800000,"#,
            r#""parse":1577836800000,"instance":true,"ctor":true,"protoCtor":true,"#,
            r#""protoOf":true,"typeofDate":"function","nameLength":["Date",7,"now",0],"#,
            r#""subclass":true,"subclassNow":true,"reflect":true,"tag":"[object Date]","#,
            r#""json":"{\"d\":\"1970-01-01T00:00:00.000Z\"}","#,
            r#""statics":["UTC","length","name","now","parse","prototype"],"#,
            r#""prototypeLocked":true,"global":[true,false,true],"nowIsNoConstructor":true,"#,
            r#""getterCheck":true,"setters":"2000-01-01T00:00:00.000Z","primitive":0,"#,
            r#""subtraction":6}"#
        )
    );
}

#[test]
fn date_answers_as_the_engines_own_date_does() {
    // Everything that does not read the clock, asked of the program's Date and of QuickJS's
    // own (in a bare context without the prelude): the answers must be the same.
    let attributes = "(n) => { const d = Object.getOwnPropertyDescriptor(Date, n); \
                      return [typeof d.value, d.writable, d.enumerable, d.configurable]; }";
    let probes = [
        "new Date(0).getTime()",
        "new Date(2020, 0, 15, 10, 30, 5, 7).toString()",
        "new Date(2020, 1).getMonth()",
        "new Date(99, 0).getFullYear()",
        "new Date('2020-01-02T03:04:05.678Z').toISOString()",
        "new Date('2020').getTime()",
        "new Date('garbage').getTime()",
        "new Date(undefined).getTime()",
        "new Date(null).getTime()",
        "new Date(8.64e15 + 1).getTime()",
        "new Date(new Date(5)).getTime()",
        "String(new Date(NaN))",
        "new Date(1e12).toUTCString()",
        "new Date(1e12).toLocaleDateString()",
        "[Date.UTC(2020, 0, 1), Date.UTC(2020), Date.UTC()]",
        "[Date.parse('2020-01-01T00:00:00Z'), Date.parse('garbage')]",
        "[Date.name, Date.length, Date.now.name, Date.now.length, Date.parse.length, Date.UTC.length]",
        "[typeof Date, typeof Date.now, typeof Date.parse, typeof Date.UTC]",
        "Object.getOwnPropertyNames(Date).sort()",
        "Object.keys(Date)",
        "Object.getOwnPropertyNames(Date.prototype).length",
        "Object.getPrototypeOf(Date) === Function.prototype",
        "Date.prototype.constructor === Date",
        "new Date(1e12) instanceof Date",
        "Object.prototype.toString.call(new Date(0))",
        &format!("['now', 'parse', 'UTC', 'prototype'].map({attributes})"),
        "(() => { const d = Object.getOwnPropertyDescriptor(Date.prototype, 'constructor'); \
          return [d.writable, d.enumerable, d.configurable]; })()",
        "(() => { class D extends Date { y() { return this.getUTCFullYear(); } } \
          const d = new D(0); return [d.y(), d instanceof D, d instanceof Date, \
          Object.getPrototypeOf(D) === Date, d.constructor === D]; })()",
        "(() => { try { new Date(Symbol()); } catch (e) { return `${e.name}: ${e.message}`; } })()",
        "(() => { try { new Date.now(); } catch (e) { return e.name; } })()",
        "(() => { try { Date.prototype.getTime.call({}); } catch (e) { return e.message; } })()",
        "JSON.stringify({ d: new Date(0) })",
        "new Date(10) - new Date(4)",
        "`${new Date(0)}` === new Date(0).toString()",
    ];
    let runtime = rquickjs::Runtime::new().unwrap();
    let context = rquickjs::Context::full(&runtime).unwrap();
    for probe in probes {
        let code = format!("JSON.stringify({probe})");
        let engines: String = context.with(|ctx| ctx.eval(code.as_str()).unwrap());
        let run = js(&code);
        assert_eq!(run.value(), format!("{engines:?}"), "{probe}");
    }
}

#[test]
fn the_engines_own_clock_is_out_of_reach() {
    // Every way to a Date constructor leads to the program's, and none of them reads the
    // system clock (the host's clock is decades past OLD_CLOCK_MS).
    let run = run_determined(
        r#"
const ctors = [
  Date,
  Date.prototype.constructor,
  new Date().constructor,
  Object.getPrototypeOf(new Date()).constructor,
  Object.getPrototypeOf(class extends Date {}),
  globalThis.Date,
  (0, eval)('Date'),
  new Function('return Date')(),
];
const times = [
  ...ctors.map((C) => new C().getTime()),
  ...ctors.map((C) => C.now()),
  ...ctors.map((C) => Date.parse(C())),
  new (Object.getPrototypeOf(new Date()).constructor)().getTime(),
];
[ctors.every((C) => C === Date), times.every((t) => t === 1000000000000),
 typeof Math.random, Math.random.name, typeof performance.now,
 Object.getOwnPropertyNames(performance).sort()]
"#,
        determinism(OLD_CLOCK_MS, 1),
        silent,
    );
    assert_eq!(
        run.value(),
        r#"[true,true,"function","random","function",["now","timeOrigin"]]"#
    );
}

#[test]
fn randomness_is_a_function_of_the_seed() {
    let draws = [
        "Array.from({ length: 5 }, () => Math.random())",
        "Array.from(crypto.getRandomValues(new Uint8Array(12)))",
        "crypto.randomUUID()",
    ];
    for code in draws {
        let draw = |clock_ms, seed| {
            run_determined(code, determinism(clock_ms, seed), silent)
                .value()
                .to_owned()
        };
        let first = draw(OLD_CLOCK_MS, 1);
        assert_eq!(first, draw(OLD_CLOCK_MS, 1), "{code}");
        assert_eq!(
            first,
            draw(OLD_CLOCK_MS + 1, 1),
            "{code}: the clock is no seed"
        );
        assert_ne!(first, draw(OLD_CLOCK_MS, 2), "{code}: another seed");
    }
}

#[test]
fn the_two_streams_are_independent() {
    // The first 53 bits of Math.random are the top of the first 64-bit word of stream 1; the
    // same word of stream 2 is something else.
    let run = run_determined(
        "const m = BigInt(Math.random() * 2 ** 53); \
         const c = crypto.getRandomValues(new BigUint64Array(1))[0] >> 11n; [m !== c, m > 0n, c > 0n]",
        determinism(OLD_CLOCK_MS, 1),
        silent,
    );
    assert_eq!(run.value(), "[true,true,true]");
    // Drawing from one stream does not shift the other.
    let seeded = |code: &str| {
        run_determined(code, determinism(OLD_CLOCK_MS, 3), silent)
            .value()
            .to_owned()
    };
    assert_eq!(
        seeded("[Math.random(), Math.random()]"),
        seeded(
            "const a = Math.random(); crypto.getRandomValues(new Uint8Array(1000)); \
             crypto.randomUUID(); [a, Math.random()]"
        )
    );
    assert_eq!(
        seeded("crypto.randomUUID()"),
        seeded("for (let i = 0; i < 100; i++) Math.random(); crypto.randomUUID()")
    );
}

#[test]
fn math_random_is_uniform_in_the_unit_interval() {
    let run = js("let min = 1, max = 0, sum = 0, n = 20000; \
         for (let i = 0; i < n; i++) { const r = Math.random(); \
           if (!(r >= 0 && r < 1)) throw new Error('out of range: ' + r); \
           min = Math.min(min, r); max = Math.max(max, r); sum += r; } \
         [min < 0.001, max > 0.999, Math.abs(sum / n - 0.5) < 0.01]");
    assert_eq!(run.value(), "[true,true,true]");
}

#[test]
fn get_random_values_fills_integer_arrays_in_place() {
    let run = js(r#"
const a = new Uint8Array(8);
const view = crypto.getRandomValues(a.subarray(2, 6));
const big = new Uint8Array(65536);
const full = crypto.getRandomValues(big) === big;
const kinds = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array,
  Uint32Array, BigInt64Array, BigUint64Array].map((T) => {
  const x = new T(64);
  return crypto.getRandomValues(x) === x && Array.from(x).some((v) => v != 0);
});
class Mine extends Uint32Array {}
const mine = new Mine(4);
[a[0], a[1], a[6], a[7], view.length, view.buffer === a.buffer, full,
 big.some((v) => v !== 0), kinds.every(Boolean),
 crypto.getRandomValues(mine) === mine, crypto.getRandomValues(new Uint8Array(0)).length,
 Object.prototype.toString.call(crypto)]
"#);
    assert_eq!(
        run.value(),
        r#"[0,0,0,0,4,true,true,true,true,true,0,"[object Crypto]"]"#
    );
}

#[test]
fn get_random_values_refuses_what_web_crypto_refuses() {
    let run = js(r#"
const attempt = (f) => { try { f(); return 'no error'; } catch (e) { return `${e.name}: ${e.message}`; } };
[
  attempt(() => crypto.getRandomValues(new Float64Array(4))),
  attempt(() => crypto.getRandomValues(new Float32Array(4))),
  attempt(() => crypto.getRandomValues(new DataView(new ArrayBuffer(4)))),
  attempt(() => crypto.getRandomValues([1, 2, 3])),
  attempt(() => crypto.getRandomValues()),
  attempt(() => crypto.getRandomValues(Object.create(Uint8Array.prototype))),
  attempt(() => crypto.getRandomValues(new Uint8Array(65537))),
  attempt(() => crypto.getRandomValues(new Uint32Array(16385))),
  (() => { try { crypto.getRandomValues(new Uint8Array(65537)) } catch (e) { return e instanceof DOMException } })(),
  (() => { try { crypto.getRandomValues(new Float64Array(1)) } catch (e) { return e instanceof TypeError } })(),
]
"#);
    let list = "(Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, \
                Uint32Array, BigInt64Array or BigUint64Array)";
    let type_error = |what: &str| {
        format!(
            "TypeError: crypto.getRandomValues: the argument must be an integer typed array \
             {list}, not {what}"
        )
    };
    let expected = [
        type_error("Float64Array"),
        type_error("Float32Array"),
        type_error("DataView"),
        type_error("Array"),
        type_error("undefined"),
        type_error("Object"),
        "QuotaExceededError: crypto.getRandomValues: the array is 65537 bytes, over the \
         65536-byte limit"
            .to_owned(),
        "QuotaExceededError: crypto.getRandomValues: the array is 65540 bytes, over the \
         65536-byte limit"
            .to_owned(),
    ];
    let mut expected_json: Vec<String> = expected
        .iter()
        .map(|e| format!("\"{e}\""))
        .collect::<Vec<_>>();
    expected_json.push("true".to_owned());
    expected_json.push("true".to_owned());
    assert_eq!(run.value(), format!("[{}]", expected_json.join(",")));
}

#[test]
fn random_uuids_are_version_4() {
    let run = js(r#"
const pattern = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ids = Array.from({ length: 200 }, () => crypto.randomUUID());
[ids.every((id) => pattern.test(id)), new Set(ids).size, typeof crypto.randomUUID()]
"#);
    assert_eq!(run.value(), r#"[true,200,"string"]"#);
}

#[test]
fn a_run_is_a_function_of_code_clock_seed_and_tool_results() {
    let code = r#"
console.log(Date(), new Date().toString(), new Date().toLocaleString());
const first = await tools.x.y({ at: Date.now(), r: Math.random() });
console.log(Date.now(), performance.now(), crypto.randomUUID());
const [a, b] = await Promise.all([tools.x.y({ n: 1 }), tools.x.y({ n: 2 })]);
console.log(new Date().toISOString(), Math.random(), Array.from(crypto.getRandomValues(new Uint16Array(4))));
({ first, a, b, end: Date.now(), r: Math.random() })
"#;
    let c = OLD_CLOCK_MS;
    let once = || {
        run_determined(
            code,
            determinism(c, 9),
            answering_at(vec![c + 100, c + 300, c + 200]),
        )
    };
    let (first, second) = (once(), once());
    assert_eq!(first.value(), second.value());
    assert_eq!(first.messages, second.messages);
    assert_eq!(first.tool_calls().len(), 3);
}

/// With `report_idle`, the worker says it is idle each time it blocks for an answer, with the
/// number of results it has seen: after the two calls of a `Promise.all` (one batch), and
/// again after the first answer only if the program still waits.
#[test]
fn an_idle_program_says_so_with_the_results_it_has_seen() {
    let code = r#"
        const [a, b] = await Promise.all([tools.c.f({ n: 1 }), tools.c.f({ n: 2 })]);
        const c = await tools.c.f({ n: a.n + b.n });
        return c.n;
    "#;
    let run = run_full(
        code,
        Language::JavaScript,
        limits(),
        TEST_DETERMINISM,
        SupervisorMessage::Proceed,
        true,
        {
            let mut answered = 0;
            move |seen: &[WorkerMessage]| match seen.last() {
                // Answer the calls not answered yet, once the worker says it is idle.
                Some(WorkerMessage::Idle { .. }) => {
                    let replies: Vec<SupervisorMessage> = seen
                        .iter()
                        .filter_map(|m| match m {
                            WorkerMessage::ToolCall { id, args_json, .. } if *id > answered => {
                                Some(SupervisorMessage::ToolResult {
                                    id: *id,
                                    result: Ok(args_json.clone()),
                                    clock_ms: TEST_DETERMINISM.clock_ms,
                                })
                            }
                            _ => None,
                        })
                        .collect();
                    answered += u32::try_from(replies.len()).unwrap();
                    replies
                }
                _ => vec![],
            }
        },
    );
    assert_eq!(
        run.outcome,
        Outcome::Ok {
            value_json: "3".into()
        }
    );
    let shape: Vec<String> = run
        .messages
        .iter()
        .map(|m| match m {
            WorkerMessage::ToolCall { id, .. } => format!("call {id}"),
            WorkerMessage::Idle { results } => format!("idle {results}"),
            other => format!("{other:?}"),
        })
        .collect();
    // After the first answer the second is still awaited: idle again, having seen one.
    assert_eq!(
        shape[..6],
        ["call 1", "call 2", "idle 0", "idle 1", "call 3", "idle 2"]
    );
    // Each call says where the program made it (line 2 for the batch, 3 for the last).
    assert_eq!(call_lines(&run), [Some(2), Some(2), Some(3)]);
}

/// The line each tool call says it was made on, in call order.
fn call_lines(run: &Run) -> Vec<Option<u32>> {
    run.messages
        .iter()
        .filter_map(|m| match m {
            WorkerMessage::ToolCall { at, .. } => Some(at.map(|p| p.line)),
            _ => None,
        })
        .collect()
}

/// A call's position is where the agent's code made it, at the top level, in a function, and
/// in a batch, for JavaScript and TypeScript alike.
#[test]
fn calls_carry_their_position_in_the_agents_code() {
    for language in [Language::JavaScript, Language::TypeScript] {
        let code = "const x = 1;\nconst y = 2;\nconst before = await tools.t.echo({ text: \"first\" });\nconst z = 3;\n\nconst sum = await tools.t.add({ a: 1, b: 2 });\nconst w = tools.t.add({ a: 1, b: 2 });\nconst v = await w;\nfunction f() { return tools.t.add({}); }\nawait f();\nawait Promise.all([tools.t.add({a:1}),\n tools.t.add({b:2})]);\nreturn { before, sum };";
        let run = run_full(
            code,
            language,
            limits(),
            TEST_DETERMINISM,
            SupervisorMessage::Proceed,
            true,
            answering(|_, args| Ok(args.to_owned())),
        );
        assert_eq!(
            call_lines(&run),
            [Some(3), Some(6), Some(7), Some(9), Some(11), Some(12)],
            "{language:?}"
        );
    }
}

// -----------------------------------------------------------------------------------------
// Provenance: TypeErrors on tool results say where the value came from and what it is

/// Runs `code` with every tool call answered by `results` (tool → JSON).
fn with_results(code: &str, results: &'static [(&'static str, &'static str)]) -> Run {
    run_with(
        code,
        Language::TypeScript,
        limits(),
        answering(move |tool, _| {
            let found = results.iter().find(|(t, _)| *t == tool);
            Ok(found.map_or("null", |(_, json)| *json).to_owned())
        }),
    )
}

const GRAPH: &str = r#"{"entities":[{"name":"a","entityType":"t","observations":[]},{"name":"b","entityType":"t","observations":["x"]},{"name":"c","entityType":"t","observations":[]}],"relations":[]}"#;
const TIME: &str =
    r#"{"timezone":"Europe/Paris","datetime":"2026-11-25T12:00:00+01:00","is_dst":false}"#;

fn explanation(run: &Run) -> Option<String> {
    run.error().explanation.clone()
}

#[test]
fn missing_key_on_a_tool_result() {
    let run = with_results(
        "const g = await tools.memory.read_graph({});\nreturn g.nodes.map((n: any) => n.name);",
        &[("memory.read_graph", GRAPH)],
    );
    let e = run.error();
    assert_eq!(e.message, "cannot read property 'map' of undefined");
    assert_eq!(
        e.explanation.as_deref(),
        Some(
            "g.nodes is undefined: g is the result of tools.memory.read_graph (line 1), an object \
             with keys entities (array of 3), relations (empty array)"
        )
    );
}

#[test]
fn method_on_the_wrong_type() {
    let run = with_results(
        "const now = 1;\nconst t = await tools.time.get_current_time({ timezone: 'Europe/Paris' });\nconst day = t.split('T')[0];\nday",
        &[("time.get_current_time", TIME)],
    );
    assert_eq!(run.error().message, "not a function");
    assert_eq!(
        explanation(&run).as_deref(),
        Some(
            "t.split is not a function: t is the result of tools.time.get_current_time (line 2), \
             an object with keys timezone (string), datetime (string), is_dst (boolean), not a string"
        )
    );
}

#[test]
fn missing_await() {
    let run = with_results(
        "const r = tools.memory.read_graph({});\nreturn r.entities.length;",
        &[("memory.read_graph", GRAPH)],
    );
    assert_eq!(
        explanation(&run).as_deref(),
        Some(
            "r.entities is undefined: r is the Promise that tools.memory.read_graph (line 1) \
             returned, not its result — add await"
        )
    );
}

#[test]
fn element_of_an_empty_array() {
    let run = with_results(
        "const r = await tools.x.search({});\nconst items = r.items;\n\nreturn items[0].name;",
        &[("x.search", r#"{"items":[],"total":0}"#)],
    );
    assert_eq!(
        explanation(&run).as_deref(),
        Some(
            "items[0] is undefined: items is .items of the result of tools.x.search (line 1), an \
             empty array"
        )
    );
}

#[test]
fn nested_path() {
    let run = with_results(
        "const r = await tools.x.people({});\nreturn r.items[0].name.first;",
        &[(
            "x.people",
            r#"{"items":[{"id":1,"full_name":"A B","tags":["x"]}]}"#,
        )],
    );
    assert_eq!(
        explanation(&run).as_deref(),
        Some(
            "r.items[0].name is undefined: r.items[0] is .items[0] of the result of \
             tools.x.people (line 1), an object with keys id (number), full_name (string), tags \
             (array of 1)"
        )
    );
}

#[test]
fn destructuring_a_missing_key() {
    let run = with_results(
        "const { graph: { nodes } } = await tools.memory.read_graph({});\nnodes",
        &[("memory.read_graph", GRAPH)],
    );
    let e = run.error();
    assert_eq!(e.message, "Cannot convert undefined or null to object");
    assert_eq!(
        e.explanation.as_deref(),
        Some(
            "the destructured graph is undefined: the object it is read from is the result of \
             tools.memory.read_graph (line 1), an object with keys entities (array of 3), \
             relations (empty array)"
        )
    );
}

#[test]
fn iterating_an_object_result() {
    let run = with_results(
        "const g = await tools.memory.read_graph({});\nfor (const e of g) {}",
        &[("memory.read_graph", GRAPH)],
    );
    let e = run.error();
    assert_eq!(e.message, "value is not iterable");
    assert_eq!(
        e.explanation.as_deref(),
        Some(
            "g is not iterable: g is the result of tools.memory.read_graph (line 1), an object \
             with keys entities (array of 3), relations (empty array); its arrays are \
             g.entities, g.relations"
        )
    );
}

#[test]
fn not_a_function_names_the_value_and_what_it_has() {
    // An array method on an object that holds the array.
    assert_eq!(
        explain_run(
            "const g = await tools.memory.read_graph({});\ng.filter((e: any) => e.name);",
            &[("memory.read_graph", GRAPH)],
        )
        .as_deref(),
        Some(
            "g.filter is not a function: g is the result of tools.memory.read_graph (line 1), an \
             object with keys entities (array of 3), relations (empty array), not an array; its \
             arrays are g.entities, g.relations"
        )
    );
    // A method arrays do not have.
    assert_eq!(
        explain_run(
            "const g = await tools.memory.read_graph({});\nconst entities = g.entities;\nentities.get(0);",
            &[("memory.read_graph", GRAPH)],
        )
        .as_deref(),
        Some(
            "entities.get is not a function: entities is .entities of the result of \
             tools.memory.read_graph (line 1), an array of 3 (the first an object with keys name, \
             entityType, observations); arrays have .filter, .map, .find, .forEach, .some, \
             .reduce, .length"
        )
    );
    // A member that is there but is data: what it is.
    assert_eq!(
        explain_run(
            "const g = await tools.memory.read_graph({});\ng.entities();",
            &[("memory.read_graph", GRAPH)],
        )
        .as_deref(),
        Some(
            "g.entities is not a function: g.entities is .entities of the result of \
             tools.memory.read_graph (line 1), an array of 3 (the first an object with keys name, \
             entityType, observations)"
        )
    );
}

#[test]
fn values_of_the_wrong_kind_say_how_to_convert_them() {
    const CONFIG: &str = r#"{"entities":[{"name":"cfg","observations":["{\"port\":8080,\"token\":\"ghp_0123456789abcdefghijABCDEFGHIJ012345\"}"]}]}"#;
    // JSON text read as an object: the keys it holds, never their values.
    let text = explain_run(
        "const r = await tools.memory.open_nodes({ names: ['cfg'] });\nconst o = r.entities[0].observations[0];\nreturn o.port.toFixed(0);",
        &[("memory.open_nodes", CONFIG)],
    )
    .expect("explained");
    assert_eq!(
        text,
        "o.port is undefined: o is .entities[0].observations[0] of the result of \
         tools.memory.open_nodes (line 1), a string, not an object; it is JSON text (an object \
         with keys port, token): JSON.parse(o) first"
    );
    assert!(!text.contains("ghp_") && !text.contains("8080"), "{text}");
    // JSON text of an array used as one.
    assert_eq!(
        explain_run(
            "const s = await tools.x.list({});\ns.map((x: any) => x.id);",
            &[("x.list", r#""[{\"id\":1},{\"id\":2}]""#)],
        )
        .as_deref(),
        Some(
            "s.map is not a function: s is the result of tools.x.list (line 1), a string, not an \
             array; it is JSON text (an array of 2): JSON.parse(s) first"
        )
    );
    // A number written out, used as a number.
    assert_eq!(
        explain_run(
            "const s = await tools.x.total({});\ns.toFixed(2);",
            &[("x.total", r#"" 42.5 ""#)],
        )
        .as_deref(),
        Some(
            "s.toFixed is not a function: s is the result of tools.x.total (line 1), a string, \
             not a number; it is a number written out: Number(s) first"
        )
    );
    // Text that is not JSON: no advice to parse it.
    assert_eq!(
        explain_run(
            "const s = await tools.x.text({});\ns.items.length",
            &[("x.text", r#""{ not json""#)],
        )
        .as_deref(),
        Some(
            "s.items is undefined: s is the result of tools.x.text (line 1), a string, not an object"
        )
    );
}

#[test]
fn unrelated_type_errors_are_not_explained() {
    // A tool result is missing a key the program read, but the error is about another value.
    let run = with_results(
        "const g = await tools.memory.read_graph({});\nconst m = g.missing;\nconst o: any = {};\no.a.b",
        &[("memory.read_graph", GRAPH)],
    );
    assert_eq!(run.error().name.as_deref(), Some("TypeError"));
    assert_eq!(explanation(&run), None);
    // The same key read on a value that is not from a tool, with no read on a tool value.
    let run = with_results(
        "const g = await tools.memory.read_graph({});\nconst o: any = { entities: [] };\no.nodes.map((x: any) => x)",
        &[("memory.read_graph", GRAPH)],
    );
    assert_eq!(explanation(&run), None);
    // No tool at all.
    let e = js("const g = { a: 1 };\ng.nodes.map(x => x)")
        .error()
        .clone();
    assert_eq!(e.explanation, None);
    // Not a TypeError.
    let run = with_results(
        "const g = await tools.memory.read_graph({});\ng.nodes;\nthrow new Error('x')",
        &[("memory.read_graph", GRAPH)],
    );
    assert_eq!(explanation(&run), None);
}

#[test]
fn explanations_never_show_string_values() {
    let secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let json: &'static str = Box::leak(
        format!(r#"{{"token":"{secret}","user":{{"login":"octo","email":"a@b.c"}}}}"#)
            .into_boxed_str(),
    );
    let results: &'static [(&'static str, &'static str)] =
        Box::leak(vec![("auth.whoami", json)].into_boxed_slice());
    let run = with_results(
        "const w = await tools.auth.whoami({});\nreturn w.user.name.toUpperCase();",
        results,
    );
    let text = explanation(&run).expect("explained");
    assert!(text.starts_with("w.user.name is undefined: w.user is .user of the result of tools.auth.whoami (line 1), an object with keys login (string), email (string)"), "{text}");
    assert!(!text.contains("octo") && !text.contains("a@b.c"), "{text}");
    let run = with_results("const w = await tools.auth.whoami({});\nw.nope.x", results);
    let text = explanation(&run).expect("explained");
    assert!(!text.contains(secret) && !text.contains("ghp_"), "{text}");
    assert!(text.contains("token (string)"), "{text}");
}

#[test]
fn long_shapes_are_cut() {
    let keys: Vec<String> = (0..200)
        .map(|i| format!("\"key_number_{i}\":{i}"))
        .collect();
    let json: &'static str = Box::leak(format!("{{{}}}", keys.join(",")).into_boxed_str());
    let results: &'static [(&'static str, &'static str)] =
        Box::leak(vec![("x.wide", json)].into_boxed_slice());
    let run = with_results("const w = await tools.x.wide({});\nw.nope.x", results);
    let text = explanation(&run).expect("explained");
    let shape = text.split_once("(line 1), ").expect("shape").1;
    assert!(shape.len() <= 300, "{} {shape}", shape.len());
    assert!(shape.ends_with("… 200 keys in all"), "{shape}");
}

/// Explaining works from the program's source and the results' text, after the fact: the
/// values the program gets are exactly what `JSON.parse` makes.
#[test]
fn tool_results_are_untouched() {
    let run = with_results(
        r#"
const g = await tools.memory.read_graph({});
const p = tools.memory.read_graph({});
return {
  proto: Object.getPrototypeOf(g) === Object.prototype && Object.getPrototypeOf(g.entities) === Array.prototype,
  promise: Object.getPrototypeOf(p) === Promise.prototype,
  json: JSON.stringify(g) === JSON.stringify(JSON.parse(JSON.stringify(g))),
  keys: Object.keys(g).join(),
};
"#,
        &[("memory.read_graph", GRAPH)],
    );
    assert_eq!(
        run.value(),
        r#"{"proto":true,"promise":true,"json":true,"keys":"entities,relations"}"#
    );
}

#[test]
fn tracking_changes_nothing_a_program_computes() {
    let code = r#"
const g = await tools.memory.read_graph({});
const p = tools.memory.read_graph({});
const seen = [];
for (const e of g.entities) seen.push([e.name, e.missing ?? null, Object.keys(e).length]);
const r = await p;
return { seen, same: JSON.stringify(r) === JSON.stringify(g), proto: Object.getPrototypeOf(r) === Object.prototype, now: Date.now(), rnd: Math.random() };
"#;
    let tracked = with_results(code, &[("memory.read_graph", GRAPH)]);
    let untracked = run_untracked(code, &[("memory.read_graph", GRAPH)]);
    assert_eq!(tracked.value(), untracked.value());
    assert_eq!(tracked.tool_calls(), untracked.tool_calls());
}

/// [`with_results`] with tool results not remembered.
fn run_untracked(code: &str, results: &'static [(&'static str, &'static str)]) -> Run {
    run_tracking(code, false, results)
}

fn run_tracking(
    code: &str,
    tracking: bool,
    results: &'static [(&'static str, &'static str)],
) -> Run {
    run_engine(
        code,
        Language::TypeScript,
        limits(),
        TEST_DETERMINISM,
        SupervisorMessage::Proceed,
        false,
        tracking,
        answering(move |tool, _| {
            let found = results.iter().find(|(t, _)| *t == tool);
            Ok(found.map_or("null", |(_, json)| *json).to_owned())
        }),
    )
}

/// The run-time cost of explanations on a tool-heavy program: 200 calls, each answered with a
/// 20 KB JSON object, the program reading fields and using array methods on each result. The
/// only run-time work left is the bridge remembering each tool's latest result text; runs with
/// it on and off alternate, and the medians are compared (target: ratio ≤ 1.05). Measurement
/// only:
/// `cargo test --release -p airlock-worker --bin airlock-worker provenance_overhead -- --ignored --nocapture`
#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn provenance_overhead() {
    let items: Vec<String> = (0..80)
        .map(|i| {
            format!(
                r#"{{"id":{i},"name":"item number {i}","score":{},"tags":["alpha","beta","gamma"],"owner":{{"login":"user{i}","id":{}}},"description":"{}"}}"#,
                (i * 37) % 100,
                i * 1000,
                "lorem ipsum dolor sit amet ".repeat(4)
            )
        })
        .collect();
    let json: &'static str = Box::leak(
        format!(
            r#"{{"total":80,"next":null,"items":[{}]}}"#,
            items.join(",")
        )
        .into_boxed_str(),
    );
    assert!((19_000..23_000).contains(&json.len()), "{}", json.len());
    let results: &'static [(&'static str, &'static str)] =
        Box::leak(vec![("catalog.list", json)].into_boxed_slice());
    let code = r#"
let sum = 0;
const names = [];
for (let page = 0; page < 200; page++) {
  const r = await tools.catalog.list({ page });
  sum += r.total + r.items.length;
  names.push(r.items[page % 80].name);
  const good = r.items.filter((x) => x.score > 50).map((x) => x.owner.login);
  sum += good.length + (r.next ?? 0);
  for (const it of r.items) sum += it.tags.length;
}
return { sum, n: names.length };
"#;
    let mut on = Vec::new();
    let mut off = Vec::new();
    for round in 0..31 {
        for tracking in [round % 2 == 0, round % 2 != 0] {
            let run = run_engine(
                code,
                Language::JavaScript,
                Limits {
                    max_tool_calls: 1000,
                    timeout_ms: 60_000,
                    ..limits()
                },
                TEST_DETERMINISM,
                SupervisorMessage::Proceed,
                false,
                tracking,
                answering(move |_, _| Ok(results[0].1.to_owned())),
            );
            assert!(run.value().contains("\"n\":200"), "{}", run.value());
            let us = run.stats.run_us;
            if tracking { on.push(us) } else { off.push(us) }
        }
    }
    on.sort_unstable();
    off.sort_unstable();
    let (p50_on, p50_off) = (on[on.len() / 2], off[off.len() / 2]);
    let ratio = p50_on as f64 / p50_off as f64;
    eprintln!(
        "provenance: 200 calls × {} B results, run time p50 on {:.2} ms, off {:.2} ms, ratio {ratio:.3} (on: {on:?}, off: {off:?})",
        json.len(),
        p50_on as f64 / 1000.0,
        p50_off as f64 / 1000.0
    );
}

/// Runs `code` with `results` and returns its error's explanation.
fn explain_run(code: &str, results: &'static [(&'static str, &'static str)]) -> Option<String> {
    let run = with_results(code, results);
    assert_eq!(run.error().name.as_deref(), Some("TypeError"), "{code}");
    explanation(&run)
}

#[test]
fn string_and_number_results() {
    assert_eq!(
        explain_run(
            "const s = await tools.everything.get_sum({ a: 1, b: 2 });\nreturn s.result.value;",
            &[("everything.get_sum", r#""3""#)],
        )
        .as_deref(),
        Some(
            "s.result is undefined: s is the result of tools.everything.get_sum (line 1), a \
             string, not an object"
        )
    );
    assert_eq!(
        explain_run(
            "const log = await tools.x.logs({});\nreturn log.map((l: any) => l);",
            &[("x.logs", r#""a\nb""#)],
        )
        .as_deref(),
        Some(
            "log.map is not a function: log is the result of tools.x.logs (line 1), a string, not an array"
        )
    );
    assert_eq!(
        explain_run(
            "const n = await tools.x.count({});\nn.toUpperCase()",
            &[("x.count", "42")]
        )
        .as_deref(),
        Some(
            "n.toUpperCase is not a function: n is the result of tools.x.count (line 1), a number, not a string; convert it first: String(n)"
        )
    );
    assert_eq!(
        explain_run(
            "const n = await tools.x.nothing({});\nn.x",
            &[("x.nothing", "null")]
        )
        .as_deref(),
        Some("n is null: n is the result of tools.x.nothing (line 1)")
    );
    // A method strings have, called on a string: not this error.
    assert_eq!(
        explain_run(
            "const s = await tools.x.text({});\nconst u = s.toUpperCase();\nu.nope.x",
            &[("x.text", r#""abc""#)],
        ),
        None
    );
}

#[test]
fn promise_all_destructuring() {
    const BOTH: &[(&str, &str)] = &[
        ("memory.read_graph", GRAPH),
        ("time.get_current_time", TIME),
    ];
    assert_eq!(
        explain_run(
            "const [g, t] = await Promise.all([tools.memory.read_graph({}), tools.time.get_current_time({})]);\nreturn t.split('T');",
            BOTH,
        )
        .as_deref(),
        Some(
            "t.split is not a function: t is the result of tools.time.get_current_time (line 1), \
             an object with keys timezone (string), datetime (string), is_dst (boolean), not a string"
        )
    );
    assert_eq!(
        explain_run(
            "const [g, t] = await Promise.all([\n  tools.memory.read_graph({}),\n  tools.time.get_current_time({}),\n]);\nreturn g.nodes.length;",
            BOTH,
        )
        .as_deref(),
        Some(
            "g.nodes is undefined: g is the result of tools.memory.read_graph (line 2), an object \
             with keys entities (array of 3), relations (empty array)"
        )
    );
    // The same tool twice: its latest result may be either's.
    assert_eq!(
        explain_run(
            "const [a, b] = await Promise.all([tools.memory.read_graph({}), tools.memory.read_graph({})]);\nreturn b.nodes.length;",
            BOTH,
        ),
        None
    );
}

#[test]
fn destructured_names_and_members() {
    assert_eq!(
        explain_run(
            "const { nodes } = await tools.memory.read_graph({});\nreturn nodes.length;",
            &[("memory.read_graph", GRAPH)],
        )
        .as_deref(),
        Some(
            "nodes is undefined: the object it is read from is the result of \
             tools.memory.read_graph (line 1), an object with keys entities (array of 3), \
             relations (empty array)"
        )
    );
    let graph_missing = Some(
        "g.graph is undefined: g is the result of tools.memory.read_graph (line 1), an object \
         with keys entities (array of 3), relations (empty array)"
            .to_owned(),
    );
    for code in [
        "const g = await tools.memory.read_graph({});\nconst { name } = g.graph;\nname",
        "const g = await tools.memory.read_graph({});\nconst [first] = g.graph;\nfirst",
        "const g = await tools.memory.read_graph({});\nfor (const e of g.graph) {}",
        "const g = await tools.memory.read_graph({});\nObject.keys(g.graph)",
        "const g = await tools[\"memory\"][\"read_graph\"]({});\ng.graph.length",
    ] {
        assert_eq!(
            explain_run(code, &[("memory.read_graph", GRAPH)]),
            graph_missing,
            "{code}"
        );
    }
    assert_eq!(
        explain_run(
            "const g = await tools.memory.read_graph({});\ng.entities[5].name",
            &[("memory.read_graph", GRAPH)],
        )
        .as_deref(),
        Some(
            "g.entities[5] is undefined: g.entities is .entities of the result of \
             tools.memory.read_graph (line 1), an array of 3 (the first an object with keys name, \
             entityType, observations)"
        )
    );
}

#[test]
fn ambiguous_bindings_are_not_explained() {
    for code in [
        // Reassigned.
        "let g = await tools.memory.read_graph({});\ng = {} as any;\ng.nodes.length",
        // A member assigned: the result may no longer be what the tool sent.
        "const g: any = await tools.memory.read_graph({});\ng.entities = undefined;\ng.entities.length",
        // Two call sites: the latest result may be the other one's.
        "const g = await tools.memory.read_graph({});\nconst h = await tools.memory.read_graph({});\ng.nodes.length",
        // Bound twice.
        "const g = await tools.memory.read_graph({});\n{ const g: any = {}; g.nodes.length; }",
        // The program's own `tools`.
        "const g = await tools.memory.read_graph({});\nfunction f(tools: any) { return tools; }\ng.nodes.length",
        // A default value may have applied.
        "const { graph = undefined } = await tools.memory.read_graph({});\n(graph as any).nodes",
    ] {
        assert_eq!(
            explain_run(code, &[("memory.read_graph", GRAPH)]),
            None,
            "{code}"
        );
    }
}

#[test]
fn loop_elements() {
    const PEOPLE: &str = r#"{"items":[{"id":1,"full_name":"A B","owner":{"login":"a"}},{"id":2,"full_name":"C D","owner":{"login":"c"}}]}"#;
    let results: &'static [(&'static str, &'static str)] = &[("x.people", PEOPLE)];
    assert_eq!(
        explain_run(
            "const r = await tools.x.people({});\nfor (const p of r.items) {\n  console.log(p.name.first);\n}",
            results,
        )
        .as_deref(),
        Some(
            "p.name is undefined: p is an element of .items of the result of tools.x.people \
             (line 1), the first an object with keys id (number), full_name (string), owner (object)"
        )
    );
    assert_eq!(
        explain_run(
            "const r = await tools.x.people({});\nfor (const p of r.items) p.owner.name.trim();",
            results,
        )
        .as_deref(),
        Some(
            "p.owner.name is undefined: p.owner is .owner of an element of .items of the result \
             of tools.x.people (line 1), the first an object with keys login (string)"
        )
    );
    // Only some elements lack the key: which one failed is not known.
    const MIXED: &str = r#"{"items":[{"name":{"first":"a"}},{"id":2}]}"#;
    assert_eq!(
        explain_run(
            "const r = await tools.x.people({});\nfor (const p of r.items) p.name.first.trim();",
            &[("x.people", MIXED)],
        ),
        None
    );
}

#[test]
fn overlapping_calls_of_a_tool_are_not_explained() {
    // One call site, but two calls running at once: which result `r` holds is not known.
    assert_eq!(
        explain_run(
            "const get = async (i: number) => { const r = await tools.memory.read_graph({ i }); return r.nodes.length; };\nawait Promise.all([get(1), get(2)]);",
            &[("memory.read_graph", GRAPH)],
        ),
        None
    );
    // The same site called in sequence (a loop): the latest result is the one that failed.
    assert_eq!(
        explain_run(
            "for (let i = 0; i < 3; i++) {\n  const r = await tools.memory.read_graph({ i });\n  r.nodes.length;\n}",
            &[("memory.read_graph", GRAPH)],
        )
        .as_deref(),
        Some(
            "r.nodes is undefined: r is the result of tools.memory.read_graph (line 2), an object \
             with keys entities (array of 3), relations (empty array)"
        )
    );
}

/// Early errors (ECMAScript's static semantics) are refused as syntax errors at their line.
/// oxc's semantic checks find them before the engine; the engine refuses every one of these
/// too (checked with oxc's checks switched off, 2026-11-27), which is what a program left
/// unchecked would meet.
#[test]
fn early_errors_are_syntax_errors() {
    for code in [
        "let a = 1;\nlet a = 2;",
        "const a = 1;\nvar a = 2;",
        "let x;\n{ var x; }",
        "function f(a, a) {}",
        "l: l: 1;",
        "while (1) { continue m; }",
        "x: { break y; }",
        "let y = 1;\ndelete y;",
        "var eval = 1;",
        "arguments = 1;",
        "var x = 010;",
        "'\\01'",
        "with (a) {}",
        "class A { constructor() {} constructor() {} }",
        "class A { #x; #x; }",
        "class A { m() { return this.#y } }",
        "({ __proto__: 1, __proto__: 2 })",
        "function f() { super.x }",
        "class A { constructor() { super() } }",
        "let let = 1;",
        "function f(a = 1) { 'use strict' }",
        "var yield = 1;",
        "var static = 1;",
        "function* g() { function* h(x = yield) {} }",
        "async function f() { var await; }",
        "/a/gg",
        "for (let x of [], []) {}",
        "1 = 2",
        "++1",
        "a?.b = 1",
        "for (const x in {}) { let x; let x; }",
        "try {} catch (e) { let e; }",
        "new.target",
        "label: function* g() {}",
        "if (1) function f() {}",
        "(a, a) => 1",
        "({ a }) = 1",
        "class A extends B { x = super() }",
        "0++",
        "`${a}`++",
    ] {
        let run = js(code);
        let e = run.error();
        assert_eq!(e.kind, ErrorKind::Syntax, "{code:?}: {e:?}");
        assert!(e.line.is_some(), "{code:?}: {e:?}");
    }
    // In oxc's words, at oxc's position.
    let e = js("let a = 1;\nlet a = 2;").error().clone();
    assert_eq!((e.line, e.column), (Some(2), Some(5)), "{e:?}");
    assert_eq!(
        e.message,
        "Identifier `a` has already been declared; `a` has already been declared here: line 1, column 5"
    );
}
