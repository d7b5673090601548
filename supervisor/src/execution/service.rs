//! The execution service: what every front door (the HTTP API today, an MCP facade later)
//! hands a program to. [`ExecutionService::submit`] admits it (size, timeout, the principal's
//! rate), waits for a slot, and starts it under the generation in force (in the task of the
//! door that waits for its answer, or in one of its own once nobody does); the
//! finished execution is counted in the metrics and written to the audit log here, not by the
//! door, so every door gets the same record.

use super::attached::Started;
use super::plan::{Plan, SessionPlan, limits, output_budget};
use super::registry::{CancelError, EventLog, LiveExecutions};
use super::slots::Slots;
use super::waiting::client_request;
use crate::agent_api::{
    ExecutionEvent, ExecutionRequest, ExecutionResponse, NEW_SESSION, PeerInfo, ReplayMode,
    RequestLanguage,
};
use crate::audit_log::{AuditLog, CodeHash, ExecutionRecord};
use crate::generation::PolicyGeneration;
use crate::journal::store::{ExecutionRow, ExecutionState, SessionRow};
use crate::journal::{Journal, JournalState, SessionError, SessionRun};
use crate::metrics::Metrics;
use crate::rate_limiter::{RateBucket, RateKind, RateLimiter};
use crate::tools::approval::Decisions;
use crate::tools::client::{ClientAnswers, ClientTools, ClientToolsError, WaitScope};
use airlock_policy::Principal;
use airlock_proto::Determinism;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Admission, slots, ids, rates, metrics, the audit trail and the live executions.
#[derive(Debug)]
pub struct ExecutionService {
    /// `max_concurrent_executions`, shared fairly between principals.
    pub(super) slots: Arc<Slots>,
    next_id: AtomicU64,
    pub(super) executions_total: AtomicU64,
    /// Per-principal execution and tool-call rates.
    pub rates: RateLimiter,
    pub metrics: Metrics,
    /// The audit trail (`[audit]`): recording never waits.
    pub audit: AuditLog,
    /// Executions that have started and not yet ended, by id.
    pub live: LiveExecutions,
    /// Sessions and their replay journal (`[journal]`).
    pub journal: JournalState,
    /// The tasks of detached executions (their runs and event-log writers): no connection
    /// holds them, so the daemon drains them itself when it stops.
    detached: std::sync::Mutex<tokio::task::JoinSet<()>>,
}

/// One program, from one admitted peer.
#[derive(Debug)]
pub struct Submission {
    pub request: ExecutionRequest,
    pub peer: PeerInfo,
    pub principal: Arc<Principal>,
    /// The generation the request was admitted under; the execution keeps it to its end.
    pub generation: Arc<PolicyGeneration>,
    /// Where its events go, for a client that streams them (its closing stops the program).
    pub events: Option<mpsc::Sender<ExecutionEvent>>,
    /// The interrupted execution this one resumes (set by [`ExecutionService::resume`]).
    pub resumed_from: Option<String>,
}

/// Why a program was not started. Each says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("the program is {size} bytes; the limit is {limit} bytes")]
    ProgramTooLarge { size: usize, limit: u64 },
    #[error(
        "timeout_ms must be between 1 and {max} (the policy's limits.max_timeout_ms), got {got}"
    )]
    InvalidTimeout { got: u64, max: u64 },
    #[error(
        "max_output_tokens must be between 1 and {max} (the policy's limits.max_output_tokens), got {got}"
    )]
    InvalidOutputBudget { got: u64, max: u64 },
    #[error(
        "principal `{principal}` may start {per_minute} executions per minute and has used them"
    )]
    RateLimited {
        principal: String,
        per_minute: u32,
        /// Whole seconds until the next one is allowed (at least 1).
        retry_after_s: u64,
    },
    #[error(
        "principal `{principal}` has {running} executions running and {max_queued} waiting for a slot, its limit (limits.max_queued_executions)"
    )]
    QueueFull {
        principal: String,
        running: usize,
        max_queued: u32,
    },
    #[error("the daemon is shutting down and accepts no new executions")]
    ShuttingDown,
    #[error("{0}")]
    Session(#[from] SessionError),
    #[error("there is no execution `{0}` of yours in the journal")]
    UnknownExecution(String),
    #[error(
        "execution `{id}` is {status}, not interrupted: only an interrupted execution can be resumed"
    )]
    NotInterrupted { id: String, status: ExecutionState },
    #[error("{0}")]
    ClientTools(#[from] ClientToolsError),
    #[error(
        "principal `{principal}` has {max} executions waiting or detached, its limit (limits.max_waiting_executions)"
    )]
    TooManyWaiting { principal: String, max: u32 },
    #[error("there is no waiting execution `{0}` of yours")]
    UnknownWaiting(String),
    #[error("execution `{id}` is {status}, not waiting for client tool results")]
    NotWaiting { id: String, status: ExecutionState },
    #[error("the execution's task failed: {0}")]
    Internal(String),
    #[error("{what} need the journal, and {why}")]
    NeedsJournal { what: &'static str, why: String },
    #[error(
        "line {line} of the program holds what looks like a secret (rule `{rule}`), and an execution in a session keeps its code in the journal"
    )]
    SecretInCode { rule: String, line: usize },
}

