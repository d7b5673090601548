//! The run loop of one execution: take a worker, send the program, judge its literal tool
//! calls, hand every tool call to the call pipeline, collect console output and progress,
//! enforce the wall-clock deadline, and notice a worker that dies or breaks the protocol.

use super::contract;
use super::error;
use super::registry::StopSignals;
use super::response::note_findings;
use crate::agent_api::{
    CallOutcome, ConsoleStream, ExecutionError, ExecutionEvent, ExecutionResponse, ExecutionStats,
    PeerInfo, PendingCall, Redaction, RedactionPlace, ToolCallRecord,
};
use crate::generation::PolicyGeneration;
use crate::journal::{SessionRun, Settling};
use crate::learned_types::Learning;
use crate::rate_limiter::RateBucket;
use crate::secrets::scanner::SecretScanner;
use crate::tools::ToolRegistry;
use crate::tools::call::{self, Arrival, CallAnswer, CallRequest, CallScope, Held};
use crate::tools::catalogue::{CallerCatalogue, ToolCatalogue};
use crate::tools::client::WaitScope;
use crate::workers::pool::WorkerChannel;
use crate::workers::pool::{
    AFTER_ANSWER, ChannelError, Checkout, ReadyWorker, WorkerPool, message_name,
};
use crate::workers::process::WorkerExit;
use airlock_policy::{Principal, SecretScanning};
use airlock_proto::{
    ConsoleLevel, Determinism, Language, Limits, MAX_TOOL_ARGS_BYTES, Outcome, SourcePosition,
    StartExecution, SupervisorMessage, ToolFailure, WorkerMessage, WorkerStats,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::{Instrument, debug, info, info_span, warn};

/// How long past its deadline a worker may take to report the timeout itself before it is
/// killed. The engine's interrupt handler normally stops it at the deadline; this bounds the
/// case where it does not (blocked, or stuck in native code).
pub const KILL_GRACE: Duration = Duration::from_millis(100);

/// A task that ends with the loop that started it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Why an execution was stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StopReason {
    /// The client hung up.
    ClientGone,
    /// Someone asked (through the registry).
    Cancelled,
}

/// Everything an execution needs from the daemon.
#[derive(Debug, Clone)]
pub struct ExecutionEnv {
    pub pool: WorkerPool,
    pub tools: ToolRegistry,
    /// Scans every tool result before the worker gets it, and everything agent-bound.
    pub scanner: SecretScanner,
    /// Which sources' calls fail, rather than being redacted, when a result carries a secret.
    pub secret_scanning: SecretScanning,
    /// The generation's SDK per principal, which the built-in tools answer from.
    pub catalogue: Arc<ToolCatalogue>,
    /// What the generation learns from results.
    pub learning: Learning,
}

impl ExecutionEnv {
    /// What an execution under `generation` runs with.
    pub fn of(generation: &PolicyGeneration) -> ExecutionEnv {
        ExecutionEnv {
            pool: generation.pool.clone(),
            tools: generation.tools.clone(),
            scanner: generation.scanner.clone(),
            secret_scanning: generation.policy.secret_scanning.clone(),
            catalogue: generation.catalogue.clone(),
            learning: generation.catalogue.learning().clone(),
        }
    }
}

/// A request that passed validation.
#[derive(Debug, Clone)]
pub struct ExecutionJob {
    pub id: String,
    pub code: String,
    pub language: Language,
    pub limits: Limits,
    pub peer: PeerInfo,
    pub principal: Arc<Principal>,
    /// The principal's `tool_calls_per_minute` bucket, shared by all its executions.
    pub tool_call_rate: Option<Arc<RateBucket>>,
    pub queue_wait: Duration,
    /// The program's clock at its start and its seeds.
    pub determinism: Determinism,
    /// Its session's journal, when it runs in a session.
    pub session: Option<Arc<SessionRun>>,
    /// The interrupted execution it resumes.
    pub resumed_from: Option<String>,
    /// The request's client-owned tools and the answers they have.
    pub client: Option<Arc<WaitScope>>,
    /// The niceness its worker runs with (`execution::slots::Slot::nice`): its principal's
    /// share of the CPUs.
    pub nice: i32,
}

