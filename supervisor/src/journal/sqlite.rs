//! The embedded journal store: `journal.sqlite` in the journal directory (created 0700,
//! refused when group or others may write it), the file 0600, WAL.
//!
//! `synchronous = NORMAL`: a committed record survives the daemon being killed (SIGKILL, OOM);
//! an OS crash or power loss may lose the last records, never corrupt the file. A call whose
//! `sent` record is lost that way is sent again with the same idempotency key, which is what
//! the key is for. (FULL would fsync every commit: milliseconds each.)
//!
//! Calls' records reach it in batches, folded from the intent log ([`super::log`]); one commit
//! per record cost 15 µs a call (figures in docs/performance.md). The file is still set up for
//! small commits:
//! - `locking_mode = EXCLUSIVE`: the daemon takes the file's write lock when it opens it and
//!   holds it until it stops. No file lock and no shared-memory index per commit, and a second
//!   daemon pointed at the same directory is refused instead of interleaving its sessions;
//!   other processes cannot read the file meanwhile (the API and `airlock session` read it
//!   through the daemon).
//! - 1 KiB pages: a commit writes the pages it changed to the write-ahead log, and a call's
//!   row is a few hundred bytes.

use super::store::{
    ApprovalRow, CallKey, CallRow, CallState, CallSummary, ExecutionRow, JournalStore, LogRecord,
    Outcome, SessionRow, StoreError, WaitingRow,
};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Name of the database file in the journal directory.
pub const FILE_NAME: &str = "journal.sqlite";

/// `PRAGMA user_version` of the schema below; a newer file is refused. Version 2 added
/// `calls.attempt` ([`UPGRADES`]).
const SCHEMA_VERSION: i64 = 2;

/// What brings a file of an older version to this one (see [`crate::state_schema::migrate`]).
const UPGRADES: &[(i64, &str)] = &[(
    1,
    "ALTER TABLE calls ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;",
)];

/// Times are milliseconds since the Unix epoch. Deleting a session deletes its calls and
/// executions (foreign keys, `ON DELETE CASCADE`). A session's size is the sum of its
/// results, computed when asked (listing, eviction), so a call writes only its own row.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    used_ms INTEGER NOT NULL,
    clock_ms INTEGER NOT NULL,
    seed BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_principal ON sessions (principal, used_ms);
