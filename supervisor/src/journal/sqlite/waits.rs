//! The journal's waiting executions, their answers, kept responses and approvals: the part of
//! [`SqliteStore`]'s [`super::JournalStore`] methods about executions that wait.

use super::{SqliteStore, i64_of, seed_at, u64_of};
use crate::journal::store::{
    AnswerRow, ApprovalRow, ExecutionState, Full, Room, StoreError, WaitingRow,
};
use crate::journal::usage::{self, log_evicted};
use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

const APPROVAL_COLUMNS: &str = "id, execution, principal, call, tool, args, args_hash, \
    excerpt, line, requested_ms, expires_ms, decision, decided_by, reason, decided_ms";

fn approval_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRow> {
    Ok(ApprovalRow {
        id: r.get(0)?,
        execution: r.get(1)?,
        principal: r.get(2)?,
        call: r.get(3)?,
        tool: r.get(4)?,
        args: r.get(5)?,
        args_hash: r.get(6)?,
        excerpt: r.get(7)?,
        line: r.get(8)?,
        requested_ms: u64_of(r.get(9)?),
        expires_ms: u64_of(r.get(10)?),
        decision: r.get(11)?,
        decided_by: r.get(12)?,
        reason: r.get(13)?,
        decided_ms: r.get::<_, Option<i64>>(14)?.map(u64_of),
    })
}

impl SqliteStore {
    pub(super) fn save_waiting_sqlite(
        &self,
        w: &WaitingRow,
        max_waiting: u32,
        room: Room<'_>,
    ) -> Result<(), StoreError> {
        self.with_room(|c| {
            let tx = c.transaction()?;
            let held: i64 = tx.query_row(
                "SELECT count(*) FROM waiting JOIN executions ON executions.id = waiting.execution \
                 WHERE waiting.principal = ?1 AND executions.status = 'waiting' \
                 AND waiting.execution != ?2",
                params![w.principal, w.execution],
                |r| r.get(0),
            )?;
            let held = u64_of(held);
            if held >= u64::from(max_waiting) {
                return Err(Full::Waiting {
                    principal: w.principal.clone(),
                    held,
                }
                .into());
            }
            let old: i64 = tx.query_row(
                "SELECT coalesce(sum(64 + octet_length(client_tools) + octet_length(answers) \
                 + octet_length(pending) + octet_length(peer)), 0) FROM waiting \
                 WHERE execution = ?1",
                [&w.execution],
                |r| r.get(0),
            )?;
            let new = 64
                + (w.client_tools.len() + w.answers.len() + w.pending.len() + w.peer.len()) as u64;
            let session = owner_of(&tx, &w.execution)?.map(|(_, session)| session);
            let evicted = usage::make_room(
                &tx,
                &w.principal,
                session.as_deref(),
                new.saturating_sub(u64_of(old)),
                false,
                room,
            )?;
            // An upsert, not a REPLACE: a replaced row would leave the count without the
            // delete trigger.
            tx.execute(
                "INSERT INTO waiting (execution, principal, client_tools, answers, \
                 pending, peer, clock_ms, seed, expires_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
                 ON CONFLICT (execution) DO UPDATE SET principal = ?2, client_tools = ?3, \
                 answers = ?4, pending = ?5, peer = ?6, clock_ms = ?7, seed = ?8, expires_ms = ?9",
                params![
                    w.execution,
                    w.principal,
                    w.client_tools,
                    w.answers,
                    w.pending,
                    w.peer,
                    i64_of(w.clock_ms),
                    &w.seed[..],
                    i64_of(w.expires_ms)
                ],
            )?;
            tx.commit()?;
            log_evicted(&w.principal, &evicted);
            Ok(())
        })
    }

