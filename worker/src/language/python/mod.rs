//! Python programs: pydantic's `monty` interpreter (a subset of Python 3 in Rust, parsed with
//! ruff's parser), the program's host (`host`: `tools`, `print`, `progress`, the clock),
//! values to and from JSON (`values`), the literal tool calls for the contract check
//! (`tool_references`), the explanation of an error on a tool's value (`provenance`) and the
//! allocator that measures what the program holds (`memory`).
//!
//! This folder knows which interpreter runs Python; `main` sees it only as a
//! [`LanguageRuntime`]. It may not touch the lockdown or any file, thread or socket but the
//! lent IPC channel: every effect of a program (a tool call, a line printed, the time) is a
//! pause of the interpreter that the run loop here answers.
//!
//! - [`Interpreter::start`] runs before lockdown: one small program through the interpreter
//!   and the parser, so that their code is paged in and their lazily built tables exist.
//! - [`LanguageRuntime::run`] runs after lockdown, exactly once: find the literal tool calls
//!   and wait for the contract check, compile, then drive the interpreter from pause to
//!   pause. A tool call goes out as it is made and the program gets a future; when every
//!   task of the program awaits one, the loop blocks on the IPC socket for the next
//!   `ToolResult` (or `Cancel`) and hands that one result in, so `asyncio.gather` of several
//!   calls sends them all before the first answer is awaited, as `Promise.all` does.
//!
//! Determinism: the program's clock is the supervisor's ([`airlock_proto::Determinism`],
//! moved by each result); the interpreter has no `random` or `time` module. Its `hash()` of
//! str, bytes and int is SipHash with fixed keys, and dicts and sets iterate in insertion
//! order (dense entry tables), so nothing a program sees depends on a random seed; the
//! interpreter's internal hash maps (ahash, seeded at random) decide only the order of the
//! pending calls it lists to the host, which this loop does not use: results are handed in
//! in the order they arrive, one at a time.

mod host;
mod memory;
mod provenance;
mod tool_references;
mod values;

#[cfg(test)]
mod tests;

use crate::ipc::Ipc;
use crate::language::{self, LanguageRuntime, bytes_text, internal};
use airlock_proto::{
    ErrorKind, ExecError, Language, Limits, Outcome, StartExecution, SupervisorMessage,
    ToolReferences, WorkerMessage, WorkerStats,
};
use host::{CallAnswer, Host, Stop};
use monty::{MontyRun, RunProgress};
use monty_types::{
    CompileOptions, ExcType, ExtFunctionResult, MontyException, MontyObject, PrintWriter,
    ResourceLimits, ResourceTracker,
};
use std::time::{Duration, Instant};

/// The worker's allocator counts what it holds, which the interpreter's memory limit reads.
#[global_allocator]
static ALLOCATOR: memory::Counting = memory::Counting;

/// The file name of the program in tracebacks.
const FILENAME: &str = "main.py";

/// Largest result accepted: the 16 MiB result budget minus room for the `Done` envelope.
const MAX_RESULT_BYTES: usize = 16 * 1024 * 1024 - 64 * 1024;

/// Recursion depth per KiB of `stack_bytes`, and the bounds of the depth: one Python frame
/// for each KiB of the stack limit (the JavaScript engine's unit), at most CPython's default
/// of 1000 and at least 50.
const MIN_RECURSION_DEPTH: usize = 50;
const MAX_RECURSION_DEPTH: usize = 1000;

/// The modules the interpreter has, for the message of a failed import.
const MODULES: &str = "asyncio, base64, binascii, collections, dataclasses, datetime, functools, \
                       itertools, json, math, re, typing, unicodedata, sys, os (no environment) \
                       and pathlib (no files)";

#[derive(Debug, thiserror::Error)]
pub enum InterpreterError {
    #[error("the python warm-up program failed: {0}")]
    WarmUp(String),
}

/// The Python interpreter, started: it holds nothing between programs (each program is
/// compiled and run from scratch), so starting is warming up.
#[derive(Debug)]
pub struct Interpreter;

