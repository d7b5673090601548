//! A program's session store, `store.get(key)` and `store.set(key, value)`: the worker sends
//! them as calls of the reserved names [`GET`] and [`SET`] over the same channel as tool
//! calls (no new message, no new capability), and the run loop answers them here, never the
//! tool-call pipeline. They are numbered with the tool calls, in call order, and traced.
//!
//! A `get` is recorded in the session's journal like a read-only tool call (key: the name,
//! the hash of `{key}`, the occurrence), so a re-run of the session answers it from the record
//! under `replay: "all"` and reads the store again under `"writes"` and `"none"`: an
//! execution stays a function of its code and its ordered results. A `set` is applied every
//! time it runs (writing the same value again changes nothing), its value scanned for
//! secrets first, as a tool's result is: what is kept is what the scanner let through (a key
//! that looks like a secret is refused: keys are listed as they are).

use super::run::Run;
use crate::agent_api::{RedactionPlace, ToolError, ToolErrorCode};
use crate::journal::Lookup;
use crate::journal::session_store::{self, StoreBound};
use crate::tools::call::{CallAnswer, CallRequest};
use serde_json::{Value, json};

/// The reserved name of `store.get` on the wire (`$` is in no tool namespace).
pub(super) const GET: &str = "$store.get";
/// The reserved name of `store.set` on the wire.
pub(super) const SET: &str = "$store.set";

/// Whether a call is one of the store's.
pub(super) fn is_store_call(tool: &str) -> bool {
    tool == GET || tool == SET
}

fn refused(code: ToolErrorCode, message: String, hint: &str) -> ToolError {
    ToolError::new(code, message).with_hint(hint)
}

fn bound(bound: &StoreBound) -> ToolError {
    refused(
        ToolErrorCode::InvalidArguments,
        bound.to_string(),
        bound.hint(),
    )
}

impl Run<'_> {
    /// Answers a store call: the arguments as the trace shows them (a `set`'s value only by
    /// its size: values can be large, and the trace goes to the agent), and the answer.
    pub(super) fn store_call(&mut self, request: &CallRequest) -> (Value, CallAnswer) {
        let mut answer = CallAnswer {
            id: request.id,
            result: Ok("null".into()),
            redactions: Vec::new(),
            coercions: Vec::new(),
            clock_ms: crate::determinism::now_ms(),
            replayed: false,
            divergence: None,
            warning: None,
        };
        let args: Value = serde_json::from_str(&request.args_json).unwrap_or(Value::Null);
        let key = args.get("key").and_then(Value::as_str).map(str::to_owned);
        let shown = match (&key, request.tool.as_str()) {
            (Some(key), SET) => {
                json!({ "key": key, "value_bytes": args.get("value").map_or(0, |v| v.to_string().len()) })
            }
            (Some(key), _) => json!({ "key": key }),
            (None, _) => Value::Null,
        };
        let Some(key) = key else {
            answer.result = Err(refused(
                ToolErrorCode::InvalidArguments,
                "store keys are strings".into(),
                "call store.get(\"name\") or store.set(\"name\", value)",
            ));
            return (shown, answer);
        };
        let Some(session) = self.session.clone() else {
            answer.result = Err(refused(
                ToolErrorCode::InvalidArguments,
                "the store keeps values per session, and this execution runs in none".into(),
                "run the program in a session: \"session\": \"new\" in the request (its response's session id for the next ones)",
            ));
            return (shown, answer);
        };
        if let Err(b) = session_store::check_key(&key) {
            answer.result = Err(bound(&b));
            return (shown, answer);
        }
        if request.tool == SET {
            let Some(mut value) = args.get("value").cloned() else {
                answer.result = Err(refused(
                    ToolErrorCode::InvalidArguments,
                    format!(
                        "store.set(\"{}\") needs a value",
                        session_store::shown_key(&key)
                    ),
                    "pass a JSON value: store.set(key, value); null clears the key's value",
                ));
                return (shown, answer);
            };
            // Keys are listed as they are (`GET /v1/sessions/<id>/store`): one that carries a
            // secret is refused rather than kept.
            if let Some(finding) = self.output.scanner.scan_text(&key).1.first() {
                answer.result = Err(refused(
                    ToolErrorCode::InvalidArguments,
                    format!(
                        "the store key looks like a secret ({}); keys are listed as they are",
                        finding.rule
                    ),
                    "name the value in the key (\"token\"), and keep the value itself as the value",
                ));
                return (Value::Null, answer);
            }
            let findings = self.output.scanner.scan_json(&mut value);
            super::response::note_findings(
                &mut answer.redactions,
                RedactionPlace::Arguments,
                &findings,
            );
            answer.result =
                match session
                    .journal
                    .set_store_value(&session.session, &key, &value.to_string())
                {
                    Ok(Ok(())) => Ok("null".into()),
                    Ok(Err(b)) => Err(bound(&b)),
                    Err(e) => Err(journal_unavailable(&e)),
                };
            return (shown, answer);
        }
        // A get: from the record, or live (and then recorded, as a read-only call).
        let (call_key, position) = session.key(GET, &json!({ "key": key }));
        match session.lookup(&call_key, position) {
            Ok(Lookup::Replay { result, clock_ms }) => {
                session.replayed();
                let mut value: Value = serde_json::from_str(&result).unwrap_or(Value::Null);
                // Scanned again under the policy in force, as a replayed tool result is.
                let findings = self.output.scanner.scan_json(&mut value);
                super::response::note_findings(
                    &mut answer.redactions,
                    RedactionPlace::Result,
                    &findings,
                );
                answer.result = Ok(value.to_string());
                answer.clock_ms = clock_ms;
                answer.replayed = true;
            }
            Ok(Lookup::Live { divergence, .. }) => {
                answer.divergence = divergence;
                let read = session.journal.store_value(&session.session, &key);
                answer.result = match read {
                    Ok(value) => {
                        let mut value: Value = value
                            .and_then(|v| serde_json::from_str(&v).ok())
                            .unwrap_or(Value::Null);
                        let findings = self.output.scanner.scan_json(&mut value);
                        super::response::note_findings(
                            &mut answer.redactions,
                            RedactionPlace::Result,
                            &findings,
                        );
                        let text = value.to_string();
                        answer.warning = match session.sent(&call_key, true) {
                            Ok(()) => session.outcome(&call_key, Ok(&text), answer.clock_ms),
                            Err(e) => Some(e.message),
                        };
                        Ok(text)
                    }
                    Err(e) => Err(journal_unavailable(&e)),
                };
            }
            Err(e) => answer.result = Err(e),
        }
        (shown, answer)
    }
}

fn journal_unavailable(e: &crate::journal::store::StoreError) -> ToolError {
    refused(
        ToolErrorCode::JournalUnavailable,
        format!("the daemon cannot use its journal, which keeps the session store: {e}"),
        "run the program again later; the operator sees the cause in /v1/health and the airlockd log",
    )
}
