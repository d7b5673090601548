//! Scanning a stream of text chunks (a program's stdout, a streamed tool result) without
//! letting a secret through because it was split across two chunks.
//!
//! The scanner keeps the last [`SecretScanner::overlap`] bytes of what it was given and emits
//! only what lies before them: any match up to that long that ends in the held-back part is
//! seen whole when the next chunk arrives. A match that is still running into the held-back
//! part (it starts before the cut and reaches past it) pushes the cut back to its start, so it
//! too is rescanned whole. A few dozen bytes of what was already emitted are kept as context,
//! so a word boundary at the start of the held-back part is judged as it would be in one piece.
//!
//! Held-back text is bounded: a match that keeps growing past [`MAX_HELD_BACK`] bytes (no real
//! credential is that long) is emitted as redacted so far.

use super::{Finding, SecretScanner};

/// The most a stream holds back, however long a running match is.
pub const MAX_HELD_BACK: usize = 1 << 20;

/// Emitted bytes kept to judge the first characters of the held-back text in context.
const CONTEXT: usize = 64;

/// What one call emitted: redacted text and its findings (offsets from the start of the
/// stream, in the original text).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StreamOutput {
    pub text: String,
    pub findings: Vec<Finding>,
}

/// A stream being scanned: feed chunks with [`StreamScanner::push`], end with
/// [`StreamScanner::finish`].
#[derive(Debug)]
pub struct StreamScanner {
    scanner: SecretScanner,
    /// Tail of the emitted text (original, unredacted), for context only.
    context: String,
    /// Received and not yet emitted.
    pending: String,
    /// Stream offset of `pending`'s first byte.
    offset: usize,
}

impl Drop for StreamScanner {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        // Held-back text may hold a secret that was never emitted.
        self.pending.zeroize();
        self.context.zeroize();
    }
}

impl StreamScanner {
    pub(crate) fn new(scanner: SecretScanner) -> Self {
        StreamScanner {
            scanner,
            context: String::new(),
            pending: String::new(),
            offset: 0,
        }
    }

    /// Adds a chunk; returns what can now be emitted safely (possibly nothing).
    pub fn push(&mut self, chunk: &str) -> StreamOutput {
        self.pending.push_str(chunk);
        let overlap = self.scanner.overlap();
        if self.pending.len() <= overlap {
            return StreamOutput::default();
        }
        let mut text = std::mem::take(&mut self.context);
        let from = text.len();
        text.push_str(&self.pending);
        let spans = self.scanner.spans(&text, from, &[]);
        let mut cut = floor_boundary(&text, text.len() - overlap);
        for span in &spans {
            if span.start < cut && span.end > cut {
                cut = span.start;
            }
        }
        if cut <= from && text.len() - from > MAX_HELD_BACK {
            // A match has been running for a megabyte: emit it redacted as it stands.
            cut = text.len();
        }
        let out = self.emit(&text, from, cut, &spans);
        zeroize::Zeroize::zeroize(&mut text);
        out
    }

    /// Ends the stream: scans and emits everything held back.
    pub fn finish(mut self) -> StreamOutput {
        let mut text = std::mem::take(&mut self.context);
        let from = text.len();
        text.push_str(&self.pending);
        let spans = self.scanner.spans(&text, from, &[]);
        let out = self.emit(&text, from, text.len(), &spans);
        zeroize::Zeroize::zeroize(&mut text);
        out
    }

    /// Emits `text[from..cut]` (redacted by the spans that lie inside it) and keeps the rest.
    fn emit(&mut self, text: &str, from: usize, cut: usize, spans: &[super::Span]) -> StreamOutput {
        let cut = cut.max(from);
        let emitted: Vec<super::Span> = spans
            .iter()
            .filter(|s| s.end <= cut)
            .map(|s| super::Span {
                start: s.start - from,
                end: s.end - from,
                kind: s.kind,
            })
            .collect();
        let out_text = self.scanner.redact(&text[from..cut], &emitted);
        let findings = emitted
            .iter()
            .map(|s| self.scanner.finding(s, None, false, self.offset))
            .collect();
        self.offset += cut - from;
        let context_start = floor_boundary(text, cut.saturating_sub(CONTEXT));
        self.context = text[context_start..cut].to_owned();
        self.pending = text[cut..].to_owned();
        StreamOutput {
            text: out_text,
            findings,
        }
    }
}

/// The largest character boundary at or before `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}