impl LanguageRuntime for Interpreter {
    type StartError = InterpreterError;

    fn start() -> Result<Interpreter, InterpreterError> {
        warm_up(WARM_UP).map_err(InterpreterError::WarmUp)?;
        // Before lockdown, and once: see `REGEX_WARM_UP`.
        warm_up(REGEX_WARM_UP).map_err(InterpreterError::WarmUp)?;
        Ok(Interpreter)
    }

    fn forked(&self) {
        // Not the regular expression: what it computes once is inherited from the zygote,
        // and compiling one in every forked worker cost each about 1 MiB of memory.
        let _ = warm_up(WARM_UP);
    }

    fn runs(language: Language) -> bool {
        language == Language::Python
    }

    fn run(self, start: StartExecution, ipc: &mut Ipc) -> (Outcome, WorkerStats) {
        let mut stats = WorkerStats::default();
        let outcome = match execute(start, ipc, &mut stats) {
            Ok(value_json) => Outcome::Ok { value_json },
            Err(error) => Outcome::Error(error),
        };
        (outcome, stats)
    }
}

/// A program that touches what a first real program would: the parser, the compiler, a
/// name lookup, an awaited host call, a dict, an f-string.
const WARM_UP: &str = "import asyncio\nx = await asyncio.gather(f(1))\nd = {'a': [1, 2.5, 'x'], 'n': None}\nf'{d} {x}'";

/// A regular expression, run before lockdown for the lockdown's sake: the regex engine sizes
/// its cache pool from `available_parallelism` once, lazily, which asks the kernel with
/// `sched_getaffinity`, a system call the worker's filter does not allow (it killed the first
/// `re.match` after lockdown). Asked here, the answer is kept for the life of the process,
/// and a worker forked from the zygote inherits it.
const REGEX_WARM_UP: &str = "import re\nre.match(r'a-(1)', 'a-1').group(1)";

/// Runs `code` through the interpreter (and the tool-call finder), answering its host
/// calls with `1`.
fn warm_up(code: &str) -> Result<(), String> {
    let _ = tool_references::find("await tools.a.b(k=1, s='x')");
    let run = MontyRun::new(
        code.to_owned(),
        FILENAME,
        Vec::new(),
        CompileOptions::default(),
    )
    .map_err(|e| e.summary())?;
    let mut progress = run
        .start(
            Vec::new(),
            ResourceTracker::default(),
            PrintWriter::Disabled,
        )
        .map_err(|e| e.summary())?;
    loop {
        progress = match progress {
            RunProgress::Complete(_) => return Ok(()),
            RunProgress::NameLookup(lookup) => {
                let name = lookup.name.clone();
                lookup.resume(
                    MontyObject::Function {
                        name,
                        docstring: None,
                    },
                    PrintWriter::Disabled,
                )
            }
            RunProgress::FunctionCall(call) => call.resume_pending(PrintWriter::Disabled),
            RunProgress::ResolveFutures(state) => {
                let ids = state.pending_call_ids().to_vec();
                state.resume(
                    ids.into_iter()
                        .map(|id| (id, ExtFunctionResult::Return(MontyObject::Int(1))))
                        .collect(),
                    PrintWriter::Disabled,
                )
            }
            RunProgress::OsCall(call) => {
                return Err(format!("os call {}", call.function_call.name()));
            }
        }
        .map_err(|e| e.summary())?;
    }
}

/// What the program fails with, and where in the run.
enum Failure {
    /// The interpreter raised (or was aborted with) this exception.
    Raised(MontyException),
    /// Already an error of the protocol's kinds.
    Exec(ExecError),
}

