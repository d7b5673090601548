//! The secret scanner: finds credentials in text and JSON on their way to a worker, an agent or
//! a log line, and replaces each with a marker naming the rule that found it.
//!
//! Two kinds of rules (operators' view: `docs/secret-scanning.md`):
//!
//! - **known secrets** (`known_secret`): every credential value the supervisor holds, as
//!   itself, base64/base64url in any alignment, hex, percent- or JSON-escaped, and as
//!   fragments of [`known_secret::MIN_FRAGMENT_LEN`] bytes or more. Marker
//!   `[REDACTED:known-secret]`, the same for every secret and every form: the text an agent
//!   sees must not tell it which credential it reached or which encoding gave it away (an
//!   attacker probing for a way past the scanner learns nothing from the marker). The
//!   [`Finding`] keeps the secret's name and the form for the audit log only.
//! - **shape rules** (`shape_rule`, data in `scanner/rules.toml`): credentials
//!   recognised by their shape (`ghp_…`, `AKIA…`, a PEM block, a JWT). Marker
//!   `[REDACTED:<rule-id>]`.
//!
//! Everything is linear in the input: Aho-Corasick automata and `regex` (finite automata, no
//! backtracking); a test holds the scan time of adversarial near misses to linear growth.
//!
//! # For the integrator
//!
//! - Build a [`SecretScanner`] with [`SecretScanner::new`] from `(name, &SecretValue)` pairs
//!   (from [`crate::secrets::store::SecretStore::get`] for every secret the policy names). It is
//!   an `Arc` inside: clone it freely; on a policy reload build a new one and swap it in (a
//!   [`SharedScanner`] does that for holders that must see the new one, such as the log
//!   writer). The shape rules are compiled once per process and shared by every scanner.
//! - [`SecretScanner::scan_text`] returns the redacted text (borrowed when nothing was found)
//!   and the findings; [`SecretScanner::scan_json`] redacts a `serde_json::Value` in place
//!   (strings and object keys; a known secret split across adjacent string values too).
//! - [`StreamScanner`] (from [`SecretScanner::stream`]) for stdout/stderr and other streams:
//!   it holds back [`SecretScanner::overlap`] bytes so that a secret split across chunks is
//!   caught; call [`StreamScanner::finish`] at the end of the stream.
//! - [`Finding`]s are `Serialize`: rule id and location (byte offsets, plus a JSON pointer for
//!   JSON), never the value. Their serialized form is what the trace may carry (no secret name);
//!   [`Finding::audit_record`] adds the secret's name and form for the audit log.
//!   "Fail the call" policy: a non-empty findings list is the signal.
//! - [`RedactingMakeWriter`] wraps the daemon's `tracing_subscriber` writer so every log line
//!   is scanned before it reaches stderr.

pub(crate) mod known_secret;
pub(crate) mod log_writer;
pub(crate) mod shape_rule;
pub(crate) mod stream;

pub use known_secret::{MIN_FRAGMENT_LEN, SecretForm};
pub use log_writer::{RedactingMakeWriter, RedactingWriter, SharedScanner};
pub use shape_rule::{ShapeRule, ShapeRules};
pub use stream::{StreamOutput, StreamScanner};

use crate::agent_api::{Redaction, RedactionPlace};
use crate::secrets::store::SecretValue;
use known_secret::KnownSecrets;
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// The rule id of known-secret findings, and the marker's name for them.
pub(crate) const KNOWN_SECRET_RULE: &str = "known-secret";

/// The least a stream holds back: longer than any shape rule's bounded match (a PEM RSA-4096
/// key is ~3.3 KB). Known secrets with a longer encoded form raise it.
pub(crate) const MIN_STREAM_OVERLAP: usize = 4096;

/// Errors building a scanner. They name the rule file and the rule.
#[derive(Debug, thiserror::Error)]
pub enum ScannerError {
    #[error("cannot read the secret scanner rules in {file}: {message}")]
    RuleFile { file: String, message: String },
    #[error("secret scanner rule `{id}` in {file}: {message}")]
    InvalidRule {
        file: String,
        id: String,
        message: String,
    },
    #[error("cannot build the secret scanner's automaton: {0}")]
    Automaton(String),
}