CREATE TABLE IF NOT EXISTS calls (
    session TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    tool TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    occurrence INTEGER NOT NULL,
    state TEXT NOT NULL,
    result TEXT,
    clock_ms INTEGER,
    read_only INTEGER NOT NULL,
    sends INTEGER NOT NULL DEFAULT 1,
    execution TEXT NOT NULL,
    updated_ms INTEGER NOT NULL,
    -- The attempt its next send is, in its idempotency key: one more after each answer.
    attempt INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session, tool, occurrence, args_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS executions (
    id TEXT PRIMARY KEY,
    session TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    principal TEXT NOT NULL,
    status TEXT NOT NULL,
    language TEXT NOT NULL,
    code TEXT NOT NULL,
    timeout_ms INTEGER,
    replay TEXT NOT NULL,
    started_ms INTEGER NOT NULL,
    finished_ms INTEGER,
    replayed_calls INTEGER NOT NULL DEFAULT 0,
    live_calls INTEGER NOT NULL DEFAULT 0,
    resumed_by TEXT,
    -- The calls it made, one line of tool, tab, arguments hash each, in call order; kept for
    -- the session's last finished execution only.
    call_order TEXT
);
CREATE INDEX IF NOT EXISTS executions_by_principal ON executions (principal, status, started_ms);
CREATE INDEX IF NOT EXISTS executions_by_session ON executions (session);
-- What an execution that waits for its client's tools needs to go on: its tools, the answers
-- so far and the calls it waits for (JSON), its clock and seed, and when it expires.
CREATE TABLE IF NOT EXISTS waiting (
    execution TEXT PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
    principal TEXT NOT NULL,
    client_tools TEXT NOT NULL,
    answers TEXT NOT NULL,
    pending TEXT NOT NULL,
    peer TEXT NOT NULL,
    clock_ms INTEGER NOT NULL,
    seed BLOB NOT NULL,
    expires_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS waiting_by_principal ON waiting (principal);
-- Calls that wait (or waited) for an approver's decision.
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    execution TEXT NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    principal TEXT NOT NULL,
    call INTEGER NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    excerpt TEXT,
    line INTEGER,
    requested_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    decision TEXT,
    decided_by TEXT,
    reason TEXT,
    decided_ms INTEGER,
    UNIQUE (execution, call, tool, args_hash)
);
CREATE INDEX IF NOT EXISTS approvals_undecided ON approvals (decision, expires_ms);
-- The last response of an execution that waited or ran detached, and its events, for
-- GET /v1/executions/<id> until it expires.
CREATE TABLE IF NOT EXISTS responses (
    execution TEXT PRIMARY KEY REFERENCES executions (id) ON DELETE CASCADE,
    response TEXT NOT NULL,
    events TEXT NOT NULL,
    expires_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_by_expiry ON responses (expires_ms);
";

/// How long opening the file waits for another process's lock before it gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// The page size of a new file (see the module's notes).
const PAGE_SIZE: u32 = 1024;

/// The SQLite journal store. One connection behind a mutex: every statement is short.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// The database's size in bytes and the connection's `total_changes` when it was read.
    /// `GET /v1/health` and `/metrics` report the size on every request, and its two `PRAGMA`s
    /// cost a daemon that sat idle ~65 µs of a ~0.35 ms health answer; the size only moves when
    /// rows do (the daemon's one connection holds the file exclusively, and nothing here runs
    /// `VACUUM` or drops a table after the schema is made), so it is read again only then.
    size: Mutex<Option<(u64, u64)>>,
}

/// The database's size in bytes, as its page count and page size say it now.
fn size_of(c: &mut Connection) -> rusqlite::Result<u64> {
    let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(u64_of(pages.saturating_mul(size)))
}

fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl SqliteStore {
    /// Opens (creating if needed) `<directory>/journal.sqlite`.
    pub fn open(directory: &Path) -> Result<SqliteStore, StoreError> {
        crate::audit_log::database::prepare_directory(directory).map_err(|e| {
            StoreError::Directory {
                path: directory.display().to_string(),
                message: e.to_string(),
            }
        })?;
        let path = directory.join(FILE_NAME);
        let fail = |message: String| StoreError::Sqlite {
            path: path.display().to_string(),
            message,
        };
        // Created by us, 0600 from the first byte; SQLite gives -wal and -shm the same mode.
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| fail(e.to_string()))?;
        let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
        if meta.mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| fail(e.to_string()))?;
        }
        drop(file);
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| fail(e.to_string()))?;
        let prepared = (|| {
            conn.busy_timeout(BUSY_TIMEOUT)?;
            // In this order: the page size counts only before the first table is written, and
            // the locking mode must be exclusive before WAL is entered for the log's index to
            // live in memory rather than in a shared -shm file.
            conn.execute_batch(&format!(
                "PRAGMA page_size = {PAGE_SIZE}; PRAGMA locking_mode = EXCLUSIVE;"
            ))?;
            let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(rusqlite::Error::InvalidParameterName(format!(
                    "the file cannot use WAL (journal_mode is {mode})"
                )));
            }
            // Takes the write lock now, and with it the file, until the daemon stops.
            conn.execute_batch("BEGIN IMMEDIATE; COMMIT;")?;
            // No checkpoint inside a call's commit (a checkpoint syncs the file): the journal
            // checkpoints when an execution of a session ends ([`JournalStore::checkpoint`]).
            conn.execute_batch(
                "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = 0;",
            )?;
            crate::state_schema::migrate(&conn, SCHEMA, SCHEMA_VERSION, UPGRADES)
        })();
        match prepared {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                ) =>
            {
                return Err(fail(format!(
                    "another process holds it ({e}): is a second airlockd using the same [journal] directory?"
                )));
            }
            Err(e) => return Err(fail(e.to_string())),
        }
        let store = SqliteStore {
            path: path.clone(),
            conn: Mutex::new(conn),
            size: Mutex::new(None),
        };
        Ok(store)
    }

    /// Runs `f` on the connection; a poisoned lock (a panic mid-statement) is still usable,
    /// since SQLite rolled the statement back.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let mut conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut conn).map_err(|e| StoreError::Sqlite {
            path: self.path.display().to_string(),
            message: e.to_string(),
        })
    }
}

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

fn session_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    let seed: Vec<u8> = r.get(5)?;
    let mut fixed = [0u8; 32];
    if seed.len() == fixed.len() {
        fixed.copy_from_slice(&seed);
    }
    Ok(SessionRow {
        id: r.get(0)?,
        principal: r.get(1)?,
        created_ms: u64_of(r.get(2)?),
        used_ms: u64_of(r.get(3)?),
        clock_ms: u64_of(r.get(4)?),
        seed: fixed,
        bytes: u64_of(r.get(6)?),
        calls: u64_of(r.get(7)?),
    })
}

const SESSION_COLUMNS: &str = "id, principal, created_ms, used_ms, clock_ms, seed, \
     (SELECT coalesce(sum(length(result)), 0) FROM calls WHERE calls.session = sessions.id), \
     (SELECT count(*) FROM calls WHERE calls.session = sessions.id)";

/// A call's row from its first six columns: state, result, clock_ms, read_only, sends,
/// attempt.
fn call_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CallRow> {
    let state: String = r.get(0)?;
    let state = match state.as_str() {
        "ok" => CallState::Ok {
            result: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            clock_ms: u64_of(r.get::<_, Option<i64>>(2)?.unwrap_or(0)),
        },
        "sent" => CallState::Sent,
        _ => CallState::Failed,
    };
    Ok(CallRow {
        state,
        read_only: r.get(3)?,
        sends: u32::try_from(r.get::<_, i64>(4)?).unwrap_or(u32::MAX),
        attempt: u32::try_from(r.get::<_, i64>(5)?).unwrap_or(u32::MAX),
    })
}

