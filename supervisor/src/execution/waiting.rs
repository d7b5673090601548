//! Executions that wait for someone outside the daemon: the agent's client-owned tools
//! (`client_tools`, answered with `POST /v1/executions/<id>/results` or, statelessly, with
//! `client_results`) and a person's approval (`approve` in the policy, decided with
//! `POST /v1/approvals/<id>`). A waiting execution is kept in the journal and holds no
//! worker; when the answers are there it runs again from the start under the same id, every
//! earlier call answered from the record ([`ExecutionService::go_on`]).
//!
//! This is part of the execution service: it decides nothing about tools (the call pipeline
//! holds the calls, [`crate::tools::call`]) and speaks no HTTP.

use super::attached::Started;
use super::plan::{Plan, SessionPlan, limits};
use super::registry::DetachedPlace;
use super::service::{ExecutionService, KeepError, SubmitError};
use crate::agent_api::{
    ApprovalDecision, ClientResult, ExecutionError, ExecutionErrorKind, ExecutionEvent,
    ExecutionRequest, ExecutionResponse, PeerInfo, PendingApproval, PendingCall, ReplayMode,
    RequestLanguage, Status, ToolError, ToolErrorCode,
};
use crate::generation::PolicyGeneration;
use crate::journal::store::{AnswerRow, ApprovalRow, ExecutionState, WaitingRow};
use crate::journal::{SessionError, SessionRun};
use crate::tools::approval::{Decision, Decisions, Verdict, new_approval_id};
use crate::tools::client::{ClientAnswers, ClientTools, ClientToolsError, KeptAnswer, WaitScope};
use airlock_policy::Principal;
use airlock_proto::Determinism;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;

impl ExecutionService {
    /// Whether `principal` may have one more execution waiting or detached (the journal
    /// keeps the waiting ones; the live table the detached ones). A detached submission takes
    /// its place now ([`DetachedPlace`]): submissions made at once cannot all pass the count.
    pub(super) fn waiting_room(
        &self,
        principal: &Principal,
        detached: bool,
    ) -> Result<Option<DetachedPlace>, SubmitError> {
        let journal = self.journal.journal()?;
        let max = principal.limits.max_waiting_executions;
        let waiting = journal
            .store()
            .count_waiting(&principal.name)
            .map_err(|e| SessionError::Unavailable(e.to_string()))?;
        let full = || SubmitError::TooManyWaiting {
            principal: principal.name.clone(),
            max,
        };
        // Without a place of its own even a waiting one must find one free: the journal
        // counts it again when it saves the wait.
        let place = self
            .live
            .reserve_detached(&principal.name, waiting, max)
            .ok_or_else(full)?;
        Ok(detached.then_some(place))
    }

