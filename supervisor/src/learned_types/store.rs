//! The learned types' SQLite file: `learned.sqlite` in the daemon's state directory (created
//! 0700, refused when group or others may write it), the file 0600, WAL, `synchronous =
//! NORMAL` (a committed row survives the daemon being killed). One row per principal and tool:
//! the principal whose calls taught it, the tool's source, name, schema version and shape
//! (JSON), counts and drift; never a value. Other processes
//! may read it while the daemon runs (the tests do); only the daemon writes.

use super::{Entry, Key, LearnedError};
use rusqlite::{Connection, OpenFlags, params};
use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Name of the file in the state directory.
pub const FILE_NAME: &str = "learned.sqlite";

/// `PRAGMA user_version` of the schema below; a newer file is refused.
const SCHEMA_VERSION: i64 = 2;

/// Version 1 kept one type per tool, learned from every principal's calls: who taught what is
/// not known, so those rows are dropped and each principal's types learned afresh.
const UPGRADES: &[(i64, &str)] = &[(1, "DROP TABLE IF EXISTS learned;")];

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS learned (
    -- The principal whose calls' results it was learned from, and whose SDK alone shows it.
    principal TEXT NOT NULL,
    source TEXT NOT NULL,
    tool TEXT NOT NULL,
    -- The tool's schema version (a hash of its input and output schemas): a changed tool
    -- starts afresh.
    version TEXT NOT NULL,
    -- The shape (JSON, see shape.rs): kinds, property names, formats; never a value.
    shape TEXT NOT NULL,
    results INTEGER NOT NULL,
    since_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    -- Results compared with the declared output schema, and the contradictions (JSON object:
    -- description → results).
    checked INTEGER NOT NULL,
    drift TEXT NOT NULL,
    PRIMARY KEY (principal, source, tool)
) WITHOUT ROWID;
";

/// A row larger than this is not written (the shape bounds keep rows far smaller).
pub const MAX_ROW_BYTES: usize = 1 << 20;

/// One row: whose type of which tool, and what is learned of it.
pub type Row = (Key, Entry);

#[derive(Debug)]
pub struct LearnedStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl LearnedStore {
    /// Opens (creating if needed) `<directory>/learned.sqlite`.
    pub fn open(directory: &Path) -> Result<LearnedStore, LearnedError> {
        crate::state_files::prepare_directory(
            directory,
            "learned types",
            "[daemon] state_directory",
        )
        .map_err(|e| LearnedError::Store(e.to_string()))?;
        let path = directory.join(FILE_NAME);
        let fail =
            |e: &dyn std::fmt::Display| LearnedError::Store(format!("{}: {e}", path.display()));
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| fail(&e))?;
        let meta = file.metadata().map_err(|e| fail(&e))?;
        if meta.mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| fail(&e))?;
        }
        drop(file);
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| fail(&e))?;
        let prepared = (|| -> rusqlite::Result<()> {
            conn.busy_timeout(Duration::from_secs(2))?;
            let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
            conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
            crate::state_files::migrate(&conn, SCHEMA, SCHEMA_VERSION, UPGRADES)
        })();
        prepared.map_err(|e| fail(&e))?;
        Ok(LearnedStore {
            path,
            conn: Mutex::new(conn),
        })
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, LearnedError> {
        let mut conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut conn).map_err(|e| LearnedError::Store(format!("{}: {e}", self.path.display())))
    }

    /// Every row that can be read, as (source, tool, entry); rows that cannot are skipped
    /// (and counted).
    pub fn load(&self) -> Result<(Vec<Row>, usize), LearnedError> {
        self.with(|c| {
            let mut statement = c.prepare(
                "SELECT principal, source, tool, version, shape, results, since_ms, updated_ms, checked, drift FROM learned ORDER BY principal, source, tool",
            )?;
            let rows = statement.query_map([], |r| {
                Ok((
                    Key {
                        principal: r.get::<_, String>(0)?,
                        source: r.get::<_, String>(1)?,
                        tool: r.get::<_, String>(2)?,
                    },
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, i64>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, i64>(8)?,
                    r.get::<_, String>(9)?,
                ))
            })?;
            let mut out = Vec::new();
            let mut unreadable = 0;
            for row in rows {
                let (key, version, shape, results, since, updated, checked, drift) = row?;
                match (serde_json::from_str(&shape), serde_json::from_str(&drift)) {
                    (Ok(shape), Ok(drift)) => out.push((
                        key,
                        Entry {
                            version,
                            shape,
                            results: u64_of(results),
                            since_ms: u64_of(since),
                            updated_ms: u64_of(updated),
                            checked: u64_of(checked),
                            drift,
                            dirty: false,
                        },
                    )),
                    _ => unreadable += 1,
                }
            }
            Ok((out, unreadable))
        })
    }

    /// Writes `rows` in one transaction.
    pub fn write(&self, rows: &[Row]) -> Result<(), LearnedError> {
        if rows.is_empty() {
            return Ok(());
        }
        let encoded: Vec<(&Key, &Entry, String, String)> = rows
            .iter()
            .filter_map(|(key, entry)| {
                let shape = serde_json::to_string(&entry.shape).ok()?;
                let drift = serde_json::to_string(&entry.drift).ok()?;
                (shape.len() + drift.len() <= MAX_ROW_BYTES).then_some((key, entry, shape, drift))
            })
            .collect();
        self.with(|c| {
            let tx = c.transaction()?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT OR REPLACE INTO learned (principal, source, tool, version, shape, results, since_ms, updated_ms, checked, drift) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )?;
                for (key, entry, shape, drift) in &encoded {
                    insert.execute(params![
                        key.principal,
                        key.source,
                        key.tool,
                        entry.version,
                        shape,
                        i64_of(entry.results),
                        i64_of(entry.since_ms),
                        i64_of(entry.updated_ms),
                        i64_of(entry.checked),
                        drift,
                    ])?;
                }
            }
            tx.commit()
        })
    }

    /// Deletes the row of `key`.
    pub fn delete(&self, key: &Key) -> Result<(), LearnedError> {
        self.with(|c| {
            c.execute(
                "DELETE FROM learned WHERE principal = ?1 AND source = ?2 AND tool = ?3",
                params![key.principal, key.source, key.tool],
            )
            .map(|_| ())
        })
    }
}
