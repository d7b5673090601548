//! Stages 9-12, which every answer passes before anyone sees it: the secret values the call
//! used redacted, the scanner, the size of one frame; then, for a live call, the journal's
//! record of its outcome and what the generation learns from it.

use super::{CallAnswer, CallScope, client};
use crate::agent_api::{Coercion, CoercionPlace, CoercionRule, Redaction, RedactionPlace};
use crate::determinism::now_ms;
use crate::journal::store::CallKey;
use crate::learned_types::{Observation, ToolContract};
use crate::secrets::scanner::{KNOWN_SECRET_RULE, SecretScanner};
use crate::tools::redaction::Redacted;
use crate::tools::{SecretsUsed, SourceAnswer, ToolError, ToolErrorCode};
use airlock_policy::{SecretAction, SecretScanning};
use airlock_proto::MAX_FRAME_LEN;
use serde_json::Value;
use std::sync::Arc;
use tracing::warn;

/// How a call was settled: what its answer is made from.
#[derive(Debug)]
pub(super) enum Settled {
    /// Refused at arrival (stages 1-4, the journal or the approval included).
    Refused(ToolError),
    /// Answered from the session's journal: its recorded result, and the clock then.
    Replayed {
        result: Result<Value, ToolError>,
        recorded_at: u64,
    },
    /// Answered by the agent with the request (a client tool), and the clock then.
    Client {
        result: Result<Value, ToolError>,
        answered_at: u64,
    },
    /// Made: what its source answered, and what the stages before it found.
    Live(Box<LiveOutcome>),
}

/// A live call, settled.
#[derive(Debug)]
pub(super) struct LiveOutcome {
    /// What the source answered, or why a stage before it failed the call.
    pub answer: SourceAnswer,
    pub passed: Passed,
    /// The journal recorded the tool at this point with other arguments.
    pub divergence: Option<String>,
}

/// What stages 5-8 of a live call found besides the source's answer.
#[derive(Debug, Default)]
pub(super) struct Passed {
    /// Its tool's contract, once it was resolved: stage 12 learns under it.
    pub contract: Option<Arc<ToolContract>>,
    /// The coercions made to its arguments (stage 6).
    pub argument_coercions: Vec<Coercion>,
    /// Its journal key, once it was recorded as sent: its outcome is recorded too.
    pub sent: Option<CallKey>,
    /// What the scanner replaced in its progress messages.
    pub progress_redactions: Vec<Redaction>,
}

/// Stages 9-12 of a call settled as `settled`: redact and scan, size, and for a live call,
/// record the outcome (of a call of a session that was recorded as sent) and learn.
pub(super) fn finish(scope: &CallScope, id: u32, tool: &str, settled: Settled) -> CallAnswer {
    match settled {
        Settled::Refused(error) => {
            let (result, redactions) = scanned(scope, tool, Err(error));
            answer(id, result, redactions, now_ms())
        }
        Settled::Replayed {
            result,
            recorded_at,
        } => {
            let (result, redactions) = scanned(scope, tool, result);
            CallAnswer {
                replayed: true,
                ..answer(id, result, redactions, recorded_at)
            }
        }
        Settled::Client {
            result,
            answered_at,
        } => {
            let (result, redactions) = scanned(scope, tool, result);
            answer(id, result, redactions, answered_at)
        }
        Settled::Live(outcome) => live(scope, id, tool, *outcome),
    }
}

/// An answer made outside the source (no coercions, no journal record).
fn answer(
    id: u32,
    result: Result<String, ToolError>,
    redactions: Vec<Redaction>,
    clock_ms: u64,
) -> CallAnswer {
    CallAnswer {
        id,
        result,
        redactions,
        coercions: Vec::new(),
        clock_ms,
        replayed: false,
        divergence: None,
        warning: None,
    }
}

/// Stages 9 and 10 of an answer that used no secret value: the scanner, under the policy's
/// action for the tool's namespace, then the size.
fn scanned(
    scope: &CallScope,
    tool: &str,
    result: Result<Value, ToolError>,
) -> (Result<String, ToolError>, Vec<Redaction>) {
    let namespace = tool.split('.').next().unwrap_or_default();
    let on_secret = scope.secret_scanning.action(namespace);
    let (result, redactions) = scan_tool_result(&scope.scanner, tool, on_secret, result);
    (result.and_then(encode_result), redactions)
}