    /// After a run of an execution that keeps its waits: what it needs to go on is kept when
    /// it waits (its approvals asked for, with ids), and forgotten when it ended. A wait that
    /// cannot be kept (no room: `limits.max_waiting_executions`; the journal failed) fails the
    /// execution: nobody could answer it.
    pub(super) fn keep_or_forget_waiting(
        &self,
        run: &SessionRun,
        plan: &Plan,
        scope: &WaitScope,
        response: &mut ExecutionResponse,
    ) {
        let store = run.journal.store();
        if response.status != Status::Waiting {
            if let Err(e) = store.drop_waiting(&response.id) {
                tracing::warn!(error = %e, execution = %response.id, "could not forget a waiting execution that ended");
            }
            return;
        }
        let now = crate::determinism::now_ms();
        let busy = run.journal.busy_sessions();
        let result = (|| -> Result<(), KeepError> {
            let asked: Vec<ApprovalRow> = response
                .pending_approvals
                .iter()
                .map(|a| ApprovalRow {
                    id: new_approval_id(),
                    execution: response.id.clone(),
                    principal: response.principal.clone(),
                    call: a.call,
                    tool: a.tool.clone(),
                    args: a.args.to_string(),
                    args_hash: a.args_hash.clone(),
                    excerpt: a.excerpt.clone(),
                    line: a.line,
                    requested_ms: now,
                    expires_ms: now.saturating_add(plan.generation.policy.approvals.ttl_ms),
                    decision: None,
                    decided_by: None,
                    reason: None,
                    decided_ms: None,
                })
                .collect();
            let stored = store.ask_approvals(&asked)?;
            for (pending, row) in response.pending_approvals.iter_mut().zip(stored) {
                pending.id = row.id;
                pending.requested_ms = row.requested_ms;
                pending.expires_ms = row.expires_ms;
            }
            let row = WaitingRow {
                execution: response.id.clone(),
                principal: response.principal.clone(),
                client_tools: serde_json::to_string(&scope.tools.specs)?,
                answers: serde_json::to_string(&scope.answers)?,
                pending: serde_json::to_string(&response.pending_calls)?,
                peer: serde_json::to_string(&response.peer)?,
                clock_ms: plan.determinism.clock_ms,
                seed: plan.determinism.seed,
                expires_ms: now.saturating_add(plan.principal.limits.waiting_ttl_ms),
            };
            // Counted and bounded with the write: two runs that end at once cannot both
            // take the last place.
            store.save_waiting(
                &row,
                plan.principal.limits.max_waiting_executions,
                run.journal.room(&busy),
            )?;
            Ok(())
        })();
        if let Err(e) = result {
            tracing::warn!(error = %e, execution = %response.id, "could not keep a waiting execution");
            response.status = Status::Error;
            response.pending_calls.clear();
            response.pending_approvals.clear();
            response.determinism = None;
            let mut error = ExecutionError::new(
                ExecutionErrorKind::Internal,
                format!(
                    "the program waits for someone outside the daemon, but the daemon could not keep it to go on later: {e}"
                ),
            );
            error.hint = Some("answer or cancel the executions that wait, or send client tool results in the stateless form (client_results), which keeps nothing; the operator sees journal problems in /v1/health".into());
            response.error = Some(error);
        }
    }

    /// `POST /v1/executions/<id>/results`: the agent's answers to a waiting execution's client
    /// tool calls. The execution runs again from the start under the same id, every earlier
    /// call answered from the record (the journal for the daemon's tools, the kept answers
    /// for the client's, the decisions for approvals), and answers as a new request would:
    /// ok, error, or waiting again.
    pub async fn answer_waiting(
        self: &Arc<Self>,
        id: &str,
        results: Vec<ClientResult>,
        peer: PeerInfo,
        principal: Arc<Principal>,
        generation: Arc<PolicyGeneration>,
        events: Option<mpsc::Sender<ExecutionEvent>>,
    ) -> Result<Started, SubmitError> {
        self.go_on(
            id,
            Some(results),
            Some(peer),
            principal,
            generation,
            events,
            false,
        )
        .await
    }

