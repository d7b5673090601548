//! Reading the audit log back (`airlock audit`): the current file and the rotated ones, read
//! only, filtered by time, principal, tool and execution, newest first, printed as a compact
//! table or as JSON lines: executions with their tool calls ([`read`]), or the decisions on
//! calls that waited for approval ([`read_approvals`], `airlock audit --approvals`).

use super::AuditLogError;
use super::database::{self, files};
use super::timestamp::{format_utc, unix_ms};
use airlock_policy::tool_pattern::{ToolPatternError, validate_tool_pattern};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, Row};
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Default number of executions shown.
pub const DEFAULT_LIMIT: usize = 100;

/// What to read. For [`read_approvals`] every filter applies to the decisions: made at or
/// after `since`, on executions of `principal`, on calls of a tool matching `tool`, in
/// `execution`; at most `limit` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditQuery {
    /// Executions that started at or after this time.
    pub since: Option<SystemTime>,
    /// Executions of this principal.
    pub principal: Option<String>,
    /// Executions with at least one call to a tool matching this pattern (`*` matches any run
    /// of characters, as in the policy's `allow`); only the matching calls are listed.
    pub tool: Option<String>,
    /// The execution with this id.
    pub execution: Option<String>,
    /// At most this many executions, newest first.
    pub limit: usize,
}

impl Default for AuditQuery {
    fn default() -> Self {
        AuditQuery {
            since: None,
            principal: None,
            tool: None,
            execution: None,
            limit: DEFAULT_LIMIT,
        }
    }
}

/// Why a query could not run.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("--tool: {0}")]
    ToolPattern(#[from] ToolPatternError),
    #[error(
        "no audit log in {0}: pass --dir with the daemon's audit directory (under systemd /var/lib/airlock) or --config with its policy file"
    )]
    NoLog(std::path::PathBuf),
    #[error(transparent)]
    Log(#[from] AuditLogError),
    #[error(transparent)]
    Policy(#[from] airlock_policy::PolicyError),
    #[error("the policy {0} turns the audit log off ([audit] enabled = false)")]
    Disabled(String),
}

/// Where `airlock audit` reads: `dir` if given, else the `[audit] directory` of the policy at
/// `config`, else its `[daemon] state_directory`, else the default the daemon would use in
/// this environment (`$STATE_DIRECTORY`, `$XDG_STATE_HOME/airlock`, `~/.local/state/airlock`).
pub fn directory(dir: Option<PathBuf>, config: Option<&Path>) -> Result<PathBuf, QueryError> {
    if let Some(dir) = dir {
        return Ok(dir);
    }
    if let Some(path) = config {
        let policy = airlock_policy::Policy::load(path)?;
        if !policy.audit.enabled {
            return Err(QueryError::Disabled(path.display().to_string()));
        }
        if let Some(dir) = policy.audit.directory.or(policy.daemon.state_directory) {
            return Ok(dir);
        }
    }
    Ok(super::default_directory(|name| std::env::var_os(name))?)
}

/// `airlock audit`: the matching executions as a table, or as JSON lines with `json`.
pub fn render(directory: &Path, query: &AuditQuery, json: bool) -> Result<String, QueryError> {
    let rows = read(directory, query)?;
    Ok(if json {
        format_json_lines(&rows)
    } else {
        format_table(&rows)
    })
}

/// `airlock audit --approvals`: the matching approval decisions as a table, or as JSON lines
/// with `json`.
pub fn render_approvals(
    directory: &Path,
    query: &AuditQuery,
    json: bool,
) -> Result<String, QueryError> {
    let rows = read_approvals(directory, query)?;
    Ok(if json {
        format_approval_json_lines(&rows)
    } else {
        format_approval_table(&rows)
    })
}

/// One execution as read back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecutionRow {
    pub execution_id: String,
    /// RFC 3339, UTC.
    pub started: String,
    pub finished: String,
    pub principal: String,
    pub peer_uid: u32,
    pub peer_pid: Option<i32>,
    pub code_sha256: String,
    pub status: String,
    pub error_kind: Option<String>,
    pub queued_ms: f64,
    pub run_ms: f64,
    pub total_ms: f64,
    /// Every call the execution made (also when `tool_calls` lists only the matching ones).
    pub tool_call_count: u32,
    /// How many secret-scanner replacements (in its tools' answers and its own output).
    pub redactions: u32,
    /// The replacements in the program's own output (console, progress, result, error).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_redactions: Vec<RedactionRow>,
    pub tool_calls: Vec<ToolCallRow>,
    #[serde(skip)]
    started_ms: i64,
}

