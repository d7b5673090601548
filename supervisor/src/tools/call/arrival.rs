//! Stages 1-4, at arrival and in call order: budget, policy, readable arguments (then the
//! journal and the approval), rate; and the answers of calls that need no source.

use super::answer::{Settled, finish};
use super::json::{json_type, unreadable_json_error};
use super::{
    Admission, Admitted, Arrival, CallAnswer, CallRequest, CallScope, ClientReply, Held,
    JournalEntry, SourceCall,
};
use crate::agent_api::PendingCall;
use crate::journal::Lookup;
use crate::tools::client;
use crate::tools::{ToolError, ToolErrorCode};
use serde_json::Value;
use std::sync::Arc;

/// Stages 1-4, at arrival. `made` counts this execution's calls, this one included. In a
/// session, the journal is asked between 3 and 4: a call it answers spends no rate.
pub fn admit(scope: &Arc<CallScope>, request: CallRequest, made: usize) -> Admitted {
    let CallRequest {
        id,
        tool,
        args_json,
    } = request;
    let parsed = serde_json::from_str::<Value>(&args_json);
    let unreadable = parsed.as_ref().err().map(|e| e.to_string());
    let args = parsed.unwrap_or(Value::Null);
    // `tools.client.<name>`: the agent's own tool, not the daemon's.
    let client_name = tool
        .strip_prefix(client::NAMESPACE)
        .and_then(|rest| rest.strip_prefix('.'));
    let mut flows = Vec::new();
    let admission = match first_refusal(scope, made, &tool, client_name, &args, unreadable) {
        Some(error) => Admission::Refused(error),
        None => match client_name {
            Some(name) => client_admission(scope, id, &tool, name, &args),
            None => daemon_admission(scope, id, &tool, &args, &mut flows),
        },
    };
    Admitted {
        scope: scope.clone(),
        id,
        tool,
        args,
        admission,
        flows,
    }
}

/// Stages 1-3 without the journal: the budget, the policy (not for a client tool, which
/// needs no grant), readable arguments, an object.
fn first_refusal(
    scope: &CallScope,
    made: usize,
    tool: &str,
    client_name: Option<&str>,
    args: &Value,
    unreadable: Option<String>,
) -> Option<ToolError> {
    if made > scope.max_tool_calls as usize {
        Some(
            ToolError::new(
                ToolErrorCode::ToolCallLimit,
                format!(
                    "this execution reached its limit of {} tool calls",
                    scope.max_tool_calls
                ),
            )
            .with_hint(
                "batch the work into fewer calls, or ask the operator to raise limits.max_tool_calls",
            ),
        )
    } else if client_name.is_none() && !scope.principal.allows_tool(tool) {
        Some(
            ToolError::new(
                ToolErrorCode::Denied,
                format!(
                    "principal `{}` is not allowed to call `{tool}`",
                    scope.principal.name
                ),
            )
            .with_hint(denied_hint(scope, tool)),
        )
    } else if let Some(reason) = unreadable {
        Some(unreadable_json_error(
            &format!("arguments of `{tool}`"),
            &reason,
        ))
    } else if !args.is_object() {
        Some(
            ToolError::new(
                ToolErrorCode::InvalidArguments,
                format!(
                    "arguments of `{tool}` must be an object, got {}",
                    json_type(args)
                ),
            )
            .with_hint(format!("call it as tools.{tool}({{ ... }})")),
        )
    } else {
        None
    }
}

/// A client tool's call (`tools.client.<name>`): its own checks (the declared tool and its
/// schema) in place of 2-4, then the agent's answer, or none yet.
fn client_admission(scope: &CallScope, id: u32, tool: &str, name: &str, args: &Value) -> Admission {
    let Some(client) = &scope.client else {
        return Admission::Refused(
            ToolError::new(
                ToolErrorCode::UnknownTool,
                format!("`tools.{tool}` is a client tool, and this request declares none"),
            )
            .with_hint("declare the tools you answer yourself in the request's client_tools"),
        );
    };
    if let Err(e) = client.tools.check(name, args) {
        return Admission::Refused(e);
    }
    match client.answer(id, name) {
        Some(client::Reply::Given(a)) => {
            let result = a
                .result
                .clone()
                .map_err(|message| ToolError::new(ToolErrorCode::UpstreamError, message));
            Admission::Client(ClientReply::Given(result, a.clock_ms))
        }
        Some(client::Reply::Kept(kept)) => Admission::Client(ClientReply::Kept(kept.clone())),
        None => Admission::ClientPending,
    }
}

