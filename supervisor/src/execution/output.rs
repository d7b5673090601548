//! What an execution's program says to the agent: its console output, bounded, and everything
//! of it scanned for secrets on the way out, with what the scanner replaced.

use super::response::note_findings;
use crate::agent_api::{ConsoleStream, ExecutionEvent, Redaction, RedactionPlace};
use crate::secrets::scanner::SecretScanner;
use airlock_proto::ConsoleLevel;
use serde_json::Value;

/// The program's agent-bound text so far.
#[derive(Debug)]
pub(super) struct Output {
    /// Scans what the program prints, returns and fails with.
    pub(super) scanner: SecretScanner,
    /// What the scanner replaced in the program's own output (console, progress, result,
    /// error).
    pub(super) redactions: Vec<Redaction>,
    pub(super) stdout: String,
    pub(super) stderr: String,
    bytes: u64,
    /// Lines were dropped past `max_bytes`.
    pub(super) truncated: bool,
    pub(super) max_bytes: u64,
}

impl Output {
    pub(super) fn new(scanner: SecretScanner, max_bytes: u64) -> Output {
        Output {
            scanner,
            redactions: Vec::new(),
            stdout: String::new(),
            stderr: String::new(),
            bytes: 0,
            truncated: false,
            max_bytes,
        }
    }

    /// Redacts secrets in the program's agent-bound text, remembering what it replaced.
    pub(super) fn scan_text(&mut self, place: RedactionPlace, text: String) -> String {
        let (clean, findings) = self.scanner.scan_text(&text);
        if findings.is_empty() {
            return text;
        }
        let clean = clean.into_owned();
        note_findings(&mut self.redactions, place, &findings);
        clean
    }

    /// Redacts secrets in one of the program's agent-bound values.
    pub(super) fn scan_json(&mut self, place: RedactionPlace, value: &mut Value) {
        let findings = self.scanner.scan_json(value);
        note_findings(&mut self.redactions, place, &findings);
    }

    /// A line the program printed: scanned and kept, and the event that streams it; `None`
    /// past the output limit.
    pub(super) fn console(&mut self, level: ConsoleLevel, text: String) -> Option<ExecutionEvent> {
        let (stream, place) = if level.is_stderr() {
            (ConsoleStream::Stderr, RedactionPlace::Stderr)
        } else {
            (ConsoleStream::Stdout, RedactionPlace::Stdout)
        };
        let text = self.scan_text(place, text);
        // The worker enforces the output limit; this is the supervisor's own backstop so a
        // misbehaving worker cannot make the daemon buffer without bound.
        let room = usize::try_from(self.max_bytes.saturating_sub(self.bytes)).unwrap_or(usize::MAX);
        let line_len = text.len() + 1;
        if line_len > room {
            self.truncated = true;
            return None;
        }
        self.bytes += line_len as u64;
        let buf = match stream {
            ConsoleStream::Stdout => &mut self.stdout,
            ConsoleStream::Stderr => &mut self.stderr,
        };
        buf.push_str(&text);
        buf.push('\n');
        let level = format!("{level:?}").to_lowercase();
        Some(ExecutionEvent::Console {
            stream,
            level,
            text,
        })
    }
}
