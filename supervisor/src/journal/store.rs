//! What the journal keeps, behind a small trait: SQLite on the daemon's own disk is the
//! embedded default ([`super::sqlite`]); a shared database for several hosts would be another
//! implementation of [`JournalStore`].
//!
//! Every method is synchronous and short (one indexed statement or one small transaction);
//! the journal calls them inline.

use serde::{Deserialize, Serialize};

/// Why the store could not do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("journal {path}: {message}")]
    Sqlite { path: String, message: String },
    #[error("journal log {path}: {message}")]
    Log { path: String, message: String },
    /// The state directory cannot be used (the message names it and what to do).
    #[error("{0}")]
    Directory(String),
    /// The write would pass a bound (not a failure of the journal: it works, and is full for
    /// this principal or session).
    #[error("{0}")]
    Full(Full),
}

/// The bounds every write to the journal is held to (`[journal]`): what it keeps counts as
/// `super::usage` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Everything the journal keeps, all principals together (`max_size`).
    pub total_bytes: u64,
    /// Everything kept for one principal (`max_principal_size`, at most `max_size`).
    pub principal_bytes: u64,
    /// Everything kept in one session (`max_session_size`).
    pub session_bytes: u64,
    /// Sessions one principal may hold (`max_sessions`).
    pub principal_sessions: u64,
}

/// A bounded write: the bounds, and the sessions that may not be evicted to make room (those
/// with an execution running, or calls still settling).
#[derive(Debug, Clone, Copy)]
pub struct Room<'a> {
    pub bounds: Bounds,
    pub busy: &'a [String],
}

/// Which bound a write would pass. Each names its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    #[error("principal `{principal}` holds {held} sessions, its limit ([journal] max_sessions)")]
    Sessions { principal: String, held: u64 },
    #[error(
        "principal `{principal}` has {held} executions waiting, its limit (limits.max_waiting_executions)"
    )]
    Waiting { principal: String, held: u64 },
    #[error(
        "the session would keep {would} bytes in the journal, over its limit of {limit} ([journal] max_session_size)"
    )]
    Session { would: u64, limit: u64 },
    #[error(
        "principal `{principal}` would keep {would} bytes in the journal, over its limit of {limit} ([journal] max_principal_size)"
    )]
    Principal {
        principal: String,
        would: u64,
        limit: u64,
    },
    #[error("the journal would keep {would} bytes, over its limit of {limit} ([journal] max_size)")]
    Total { would: u64, limit: u64 },
}

/// A client tool's answer as a waiting execution keeps it: scanned once, when it was posted,
/// and kept as the program gets it, so a re-run hands it on as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerRow {
    pub call: u32,
    pub tool: String,
    /// The result's JSON text, or the error (JSON of a `ToolError`).
    pub result: Result<String, String>,
    /// What the scan redacted (JSON array of `Redaction`s).
    pub redactions: String,
    pub clock_ms: u64,
}

/// One session: a principal's run of executions whose tool calls are recorded together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRow {
    pub id: String,
    pub principal: String,
    pub created_ms: u64,
    pub used_ms: u64,
    /// The clock and seed its executions are replayed with.
    pub clock_ms: u64,
    #[serde(skip)]
    pub seed: [u8; 32],
    /// Bytes the journal keeps for it: its calls' records and results, its executions' code,
    /// kept responses, waits, answers and approvals (`super::usage`).
    pub bytes: u64,
    /// Recorded calls (computed when read).
    pub calls: u64,
}

/// Where a call is in the journal, whatever order it arrived in: the tool, the SHA-256 of
/// its RFC 8785 canonical arguments, and how many calls with that tool and those arguments
/// the execution made before it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallKey {
    pub tool: String,
    pub args_hash: String,
    pub occurrence: u32,
}

