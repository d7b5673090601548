//! The audit database files: the directory (created 0700, refused when group or others may
//! write it), the file (0600), the schema and its version, opening for the writer and for
//! readers, and the rotation of `audit.sqlite` to `audit.sqlite.1`, `.2`, ….

use super::AuditLogError;
use super::record::{ApprovalRecord, ExecutionRecord};
use super::timestamp::unix_ms;
use crate::agent_api::{ExecutionErrorKind, ToolErrorCode};
use rusqlite::{Connection, OpenFlags, params};
use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Name of the current database file in the audit directory.
pub const FILE_NAME: &str = "audit.sqlite";

/// `PRAGMA user_version` of the schema below. Readers refuse a file with a newer version.
/// Version 2 added `redactions`, version 3 `approvals`, version 4 `flows` (untrusted text
/// found in a call's arguments); an older file gets the missing tables
/// when the writer opens it (every statement of the schema is `IF NOT EXISTS`), and readers of
/// a rotated older file find none.
pub const SCHEMA_VERSION: i64 = 4;

/// The schema. Times are milliseconds since the Unix epoch, UTC. `executions.execution_id` is
/// indexed but not unique: a duplicate (a bug elsewhere) must not make a whole batch fail.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS executions (
    execution_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    peer_uid INTEGER NOT NULL,
    peer_pid INTEGER,
    code_sha256 TEXT NOT NULL,
    status TEXT NOT NULL,
    error_kind TEXT,
    queued_ms REAL NOT NULL,
    run_ms REAL NOT NULL,
    total_ms REAL NOT NULL,
    tool_calls INTEGER NOT NULL,
    redactions INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    finished_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS executions_by_time ON executions (started_at);
CREATE INDEX IF NOT EXISTS executions_by_principal ON executions (principal, started_at);
CREATE INDEX IF NOT EXISTS executions_by_id ON executions (execution_id);
CREATE TABLE IF NOT EXISTS tool_calls (
    execution_id TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    outcome TEXT NOT NULL,
    error_code TEXT,
    duration_ms REAL NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tool_calls_by_execution ON tool_calls (execution_id, call_index);
CREATE INDEX IF NOT EXISTS tool_calls_by_tool ON tool_calls (tool, at);
CREATE TABLE IF NOT EXISTS redactions (
    execution_id TEXT NOT NULL,
    call_index INTEGER,
    place TEXT NOT NULL,
    rule TEXT NOT NULL,
    pointer TEXT,
    secret TEXT
);
CREATE INDEX IF NOT EXISTS redactions_by_execution ON redactions (execution_id, call_index);
CREATE TABLE IF NOT EXISTS approvals (
    approval_id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    principal TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    decision TEXT NOT NULL,
    decided_by TEXT,
    decider_uid INTEGER,
    reason TEXT,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS approvals_by_execution ON approvals (execution_id, call_index);
CREATE INDEX IF NOT EXISTS approvals_by_time ON approvals (at);
CREATE TABLE IF NOT EXISTS flows (
    execution_id TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    argument TEXT NOT NULL,
    source_call INTEGER NOT NULL,
    source_tool TEXT NOT NULL,
    rule TEXT,
    action TEXT,
    unchecked INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS flows_by_execution ON flows (execution_id, call_index);
";

/// How long a connection waits for a lock held by another (a reader's checkpoint, the writer).
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Creates `directory` (mode 0700) if it is missing; refuses one that group or others may write,
/// where anyone in that group could replace or delete the log.
pub fn prepare_directory(directory: &Path) -> Result<(), AuditLogError> {
    Ok(crate::state_files::prepare_directory(
        directory,
        "audit log",
        "[audit] directory",
    )?)
}

/// The rotated file `n` (`audit.sqlite.n`).
pub fn rotated_path(directory: &Path, n: u32) -> PathBuf {
    directory.join(format!("{FILE_NAME}.{n}"))
}

/// Opens (creating if needed) the current database for writing: file mode 0600, WAL, the
/// schema, `user_version`.
pub fn open_for_writing(path: &Path) -> Result<Connection, AuditLogError> {
    let sql = |source| AuditLogError::Sqlite {
        path: path.to_owned(),
        source,
    };
    // Create the file ourselves so its mode is 0600 from the first byte (SQLite would use the
    // umask); SQLite gives its -wal and -shm files the same mode as the database.
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| AuditLogError::File {
            path: path.to_owned(),
            source,
        })?;
    let meta = file.metadata().map_err(|source| AuditLogError::File {
        path: path.to_owned(),
        source,
    })?;
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|source| AuditLogError::File {
                path: path.to_owned(),
                source,
            })?;
    }
    drop(file);
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(sql)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(AuditLogError::NoWal {
            path: path.to_owned(),
            mode,
        });
    }
    // NORMAL in WAL mode: a committed batch survives a daemon crash; only an OS crash or power
    // loss may lose the last batches, never corrupt the file. FULL would fsync every batch.
    // secure_delete: whatever SQLite deletes from the file (a row, a freed page) is overwritten
    // with zeros, not left readable in free pages.
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA secure_delete = ON;")
        .map_err(sql)?;
    let version = user_version(&conn).map_err(sql)?;
    if version > SCHEMA_VERSION {
        return Err(AuditLogError::NewerSchema {
            path: path.to_owned(),
            version,
        });
    }
    if version < SCHEMA_VERSION {
        conn.execute_batch(&format!(
            "BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        ))
        .map_err(sql)?;
    }
    Ok(conn)
}

/// Opens a database file for reading only; `None` when it does not exist or holds no schema yet.
pub fn open_for_reading(path: &Path) -> Result<Option<Connection>, AuditLogError> {
    if !path.exists() {
        return Ok(None);
    }
    let sql = |source| AuditLogError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
    let version = user_version(&conn).map_err(sql)?;
    if version == 0 {
        return Ok(None);
    }
    if version > SCHEMA_VERSION {
        return Err(AuditLogError::NewerSchema {
            path: path.to_owned(),
            version,
        });
    }
    Ok(Some(conn))
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |row| row.get(0))
}

