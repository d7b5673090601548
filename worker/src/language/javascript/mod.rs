//! JavaScript and TypeScript programs: the QuickJS engine (through `rquickjs`), the bridge to
//! the supervisor (`bridge`: `tools`, `console`, `progress`), the program's clock and
//! randomness from the supervisor (`determinism`: `Date`, `Math.random`, `crypto`,
//! `performance`), TypeScript stripping with oxc (`typescript`) and the literal tool calls for
//! the contract check (`tool_references`).
//!
//! This is the one folder that knows which engine runs programs (design §3); the worker's
//! `main` sees it only as a [`LanguageRuntime`]. It may not touch the lockdown or any file,
//! thread or socket but the lent IPC channel.
//!
//! - [`Engine::new`] runs before lockdown. It creates the runtime and one context with the
//!   standard ECMAScript built-ins only (no module loader, no `std`/`os` modules, no timers),
//!   evaluates the prelude (`prelude.js`) that installs `console`, `progress`, `tools`,
//!   `ToolError` and `crypto` and replaces `Date`, `Math.random` and `performance`, and
//!   evaluates one `new Date().toString()` so glibc loads the time zone while files can still
//!   be opened. The clock and seed the replacements read arrive with `Start`; until then
//!   they are the epoch and a zero seed (only the warm-up runs then).
//! - [`LanguageRuntime::run`] runs after lockdown, exactly once. It strips types
//!   ([`typescript`]), applies the limits, evaluates the program, then pumps the job
//!   queue: run every pending job (checking the deadline between jobs); when none is left,
//!   look at the program's promise; if it is still pending and tool calls are outstanding,
//!   block on the IPC socket for the next `ToolResult` (or `Cancel`; a result's `clock_ms`
//!   moves the program's clock before its promise settles; when `Start` asked for it, an
//!   `Idle` message with the number of results received goes first); if nothing is
//!   outstanding, the program can never finish (deadlock).
//!
//! Inside `run` nothing opens files, spawns threads or writes to stdout/stderr: the seccomp
//! filter allows only the IPC socket, memory management, clocks and futexes.

mod bridge;
mod determinism;
mod heap_bytes;
mod provenance;
mod result_value;
mod tool_references;
mod typescript;

#[cfg(test)]
mod fuzz;

use crate::ipc::Ipc;
use crate::language::{self, LanguageRuntime, bytes_text, internal};
use airlock_proto::{
    Determinism, ErrorKind, ExecError, Language, Limits, Outcome, StartExecution,
    SupervisorMessage, ToolReferences, WorkerMessage, WorkerStats,
};
use bridge::{Bridge, Hooks, Stop};
use heap_bytes::{CountingAllocator, HeapBytes};
use rquickjs::context::EvalOptions;
use rquickjs::promise::PromiseState;
use rquickjs::{Context, Ctx, Function, Object, Persistent, Promise, Runtime, Value, qjs};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The prelude: JavaScript that builds the sandbox's globals on top of the natives.
/// The prelude's source; workers load the bytecode build.rs made from it.
#[cfg(test)]
const PRELUDE: &str = include_str!("prelude.js");

/// Largest result accepted: the 16 MiB result budget minus room for the `Done` envelope.
pub const MAX_RESULT_BYTES: usize = 16 * 1024 * 1024 - 64 * 1024;

/// QuickJS's stack limit is clamped into this range: 0 would disable the check, and the
/// worker's main thread has 8 MiB, part of which Rust and the engine's C code need.
const MIN_STACK_BYTES: u64 = 64 * 1024;
const MAX_STACK_BYTES: u64 = 6 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot create the javascript runtime: {0}")]
    Runtime(rquickjs::Error),
    #[error("the engine prelude failed: {0}")]
    Prelude(String),
}

/// A QuickJS runtime with the sandbox's globals installed, ready to run one program.
pub struct Engine {
    bridge: Rc<Bridge>,
    context: Context,
    runtime: Runtime,
    /// What the runtime holds from `malloc` (`stats.heap_used_bytes`).
    heap: HeapBytes,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Persistent handles must go before the runtime is freed (QuickJS asserts that no
        // object outlives it); the natives' own `Rc<Bridge>` clones die with the runtime.
        self.bridge.release_js();
    }
}