    /// Runs waiting execution `id` of `principal` again with the answers it has (and
    /// `results`, the agent's new ones): for the agent that posted them (`detached` false), or
    /// by itself once its approvals are decided (`detached`, as the peer that started it).
    #[allow(clippy::too_many_arguments)]
    async fn go_on(
        self: &Arc<Self>,
        id: &str,
        results: Option<Vec<ClientResult>>,
        peer: Option<PeerInfo>,
        principal: Arc<Principal>,
        generation: Arc<PolicyGeneration>,
        events: Option<mpsc::Sender<ExecutionEvent>>,
        detached: bool,
    ) -> Result<Started, SubmitError> {
        let journal = self.journal.journal()?.clone();
        let unavailable = |e: &dyn std::fmt::Display| SessionError::Unavailable(e.to_string());
        let store = journal.store();
        let execution = match store.execution(id) {
            Ok(Some(row)) if row.principal == principal.name => row,
            Ok(_) => return Err(SubmitError::UnknownWaiting(id.to_owned())),
            Err(e) => return Err(unavailable(&e).into()),
        };
        let waiting = store.waiting(id).map_err(|e| unavailable(&e))?;
        let now = crate::determinism::now_ms();
        let waiting = match waiting {
            Some(w) if execution.status == ExecutionState::Waiting && w.expires_ms < now => {
                store.expire_waiting(now).map_err(|e| unavailable(&e))?;
                return Err(SubmitError::NotWaiting {
                    id: id.to_owned(),
                    status: ExecutionState::Expired,
                });
            }
            Some(w) if execution.status == ExecutionState::Waiting => w,
            _ => {
                return Err(SubmitError::NotWaiting {
                    id: id.to_owned(),
                    status: execution.status,
                });
            }
        };
        let specs = serde_json::from_str(&waiting.client_tools).map_err(|e| unavailable(&e))?;
        // Answers a daemon of an earlier version kept in the row; this one keeps them in rows
        // of their own, scanned ([`scanned_answers`]).
        let answers: ClientAnswers =
            serde_json::from_str(&waiting.answers).map_err(|e| unavailable(&e))?;
        let fresh = match results {
            Some(results) => {
                let pending: Vec<PendingCall> =
                    serde_json::from_str(&waiting.pending).map_err(|e| unavailable(&e))?;
                let mut fresh = ClientAnswers::default();
                fresh.add(results, &pending, now)?;
                scanned_answers(fresh, &generation)
            }
            None => Vec::new(),
        };
        let decisions = decisions(&store.approvals_of(id).map_err(|e| unavailable(&e))?);
        let tools = ClientTools::new(specs)?;
        let limits = limits(&principal, &execution.code, execution.timeout_ms)?;
        let peer = match peer {
            Some(peer) => peer,
            None => serde_json::from_str(&waiting.peer).map_err(|e| unavailable(&e))?,
        };
        // Taken by this request alone: a second one for the same id is refused. Only the new
        // answers are written (each earlier one is a row already), within the journal's
        // bounds: answers that do not fit are refused, and it waits on.
        let busy = journal.busy_sessions();
        if !store
            .claim_waiting(id, &fresh, journal.room(&busy))
            .map_err(|e| SubmitError::Session(e.into()))?
        {
            return Err(SubmitError::NotWaiting {
                id: id.to_owned(),
                status: ExecutionState::Running,
            });
        }
        let kept = match store.answers(id) {
            Ok(rows) => kept_answers(rows),
            Err(e) => {
                let _ = store.end_waiting(id, ExecutionState::Error, now);
                return Err(unavailable(&e).into());
            }
        };
        let session = journal.session(&execution.session, &principal.name)?;
        let determinism = Determinism {
            clock_ms: waiting.clock_ms,
            seed: waiting.seed,
        };
        let plan = Plan {
            id: execution.id,
            continued: true,
            code: execution.code,
            language: RequestLanguage::from_name(&execution.language),
            timeout_ms: execution.timeout_ms,
            limits,
            // The request's own budget is not kept with a waiting execution: it goes on with
            // the policy's.
            max_output_tokens: principal.limits.max_output_tokens,
            peer,
            tool_call_rate: self.tool_call_rate(&principal),
            principal,
            generation,
            // Its own clock and seed, every time it runs.
            determinism,
            // Everything the earlier runs did is answered from the record.
            session: Some(SessionPlan {
                journal,
                row: session,
                replay: ReplayMode::All,
            }),
            resumed_from: None,
            client: Some(Arc::new(WaitScope {
                tools,
                answers,
                kept,
                stateless: false,
                decisions,
            })),
            keeps_waiting: true,
            detached,
            // A waiting execution run again already has its place (its wait).
            place: None,
            provisional_session: false,
        };
        self.launch(plan, events).await
    }

