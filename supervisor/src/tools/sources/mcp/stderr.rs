//! A stdio server's stderr: read line by line (each line at most [`MAX_LINE`] bytes, the rest
//! of a longer one dropped), scanned for secrets (the values the server was given, and the
//! embedded shape rules: tokens of every known kind), written to the daemon's log under the
//! server's name, and kept in a ring of its last [`RING_BYTES`], so an error about the server
//! can quote what it said last: "connection closed" alone tells an operator nothing.

use crate::secrets::scanner::SecretScanner;
use crate::secrets::store::SecretValue;
use crate::tools::SecretsUsed;
use std::collections::VecDeque;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tracing::info;

/// The ring's size: the last 64 KiB of what the server printed.
pub const RING_BYTES: usize = 64 * 1024;

/// The longest line kept; a longer one is cut there (marked with `…`).
pub const MAX_LINE: usize = 4 * 1024;

/// What an error quotes: the last lines, at most this many and this many bytes.
const QUOTED_LINES: usize = 8;
const QUOTED_BYTES: usize = 1024;

/// The embedded shape rules, built once (`None` if they cannot be: then only the server's own
/// secrets are redacted, and the daemon says so once).
fn shapes() -> Option<&'static SecretScanner> {
    static SHAPES: OnceLock<Option<SecretScanner>> = OnceLock::new();
    SHAPES
        .get_or_init(|| match SecretScanner::new(std::iter::empty::<(&str, &SecretValue)>()) {
            Ok(scanner) => Some(scanner),
            Err(e) => {
                tracing::error!("tool servers' stderr is redacted of their own secrets only: the shape rules did not build: {e}");
                None
            }
        })
        .as_ref()
}

/// The last lines a server printed on stderr, redacted.
#[derive(Debug, Default)]
pub struct StderrTail {
    ring: Mutex<Ring>,
    /// Set when the stream ended (the server closed stderr or exited).
    ended: tokio::sync::watch::Sender<bool>,
}

#[derive(Debug, Default)]
struct Ring {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    /// Keeps `line` (already redacted), dropping the oldest lines over [`RING_BYTES`].
    fn push(&self, line: String) {
        let mut ring = self
            .ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ring.bytes += line.len();
        ring.lines.push_back(line);
        while ring.bytes > RING_BYTES {
            let Some(old) = ring.lines.pop_front() else {
                break;
            };
            ring.bytes -= old.len();
        }
    }

    /// The last lines, joined with ` | ` for one log line or error message: at most
    /// [`QUOTED_LINES`] non-blank lines and about [`QUOTED_BYTES`]. `None` when the server
    /// printed nothing.
    pub fn last_lines(&self) -> Option<String> {
        let ring = self
            .ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut picked: Vec<&str> = Vec::new();
        let mut bytes = 0;
        for line in ring.lines.iter().rev().map(|l| l.trim_end()) {
            if line.trim().is_empty() {
                continue;
            }
            if picked.len() == QUOTED_LINES
                || (bytes + line.len() > QUOTED_BYTES && !picked.is_empty())
            {
                break;
            }
            bytes += line.len();
            picked.push(line);
        }
        if picked.is_empty() {
            return None;
        }
        picked.reverse();
        let mut text = picked.join(" | ");
        if text.len() > QUOTED_BYTES {
            let mut cut = QUOTED_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        Some(text)
    }

    /// Waits until the stream ended, at most `limit`: a server that failed has usually said
    /// why on stderr just before its stdout closed, and that may still be in the pipe.
    pub async fn wait_ended(&self, limit: Duration) {
        let mut ended = self.ended.subscribe();
        let _ = tokio::time::timeout(limit, ended.wait_for(|e| *e)).await;
    }

    /// Reads `stderr` to its end: each line redacted, logged and kept.
    pub async fn read(&self, mut stderr: impl AsyncRead + Unpin, secrets: SecretsUsed) {
        let mut line: Vec<u8> = Vec::new();
        let mut cut = false;
        let mut buf = vec![0u8; 8 * 1024];
        let emit = |line: &mut Vec<u8>, cut: &mut bool| {
            let mut text = String::from_utf8_lossy(line).into_owned();
            if *cut {
                text.push('…');
            }
            line.clear();
            *cut = false;
            // A server may print the token it was given, or one it found; neither reaches
            // the log or an error.
            let mut text = secrets.redact_text(text);
            if let Some(scanner) = shapes() {
                text = scanner.scan_text(&text).0.into_owned();
            }
            info!(target: "airlock::mcp_server::stderr", "{text}");
            self.push(text);
        };
        loop {
            let n = match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for &b in &buf[..n] {
                if b == b'\n' {
                    emit(&mut line, &mut cut);
                } else if line.len() < MAX_LINE {
                    line.push(b);
                } else {
                    cut = true;
                }
            }
        }
        if !line.is_empty() || cut {
            emit(&mut line, &mut cut);
        }
        self.ended.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_last_lines_redacted_and_bounded() {
        let tail = StderrTail::default();
        let mut secrets = SecretsUsed::default();
        secrets.add_named(
            "token",
            crate::secrets::store::SecretValue::new("hunter2-secret".into()),
        );
        let mut text = String::new();
        for i in 0..10_000 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str(&"x".repeat(100_000));
        text.push('\n');
        // Split, so the project's own sources stay free of a token's shape (the scanner's
        // false-positive test reads them).
        text.push_str(concat!(
            "a stray key gh",
            "p_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES\n"
        ));
        text.push_str("Error: the token hunter2-secret was refused\n");
        tail.read(text.as_bytes(), secrets).await;
        {
            let ring = tail.ring.lock().unwrap();
            assert!(ring.bytes <= RING_BYTES, "{}", ring.bytes);
            assert_eq!(
                ring.bytes,
                ring.lines.iter().map(String::len).sum::<usize>()
            );
            // The long line was cut.
            assert!(
                ring.lines
                    .iter()
                    .all(|l| l.len() <= MAX_LINE + '…'.len_utf8())
            );
        }
        let last = tail.last_lines().unwrap();
        assert!(last.ends_with("was refused"), "{last}");
        assert!(!last.contains("hunter2-secret"), "{last}");
        assert!(!last.contains("ghp_hGA"), "{last}");
        assert!(last.contains("a stray key [REDACTED"), "{last}");
        assert!(
            last.len() <= QUOTED_BYTES + '…'.len_utf8(),
            "{}",
            last.len()
        );
        // It ended, so waiting returns at once.
        tokio::time::timeout(
            Duration::from_secs(1),
            tail.wait_ended(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn nothing_printed_is_nothing_quoted() {
        let tail = StderrTail::default();
        tail.read(&b"\n  \n"[..], SecretsUsed::default()).await;
        assert_eq!(tail.last_lines(), None);
    }

    #[test]
    fn a_line_without_its_end_is_quoted_too() {
        let tail = StderrTail::default();
        tail.push("first".into());
        tail.push("ModuleNotFoundError: No module named 'mcp_server_time'".into());
        assert_eq!(
            tail.last_lines().unwrap(),
            "first | ModuleNotFoundError: No module named 'mcp_server_time'"
        );
    }
}
