//! The four native functions behind the sandbox's globals, and the per-execution state they
//! share with the engine's run loop.
//!
//! | native          | JavaScript that uses it           | effect                                   |
//! |-----------------|-----------------------------------|------------------------------------------|
//! | `toolCall`      | `tools.<ns>.<name>(args)`         | serialise args once, send `ToolCall`, return a promise |
//! | `consoleWrite`  | `console.log/info/warn/error/debug` | send `Console`, enforce `max_output_bytes` |
//! | `progressWrite` | `progress(value)`                 | send `Progress` (counts toward the output budget) |
//! | `mapStack`      | the `Error.prototype.stack` getter | positions → the agent's code              |
//!
//! The clock and randomness natives (`Date`, `Math.random`, `crypto`, `performance`) are in
//! [`super::determinism`]; they read the run's [`Sources`] kept here.
//!
//! The natives are handed to the prelude (`prelude.js`) as arguments and live only in its
//! closures. They never panic on program input and never touch anything but the IPC channel.

use super::determinism::Sources;
use super::typescript::PositionMap;
use crate::ipc::Ipc;
use airlock_proto::frame::blocking::IoFrameError;
use airlock_proto::{
    ConsoleLevel, Determinism, Language, Limits, SourcePosition, SupervisorMessage, ToolFailure,
    WorkerMessage,
};
use rquickjs::function::Opt;
use rquickjs::{Ctx, Exception, Function, Object, Persistent, Value, qjs};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::rc::Rc;
use std::time::Instant;

/// The file name of the prelude in stack traces; its frames are hidden from the program.
pub(super) const PRELUDE_FILENAME: &str = "<airlock>";

/// Largest single console message; longer text is cut (and says so), so one message always
/// fits in a frame whatever `max_output_bytes` allows.
pub(super) const MAX_CONSOLE_MESSAGE_BYTES: usize = 1024 * 1024;
/// Largest `progress()` value, as JSON text.
pub(super) const MAX_PROGRESS_BYTES: usize = 1024 * 1024;
/// Largest tool-call arguments, as JSON text (the frame limit is 32 MiB).
pub(super) const MAX_ARGS_BYTES: usize = airlock_proto::MAX_TOOL_ARGS_BYTES;

/// Why the program is being stopped, whatever JavaScript is running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stop {
    /// The wall-clock deadline passed.
    Timeout,
    /// The supervisor sent `Cancel`.
    Cancelled,
    /// Console and progress output used up `max_output_bytes`.
    OutputLimit,
    /// Sending to or receiving from the supervisor failed.
    Ipc(String),
}

/// Functions defined by the prelude that the engine calls from Rust.
#[derive(Debug)]
pub(super) struct Hooks {
    /// `(tool, code, message, hint) => ToolError`.
    pub make_tool_error: Persistent<Function<'static>>,
    /// `(value) => string`: the console's rendering of any value.
    pub show: Persistent<Function<'static>>,
    /// `(value) => [what, path] | null`: where a value stops being JSON.
    pub find_not_json: Persistent<Function<'static>>,
    /// `(error) => string`: the engine's stack of an error (positions in the generated
    /// script); for a `ToolError`, the stack where the program started the call.
    pub raw_stack_of: Persistent<Function<'static>>,
}

/// A tool call the program is awaiting.
#[derive(Debug)]
struct PendingCall {
    tool: String,
    /// An Error made where the program started the call (for a failure's stack).
    site: Option<Persistent<Value<'static>>>,
    resolve: Persistent<Function<'static>>,
    reject: Persistent<Function<'static>>,
}

/// The IPC channel, lent to the natives for the duration of one closure (see
/// [`IpcLease::lend`]).
#[derive(Debug, Default)]
pub(super) struct IpcLease {
    ipc: Cell<Option<NonNull<Ipc>>>,
}

