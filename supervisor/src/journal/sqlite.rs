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

use super::session_store::{self, StoreBound};
use super::store::{
    AnswerRow, ApprovalRow, CallKey, CallRow, CallState, CallSummary, ExecutionRow, ExecutionState,
    JournalStore, LogRecord, Outcome, Room, SessionRow, StoreError, WaitingRow,
};
use super::usage::{self, Refusal, Tally, log_evicted};
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Name of the database file in the journal directory.
pub(crate) const FILE_NAME: &str = "journal.sqlite";

/// How many bytes the write-ahead log may keep on disk after a checkpoint.
const WAL_KEEP_BYTES: u64 = 4 << 20;

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
        crate::state_files::prepare_directory(directory, "journal", "[journal] directory")
            .map_err(|e| StoreError::Directory(e.to_string()))?;
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
            // secure_delete: a deleted row (a session, code replaced by its hash, an answer) is
            // overwritten with zeros in the file, not left readable in a free page; the
            // checkpoint empties the write-ahead log ([`JournalStore::checkpoint`]), which
            // then keeps at most `WAL_KEEP_BYTES` on disk.
            conn.execute_batch(&format!(
                "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
                 PRAGMA wal_autocheckpoint = 0; PRAGMA secure_delete = ON; \
                 PRAGMA journal_size_limit = {WAL_KEEP_BYTES};"
            ))?;
            migrate(&conn)
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

    /// [`SqliteStore::with`] for a write held to bounds: a bound it would pass is
    /// [`StoreError::Full`].
    fn with_room<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, Refusal>,
    ) -> Result<T, StoreError> {
        let mut conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut conn).map_err(|e| match e {
            Refusal::Full(full) => StoreError::Full(full),
            Refusal::Sql(e) => StoreError::Sqlite {
                path: self.path.display().to_string(),
                message: e.to_string(),
            },
        })
    }
}

/// Column `index` of `r`, a 32-byte seed (all zeros if the file holds another length).
fn seed_at(r: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<[u8; 32]> {
    let seed: Vec<u8> = r.get(index)?;
    let mut fixed = [0u8; 32];
    if seed.len() == fixed.len() {
        fixed.copy_from_slice(&seed);
    }
    Ok(fixed)
}

fn session_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    let fixed = seed_at(r, 5)?;
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

const SESSION_COLUMNS: &str = "id, principal, created_ms, used_ms, clock_ms, seed, bytes, \
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

/// A state is kept as its word ([`ExecutionState::as_str`]), as it always was.
impl ToSql for ExecutionState {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for ExecutionState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let word = value.as_str()?;
        ExecutionState::parse(word).ok_or_else(|| {
            FromSqlError::Other(format!("`{word}` is not an execution's status").into())
        })
    }
}

const EXECUTION_COLUMNS: &str = "id, session, principal, status, language, code, timeout_ms, \
     replay, started_ms, finished_ms, replayed_calls, live_calls, resumed_by";

