//! The JSON shapes of the agent API (`/v1/...`), shared by the daemon, the `airlock` CLI and
//! the tests, so a field cannot be renamed on one side only.
//!
//! A leaf: it imports nothing else of the crate, so every part of the daemon can speak it.
//! The codes agents act on (an execution's error kind, a tool error's code, an API error's
//! code, a call's outcome) are enums here, written as their snake_case names on the wire.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A code agents read: a unit-variant enum serialised as its snake_case name, comparable with
/// that name (`kind == "contract"`) and printable as it.
macro_rules! wire_code {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// The name on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

    };
}

wire_code! {
    /// Why an execution failed (`error.kind`).
    pub enum ExecutionErrorKind {
        /// The contract check refused a literal tool call before the program ran.
        Contract => "contract",
        Syntax => "syntax",
        Runtime => "runtime",
        Timeout => "timeout",
        MemoryLimit => "memory_limit",
        StackOverflow => "stack_overflow",
        ResultNotJson => "result_not_json",
        OutputLimit => "output_limit",
        ToolCallLimit => "tool_call_limit",
        Deadlock => "deadlock",
        Cancelled => "cancelled",
        SandboxViolation => "sandbox_violation",
        WorkerCrashed => "worker_crashed",
        Internal => "internal",
    }
}

wire_code! {
    /// Why a tool call failed (`ToolError.code`, in the program and in the trace).
    pub enum ToolErrorCode {
        /// No such namespace or tool.
        UnknownTool => "unknown_tool",
        /// The principal's policy does not grant the tool.
        Denied => "denied",
        /// The arguments break the tool's schema (or are not JSON at all).
        InvalidArguments => "invalid_arguments",
        /// The tool's own schema (from its document) cannot be used.
        InvalidSchema => "invalid_schema",
        /// The tool, or the service behind it, answered with an error.
        UpstreamError => "upstream_error",
        /// The answer is bigger than one result may be.
        ResultTooLarge => "result_too_large",
        /// The execution reached its `max_tool_calls`.
        ToolCallLimit => "tool_call_limit",
        /// The principal's `tool_calls_per_minute` is used up.
        RateLimited => "rate_limited",
        /// The source cannot be reached or started (configuration, a missing secret, a crash).
        ServerUnavailable => "server_unavailable",
        /// No answer within the source's `call_timeout_ms`.
        Timeout => "timeout",
        /// The answer carried a secret and the policy fails such calls.
        SecretInResult => "secret_in_result",
        /// The call belongs to a session and the daemon cannot write its journal.
        JournalUnavailable => "journal_unavailable",
        /// An argument holds text from an untrusted result and a `[[flow]]` rule denies it.
        FlowDenied => "flow_denied",
        /// A fault of the daemon, not of the program or the tool.
        Internal => "internal",
    }
}

wire_code! {
    /// Why a request to the API itself was refused (`{ "error": { "code" } }`).
    pub enum ApiErrorCode {
        BadRequest => "bad_request",
        Internal => "internal",
        InvalidJson => "invalid_json",
        InvalidTimeout => "invalid_timeout",
        /// `max_output_tokens` is 0 or above the policy's.
        InvalidOutputBudget => "invalid_output_budget",
        /// Sessions were asked for and the daemon cannot keep its journal.
        JournalUnavailable => "journal_unavailable",
        /// The request conflicts with the state of what it names (resuming an execution that
        /// was not interrupted).
        Conflict => "conflict",
        MethodNotAllowed => "method_not_allowed",
        NotAdmitted => "not_admitted",
        NotFound => "not_found",
        NotPermitted => "not_permitted",
        ProgramTooLarge => "program_too_large",
        RateLimited => "rate_limited",
        RequestTooLarge => "request_too_large",
        ShuttingDown => "shutting_down",
        /// The principal has as many executions waiting as `limits.max_waiting_executions`.
        TooManyWaiting => "too_many_waiting",
        /// The request's `Host` is not a name of the daemon (`airlock`, a loopback name).
        HostNotAllowed => "host_not_allowed",
        /// The request carries the `Origin` of a web page that is not on a loopback name.
        OriginNotAllowed => "origin_not_allowed",
        /// A `POST` without `Content-Type: application/json`.
        UnsupportedMediaType => "unsupported_media_type",
        /// What the request would keep passes a bound of the journal (`[journal]`
        /// `max_sessions`, `max_session_size`, `max_principal_size`, `max_size`).
        JournalFull => "journal_full",
        /// The program's code holds what the secret scanner takes for a secret, and the
        /// execution would keep its code in the journal (it runs in a session).
        SecretInCode => "secret_in_code",
    }
}

wire_code! {
    /// How a tool call ended, as the trace and the events say.
    pub enum CallOutcome {
        Ok => "ok",
        Error => "error",
        /// The execution ended before the call returned.
        Pending => "pending",
    }
}

