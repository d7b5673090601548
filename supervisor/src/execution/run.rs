//! One execution, from a validated request to its response: take a worker, send the program,
//! broker every tool call, collect console output, enforce the wall-clock deadline, and turn
//! whatever happened (including a crashed or killed worker) into a structured answer.

use crate::agent_api::{
    ConsoleStream, ExecutionError, ExecutionEvent, ExecutionResponse, ExecutionStats, PeerInfo,
    Redaction, RedactionPlace, Status, ToolCallRecord,
};
use crate::execution::contract;
use crate::rate_limiter::RateBucket;
use crate::secrets::scanner::{Finding, SecretScanner};
use crate::tools::{CallContext, ToolError, ToolProgress, ToolRegistry};
use crate::workers::pool::{ChannelError, ReadyWorker, WorkerPool, WorkerStartError, message_name};
use crate::workers::process::{WorkerExit, signal_name};
use airlock_policy::Principal;
use airlock_policy::{SecretAction, SecretScanning};
use airlock_proto::{
    ConsoleLevel, ErrorKind, ExecError, Language, Limits, MAX_FRAME_LEN, MAX_TOOL_ARGS_BYTES,
    Outcome, StartExecution, SupervisorMessage, ToolFailure, WorkerMessage, WorkerStats,
};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tracing::{Instrument, debug, info, info_span, warn};

/// How long past its deadline a worker may take to report the timeout itself before it is
/// killed. The engine's interrupt handler normally stops it at the deadline; this bounds the
/// case where it does not (blocked, or stuck in native code).
pub const KILL_GRACE: Duration = Duration::from_millis(100);

/// Everything an execution needs from the daemon.
#[derive(Debug, Clone)]
pub struct ExecutionEnv {
    pub pool: WorkerPool,
    pub tools: ToolRegistry,
    /// Scans every tool result before the worker gets it, and everything agent-bound.
    pub scanner: SecretScanner,
    /// Which sources' calls fail, rather than being redacted, when a result carries a secret.
    pub secret_scanning: SecretScanning,
}

/// A tool call's outcome as the supervisor hands it to the worker, with what the scanner
/// replaced in it.
type CallOutcome = (u32, Result<String, ToolFailure>, Vec<Redaction>);

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
}