impl JournalStore for SqliteStore {
    fn create_session(&self, s: &SessionRow, room: Room<'_>) -> Result<(), StoreError> {
        self.with_room(|c| {
            let tx = c.transaction()?;
            let evicted = usage::make_room(
                &tx,
                &s.principal,
                None,
                usage::SESSION_ROW_BYTES,
                true,
                room,
            )?;
            tx.execute(
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
            )?;
            tx.commit()?;
            log_evicted(&s.principal, &evicted);
            Ok(())
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

    fn store_value(&self, session: &str, key: &str) -> Result<Option<String>, StoreError> {
        self.with(|c| {
            c.prepare_cached("SELECT value FROM store WHERE session = ?1 AND key = ?2")?
                .query_row(params![session, key], |r| r.get(0))
                .optional()
        })
    }

    fn set_store_value(
        &self,
        session: &str,
        key: &str,
        value: &str,
        now_ms: u64,
    ) -> Result<Result<(), StoreBound>, StoreError> {
        self.with(|c| {
            // The bounds are read and the row written in one transaction.
            let tx = c.transaction()?;
            let (keys, bytes): (i64, i64) = tx
                .prepare_cached(
                    "SELECT count(*), coalesce(sum(octet_length(key) + octet_length(value)), 0) \
                     FROM store WHERE session = ?1",
                )?
                .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let this: Option<i64> = tx
                .prepare_cached(
                    "SELECT octet_length(key) + octet_length(value) FROM store \
                     WHERE session = ?1 AND key = ?2",
                )?
                .query_row(params![session, key], |r| r.get(0))
                .optional()?;
            let of = |v: i64| u64::try_from(v).unwrap_or(0);
            if this.is_none() && of(keys) >= session_store::MAX_KEYS {
                return Ok(Err(StoreBound::TooManyKeys {
                    key: session_store::shown_key(key),
                }));
            }
            let would = of(bytes) - of(this.unwrap_or(0)) + (key.len() + value.len()) as u64;
            if would > session_store::MAX_BYTES {
                return Ok(Err(StoreBound::SessionFull {
                    key: session_store::shown_key(key),
                    would,
                }));
            }
            tx.prepare_cached(
                "INSERT INTO store (session, key, value, updated_ms) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (session, key) DO UPDATE SET value = excluded.value, \
                 updated_ms = excluded.updated_ms",
            )?
            .execute(params![
                session,
                key,
                value,
                i64::try_from(now_ms).unwrap_or(i64::MAX)
            ])?;
            tx.commit()?;
            Ok(Ok(()))
        })
    }

    fn store_values(&self, session: &str) -> Result<Vec<(String, String)>, StoreError> {
        self.with(|c| {
            let mut stmt =
                c.prepare_cached("SELECT key, value FROM store WHERE session = ?1 ORDER BY key")?;
            let rows = stmt.query_map([session], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
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

    fn apply(&self, records: &[LogRecord], room: Room<'_>) -> Result<(), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let mut tally = Tally::default();
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
                        if let Some(result) = result
                            && !tally.fits(&tx, session, result.len() as u64, room)?
                        {
                            // Not kept: the call stays `sent`, and a re-run makes it again.
                            continue;
                        }
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

    fn begin_execution(&self, e: &ExecutionRow, room: Room<'_>) -> Result<(), StoreError> {
        self.with_room(|c| {
            let tx = c.transaction()?;
            let adding = 128 + (e.id.len() + e.code.len()) as u64;
            let evicted =
                usage::make_room(&tx, &e.principal, Some(&e.session), adding, false, room)?;
            tx.execute(
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
            )?;
            tx.commit()?;
            log_evicted(&e.principal, &evicted);
            Ok(())
        })
    }

    fn finish_execution(
        &self,
        id: &str,
        status: ExecutionState,
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
            if status.has_ended() {
                forget_code(&tx, id)?;
            }
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
            let tx = c.transaction()?;
            tx.execute(
                "UPDATE executions SET status = 'resumed', resumed_by = ?2 WHERE id = ?1",
                params![id, by],
            )?;
            // The execution that resumed it has the code now.
            forget_code(&tx, id)?;
            tx.commit()
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
        status: Option<ExecutionState>,
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

    fn save_waiting(
        &self,
        w: &WaitingRow,
        max_waiting: u32,
        room: Room<'_>,
    ) -> Result<(), StoreError> {
        self.save_waiting_sqlite(w, max_waiting, room)
    }

    fn waiting(&self, id: &str) -> Result<Option<WaitingRow>, StoreError> {
        self.waiting_sqlite(id)
    }

    fn claim_waiting(
        &self,
        id: &str,
        answers: &[AnswerRow],
        room: Room<'_>,
    ) -> Result<bool, StoreError> {
        self.claim_waiting_sqlite(id, answers, room)
    }

    fn answers(&self, id: &str) -> Result<Vec<AnswerRow>, StoreError> {
        self.answers_sqlite(id)
    }

    fn answered(&self, id: &str) -> Result<Vec<(u32, String)>, StoreError> {
        self.answered_sqlite(id)
    }

    fn drop_waiting(&self, id: &str) -> Result<(), StoreError> {
        self.drop_waiting_sqlite(id)
    }

    fn save_response(
        &self,
        id: &str,
        response: &str,
        events: &str,
        expires_ms: u64,
        room: Room<'_>,
    ) -> Result<(), StoreError> {
        self.save_response_sqlite(id, response, events, expires_ms, room)
    }

    fn response(&self, id: &str) -> Result<Option<(String, String)>, StoreError> {
        self.response_sqlite(id)
    }

    fn ask_approvals(&self, asked: &[ApprovalRow]) -> Result<Vec<ApprovalRow>, StoreError> {
        self.ask_approvals_sqlite(asked)
    }

    fn approval(&self, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        self.approval_sqlite(id)
    }

    fn approvals_of(&self, execution: &str) -> Result<Vec<ApprovalRow>, StoreError> {
        self.approvals_of_sqlite(execution)
    }

    fn undecided_approvals(&self, principal: Option<&str>) -> Result<Vec<ApprovalRow>, StoreError> {
        self.undecided_approvals_sqlite(principal)
    }

    fn decide_approval(
        &self,
        id: &str,
        decision: &str,
        by: Option<&str>,
        reason: Option<&str>,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        self.decide_approval_sqlite(id, decision, by, reason, now_ms)
    }

    fn expire_approvals(&self, now_ms: u64) -> Result<Vec<ApprovalRow>, StoreError> {
        self.expire_approvals_sqlite(now_ms)
    }

    fn end_waiting(
        &self,
        id: &str,
        status: ExecutionState,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        self.end_waiting_sqlite(id, status, now_ms)
    }

    fn count_waiting(&self, principal: &str) -> Result<u64, StoreError> {
        self.count_waiting_sqlite(principal)
    }

    fn waiting_totals(&self) -> Result<(u64, u64), StoreError> {
        self.waiting_totals_sqlite()
    }

    fn expire_waiting(&self, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.expire_waiting_sqlite(now_ms)
    }

    fn evict(&self, unused_before_ms: u64, room: Room<'_>) -> Result<Vec<String>, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let evicted = usage::sweep(&tx, unused_before_ms, room)?;
            tx.commit()?;
            Ok(evicted)
        })
    }

    fn usage(&self, principal: &str) -> Result<(u64, u64), StoreError> {
        self.with(|c| usage::usage(c, principal))
    }

    fn checkpoint(&self) -> Result<(), StoreError> {
        self.with(|c| c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())))
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

mod schema;
mod waits;

use schema::migrate;

pub use waits::CODE_HASH_PREFIX;
use waits::forget_code;

#[cfg(test)]
#[path = "sqlite_tests.rs"]
mod tests;