/// Runs one execution to completion. Events, if wanted, are sent as they happen; the
/// returned response is also the final event's payload.
///
/// The client is gone when the receiver of `events` is dropped (streaming) or when the sender
/// of `stop.client` is (a plain request whose handler hyper dropped); `stop.cancel` is a
/// cancellation asked for through the registry. Either way the program is stopped and the
/// response, with status `cancelled`, is still returned for the audit log.
///
/// `early` is a pre-started worker that was given the program as the execution was admitted
/// ([`start_early`]); without it, a worker is checked out here.
pub async fn run_execution(
    env: &ExecutionEnv,
    job: ExecutionJob,
    events: Option<mpsc::Sender<ExecutionEvent>>,
    stop: StopSignals,
    early: Option<StartedWorker>,
) -> ExecutionResponse {
    let span = info_span!(
        "execution",
        id = %job.id,
        principal = %job.principal.name,
        uid = job.peer.uid,
        pid = job.peer.pid.unwrap_or(0),
    );
    async move {
        let total = early.as_ref().map_or_else(Instant::now, |e| e.checked_out);
        let mut run = Run::new(env, &job, events, total);
        run.emit(ExecutionEvent::Started {
            id: job.id.clone(),
            session: job.session.as_ref().map(|s| s.session.clone()),
        })
        .await;
        let started = match early {
            Some(started) => started,
            None => match env.pool.checkout().await {
                Ok((mut worker, checkout)) => {
                    let sent = send_start(&mut worker, &job).await;
                    StartedWorker {
                        worker,
                        checkout,
                        checked_out: total,
                        sent,
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "no worker for execution");
                    run.failure = Some(error::no_worker(&e));
                    return run.finish(&job, total);
                }
            },
        };
        run.stats.worker_from_pool = started.checkout.from_pool;
        run.stats.spawn_ms = ms(started.checkout.wait);
        debug!(
            worker_pid = started.worker.process.pid(),
            from_pool = started.checkout.from_pool,
            "worker checked out"
        );
        if let Some(exit) = run.drive(env, &job, started, stop).await {
            debug!(worker = %exit.describe(), "worker ended abnormally");
        }
        if !run.worker_answered {
            // A worker that did not finish with Done is gone already: replace it now. (One
            // that did is replaced after the answer, by the task that hangs up on it.)
            env.pool.replenish();
        }
        let response = run.finish(&job, total);
        // Debug, not info: the audit log is the record of every execution. A line per
        // execution costs the answer ~10 µs (formatted, scanned for secrets and written before
        // the response goes out) and, at 2,000 executions/s, would run into journald's rate
        // limit, which would then drop the warnings that matter.
        debug!(
            status = ?response.status,
            tool_calls = response.tool_calls.len(),
            total_ms = response.stats.total_ms,
            "execution finished"
        );
        response
    }
    .instrument(span)
    .await
}

/// A worker that has been sent its execution's `Start`.
#[derive(Debug)]
pub struct StartedWorker {
    worker: ReadyWorker,
    checkout: Checkout,
    /// When the worker was taken: the execution's origin (`stats.total_ms`).
    checked_out: Instant,
    /// When `Start` was written, or why it could not be.
    sent: Result<Instant, ChannelError>,
}

/// Gives the program to a pre-started worker at once, if one is idle (the caller holds the
/// execution's slot already), before the rest of the execution is set up (its registry
/// entry, span and state), so that the worker runs while the daemon does that. `None` leaves
/// it to [`run_execution`], which waits for a worker.
pub(super) async fn start_early(
    pool: &WorkerPool,
    job: &mut ExecutionJob,
    queued: Instant,
) -> Option<StartedWorker> {
    let checked_out = Instant::now();
    let (mut worker, checkout) = pool.take_idle()?;
    job.queue_wait = checked_out.saturating_duration_since(queued);
    let sent = send_start(&mut worker, job).await;
    Some(StartedWorker {
        worker,
        checkout,
        checked_out,
        sent,
    })
}

