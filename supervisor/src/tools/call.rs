//! The call pipeline: every tool call a program makes goes through these stages, in this
//! order, and through nothing else.
//!
//! At arrival, in call order (so the execution's budget and the principal's rate are spent
//! the same way whenever the program runs), [`admit`]:
//! 1. **budget**: at most `max_tool_calls` per execution;
//! 2. **policy**: the principal's `allow`/`deny`;
//! 3. **readable arguments**: JSON the daemon can take (depth, surrogates), and an object;
//!    then, in a session, the **journal**: the call's key (tool, canonical arguments,
//!    occurrence) is taken now, in call order; a recorded result answers the call, which
//!    then skips 4-8 ([`crate::journal`]); then, for a tool the principal's `approve`
//!    patterns name, the **approval**: the execution's decision on this call, or the call is
//!    held until there is one ([`super::approval`]);
//! 4. **rate**: the principal's `tool_calls_per_minute`, spent only by a call that would be
//!    made.
//!
//! Then concurrently with the execution's other calls, [`Admitted::complete`]:
//! 5. **resolve**: namespace and tool (may start a lazily started server);
//! 6. **arguments**: the tool's input schema, so nothing reaches a service for a call that
//!    cannot be valid; first, where the source's `coerce` is `safe`, near misses (`"100"`
//!    for a number) are coerced to it ([`super::coercion`]) and recorded for the trace;
//! 7. **gate**: a permit of the source's `max_concurrent_calls`, and its `call_timeout_ms`
//!    as the call's deadline;
//! 8. **the source**: the adapter speaks its protocol;
//! 9. **redact and scan**: the secret values the call used are redacted, then the secret
//!    scanner runs over the answer (redact, or fail for `[secret_scanning] fail` sources);
//! 10. **size**: the answer must fit in one frame to the worker;
//! 11. **record** (a session's live call): recorded as sent just before 7, and its outcome
//!    (what the worker gets) after 10;
//! 12. **learn** (a live call's success, of a source that learns): the shape of what the
//!    worker gets, inferred after 9 (so never from a credential) and merged into the tool's
//!    learned type before the answer leaves the pipeline ([`crate::learned_types`]), so a
//!    program that fails on the value meets an SDK that already shows its type; a result
//!    that contradicts the tool's declared output schema counts as drift. Persisted in
//!    batches, and at once for a tool a program failed on.
//!
//! A call of a client-owned tool (`tools.client.<name>`, [`super::client`]) takes stage 1,
//! then its own checks in place of 2-4 (the declared tool and its schema: the agent's own
//! tool needs no grant and spends no rate) and is answered at arrival from the agent's
//! results, or held for them ([`Arrival::Held`]).
//!
//! A source that checks its results against a declared output schema (MCP `outputSchema`)
//! coerces a result that breaks it trivially in stage 8, under the same policy, and adds the
//! coercions to the call's context; stage 9 undoes a result coercion whose value was a secret,
//! so it is redacted as the string it came as.
//!
//! The execution records what comes out (the trace with its coercions, the audit log).

use crate::agent_api::{
    Coercion, CoercionPlace, CoercionRule, PendingCall, Redaction, RedactionPlace,
};
use crate::journal::store::CallKey;
use crate::journal::{Lookup, SessionRun};
use crate::learned_types::{Learning, Observation, ToolContract};
use crate::rate_limiter::RateBucket;
use crate::secrets::scanner::{KNOWN_SECRET_RULE, SecretScanner};
use crate::tools::catalogue::CallerCatalogue;
use crate::tools::client::{self, WaitScope};
use crate::tools::redaction::Redacted;
use crate::tools::{
    CallContext, CallDeadline, SecretsUsed, ToolError, ToolErrorCode, ToolProgress, ToolRegistry,
    ToolSource,
};
use airlock_policy::{Principal, SecretAction, SecretScanning};
use airlock_proto::MAX_FRAME_LEN;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tracing::warn;

/// How long past its deadline the pipeline waits, by default, for a source that did not
/// answer by then itself (see [`CallGate::with_grace`]).
pub const DEADLINE_GRACE: Duration = Duration::from_millis(250);

