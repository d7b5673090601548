//! The call pipeline: every tool call a program makes goes through these stages, in this
//! order, and through nothing else.
//!
//! At arrival, in call order (so the execution's budget and the principal's rate are spent
//! the same way whenever the program runs), [`admit`]:
//! 1. **budget**: at most `max_tool_calls` per execution;
//! 2. **policy**: the principal's `allow`/`deny`;
//! 3. **readable arguments**: JSON the daemon can take (depth, surrogates), and an object;
//!    then, in a session, the **journal**: the call's key (tool, canonical arguments,
//!    occurrence) is taken now, in call order; a recorded result answers the call, which
//!    then skips 4-8 ([`crate::journal`]); then, for a sink, the
//!    **information flow**: its arguments against the untrusted results delivered so far
//!    ([`super::flow`]: a `deny` rule refuses it, `approve` makes it need an approval);
//!    then, for a tool the principal's `approve` patterns name or a flow an `approve` rule
//!    matched, the **approval**: the execution's decision on this call, or the call is held
//!    until there is one ([`super::approval`]);
//! 4. **rate**: the principal's `tool_calls_per_minute`, spent only by a call that would be
//!    made.
//!
//! Then concurrently with the execution's other calls, [`SourceCall::complete`]:
//! 5. **resolve**: namespace and tool (may start a lazily started server);
//! 6. **arguments**: the tool's input schema, so nothing reaches a service for a call that
//!    cannot be valid; first, where the source's `coerce` is `safe`, near misses (`"100"`
//!    for a number) are coerced to it ([`super::coercion`]) and recorded for the trace;
//! 7. **gate**: a permit of the source's `max_concurrent_calls`, and its `call_timeout_ms`
//!    as the call's deadline;
//! 8. **the source**: the adapter speaks its protocol;
//! 9. **redact and scan**: the secret values the call used are redacted, then the secret
//!    scanner runs over the answer (redact, or fail for `[secret_scanning] fail` sources);
//! 10. **size**: the answer must fit in one frame to the worker;
//! 11. **record** (a session's live call): recorded as sent just before 7, and its outcome
//!    (what the worker gets) after 10;
//! 12. **learn** (a live call's success, of a source that learns): the shape of what the
//!    worker gets, inferred after 9 (so never from a credential) and merged into the tool's
//!    learned type before the answer leaves the pipeline ([`crate::learned_types`]), so a
//!    program that fails on the value meets an SDK that already shows its type; a result
//!    that contradicts the tool's declared output schema counts as drift. Persisted in
//!    batches, and at once for a tool a program failed on.
//!
//! A call of a client-owned tool (`tools.client.<name>`, [`super::client`]) takes stage 1,
//! then its own checks in place of 2-4 (the declared tool and its schema: the agent's own
//! tool needs no grant and spends no rate) and is answered at arrival from the agent's
//! results, or held for them ([`Arrival::Held`]).
//!
//! A source that checks its results against a declared output schema (MCP `outputSchema`)
//! coerces a result that breaks it trivially in stage 8, under the same policy, and returns
//! the coercions in its answer; stage 9 undoes a result coercion whose value was a secret, so
//! it is redacted as the string it came as.
//!
//! The pipeline runs one way: a call is admitted ([`Admitted`]), settled once (refused,
//! replayed, answered by the agent, or made by its source, with everything the source learned
//! in its [`SourceAnswer`](crate::tools::SourceAnswer)), and its answer made from that one
//! settled outcome.
//!
//! The execution records what comes out (the trace with its coercions, the audit log).
//!
//! The rooms: [`arrival`] (stages 1-4, and the answers that need no source), [`source`]
//! (5-8), [`answer`] (9-12: what every call's answer passes before anyone sees it, from the
//! call's settled outcome), [`json`] (JSON text from the engine that the daemon cannot take).

mod answer;
mod arrival;
mod json;
mod source;

pub use answer::scan_client_answer;
pub use arrival::admit;
pub use json::{JsonLimit, unreadable_json_error};