impl SubmitError {
    /// What the agent can do about it.
    pub fn hint(&self) -> String {
        match self {
            SubmitError::ProgramTooLarge { .. } => {
                "send a smaller program; keep data in tool calls, not in the source".into()
            }
            SubmitError::InvalidTimeout { .. } => {
                "leave timeout_ms out for the policy's default, or ask for less".into()
            }
            SubmitError::InvalidOutputBudget { .. } => {
                "leave max_output_tokens out for the policy's budget, or ask for less; keep large values with store.set in a session and read them in pieces".into()
            }
            SubmitError::RateLimited { retry_after_s, .. } => format!(
                "retry in {retry_after_s} s, or do more per program; the operator sets principal.executions_per_minute"
            ),
            SubmitError::QueueFull { .. } => format!(
                "retry in {QUEUE_FULL_RETRY_S} s, once one of your executions has ended; cancel those you no longer need (DELETE /v1/executions/<id>)"
            ),
            SubmitError::ShuttingDown => "retry once the daemon is back".into(),
            SubmitError::Session(e) => e.hint().into(),
            SubmitError::UnknownExecution(_) => {
                "GET /v1/executions?status=interrupted lists the executions you can resume".into()
            }
            SubmitError::NotInterrupted { .. } => {
                "to run the code again, send it in the same session: recorded calls are replayed"
                    .into()
            }
            SubmitError::ClientTools(e) => e.hint().into(),
            SubmitError::TooManyWaiting { .. } => {
                "answer or cancel (DELETE /v1/executions/<id>) the executions that wait, or use the stateless form (client_results), which keeps nothing"
                    .into()
            }
            SubmitError::UnknownWaiting(_) => {
                "the id is the `id` of a response with status \"waiting\"; GET /v1/executions?status=waiting lists yours"
                    .into()
            }
            SubmitError::NotWaiting {
                status: ExecutionState::Running,
                ..
            } => {
                "its answers are being run now (another request posted them); wait for that response".into()
            }
            SubmitError::NotWaiting {
                status: ExecutionState::Expired,
                ..
            } => {
                "it waited past limits.waiting_ttl; send the program again".into()
            }
            SubmitError::NotWaiting { .. } => {
                "it has ended; GET /v1/executions/<id> shows how".into()
            }
            SubmitError::Internal(_) => {
                "this is a daemon problem; the operator should check the airlockd log".into()
            }
            SubmitError::NeedsJournal { .. } => {
                "wait for the response instead (leave \"wait\" out), or ask the operator to enable [journal]".into()
            }
            SubmitError::SecretInCode { .. } => {
                "take the secret out of the program: credentials belong in the daemon's policy, which gives them to the tools that need them; a run outside a session (no \"session\", no waiting client tools, no \"wait\": false) keeps no code".into()
            }
        }
    }
}

/// Refuses code that holds what the generation's scanner takes for a secret (a known
/// secret's value in any of its forms, or a shape rule's match), naming the first one's rule
/// and line, never its text.
fn refuse_secrets_in_code(generation: &PolicyGeneration, code: &str) -> Result<(), SubmitError> {
    let (_, findings) = generation.scanner.scan_text(code);
    match findings.first() {
        None => Ok(()),
        Some(finding) => Err(SubmitError::SecretInCode {
            rule: finding.rule.clone(),
            line: 1 + code
                .get(..finding.location.start)
                .map_or(0, |before| before.matches('\n').count()),
        }),
    }
}