impl IpcLease {
    /// Makes `ipc` available to [`IpcLease::send`] and [`IpcLease::recv`] while `f` runs.
    ///
    /// The natives are `'static` closures stored in the JavaScript heap, so they cannot hold
    /// the `&mut Ipc` that `LanguageRuntime::run` receives; they reach it through this lease instead.
    /// The pointer exists only inside this call (cleared on return and on unwind), and it is
    /// dereferenced only by `send`/`recv`, which never call back into JavaScript, so no two
    /// mutable references to the `Ipc` are ever live at once.
    pub fn lend<R>(&self, ipc: &mut Ipc, f: impl FnOnce() -> R) -> R {
        struct Clear<'a>(&'a Cell<Option<NonNull<Ipc>>>);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                self.0.set(None);
            }
        }
        self.ipc.set(Some(NonNull::from(ipc)));
        let _clear = Clear(&self.ipc);
        f()
    }

    fn with<R>(
        &self,
        f: impl FnOnce(&mut Ipc) -> Result<R, IoFrameError>,
    ) -> Result<R, IoFrameError> {
        match self.ipc.get() {
            // SAFETY: the pointer was made from a `&mut Ipc` that `lend` holds for as long as
            // the pointer is set (it is cleared before `lend` returns or unwinds). Only `send`
            // and `recv` dereference it, neither re-enters JavaScript or this lease, and the
            // engine is single-threaded, so this is the only live reference to the `Ipc`.
            Some(mut ptr) => f(unsafe { ptr.as_mut() }),
            None => Err(IoFrameError::Closed),
        }
    }

    pub fn send(&self, msg: &WorkerMessage) -> Result<(), IoFrameError> {
        self.with(|ipc| ipc.send(msg))
    }

    pub fn recv(&self) -> Result<SupervisorMessage, IoFrameError> {
        self.with(|ipc| ipc.recv())
    }
}

/// Counters and tables of one execution.
#[derive(Debug)]
struct State {
    limits: Limits,
    next_id: u32,
    calls_started: u32,
    /// A call was refused because `max_tool_calls` was reached.
    call_limit_hit: bool,
    output_used: u64,
    pending: BTreeMap<u32, PendingCall>,
    /// `ToolResult`s for ids that were unknown or already settled.
    ignored_results: u32,
}

impl Default for State {
    fn default() -> Self {
        State {
            limits: Limits {
                timeout_ms: 0,
                memory_bytes: 0,
                stack_bytes: 0,
                max_tool_calls: 0,
                max_output_bytes: 0,
            },
            next_id: 1,
            calls_started: 0,
            call_limit_hit: false,
            output_used: 0,
            pending: BTreeMap::new(),
            ignored_results: 0,
        }
    }
}

/// Shared by the natives (through `Rc` clones in their closures), the interrupt handler and
/// the run loop. No `RefCell` borrow is ever held while JavaScript runs.
#[derive(Debug, Default)]
pub(super) struct Bridge {
    pub ipc: IpcLease,
    state: RefCell<State>,
    stop: RefCell<Option<Stop>>,
    deadline: Cell<Option<Instant>>,
    /// A promise was rejected with `null` while the heap was at its limit: QuickJS could not
    /// allocate even the `out of memory` error.
    null_rejected_at_limit: Cell<bool>,
    /// Tool calls carry their position in the program.
    report_positions: Cell<bool>,
    hooks: RefCell<Option<Hooks>>,
    /// Position map and file name of the running program, for `mapStack`.
    positions: RefCell<Option<(PositionMap, &'static str)>>,
    /// The program's clock and random streams.
    sources: RefCell<Sources>,
    /// Tool results are not remembered (measurement only: the provenance benchmark runs with
    /// and without).
    untracked: Cell<bool>,
    /// The code the agent sent and its language, for explaining errors
    /// ([`super::provenance`]).
    source: RefCell<Option<(String, Language)>>,
    /// Each tool's latest successful result, as received, for explaining errors.
    results: RefCell<LatestResults>,
}

impl Bridge {
    /// Arms the bridge for one execution.
    pub fn begin(
        &self,
        limits: Limits,
        determinism: &Determinism,
        deadline: Instant,
        positions: PositionMap,
        filename: &'static str,
    ) {
        *self.sources.borrow_mut() = Sources::new(determinism);
        *self.state.borrow_mut() = State {
            limits,
            ..State::default()
        };
        *self.stop.borrow_mut() = None;
        self.null_rejected_at_limit.set(false);
        self.deadline.set(Some(deadline));
        *self.positions.borrow_mut() = Some((positions, filename));
    }

