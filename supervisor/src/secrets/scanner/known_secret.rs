//! Known secrets: the credential values the supervisor holds, found in text however a tool
//! server may have re-encoded them, and in pieces.
//!
//! For each value the matcher knows:
//!
//! - the **whole forms**: the value itself; its base64 and base64url in all three alignments
//!   (the characters that depend on the value's bits only, so the value is found at any byte
//!   offset inside a longer base64 stream); lower- and upper-case hex; percent-encoding with
//!   upper- and lower-case escapes; JSON escaping as serde_json, as ECMAScript/Python with
//!   `\uXXXX` for non-ASCII, and with `\/`. An encoded form shorter than [`MIN_ENCODED_LEN`]
//!   characters is left out: it would occur by chance in ordinary text.
//! - **fragments**: any run of at least [`MIN_FRAGMENT_LEN`] bytes of the value.
//!
//! # How it is found in linear time without looking at every byte
//!
//! Every whole form, and every fragment worth reporting, is at least `W + S − 1` bytes long,
//! where `W` is the window (8 bytes, or the shortest whole form if that is shorter) and `S` the
//! stride (at most `MIN_FRAGMENT_LEN − W + 1` = 9). So every occurrence contains a whole window
//! that starts at a multiple of `S` from where the scan starts. The matcher reads only those
//! windows, one every `S` bytes, and looks each up in a hash table of every `W`-byte window of
//! every whole form and of every value, at every offset. A hit is an anchor: a whole form is
//! then compared in full where it would start, and a value's window is extended byte by byte
//! left and right while the text agrees with the value (a fragment if the run is long
//! enough). Reading one window in nine is what makes it fast (the Aho-Corasick automaton it
//! replaces looked at every byte and ran at a quarter of the speed: docs/performance.md); a run
//! already extended along one alignment is not extended again, which keeps it linear when the
//! text repeats a piece of a secret.
//!
//! Why 16 bytes: a fragment that long of a random token carries ≥ 80 bits, which identifies
//! the token and never occurs by chance; what a shorter piece reveals (at most 15 characters
//! of a 40-character token) does not let anyone use the credential. Secrets of 16 bytes or
//! fewer have no fragments (a fragment would be the whole value) and are matched whole only.
//! Two pieces of a secret that sit next to each other (two chunks of a stream, two adjacent
//! JSON strings) are joined before matching by the callers, so a split into short pieces is
//! caught there even when each piece is below the fragment length.

// Offsets and indexes here are within the operator's own secrets (at most 64 KiB each, and
// a handful of them), never sizes an untrusted peer chose; the hash shifts down to the table's
// width first.
#![allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]

use super::ScannerError;
use crate::secrets::store::SecretValue;
use base64::Engine as _;
use serde::Serialize;
use zeroize::{Zeroize, Zeroizing};

/// The shortest fragment of a known secret that is reported.
pub const MIN_FRAGMENT_LEN: usize = 16;

/// The longest window the matcher reads (one `u64`).
pub const WINDOW_LEN: usize = 8;

/// The shortest encoded form of a secret that is matched.
pub const MIN_ENCODED_LEN: usize = 8;

/// How a known secret appeared in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretForm {
    /// The value itself.
    Raw,
    /// Standard base64, any alignment.
    Base64,
    /// URL-safe base64, any alignment.
    Base64Url,
    /// Hexadecimal, lower or upper case.
    Hex,
    /// Percent-encoded (URL).
    PercentEncoded,
    /// Inside a JSON or JavaScript string literal, escaped.
    JsonEscaped,
    /// A piece of at least [`MIN_FRAGMENT_LEN`] bytes of the value (or the value itself,
    /// pieced together from adjacent strings or chunks).
    Fragment,
}

/// Where a window of the table comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchor {
    /// Bytes `offset..offset + W` of whole form `form`: compare the form where it would start.
    Form { form: u32, offset: u32 },
    /// Bytes `offset..offset + W` of secret `secret`'s value: extend into a fragment.
    Value { secret: u32, offset: u32 },
}

