//! The audit log: every execution (principal, code hash, status, durations), every tool call
//! (tool, redacted argument summary, outcome, duration) and every decision on a call that waited
//! for approval (who approved or denied it, or that it expired), appended to a SQLite database
//! in WAL mode in the state directory, rotated by size, and read back by `airlock audit`.
//!
//! The execution path never waits on the disk: [`AuditLog::record`] and
//! [`AuditLog::record_approval`] hand a self-contained [`ExecutionRecord`] or [`ApprovalRecord`]
//! to one writer thread through a bounded channel (`try_send`), and the writer commits whatever
//! has queued up in one transaction. When the queue is full or a write failed (disk full,
//! read-only file system, permissions), the record is counted as dropped and the log turns
//! [`AuditState::Degraded`] with a reason naming the file; both return that reason so the
//! response can say its record may be missing. The next successful write clears it.
//!
//! Submodules:
//! - `record`: [`ExecutionRecord`], [`ToolCallRecord`], [`ApprovalRecord`] and [`CodeHash`];
//! - `argument_summary`: the bounded, redacted shape of tool arguments that is stored instead
//!   of the arguments;
//! - [`query`]: reading the current and rotated files, filters, the table and JSON-lines output;
//! - [`timestamp`]: UTC times and the `--since` forms;
//! - `database` (private): files, modes, schema, rotation;
//! - `writer` (private): the writer thread.

pub(crate) mod argument_summary;
pub(crate) mod database;
pub mod query;
pub(crate) mod record;
pub mod timestamp;
mod writer;

pub use argument_summary::{ArgumentSummary, Redact};
pub use database::{FILE_NAME, SCHEMA_VERSION};
pub use query::{ApprovalRow, AuditQuery, ExecutionRow, FlowRow, RedactionRow, ToolCallRow};
pub use record::{ApprovalRecord, CodeHash, ExecutionRecord, RedactionRecord, ToolCallRecord};

use airlock_policy::AuditSettings;
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use writer::{Message, Writer};

/// Records that may wait for the writer. At the writer's measured rate (docs/performance.md)
/// this is well under a second of backlog; past it, records are dropped and counted rather than
/// making executions wait.
pub(crate) const QUEUE_CAPACITY: usize = 4096;

/// Why the audit log could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum AuditLogError {
    #[error(
        "no directory for the audit log: none of STATE_DIRECTORY, XDG_STATE_HOME or HOME is set (as an absolute path); set [audit] directory in the policy"
    )]
    NoDirectory,
    #[error(transparent)]
    Directory(#[from] crate::state_files::DirectoryError),
    #[error("audit log {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("audit log {path}: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("audit log {path}: the database stays in journal mode \"{mode}\" instead of WAL")]
    NoWal { path: PathBuf, mode: String },
    #[error(
        "audit log {path} has schema version {version}, newer than this airlock understands ({SCHEMA_VERSION}); use the airlock that wrote it"
    )]
    NewerSchema { path: PathBuf, version: i64 },
    #[error("cannot start the audit log writer thread: {0}")]
    Thread(std::io::Error),
}

/// The audit log of a running daemon. Cheap to share (`Arc` inside); the writer thread ends,
/// after writing what is queued, when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct AuditLog {
    inner: Option<Arc<Inner>>,
}

#[derive(Debug)]
struct Inner {
    /// `None` only while dropping: taking it lets the writer see the end of the channel.
    sender: Option<SyncSender<Message>>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

/// State the writer thread and the handles share.
#[derive(Debug)]
pub(crate) struct Shared {
    path: PathBuf,
    written: AtomicU64,
    dropped: AtomicU64,
    /// Messages sent and not yet taken by the writer.
    queued: AtomicU64,
    /// Mirrors `degraded.is_some()`, so the execution path reads one atomic, not the mutex
    /// (which the writer takes after every batch, and may hold while it is descheduled).
    is_degraded: AtomicBool,
    degraded: Mutex<Option<String>>,
}

impl Shared {
    /// Sets the degraded reason; `true` if the log was healthy until now.
    fn degrade(&self, reason: String) -> bool {
        let mut degraded = self
            .degraded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let first = degraded.is_none();
        *degraded = Some(reason);
        self.is_degraded.store(true, Ordering::Release);
        first
    }

    fn recovered(&self) {
        if !self.is_degraded.load(Ordering::Acquire) {
            return;
        }
        let mut degraded = self
            .degraded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.is_degraded.store(false, Ordering::Release);
        if degraded.take().is_some() {
            tracing::info!(path = %self.path.display(), "audit log writes succeed again");
        }
    }

