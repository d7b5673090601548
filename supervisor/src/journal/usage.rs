//! What the journal keeps, counted, and the room a write needs.
//!
//! Every row of every table counts against its session: `sessions.bytes` is kept by triggers
//! in the transaction that writes the row (the session row itself, each call's key and
//! result, each execution's code and call order, kept responses and their events, waits,
//! client answers and approvals, the session store's values), and a session counts against its principal. So
//! `[journal] max_session_size`, `max_principal_size` and `max_size` bound everything the
//! file holds, and `max_sessions` how many sessions a principal may hold.
//!
//! A write that would pass its principal's bound or the journal's first deletes that
//! principal's own least recently used idle sessions (none running, none waiting); if that is
//! not enough it is refused ([`Full`]). Another principal's session is never deleted to make
//! room: one principal cannot evict another.

use super::store::{Full, Room};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;

/// Bytes a session row counts for itself (its id, principal, clock, seed and times).
pub const SESSION_ROW_BYTES: u64 = 128;

/// A session's executions that must keep it: one that waits, or runs (a claimed wait, a
/// detached run), keeps what its re-run replays.
const KEPT: &str = "EXISTS (SELECT 1 FROM executions AS e WHERE e.session = sessions.id \
     AND e.status IN ('waiting', 'running'))";

/// The session of a row of a table that hangs off an execution.
const VIA_EXECUTION: &str = "(SELECT session FROM executions WHERE id = X.execution)";

/// Each table whose rows count: its name, the bytes of its row `X`, and the session of `X`.
/// A row's fixed part (keys, numbers, SQLite's own overhead) counts as a constant.
const COUNTED: [(&str, &str, &str); 7] = [
    (
        "calls",
        "64 + octet_length(X.tool) + octet_length(X.args_hash) + octet_length(X.execution) \
         + coalesce(octet_length(X.result), 0)",
        "X.session",
    ),
    (
        "executions",
        "128 + octet_length(X.id) + octet_length(X.code) + coalesce(octet_length(X.call_order), 0)",
        "X.session",
    ),
    (
        "waiting",
        "64 + octet_length(X.client_tools) + octet_length(X.answers) + octet_length(X.pending) \
         + octet_length(X.peer)",
        VIA_EXECUTION,
    ),
    (
        "responses",
        "64 + octet_length(X.response) + octet_length(X.events)",
        VIA_EXECUTION,
    ),
    (
        "approvals",
        "128 + octet_length(X.id) + octet_length(X.tool) + octet_length(X.args) \
         + coalesce(octet_length(X.excerpt), 0) + coalesce(octet_length(X.reason), 0) \
         + coalesce(octet_length(X.decided_by), 0)",
        VIA_EXECUTION,
    ),
    (
        "answers",
        "64 + octet_length(X.tool) + octet_length(X.result) + octet_length(X.redactions)",
        VIA_EXECUTION,
    ),
    (
        "store",
        "64 + octet_length(X.key) + octet_length(X.value)",
        "X.session",
    ),
];

/// The triggers that keep `sessions.bytes` (`CREATE … IF NOT EXISTS`, after the tables).
pub fn triggers() -> String {
    let mut sql = String::new();
    for (table, size, session) in COUNTED {
        let new = size.replace("X.", "NEW.");
        let old = size.replace("X.", "OLD.");
        let of_new = session.replace("X.", "NEW.");
        let of_old = session.replace("X.", "OLD.");
        sql.push_str(&format!(
            "CREATE TRIGGER IF NOT EXISTS {table}_counted_in AFTER INSERT ON {table} BEGIN \
             UPDATE sessions SET bytes = bytes + ({new}) WHERE id = {of_new}; END;\n\
             CREATE TRIGGER IF NOT EXISTS {table}_counted_up AFTER UPDATE ON {table} BEGIN \
             UPDATE sessions SET bytes = bytes + ({new}) - ({old}) WHERE id = {of_new}; END;\n\
             CREATE TRIGGER IF NOT EXISTS {table}_counted_out AFTER DELETE ON {table} BEGIN \
             UPDATE sessions SET bytes = bytes - ({old}) WHERE id = {of_old}; END;\n"
        ));
    }
    sql
}

/// Counts what a file of schema version 1 (results only) already holds, after the column
/// `sessions.bytes` was added and the tables made.
pub fn count_existing() -> String {
    let mut sql = format!("UPDATE sessions SET bytes = {SESSION_ROW_BYTES};\n");
    for (table, size, session) in COUNTED {
        sql.push_str(&format!(
            "UPDATE sessions SET bytes = bytes + coalesce((SELECT sum({size}) FROM {table} AS X \
             WHERE {session} = sessions.id), 0);\n"
        ));
    }
    sql
}

/// Why a bounded write was not made: a bound, or SQLite.
#[derive(Debug)]
pub enum Refusal {
    Full(Full),
    Sql(rusqlite::Error),
}

impl From<rusqlite::Error> for Refusal {
    fn from(e: rusqlite::Error) -> Self {
        Refusal::Sql(e)
    }
}