    /// An approver's decision on approval `id` (`POST /v1/approvals/<id>`). The approver must
    /// be one the policy names (`[approvals] approvers`), and not decide a call of its own
    /// execution unless `[approvals] self_approve` lets it; the decision is recorded and
    /// audited, and once nothing else holds the execution it goes on by itself (detached:
    /// follow it with `GET /v1/executions/<id>`).
    pub async fn decide(
        self: &Arc<Self>,
        id: &str,
        decision: ApprovalDecision,
        reason: Option<String>,
        approver: &Approver,
        generation: Arc<PolicyGeneration>,
    ) -> Result<Decided, DecideError> {
        if !generation.policy.approvals.may_decide(
            approver.peer.uid,
            approver.peer.gid,
            &approver.groups,
        ) {
            return Err(DecideError::NotApprover(approver.name.clone()));
        }
        let journal = self.journal.journal()?.clone();
        let unavailable =
            |e: crate::journal::store::StoreError| SessionError::Unavailable(e.to_string());
        let store = journal.store();
        let Some(approval) = store.approval(id).map_err(unavailable)? else {
            return Err(DecideError::NotFound(id.to_owned()));
        };
        if !generation.policy.approvals.self_approve && approval.decision.is_none() {
            // Its own: the approver is admitted as the execution's principal, or is the peer
            // that started it (under whichever principal admitted it then).
            let admitted_as =
                generation.admit(approver.peer.uid, approver.peer.gid, &approver.groups);
            let started_it = store
                .waiting(&approval.execution)
                .map_err(unavailable)?
                .and_then(|w| serde_json::from_str::<PeerInfo>(&w.peer).ok())
                .is_some_and(|peer| peer.uid == approver.peer.uid);
            if started_it || admitted_as.is_some_and(|p| p.name == approval.principal) {
                return Err(DecideError::OwnExecution {
                    id: id.to_owned(),
                    approver: approver.name.clone(),
                    principal: approval.principal,
                });
            }
        }
        let verdict = match decision {
            ApprovalDecision::Approve => Verdict::Approved,
            ApprovalDecision::Deny => Verdict::Denied,
        };
        // Bounded like everything agent-visible: it reaches the program in a denial.
        let reason = reason.map(|r| r.chars().take(1000).collect::<String>());
        if !store
            .decide_approval(
                id,
                verdict.as_str(),
                Some(&approver.name),
                reason.as_deref(),
                crate::determinism::now_ms(),
            )
            .map_err(unavailable)?
        {
            let now = store.approval(id).map_err(unavailable)?;
            return Err(DecideError::AlreadyDecided {
                id: id.to_owned(),
                decision: now.and_then(|a| a.decision).unwrap_or_default(),
            });
        }
        self.audit_decision(
            &approval,
            verdict,
            Some(approver),
            reason.as_deref(),
            &generation,
        );
        let status = self.go_on_if_decided(&approval.execution, generation).await;
        Ok(Decided {
            id: id.to_owned(),
            decision: verdict.as_str(),
            execution: approval.execution,
            status,
        })
    }

    /// Goes on with waiting execution `execution` if nothing holds it any more (every approval
    /// decided, every client call answered): detached, as the peer that started it. Returns
    /// its status after that.
    async fn go_on_if_decided(
        self: &Arc<Self>,
        execution: &str,
        generation: Arc<PolicyGeneration>,
    ) -> ExecutionState {
        let Ok(journal) = self.journal.journal() else {
            return ExecutionState::Waiting;
        };
        let store = journal.store();
        let (Ok(Some(row)), Ok(Some(waiting)), Ok(approvals)) = (
            store.execution(execution),
            store.waiting(execution),
            store.approvals_of(execution),
        ) else {
            return ExecutionState::Waiting;
        };
        if row.status != ExecutionState::Waiting || approvals.iter().any(|a| a.decision.is_none()) {
            return ExecutionState::Waiting;
        }
        let pending: Vec<PendingCall> = serde_json::from_str(&waiting.pending).unwrap_or_default();
        let answers: ClientAnswers = serde_json::from_str(&waiting.answers).unwrap_or_default();
        let kept = store.answered(execution).unwrap_or_default();
        let answered = |p: &PendingCall| {
            answers.get(p.id, &p.tool).is_some()
                || kept.iter().any(|(id, tool)| *id == p.id && *tool == p.tool)
        };
        if !pending.iter().all(answered) {
            // The agent's answers are still to come: they run it.
            return ExecutionState::Waiting;
        }
        let Some(principal) = generation.principal(&row.principal) else {
            tracing::warn!(execution, principal = %row.principal, "a decided execution's principal is no longer in the policy; it is cancelled");
            let _ = store.end_waiting(
                execution,
                ExecutionState::Cancelled,
                crate::determinism::now_ms(),
            );
            return ExecutionState::Cancelled;
        };
        match self
            .go_on(execution, None, None, principal, generation, None, true)
            .await
        {
            Ok(started) => {
                drop(started);
                ExecutionState::Running
            }
            Err(e) => {
                tracing::warn!(execution, error = %e, "a decided execution could not go on");
                ExecutionState::Waiting
            }
        }
    }