fn execution_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ExecutionRow> {
    Ok(ExecutionRow {
        id: r.get(0)?,
        session: r.get(1)?,
        principal: r.get(2)?,
        status: r.get(3)?,
        language: r.get(4)?,
        code: r.get(5)?,
        timeout_ms: r.get::<_, Option<i64>>(6)?.map(u64_of),
        replay: r.get(7)?,
        started_ms: u64_of(r.get(8)?),
        finished_ms: r.get::<_, Option<i64>>(9)?.map(u64_of),
        replayed_calls: u32::try_from(r.get::<_, i64>(10)?).unwrap_or(0),
        live_calls: u32::try_from(r.get::<_, i64>(11)?).unwrap_or(0),
        resumed_by: r.get(12)?,
    })
}

const EXECUTION_COLUMNS: &str = "id, session, principal, status, language, code, timeout_ms, \
     replay, started_ms, finished_ms, replayed_calls, live_calls, resumed_by";

impl JournalStore for SqliteStore {
    fn create_session(&self, s: &SessionRow) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO sessions (id, principal, created_ms, used_ms, clock_ms, seed) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    s.id,
                    s.principal,
                    i64_of(s.created_ms),
                    i64_of(s.used_ms),
                    i64_of(s.clock_ms),
                    &s.seed[..]
                ],
            )
            .map(|_| ())
        })
    }

    fn session(&self, id: &str) -> Result<Option<SessionRow>, StoreError> {
        self.with(|c| {
            c.query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"),
                [id],
                session_row,
            )
            .optional()
        })
    }

    fn sessions(&self, principal: &str) -> Result<Vec<SessionRow>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE principal = ?1 ORDER BY used_ms DESC"
            ))?;
            stmt.query_map([principal], session_row)?.collect()
        })
    }

    fn touch_session(
        &self,
        id: &str,
        now_ms: u64,
        determinism: Option<(u64, [u8; 32])>,
    ) -> Result<(), StoreError> {
        self.with(|c| {
            match determinism {
                Some((clock, seed)) => c.execute(
                    "UPDATE sessions SET used_ms = ?2, clock_ms = ?3, seed = ?4 WHERE id = ?1",
                    params![id, i64_of(now_ms), i64_of(clock), &seed[..]],
                ),
                None => c.execute(
                    "UPDATE sessions SET used_ms = ?2 WHERE id = ?1",
                    params![id, i64_of(now_ms)],
                ),
            }
            .map(|_| ())
        })
    }

    fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            c.execute("DELETE FROM sessions WHERE id = ?1", [id])
                .map(|n| n > 0)
        })
    }

    fn lookup(&self, session: &str, key: &CallKey) -> Result<Option<CallRow>, StoreError> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT state, result, clock_ms, read_only, sends, attempt FROM calls \
                 WHERE session = ?1 AND tool = ?2 AND occurrence = ?3 AND args_hash = ?4",
            )?
            .query_row(
                params![session, key.tool, key.occurrence, key.args_hash],
                call_row,
            )
            .optional()
        })
    }

    fn records(&self, session: &str) -> Result<Vec<(CallKey, CallRow)>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT state, result, clock_ms, read_only, sends, attempt, tool, args_hash, \
                 occurrence FROM calls WHERE session = ?1",
            )?;
            stmt.query_map([session], |r| {
                let key = CallKey {
                    tool: r.get(6)?,
                    args_hash: r.get(7)?,
                    occurrence: r.get(8)?,
                };
                Ok((key, call_row(r)?))
            })?
            .collect()
        })
    }

    fn apply(&self, records: &[LogRecord]) -> Result<(), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            for record in records {
                match record {
                    LogRecord::Sent {
                        session,
                        key,
                        execution,
                        read_only,
                        at_ms,
                    } => {
                        // Only for a session that still exists (the WHERE also lets SQLite
                        // parse the upsert after a SELECT).
                        tx.prepare_cached(
                            "INSERT INTO calls (session, tool, args_hash, occurrence, state, \
                             result, clock_ms, read_only, sends, execution, updated_ms) \
                             SELECT ?1, ?2, ?3, ?4, 'sent', NULL, NULL, ?5, 1, ?6, ?7 \
                             WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1) \
                             ON CONFLICT (session, tool, occurrence, args_hash) DO UPDATE SET \
                             state = 'sent', result = NULL, clock_ms = NULL, read_only = ?5, \
                             sends = sends + 1, execution = ?6, updated_ms = ?7",
                        )?
                        .execute(params![
                            session,
                            key.tool,
                            key.args_hash,
                            key.occurrence,
                            read_only,
                            execution,
                            i64_of(*at_ms)
                        ])?;
                    }
                    LogRecord::Outcome {
                        session,
                        key,
                        outcome,
                        at_ms,
                    } => {
                        let (state, result, clock) = match outcome {
                            Outcome::Ok { result, clock_ms } => {
                                ("ok", Some(result.as_str()), Some(*clock_ms))
                            }
                            Outcome::Failed | Outcome::Unsettled => ("failed", None, None),
                        };
                        // An answer makes the next send a new attempt (a new key).
                        tx.prepare_cached(
                            "UPDATE calls SET state = ?5, result = ?6, clock_ms = ?7, \
                             updated_ms = ?8, attempt = attempt + ?9 WHERE session = ?1 \
                             AND tool = ?2 AND occurrence = ?3 AND args_hash = ?4",
                        )?
                        .execute(params![
                            session,
                            key.tool,
                            key.occurrence,
                            key.args_hash,
                            state,
                            result,
                            clock.map(i64_of),
                            i64_of(*at_ms),
                            i64::from(outcome.answered())
                        ])?;
                    }
                }
            }
            tx.commit()
        })
    }

    fn calls(&self, session: &str) -> Result<Vec<CallSummary>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(
                "SELECT tool, args_hash, occurrence, state, coalesce(length(result), 0), sends, \
                 execution, updated_ms FROM calls WHERE session = ?1 ORDER BY updated_ms, tool",
            )?;
            stmt.query_map([session], |r| {
                Ok(CallSummary {
                    tool: r.get(0)?,
                    args_hash: r.get(1)?,
                    occurrence: r.get(2)?,
                    state: r.get(3)?,
                    bytes: u64_of(r.get(4)?),
                    sends: r.get(5)?,
                    execution: r.get(6)?,
                    updated_ms: u64_of(r.get(7)?),
                })
            })?
            .collect()
        })
    }

    fn begin_execution(&self, e: &ExecutionRow) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                &format!(
                    "INSERT INTO executions ({EXECUTION_COLUMNS}) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                ),
                params![
                    e.id,
                    e.session,
                    e.principal,
                    e.status,
                    e.language,
                    e.code,
                    e.timeout_ms.map(i64_of),
                    e.replay,
                    i64_of(e.started_ms),
                    e.finished_ms.map(i64_of),
                    e.replayed_calls,
                    e.live_calls,
                    e.resumed_by
                ],
            )
            .map(|_| ())
        })
    }

    fn finish_execution(
        &self,
        id: &str,
        status: &str,
        finished_ms: u64,
        replayed: u32,
        live: u32,
        call_order: &[(String, String)],
    ) -> Result<(), StoreError> {
        let mut order = String::new();
        for (tool, hash) in call_order {
            // Tool names are `namespace.name` identifiers and hashes hex: no tab, no newline.
            order.push_str(tool);
            order.push('\t');
            order.push_str(hash);
            order.push('\n');
        }
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "UPDATE executions SET call_order = NULL WHERE session = \
                 (SELECT session FROM executions WHERE id = ?1) AND call_order IS NOT NULL",
                [id],
            )?;
            tx.execute(
                "UPDATE executions SET status = ?2, finished_ms = ?3, replayed_calls = ?4, \
                 live_calls = ?5, call_order = ?6 WHERE id = ?1",
                params![id, status, i64_of(finished_ms), replayed, live, order],
            )?;
            tx.commit()
        })
    }

    fn last_call_order(&self, session: &str) -> Result<Vec<(String, String)>, StoreError> {
        let order: Option<String> = self.with(|c| {
            c.query_row(
                "SELECT call_order FROM executions WHERE session = ?1 AND call_order IS NOT NULL \
                 ORDER BY finished_ms DESC LIMIT 1",
                [session],
                |r| r.get(0),
            )
            .optional()
        })?;
        Ok(order
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split_once('\t'))
            .map(|(tool, hash)| (tool.to_owned(), hash.to_owned()))
            .collect())
    }

    fn mark_resumed(&self, id: &str, by: &str) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "UPDATE executions SET status = 'resumed', resumed_by = ?2 WHERE id = ?1",
                params![id, by],
            )
            .map(|_| ())
        })
    }

    fn execution(&self, id: &str) -> Result<Option<ExecutionRow>, StoreError> {
        self.with(|c| {
            c.query_row(
                &format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE id = ?1"),
                [id],
                execution_row,
            )
            .optional()
        })
    }

    fn executions(
        &self,
        principal: &str,
        status: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ExecutionRow>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {EXECUTION_COLUMNS} FROM executions WHERE principal = ?1 \
                 AND (?2 IS NULL OR status = ?2) ORDER BY started_ms DESC, id DESC LIMIT ?3"
            ))?;
            stmt.query_map(params![principal, status, limit], execution_row)?
                .collect()
        })
    }

    fn interrupt_running(&self) -> Result<u64, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            // One that was run again with its client's answers waits again: the answers
            // are kept, and posting them again runs it.
            tx.execute(
                "UPDATE executions SET status = 'waiting' WHERE status = 'running' \
                 AND id IN (SELECT execution FROM waiting)",
                [],
            )?;
            // The calls it sent are counted from the calls it is the last sender of: its own
            // count was to be written when it ended, which it never did.
            let n = tx.execute(
                "UPDATE executions SET status = 'interrupted', live_calls = \
                 (SELECT COUNT(*) FROM calls WHERE calls.execution = executions.id) \
                 WHERE status = 'running'",
                [],
            )?;
            tx.commit()?;
            Ok(n as u64)
        })
    }

    fn save_waiting(&self, w: &WaitingRow) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT OR REPLACE INTO waiting (execution, principal, client_tools, answers, \
                 pending, peer, clock_ms, seed, expires_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
            )
            .map(drop)
        })
    }

    fn waiting(&self, id: &str) -> Result<Option<WaitingRow>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT execution, principal, client_tools, answers, pending, peer, clock_ms, \
                 seed, expires_ms FROM waiting WHERE execution = ?1",
                [id],
                |r| {
                    let seed: Vec<u8> = r.get(7)?;
                    let mut fixed = [0u8; 32];
                    if seed.len() == fixed.len() {
                        fixed.copy_from_slice(&seed);
                    }
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

    fn claim_waiting(&self, id: &str, answers: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let claimed = tx.execute(
                "UPDATE executions SET status = 'running', finished_ms = NULL \
                 WHERE id = ?1 AND status = 'waiting'",
                [id],
            )? == 1;
            if claimed {
                tx.execute(
                    "UPDATE waiting SET answers = ?2 WHERE execution = ?1",
                    params![id, answers],
                )?;
            }
            tx.commit()?;
            Ok(claimed)
        })
    }

    fn drop_waiting(&self, id: &str) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute("DELETE FROM waiting WHERE execution = ?1", [id])
                .map(drop)
        })
    }

    fn save_response(
        &self,
        id: &str,
        response: &str,
        events: &str,
        expires_ms: u64,
    ) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT OR REPLACE INTO responses (execution, response, events, expires_ms) \
                 VALUES (?1, ?2, ?3, ?4)",
                params![id, response, events, i64_of(expires_ms)],
            )
            .map(drop)
        })
    }

    fn response(&self, id: &str) -> Result<Option<(String, String)>, StoreError> {
        self.with(|c| {
            c.query_row(
                "SELECT response, events FROM responses WHERE execution = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
    }

    fn ask_approvals(&self, asked: &[ApprovalRow]) -> Result<Vec<ApprovalRow>, StoreError> {
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

    fn approval(&self, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        self.with(|c| {
            c.query_row(
                &format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = ?1"),
                [id],
                approval_row,
            )
            .optional()
        })
    }

    fn approvals_of(&self, execution: &str) -> Result<Vec<ApprovalRow>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE execution = ?1 ORDER BY call"
            ))?;
            stmt.query_map([execution], approval_row)?.collect()
        })
    }

    fn undecided_approvals(&self, principal: Option<&str>) -> Result<Vec<ApprovalRow>, StoreError> {
        self.with(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE decision IS NULL \
                 AND (?1 IS NULL OR principal = ?1) ORDER BY requested_ms, id LIMIT 1000"
            ))?;
            stmt.query_map([principal], approval_row)?.collect()
        })
    }

    fn decide_approval(
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

    fn expire_approvals(&self, now_ms: u64) -> Result<Vec<ApprovalRow>, StoreError> {
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

    fn end_waiting(&self, id: &str, status: &str, now_ms: u64) -> Result<bool, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let ended = tx.execute(
                "UPDATE executions SET status = ?2, finished_ms = ?3 \
                 WHERE id = ?1 AND status = 'waiting'",
                params![id, status, i64_of(now_ms)],
            )? == 1;
            if ended {
                tx.execute("DELETE FROM waiting WHERE execution = ?1", [id])?;
            }
            tx.commit()?;
            Ok(ended)
        })
    }

    fn count_waiting(&self, principal: &str) -> Result<u64, StoreError> {
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

    fn waiting_totals(&self) -> Result<(u64, u64), StoreError> {
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

    fn expire_waiting(&self, now_ms: u64) -> Result<Vec<String>, StoreError> {
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
                tx.execute("DELETE FROM waiting WHERE execution = ?1", [id])?;
            }
            tx.execute(
                "DELETE FROM responses WHERE expires_ms < ?1",
                [i64_of(now_ms)],
            )?;
            tx.commit()?;
            Ok(expired)
        })
    }

    fn evict(
        &self,
        unused_before_ms: u64,
        max_bytes: u64,
        busy: &[String],
    ) -> Result<Vec<String>, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let sessions: Vec<(String, u64, u64)> = {
                let mut stmt = tx.prepare(
                    "SELECT id, used_ms, (SELECT coalesce(sum(length(result)), 0) FROM calls \
                     WHERE calls.session = sessions.id) FROM sessions ORDER BY used_ms",
                )?;
                stmt.query_map([], |r| {
                    Ok((r.get(0)?, u64_of(r.get(1)?), u64_of(r.get(2)?)))
                })?
                .collect::<rusqlite::Result<_>>()?
            };
            let mut total: u64 = sessions.iter().map(|(_, _, bytes)| bytes).sum();
            let mut evicted = Vec::new();
            // A session with an execution that waits keeps what its re-run replays.
            let waiting: Vec<String> = {
                let mut stmt =
                    tx.prepare("SELECT DISTINCT session FROM executions WHERE status = 'waiting'")?;
                stmt.query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?
            };
            for (id, used, bytes) in sessions {
                if busy.contains(&id) || waiting.contains(&id) {
                    continue;
                }
                if used >= unused_before_ms && total <= max_bytes {
                    break;
                }
                tx.execute("DELETE FROM sessions WHERE id = ?1", [&id])?;
                total = total.saturating_sub(bytes);
                evicted.push(id);
            }
            tx.commit()?;
            Ok(evicted)
        })
    }

    fn checkpoint(&self) -> Result<(), StoreError> {
        self.with(|c| c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())))
    }

    fn size_bytes(&self) -> Result<u64, StoreError> {
        self.with(|c| {
            let changes = c.total_changes();
            // Locked inside the connection's lock, as every write is: the size and the count it
            // goes with are read and kept together.
            let mut kept = self
                .size
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((at, bytes)) = *kept
                && at == changes
            {
                return Ok(bytes);
            }
            let bytes = size_of(c)?;
            *kept = Some((changes, bytes));
            Ok(bytes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("j")).unwrap();
        (dir, store)
    }

    fn session(id: &str, used_ms: u64) -> SessionRow {
        SessionRow {
            id: id.into(),
            principal: "local".into(),
            created_ms: used_ms,
            used_ms,
            clock_ms: 5,
            seed: [9; 32],
            bytes: 0,
            calls: 0,
        }
    }

    fn sent(s: &SqliteStore, session: &str, key: &CallKey, execution: &str, read_only: bool) {
        s.apply(&[LogRecord::Sent {
            session: session.into(),
            key: key.clone(),
            execution: execution.into(),
            read_only,
            at_ms: 2,
        }])
        .unwrap();
    }

    fn answered(s: &SqliteStore, session: &str, key: &CallKey, result: &str, clock_ms: u64) {
        s.apply(&[LogRecord::Outcome {
            session: session.into(),
            key: key.clone(),
            outcome: Outcome::Ok {
                result: result.into(),
                clock_ms,
            },
            at_ms: 3,
        }])
        .unwrap();
    }

    /// Execution `id` of session `s1`, running.
    fn running(id: &str) -> ExecutionRow {
        ExecutionRow {
            id: id.into(),
            session: "s1".into(),
            principal: "local".into(),
            status: "running".into(),
            language: "typescript".into(),
            code: "1".into(),
            timeout_ms: None,
            replay: "all".into(),
            started_ms: 1,
            finished_ms: None,
            replayed_calls: 0,
            live_calls: 0,
            resumed_by: None,
        }
    }

    fn key(n: u32) -> CallKey {
        CallKey {
            tool: "t.x".into(),
            args_hash: "h".into(),
            occurrence: n,
        }
    }

    #[test]
    fn the_file_is_private_and_a_call_goes_from_sent_to_ok() {
        let (dir, s) = store();
        let mode = std::fs::metadata(dir.path().join("j").join(FILE_NAME))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        s.create_session(&session("s1", 1)).unwrap();
        assert_eq!(s.lookup("s1", &key(0)).unwrap(), None);
        sent(&s, "s1", &key(0), "ex1", true);
        assert_eq!(
            s.lookup("s1", &key(0)).unwrap().unwrap().state,
            CallState::Sent
        );
        answered(&s, "s1", &key(0), "{\"n\":1}", 77);
        let ok = CallState::Ok {
            result: "{\"n\":1}".into(),
            clock_ms: 77,
        };
        let row = s.lookup("s1", &key(0)).unwrap().unwrap();
        assert_eq!(row.state, ok);
        assert!(row.read_only);
        assert_eq!(row.sends, 1);
        assert_eq!(s.records("s1").unwrap(), vec![(key(0), row.clone())]);
        assert_eq!(s.session("s1").unwrap().unwrap().bytes, 7);
        // Sent again (a replay asked for fresh reads): the old result no longer counts.
        sent(&s, "s1", &key(0), "ex2", true);
        let row = s.lookup("s1", &key(0)).unwrap().unwrap();
        assert_eq!((row.state, row.sends), (CallState::Sent, 2));
        assert_eq!(s.session("s1").unwrap().unwrap().bytes, 0);
        let other = CallKey {
            args_hash: "other".into(),
            ..key(0)
        };
        assert_eq!(s.lookup("s1", &other).unwrap(), None);
    }

    /// A journal a daemon of the previous version wrote (schema version 1, no `attempt`) is
    /// brought up to date when it is opened, its records kept, each call at its first attempt.
    #[test]
    fn a_version_1_journal_is_upgraded_with_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let directory = dir.path().join("j");
        drop(SqliteStore::open(&directory).unwrap());
        {
            let c = Connection::open(directory.join(FILE_NAME)).unwrap();
            c.execute_batch(
                "PRAGMA locking_mode = NORMAL; DROP TABLE calls; CREATE TABLE calls (
                    session TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
                    tool TEXT NOT NULL, args_hash TEXT NOT NULL, occurrence INTEGER NOT NULL,
                    state TEXT NOT NULL, result TEXT, clock_ms INTEGER,
                    read_only INTEGER NOT NULL, sends INTEGER NOT NULL DEFAULT 1,
                    execution TEXT NOT NULL, updated_ms INTEGER NOT NULL,
                    PRIMARY KEY (session, tool, occurrence, args_hash)) WITHOUT ROWID;
                 INSERT INTO sessions VALUES ('s1', 'local', 1, 1, 5, x'00');
                 INSERT INTO calls VALUES ('s1', 't.x', 'h', 0, 'ok', '1', 7, 0, 1, 'ex1', 2);
                 PRAGMA user_version = 1;",
            )
            .unwrap();
        }
        let s = SqliteStore::open(&directory).unwrap();
        let row = s.lookup("s1", &key(0)).unwrap().unwrap();
        assert_eq!(
            (row.state, row.attempt),
            (
                CallState::Ok {
                    result: "1".into(),
                    clock_ms: 7
                },
                0
            )
        );
        // An answer makes the next send a new attempt; a failure without one does not.
        sent(&s, "s1", &key(0), "ex2", false);
        answered(&s, "s1", &key(0), "2", 8);
        assert_eq!(s.lookup("s1", &key(0)).unwrap().unwrap().attempt, 1);
        sent(&s, "s1", &key(0), "ex3", false);
        s.apply(&[LogRecord::Outcome {
            session: "s1".into(),
            key: key(0),
            outcome: Outcome::Unsettled,
            at_ms: 4,
        }])
        .unwrap();
        let row = s.lookup("s1", &key(0)).unwrap().unwrap();
        assert_eq!(
            (row.state, row.attempt, row.sends),
            (CallState::Failed, 1, 3)
        );
    }

    #[test]
    fn running_executions_become_interrupted_and_deleting_a_session_takes_everything() {
        let (_dir, s) = store();
        s.create_session(&session("s1", 1)).unwrap();
        s.begin_execution(&running("ex1")).unwrap();
        assert_eq!(s.interrupt_running().unwrap(), 1);
        let listed = s.executions("local", Some("interrupted"), 10).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].code, "1");
        assert!(s.executions("other", None, 10).unwrap().is_empty());
        sent(&s, "s1", &key(0), "ex1", false);
        assert!(s.delete_session("s1").unwrap());
        assert!(!s.delete_session("s1").unwrap());
        // What the intent log still held for it is dropped when folded, not an error.
        sent(&s, "s1", &key(1), "ex1", false);
        answered(&s, "s1", &key(1), "1", 0);
        assert!(s.records("s1").unwrap().is_empty());
        assert_eq!(s.execution("ex1").unwrap(), None);
        assert_eq!(s.lookup("s1", &key(0)).unwrap(), None);
    }

    #[test]
    fn only_the_last_finished_execution_keeps_its_call_order() {
        let (_dir, s) = store();
        s.create_session(&session("s1", 1)).unwrap();
        assert!(s.last_call_order("s1").unwrap().is_empty());
        let order = |n: usize| -> Vec<(String, String)> {
            (0..n).map(|i| ("t.x".into(), format!("h{i}"))).collect()
        };
        for (id, n) in [("e1", 3), ("e2", 2)] {
            s.begin_execution(&running(id)).unwrap();
            s.finish_execution(id, "ok", 10, 0, 0, &order(n)).unwrap();
            assert_eq!(s.last_call_order("s1").unwrap(), order(n));
        }
        let kept: i64 = s
            .with(|c| {
                c.query_row(
                    "SELECT count(*) FROM executions WHERE call_order IS NOT NULL",
                    [],
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert_eq!(kept, 1);
    }

    /// The size as the two `PRAGMA`s say it now, bypassing what `size_bytes` keeps.
    fn size_now(s: &SqliteStore) -> u64 {
        s.with(size_of).unwrap()
    }

    #[test]
    fn the_size_is_read_again_when_rows_change() {
        let (_dir, s) = store();
        let empty = s.size_bytes().unwrap();
        assert_eq!(empty, size_now(&s));
        s.create_session(&session("big", 1)).unwrap();
        sent(&s, "big", &key(0), "e", false);
        answered(&s, "big", &key(0), &"x".repeat(64 * 1024), 0);
        let grown = s.size_bytes().unwrap();
        assert!(grown > empty, "{grown} after 64 KiB, {empty} before");
        assert_eq!(grown, size_now(&s));
        assert_eq!(s.size_bytes().unwrap(), grown);
        // Rows deleted: the pages stay in the file (no VACUUM), and the size still agrees.
        assert!(s.delete_session("big").unwrap());
        assert_eq!(s.size_bytes().unwrap(), size_now(&s));
    }

    #[test]
    fn eviction_takes_stale_then_oldest_sessions_but_never_a_busy_one() {
        let (_dir, s) = store();
        for (id, used) in [("old", 1), ("mid", 50), ("new", 100)] {
            s.create_session(&session(id, used)).unwrap();
            sent(&s, id, &key(0), "e", false);
            answered(&s, id, &key(0), &"x".repeat(100), 0);
        }
        assert!(s.size_bytes().unwrap() > 300);
        // "old" is stale but busy: kept; "mid" goes to bring the total under 250.
        let evicted = s.evict(10, 250, &["old".to_owned()]).unwrap();
        assert_eq!(evicted, vec!["mid".to_owned()]);
        assert_eq!(s.sessions("local").unwrap().len(), 2);
        assert_eq!(s.evict(10, 1000, &[]).unwrap(), vec!["old".to_owned()]);
    }

    fn waiting(execution: &str, expires_ms: u64) -> WaitingRow {
        WaitingRow {
            execution: execution.into(),
            principal: "local".into(),
            client_tools: "[]".into(),
            answers: "{}".into(),
            pending: "[]".into(),
            peer: "{}".into(),
            clock_ms: 5,
            seed: [3; 32],
            expires_ms,
        }
    }

    /// A waiting execution is taken by one request at a time, counted per principal, kept by
    /// eviction, waits again after a restart cut off its re-run, and expires.
    #[test]
    fn waiting_executions_are_claimed_once_survive_restarts_and_expire() {
        let (_dir, s) = store();
        s.create_session(&session("s1", 1)).unwrap();
        for id in ["w1", "w2"] {
            s.begin_execution(&running(id)).unwrap();
            s.save_waiting(&waiting(id, 100)).unwrap();
            s.finish_execution(id, "waiting", 2, 0, 0, &[]).unwrap();
        }
        assert_eq!(s.count_waiting("local").unwrap(), 2);
        assert_eq!(s.waiting_totals().unwrap(), (2, 0));
        assert_eq!(s.waiting("w1").unwrap().unwrap().seed, [3; 32]);
        // Kept whatever its age: its re-run replays what the session recorded.
        assert!(s.evict(u64::MAX, 0, &[]).unwrap().is_empty());
        assert!(s.claim_waiting("w1", "{\"by_id\":{}}").unwrap());
        assert!(!s.claim_waiting("w1", "{}").unwrap(), "claimed twice");
        assert_eq!(s.count_waiting("local").unwrap(), 1);
        // The daemon died during the re-run: it waits again, its answers kept.
        assert_eq!(s.interrupt_running().unwrap(), 0);
        assert_eq!(s.execution("w1").unwrap().unwrap().status, "waiting");
        assert_eq!(s.waiting("w1").unwrap().unwrap().answers, "{\"by_id\":{}}");
        assert!(s.end_waiting("w2", "cancelled", 50).unwrap());
        assert!(!s.end_waiting("w2", "cancelled", 50).unwrap());
        assert_eq!(s.expire_waiting(99).unwrap(), Vec::<String>::new());
        assert_eq!(s.expire_waiting(101).unwrap(), vec!["w1".to_owned()]);
        assert_eq!(s.execution("w1").unwrap().unwrap().status, "expired");
        assert!(s.waiting("w1").unwrap().is_none());
    }

    /// An approval is asked for once per call, decided once, expires undecided, and its
    /// execution's kept response goes with its time.
    #[test]
    fn approvals_are_asked_once_decided_once_and_expire() {
        let (_dir, s) = store();
        s.create_session(&session("s1", 1)).unwrap();
        s.begin_execution(&running("e1")).unwrap();
        let ask = |id: &str, call: u32| ApprovalRow {
            id: id.into(),
            execution: "e1".into(),
            principal: "local".into(),
            call,
            tool: "pay.send".into(),
            args: "{}".into(),
            args_hash: "h".into(),
            excerpt: None,
            line: Some(2),
            requested_ms: 10,
            expires_ms: 20,
            decision: None,
            decided_by: None,
            reason: None,
            decided_ms: None,
        };
        let first = s.ask_approvals(&[ask("a1", 1), ask("a2", 2)]).unwrap();
        assert_eq!(
            first.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
            ["a1", "a2"]
        );
        // Asked again by a re-run: the same approval, not a new one.
        let again = s.ask_approvals(&[ask("a9", 1)]).unwrap();
        assert_eq!(again[0].id, "a1");
        assert_eq!(s.undecided_approvals(None).unwrap().len(), 2);
        assert_eq!(s.undecided_approvals(Some("other")).unwrap().len(), 0);
        assert_eq!(s.waiting_totals().unwrap().1, 2);
        assert!(
            s.decide_approval("a1", "approved", Some("alice"), None, 15)
                .unwrap()
        );
        assert!(
            !s.decide_approval("a1", "denied", Some("bob"), None, 16)
                .unwrap()
        );
        let a1 = s.approval("a1").unwrap().unwrap();
        assert_eq!(
            (a1.decision.as_deref(), a1.decided_by.as_deref()),
            (Some("approved"), Some("alice"))
        );
        let expired = s.expire_approvals(21).unwrap();
        assert_eq!(
            expired.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
            ["a2"]
        );
        assert_eq!(
            s.approval("a2").unwrap().unwrap().decision.as_deref(),
            Some("expired")
        );
        s.save_response("e1", "{}", "", 30).unwrap();
        assert!(s.response("e1").unwrap().is_some());
        s.expire_waiting(31).unwrap();
        assert!(s.response("e1").unwrap().is_none());
    }
}
