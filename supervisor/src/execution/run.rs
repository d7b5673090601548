//! The run loop of one execution: take a worker, send the program, judge its literal tool
//! calls, hand every tool call to the call pipeline, collect console output and progress,
//! enforce the wall-clock deadline, and notice a worker that dies or breaks the protocol.

use super::contract;
use super::error;
use super::output::Output;
use super::plan::{Events, Plan};
use super::registry::StopSignals;
use super::response::Ending;
use super::store_calls;
use super::trace::{Holds, Trace};
use super::worker::{self, StartedWorker};
use crate::agent_api::{ExecutionEvent, ExecutionResponse, ExecutionStats, RedactionPlace};
use crate::journal::{SessionRun, Settling};
use crate::tools::call::{self, Arrival, CallAnswer, CallRequest, CallScope};
use crate::tools::catalogue::CallerCatalogue;
use crate::workers::pool::{ChannelError, WorkerChannel, message_name};
use crate::workers::process::{WorkerExit, WorkerProcess};
use airlock_proto::{
    MAX_TOOL_ARGS_BYTES, Outcome, SourcePosition, SupervisorMessage, ToolReferences, WorkerMessage,
    WorkerStats,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::{JoinError, JoinSet};
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

/// Runs one execution of `plan` to completion, in its `session` if it has one. Events, if
/// wanted, are sent as they happen; the returned response is also the final event's payload.
/// The caller holds the execution's slot; `nice` is the slot's share of the CPUs, `queued`
/// when the execution was admitted.
///
/// The client is gone when the receiver of `events` is dropped (streaming) or when the sender
/// of `stop.client` is (a plain request whose handler hyper dropped); `stop.cancel` is a
/// cancellation asked for through the registry. Either way the program is stopped and the
/// response, with status `cancelled`, is still returned for the audit log.
pub(super) async fn run_execution(
    plan: &Plan,
    session: Option<Arc<SessionRun>>,
    events: Events,
    stop: StopSignals,
    nice: i32,
    queued: Instant,
) -> ExecutionResponse {
    // The worker is taken and given the program first, so that it runs while the rest of the
    // run is set up (its span, its state, its first event).
    let origin = Instant::now();
    let started = worker::start(plan, nice).await;
    let span = info_span!(
        "execution",
        id = %plan.id,
        principal = %plan.principal.name,
        uid = plan.peer.uid,
        pid = plan.peer.pid.unwrap_or(0),
    );
    async move {
        let queue_wait = origin.saturating_duration_since(queued);
        let mut run = Run::new(plan, session, events, origin, queue_wait);
        run.emit(ExecutionEvent::Started {
            id: plan.id.clone(),
            session: plan.session_id(),
        })
        .await;
        let started = match started {
            Ok(started) => started,
            Err(no_worker) => {
                run.end.failure = Some(no_worker.failure());
                return run.finish();
            }
        };
        run.stats.worker_from_pool = started.checkout.from_pool;
        run.stats.spawn_ms = ms(started.checkout.wait);
        debug!(
            worker_pid = started.process.pid(),
            from_pool = started.checkout.from_pool,
            "worker checked out"
        );
        if let Some(exit) = run.drive(started, stop).await {
            debug!(worker = %exit.describe(), "worker ended abnormally");
        }
        if !run.worker_answered {
            // A worker that did not finish with Done is gone already: replace it now. (One
            // that did is replaced after the answer, by the task that hangs up on it.)
            plan.generation.pool.replenish();
        }
        let response = run.finish();
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

pub(super) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The state of one execution while it runs, by concern: what the program says (`output`),
/// the calls it made (`trace`) and holds (`held`), and how it ended (`end`).
pub(super) struct Run<'p> {
    pub(super) plan: &'p Plan,
    /// When the execution started: the origin of `stats.total_ms` and of each call's
    /// `started_ms`.
    pub(super) origin: Instant,
    events: Events,
    /// What the execution's tool calls share (registry, principal, budget, rate, scanner).
    pub(super) calls: Arc<CallScope>,
    /// Its session's journal, when it runs in a session.
    pub(super) session: Option<Arc<SessionRun>>,
    pub(super) output: Output,
    pub(super) trace: Trace,
    pub(super) held: Holds,
    pub(super) end: Ending,
    pub(super) stats: ExecutionStats,
    /// What the agent should know that did not stop the program (a call whose outcome the
    /// journal could not record, the contract check's warnings).
    pub(super) warnings: Vec<String>,
    /// The worker finished with `Done`: hanging up on it and replacing it in the pool are
    /// left to a background task.
    worker_answered: bool,
}

/// The worker while its program runs, and what the loop keeps about it.
struct Driving {
    process: WorkerProcess,
    channel: WorkerChannel,
    /// Forked by the zygote: it measures its own peak memory.
    forked: bool,
    /// When `Start` was written.
    sent: Instant,
    calls: JoinSet<CallAnswer>,
    /// Which call each task answers, so a task that panicked still answers its call.
    call_ids: HashMap<tokio::task::Id, u32>,
    /// The contract check of the program's literal tool calls, while it lists the tools of
    /// the namespaces they name (which may start a server): in a task of its own, so the
    /// deadline and a client hanging up still apply, and a panic costs only the check.
    contract: Option<AbortOnDrop<contract::Verdict>>,
    /// The worker sent its tool references and has not been told to proceed: it may not call
    /// tools now (and never will, if the program was refused).
    awaiting_verdict: bool,
    references_seen: bool,
    cancel_sent: bool,
    kill_at: tokio::time::Instant,
    /// Set once the program is being stopped (its deadline, a cancel, a client that hung up)
    /// with calls in flight: from then on a re-run in the session waits for them (see
    /// `settle_or_abort`), even before the loop ends.
    settling: Option<Settling>,
}

/// What the loop does after one of its events.
enum Step {
    Go,
    /// The worker is done (`None`: it answered with `Done`) or gone, and how it ended.
    End(Option<WorkerExit>),
}

/// What became of a call at its arrival.
enum Begun {
    /// It runs in its own task.
    Task(tokio::task::Id),
    /// Refused or replayed or answered by the agent: answered at once.
    Answered(CallAnswer),
    /// A client tool's call without an answer, or one for an approver: it waits.
    Held,
}

impl<'p> Run<'p> {
    fn new(
        plan: &'p Plan,
        session: Option<Arc<SessionRun>>,
        events: Events,
        origin: Instant,
        queue_wait: Duration,
    ) -> Run<'p> {
        let generation = &plan.generation;
        let calls = Arc::new(CallScope {
            execution_id: plan.id.clone(),
            principal: plan.principal.clone(),
            registry: generation.tools.clone(),
            max_tool_calls: plan.limits.max_tool_calls,
            rate: plan.tool_call_rate.clone(),
            scanner: generation.scanner.clone(),
            secret_scanning: generation.policy.secret_scanning.clone(),
            events: events.clone(),
            journal: session.clone(),
            client: plan.client.clone(),
            catalogue: CallerCatalogue::new(
                generation.catalogue.clone(),
                generation.tools.clone(),
                plan.principal.clone(),
            ),
            learning: generation.catalogue.learning().clone(),
            flow: crate::tools::flow::FlowLedger::new(&generation.policy.information_flow)
                .map(std::sync::Mutex::new),
        });
        Run {
            plan,
            origin,
            events,
            calls,
            session,
            output: Output::new(generation.scanner.clone(), plan.limits.max_output_bytes),
            trace: Trace::new(),
            held: Holds::default(),
            end: Ending::default(),
            stats: ExecutionStats {
                queue_ms: ms(queue_wait),
                ..ExecutionStats::default()
            },
            warnings: Vec::new(),
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
    async fn drive(&mut self, started: StartedWorker, stop: StopSignals) -> Option<WorkerExit> {
        let StartedWorker {
            process,
            channel,
            forked,
            sent,
            ..
        } = started;
        // The worker's own deadline starts as it reads `Start`: a little after this.
        let deadline = tokio::time::Instant::from_std(sent)
            + Duration::from_millis(self.plan.limits.timeout_ms);
        let mut w = Driving {
            process,
            channel,
            forked,
            sent,
            calls: JoinSet::new(),
            call_ids: HashMap::new(),
            contract: None,
            awaiting_verdict: false,
            references_seen: false,
            cancel_sent: false,
            kill_at: deadline + KILL_GRACE,
            settling: None,
        };
        let stop_requested = stop_requested(self.events.clone(), stop);
        tokio::pin!(stop_requested);
        let exit = loop {
            let step = tokio::select! {
                msg = w.channel.recv() => self.on_message(&mut w, msg).await,
                verdict = verdict(&mut w.contract), if w.contract.is_some() => {
                    self.on_verdict(&mut w, verdict).await
                }
                Some(done) = w.calls.join_next_with_id(), if !w.calls.is_empty() => {
                    self.on_call_done(&mut w, done).await
                }
                _ = tokio::time::sleep_until(deadline), if !w.cancel_sent => {
                    self.on_deadline(&mut w).await
                }
                reason = &mut stop_requested, if self.end.stopped.is_none() => {
                    self.on_stop(&mut w, reason).await
                }
                _ = tokio::time::sleep_until(w.kill_at) => self.on_kill_time(&mut w).await,
            };
            if let Step::End(exit) = step {
                break exit;
            }
        };
        let Driving {
            process,
            channel,
            sent,
            calls,
            settling,
            ..
        } = w;
        settle_or_abort(calls, self.session.as_deref(), settling);
        self.stats.run_ms = ms(sent.elapsed());
        if exit.is_some() {
            return exit;
        }
        self.worker_answered = true;
        worker::let_go(&self.plan.generation.pool, process, channel);
        None
    }

    /// A message from the worker, or the channel's failure.
    async fn on_message(
        &mut self,
        w: &mut Driving,
        msg: Result<WorkerMessage, ChannelError>,
    ) -> Step {
        match msg {
            Ok(WorkerMessage::Done { outcome, stats }) => {
                self.done(w, outcome, stats);
                Step::End(None)
            }
            Ok(WorkerMessage::Console { level, text }) => {
                if let Some(event) = self.output.console(level, text) {
                    self.emit(event).await;
                }
                Step::Go
            }
            Ok(WorkerMessage::Progress { value_json }) => {
                let mut value =
                    serde_json::from_str(&value_json).unwrap_or(Value::String(value_json));
                self.output.scan_json(RedactionPlace::Progress, &mut value);
                self.emit(ExecutionEvent::Progress { value }).await;
                Step::Go
            }
            Ok(WorkerMessage::ToolReferences(references)) => {
                self.on_references(w, references).await
            }
            Ok(WorkerMessage::ToolCall {
                id,
                tool,
                args_json,
                at,
            }) => {
                self.on_call(
                    w,
                    CallRequest {
                        id,
                        tool,
                        args_json,
                    },
                    at,
                )
                .await
            }
            Ok(WorkerMessage::Idle { results }) => {
                self.on_idle(w, results).await;
                Step::Go
            }
            Ok(other @ WorkerMessage::Ready { .. }) => {
                let exit = w.process.kill_and_reap(Duration::from_secs(1)).await;
                self.end.failure = Some(error::protocol(&format!(
                    "unexpected {} message",
                    message_name(&other)
                )));
                Step::End(exit)
            }
            Err(ChannelError::Closed) | Err(ChannelError::Io(_)) => {
                // The worker died; its exit status says why.
                let exit =
                    match tokio::time::timeout(Duration::from_secs(2), w.process.wait()).await {
                        Ok(Ok(exit)) => Some(exit),
                        _ => w.process.kill_and_reap(Duration::from_secs(1)).await,
                    };
                self.end.failure = Some(error::crashed(
                    "the worker process ended before the program finished",
                    exit,
                ));
                Step::End(exit)
            }
            Err(e @ ChannelError::Frame(_)) => {
                let exit = w.process.kill_and_reap(Duration::from_secs(1)).await;
                warn!(error = %e, "worker broke the protocol; killed");
                self.end.failure = Some(error::protocol(&e.to_string()));
                Step::End(exit)
            }
        }
    }

    /// `Done`: the worker's report, and its peak memory.
    fn done(&mut self, w: &Driving, outcome: Outcome, stats: WorkerStats) {
        self.end.outcome = Some(outcome);
        self.end.worker_stats = Some(stats);
        debug!(
            elapsed_us = u64::try_from(w.sent.elapsed().as_micros()).unwrap_or(u64::MAX),
            "worker done"
        );
        // A forked worker measured itself (its /proc figure would include the zygote's); an
        // exec'd one's /proc entry is still there, as it waits for our hang-up.
        self.stats.peak_rss_bytes = if w.forked {
            Some(stats.peak_rss_bytes).filter(|b| *b > 0)
        } else {
            w.process.peak_rss_bytes()
        };
    }

    /// The program's literal tool calls, once, before it runs: judged in a task of their own.
    async fn on_references(&mut self, w: &mut Driving, references: ToolReferences) -> Step {
        // Once, before the program runs: after a tool call it could only be a compromised or
        // mismatched worker.
        if w.references_seen || self.trace.last_id > 0 {
            let exit = w.process.kill_and_reap(Duration::from_secs(1)).await;
            warn!("worker sent tool references out of order; killed");
            self.end.failure = Some(error::protocol("tool references out of order"));
            return Step::End(exit);
        }
        w.references_seen = true;
        w.awaiting_verdict = true;
        let tools = self.plan.generation.tools.clone();
        let principal = self.plan.principal.clone();
        let client = self.plan.client.as_ref().map(|c| c.tools.descriptors());
        w.contract = Some(AbortOnDrop(tokio::spawn(
            async move { contract::check(&tools, &principal, client, &references).await }
                .in_current_span(),
        )));
        Step::Go
    }

    /// A tool call: checked against the protocol, then started.
    async fn on_call(
        &mut self,
        w: &mut Driving,
        request: CallRequest,
        at: Option<SourcePosition>,
    ) -> Step {
        // The worker numbers calls 1, 2, 3, ... and never sends more than it accepts itself;
        // anything else is a compromised or mismatched worker, and answering it would corrupt
        // the trace (two calls under one id) or hold unbounded argument text. A worker waiting
        // for the contract check's verdict makes no calls.
        let id = request.id;
        let broken = if w.awaiting_verdict {
            Some(format!(
                "tool call {id} before the contract check's verdict"
            ))
        } else if id <= self.trace.last_id {
            Some(format!("tool call id {id} after id {}", self.trace.last_id))
        } else if request.args_json.len() > MAX_TOOL_ARGS_BYTES {
            Some(format!(
                "tool call arguments of {} bytes, over the {} byte limit",
                request.args_json.len(),
                MAX_TOOL_ARGS_BYTES
            ))
        } else {
            None
        };
        if let Some(detail) = broken {
            let exit = w.process.kill_and_reap(Duration::from_secs(1)).await;
            warn!(detail = %detail, "worker broke the protocol; killed");
            self.end.failure = Some(error::protocol(&detail));
            return Step::End(exit);
        }
        self.trace.last_id = id;
        match self.start_call(&mut w.calls, request, at).await {
            Begun::Task(task) => {
                w.call_ids.insert(task, id);
            }
            Begun::Answered(answer) => self.deliver(&mut w.channel, answer).await,
            Begun::Held => {}
        }
        Step::Go
    }

    /// `Idle`: the program waits. If it has seen every answer sent, no call is in flight here,
    /// and it waits for the agent's answers, nothing but the agent can move it: it stops, to
    /// be run again with the answers.
    async fn on_idle(&mut self, w: &mut Driving, results: u32) {
        if results == self.trace.results_sent
            && w.calls.is_empty()
            && !self.held.is_empty()
            && !self.held.waiting
            && !w.cancel_sent
        {
            debug!(
                client_calls = self.held.calls.len(),
                approvals = self.held.approvals.len(),
                "the program waits for someone outside the daemon"
            );
            self.held.waiting = true;
            w.cancel_sent = true;
            let _ = w.channel.queue(&SupervisorMessage::Cancel);
        }
    }

    /// The contract check's verdict: the program proceeds, or is refused before anything of it
    /// ran.
    async fn on_verdict(
        &mut self,
        w: &mut Driving,
        verdict: Result<contract::Verdict, JoinError>,
    ) -> Step {
        w.contract = None;
        // A check that failed cannot judge: the program runs, and the argument checks at call
        // time still apply.
        let verdict = verdict.unwrap_or_else(|e| {
            tracing::error!(error = %e, "the contract check failed; the program runs unjudged");
            contract::Verdict::default()
        });
        // They quote literal arguments (what will be coerced): scanned like them.
        for warning in verdict.warnings {
            let warning = self.output.scan_text(RedactionPlace::Arguments, warning);
            self.warnings.push(warning);
        }
        match verdict.refusal {
            None => {
                w.awaiting_verdict = false;
                if let Err(e) = w.channel.queue(&SupervisorMessage::Proceed) {
                    debug!(error = %e, "could not let the worker proceed");
                }
            }
            Some(refusal) => {
                // Nothing of the program ran; it is stopped and the refusal is the answer (it
                // wins over the worker's own `cancelled`).
                debug!(message = %refusal.message, "the contract check refused the program");
                self.end.failure = Some(refusal);
                w.cancel(None).await;
            }
        }
        Step::Go
    }

    /// A call's task ended: its answer goes to the worker.
    async fn on_call_done(
        &mut self,
        w: &mut Driving,
        done: Result<(tokio::task::Id, CallAnswer), JoinError>,
    ) -> Step {
        let answer = match done {
            Ok((task, answer)) => {
                w.call_ids.remove(&task);
                answer
            }
            // The daemon failed while making the call (a panic in a source): the call fails,
            // the program and the daemon go on.
            Err(e) => {
                let Some(id) = w.call_ids.remove(&e.id()) else {
                    return Step::Go;
                };
                tracing::error!(call = id, error = %e, "a tool call's task failed");
                call::failed(id)
            }
        };
        self.deliver(&mut w.channel, answer).await;
        Step::Go
    }

    /// The deadline passed. Ask politely first: a worker blocked waiting for tool results
    /// stops at once and reports where it was; a spinning one is stopped by its own interrupt
    /// handler at the same deadline.
    async fn on_deadline(&mut self, w: &mut Driving) -> Step {
        self.end.timed_out = true;
        w.settle_calls(self.session.as_ref());
        w.cancel(None).await;
        Step::Go
    }

    /// The program stops now rather than at its deadline. It is still stopped the usual way,
    /// so that the calls it made are in the record the audit log gets.
    async fn on_stop(&mut self, w: &mut Driving, reason: StopReason) -> Step {
        self.end.stopped = Some(reason);
        w.settle_calls(self.session.as_ref());
        info!(?reason, "cancelling the execution");
        w.cancel(Some(tokio::time::Instant::now() + KILL_GRACE))
            .await;
        Step::Go
    }

    /// The worker outlived its deadline, or a cancel, by [`KILL_GRACE`].
    async fn on_kill_time(&mut self, w: &mut Driving) -> Step {
        if self.end.stopped.is_some() {
            debug!("worker did not stop when cancelled; killing it");
        } else {
            self.end.timed_out = true;
            warn!("worker missed its deadline; killing it");
        }
        Step::End(w.process.kill_and_reap(Duration::from_secs(2)).await)
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
        if store_calls::is_store_call(&tool) {
            // The session store: answered here, never by the tool-call pipeline.
            let (shown, answer) = self.store_call(&request);
            self.trace
                .open(id, tool.clone(), shown, ms(now - self.origin), now);
            self.emit(ExecutionEvent::ToolCallStarted { id, tool })
                .await;
            return Begun::Answered(answer);
        }
        let mut admitted = call::admit(&self.calls, request, self.trace.records.len() + 1);
        self.trace.open(
            id,
            tool.clone(),
            admitted.args().clone(),
            ms(now - self.origin),
            now,
        );
        self.trace.flows(admitted.take_flows());
        self.emit(ExecutionEvent::ToolCallStarted { id, tool })
            .await;
        match admitted.answer_at_arrival() {
            Arrival::Answered(answer) => Begun::Answered(answer),
            Arrival::ToSource(admitted) => {
                Begun::Task(calls.spawn(admitted.complete().in_current_span()).id())
            }
            Arrival::Held(held) => {
                self.held.hold(held, at);
                Begun::Held
            }
        }
    }

    /// Records a call's answer in the trace and sends it to the worker.
    async fn deliver(&mut self, channel: &mut WorkerChannel, answer: CallAnswer) {
        let clock_ms = answer.clock_ms;
        // What the program is about to read: recorded before it can make a call from it, in
        // the order results are delivered (the same order a replay delivers them in).
        // An error counts only when its message is the tool's own (`upstream_error`); the
        // daemon's own refusals say nothing a third party wrote.
        if let Some(ledger) = &self.calls.flow
            && let Some(tool) = self.trace.tool_of(answer.id)
        {
            let delivered = match &answer.result {
                Ok(text) => Some(Ok(text.as_str())),
                Err(e) if e.code == crate::tools::ToolErrorCode::UpstreamError => {
                    Some(Err(e.message.as_str()))
                }
                Err(_) => None,
            };
            if let Some(delivered) = delivered {
                ledger
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .record(answer.id, tool, delivered);
            }
        }
        let (id, result, finished) = self.trace.close(answer, &mut self.warnings);
        if let Some(event) = finished {
            self.emit(event).await;
        }
        let msg = SupervisorMessage::ToolResult {
            id,
            result,
            clock_ms,
        };
        self.trace.results_sent = self.trace.results_sent.saturating_add(1);
        if let Err(e) = channel.queue(&msg) {
            debug!(error = %e, "could not deliver a tool result");
        }
    }
}

impl Driving {
    /// Tells the worker to stop (once), and to be killed at `kill_at` at the latest.
    async fn cancel(&mut self, kill_at: Option<tokio::time::Instant>) {
        if !self.cancel_sent {
            self.cancel_sent = true;
            let _ = self.channel.queue(&SupervisorMessage::Cancel);
        }
        if let Some(at) = kill_at {
            self.kill_at = self.kill_at.min(at);
        }
    }

    /// The program is being stopped: from now on a re-run in its session waits for the calls
    /// it has in flight.
    fn settle_calls(&mut self, session: Option<&Arc<SessionRun>>) {
        if self.settling.is_none() {
            self.settling = settling_of(&self.calls, session.map(Arc::as_ref));
        }
    }
}

/// The contract check's verdict, once its task ends (never, without one).
async fn verdict(
    check: &mut Option<AbortOnDrop<contract::Verdict>>,
) -> Result<contract::Verdict, JoinError> {
    match check.as_mut() {
        Some(check) => (&mut check.0).await,
        None => std::future::pending().await,
    }
}

/// Fires when the client hangs up (a streaming client's events receiver is dropped, or a plain
/// request's handler holding the sender of `stop.client` is), or when the execution is
/// cancelled through the registry.
async fn stop_requested(watched: Events, stop: StopSignals) -> StopReason {
    let StopSignals { client, mut cancel } = stop;
    let gone = async {
        match (watched, client) {
            (Some(events), _) => events.closed().await,
            (None, Some(client)) => {
                let _ = client.await;
            }
            (None, None) => std::future::pending().await,
        }
    };
    let cancelled = cancelled(&mut cancel);
    tokio::select! {
        () = gone => StopReason::ClientGone,
        () = cancelled => StopReason::Cancelled,
    }
}

/// Resolves when the execution is cancelled through the registry (never, once the registry
/// entry, which holds the sender, is gone).
async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
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
fn settling_of(calls: &JoinSet<CallAnswer>, session: Option<&SessionRun>) -> Option<Settling> {
    let run = session?;
    (!calls.is_empty()).then(|| run.journal.settling(&run.session))
}