/// A source's concurrency limit and call timeout, from its policy entry.
#[derive(Debug)]
pub struct CallGate {
    permits: Semaphore,
    timeout: Duration,
    grace: Duration,
}

impl CallGate {
    pub fn new(max_concurrent_calls: usize, call_timeout_ms: u64) -> CallGate {
        CallGate {
            permits: Semaphore::new(max_concurrent_calls),
            timeout: Duration::from_millis(call_timeout_ms),
            grace: DEADLINE_GRACE,
        }
    }

    /// How long past the deadline the source may take to end a call properly (an MCP source
    /// asks a server that missed a deadline whether it is still alive, so the next call does
    /// not meet a dead connection). The pipeline stops waiting after that regardless.
    pub fn with_grace(mut self, grace: Duration) -> CallGate {
        self.grace = grace;
        self
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Refuses further calls (the daemon stops the source).
    pub fn close(&self) {
        self.permits.close();
    }
}

/// What the calls of one execution share.
#[derive(Debug)]
pub struct CallScope {
    pub execution_id: String,
    pub principal: Arc<Principal>,
    pub registry: ToolRegistry,
    pub max_tool_calls: u32,
    /// The principal's `tool_calls_per_minute` bucket, shared by all its executions.
    pub rate: Option<Arc<RateBucket>>,
    pub scanner: SecretScanner,
    pub secret_scanning: SecretScanning,
    /// The agent's event stream, for tool progress (when it asked for a stream).
    pub events: Option<mpsc::Sender<crate::agent_api::ExecutionEvent>>,
    /// The session's journal, for an execution of a session.
    pub journal: Option<Arc<SessionRun>>,
    /// The request's client-owned tools and the answers they have so far.
    pub client: Option<Arc<WaitScope>>,
    /// The principal's catalogue under the execution's generation, for the daemon's built-in
    /// tools (`tools.airlock.*`): every call's context carries it.
    pub catalogue: CallerCatalogue,
    /// What the generation learns from results (stage 12).
    pub learning: Learning,
}

/// One call as the worker sent it.
#[derive(Debug, Clone)]
pub struct CallRequest {
    pub id: u32,
    /// `namespace.name` exactly as the program wrote it.
    pub tool: String,
    pub args_json: String,
}

/// A call that passed (or failed) the stages at arrival.
#[derive(Debug)]
pub struct Admitted {
    scope: Arc<CallScope>,
    id: u32,
    tool: String,
    /// The arguments as the trace shows them (`null` when they were not readable).
    args: Value,
    /// The first stage that refused the call, if one did.
    refused: Option<ToolError>,
    /// In a session: the call's journal key and what the journal said of it.
    journal: Option<(CallKey, Lookup)>,
    /// A client tool's call: its answer, or `None` while the agent has given none.
    client: Option<Option<ClientReply>>,
    /// It needs an approver's decision, and has none yet.
    awaits_approval: bool,
}

/// A client tool's answer, as the call takes it.
#[derive(Debug)]
enum ClientReply {
    /// Given with the request: scanned and encoded on the way (stages 9 and 10), and the
    /// clock then.
    Given(Result<Value, ToolError>, u64),
    /// Kept by a waiting execution: scanned and encoded when it was posted.
    Kept(client::KeptAnswer),
}

/// A call after [`Admitted::answer_at_arrival`].
#[derive(Debug)]
pub enum Arrival {
    /// Refused, or replayed: its answer.
    Answered(CallAnswer),
    /// It needs its source: [`Admitted::complete`].
    ToSource(Admitted),
    /// A call that waits for someone outside the daemon, unanswered.
    Held(Held),
}

/// A call that waits.
#[derive(Debug, Clone)]
pub enum Held {
    /// For the agent's answer (a client-owned tool).
    Client(PendingCall),
    /// For an approver's decision.
    Approval { id: u32, tool: String, args: Value },
}

/// What the pipeline hands back for one call.
#[derive(Debug)]
pub struct CallAnswer {
    pub id: u32,
    /// The result as JSON text for the worker, or why the call failed.
    pub result: Result<String, ToolError>,
    /// What was redacted from the answer (and from its progress) before anyone saw it.
    pub redactions: Vec<Redaction>,
    /// Values coerced to the tool's schemas: in its arguments, and in its result.
    pub coercions: Vec<Coercion>,
    /// The time the answer was made (the program's clock moves to it when it gets it); for a
    /// replayed call, the time it was recorded at.
    pub clock_ms: u64,
    /// Answered from the session's journal.
    pub replayed: bool,
    /// A live call where the journal recorded the tool with other arguments.
    pub divergence: Option<String>,
    /// The outcome could not be recorded in the journal (the response says so).
    pub warning: Option<String>,
}

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
    /// The arguments as the trace shows them.
    pub fn args(&self) -> &Value {
        &self.args
    }

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