/// A failed tool call as the program sees it (a `ToolError` in JavaScript), and as the trace
/// records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub code: ToolErrorCode,
    pub message: String,
    /// What the program (or its author) can do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The tool itself answered that the call failed (an MCP result with `isError`, an HTTP
    /// error status, GraphQL `errors`), rather than no answer coming or the daemon refusing
    /// one. A session's retry of such a call goes out with a new idempotency key, since a
    /// service that honours the key would answer the retry with the same failure. Not on the
    /// wire.
    #[serde(skip)]
    reported: bool,
}

impl ToolError {
    pub fn new(code: ToolErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            hint: None,
            reported: false,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The same error, marked as the tool's own answer ([`ToolError::is_reported_by_tool`]).
    pub fn reported_by_tool(mut self) -> Self {
        self.reported = true;
        self
    }

    /// Whether the tool itself answered that the call failed.
    pub fn is_reported_by_tool(&self) -> bool {
        self.reported
    }
}

/// `POST /v1/executions` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionRequest {
    pub code: String,
    #[serde(default)]
    pub language: RequestLanguage,
    /// Wall-clock budget; defaults to the policy's `limits.timeout_ms`, capped by
    /// `limits.max_timeout_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Output budget in `cl100k_base` tokens (error, result, stdout, stderr; more is cut with
    /// a note); defaults to, and may not exceed, the policy's `limits.max_output_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Run in this session (its recorded tool calls are replayed), or `"new"` for a new one
    /// (the response carries its id). Absent: a one-shot execution, nothing recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Which recorded calls a session's execution replays (default `all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayMode>,
    /// Tools the agent owns and answers itself: the program calls them as
    /// `tools.client.<name>(args)`, and the execution waits (`status: "waiting"`,
    /// `pending_calls`) when it can go no further without their results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_tools: Vec<ClientToolSpec>,
    /// The stateless form: the client tools' results so far (ids from earlier `waiting`
    /// responses). The program runs again from the start, these calls answered from here, and
    /// the daemon keeps nothing: the answer is the next batch or the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_results: Option<Vec<ClientResult>>,
    /// The clock and seed to run with, from an earlier `waiting` response of the stateless form,
    /// so a program that reads `Date.now()` or `Math.random()` takes the same path again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub determinism: Option<DeterminismSpec>,
    /// `false`: answer `202` with the id at once and run detached (a client that hangs up does
    /// not stop it); `GET /v1/executions/<id>` and its `/events` follow it. The header
    /// `Prefer: respond-async` says the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
}

impl ExecutionRequest {
    /// A request to run `code` with everything else at its default.
    pub fn code(code: impl Into<String>) -> ExecutionRequest {
        ExecutionRequest {
            code: code.into(),
            ..ExecutionRequest::default()
        }
    }
}

/// A tool the agent declares in its request and answers itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClientToolSpec {
    /// As the program calls it: `tools.client.<name>`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments object (default: any object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
}

/// One client tool call's answer: `{ "id", "ok": value }` or `{ "id", "error": { "message" } }`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClientResult {
    /// The `id` of the pending call it answers.
    pub id: u32,
    /// The tool's value (`null` is a value: present and null is not absent).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub ok: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ClientFailure>,
}

/// A client tool's failure: a `ToolError` in the program.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientFailure {
    pub message: String,
}

/// A field that is there, whatever its value (so `"ok": null` is `Some(Null)`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A client tool call the program waits for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PendingCall {
    /// What `POST /v1/executions/<id>/results` answers it under (the call's id in the trace).
    pub id: u32,
    /// The client tool's name as the request declared it.
    pub tool: String,
    pub args: Value,
}

/// A call that waits for a person's decision (the principal's `approve` patterns).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PendingApproval {
    /// What an approver decides under: `POST /v1/approvals/<id>`, `airlock approve <id>`.
    pub id: String,
    /// The execution that waits.
    pub execution: String,
    /// Whose execution it is.
    pub principal: String,
    /// The call's id in the execution's trace.
    pub call: u32,
    pub tool: String,
    /// The arguments as the program sent them (scanned for secrets).
    pub args: Value,
    /// The lines of the program around the call, the call's line marked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// When it was asked for, and when it expires as denied (ms since the Unix epoch).
    pub requested_ms: u64,
    pub expires_ms: u64,
    /// The hash of the arguments as sent (before the scan): what the decision is for. The
    /// daemon's own.
    #[serde(skip)]
    pub args_hash: String,
}

