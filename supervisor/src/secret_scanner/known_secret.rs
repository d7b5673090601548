//! Known secrets: the credential values the supervisor holds, found in text however a tool
//! server may have re-encoded them, and in pieces.
//!
//! For each value one Aho-Corasick automaton (leftmost-longest) holds:
//!
//! - the **whole forms**: the value itself; its base64 and base64url in all three alignments
//!   (the characters that depend on the value's bits only, so the value is found at any byte
//!   offset inside a longer base64 stream); lower- and upper-case hex; percent-encoding with
//!   upper- and lower-case escapes; JSON escaping as serde_json, as ECMAScript/Python with
//!   `\uXXXX` for non-ASCII, and with `\/`. An encoded form shorter than [`MIN_ENCODED_LEN`]
//!   characters is left out: it would occur by chance in ordinary text.
//! - **tiles** of the value: its bytes cut at every multiple of [`TILE_LEN`]. A tile is only a
//!   seed: where one occurs, the match is extended byte by byte left and right while the text
//!   still agrees with the value, and counts if the agreeing run is at least
//!   [`MIN_FRAGMENT_LEN`] bytes. Every run of `2 × TILE_LEN − 1` or more bytes of the value
//!   contains a whole tile, so every fragment of [`MIN_FRAGMENT_LEN`] bytes or more is found,
//!   wherever it is, and nothing shorter is reported.
//!
//! Why 16 bytes: a fragment that long of a random token carries ≥ 80 bits, which identifies
//! the token and never occurs by chance; what a shorter piece reveals (at most 15 characters
//! of a 40-character token) does not let anyone use the credential. Secrets of 16 bytes or
//! fewer have no tiles (a fragment would be the whole value) and are matched whole only. Two
//! pieces of a secret that sit next to each other (two chunks of a stream, two adjacent JSON
//! strings) are joined before matching by the callers, so a split into short pieces is caught
//! there even when each piece is below the fragment length.

use super::ScannerError;
use crate::secret_store::SecretValue;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, Input, MatchKind};
use base64::Engine as _;
use serde::Serialize;
use zeroize::Zeroizing;

/// The shortest fragment of a known secret that is reported.
pub const MIN_FRAGMENT_LEN: usize = 16;

/// The length of the tiles that seed fragment matches: `2 × TILE_LEN − 1 ≤ MIN_FRAGMENT_LEN`.
pub const TILE_LEN: usize = 8;

/// The shortest encoded form of a secret that is matched.
pub const MIN_ENCODED_LEN: usize = 8;

const _: () = assert!(2 * TILE_LEN - 1 <= MIN_FRAGMENT_LEN);

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

/// What a pattern of the automaton stands for.
#[derive(Debug, Clone, Copy)]
enum Seed {
    /// A whole form: a match is final.
    Whole { secret: usize, form: SecretForm },
    /// `TILE_LEN` bytes of the raw value at `offset`: extend, then check the length.
    Tile { secret: usize, offset: usize },
}

/// A known secret found in text, in byte offsets of that text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KnownMatch {
    pub secret: usize,
    pub form: SecretForm,
    pub start: usize,
    pub end: usize,
}

/// The compiled known secrets.
pub(crate) struct KnownSecrets {
    names: Vec<String>,
    values: Vec<Zeroizing<Vec<u8>>>,
    automaton: Option<AhoCorasick>,
    /// Per pattern: what it stands for (one pattern can stand for several secrets' forms).
    seeds: Vec<Vec<Seed>>,
    /// Per pattern: the whole-form patterns that are proper prefixes of it, tried when its
    /// own seeds fail (leftmost-longest reports only the longest pattern at a position).
    prefixes: Vec<Vec<usize>>,
    pattern_lens: Vec<usize>,
    longest_form: usize,
}

impl std::fmt::Debug for KnownSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnownSecrets")
            .field("names", &self.names)
            .field("patterns", &self.seeds.len())
            .finish_non_exhaustive()
    }
}