/// Writes the execution's `Start` to its worker; `Ok` is when it was written.
async fn send_start(worker: &mut ReadyWorker, job: &ExecutionJob) -> Result<Instant, ChannelError> {
    if job.nice > 0 {
        worker.process.lower_priority(job.nice);
    }
    let start = SupervisorMessage::Start(StartExecution {
        execution_id: job.id.clone(),
        language: job.language,
        code: job.code.clone(),
        limits: job.limits,
        determinism: job.determinism,
        // Only an execution with calls that can wait needs to know when it is idle.
        report_idle: job.client.is_some(),
    });
    let sending = Instant::now();
    worker.channel.send(&start).await?;
    Ok(sending)
}

pub(super) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The state of one execution while it runs.
pub(super) struct Run {
    /// When the execution started: the origin of `stats.total_ms` and of each call's
    /// `started_ms`.
    pub(super) origin: Instant,
    pub(super) events: Option<mpsc::Sender<ExecutionEvent>>,
    /// What the execution's tool calls share (registry, principal, budget, rate, scanner).
    pub(super) calls: Arc<CallScope>,
    /// Scans what the program prints and returns.
    pub(super) scanner: SecretScanner,
    /// What the scanner replaced in the program's own output (console, progress, result,
    /// error).
    pub(super) redactions: Vec<Redaction>,
    pub(super) stdout: String,
    pub(super) stderr: String,
    pub(super) output_bytes: u64,
    pub(super) output_truncated: bool,
    pub(super) max_output: u64,
    pub(super) tool_calls: Vec<ToolCallRecord>,
    pub(super) call_started: Vec<Instant>,
    /// The id of the last `ToolCall`; ids must increase.
    pub(super) last_call_id: u32,
    pub(super) outcome: Option<Outcome>,
    /// A failure found by the supervisor (the contract check, a crash, a kill, a protocol
    /// error), which wins over the worker's own report.
    pub(super) failure: Option<ExecutionError>,
    pub(super) timed_out: bool,
    /// The program was told to stop before its end, and why.
    pub(super) stopped: Option<StopReason>,
    pub(super) worker_stats: Option<WorkerStats>,
    pub(super) stats: ExecutionStats,
    pub(super) timeout_ms: u64,
    /// What the agent should know that did not stop the program (a call whose outcome the
    /// journal could not record).
    pub(super) warnings: Vec<String>,
    /// What the trace's result previews may still take (`result_preview`).
    results_budget: usize,
    /// Client tool calls the agent has not answered, in call order.
    pub(super) held: Vec<PendingCall>,
    /// Calls that wait for an approver's decision, in call order, with where the program
    /// made them.
    pub(super) held_approvals: Vec<HeldApproval>,
    /// `ToolResult`s sent to the worker (an `Idle` that counts fewer was sent before the
    /// last of them arrived: the program may still move).
    results_sent: u32,
    /// The program can go no further without the agent's answers to `held`: it was stopped
    /// to wait for them.
    pub(super) waiting: bool,
    /// The worker finished with `Done`: hanging up on it and replacing it in the pool are
    /// left to a background task.
    worker_answered: bool,
}

/// A call that waits for an approver.
#[derive(Debug)]
pub(super) struct HeldApproval {
    pub(super) id: u32,
    pub(super) tool: String,
    pub(super) args: Value,
    pub(super) args_hash: String,
    pub(super) at: Option<SourcePosition>,
}

/// What became of a call at its arrival.
enum Begun {
    /// It runs in its own task.
    Task(tokio::task::Id),
    /// Refused or replayed or answered by the agent: answered at once.
    Answered(CallAnswer),
    /// A client tool's call without an answer: it waits.
    Held,
}