    /// Keeps the agent's code, to read the expression at an error's position, and forgets the
    /// previous execution's results.
    pub fn set_source(&self, code: &str, language: Language) {
        *self.source.borrow_mut() = Some((code.to_owned(), language));
        *self.results.borrow_mut() = LatestResults::default();
    }

    pub fn with_source<R>(&self, f: impl FnOnce(&str, Language) -> Option<R>) -> Option<R> {
        let source = self.source.borrow();
        let (code, language) = source.as_ref()?;
        f(code, *language)
    }

    /// The latest successful result of `tool` (`namespace.name`), when it is remembered.
    pub fn latest_result(&self, tool: &str) -> Option<String> {
        self.results.borrow().get(tool).map(str::to_owned)
    }

    /// Turns the remembering of tool results off (measurement only).
    #[cfg(test)]
    pub fn set_tracking(&self, on: bool) {
        self.untracked.set(!on);
    }

    pub fn tracking(&self) -> bool {
        !self.untracked.get()
    }

    /// Whether tool calls carry their position in the program (`Start.report_idle`).
    pub fn report_positions(&self, on: bool) {
        self.report_positions.set(on);
    }

    /// Runs `f` on the program's clock and random streams. `f` must not call into JavaScript
    /// (the natives that use this never do).
    pub fn with_sources<R>(&self, f: impl FnOnce(&mut Sources) -> R) -> R {
        f(&mut self.sources.borrow_mut())
    }

    pub fn set_hooks(&self, hooks: Hooks) {
        *self.hooks.borrow_mut() = Some(hooks);
    }

    /// Drops every reference into the JavaScript heap; must run before the runtime is freed.
    pub fn release_js(&self) {
        self.hooks.borrow_mut().take();
        std::mem::take(&mut self.state.borrow_mut().pending);
    }

    pub fn hook(
        &self,
        pick: impl FnOnce(&Hooks) -> &Persistent<Function<'static>>,
    ) -> Option<Persistent<Function<'static>>> {
        self.hooks.borrow().as_ref().map(|h| pick(h).clone())
    }

    pub fn limits(&self) -> Limits {
        self.state.borrow().limits
    }

    pub fn call_limit_hit(&self) -> bool {
        self.state.borrow().call_limit_hit
    }

    pub fn has_pending_calls(&self) -> bool {
        !self.state.borrow().pending.is_empty()
    }

    #[cfg(test)]
    pub fn ignored_results(&self) -> u32 {
        self.state.borrow().ignored_results
    }

    pub fn stop_reason(&self) -> Option<Stop> {
        self.stop.try_borrow().ok().and_then(|s| s.clone())
    }

    /// Records why the program stops; the first reason wins.
    pub fn set_stop(&self, reason: Stop) {
        if let Ok(mut stop) = self.stop.try_borrow_mut()
            && stop.is_none()
        {
            *stop = Some(reason);
        }
    }

    pub fn deadline_passed(&self) -> bool {
        self.deadline.get().is_some_and(|d| Instant::now() >= d)
    }

    /// The interrupt handler's question, also asked by the run loop between jobs: should the
    /// program stop now? Records `Timeout` when the deadline has passed.
    pub fn should_interrupt(&self) -> bool {
        if self.stop_reason().is_some() {
            return true;
        }
        if self.deadline_passed() {
            self.set_stop(Stop::Timeout);
            return true;
        }
        false
    }