impl LanguageRuntime for Engine {
    type StartError = EngineError;

    fn start() -> Result<Engine, EngineError> {
        Engine::new()
    }

    fn runs(language: Language) -> bool {
        matches!(language, Language::JavaScript | Language::TypeScript)
    }

    fn forked(&self) {
        // The TypeScript pipeline, an evaluation, and a collection that visits every object
        // of the heap (its first write to each page copies it from the zygote). The program
        // sees none of it: the value is dropped, the garbage collected, and its clock and
        // random numbers are set from `Start` later.
        warm_up_typescript();
        self.context.with(|ctx| {
            let _ = ctx.eval::<(), _>("void [1, 2].map((x) => x + 1).join();");
        });
        self.runtime.run_gc();
    }

    fn run(self, start: StartExecution, ipc: &mut Ipc) -> (Outcome, WorkerStats) {
        let started = Instant::now();
        let mut stats = WorkerStats::default();
        let bridge = Rc::clone(&self.bridge);
        let outcome = bridge
            .ipc
            .lend(ipc, || match self.execute(&start, started, &mut stats) {
                Ok(value_json) => Outcome::Ok { value_json },
                Err(error) => Outcome::Error(error),
            });
        if cfg!(test) {
            drop(self);
        } else {
            // The process exits right after `Done`; freeing every object first would only
            // delay the answer.
            std::mem::forget(self);
        }
        (outcome, stats)
    }
}

/// Pages in the TypeScript pipeline (parser, transformer, code generator) while waiting in the
/// pool costs nothing: the first real program then compiles in ~10 µs instead of ~100-200 µs.
fn warm_up_typescript() {
    let _ = typescript::prepare_program(
        "const warm: number = [1].map((x: number) => x + 1)[0]!;\nwarm",
        Language::TypeScript,
    );
}

/// Where an exception surfaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Evaluating the script: before the program's first statement runs, so a `SyntaxError`
    /// here is QuickJS rejecting the code.
    Compile,
    /// The program is running.
    Run,
    /// Serialising the program's value.
    Result,
}

impl Engine {
    /// Creates the runtime and installs the sandbox globals. Runs before lockdown.
    pub fn new() -> Result<Engine, EngineError> {
        let heap = HeapBytes::default();
        let runtime = Runtime::new_with_alloc(CountingAllocator(heap.clone()))
            .map_err(EngineError::Runtime)?;
        let context = Context::full(&runtime).map_err(EngineError::Runtime)?;
        let bridge = Rc::new(Bridge::default());
        let engine = Engine {
            bridge,
            context,
            runtime,
            heap,
        };
        let hooks = engine
            .context
            .with(|ctx| install_prelude(&ctx, &engine.bridge))
            .map_err(EngineError::Prelude)?;
        engine.bridge.set_hooks(hooks);
        // glibc reads the time zone (zoneinfo) on the first local-time conversion; do it now,
        // while files can still be opened, so `Date` never needs a file syscall later.
        engine
            .context
            .with(|ctx| {
                ctx.eval::<(), _>("new Date().toString(); new Date(0).getTimezoneOffset();")
            })
            .map_err(|e| EngineError::Prelude(format!("date warm-up failed: {e}")))?;
        warm_up_typescript();
        Ok(engine)
    }

    fn execute(
        &self,
        start: &StartExecution,
        started: Instant,
        stats: &mut WorkerStats,
    ) -> Result<String, ExecError> {
        let prepared = typescript::prepare_program(&start.code, start.language);
        stats.compile_us = micros(started.elapsed());
        let prepared = prepared?;

        self.configure(
            &start.limits,
            &start.determinism,
            started,
            prepared.positions,
            prepared.filename,
        );
        self.bridge.report_positions(start.report_idle);
        self.bridge.set_source(&start.code, start.language);
        if let Some(references) = prepared.tool_references {
            self.await_contract_check(references)?;
        }
        let run_started = Instant::now();
        let result = self.evaluate(&prepared.script, prepared.filename, start.report_idle);
        stats.run_us = micros(run_started.elapsed());
        stats.heap_used_bytes = u64::try_from(self.heap.get()).unwrap_or(u64::MAX);
        result
    }