/// `POST /v1/approvals/<id>` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalRequest {
    pub decision: ApprovalDecision,
    /// Why, for the audit log and the program (a denial's message carries it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How an approval ended, as the journal keeps it and the audit log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Approved,
    Denied,
    /// Nobody decided within `[approvals] ttl`: a denial.
    Expired,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approved => "approved",
            Verdict::Denied => "denied",
            Verdict::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<Verdict> {
        match text {
            "approved" => Some(Verdict::Approved),
            "denied" => Some(Verdict::Denied),
            "expired" => Some(Verdict::Expired),
            _ => None,
        }
    }
}

/// An approver's answer.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalDecision {
    Approve,
    Deny,
}

/// `POST /v1/executions/<id>/results` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClientResults {
    pub results: Vec<ClientResult>,
}

/// The clock and seed an execution ran with (the seed as 64 hex digits).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DeterminismSpec {
    pub clock_ms: u64,
    #[serde(with = "hex_seed")]
    pub seed: [u8; 32],
}

mod hex_seed {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(seed: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
        let text: String = seed.iter().map(|b| format!("{b:02x}")).collect();
        s.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 32], D::Error> {
        let text = String::deserialize(d)?;
        let bad = || serde::de::Error::custom("seed must be 64 hex digits");
        if text.len() != 64 || !text.is_ascii() {
            return Err(bad());
        }
        let mut seed = [0u8; 32];
        for (i, byte) in seed.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(seed)
    }
}

/// Which recorded calls a session's execution answers from its journal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplayMode {
    /// Every call recorded with a successful result.
    #[default]
    All,
    /// Only calls of tools that are not read-only: reads run again and see fresh data.
    Writes,
    /// None: every call runs again (and the new results are recorded).
    None,
}

impl ReplayMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayMode::All => "all",
            ReplayMode::Writes => "writes",
            ReplayMode::None => "none",
        }
    }
}

/// The word a request uses for a new session.
pub const NEW_SESSION: &str = "new";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestLanguage {
    #[default]
    Typescript,
    Javascript,
    /// The subset of Python the worker's interpreter implements (docs/agent-api.md, "Python").
    Python,
}

impl RequestLanguage {
    /// The name on the wire (and in the journal).
    pub fn as_str(self) -> &'static str {
        match self {
            RequestLanguage::Typescript => "typescript",
            RequestLanguage::Javascript => "javascript",
            RequestLanguage::Python => "python",
        }
    }

    /// The language a name says (TypeScript, the default, for anything but `javascript` and
    /// `python`).
    pub fn from_name(name: &str) -> RequestLanguage {
        match name {
            "javascript" => RequestLanguage::Javascript,
            "python" => RequestLanguage::Python,
            _ => RequestLanguage::Typescript,
        }
    }
}

wire_code! {
    /// How an execution stands or ended (`status`), as the response, the audit log and the
    /// metrics name it.
    pub enum Status {
        Ok => "ok",
        Error => "error",
        Timeout => "timeout",
        /// The streaming client hung up before the end, and the program was stopped. Nobody
        /// receives this response; it is what the audit log and the metrics record.
        Cancelled => "cancelled",
        /// The program can go no further until someone outside the daemon answers: the
        /// client's tools (`pending_calls`).
        Waiting => "waiting",
        /// A detached execution waits for a slot (`GET /v1/executions/<id>` only).
        Queued => "queued",
        /// A detached execution runs (`GET /v1/executions/<id>` only).
        Running => "running",
    }
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
    /// The session it ran in (a new one's id when the request said `"new"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// How many of `tool_calls` were answered from the session's journal.
    #[serde(default)]
    pub replayed_calls: u32,
    /// The interrupted execution this one resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_from: Option<String>,
    /// With `status: "waiting"`: the client tool calls the program waits for, every one it
    /// made before it blocked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_calls: Vec<PendingCall>,
    /// With `status: "waiting"`: the calls that wait for an approver's decision (every one
    /// made before the program blocked). The execution goes on by itself once they are
    /// decided; follow it with `GET /v1/executions/<id>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_approvals: Vec<PendingApproval>,
    /// With `status: "waiting"`: the clock and seed it ran with (the stateless form sends them
    /// back with `client_results`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub determinism: Option<DeterminismSpec>,
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
    pub kind: ExecutionErrorKind,
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
    /// For a TypeError about a value that came from a tool: where the value came from and
    /// what it is (`g.nodes is undefined: g is the result of tools.memory.read_graph (line 1),
    /// an object with keys entities (array of 3), relations (empty array)`). Keys, types and
    /// lengths only, never the content of a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

/// One tool call in the execution trace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCallRecord {
    pub id: u32,
    pub tool: String,
    pub args: Value,
    pub outcome: CallOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// The result the program got (scanned, as the worker received it), shortened: long
    /// strings and arrays cut, deep levels replaced by markers, at most 2 KiB of JSON per call
    /// and 32 KiB per execution. Only in the response of a program that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// `result` is not the whole result (or is missing because the trace's budget was spent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub result_truncated: bool,
    /// When the program made the call, in milliseconds from the start of the execution (the
    /// same origin as `stats.total_ms`): calls that overlap in time ran concurrently.
    #[serde(default)]
    pub started_ms: f64,
    pub duration_ms: f64,
    /// Answered from the session's journal, without calling the tool.
    #[serde(default)]
    pub replayed: bool,
    /// The journal recorded this tool with other arguments at this point: the program took
    /// another path than the run it replays, and this call ran live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<String>,
    /// Secrets the scanner replaced in this call's result, error or progress before the
    /// program saw them, and in its arguments as the trace shows them: the rule and where
    /// (never the value).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<Redaction>,
    /// Values the daemon coerced to the tool's schemas (the source's `coerce = "safe"`): a
    /// trivial mismatch in the arguments (`"100"` for a number) or in a result that breaks the
    /// tool's declared output schema, fixed instead of refused. In call order of the walk;
    /// absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coercions: Vec<Coercion>,
    /// Text from untrusted results found in this call's arguments (information flow), with
    /// the rule that decided, if one did; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<Flow>,
}