/// One tool call as read back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallRow {
    pub call_index: u32,
    pub tool: String,
    pub arguments: String,
    pub outcome: String,
    pub error_code: Option<String>,
    pub duration_ms: f64,
    /// RFC 3339, UTC.
    pub at: String,
    /// Secret-scanner replacements in this call's result, error, progress or arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<RedactionRow>,
    /// Untrusted text found in its arguments (information flow).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowRow>,
}

/// One secret-scanner replacement as read back: never the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedactionRow {
    pub place: String,
    pub rule: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// The known secret's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl std::fmt::Display for RedactionRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} in {}", printable(&self.rule), printable(&self.place))?;
        if let Some(pointer) = &self.pointer {
            write!(
                f,
                " at {}",
                printable(if pointer.is_empty() { "/" } else { pointer })
            )?;
        }
        if let Some(secret) = &self.secret {
            write!(f, " (secret `{}`)", printable(secret))?;
        }
        Ok(())
    }
}

/// One decision on an approval as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalRow {
    pub approval_id: String,
    /// When it was decided (or expired); RFC 3339, UTC.
    pub at: String,
    pub execution_id: String,
    pub principal: String,
    /// The call's id within its execution, as in `tool_calls`.
    pub call_index: u32,
    pub tool: String,
    /// The bounded, redacted summary of the call's arguments.
    pub arguments: String,
    /// `approved`, `denied` or `expired`.
    pub decision: String,
    /// The approver's user name (or `uid N`); `None` when it expired.
    pub decided_by: Option<String>,
    pub decider_uid: Option<u32>,
    pub reason: Option<String>,
    #[serde(skip)]
    at_ms: i64,
}

/// Runs `query` over every database file in `directory`, newest execution first.
pub fn read(directory: &Path, query: &AuditQuery) -> Result<Vec<ExecutionRow>, QueryError> {
    let mut rows = read_files(directory, query, read_file)?;
    // Files hold disjoint time ranges in practice, but a clock step can interleave them.
    rows.sort_by(|a, b| {
        b.started_ms
            .cmp(&a.started_ms)
            .then_with(|| b.execution_id.cmp(&a.execution_id))
    });
    rows.truncate(query.limit);
    Ok(rows)
}

/// Runs `query` over the approval decisions of every database file in `directory`, the newest
/// decision first. Files written before approvals were recorded have none.
pub fn read_approvals(
    directory: &Path,
    query: &AuditQuery,
) -> Result<Vec<ApprovalRow>, QueryError> {
    let mut rows = read_files(directory, query, read_approvals_file)?;
    // Stable: equal times keep each file's order (newest row first) and the files' (newest
    // file first).
    rows.sort_by_key(|row| std::cmp::Reverse(row.at_ms));
    rows.truncate(query.limit);
    Ok(rows)
}

/// One flow of untrusted text into a call's arguments, as the audit log keeps it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FlowRow {
    #[serde(skip)]
    pub execution_id: String,
    /// The call whose arguments held the text.
    #[serde(skip)]
    pub call_index: u32,
    pub argument: String,
    pub source_call: u32,
    pub source_tool: String,
    pub rule: Option<String>,
    /// `deny`, `approve` or `log`; `None` when no rule named the flow.
    pub action: Option<String>,
    pub unchecked: bool,
}

