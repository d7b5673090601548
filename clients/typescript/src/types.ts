// The JSON shapes of Airlock's agent API (`docs/agent-api.md`), as `airlockd` sends and
// accepts them (`supervisor/src/agent_api.rs`). Field names are the wire's (snake_case).

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

// ---------------------------------------------------------------------------------------------
// Requests

export type Language = "typescript" | "javascript" | "python";

/** Which recorded calls a session's execution answers from its journal. */
export type ReplayMode = "all" | "writes" | "none";

/** A tool the agent declares in its request and answers itself (`tools.client.<name>`). */
export interface ClientToolSpec {
  /** An identifier: the program calls it as `tools.client.<name>(args)`. */
  name: string;
  description?: string;
  /** JSON Schema of the arguments object (default: any object). */
  input_schema?: unknown;
}

/** One client tool call's answer: `{ id, ok: value }` or `{ id, error: { message } }`. */
export type ClientResult =
  | { id: number; ok: unknown }
  | { id: number; error: { message: string } };

/** The clock and seed an execution ran with (the stateless form sends them back). */
export interface Determinism {
  clock_ms: number;
  /** 64 hex digits. */
  seed: string;
}

/** `POST /v1/executions` body. Unknown fields are refused by the daemon. */
export interface ExecutionRequest {
  /** The program: TypeScript (default) or JavaScript, with top-level `await`. */
  code: string;
  language?: Language;
  /** Wall-clock budget, tool calls included; default and maximum come from the policy. */
  timeout_ms?: number;
  /** `"new"` makes a session (the response's `session` is its id), or an existing id. */
  session?: string;
  replay?: ReplayMode;
  client_tools?: ClientToolSpec[];
  /** The stateless form: the client tools' results so far. */
  client_results?: ClientResult[];
  /** The stateless form: `determinism` of the last waiting response. */
  determinism?: Determinism;
  /** `false`: answer `202` at once and run detached (`AirlockClient.submit` sets it). */
  wait?: boolean;
}

/** `POST /v1/approvals/<id>` body. */
export interface ApprovalDecisionRequest {
  decision: ApprovalDecision;
  reason?: string;
}

export type ApprovalDecision = "approve" | "deny";

// ---------------------------------------------------------------------------------------------
// Execution responses

/** How an execution stands. `queued` and `running` only come from `GET /v1/executions/<id>`. */
export type ExecutionStatus =
  | "ok"
  | "error"
  | "timeout"
  | "cancelled"
  | "waiting"
  | "queued"
  | "running";

/** Why an execution failed (`error.kind`). */
export type ExecutionErrorKind =
  | "contract"
  | "syntax"
  | "runtime"
  | "timeout"
  | "memory_limit"
  | "stack_overflow"
  | "result_not_json"
  | "output_limit"
  | "tool_call_limit"
  | "deadlock"
  | "cancelled"
  | "sandbox_violation"
  | "worker_crashed"
  | "internal";

/** Why a tool call failed (`ToolError.code` in the program and in the trace). */
export type ToolErrorCode =
  | "unknown_tool"
  | "denied"
  | "invalid_arguments"
  | "invalid_schema"
  | "upstream_error"
  | "result_too_large"
  | "tool_call_limit"
  | "rate_limited"
  | "server_unavailable"
  | "timeout"
  | "secret_in_result"
  | "journal_unavailable"
  | "flow_denied"
  | "internal";

/** How a tool call ended. `pending`: the execution ended (or waits) before it returned. */
export type CallOutcome = "ok" | "error" | "pending";

/** Why an execution failed, with where in the submitted code. */
export interface ExecutionError {
  kind: ExecutionErrorKind;
  /** The JavaScript error's name (`TypeError`, `ToolError`, ...). */
  name?: string;
  message: string;
  /** 1-based, into the code that was sent (TypeScript included). */
  line?: number;
  column?: number;
  stack?: string;
  /** The code around `line`, numbered, the line marked with `>` and the column with `^`. */
  excerpt?: string;
  /** What to change. */
  hint?: string;
  /** For a TypeError on a value that came from a tool: where it came from and what it is. */
  explanation?: string;
}

/** A failed tool call as the trace records it. */
export interface ToolError {
  code: ToolErrorCode;
  message: string;
  hint?: string;
}

/** Where the secret scanner replaced something. */
export type RedactionPlace = "result" | "error" | "progress" | "arguments" | "stdout" | "stderr";

export interface Redaction {
  /** `known-secret` or a shape rule's id. */
  rule: string;
  place: RedactionPlace;
  /** JSON pointer within the place's value; absent for text. */
  pointer?: string;
}

/** One value the daemon coerced to a tool's schema (the source's `coerce = "safe"`). */
export interface Coercion {
  place: "arguments" | "result";
  /** JSON Pointer within the arguments or the result. */
  pointer: string;
  from: Json;
  /** What it became; absent when the property was left out. */
  to?: Json;
  rule:
    | "number_from_string"
    | "boolean_from_string"
    | "string_from_scalar"
    | "wrap_in_array"
    | "null_omitted"
    | "enum_case"
    | "date_format";
}

