//! Message types for both directions of the supervisor ⇄ worker channel.
//!
//! JSON values travel as strings: postcard is not self-describing, so it cannot carry a
//! `serde_json::Value`, and keeping JSON as text lets each side parse it exactly once with
//! its own limits (the worker with the engine's JSON parser, the supervisor with serde_json).

use serde::{Deserialize, Serialize};

/// Worker → supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkerMessage {
    /// Sent once, after the lockdown has fully succeeded and before the worker reads anything
    /// else. A worker that cannot lock down exits instead of sending this.
    Ready {
        protocol_version: u32,
        lockdown: LockdownReport,
    },
    /// The program's literal tool calls, found by the worker's own parse (after lockdown; the
    /// supervisor never parses a program). Sent at most once, after `Start` and before the
    /// program is evaluated, and only when the program names at least one tool; the worker
    /// then waits for [`SupervisorMessage::Proceed`] (or `Cancel`). The supervisor judges
    /// the calls against the catalogue: the contract check.
    ToolReferences(ToolReferences),
    /// A call of `tools.<namespace>.<name>(args)`. `id` is unique within one execution and
    /// increases in call order, so a trace is a pure function of code and ordered results.
    ToolCall {
        id: u32,
        /// `namespace.name` exactly as the program wrote it.
        tool: String,
        /// The arguments, serialised once inside the worker (the copy that is checked and sent).
        args_json: String,
        /// Where in the agent's code the call was made (only when
        /// [`StartExecution::report_idle`] asked: a call that waits for a person shows it).
        at: Option<SourcePosition>,
    },
    /// The program can run nothing more until an answer comes: every job is done and it
    /// awaits tool calls. Sent (only when [`StartExecution::report_idle`] asked for it) each
    /// time the worker is about to block for the next message, with how many `ToolResult`s it
    /// has received so far, so the supervisor can tell that it has seen every answer sent: if
    /// it has, and every outstanding call waits for someone outside the daemon (a client-owned
    /// tool, a person's approval), the execution can only wait.
    Idle { results: u32 },
    /// One `console.*` call, already formatted to text.
    Console { level: ConsoleLevel, text: String },
    /// One `progress(value)` call.
    Progress { value_json: String },
    /// The program finished; nothing follows this message.
    Done {
        outcome: Outcome,
        stats: WorkerStats,
    },
}

/// Supervisor → worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SupervisorMessage {
    /// Run one program. A worker accepts exactly one `Start` in its life.
    Start(StartExecution),
    /// The answer to [`WorkerMessage::ToolCall`] with the same id.
    ToolResult {
        id: u32,
        result: Result<String, ToolFailure>,
        /// The program's clock from now on, in milliseconds since the Unix epoch (see
        /// [`Determinism::clock_ms`]): the time the answer was made, recorded with it, so a
        /// replayed answer brings back the time it had.
        clock_ms: u64,
    },
    /// Stop the program as soon as possible and report [`ErrorKind::Cancelled`]. Also the
    /// answer to [`WorkerMessage::ToolReferences`] when the contract check refuses the
    /// program: the supervisor then reports the refusal itself.
    Cancel,
    /// The answer to [`WorkerMessage::ToolReferences`] when the contract check passes:
    /// evaluate the program.
    Proceed,
}

/// The literal tool calls of one program, in source order.
///
/// Flat on purpose: no field nests a value of its own type, so decoding it needs no
/// recursion whatever the program looked like.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolReferences {
    pub calls: Vec<ToolReference>,
}

/// One `tools.<namespace>.<name>(…)` (or `tools["namespace"]["name"](…)`) call site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolReference {
    pub namespace: String,
    pub name: String,
    pub at: SourcePosition,
    /// The first argument, when it is an object literal.
    pub argument: Option<LiteralObject>,
}

/// A 1-based line and column (UTF-16 code units) in the code the agent sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourcePosition {
    pub line: u32,
    pub column: u32,
}

/// An object literal passed as a tool call's first argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiteralObject {
    pub at: SourcePosition,
    /// It spreads another object or has a computed key: any property may be present.
    pub open: bool,
    pub properties: Vec<LiteralProperty>,
    /// Python: the call also passes arguments by position that are not one dict, which no
    /// tool takes (a call that can only fail). Postcard has no defaults for missing fields:
    /// adding this changed the wire contract (`PROTOCOL_VERSION` 11).
    pub positional: bool,
}