/// The flows recorded for execution `execution_id`, in every database file of `directory`,
/// in call order. Files written before flows were recorded have none.
pub fn read_flows(directory: &Path, execution_id: &str) -> Result<Vec<FlowRow>, QueryError> {
    if !directory.join(database::FILE_NAME).exists() {
        return Err(QueryError::NoLog(directory.to_owned()));
    }
    let mut rows = Vec::new();
    for path in files(directory)? {
        let Some(conn) = database::open_for_reading(&path)? else {
            continue;
        };
        let read = || read_flows_of(&conn, execution_id);
        rows.extend(read().map_err(|source| AuditLogError::Sqlite {
            path: path.clone(),
            source,
        })?);
    }
    Ok(rows)
}

/// The flows of one execution in one file (none in a file older than the `flows` table).
fn read_flows_of(conn: &Connection, execution_id: &str) -> rusqlite::Result<Vec<FlowRow>> {
    if !has_table(conn, "flows")? {
        return Ok(Vec::new());
    }
    let mut statement = conn.prepare_cached(
        "SELECT execution_id, call_index, argument, source_call, source_tool, rule, action,
                unchecked
         FROM flows WHERE execution_id = ?1 ORDER BY call_index, rowid",
    )?;
    statement
        .query_map([execution_id], |row| {
            Ok(FlowRow {
                execution_id: row.get(0)?,
                call_index: row.get(1)?,
                argument: row.get(2)?,
                source_call: row.get(3)?,
                source_tool: row.get(4)?,
                rule: row.get(5)?,
                action: row.get(6)?,
                unchecked: row.get(7)?,
            })
        })?
        .collect()
}

impl std::fmt::Display for FlowRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.unchecked {
            write!(f, "unchecked (past the bound) from #{}", self.source_call)?;
        } else {
            write!(
                f,
                "`{}` from #{}",
                printable(&self.argument),
                self.source_call
            )?;
        }
        write!(f, " {}", printable(&self.source_tool))?;
        match (&self.rule, &self.action) {
            (Some(rule), Some(action)) => {
                write!(f, ": rule \"{}\", {}", printable(rule), printable(action))
            }
            _ => write!(f, ": no rule"),
        }
    }
}

/// Checks `query`, then runs `read_one` on every database file in `directory`, newest file
/// first, and collects the rows.
fn read_files<T>(
    directory: &Path,
    query: &AuditQuery,
    read_one: fn(&Connection, &AuditQuery) -> rusqlite::Result<Vec<T>>,
) -> Result<Vec<T>, QueryError> {
    if let Some(pattern) = &query.tool {
        // The policy's pattern language has only `*`, and rejects `?`, `[`, `]`, `{`, `}`:
        // what is left means the same to SQLite's GLOB.
        validate_tool_pattern(pattern)?;
    }
    if !directory.join(database::FILE_NAME).exists() {
        return Err(QueryError::NoLog(directory.to_owned()));
    }
    let mut rows = Vec::new();
    for path in files(directory)? {
        let Some(conn) = database::open_for_reading(&path)? else {
            continue;
        };
        let sql = |source| AuditLogError::Sqlite {
            path: path.clone(),
            source,
        };
        rows.extend(read_one(&conn, query).map_err(sql)?);
    }
    Ok(rows)
}

fn read_approvals_file(
    conn: &Connection,
    query: &AuditQuery,
) -> rusqlite::Result<Vec<ApprovalRow>> {
    // A rotated file of schema version 1 or 2 has no approvals table.
    if !has_table(conn, "approvals")? {
        return Ok(Vec::new());
    }
    let (filter, values) = where_clause(query, "at", |n| format!("tool GLOB ?{n}"));
    let sql = format!(
        "SELECT approval_id, at, execution_id, principal, call_index, tool, arguments, decision,
                decided_by, decider_uid, reason
         FROM approvals {filter} ORDER BY at DESC, rowid DESC LIMIT ?{}",
        values.len()
    );
    let mut statement = conn.prepare(&sql)?;
    statement
        .query_map(rusqlite::params_from_iter(values), |row| {
            let at_ms: i64 = row.get(1)?;
            Ok(ApprovalRow {
                approval_id: row.get(0)?,
                at: format_utc(at_ms),
                execution_id: row.get(2)?,
                principal: row.get(3)?,
                call_index: row.get(4)?,
                tool: row.get(5)?,
                arguments: row.get(6)?,
                decision: row.get(7)?,
                decided_by: row.get(8)?,
                decider_uid: row.get(9)?,
                reason: row.get(10)?,
                at_ms,
            })
        })?
        .collect()
}