    fn reason(&self) -> Option<String> {
        if !self.is_degraded.load(Ordering::Acquire) {
            return None;
        }
        self.degraded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// `ok`, `degraded` or `disabled`, for `GET /v1/health`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditState {
    Ok,
    Degraded,
    Disabled,
}

/// The log's health and counters (`GET /v1/health`, `GET /metrics`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditStatus {
    pub state: AuditState,
    /// The current database file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Why the log is degraded: names the file and the failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Records (executions and approval decisions) written since the daemon started.
    pub written: u64,
    /// Records lost (queue full or failed write) since the daemon started.
    pub dropped: u64,
    /// Records waiting for the writer.
    pub queued: u64,
}

impl AuditStatus {
    /// Prometheus text lines: `airlock_audit_records_written_total`,
    /// `airlock_audit_records_dropped_total`, `airlock_audit_queue_length`, `airlock_audit_degraded`.
    pub fn metrics_text(&self) -> String {
        format!(
            "# HELP airlock_audit_records_written_total Records (executions, approval decisions) written to the audit log.\n\
             # TYPE airlock_audit_records_written_total counter\n\
             airlock_audit_records_written_total {}\n\
             # HELP airlock_audit_records_dropped_total Audit records (executions, approval decisions) lost (queue full or write failed).\n\
             # TYPE airlock_audit_records_dropped_total counter\n\
             airlock_audit_records_dropped_total {}\n\
             # HELP airlock_audit_queue_length Audit records waiting for the writer.\n\
             # TYPE airlock_audit_queue_length gauge\n\
             airlock_audit_queue_length {}\n\
             # HELP airlock_audit_degraded 1 while the audit log cannot record (see GET /v1/health).\n\
             # TYPE airlock_audit_degraded gauge\n\
             airlock_audit_degraded {}\n",
            self.written,
            self.dropped,
            self.queued,
            u8::from(self.state == AuditState::Degraded),
        )
    }
}

/// Why one record may be missing from the log; meant for the execution's response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuditWarning(pub String);

impl AuditLog {
    /// The log `settings` describe; with `enabled = false`, a log that records nothing. The
    /// directory is `settings.directory`, else `state` (the daemon's state directory), else
    /// `default_directory` of this process's environment. Fails when the directory or file
    /// cannot be prepared (the daemon should not start unrecorded without the operator saying
    /// so with `enabled = false`).
    pub fn open(settings: &AuditSettings, state: Option<&Path>) -> Result<AuditLog, AuditLogError> {
        if !settings.enabled {
            return Ok(AuditLog::disabled());
        }
        let directory = match (&settings.directory, state) {
            (Some(d), _) => d.clone(),
            (None, Some(state)) => state.to_owned(),
            (None, None) => default_directory(|name| std::env::var_os(name))?,
        };
        AuditLog::open_in(&directory, settings.max_size_bytes, settings.keep)
    }

    /// The log in `directory` with the given rotation, with the default queue capacity.
    pub fn open_in(
        directory: &Path,
        max_size_bytes: u64,
        keep: u32,
    ) -> Result<AuditLog, AuditLogError> {
        AuditLog::open_with_capacity(directory, max_size_bytes, keep, QUEUE_CAPACITY)
    }

    /// As [`AuditLog::open_in`] with `capacity` queued records at most.
    pub fn open_with_capacity(
        directory: &Path,
        max_size_bytes: u64,
        keep: u32,
        capacity: usize,
    ) -> Result<AuditLog, AuditLogError> {
        database::prepare_directory(directory)?;
        let path = directory.join(FILE_NAME);
        let conn = database::open_for_writing(&path)?;
        let shared = Arc::new(Shared {
            path: path.clone(),
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            is_degraded: AtomicBool::new(false),
            degraded: Mutex::new(None),
        });
        let (sender, receiver) = std::sync::mpsc::sync_channel(capacity);
        let writer = Writer {
            directory: directory.to_owned(),
            max_size_bytes,
            keep,
            conn: Some(conn),
            shared: shared.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || writer.run(receiver))
            .map_err(AuditLogError::Thread)?;
        tracing::info!(path = %path.display(), max_size_bytes, keep, "audit log open");
        Ok(AuditLog {
            inner: Some(Arc::new(Inner {
                sender: Some(sender),
                thread: Some(thread),
                shared,
            })),
        })
    }

    /// A log that records nothing (`[audit] enabled = false`).
    pub fn disabled() -> AuditLog {
        AuditLog { inner: None }
    }