/// A recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRow {
    pub state: CallState,
    /// Whether the tool only reads (`"replay": "writes"` runs such calls again).
    pub read_only: bool,
    /// How many times it was sent upstream.
    pub sends: u32,
    /// The attempt its next send is (part of its idempotency key): 0 until an answer came,
    /// one more after each answer (a success, or a failure the tool reported), the same after
    /// a send that got none. A call sent again because its answer never came (the daemon died,
    /// a timeout) keeps its key; a call made again on purpose (`"replay": "none"`, a retry of
    /// a reported failure) gets a new one.
    pub attempt: u32,
}

/// What is known of a recorded call's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallState {
    /// Sent upstream, no outcome recorded (in flight, or the daemon died meanwhile).
    Sent,
    /// Succeeded: the result as the worker got it (after the secret scan) and the clock then.
    Ok { result: String, clock_ms: u64 },
    /// Failed (failed calls are never replayed).
    Failed,
}

/// What the intent log ([`super::log`]) holds until it is folded into the store: a call's
/// "sent" (before it is made) and its outcome (after).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogRecord {
    /// The call is about to be sent upstream. A call recorded before (failed, sent and never
    /// answered, or run again for fresh data) is sent again: its old result goes.
    Sent {
        session: String,
        key: CallKey,
        execution: String,
        read_only: bool,
        at_ms: u64,
    },
    /// A sent call's outcome.
    Outcome {
        session: String,
        key: CallKey,
        outcome: Outcome,
        at_ms: u64,
    },
}

/// How a sent call ended. (Variants are only ever added at the end: the intent log holds
/// them by index, and a log a daemon of the previous version left is read at start.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The result as the worker got it (after the secret scan), and the clock then.
    Ok { result: String, clock_ms: u64 },
    /// The tool answered that it failed: a retry is a new attempt, with a new idempotency key.
    Failed,
    /// It failed without an answer the program got (no answer in time, the source
    /// unreachable, an answer the daemon refused), so it may have taken effect: a retry goes
    /// out with the same idempotency key.
    Unsettled,
}

impl Outcome {
    /// Whether the call's next send is a new attempt ([`CallRow::attempt`]).
    pub fn answered(&self) -> bool {
        !matches!(self, Outcome::Unsettled)
    }
}

/// A recorded call as `airlock session show` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSummary {
    pub tool: String,
    pub args_hash: String,
    pub occurrence: u32,
    /// `sent`, `ok` or `failed`.
    pub state: String,
    pub bytes: u64,
    pub sends: u32,
    pub execution: String,
    pub updated_ms: u64,
}

/// Where an execution of a session stands. The journal keeps it as these lower-case words
/// (the `status` column; journals of earlier versions hold the same words), and the agent
/// reads the same words (`GET /v1/executions?status=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionState {
    /// It runs now (a daemon that stops with it running leaves it so until its next start).
    Running,
    Ok,
    Error,
    Timeout,
    Cancelled,
    /// The daemon stopped while it ran: it can be resumed by replay.
    Interrupted,
    /// An interrupted one that was resumed (`resumed_by` names the execution that did).
    Resumed,
    /// It waits for its client's answers or an approver's decision, holding no worker.
    Waiting,
    /// It waited past `limits.waiting_ttl`.
    Expired,
}

impl ExecutionState {
    /// Every state, in the order listings name them.
    pub const ALL: [ExecutionState; 9] = [
        ExecutionState::Running,
        ExecutionState::Ok,
        ExecutionState::Error,
        ExecutionState::Timeout,
        ExecutionState::Cancelled,
        ExecutionState::Interrupted,
        ExecutionState::Resumed,
        ExecutionState::Waiting,
        ExecutionState::Expired,
    ];

