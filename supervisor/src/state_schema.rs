//! What the daemon's SQLite state files (the journal, learned types) share: bringing a file's
//! schema to the version this daemon writes.

use rusqlite::Connection;

/// Brings `conn`'s file to `version`: a file at an older `user_version` (a new file is at 0)
/// gets `schema` (`CREATE … IF NOT EXISTS` statements) and the new version in one
/// transaction; a newer file is refused, since this daemon does not know its tables.
pub fn migrate(conn: &Connection, schema: &str, version: i64) -> rusqlite::Result<()> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > version {
        return Err(rusqlite::Error::InvalidParameterName(format!(
            "schema version {found} is newer than this daemon's ({version})"
        )));
    }
    if found < version {
        conn.execute_batch(&format!(
            "BEGIN; {schema} PRAGMA user_version = {version}; COMMIT;"
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
        migrate(&conn, "CREATE TABLE IF NOT EXISTS t (x INTEGER);", 2).unwrap();
        conn.execute("INSERT INTO t VALUES (1)", []).unwrap();
        // Again at the same version: nothing to do, the rows stay.
        migrate(&conn, "CREATE TABLE IF NOT EXISTS t (x INTEGER);", 2).unwrap();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        let e = migrate(&conn, "", 1).unwrap_err().to_string();
        assert!(
            e.contains("schema version 2 is newer than this daemon's (1)"),
            "{e}"
        );
    }
}