    /// Every second or so: approvals nobody decided in time are denied (audited; their
    /// executions go on), and executions that waited past `limits.waiting_ttl` expire.
    pub async fn sweep(self: &Arc<Self>, generation: Arc<PolicyGeneration>) {
        let Ok(journal) = self.journal.journal() else {
            return;
        };
        let now = crate::determinism::now_ms();
        let expired = match journal.store().expire_approvals(now) {
            Ok(expired) => expired,
            Err(e) => {
                tracing::warn!(error = %e, "could not expire approvals");
                return;
            }
        };
        let mut executions: Vec<String> = Vec::new();
        for approval in &expired {
            self.audit_decision(approval, Verdict::Expired, None, None, &generation);
            if !executions.contains(&approval.execution) {
                executions.push(approval.execution.clone());
            }
        }
        for execution in executions {
            self.go_on_if_decided(&execution, generation.clone()).await;
        }
        if let Err(e) = journal.store().expire_waiting(now) {
            tracing::warn!(error = %e, "could not expire waiting executions");
        }
    }

    /// The approvals that wait, as `viewer` may see them: all of them for an approver, its own
    /// executions' otherwise.
    pub fn approvals(
        &self,
        viewer: &Approver,
        principal: &Principal,
        generation: &PolicyGeneration,
    ) -> Result<Vec<PendingApproval>, SessionError> {
        let journal = self.journal.journal()?;
        let approver = generation.policy.approvals.may_decide(
            viewer.peer.uid,
            viewer.peer.gid,
            &viewer.groups,
        );
        let rows = journal
            .store()
            .undecided_approvals((!approver).then_some(principal.name.as_str()))
            .map_err(|e| SessionError::Unavailable(e.to_string()))?;
        Ok(rows.into_iter().map(pending_approval).collect())
    }

    /// Writes an approval's decision to the audit log.
    fn audit_decision(
        &self,
        approval: &ApprovalRow,
        verdict: Verdict,
        approver: Option<&Approver>,
        reason: Option<&str>,
        generation: &PolicyGeneration,
    ) {
        tracing::info!(
            approval = %approval.id,
            execution = %approval.execution,
            tool = %approval.tool,
            decision = verdict.as_str(),
            by = approver.map_or("nobody (expired)", |a| a.name.as_str()),
            "approval decided"
        );
        let scanner = &generation.scanner;
        let redact: &dyn Fn(&str) -> std::borrow::Cow<'_, str> = &|text| scanner.scan_text(text).0;
        let args = serde_json::from_str(&approval.args).unwrap_or(serde_json::Value::Null);
        let record = crate::audit_log::ApprovalRecord::new(
            &approval.id,
            &approval.execution,
            &approval.principal,
            approval.call,
            &approval.tool,
            &args,
            verdict,
            approver.map(|a| a.name.as_str()),
            approver.map(|a| a.peer.uid),
            reason,
            redact,
        );
        if let Err(warning) = self.audit.record_approval(record) {
            tracing::warn!(approval = %approval.id, %warning, "an approval decision may be missing from the audit log");
        }
    }
}

/// Who decides on an approval: the peer, its groups and its user name.
#[derive(Debug, Clone)]
pub struct Approver {
    pub peer: PeerInfo,
    pub groups: Vec<u32>,
    /// The user name (or `uid N`), as the audit log and a denial name it.
    pub name: String,
}

/// What [`ExecutionService::decide`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Decided {
    pub id: String,
    pub decision: &'static str,
    pub execution: String,
    /// The execution's status now: `running` (it goes on), `waiting` (something else still
    /// holds it), `cancelled`.
    pub status: ExecutionState,
}

/// Why a decision was not taken. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("{0} is not an approver ([approvals] approvers in the policy)")]
    NotApprover(String),
    #[error("there is no approval `{0}`")]
    NotFound(String),
    #[error("approval `{id}` is already {decision}")]
    AlreadyDecided { id: String, decision: String },
    #[error(
        "approval `{id}` is a call of {approver}'s own execution (principal `{principal}`), and approvers may not decide their own executions' calls ([approvals] self_approve is off)"
    )]
    OwnExecution {
        id: String,
        approver: String,
        principal: String,
    },
    #[error("{0}")]
    Journal(#[from] SessionError),
}