impl Run {
    fn new(
        env: &ExecutionEnv,
        job: &ExecutionJob,
        events: Option<mpsc::Sender<ExecutionEvent>>,
        origin: Instant,
    ) -> Run {
        let calls = Arc::new(CallScope {
            execution_id: job.id.clone(),
            principal: job.principal.clone(),
            registry: env.tools.clone(),
            max_tool_calls: job.limits.max_tool_calls,
            rate: job.tool_call_rate.clone(),
            scanner: env.scanner.clone(),
            secret_scanning: env.secret_scanning.clone(),
            events: events.clone(),
            journal: job.session.clone(),
            client: job.client.clone(),
            catalogue: CallerCatalogue::new(
                env.catalogue.clone(),
                env.tools.clone(),
                job.principal.clone(),
            ),
            learning: env.learning.clone(),
        });
        Run {
            origin,
            events,
            calls,
            scanner: env.scanner.clone(),
            redactions: Vec::new(),
            stdout: String::new(),
            stderr: String::new(),
            output_bytes: 0,
            output_truncated: false,
            max_output: job.limits.max_output_bytes,
            tool_calls: Vec::new(),
            call_started: Vec::new(),
            last_call_id: 0,
            outcome: None,
            failure: None,
            timed_out: false,
            stopped: None,
            worker_stats: None,
            stats: ExecutionStats {
                queue_ms: ms(job.queue_wait),
                ..ExecutionStats::default()
            },
            timeout_ms: job.limits.timeout_ms,
            warnings: Vec::new(),
            results_budget: super::result_preview::TRACE_RESULTS_BYTES,
            held: Vec::new(),
            held_approvals: Vec::new(),
            results_sent: 0,
            waiting: false,
            worker_answered: false,
        }
    }

    async fn emit(&self, event: ExecutionEvent) {
        if let Some(tx) = &self.events {
            // A client that went away just stops receiving; the execution still completes.
            let _ = tx.send(event).await;
        }
    }

