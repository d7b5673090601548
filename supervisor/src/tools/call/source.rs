//! Stages 5-8, in the call's own task: resolve, arguments (coerced where the source allows
//! it), gate and deadline, the source; a call of a session is recorded as sent before it
//! reaches the source.

use super::{Admitted, Arrival, CallAnswer, CallScope, Held, failed};
use crate::agent_api::PendingCall;
use crate::journal::store::CallKey;
use crate::journal::{Lookup, SessionRun};
use crate::learned_types::ToolContract;
use crate::tools::{
    CallContext, CallDeadline, SecretsUsed, ToolError, ToolErrorCode, ToolProgress, ToolSource,
};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

impl Admitted {
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
    pub(super) fn context(&self) -> CallContext {
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
}

/// A live call of a session: recorded as sent before the source is called.
struct Journaled<'a> {
    run: &'a SessionRun,
    key: &'a CallKey,
    idempotency_key: &'a str,
    sent: &'a AtomicBool,
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
