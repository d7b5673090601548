//! Stages 5-8, in the call's own task: resolve, arguments (coerced where the source allows
//! it), gate and deadline, the source; a call of a session is recorded as sent before it
//! reaches the source.

use super::answer::{LiveOutcome, Passed, Settled, finish};
use super::{CallAnswer, CallScope, JournalEntry, SourceCall};
use crate::journal::store::CallKey;
use crate::tools::{
    CallContext, CallDeadline, SourceAnswer, ToolError, ToolErrorCode, ToolProgress, ToolSource,
};
use serde_json::Value;

impl SourceCall {
    /// Stages 5-12: the source, then the answer.
    pub async fn complete(self) -> CallAnswer {
        let SourceCall {
            scope,
            id,
            tool,
            args,
            journal,
        } = self;
        let outcome = call_source(&scope, id, &tool, args, journal).await;
        finish(&scope, id, &tool, Settled::Live(Box::new(outcome)))
    }
}

/// What every call's context starts as: the pipeline's progress reporter for it, and the
/// caller's catalogue.
fn context(scope: &CallScope, id: u32, tool: &str) -> CallContext {
    CallContext {
        execution_id: scope.execution_id.clone(),
        principal: scope.principal.name.clone(),
        call_id: id,
        progress: ToolProgress::new(
            scope.events.clone(),
            id,
            tool.to_owned(),
            Some(scope.scanner.clone()),
        ),
        deadline: None,
        idempotency_key: None,
        catalogue: Some(scope.catalogue.clone()),
    }
}

/// Stages 5-8: resolve, arguments, gate, the source; with what the stages found on the way
/// (the tool's contract once it is resolved, for stage 12).
async fn call_source(
    scope: &CallScope,
    id: u32,
    tool: &str,
    args: Value,
    journal: Option<JournalEntry>,
) -> LiveOutcome {
    let (journal, divergence) = match journal {
        Some(JournalEntry {
            key,
            idempotency_key,
            divergence,
        }) => (Some((key, idempotency_key)), divergence),
        None => (None, None),
    };
    let mut passed = Passed::default();
    let answer = match reach_source(scope, id, tool, args, journal, &mut passed).await {
        Ok(answer) => answer,
        Err(e) => SourceAnswer::new(Err(e)),
    };
    LiveOutcome {
        answer,
        passed,
        divergence,
    }
}

/// Stages 5-8 up to the source's answer, noting in `passed` what each found; an error of a
/// stage before the source. A call of a session (`journal`: its key and idempotency key) is
/// recorded as sent once it is known to be valid, before anything reaches the source.
async fn reach_source(
    scope: &CallScope,
    id: u32,
    tool: &str,
    args: Value,
    journal: Option<(CallKey, String)>,
    passed: &mut Passed,
) -> Result<SourceAnswer, ToolError> {
    let resolved = scope.registry.resolve(tool, &scope.principal).await?;
    passed.contract = Some(resolved.contract.clone());
    let source: &dyn ToolSource = resolved.source.as_ref();
    // 6. The arguments, coerced to the schema where the source's policy allows it. The
    // journal's key (and an approval's hash) was taken at arrival from the program's own
    // arguments, so a replay finds the call whatever coercion makes of it; the source gets
    // the coerced ones, and the trace shows the program's with the coercions beside them.
    let (args, coercions) = resolved
        .schema
        .check_coercing(tool, args, source.coerce())?;
    passed.argument_coercions = coercions;
    let mut ctx = context(scope, id, tool);
    if let (Some((key, idempotency_key)), Some(run)) = (journal, scope.journal.as_deref()) {
        run.sent(&key, resolved.read_only)?;
        passed.sent = Some(key);
        ctx.idempotency_key = Some(idempotency_key);
    }
    let answer = gated(source, &resolved.name, tool, args, &mut ctx).await;
    passed.progress_redactions = ctx.progress.take_redactions();
    Ok(answer)
}

/// Stages 7 and 8 of a resolved tool (`name` in its source, `tool` as the program wrote it):
/// a permit of the source's gate, the deadline, the source's answer.
async fn gated(
    source: &dyn ToolSource,
    name: &str,
    tool: &str,
    args: Value,
    ctx: &mut CallContext,
) -> SourceAnswer {
    let Some(gate) = source.gate() else {
        return source.call(name, args, ctx).await;
    };
    let _permit = match gate.permits.acquire().await {
        Ok(permit) => permit,
        Err(_) => {
            return SourceAnswer::new(Err(ToolError::new(
                ToolErrorCode::ServerUnavailable,
                format!("tool source `{}` is shutting down", source.namespace()),
            )
            .with_hint("the daemon is reloading or stopping; run the program again")));
        }
    };
    let deadline = CallDeadline {
        at: tokio::time::Instant::now() + gate.timeout,
        after: gate.timeout,
    };
    ctx.deadline = Some(deadline);
    match tokio::time::timeout_at(deadline.at + gate.grace, source.call(name, args, ctx)).await {
        Ok(answer) => answer,
        Err(_) => SourceAnswer::new(Err(deadline.error(tool))),
    }
}
