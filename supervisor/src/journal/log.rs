//! The journal's intent log, `journal.log` beside `journal.sqlite`: the two records of each
//! live call of a session ("sent" before the call is made, its outcome after) are appended
//! here, one `write` each, instead of being committed to the store one transaction each (a
//! SQLite commit writes its pages to the WAL in three or four `pwrite`s). They are folded into
//! the store in one transaction when an execution of a session ends, before the store is read,
//! and when the daemon starts: what a killed daemon appended is in the file (the page cache
//! keeps it through SIGKILL), and the next start folds it. An OS crash may lose the last
//! records, as with the store's `synchronous = NORMAL`: a call then goes out again with the
//! same idempotency key.
//!
//! A daemon killed between a fold's commit and the truncation that follows it applies those
//! records again at its next start: each record sets what it sets, so the store ends the same,
//! except that a call's `sends` count is one higher, and its `attempt` too when its outcome
//! was among them (its next deliberate send gets a key never used; a call still in flight
//! keeps its own, since no outcome of it was).
//!
//! A frame is the body's length (u32, little-endian), its CRC-32, then the body (a postcard
//! [`LogRecord`]). A frame torn by a crash mid-write (short, or its CRC wrong) ends the log
//! when it is recovered; a write that fails is cut off again, so the frames before it and
//! after it stay whole.

