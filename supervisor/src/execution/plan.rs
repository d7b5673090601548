//! One execution's plan: everything its request asked for and admission allowed, built once
//! (by [`ExecutionService::submit`](super::ExecutionService::submit), or by `go_on` for a
//! waiting execution run again) and then owned by the execution's task, whose stages (its
//! slot, its session, its worker, its run, its response and its record) borrow it.

use super::registry::DetachedPlace;
use super::service::SubmitError;
use crate::agent_api::{ExecutionEvent, PeerInfo, ReplayMode, RequestLanguage};
use crate::generation::PolicyGeneration;
use crate::journal::store::{ExecutionRow, ExecutionState, SessionRow};
use crate::journal::{Journal, SessionRun};
use crate::rate_limiter::RateBucket;
use crate::tools::client::WaitScope;
use airlock_policy::Principal;
use airlock_proto::{Determinism, Language, Limits, StartExecution, SupervisorMessage};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// An admitted execution, as it will run.
#[derive(Debug)]
pub(super) struct Plan {
    /// A new id, or that of the waiting execution it runs again.
    pub(super) id: String,
    /// It runs a waiting execution again: its row in the journal exists.
    pub(super) continued: bool,
    pub(super) code: String,
    pub(super) language: RequestLanguage,
    /// The timeout as the request asked (kept with a session's execution); `limits` has the
    /// one it runs with.
    pub(super) timeout_ms: Option<u64>,
    pub(super) limits: Limits,
    /// The output budget it runs with (`cl100k_base` tokens): the request's or the policy's.
    pub(super) max_output_tokens: u64,
    pub(super) peer: PeerInfo,
    pub(super) principal: Arc<Principal>,
    /// The generation it was admitted under; it runs to its end under it.
    pub(super) generation: Arc<PolicyGeneration>,
    /// The program's clock at its start and its seeds: a waiting execution's own, those a
    /// stateless request sent back, its session's, or fresh ones.
    pub(super) determinism: Determinism,
    /// The session it runs in, as opened at admission.
    pub(super) session: Option<SessionPlan>,
    /// The interrupted execution it resumes.
    pub(super) resumed_from: Option<String>,
    /// The request's client-owned tools and the answers they have (also the scope of an
    /// execution whose calls may wait for an approver).
    pub(super) client: Option<Arc<WaitScope>>,
    /// Its waits are kept in the journal (stateful client tools, approvals), so that it can
    /// go on later.
    pub(super) keeps_waiting: bool,
    /// Answered at once and run without a client (`"wait": false`).
    pub(super) detached: bool,
    /// The place a detached submission took among its principal's
    /// `limits.max_waiting_executions`, held until it is in the live table.
    pub(super) place: Option<DetachedPlace>,
    /// Its session was opened only in case a call needs an approver (the request named none,
    /// and nothing else of it waits): if no call did, the session goes when it ends.
    pub(super) provisional_session: bool,
    /// The principal's `tool_calls_per_minute` bucket, shared by all its executions.
    pub(super) tool_call_rate: Option<Arc<RateBucket>>,
}

/// The session an execution runs in, as admission opened it (before the execution begins
/// in it: [`Plan::begin_session`]).
#[derive(Debug)]
pub(super) struct SessionPlan {
    pub(super) journal: Arc<Journal>,
    pub(super) row: SessionRow,
    pub(super) replay: ReplayMode,
}

/// How long a session's next execution waits for the calls an earlier one left in flight (each
/// is bounded by its own call timeout; this bounds the wait for all of them).
const SETTLE_WAIT: Duration = Duration::from_secs(120);

impl Plan {
    /// The language the worker is told.
    pub(super) fn worker_language(&self) -> Language {
        match self.language {
            RequestLanguage::Typescript => Language::TypeScript,
            RequestLanguage::Javascript => Language::JavaScript,
            RequestLanguage::Python => Language::Python,
        }
    }