/// Stages 9-12 of a live call.
fn live(scope: &CallScope, id: u32, tool: &str, outcome: LiveOutcome) -> CallAnswer {
    let LiveOutcome {
        answer:
            SourceAnswer {
                result,
                coercions: result_coercions,
                withheld,
                secrets,
            },
        passed,
        divergence,
    } = outcome;
    // The arguments' coercions, then the result's, in the order they were made.
    let mut coercions = passed.argument_coercions;
    coercions.extend(result_coercions);
    // 9. The values the call used, then anything else secret-shaped. Both are listed in
    // the call's redactions.
    let known = |place: RedactionPlace, found: Vec<Redacted>| {
        found.into_iter().map(move |r| Redaction {
            rule: KNOWN_SECRET_RULE.to_owned(),
            place,
            pointer: r.pointer,
            secret: r.secret,
        })
    };
    let mut used_redactions = Vec::new();
    let result = match result {
        Ok(mut value) => {
            undo_secret_coercions(&mut value, &mut coercions, &secrets, &scope.scanner);
            let found = secrets.redact_value_noting(&mut value);
            used_redactions.extend(known(RedactionPlace::Result, found));
            Ok(value)
        }
        Err(mut error) => {
            let (message, found) = secrets.redact_text_noting(error.message);
            error.message = message;
            used_redactions.extend(known(RedactionPlace::Error, found));
            if let Some(hint) = error.hint.take() {
                let (hint, found) = secrets.redact_text_noting(hint);
                error.hint = Some(hint);
                used_redactions.extend(known(RedactionPlace::Error, found));
            }
            Err(error)
        }
    };
    let namespace = tool.split('.').next().unwrap_or_default();
    let on_secret = scope.secret_scanning.action(namespace);
    // The coercions' values, like the values they came from (the response scans them
    // again with the arguments).
    for c in &mut coercions {
        secrets.redact_value(&mut c.from);
        if let Some(to) = c.to.as_mut() {
            secrets.redact_value(to);
        }
    }
    let (result, mut redactions) = scan_tool_result(&scope.scanner, tool, on_secret, result);
    if !used_redactions.is_empty() {
        warn!(
            tool,
            count = used_redactions.len(),
            "a tool's answer repeated a secret the call handed it; it was redacted before the program saw it"
        );
    }
    redactions.splice(0..0, used_redactions);
    redactions.extend(passed.progress_redactions);
    // 12, first half: the shape of what the worker will get (after the scan), walked
    // without a lock.
    let (source, name) = tool.split_once('.').unwrap_or((namespace, ""));
    let learning = match (&result, &passed.contract, scope.learning.learns(source)) {
        (Ok(value), Some(contract), Some(types)) => {
            Some((types, contract, Observation::of(value, contract), false))
        }
        // A result withheld for breaking the declared output schema is reality
        // contradicting it: counted as drift, scanned like a result first (only its shape
        // is kept, but property names are part of it).
        (Err(_), Some(contract), Some(types)) => withheld.map(|mut value| {
            secrets.redact_value(&mut value);
            let _ = scope.scanner.scan_json(&mut value);
            (types, contract, Observation::of(&value, contract), true)
        }),
        _ => None,
    };
    // 10.
    let result = result.and_then(encode_result);
    // 12: merged only if the worker gets it (or it was withheld from the worker for
    // breaking the declared schema), and before the answer leaves.
    if let Some((types, contract, observation, withheld)) = learning
        && (result.is_ok() || withheld)
    {
        types.record(&scope.principal.name, source, name, contract, observation);
    }
    let clock_ms = now_ms();
    // 11. What the worker gets is what is recorded: after the scan, never a credential.
    let warning = match (&passed.sent, scope.journal.as_deref()) {
        (Some(key), Some(run)) => run.outcome(key, result.as_ref().map(String::as_str), clock_ms),
        _ => None,
    };
    CallAnswer {
        id,
        result,
        redactions,
        coercions,
        clock_ms,
        replayed: false,
        divergence,
        warning,
    }
}

/// A result coercion whose value was a secret (a value the call used, or secret-shaped) is
/// undone before stage 9, so the secret is redacted as the string it came as: `"123456"`
/// made a number would escape redaction, which looks at strings.
fn undo_secret_coercions(
    value: &mut Value,
    coercions: &mut Vec<Coercion>,
    secrets: &SecretsUsed,
    scanner: &SecretScanner,
) {
    let secret = |c: &Coercion| {
        let mut from = c.from.clone();
        secrets.redact_value(&mut from);
        from != c.from || !scanner.scan_json(&mut from).is_empty()
    };
    let mut kept = Vec::with_capacity(coercions.len());
    // Deepest last: undone in reverse, a wrapped element before its array.
    for c in std::mem::take(coercions).into_iter().rev() {
        let undo = c.place == CoercionPlace::Result
            && !matches!(
                c.rule,
                CoercionRule::WrapInArray | CoercionRule::NullOmitted
            )
            && secret(&c);
        match value.pointer_mut(&c.pointer) {
            Some(at) if undo => *at = c.from,
            _ => kept.push(c),
        }
    }
    kept.reverse();
    *coercions = kept;
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
                .map(|f| f.redaction(RedactionPlace::Result))
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
                    let error = ToolError::new(ToolErrorCode::SecretInResult,
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
                .map(|f| f.redaction(RedactionPlace::Error))
                .collect();
            error.message = message;
            error.hint = hint;
            (Err(error), redactions)
        }
    }
}