/// One whole form of one secret.
struct WholeForm {
    bytes: Zeroizing<Vec<u8>>,
    secret: usize,
    form: SecretForm,
}

/// A known secret found in text, in byte offsets of that text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KnownMatch {
    pub secret: usize,
    pub form: SecretForm,
    pub start: usize,
    pub end: usize,
}

/// An open-addressing hash table from a window (as a little-endian `u64`, zero-padded) to its
/// anchors. At most a quarter full, so a miss (nearly every lookup) usually costs one probe.
struct WindowTable {
    keys: Vec<u64>,
    /// Per slot: `anchors[start..end]`, or `EMPTY` for a free slot.
    slots: Vec<(u32, u32)>,
    anchors: Vec<Anchor>,
    shift: u32,
}

const EMPTY: (u32, u32) = (u32::MAX, u32::MAX);

impl WindowTable {
    fn new(mut entries: Vec<(u64, Anchor)>) -> WindowTable {
        // Stable: a window's anchors keep their order (forms, in secret order, before values),
        // which decides the name and form reported when two give the same range.
        entries.sort_by_key(|(key, _)| *key);
        let distinct = entries.windows(2).filter(|w| w[0].0 != w[1].0).count() + 1;
        let size = (distinct * 4).next_power_of_two().max(16);
        let mut table = WindowTable {
            keys: vec![0; size],
            slots: vec![EMPTY; size],
            anchors: Vec::with_capacity(entries.len()),
            shift: 64 - size.trailing_zeros(),
        };
        let mut at = 0;
        while at < entries.len() {
            let key = entries[at].0;
            let start = table.anchors.len() as u32;
            while at < entries.len() && entries[at].0 == key {
                if !table.anchors[start as usize..].contains(&entries[at].1) {
                    table.anchors.push(entries[at].1);
                }
                at += 1;
            }
            let mut slot = table.slot(key);
            while table.slots[slot] != EMPTY {
                slot = (slot + 1) & (size - 1);
            }
            table.keys[slot] = key;
            table.slots[slot] = (start, table.anchors.len() as u32);
        }
        // The keys are pieces of secrets; the entries' copies go now, the table's on drop.
        for (key, _) in &mut entries {
            key.zeroize();
        }
        table
    }

    fn slot(&self, key: u64) -> usize {
        // Fibonacci hashing: the top bits of the product mix every byte of the window.
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline]
    fn get(&self, key: u64) -> &[Anchor] {
        let mask = self.keys.len() - 1;
        let mut slot = self.slot(key);
        loop {
            let (start, end) = self.slots[slot];
            if start == u32::MAX {
                return &[];
            }
            if self.keys[slot] == key {
                return &self.anchors[start as usize..end as usize];
            }
            slot = (slot + 1) & mask;
        }
    }
}

impl Drop for WindowTable {
    fn drop(&mut self) {
        self.keys.zeroize();
    }
}

/// An alignment of a form or a value with the text that was already checked: the anchor
/// (offset 0), where the form or value would start in the text, and how far the check
/// reached. A window met again on the same alignment before `end` gives nothing new.
#[derive(Debug, Clone, Copy)]
struct Tried {
    anchor: Anchor,
    start: isize,
    end: usize,
}

/// How many bytes a check may compare before its alignment is remembered in [`Tried`]: a
/// check that cheap is simply repeated when another window meets the same alignment, so the
/// work per window read stays bounded (linear time) without a list lookup for every hit.
const REMEMBERED_WORK: usize = 2 * MIN_FRAGMENT_LEN;

/// The compiled known secrets.
pub(crate) struct KnownSecrets {
    names: Vec<String>,
    values: Vec<Zeroizing<Vec<u8>>>,
    forms: Vec<WholeForm>,
    table: WindowTable,
    /// `W`: bytes per window.
    window: usize,
    /// `S`: distance between the windows read.
    stride: usize,
    longest_form: usize,
}