/// Where a finding is: byte offsets in the scanned text (for a stream, from the start of the
/// stream), or in a JSON string, with the string's JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    /// RFC 6901 pointer of the string (of the object whose key it is, if `in_key`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// The finding is in an object key, the last key of `pointer`'s object named by `start`..
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_key: bool,
    /// Byte offset of the first redacted byte, in the original (unredacted) text.
    pub start: usize,
    /// Byte offset after the last redacted byte.
    pub end: usize,
}

/// One redacted credential. Serializes as `{ "rule", "location" }`: safe for the trace an
/// agent can read. Never holds the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// `known-secret` or a shape rule's id.
    pub rule: String,
    pub location: Location,
    /// For a known secret: which one and how it appeared. Not serialized with the finding (an
    /// agent must not learn which credential it reached); see [`Finding::audit_record`].
    #[serde(skip)]
    pub known_secret: Option<KnownSecretFinding>,
}

/// The audit-only part of a known-secret finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KnownSecretFinding {
    /// The secret's name in the policy (`github-token`), never its value.
    pub name: String,
    pub form: SecretForm,
}

/// A finding as the audit log records it (operators read the audit log, agents do not).
#[derive(Debug, Serialize)]
pub struct AuditFinding<'a> {
    pub rule: &'a str,
    pub location: &'a Location,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub form: Option<SecretForm>,
}

impl Finding {
    /// The redaction this finding stands for, made in `place` (what the trace, the response
    /// and the audit log carry).
    pub fn redaction(&self, place: RedactionPlace) -> Redaction {
        Redaction {
            rule: self.rule.clone(),
            place,
            pointer: self.location.pointer.clone(),
            secret: self.known_secret.as_ref().map(|k| k.name.clone()),
        }
    }

    /// The finding with the secret's name and form, for the audit log.
    pub fn audit_record(&self) -> AuditFinding<'_> {
        AuditFinding {
            rule: &self.rule,
            location: &self.location,
            secret: self.known_secret.as_ref().map(|k| k.name.as_str()),
            form: self.known_secret.as_ref().map(|k| k.form),
        }
    }
}

/// What a redacted range is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpanKind {
    Known { secret: usize, form: SecretForm },
    Shape(usize),
}

/// A range to redact, in byte offsets of the scanned text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
    kind: SpanKind,
}

/// The scanner: shape rules plus the known secrets of one policy generation. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SecretScanner(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    rules: Arc<ShapeRules>,
    known: KnownSecrets,
    /// `[REDACTED:<id>]` per shape rule.
    markers: Vec<String>,
    overlap: usize,
}

