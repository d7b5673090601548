//! The response of an execution: status, result, output, error and trace, everything an agent
//! gets scanned for secrets on the way out.

use super::run::{Run, StopReason, ms};
use super::trace::Holds;
use super::{budget, error};
use crate::agent_api::{
    DeterminismSpec, ExecutionError, ExecutionErrorKind, ExecutionResponse, PendingApproval,
    PendingCall, Redaction, RedactionPlace, RequestLanguage, Status, ToolCallRecord,
};
use crate::secrets::scanner::{Finding, SecretScanner};
use crate::tools::call::{JsonLimit, unreadable_json_error};
use airlock_proto::{ErrorKind, Outcome, WorkerStats};
use serde_json::Value;
use tracing::info;

/// How a run ended, as the worker reported it and the supervisor found it.
#[derive(Debug, Default)]
pub(super) struct Ending {
    /// The worker's own report (`Done`).
    pub(super) outcome: Option<Outcome>,
    /// A failure found by the supervisor (the contract check, a crash, a kill, a protocol
    /// error), which wins over the worker's own report.
    pub(super) failure: Option<ExecutionError>,
    pub(super) timed_out: bool,
    /// The program was told to stop before its end, and why.
    pub(super) stopped: Option<StopReason>,
    pub(super) worker_stats: Option<WorkerStats>,
}

impl Ending {
    /// The status, value and error the run ended with, before anything is scanned: the
    /// supervisor's findings win over the worker's own report. `waiting`: the program was
    /// stopped to wait for someone outside the daemon.
    fn verdict(
        &mut self,
        waiting: bool,
        timeout_ms: u64,
    ) -> (Status, Value, Option<ExecutionError>) {
        if waiting && self.failure.is_none() && !self.timed_out {
            // Stopped to wait for the agent's answers: not a failure, and the program's own
            // report (cancelled) is not the answer.
            (Status::Waiting, Value::Null, None)
        } else if let Some(reason) = self.stopped {
            let error = match reason {
                StopReason::ClientGone => error::client_gone(),
                StopReason::Cancelled => error::cancelled(),
            };
            (Status::Cancelled, Value::Null, Some(error))
        } else if self.timed_out {
            // Whatever the worker managed to say, the deadline passed: report the timeout,
            // with the worker's position if it gave one.
            let mut timeout = error::deadline_passed(timeout_ms);
            if let Some(Outcome::Error(e)) = &self.outcome {
                (timeout.line, timeout.column, timeout.stack) = (e.line, e.column, e.stack.clone());
            }
            (Status::Timeout, Value::Null, Some(timeout))
        } else if let Some(failure) = self.failure.take() {
            (Status::Error, Value::Null, Some(failure))
        } else {
            reported(self.outcome.take())
        }
    }
}