impl std::fmt::Debug for KnownSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnownSecrets")
            .field("names", &self.names)
            .field("forms", &self.forms.len())
            .field("window", &self.window)
            .field("stride", &self.stride)
            .finish_non_exhaustive()
    }
}

/// The window at `text[at..at + len]` as a `u64` (`len` ≤ 8; zero-padded).
#[inline]
fn window_key(text: &[u8], at: usize, len: usize) -> u64 {
    if len == WINDOW_LEN {
        let mut bytes = [0u8; WINDOW_LEN];
        bytes.copy_from_slice(&text[at..at + WINDOW_LEN]);
        u64::from_le_bytes(bytes)
    } else {
        let mut bytes = [0u8; WINDOW_LEN];
        bytes[..len].copy_from_slice(&text[at..at + len]);
        u64::from_le_bytes(bytes)
    }
}

impl KnownSecrets {
    pub(crate) fn new<'a>(
        secrets: impl IntoIterator<Item = (&'a str, &'a SecretValue)>,
    ) -> Result<KnownSecrets, ScannerError> {
        let mut names = Vec::new();
        let mut values = Vec::new();
        let mut whole: Vec<WholeForm> = Vec::new();
        for (name, value) in secrets {
            let raw = value.expose().as_bytes();
            if raw.is_empty() {
                continue;
            }
            let secret = names.len();
            names.push(name.to_owned());
            values.push(Zeroizing::new(raw.to_vec()));
            for (form, bytes) in forms(value.expose()) {
                // Two secrets can share a form (the same value under two names): the first
                // names it.
                if !whole.iter().any(|w| *w.bytes == *bytes) {
                    whole.push(WholeForm {
                        bytes,
                        secret,
                        form,
                    });
                }
            }
        }
        let shortest = whole
            .iter()
            .map(|w| w.bytes.len())
            .min()
            .unwrap_or(WINDOW_LEN);
        let window = shortest.min(WINDOW_LEN);
        let has_fragments = values.iter().any(|v| v.len() > MIN_FRAGMENT_LEN);
        let mut stride = shortest - window + 1;
        if has_fragments {
            stride = stride.min(MIN_FRAGMENT_LEN - window + 1);
        }
        let mut entries = Vec::new();
        for (index, form) in whole.iter().enumerate() {
            for offset in 0..=form.bytes.len() - window {
                entries.push((
                    window_key(&form.bytes, offset, window),
                    Anchor::Form {
                        form: index as u32,
                        offset: offset as u32,
                    },
                ));
            }
        }
        for (secret, value) in values.iter().enumerate() {
            if value.len() > MIN_FRAGMENT_LEN {
                for offset in 0..=value.len() - window {
                    entries.push((
                        window_key(value, offset, window),
                        Anchor::Value {
                            secret: secret as u32,
                            offset: offset as u32,
                        },
                    ));
                }
            }
        }
        if u32::try_from(entries.len()).is_err() {
            return Err(ScannerError::Automaton(
                "the known secrets are too long to index".into(),
            ));
        }
        let longest_form = whole.iter().map(|w| w.bytes.len()).max().unwrap_or(0);
        Ok(KnownSecrets {
            names,
            values,
            forms: whole,
            table: WindowTable::new(entries),
            window,
            stride,
            longest_form,
        })
    }

    /// The secret's name (for the audit log).
    pub(crate) fn name(&self, secret: usize) -> &str {
        &self.names[secret]
    }

    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The longest whole form, in bytes: a stream must hold back at least this much.
    pub(crate) fn longest_form(&self) -> usize {
        self.longest_form
    }

    /// How many bytes a window of [`KnownSecrets::window_hits`] covers.
    pub(crate) fn window_len(&self) -> usize {
        self.window
    }

    /// Calls `hit(position)` for every window the matcher reads in `text` that is in the
    /// table: every match inside `text` has one inside it.
    pub(crate) fn window_hits(&self, text: &[u8], mut hit: impl FnMut(usize)) {
        for (at, _) in self.anchored_windows(text, 0) {
            hit(at);
        }
    }

    /// The windows read in `text` from `from` on (one every stride) that are in the table,
    /// with their anchors.
    fn anchored_windows<'s>(
        &'s self,
        text: &'s [u8],
        from: usize,
    ) -> impl Iterator<Item = (usize, &'s [Anchor])> + 's {
        let (window, stride) = (self.window, self.stride);
        // No window at all when there are no secrets: `at` starts past the end.
        let mut at = if self.forms.is_empty() {
            text.len()
        } else {
            from
        };
        std::iter::from_fn(move || {
            while at + window <= text.len() {
                let here = at;
                at += stride;
                let anchors = self.table.get(window_key(text, here, window));
                if !anchors.is_empty() {
                    return Some((here, anchors));
                }
            }
            None
        })
    }

    /// Every match in `text` starting at or after `from`, left to right: at each place the
    /// longest match that starts there, and after it only matches that reach further (two
    /// that overlap are merged by the caller). Fragments are extended no further left than
    /// `from`.
    pub(crate) fn find(&self, text: &str, from: usize, out: &mut Vec<KnownMatch>) {
        let bytes = text.as_bytes();
        let mut found: Vec<KnownMatch> = Vec::new();
        let mut tried: Vec<Tried> = Vec::new();
        for (at, anchors) in self.anchored_windows(bytes, from) {
            tried.retain(|t| t.end > at);
            for anchor in anchors {
                self.try_anchor(*anchor, at, bytes, from, &mut tried, &mut found);
            }
        }
        if found.is_empty() {
            return;
        }
        found.sort_by_key(|m| (m.start, std::cmp::Reverse(m.end)));
        let mut reached = from;
        for m in found {
            if m.end > reached {
                let (start, end) = char_bounds(text, m.start, m.end);
                out.push(KnownMatch { start, end, ..m });
                reached = m.end;
            }
        }
    }

    /// Checks one anchor met at `at`.
    fn try_anchor(
        &self,
        anchor: Anchor,
        at: usize,
        text: &[u8],
        from: usize,
        tried: &mut Vec<Tried>,
        found: &mut Vec<KnownMatch>,
    ) {
        match anchor {
            Anchor::Form { form, offset } => {
                let whole = &self.forms[form as usize];
                let len = whole.bytes.len();
                let Some(start) = at.checked_sub(offset as usize).filter(|&s| s >= from) else {
                    return;
                };
                if start + len > text.len() {
                    return;
                }
                let alignment = (Anchor::Form { form, offset: 0 }, start as isize);
                if tried.iter().any(|t| (t.anchor, t.start) == alignment) {
                    return;
                }
                // Where the text stops agreeing with the form, if it does.
                let differs = text[start..start + len]
                    .iter()
                    .zip(whole.bytes.iter())
                    .position(|(a, b)| a != b);
                match differs {
                    None => {
                        found.push(KnownMatch {
                            secret: whole.secret,
                            form: whole.form,
                            start,
                            end: start + len,
                        });
                        tried.push(Tried {
                            anchor: alignment.0,
                            start: alignment.1,
                            end: start + len,
                        });
                    }
                    // Remembered only when comparing again would cost more than a few
                    // windows: most hits (every `https://` when a secret is a URL) differ
                    // at once, and a short list keeps every other hit cheap.
                    Some(agreed) if agreed > REMEMBERED_WORK => tried.push(Tried {
                        anchor: alignment.0,
                        start: alignment.1,
                        end: start + len,
                    }),
                    Some(_) => {}
                }
            }
            Anchor::Value { secret, offset } => {
                let alignment = (
                    Anchor::Value { secret, offset: 0 },
                    at as isize - offset as isize,
                );
                if tried.iter().any(|t| (t.anchor, t.start) == alignment) {
                    return;
                }
                let value = &self.values[secret as usize];
                let offset = offset as usize;
                let mut left = 0;
                while at - left > from
                    && offset > left
                    && text[at - left - 1] == value[offset - left - 1]
                {
                    left += 1;
                }
                let mut right = self.window;
                while at + right < text.len()
                    && offset + right < value.len()
                    && text[at + right] == value[offset + right]
                {
                    right += 1;
                }
                let len = left + right;
                if len > REMEMBERED_WORK {
                    tried.push(Tried {
                        anchor: alignment.0,
                        start: alignment.1,
                        end: at + right,
                    });
                }
                if len >= MIN_FRAGMENT_LEN {
                    found.push(KnownMatch {
                        secret: secret as usize,
                        form: if len == value.len() {
                            SecretForm::Raw
                        } else {
                            SecretForm::Fragment
                        },
                        start: at - left,
                        end: at + right,
                    });
                }
            }
        }
    }
}