    pub(super) fn waiting_sqlite(&self, id: &str) -> Result<Option<WaitingRow>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT execution, principal, client_tools, answers, pending, peer, clock_ms, \
                 seed, expires_ms FROM waiting WHERE execution = ?1",
                [id],
                |r| {
                    let fixed = seed_at(r, 7)?;
                    Ok(WaitingRow {
                        execution: r.get(0)?,
                        principal: r.get(1)?,
                        client_tools: r.get(2)?,
                        answers: r.get(3)?,
                        pending: r.get(4)?,
                        peer: r.get(5)?,
                        clock_ms: u64_of(r.get(6)?),
                        seed: fixed,
                        expires_ms: u64_of(r.get(8)?),
                    })
                },
            )
            .optional()
        })
    }

    pub(super) fn claim_waiting_sqlite(
        &self,
        id: &str,
        answers: &[AnswerRow],
        room: Room<'_>,
    ) -> Result<bool, StoreError> {
        self.with_room(|c| {
            let tx = c.transaction()?;
            let claimed = tx.execute(
                "UPDATE executions SET status = 'running', finished_ms = NULL \
                 WHERE id = ?1 AND status = 'waiting'",
                [id],
            )? == 1;
            if !claimed {
                return Ok(false);
            }
            let Some((principal, session)) = owner_of(&tx, id)? else {
                return Ok(false);
            };
            let adding: u64 = answers.iter().map(answer_bytes).sum();
            let evicted = usage::make_room(&tx, &principal, Some(&session), adding, false, room)?;
            for a in answers {
                let (ok, result) = match &a.result {
                    Ok(text) => (true, text),
                    Err(error) => (false, error),
                };
                tx.prepare_cached(
                    "INSERT INTO answers (execution, call, tool, ok, result, redactions, clock_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (execution, call) DO UPDATE \
                     SET tool = ?3, ok = ?4, result = ?5, redactions = ?6, clock_ms = ?7",
                )?
                .execute(params![
                    id,
                    a.call,
                    a.tool,
                    ok,
                    result,
                    a.redactions,
                    i64_of(a.clock_ms)
                ])?;
            }
            tx.commit()?;
            log_evicted(&principal, &evicted);
            Ok(true)
        })
    }

    pub(super) fn answers_sqlite(&self, id: &str) -> Result<Vec<AnswerRow>, StoreError> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT call, tool, ok, result, redactions, clock_ms FROM answers \
                 WHERE execution = ?1 ORDER BY call",
            )?
            .query_map([id], |r| {
                let ok: bool = r.get(2)?;
                let result: String = r.get(3)?;
                Ok(AnswerRow {
                    call: r.get(0)?,
                    tool: r.get(1)?,
                    result: if ok { Ok(result) } else { Err(result) },
                    redactions: r.get(4)?,
                    clock_ms: u64_of(r.get(5)?),
                })
            })?
            .collect()
        })
    }

    pub(super) fn answered_sqlite(&self, id: &str) -> Result<Vec<(u32, String)>, StoreError> {
        self.with(|c| {
            c.prepare_cached("SELECT call, tool FROM answers WHERE execution = ?1 ORDER BY call")?
                .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
    }

    pub(super) fn drop_waiting_sqlite(&self, id: &str) -> Result<(), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            forget_wait(&tx, id)?;
            tx.commit()
        })
    }

    pub(super) fn save_response_sqlite(
        &self,
        id: &str,
        response: &str,
        events: &str,
        expires_ms: u64,
        room: Room<'_>,
    ) -> Result<(), StoreError> {
        self.with_room(|c| {
            let tx = c.transaction()?;
            let Some((principal, session)) = owner_of(&tx, id)? else {
                return Ok(());
            };
            let old: i64 = tx.query_row(
                "SELECT coalesce(sum(64 + octet_length(response) + octet_length(events)), 0) \
                 FROM responses WHERE execution = ?1",
                [id],
                |r| r.get(0),
            )?;
            let adding = (64 + response.len() + events.len()) as u64;
            let evicted = usage::make_room(
                &tx,
                &principal,
                Some(&session),
                adding.saturating_sub(u64_of(old)),
                false,
                room,
            )?;
            // An upsert, not a REPLACE: a replaced row would leave the count without the
            // delete trigger.
            tx.execute(
                "INSERT INTO responses (execution, response, events, expires_ms) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (execution) DO UPDATE SET \
                 response = ?2, events = ?3, expires_ms = ?4",
                params![id, response, events, i64_of(expires_ms)],
            )?;
            tx.commit()?;
            log_evicted(&principal, &evicted);
            Ok(())
        })
    }

    pub(super) fn response_sqlite(&self, id: &str) -> Result<Option<(String, String)>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT response, events FROM responses WHERE execution = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
    }

    pub(super) fn ask_approvals_sqlite(
        &self,
        asked: &[ApprovalRow],
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let mut out = Vec::with_capacity(asked.len());
            for a in asked {
                tx.execute(
                    "INSERT OR IGNORE INTO approvals (id, execution, principal, call, tool, args, \
                     args_hash, excerpt, line, requested_ms, expires_ms) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                    params![
                        a.id,
                        a.execution,
                        a.principal,
                        a.call,
                        a.tool,
                        a.args,
                        a.args_hash,
                        a.excerpt,
                        a.line,
                        i64_of(a.requested_ms),
                        i64_of(a.expires_ms)
                    ],
                )?;
                out.push(tx.query_row(
                    &format!(
                        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE execution = ?1 AND call = ?2 \
                         AND tool = ?3 AND args_hash = ?4"
                    ),
                    params![a.execution, a.call, a.tool, a.args_hash],
                    approval_row,
                )?);
            }
            tx.commit()?;
            Ok(out)
        })
    }

    pub(super) fn approval_sqlite(&self, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        self.with(|c| {
            c.query_row(
                &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"),
                [id],
                approval_row,
            )
            .optional()
        })
    }

    pub(super) fn approvals_of_sqlite(
        &self,
        execution: &str,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE execution = ?1 ORDER BY call"
            ))?;
            stmt.query_map([execution], approval_row)?.collect()
        })
    }

    pub(super) fn undecided_approvals_sqlite(
        &self,
        principal: Option<&str>,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE decision IS NULL \
                 AND (?1 IS NULL OR principal = ?1) ORDER BY requested_ms, id LIMIT 1000"
            ))?;
            stmt.query_map([principal], approval_row)?.collect()
        })
    }

    pub(super) fn decide_approval_sqlite(
        &self,
        id: &str,
        decision: &str,
        by: Option<&str>,
        reason: Option<&str>,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE approvals SET decision = ?2, decided_by = ?3, reason = ?4, decided_ms = ?5 \
                 WHERE id = ?1 AND decision IS NULL",
                params![id, decision, by, reason, i64_of(now_ms)],
            )
            .map(|n| n == 1)
        })
    }

    pub(super) fn expire_approvals_sqlite(
        &self,
        now_ms: u64,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let expired: Vec<ApprovalRow> = {
                let mut stmt = tx.prepare(&format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE decision IS NULL \
                     AND expires_ms < ?1"
                ))?;
                stmt.query_map([i64_of(now_ms)], approval_row)?
                    .collect::<rusqlite::Result<_>>()?
            };
            for a in &expired {
                tx.execute(
                    "UPDATE approvals SET decision = 'expired', decided_ms = ?2 WHERE id = ?1",
                    params![a.id, i64_of(now_ms)],
                )?;
            }
            tx.commit()?;
            Ok(expired)
        })
    }

    pub(super) fn end_waiting_sqlite(
        &self,
        id: &str,
        status: ExecutionState,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let ended = tx.execute(
                "UPDATE executions SET status = ?2, finished_ms = ?3 \
                 WHERE id = ?1 AND status = 'waiting'",
                params![id, status, i64_of(now_ms)],
            )? == 1;
            if ended {
                forget_wait(&tx, id)?;
                forget_code(&tx, id)?;
            }
            tx.commit()?;
            Ok(ended)
        })
    }

    pub(super) fn count_waiting_sqlite(&self, principal: &str) -> Result<u64, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT count(*) FROM waiting JOIN executions ON executions.id = waiting.execution \
                 WHERE waiting.principal = ?1 AND executions.status = 'waiting'",
                [principal],
                |r| r.get::<_, i64>(0),
            )
            .map(u64_of)
        })
    }

    pub(super) fn waiting_totals_sqlite(&self) -> Result<(u64, u64), StoreError> {
        self.with(|c| {
            let executions = c.query_row(
                "SELECT count(*) FROM waiting JOIN executions ON executions.id = waiting.execution \
                 WHERE executions.status = 'waiting'",
                [],
                |r| r.get::<_, i64>(0),
            )?;
            // The `approvals_undecided` index answers this.
            let approvals = c.query_row(
                "SELECT count(*) FROM approvals WHERE decision IS NULL",
                [],
                |r| r.get::<_, i64>(0),
            )?;
            Ok((u64_of(executions), u64_of(approvals)))
        })
    }

    pub(super) fn expire_waiting_sqlite(&self, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let expired: Vec<String> = {
                let mut stmt = tx.prepare(
                    "SELECT execution FROM waiting JOIN executions \
                     ON executions.id = waiting.execution \
                     WHERE executions.status = 'waiting' AND waiting.expires_ms < ?1",
                )?;
                stmt.query_map([i64_of(now_ms)], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?
            };
            for id in &expired {
                tx.execute(
                    "UPDATE executions SET status = 'expired', finished_ms = ?2 WHERE id = ?1",
                    params![id, i64_of(now_ms)],
                )?;
                forget_wait(&tx, id)?;
                forget_code(&tx, id)?;
            }
            tx.execute(
                "DELETE FROM responses WHERE expires_ms < ?1",
                [i64_of(now_ms)],
            )?;
            tx.commit()?;
            Ok(expired)
        })
    }
}