    /// The promise rejection tracker: notes a `null` rejection while the heap is full. It
    /// runs inside the rejection, while the failing function's frame (and its data) is still
    /// alive, which is the only moment the heap size tells anything.
    pub fn note_rejection(&self, ctx: &Ctx<'_>, reason: &Value<'_>) {
        if !reason.is_null() {
            return;
        }
        let limit = self.state.borrow().limits.memory_bytes;
        let mut usage = std::mem::MaybeUninit::<qjs::JSMemoryUsage>::zeroed();
        // SAFETY: `ctx` is the live context running the tracker; JS_ComputeMemoryUsage only
        // reads the runtime's bookkeeping and fills the struct we pass.
        let usage = unsafe {
            qjs::JS_ComputeMemoryUsage(
                qjs::JS_GetRuntime(ctx.as_raw().as_ptr()),
                usage.as_mut_ptr(),
            );
            usage.assume_init()
        };
        let used = u64::try_from(usage.malloc_size).unwrap_or(0);
        if used.saturating_mul(10) >= limit.saturating_mul(9) {
            self.null_rejected_at_limit.set(true);
        }
    }

    pub fn null_rejected_at_limit(&self) -> bool {
        self.null_rejected_at_limit.get()
    }

    /// Maps a raw QuickJS stack to the agent's code: drops the prelude's frames and frames in
    /// the wrapper, rewrites program positions.
    pub fn map_stack(&self, stack: &str) -> String {
        let visible: String = stack
            .lines()
            .filter(|l| !l.contains(PRELUDE_FILENAME))
            .flat_map(|l| [l, "\n"])
            .collect();
        match &*self.positions.borrow() {
            Some((map, filename)) => map.map_stack(&visible, filename),
            None => visible,
        }
    }

    /// The first position in a raw stack that lies in the agent's code.
    pub fn first_position(&self, stack: &str) -> Option<(u32, u32)> {
        match &*self.positions.borrow() {
            Some((map, filename)) => map.first_position(stack, filename),
            None => None,
        }
    }

    // -------------------------------------------------------------------------------------
    // Natives