fn execute(
    start: StartExecution,
    ipc: &mut Ipc,
    stats: &mut WorkerStats,
) -> Result<String, ExecError> {
    let started = Instant::now();
    let limits = start.limits;
    let deadline = started + Duration::from_millis(limits.timeout_ms);
    let references = tool_references::find(&start.code);
    let code = start.code;
    let compiled = MontyRun::new(
        code.clone(),
        FILENAME,
        Vec::new(),
        CompileOptions::default(),
    );
    stats.compile_us = micros(started.elapsed());
    let run = compiled.map_err(|e| classify_compile(&e))?;

    let mut host = Host::new(ipc, limits, &start.determinism, deadline);
    if let Some(references) = references {
        host.know_call_sites(&references);
        await_contract_check(&mut host, references)?;
    }

    let run_started = Instant::now();
    let result = drive(run, &mut host, &limits, start.report_idle);
    stats.run_us = micros(run_started.elapsed());
    host.flush_console();
    match result {
        Ok(value) => match host.stop_reason() {
            // A stop the program outlived (it caught what was raised) still ends it.
            Some(_) => Err(stop_error(&host)),
            None => {
                host.warn_never_awaited();
                convert_result(&value)
            }
        },
        Err(Failure::Exec(e)) => Err(e),
        Err(Failure::Raised(e)) => {
            let mut error = classify(&e, &host);
            if error.kind == ErrorKind::Runtime {
                error.explanation = provenance::explain(&code, &e, &host.results);
            }
            Err(error)
        }
    }
}

/// Hands the program's literal tool calls to the supervisor and waits for its verdict before
/// anything of the program runs ([`language::contract_verdict`]).
fn await_contract_check(host: &mut Host<'_>, references: ToolReferences) -> Result<(), ExecError> {
    let sent = host.ipc.send(&WorkerMessage::ToolReferences(references));
    if language::contract_verdict(sent, || host.ipc.recv())? {
        return Ok(());
    }
    Err(if host.deadline_passed() {
        host.set_stop(Stop::Timeout);
        stop_error(host)
    } else {
        language::cancelled_before_run()
    })
}

/// The interpreter's limits for this program.
fn resource_limits(limits: &Limits) -> ResourceLimits {
    let depth = usize::try_from(limits.stack_bytes / 1024)
        .unwrap_or(usize::MAX)
        .clamp(MIN_RECURSION_DEPTH, MAX_RECURSION_DEPTH);
    ResourceLimits {
        // Counted while the interpreter runs (not while it waits for tools); the wall-clock
        // deadline is the host's checkpoint and the supervisor's Cancel.
        max_duration: Some(Duration::from_millis(limits.timeout_ms)),
        max_memory: Some(usize::try_from(limits.memory_bytes.max(1)).unwrap_or(usize::MAX)),
        gc_interval: None,
        max_recursion_depth: depth,
        // Every pause is a name, a call or a wait the host answers; the tool-call cap and
        // the deadline bound them, not a count of pauses.
        max_suspensions: usize::MAX,
    }
}