    /// Stages 5-10: the source, then the answer (a call that needs no source is answered as
    /// [`Admitted::answer_at_arrival`] answers it).
    pub async fn complete(self) -> CallAnswer {
        let mut this = match self.answer_at_arrival() {
            Arrival::Answered(answer) => return answer,
            Arrival::ToSource(this) => this,
            // Only the run loop holds calls; it never hands a held one here.
            Arrival::Held(Held::Client(PendingCall { id, .. }) | Held::Approval { id, .. }) => {
                return failed(id);
            }
        };
        // The source gets the arguments; the answer no longer needs them.
        let args = std::mem::take(&mut this.args);
        this.call_live(args).await
    }

    /// Stages 5-10 of a call that needs its source.
    async fn call_live(self, args: Value) -> CallAnswer {
        let ctx = self.context();
        let session = self.scope.journal.as_deref();
        // Whether the call was recorded as sent (only then is its outcome recorded).
        let sent = AtomicBool::new(false);
        let mut divergence = None;
        let (result, contract) = match (&self.journal, session) {
            (
                Some((
                    key,
                    Lookup::Live {
                        idempotency_key,
                        divergence: noted,
                        ..
                    },
                )),
                Some(run),
            ) => {
                divergence.clone_from(noted);
                let journaled = Journaled {
                    run,
                    key,
                    idempotency_key,
                    sent: &sent,
                };
                call_source(&self.scope, &self.tool, args, ctx.clone(), Some(journaled)).await
            }
            _ => call_source(&self.scope, &self.tool, args, ctx.clone(), None).await,
        };
        let sent = sent.load(Ordering::Relaxed);
        self.finish(&ctx, result, None, false, divergence, sent, contract)
    }

    /// What every call's context starts as.
    fn context(&self) -> CallContext {
        let secrets = SecretsUsed::default();
        CallContext {
            execution_id: self.scope.execution_id.clone(),
            principal: self.scope.principal.name.clone(),
            call_id: self.id,
            progress: ToolProgress::new(
                self.scope.events.clone(),
                self.id,
                self.tool.clone(),
                Some(self.scope.scanner.clone()),
                secrets.clone(),
            ),
            deadline: None,
            secrets,
            idempotency_key: None,
            catalogue: Some(self.scope.catalogue.clone()),
            coerce: airlock_policy::CoercePolicy::Safe,
            coercions: crate::tools::coercion::CoercionLog::default(),
            withheld: crate::tools::WithheldResult::default(),
        }
    }