/// One `key: value` of a [`LiteralObject`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiteralProperty {
    pub key: String,
    pub at: SourcePosition,
    pub value_at: SourcePosition,
    /// The value's JSON type, when the value is a literal.
    pub value: Option<LiteralKind>,
    /// The value itself, when it is a string, number or boolean literal short enough
    /// ([`MAX_LITERAL_SCALAR_BYTES`]): the contract check tells what the daemon would coerce
    /// it to.
    pub scalar: Option<LiteralScalar>,
}

/// Longest string literal (in bytes) a [`LiteralProperty`] carries as its
/// [`LiteralProperty::scalar`].
pub const MAX_LITERAL_SCALAR_BYTES: usize = 256;

/// A scalar literal's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LiteralScalar {
    String(String),
    /// The number as JSON text (`100`, `-1.5`).
    Number(String),
    Boolean(bool),
}

/// The JSON type of a literal value (what the contract check can judge without running it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LiteralKind {
    String,
    /// A numeric literal with a fraction (or outside the range where that is known).
    Number,
    /// A numeric literal without a fraction: also a JSON Schema `integer`.
    Integer,
    Boolean,
    Null,
    Array,
    Object,
}

impl LiteralKind {
    /// The JSON Schema type name (`integer` literals are `number`s).
    pub fn json_type(self) -> &'static str {
        match self {
            LiteralKind::String => "string",
            LiteralKind::Number | LiteralKind::Integer => "number",
            LiteralKind::Boolean => "boolean",
            LiteralKind::Null => "null",
            LiteralKind::Array => "array",
            LiteralKind::Object => "object",
        }
    }
}

/// Everything the worker needs to run one program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartExecution {
    /// Opaque id used only to label the worker's own diagnostics.
    pub execution_id: String,
    pub language: Language,
    pub code: String,
    pub limits: Limits,
    pub determinism: Determinism,
    /// Send [`WorkerMessage::Idle`] whenever the program blocks waiting for tool results (an
    /// execution with calls that may have to wait outside the daemon; one frame per wait
    /// otherwise spent for nothing).
    pub report_idle: bool,
}

/// Where the program's clock and randomness come from: the supervisor, never the system, so
/// that a run is a pure function of its code, this and its ordered tool results, and a
/// replayed run takes the same path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Determinism {
    /// `Date.now()` and `new Date()` at the start, in milliseconds since the Unix epoch. The
    /// clock moves only when the program is answered (each [`SupervisorMessage::ToolResult`]
    /// carries the time it moves to), never during computation, and never backwards.
    pub clock_ms: u64,
    /// Seeds `Math.random()` and `crypto.getRandomValues()` (two separate streams).
    pub seed: [u8; 32],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Language {
    TypeScript,
    JavaScript,
    /// The subset of Python the worker's interpreter (monty) implements.
    Python,
}

/// Limits for one execution, computed by the supervisor from policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Wall-clock budget of the whole program, tool calls included.
    pub timeout_ms: u64,
    /// Heap limit handed to the engine's allocator.
    pub memory_bytes: u64,
    /// Maximum native stack the engine may use for JavaScript recursion.
    pub stack_bytes: u64,
    /// Maximum number of tool calls one execution may start.
    pub max_tool_calls: u32,
    /// Maximum bytes of console text (all levels together).
    pub max_output_bytes: u64,
}

/// Which of the lockdown layers are in force; sent with [`WorkerMessage::Ready`] so the
/// supervisor can log and expose it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockdownReport {
    /// Landlock ABI version the kernel offered (the worker refuses to run without Landlock).
    pub landlock_abi: u32,
    /// Whether every access right the worker asked Landlock to handle is enforced.
    pub landlock_fully_enforced: bool,
    /// Number of syscalls in the seccomp allowlist.
    pub seccomp_allowed_syscalls: u32,
    /// The worker was forked from a zygote (see [`ForkRequest`]) rather than started by
    /// `exec`: the same layers, inherited from the zygote, plus the worker's own kill filter.
    pub forked: bool,
}