/// Runs the program from pause to pause until it completes.
fn drive(
    run: MontyRun,
    host: &mut Host<'_>,
    limits: &Limits,
    report_idle: bool,
) -> Result<MontyObject, Failure> {
    // `ToolResult`s received, for `Idle`.
    let mut results: u32 = 0;
    memory::arm();
    let tracker = ResourceTracker::new(resource_limits(limits));
    let mut progress = run
        .start(Vec::new(), tracker, PrintWriter::Callback(host))
        .map_err(Failure::Raised)?;
    loop {
        let stop = host.should_stop();
        let next = match progress {
            RunProgress::Complete(value) => return Ok(value),
            _ if stop => abort(progress),
            RunProgress::NameLookup(lookup) => {
                let answer = host.lookup(&lookup.name, lookup.object_id());
                lookup.resume(answer, PrintWriter::Callback(host))
            }
            RunProgress::FunctionCall(call) => {
                let answer = host.call(
                    &call.function_name,
                    call.object_id,
                    &call.args,
                    &call.kwargs,
                    call.call_id,
                );
                match answer {
                    CallAnswer::Pending => call.resume_pending(PrintWriter::Callback(host)),
                    CallAnswer::Return(value) => call.resume(value, PrintWriter::Callback(host)),
                    CallAnswer::Raise(e) => {
                        call.resume(ExtFunctionResult::Error(e), PrintWriter::Callback(host))
                    }
                }
            }
            RunProgress::OsCall(call) => {
                let answer = host.os_call(&call.function_call);
                call.resume(answer, PrintWriter::Callback(host))
            }
            RunProgress::ResolveFutures(state) => {
                if host.pending.is_empty() {
                    return Err(Failure::Exec(deadlock()));
                }
                host.flush_console();
                if report_idle && let Err(e) = host.ipc.send(&WorkerMessage::Idle { results }) {
                    host.set_stop(Stop::Ipc(e.to_string()));
                    progress = RunProgress::ResolveFutures(state);
                    continue;
                }
                match host.ipc.recv() {
                    Ok(SupervisorMessage::ToolResult {
                        id,
                        result,
                        clock_ms,
                    }) => {
                        results = results.saturating_add(1);
                        match host.settle(id, result, clock_ms) {
                            Some(answer) => state.resume(vec![answer], PrintWriter::Callback(host)),
                            // Unknown or repeated ids answer nothing.
                            None => Ok(RunProgress::ResolveFutures(state)),
                        }
                    }
                    Ok(SupervisorMessage::Cancel) => {
                        // A cancel after the deadline is the supervisor enforcing it.
                        host.set_stop(if host.deadline_passed() {
                            Stop::Timeout
                        } else {
                            Stop::Cancelled
                        });
                        Ok(RunProgress::ResolveFutures(state))
                    }
                    Ok(SupervisorMessage::Start(_)) => {
                        return Err(Failure::Exec(internal(
                            "the supervisor sent a second Start message",
                        )));
                    }
                    Ok(SupervisorMessage::Proceed) => {
                        return Err(Failure::Exec(internal(
                            "the supervisor sent Proceed while the program was running",
                        )));
                    }
                    Err(e) => {
                        host.set_stop(Stop::Ipc(e.to_string()));
                        Ok(RunProgress::ResolveFutures(state))
                    }
                }
            }
        };
        progress = next.map_err(Failure::Raised)?;
    }
}

/// Ends the program where it paused, with an exception it cannot catch.
fn abort(progress: RunProgress) -> Result<RunProgress, MontyException> {
    let exc = host::stopping();
    let print = PrintWriter::Disabled;
    match progress {
        RunProgress::NameLookup(p) => p.abort(exc, print),
        RunProgress::FunctionCall(p) => p.abort(exc, print),
        RunProgress::OsCall(p) => p.abort(exc, print),
        RunProgress::ResolveFutures(p) => p.abort(exc, print),
        RunProgress::Complete(value) => Ok(RunProgress::Complete(value)),
    }
}

fn convert_result(value: &MontyObject) -> Result<String, ExecError> {
    if let MontyObject::Function { .. } | MontyObject::BuiltinFunction(_) = value {
        return Err(ExecError::new(
            ErrorKind::ResultNotJson,
            "the program's result is a function, which has no JSON form; return data (dicts, \
             lists, str, int, float, bool or None)",
        ));
    }
    let text = values::to_json(value).map_err(|e| {
        ExecError::new(
            ErrorKind::ResultNotJson,
            format!("the program's result: {e}"),
        )
    })?;
    if text.len() > MAX_RESULT_BYTES {
        return Err(ExecError::new(
            ErrorKind::ResultNotJson,
            format!(
                "the program's result is {} bytes of JSON, over the 16 MiB limit; return less \
                 data (filter or summarise it)",
                text.len()
            ),
        ));
    }
    Ok(text)
}

/// A program the interpreter would not compile.
fn classify_compile(e: &MontyException) -> ExecError {
    let mut error = base_error(e, ErrorKind::Syntax);
    if e.exc_type() != ExcType::SyntaxError {
        // Something monty does not implement (a feature of Python it lacks), found while
        // compiling: the message says what.
        error.kind = ErrorKind::Syntax;
        error.message = format!(
            "{}; monty runs a subset of Python 3: rewrite this part with what it supports",
            error.message
        );
    }
    error
}

