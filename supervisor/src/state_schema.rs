//! What the daemon's SQLite state files (the journal, learned types) share: bringing a file's
//! schema to the version this daemon writes.

use rusqlite::Connection;

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
}
