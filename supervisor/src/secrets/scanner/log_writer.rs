//! The daemon's own log, scanned: a `tracing_subscriber` writer that redacts every line before
//! it reaches stderr (or wherever the inner writer goes), so a credential that ends up in an
//! error message or a debug field never reaches the journal.
//!
//! ```no_run
//! use airlock_supervisor::secrets::scanner::{RedactingMakeWriter, SecretScanner, SharedScanner};
//! let scanner = SharedScanner::new(SecretScanner::new([]).expect("embedded rules"));
//! tracing_subscriber::fmt()
//!     .with_writer(RedactingMakeWriter::new(std::io::stderr, scanner.clone()))
//!     .init();
//! // On a policy reload: scanner.replace(new_scanner);
//! ```

use super::SecretScanner;
use std::io::Write;
use std::sync::{Arc, RwLock};
use tracing_subscriber::fmt::MakeWriter;

/// The scanner in use, replaceable while the daemon runs (policy reload brings new secrets).
#[derive(Debug, Clone)]
pub struct SharedScanner(Arc<RwLock<SecretScanner>>);

impl SharedScanner {
    pub fn new(scanner: SecretScanner) -> Self {
        SharedScanner(Arc::new(RwLock::new(scanner)))
    }

    /// The scanner now in use (a cheap clone).
    pub fn current(&self) -> SecretScanner {
        // A writer that panicked while holding the lock left the scanner itself intact.
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Puts a new scanner in place for every later `current`.
    pub fn replace(&self, scanner: SecretScanner) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = scanner;
    }
}

/// A [`MakeWriter`] whose writers scan each line with the current scanner.
#[derive(Debug, Clone)]
pub struct RedactingMakeWriter<M> {
    inner: M,
    scanner: SharedScanner,
}

impl<M> RedactingMakeWriter<M> {
    pub fn new(inner: M, scanner: SharedScanner) -> Self {
        RedactingMakeWriter { inner, scanner }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for RedactingMakeWriter<M> {
    type Writer = RedactingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter::new(self.inner.make_writer(), self.scanner.current())
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        RedactingWriter::new(self.inner.make_writer_for(meta), self.scanner.current())
    }
}

/// A writer that buffers up to each newline, scans the line and writes the redacted line to
/// the inner writer. What is left without a newline is written when the writer is dropped
/// (`tracing_subscriber` makes one writer per event, so that is the end of the event).
#[derive(Debug)]
pub struct RedactingWriter<W: Write> {
    inner: W,
    scanner: SecretScanner,
    line: Vec<u8>,
}

impl<W: Write> RedactingWriter<W> {
    pub fn new(inner: W, scanner: SecretScanner) -> Self {
        RedactingWriter {
            inner,
            scanner,
            line: Vec::new(),
        }
    }

    fn write_redacted(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(bytes);
        let (clean, _) = self.scanner.scan_text(&text);
        self.inner.write_all(clean.as_bytes())
    }

    fn drain_lines(&mut self) -> std::io::Result<()> {
        while let Some(newline) = self.line.iter().position(|&b| b == b'\n') {
            let rest = self.line.split_off(newline + 1);
            let line = std::mem::replace(&mut self.line, rest);
            self.write_redacted(&line)?;
            zeroize::Zeroize::zeroize(&mut { line });
        }
        Ok(())
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        self.drain_lines()?;
        Ok(buf.len())
    }

    /// Flushes the inner writer. A partial line stays buffered: writing half of it now could
    /// let a secret split across the flush through.
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            let rest = std::mem::take(&mut self.line);
            // Nowhere to report a failed log write from a drop; the line is lost either way.
            let _ = self.write_redacted(&rest);
            zeroize::Zeroize::zeroize(&mut { rest });
        }
        let _ = self.inner.flush();
    }
}