/// An exception that ended the program.
fn classify(e: &MontyException, host: &Host<'_>) -> ExecError {
    if host.stop_reason().is_some() {
        let mut error = stop_error(host);
        (error.line, error.column) = position(e);
        return error;
    }
    let message = e.message().unwrap_or_default();
    match e.exc_type() {
        ExcType::TimeoutError if message.starts_with("time limit exceeded") => {
            let mut error = base_error(e, ErrorKind::Timeout);
            error.message = timeout_message(&host.limits);
            error
        }
        ExcType::MemoryError => {
            let mut error = base_error(e, ErrorKind::MemoryLimit);
            error.message = format!(
                "the program exceeded its {} memory limit ({message}); process the data in \
                 smaller pieces (the limit is the policy's limits.memory, which only the \
                 operator can raise)",
                bytes_text(host.limits.memory_bytes)
            );
            error
        }
        ExcType::RecursionError => {
            let mut error = base_error(e, ErrorKind::StackOverflow);
            error.message = format!(
                "maximum recursion depth exceeded ({} levels, from the {} stack limit); \
                 recursion is too deep: use a loop (the limit is the policy's limits.stack, \
                 which only the operator can raise)",
                resource_limits(&host.limits).max_recursion_depth,
                bytes_text(host.limits.stack_bytes)
            );
            error
        }
        ExcType::ModuleNotFoundError | ExcType::ImportError
            if message.contains("'time'") && !message.contains("datetime") =>
        {
            let mut error = base_error(e, ErrorKind::Runtime);
            error.message = format!(
                "{message}; there is no time module: a program cannot sleep (no time.sleep) \
                 or wait for anything but its tool calls, and reads the clock with \
                 `datetime.now()` (from datetime import datetime)"
            );
            error
        }
        ExcType::ModuleNotFoundError | ExcType::ImportError => {
            let mut error = base_error(e, ErrorKind::Runtime);
            error.message = format!(
                "{message}; the sandbox's Python (monty) has these modules: {MODULES}. There is \
                 no network, file or process access: call tools (`await tools.<namespace>.<tool>(…)`) \
                 for data from outside"
            );
            error
        }
        ExcType::RuntimeError => {
            let mut error = base_error(e, ErrorKind::Runtime);
            if let Some((_, tool, tool_message)) = host
                .failures
                .iter()
                .rev()
                .find(|(text, _, _)| text == message)
            {
                error.name = Some("ToolError".to_owned());
                error.message = format!("{tool}: {tool_message}");
            }
            if host.call_limit_hit() && error.name.as_deref() == Some("ToolError") {
                error.kind = ErrorKind::ToolCallLimit;
                error.message = format!(
                    "the program started more than {} tool calls (max_tool_calls); {}",
                    host.limits.max_tool_calls, error.message
                );
            }
            error
        }
        ExcType::NameError if host_name_hint(message).is_some() => {
            let mut error = base_error(e, ErrorKind::Runtime);
            error.message = format!("{message}; {}", host_name_hint(message).unwrap_or_default());
            error
        }
        ExcType::AttributeError if javascript_habit(message).is_some() => {
            let mut error = base_error(e, ErrorKind::Runtime);
            error.message = format!(
                "{message}; {}",
                javascript_habit(message).unwrap_or_default()
            );
            error
        }
        ExcType::AttributeError if partial_module(message).is_some() => {
            let mut error = base_error(e, ErrorKind::Runtime);
            error.message = format!("{message}; {}", partial_module(message).unwrap_or_default());
            error
        }
        ExcType::AttributeError if tool_error_attribute(message) => {
            let mut error = base_error(e, ErrorKind::Runtime);
            error.message = format!(
                "{message}; a failed tool call raises RuntimeError, whose only field is its \
                 text: read str(e), which holds the tool, the message, `code: …` and `hint: …`"
            );
            error
        }
        _ => base_error(e, ErrorKind::Runtime),
    }
}

