//! Stages 1-4, at arrival and in call order: budget, policy, readable arguments (then the
//! journal and the approval), rate; and the answers of calls that need no source.

use super::json::{json_type, unreadable_json_error};
use super::{Admitted, Arrival, CallAnswer, CallRequest, CallScope, ClientReply, Held};
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
    let mut refused = if made > scope.max_tool_calls as usize {
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
    } else if client_name.is_none() && !scope.principal.allows_tool(&tool) {
        Some(
            ToolError::new(
                ToolErrorCode::Denied,
                format!(
                    "principal `{}` is not allowed to call `{tool}`",
                    scope.principal.name
                ),
            )
            .with_hint(denied_hint(scope, &tool)),
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
                    json_type(&args)
                ),
            )
            .with_hint(format!("call it as tools.{tool}({{ ... }})")),
        )
    } else if let Some(name) = client_name {
        match &scope.client {
            Some(client) => client.tools.check(name, &args).err(),
            None => Some(
                ToolError::new(
                    ToolErrorCode::UnknownTool,
                    format!("`tools.{tool}` is a client tool, and this request declares none"),
                )
                .with_hint("declare the tools you answer yourself in the request's client_tools"),
            ),
        }
    } else {
        None
    };
    if let (None, Some(name), Some(client)) = (&refused, client_name, &scope.client) {
        let answer = client.answer(id, name).map(|reply| match reply {
            client::Reply::Given(a) => {
                let result = a
                    .result
                    .clone()
                    .map_err(|message| ToolError::new(ToolErrorCode::UpstreamError, message));
                ClientReply::Given(result, a.clock_ms)
            }
            client::Reply::Kept(kept) => ClientReply::Kept(kept.clone()),
        });
        return Admitted {
            scope: scope.clone(),
            id,
            tool,
            args,
            refused,
            journal: None,
            client: Some(answer),
            awaits_approval: false,
        };
    }
    // The journal: the key is taken here, in call order, so occurrences count the same way
    // in every run whatever order the calls finish in.
    let mut journal = None;
    if let (None, Some(run), None) = (&refused, &scope.journal, client_name) {
        let (key, position) = run.key(&tool, &args);
        match run.lookup(&key, position) {
            Ok(lookup) => journal = Some((key, lookup)),
            Err(e) => refused = Some(e),
        }
    }
    let replayed = matches!(journal, Some((_, Lookup::Replay { .. })));
    // The approval: only for a call that would be made.
    let mut awaits_approval = false;
    if refused.is_none() && !replayed && scope.principal.needs_approval(&tool) {
        match &scope.client {
            None => {
                refused = Some(
                    ToolError::new(
                        ToolErrorCode::Denied,
                        format!("`{tool}` needs an approver's yes, and this execution cannot wait for one: the daemon's journal, which keeps waiting executions, is unavailable"),
                    )
                    .with_hint("the operator sees why in /v1/health"),
                );
            }
            Some(waits) => {
                let args_hash = crate::journal::canonical::hash(&args);
                match waits.decisions.get(id, &tool, &args_hash) {
                    Some(decision) => refused = decision.refusal(),
                    None => awaits_approval = true,
                }
            }
        }
    }
    if refused.is_none()
        && !awaits_approval
        && !replayed
        && client_name.is_none()
        && let Some(Err(limited)) = scope.rate.as_ref().map(|b| b.try_take())
    {
        refused = Some(
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
    Admitted {
        scope: scope.clone(),
        id,
        tool,
        args,
        refused,
        journal,
        client: None,
        awaits_approval,
    }
}

impl Admitted {
    /// The answer of a call that needs no source, at once and without a task of its own: its
    /// refusal, or its recorded result scanned again under the policy in force (stages 9 and
    /// 10). A call that needs its source comes back as it is, for [`Admitted::complete`].
    pub fn answer_at_arrival(mut self) -> Arrival {
        if self.refused.is_none()
            && let Some(client) = self.client.take()
        {
            let (result, clock_ms) = match client {
                Some(ClientReply::Given(result, clock_ms)) => (result, clock_ms),
                // Scanned and encoded when it was posted: handed on as it is, so a re-run
                // costs a copy of each earlier answer, not another scan of it.
                Some(ClientReply::Kept(kept)) => {
                    return Arrival::Answered(CallAnswer {
                        id: self.id,
                        result: kept.result,
                        redactions: kept.redactions,
                        coercions: Vec::new(),
                        clock_ms: kept.clock_ms,
                        replayed: false,
                        divergence: None,
                        warning: None,
                    });
                }
                None => {
                    let name = self
                        .tool
                        .split_once('.')
                        .map_or(self.tool.as_str(), |(_, name)| name);
                    return Arrival::Held(Held::Client(PendingCall {
                        id: self.id,
                        tool: name.to_owned(),
                        args: self.args.clone(),
                    }));
                }
            };
            let ctx = self.context();
            // Scanned like any tool's answer (stages 9 and 10) before the worker sees it.
            return Arrival::Answered(self.finish(
                &ctx,
                result,
                Some(clock_ms),
                false,
                None,
                false,
                None,
            ));
        }
        if self.refused.is_none() && self.awaits_approval {
            return Arrival::Held(Held::Approval {
                id: self.id,
                tool: self.tool.clone(),
                args: self.args.clone(),
            });
        }
        let (result, replayed_at) = match (&self.refused, &self.journal, &self.scope.journal) {
            (Some(error), _, _) => (Err(error.clone()), None),
            (None, Some((_, Lookup::Replay { result, clock_ms })), Some(run)) => {
                run.replayed();
                let parsed = serde_json::from_str::<Value>(result).map_err(|e| {
                    ToolError::new(
                        ToolErrorCode::JournalUnavailable,
                        format!(
                            "the journal's record of `{}` cannot be read: {e}",
                            self.tool
                        ),
                    )
                    .with_hint("run the program in a new session")
                });
                (parsed, Some(*clock_ms))
            }
            _ => return Arrival::ToSource(self),
        };
        let ctx = self.context();
        let replayed = replayed_at.is_some();
        Arrival::Answered(self.finish(&ctx, result, replayed_at, replayed, None, false, None))
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