/// `query`'s filters as a `WHERE` clause (empty when there are none) and the values of its
/// numbered parameters, followed by the limit's: the statement ends `LIMIT ?{values.len()}`.
/// Executions and approvals are filtered alike but for the time (`time_column`, which `since`
/// bounds) and the tool: `tool_condition(n)` matches the pattern bound to `?n`.
fn where_clause(
    query: &AuditQuery,
    time_column: &str,
    tool_condition: fn(usize) -> String,
) -> (String, Vec<SqlValue>) {
    let mut conditions = Vec::new();
    let mut values: Vec<SqlValue> = Vec::new();
    if let Some(since) = query.since {
        values.push(SqlValue::Integer(unix_ms(since)));
        conditions.push(format!("{time_column} >= ?{}", values.len()));
    }
    if let Some(principal) = &query.principal {
        values.push(SqlValue::Text(principal.clone()));
        conditions.push(format!("principal = ?{}", values.len()));
    }
    if let Some(id) = &query.execution {
        values.push(SqlValue::Text(id.clone()));
        conditions.push(format!("execution_id = ?{}", values.len()));
    }
    if let Some(tool) = &query.tool {
        values.push(SqlValue::Text(tool.clone()));
        conditions.push(tool_condition(values.len()));
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    values.push(SqlValue::Integer(
        i64::try_from(query.limit).unwrap_or(i64::MAX),
    ));
    (filter, values)
}

fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |row| row.get(0),
    )
}

fn read_file(conn: &Connection, query: &AuditQuery) -> rusqlite::Result<Vec<ExecutionRow>> {
    let (filter, values) = where_clause(query, "started_at", |n| {
        format!("execution_id IN (SELECT execution_id FROM tool_calls WHERE tool GLOB ?{n})")
    });
    let sql = format!(
        "SELECT execution_id, started_at, finished_at, principal, peer_uid, peer_pid,
                code_sha256, status, error_kind, queued_ms, run_ms, total_ms, tool_calls,
                redactions
         FROM executions {filter} ORDER BY started_at DESC, rowid DESC LIMIT ?{}",
        values.len()
    );
    let mut statement = conn.prepare(&sql)?;
    let mut executions: Vec<ExecutionRow> = statement
        .query_map(rusqlite::params_from_iter(values), execution_row)?
        .collect::<rusqlite::Result<_>>()?;

    let calls_sql = match &query.tool {
        Some(_) => {
            "SELECT call_index, tool, arguments, outcome, error_code, duration_ms, at
             FROM tool_calls WHERE execution_id = ?1 AND tool GLOB ?2 ORDER BY call_index"
        }
        None => {
            "SELECT call_index, tool, arguments, outcome, error_code, duration_ms, at
             FROM tool_calls WHERE execution_id = ?1 AND ?2 IS NULL ORDER BY call_index"
        }
    };
    let mut calls = conn.prepare(calls_sql)?;
    // A rotated file of schema version 1 has no redactions table.
    let mut redactions = if has_table(conn, "redactions")? {
        Some(conn.prepare(
            "SELECT call_index, place, rule, pointer, secret FROM redactions
             WHERE execution_id = ?1 ORDER BY rowid",
        )?)
    } else {
        None
    };
    for execution in &mut executions {
        execution.tool_calls = calls
            .query_map(
                rusqlite::params![execution.execution_id, query.tool],
                tool_call_row,
            )?
            .collect::<rusqlite::Result<_>>()?;
        for flow in read_flows_of(conn, &execution.execution_id)? {
            if let Some(call) = execution
                .tool_calls
                .iter_mut()
                .find(|c| c.call_index == flow.call_index)
            {
                call.flows.push(flow);
            }
        }
        let Some(redactions) = redactions.as_mut() else {
            continue;
        };
        let found: Vec<(Option<u32>, RedactionRow)> = redactions
            .query_map([&execution.execution_id], |row| {
                Ok((
                    row.get(0)?,
                    RedactionRow {
                        place: row.get(1)?,
                        rule: row.get(2)?,
                        pointer: row.get(3)?,
                        secret: row.get(4)?,
                    },
                ))
            })?
            .collect::<rusqlite::Result<_>>()?;
        for (call_index, row) in found {
            match call_index {
                None => execution.output_redactions.push(row),
                Some(index) => {
                    // Under `--tool`, only the matching calls are listed.
                    if let Some(call) = execution
                        .tool_calls
                        .iter_mut()
                        .find(|c| c.call_index == index)
                    {
                        call.redactions.push(row);
                    }
                }
            }
        }
    }
    Ok(executions)
}