use crate::agent_api::{Coercion, PendingCall, Redaction};
use crate::journal::SessionRun;
use crate::journal::store::CallKey;
use crate::learned_types::Learning;
use crate::rate_limiter::RateBucket;
use crate::secrets::scanner::SecretScanner;
use crate::tools::catalogue::CallerCatalogue;
use crate::tools::client::{self, WaitScope};
use crate::tools::{ToolError, ToolErrorCode, ToolRegistry};
use airlock_policy::{Principal, SecretScanning};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};

/// How long past its deadline the pipeline waits, by default, for a source that did not
/// answer by then itself (see [`CallGate::with_grace`]).
pub const DEADLINE_GRACE: Duration = Duration::from_millis(250);

/// A source's concurrency limit and call timeout, from its policy entry.
#[derive(Debug)]
pub struct CallGate {
    permits: Semaphore,
    timeout: Duration,
    grace: Duration,
}

impl CallGate {
    pub fn new(max_concurrent_calls: usize, call_timeout_ms: u64) -> CallGate {
        CallGate {
            permits: Semaphore::new(max_concurrent_calls),
            timeout: Duration::from_millis(call_timeout_ms),
            grace: DEADLINE_GRACE,
        }
    }

    /// How long past the deadline the source may take to end a call properly (an MCP source
    /// asks a server that missed a deadline whether it is still alive, so the next call does
    /// not meet a dead connection). The pipeline stops waiting after that regardless.
    pub fn with_grace(mut self, grace: Duration) -> CallGate {
        self.grace = grace;
        self
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Refuses further calls (the daemon stops the source).
    pub fn close(&self) {
        self.permits.close();
    }
}

/// What the calls of one execution share.
#[derive(Debug)]
pub struct CallScope {
    pub execution_id: String,
    pub principal: Arc<Principal>,
    pub registry: ToolRegistry,
    pub max_tool_calls: u32,
    /// The principal's `tool_calls_per_minute` bucket, shared by all its executions.
    pub rate: Option<Arc<RateBucket>>,
    pub scanner: SecretScanner,
    pub secret_scanning: SecretScanning,
    /// The agent's event stream, for tool progress (when it asked for a stream).
    pub events: Option<mpsc::Sender<crate::agent_api::ExecutionEvent>>,
    /// The session's journal, for an execution of a session.
    pub journal: Option<Arc<SessionRun>>,
    /// The request's client-owned tools and the answers they have so far.
    pub client: Option<Arc<WaitScope>>,
    /// The principal's catalogue under the execution's generation, for the daemon's built-in
    /// tools (`tools.airlock.*`): every call's context carries it.
    pub catalogue: CallerCatalogue,
    /// What the generation learns from results (stage 12).
    pub learning: Learning,
    /// The untrusted text this execution delivered, when the policy has flow settings:
    /// recorded by the run loop as it delivers results, read at each call's arrival (both in
    /// the run loop's task, so the lock is never contended).
    pub flow: Option<std::sync::Mutex<super::flow::FlowLedger>>,
}

/// One call as the worker sent it.
#[derive(Debug, Clone)]
pub struct CallRequest {
    pub id: u32,
    /// `namespace.name` exactly as the program wrote it.
    pub tool: String,
    pub args_json: String,
}

/// A call that passed (or failed) the stages at arrival.
#[derive(Debug)]
pub struct Admitted {
    scope: Arc<CallScope>,
    id: u32,
    tool: String,
    /// The arguments as the trace shows them (`null` when they were not readable).
    args: Value,
    /// What the stages at arrival made of it.
    admission: Admission,
    /// The untrusted text found in its arguments (for the trace).
    flows: Vec<crate::agent_api::Flow>,
}

/// What the stages at arrival made of a call.
#[derive(Debug)]
enum Admission {
    /// The first stage that refused it, and why.
    Refused(ToolError),
    /// A client tool's call the agent has answered.
    Client(ClientReply),
    /// A client tool's call the agent has not answered yet: held.
    ClientPending,
    /// A call of a session whose success the journal recorded: that answers it (the
    /// recorded result, and the clock it was recorded at).
    Replay { result: String, clock_ms: u64 },
    /// A call that needs an approver's decision and has none yet: held (with the flow that
    /// made it wait, if one did).
    AwaitsApproval(Option<String>),
    /// A call to make: its source's, with its place in the session's journal if it runs in
    /// one.
    Live(Option<JournalEntry>),
}

/// A live call's place in the session's journal (its lookup said: make it).
#[derive(Debug)]
struct JournalEntry {
    key: CallKey,
    /// What the source passes on ([`crate::tools::CallContext::idempotency_key`]).
    idempotency_key: String,
    /// The journal recorded the tool at this point with other arguments.
    divergence: Option<String>,
}

/// A client tool's answer, as the call takes it.
#[derive(Debug)]
enum ClientReply {
    /// Given with the request: scanned and encoded on the way (stages 9 and 10), and the
    /// clock then.
    Given(Result<Value, ToolError>, u64),
    /// Kept by a waiting execution: scanned and encoded when it was posted.
    Kept(client::KeptAnswer),
}

/// A call after [`Admitted::answer_at_arrival`].
#[derive(Debug)]
pub enum Arrival {
    /// Refused, replayed, or answered by the agent: its answer.
    Answered(CallAnswer),
    /// It needs its source: [`SourceCall::complete`].
    ToSource(SourceCall),
    /// A call that waits for someone outside the daemon, unanswered.
    Held(Held),
}

/// A call that passed the stages at arrival and needs its source (stages 5-12).
#[derive(Debug)]
pub struct SourceCall {
    scope: Arc<CallScope>,
    id: u32,
    tool: String,
    args: Value,
    journal: Option<JournalEntry>,
}

/// A call that waits.
#[derive(Debug, Clone)]
pub enum Held {
    /// For the agent's answer (a client-owned tool).
    Client(PendingCall),
    /// For an approver's decision; `flow` says which information flow made it wait, if one
    /// did.
    Approval {
        id: u32,
        tool: String,
        args: Value,
        flow: Option<String>,
    },
}

/// What the pipeline hands back for one call.
#[derive(Debug)]
pub struct CallAnswer {
    pub id: u32,
    /// The result as JSON text for the worker, or why the call failed.
    pub result: Result<String, ToolError>,
    /// What was redacted from the answer (and from its progress) before anyone saw it.
    pub redactions: Vec<Redaction>,
    /// Values coerced to the tool's schemas: in its arguments, and in its result.
    pub coercions: Vec<Coercion>,
    /// The time the answer was made (the program's clock moves to it when it gets it); for a
    /// replayed call, the time it was recorded at.
    pub clock_ms: u64,
    /// Answered from the session's journal.
    pub replayed: bool,
    /// A live call where the journal recorded the tool with other arguments.
    pub divergence: Option<String>,
    /// The outcome could not be recorded in the journal (the response says so).
    pub warning: Option<String>,
}

impl Admitted {
    /// The arguments as the trace shows them.
    pub fn args(&self) -> &Value {
        &self.args
    }

    /// The untrusted text found in its arguments at arrival.
    pub fn take_flows(&mut self) -> Vec<crate::agent_api::Flow> {
        std::mem::take(&mut self.flows)
    }
}

/// The answer for call `id` whose task failed (a panic in a source): an internal error the
/// program can catch.
pub fn failed(id: u32) -> CallAnswer {
    CallAnswer {
        id,
        result: Err(ToolError::new(
            ToolErrorCode::Internal,
            "the daemon failed while making this call; nothing more is known of its outcome",
        )
        .with_hint(
            "this is a daemon or tool source problem; the operator should check the airlockd log",
        )),
        redactions: Vec::new(),
        coercions: Vec::new(),
        clock_ms: crate::determinism::now_ms(),
        replayed: false,
        divergence: None,
        warning: None,
    }
}