/// Text from an untrusted result found in a call's arguments.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Flow {
    /// Where in the arguments: `to`, `message.cc[0]`; `*` for a flow that could not be
    /// checked (`unchecked`).
    pub argument: String,
    /// The call whose result held the text (the first of its tool when several tools' did).
    pub source_call: u32,
    pub source_tool: String,
    /// The `[[flow]]` rule that decided, and what it did; absent when no rule names the flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<FlowActionTaken>,
    /// The execution's untrusted results were past the daemon's bound from `source_call` on:
    /// the flow is assumed, not found.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchecked: bool,
}

/// What a `[[flow]]` rule did with a flow.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FlowActionTaken {
    Deny,
    Approve,
    Log,
}

/// One value coerced to a tool's schema (`tools::coercion`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Coercion {
    /// Whether it was in the call's arguments or in its result.
    pub place: CoercionPlace,
    /// JSON Pointer (RFC 6901) of the value within the arguments or the result, as the program
    /// wrote them (`""` is the whole value).
    pub pointer: String,
    /// The value as it came.
    pub from: Value,
    /// The value it became; absent when the property was omitted (`null` for an optional
    /// property).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Value>,
    /// Which rule applied.
    pub rule: CoercionRule,
}

/// Where a coercion was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoercionPlace {
    Arguments,
    Result,
}

impl CoercionPlace {
    /// The name in the API, the audit log and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            CoercionPlace::Arguments => "arguments",
            CoercionPlace::Result => "result",
        }
    }
}

/// The coercion rules (docs/agent-api.md, "Coercion").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoercionRule {
    /// `"100"` → `100` for an `integer` or `number`.
    NumberFromString,
    /// `"true"` → `true`.
    BooleanFromString,
    /// `5` → `"5"`, `true` → `"true"` for a `string`.
    StringFromScalar,
    /// `x` → `[x]` for an array.
    WrapInArray,
    /// `null` for an optional property that does not take `null`: omitted.
    NullOmitted,
    /// `"RED"` → `"red"`: the one enum member that matches case-insensitively.
    EnumCase,
    /// A date or date-time rewritten to the format the schema names.
    DateFormat,
}

impl CoercionRule {
    pub const ALL: [CoercionRule; 7] = [
        CoercionRule::NumberFromString,
        CoercionRule::BooleanFromString,
        CoercionRule::StringFromScalar,
        CoercionRule::WrapInArray,
        CoercionRule::NullOmitted,
        CoercionRule::EnumCase,
        CoercionRule::DateFormat,
    ];

    /// The name in the API, the audit log and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            CoercionRule::NumberFromString => "number_from_string",
            CoercionRule::BooleanFromString => "boolean_from_string",
            CoercionRule::StringFromScalar => "string_from_scalar",
            CoercionRule::WrapInArray => "wrap_in_array",
            CoercionRule::NullOmitted => "null_omitted",
            CoercionRule::EnumCase => "enum_case",
            CoercionRule::DateFormat => "date_format",
        }
    }
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
    /// `cl100k_base` tokens of what the agent gets (error, result, stdout, stderr; the notes
    /// of a cut not counted), at most the output budget.
    #[serde(default)]
    pub output_tokens: u64,
    /// Tokens cut at the output budget (`max_output_tokens`).
    #[serde(default)]
    pub cut_tokens: u64,
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
        /// The session it runs in, when it runs in one: what a client cut off from the
        /// stream needs to run again without repeating a side effect.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
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
        outcome: CallOutcome,
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
pub(crate) struct ErrorBody {
    pub error: ApiError,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct ApiError {
    pub code: ApiErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}
