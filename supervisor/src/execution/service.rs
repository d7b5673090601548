//! The execution service: what every front door (the HTTP API today, an MCP facade later)
//! hands a program to. [`ExecutionService::submit`] admits it (size, timeout, the principal's
//! rate), waits for a slot, and starts it in its own task under the generation in force; the
//! finished execution is counted in the metrics and written to the audit log here, not by the
//! door, so every door gets the same record.

use super::registry::{CancelError, LiveExecutions, StopSignals};
use super::run::{ExecutionEnv, ExecutionJob, run_execution};
use crate::agent_api::{
    ClientResult, ExecutionError, ExecutionErrorKind, ExecutionEvent, ExecutionRequest,
    ExecutionResponse, NEW_SESSION, PeerInfo, PendingCall, ReplayMode, RequestLanguage, Status,
};
use crate::audit_log::{AuditLog, CodeHash, ExecutionRecord};
use crate::generation::PolicyGeneration;
use crate::journal::store::{ExecutionRow, SessionRow, WaitingRow};
use crate::journal::{Journal, JournalState, SessionError, SessionRun};
use crate::metrics::Metrics;
use crate::rate_limiter::{RateKind, RateLimiter};
use crate::secrets::scanner::SecretScanner;
use crate::tools::client::{ClientAnswers, ClientScope, ClientTools, ClientToolsError};
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
    #[error("{0}")]
    ClientTools(#[from] ClientToolsError),
    #[error(
        "principal `{principal}` has {max} executions waiting for client tool results, its limit (limits.max_waiting_executions)"
    )]
    TooManyWaiting { principal: String, max: u32 },
    #[error("there is no waiting execution `{0}` of yours")]
    UnknownWaiting(String),
    #[error("execution `{id}` is {status}, not waiting for client tool results")]
    NotWaiting { id: String, status: String },
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
            SubmitError::ClientTools(e) => e.hint().into(),
            SubmitError::TooManyWaiting { .. } => {
                "answer or cancel (DELETE /v1/executions/<id>) the executions that wait, or use the stateless form (client_results), which keeps nothing"
                    .into()
            }
            SubmitError::UnknownWaiting(_) => {
                "the id is the `id` of a response with status \"waiting\"; GET /v1/executions?status=waiting lists yours"
                    .into()
            }
            SubmitError::NotWaiting { status, .. } if status == "running" => {
                "its answers are being run now (another request posted them); wait for that response".into()
            }
            SubmitError::NotWaiting { status, .. } if status == "expired" => {
                "it waited past limits.waiting_ttl; send the program again".into()
            }
            SubmitError::NotWaiting { .. } => {
                "it has ended; GET /v1/executions?status= lists your executions".into()
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
            mut request,
            peer,
            principal,
            generation,
            events,
            resumed_from,
        } = submission;
        let limits = limits(&principal, &request.code, request.timeout_ms)?;
        // Client-owned tools: checked before anything is spent.
        let client = client_request(&mut request)?;
        let keeps_waiting = client.as_ref().is_some_and(|c| !c.stateless);
        if keeps_waiting {
            self.check_waiting_room(&principal)?;
        }
        // The session (its clock and seed), before a rate is spent: a session that does not
        // exist is the caller's mistake, not an execution. An execution that may wait keeps
        // its calls in one (a new one unless the request names one), so that its re-runs
        // replay them.
        let replay = request.replay.unwrap_or_default();
        let wanted = match (&request.session, keeps_waiting) {
            (Some(wanted), _) => Some(wanted.as_str()),
            (None, true) => Some(NEW_SESSION),
            (None, false) => None,
        };
        let session = match wanted {
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
        let language = request.language;
        let launch = Launch {
            id: None,
            code: request.code,
            language,
            timeout_ms: request.timeout_ms,
            limits,
            peer,
            principal,
            generation,
            events,
            resumed_from,
            session: session.map(|(journal, row, determinism)| (journal, row, determinism, replay)),
            determinism: request.determinism.map(|d| Determinism {
                clock_ms: d.clock_ms,
                seed: d.seed,
            }),
            client: client.map(|c| (Arc::new(c), keeps_waiting)),
        };
        self.launch(launch).await
    }

    /// Starts an admitted execution: a slot, an id (or the waiting one's), its session's
    /// journal, and its own task.
    async fn launch(self: &Arc<Self>, launch: Launch) -> Result<Started, SubmitError> {
        let Launch {
            id: continued,
            code,
            language,
            timeout_ms,
            limits,
            peer,
            principal,
            generation,
            events,
            resumed_from,
            session,
            determinism: given,
            client,
        } = launch;
        let tool_call_rate = self.rates.bucket(
            &principal.name,
            RateKind::ToolCalls,
            principal.rates.tool_calls_per_minute,
        );
        let queued = Instant::now();
        let audit = AuditContext {
            code: CodeHash::of(&code),
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
        let id = continued
            .clone()
            .unwrap_or_else(|| self.next_execution_id());
        let (determinism, session) = match session {
            None => (given.unwrap_or_else(super::determinism::fresh), None),
            Some((journal, row, determinism, replay)) => {
                if continued.is_none() {
                    let execution = ExecutionRow {
                        id: id.clone(),
                        session: row.id.clone(),
                        principal: principal.name.clone(),
                        status: "running".into(),
                        language: match language {
                            RequestLanguage::Typescript => "typescript".into(),
                            RequestLanguage::Javascript => "javascript".into(),
                        },
                        code: code.clone(),
                        timeout_ms,
                        replay: replay.as_str().into(),
                        started_ms: super::determinism::now_ms(),
                        finished_ms: None,
                        replayed_calls: 0,
                        live_calls: 0,
                        resumed_by: None,
                    };
                    journal.store().begin_execution(&execution).map_err(|e| {
                        SubmitError::Session(SessionError::Unavailable(e.to_string()))
                    })?;
                }
                journal.enter(&row.id);
                let run = SessionRun::new(journal, &row, id.clone(), replay);
                (given.unwrap_or(determinism), Some(Arc::new(run)))
            }
        };
        let (client, keeps_waiting) = match client {
            Some((scope, keeps)) => (Some(scope), keeps),
            None => (None, false),
        };
        let job = ExecutionJob {
            id,
            code,
            language: match language {
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
            client,
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
            let client = job.client.clone();
            let determinism = job.determinism;
            let waiting_ttl_ms = job.principal.limits.waiting_ttl_ms;
            let mut response = run_execution(&env, job, events.clone(), stop).await;
            if let (Some(run), Some(client), true) = (&session, &client, keeps_waiting) {
                service.keep_or_forget_waiting(
                    run,
                    client,
                    determinism,
                    waiting_ttl_ms,
                    &mut response,
                );
            }
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

    /// Cancels `principal`'s execution `id`: a running one is asked to stop (`cancelling`); a
    /// waiting one ends at once (`cancelled`), and its answers can no longer be posted.
    pub fn cancel(&self, id: &str, principal: &str) -> Result<&'static str, CancelError> {
        if self.live.cancel(id, principal).is_ok() {
            return Ok("cancelling");
        }
        if let Ok(journal) = self.journal.journal() {
            let store = journal.store();
            if let Ok(Some(row)) = store.execution(id)
                && row.principal == principal
                && store
                    .end_waiting(id, "cancelled", super::determinism::now_ms())
                    .unwrap_or(false)
            {
                return Ok("cancelled");
            }
        }
        Err(CancelError::NotFound(id.to_owned()))
    }

    /// Whether `principal` may have one more execution waiting (the journal keeps them).
    fn check_waiting_room(&self, principal: &Principal) -> Result<(), SubmitError> {
        let journal = self.journal.journal()?;
        let max = principal.limits.max_waiting_executions;
        let waiting = journal
            .store()
            .count_waiting(&principal.name)
            .map_err(|e| SessionError::Unavailable(e.to_string()))?;
        if waiting >= u64::from(max) {
            return Err(SubmitError::TooManyWaiting {
                principal: principal.name.clone(),
                max,
            });
        }
        Ok(())
    }

    /// After a run of an execution that keeps its waits: what it needs to go on is kept when
    /// it waits (a failure to keep it fails the execution: nobody could answer it), and
    /// forgotten when it ended.
    fn keep_or_forget_waiting(
        &self,
        run: &SessionRun,
        client: &ClientScope,
        determinism: Determinism,
        ttl_ms: u64,
        response: &mut ExecutionResponse,
    ) {
        let store = run.journal.store();
        if response.status != Status::Waiting {
            if let Err(e) = store.drop_waiting(&response.id) {
                tracing::warn!(error = %e, execution = %response.id, "could not forget a waiting execution that ended");
            }
            return;
        }
        let encoded = (|| -> Result<WaitingRow, serde_json::Error> {
            Ok(WaitingRow {
                execution: response.id.clone(),
                principal: response.principal.clone(),
                client_tools: serde_json::to_string(&client.tools.specs)?,
                answers: serde_json::to_string(&client.answers)?,
                pending: serde_json::to_string(&response.pending_calls)?,
                clock_ms: determinism.clock_ms,
                seed: determinism.seed,
                expires_ms: super::determinism::now_ms().saturating_add(ttl_ms),
            })
        })();
        let kept = match encoded {
            Ok(row) => store.save_waiting(&row).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = kept {
            tracing::error!(error = %e, execution = %response.id, "could not keep a waiting execution");
            response.status = Status::Error;
            response.pending_calls.clear();
            response.determinism = None;
            let mut error = ExecutionError::new(
                ExecutionErrorKind::Internal,
                format!(
                    "the program waits for client tool results, but the daemon could not keep it to answer later: {e}"
                ),
            );
            error.hint = Some("send it again with client_results (the stateless form, which keeps nothing); the operator sees the cause in /v1/health".into());
            response.error = Some(error);
        }
    }

    /// `POST /v1/executions/<id>/results`: the agent's answers to a waiting execution's client
    /// tool calls. The execution runs again from the start under the same id, every earlier
    /// call answered from the record (the journal for the daemon's tools, the kept answers
    /// for the client's), and answers as a new request would: ok, error, or waiting again.
    pub async fn answer_waiting(
        self: &Arc<Self>,
        id: &str,
        results: Vec<ClientResult>,
        peer: PeerInfo,
        principal: Arc<Principal>,
        generation: Arc<PolicyGeneration>,
        events: Option<mpsc::Sender<ExecutionEvent>>,
    ) -> Result<Started, SubmitError> {
        let journal = self.journal.journal()?.clone();
        let unavailable = |e: &dyn std::fmt::Display| SessionError::Unavailable(e.to_string());
        let store = journal.store();
        let execution = match store.execution(id) {
            Ok(Some(row)) if row.principal == principal.name => row,
            Ok(_) => return Err(SubmitError::UnknownWaiting(id.to_owned())),
            Err(e) => return Err(unavailable(&e).into()),
        };
        let waiting = store.waiting(id).map_err(|e| unavailable(&e))?;
        let now = super::determinism::now_ms();
        let waiting = match waiting {
            Some(w) if execution.status == "waiting" && w.expires_ms < now => {
                store.expire_waiting(now).map_err(|e| unavailable(&e))?;
                return Err(SubmitError::NotWaiting {
                    id: id.to_owned(),
                    status: "expired".into(),
                });
            }
            Some(w) if execution.status == "waiting" => w,
            _ => {
                return Err(SubmitError::NotWaiting {
                    id: id.to_owned(),
                    status: execution.status,
                });
            }
        };
        let specs = serde_json::from_str(&waiting.client_tools).map_err(|e| unavailable(&e))?;
        let mut answers: ClientAnswers =
            serde_json::from_str(&waiting.answers).map_err(|e| unavailable(&e))?;
        let pending: Vec<PendingCall> =
            serde_json::from_str(&waiting.pending).map_err(|e| unavailable(&e))?;
        answers.add(results, &pending, now)?;
        let tools = ClientTools::new(specs)?;
        let limits = limits(&principal, &execution.code, execution.timeout_ms)?;
        let answers_json = serde_json::to_string(&answers).map_err(|e| unavailable(&e))?;
        // Taken by this request alone: a second one for the same id is refused.
        if !store
            .claim_waiting(id, &answers_json)
            .map_err(|e| unavailable(&e))?
        {
            return Err(SubmitError::NotWaiting {
                id: id.to_owned(),
                status: "running".into(),
            });
        }
        let session = journal.session(&execution.session, &principal.name)?;
        let determinism = Determinism {
            clock_ms: waiting.clock_ms,
            seed: waiting.seed,
        };
        let launch = Launch {
            id: Some(execution.id),
            code: execution.code,
            language: if execution.language == "javascript" {
                RequestLanguage::Javascript
            } else {
                RequestLanguage::Typescript
            },
            timeout_ms: execution.timeout_ms,
            limits,
            peer,
            principal,
            generation,
            events,
            resumed_from: None,
            // Everything the earlier runs did is answered from the record.
            session: Some((journal, session, determinism, ReplayMode::All)),
            determinism: Some(determinism),
            client: Some((
                Arc::new(ClientScope {
                    tools,
                    answers,
                    stateless: false,
                }),
                true,
            )),
        };
        self.launch(launch).await
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
            client_tools: Vec::new(),
            client_results: None,
            determinism: None,
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

/// An execution admitted and about to start.
struct Launch {
    /// The id of a waiting execution run again (its row exists); a new one's otherwise.
    id: Option<String>,
    code: String,
    language: RequestLanguage,
    /// As the request asked (kept with a session's execution).
    timeout_ms: Option<u64>,
    limits: Limits,
    peer: PeerInfo,
    principal: Arc<Principal>,
    generation: Arc<PolicyGeneration>,
    events: Option<mpsc::Sender<ExecutionEvent>>,
    resumed_from: Option<String>,
    /// Its session, with the session's clock and seed, and the replay mode.
    session: Option<(Arc<Journal>, SessionRow, Determinism, ReplayMode)>,
    /// The clock and seed to run with, whatever the session says (a waiting execution's own,
    /// or those a stateless request sent back).
    determinism: Option<Determinism>,
    /// Its client-owned tools, and whether its waits are kept (the stateful form).
    client: Option<(Arc<ClientScope>, bool)>,
}

/// The limits of `principal`'s execution of `code` with the timeout it asked for.
fn limits(
    principal: &Principal,
    code: &str,
    timeout_ms: Option<u64>,
) -> Result<Limits, SubmitError> {
    let policy = &principal.limits;
    if code.len() as u64 > policy.max_code_bytes {
        return Err(SubmitError::ProgramTooLarge {
            size: code.len(),
            limit: policy.max_code_bytes,
        });
    }
    let timeout_ms = timeout_ms.unwrap_or(policy.timeout_ms);
    if timeout_ms == 0 || timeout_ms > policy.max_timeout_ms {
        return Err(SubmitError::InvalidTimeout {
            got: timeout_ms,
            max: policy.max_timeout_ms,
        });
    }
    Ok(Limits {
        timeout_ms,
        memory_bytes: policy.memory_bytes,
        stack_bytes: policy.stack_bytes,
        max_tool_calls: policy.max_tool_calls,
        max_output_bytes: policy.max_output_bytes,
    })
}

/// The request's client-owned tools and the answers it carries (the stateless form), checked.
fn client_request(request: &mut ExecutionRequest) -> Result<Option<ClientScope>, SubmitError> {
    let tools = std::mem::take(&mut request.client_tools);
    let results = request.client_results.take();
    if tools.is_empty() {
        return match results {
            Some(_) => Err(ClientToolsError::ResultsWithoutTools.into()),
            None => Ok(None),
        };
    }
    let tools = ClientTools::new(tools)?;
    let stateless = results.is_some();
    // The agent's answers carry no time: they leave the program's clock where it was.
    let answers = match results {
        Some(results) => ClientAnswers::from_request(results, 0)?,
        None => ClientAnswers::default(),
    };
    Ok(Some(ClientScope {
        tools,
        answers,
        stateless,
    }))
}