    /// The message that gives the program to its worker.
    pub(super) fn start_message(&self) -> SupervisorMessage {
        SupervisorMessage::Start(StartExecution {
            execution_id: self.id.clone(),
            language: self.worker_language(),
            code: self.code.clone(),
            limits: self.limits,
            determinism: self.determinism,
            // Only an execution with calls that can wait needs to know when it is idle.
            report_idle: self.client.is_some(),
        })
    }

    /// The id of its session, if it runs in one.
    pub(super) fn session_id(&self) -> Option<String> {
        self.session.as_ref().map(|s| s.row.id.clone())
    }

    /// Begins the execution in its session, once it has its place: its row in the journal (a
    /// waiting one run again has it), the calls an earlier execution of the session left in
    /// flight settled, and the session's records read as they are then.
    pub(super) async fn begin_session(&self) -> Result<Option<Arc<SessionRun>>, SubmitError> {
        let Some(SessionPlan {
            journal,
            row,
            replay,
        }) = &self.session
        else {
            return Ok(None);
        };
        if !self.continued {
            let execution = ExecutionRow {
                id: self.id.clone(),
                session: row.id.clone(),
                principal: self.principal.name.clone(),
                status: ExecutionState::Running,
                language: self.language.as_str().into(),
                code: self.code.clone(),
                timeout_ms: self.timeout_ms,
                replay: replay.as_str().into(),
                started_ms: crate::determinism::now_ms(),
                finished_ms: None,
                replayed_calls: 0,
                live_calls: 0,
                resumed_by: None,
            };
            let busy = journal.busy_sessions();
            journal
                .noted(
                    journal
                        .store()
                        .begin_execution(&execution, journal.room(&busy)),
                )
                .map_err(|e| SubmitError::Session(e.into()))?;
        }
        // Calls an earlier execution of the session left in flight are recorded before this
        // one reads the records, or it would send them again; the session is read again after
        // them (one may have been sent after it was read).
        let reread;
        let row = if journal.is_settling(&row.id) {
            if !journal.wait_settled(&row.id, SETTLE_WAIT).await {
                tracing::warn!(session = %row.id, "calls of an earlier execution are still in flight after {SETTLE_WAIT:?}; this run sends them again, with the same idempotency keys");
            }
            reread = journal
                .session(&row.id, &self.principal.name)
                .map_err(SubmitError::Session)?;
            &reread
        } else {
            row
        };
        journal.enter(&row.id);
        Ok(Some(Arc::new(SessionRun::new(
            journal.clone(),
            row,
            self.id.clone(),
            *replay,
        ))))
    }
}

/// Where an execution's events go: a streaming client's channel, or none.
pub(super) type Events = Option<mpsc::Sender<ExecutionEvent>>;

/// The limits of `principal`'s execution of `code` with the timeout it asked for.
pub(super) fn limits(
    principal: &Principal,
    code: &str,
    timeout_ms: Option<u64>,
) -> Result<Limits, SubmitError> {
    let policy = &principal.limits;
    if code.len() as u64 > policy.max_code_bytes {
        return Err(SubmitError::ProgramTooLarge {
            size: code.len(),
            limit: policy.max_code_bytes,
        });
    }
    let timeout_ms = timeout_ms.unwrap_or(policy.timeout_ms);
    if timeout_ms == 0 || timeout_ms > policy.max_timeout_ms {
        return Err(SubmitError::InvalidTimeout {
            got: timeout_ms,
            max: policy.max_timeout_ms,
        });
    }
    Ok(Limits {
        timeout_ms,
        memory_bytes: policy.memory_bytes,
        stack_bytes: policy.stack_bytes,
        max_tool_calls: policy.max_tool_calls,
        max_output_bytes: policy.max_output_bytes,
    })
}

/// The output budget of `principal`'s execution: the one it asked for, at most the policy's.
pub(super) fn output_budget(principal: &Principal, asked: Option<u64>) -> Result<u64, SubmitError> {
    let max = principal.limits.max_output_tokens;
    match asked {
        None => Ok(max),
        Some(got) if got == 0 || got > max => Err(SubmitError::InvalidOutputBudget { got, max }),
        Some(got) => Ok(got),
    }
}