/// Runs one execution to completion. Events, if wanted, are sent as they happen; the
/// returned response is also the final event's payload.
///
/// The client is gone when the receiver of `events` is dropped (streaming) or when the sender
/// of `client` is (a plain request whose handler hyper dropped): the program is then stopped
/// and the response, with status `cancelled`, is still returned for the audit log.
pub async fn run_execution(
    env: &ExecutionEnv,
    job: ExecutionJob,
    events: Option<mpsc::Sender<ExecutionEvent>>,
    client: Option<oneshot::Receiver<()>>,
) -> ExecutionResponse {
    let span = info_span!(
        "execution",
        id = %job.id,
        principal = %job.principal.name,
        uid = job.peer.uid,
        pid = job.peer.pid.unwrap_or(0),
    );
    async move {
        let total = Instant::now();
        let mut run = Run::new(&job, events, Some(env.scanner.clone()), total);
        run.emit(ExecutionEvent::Started { id: job.id.clone() })
            .await;
        let (worker, checkout) = match env.pool.checkout().await {
            Ok(w) => w,
            Err(e) => {
                run.fail_without_worker(&e);
                return run.finish(&job, total);
            }
        };
        run.stats.worker_from_pool = checkout.from_pool;
        run.stats.spawn_ms = ms(checkout.wait);
        debug!(
            worker_pid = worker.process.pid(),
            from_pool = checkout.from_pool,
            "worker checked out"
        );
        if let Some(exit) = run.drive(env, &job, worker, client).await {
            debug!(worker = %exit.describe(), "worker ended abnormally");
        }
        env.pool.replenish();
        let response = run.finish(&job, total);
        info!(
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

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The state of one execution while it runs.
struct Run {
    /// When the execution started: the origin of `stats.total_ms` and of each call's
    /// `started_ms`.
    origin: Instant,
    events: Option<mpsc::Sender<ExecutionEvent>>,
    /// Scans what the program prints and returns (`None` for a program refused before it ran:
    /// then everything agent-bound is the daemon's own text).
    scanner: Option<SecretScanner>,
    /// What the scanner replaced in the program's own output (console, progress, result,
    /// error).
    redactions: Vec<Redaction>,
    stdout: String,
    stderr: String,
    output_bytes: u64,
    output_truncated: bool,
    max_output: u64,
    tool_calls: Vec<ToolCallRecord>,
    call_started: Vec<Instant>,
    /// The id of the last `ToolCall`; ids must increase.
    last_call_id: u32,
    outcome: Option<Outcome>,
    /// A failure found by the supervisor (crash, kill, protocol error), which wins over the
    /// worker's own report.
    failure: Option<ExecutionError>,
    timed_out: bool,
    /// The client hung up (streaming or not), and the program was told to stop.
    client_gone: bool,
    worker_stats: Option<WorkerStats>,
    stats: ExecutionStats,
    timeout_ms: u64,
}

impl Run {
    fn new(
        job: &ExecutionJob,
        events: Option<mpsc::Sender<ExecutionEvent>>,
        scanner: Option<SecretScanner>,
        origin: Instant,
    ) -> Run {
        Run {
            origin,
            events,
            scanner,
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
            client_gone: false,
            worker_stats: None,
            stats: ExecutionStats {
                queue_ms: ms(job.queue_wait),
                ..ExecutionStats::default()
            },
            timeout_ms: job.limits.timeout_ms,
        }
    }

    async fn emit(&self, event: ExecutionEvent) {
        if let Some(tx) = &self.events {
            // A client that went away just stops receiving; the execution still completes.
            let _ = tx.send(event).await;
        }
    }

    fn fail_without_worker(&mut self, e: &WorkerStartError) {
        tracing::error!(error = %e, "no worker for execution");
        self.failure = Some(ExecutionError {
            kind: "internal".into(),
            name: None,
            message: format!("could not start a sandboxed worker: {e}"),
            line: None,
            column: None,
            stack: None,
            excerpt: None,
            hint: Some("this is a daemon problem, not a problem with the program; the operator should check the airlockd log and `GET /v1/health`".into()),
        });
    }

    /// Drives the worker until it reports `Done`, dies, or passes the deadline. Returns how
    /// the worker process ended, when that is known.
    async fn drive(
        &mut self,
        env: &ExecutionEnv,
        job: &ExecutionJob,
        worker: ReadyWorker,
        client: Option<oneshot::Receiver<()>>,
    ) -> Option<WorkerExit> {
        let ReadyWorker {
            mut process,
            mut channel,
            ..
        } = worker;
        let run_started = Instant::now();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(job.limits.timeout_ms);
        let start = SupervisorMessage::Start(StartExecution {
            execution_id: job.id.clone(),
            language: job.language,
            code: job.code.clone(),
            limits: job.limits,
        });
        let sent = channel.send(&start).await;
        debug!(
            elapsed_us = run_started.elapsed().as_micros() as u64,
            "program sent to worker"
        );
        if let Err(e) = sent {
            let exit = process.kill_and_reap(Duration::from_secs(1)).await;
            self.failure = Some(crash_error(
                &format!("could not send the program to the worker: {e}"),
                exit,
            ));
            return exit;
        }

        let mut calls: JoinSet<CallOutcome> = JoinSet::new();
        // The contract check of the program's literal tool calls, while it lists the tools
        // of the namespaces they name (which may start a server): it runs inside this loop,
        // so the deadline and a client hanging up still apply.
        let mut contract: Option<
            Pin<Box<dyn Future<Output = Option<ExecutionError>> + Send + '_>>,
        > = None;
        // The worker sent its tool references and has not been told to proceed: it may not
        // call tools now (and never will, if the program was refused).
        let mut held = false;
        let mut references_seen = false;
        let mut cancel_sent = false;
        let mut kill_at = deadline + KILL_GRACE;
        // Fires when the client hangs up: a streaming client's events receiver is dropped, or
        // a plain request's handler (holding the sender of `client`) is.
        let watched = self.events.clone();
        let client_gone = async move {
            match (watched, client) {
                (Some(events), _) => events.closed().await,
                (None, Some(client)) => {
                    let _ = client.await;
                }
                (None, None) => std::future::pending().await,
            }
        };
        tokio::pin!(client_gone);
        let exit = loop {
            tokio::select! {
                msg = channel.recv() => match msg {
                    Ok(WorkerMessage::Done { outcome, stats }) => {
                        self.outcome = Some(outcome);
                        self.worker_stats = Some(stats);
                        debug!(elapsed_us = run_started.elapsed().as_micros() as u64, "worker done");
                        // The worker waits for our hang-up after Done, so it is still there.
                        self.stats.peak_rss_bytes = process.peak_rss_bytes();
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
                            self.failure = Some(protocol_error("tool references out of order"));
                            break exit;
                        }
                        references_seen = true;
                        held = true;
                        let tools = &env.tools;
                        contract = Some(Box::pin(async move {
                            contract::check(tools, &references).await
                        }));
                    }
                    Ok(WorkerMessage::ToolCall { id, tool, args_json }) => {
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
                            self.failure = Some(protocol_error(&detail));
                            break exit;
                        }
                        self.last_call_id = id;
                        self.start_call(env, job, &mut calls, id, tool, args_json).await;
                    }
                    Ok(other @ WorkerMessage::Ready { .. }) => {
                        let exit = process.kill_and_reap(Duration::from_secs(1)).await;
                        self.failure = Some(protocol_error(&format!("unexpected {} message", message_name(&other))));
                        break exit;
                    }
                    Err(ChannelError::Closed) | Err(ChannelError::Io(_)) => {
                        // The worker died; its exit status says why.
                        let exit = match tokio::time::timeout(Duration::from_secs(2), process.wait()).await {
                            Ok(Ok(exit)) => Some(exit),
                            _ => process.kill_and_reap(Duration::from_secs(1)).await,
                        };
                        self.failure = Some(crash_error("the worker process ended before the program finished", exit));
                        break exit;
                    }
                    Err(e @ ChannelError::Frame(_)) => {
                        let exit = process.kill_and_reap(Duration::from_secs(1)).await;
                        warn!(error = %e, "worker broke the protocol; killed");
                        self.failure = Some(protocol_error(&e.to_string()));
                        break exit;
                    }
                },
                verdict = async {
                    match contract.as_mut() {
                        Some(check) => check.await,
                        None => std::future::pending().await,
                    }
                }, if contract.is_some() => {
                    contract = None;
                    match verdict {
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
                Some(done) = calls.join_next(), if !calls.is_empty() => {
                    let Ok((id, result, redactions)) = done else { continue };
                    self.finish_call(id, &result, redactions).await;
                    let msg = SupervisorMessage::ToolResult { id, result };
                    if let Err(e) = channel.send(&msg).await {
                        debug!(error = %e, "could not deliver a tool result; the worker is gone");
                    }
                }
                _ = tokio::time::sleep_until(deadline), if !cancel_sent => {
                    // Ask politely first: a worker blocked waiting for tool results stops at
                    // once and reports where it was; a spinning one is stopped by its own
                    // interrupt handler at the same deadline.
                    cancel_sent = true;
                    self.timed_out = true;
                    let _ = channel.send(&SupervisorMessage::Cancel).await;
                }
                () = &mut client_gone, if !self.client_gone => {
                    // Nobody will read the result, so the program stops now rather than at
                    // its deadline. It is still stopped the usual way, so that the calls it
                    // made are in the record the audit log gets.
                    self.client_gone = true;
                    info!("the client went away; cancelling the execution");
                    if !cancel_sent {
                        cancel_sent = true;
                        let _ = channel.send(&SupervisorMessage::Cancel).await;
                    }
                    kill_at = kill_at.min(tokio::time::Instant::now() + KILL_GRACE);
                }
                _ = tokio::time::sleep_until(kill_at) => {
                    if self.client_gone {
                        debug!("worker did not stop when cancelled; killing it");
                        break process.kill_and_reap(Duration::from_secs(2)).await;
                    }
                    self.timed_out = true;
                    warn!("worker missed its deadline; killing it");
                    break process.kill_and_reap(Duration::from_secs(2)).await;
                }
            }
        };
        calls.abort_all();
        self.stats.run_ms = ms(run_started.elapsed());
        if exit.is_some() {
            return exit;
        }
        // After Done the worker exits once we hang up. Its teardown (unmapping the heap) is not
        // the agent's business, so it is reaped in the background, off the response path.
        tokio::spawn(
            async move {
                drop(channel);
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
    fn scan_text(&mut self, place: RedactionPlace, text: String) -> String {
        let Some(scanner) = &self.scanner else {
            return text;
        };
        let (clean, findings) = scanner.scan_text(&text);
        if findings.is_empty() {
            return text;
        }
        let clean = clean.into_owned();
        note_findings(&mut self.redactions, place, &findings);
        clean
    }

    /// Redacts secrets in one of the program's agent-bound values.
    fn scan_json(&mut self, place: RedactionPlace, value: &mut Value) {
        let Some(scanner) = &self.scanner else {
            return;
        };
        let findings = scanner.scan_json(value);
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
        let room = self.max_output.saturating_sub(self.output_bytes) as usize;
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

    async fn start_call(
        &mut self,
        env: &ExecutionEnv,
        job: &ExecutionJob,
        calls: &mut JoinSet<CallOutcome>,
        id: u32,
        tool: String,
        args_json: String,
    ) {
        let parsed = serde_json::from_str::<Value>(&args_json);
        let unreadable = parsed.as_ref().err().map(|e| e.to_string());
        let args = parsed.unwrap_or(Value::Null);
        let now = Instant::now();
        self.tool_calls.push(ToolCallRecord {
            id,
            tool: tool.clone(),
            args: args.clone(),
            outcome: "pending".into(),
            error: None,
            started_ms: ms(now - self.origin),
            duration_ms: 0.0,
            redactions: Vec::new(),
        });
        self.call_started.push(now);
        self.emit(ExecutionEvent::ToolCallStarted {
            id,
            tool: tool.clone(),
        })
        .await;

        let check = if self.tool_calls.len() > job.limits.max_tool_calls as usize {
            Err(ToolError::new(
                "tool_call_limit",
                format!("this execution reached its limit of {} tool calls", job.limits.max_tool_calls),
            )
            .with_hint("batch the work into fewer calls, or ask the operator to raise limits.max_tool_calls"))
        } else if !job.principal.allows_tool(&tool) {
            Err(ToolError::new(
                "denied",
                format!(
                    "principal `{}` is not allowed to call `{tool}`",
                    job.principal.name
                ),
            )
            .with_hint("the operator grants tools with `allow` in the principal's policy entry"))
        } else if let Some(reason) = unreadable {
            Err(unreadable_json_error(
                &format!("arguments of `{tool}`"),
                &reason,
            ))
        } else if !args.is_object() {
            Err(ToolError::new(
                "invalid_arguments",
                format!(
                    "arguments of `{tool}` must be an object, got {}",
                    json_type(&args)
                ),
            )
            .with_hint(format!("call it as tools.{tool}({{ ... }})")))
        } else if let Some(Err(limited)) = job.tool_call_rate.as_ref().map(|b| b.try_take()) {
            // Checked last: only a call that would be made spends the principal's rate.
            Err(ToolError::new(
                "rate_limited",
                format!(
                    "principal `{}` may make {} tool calls per minute and has used them",
                    job.principal.name, limited.per_minute
                ),
            )
            .with_hint(format!(
                "wait {:.1} s before the next call, or make fewer calls; the operator sets principal.tool_calls_per_minute",
                limited.retry_after.as_secs_f64()
            )))
        } else {
            Ok(())
        };
        let registry = env.tools.clone();
        let ctx = CallContext {
            execution_id: job.id.clone(),
            principal: job.principal.name.clone(),
            call_id: id,
            progress: ToolProgress::new(
                self.events.clone(),
                id,
                tool.clone(),
                Some(env.scanner.clone()),
            ),
        };
        let scanner = env.scanner.clone();
        let namespace = tool.split('.').next().unwrap_or_default();
        let on_secret = env.secret_scanning.action(namespace);
        calls.spawn(
            async move {
                // Resolving may start a lazily started server, so it happens in the call's
                // own task, concurrently with the execution's other calls.
                let result = match check {
                    Err(e) => Err(e),
                    Ok(()) => match registry.resolve(&tool).await {
                        Err(e) => Err(e),
                        Ok((source, name)) => source.call(&name, args, &ctx).await,
                    },
                };
                // Scanned before anything reaches the worker: the program never holds a
                // credential a source let slip.
                let (result, mut redactions) = scan_tool_result(&scanner, &tool, on_secret, result);
                redactions.extend(ctx.progress.take_redactions());
                (
                    id,
                    result.and_then(encode_result).map_err(to_failure),
                    redactions,
                )
            }
            .in_current_span(),
        );
    }

    async fn finish_call(
        &mut self,
        id: u32,
        result: &Result<String, ToolFailure>,
        redactions: Vec<Redaction>,
    ) {
        let Some(idx) = self.tool_calls.iter().position(|c| c.id == id) else {
            return;
        };
        let duration_ms = ms(self.call_started[idx].elapsed());
        let record = &mut self.tool_calls[idx];
        record.duration_ms = duration_ms;
        record.redactions = redactions;
        match result {
            Ok(_) => record.outcome = "ok".into(),
            Err(f) => {
                record.outcome = "error".into();
                record.error = Some(ToolError {
                    code: f.code.clone(),
                    message: f.message.clone(),
                    hint: f.hint.clone(),
                });
            }
        }
        let event = ExecutionEvent::ToolCallFinished {
            id,
            tool: record.tool.clone(),
            outcome: record.outcome.clone(),
            duration_ms,
        };
        self.emit(event).await;
    }

    fn finish(mut self, job: &ExecutionJob, total: Instant) -> ExecutionResponse {
        if let Some(stats) = self.worker_stats {
            self.stats.compile_us = Some(stats.compile_us);
            self.stats.engine_run_us = Some(stats.run_us);
            self.stats.heap_used_bytes = Some(stats.heap_used_bytes);
        }
        self.stats.total_ms = ms(total.elapsed());

        let (status, result, error) = if self.client_gone {
            (
                Status::Cancelled,
                Value::Null,
                Some(ExecutionError {
                    kind: "cancelled".into(),
                    name: None,
                    message: "the client hung up before the program finished, so it was stopped"
                        .into(),
                    line: None,
                    column: None,
                    stack: None,
                    excerpt: None,
                    hint: Some("keep the connection open until the response arrives".into()),
                }),
            )
        } else if self.timed_out {
            // Whatever the worker managed to say, the deadline passed: report the timeout,
            // with the worker's position if it gave one.
            let (line, column, stack) = match &self.outcome {
                Some(Outcome::Error(e)) => (e.line, e.column, e.stack.clone()),
                _ => (None, None, None),
            };
            (
                Status::Timeout,
                Value::Null,
                Some(ExecutionError {
                    kind: "timeout".into(),
                    name: None,
                    message: format!(
                        "the program did not finish within its {} ms deadline",
                        self.timeout_ms
                    ),
                    line,
                    column,
                    stack,
                    excerpt: None,
                    hint: Some(timeout_hint()),
                }),
            )
        } else if let Some(failure) = self.failure.take() {
            (Status::Error, Value::Null, Some(failure))
        } else {
            match self.outcome.take() {
                Some(Outcome::Ok { value_json }) => match serde_json::from_str(&value_json) {
                    Ok(v) => (Status::Ok, v, None),
                    // JSON the engine may legitimately produce but serde_json does not
                    // take: the program's data, not a broken worker.
                    Err(e) if JsonLimit::of(&e.to_string()).is_some() => {
                        let tool_error =
                            unreadable_json_error("the program's result", &e.to_string());
                        (
                            Status::Error,
                            Value::Null,
                            Some(ExecutionError {
                                kind: "result_not_json".into(),
                                name: None,
                                message: tool_error.message,
                                line: None,
                                column: None,
                                stack: None,
                                excerpt: None,
                                hint: tool_error.hint,
                            }),
                        )
                    }
                    Err(e) => (
                        Status::Error,
                        Value::Null,
                        Some(protocol_error(&format!(
                            "the worker's result is not valid JSON: {e}"
                        ))),
                    ),
                },
                Some(Outcome::Error(e)) => {
                    let status = if e.kind == ErrorKind::Timeout {
                        Status::Timeout
                    } else {
                        Status::Error
                    };
                    (status, Value::Null, Some(exec_error(e)))
                }
                None => (
                    Status::Error,
                    Value::Null,
                    Some(protocol_error("the worker ended without a result")),
                ),
            }
        };
        let mut error = error;
        if let Some(err) = error.as_mut()
            && let Some(line) = err.line
        {
            err.excerpt = code_excerpt(&job.code, line, err.column);
        }
        let mut result = result;
        self.scan_json(RedactionPlace::Result, &mut result);
        if let Some(mut err) = error.take() {
            err.message = self.scan_text(RedactionPlace::Error, err.message);
            err.stack = err.stack.map(|s| self.scan_text(RedactionPlace::Error, s));
            err.excerpt = err
                .excerpt
                .map(|s| self.scan_text(RedactionPlace::Error, s));
            error = Some(err);
        }
        let mut tool_calls = std::mem::take(&mut self.tool_calls);
        if let Some(scanner) = &self.scanner {
            // The arguments as the trace shows them: the program's own data, but agent-bound.
            for call in &mut tool_calls {
                let findings = scanner.scan_json(&mut call.args);
                note_findings(&mut call.redactions, RedactionPlace::Arguments, &findings);
            }
        }
        let mut warnings = Vec::new();
        let from_tools = tool_calls
            .iter()
            .flat_map(|c| &c.redactions)
            .filter(|r| r.place != RedactionPlace::Arguments)
            .count();
        if from_tools > 0 {
            warnings.push(format!(
                "{from_tools} secret(s) were redacted from tool results before the program saw them (see tool_calls[].redactions)"
            ));
        }
        let mut rules: Vec<&str> = self
            .redactions
            .iter()
            .chain(
                tool_calls
                    .iter()
                    .flat_map(|c| &c.redactions)
                    .filter(|r| r.place == RedactionPlace::Arguments),
            )
            .map(|r| r.rule.as_str())
            .collect();
        rules.sort_unstable();
        rules.dedup();
        if !rules.is_empty() {
            warnings.push(format!(
                "secrets were redacted from the program's output ({}; see redactions)",
                rules.join(", ")
            ));
        }
        if self.output_truncated {
            self.stderr.push_str(&format!(
                "[airlock: console output over the {}-byte limit was dropped]\n",
                self.max_output
            ));
        }
        ExecutionResponse {
            id: job.id.clone(),
            status,
            result,
            stdout: self.stdout,
            stderr: self.stderr,
            error,
            tool_calls,
            stats: self.stats,
            peer: job.peer,
            principal: job.principal.name.clone(),
            redactions: self.redactions,
            warnings,
        }
    }
}

/// Keeps what the scanner replaced in agent-bound output, and logs the rule and the place (the
/// value is what must not travel).
fn note_findings(out: &mut Vec<Redaction>, place: RedactionPlace, findings: &[Finding]) {
    for finding in findings {
        info!(rule = %finding.rule, place = place.as_str(), pointer = ?finding.location.pointer, "secret redacted from agent-bound output");
        out.push(Redaction::of(finding, place));
    }
}

/// Scans a tool's answer: a result is redacted in place (or, for a source the policy lists under
/// `[secret_scanning] fail`, turned into an error naming the rules), and an error's message and
/// hint are redacted too, since they reach the program as well.
fn scan_tool_result(
    scanner: &SecretScanner,
    tool: &str,
    on_secret: SecretAction,
    result: Result<Value, ToolError>,
) -> (Result<Value, ToolError>, Vec<Redaction>) {
    match result {
        Ok(mut value) => {
            let findings = scanner.scan_json(&mut value);
            if findings.is_empty() {
                return (Ok(value), Vec::new());
            }
            let redactions: Vec<Redaction> = findings
                .iter()
                .map(|f| Redaction::of(f, RedactionPlace::Result))
                .collect();
            for finding in &findings {
                let audit = finding.audit_record();
                warn!(tool, rule = %finding.rule, pointer = ?finding.location.pointer, secret = ?audit.secret, "a tool result carried a secret; it was redacted before the program saw it");
            }
            match on_secret {
                SecretAction::Redact => (Ok(value), redactions),
                SecretAction::Fail => {
                    let mut rules: Vec<&str> = findings.iter().map(|f| f.rule.as_str()).collect();
                    rules.sort_unstable();
                    rules.dedup();
                    let error = ToolError::new(
                        "secret_in_result",
                        format!(
                            "the result of `{tool}` carried {} secret(s) ({}), and the operator has set this source to fail such calls",
                            findings.len(),
                            rules.join(", ")
                        ),
                    )
                    .with_hint("ask for less (a narrower query or fewer fields), or ask the operator why this source returns credentials");
                    (Err(error), redactions)
                }
            }
        }
        Err(mut error) => {
            let (message, m) = scanner.scan_text(&error.message);
            let message = message.into_owned();
            let (hint, h) = match &error.hint {
                Some(hint) => {
                    let (clean, found) = scanner.scan_text(hint);
                    (Some(clean.into_owned()), found)
                }
                None => (None, Vec::new()),
            };
            let redactions = m
                .iter()
                .chain(&h)
                .map(|f| Redaction::of(f, RedactionPlace::Error))
                .collect();
            error.message = message;
            error.hint = hint;
            (Err(error), redactions)
        }
    }
}

/// Up to two lines either side of `line` (1-based), numbered, the line itself marked with `>`
/// and, when the column is known, a `^` under it.
fn code_excerpt(code: &str, line: u32, column: Option<u32>) -> Option<String> {
    let target = usize::try_from(line).ok()?.checked_sub(1)?;
    let first = target.saturating_sub(2);
    // Only the window is collected: programs may be megabytes long.
    let window: Vec<&str> = code.lines().skip(first).take(target + 3 - first).collect();
    if window.len() <= target - first {
        return None;
    }
    let last = first + window.len() - 1;
    let width = (last + 1).to_string().len();
    let mut out = String::new();
    for (i, text) in (first..).zip(window) {
        // Very long lines (minified code, data) are cut so the excerpt stays readable.
        let shown: String = text.chars().take(200).collect();
        let marker = if i == target { '>' } else { ' ' };
        out.push_str(&format!("{marker} {:>width$} | {shown}\n", i + 1));
        if i == target
            && let Some(col) = column.filter(|c| (1..=200).contains(c))
        {
            out.push_str(&format!(
                "  {:>width$} | {}^\n",
                "",
                " ".repeat(col as usize - 1)
            ));
        }
    }
    Some(out)
}

fn timeout_hint() -> String {
    "split the work into smaller programs, await fewer slow tool calls, or pass a larger timeout_ms (up to the policy's limits.max_timeout_ms)".into()
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Serialises a tool's result for the worker, refusing what cannot fit in one frame.
fn encode_result(value: Value) -> Result<String, ToolError> {
    let text = serde_json::to_string(&value).map_err(|e| {
        ToolError::new("internal", format!("cannot serialise the tool result: {e}"))
    })?;
    // Leave room for the envelope of the ToolResult frame.
    let max = MAX_FRAME_LEN as usize - 1024;
    if text.len() > max {
        return Err(ToolError::new(
            "result_too_large",
            format!(
                "the tool returned {} bytes, over the {} byte limit for one result",
                text.len(),
                max
            ),
        )
        .with_hint("ask the tool for less data (filters, pagination)"));
    }
    Ok(text)
}

fn to_failure(e: ToolError) -> ToolFailure {
    ToolFailure {
        code: e.code,
        message: e.message,
        hint: e.hint,
    }
}

fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Syntax => "syntax",
        ErrorKind::Runtime => "runtime",
        ErrorKind::Timeout => "timeout",
        ErrorKind::MemoryLimit => "memory_limit",
        ErrorKind::StackOverflow => "stack_overflow",
        ErrorKind::ResultNotJson => "result_not_json",
        ErrorKind::OutputLimit => "output_limit",
        ErrorKind::ToolCallLimit => "tool_call_limit",
        ErrorKind::Deadlock => "deadlock",
        ErrorKind::Cancelled => "cancelled",
        ErrorKind::SandboxViolation => "sandbox_violation",
        ErrorKind::Internal => "internal",
    }
}

fn kind_hint(kind: ErrorKind) -> Option<String> {
    Some(match kind {
        ErrorKind::Syntax => "fix the syntax at the given line and column; programs are TypeScript (or JavaScript) scripts, not modules: no import/export".into(),
        ErrorKind::Timeout => timeout_hint(),
        ErrorKind::MemoryLimit => "process data in smaller pieces or keep fewer values alive; the heap limit is set by the operator (limits.memory)".into(),
        ErrorKind::StackOverflow => "the program recursed too deeply; use a loop or an explicit stack".into(),
        ErrorKind::ResultNotJson => "return plain JSON data: convert BigInt with Number() or String(), remove cycles and functions".into(),
        ErrorKind::OutputLimit => "print less (summaries, counts) and return data as the program's result instead".into(),
        ErrorKind::ToolCallLimit => "make fewer tool calls per execution (batch, filter upstream), or split the work across executions".into(),
        ErrorKind::Deadlock => "every awaited promise must eventually settle; there are no timers or events in the sandbox besides tool calls".into(),
        ErrorKind::SandboxViolation => "the sandbox allows computation and tool calls only; no files, network, processes or system calls".into(),
        ErrorKind::Runtime | ErrorKind::Cancelled | ErrorKind::Internal => return None,
    })
}

fn exec_error(e: ExecError) -> ExecutionError {
    ExecutionError {
        kind: kind_name(e.kind).into(),
        hint: kind_hint(e.kind),
        name: e.name,
        message: e.message,
        line: e.line,
        column: e.column,
        stack: e.stack,
        excerpt: None,
    }
}

/// JSON text from the engine that serde_json refuses although the engine wrote it correctly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonLimit {
    /// Nested deeper than serde_json's 128 levels (the limit keeps the daemon's own stack
    /// safe from a hostile worker, so it stays).
    Depth,
    /// A lone UTF-16 surrogate (`\ud800`): valid in JavaScript strings and JSON text, but it
    /// has no UTF-8 form.
    LoneSurrogate,
}

impl JsonLimit {
    /// Classifies a serde_json error message (serde_json has no public error code for these).
    fn of(message: &str) -> Option<JsonLimit> {
        if message.starts_with("recursion limit exceeded") {
            Some(JsonLimit::Depth)
        } else if message.contains("surrogate")
            || message.starts_with("unexpected end of hex escape")
        {
            Some(JsonLimit::LoneSurrogate)
        } else {
            None
        }
    }
}

/// The error for `what` (arguments or result) whose JSON text serde_json refused with `reason`.
fn unreadable_json_error(what: &str, reason: &str) -> ToolError {
    match JsonLimit::of(reason) {
        Some(JsonLimit::Depth) => ToolError::new(
            "invalid_arguments",
            format!("{what}: JSON nested more than 128 levels deep"),
        )
        .with_hint("flatten the data (an array of records instead of a chain of nested objects)"),
        Some(JsonLimit::LoneSurrogate) => ToolError::new(
            "invalid_arguments",
            format!(
                "{what}: a string with a lone UTF-16 surrogate, which has no UTF-8 form ({reason})"
            ),
        )
        .with_hint("repair such strings with s.toWellFormed() (lone surrogates become U+FFFD)"),
        None => ToolError::new(
            "invalid_arguments",
            format!("{what}: not valid JSON ({reason})"),
        )
        .with_hint("pass plain data: objects, arrays, strings, numbers, booleans and null"),
    }
}

fn protocol_error(detail: &str) -> ExecutionError {
    ExecutionError {
        kind: "internal".into(),
        name: None,
        message: format!("the worker broke the supervisor protocol ({detail}); it was stopped"),
        line: None,
        column: None,
        stack: None,
        excerpt: None,
        hint: Some("run the program again; if this repeats, the operator should check that airlock-worker matches this airlockd".into()),
    }
}

/// Explains a worker that ended without `Done`, from its exit status.
fn crash_error(context: &str, exit: Option<WorkerExit>) -> ExecutionError {
    let (kind, message, hint) = match exit {
        Some(WorkerExit { signal: Some(libc::SIGSYS), .. }) => (
            "sandbox_violation",
            "the program attempted a system call the sandbox forbids; the worker was killed by the seccomp filter (SIGSYS)".to_owned(),
            kind_hint(ErrorKind::SandboxViolation),
        ),
        Some(WorkerExit { signal: Some(libc::SIGXCPU), .. }) => (
            "timeout",
            "the worker used up its CPU-time limit (RLIMIT_CPU) and was killed".to_owned(),
            Some(timeout_hint()),
        ),
        Some(WorkerExit { signal: Some(libc::SIGKILL), .. }) => (
            "worker_crashed",
            format!("{context}: the worker was killed by SIGKILL (from outside the daemon, or by the kernel's OOM killer)"),
            Some("run the program again; if it keeps happening, it may be using too much memory".into()),
        ),
        Some(exit) => (
            "worker_crashed",
            format!("{context}: the worker {} ", exit.describe()).trim_end().to_owned(),
            Some(match exit.signal {
                Some(s) if s == libc::SIGSEGV || s == libc::SIGABRT => format!(
                    "the worker crashed with {}; very deeply nested or very large programs can do this — simplify the program",
                    signal_name(s)
                ),
                _ => "run the program again; if it repeats, report it to the operator with the execution id".into(),
            }),
        ),
        None => (
            "worker_crashed",
            format!("{context}: the worker vanished"),
            None,
        ),
    };
    ExecutionError {
        kind: kind.into(),
        name: None,
        message,
        line: None,
        column: None,
        stack: None,
        excerpt: None,
        hint,
    }
}

#[cfg(test)]
mod tests {
    use super::{JsonLimit, Value, code_excerpt};

    #[test]
    fn serde_json_refusals_of_engine_json_are_recognised() {
        // Pins serde_json's messages: if they change, JsonLimit::of must follow.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for (text, expected) in [
            (deep.as_str(), Some(JsonLimit::Depth)),
            (r#""\ud800""#, Some(JsonLimit::LoneSurrogate)),
            (r#""\udc00""#, Some(JsonLimit::LoneSurrogate)),
            (r#"{"s":"a\ud800b"}"#, Some(JsonLimit::LoneSurrogate)),
            ("{\"a\":", None),
            ("nonsense", None),
        ] {
            let e = serde_json::from_str::<Value>(text).unwrap_err();
            assert_eq!(JsonLimit::of(&e.to_string()), expected, "{text}: {e}");
        }
    }

    #[test]
    fn excerpts_mark_the_line_and_column() {
        let code =
            "const a = 1;\nconst b = 2;\nnull.x;\nconst c = 3;\nconst d = 4;\nconst e = 5;\n";
        let ex = code_excerpt(code, 3, Some(5)).unwrap();
        assert_eq!(
            ex,
            "  1 | const a = 1;\n  2 | const b = 2;\n> 3 | null.x;\n    |     ^\n  4 | const c = 3;\n  5 | const d = 4;\n"
        );
        assert_eq!(code_excerpt("x", 1, None).unwrap(), "> 1 | x\n");
        assert!(code_excerpt("x", 2, None).is_none());
        assert!(code_excerpt("x", 0, None).is_none());
    }
}