    fn configure(
        &self,
        limits: &Limits,
        determinism: &Determinism,
        started: Instant,
        positions: typescript::PositionMap,
        filename: &'static str,
    ) {
        let deadline = started + Duration::from_millis(limits.timeout_ms);
        self.bridge
            .begin(*limits, determinism, deadline, positions, filename);

        // 0 would mean "unlimited" to QuickJS: fail closed instead.
        let memory = usize::try_from(limits.memory_bytes.max(1)).unwrap_or(usize::MAX);
        self.runtime.set_memory_limit(memory);
        // Cycles are collected when allocation grows past the threshold; keep it well under
        // the limit so garbage cycles never cause an out-of-memory error on their own.
        self.runtime
            .set_gc_threshold((memory / 4).clamp(256 * 1024, 8 * 1024 * 1024));
        // SAFETY: the runtime pointer is live for as long as `self.context`; updating the
        // stack top only re-reads the current stack pointer, so QuickJS measures recursion
        // from this thread's stack (the one `run` executes on) rather than `new`'s.
        unsafe { qjs::JS_UpdateStackTop(self.context.get_runtime_ptr()) };
        let stack = limits.stack_bytes.clamp(MIN_STACK_BYTES, MAX_STACK_BYTES);
        self.runtime
            .set_max_stack_size(usize::try_from(stack).unwrap_or(usize::MAX));

        let bridge = Rc::clone(&self.bridge);
        self.runtime
            .set_interrupt_handler(Some(Box::new(move || bridge.should_interrupt())));
        let bridge = Rc::clone(&self.bridge);
        self.runtime
            .set_host_promise_rejection_tracker(Some(Box::new(move |ctx, _promise, reason, _| {
                bridge.note_rejection(&ctx, &reason)
            })));
    }

    /// Hands the program's literal tool calls to the supervisor and waits for its verdict
    /// before anything of the program runs ([`language::contract_verdict`]).
    fn await_contract_check(&self, references: ToolReferences) -> Result<(), ExecError> {
        let sent = self
            .bridge
            .ipc
            .send(&WorkerMessage::ToolReferences(references));
        if language::contract_verdict(sent, || self.bridge.ipc.recv())? {
            return Ok(());
        }
        Err(if self.bridge.deadline_passed() {
            self.stop_error(None)
        } else {
            language::cancelled_before_run()
        })
    }

    /// Evaluates the script and pumps jobs and tool results until the program settles. With
    /// `report_idle`, each wait for the supervisor is announced ([`WorkerMessage::Idle`]).
    fn evaluate(
        &self,
        script: &str,
        filename: &'static str,
        report_idle: bool,
    ) -> Result<String, ExecError> {
        let main = self
            .context
            .with(|ctx| -> Result<Persistent<Promise<'static>>, ExecError> {
                let mut options = EvalOptions::default();
                options.global = true;
                options.strict = true;
                options.filename = Some(filename.to_owned());
                match ctx.eval_with_options::<Value, _>(script, options) {
                    Ok(value) => match value.into_promise() {
                        Some(promise) => Ok(Persistent::save(&ctx, promise)),
                        None => Err(internal("the program wrapper did not produce a promise")),
                    },
                    Err(rquickjs::Error::Exception) => {
                        Err(self.classify(&ctx, ctx.catch(), Phase::Compile))
                    }
                    Err(rquickjs::Error::InvalidString(_)) => Err(ExecError::new(
                        ErrorKind::Syntax,
                        "the program contains a NUL character outside a string literal",
                    )),
                    Err(e) => Err(internal(format!("evaluation failed: {e}"))),
                }
            });
        let main = main.map_err(|e| self.finish_error(e))?;
        // `ToolResult`s received, for `Idle`: it tells the supervisor which answers were seen.
        let mut results: u32 = 0;