/// What Python writes for a JavaScript member a list, str or dict does not have.
fn javascript_habit(message: &str) -> Option<&'static str> {
    let rest = message.strip_prefix('\'')?;
    let (ty, attr) = rest.split_once("' object has no attribute ")?;
    if !matches!(ty, "list" | "str" | "dict" | "tuple") {
        return None;
    }
    Some(match (ty, attr.trim_matches('\'')) {
        (_, "length") => "Python writes len(x) for the length",
        ("list", "push") => "Python writes x.append(value)",
        ("list" | "tuple", "map" | "forEach" | "flatMap") => {
            "Python writes a comprehension: [f(v) for v in x]"
        }
        ("list" | "tuple", "filter") => "Python writes a comprehension: [v for v in x if …]",
        ("list" | "tuple", "find") => "Python writes next((v for v in x if …), None)",
        ("list" | "tuple" | "str", "includes") => "Python writes `value in x`",
        ("list" | "tuple", "join") => "Python writes \", \".join(x) (of str items)",
        ("str", "toLowerCase") => "Python writes x.lower()",
        ("str", "toUpperCase") => "Python writes x.upper()",
        ("str", "trim") => "Python writes x.strip()",
        ("str", "startsWith") => "Python writes x.startswith(…)",
        ("str", "endsWith") => "Python writes x.endswith(…)",
        ("str" | "list", "indexOf") => "Python writes x.index(…) (str: x.find(…))",
        ("dict", "hasOwnProperty") => "Python writes `key in x`",
        _ => return None,
    })
}

/// `e.code`, `e.hint`, `e.message` on a caught tool failure (a RuntimeError).
fn tool_error_attribute(message: &str) -> bool {
    ["'code'", "'hint'", "'message'", "'tool'", "'status'"]
        .iter()
        .any(|attr| {
            message.strip_prefix("'RuntimeError' object has no attribute ") == Some(attr)
                || message.strip_prefix("'Exception' object has no attribute ") == Some(attr)
        })
}

/// What to write instead of a JavaScript-ism the program used.
fn host_name_hint(message: &str) -> Option<&'static str> {
    if message.contains("'ToolError'") {
        Some(
            "there is no ToolError class in Python here: a failed tool call raises RuntimeError; \
             write `except RuntimeError as e` (or `except Exception as e`) and read str(e), \
             which holds the tool, the message, `code: …` and `hint: …`",
        )
    } else if message.contains("'JSON'") {
        Some(
            "Python parses JSON text with the json module: `import json`, then json.loads(text) (json.dumps(value) for text)",
        )
    } else if message.contains("'Math'") {
        Some(
            "Python's math functions are in the math module (`import math`) and builtins (min, max, round, abs)",
        )
    } else if message.contains("'undefined'") {
        Some("Python writes None")
    } else if message.contains("'Promise'") {
        Some("to run calls together, write `await asyncio.gather(tools.a.b(…), tools.c.d(…))`")
    } else if message.contains("'setTimeout'") || message.contains("'setInterval'") {
        Some("there are no timers: a program waits only for its tool calls")
    } else if message.contains("'require'") {
        Some(
            "there are no packages to load: use the modules monty has (import json, …) and call tools",
        )
    } else if message.contains("'console'") {
        Some("print() writes to the console in Python")
    } else if message.contains("'fetch'") || message.contains("'open'") {
        Some("there is no network or file access: call tools")
    } else if message.contains("'true'")
        || message.contains("'false'")
        || message.contains("'null'")
    {
        Some("Python writes True, False and None")
    } else {
        missing_builtin(message)
    }
}

