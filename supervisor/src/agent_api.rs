//! The JSON shapes of the agent API (`/v1/...`), shared by the daemon, the `airlock` CLI and
//! the tests, so a field cannot be renamed on one side only.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/executions` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionRequest {
    pub code: String,
    #[serde(default)]
    pub language: RequestLanguage,
    /// Wall-clock budget; defaults to the policy's `limits.timeout_ms`, capped by
    /// `limits.max_timeout_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestLanguage {
    #[default]
    Typescript,
    Javascript,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Error,
    Timeout,
    /// The streaming client hung up before the end, and the program was stopped. Nobody
    /// receives this response; it is what the audit log and the metrics record.
    Cancelled,
}

/// The answer to an execution (also the last event of a streamed execution).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutionResponse {
    pub id: String,
    pub status: Status,
    /// The program's value (`null` when it failed).
    pub result: Value,
    pub stdout: String,
    pub stderr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ExecutionError>,
    pub tool_calls: Vec<ToolCallRecord>,
    pub stats: ExecutionStats,
    pub peer: PeerInfo,
    pub principal: String,
    /// Secrets the scanner replaced in what the program printed, reported or returned (those
    /// in tool results are under each call's `redactions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<Redaction>,
    /// Things the agent should know that did not stop the program: secrets redacted from what
    /// it returned or printed, an audit record that could not be written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Why an execution failed, with where in the submitted code.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExecutionError {
    /// `syntax`, `runtime`, `timeout`, `memory_limit`, `stack_overflow`, `result_not_json`,
    /// `output_limit`, `tool_call_limit`, `deadlock`, `cancelled`, `sandbox_violation`,
    /// `worker_crashed`, `internal`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    /// The lines of the submitted code around `line`, numbered, the failing one marked with
    /// `>` and its column with `^`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// One tool call in the execution trace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCallRecord {
    pub id: u32,
    pub tool: String,
    pub args: Value,
    /// `ok`, `error`, or `pending` (the execution ended before the call returned).
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::tools::ToolError>,
    /// When the program made the call, in milliseconds from the start of the execution (the
    /// same origin as `stats.total_ms`): calls that overlap in time ran concurrently.
    #[serde(default)]
    pub started_ms: f64,
    pub duration_ms: f64,
    /// Secrets the scanner replaced in this call's result, error or progress before the
    /// program saw them, and in its arguments as the trace shows them: the rule and where
    /// (never the value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<Redaction>,
}

/// One replacement made by the secret scanner.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Redaction {
    /// `known-secret` or a shape rule's id (`github-token`).
    pub rule: String,
    /// What it was in.
    #[serde(default)]
    pub place: RedactionPlace,
    /// JSON pointer of the string it was in, within `place`'s value (`""` for the whole
    /// value); absent for text (an error message, a console line, a progress message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// For a known secret, its name in the policy: for the audit log, which operators read.
    /// Never serialized: the agent must not learn which credential it reached.
    #[serde(skip)]
    pub secret: Option<String>,
}

/// Where a redaction was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RedactionPlace {
    /// A tool call's result, or the program's result.
    #[default]
    Result,
    /// A tool call's error message or hint, or the program's error (message, stack, excerpt).
    Error,
    /// A tool call's progress message, or a value the program passed to `progress()`.
    Progress,
    /// A tool call's arguments as the trace shows them.
    Arguments,
    Stdout,
    Stderr,
}

impl RedactionPlace {
    /// The name in the API and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            RedactionPlace::Result => "result",
            RedactionPlace::Error => "error",
            RedactionPlace::Progress => "progress",
            RedactionPlace::Arguments => "arguments",
            RedactionPlace::Stdout => "stdout",
            RedactionPlace::Stderr => "stderr",
        }
    }
}

impl Redaction {
    /// The redaction a scanner finding in `place` stands for.
    pub fn of(finding: &crate::secrets::scanner::Finding, place: RedactionPlace) -> Redaction {
        Redaction {
            rule: finding.rule.clone(),
            place,
            pointer: finding.location.pointer.clone(),
            secret: finding.known_secret.as_ref().map(|k| k.name.clone()),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ExecutionStats {
    /// Waiting for an execution slot (max_concurrent_executions).
    pub queue_ms: f64,
    /// Waiting for a worker: ~0 from the pool, exec + lockdown + engine start otherwise.
    pub spawn_ms: f64,
    /// From sending the program to its final message.
    pub run_ms: f64,
    pub total_ms: f64,
    pub worker_from_pool: bool,
    /// Turning the submitted code into runnable JavaScript, inside the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_us: Option<u64>,
    /// Evaluating it, tool calls included, inside the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_run_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_used_bytes: Option<u64>,
    /// Peak resident set size of the worker process (VmHWM), when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct PeerInfo {
    pub uid: u32,
    pub gid: u32,
    pub pid: Option<i32>,
}

/// Events of a streamed execution (`Accept: application/x-ndjson`), one JSON object a line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ExecutionEvent {
    Started {
        id: String,
    },
    Console {
        stream: ConsoleStream,
        level: String,
        text: String,
    },
    Progress {
        value: Value,
    },
    ToolCallStarted {
        id: u32,
        tool: String,
    },
    /// A progress notification of a tool call in flight (MCP `notifications/progress`).
    ToolProgress {
        id: u32,
        tool: String,
        progress: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    ToolCallFinished {
        id: u32,
        tool: String,
        outcome: String,
        duration_ms: f64,
    },
    Result(Box<ExecutionResponse>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsoleStream {
    Stdout,
    Stderr,
}

/// Error body of every non-2xx answer: `{ "error": { "code", "message", "hint"? } }`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ApiError,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApiError {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}
