//! What one execution leaves in the audit log: [`ExecutionRecord`] with its
//! [`ToolCallRecord`]s, and every decision on a call that waited for approval
//! ([`ApprovalRecord`]); self-contained (no borrowed state) so they can cross to the writer
//! thread.

use super::argument_summary::{ArgumentSummary, Redact};
use crate::agent_api::{
    self, CallOutcome, ExecutionErrorKind, ExecutionResponse, Status, ToolErrorCode, Verdict,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt;
use std::time::{Duration, SystemTime};

/// SHA-256 of a submitted program: enough to tell which program ran (and to find it again if
/// the agent kept it) without storing code that may embed data or secrets.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CodeHash([u8; 32]);

impl CodeHash {
    /// The hash of the program text exactly as submitted (before type stripping).
    pub fn of(code: &str) -> CodeHash {
        CodeHash(Sha256::digest(code.as_bytes()).into())
    }

    /// Lower-case hex, 64 characters.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for CodeHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CodeHash({})", self.to_hex())
    }
}

/// One execution as the audit log stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRecord {
    pub execution_id: String,
    pub principal: String,
    pub peer_uid: u32,
    pub peer_pid: Option<i32>,
    pub code_sha256: CodeHash,
    /// `ok`, `error`, `timeout`, `cancelled` (the streaming client hung up) or `waiting`.
    pub status: Status,
    /// The error's kind (`runtime`, `timeout`, `sandbox_violation`, …) when it failed.
    pub error_kind: Option<ExecutionErrorKind>,
    /// Waiting for an execution slot.
    pub queued_ms: f64,
    /// From sending the program to the worker to its final message.
    pub run_ms: f64,
    pub total_ms: f64,
    /// Every secret-scanner replacement in what this execution's tools returned and what it
    /// sent back: rule and place, never the value.
    pub redactions: Vec<RedactionRecord>,
    /// When the request was accepted (before the slot wait).
    pub started: SystemTime,
    pub finished: SystemTime,
    pub tool_calls: Vec<ToolCallRecord>,
}

/// One tool call as the audit log stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    /// The call's id within its execution (1, 2, 3, … in call order).
    pub call_index: u32,
    /// `server.tool`.
    pub tool: String,
    /// The bounded, redacted summary, never the arguments themselves.
    pub arguments: String,
    /// `ok`, `error` or `pending` (the execution ended before the call returned).
    pub outcome: CallOutcome,
    /// The error code (`denied`, `invalid_arguments`, `upstream_error`, …) of a failed call.
    pub error_code: Option<ToolErrorCode>,
    pub duration_ms: f64,
    /// When the program made the call.
    pub at: SystemTime,
    /// Untrusted text found in its arguments (information flow), and what decided.
    pub flows: Vec<agent_api::Flow>,
}

/// One secret-scanner replacement as the audit log stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactionRecord {
    /// The tool call it was in (its result, error, progress or arguments), or `None` for the
    /// program's own output.
    pub call_index: Option<u32>,
    /// `result`, `error`, `progress`, `arguments`, `stdout` or `stderr`.
    pub place: &'static str,
    /// `known-secret` or a shape rule's id.
    pub rule: String,
    /// JSON pointer within the place's value, when it was in JSON.
    pub pointer: Option<String>,
    /// The known secret's name in the policy (never its value).
    pub secret: Option<String>,
}

impl RedactionRecord {
    fn of(call_index: Option<u32>, redaction: &agent_api::Redaction) -> RedactionRecord {
        RedactionRecord {
            call_index,
            place: redaction.place.as_str(),
            rule: redaction.rule.clone(),
            pointer: redaction.pointer.clone(),
            secret: redaction.secret.clone(),
        }
    }
}