/// What the worker's own report says.
fn reported(outcome: Option<Outcome>) -> (Status, Value, Option<ExecutionError>) {
    match outcome {
        Some(Outcome::Ok { value_json }) => match serde_json::from_str(&value_json) {
            Ok(v) => (Status::Ok, v, None),
            // JSON the engine may legitimately produce but serde_json does not take: the
            // program's data, not a broken worker.
            Err(e) if JsonLimit::of(&e.to_string()).is_some() => {
                let tool_error = unreadable_json_error("the program's result", &e.to_string());
                let mut failure =
                    ExecutionError::new(ExecutionErrorKind::ResultNotJson, tool_error.message);
                failure.hint = tool_error.hint;
                (Status::Error, Value::Null, Some(failure))
            }
            Err(e) => (
                Status::Error,
                Value::Null,
                Some(error::protocol(&format!(
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
            (status, Value::Null, Some(error::from_worker(e)))
        }
        None => (
            Status::Error,
            Value::Null,
            Some(error::protocol("the worker ended without a result")),
        ),
    }
}

impl Run<'_> {
    /// The response, made of the run's parts: how it ended, what the program returned and
    /// printed, the calls it made or holds, and what the agent should know, everything
    /// agent-bound scanned for secrets.
    pub(super) fn finish(mut self) -> ExecutionResponse {
        if let Some(stats) = self.end.worker_stats {
            self.stats.compile_us = Some(stats.compile_us);
            self.stats.engine_run_us = Some(stats.run_us);
            self.stats.heap_used_bytes = Some(stats.heap_used_bytes);
        }
        self.stats.total_ms = ms(self.origin.elapsed());
        let plan = self.plan;
        let (status, mut result, error) =
            self.end.verdict(self.held.waiting, plan.limits.timeout_ms);
        self.output.scan_json(RedactionPlace::Result, &mut result);
        let mut error = error.map(|err| self.agent_error(err));
        if plan.language == RequestLanguage::Python
            && let Some(err) = error.as_mut()
        {
            error::for_python(err);
        }
        let (pending_calls, pending_approvals) = if status == Status::Waiting {
            self.pending()
        } else {
            (Vec::new(), Vec::new())
        };
        let mut tool_calls = scanned_trace(
            &self.output.scanner,
            std::mem::take(&mut self.trace.records),
        );
        if let Some(err) = error.as_mut() {
            adopt_tool_error_hint(err, &tool_calls);
        }
        // Results are shown to explain a failure. A program that succeeded (or waits) answers
        // with its own value: the tools' results stay out of the agent's context, which is
        // what code mode is for.
        if matches!(status, Status::Ok | Status::Waiting) {
            for call in &mut tool_calls {
                call.result = None;
                call.result_truncated = false;
            }
        }
        let mut warnings = warnings(
            std::mem::take(&mut self.warnings),
            &self.output.redactions,
            &tool_calls,
        );
        let mut output = self.output;
        if output.truncated {
            output.stderr.push_str(&format!(
                "[airlock: console output over the {}-byte limit was dropped]\n",
                output.max_bytes
            ));
        }
        // Cut last, on what the agent would get: scanned, with its notes.
        let (spent, cut_parts) = budget::apply(
            plan.max_output_tokens,
            error.as_mut(),
            &mut result,
            &mut output.stdout,
            &mut output.stderr,
        );
        self.stats.output_tokens = spent.output_tokens;
        self.stats.cut_tokens = spent.cut_tokens;
        warnings.extend(budget::warning(plan.max_output_tokens, spent, &cut_parts));
        ExecutionResponse {
            id: plan.id.clone(),
            status,
            result,
            stdout: output.stdout,
            stderr: output.stderr,
            error,
            replayed_calls: u32::try_from(tool_calls.iter().filter(|c| c.replayed).count())
                .unwrap_or(u32::MAX),
            tool_calls,
            session: plan.session_id(),
            resumed_from: plan.resumed_from.clone(),
            determinism: (status == Status::Waiting).then_some(DeterminismSpec {
                clock_ms: plan.determinism.clock_ms,
                seed: plan.determinism.seed,
            }),
            pending_calls,
            pending_approvals,
            stats: self.stats,
            peer: plan.peer,
            principal: plan.principal.name.clone(),
            redactions: output.redactions,
            warnings,
        }
    }

    /// The error as the agent reads it: where in the code, scanned for secrets. A program that
    /// failed on a tool's value has that tool's learned type written at once.
    fn agent_error(&mut self, mut err: ExecutionError) -> ExecutionError {
        if let Some(line) = err.line {
            err.excerpt = code_excerpt(&self.plan.code, line, err.column);
        }
        let output = &mut self.output;
        err.message = output.scan_text(RedactionPlace::Error, err.message);
        err.stack = err
            .stack
            .map(|s| output.scan_text(RedactionPlace::Error, s));
        err.excerpt = err
            .excerpt
            .map(|s| output.scan_text(RedactionPlace::Error, s));
        // The explanation (and the hint made from it) name a tool result's keys: scanned
        // like the message.
        err.explanation = err
            .explanation
            .map(|s| output.scan_text(RedactionPlace::Error, s));
        if err.explanation.is_some() {
            err.hint = err.hint.map(|s| output.scan_text(RedactionPlace::Error, s));
        }
        // A program failed on a tool's value: the pipeline merged that value's shape into
        // the tool's learned type before the program got it, so the SDK already shows it;
        // written now too, so it survives whatever happens to the daemon next.
        if let Some((namespace, tool)) = err.explanation.as_deref().and_then(error::explained_tool)
            && let Some(types) = self.calls.learning.learns(namespace)
            && let Err(e) = types.persist(&self.calls.principal.name, namespace, tool)
        {
            tracing::warn!(tool = %format!("{namespace}.{tool}"), error = %e, "the learned type of a tool a program failed on could not be written; it is kept in memory");
        }
        err
    }

    /// What a waiting execution waits for: the client calls and the approvals it holds, their
    /// arguments scanned on their way to the agent. (Approvals get their ids and times when
    /// the service keeps them.)
    fn pending(&mut self) -> (Vec<PendingCall>, Vec<PendingApproval>) {
        let Holds {
            calls, approvals, ..
        } = std::mem::take(&mut self.held);
        let plan = self.plan;
        let output = &mut self.output;
        let mut pending_calls = calls;
        for call in &mut pending_calls {
            // The program's arguments, on their way to the agent: scanned like the trace's.
            let findings = output.scanner.scan_json(&mut call.args);
            note_findings(&mut output.redactions, RedactionPlace::Arguments, &findings);
        }
        let mut pending_approvals = Vec::with_capacity(approvals.len());
        for held in approvals {
            let mut args = held.args;
            let findings = output.scanner.scan_json(&mut args);
            note_findings(&mut output.redactions, RedactionPlace::Arguments, &findings);
            let excerpt = held
                .at
                .and_then(|at| code_excerpt(&plan.code, at.line, Some(at.column)));
            // The flow that made it wait comes first: the approver decides on it (kept with the
            // excerpt, which the journal stores with the approval).
            let excerpt = match (held.flow, excerpt) {
                (Some(flow), Some(code)) => Some(format!("{flow}\n{code}")),
                (flow, code) => flow.or(code),
            }
            .map(|e| output.scan_text(RedactionPlace::Arguments, e));
            pending_approvals.push(PendingApproval {
                id: String::new(),
                execution: plan.id.clone(),
                principal: plan.principal.name.clone(),
                call: held.id,
                tool: held.tool,
                args,
                excerpt,
                line: held.at.map(|at| at.line),
                requested_ms: 0,
                expires_ms: 0,
                args_hash: held.args_hash,
            });
        }
        (pending_calls, pending_approvals)
    }
}

/// The trace as the agent reads it: the arguments are the program's own data, but
/// agent-bound, so scanned.
fn scanned_trace(
    scanner: &SecretScanner,
    mut tool_calls: Vec<ToolCallRecord>,
) -> Vec<ToolCallRecord> {
    for call in &mut tool_calls {
        let findings = scanner.scan_json(&mut call.args);
        note_findings(&mut call.redactions, RedactionPlace::Arguments, &findings);
        // The coercions' values are the arguments' (or the scanned result's): scanned the same
        // way. A value made from a secret is shown as the secret's redaction, never in the
        // form it was coerced to (a number escapes the string scan). Their findings are the
        // arguments' and the result's, noted there.
        for c in &mut call.coercions {
            if !scanner.scan_json(&mut c.from).is_empty() {
                c.to = c.to.as_ref().map(|_| c.from.clone());
            } else if let Some(to) = c.to.as_mut() {
                scanner.scan_json(to);
            }
        }
    }
    tool_calls
}

/// The response's warnings: the run's own, then what was redacted and coerced.
fn warnings(
    mut warnings: Vec<String>,
    redactions: &[Redaction],
    tool_calls: &[ToolCallRecord],
) -> Vec<String> {
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
    if let Some(warning) = coercion_warning(tool_calls) {
        warnings.push(warning);
    }
    let mut rules: Vec<&str> = redactions
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
    warnings
}

/// A program that ended on an uncaught `ToolError` gets that call's hint as its own (the
/// did-you-mean of an unknown tool, what an argument should be), in place of the generic hint
/// of a runtime error: the call is the one whose error message the ToolError carries
/// (`<tool>: <message>`), the last such call when several failed alike.
fn adopt_tool_error_hint(err: &mut ExecutionError, calls: &[ToolCallRecord]) {
    if err.name.as_deref() != Some("ToolError") {
        return;
    }
    let hint = calls.iter().rev().find_map(|call| {
        let e = call.error.as_ref()?;
        let message = err
            .message
            .strip_prefix(call.tool.as_str())?
            .strip_prefix(": ")?;
        (message == e.message).then(|| e.hint.clone()).flatten()
    });
    if hint.is_some() {
        err.hint = hint;
    }
}

/// Keeps what the scanner replaced in agent-bound output, and logs the rule and the place (the
/// value is what must not travel).
pub(super) fn note_findings(out: &mut Vec<Redaction>, place: RedactionPlace, findings: &[Finding]) {
    for finding in findings {
        info!(rule = %finding.rule, place = place.as_str(), pointer = ?finding.location.pointer, "secret redacted from agent-bound output");
        out.push(finding.redaction(place));
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

/// At most this many coercions are named in the response's warning (all are in the trace).
const MAX_COERCIONS_NAMED: usize = 8;

/// One warning naming every value the calls coerced to their tools' schemas (up to
/// [`MAX_COERCIONS_NAMED`], then how many more), so that the program can be fixed to pass
/// the types the schemas want. The values are the trace's, already scanned.
fn coercion_warning(tool_calls: &[ToolCallRecord]) -> Option<String> {
    let all: Vec<String> = tool_calls
        .iter()
        .flat_map(|call| {
            call.coercions.iter().map(move |c| {
                let to = c.to.as_ref().map_or_else(|| "left out".to_owned(), short);
                format!(
                    "tools.{} {} {} {}→{to}",
                    call.tool,
                    c.place.as_str(),
                    if c.pointer.is_empty() {
                        "/"
                    } else {
                        &c.pointer
                    },
                    short(&c.from)
                )
            })
        })
        .collect();
    if all.is_empty() {
        return None;
    }
    let more = all.len().saturating_sub(MAX_COERCIONS_NAMED);
    let mut named = all[..all.len().min(MAX_COERCIONS_NAMED)].join("; ");
    if more > 0 {
        named.push_str(&format!("; and {more} more"));
    }
    Some(format!(
        "{} value(s) were coerced to their tools' schemas: {named} (see tool_calls[].coercions); pass the types the schemas want",
        all.len()
    ))
}

/// A value for a one-line message: its JSON, cut to 40 characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::{adopt_tool_error_hint, code_excerpt};
    use crate::agent_api::{
        CallOutcome, ExecutionError, ExecutionErrorKind, ToolCallRecord, ToolError, ToolErrorCode,
    };

    /// The hint of the call whose ToolError ended the program becomes the program's.
    #[test]
    fn an_uncaught_tool_error_brings_its_calls_hint() {
        let call = |id, tool: &str, message: &str, hint: Option<&str>| ToolCallRecord {
            id,
            tool: tool.into(),
            args: serde_json::Value::Null,
            outcome: CallOutcome::Error,
            error: Some(match hint {
                Some(hint) => ToolError::new(ToolErrorCode::UnknownTool, message).with_hint(hint),
                None => ToolError::new(ToolErrorCode::UnknownTool, message),
            }),
            result: None,
            result_truncated: false,
            started_ms: 0.0,
            duration_ms: 0.0,
            replayed: false,
            divergence: None,
            redactions: Vec::new(),
            coercions: Vec::new(),
            flows: Vec::new(),
        };
        let calls = [
            call(
                1,
                "git.status",
                "no tool `status`",
                Some("did you mean tools.git.git_status?"),
            ),
            call(2, "git.log", "other", Some("not this one")),
        ];
        let mut err =
            ExecutionError::new(ExecutionErrorKind::Runtime, "git.status: no tool `status`");
        err.name = Some("ToolError".into());
        err.hint = Some("generic".into());
        adopt_tool_error_hint(&mut err, &calls);
        assert_eq!(
            err.hint.as_deref(),
            Some("did you mean tools.git.git_status?")
        );
        // Another error keeps its own hint.
        let mut other =
            ExecutionError::new(ExecutionErrorKind::Runtime, "git.status: no tool `status`");
        other.name = Some("TypeError".into());
        other.hint = Some("generic".into());
        adopt_tool_error_hint(&mut other, &calls);
        assert_eq!(other.hint.as_deref(), Some("generic"));
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