impl SecretScanner {
    /// The embedded shape rules plus these known secrets (`(name, value)`; empty values are
    /// skipped).
    pub fn new<'a>(
        known: impl IntoIterator<Item = (&'a str, &'a SecretValue)>,
    ) -> Result<SecretScanner, ScannerError> {
        SecretScanner::with_rules(ShapeRules::embedded()?, known)
    }

    /// Given shape rules plus these known secrets.
    pub fn with_rules<'a>(
        rules: Arc<ShapeRules>,
        known: impl IntoIterator<Item = (&'a str, &'a SecretValue)>,
    ) -> Result<SecretScanner, ScannerError> {
        let known = KnownSecrets::new(known)?;
        let markers = rules
            .rules()
            .iter()
            .map(|r| format!("[REDACTED:{}]", r.id))
            .collect();
        let overlap = MIN_STREAM_OVERLAP.max(known.longest_form());
        Ok(SecretScanner(Arc::new(Inner {
            rules,
            known,
            markers,
            overlap,
        })))
    }

    /// The shape rules in use.
    pub fn rules(&self) -> &ShapeRules {
        &self.0.rules
    }

    /// How many known secrets the scanner looks for.
    pub fn known_secret_count(&self) -> usize {
        self.0.known.len()
    }

    /// How many bytes a [`StreamScanner`] holds back: every match up to this long is caught
    /// across chunk boundaries.
    pub fn overlap(&self) -> usize {
        self.0.overlap
    }

    /// A scanner for one stream of text chunks.
    pub fn stream(&self) -> StreamScanner {
        StreamScanner::new(self.clone())
    }

    /// The text with every finding replaced by its marker (borrowed if there was none), and
    /// the findings in text order, with byte offsets into `text`.
    pub fn scan_text<'a>(&self, text: &'a str) -> (Cow<'a, str>, Vec<Finding>) {
        let spans = self.spans(text, 0, &[]);
        if spans.is_empty() {
            return (Cow::Borrowed(text), Vec::new());
        }
        let findings = spans
            .iter()
            .map(|s| self.finding(s, None, false, 0))
            .collect();
        (Cow::Owned(self.redact(text, &spans)), findings)
    }

    /// Redacts every string and object key of `value` in place; findings carry the JSON
    /// pointer of the string and byte offsets within it. A known secret split across
    /// adjacent string values of one array or object (in the object's key order) is caught:
    /// each piece is redacted.
    ///
    /// Two passes, so that a document of many short strings costs about what its text would:
    /// the first copies every string into one buffer and runs the keyword search and the
    /// known-secret windows over it once, noting which strings can hold a match; the second
    /// scans only those strings in full (and checks adjacent values for a split secret).
    pub fn scan_json(&self, value: &mut Value) -> Vec<Finding> {
        let mut findings = Vec::new();
        let mut leads = JsonLeads::of(self, value);
        let mut pointer = String::new();
        self.walk(value, &mut pointer, &[], &mut leads, &mut findings);
        findings
    }

    fn walk(
        &self,
        value: &mut Value,
        pointer: &mut String,
        extra: &[Span],
        leads: &mut JsonLeads,
        findings: &mut Vec<Finding>,
    ) {
        match value {
            Value::String(text) => {
                let spans = self.spans_with(text, extra, leads.next_string());
                if !spans.is_empty() {
                    findings.extend(
                        spans
                            .iter()
                            .map(|s| self.finding(s, Some(pointer.as_str()), false, 0)),
                    );
                    *text = self.redact(text, &spans);
                }
            }
            Value::Array(items) => {
                let joined = if leads.next_container() {
                    self.adjacent_pieces(items.iter())
                } else {
                    Vec::new()
                };
                for (index, item) in items.iter_mut().enumerate() {
                    let len = pointer.len();
                    pointer.push('/');
                    push_index(pointer, index);
                    let extra = joined_at(&joined, index);
                    self.walk(item, pointer, &extra, leads, findings);
                    pointer.truncate(len);
                }
            }
            Value::Object(map) => {
                let joined = if leads.next_container() {
                    self.adjacent_pieces(map.values())
                } else {
                    Vec::new()
                };
                // A redacted key becomes a new key (made unique if two redact alike) once the
                // values are done: renaming reorders the map.
                let mut renames: Vec<(String, String)> = Vec::new();
                for (index, (key, item)) in map.iter_mut().enumerate() {
                    let spans = self.spans_with(key, &[], leads.next_string());
                    if !spans.is_empty() {
                        findings.extend(
                            spans
                                .iter()
                                .map(|s| self.finding(s, Some(pointer.as_str()), true, 0)),
                        );
                        renames.push((key.clone(), self.redact(key, &spans)));
                    }
                    let len = pointer.len();
                    pointer.push('/');
                    push_pointer_token(pointer, key);
                    let extra = joined_at(&joined, index);
                    self.walk(item, pointer, &extra, leads, findings);
                    pointer.truncate(len);
                }
                for (old, new) in renames {
                    if let Some(v) = map.remove(&old) {
                        let mut unique = new.clone();
                        let mut n = 2;
                        while map.contains_key(&unique) {
                            unique = format!("{new} ({n})");
                            n += 1;
                        }
                        map.insert(unique, v);
                    }
                }
            }
            _ => {}
        }
    }

    /// Known secrets that cross the boundary between adjacent string values, as ranges in each
    /// piece, sorted by the value's index among its siblings.
    fn adjacent_pieces<'v>(&self, siblings: impl Iterator<Item = &'v Value>) -> Vec<(usize, Span)> {
        let mut out: Vec<(usize, Span)> = Vec::new();
        if self.0.known.is_empty() {
            return out;
        }
        let mut joined = zeroize::Zeroizing::new(String::new());
        let mut starts: Vec<usize> = Vec::new();
        let mut first = 0;
        let mut siblings = siblings.enumerate().peekable();
        while siblings.peek().is_some() {
            // The next run of consecutive strings.
            joined.clear();
            starts.clear();
            for (index, value) in siblings.by_ref() {
                match value.as_str() {
                    Some(text) => {
                        if starts.is_empty() {
                            first = index;
                        }
                        starts.push(joined.len());
                        joined.push_str(text);
                    }
                    None if starts.is_empty() => continue,
                    None => break,
                }
            }
            if starts.len() < 2 {
                continue;
            }
            let mut found = Vec::new();
            self.0.known.find(&joined, 0, &mut found);
            for m in found {
                // The piece holding the match's first byte, and the one holding its last.
                let first_piece = starts.partition_point(|&s| s <= m.start) - 1;
                let last_piece = starts.partition_point(|&s| s < m.end) - 1;
                if first_piece == last_piece {
                    continue; // inside one value: that value's own scan finds it
                }
                for piece in first_piece..=last_piece {
                    let begin = starts[piece];
                    let piece_end = starts.get(piece + 1).copied().unwrap_or(joined.len());
                    let start = m.start.max(begin) - begin;
                    let end = m.end.min(piece_end) - begin;
                    if start < end {
                        out.push((
                            first + piece,
                            Span {
                                start,
                                end,
                                kind: SpanKind::Known {
                                    secret: m.secret,
                                    form: SecretForm::Fragment,
                                },
                            },
                        ));
                    }
                }
            }
        }
        out.sort_by_key(|(index, _)| *index);
        out
    }

    /// Every range to redact in `text` from `from` on, plus `extra`, sorted and merged: where
    /// two overlap they become one range, named by a known secret if either is one, else by
    /// the rule that starts first (file order on a tie).
    fn spans(&self, text: &str, from: usize, extra: &[Span]) -> Vec<Span> {
        let spans: Vec<Span> = extra.to_vec();
        let mut known = Vec::new();
        self.0.known.find(text, from, &mut known);
        let mut shapes = Vec::new();
        self.0.rules.find(text, from, &mut shapes);
        self.merge(spans, known, shapes)
    }

    /// [`SecretScanner::spans`] of a whole JSON string, looking only where `lead` says a match
    /// can be.
    fn spans_with(&self, text: &str, extra: &[Span], lead: Lead) -> Vec<Span> {
        if lead.rules == 0 && !lead.known && extra.is_empty() {
            return Vec::new();
        }
        let mut known = Vec::new();
        if lead.known {
            self.0.known.find(text, 0, &mut known);
        }
        let mut shapes = Vec::new();
        self.0
            .rules
            .find_candidates(text, 0, lead.rules, &mut shapes);
        self.merge(extra.to_vec(), known, shapes)
    }

    /// `extra`, the known-secret matches and the shape matches as one sorted list of disjoint
    /// ranges.
    fn merge(
        &self,
        mut spans: Vec<Span>,
        known: Vec<known_secret::KnownMatch>,
        shapes: Vec<shape_rule::ShapeMatch>,
    ) -> Vec<Span> {
        spans.extend(known.into_iter().map(|m| Span {
            start: m.start,
            end: m.end,
            kind: SpanKind::Known {
                secret: m.secret,
                form: m.form,
            },
        }));
        spans.extend(shapes.into_iter().map(|m| Span {
            start: m.start,
            end: m.end,
            kind: SpanKind::Shape(m.rule),
        }));
        if spans.len() < 2 {
            return spans;
        }
        let rank = |k: &SpanKind| match k {
            SpanKind::Known { .. } => 0,
            SpanKind::Shape(rule) => 1 + rule,
        };
        spans.sort_by_key(|s| (s.start, rank(&s.kind)));
        let mut merged: Vec<Span> = Vec::with_capacity(spans.len());
        for span in spans {
            match merged.last_mut() {
                Some(last) if span.start < last.end => {
                    last.end = last.end.max(span.end);
                    if matches!(span.kind, SpanKind::Known { .. })
                        && !matches!(last.kind, SpanKind::Known { .. })
                    {
                        last.kind = span.kind;
                    }
                }
                _ => merged.push(span),
            }
        }
        merged
    }

    fn marker(&self, kind: &SpanKind) -> &str {
        match kind {
            SpanKind::Known { .. } => "[REDACTED:known-secret]",
            SpanKind::Shape(rule) => &self.0.markers[*rule],
        }
    }

    /// `text` with each (sorted, disjoint) span replaced by its marker.
    fn redact(&self, text: &str, spans: &[Span]) -> String {
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for span in spans {
            out.push_str(&text[at..span.start]);
            out.push_str(self.marker(&span.kind));
            at = span.end;
        }
        out.push_str(&text[at..]);
        out
    }

    fn finding(&self, span: &Span, pointer: Option<&str>, in_key: bool, base: usize) -> Finding {
        let (rule, known_secret) = match span.kind {
            SpanKind::Known { secret, form } => (
                KNOWN_SECRET_RULE.to_owned(),
                Some(KnownSecretFinding {
                    name: self.0.known.name(secret).to_owned(),
                    form,
                }),
            ),
            SpanKind::Shape(rule) => (self.0.rules.rules()[rule].id.clone(), None),
        };
        Finding {
            rule,
            location: Location {
                pointer: pointer.map(str::to_owned),
                in_key,
                start: base + span.start,
                end: base + span.end,
            },
            known_secret,
        }
    }
}