impl KnownSecrets {
    pub(crate) fn new<'a>(
        secrets: impl IntoIterator<Item = (&'a str, &'a SecretValue)>,
    ) -> Result<KnownSecrets, ScannerError> {
        let mut names = Vec::new();
        let mut values = Vec::new();
        let mut patterns: Vec<Zeroizing<Vec<u8>>> = Vec::new();
        let mut seeds: Vec<Vec<Seed>> = Vec::new();
        let mut add = |pattern: Zeroizing<Vec<u8>>, seed: Seed| match patterns
            .iter()
            .position(|p| **p == *pattern)
        {
            Some(i) => seeds[i].push(seed),
            None => {
                patterns.push(pattern);
                seeds.push(vec![seed]);
            }
        };
        for (name, value) in secrets {
            let raw = value.expose().as_bytes();
            if raw.is_empty() {
                continue;
            }
            let secret = names.len();
            names.push(name.to_owned());
            values.push(Zeroizing::new(raw.to_vec()));
            for (form, pattern) in forms(value.expose()) {
                add(pattern, Seed::Whole { secret, form });
            }
            if raw.len() > MIN_FRAGMENT_LEN {
                for offset in (0..=raw.len() - TILE_LEN).step_by(TILE_LEN) {
                    let tile = Zeroizing::new(raw[offset..offset + TILE_LEN].to_vec());
                    add(tile, Seed::Tile { secret, offset });
                }
            }
        }
        let pattern_lens: Vec<usize> = patterns.iter().map(|p| p.len()).collect();
        let longest_form = pattern_lens.iter().copied().max().unwrap_or(0);
        let prefixes = patterns
            .iter()
            .map(|long| {
                (0..patterns.len())
                    .filter(|&i| {
                        let short = &patterns[i];
                        short.len() < long.len()
                            && long.starts_with(short)
                            && seeds[i].iter().any(|s| matches!(s, Seed::Whole { .. }))
                    })
                    .collect()
            })
            .collect();
        let automaton = if patterns.is_empty() {
            None
        } else {
            Some(
                // A full DFA: a few hundred patterns with no common rare byte leave the
                // prefilter nothing to skip, and the DFA's one lookup per byte is the fastest
                // scan there is (measured: docs/testing.md, secret scanner benchmark).
                AhoCorasickBuilder::new()
                    .kind(Some(AhoCorasickKind::DFA))
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(patterns.iter().map(|p| p.as_slice()))
                    .map_err(|e| ScannerError::Automaton(e.to_string()))?,
            )
        };
        Ok(KnownSecrets {
            names,
            values,
            automaton,
            seeds,
            prefixes,
            pattern_lens,
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

    /// Every match in `text` starting at or after `from`, left to right, not overlapping.
    /// Fragments are extended no further left than `from`.
    pub(crate) fn find(&self, text: &str, from: usize, out: &mut Vec<KnownMatch>) {
        let Some(automaton) = &self.automaton else {
            return;
        };
        let bytes = text.as_bytes();
        let mut at = from;
        while at < bytes.len() {
            let Some(m) = automaton.find(Input::new(bytes).span(at..bytes.len())) else {
                break;
            };
            let pattern = m.pattern().as_usize();
            let best = self
                .best_at(pattern, m.start(), m.end(), bytes, from)
                .or_else(|| {
                    // The longest pattern here was a tile that did not extend far enough; a
                    // shorter whole form may still start here.
                    self.prefixes[pattern]
                        .iter()
                        .rev()
                        .find_map(|&p| self.whole(p, m.start()))
                });
            match best {
                Some(found) => {
                    let (start, end) = char_bounds(text, found.start, found.end);
                    out.push(KnownMatch {
                        start,
                        end,
                        ..found
                    });
                    at = end.max(m.start() + 1);
                }
                None => at = m.start() + 1,
            }
        }
    }

    /// The longest match the seeds of `pattern`, found at `start..end`, make.
    fn best_at(
        &self,
        pattern: usize,
        start: usize,
        end: usize,
        text: &[u8],
        from: usize,
    ) -> Option<KnownMatch> {
        let mut best: Option<KnownMatch> = None;
        for seed in &self.seeds[pattern] {
            let found = match *seed {
                Seed::Whole { secret, form } => Some(KnownMatch {
                    secret,
                    form,
                    start,
                    end,
                }),
                Seed::Tile { secret, offset } => self.extend(secret, offset, start, text, from),
            };
            if let Some(found) = found
                && best.is_none_or(|b| found.end - found.start > b.end - b.start)
            {
                best = Some(found);
            }
        }
        best
    }

    /// A whole-form pattern's match at `start`, if one of its seeds is a whole form.
    fn whole(&self, pattern: usize, start: usize) -> Option<KnownMatch> {
        let end = start + self.pattern_lens[pattern];
        self.seeds[pattern].iter().find_map(|seed| match *seed {
            Seed::Whole { secret, form } => Some(KnownMatch {
                secret,
                form,
                start,
                end,
            }),
            Seed::Tile { .. } => None,
        })
    }

    /// Grows a tile found at `at` (the value's bytes from `offset`) into the longest run that
    /// agrees with the value; a fragment if it is long enough.
    fn extend(
        &self,
        secret: usize,
        offset: usize,
        at: usize,
        text: &[u8],
        from: usize,
    ) -> Option<KnownMatch> {
        let value = &self.values[secret];
        let mut left = 0;
        while at - left > from && offset > left && text[at - left - 1] == value[offset - left - 1] {
            left += 1;
        }
        let mut right = TILE_LEN;
        while at + right < text.len()
            && offset + right < value.len()
            && text[at + right] == value[offset + right]
        {
            right += 1;
        }
        let len = left + right;
        (len >= MIN_FRAGMENT_LEN).then(|| KnownMatch {
            secret,
            form: if len == value.len() {
                SecretForm::Raw
            } else {
                SecretForm::Fragment
            },
            start: at - left,
            end: at + right,
        })
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
}
