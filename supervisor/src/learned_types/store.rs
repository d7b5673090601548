//! The learned types' SQLite file: `learned.sqlite` in the daemon's state directory (created
//! 0700, refused when group or others may write it), the file 0600, WAL, `synchronous =
//! NORMAL` (a committed row survives the daemon being killed). One row per tool: its source,
//! name, schema version and shape (JSON), counts and drift; never a value. Other processes
//! may read it while the daemon runs (the tests do); only the daemon writes.

use super::{Entry, LearnedError};
use rusqlite::{Connection, OpenFlags, params};
use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Name of the file in the state directory.
pub const FILE_NAME: &str = "learned.sqlite";

/// `PRAGMA user_version` of the schema below; a newer file is refused.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS learned (
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
    PRIMARY KEY (source, tool)
) WITHOUT ROWID;
";

/// A row larger than this is not written (the shape bounds keep rows far smaller).
pub const MAX_ROW_BYTES: usize = 1 << 20;

/// One row: source, tool and what is learned of it.
pub type Row = (String, String, Entry);

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
        crate::audit_log::database::prepare_directory(directory)
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
            crate::state_schema::migrate(&conn, SCHEMA, SCHEMA_VERSION, &[])
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
                "SELECT source, tool, version, shape, results, since_ms, updated_ms, checked, drift FROM learned ORDER BY source, tool",
            )?;
            let rows = statement.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, i64>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, String>(8)?,
                ))
            })?;
            let mut out = Vec::new();
            let mut unreadable = 0;
            for row in rows {
                let (source, tool, version, shape, results, since, updated, checked, drift) = row?;
                match (serde_json::from_str(&shape), serde_json::from_str(&drift)) {
                    (Ok(shape), Ok(drift)) => out.push((
                        source,
                        tool,
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
        let encoded: Vec<(&String, &String, &Entry, String, String)> = rows
            .iter()
            .filter_map(|(source, tool, entry)| {
                let shape = serde_json::to_string(&entry.shape).ok()?;
                let drift = serde_json::to_string(&entry.drift).ok()?;
                (shape.len() + drift.len() <= MAX_ROW_BYTES)
                    .then_some((source, tool, entry, shape, drift))
            })
            .collect();
        self.with(|c| {
            let tx = c.transaction()?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT OR REPLACE INTO learned (source, tool, version, shape, results, since_ms, updated_ms, checked, drift) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )?;
                for (source, tool, entry, shape, drift) in &encoded {
                    insert.execute(params![
                        source,
                        tool,
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

    /// Deletes the row of `source`'s `tool`.
    pub fn delete(&self, source: &str, tool: &str) -> Result<(), LearnedError> {
        self.with(|c| {
            c.execute(
                "DELETE FROM learned WHERE source = ?1 AND tool = ?2",
                params![source, tool],
            )
            .map(|_| ())
        })
    }
}