/// What the first pass of [`SecretScanner::scan_json`] found out about one string (a value
/// or a key): which shape rules have a keyword in it, and whether a known-secret window is in
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lead {
    rules: u128,
    known: bool,
}

impl Lead {
    const NONE: Lead = Lead {
        rules: 0,
        known: false,
    };
    /// Look at everything (a string the first pass did not see, which cannot happen).
    const ANY: Lead = Lead {
        rules: u128::MAX,
        known: true,
    };
}

/// The first pass of [`SecretScanner::scan_json`]: the lead of every string (value or key),
/// in the order [`SecretScanner::walk`] visits them (an object's entries in map order, each key
/// before its value), and for every array and object (in the same order) whether a known
/// secret may be split across its adjacent string values.
///
/// The strings are copied into two buffers: keys, each followed by a NUL byte, and values, in
/// which the string values that are neighbours in one array or object follow each other with
/// nothing between (a NUL ends each such run). NUL is in no keyword and in no secret a policy
/// can hold in practice, so a keyword or a window found in one string, or in one run, is
/// there and nowhere else; and a secret split across neighbours is whole in the value buffer,
/// so one of its windows is found inside the run. Neither buffer is zeroized: they copy the
/// tool's text, which the value holds too.
#[derive(Debug, Default)]
struct JsonLeads {
    strings: Vec<Lead>,
    containers: Vec<bool>,
    next_string: usize,
    next_container: usize,
}