/// What to write instead of a builtin of CPython's that the interpreter does not have.
fn missing_builtin(message: &str) -> Option<&'static str> {
    let name = message
        .strip_prefix("name '")?
        .strip_suffix("' is not defined")?;
    Some(match name {
        "eval" | "exec" | "compile" | "__import__" => {
            "the sandbox's Python (monty) cannot run code from text or import at run time:              write the code itself, and import the modules it has at the top (import json, …)"
        }
        "globals" | "locals" | "vars" | "__builtins__" => {
            "the sandbox's Python (monty) has no view of the program's own namespace: keep              the values in a dict of your own"
        }
        "input" | "breakpoint" | "help" => {
            "a program cannot wait for a person: data comes from tool calls, and what it              prints goes back with the result"
        }
        "exit" | "quit" => {
            "end the program with its last expression (that is the result), or raise an              exception to end it with an error"
        }
        "memoryview" | "bytearray" | "frozenset" | "complex" | "classmethod" | "staticmethod"
        | "property" | "super" | "issubclass" | "delattr" | "iter" | "aiter" | "anext"
        | "callable" | "format" | "ascii" | "slice" | "object" => {
            "this builtin of CPython's is not in the sandbox's Python (monty), a subset of              Python 3: write it with the builtins, types and modules it has              (docs/agent-api.md, \"Python\")"
        }
        _ => return None,
    })
}

/// What to write instead of a member a module of the interpreter's does not have: its
/// modules are partial.
fn partial_module(message: &str) -> Option<String> {
    let rest = message.strip_prefix("module '")?;
    let (module, attr) = rest.split_once("' has no attribute ")?;
    let attr = attr.trim_matches('\'');
    Some(match (module, attr) {
        ("sys", "exit") | ("os", "_exit") => {
            "end the program with its last expression (that is the result), or raise an              exception to end it with an error"
                .to_owned()
        }
        ("os", "system" | "popen" | "spawnv" | "fork" | "execv" | "kill") => {
            "there are no processes in the sandbox: call tools for work outside".to_owned()
        }
        _ => format!(
            "the sandbox's Python (monty) implements part of the `{module}` module, and not              `{attr}`: write it with what the module has, or with builtins"
        ),
    })
}

/// The error of `e` with its name, message, innermost position and traceback.
fn base_error(e: &MontyException, kind: ErrorKind) -> ExecError {
    let mut error = ExecError::new(kind, e.message().unwrap_or_default());
    error.name = Some(e.exc_type().to_string());
    (error.line, error.column) = position(e);
    if !e.traceback().is_empty() {
        error.stack = Some(e.to_string());
    }
    error
}

/// The innermost frame's position.
fn position(e: &MontyException) -> (Option<u32>, Option<u32>) {
    match e.traceback().last() {
        Some(frame) => (Some(frame.start.line), Some(frame.start.column)),
        None => (None, None),
    }
}

/// The error for a stop reason (timeout, cancel, output limit, broken channel).
fn stop_error(host: &Host<'_>) -> ExecError {
    let limits = &host.limits;
    let (kind, message) = match host.stop_reason() {
        Some(Stop::Timeout) | None => (ErrorKind::Timeout, timeout_message(limits)),
        Some(Stop::Cancelled) => (
            ErrorKind::Cancelled,
            "the execution was cancelled".to_owned(),
        ),
        Some(Stop::OutputLimit) => (
            ErrorKind::OutputLimit,
            format!(
                "console output exceeded the {}-byte limit; print less, or return data as the \
                 result",
                limits.max_output_bytes
            ),
        ),
        Some(Stop::Ipc(e)) => (
            ErrorKind::Internal,
            format!("the supervisor channel failed: {e}"),
        ),
    };
    ExecError::new(kind, message)
}

fn timeout_message(limits: &Limits) -> String {
    format!(
        "the program ran past its {} ms deadline; break the work up into smaller executions, \
         or raise timeout_ms",
        limits.timeout_ms
    )
}

fn deadlock() -> ExecError {
    ExecError::new(
        ErrorKind::Deadlock,
        "the program awaits something that can never finish: no tool call is pending",
    )
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