/// The smallest range of whole characters that covers `start..end` (a fragment's bytes can
/// begin or end inside a multi-byte character).
fn char_bounds(text: &str, mut start: usize, mut end: usize) -> (usize, usize) {
    while start > 0 && !text.is_char_boundary(start) {
        start -= 1;
    }
    while end < text.len() && !text.is_char_boundary(end) {
        end += 1;
    }
    (start, end)
}

/// The whole forms of a value that are worth matching (see the module docs).
fn forms(value: &str) -> Vec<(SecretForm, Zeroizing<Vec<u8>>)> {
    let raw = value.as_bytes();
    let mut out: Vec<(SecretForm, Zeroizing<Vec<u8>>)> =
        vec![(SecretForm::Raw, Zeroizing::new(raw.to_vec()))];
    let mut push = |form: SecretForm, encoded: Zeroizing<String>| {
        let bytes = Zeroizing::new(encoded.as_bytes().to_vec());
        if bytes.len() >= MIN_ENCODED_LEN && !out.iter().any(|(_, p)| **p == *bytes) {
            out.push((form, bytes));
        }
    };
    for (form, engine) in [
        (
            SecretForm::Base64,
            &base64::engine::general_purpose::STANDARD_NO_PAD,
        ),
        (
            SecretForm::Base64Url,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ),
    ] {
        for shift in 0..3 {
            push(form, base64_core(engine, raw, shift));
        }
    }
    let hex = Zeroizing::new(raw.iter().map(|b| format!("{b:02x}")).collect::<String>());
    push(SecretForm::Hex, Zeroizing::new(hex.to_ascii_uppercase()));
    push(SecretForm::Hex, hex);
    // RFC 3986 unreserved characters stay, everything else is escaped.
    const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    let percent = Zeroizing::new(percent_encoding::utf8_percent_encode(value, ESCAPED).to_string());
    push(SecretForm::PercentEncoded, lower_escapes(&percent));
    push(SecretForm::PercentEncoded, percent);
    let json = Zeroizing::new(serde_json::to_string(value).unwrap_or_default());
    let json = Zeroizing::new(json[1..json.len().saturating_sub(1).max(1)].to_owned());
    // serde_json / JSON.stringify; Python's json.dumps (\uXXXX for non-ASCII); PHP's
    // json_encode (that, and `\/` for `/`).
    let ascii = ascii_json(value);
    push(
        SecretForm::JsonEscaped,
        Zeroizing::new(json.replace('/', "\\/")),
    );
    push(
        SecretForm::JsonEscaped,
        Zeroizing::new(ascii.replace('/', "\\/")),
    );
    push(SecretForm::JsonEscaped, ascii);
    push(SecretForm::JsonEscaped, json);
    out
}