/// One of the two buffers of the first pass.
#[derive(Debug, Default)]
struct LeadText {
    text: Vec<u8>,
    /// `(offset in text, index in JsonLeads::strings)`, by offset.
    strings: Vec<(usize, usize)>,
    /// `(start, end, container index)` of every run of two or more neighbouring values.
    runs: Vec<(usize, usize, usize)>,
}

impl LeadText {
    fn push(&mut self, text: &str, string: usize) {
        self.strings.push((self.text.len(), string));
        self.text.extend_from_slice(text.as_bytes());
    }

    fn end_string(&mut self) {
        self.text.push(0);
    }

    /// The strings that overlap `at..at + len`.
    fn strings_at(&self, at: usize, len: usize) -> impl Iterator<Item = usize> + '_ {
        let first = self
            .strings
            .partition_point(|&(s, _)| s <= at)
            .saturating_sub(1);
        self.strings[first..]
            .iter()
            .take_while(move |&&(s, _)| s < at + len.max(1))
            .map(|&(_, string)| string)
    }
}

impl JsonLeads {
    fn of(scanner: &SecretScanner, value: &Value) -> JsonLeads {
        let mut leads = JsonLeads::default();
        let mut keys = LeadText::default();
        let mut values = LeadText::default();
        leads.collect(value, &mut keys, &mut values);
        let window = scanner.0.known.window_len();
        for buffer in [&keys, &values] {
            scanner.0.rules.keyword_hits(&buffer.text, |at, rules| {
                for string in buffer.strings_at(at, 1) {
                    leads.strings[string].rules |= rules;
                }
                true
            });
            scanner.0.known.window_hits(&buffer.text, |at| {
                for string in buffer.strings_at(at, window) {
                    leads.strings[string].known = true;
                }
                let run = buffer.runs.partition_point(|&(start, ..)| start <= at);
                if let Some(&(start, end, container)) = run.checked_sub(1).map(|r| &buffer.runs[r])
                    && (start..end).contains(&at)
                {
                    leads.containers[container] = true;
                }
            });
        }
        leads
    }