    /// Drives the worker until it reports `Done`, dies, or passes the deadline. Returns how
    /// the worker process ended, when that is known.
    async fn drive(
        &mut self,
        env: &ExecutionEnv,
        job: &ExecutionJob,
        started: StartedWorker,
        stop: StopSignals,
    ) -> Option<WorkerExit> {
        let StartedWorker { worker, sent, .. } = started;
        let ReadyWorker {
            mut process,
            mut channel,
            lockdown,
            ..
        } = worker;
        let forked = lockdown.forked;
        let run_started = match sent {
            Ok(at) => at,
            Err(e) => {
                let exit = process.kill_and_reap(Duration::from_secs(1)).await;
                self.failure = Some(error::crashed(
                    &format!("could not send the program to the worker: {e}"),
                    exit,
                ));
                return exit;
            }
        };
        // The worker's own deadline starts as it reads `Start`: a little after this.
        let deadline = tokio::time::Instant::from_std(run_started)
            + Duration::from_millis(job.limits.timeout_ms);

        let mut calls: JoinSet<CallAnswer> = JoinSet::new();
        // Which call each task answers, so a task that panicked still answers its call.
        let mut call_ids: HashMap<tokio::task::Id, u32> = HashMap::new();
        // The contract check of the program's literal tool calls, while it lists the tools
        // of the namespaces they name (which may start a server): in a task of its own, so
        // the deadline and a client hanging up still apply, and a panic costs only the check.
        let mut contract: Option<AbortOnDrop<contract::Verdict>> = None;
        // The worker sent its tool references and has not been told to proceed: it may not
        // call tools now (and never will, if the program was refused).
        let mut held = false;
        let mut references_seen = false;
        let mut cancel_sent = false;
        let mut kill_at = deadline + KILL_GRACE;
        // Fires when the client hangs up (a streaming client's events receiver is dropped, or
        // a plain request's handler holding the sender of `stop.client` is), or when the
        // execution is cancelled through the registry.
        let watched = self.events.clone();
        let StopSignals { client, mut cancel } = stop;
        let stop_requested = async move {
            let gone = async {
                match (watched, client) {
                    (Some(events), _) => events.closed().await,
                    (None, Some(client)) => {
                        let _ = client.await;
                    }
                    (None, None) => std::future::pending().await,
                }
            };
            let cancelled = async {
                // The sender goes with the registry entry: no cancellation then.
                if cancel.wait_for(|c| *c).await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = gone => StopReason::ClientGone,
                () = cancelled => StopReason::Cancelled,
            }
        };
        tokio::pin!(stop_requested);
        // Set once the program is being stopped (its deadline, a cancel, a client that hung
        // up) with calls in flight: from then on a re-run in the session waits for them (see
        // `settle_or_abort`), even before this loop ends.
        let mut settling: Option<Settling> = None;
        let exit = loop {
            tokio::select! {
                msg = channel.recv() => match msg {
                    Ok(WorkerMessage::Done { outcome, stats }) => {
                        self.outcome = Some(outcome);
                        self.worker_stats = Some(stats);
                        let reported_peak = stats.peak_rss_bytes;
                        debug!(elapsed_us = u64::try_from(run_started.elapsed().as_micros()).unwrap_or(u64::MAX), "worker done");
                        // A forked worker measured itself (its /proc figure would include
                        // the zygote's); an exec'd one's /proc entry is still there, as it
                        // waits for our hang-up.
                        self.stats.peak_rss_bytes = if forked {
                            Some(reported_peak).filter(|b| *b > 0)
                        } else {
                            process.peak_rss_bytes()
                        };
                        break None;
                    }
                    Ok(WorkerMessage::Console { level, text }) => self.console(level, text).await,
                    Ok(WorkerMessage::Progress { value_json }) => {
                        let mut value = serde_json::from_str(&value_json).unwrap_or(Value::String(value_json));
                        self.scan_json(RedactionPlace::Progress, &mut value);
                        self.emit(ExecutionEvent::Progress { value }).await;
                    }
                    Ok(WorkerMessage::ToolReferences(references)) => {
                        // Once, before the program runs: after a tool call it could only be
                        // a compromised or mismatched worker.
                        if references_seen || self.last_call_id > 0 {
                            let exit = process.kill_and_reap(Duration::from_secs(1)).await;
                            warn!("worker sent tool references out of order; killed");
                            self.failure = Some(error::protocol("tool references out of order"));
                            break exit;
                        }
                        references_seen = true;
                        held = true;
                        let tools = env.tools.clone();
                        let principal = job.principal.clone();
                        let client = job.client.as_ref().map(|c| c.tools.descriptors());
                        contract = Some(AbortOnDrop(tokio::spawn(
                            async move {
                                contract::check(&tools, &principal, client, &references).await
                            }
                            .in_current_span(),
                        )));
                    }
                    Ok(WorkerMessage::ToolCall { id, tool, args_json, at }) => {
                        // The worker numbers calls 1, 2, 3, ... and never sends more than
                        // it accepts itself; anything else is a compromised or mismatched
                        // worker, and answering it would corrupt the trace (two calls under
                        // one id) or hold unbounded argument text. A worker waiting for the
                        // contract check's verdict makes no calls.
                        let broken = if held {
                            Some(format!("tool call {id} before the contract check's verdict"))
                        } else if id <= self.last_call_id {
                            Some(format!("tool call id {id} after id {}", self.last_call_id))
                        } else if args_json.len() > MAX_TOOL_ARGS_BYTES {
                            Some(format!("tool call arguments of {} bytes, over the {} byte limit", args_json.len(), MAX_TOOL_ARGS_BYTES))
                        } else {
                            None
                        };
                        if let Some(detail) = broken {
                            let exit = process.kill_and_reap(Duration::from_secs(1)).await;
                            warn!(detail = %detail, "worker broke the protocol; killed");
                            self.failure = Some(error::protocol(&detail));
                            break exit;
                        }
                        self.last_call_id = id;
                        match self.start_call(&mut calls, CallRequest { id, tool, args_json }, at).await {
                            Begun::Task(task) => {
                                call_ids.insert(task, id);
                            }
                            Begun::Answered(answer) => self.deliver(&mut channel, answer).await,
                            Begun::Held => {}
                        }
                    }
                    Ok(WorkerMessage::Idle { results }) => {
                        // The program waits. If it has seen every answer sent, no call is in
                        // flight here, and it waits for the agent's answers, nothing but the
                        // agent can move it: it stops, to be run again with the answers.
                        if results == self.results_sent
                            && calls.is_empty()
                            && !(self.held.is_empty() && self.held_approvals.is_empty())
                            && !self.waiting
                            && !cancel_sent
                        {
                            debug!(
                                client_calls = self.held.len(),
                                approvals = self.held_approvals.len(),
                                "the program waits for someone outside the daemon"
                            );
                            self.waiting = true;
                            cancel_sent = true;
                            let _ = channel.send(&SupervisorMessage::Cancel).await;
                        }
                    }
                    Ok(other @ WorkerMessage::Ready { .. }) => {
                        let exit = process.kill_and_reap(Duration::from_secs(1)).await;
                        self.failure = Some(error::protocol(&format!("unexpected {} message", message_name(&other))));
                        break exit;
                    }
                    Err(ChannelError::Closed) | Err(ChannelError::Io(_)) => {
                        // The worker died; its exit status says why.
                        let exit = match tokio::time::timeout(Duration::from_secs(2), process.wait()).await {
                            Ok(Ok(exit)) => Some(exit),
                            _ => process.kill_and_reap(Duration::from_secs(1)).await,
                        };
                        self.failure = Some(error::crashed("the worker process ended before the program finished", exit));
                        break exit;
                    }
                    Err(e @ ChannelError::Frame(_)) => {
                        let exit = process.kill_and_reap(Duration::from_secs(1)).await;
                        warn!(error = %e, "worker broke the protocol; killed");
                        self.failure = Some(error::protocol(&e.to_string()));
                        break exit;
                    }
                },
                verdict = async {
                    match contract.as_mut() {
                        Some(check) => (&mut check.0).await,
                        None => std::future::pending().await,
                    }
                }, if contract.is_some() => {
                    contract = None;
                    // A check that failed cannot judge: the program runs, and the argument
                    // checks at call time still apply.
                    let verdict = verdict.unwrap_or_else(|e| {
                        tracing::error!(error = %e, "the contract check failed; the program runs unjudged");
                        contract::Verdict::default()
                    });
                    // They quote literal arguments (what will be coerced): scanned like them.
                    for warning in verdict.warnings {
                        let warning = self.scan_text(RedactionPlace::Arguments, warning);
                        self.warnings.push(warning);
                    }
                    match verdict.refusal {
                        None => {
                            held = false;
                            if let Err(e) = channel.send(&SupervisorMessage::Proceed).await {
                                debug!(error = %e, "could not let the worker proceed; it is gone");
                            }
                        }
                        Some(refusal) => {
                            // Nothing of the program ran; it is stopped and the refusal is
                            // the answer (it wins over the worker's own `cancelled`).
                            debug!(message = %refusal.message, "the contract check refused the program");
                            self.failure = Some(refusal);
                            if !cancel_sent {
                                cancel_sent = true;
                                let _ = channel.send(&SupervisorMessage::Cancel).await;
                            }
                        }
                    }
                }
                Some(done) = calls.join_next_with_id(), if !calls.is_empty() => {
                    let answer = match done {
                        Ok((task, answer)) => {
                            call_ids.remove(&task);
                            answer
                        }
                        // The daemon failed while making the call (a panic in a source):
                        // the call fails, the program and the daemon go on.
                        Err(e) => {
                            let Some(id) = call_ids.remove(&e.id()) else { continue };
                            tracing::error!(call = id, error = %e, "a tool call's task failed");
                            call::failed(id)
                        }
                    };
                    self.deliver(&mut channel, answer).await;
                }
                _ = tokio::time::sleep_until(deadline), if !cancel_sent => {
                    // Ask politely first: a worker blocked waiting for tool results stops at
                    // once and reports where it was; a spinning one is stopped by its own
                    // interrupt handler at the same deadline.
                    cancel_sent = true;
                    self.timed_out = true;
                    settling = settling.or_else(|| settling_of(&calls, job));
                    let _ = channel.send(&SupervisorMessage::Cancel).await;
                }
                reason = &mut stop_requested, if self.stopped.is_none() => {
                    // The program stops now rather than at its deadline. It is still stopped
                    // the usual way, so that the calls it made are in the record the audit
                    // log gets.
                    self.stopped = Some(reason);
                    settling = settling.or_else(|| settling_of(&calls, job));
                    info!(?reason, "cancelling the execution");
                    if !cancel_sent {
                        cancel_sent = true;
                        let _ = channel.send(&SupervisorMessage::Cancel).await;
                    }
                    kill_at = kill_at.min(tokio::time::Instant::now() + KILL_GRACE);
                }
                _ = tokio::time::sleep_until(kill_at) => {
                    if self.stopped.is_some() {
                        debug!("worker did not stop when cancelled; killing it");
                        break process.kill_and_reap(Duration::from_secs(2)).await;
                    }
                    self.timed_out = true;
                    warn!("worker missed its deadline; killing it");
                    break process.kill_and_reap(Duration::from_secs(2)).await;
                }
            }
        };
        settle_or_abort(calls, job.session.as_deref(), settling);
        self.stats.run_ms = ms(run_started.elapsed());
        if exit.is_some() {
            return exit;
        }
        // After Done the worker exits once we hang up, and the pool replaces it. Neither is
        // the agent's business, so both happen in the background; for an execution running
        // alone they wait until its answer is usually out (`AFTER_ANSWER`), because on a small
        // machine the worker's exit (unmapping its memory) competes with writing the answer
        // and with the client reading it.
        self.worker_answered = true;
        let pool = env.pool.clone();
        let alone = pool.in_use() <= 1;
        tokio::spawn(
            async move {
                if alone {
                    tokio::time::sleep(AFTER_ANSWER).await;
                }
                drop(channel);
                pool.replenish();
                if tokio::time::timeout(Duration::from_millis(500), process.wait())
                    .await
                    .is_err()
                {
                    warn!("worker did not exit after Done; killing it");
                    process.kill_and_reap(Duration::from_secs(1)).await;
                }
            }
            .in_current_span(),
        );
        None
    }