impl ExecutionService {
    pub fn new(
        max_concurrent_executions: usize,
        audit: AuditLog,
        journal: JournalState,
    ) -> ExecutionService {
        ExecutionService {
            slots: Arc::new(Slots::new(max_concurrent_executions)),
            next_id: AtomicU64::new(1),
            executions_total: AtomicU64::new(0),
            rates: RateLimiter::default(),
            metrics: Metrics::default(),
            audit,
            live: LiveExecutions::default(),
            journal,
            detached: std::sync::Mutex::new(tokio::task::JoinSet::new()),
        }
    }

    /// Admits a program and starts it. Waits for a free slot (`max_concurrent_executions`).
    pub async fn submit(self: &Arc<Self>, submission: Submission) -> Result<Started, SubmitError> {
        let Submission {
            mut request,
            peer,
            principal,
            generation,
            events,
            resumed_from,
        } = submission;
        let limits = limits(&principal, &request.code, request.timeout_ms)?;
        let max_output_tokens = output_budget(&principal, request.max_output_tokens)?;
        // Client-owned tools: checked before anything is spent.
        let client = client_request(&mut request)?;
        let stateful_client = client.as_ref().is_some_and(|c| !c.stateless);
        let detached = request.wait == Some(false);
        if detached && let Err(e) = self.journal.journal() {
            return Err(SubmitError::NeedsJournal {
                what: "detached executions (\"wait\": false)",
                why: e.to_string(),
            });
        }
        let place = if stateful_client || detached {
            self.waiting_room(&principal, detached)?
        } else {
            None
        };
        // A principal whose calls may need an approver's yes (its `approve` patterns, or a
        // `[[flow]]` rule that asks one): any of its executions may wait for one, so each runs
        // in a session and keeps its wait (without the journal, such a call is denied).
        let approvals = (!principal.approve.is_empty()
            || generation.policy.information_flow.asks_approval())
            && self.journal.journal().is_ok();
        let keeps_waiting = stateful_client || approvals;
        let client = match client {
            None if approvals => Some(WaitScope {
                tools: ClientTools::new(Vec::new())?,
                answers: ClientAnswers::default(),
                kept: Default::default(),
                stateless: false,
                decisions: Decisions::default(),
            }),
            other => other,
        };
        // The session (its clock and seed), before a rate is spent: a session that does not
        // exist is the caller's mistake, not an execution. An execution that may wait keeps
        // its calls in one (a new one unless the request names one), so that its re-runs
        // replay them.
        let replay = request.replay.unwrap_or_default();
        let provisional_session =
            approvals && request.session.is_none() && !stateful_client && !detached;
        let wanted = match (&request.session, keeps_waiting || detached) {
            (Some(wanted), _) => Some(wanted.as_str()),
            (None, true) => Some(NEW_SESSION),
            (None, false) => None,
        };
        // What is kept is scanned first: the journal holds a session's code while it may run
        // again (waiting, interrupted), and a secret pasted into it must not sit on disk.
        if wanted.is_some() {
            refuse_secrets_in_code(&generation, &request.code)?;
        }
        let session = match wanted {
            None => None,
            Some(wanted) => Some(self.open_session(wanted, &principal.name, replay)?),
        };
        self.take_execution_rate(&principal)?;
        // The clock and seed a stateless request sent back win over its session's.
        let given = request.determinism.map(|d| Determinism {
            clock_ms: d.clock_ms,
            seed: d.seed,
        });
        let (determinism, session) = match session {
            None => (given.unwrap_or_else(crate::determinism::fresh), None),
            Some((journal, row, determinism)) => (
                given.unwrap_or(determinism),
                Some(SessionPlan {
                    journal,
                    row,
                    replay,
                }),
            ),
        };
        let plan = Plan {
            id: self.next_execution_id(),
            continued: false,
            place,
            code: request.code,
            language: request.language,
            timeout_ms: request.timeout_ms,
            limits,
            max_output_tokens,
            peer,
            tool_call_rate: self.tool_call_rate(&principal),
            principal,
            generation,
            determinism,
            session,
            resumed_from,
            client: client.map(Arc::new),
            keeps_waiting,
            detached,
            provisional_session,
        };
        self.launch(plan, events).await
    }