impl ExecutionRecord {
    /// The record of a finished execution, from its response: `code` is the hash of the program
    /// as submitted (hash it before the request is moved into the job), `started` is when the
    /// request was accepted. Tool-call arguments are summarised with `redact`. Each call is
    /// stamped with `started` plus the queue wait plus the call's `started_ms` (both measured
    /// on the daemon's monotonic clock).
    pub fn from_response(
        response: &ExecutionResponse,
        code: CodeHash,
        started: SystemTime,
        redact: Redact<'_>,
    ) -> ExecutionRecord {
        let finished = started
            .checked_add(duration_from_ms(
                response.stats.total_ms + response.stats.queue_ms,
            ))
            .unwrap_or(started);
        let run_started = started
            .checked_add(duration_from_ms(response.stats.queue_ms))
            .unwrap_or(started);
        ExecutionRecord {
            execution_id: response.id.clone(),
            principal: response.principal.clone(),
            peer_uid: response.peer.uid,
            peer_pid: response.peer.pid,
            code_sha256: code,
            status: response.status,
            error_kind: response.error.as_ref().map(|e| e.kind),
            queued_ms: response.stats.queue_ms,
            run_ms: response.stats.run_ms,
            total_ms: response.stats.total_ms,
            redactions: response
                .tool_calls
                .iter()
                .flat_map(|call| {
                    call.redactions
                        .iter()
                        .map(|r| RedactionRecord::of(Some(call.id), r))
                })
                .chain(
                    response
                        .redactions
                        .iter()
                        .map(|r| RedactionRecord::of(None, r)),
                )
                .collect(),
            started,
            finished,
            tool_calls: response
                .tool_calls
                .iter()
                .map(|call| {
                    let at = run_started
                        .checked_add(duration_from_ms(call.started_ms))
                        .unwrap_or(run_started);
                    ToolCallRecord::from_trace(call, at, redact)
                })
                .collect(),
        }
    }
}

impl ToolCallRecord {
    /// A call from the execution trace; `at` is the best known start time of the call.
    pub fn from_trace(
        call: &agent_api::ToolCallRecord,
        at: SystemTime,
        redact: Redact<'_>,
    ) -> ToolCallRecord {
        let mut record = ToolCallRecord::new(
            call.id,
            &call.tool,
            &call.args,
            call.outcome,
            call.error.as_ref().map(|e| e.code),
            call.duration_ms,
            at,
            redact,
        );
        record.flows.clone_from(&call.flows);
        record
    }

    /// A call from its parts; `arguments` is summarised with `redact` here and dropped.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        call_index: u32,
        tool: &str,
        arguments: &Value,
        outcome: CallOutcome,
        error_code: Option<ToolErrorCode>,
        duration_ms: f64,
        at: SystemTime,
        redact: Redact<'_>,
    ) -> ToolCallRecord {
        ToolCallRecord {
            call_index,
            tool: tool.to_owned(),
            arguments: ArgumentSummary::of(arguments, redact).text,
            outcome,
            error_code,
            duration_ms,
            at,
            flows: Vec::new(),
        }
    }
}

/// Longest approval reason kept, in bytes; a longer one is cut at a character and marked `…`.
pub const MAX_REASON_BYTES: usize = 1024;

/// One decision on a call that waited for a person's approval, as the audit log stores it:
/// approved or denied by an approver, or expired (counted as denied).
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRecord {
    pub approval_id: String,
    pub execution_id: String,
    /// Whose execution it is.
    pub principal: String,
    /// The call's id within its execution (as `ToolCallRecord::call_index`).
    pub call_id: u32,
    /// `server.tool`.
    pub tool: String,
    /// The call's arguments, reduced and redacted the same way tool calls' arguments are.
    pub arguments: ArgumentSummary,
    pub decision: Verdict,
    /// Who decided: the approver's user name (or `uid N` when it has none); `None` when it
    /// expired.
    pub decided_by: Option<String>,
    pub decider_uid: Option<u32>,
    /// The approver's reason, redacted and at most `MAX_REASON_BYTES`.
    pub reason: Option<String>,
    /// When it was decided (or expired).
    pub at: SystemTime,
}