fn execution_row(row: &Row<'_>) -> rusqlite::Result<ExecutionRow> {
    let started_ms: i64 = row.get(1)?;
    Ok(ExecutionRow {
        execution_id: row.get(0)?,
        started: format_utc(started_ms),
        finished: format_utc(row.get(2)?),
        principal: row.get(3)?,
        peer_uid: row.get(4)?,
        peer_pid: row.get(5)?,
        code_sha256: row.get(6)?,
        status: row.get(7)?,
        error_kind: row.get(8)?,
        queued_ms: row.get(9)?,
        run_ms: row.get(10)?,
        total_ms: row.get(11)?,
        tool_call_count: row.get(12)?,
        redactions: row.get(13)?,
        output_redactions: Vec::new(),
        tool_calls: Vec::new(),
        started_ms,
    })
}

fn tool_call_row(row: &Row<'_>) -> rusqlite::Result<ToolCallRow> {
    Ok(ToolCallRow {
        call_index: row.get(0)?,
        tool: row.get(1)?,
        arguments: row.get(2)?,
        outcome: row.get(3)?,
        error_code: row.get(4)?,
        duration_ms: row.get(5)?,
        at: format_utc(row.get(6)?),
        redactions: Vec::new(),
        flows: Vec::new(),
    })
}

/// One JSON object per execution, a line each, its tool calls nested.
pub(crate) fn format_json_lines(rows: &[ExecutionRow]) -> String {
    json_lines(rows)
}

/// One JSON object per approval decision, a line each, every column included.
pub(crate) fn format_approval_json_lines(rows: &[ApprovalRow]) -> String {
    json_lines(rows)
}