    fn collect(&mut self, value: &Value, keys: &mut LeadText, values: &mut LeadText) {
        match value {
            Value::String(text) => {
                let string = self.new_string();
                values.push(text, string);
                values.end_string();
            }
            Value::Array(items) => {
                self.collect_siblings(items.iter().map(|v| (None, v)), keys, values)
            }
            Value::Object(map) => {
                self.collect_siblings(map.iter().map(|(k, v)| (Some(k.as_str()), v)), keys, values)
            }
            _ => {}
        }
    }

    fn collect_siblings<'v>(
        &mut self,
        siblings: impl Iterator<Item = (Option<&'v str>, &'v Value)>,
        keys: &mut LeadText,
        values: &mut LeadText,
    ) {
        let container = self.containers.len();
        self.containers.push(false);
        // The current run of neighbouring string values: (start in the buffer, pieces).
        let mut run: Option<(usize, usize)> = None;
        for (key, item) in siblings {
            if let Some(key) = key {
                let string = self.new_string();
                keys.push(key, string);
                keys.end_string();
            }
            match item {
                Value::String(text) => {
                    let string = self.new_string();
                    run.get_or_insert((values.text.len(), 0)).1 += 1;
                    values.push(text, string);
                }
                other => {
                    self.end_run(run.take(), container, values);
                    self.collect(other, keys, values);
                }
            }
        }
        self.end_run(run.take(), container, values);
    }

    fn end_run(&mut self, run: Option<(usize, usize)>, container: usize, values: &mut LeadText) {
        if let Some((start, pieces)) = run {
            if pieces > 1 {
                values.runs.push((start, values.text.len(), container));
            }
            values.end_string();
        }
    }

    fn new_string(&mut self) -> usize {
        self.strings.push(Lead::NONE);
        self.strings.len() - 1
    }

    /// The lead of the next string the walk visits.
    fn next_string(&mut self) -> Lead {
        let lead = self
            .strings
            .get(self.next_string)
            .copied()
            .unwrap_or(Lead::ANY);
        self.next_string += 1;
        lead
    }

    /// Whether the next array or object the walk visits may have a secret split across its
    /// neighbouring values.
    fn next_container(&mut self) -> bool {
        let split = self
            .containers
            .get(self.next_container)
            .copied()
            .unwrap_or(true);
        self.next_container += 1;
        split
    }
}

/// The spans `joined` holds for sibling `index` (`joined` is sorted by index).
fn joined_at(joined: &[(usize, Span)], index: usize) -> Vec<Span> {
    if joined.is_empty() {
        return Vec::new();
    }
    let from = joined.partition_point(|(i, _)| *i < index);
    joined[from..]
        .iter()
        .take_while(|(i, _)| *i == index)
        .map(|(_, span)| *span)
        .collect()
}

/// Appends `index` in decimal.
fn push_index(pointer: &mut String, index: usize) {
    use std::fmt::Write as _;
    let _ = write!(pointer, "{index}");
}

/// Appends an object key as an RFC 6901 reference token (`~` → `~0`, `/` → `~1`).
fn push_pointer_token(pointer: &mut String, key: &str) {
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

#[cfg(test)]
mod tests;
