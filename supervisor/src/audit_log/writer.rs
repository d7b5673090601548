//! The one thread that writes the audit database: it takes records from a bounded channel,
//! writes whatever has queued up in one transaction, rotates the file when it passes its size,
//! and reports failures as the log's degraded status instead of stopping.

use super::database::{self, FILE_NAME};
use super::record::{ApprovalRecord, ExecutionRecord};
use super::{AuditLogError, Shared};
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Duration;
use tracing::{error, info, warn};

/// What one transaction writes.
#[derive(Default)]
struct Batch {
    executions: Vec<ExecutionRecord>,
    approvals: Vec<ApprovalRecord>,
}

impl Batch {
    fn len(&self) -> usize {
        self.executions.len() + self.approvals.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn clear(&mut self) {
        self.executions.clear();
        self.approvals.clear();
    }
}

/// Most records written in one transaction: bounds how long one commit holds the write lock
/// and how much a failed batch loses.
const MAX_BATCH: usize = 512;

/// How long the writer lets records gather after the first of a batch. An execution queues its
/// record just before its response is written; a commit started at once (~0.2 ms of CPU) then
/// competes with that response, and with the client reading it, on a small machine. A moment
/// later the response is out, and more records share the commit under load. A crash loses
/// what is queued either way; this adds at most this long to it.
const GATHER: Duration = Duration::from_millis(1);

pub(super) enum Message {
    Record(Box<ExecutionRecord>),
    Approval(Box<ApprovalRecord>),
    /// Answered once everything sent before it has been written (or has failed).
    Flush(SyncSender<()>),
}

pub(super) struct Writer {
    pub directory: PathBuf,
    pub max_size_bytes: u64,
    pub keep: u32,
    pub conn: Option<Connection>,
    pub shared: Arc<Shared>,
}

impl Writer {
    /// Runs until every sender is gone and the queue is empty.
    pub fn run(mut self, messages: Receiver<Message>) {
        let mut batch = Batch::default();
        let mut flushes = Vec::new();
        while let Ok(first) = messages.recv() {
            // A flush is answered without delay (shutdown and tests wait on it).
            if !matches!(first, Message::Flush(_)) {
                std::thread::sleep(GATHER);
            }
            let mut next = Some(first);
            while let Some(message) = next.take() {
                self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                match message {
                    Message::Record(record) => batch.executions.push(*record),
                    Message::Approval(record) => batch.approvals.push(*record),
                    Message::Flush(done) => flushes.push(done),
                }
                if batch.len() < MAX_BATCH {
                    next = messages.try_recv().ok();
                }
            }
            if !batch.is_empty() {
                self.write(&batch);
                batch.clear();
            }
            for done in flushes.drain(..) {
                let _ = done.send(());
            }
        }
    }

    fn write(&mut self, batch: &Batch) {
        let path = self.directory.join(FILE_NAME);
        let n = batch.len() as u64;
        if self.conn.is_none() {
            // A previous rotation could not open the new file: try again with this batch.
            match database::open_for_writing(&path) {
                Ok(conn) => self.conn = Some(conn),
                Err(e) => {
                    self.lost(n, e.to_string());
                    return;
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        match database::insert(conn, &batch.executions, &batch.approvals) {
            Ok(()) => {
                self.shared.written.fetch_add(n, Ordering::Relaxed);
                self.shared.recovered();
            }
            Err(source) => {
                let e = AuditLogError::Sqlite { path, source };
                self.lost(n, e.to_string());
                return;
            }
        }
        self.rotate_if_full();
    }

    fn lost(&self, n: u64, reason: String) {
        self.shared.dropped.fetch_add(n, Ordering::Relaxed);
        let first = self.shared.degrade(format!(
            "{reason}; {n} audit record(s) lost (executions continue unrecorded until a write succeeds)"
        ));
        if first {
            error!(%reason, lost = n, "audit log write failed; executions continue unrecorded");
        }
    }

    fn rotate_if_full(&mut self) {
        let Some(conn) = self.conn.as_ref() else {
            return;
        };
        let path = self.directory.join(FILE_NAME);
        match database::size(conn) {
            Ok(size) if size > self.max_size_bytes => {}
            Ok(_) => return,
            Err(e) => {
                warn!(path = %path.display(), error = %e, "cannot read the audit log's size");
                return;
            }
        }
        match database::leave_wal(conn) {
            Ok(true) => {}
            Ok(false) => {
                // A reader holds the file; rotate after a later batch.
                return;
            }
            Err(e) => {
                warn!(path = %path.display(), error = %e, "cannot prepare the audit log for rotation");
                return;
            }
        }
        // Close before renaming, so no handle keeps writing into the renamed file.
        self.conn = None;
        if let Err(e) = database::shift_files(&self.directory, self.keep) {
            let _ = self.shared.degrade(format!(
                "cannot rotate the audit log in {}: {e}",
                self.directory.display()
            ));
            error!(directory = %self.directory.display(), error = %e, "audit log rotation failed");
        } else {
            info!(path = %path.display(), keep = self.keep, "audit log rotated");
        }
        // On failure the next batch tries again and reports.
        self.conn = database::open_for_writing(&path).ok();
    }
}