    /// Redacts secrets in the program's agent-bound text, remembering what it replaced.
    pub(super) fn scan_text(&mut self, place: RedactionPlace, text: String) -> String {
        let (clean, findings) = self.scanner.scan_text(&text);
        if findings.is_empty() {
            return text;
        }
        let clean = clean.into_owned();
        note_findings(&mut self.redactions, place, &findings);
        clean
    }

    /// Redacts secrets in one of the program's agent-bound values.
    pub(super) fn scan_json(&mut self, place: RedactionPlace, value: &mut Value) {
        let findings = self.scanner.scan_json(value);
        note_findings(&mut self.redactions, place, &findings);
    }

    async fn console(&mut self, level: ConsoleLevel, text: String) {
        let (stream, place) = if level.is_stderr() {
            (ConsoleStream::Stderr, RedactionPlace::Stderr)
        } else {
            (ConsoleStream::Stdout, RedactionPlace::Stdout)
        };
        let text = self.scan_text(place, text);
        // The worker enforces the output limit; this is the supervisor's own backstop so a
        // misbehaving worker cannot make the daemon buffer without bound.
        let room = usize::try_from(self.max_output.saturating_sub(self.output_bytes))
            .unwrap_or(usize::MAX);
        let line_len = text.len() + 1;
        if line_len > room {
            self.output_truncated = true;
            return;
        }
        self.output_bytes += line_len as u64;
        let buf = match stream {
            ConsoleStream::Stdout => &mut self.stdout,
            ConsoleStream::Stderr => &mut self.stderr,
        };
        buf.push_str(&text);
        buf.push('\n');
        let level = format!("{level:?}").to_lowercase();
        self.emit(ExecutionEvent::Console {
            stream,
            level,
            text,
        })
        .await;
    }

