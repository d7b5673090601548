//! The execution service: what every front door (the HTTP API today, an MCP facade later)
//! hands a program to. [`ExecutionService::submit`] admits it (size, timeout, the principal's
//! rate), waits for a slot, and starts it in its own task under the generation in force; the
//! finished execution is counted in the metrics and written to the audit log here, not by the
//! door, so every door gets the same record.

use super::registry::{LiveExecutions, StopSignals};
use super::run::{ExecutionEnv, ExecutionJob, run_execution};
use crate::agent_api::{
    ExecutionEvent, ExecutionRequest, ExecutionResponse, NEW_SESSION, PeerInfo, ReplayMode,
    RequestLanguage,
};
use crate::audit_log::{AuditLog, CodeHash, ExecutionRecord};
use crate::generation::PolicyGeneration;
use crate::journal::store::{ExecutionRow, SessionRow};
use crate::journal::{Journal, JournalState, SessionError, SessionRun};
use crate::metrics::Metrics;
use crate::rate_limiter::{RateKind, RateLimiter};
use crate::secrets::scanner::SecretScanner;
use airlock_policy::Principal;
use airlock_proto::{Determinism, Language, Limits};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;

/// Admission, slots, ids, rates, metrics, the audit trail and the live executions.
#[derive(Debug)]
pub struct ExecutionService {
    slots: Arc<Semaphore>,
    max_slots: usize,
    next_id: AtomicU64,
    executions_total: AtomicU64,
    /// Per-principal execution and tool-call rates.
    pub rates: RateLimiter,
    pub metrics: Metrics,
    /// The audit trail (`[audit]`): recording never waits.
    pub audit: AuditLog,
    /// Executions that have started and not yet ended, by id.
    pub live: LiveExecutions,
    /// Sessions and their replay journal (`[journal]`).
    pub journal: JournalState,
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
        "principal `{principal}` may start {per_minute} executions per minute and has used them"
    )]
    RateLimited {
        principal: String,
        per_minute: u32,
        /// Whole seconds until the next one is allowed (at least 1).
        retry_after_s: u64,
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
    NotInterrupted { id: String, status: String },
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
            SubmitError::RateLimited { retry_after_s, .. } => format!(
                "retry in {retry_after_s} s, or do more per program; the operator sets principal.executions_per_minute"
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
        }
    }
}

/// A started execution.
#[derive(Debug)]
pub struct Started {
    pub id: String,
    task: JoinHandle<ExecutionResponse>,
    /// For a client that waits for the whole response: dropping it (hyper drops the handler
    /// of a client that hung up) tells the execution its client is gone. A streaming
    /// client's closed event channel says the same.
    _client: Option<oneshot::Sender<()>>,
}

impl Started {
    /// The response, once the execution ended (also sent as the last event when streaming).
    pub async fn response(self) -> Result<ExecutionResponse, tokio::task::JoinError> {
        let Started { task, _client, .. } = self;
        task.await
    }
}

impl ExecutionService {
    pub fn new(
        max_concurrent_executions: usize,
        audit: AuditLog,
        journal: JournalState,
    ) -> ExecutionService {
        ExecutionService {
            slots: Arc::new(Semaphore::new(max_concurrent_executions)),
            max_slots: max_concurrent_executions,
            next_id: AtomicU64::new(1),
            executions_total: AtomicU64::new(0),
            rates: RateLimiter::default(),
            metrics: Metrics::default(),
            audit,
            live: LiveExecutions::default(),
            journal,
        }
    }