/** One tool call in an execution's trace. */
export interface ToolCallRecord {
  id: number;
  /** `<namespace>.<tool>` (`client.<name>` for client tools). */
  tool: string;
  args: Json;
  outcome: CallOutcome;
  error?: ToolError;
  /** The result the program got, shortened; only when the program failed. */
  result?: Json;
  /** `result` is not the whole result. */
  result_truncated?: boolean;
  /** When the program made the call, in ms from the start of the execution. */
  started_ms: number;
  duration_ms: number;
  /** Answered from the session's journal without calling the tool. */
  replayed: boolean;
  /** The journal recorded this tool with other arguments here: the call ran live. */
  divergence?: string;
  redactions?: Redaction[];
  /** Values coerced to the tool's schemas; absent when none. */
  coercions?: Coercion[];
}

/** A client tool call the program waits for (answer it with `submitResults`). */
export interface PendingCall {
  id: number;
  /** The client tool's name as declared (without `client.`). */
  tool: string;
  args: Json;
}

/** A call that waits for a person's decision. */
export interface PendingApproval {
  /** What an approver decides under (`AirlockClient.decide`). */
  id: string;
  execution: string;
  principal: string;
  /** The call's id in the execution's trace. */
  call: number;
  tool: string;
  args: Json;
  excerpt?: string;
  line?: number;
  /** Milliseconds since the Unix epoch. */
  requested_ms: number;
  expires_ms: number;
}

export interface ExecutionStats {
  queue_ms: number;
  spawn_ms: number;
  run_ms: number;
  total_ms: number;
  worker_from_pool: boolean;
  compile_us?: number;
  engine_run_us?: number;
  heap_used_bytes?: number;
  peak_rss_bytes?: number;
}

export interface PeerInfo {
  uid: number;
  gid: number;
  pid: number | null;
}

/** The answer to an execution (also the `result` event of a stream). */
export interface ExecutionResponse {
  id: string;
  status: ExecutionStatus;
  /** The program's value; `null` when it failed. */
  result: Json;
  stdout: string;
  stderr: string;
  error?: ExecutionError;
  tool_calls: ToolCallRecord[];
  /** The session it ran in (a new one's id when the request said `"new"`). */
  session?: string;
  /** How many of `tool_calls` were answered from the session's journal. */
  replayed_calls: number;
  /** The interrupted execution this one resumed. */
  resumed_from?: string;
  /** With `status: "waiting"`: the client tool calls the program waits for. */
  pending_calls?: PendingCall[];
  /** With `status: "waiting"`: the calls that wait for an approver. */
  pending_approvals?: PendingApproval[];
  /** With `status: "waiting"`: the clock and seed it ran with. */
  determinism?: Determinism;
  stats: ExecutionStats;
  peer: PeerInfo;
  principal: string;
  redactions?: Redaction[];
  /** Things that did not stop the program but the agent should know. */
  warnings?: string[];
}

/** `202` answer to a detached execution (`AirlockClient.submit`). */
export interface SubmittedExecution {
  id: string;
  status: "queued";
  /** `/v1/executions/<id>` */
  location: string;
  /** `/v1/executions/<id>/events` */
  events: string;
}

/** An execution as the journal lists it (`GET /v1/executions`, sessions, restarted daemons). */
export interface ExecutionRecord {
  id: string;
  session: string;
  status: ExecutionRecordStatus;
  language: Language;
  replay: ReplayMode;
  principal?: string;
  started_ms: number;
  finished_ms?: number | null;
  replayed_calls: number;
  live_calls: number;
}

export type ExecutionRecordStatus =
  | "running"
  | "ok"
  | "error"
  | "timeout"
  | "cancelled"
  | "interrupted"
  | "resumed"
  | "waiting"
  | "expired";

/**
 * `GET /v1/executions/<id>`: the whole response once it ended (or while it waits), the output
 * and calls so far while a detached execution runs, `{ id, status: "running" }` for one a
 * streaming or waiting client follows, or the journal's row (an `interrupted` one).
 *
 * While a detached execution runs, its `tool_calls` are built from its events: each has its
 * `tool`, `outcome` and `duration_ms`, but `args` is `null` and `started_ms` 0 until it ends.
 */
export type ExecutionState = Partial<Omit<ExecutionResponse, "status">> &
  Partial<Omit<ExecutionRecord, "status">> & {
    id: string;
    status: ExecutionStatus | ExecutionRecordStatus;
  };

/** `DELETE /v1/executions/<id>`: `cancelling` for a running one, `cancelled` for a waiting one. */
export interface CancelAnswer {
  id: string;
  status: "cancelling" | "cancelled";
}

// ---------------------------------------------------------------------------------------------
// Events

export interface StartedEvent {
  event: "started";
  id: string;
  /** The session it runs in, when it runs in one. */
  session?: string;
}

