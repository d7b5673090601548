//! The journal's tables, one `CREATE` each with its indexes, and what brings a file of an
//! earlier version to this one. What the tables keep is counted by triggers ([`usage`]).

use super::super::usage;
use rusqlite::Connection;

/// `PRAGMA user_version` of the schema below; a newer file is refused. Version 1 counted
/// results only; 2 added `calls.attempt`; 3 counts everything ([`usage`]) and keeps answers
/// in a table of their own; 4 adds the session store (`store`).
pub(super) const SCHEMA_VERSION: i64 = 4;

/// What brings a file of an older version to the next (see [`crate::state_files::migrate`]);
/// a file from before version 3 is then counted ([`migrate`]).
const UPGRADES: &[(i64, &str)] = &[
    (
        1,
        "ALTER TABLE calls ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;",
    ),
    (
        2,
        "ALTER TABLE sessions ADD COLUMN bytes INTEGER NOT NULL DEFAULT 128;",
    ),
    // The table and its triggers are made by the schema (`IF NOT EXISTS`).
    (3, ""),
];

/// Times are milliseconds since the Unix epoch. Deleting a session deletes its calls and
/// executions (foreign keys, `ON DELETE CASCADE`). `sessions.bytes` is everything kept under
/// a session, kept by triggers ([`usage`]), so a write is checked against the bounds in its
/// own transaction.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    used_ms INTEGER NOT NULL,
    clock_ms INTEGER NOT NULL,
    seed BLOB NOT NULL,
    bytes INTEGER NOT NULL DEFAULT 128
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
-- The client's answers to a waiting execution's calls, one row each, as the program gets them
-- (scanned when posted): `ok` 1 with the result's JSON, 0 with a ToolError's JSON.
CREATE TABLE IF NOT EXISTS answers (
    execution TEXT NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    call INTEGER NOT NULL,
    tool TEXT NOT NULL,
    ok INTEGER NOT NULL,
    result TEXT NOT NULL,
    redactions TEXT NOT NULL,
    clock_ms INTEGER NOT NULL,
    UNIQUE (execution, call)
);
-- The session store: what programs keep with store.set (scanned), one row per key.
CREATE TABLE IF NOT EXISTS store (
    session TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (session, key)
);
";

/// Brings the file to [`SCHEMA_VERSION`]: the tables and the triggers that count what they
/// keep; a file of version 1 or 2 gets the columns it lacks ([`UPGRADES`]), and what it
/// holds is counted, in one transaction.
pub(super) fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let schema = format!("{SCHEMA}\n{}", usage::triggers());
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if (1..3).contains(&found) {
        let upgrade: String = UPGRADES
            .iter()
            .filter(|(from, _)| *from >= found)
            .map(|(_, statements)| *statements)
            .collect();
        return conn.execute_batch(&format!(
            "BEGIN; {upgrade}\n{schema}\n{}\nPRAGMA user_version = {SCHEMA_VERSION}; COMMIT;",
            usage::count_existing()
        ));
    }
    crate::state_files::migrate(conn, &schema, SCHEMA_VERSION, UPGRADES)
}