    /// Queues `record` for the writer without waiting. `Err` says the record was dropped (queue
    /// full) or that the log is degraded (earlier writes failed, so this one may fail too): put
    /// it in the execution's response as a warning.
    pub fn record(&self, record: ExecutionRecord) -> Result<(), AuditWarning> {
        self.send(Message::Record(Box::new(record)), "this execution")
    }

    /// Queues the record of a decision on an approval (approved, denied or expired), as
    /// [`AuditLog::record`]: never waits; `Err` says it was dropped or may be lost.
    pub fn record_approval(&self, record: ApprovalRecord) -> Result<(), AuditWarning> {
        self.send(
            Message::Approval(Box::new(record)),
            "this approval decision",
        )
    }

    /// `try_send`s `message`, counting a drop and degrading the log when it cannot; `what` names
    /// the record in the warning ("this execution").
    fn send(&self, message: Message, what: &str) -> Result<(), AuditWarning> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        let shared = &inner.shared;
        let sent = {
            match inner.sender.as_ref() {
                Some(sender) => {
                    shared.queued.fetch_add(1, Ordering::Relaxed);
                    let sent = sender.try_send(message);
                    if sent.is_err() {
                        shared.queued.fetch_sub(1, Ordering::Relaxed);
                    }
                    sent.map_err(|e| matches!(e, TrySendError::Full(_)))
                }
                None => Err(false),
            }
        };
        match sent {
            Ok(()) => match shared.reason() {
                Some(reason) => Err(AuditWarning(format!(
                    "the audit log is degraded, {what} may not be recorded: {reason}"
                ))),
                None => Ok(()),
            },
            Err(full) => {
                shared.dropped.fetch_add(1, Ordering::Relaxed);
                let reason = if full {
                    format!(
                        "the audit log's queue is full ({} records wait to be written to {}); {what} was not recorded",
                        shared.queued.load(Ordering::Relaxed),
                        shared.path.display()
                    )
                } else {
                    format!(
                        "the audit log {} is closed; {what} was not recorded",
                        shared.path.display()
                    )
                };
                if shared.degrade(reason.clone()) {
                    tracing::error!(%reason, "audit record dropped");
                }
                Err(AuditWarning(reason))
            }
        }
    }

    /// Waits until everything recorded so far has been written (or failed), at most `timeout`.
    /// Blocks: for shutdown and tests, never the execution path.
    pub fn flush(&self, timeout: Duration) -> bool {
        let Some(inner) = &self.inner else {
            return true;
        };
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        let sent = {
            match inner.sender.as_ref() {
                Some(sender) => {
                    inner.shared.queued.fetch_add(1, Ordering::Relaxed);
                    // A blocking send: flushing waits for room behind the queued records.
                    sender.send(Message::Flush(done)).is_ok()
                }
                None => false,
            }
        };
        sent && wait.recv_timeout(timeout).is_ok()
    }

    /// Health and counters.
    pub fn status(&self) -> AuditStatus {
        let Some(inner) = &self.inner else {
            return AuditStatus {
                state: AuditState::Disabled,
                path: None,
                reason: None,
                written: 0,
                dropped: 0,
                queued: 0,
            };
        };
        let shared = &inner.shared;
        let reason = shared.reason();
        AuditStatus {
            state: if reason.is_some() {
                AuditState::Degraded
            } else {
                AuditState::Ok
            },
            path: Some(shared.path.clone()),
            reason,
            written: shared.written.load(Ordering::Relaxed),
            dropped: shared.dropped.load(Ordering::Relaxed),
            queued: shared.queued.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Inner {
    /// Lets the writer finish what is queued (bounded by the queue's capacity), then joins it,
    /// so a daemon that shuts down cleanly loses no record.
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The audit directory when the policy names none: `$STATE_DIRECTORY` (set by systemd's
/// `StateDirectory=`; the first entry if it lists several), else `$XDG_STATE_HOME/airlock`,
/// else `$HOME/.local/state/airlock`. Relative values are ignored, as the XDG spec asks.
pub(crate) fn default_directory(
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf, AuditLogError> {
    let absolute = |value: OsString| {
        let path = PathBuf::from(value);
        path.is_absolute().then_some(path)
    };
    if let Some(first) = env("STATE_DIRECTORY").and_then(|value| {
        let text = value.to_string_lossy().into_owned();
        text.split(':').next().map(OsString::from)
    }) && let Some(path) = absolute(first)
    {
        return Ok(path);
    }
    if let Some(path) = env("XDG_STATE_HOME").and_then(absolute) {
        return Ok(path.join("airlock"));
    }
    if let Some(path) = env("HOME").and_then(absolute) {
        return Ok(path.join(".local/state/airlock"));
    }
    Err(AuditLogError::NoDirectory)
}

#[cfg(test)]
mod tests;