    /// The word the journal keeps and the agent reads.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionState::Running => "running",
            ExecutionState::Ok => "ok",
            ExecutionState::Error => "error",
            ExecutionState::Timeout => "timeout",
            ExecutionState::Cancelled => "cancelled",
            ExecutionState::Interrupted => "interrupted",
            ExecutionState::Resumed => "resumed",
            ExecutionState::Waiting => "waiting",
            ExecutionState::Expired => "expired",
        }
    }

    /// The state a word names, if it names one.
    pub fn parse(word: &str) -> Option<ExecutionState> {
        ExecutionState::ALL
            .into_iter()
            .find(|state| state.as_str() == word)
    }

    /// The state an execution that answered `status` ended in. (A response is never `queued`
    /// or `running`: those are what a snapshot of a detached one says while it runs.)
    pub fn ended_as(status: crate::agent_api::Status) -> ExecutionState {
        use crate::agent_api::Status;
        match status {
            Status::Ok => ExecutionState::Ok,
            Status::Error => ExecutionState::Error,
            Status::Timeout => ExecutionState::Timeout,
            Status::Cancelled => ExecutionState::Cancelled,
            Status::Waiting => ExecutionState::Waiting,
            Status::Queued | Status::Running => ExecutionState::Running,
        }
    }

    /// Whether nothing runs the execution's code again: every state but `running` (resumed
    /// after a restart as `interrupted`), `waiting` and `interrupted`.
    pub fn has_ended(self) -> bool {
        !matches!(
            self,
            ExecutionState::Running | ExecutionState::Waiting | ExecutionState::Interrupted
        )
    }
}

impl std::fmt::Display for ExecutionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An execution of a session, kept so one cut off by a restart can be found and resumed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutionRow {
    pub id: String,
    pub session: String,
    pub principal: String,
    pub status: ExecutionState,
    pub language: String,
    #[serde(skip)]
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The replay mode it ran with.
    pub replay: String,
    pub started_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<u64>,
    pub replayed_calls: u32,
    pub live_calls: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_by: Option<String>,
}

/// An execution that waits for its client's tools: what it needs to run again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingRow {
    pub execution: String,
    pub principal: String,
    /// The request's `client_tools` (JSON).
    pub client_tools: String,
    /// The answers so far (JSON of `crate::tools::client::ClientAnswers`).
    pub answers: String,
    /// The calls it waits for (JSON array of `PendingCall`).
    pub pending: String,
    /// Who started it (JSON `PeerInfo`): a run that goes on without its client (after an
    /// approval) runs as it.
    pub peer: String,
    /// The clock and seed it runs with, every time.
    pub clock_ms: u64,
    pub seed: [u8; 32],
    pub expires_ms: u64,
}

/// A call that waits (or waited) for an approver's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRow {
    pub id: String,
    pub execution: String,
    /// Whose execution it is.
    pub principal: String,
    pub call: u32,
    pub tool: String,
    /// The arguments as the program sent them, scanned (JSON), and their hash.
    pub args: String,
    pub args_hash: String,
    pub excerpt: Option<String>,
    pub line: Option<u32>,
    pub requested_ms: u64,
    pub expires_ms: u64,
    /// `approved`, `denied` or `expired`; `None` while it waits.
    pub decision: Option<String>,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
    pub decided_ms: Option<u64>,
}