/// The base64 characters of `raw` placed `shift` bytes into a stream that depend on `raw`'s
/// bits only: the first character is the one that starts at or after bit `8 × shift`, the last
/// the one that ends at or before the value's last bit.
fn base64_core(
    engine: &base64::engine::GeneralPurpose,
    raw: &[u8],
    shift: usize,
) -> Zeroizing<String> {
    let mut shifted = Zeroizing::new(vec![0u8; shift]);
    shifted.extend_from_slice(raw);
    let encoded = Zeroizing::new(engine.encode(shifted.as_slice()));
    let first = (8 * shift).div_ceil(6);
    let last = 8 * (shift + raw.len()) / 6;
    Zeroizing::new(encoded.get(first..last).unwrap_or_default().to_owned())
}

/// `%2F` → `%2f`, leaving the rest alone.
fn lower_escapes(percent: &str) -> Zeroizing<String> {
    let mut out = Zeroizing::new(String::with_capacity(percent.len()));
    let mut escape_left = 0;
    for c in percent.chars() {
        if c == '%' {
            escape_left = 2;
            out.push(c);
        } else if escape_left > 0 {
            escape_left -= 1;
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON string body with every non-ASCII character as `\uXXXX` (UTF-16 units), as
/// `JSON.stringify` in an ASCII-only mode and Python's `json.dumps` write it.
fn ascii_json(value: &str) -> Zeroizing<String> {
    let mut out = Zeroizing::new(String::with_capacity(value.len() + 8));
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(values: &[(&str, &str)]) -> (KnownSecrets, Vec<SecretValue>) {
        let secrets: Vec<SecretValue> = values
            .iter()
            .map(|(_, v)| SecretValue::new((*v).to_owned()))
            .collect();
        let k =
            KnownSecrets::new(values.iter().map(|(n, _)| *n).zip(secrets.iter())).expect("build");
        (k, secrets)
    }

    fn find(k: &KnownSecrets, text: &str) -> Vec<(SecretForm, String)> {
        let mut out = Vec::new();
        k.find(text, 0, &mut out);
        out.iter()
            .map(|m| (m.form, text[m.start..m.end].to_owned()))
            .collect()
    }

    const TOKEN: &str = "tok-7Qe2Lr9xVb4Nk1Hs8Dw3Zp6Yc5Mf0Ja";

    #[test]
    fn base64_in_every_alignment_and_both_alphabets() {
        let (k, _) = known(&[("api", TOKEN)]);
        for engine in [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::URL_SAFE,
        ] {
            for prefix in ["", "a", "ab", "abc", "user:", "Basic x"] {
                for suffix in ["", "!", "!!", "\n"] {
                    let stream = engine.encode(format!("{prefix}{TOKEN}{suffix}"));
                    let found = find(&k, &format!("data: {stream} end"));
                    assert_eq!(found.len(), 1, "{prefix:?}{suffix:?}: {found:?}");
                    assert!(
                        matches!(found[0].0, SecretForm::Base64 | SecretForm::Base64Url),
                        "{found:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn hex_percent_and_json_forms() {
        let secret = "p@ss/wörd \"quoted\" 9f8e7d6c";
        let (k, _) = known(&[("db", secret)]);
        let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
        let cases = [
            (hex.clone(), SecretForm::Hex),
            (hex.to_uppercase(), SecretForm::Hex),
            (
                percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
                    .to_string()
                    .replace("%2D", "-")
                    .replace("%2E", ".")
                    .replace("%5F", "_")
                    .replace("%7E", "~"),
                SecretForm::PercentEncoded,
            ),
            (
                serde_json::to_string(secret)
                    .unwrap()
                    .trim_matches('"')
                    .to_owned(),
                SecretForm::JsonEscaped,
            ),
            (
                "p@ss\\/w\\u00f6rd \\\"quoted\\\" 9f8e7d6c".to_owned(),
                SecretForm::JsonEscaped,
            ),
        ];
        for (encoded, form) in cases {
            let found = find(&k, &format!("[{encoded}]"));
            assert_eq!(found, vec![(form, encoded.clone())], "{encoded}");
        }
        // Lower-case percent escapes.
        let lower = lower_escapes(
            &percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
                .to_string(),
        );
        assert!(!find(&k, &lower).is_empty(), "{}", lower.as_str());
    }

    #[test]
    fn fragments_of_sixteen_bytes_or_more_are_found_anywhere_and_shorter_ones_never() {
        let (k, _) = known(&[("api", TOKEN)]);
        for len in 1..=TOKEN.len() {
            for start in 0..=TOKEN.len() - len {
                let piece = &TOKEN[start..start + len];
                let found = find(&k, &format!("<<{piece}>>"));
                if len >= MIN_FRAGMENT_LEN {
                    assert_eq!(found.len(), 1, "{start}+{len}: {found:?}");
                    assert_eq!(found[0].1, piece, "{start}+{len}");
                } else {
                    assert!(found.is_empty(), "{start}+{len}: {found:?}");
                }
            }
        }
    }

    #[test]
    fn short_secrets_are_matched_whole_only() {
        let (k, _) = known(&[("pin", "s3cr3t-pin-42")]);
        assert_eq!(find(&k, "x s3cr3t-pin-42 y").len(), 1);
        assert!(find(&k, "x s3cr3t-pin-4 y").is_empty());
    }

    #[test]
    fn a_short_secret_is_not_hidden_by_a_longer_secrets_tile() {
        // "abcd1234" is both a whole secret and the first tile of the long one; the text
        // continues differently from the long secret, so only the short one is there.
        let (k, _) = known(&[("short", "abcd1234"), ("long", "abcd1234QRSTUVWXyz567890")]);
        let found = find(&k, "..abcd1234-other..");
        assert_eq!(found, vec![(SecretForm::Raw, "abcd1234".to_owned())]);
    }

    #[test]
    fn fragments_never_split_a_character() {
        // The text continues with `о` where the secret has `а`: both start with byte 0xD0,
        // so the byte-wise extension stops inside a character and must round outwards.
        let secret = "ключ-доступа-7Qe2Lr9xVb4Nk1";
        let (k, _) = known(&[("utf8", secret)]);
        let piece = &secret[4..secret.find("а-").unwrap()];
        assert!(piece.len() >= MIN_FRAGMENT_LEN);
        let text = format!("<{piece}о>");
        let mut out = Vec::new();
        k.find(&text, 0, &mut out);
        assert_eq!(out.len(), 1);
        assert!(text.is_char_boundary(out[0].start) && text.is_char_boundary(out[0].end));
        assert_eq!(&text[out[0].start..out[0].end], format!("{piece}о"));
    }

    #[test]
    fn a_secret_shorter_than_a_window_narrows_the_window_and_is_still_found() {
        let (k, _) = known(&[("pin", "7q2x"), ("api", TOKEN)]);
        assert_eq!(
            find(&k, "pin 7q2x and ...7q2"),
            vec![(SecretForm::Raw, "7q2x".to_owned())]
        );
        // The other secret is still found whole and in fragments with the narrow window.
        assert_eq!(find(&k, &format!("({TOKEN})")).len(), 1);
        assert_eq!(find(&k, &format!("({})", &TOKEN[3..21])).len(), 1);
    }

    #[test]
    fn overlapping_occurrences_of_two_secrets_are_both_reported() {
        // The end of one secret is the start of the next in the text: the second reaches
        // further, so the caller gets both and redacts their union.
        let first = "Ab3dEf6hIj9lMn2pQr5t";
        let second = "Qr5tUv8xYz1bCd4fGh7j";
        let (k, _) = known(&[("first", first), ("second", second)]);
        let text = format!("<{first}{}>", &second[4..]);
        let mut out = Vec::new();
        k.find(&text, 0, &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!((out[0].start, out[0].end), (1, 1 + first.len()));
        assert_eq!(out[1].end, text.len() - 1);
    }

    #[test]
    fn a_text_that_repeats_a_piece_of_a_secret_is_matched_once_per_run() {
        // Every window read hits the table; each run is extended once, not once per window.
        let (k, _) = known(&[("api", TOKEN)]);
        let text = format!("{} ", &TOKEN[..30]).repeat(1000);
        let mut out = Vec::new();
        k.find(&text, 0, &mut out);
        assert_eq!(out.len(), 1000);
        assert!(
            out.iter()
                .all(|m| m.form == SecretForm::Fragment && m.end - m.start == 30)
        );
    }
}