fn json_lines<T: Serialize>(rows: &[T]) -> String {
    let mut out = String::new();
    for row in rows {
        if let Ok(line) = serde_json::to_string(row) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// A compact table: one line per execution, its tool calls indented below it.
pub(crate) fn format_table(rows: &[ExecutionRow]) -> String {
    table(
        [
            "STARTED (UTC)",
            "EXECUTION",
            "PRINCIPAL",
            "UID",
            "STATUS",
            "TOTAL",
            "CALLS",
            "CODE",
        ],
        rows,
        |row| {
            [
                row.started.clone(),
                printable(&row.execution_id),
                printable(&row.principal),
                row.peer_uid.to_string(),
                match &row.error_kind {
                    Some(kind) => format!("{} ({})", printable(&row.status), printable(kind)),
                    None => printable(&row.status),
                },
                format_ms(row.total_ms),
                row.tool_call_count.to_string(),
                // 12 hex digits identify a program among many; --json has all 64.
                row.code_sha256.chars().take(12).collect(),
            ]
        },
        |out, row| {
            for call in &row.tool_calls {
                let outcome = match &call.error_code {
                    Some(code) => format!("{} ({})", printable(&call.outcome), printable(code)),
                    None => printable(&call.outcome),
                };
                let _ = writeln!(
                    out,
                    "    #{} {}  {}  {}  {}",
                    call.call_index,
                    printable(&call.tool),
                    outcome,
                    format_ms(call.duration_ms),
                    call.arguments
                );
                for redaction in &call.redactions {
                    let _ = writeln!(out, "        redacted: {redaction}");
                }
                for flow in &call.flows {
                    let _ = writeln!(out, "        untrusted text: {flow}");
                }
            }
            for redaction in &row.output_redactions {
                let _ = writeln!(out, "    redacted from the output: {redaction}");
            }
        },
        "(no executions match)",
    )
}

/// A compact table: one line per approval decision, the call's arguments and the approver's
/// reason indented below it.
pub(crate) fn format_approval_table(rows: &[ApprovalRow]) -> String {
    table(
        [
            "DECIDED (UTC)",
            "DECISION",
            "BY",
            "APPROVAL",
            "EXECUTION",
            "PRINCIPAL",
            "CALL",
        ],
        rows,
        |row| {
            let by = match (&row.decided_by, row.decider_uid) {
                (Some(name), Some(uid)) if *name != format!("uid {uid}") => {
                    format!("{} (uid {uid})", printable(name))
                }
                (Some(name), _) => printable(name),
                (None, Some(uid)) => format!("uid {uid}"),
                (None, None) => "-".to_owned(),
            };
            [
                row.at.clone(),
                printable(&row.decision),
                by,
                printable(&row.approval_id),
                printable(&row.execution_id),
                printable(&row.principal),
                format!("#{} {}", row.call_index, printable(&row.tool)),
            ]
        },
        |out, row| {
            // The summary escapes control characters itself.
            let _ = writeln!(out, "    arguments: {}", row.arguments);
            if let Some(reason) = &row.reason {
                let _ = writeln!(out, "    reason: {}", printable(reason));
            }
        },
        "(no approval decisions match)",
    )
}

/// A table: the `header` line, then for each of `rows` the line of its `cells` and what
/// `below` writes under it (indented lines); `none` instead when there are no rows. Each
/// column is as wide as its widest cell.
fn table<R, const N: usize>(
    header: [&str; N],
    rows: &[R],
    cells: impl Fn(&R) -> [String; N],
    below: impl Fn(&mut String, &R),
    none: &str,
) -> String {
    let lines: Vec<[String; N]> = rows.iter().map(cells).collect();
    let widths = column_widths(&header, &lines);
    let mut out = String::new();
    push_line(&mut out, &header.map(str::to_owned), &widths);
    for (row, cells) in rows.iter().zip(&lines) {
        push_line(&mut out, cells, &widths);
        below(&mut out, row);
    }
    if rows.is_empty() {
        out.push_str(none);
        out.push('\n');
    }
    out
}

/// Each column's width: its widest cell or header, in characters.
fn column_widths<const N: usize>(header: &[&str; N], lines: &[[String; N]]) -> [usize; N] {
    let mut widths = header.map(str::len);
    for line in lines {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.chars().count());
        }
    }
    widths
}

/// One table line: every cell but the last padded to its column's width.
fn push_line(out: &mut String, cells: &[String], widths: &[usize]) {
    let mut text = String::new();
    for (i, (cell, &width)) in cells.iter().zip(widths).enumerate() {
        if i + 1 == cells.len() {
            text.push_str(cell);
        } else {
            let _ = write!(text, "{cell:<width$}  ");
        }
    }
    out.push_str(text.trim_end());
    out.push('\n');
}

fn format_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2}s", ms / 1000.0)
    } else {
        format!("{ms:.1}ms")
    }
}

/// Names come from tool servers and callers: control characters are shown escaped, so a name
/// cannot move the cursor or retitle the terminal of the operator reading the log.
fn printable(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    } else {
        text.to_owned()
    }
}