        loop {
            if self.bridge.should_interrupt() {
                return Err(self.finish_error(self.stop_error(None)));
            }
            match self.runtime.execute_pending_job() {
                Ok(true) => continue,
                Ok(false) => {}
                Err(job) => {
                    let error = job
                        .0
                        .with(|ctx| self.classify(&ctx, ctx.catch(), Phase::Run));
                    return Err(self.finish_error(error));
                }
            }

            let settled = self
                .context
                .with(|ctx| -> Option<Result<String, ExecError>> {
                    let promise = match main.clone().restore(&ctx) {
                        Ok(p) => p,
                        Err(e) => {
                            return Some(Err(internal(format!("lost the program's promise: {e}"))));
                        }
                    };
                    match promise.state() {
                        PromiseState::Pending => None,
                        PromiseState::Resolved => {
                            let value = match promise.result::<Value>() {
                                Some(Ok(v)) => v,
                                Some(Err(_)) => {
                                    return Some(Err(self.classify(
                                        &ctx,
                                        ctx.catch(),
                                        Phase::Result,
                                    )));
                                }
                                None => return None,
                            };
                            Some(self.convert_result(&ctx, value))
                        }
                        PromiseState::Rejected => match promise.result::<Value>() {
                            Some(Err(rquickjs::Error::Exception)) => {
                                Some(Err(self.classify(&ctx, ctx.catch(), Phase::Run)))
                            }
                            _ => Some(Err(internal(
                                "the program's promise was rejected without a reason",
                            ))),
                        },
                    }
                });
            if let Some(result) = settled {
                return result.map_err(|e| self.finish_error(e));
            }

            if !self.bridge.has_pending_calls() {
                return Err(deadlock());
            }
            // Nothing can run until the supervisor answers.
            if report_idle && let Err(e) = self.bridge.ipc.send(&WorkerMessage::Idle { results }) {
                self.bridge.set_stop(Stop::Ipc(e.to_string()));
                continue;
            }
            match self.bridge.ipc.recv() {
                Ok(SupervisorMessage::ToolResult {
                    id,
                    result,
                    clock_ms,
                }) => {
                    results = results.saturating_add(1);
                    let settled = self.context.with(|ctx| {
                        match self.bridge.settle(&ctx, id, result, clock_ms) {
                            Ok(()) => Ok(()),
                            Err(rquickjs::Error::Exception) => {
                                Err(self.classify(&ctx, ctx.catch(), Phase::Run))
                            }
                            Err(e) => Err(internal(format!("settling tool call {id} failed: {e}"))),
                        }
                    });
                    settled.map_err(|e| self.finish_error(e))?;
                }
                Ok(SupervisorMessage::Cancel) => {
                    // A cancel that arrives after the deadline is the supervisor enforcing it.
                    let reason = if self.bridge.deadline_passed() {
                        Stop::Timeout
                    } else {
                        Stop::Cancelled
                    };
                    self.bridge.set_stop(reason);
                }
                Ok(SupervisorMessage::Start(_)) => {
                    return Err(internal("the supervisor sent a second Start message"));
                }
                Ok(SupervisorMessage::Proceed) => {
                    return Err(internal(
                        "the supervisor sent Proceed while the program was running",
                    ));
                }
                Err(e) => {
                    self.bridge.set_stop(Stop::Ipc(e.to_string()));
                }
            }
        }
    }

    /// Turns a thrown value into an [`ExecError`] with positions in the agent's code.
    fn classify<'js>(&self, ctx: &Ctx<'js>, thrown: Value<'js>, phase: Phase) -> ExecError {
        let raw_stack = self.raw_stack(ctx, &thrown);
        let position = raw_stack
            .as_deref()
            .and_then(|s| self.bridge.first_position(s));
        if self.bridge.stop_reason().is_some() {
            return self.stop_error(position);
        }

        let limits = self.bridge.limits();
        let object = thrown.as_object().filter(|_| thrown.is_error());
        let name = object.and_then(|o| o.get::<_, String>("name").ok());
        let message = object.and_then(|o| o.get::<_, String>("message").ok());

        if bridge::is_out_of_memory_error(&thrown) {
            let mut e = ExecError::new(
                ErrorKind::MemoryLimit,
                memory_limit_message(limits.memory_bytes),
            );
            e.name = name;
            (e.line, e.column) = split(position);
            return e;
        }
        let is_stack_overflow = matches!(
            (name.as_deref(), message.as_deref()),
            (Some("RangeError"), Some("Maximum call stack size exceeded"))
        ) || matches!(
            (name.as_deref(), message.as_deref()),
            (Some("InternalError"), Some(m)) if m.starts_with("stack overflow")
        );

        let (kind, mut text) = match (phase, name.as_deref()) {
            _ if is_stack_overflow => (
                ErrorKind::StackOverflow,
                format!(
                    "the program exceeded its {} stack limit (Maximum call stack size exceeded); \
                     recursion is too deep: use a loop (the limit is the policy's limits.stack, \
                     which only the operator can raise)",
                    bytes_text(limits.stack_bytes.clamp(MIN_STACK_BYTES, MAX_STACK_BYTES))
                ),
            ),
            (Phase::Compile, Some("SyntaxError")) => {
                (ErrorKind::Syntax, message.clone().unwrap_or_default())
            }
            _ => {
                let text = match &message {
                    Some(m) => m.clone(),
                    None => self.show(ctx, &thrown),
                };
                (ErrorKind::Runtime, text)
            }
        };
        let kind = if kind == ErrorKind::Runtime && self.bridge.call_limit_hit() {
            text = format!(
                "the program started more than {} tool calls (max_tool_calls); {text}",
                limits.max_tool_calls
            );
            ErrorKind::ToolCallLimit
        } else {
            kind
        };
        if phase == Phase::Result && kind == ErrorKind::Runtime {
            text.push_str(" (thrown while converting the program's result to JSON)");
        }

        let stack = match (&raw_stack, &name) {
            (Some(raw), Some(n)) => {
                let frames = self.bridge.map_stack(raw);
                Some(format!(
                    "{n}: {}\n{}",
                    message.as_deref().unwrap_or(""),
                    frames.trim_end()
                ))
            }
            _ => None,
        };
        let explanation = match (kind, phase, name.as_deref(), &message) {
            (ErrorKind::Runtime, Phase::Run, Some("TypeError"), Some(message)) => {
                self.explain(ctx, message, position)
            }
            _ => None,
        };
        let (line, column) = split(position);
        ExecError {
            kind,
            name,
            message: text,
            line,
            column,
            stack,
            explanation,
        }
    }

    /// Where the value an uncaught TypeError is about came from and what it is, when the program
    /// bound it to a tool's result (or promise) and that result accounts for the error.
    fn explain<'js>(
        &self,
        ctx: &Ctx<'js>,
        message: &str,
        position: Option<(u32, u32)>,
    ) -> Option<String> {
        if !self.bridge.tracking() {
            return None;
        }
        self.bridge.with_source(|source, language| {
            provenance::explain(
                ctx,
                &provenance::Failed {
                    source,
                    language,
                    message,
                    position,
                },
                &|tool| self.bridge.latest_result(tool),
            )
        })
    }

    /// The engine's own stack string of an Error (positions in the generated script).
    fn raw_stack<'js>(&self, ctx: &Ctx<'js>, thrown: &Value<'js>) -> Option<String> {
        if !thrown.is_error() {
            return None;
        }
        let raw_stack_of = self.bridge.hook(|h| &h.raw_stack_of)?.restore(ctx).ok()?;
        raw_stack_of
            .call::<_, Option<String>>((thrown.clone(),))
            .ok()
            .flatten()
    }

    /// The message for a thrown non-Error value: a thrown string is its own message,
    /// anything else is rendered as the console would.
    fn show<'js>(&self, ctx: &Ctx<'js>, value: &Value<'js>) -> String {
        if let Some(Ok(s)) = value.as_string().map(|s| s.to_string()) {
            return s;
        }
        let shown = self
            .bridge
            .hook(|h| &h.show)
            .and_then(|f| f.restore(ctx).ok())
            .and_then(|f| f.call::<_, String>((value.clone(),)).ok());
        match shown {
            Some(s) => format!("uncaught {s}"),
            None => format!("uncaught {}", value.type_name()),
        }
    }

    /// The error for a stop reason (timeout, cancel, output limit, broken channel).
    fn stop_error(&self, position: Option<(u32, u32)>) -> ExecError {
        let limits = self.bridge.limits();
        let (kind, message) = match self.bridge.stop_reason() {
            Some(Stop::Timeout) | None => (
                ErrorKind::Timeout,
                format!(
                    "the program ran past its {} ms deadline; break the work up into smaller \
                     executions, or raise timeout_ms",
                    limits.timeout_ms
                ),
            ),
            Some(Stop::Cancelled) => (
                ErrorKind::Cancelled,
                "the execution was cancelled".to_owned(),
            ),
            Some(Stop::OutputLimit) => (
                ErrorKind::OutputLimit,
                format!(
                    "console output exceeded the {}-byte limit; print less, or return data as \
                     the result",
                    limits.max_output_bytes
                ),
            ),
            Some(Stop::Ipc(e)) => (
                ErrorKind::Internal,
                format!("the supervisor channel failed: {e}"),
            ),
        };
        let mut error = ExecError::new(kind, message);
        (error.line, error.column) = split(position);
        error
    }

    /// Last adjustments that need the runtime outside `Context::with`: a `null` thrown while
    /// the heap is at its limit is QuickJS failing to allocate even the error object.
    fn finish_error(&self, mut error: ExecError) -> ExecError {
        if error.kind == ErrorKind::Runtime
            && error.name.is_none()
            && error.message == "uncaught null"
        {
            let limit = self.bridge.limits().memory_bytes;
            let used = self.runtime.memory_usage().malloc_size.max(0) as u64;
            if self.bridge.null_rejected_at_limit()
                || used.saturating_mul(10) >= limit.saturating_mul(9)
            {
                error.kind = ErrorKind::MemoryLimit;
                error.message = memory_limit_message(limit);
            }
        }
        error
    }
}