    /// `toolCall(name, args)`: see the module table.
    fn tool_call<'js>(
        &self,
        ctx: &Ctx<'js>,
        name: rquickjs::String<'js>,
        args: Option<Value<'js>>,
        site: Option<Value<'js>>,
    ) -> rquickjs::Result<Value<'js>> {
        self.throw_if_stopped(ctx)?;
        let tool = match name.to_string() {
            Ok(t) => t,
            Err(_) => {
                return Err(Exception::throw_type(
                    ctx,
                    "tool names must be valid Unicode",
                ));
            }
        };
        let (promise, resolve, reject) = ctx.promise()?;

        let over_limit = {
            let mut state = self.state.borrow_mut();
            if state.calls_started >= state.limits.max_tool_calls {
                state.call_limit_hit = true;
                Some(state.limits.max_tool_calls)
            } else {
                None
            }
        };
        if let Some(max) = over_limit {
            let error = self.make_tool_error(
                ctx,
                &tool,
                &ToolFailure {
                    code: "tool_call_limit".to_owned(),
                    message: format!("this execution may start at most {max} tool calls"),
                    hint: Some(
                        "batch the work into fewer calls, or raise max_tool_calls".to_owned(),
                    ),
                },
                site.clone(),
            )?;
            reject.call::<_, ()>((error,))?;
            return Ok(promise.into_value());
        }

        // Serialised exactly once, here, by the engine's own JSON.stringify: this text is what
        // the supervisor checks and forwards (getters and proxies cannot change it later).
        let args_json = match args.filter(|a| !a.is_undefined()) {
            None => "{}".to_owned(),
            Some(value) => match ctx.json_stringify(value.clone()) {
                Ok(Some(text)) => {
                    let text = text.to_string()?;
                    if text.len() > MAX_ARGS_BYTES {
                        let error = type_error(
                            ctx,
                            &format!(
                                "tools.{tool}: the arguments are {} bytes of JSON, over the 16 MiB limit",
                                text.len()
                            ),
                        );
                        reject.call::<_, ()>((error,))?;
                        return Ok(promise.into_value());
                    }
                    text
                }
                Ok(None) => {
                    let what = if value.is_function() {
                        "a function"
                    } else {
                        "a symbol"
                    };
                    let error = type_error(
                        ctx,
                        &format!("tools.{tool}: the arguments must be JSON data, not {what}"),
                    );
                    reject.call::<_, ()>((error,))?;
                    return Ok(promise.into_value());
                }
                Err(rquickjs::Error::Exception) => {
                    let thrown = ctx.catch();
                    if self.stop_reason().is_some() || is_out_of_memory(&thrown) {
                        return Err(ctx.throw(thrown));
                    }
                    let error = type_error(
                        ctx,
                        &format!(
                            "tools.{tool}: the arguments cannot be serialised to JSON ({})",
                            exception_message(&thrown)
                        ),
                    );
                    reject.call::<_, ()>((error,))?;
                    return Ok(promise.into_value());
                }
                Err(other) => return Err(other),
            },
        };

        let id = {
            let mut state = self.state.borrow_mut();
            let id = state.next_id;
            state.next_id += 1;
            state.calls_started += 1;
            id
        };
        // Where the program made the call, when the supervisor asked (a call that waits for
        // a person is shown with the code around it).
        let at = if self.report_positions.get() {
            site.as_ref()
                .and_then(Value::as_object)
                .and_then(|o| o.get::<_, String>("stack").ok())
                // The sandbox's `Error` has already mapped its stack to the agent's code.
                .and_then(|stack| {
                    let positions = self.positions.borrow();
                    let (_, filename) = positions.as_ref()?;
                    PositionMap::first_mapped_position(&stack, filename)
                })
                .map(|(line, column)| SourcePosition { line, column })
        } else {
            None
        };
        let sent = self.ipc.send(&WorkerMessage::ToolCall {
            id,
            tool: tool.clone(),
            args_json,
            at,
        });
        if let Err(e) = sent {
            self.set_stop(Stop::Ipc(e.to_string()));
            return Err(throw_uncatchable(ctx, "the supervisor channel failed"));
        }
        self.state.borrow_mut().pending.insert(
            id,
            PendingCall {
                tool,
                site: site.map(|s| Persistent::save(ctx, s)),
                resolve: Persistent::save(ctx, resolve),
                reject: Persistent::save(ctx, reject),
            },
        );
        Ok(promise.into_value())
    }

    /// `consoleWrite(level, text)`.
    fn console_write<'js>(
        &self,
        ctx: &Ctx<'js>,
        level: i32,
        text: rquickjs::String<'js>,
    ) -> rquickjs::Result<()> {
        self.throw_if_stopped(ctx)?;
        let mut text = text
            .to_string()
            .unwrap_or_else(|_| "[text that is not valid Unicode]".to_owned());
        if text.len() > MAX_CONSOLE_MESSAGE_BYTES {
            let total = text.len();
            let mut cut = MAX_CONSOLE_MESSAGE_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str(&format!(
                " … [message cut: {total} bytes, over the 1 MiB per-message limit]"
            ));
        }
        let level = match level {
            1 => ConsoleLevel::Info,
            2 => ConsoleLevel::Warn,
            3 => ConsoleLevel::Error,
            4 => ConsoleLevel::Debug,
            _ => ConsoleLevel::Log,
        };
        let (text, exceeded) = self.take_output_budget(text);
        if let Some(text) = text {
            self.send_or_stop(ctx, &WorkerMessage::Console { level, text })?;
        }
        if exceeded {
            self.set_stop(Stop::OutputLimit);
            return Err(throw_uncatchable(ctx, "console output limit reached"));
        }
        Ok(())
    }

    /// `progressWrite(value)`.
    fn progress_write<'js>(
        &self,
        ctx: &Ctx<'js>,
        value: Option<Value<'js>>,
    ) -> rquickjs::Result<()> {
        self.throw_if_stopped(ctx)?;
        let value_json = match value.filter(|v| !v.is_undefined()) {
            None => "null".to_owned(),
            Some(value) => match ctx.json_stringify(value) {
                Ok(Some(text)) => {
                    let text = text.to_string()?;
                    if text.len() > MAX_PROGRESS_BYTES {
                        return Err(Exception::throw_type(
                            ctx,
                            &format!(
                                "progress(): the value is {} bytes of JSON, over the 1 MiB limit",
                                text.len()
                            ),
                        ));
                    }
                    text
                }
                Ok(None) => "null".to_owned(),
                Err(rquickjs::Error::Exception) => {
                    let thrown = ctx.catch();
                    if self.stop_reason().is_some() || is_out_of_memory(&thrown) {
                        return Err(ctx.throw(thrown));
                    }
                    return Err(Exception::throw_type(
                        ctx,
                        &format!(
                            "progress(): the value cannot be serialised to JSON ({})",
                            exception_message(&thrown)
                        ),
                    ));
                }
                Err(other) => return Err(other),
            },
        };
        match self.take_output_budget(value_json) {
            (Some(value_json), false) => {
                self.send_or_stop(ctx, &WorkerMessage::Progress { value_json })
            }
            _ => {
                // A truncated JSON value is no value: send nothing and stop.
                self.set_stop(Stop::OutputLimit);
                Err(throw_uncatchable(ctx, "output limit reached"))
            }
        }
    }

    /// Charges `text` against `max_output_bytes` ([`crate::language::take_output_budget`]).
    fn take_output_budget(&self, text: String) -> (Option<String>, bool) {
        let mut state = self.state.borrow_mut();
        let budget = state.limits.max_output_bytes;
        crate::language::take_output_budget(&mut state.output_used, budget, text)
    }

    fn send_or_stop(&self, ctx: &Ctx<'_>, msg: &WorkerMessage) -> rquickjs::Result<()> {
        if let Err(e) = self.ipc.send(msg) {
            self.set_stop(Stop::Ipc(e.to_string()));
            return Err(throw_uncatchable(ctx, "the supervisor channel failed"));
        }
        Ok(())
    }

    fn throw_if_stopped(&self, ctx: &Ctx<'_>) -> rquickjs::Result<()> {
        if self.should_interrupt() {
            return Err(throw_uncatchable(ctx, "the program is being stopped"));
        }
        Ok(())
    }

    fn make_tool_error<'js>(
        &self,
        ctx: &Ctx<'js>,
        tool: &str,
        failure: &ToolFailure,
        site: Option<Value<'js>>,
    ) -> rquickjs::Result<Value<'js>> {
        let Some(make) = self.hook(|h| &h.make_tool_error) else {
            return Ok(type_error(ctx, &format!("{tool}: {}", failure.message)));
        };
        make.restore(ctx)?.call((
            tool,
            failure.code.as_str(),
            failure.message.as_str(),
            failure.hint.as_deref(),
            site,
        ))
    }

    /// Settles the promise of tool call `id` with the supervisor's answer, after moving the
    /// program's clock to the answer's `clock_ms` (so code after the `await` sees the new
    /// time). Unknown and repeated ids are counted and ignored: they answer nothing, so they
    /// move no clock either.
    pub fn settle<'js>(
        &self,
        ctx: &Ctx<'js>,
        id: u32,
        result: Result<String, ToolFailure>,
        clock_ms: u64,
    ) -> rquickjs::Result<()> {
        let call = self.state.borrow_mut().pending.remove(&id);
        let Some(call) = call else {
            self.state.borrow_mut().ignored_results += 1;
            return Ok(());
        };
        self.with_sources(|s| s.advance(clock_ms));
        match result {
            Ok(json) => {
                // Bookkeeping outside the JavaScript heap, never read by the program: only an
                // uncaught TypeError reads it ([`super::provenance`]).
                if self.tracking() {
                    // Another call of the same tool still running: the program may be using
                    // either result when it fails, so this tool's are not explained.
                    let overlapping = self
                        .state
                        .borrow()
                        .pending
                        .values()
                        .any(|other| other.tool == call.tool);
                    self.results
                        .borrow_mut()
                        .remember(&call.tool, &json, overlapping);
                }
                self.deliver(ctx, call, json)
            }
            Err(failure) => {
                let error =
                    self.make_tool_error(ctx, &call.tool, &failure, restore_site(ctx, &call.site))?;
                call.reject.restore(ctx)?.call::<_, ()>((error,))
            }
        }
    }

    fn deliver<'js>(
        &self,
        ctx: &Ctx<'js>,
        call: PendingCall,
        json: String,
    ) -> rquickjs::Result<()> {
        match ctx.json_parse(json) {
            Ok(value) => call.resolve.restore(ctx)?.call::<_, ()>((value,)),
            Err(rquickjs::Error::Exception) => {
                let thrown = ctx.catch();
                if is_out_of_memory(&thrown) {
                    return Err(ctx.throw(thrown));
                }
                let error = self.make_tool_error(
                    ctx,
                    &call.tool,
                    &ToolFailure {
                        code: "invalid_result".to_owned(),
                        message: "the tool's result is not valid JSON".to_owned(),
                        hint: None,
                    },
                    restore_site(ctx, &call.site),
                )?;
                call.reject.restore(ctx)?.call::<_, ()>((error,))
            }
            Err(other) => Err(other),
        }
    }
}