impl ApprovalRecord {
    /// A decision made now. `arguments` is summarised with `redact` exactly as a tool call's
    /// ([`ArgumentSummary::of`]) and dropped; `reason` goes through `redact` whole, then is cut
    /// to `MAX_REASON_BYTES`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        approval_id: &str,
        execution_id: &str,
        principal: &str,
        call_id: u32,
        tool: &str,
        arguments: &Value,
        decision: Verdict,
        decided_by: Option<&str>,
        decider_uid: Option<u32>,
        reason: Option<&str>,
        redact: Redact<'_>,
    ) -> ApprovalRecord {
        ApprovalRecord {
            approval_id: approval_id.to_owned(),
            execution_id: execution_id.to_owned(),
            principal: principal.to_owned(),
            call_id,
            tool: tool.to_owned(),
            arguments: ArgumentSummary::of(arguments, redact),
            decision,
            decided_by: decided_by.map(str::to_owned),
            decider_uid,
            reason: reason.map(|text| bounded(redact(text).into_owned(), MAX_REASON_BYTES)),
            at: SystemTime::now(),
        }
    }
}

/// `text` cut to at most `max` bytes at a character boundary, `…` marking the cut.
fn bounded(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max - '…'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

fn duration_from_ms(ms: f64) -> Duration {
    Duration::try_from_secs_f64(ms / 1e3).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_api::{ExecutionError, ExecutionStats, PeerInfo};
    use crate::audit_log::argument_summary::tests::hide_secret;
    use crate::tools::{ToolError, ToolErrorCode};
    use serde_json::json;
    use std::borrow::Cow;
    use std::time::UNIX_EPOCH;

    #[test]
    fn code_hash_is_sha256() {
        // `printf 'abc' | sha256sum`
        assert_eq!(
            CodeHash::of("abc").to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn from_response_takes_everything_but_the_code_and_the_raw_arguments() {
        let response = ExecutionResponse {
            id: "ex_1".into(),
            status: Status::Error,
            result: Value::Null,
            stdout: String::new(),
            stderr: String::new(),
            error: Some(ExecutionError {
                kind: agent_api::ExecutionErrorKind::Runtime,
                name: None,
                message: "boom".into(),
                line: None,
                column: None,
                stack: None,
                excerpt: None,
                hint: None,
                explanation: None,
            }),
            session: None,
            replayed_calls: 0,
            resumed_from: None,
            pending_calls: Vec::new(),
            pending_approvals: Vec::new(),
            determinism: None,
            tool_calls: vec![agent_api::ToolCallRecord {
                id: 1,
                tool: "github.create_issue".into(),
                args: json!({"title": "hello", "token": "s3cr3t"}),
                outcome: agent_api::CallOutcome::Error,
                error: Some(ToolError::new(ToolErrorCode::Denied, "no")),
                result: None,
                result_truncated: false,
                started_ms: 3.0,
                duration_ms: 1.5,
                replayed: false,
                divergence: None,
                redactions: vec![agent_api::Redaction {
                    rule: "known-secret".into(),
                    place: agent_api::RedactionPlace::Result,
                    pointer: Some("/token".into()),
                    secret: Some("github-token".into()),
                }],
                coercions: Vec::new(),
                flows: Vec::new(),
            }],
            stats: ExecutionStats {
                queue_ms: 2.0,
                run_ms: 5.0,
                total_ms: 8.0,
                ..ExecutionStats::default()
            },
            peer: PeerInfo {
                uid: 1000,
                gid: 1000,
                pid: Some(42),
            },
            principal: "local".into(),
            redactions: vec![agent_api::Redaction {
                rule: "jwt".into(),
                place: agent_api::RedactionPlace::Stdout,
                pointer: None,
                secret: None,
            }],
            warnings: Vec::new(),
        };
        let started = UNIX_EPOCH + Duration::from_secs(1_000);
        fn hide(text: &str) -> Cow<'_, str> {
            if text == "s3cr3t" {
                Cow::Owned("[redacted]".into())
            } else {
                Cow::Borrowed(text)
            }
        }
        let record = ExecutionRecord::from_response(&response, CodeHash::of("1"), started, &hide);
        assert_eq!(record.execution_id, "ex_1");
        assert_eq!(record.principal, "local");
        assert_eq!((record.peer_uid, record.peer_pid), (1000, Some(42)));
        assert_eq!(record.status, Status::Error);
        assert_eq!(record.error_kind, Some(ExecutionErrorKind::Runtime));
        assert_eq!(
            (record.queued_ms, record.run_ms, record.total_ms),
            (2.0, 5.0, 8.0)
        );
        // Every redaction, with its call (or none for the program's output), never a value.
        assert_eq!(
            record.redactions,
            [
                RedactionRecord {
                    call_index: Some(1),
                    place: "result",
                    rule: "known-secret".into(),
                    pointer: Some("/token".into()),
                    secret: Some("github-token".into()),
                },
                RedactionRecord {
                    call_index: None,
                    place: "stdout",
                    rule: "jwt".into(),
                    pointer: None,
                    secret: None,
                },
            ]
        );
        assert_eq!(
            record.finished.duration_since(started).unwrap(),
            Duration::from_millis(10)
        );
        let call = &record.tool_calls[0];
        assert_eq!(call.call_index, 1);
        assert_eq!(call.tool, "github.create_issue");
        assert_eq!(call.outcome, CallOutcome::Error);
        assert_eq!(call.error_code, Some(ToolErrorCode::Denied));
        assert_eq!(
            call.arguments,
            "{title: string(5) \"hello\", token: string(6) \"[redacted]\"}"
        );
        // Accepted, 2 ms in the queue, called 3 ms into the run.
        assert_eq!(call.at, started + Duration::from_millis(5));
    }

    #[test]
    fn an_approval_summarises_its_arguments_like_a_call_and_redacts_its_reason() {
        let args = json!({"title": "hello", "token": "s3cr3t", "body": "b".repeat(100)});
        let before = SystemTime::now();
        let record = ApprovalRecord::new(
            "ap_1",
            "ex_1",
            "local",
            3,
            "github.create_issue",
            &args,
            Verdict::Denied,
            Some("alice"),
            Some(1000),
            Some("no, s3cr3t leaks"),
            &hide_secret,
        );
        let call = ToolCallRecord::new(
            3,
            "github.create_issue",
            &args,
            CallOutcome::Ok,
            None,
            1.0,
            before,
            &hide_secret,
        );
        assert_eq!(record.arguments, ArgumentSummary::of(&args, &hide_secret));
        assert_eq!(record.arguments.text, call.arguments);
        assert_eq!(
            record.arguments.text,
            "{body: string(100), title: string(5) \"hello\", token: string(6) \"[redacted]\"}"
        );
        assert_eq!(record.arguments.redactions, 1);
        assert_eq!(record.reason.as_deref(), Some("no, [redacted] leaks"));
        assert_eq!(
            (
                record.approval_id.as_str(),
                record.execution_id.as_str(),
                record.principal.as_str(),
                record.call_id,
                record.tool.as_str(),
                record.decision.as_str(),
                record.decided_by.as_deref(),
                record.decider_uid,
            ),
            (
                "ap_1",
                "ex_1",
                "local",
                3,
                "github.create_issue",
                "denied",
                Some("alice"),
                Some(1000)
            )
        );
        assert!(record.at >= before && record.at <= SystemTime::now());
    }

    #[test]
    fn a_long_reason_is_cut_after_its_redaction() {
        // The secret straddles the cut: it is redacted whole before the text is cut.
        let reason = format!("{}s3cr3t{}", "é".repeat(510), "z".repeat(2000));
        let record = ApprovalRecord::new(
            "ap_1",
            "ex_1",
            "local",
            1,
            "a.b",
            &Value::Null,
            Verdict::Approved,
            Some("alice"),
            Some(1000),
            Some(&reason),
            &hide_secret,
        );
        let kept = record.reason.unwrap();
        assert!(kept.len() <= MAX_REASON_BYTES, "{}", kept.len());
        // What is left of the marker, never a piece of the secret.
        assert_eq!(kept, format!("{}[…", "é".repeat(510)));
        assert_eq!(record.arguments.text, "null");
    }
}