    /// Stages 9-12: redact and scan, size, (a live call of a session that was recorded as
    /// sent) record the outcome, and (a live call: `contract` is its tool's) learn.
    /// `answered_at` is the clock of an answer made earlier (a replayed call's, a client
    /// tool's); `replayed` says it came from the journal.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        self,
        ctx: &CallContext,
        result: Result<Value, ToolError>,
        answered_at: Option<u64>,
        replayed: bool,
        divergence: Option<String>,
        sent: bool,
        contract: Option<Arc<ToolContract>>,
    ) -> CallAnswer {
        let Admitted {
            scope,
            id,
            tool,
            journal,
            ..
        } = self;
        let mut coercions = ctx.coercions.take();
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
                undo_secret_coercions(&mut value, &mut coercions, ctx, &scope.scanner);
                let found = ctx.secrets.redact_value_noting(&mut value);
                used_redactions.extend(known(RedactionPlace::Result, found));
                Ok(value)
            }
            Err(mut error) => {
                let (message, found) = ctx.secrets.redact_text_noting(error.message);
                error.message = message;
                used_redactions.extend(known(RedactionPlace::Error, found));
                if let Some(hint) = error.hint.take() {
                    let (hint, found) = ctx.secrets.redact_text_noting(hint);
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
            ctx.secrets.redact_value(&mut c.from);
            if let Some(to) = c.to.as_mut() {
                ctx.secrets.redact_value(to);
            }
        }
        let (result, mut redactions) = scan_tool_result(&scope.scanner, &tool, on_secret, result);
        if !used_redactions.is_empty() {
            warn!(
                tool,
                count = used_redactions.len(),
                "a tool's answer repeated a secret the call handed it; it was redacted before the program saw it"
            );
        }
        redactions.splice(0..0, used_redactions);
        redactions.extend(ctx.progress.take_redactions());
        // 12, first half: the shape of what the worker will get (after the scan), walked
        // without a lock.
        let (source, name) = tool.split_once('.').unwrap_or((namespace, ""));
        let learning = match (&result, &contract, scope.learning.learns(source)) {
            (Ok(value), Some(contract), Some(types)) => {
                Some((types, contract, Observation::of(value, contract), false))
            }
            // A result withheld for breaking the declared output schema is reality
            // contradicting it: counted as drift, scanned like a result first (only its shape
            // is kept, but property names are part of it).
            (Err(_), Some(contract), Some(types)) => ctx.withheld.take().map(|mut value| {
                ctx.secrets.redact_value(&mut value);
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
        let clock_ms = answered_at.unwrap_or_else(crate::execution::determinism::now_ms);
        // 11. What the worker gets is what is recorded: after the scan, never a credential.
        let warning = match (&journal, scope.journal.as_deref(), sent) {
            (Some((key, Lookup::Live { .. })), Some(run), true) => {
                run.outcome(key, result.as_ref().map(String::as_str), clock_ms)
            }
            _ => None,
        };
        CallAnswer {
            id,
            result,
            redactions,
            coercions,
            clock_ms,
            replayed,
            divergence,
            warning,
        }
    }
}

/// A result coercion whose value was a secret (a value the call used, or secret-shaped) is
/// undone before stage 9, so the secret is redacted as the string it came as: `"123456"`
/// made a number would escape redaction, which looks at strings.
fn undo_secret_coercions(
    value: &mut Value,
    coercions: &mut Vec<Coercion>,
    ctx: &CallContext,
    scanner: &SecretScanner,
) {
    let secret = |c: &Coercion| {
        let mut from = c.from.clone();
        ctx.secrets.redact_value(&mut from);
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

/// A live call of a session: recorded as sent before the source is called.
struct Journaled<'a> {
    run: &'a SessionRun,
    key: &'a CallKey,
    idempotency_key: &'a str,
    sent: &'a AtomicBool,
}

/// The answer for call `id` whose task failed (a panic in a source): an internal error the
/// program can catch.
pub fn failed(id: u32) -> CallAnswer {
    CallAnswer {
        id,
        result: Err(ToolError::new(
            ToolErrorCode::Internal,
            "the daemon failed while making this call; nothing more is known of its outcome",
        )
        .with_hint(
            "this is a daemon or tool source problem; the operator should check the airlockd log",
        )),
        redactions: Vec::new(),
        coercions: Vec::new(),
        clock_ms: crate::execution::determinism::now_ms(),
        replayed: false,
        divergence: None,
        warning: None,
    }
}

/// Stages 5-8: resolve, arguments, gate, the source; with the tool's contract once it is
/// resolved (for stage 12). A call of a session is recorded as sent once it is known to be
/// valid, before anything reaches the source.
async fn call_source(
    scope: &CallScope,
    tool: &str,
    args: Value,
    ctx: CallContext,
    journaled: Option<Journaled<'_>>,
) -> (Result<Value, ToolError>, Option<Arc<ToolContract>>) {
    let resolved = match scope.registry.resolve(tool, &scope.principal).await {
        Ok(resolved) => resolved,
        Err(e) => return (Err(e), None),
    };
    let contract = resolved.contract.clone();
    (
        call_resolved(resolved, tool, args, ctx, journaled).await,
        Some(contract),
    )
}

/// Stages 6-8 of a resolved tool.
async fn call_resolved(
    resolved: crate::tools::registry::ResolvedTool,
    tool: &str,
    args: Value,
    mut ctx: CallContext,
    journaled: Option<Journaled<'_>>,
) -> Result<Value, ToolError> {
    let source: &dyn ToolSource = resolved.source.as_ref();
    // 6. The arguments, coerced to the schema where the source's policy allows it. The
    // journal's key (and an approval's hash) was taken at arrival from the program's own
    // arguments, so a replay finds the call whatever coercion makes of it; the source gets
    // the coerced ones, and the trace shows the program's with the coercions beside them.
    ctx.coerce = source.coerce();
    let (args, coercions) = resolved.schema.check_coercing(tool, args, ctx.coerce)?;
    ctx.coercions.add(coercions);
    if let Some(j) = journaled {
        j.run.sent(j.key, resolved.read_only)?;
        j.sent.store(true, Ordering::Relaxed);
        ctx.idempotency_key = Some(j.idempotency_key.to_owned());
    }
    let Some(gate) = source.gate() else {
        return source.call(&resolved.name, args, &ctx).await;
    };
    let _permit = gate.permits.acquire().await.map_err(|_| {
        ToolError::new(
            ToolErrorCode::ServerUnavailable,
            format!("tool source `{}` is shutting down", source.namespace()),
        )
        .with_hint("the daemon is reloading or stopping; run the program again")
    })?;
    let deadline = CallDeadline {
        at: tokio::time::Instant::now() + gate.timeout,
        after: gate.timeout,
    };
    ctx.deadline = Some(deadline);
    match tokio::time::timeout_at(
        deadline.at + gate.grace,
        source.call(&resolved.name, args, &ctx),
    )
    .await
    {
        Ok(result) => result,
        Err(_) => Err(deadline.error(tool)),
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

/// JSON text from the engine that serde_json refuses although the engine wrote it correctly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonLimit {
    /// Nested deeper than serde_json's 128 levels (the limit keeps the daemon's own stack
    /// safe from a hostile worker, so it stays).
    Depth,
    /// A lone UTF-16 surrogate (`\ud800`): valid in JavaScript strings and JSON text, but it
    /// has no UTF-8 form.
    LoneSurrogate,
}

impl JsonLimit {
    /// Classifies a serde_json error message (serde_json has no public error code for these).
    pub fn of(message: &str) -> Option<JsonLimit> {
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
pub fn unreadable_json_error(what: &str, reason: &str) -> ToolError {
    match JsonLimit::of(reason) {
        Some(JsonLimit::Depth) => ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!("{what}: JSON nested more than 128 levels deep"),
        )
        .with_hint("flatten the data (an array of records instead of a chain of nested objects)"),
        Some(JsonLimit::LoneSurrogate) => ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!(
                "{what}: a string with a lone UTF-16 surrogate, which has no UTF-8 form ({reason})"
            ),
        )
        .with_hint("repair such strings with s.toWellFormed() (lone surrogates become U+FFFD)"),
        None => ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!("{what}: not valid JSON ({reason})"),
        )
        .with_hint("pass plain data: objects, arrays, strings, numbers, booleans and null"),
    }
}

#[cfg(test)]
mod tests {
    use super::{JsonLimit, Value};

    /// A result coercion whose value was a secret is undone before the redaction, so the
    /// secret is redacted as the string it came as; an argument's, and other coercions, stay.
    #[test]
    fn result_coercions_of_secret_values_are_undone_before_redaction() {
        use super::{
            CallContext, Coercion, CoercionPlace, CoercionRule, SecretScanner,
            undo_secret_coercions,
        };
        use crate::secrets::store::SecretValue;
        use serde_json::json;
        let ctx = CallContext::new("ex", "p", 1);
        ctx.secrets.add([SecretValue::new("918273645".into())]);
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
        undo_secret_coercions(&mut value, &mut coercions, &ctx, &scanner);
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
        ctx.secrets.redact_value(&mut value);
        assert_eq!(value["pin"], json!("[redacted]"));
        assert_eq!(value["tags"], json!(["[redacted]"]));
    }

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
}
