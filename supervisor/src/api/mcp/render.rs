//! Execution responses as MCP tool results. The text is what a model reads: the result and
//! console output of a program that worked; for one that failed, the error with the line,
//! the excerpt of the code, the hint and a summary of the tool calls (a tool error, so the
//! client shows it as one). The whole response rides along as `structuredContent` for
//! programs that drive the facade.

use crate::agent_api::{CallOutcome, ExecutionResponse, Status};
use rmcp::model::{CallToolResult, ContentBlock};
use std::fmt::Write as _;

/// At most this many calls are listed one by one in the trace summary; the rest are counted.
const TRACE_LINES: usize = 20;

/// The tool result for an execution's response.
pub fn execution(response: &ExecutionResponse) -> CallToolResult {
    let text = execution_text(response);
    let failed = matches!(
        response.status,
        Status::Error | Status::Timeout | Status::Cancelled
    );
    let mut result = if failed {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = serde_json::to_value(response).ok();
    result
}

/// A tool error for a request the daemon refused before running anything.
pub fn refusal(message: &str, hint: Option<&str>) -> CallToolResult {
    let mut text = format!("refused: {message}");
    if let Some(hint) = hint {
        let _ = write!(text, "\nhint: {hint}");
    }
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn execution_text(r: &ExecutionResponse) -> String {
    let mut out = String::new();
    let status = wire_name(&r.status);
    let _ = write!(out, "status: {status} (execution {}", r.id);
    if let Some(session) = &r.session {
        let _ = write!(out, ", session {session}");
    }
    out.push_str(")\n");
    match r.status {
        Status::Ok => {
            let result = serde_json::to_string_pretty(&r.result).unwrap_or_default();
            let _ = writeln!(out, "result:\n{result}");
        }
        Status::Waiting => waiting(&mut out, r),
        _ => {
            if let Some(e) = &r.error {
                let kind = wire_name(&e.kind);
                let _ = write!(out, "error ({kind}): {}", e.message);
                if let (Some(line), Some(column)) = (e.line, e.column) {
                    let _ = write!(out, " at line {line}, column {column}");
                }
                out.push('\n');
                if let Some(excerpt) = &e.excerpt {
                    let _ = writeln!(out, "{}", excerpt.trim_end());
                }
                if let Some(explanation) = &e.explanation {
                    let _ = writeln!(out, "why: {explanation}");
                }
                if let Some(hint) = &e.hint {
                    let _ = writeln!(out, "hint: {hint}");
                }
            }
        }
    }
    for warning in &r.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    console(&mut out, "stdout", &r.stdout);
    console(&mut out, "stderr", &r.stderr);
    trace(&mut out, r);
    out
}

fn waiting(out: &mut String, r: &ExecutionResponse) {
    if !r.pending_calls.is_empty() {
        let _ = writeln!(
            out,
            "The program waits for {} client tool call(s); answer them with submit_results {{\"id\": \"{}\", \"results\": [{{\"id\": <call id>, \"ok\": <value>}} | {{\"id\": <call id>, \"error\": {{\"message\": \"...\"}}}}]}}:",
            r.pending_calls.len(),
            r.id
        );
        for call in &r.pending_calls {
            let _ = writeln!(out, "- call {}: {}({})", call.id, call.tool, call.args);
        }
    }
    if !r.pending_approvals.is_empty() {
        let _ = writeln!(
            out,
            "The program waits for a person to approve {} call(s); it runs on by itself once they decide. Ask status {{\"id\": \"{}\"}} later.",
            r.pending_approvals.len(),
            r.id
        );
        for approval in &r.pending_approvals {
            let _ = writeln!(
                out,
                "- approval {}: {}({})",
                approval.id, approval.tool, approval.args
            );
        }
    }
}

fn console(out: &mut String, name: &str, text: &str) {
    if !text.is_empty() {
        let _ = writeln!(out, "{name}:\n{}", text.trim_end());
    }
}

/// One line per tool call: the tool, how it ended, how long it took.
fn trace(out: &mut String, r: &ExecutionResponse) {
    if r.tool_calls.is_empty() {
        return;
    }
    let _ = writeln!(out, "tool calls ({}):", r.tool_calls.len());
    for call in r.tool_calls.iter().take(TRACE_LINES) {
        let name = wire_name(&call.outcome);
        let outcome = match (&call.outcome, &call.error) {
            (CallOutcome::Ok, _) | (_, None) => name,
            (_, Some(e)) => format!("{name}: {}", e.message),
        };
        let replayed = if call.replayed { ", replayed" } else { "" };
        // Coerced values: where, from and to (the whole list is in structuredContent).
        let coerced = match call.coercions.as_slice() {
            [] => String::new(),
            list => format!(
                ", coerced {}",
                list.iter()
                    .map(|c| {
                        let to = c.to.as_ref().map_or("omitted".to_owned(), short);
                        format!("{} {} {}→{to}", c.place.as_str(), c.pointer, short(&c.from))
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        let _ = writeln!(
            out,
            "- {} {} ({outcome}, {:.0} ms{replayed}{coerced})",
            call.id, call.tool, call.duration_ms
        );
    }
    if r.tool_calls.len() > TRACE_LINES {
        let _ = writeln!(out, "- … {} more", r.tool_calls.len() - TRACE_LINES);
    }
}

/// A value for one line of text: at most 60 characters.
fn short(value: &serde_json::Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}

/// How an enum of the API is spelled in JSON (`ok`, `schema_violation`).
pub(super) fn wire_name(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_api::{
        Coercion, CoercionPlace, CoercionRule, ExecutionStats, PeerInfo, ToolCallRecord,
    };
    use serde_json::json;

    /// The trace line of a call with coercions says where, from and to (omitted when left
    /// out); a call without has the line it always had.
    #[test]
    fn the_trace_shows_what_was_coerced() {
        let call = |id, coercions| ToolCallRecord {
            id,
            tool: "everything.get_sum".into(),
            args: json!({"a": "100", "b": 2, "note": null}),
            outcome: CallOutcome::Ok,
            error: None,
            result: None,
            result_truncated: false,
            started_ms: 0.0,
            duration_ms: 3.0,
            replayed: false,
            divergence: None,
            redactions: Vec::new(),
            coercions,
            flows: Vec::new(),
        };
        let coercion = |pointer: &str, from, to, rule| Coercion {
            place: CoercionPlace::Arguments,
            pointer: pointer.into(),
            from,
            to,
            rule,
        };
        let response = ExecutionResponse {
            id: "ex".into(),
            status: Status::Ok,
            result: json!(102),
            stdout: String::new(),
            stderr: String::new(),
            error: None,
            tool_calls: vec![
                call(
                    1,
                    vec![
                        coercion(
                            "/a",
                            json!("100"),
                            Some(json!(100)),
                            CoercionRule::NumberFromString,
                        ),
                        coercion("/note", json!(null), None, CoercionRule::NullOmitted),
                    ],
                ),
                call(2, Vec::new()),
            ],
            session: None,
            replayed_calls: 0,
            resumed_from: None,
            pending_calls: Vec::new(),
            pending_approvals: Vec::new(),
            determinism: None,
            stats: ExecutionStats::default(),
            peer: PeerInfo {
                uid: 0,
                gid: 0,
                pid: None,
            },
            principal: "p".into(),
            redactions: Vec::new(),
            warnings: Vec::new(),
        };
        let text = execution_text(&response);
        assert!(
            text.contains("- 1 everything.get_sum (ok, 3 ms, coerced arguments /a \"100\"→100; arguments /note null→omitted)\n"),
            "{text}"
        );
        assert!(
            text.contains("- 2 everything.get_sum (ok, 3 ms)\n"),
            "{text}"
        );
    }
}