/// A call of the daemon's tools past stage 3: the journal (in a session), the information
/// flow, the approval, the rate.
fn daemon_admission(
    scope: &CallScope,
    id: u32,
    tool: &str,
    args: &Value,
    flows: &mut Vec<crate::agent_api::Flow>,
) -> Admission {
    // The journal: the key is taken here, in call order, so occurrences count the same way
    // in every run whatever order the calls finish in.
    let mut journal = None;
    if let Some(run) = &scope.journal {
        let (key, position) = run.key(tool, args);
        match run.lookup(&key, position) {
            Ok(Lookup::Replay { result, clock_ms }) => {
                return Admission::Replay { result, clock_ms };
            }
            Ok(Lookup::Live {
                idempotency_key,
                divergence,
                ..
            }) => {
                journal = Some(JournalEntry {
                    key,
                    idempotency_key,
                    divergence,
                });
            }
            Err(e) => return Admission::Refused(e),
        }
    }
    // The information flow: only for a call that would be made (a replayed one was checked
    // when it was made), against the untrusted results delivered before it arrived.
    let mut flow_approval = None;
    if let Some(ledger) = &scope.flow {
        let ledger = ledger
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let verdict = ledger.check(tool, args);
        drop(ledger);
        if let Some(refusal) = verdict.refusal(tool) {
            *flows = verdict.flows;
            return Admission::Refused(refusal);
        }
        flow_approval = verdict.approval();
        *flows = verdict.flows;
    }
    // The approval: only for a call that would be made.
    if scope.principal.needs_approval(tool) || flow_approval.is_some() {
        let Some(waits) = &scope.client else {
            return Admission::Refused(
                ToolError::new(
                    ToolErrorCode::Denied,
                    format!("`{tool}` needs an approver's yes, and this execution cannot wait for one: the daemon's journal, which keeps waiting executions, is unavailable"),
                )
                .with_hint("the operator sees why in /v1/health"),
            );
        };
        let args_hash = crate::journal::canonical::hash(args);
        match waits.decisions.get(id, tool, &args_hash) {
            Some(decision) => {
                if let Some(refusal) = decision.refusal() {
                    return Admission::Refused(refusal);
                }
            }
            None => return Admission::AwaitsApproval(flow_approval),
        }
    }
    if let Some(Err(limited)) = scope.rate.as_ref().map(|b| b.try_take()) {
        return Admission::Refused(
            ToolError::new(
                ToolErrorCode::RateLimited,
                format!(
                    "principal `{}` may make {} tool calls per minute and has used them",
                    scope.principal.name, limited.per_minute
                ),
            )
            .with_hint(format!(
                "wait {:.1} s before the next call, or make fewer calls; the operator sets principal.tool_calls_per_minute",
                limited.retry_after.as_secs_f64()
            )),
        );
    }
    Admission::Live(journal)
}

impl Admitted {
    /// The answer of a call that needs no source, at once and without a task of its own: its
    /// refusal, its recorded result scanned again under the policy in force, or the agent's
    /// answer (stages 9 and 10); a held call as it waits. A call that needs its source is
    /// handed on, for [`SourceCall::complete`].
    pub fn answer_at_arrival(self) -> Arrival {
        let Admitted {
            scope,
            id,
            tool,
            args,
            admission,
            ..
        } = self;
        let settled = match admission {
            Admission::Refused(error) => Settled::Refused(error),
            // Scanned like any tool's answer (stages 9 and 10) before the worker sees it.
            Admission::Client(ClientReply::Given(result, answered_at)) => Settled::Client {
                result,
                answered_at,
            },
            // Scanned and encoded when it was posted: handed on as it is, so a re-run costs a
            // copy of each earlier answer, not another scan of it.
            Admission::Client(ClientReply::Kept(kept)) => {
                return Arrival::Answered(CallAnswer {
                    id,
                    result: kept.result,
                    redactions: kept.redactions,
                    coercions: Vec::new(),
                    clock_ms: kept.clock_ms,
                    replayed: false,
                    divergence: None,
                    warning: None,
                });
            }
            Admission::ClientPending => {
                let name = tool.split_once('.').map_or(tool.as_str(), |(_, name)| name);
                return Arrival::Held(Held::Client(PendingCall {
                    id,
                    tool: name.to_owned(),
                    args,
                }));
            }
            Admission::AwaitsApproval(flow) => {
                return Arrival::Held(Held::Approval {
                    id,
                    tool,
                    args,
                    flow,
                });
            }
            Admission::Replay { result, clock_ms } => {
                if let Some(run) = &scope.journal {
                    run.replayed();
                }
                let parsed = serde_json::from_str::<Value>(&result).map_err(|e| {
                    ToolError::new(
                        ToolErrorCode::JournalUnavailable,
                        format!("the journal's record of `{tool}` cannot be read: {e}"),
                    )
                    .with_hint("run the program in a new session")
                });
                Settled::Replayed {
                    result: parsed,
                    recorded_at: clock_ms,
                }
            }
            Admission::Live(journal) => {
                return Arrival::ToSource(SourceCall {
                    scope,
                    id,
                    tool,
                    args,
                    journal,
                });
            }
        };
        Arrival::Answered(finish(&scope, id, &tool, settled))
    }
}

/// What a program denied `tool` should do: ask the operator, or perhaps it meant a namespace
/// near the one it named that it may call in (a misspelt one). Only other namespaces the
/// principal may call in are named, so the hint is the same whether the one it named exists
/// or not.
fn denied_hint(scope: &CallScope, tool: &str) -> String {
    const GRANT: &str = "the operator grants tools with `allow` in the principal's policy entry";
    let namespace = tool.split_once('.').map_or(tool, |(ns, _)| ns);
    let reachable: Vec<&str> = scope
        .registry
        .namespaces()
        .filter(|ns| *ns != namespace && scope.principal.may_call_in(ns))
        .collect();
    let near = crate::tools::naming::near_namespaces(namespace, reachable.iter().copied());
    if near.is_empty() {
        return GRANT.to_owned();
    }
    format!(
        "did you mean {}? Otherwise {GRANT}",
        crate::tools::naming::quote_list(&near, "tools.", "")
    )
}