    /// A tool call arrives: it is recorded in the trace and admitted by the pipeline in call
    /// order; the rest of the pipeline runs in its own task, concurrently with the others.
    /// Starts a call: its task, or (a call refused at arrival or replayed from the journal)
    /// its answer, which needs no task.
    async fn start_call(
        &mut self,
        calls: &mut JoinSet<CallAnswer>,
        request: CallRequest,
        at: Option<SourcePosition>,
    ) -> Begun {
        let (id, tool) = (request.id, request.tool.clone());
        let now = Instant::now();
        let admitted = call::admit(&self.calls, request, self.tool_calls.len() + 1);
        self.tool_calls.push(ToolCallRecord {
            id,
            tool: tool.clone(),
            args: admitted.args().clone(),
            outcome: CallOutcome::Pending,
            error: None,
            result: None,
            result_truncated: false,
            started_ms: ms(now - self.origin),
            duration_ms: 0.0,
            replayed: false,
            divergence: None,
            redactions: Vec::new(),
            coercions: Vec::new(),
        });
        self.call_started.push(now);
        self.emit(ExecutionEvent::ToolCallStarted { id, tool })
            .await;
        match admitted.answer_at_arrival() {
            Arrival::Answered(answer) => Begun::Answered(answer),
            Arrival::ToSource(admitted) => {
                Begun::Task(calls.spawn(admitted.complete().in_current_span()).id())
            }
            Arrival::Held(Held::Client(call)) => {
                self.held.push(call);
                Begun::Held
            }
            Arrival::Held(Held::Approval { id, tool, args }) => {
                let args_hash = crate::journal::canonical::hash(&args);
                self.held_approvals.push(HeldApproval {
                    id,
                    tool,
                    args,
                    args_hash,
                    at,
                });
                Begun::Held
            }
        }
    }