/// The store of sessions, their recorded calls and their executions.
pub trait JournalStore: Send + Sync + std::fmt::Debug {
    /// Adds a session, within `room` (its principal's `max_sessions` and bytes).
    fn create_session(&self, session: &SessionRow, room: Room<'_>) -> Result<(), StoreError>;
    fn session(&self, id: &str) -> Result<Option<SessionRow>, StoreError>;
    /// A principal's sessions, most recently used first.
    fn sessions(&self, principal: &str) -> Result<Vec<SessionRow>, StoreError>;
    /// Marks a session used now; with `determinism`, its executions replay that clock and seed
    /// from now on (a run with `"replay": "none"` starts afresh).
    fn touch_session(
        &self,
        id: &str,
        now_ms: u64,
        determinism: Option<(u64, [u8; 32])>,
    ) -> Result<(), StoreError>;
    /// Deletes a session with everything recorded under it; false if there was none.
    fn delete_session(&self, id: &str) -> Result<bool, StoreError>;

    /// The call recorded under `key`.
    fn lookup(&self, session: &str, key: &CallKey) -> Result<Option<CallRow>, StoreError>;
    /// Every call recorded in `session` (an execution reads them at once when they are few
    /// enough, instead of one lookup per call).
    fn records(&self, session: &str) -> Result<Vec<(CallKey, CallRow)>, StoreError>;
    /// Applies records of the intent log ([`super::log`]), in order, in one transaction.
    /// Records of a session that no longer exists are dropped, and so is a result that does
    /// not fit in `room` (its call stays `sent`: a re-run makes it again, with its key).
    fn apply(&self, records: &[LogRecord], room: Room<'_>) -> Result<(), StoreError>;
    fn calls(&self, session: &str) -> Result<Vec<CallSummary>, StoreError>;

    /// The value `session`'s store keeps under `key`, as JSON text.
    fn store_value(&self, session: &str, key: &str) -> Result<Option<String>, StoreError>;
    /// Keeps `value` under `key` in `session`'s store (replacing what it kept there), unless
    /// that would pass the store's bounds ([`super::session_store`]): then the bound.
    fn set_store_value(
        &self,
        session: &str,
        key: &str,
        value: &str,
        now_ms: u64,
    ) -> Result<Result<(), super::session_store::StoreBound>, StoreError>;
    /// Every value `session`'s store keeps, by key.
    fn store_values(&self, session: &str) -> Result<Vec<(String, String)>, StoreError>;

    /// Adds an execution (its code counts), within `room`.
    fn begin_execution(&self, execution: &ExecutionRow, room: Room<'_>) -> Result<(), StoreError>;
    /// Records how an execution ended, and the calls (tool, arguments hash) it made in call
    /// order: its session's last run, which the next run is compared with (only the session's
    /// last finished execution keeps its order).
    fn finish_execution(
        &self,
        id: &str,
        status: ExecutionState,
        finished_ms: u64,
        replayed: u32,
        live: u32,
        call_order: &[(String, String)],
    ) -> Result<(), StoreError>;
    /// The call order of `session`'s last finished execution (empty if none).
    fn last_call_order(&self, session: &str) -> Result<Vec<(String, String)>, StoreError>;
    fn mark_resumed(&self, id: &str, by: &str) -> Result<(), StoreError>;
    fn execution(&self, id: &str) -> Result<Option<ExecutionRow>, StoreError>;
    /// A principal's executions (with `status`, only those), newest first, at most `limit`.
    fn executions(
        &self,
        principal: &str,
        status: Option<ExecutionState>,
        limit: u32,
    ) -> Result<Vec<ExecutionRow>, StoreError>;
    /// At start: every execution still `running` was cut off by the daemon's end. One that
    /// was running again with its client's answers ([`WaitingRow`]) waits again; the others
    /// are `interrupted`. Returns how many were interrupted.
    fn interrupt_running(&self) -> Result<u64, StoreError>;

    /// Keeps (or replaces) what a waiting execution needs to go on; its execution row says
    /// `waiting`. Within `room`, and refused when its principal has `max_waiting` executions
    /// waiting already (this one not counted).
    fn save_waiting(
        &self,
        waiting: &WaitingRow,
        max_waiting: u32,
        room: Room<'_>,
    ) -> Result<(), StoreError>;
    fn waiting(&self, id: &str) -> Result<Option<WaitingRow>, StoreError>;
    /// Takes a waiting execution to run it again with its kept answers and `answers` (its
    /// status becomes `running`); false when it was not waiting (another request took it
    /// first, or it ended). Answers that do not fit in `room` are refused, and it waits on.
    fn claim_waiting(
        &self,
        id: &str,
        answers: &[AnswerRow],
        room: Room<'_>,
    ) -> Result<bool, StoreError>;
    /// The answers kept for waiting execution `id`, by call.
    fn answers(&self, id: &str) -> Result<Vec<AnswerRow>, StoreError>;
    /// The calls of waiting execution `id` that have an answer (call id, tool).
    fn answered(&self, id: &str) -> Result<Vec<(u32, String)>, StoreError>;
    /// Forgets what an execution that no longer waits kept.
    fn drop_waiting(&self, id: &str) -> Result<(), StoreError>;
    /// How many of `principal`'s executions wait now.
    fn count_waiting(&self, principal: &str) -> Result<u64, StoreError>;
    /// How many executions wait now, and how many approvals wait for a decision (all
    /// principals): the `/metrics` gauges.
    fn waiting_totals(&self) -> Result<(u64, u64), StoreError>;
    /// Ends the waiting executions whose time ran out before `now_ms` (status `expired`), and
    /// forgets kept responses whose time ran out; returns the ids of the executions ended.
    fn expire_waiting(&self, now_ms: u64) -> Result<Vec<String>, StoreError>;
    /// Keeps the response a waiting or detached execution answered (JSON) and its events
    /// (NDJSON), until `expires_ms`.
    fn save_response(
        &self,
        id: &str,
        response: &str,
        events: &str,
        expires_ms: u64,
        room: Room<'_>,
    ) -> Result<(), StoreError>;
    /// The kept response of execution `id` and its events.
    fn response(&self, id: &str) -> Result<Option<(String, String)>, StoreError>;
    /// Adds the approvals a waiting execution asks for; one already asked for the same call
    /// (execution, call id, tool and arguments) is kept as it is. Returns the execution's
    /// approvals for those calls, as stored.
    fn ask_approvals(&self, asked: &[ApprovalRow]) -> Result<Vec<ApprovalRow>, StoreError>;
    fn approval(&self, id: &str) -> Result<Option<ApprovalRow>, StoreError>;
    /// Every approval asked for by execution `execution`.
    fn approvals_of(&self, execution: &str) -> Result<Vec<ApprovalRow>, StoreError>;
    /// The approvals that wait for a decision (of `principal`'s executions only, if given),
    /// oldest first.
    fn undecided_approvals(&self, principal: Option<&str>) -> Result<Vec<ApprovalRow>, StoreError>;
    /// Records a decision on an approval that waits; false if it had one already.
    fn decide_approval(
        &self,
        id: &str,
        decision: &str,
        by: Option<&str>,
        reason: Option<&str>,
        now_ms: u64,
    ) -> Result<bool, StoreError>;
    /// Decides `expired` every approval that waited past its time; returns them.
    fn expire_approvals(&self, now_ms: u64) -> Result<Vec<ApprovalRow>, StoreError>;
    /// Ends waiting execution `id` with `status` (`cancelled`); false if it was not waiting.
    fn end_waiting(
        &self,
        id: &str,
        status: ExecutionState,
        now_ms: u64,
    ) -> Result<bool, StoreError>;

    /// Deletes sessions unused since `unused_before_ms`; then, of each principal over its
    /// bound, its own least recently used sessions until it fits; then, while everything
    /// together is over `max_size`, those of the principal keeping the most. Never one in
    /// `room.busy` or with an execution that waits. Returns the ids deleted.
    fn evict(&self, unused_before_ms: u64, room: Room<'_>) -> Result<Vec<String>, StoreError>;
    /// How many sessions `principal` holds, and the bytes the journal keeps for it.
    fn usage(&self, principal: &str) -> Result<(u64, u64), StoreError>;
    /// Moves what was written since the last checkpoint into the main file (SQLite's WAL) and
    /// empties the log, off the path of each call: what was deleted or replaced is then gone
    /// from the log too.
    fn checkpoint(&self) -> Result<(), StoreError>;
    /// Bytes the journal takes on disk (its database pages).
    fn size_bytes(&self) -> Result<u64, StoreError>;
}