/// Forgets what waiting execution `id` kept to go on: its wait and its answers.
fn forget_wait(c: &Connection, id: &str) -> rusqlite::Result<()> {
    c.execute("DELETE FROM waiting WHERE execution = ?1", [id])?;
    c.execute("DELETE FROM answers WHERE execution = ?1", [id])?;
    Ok(())
}

/// The bytes an answer's row counts ([`usage`]).
fn answer_bytes(a: &AnswerRow) -> u64 {
    let result = match &a.result {
        Ok(text) | Err(text) => text.len(),
    };
    (64 + a.tool.len() + result + a.redactions.len()) as u64
}

/// The principal and session of execution `id`, if it exists.
pub(super) fn owner_of(c: &Connection, id: &str) -> rusqlite::Result<Option<(String, String)>> {
    c.prepare_cached("SELECT principal, session FROM executions WHERE id = ?1")?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// Replaces the code of execution `id` with its hash once nothing can run it again (it
/// ended), as the audit log keeps code: what an agent pasted into a program does not stay
/// in the journal after its execution. (Its hash still tells two runs' programs apart.)
pub(super) fn forget_code(c: &Connection, id: &str) -> rusqlite::Result<()> {
    let code: Option<String> = c
        .prepare_cached("SELECT code FROM executions WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    if let Some(code) = code
        && !code.starts_with(CODE_HASH_PREFIX)
    {
        let hash = format!(
            "{CODE_HASH_PREFIX}{}",
            crate::journal::canonical::hex(&Sha256::digest(code.as_bytes()))
        );
        c.prepare_cached("UPDATE executions SET code = ?2 WHERE id = ?1")?
            .execute(params![id, hash])?;
    }
    Ok(())
}

/// What the code of an ended execution is replaced with: this, then the SHA-256 of the code.
pub const CODE_HASH_PREFIX: &str = "sha256:";