impl DecideError {
    pub fn hint(&self) -> String {
        match self {
            DecideError::NotApprover(_) => {
                "the operator names approvers (users and @groups) in [approvals] approvers".into()
            }
            DecideError::NotFound(_) => {
                "GET /v1/approvals (airlock approvals) lists the approvals that wait".into()
            }
            DecideError::AlreadyDecided { .. } => {
                "nothing to do: a decision stands once taken".into()
            }
            DecideError::OwnExecution { id, .. } => format!(
                "another approver must decide it (`airlock approve {id}` or `airlock deny {id}` as them); or the operator sets `[approvals] self_approve = true` in the policy to let approvers decide their own executions' calls"
            ),
            DecideError::Journal(e) => e.hint().into(),
        }
    }
}

/// An approval as the API shows it.
fn pending_approval(row: ApprovalRow) -> PendingApproval {
    PendingApproval {
        args: serde_json::from_str(&row.args).unwrap_or(serde_json::Value::Null),
        id: row.id,
        execution: row.execution,
        principal: row.principal,
        call: row.call,
        tool: row.tool,
        excerpt: row.excerpt,
        line: row.line,
        requested_ms: row.requested_ms,
        expires_ms: row.expires_ms,
        args_hash: row.args_hash,
    }
}

/// The decisions taken on an execution's approvals.
fn decisions(rows: &[ApprovalRow]) -> Decisions {
    let mut decisions = Decisions::default();
    for row in rows {
        if let Some(verdict) = row.decision.as_deref().and_then(Verdict::parse) {
            decisions.by_call.insert(
                row.call,
                Decision {
                    tool: row.tool.clone(),
                    args_hash: row.args_hash.clone(),
                    verdict,
                    by: row.decided_by.clone(),
                    reason: row.reason.clone(),
                },
            );
        }
    }
    decisions
}

/// The agent's new answers as the journal keeps them: scanned under the policy in force, and
/// encoded, once ([`crate::tools::call::scan_client_answer`]).
fn scanned_answers(fresh: ClientAnswers, generation: &PolicyGeneration) -> Vec<AnswerRow> {
    let mut rows: Vec<AnswerRow> = fresh
        .by_id
        .into_iter()
        .map(|(call, answer)| {
            let (result, redactions) = crate::tools::call::scan_client_answer(
                &generation.scanner,
                &generation.policy.secret_scanning,
                &answer.tool,
                answer.result,
            );
            AnswerRow {
                call,
                tool: answer.tool,
                // A `ToolError` always serialises.
                result: result.map_err(|e| serde_json::to_string(&e).unwrap_or_default()),
                redactions: serde_json::to_string(&redactions).unwrap_or_else(|_| "[]".into()),
                clock_ms: answer.clock_ms,
            }
        })
        .collect();
    rows.sort_by_key(|r| r.call);
    rows
}

/// The kept answers, as the calls take them.
fn kept_answers(rows: Vec<AnswerRow>) -> HashMap<u32, KeptAnswer> {
    rows.into_iter()
        .map(|row| {
            let result = row.result.map_err(|json| {
                serde_json::from_str::<ToolError>(&json).unwrap_or_else(|e| {
                    ToolError::new(
                        ToolErrorCode::Internal,
                        format!("the kept answer to this call cannot be read: {e}"),
                    )
                })
            });
            let answer = KeptAnswer {
                tool: row.tool,
                result,
                redactions: serde_json::from_str(&row.redactions).unwrap_or_default(),
                clock_ms: row.clock_ms,
            };
            (row.call, answer)
        })
        .collect()
}

/// The request's client-owned tools and the answers it carries (the stateless form), checked.
pub(super) fn client_request(
    request: &mut ExecutionRequest,
) -> Result<Option<WaitScope>, SubmitError> {
    let tools = std::mem::take(&mut request.client_tools);
    let results = request.client_results.take();
    if tools.is_empty() {
        return match results {
            Some(_) => Err(ClientToolsError::ResultsWithoutTools.into()),
            None => Ok(None),
        };
    }
    let tools = ClientTools::new(tools)?;
    let stateless = results.is_some();
    // The agent's answers carry no time: they leave the program's clock where it was.
    let answers = match results {
        Some(results) => ClientAnswers::from_request(results, 0)?,
        None => ClientAnswers::default(),
    };
    Ok(Some(WaitScope {
        tools,
        answers,
        kept: Default::default(),
        stateless,
        decisions: Decisions::default(),
    }))
}
