//! What the daemon's state files (the audit log, the journal, learned types) share: a
//! private directory to live in, and bringing a SQLite file's schema to the version this
//! daemon writes. A leaf: it knows none of the stores that use it.

use rusqlite::Connection;
use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a state directory cannot be used. `what` names the store (`audit log`, `journal`),
/// `key` the policy setting that moves it.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    #[error("{what} directory {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} directory {path} is not a directory")]
    NotADirectory { what: &'static str, path: PathBuf },
    #[error(
        "{what} directory {path} is writable by group or others (mode {mode:04o}), so they could rewrite its files; run `chmod go-w {path}` or set {key} to a private directory"
    )]
    WritableByOthers {
        what: &'static str,
        key: &'static str,
        path: PathBuf,
        mode: u32,
    },
}

/// Creates `directory` (mode 0700) if it is missing; refuses one that group or others may
/// write, where anyone in that group could replace or delete the files of `what` (which
/// `key` of the policy moves).
pub fn prepare_directory(
    directory: &Path,
    what: &'static str,
    key: &'static str,
) -> Result<(), DirectoryError> {
    let io = |source| DirectoryError::Io {
        what,
        path: directory.to_owned(),
        source,
    };
    match std::fs::metadata(directory) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(directory)
            .map_err(io)?,
        Err(e) => return Err(io(e)),
    }
    let meta = std::fs::metadata(directory).map_err(io)?;
    if !meta.is_dir() {
        return Err(DirectoryError::NotADirectory {
            what,
            path: directory.to_owned(),
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(DirectoryError::WritableByOthers {
            what,
            key,
            path: directory.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Brings `conn`'s file to `version`: a file at an older `user_version` (a new file is at 0)
/// gets `schema` (`CREATE … IF NOT EXISTS` statements) and the new version in one
/// transaction; a newer file is refused, since this daemon does not know its tables.
///
/// `upgrades` change what `schema` cannot (a column added to a table that exists): each
/// `(from, statements)` brings a file of version `from` to `from + 1`, and runs, in order,
/// for a file that was made (version 1 or more) and is at `from` or older. A new file gets
/// `schema` alone, which already has what they add.
pub fn migrate(
    conn: &Connection,
    schema: &str,
    version: i64,
    upgrades: &[(i64, &str)],
) -> rusqlite::Result<()> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > version {
        return Err(rusqlite::Error::InvalidParameterName(format!(
            "schema version {found} is newer than this daemon's ({version})"
        )));
    }
    if found < version {
        let upgrade: String = upgrades
            .iter()
            .filter(|(from, _)| found >= 1 && *from >= found)
            .map(|(_, statements)| *statements)
            .collect();
        conn.execute_batch(&format!(
            "BEGIN; {upgrade} {schema} PRAGMA user_version = {version}; COMMIT;"
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_gets_the_schema_and_a_newer_one_is_refused() {
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn, "CREATE TABLE IF NOT EXISTS t (x INTEGER);", 2, &[]).unwrap();
        conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
        // Again at the same version: nothing to do, the rows stay.
        migrate(&conn, "CREATE TABLE IF NOT EXISTS t (x INTEGER);", 2, &[]).unwrap();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        let e = migrate(&conn, "", 1, &[]).unwrap_err().to_string();
        assert!(
            e.contains("schema version 2 is newer than this daemon's (1)"),
            "{e}"
        );
    }

    /// A file of an older version gets the columns its tables lack, its rows kept; a new file
    /// gets the schema alone.
    #[test]
    fn an_older_file_is_upgraded_in_order() {
        let v3 = "CREATE TABLE IF NOT EXISTS t (x INTEGER, y INTEGER NOT NULL DEFAULT 0, z TEXT);";
        let upgrades = [
            (1, "ALTER TABLE t ADD COLUMN y INTEGER NOT NULL DEFAULT 0;"),
            (2, "ALTER TABLE t ADD COLUMN z TEXT;"),
        ];
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn, "CREATE TABLE IF NOT EXISTS t (x INTEGER);", 1, &[]).unwrap();
        conn.execute("INSERT INTO t VALUES (7)", []).unwrap();
        migrate(&conn, v3, 3, &upgrades).unwrap();
        let row: (i64, i64, Option<String>) = conn
            .query_row("SELECT x, y, z FROM t", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!(row, (7, 0, None));
        let fresh = Connection::open_in_memory().unwrap();
        migrate(&fresh, v3, 3, &upgrades).unwrap();
        fresh
            .execute("INSERT INTO t VALUES (1, 2, 'z')", [])
            .unwrap();
    }

    #[test]
    fn a_directory_others_may_write_is_refused_naming_the_store_and_its_key() {
        let root = tempfile::tempdir().unwrap();
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = prepare_directory(&open, "journal", "[journal] directory")
            .unwrap_err()
            .to_string();
        assert!(refused.starts_with("journal directory "), "{refused}");
        assert!(refused.contains("(mode 0777)"), "{refused}");
        assert!(refused.contains("set [journal] directory"), "{refused}");
        // A missing one is made, private.
        let made = root.path().join("a/b");
        prepare_directory(&made, "learned types", "[daemon] state_directory").unwrap();
        let mode = std::fs::metadata(&made).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let file = root.path().join("file");
        std::fs::write(&file, "").unwrap();
        let refused = prepare_directory(&file, "audit log", "[audit] directory").unwrap_err();
        assert!(
            matches!(refused, DirectoryError::NotADirectory { .. }),
            "{refused}"
        );
    }
}
