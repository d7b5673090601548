//! What an execution's tool calls leave behind while it runs: the trace (a record per call,
//! in call order, completed as its answer comes) and the calls it holds for someone outside
//! the daemon (the agent's client tools, an approver).

use super::run::ms;
use crate::agent_api::{CallOutcome, ExecutionEvent, PendingCall, ToolCallRecord};
use crate::tools::call::{CallAnswer, Held};
use airlock_proto::{SourcePosition, ToolFailure};
use serde_json::Value;
use std::time::Instant;

/// The calls made so far.
#[derive(Debug)]
pub(super) struct Trace {
    /// One per call, in call order (ids increase).
    pub(super) records: Vec<ToolCallRecord>,
    /// When each call arrived, beside its record.
    started: Vec<Instant>,
    /// The id of the last `ToolCall`; ids must increase.
    pub(super) last_id: u32,
    /// What the trace's result previews may still take (`result_preview`).
    results_budget: usize,
    /// `ToolResult`s sent to the worker (an `Idle` that counts fewer was sent before the
    /// last of them arrived: the program may still move).
    pub(super) results_sent: u32,
}

impl Trace {
    pub(super) fn new() -> Trace {
        Trace {
            records: Vec::new(),
            started: Vec::new(),
            last_id: 0,
            results_budget: super::result_preview::TRACE_RESULTS_BYTES,
            results_sent: 0,
        }
    }

    /// A call arrived at `now`, `started_ms` into the execution: its record, pending.
    pub(super) fn open(
        &mut self,
        id: u32,
        tool: String,
        args: Value,
        started_ms: f64,
        now: Instant,
    ) {
        self.records.push(ToolCallRecord {
            id,
            tool,
            args,
            outcome: CallOutcome::Pending,
            error: None,
            result: None,
            result_truncated: false,
            started_ms,
            duration_ms: 0.0,
            replayed: false,
            divergence: None,
            redactions: Vec::new(),
            coercions: Vec::new(),
            flows: Vec::new(),
        });
        self.started.push(now);
    }

    /// The untrusted text found in the arguments of the call opened last.
    pub(super) fn flows(&mut self, flows: Vec<crate::agent_api::Flow>) {
        if let Some(record) = self.records.last_mut() {
            record.flows = flows;
        }
    }

    /// The tool of call `id`, if it has a record.
    pub(super) fn tool_of(&self, id: u32) -> Option<&str> {
        let idx = self.records.binary_search_by_key(&id, |c| c.id).ok()?;
        Some(&self.records[idx].tool)
    }

    /// A call's answer: its record completed (its warning, if any, added to `warnings`).
    /// Returns the answer as the worker gets it, and the event that says the call finished
    /// (`None` for a call without a record, which the pipeline never answers).
    pub(super) fn close(
        &mut self,
        answer: CallAnswer,
        warnings: &mut Vec<String>,
    ) -> (u32, Result<String, ToolFailure>, Option<ExecutionEvent>) {
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
        warnings.extend(warning);
        let for_worker = match &result {
            Ok(text) => Ok(text.clone()),
            Err(e) => Err(ToolFailure {
                code: e.code.as_str().to_owned(),
                message: e.message.clone(),
                hint: e.hint.clone(),
            }),
        };
        // Calls are recorded in id order (ids increase).
        let Ok(idx) = self.records.binary_search_by_key(&id, |c| c.id) else {
            return (id, for_worker, None);
        };
        let duration_ms = ms(self.started[idx].elapsed());
        let record = &mut self.records[idx];
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
        (id, for_worker, Some(event))
    }
}

/// The calls held for someone outside the daemon, in call order.
#[derive(Debug, Default)]
pub(super) struct Holds {
    /// Client tool calls the agent has not answered.
    pub(super) calls: Vec<PendingCall>,
    /// Calls that wait for an approver's decision, with where the program made them.
    pub(super) approvals: Vec<HeldApproval>,
    /// The program can go no further without the answers to these: it was stopped to wait
    /// for them.
    pub(super) waiting: bool,
}

/// A call that waits for an approver.
#[derive(Debug)]
pub(super) struct HeldApproval {
    pub(super) id: u32,
    pub(super) tool: String,
    pub(super) args: Value,
    pub(super) args_hash: String,
    pub(super) at: Option<SourcePosition>,
    /// The information flow that made it wait, if one did (shown to the approver).
    pub(super) flow: Option<String>,
}

impl Holds {
    /// Holds a call the pipeline held at its arrival; `at` is where the program made it.
    pub(super) fn hold(&mut self, held: Held, at: Option<SourcePosition>) {
        match held {
            Held::Client(call) => self.calls.push(call),
            Held::Approval {
                id,
                tool,
                args,
                flow,
            } => {
                let args_hash = crate::journal::canonical::hash(&args);
                self.approvals.push(HeldApproval {
                    id,
                    tool,
                    args,
                    args_hash,
                    at,
                    flow,
                });
            }
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.approvals.is_empty()
    }
}