/// Evaluates the prelude and hands it the natives; returns the hooks it gives back.
fn install_prelude(ctx: &Ctx<'_>, bridge: &Rc<Bridge>) -> Result<Hooks, String> {
    let describe = |ctx: &Ctx<'_>, e: rquickjs::Error| match e {
        rquickjs::Error::Exception => format!("{:?}", ctx.catch()),
        other => other.to_string(),
    };
    let prelude = load_prelude(ctx).map_err(|e| describe(ctx, e))?;
    let natives = bridge::natives(ctx, bridge).map_err(|e| describe(ctx, e))?;
    let hooks: Object = prelude.call((natives,)).map_err(|e| describe(ctx, e))?;
    let function = |name: &str| -> Result<Persistent<Function<'static>>, String> {
        let f: Function = hooks.get(name).map_err(|e| describe(ctx, e))?;
        Ok(Persistent::save(ctx, f))
    };
    Ok(Hooks {
        make_tool_error: function("makeToolError")?,
        show: function("show")?,
        find_not_json: function("findNotJson")?,
        raw_stack_of: function("rawStackOf")?,
    })
}

/// The prelude as compiled by build.rs (QuickJS bytecode of `prelude.js`).
const PRELUDE_BYTECODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/prelude.bc"));

/// Evaluates the precompiled prelude script; its completion value is the prelude function.
fn load_prelude<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Function<'js>> {
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: the bytes are bytecode that build.rs produced from prelude.js with the same
    // QuickJS this binary links (never input from outside); `raw` is the live context of
    // `ctx`; JS_EvalFunction takes ownership of the read object and returns an owned value.
    let value = unsafe {
        let compiled = rquickjs::qjs::JS_ReadObject(
            raw,
            PRELUDE_BYTECODE.as_ptr(),
            PRELUDE_BYTECODE.len() as _,
            rquickjs::qjs::JS_READ_OBJ_BYTECODE as i32,
        );
        if rquickjs::qjs::JS_IsException(compiled) {
            return Err(rquickjs::Error::Exception);
        }
        let value = rquickjs::qjs::JS_EvalFunction(raw, compiled);
        if rquickjs::qjs::JS_IsException(value) {
            return Err(rquickjs::Error::Exception);
        }
        rquickjs::Value::from_raw(ctx.clone(), value)
    };
    Function::from_value(value)
}

fn deadlock() -> ExecError {
    ExecError::new(
        ErrorKind::Deadlock,
        "the program awaits a promise that can never settle: no tool call is pending and \
         nothing else can resolve it",
    )
}

fn memory_limit_message(limit: u64) -> String {
    format!(
        "the program exceeded its {} memory limit; process the data in smaller pieces (the \
         limit is the policy's limits.memory, which only the operator can raise)",
        bytes_text(limit)
    )
}

fn split(position: Option<(u32, u32)>) -> (Option<u32>, Option<u32>) {
    match position {
        Some((l, c)) => (Some(l), Some(c)),
        None => (None, None),
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