/// Each tool's latest successful result (its JSON text, as the supervisor sent it), so an
/// uncaught TypeError can say what a tool's value really was. Bounded: results over
/// [`MAX_REMEMBERED_RESULT`] are forgotten (not replaced by an older one, which would describe
/// the wrong value), a tool whose calls overlapped is not explained at all (which result a name
/// holds is not known), and the least recently answered tools go first beyond
/// [`MAX_REMEMBERED_TOOLS`] tools or [`MAX_REMEMBERED_BYTES`] bytes in all.
#[derive(Debug, Default)]
pub(super) struct LatestResults {
    /// `(tool, result)`, the most recently answered last.
    entries: Vec<(String, Option<String>)>,
    bytes: usize,
    /// Tools two calls of which were running at once.
    overlapped: Vec<String>,
}

pub(super) const MAX_REMEMBERED_RESULT: usize = 4 << 20;
const MAX_REMEMBERED_TOOLS: usize = 256;
const MAX_REMEMBERED_BYTES: usize = 16 << 20;

impl LatestResults {
    pub fn remember(&mut self, tool: &str, json: &str, overlapping: bool) {
        if overlapping && !self.overlapped.iter().any(|t| t == tool) {
            self.overlapped.push(tool.to_owned());
        }
        if let Some(i) = self.entries.iter().rposition(|(t, _)| t == tool) {
            let (_, old) = self.entries.remove(i);
            self.bytes -= old.map_or(0, |o| o.len());
        }
        let kept = (json.len() <= MAX_REMEMBERED_RESULT
            && !self.overlapped.iter().any(|t| t == tool))
        .then(|| json.to_owned());
        self.bytes += kept.as_ref().map_or(0, String::len);
        self.entries.push((tool.to_owned(), kept));
        while self.entries.len() > MAX_REMEMBERED_TOOLS || self.bytes > MAX_REMEMBERED_BYTES {
            let (_, old) = self.entries.remove(0);
            self.bytes -= old.map_or(0, |o| o.len());
        }
    }