/// A client tool's answer as a waiting execution keeps it: scanned (stage 9, under the
/// policy's action for the `client` namespace) and encoded (stage 10) once, when the agent
/// posts it, so no secret it carried is kept and a re-run does not scan it again. `tool` is
/// the tool's name in the namespace.
pub fn scan_client_answer(
    scanner: &SecretScanner,
    scanning: &SecretScanning,
    tool: &str,
    result: Result<Value, String>,
) -> (Result<String, ToolError>, Vec<Redaction>) {
    let on_secret = scanning.action(client::NAMESPACE);
    let result = result.map_err(|message| ToolError::new(ToolErrorCode::UpstreamError, message));
    let (result, redactions) = scan_tool_result(
        scanner,
        &format!("{}.{tool}", client::NAMESPACE),
        on_secret,
        result,
    );
    (result.and_then(encode_result), redactions)
}

/// Serialises a tool's result for the worker, refusing what cannot fit in one frame.
fn encode_result(value: Value) -> Result<String, ToolError> {
    let text = serde_json::to_string(&value).map_err(|e| {
        ToolError::new(
            ToolErrorCode::Internal,
            format!("cannot serialise the tool result: {e}"),
        )
    })?;
    // Leave room for the envelope of the ToolResult frame.
    let max = MAX_FRAME_LEN as usize - 1024;
    if text.len() > max {
        return Err(ToolError::new(
            ToolErrorCode::ResultTooLarge,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A result coercion whose value was a secret is undone before the redaction, so the
    /// secret is redacted as the string it came as; an argument's, and other coercions, stay.
    #[test]
    fn result_coercions_of_secret_values_are_undone_before_redaction() {
        use super::{
            Coercion, CoercionPlace, CoercionRule, SecretScanner, SecretsUsed,
            undo_secret_coercions,
        };
        use crate::secrets::store::SecretValue;
        use serde_json::json;
        let mut secrets = SecretsUsed::default();
        secrets.add([SecretValue::new("918273645".into())]);
        let scanner = SecretScanner::new([]).unwrap();
        let coercion = |place, pointer: &str, from: Value, to: Value, rule| Coercion {
            place,
            pointer: pointer.into(),
            from,
            to: Some(to),
            rule,
        };
        // The source coerced {"pin": "918273645", "n": "2", "tags": "918273645"}.
        let mut value = json!({"pin": 918273645, "n": 2, "tags": ["918273645"]});
        let mut coercions = vec![
            coercion(
                CoercionPlace::Arguments,
                "/pin",
                json!("918273645"),
                json!(918273645),
                CoercionRule::NumberFromString,
            ),
            coercion(
                CoercionPlace::Result,
                "/n",
                json!("2"),
                json!(2),
                CoercionRule::NumberFromString,
            ),
            coercion(
                CoercionPlace::Result,
                "/pin",
                json!("918273645"),
                json!(918273645),
                CoercionRule::NumberFromString,
            ),
            coercion(
                CoercionPlace::Result,
                "/tags",
                json!("918273645"),
                json!(["918273645"]),
                CoercionRule::WrapInArray,
            ),
        ];
        undo_secret_coercions(&mut value, &mut coercions, &secrets, &scanner);
        assert_eq!(
            value,
            json!({"pin": "918273645", "n": 2, "tags": ["918273645"]})
        );
        let kept: Vec<(&str, CoercionPlace)> = coercions
            .iter()
            .map(|c| (c.pointer.as_str(), c.place))
            .collect();
        assert_eq!(
            kept,
            [
                ("/pin", CoercionPlace::Arguments),
                ("/n", CoercionPlace::Result),
                ("/tags", CoercionPlace::Result),
            ]
        );
        // What the pipeline then does: the secret is redacted in its string form.
        secrets.redact_value(&mut value);
        assert_eq!(value["pin"], json!("[redacted]"));
        assert_eq!(value["tags"], json!(["[redacted]"]));
    }
}