    /// Takes one of `principal`'s `executions_per_minute`.
    fn take_execution_rate(&self, principal: &Principal) -> Result<(), SubmitError> {
        if let Some(bucket) = self.rates.bucket(
            &principal.name,
            RateKind::Executions,
            principal.rates.executions_per_minute,
        ) && let Err(limited) = bucket.try_take()
        {
            self.metrics.rate_limited();
            return Err(SubmitError::RateLimited {
                principal: principal.name.clone(),
                per_minute: limited.per_minute,
                // Whole seconds, rounded up, at least one.
                retry_after_s: u64::try_from(
                    limited.retry_after.as_nanos().div_ceil(1_000_000_000),
                )
                .unwrap_or(u64::MAX)
                .max(1),
            });
        }
        Ok(())
    }

    /// `principal`'s `tool_calls_per_minute` bucket, shared by all its executions.
    pub(super) fn tool_call_rate(&self, principal: &Principal) -> Option<Arc<RateBucket>> {
        self.rates.bucket(
            &principal.name,
            RateKind::ToolCalls,
            principal.rates.tool_calls_per_minute,
        )
    }

    /// Runs a task of a detached execution, which no connection holds.
    pub(super) fn spawn_detached(
        &self,
        task: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let mut tasks = self
            .detached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Those that ended are forgotten here, so the set holds only live ones.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task);
    }

    /// The daemon stops: detached executions get until `grace` to end; those still running
    /// then are stopped where they are (their worker killed, nothing recorded of their end),
    /// so the journal lists them `interrupted` at the next start, to be resumed by replay.
    pub async fn drain_detached(&self, grace: Duration) {
        let mut tasks = std::mem::take(
            &mut *self
                .detached
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let ended =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if ended.is_err() {
            tracing::warn!(
                running = tasks.len(),
                "detached executions still run after the grace period; they are stopped and will be listed as interrupted"
            );
            tasks.shutdown().await;
        }
    }

    /// Keeps what `response`'s execution (waiting or detached) answered, with its events, for
    /// `GET /v1/executions/<id>` until `ttl_ms` from now.
    pub(super) fn keep_response(
        &self,
        journal: &Journal,
        response: &ExecutionResponse,
        events: &str,
        ttl_ms: u64,
    ) {
        let expires_ms = crate::determinism::now_ms().saturating_add(ttl_ms);
        let busy = journal.busy_sessions();
        let save = |response: &ExecutionResponse, events: &str| -> Result<(), KeepError> {
            let json = serde_json::to_string(response)?;
            journal.store().save_response(
                &response.id,
                &json,
                events,
                expires_ms,
                journal.room(&busy),
            )?;
            Ok(())
        };
        // Too large to keep whole (a bound of the journal): its outline, with why, so a client
        // that follows it still learns how it ended.
        let kept = save(response, events)
            .or_else(|e| save(&outline(response, &e.to_string()), "").map_err(|_| e));
        if let Err(e) = kept {
            tracing::warn!(error = %e, execution = %response.id, "could not keep an execution's response");
        }
    }

    /// Cancels `principal`'s execution `id`: a running one is asked to stop; a waiting one
    /// ends at once, and its answers can no longer be posted.
    pub fn cancel(&self, id: &str, principal: &str) -> Result<Cancelling, CancelError> {
        if self.live.cancel(id, principal).is_ok() {
            return Ok(Cancelling::Asked);
        }
        if let Ok(journal) = self.journal.journal() {
            let store = journal.store();
            if let Ok(Some(row)) = store.execution(id)
                && row.principal == principal
                && store
                    .end_waiting(id, ExecutionState::Cancelled, crate::determinism::now_ms())
                    .unwrap_or(false)
            {
                return Ok(Cancelling::Ended);
            }
        }
        Err(CancelError::NotFound(id.to_owned()))
    }

    /// What the daemon knows of `principal`'s execution `id`: running now (with its event log
    /// if detached), its kept response, or its row in the journal.
    pub fn lookup(&self, id: &str, principal: &str) -> Result<Tracked, SessionError> {
        if let Some(log) = self.live.find(id, principal) {
            return Ok(match log {
                Some(log) => Tracked::Detached(log),
                None => Tracked::Attached,
            });
        }
        let journal = self.journal.journal()?;
        let store = journal.store();
        let unavailable =
            |e: crate::journal::store::StoreError| SessionError::Unavailable(e.to_string());
        match store.execution(id).map_err(unavailable)? {
            Some(row) if row.principal == principal => {
                match store.response(id).map_err(unavailable)? {
                    // A kept response is current unless the execution has moved on since
                    // (a waiting one answered and running again, or cut off).
                    Some((response, events)) if kept_is_current(row.status, &response) => {
                        Ok(Tracked::Kept { response, events })
                    }
                    _ => Ok(Tracked::Row(row)),
                }
            }
            _ => Err(SessionError::NotFound(id.to_owned())),
        }
    }

    /// The session a request names (`"new"` makes one), with the clock and seed its
    /// execution runs with: the session's own, unless it replays nothing.
    fn open_session(
        &self,
        wanted: &str,
        principal: &str,
        replay: ReplayMode,
    ) -> Result<(Arc<Journal>, SessionRow, Determinism), SubmitError> {
        let journal = self.journal.journal()?.clone();
        if wanted == NEW_SESSION {
            let determinism = crate::determinism::fresh();
            let row = journal.create_session(principal, determinism)?;
            return Ok((journal, row, determinism));
        }
        let row = journal.session(wanted, principal)?;
        let determinism = if replay == ReplayMode::None {
            // Nothing replayed: a new clock and seed, which later runs then replay.
            let fresh = crate::determinism::fresh();
            journal
                .store()
                .touch_session(&row.id, fresh.clock_ms, Some((fresh.clock_ms, fresh.seed)))
                .map_err(|e| SessionError::Unavailable(e.to_string()))?;
            fresh
        } else {
            Determinism {
                clock_ms: row.clock_ms,
                seed: row.seed,
            }
        };
        Ok((journal, row, determinism))
    }

    /// Records how a session's execution ended, and that the session was used.
    pub(super) fn session_finished(&self, run: &SessionRun, response: &mut ExecutionResponse) {
        let store = run.journal.store();
        let now = crate::determinism::now_ms();
        let status = ExecutionState::ended_as(response.status);
        let replayed = run.replayed.load(Ordering::Relaxed);
        let live = run.live.load(Ordering::Relaxed);
        let recorded = store
            .finish_execution(
                &run.execution,
                status,
                now,
                replayed,
                live,
                &run.call_order(),
            )
            .and_then(|()| store.touch_session(&run.session, now, None));
        if let Err(e) = recorded {
            response.warnings.push(format!(
                "the journal could not record the end of this execution ({e}); its calls are recorded"
            ));
        }
        run.journal.leave(&run.session);
    }

    /// Removes a session opened in case a call would need an approver, once its execution has
    /// ended without one: an execution of a principal with `approve` patterns leaves nothing
    /// behind unless it waited.
    pub(super) fn drop_provisional_session(
        &self,
        run: &SessionRun,
        response: &mut ExecutionResponse,
    ) {
        if let Err(e) = run.journal.store().delete_session(&run.session) {
            tracing::warn!(error = %e, session = %run.session, "could not remove a session no call needed");
            return;
        }
        response.session = None;
    }

    /// Runs an interrupted execution of `principal` again in its session, every recorded call
    /// answered from the journal, so it finishes where the restart cut it off.
    pub async fn resume(
        self: &Arc<Self>,
        id: &str,
        peer: PeerInfo,
        principal: Arc<Principal>,
        generation: Arc<PolicyGeneration>,
        events: Option<mpsc::Sender<ExecutionEvent>>,
    ) -> Result<Started, SubmitError> {
        let journal = self.journal.journal()?.clone();
        let row = match journal.store().execution(id) {
            Ok(Some(row)) if row.principal == principal.name => row,
            Ok(_) => return Err(SubmitError::UnknownExecution(id.to_owned())),
            Err(e) => return Err(SessionError::Unavailable(e.to_string()).into()),
        };
        if row.status != ExecutionState::Interrupted {
            return Err(SubmitError::NotInterrupted {
                id: row.id,
                status: row.status,
            });
        }
        let request = ExecutionRequest {
            code: row.code,
            language: RequestLanguage::from_name(&row.language),
            timeout_ms: row.timeout_ms,
            session: Some(row.session),
            replay: Some(ReplayMode::All),
            ..Default::default()
        };
        let started = self
            .submit(Submission {
                request,
                peer,
                principal,
                generation,
                events,
                resumed_from: Some(row.id.clone()),
            })
            .await?;
        if let Err(e) = journal.store().mark_resumed(&row.id, &started.id) {
            tracing::warn!(error = %e, execution = %row.id, "could not mark the execution resumed");
        }
        Ok(started)
    }

    /// Executions running now, and started in all.
    pub fn counts(&self) -> (usize, u64, usize) {
        (
            self.slots.running(),
            self.executions_total.load(Ordering::Relaxed),
            self.slots.total(),
        )
    }

    /// No new executions (the daemon is stopping); running ones go on.
    pub fn close(&self) {
        self.slots.close();
    }

    /// A unique, roughly time-ordered execution id.
    fn next_execution_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        format!("ex_{ms:x}_{n}")
    }

    /// Counts a finished execution and appends it to the audit trail. Recording never waits;
    /// a record the log could not take becomes a warning in the response, so an execution is
    /// never held up by a full disk without the agent being told.
    pub(super) fn finished(
        &self,
        plan: &Plan,
        accepted: SystemTime,
        response: &mut ExecutionResponse,
    ) {
        self.metrics.record(response);
        // Redacts the short argument values the audit summary keeps.
        let scanner = &plan.generation.scanner;
        let redact: &dyn Fn(&str) -> std::borrow::Cow<'_, str> = &|text| scanner.scan_text(text).0;
        let code = CodeHash::of(&plan.code);
        let record = ExecutionRecord::from_response(response, code, accepted, redact);
        if let Err(warning) = self.audit.record(record) {
            response.warnings.push(warning.to_string());
        }
    }
}