/// Supervisor → zygote: start one new worker. The zygote (`airlock-worker --zygote`) is a
/// locked-down process that has started the engine and then only forks; each fork becomes one
/// worker for one execution, with its own address space, and is never reused.
///
/// Sent as one packet on the zygote's control socket (a `SOCK_SEQPACKET` pair on its fd 3)
/// holding one frame, with the new worker's end of its own socket pair attached as
/// `SCM_RIGHTS`. The limits are the worker's: the zygote itself runs no program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkRequest {
    /// `RLIMIT_AS` of the new worker.
    pub memory_ceiling_bytes: u64,
    /// `RLIMIT_CPU` soft limit of the new worker (the hard limit is one second more).
    pub cpu_seconds: u64,
    /// The worker will wait in the pool: take a first program's page faults before `Ready`
    /// (`false` when an execution waits for this very worker).
    pub warm_up: bool,
}

/// Zygote → supervisor: the answer to one [`ForkRequest`], one packet holding one frame.
/// The zygote first sends [`WorkerMessage::Ready`] on the same socket once it is locked down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForkReply {
    /// The new worker's pid. It is the supervisor's child (`CLONE_PARENT`), so the supervisor
    /// reaps it; it sends its own `Ready` on the socket that came with the request.
    Forked { pid: i32 },
    /// No worker was started: `step` names what failed, `errno` why.
    Refused { step: String, errno: i32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConsoleLevel {
    Log,
    Info,
    Warn,
    Error,
    Debug,
}

impl ConsoleLevel {
    /// `log`, `info` and `debug` go to stdout; `warn` and `error` to stderr, as in Node.
    pub fn is_stderr(self) -> bool {
        matches!(self, ConsoleLevel::Warn | ConsoleLevel::Error)
    }
}

/// Why a tool call failed, as the program sees it (`ToolError` in JavaScript).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// Stable machine-readable code, e.g. `unknown_tool`, `invalid_arguments`, `upstream_error`.
    pub code: String,
    pub message: String,
    /// What the program (or its author) can do about it.
    pub hint: Option<String>,
}

/// How a program ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The program's value as JSON text (`null` for `undefined`).
    Ok {
        value_json: String,
    },
    Error(ExecError),
}

/// A structured failure of the program, with the position in the code the agent sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecError {
    pub kind: ErrorKind,
    /// The JavaScript error's name (`TypeError`, `ToolError`, …) where there is one.
    pub name: Option<String>,
    pub message: String,
    /// 1-based line in the submitted program.
    pub line: Option<u32>,
    /// 1-based column in the submitted program.
    pub column: Option<u32>,
    pub stack: Option<String>,
    /// For a TypeError about a value that came from a tool: where it came from and what it
    /// is (keys, types, lengths; never the content of a string).
    pub explanation: Option<String>,
}

impl ExecError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ExecError {
            kind,
            name: None,
            message: message.into(),
            line: None,
            column: None,
            stack: None,
            explanation: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The program does not parse (JavaScript or TypeScript syntax).
    Syntax,
    /// An exception escaped the program.
    Runtime,
    /// The wall-clock deadline passed.
    Timeout,
    /// The engine's heap limit was reached.
    MemoryLimit,
    /// JavaScript recursion exhausted the stack limit.
    StackOverflow,
    /// The program's value cannot be represented as JSON.
    ResultNotJson,
    /// Console output exceeded `max_output_bytes`.
    OutputLimit,
    /// The program started more than `max_tool_calls` tool calls.
    ToolCallLimit,
    /// The program awaits something that can never settle (no tool call is pending).
    Deadlock,
    /// The supervisor cancelled the execution.
    Cancelled,
    /// A forbidden operation was attempted and refused by the sandbox.
    SandboxViolation,
    /// A fault inside the worker itself, not caused by the program.
    Internal,
}

/// Measurements the worker takes about itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerStats {
    /// Time spent turning the submitted code into runnable JavaScript, in microseconds.
    pub compile_us: u64,
    /// Time from start of evaluation to the settled result, in microseconds.
    pub run_us: u64,
    /// Engine heap in use at the end of the run, in bytes.
    pub heap_used_bytes: u64,
    /// The process's peak resident set size (`getrusage`), in bytes, from a forked worker;
    /// 0 from one started by `exec`, whose figure would include the image `exec` replaced.
    pub peak_rss_bytes: u64,
}