    /// Admits a program and starts it. Waits for a free slot (`max_concurrent_executions`).
    pub async fn submit(self: &Arc<Self>, submission: Submission) -> Result<Started, SubmitError> {
        let Submission {
            request,
            peer,
            principal,
            generation,
            events,
            resumed_from,
        } = submission;
        let policy = &principal.limits;
        if request.code.len() as u64 > policy.max_code_bytes {
            return Err(SubmitError::ProgramTooLarge {
                size: request.code.len(),
                limit: policy.max_code_bytes,
            });
        }
        let timeout_ms = request.timeout_ms.unwrap_or(policy.timeout_ms);
        if timeout_ms == 0 || timeout_ms > policy.max_timeout_ms {
            return Err(SubmitError::InvalidTimeout {
                got: timeout_ms,
                max: policy.max_timeout_ms,
            });
        }
        // The session (its clock and seed), before a rate is spent: a session that does not
        // exist is the caller's mistake, not an execution.
        let replay = request.replay.unwrap_or_default();
        let session = match &request.session {
            None => None,
            Some(wanted) => Some(self.open_session(wanted, &principal.name, replay)?),
        };
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
        let tool_call_rate = self.rates.bucket(
            &principal.name,
            RateKind::ToolCalls,
            principal.rates.tool_calls_per_minute,
        );
        let limits = Limits {
            timeout_ms,
            memory_bytes: policy.memory_bytes,
            stack_bytes: policy.stack_bytes,
            max_tool_calls: policy.max_tool_calls,
            max_output_bytes: policy.max_output_bytes,
        };
        let queued = Instant::now();
        let audit = AuditContext {
            code: CodeHash::of(&request.code),
            accepted: SystemTime::now(),
            scanner: generation.scanner.clone(),
        };
        let slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| SubmitError::ShuttingDown)?;
        self.executions_total.fetch_add(1, Ordering::Relaxed);
        let id = self.next_execution_id();
        let (determinism, session) = match session {
            None => (super::determinism::fresh(), None),
            Some((journal, row, determinism)) => {
                let execution = ExecutionRow {
                    id: id.clone(),
                    session: row.id.clone(),
                    principal: principal.name.clone(),
                    status: "running".into(),
                    language: match request.language {
                        RequestLanguage::Typescript => "typescript".into(),
                        RequestLanguage::Javascript => "javascript".into(),
                    },
                    code: request.code.clone(),
                    timeout_ms: request.timeout_ms,
                    replay: replay.as_str().into(),
                    started_ms: super::determinism::now_ms(),
                    finished_ms: None,
                    replayed_calls: 0,
                    live_calls: 0,
                    resumed_by: None,
                };
                journal
                    .store()
                    .begin_execution(&execution)
                    .map_err(|e| SubmitError::Session(SessionError::Unavailable(e.to_string())))?;
                journal.enter(&row.id);
                let run = SessionRun::new(journal, &row, id.clone(), replay);
                (determinism, Some(Arc::new(run)))
            }
        };
        let job = ExecutionJob {
            id,
            code: request.code,
            language: match request.language {
                RequestLanguage::Typescript => Language::TypeScript,
                RequestLanguage::Javascript => Language::JavaScript,
            },
            limits,
            peer,
            principal,
            tool_call_rate,
            queue_wait: queued.elapsed(),
            determinism,
            session,
            resumed_from,
        };
        let id = job.id.clone();
        let (client, gone) = match events {
            Some(_) => (None, None),
            None => {
                let (client, gone) = oneshot::channel();
                (Some(client), Some(gone))
            }
        };
        let (live, cancel) = self.live.enter(&id, &job.principal.name);
        let stop = StopSignals {
            client: gone,
            cancel,
        };
        let env = ExecutionEnv::of(&generation);
        let service = self.clone();
        // Its own task, so that it ends properly and reaches the audit log whatever the door
        // does meanwhile (a client that hangs up stops the program, which is still recorded).
        let task = tokio::spawn(async move {
            let _slot = slot;
            let _live = live;
            // The execution runs to its end under the policy it started with.
            let _generation = generation;
            let session = job.session.clone();
            let mut response = run_execution(&env, job, events.clone(), stop).await;
            if let Some(run) = session {
                service.session_finished(&run, &mut response);
            }
            service.finished(&audit, &mut response);
            if let Some(events) = events {
                let _ = events
                    .send(ExecutionEvent::Result(Box::new(response.clone())))
                    .await;
            }
            response
        });
        Ok(Started {
            id,
            task,
            _client: client,
        })
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
            let determinism = super::determinism::fresh();
            let row = journal.create_session(principal, determinism)?;
            return Ok((journal, row, determinism));
        }
        let row = journal.session(wanted, principal)?;
        let determinism = if replay == ReplayMode::None {
            // Nothing replayed: a new clock and seed, which later runs then replay.
            let fresh = super::determinism::fresh();
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
    fn session_finished(&self, run: &SessionRun, response: &mut ExecutionResponse) {
        let store = run.journal.store();
        let now = super::determinism::now_ms();
        let status = format!("{:?}", response.status).to_lowercase();
        let replayed = run.replayed.load(Ordering::Relaxed);
        let live = run.live.load(Ordering::Relaxed);
        let recorded = store
            .finish_execution(
                &run.execution,
                &status,
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
        if row.status != "interrupted" {
            return Err(SubmitError::NotInterrupted {
                id: row.id,
                status: row.status,
            });
        }
        let request = ExecutionRequest {
            code: row.code,
            language: if row.language == "javascript" {
                RequestLanguage::Javascript
            } else {
                RequestLanguage::Typescript
            },
            timeout_ms: row.timeout_ms,
            session: Some(row.session),
            replay: Some(ReplayMode::All),
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
            self.max_slots - self.slots.available_permits(),
            self.executions_total.load(Ordering::Relaxed),
            self.max_slots,
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
    fn finished(&self, audit: &AuditContext, response: &mut ExecutionResponse) {
        self.metrics.record(response);
        let scanner = &audit.scanner;
        let redact: &dyn Fn(&str) -> std::borrow::Cow<'_, str> = &|text| scanner.scan_text(text).0;
        let record = ExecutionRecord::from_response(response, audit.code, audit.accepted, redact);
        if let Err(warning) = self.audit.record(record) {
            response.warnings.push(warning.to_string());
        }
    }
}

/// What the audit record of an execution needs from its request.
#[derive(Debug)]
struct AuditContext {
    code: CodeHash,
    accepted: SystemTime,
    /// Redacts the short argument values the audit summary keeps.
    scanner: SecretScanner,
}