/// What [`ExecutionService::lookup`] found.
#[derive(Debug)]
pub enum Tracked {
    /// A detached execution running now, and its events so far.
    Detached(Arc<EventLog>),
    /// An execution running now for a client that waits for it (nothing is kept of it).
    Attached,
    /// The response it answered (JSON) and its events (NDJSON, numbered).
    Kept { response: String, events: String },
    /// Only its row in the journal (an execution of a session, or one cut off by a restart).
    Row(ExecutionRow),
}

/// Whether a kept response still says what the execution's row says.
fn kept_is_current(status: ExecutionState, response: &str) -> bool {
    let kept = serde_json::from_str::<serde_json::Value>(response)
        .ok()
        .and_then(|v| v.get("status").and_then(|s| s.as_str()).map(str::to_owned));
    kept.as_deref() == Some(status.as_str())
}

/// What [`ExecutionService::cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelling {
    /// A running execution was asked to stop; it ends `cancelled` once its worker has.
    Asked,
    /// A waiting execution ended `cancelled` there and then.
    Ended,
}

impl Cancelling {
    /// What `DELETE /v1/executions/<id>` answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Cancelling::Asked => "cancelling",
            Cancelling::Ended => ExecutionState::Cancelled.as_str(),
        }
    }
}

/// What is kept of a response too large for the journal: how it ended, without its value,
/// output and trace, and why.
/// Why what an execution needs later (its response, its wait) could not be kept in the
/// journal.
#[derive(Debug, thiserror::Error)]
pub(super) enum KeepError {
    #[error(transparent)]
    Store(#[from] crate::journal::store::StoreError),
    /// It could not be encoded as JSON (not expected of the daemon's own types).
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
}

fn outline(response: &ExecutionResponse, why: &str) -> ExecutionResponse {
    let mut outline = ExecutionResponse {
        result: serde_json::Value::Null,
        stdout: String::new(),
        stderr: String::new(),
        tool_calls: Vec::new(),
        ..response.clone()
    };
    outline.warnings.push(format!(
        "the daemon kept only this outline of the response ({why}): its value, output and trace are gone; run the program again to see them"
    ));
    outline
}

/// When an agent whose queue is full should try again (`Retry-After`): slots free as
/// executions end, which the daemon cannot foresee.
pub const QUEUE_FULL_RETRY_S: u64 = 1;
