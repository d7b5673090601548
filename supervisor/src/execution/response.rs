//! The response of an execution: status, result, output, error and trace, everything an agent
//! gets scanned for secrets on the way out.

use super::error;
use super::run::{ExecutionJob, Run, StopReason, ms};
use crate::agent_api::{
    DeterminismSpec, ExecutionError, ExecutionErrorKind, ExecutionResponse, PendingApproval,
    Redaction, RedactionPlace, Status,
};
use crate::secrets::scanner::Finding;
use crate::tools::call::{JsonLimit, unreadable_json_error};
use airlock_proto::{ErrorKind, Outcome};
use serde_json::Value;
use std::time::Instant;
use tracing::info;

impl Run {
    /// The response: what the program returned, printed and called, or why it failed (the
    /// supervisor's findings win over the worker's own report), everything agent-bound
    /// scanned for secrets.
    pub(super) fn finish(mut self, job: &ExecutionJob, total: Instant) -> ExecutionResponse {
        if let Some(stats) = self.worker_stats {
            self.stats.compile_us = Some(stats.compile_us);
            self.stats.engine_run_us = Some(stats.run_us);
            self.stats.heap_used_bytes = Some(stats.heap_used_bytes);
        }
        self.stats.total_ms = ms(total.elapsed());

        let (status, result, error) = if self.waiting && self.failure.is_none() && !self.timed_out {
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
            let mut timeout = error::deadline_passed(self.timeout_ms);
            if let Some(Outcome::Error(e)) = &self.outcome {
                (timeout.line, timeout.column, timeout.stack) = (e.line, e.column, e.stack.clone());
            }
            (Status::Timeout, Value::Null, Some(timeout))
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
                        let mut failure = ExecutionError::new(
                            ExecutionErrorKind::ResultNotJson,
                            tool_error.message,
                        );
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
            // The explanation (and the hint made from it) name a tool result's keys: scanned
            // like the message.
            err.explanation = err
                .explanation
                .map(|s| self.scan_text(RedactionPlace::Error, s));
            if err.explanation.is_some() {
                err.hint = err.hint.map(|s| self.scan_text(RedactionPlace::Error, s));
            }
            // A program failed on a tool's value: the pipeline merged that value's shape into
            // the tool's learned type before the program got it, so the SDK already shows it;
            // written now too, so it survives whatever happens to the daemon next.
            if let Some((namespace, tool)) =
                err.explanation.as_deref().and_then(error::explained_tool)
                && let Some(types) = self.calls.learning.learns(namespace)
                && let Err(e) = types.persist(&self.calls.principal.name, namespace, tool)
            {
                tracing::warn!(tool = %format!("{namespace}.{tool}"), error = %e, "the learned type of a tool a program failed on could not be written; it is kept in memory");
            }
            error = Some(err);
        }
        let mut tool_calls = std::mem::take(&mut self.tool_calls);
        let mut pending_calls = if status == Status::Waiting {
            std::mem::take(&mut self.held)
        } else {
            Vec::new()
        };
        for call in &mut pending_calls {
            // The program's arguments, on their way to the agent: scanned like the trace's.
            let findings = self.scanner.scan_json(&mut call.args);
            note_findings(&mut self.redactions, RedactionPlace::Arguments, &findings);
        }
        // Ids and times are given when the service keeps them.
        let held_approvals = if status == Status::Waiting {
            std::mem::take(&mut self.held_approvals)
        } else {
            Vec::new()
        };
        let mut pending_approvals = Vec::with_capacity(held_approvals.len());
        for held in held_approvals {
            let mut args = held.args;
            let findings = self.scanner.scan_json(&mut args);
            note_findings(&mut self.redactions, RedactionPlace::Arguments, &findings);
            let excerpt = held
                .at
                .and_then(|at| code_excerpt(&job.code, at.line, Some(at.column)))
                .map(|e| self.scan_text(RedactionPlace::Arguments, e));
            pending_approvals.push(PendingApproval {
                id: String::new(),
                execution: job.id.clone(),
                principal: job.principal.name.clone(),
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
        {
            // The arguments as the trace shows them: the program's own data, but agent-bound.
            for call in &mut tool_calls {
                let findings = self.scanner.scan_json(&mut call.args);
                note_findings(&mut call.redactions, RedactionPlace::Arguments, &findings);
                // The coercions' values are the arguments' (or the scanned result's): scanned
                // the same way. A value made from a secret is shown as the secret's redaction,
                // never in the form it was coerced to (a number escapes the string scan).
                // Their findings are the arguments' and the result's, noted there.
                for c in &mut call.coercions {
                    if !self.scanner.scan_json(&mut c.from).is_empty() {
                        c.to = c.to.as_ref().map(|_| c.from.clone());
                    } else if let Some(to) = c.to.as_mut() {
                        self.scanner.scan_json(to);
                    }
                }
            }
        }
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
        let mut warnings = std::mem::take(&mut self.warnings);
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
        if let Some(warning) = coercion_warning(&tool_calls) {
            warnings.push(warning);
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
            replayed_calls: u32::try_from(tool_calls.iter().filter(|c| c.replayed).count())
                .unwrap_or(u32::MAX),
            tool_calls,
            session: job.session.as_ref().map(|s| s.session.clone()),
            resumed_from: job.resumed_from.clone(),
            determinism: (status == Status::Waiting).then_some(DeterminismSpec {
                clock_ms: job.determinism.clock_ms,
                seed: job.determinism.seed,
            }),
            pending_calls,
            pending_approvals,
            stats: self.stats,
            peer: job.peer,
            principal: job.principal.name.clone(),
            redactions: self.redactions,
            warnings,
        }
    }
}

/// A program that ended on an uncaught `ToolError` gets that call's hint as its own (the
/// did-you-mean of an unknown tool, what an argument should be), in place of the generic hint
/// of a runtime error: the call is the one whose error message the ToolError carries
/// (`<tool>: <message>`), the last such call when several failed alike.
fn adopt_tool_error_hint(err: &mut ExecutionError, calls: &[crate::agent_api::ToolCallRecord]) {
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
fn coercion_warning(tool_calls: &[crate::agent_api::ToolCallRecord]) -> Option<String> {
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