    pub fn get(&self, tool: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|(t, _)| t == tool)
            .and_then(|(_, json)| json.as_deref())
    }
}

fn restore_site<'js>(
    ctx: &Ctx<'js>,
    site: &Option<Persistent<Value<'static>>>,
) -> Option<Value<'js>> {
    site.clone().and_then(|s| s.restore(ctx).ok())
}

/// Creates the natives object handed to the prelude.
pub(super) fn natives<'js>(ctx: &Ctx<'js>, bridge: &Rc<Bridge>) -> rquickjs::Result<Object<'js>> {
    let natives = Object::new(ctx.clone())?;

    let b = Rc::clone(bridge);
    let tool_call = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              name: rquickjs::String<'js>,
              args: Opt<Value<'js>>,
              site: Opt<Value<'js>>| { b.tool_call(&ctx, name, args.0, site.0) },
    )?
    .with_name("toolCall")?;
    natives.set("toolCall", tool_call)?;

    let b = Rc::clone(bridge);
    let console_write = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, level: i32, text: rquickjs::String<'js>| {
            b.console_write(&ctx, level, text)
        },
    )?
    .with_name("consoleWrite")?;
    natives.set("consoleWrite", console_write)?;

    let b = Rc::clone(bridge);
    let progress_write =
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, value: Opt<Value<'js>>| {
            b.progress_write(&ctx, value.0)
        })?
        .with_name("progressWrite")?;
    natives.set("progressWrite", progress_write)?;

    let b = Rc::clone(bridge);
    let map_stack = Function::new(ctx.clone(), move |stack: String| b.map_stack(&stack))?
        .with_name("mapStack")?;
    natives.set("mapStack", map_stack)?;

    super::determinism::add_natives(ctx, &natives, bridge)?;
    Ok(natives)
}