impl From<Full> for Refusal {
    fn from(full: Full) -> Self {
        Refusal::Full(full)
    }
}

/// Bytes kept for `principal`, and for everyone.
fn sums(c: &Connection, principal: &str) -> rusqlite::Result<(u64, u64)> {
    let of = |v: i64| u64::try_from(v).unwrap_or(0);
    let mine: i64 = c
        .prepare_cached("SELECT coalesce(sum(bytes), 0) FROM sessions WHERE principal = ?1")?
        .query_row([principal], |r| r.get(0))?;
    let all: i64 = c
        .prepare_cached("SELECT coalesce(sum(bytes), 0) FROM sessions")?
        .query_row([], |r| r.get(0))?;
    Ok((of(mine), of(all)))
}

/// How many sessions `principal` holds, and the bytes kept for it.
pub fn usage(c: &Connection, principal: &str) -> rusqlite::Result<(u64, u64)> {
    let (sessions, bytes): (i64, i64) = c
        .prepare_cached(
            "SELECT count(*), coalesce(sum(bytes), 0) FROM sessions WHERE principal = ?1",
        )?
        .query_row([principal], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok((
        u64::try_from(sessions).unwrap_or(0),
        u64::try_from(bytes).unwrap_or(0),
    ))
}

/// Deletes `principal`'s least recently used session that nothing keeps (not `except`, not
/// busy, none of its executions waiting or running); its id, or `None` if there is none.
pub fn evict_oldest_idle(
    c: &Connection,
    principal: &str,
    except: Option<&str>,
    busy: &[String],
) -> rusqlite::Result<Option<String>> {
    let candidates: Vec<String> = c
        .prepare_cached(&format!(
            "SELECT id FROM sessions WHERE principal = ?1 AND id IS NOT ?2 AND NOT {KEPT} \
             ORDER BY used_ms, id"
        ))?
        .query_map(params![principal, except], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let Some(victim) = candidates.into_iter().find(|id| !busy.contains(id)) else {
        return Ok(None);
    };
    c.execute("DELETE FROM sessions WHERE id = ?1", [&victim])?;
    Ok(Some(victim))
}

/// Makes room for `adding` more bytes of `principal` (in `session`, or in a new session when
/// `new_session`): refuses what its session cannot take, then deletes the principal's own
/// idle sessions, oldest first, until its bound and the journal's are kept. Returns the ids
/// deleted.
pub fn make_room(
    c: &Connection,
    principal: &str,
    session: Option<&str>,
    adding: u64,
    new_session: bool,
    room: Room<'_>,
) -> Result<Vec<String>, Refusal> {
    let bounds = room.bounds;
    if new_session {
        let (held, _) = usage(c, principal)?;
        if held >= bounds.principal_sessions {
            return Err(Full::Sessions {
                principal: principal.to_owned(),
                held,
            }
            .into());
        }
    }
    if let Some(session) = session {
        let bytes: Option<i64> = c
            .prepare_cached("SELECT bytes FROM sessions WHERE id = ?1")?
            .query_row([session], |r| r.get(0))
            .optional()?;
        let would = u64::try_from(bytes.unwrap_or(0))
            .unwrap_or(0)
            .saturating_add(adding);
        if would > bounds.session_bytes {
            return Err(Full::Session {
                would,
                limit: bounds.session_bytes,
            }
            .into());
        }
    }
    let mut evicted = Vec::new();
    loop {
        let (mine, all) = sums(c, principal)?;
        let (mine, all) = (mine.saturating_add(adding), all.saturating_add(adding));
        if mine <= bounds.principal_bytes && all <= bounds.total_bytes {
            return Ok(evicted);
        }
        match evict_oldest_idle(c, principal, session, room.busy)? {
            Some(id) => evicted.push(id),
            None if mine > bounds.principal_bytes => {
                return Err(Full::Principal {
                    principal: principal.to_owned(),
                    would: mine,
                    limit: bounds.principal_bytes,
                }
                .into());
            }
            None => {
                return Err(Full::Total {
                    would: all,
                    limit: bounds.total_bytes,
                }
                .into());
            }
        }
    }
}

/// The periodic sweep ([`super::store::JournalStore::evict`]): stale sessions, then each
/// principal's excess (its own oldest first), then the journal's (the principal keeping the
/// most gives first). Never a busy session, nor one whose execution waits or runs.
pub fn sweep(
    c: &Connection,
    unused_before_ms: u64,
    room: Room<'_>,
) -> rusqlite::Result<Vec<String>> {
    let mut evicted = Vec::new();
    let stale: Vec<String> = c
        .prepare(&format!(
            "SELECT id FROM sessions WHERE used_ms < ?1 AND NOT {KEPT} ORDER BY used_ms"
        ))?
        .query_map([i64::try_from(unused_before_ms).unwrap_or(i64::MAX)], |r| {
            r.get(0)
        })?
        .collect::<rusqlite::Result<_>>()?;
    for id in stale {
        if !room.busy.contains(&id) {
            c.execute("DELETE FROM sessions WHERE id = ?1", [&id])?;
            evicted.push(id);
        }
    }
    let principal_limit = room.bounds.principal_bytes.min(room.bounds.total_bytes);
    let mut by_principal = principals(c)?;
    for (principal, bytes) in &by_principal {
        let mut bytes = *bytes;
        while bytes > principal_limit {
            match evict_oldest_idle(c, principal, None, room.busy)? {
                Some(id) => evicted.push(id),
                None => break,
            }
            bytes = usage(c, principal)?.1;
        }
    }
    // Over the journal's bound with every principal within its own (a policy that lowered
    // `max_size`): the principal keeping the most gives its oldest first.
    by_principal = principals(c)?;
    let mut total: u64 = by_principal.iter().map(|(_, b)| b).sum();
    while total > room.bounds.total_bytes {
        let mut gave = false;
        for (principal, _) in &by_principal {
            if let Some(id) = evict_oldest_idle(c, principal, None, room.busy)? {
                evicted.push(id);
                gave = true;
                break;
            }
        }
        if !gave {
            break;
        }
        by_principal = principals(c)?;
        total = by_principal.iter().map(|(_, b)| b).sum();
    }
    Ok(evicted)
}

/// Every principal with the bytes kept for it, the most first.
fn principals(c: &Connection) -> rusqlite::Result<Vec<(String, u64)>> {
    c.prepare("SELECT principal, sum(bytes) AS b FROM sessions GROUP BY principal ORDER BY b DESC")?
        .query_map([], |r| {
            Ok((r.get(0)?, u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0)))
        })?
        .collect()
}

/// Says which sessions a write deleted to make room for its principal.
pub fn log_evicted(principal: &str, evicted: &[String]) {
    if !evicted.is_empty() {
        tracing::info!(
            principal,
            sessions = evicted.len(),
            "the journal deleted the principal's least recently used idle sessions to make room for a write"
        );
    }
}

/// What a fold of the intent log has counted so far: the results it may keep without asking
/// the store again ([`usage::make_room`] when one would pass a bound).
#[derive(Debug, Default)]
pub struct Tally {
    /// Each session's principal (`None`: the session is gone).
    principals: HashMap<String, Option<String>>,
    /// Bytes that may still be added without a bound being passed: per session, per
    /// principal, and in all.
    left: HashMap<String, u64>,
    left_principal: HashMap<String, u64>,
    left_total: Option<u64>,
}

impl Tally {
    /// Whether a result of `bytes` in `session` may be kept (room made if need be).
    pub fn fits(
        &mut self,
        c: &Connection,
        session: &str,
        bytes: u64,
        room: Room<'_>,
    ) -> rusqlite::Result<bool> {
        if !self.principals.contains_key(session) {
            let principal: Option<String> = c
                .prepare_cached("SELECT principal FROM sessions WHERE id = ?1")?
                .query_row([session], |r| r.get(0))
                .optional()?;
            self.principals.insert(session.to_owned(), principal);
        }
        let Some(Some(principal)) = self.principals.get(session).cloned() else {
            // Gone: the update finds nothing to change.
            return Ok(true);
        };
        let limit = room.bounds.principal_bytes.min(room.bounds.total_bytes);
        if !self.left.contains_key(session) || !self.left_principal.contains_key(&principal) {
            let (mine, all) = usage(c, &principal).map(|(_, b)| b).and_then(|mine| {
                let all: i64 =
                    c.query_row("SELECT coalesce(sum(bytes), 0) FROM sessions", [], |r| {
                        r.get(0)
                    })?;
                Ok((mine, u64_of_sql(all)))
            })?;
            let in_session: i64 = c
                .prepare_cached("SELECT bytes FROM sessions WHERE id = ?1")?
                .query_row([session], |r| r.get(0))?;
            self.left.insert(
                session.to_owned(),
                room.bounds
                    .session_bytes
                    .saturating_sub(u64_of_sql(in_session)),
            );
            self.left_principal
                .insert(principal.clone(), limit.saturating_sub(mine));
            self.left_total = Some(room.bounds.total_bytes.saturating_sub(all));
        }
        let left = self.left[session];
        let fits = bytes <= left
            && bytes <= self.left_principal[&principal]
            && bytes <= self.left_total.unwrap_or(0);
        if !fits {
            if bytes > left {
                return Ok(false);
            }
            // Its principal's own idle sessions may make room; counted afresh after.
            match make_room(c, &principal, Some(session), bytes, false, room) {
                Ok(evicted) => log_evicted(&principal, &evicted),
                Err(Refusal::Full(full)) => {
                    tracing::warn!(%full, session, "a call's result was not kept in the journal; a re-run makes the call again");
                    return Ok(false);
                }
                Err(Refusal::Sql(e)) => return Err(e),
            }
            self.left.clear();
            self.left_principal.clear();
            self.left_total = None;
            // The result is written next; what is left is read again after it.
            return Ok(true);
        }
        if let Some(l) = self.left.get_mut(session) {
            *l -= bytes;
        }
        if let Some(p) = self.left_principal.get_mut(&principal) {
            *p -= bytes;
        }
        self.left_total = self.left_total.map(|t| t - bytes);
        Ok(true)
    }
}

fn u64_of_sql(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}