export interface ConsoleEvent {
  event: "console";
  stream: "stdout" | "stderr";
  /** `log`, `info`, `debug`, `warn`, `error`. */
  level: string;
  text: string;
}

/** The program called `progress(value)`. */
export interface ProgressEvent {
  event: "progress";
  value: Json;
}

export interface ToolCallStartedEvent {
  event: "tool_call_started";
  id: number;
  tool: string;
}

/** A progress notification of a tool call in flight (MCP `notifications/progress`). */
export interface ToolProgressEvent {
  event: "tool_progress";
  id: number;
  tool: string;
  progress: number;
  total?: number;
  message?: string;
}

export interface ToolCallFinishedEvent {
  event: "tool_call_finished";
  id: number;
  tool: string;
  outcome: CallOutcome;
  duration_ms: number;
}

/** The last event: the whole response. */
export type ResultEvent = ExecutionResponse & { event: "result" };

/** One line of a streamed execution (`Accept: application/x-ndjson`). */
export type ExecutionEvent =
  | StartedEvent
  | ConsoleEvent
  | ProgressEvent
  | ToolCallStartedEvent
  | ToolProgressEvent
  | ToolCallFinishedEvent
  | ResultEvent;

/** An event of `GET /v1/executions/<id>/events`, numbered from 1. */
export type NumberedEvent = ExecutionEvent & { seq: number };

// ---------------------------------------------------------------------------------------------
// Sessions

export interface SessionSummary {
  id: string;
  principal?: string;
  created_ms: number;
  used_ms: number;
  /** Bytes of recorded results. */
  bytes: number;
  /** Recorded calls. */
  calls: number;
  clock_ms?: number;
}

/** A call a session's journal recorded. */
export interface RecordedCall {
  tool: string;
  args_hash: string;
  occurrence: number;
  state: "sent" | "ok" | "failed";
  bytes: number;
  sends: number;
  execution: string;
  updated_ms?: number;
}

/** `GET /v1/sessions/<id>`. */
export interface SessionDetail {
  session: SessionSummary;
  calls: RecordedCall[];
  executions: ExecutionRecord[];
}

// ---------------------------------------------------------------------------------------------
// Approvals

/** `POST /v1/approvals/<id>` answer. */
export interface ApprovalDecided {
  id: string;
  decision: ApprovalDecision;
  execution: string;
  status: string;
  [field: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Discovery

/** A source whose tools could not be listed (for example a server that does not start). */
export interface UnavailableSource {
  namespace: string;
  error: string;
}

/** `GET /v1/sdk`. */
export interface SdkTree {
  files: { path: string; bytes: number }[];
  /** How many tools the SDK describes. */
  tools: number;
  unavailable: UnavailableSource[];
}

/** `POST /v1/sdk`: the files that change for a request declaring these client tools. */
export interface ClientSdk {
  /** Path → text. */
  files: Record<string, string>;
  unavailable: UnavailableSource[];
}

/** A raw tool definition (`GET /v1/tools`). */
export interface ToolDefinition {
  namespace: string;
  name: string;
  description: string;
  input_schema: Json;
  [field: string]: unknown;
}

export interface ToolList {
  tools: ToolDefinition[];
  unavailable: UnavailableSource[];
}

export interface SearchResult {
  /** `<namespace>.<tool>` */
  tool: string;
  /** `tools.ns.tool({ … }): Promise<…>` */
  signature: string;
  summary: string;
  /** The SDK file with its types (`sdkFile(file)`). */
  file: string;
  score: number;
}

export interface SearchAnswer {
  query: string;
  results: SearchResult[];
  unavailable?: UnavailableSource[];
}

// ---------------------------------------------------------------------------------------------
// Health

/** `GET /v1/health` (the fields this package names; the daemon sends more). */
export interface Health {
  status: string;
  version: string;
  uptime_s: number;
  policy: string;
  policy_files?: string[];
  policy_generation?: number;
  journal?: { status: "ok" | "disabled" | "unavailable"; bytes?: number; error?: string };
  pool?: { target: number; idle: number; starting: number; [field: string]: Json | undefined };
  executions?: { running: number; total: number; [field: string]: Json | undefined };
  [field: string]: unknown;
}

/** `POST /v1/reload` answer (200 when in force, 422 when refused: both are returned). */
export interface ReloadReport {
  ok: boolean;
  [field: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Errors

/** Codes of `{ "error": { "code" } }` bodies. */
export type ApiErrorCode =
  | "bad_request"
  | "internal"
  | "invalid_json"
  | "invalid_timeout"
  | "journal_unavailable"
  | "conflict"
  | "method_not_allowed"
  | "not_admitted"
  | "not_found"
  | "not_permitted"
  | "program_too_large"
  | "rate_limited"
  | "request_too_large"
  | "shutting_down"
  | "too_many_waiting"
  | "host_not_allowed"
  | "origin_not_allowed"
  | "unsupported_media_type"
  | "journal_full"
  | "secret_in_code";

/** Every non-2xx answer's body. */
export interface ErrorBody {
  error: { code: ApiErrorCode; message: string; hint?: string };
}