/// A `TypeError` object (not thrown), made by the engine's own constructor.
fn type_error<'js>(ctx: &Ctx<'js>, message: &str) -> Value<'js> {
    let _ = Exception::throw_type(ctx, message);
    ctx.catch()
}

/// Throws an `InternalError` that `catch` and `finally` cannot intercept, like the engine's
/// own interrupt: used when the program must stop now (output limit, broken channel).
pub(super) fn throw_uncatchable(ctx: &Ctx<'_>, message: &str) -> rquickjs::Error {
    let _ = Exception::throw_internal(ctx, message);
    let error = ctx.catch();
    // SAFETY: `ctx` is a live context (we are inside `Context::with` or a native call) and
    // `error` is a value of it; the call only sets a flag on an Error object and ignores
    // other values.
    unsafe { qjs::JS_SetUncatchableError(ctx.as_raw().as_ptr(), error.as_raw()) };
    ctx.throw(error)
}

/// QuickJS reports heap exhaustion as `InternalError: out of memory`, or throws `null` when
/// even that error cannot be allocated. Used to let such an exception pass through the
/// natives untouched; classification uses [`is_out_of_memory_error`] and the heap size.
pub(super) fn is_out_of_memory(thrown: &Value<'_>) -> bool {
    thrown.is_null() || is_out_of_memory_error(thrown)
}

/// `InternalError: out of memory`.
pub(super) fn is_out_of_memory_error(thrown: &Value<'_>) -> bool {
    let Some(object) = thrown.as_object() else {
        return false;
    };
    thrown.is_error()
        && object
            .get::<_, String>("name")
            .is_ok_and(|n| n == "InternalError")
        && object
            .get::<_, String>("message")
            .is_ok_and(|m| m == "out of memory")
}

/// A short description of a caught exception, for wrapping it in another error's message.
pub(super) fn exception_message(thrown: &Value<'_>) -> String {
    if let Some(object) = thrown.as_object()
        && let Ok(message) = object.get::<_, String>("message")
    {
        return message;
    }
    match thrown.as_string().map(|s| s.to_string()) {
        Some(Ok(s)) => s,
        _ => thrown.type_name().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_results_are_bounded() {
        let mut results = LatestResults::default();
        results.remember("a.b", "1", false);
        results.remember("a.b", "2", false);
        assert_eq!(results.get("a.b"), Some("2"));
        // Too big: forgotten, never replaced by the older one.
        results.remember("a.b", &" ".repeat(MAX_REMEMBERED_RESULT + 1), false);
        assert_eq!(results.get("a.b"), None);
        for i in 0..MAX_REMEMBERED_TOOLS + 10 {
            results.remember(&format!("t.{i}"), "{}", false);
        }
        assert_eq!(results.entries.len(), MAX_REMEMBERED_TOOLS);
        assert_eq!(results.get("t.0"), None);
        assert_eq!(
            results.get(&format!("t.{}", MAX_REMEMBERED_TOOLS + 9)),
            Some("{}")
        );
        let big = "x".repeat(MAX_REMEMBERED_RESULT);
        for i in 0..6 {
            results.remember(&format!("big.{i}"), &big, false);
        }
        assert!(results.bytes <= MAX_REMEMBERED_BYTES);
        assert_eq!(results.get("big.0"), None);
        assert_eq!(results.get("big.5").map(str::len), Some(big.len()));
        // Calls that overlapped: never again for this execution.
        results.remember("c.d", "1", true);
        results.remember("c.d", "2", false);
        assert_eq!(results.get("c.d"), None);
    }
}