use super::store::{LogRecord, StoreError};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{FileExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Name of the log in the journal directory.
pub(crate) const FILE_NAME: &str = "journal.log";

/// Bytes before a frame's body: its length and its CRC-32.
const HEADER: usize = 8;

/// The largest body a frame may have: a result fits in one worker frame (32 MiB), plus room
/// for the record around it. A longer length read back is damage, not a record.
const MAX_BODY: usize = 40 << 20;

/// The intent log of a journal.
#[derive(Debug)]
pub struct IntentLog {
    path: PathBuf,
    file: Mutex<LogFile>,
    /// Something was appended since the last fold (a fold with nothing to do takes no lock).
    pending: AtomicBool,
}

#[derive(Debug)]
struct LogFile {
    file: File,
    /// Bytes of whole frames in the file.
    len: u64,
    /// A failed write could not be cut off again: nothing more is appended (until a restart
    /// recovers the log), since what follows the fragment could not be read back.
    broken: bool,
}

impl IntentLog {
    /// Opens (creating, `0600`) the log in `directory`, which the store has prepared, and
    /// reads what it holds: the records, and how many bytes of a torn last frame were dropped.
    pub fn open(directory: &Path) -> Result<(IntentLog, Vec<LogRecord>, u64), StoreError> {
        let path = directory.join(FILE_NAME);
        let fail = |message: String| StoreError::Log {
            path: path.display().to_string(),
            message,
        };
        // O_NOFOLLOW: a symbolic link planted in the directory is refused, not written through.
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| fail(e.to_string()))?;
        let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
        if !meta.is_file() {
            return Err(fail("not a regular file".into()));
        }
        if meta.mode() & 0o077 != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| fail(e.to_string()))?;
        }
        let (records, whole) = read_frames(&file, meta.len()).map_err(|e| fail(e.to_string()))?;
        let torn = meta.len() - whole;
        if torn > 0 {
            file.set_len(whole).map_err(|e| fail(e.to_string()))?;
        }
        let log = IntentLog {
            path,
            file: Mutex::new(LogFile {
                file,
                len: whole,
                broken: false,
            }),
            pending: AtomicBool::new(!records.is_empty()),
        };
        Ok((log, records, torn))
    }

    /// Appends one record with one write. A write that fails is cut off again, so the log
    /// stays a run of whole frames.
    pub fn append(&self, record: &LogRecord) -> Result<(), StoreError> {
        let body = postcard::to_allocvec(record).map_err(|e| self.fail(e.to_string()))?;
        if body.len() > MAX_BODY {
            return Err(self.fail(format!(
                "a record of {} bytes is over the {MAX_BODY} byte limit",
                body.len()
            )));
        }
        let mut frame = Vec::with_capacity(HEADER + body.len());
        // The length fits: MAX_BODY is far below u32::MAX.
        frame.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
        frame.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        frame.extend_from_slice(&body);
        let mut log = self.lock();
        if log.broken {
            return Err(self.fail(
                "a failed write left part of a record that could not be removed; restart the daemon to recover the log".into(),
            ));
        }
        if let Err(e) = log.file.write_all(&frame) {
            let len = log.len;
            if let Err(cut) = log.file.set_len(len) {
                log.broken = true;
                return Err(self.fail(format!("{e}; and part of the record may remain ({cut})")));
            }
            return Err(self.fail(e.to_string()));
        }
        log.len += frame.len() as u64;
        self.pending.store(true, Ordering::Release);
        Ok(())
    }

    /// Hands every record to `fold` (which writes them to the store) and, if it succeeds,
    /// empties the log; true if there was anything. Appends wait meanwhile, so nothing is
    /// appended between the read and the truncation. Nothing to do: no lock taken.
    pub fn fold(
        &self,
        fold: impl FnOnce(&[LogRecord]) -> Result<(), StoreError>,
    ) -> Result<bool, StoreError> {
        if !self.pending.load(Ordering::Acquire) {
            return Ok(false);
        }
        let mut log = self.lock();
        let (records, whole) =
            read_frames(&log.file, log.len).map_err(|e| self.fail(e.to_string()))?;
        if whole != log.len {
            // Appends are cut back when they fail, so this is damage from outside.
            return Err(self.fail(format!(
                "a damaged record at byte {whole}; the records before it are kept"
            )));
        }
        fold(&records)?;
        log.file.set_len(0).map_err(|e| self.fail(e.to_string()))?;
        log.len = 0;
        self.pending.store(false, Ordering::Release);
        Ok(true)
    }

    /// A log on `file` as it is (for tests: `/dev/full` is a full disk).
    #[cfg(test)]
    pub(crate) fn on_file(file: File) -> IntentLog {
        IntentLog {
            path: PathBuf::from("/dev/full"),
            file: Mutex::new(LogFile {
                file,
                len: 0,
                broken: false,
            }),
            pending: AtomicBool::new(false),
        }
    }

    /// Bytes of records not folded yet.
    pub fn unfolded_bytes(&self) -> u64 {
        self.lock().len
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogFile> {
        // A panic while holding it left at most a frame that `len` does not count, which the
        // next append's cut-back or the next fold's length check deals with.
        self.file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn fail(&self, message: String) -> StoreError {
        StoreError::Log {
            path: self.path.display().to_string(),
            message,
        }
    }
}

/// The whole frames among the first `len` bytes of `file`, and where they end.
fn read_frames(file: &File, len: u64) -> std::io::Result<(Vec<LogRecord>, u64)> {
    let len = usize::try_from(len).map_err(|_| std::io::Error::other("log too large"))?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, 0)?;
    let mut records = Vec::new();
    let mut at = 0usize;
    while let Some(header) = bytes.get(at..at + HEADER) {
        let mut word = [0u8; 4];
        word.copy_from_slice(&header[..4]);
        let body_len = u32::from_le_bytes(word) as usize;
        word.copy_from_slice(&header[4..]);
        let crc = u32::from_le_bytes(word);
        if body_len > MAX_BODY {
            break;
        }
        let Some(body) = bytes.get(at + HEADER..at + HEADER + body_len) else {
            break;
        };
        if crc32fast::hash(body) != crc {
            break;
        }
        let Ok(record) = postcard::from_bytes::<LogRecord>(body) else {
            break;
        };
        records.push(record);
        at += HEADER + body_len;
    }
    Ok((records, at as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::store::{CallKey, Outcome};

    fn sent(n: u32) -> LogRecord {
        LogRecord::Sent {
            session: "s".into(),
            key: CallKey {
                tool: "t.x".into(),
                args_hash: "h".into(),
                occurrence: n,
            },
            execution: "e".into(),
            read_only: false,
            at_ms: 1,
        }
    }

    fn answered(n: u32, result: &str) -> LogRecord {
        LogRecord::Outcome {
            session: "s".into(),
            key: CallKey {
                tool: "t.x".into(),
                args_hash: "h".into(),
                occurrence: n,
            },
            outcome: Outcome::Ok {
                result: result.into(),
                clock_ms: 2,
            },
            at_ms: 3,
        }
    }

    #[test]
    fn records_come_back_in_order_and_a_fold_empties_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let (log, recovered, torn) = IntentLog::open(dir.path()).unwrap();
        assert_eq!((recovered.len(), torn), (0, 0));
        let mode = std::fs::metadata(dir.path().join(FILE_NAME))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let written = vec![sent(0), answered(0, "{\"n\":1}"), sent(1)];
        for r in &written {
            log.append(r).unwrap();
        }
        // A fold that fails keeps everything.
        let failed = log.fold(|_| Err(log.fail("store down".into())));
        assert!(failed.is_err());
        let mut folded = Vec::new();
        log.fold(|records| {
            folded.extend_from_slice(records);
            Ok(())
        })
        .unwrap();
        assert_eq!(folded, written);
        assert_eq!(
            std::fs::metadata(dir.path().join(FILE_NAME)).unwrap().len(),
            0
        );
        assert!(!log.fold(|_| panic!("nothing to fold")).unwrap());
    }

    /// What a killed daemon appended is read back at the next open; a frame torn by a crash
    /// mid-write ends the log and is cut off, so later appends follow whole frames.
    #[test]
    fn a_torn_last_frame_is_dropped_when_the_log_is_recovered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        {
            let (log, _, _) = IntentLog::open(dir.path()).unwrap();
            log.append(&sent(0)).unwrap();
            log.append(&answered(0, "1")).unwrap();
        }
        let whole = std::fs::metadata(&path).unwrap().len();
        for torn in [
            vec![9u8, 0, 0],                      // a header cut short
            vec![200, 0, 0, 0, 1, 2, 3, 4, 5],    // a body cut short
            vec![1, 0, 0, 0, 0, 0, 0, 0, 7],      // a wrong CRC
            vec![255, 255, 255, 255, 0, 0, 0, 0], // an impossible length
        ] {
            let mut f = OpenOptions::new().append(true).open(&path).unwrap();
            f.write_all(&torn).unwrap();
            drop(f);
            let (log, recovered, dropped) = IntentLog::open(dir.path()).unwrap();
            assert_eq!(recovered, vec![sent(0), answered(0, "1")]);
            assert_eq!(dropped, torn.len() as u64);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), whole);
            drop(log);
        }
        let (log, _, _) = IntentLog::open(dir.path()).unwrap();
        log.append(&sent(1)).unwrap();
        drop(log);
        let (_, recovered, dropped) = IntentLog::open(dir.path()).unwrap();
        assert_eq!((recovered.len(), dropped), (3, 0));
    }

    /// A full disk: the append fails, nothing of it stays, and the error names the file.
    #[test]
    fn an_append_that_fails_leaves_no_part_of_its_record() {
        // /dev/full fails every write with ENOSPC, as a full disk does.
        let log = IntentLog::on_file(OpenOptions::new().append(true).open("/dev/full").unwrap());
        let e = log.append(&sent(1)).unwrap_err().to_string();
        assert!(e.contains("/dev/full") && e.contains("No space"), "{e}");
        assert!(!log.pending.load(Ordering::Acquire));
        // /dev/full cannot be cut back either: the log takes no more records.
        let again = log.append(&sent(2)).unwrap_err().to_string();
        assert!(again.contains("restart the daemon"), "{again}");
    }

    #[test]
    fn a_symbolic_link_in_place_of_the_log_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/null", dir.path().join(FILE_NAME)).unwrap();
        assert!(IntentLog::open(dir.path()).is_err());
    }
}