    /// Records a call's answer and sends it to the worker.
    async fn deliver(&mut self, channel: &mut WorkerChannel, answer: CallAnswer) {
        let clock_ms = answer.clock_ms;
        let (id, result) = self.finish_call(answer).await;
        let msg = SupervisorMessage::ToolResult {
            id,
            result,
            clock_ms,
        };
        self.results_sent = self.results_sent.saturating_add(1);
        if let Err(e) = channel.send(&msg).await {
            debug!(error = %e, "could not deliver a tool result; the worker is gone");
        }
    }

    /// A call's answer: recorded in the trace, and returned as the worker gets it.
    async fn finish_call(&mut self, answer: CallAnswer) -> (u32, Result<String, ToolFailure>) {
        let CallAnswer {
            id,
            result,
            redactions,
            coercions,
            replayed,
            divergence,
            warning,
            ..
        } = answer;
        self.warnings.extend(warning);
        let for_worker = match &result {
            Ok(text) => Ok(text.clone()),
            Err(e) => Err(ToolFailure {
                code: e.code.as_str().to_owned(),
                message: e.message.clone(),
                hint: e.hint.clone(),
            }),
        };
        // Calls are recorded in id order (ids increase).
        let Ok(idx) = self.tool_calls.binary_search_by_key(&id, |c| c.id) else {
            return (id, for_worker);
        };
        let duration_ms = ms(self.call_started[idx].elapsed());
        let record = &mut self.tool_calls[idx];
        record.duration_ms = duration_ms;
        record.redactions = redactions;
        record.coercions = coercions;
        record.replayed = replayed;
        record.divergence = divergence;
        match result {
            Ok(text) => {
                record.outcome = CallOutcome::Ok;
                // The scanned text the worker gets, so the trace shows what the program saw.
                let (shown, cut) = super::result_preview::preview(&text, &mut self.results_budget);
                record.result = shown;
                record.result_truncated = cut;
            }
            Err(e) => {
                record.outcome = CallOutcome::Error;
                record.error = Some(e);
            }
        }
        let event = ExecutionEvent::ToolCallFinished {
            id,
            tool: record.tool.clone(),
            outcome: record.outcome,
            duration_ms,
        };
        self.emit(event).await;
        (id, for_worker)
    }
}

/// The calls still in flight when an execution ended (a rejection, a timeout, a cancel, a
/// client that hung up). They were sent, so their side effects may have happened: in a
/// session they settle in the background, each bounded by its own deadline and holding no
/// worker, and their outcomes are recorded, so that the re-run replays them instead of
/// sending them again (the re-run waits for them, `Journal::wait_settled`). Without a session
/// nothing would record them, and they are stopped.
fn settle_or_abort(
    mut calls: JoinSet<CallAnswer>,
    session: Option<&SessionRun>,
    settling: Option<Settling>,
) {
    if calls.is_empty() {
        return;
    }
    let Some(run) = session else {
        calls.abort_all();
        return;
    };
    let settling = settling.unwrap_or_else(|| run.journal.settling(&run.session));
    info!(
        calls = calls.len(),
        session = %run.session,
        "calls in flight when the execution ended settle in the background; their outcomes are recorded"
    );
    tokio::spawn(
        async move {
            let _settling = settling;
            while calls.join_next().await.is_some() {}
        }
        .in_current_span(),
    );
}

/// The session's mark that this execution's calls in flight must settle before a re-run reads
/// the records: when it has a session and calls in flight.
fn settling_of(calls: &JoinSet<CallAnswer>, job: &ExecutionJob) -> Option<Settling> {
    let run = job.session.as_ref()?;
    (!calls.is_empty()).then(|| run.journal.settling(&run.session))
}