/// Writes `batch` and `approvals` in one transaction: all of it or none.
pub fn insert(
    conn: &mut Connection,
    batch: &[ExecutionRecord],
    approvals: &[ApprovalRecord],
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    if !approvals.is_empty() {
        let mut approval = tx.prepare_cached(
            "INSERT INTO approvals (approval_id, execution_id, principal, call_index, tool,
                arguments, decision, decided_by, decider_uid, reason, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?;
        for a in approvals {
            approval.execute(params![
                a.approval_id,
                a.execution_id,
                a.principal,
                a.call_id,
                a.tool,
                a.arguments.text,
                a.decision.as_str(),
                a.decided_by,
                a.decider_uid,
                a.reason,
                unix_ms(a.at),
            ])?;
        }
    }
    {
        let mut execution = tx.prepare_cached(
            "INSERT INTO executions (execution_id, principal, peer_uid, peer_pid, code_sha256,
                status, error_kind, queued_ms, run_ms, total_ms, tool_calls, redactions,
                started_at, finished_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        )?;
        let mut call = tx.prepare_cached(
            "INSERT INTO tool_calls (execution_id, call_index, tool, arguments, outcome,
                error_code, duration_ms, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        let mut redaction = tx.prepare_cached(
            "INSERT INTO redactions (execution_id, call_index, place, rule, pointer, secret)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        let mut flow = tx.prepare_cached(
            "INSERT INTO flows (execution_id, call_index, argument, source_call, source_tool,
                rule, action, unchecked)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for record in batch {
            execution.execute(params![
                record.execution_id,
                record.principal,
                record.peer_uid,
                record.peer_pid,
                record.code_sha256.to_hex(),
                record.status.as_str(),
                record.error_kind.map(ExecutionErrorKind::as_str),
                record.queued_ms,
                record.run_ms,
                record.total_ms,
                i64::try_from(record.tool_calls.len()).unwrap_or(i64::MAX),
                i64::try_from(record.redactions.len()).unwrap_or(i64::MAX),
                unix_ms(record.started),
                unix_ms(record.finished),
            ])?;
            for c in &record.tool_calls {
                call.execute(params![
                    record.execution_id,
                    c.call_index,
                    c.tool,
                    c.arguments,
                    c.outcome.as_str(),
                    c.error_code.map(ToolErrorCode::as_str),
                    c.duration_ms,
                    unix_ms(c.at),
                ])?;
                for f in &c.flows {
                    flow.execute(params![
                        record.execution_id,
                        c.call_index,
                        f.argument,
                        f.source_call,
                        f.source_tool,
                        f.rule,
                        f.action.map(|a| match a {
                            crate::agent_api::FlowActionTaken::Deny => "deny",
                            crate::agent_api::FlowActionTaken::Approve => "approve",
                            crate::agent_api::FlowActionTaken::Log => "log",
                        }),
                        f.unchecked,
                    ])?;
                }
            }
            for r in &record.redactions {
                redaction.execute(params![
                    record.execution_id,
                    r.call_index,
                    r.place,
                    r.rule,
                    r.pointer,
                    r.secret,
                ])?;
            }
        }
    }
    tx.commit()
}

/// Size of the database in bytes (pages in use, WAL content included), which is what rotation
/// compares with `max_size`: the main file alone only grows at checkpoints.
pub fn size(conn: &Connection) -> rusqlite::Result<u64> {
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |row| row.get(0))?;
    let page_size: i64 = conn.query_row("PRAGMA page_size", [], |row| row.get(0))?;
    Ok(u64::try_from(pages.saturating_mul(page_size)).unwrap_or(0))
}

/// Ends WAL mode on the current file so it can be renamed safely: the WAL is checkpointed into
/// the main file and deleted. Returns `false` when a reader holds the file (WAL mode cannot be
/// left while another connection has it open); the caller tries again after its next batch.
///
/// Renaming a file in WAL mode would leave its `-wal` behind under the old name, where the
/// next `audit.sqlite` would find it and replay another database's pages into itself.
pub fn leave_wal(conn: &Connection) -> rusqlite::Result<bool> {
    match conn.query_row("PRAGMA journal_mode = DELETE", [], |row| {
        row.get::<_, String>(0)
    }) {
        Ok(mode) => Ok(mode.eq_ignore_ascii_case("delete")),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Shifts `audit.sqlite.N` to `.N+1` (dropping what passes `keep`), then `audit.sqlite` to
/// `.1`; with `keep == 0` the current file is deleted.
pub fn shift_files(directory: &Path, keep: u32) -> std::io::Result<()> {
    let current = directory.join(FILE_NAME);
    if keep == 0 {
        return remove_if_present(&current);
    }
    remove_if_present(&rotated_path(directory, keep))?;
    for n in (1..keep).rev() {
        let from = rotated_path(directory, n);
        if from.exists() {
            std::fs::rename(&from, rotated_path(directory, n + 1))?;
        }
    }
    std::fs::rename(&current, rotated_path(directory, 1))
}

fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The database files of `directory`, newest first: `audit.sqlite`, then `audit.sqlite.1`,
/// `.2`, … as far as they exist (rotated files past a lowered `keep` are read too).
pub fn files(directory: &Path) -> Result<Vec<PathBuf>, AuditLogError> {
    let entries = std::fs::read_dir(directory).map_err(|source| {
        AuditLogError::Directory(crate::state_files::DirectoryError::Io {
            what: "audit log",
            path: directory.to_owned(),
            source,
        })
    })?;
    let mut rotated: Vec<u32> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let n = name.to_str()?.strip_prefix(FILE_NAME)?.strip_prefix('.')?;
            n.parse().ok()
        })
        .collect();
    rotated.sort_unstable();
    let mut files = vec![directory.join(FILE_NAME)];
    files.extend(rotated.into_iter().map(|n| rotated_path(directory, n)));
    Ok(files)
}
