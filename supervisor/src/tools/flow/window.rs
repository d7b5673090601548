//! The runs of characters a value is matched by: a walk over a JSON value's scalars (strings,
//! object keys, numbers as their JSON text) with their paths, bounded in depth, and a rolling
//! hash of every run of [`MIN_MATCH_CHARS`] characters of a text.

use super::MIN_MATCH_CHARS;
use serde_json::Value;
use std::borrow::Cow;

/// Levels of a value walked; deeper parts are treated as described in the module's docs.
pub const MAX_DEPTH: usize = 64;

/// One step of a scalar's place in its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// What the walk finds.
pub(super) enum Found<'v, 'p> {
    /// A scalar's text at its path (a key's path ends with the key itself).
    Text(&'p [Step<'v>], Cow<'v, str>),
    /// A value deeper than [`MAX_DEPTH`], at its path: not walked.
    TooDeep(&'p [Step<'v>]),
}

/// Whether the walk reports object keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keys {
    /// A sink's arguments: a key can carry text as well as a value.
    Reported,
    /// An untrusted result: its keys are mostly the tool's own field names (`messages`,
    /// `subject`), which would match every program that names them.
    Skipped,
}

/// Calls `f` with every scalar of `value` that could hold a run (texts of at least
/// [`MIN_MATCH_CHARS`] bytes: a shorter one has fewer characters too), in document order.
pub(super) fn walk<'v>(value: &'v Value, keys: Keys, f: &mut dyn FnMut(Found<'v, '_>)) {
    let mut path = Vec::new();
    walk_at(value, keys, &mut path, f);
}

fn walk_at<'v>(
    value: &'v Value,
    keys: Keys,
    path: &mut Vec<Step<'v>>,
    f: &mut dyn FnMut(Found<'v, '_>),
) {
    // Bounded recursion: the JSON parser's own limit is 128, this one is lower.
    if path.len() > MAX_DEPTH {
        f(Found::TooDeep(path));
        return;
    }
    match value {
        Value::String(s) if s.len() >= MIN_MATCH_CHARS => f(Found::Text(path, Cow::Borrowed(s))),
        Value::Number(n) => {
            let text = n.to_string();
            if text.len() >= MIN_MATCH_CHARS {
                f(Found::Text(path, Cow::Owned(text)));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Step::Index(i));
                walk_at(item, keys, path, f);
                path.pop();
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                path.push(Step::Key(key));
                if keys == Keys::Reported && key.len() >= MIN_MATCH_CHARS {
                    f(Found::Text(path, Cow::Borrowed(key)));
                }
                walk_at(item, keys, path, f);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The object keys of a path, array indices left out (what a rule's `#argument` names).
pub(super) fn keys<'v>(path: &[Step<'v>]) -> Vec<&'v str> {
    path.iter()
        .filter_map(|s| match s {
            Step::Key(k) => Some(*k),
            Step::Index(_) => None,
        })
        .collect()
}

/// Longest path shown, in bytes (keys are the program's and may be long).
const MAX_SHOWN_PATH: usize = 200;

/// A path as the trace shows it: `message.to[0]`; the whole value is `(arguments)`.
pub(super) fn shown(path: &[Step<'_>]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
        if out.len() > MAX_SHOWN_PATH {
            let mut cut = MAX_SHOWN_PATH;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push('…');
            break;
        }
    }
    if out.is_empty() {
        out.push_str("(arguments)");
    }
    out
}

/// The Mersenne prime 2^61 - 1: the rolling hash's modulus.
const MODULUS: u64 = (1 << 61) - 1;
/// The rolling hash's base (any value well inside the modulus).
const BASE: u64 = 0x0ab5_4a98_ceb1_f0ad;

fn mul_mod(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    // 2^61 ≡ 1 (mod 2^61 - 1): fold the high bits onto the low ones.
    let folded = (product & u128::from(MODULUS)) + (product >> 61);
    u64::try_from(folded).unwrap_or(0) % MODULUS
}

/// BASE^(MIN_MATCH_CHARS - 1): the weight of the character that leaves the window.
fn leaving_weight() -> u64 {
    let mut w = 1;
    for _ in 1..MIN_MATCH_CHARS {
        w = mul_mod(w, BASE);
    }
    w
}

/// Calls `f` with the hash of every run of [`MIN_MATCH_CHARS`] consecutive characters of
/// `text`, in order: O(1) per character. Equal runs have equal hashes; different runs collide
/// with a probability near 2^-61 (a collision could only make a call look like a flow).
pub(super) fn runs(text: &str, f: &mut dyn FnMut(u64)) {
    let weight = leaving_weight();
    let mut ring = [0u64; MIN_MATCH_CHARS];
    let mut hash = 0u64;
    for (n, c) in text.chars().enumerate() {
        let c = u64::from(u32::from(c)) + 1;
        let slot = n % MIN_MATCH_CHARS;
        if n >= MIN_MATCH_CHARS {
            let leaving = mul_mod(ring[slot], weight);
            hash = (hash + MODULUS - leaving) % MODULUS;
        }
        hash = (mul_mod(hash, BASE) + c) % MODULUS;
        ring[slot] = c;
        if n + 1 >= MIN_MATCH_CHARS {
            f(hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all(text: &str) -> Vec<u64> {
        let mut out = Vec::new();
        runs(text, &mut |h| out.push(h));
        out
    }

    #[test]
    fn equal_runs_hash_alike_wherever_they_are() {
        let a = all("attacker@evil.example");
        let b = all("please write to attacker@evil.example today");
        assert_eq!(
            a.len(),
            "attacker@evil.example".chars().count() - MIN_MATCH_CHARS + 1
        );
        assert!(a.iter().all(|h| b.contains(h)));
        // Case as written: another case is another run.
        let upper = all("ATTACKER@EVIL.EXAMPLE");
        assert!(upper.iter().all(|h| !a.contains(h)));
        // Fewer characters than a run: nothing.
        assert!(all("short").is_empty());
        assert_eq!(all("ééééééé").len(), 0);
        assert_eq!(all("éééééééé").len(), 1);
    }

    #[test]
    fn a_run_hashes_the_same_rolled_or_fresh() {
        let text = "0123456789abcdef";
        let rolled = all(text);
        for (i, h) in rolled.iter().enumerate() {
            assert_eq!(all(&text[i..i + MIN_MATCH_CHARS]), vec![*h]);
        }
    }

    #[test]
    fn the_walk_finds_strings_keys_and_numbers_with_their_paths() {
        let value = json!({"to": ["someone@example.com", "x"], "n": 123456789, "deep": {"long key here": true}});
        let mut found = Vec::new();
        walk(&value, Keys::Reported, &mut |f| {
            if let Found::Text(path, text) = f {
                found.push((shown(path), text.into_owned()));
            }
        });
        assert_eq!(
            found,
            vec![
                ("deep.long key here".to_owned(), "long key here".to_owned()),
                ("n".to_owned(), "123456789".to_owned()),
                ("to[0]".to_owned(), "someone@example.com".to_owned()),
            ]
        );
        let mut skipped = 0;
        walk(&value, Keys::Skipped, &mut |_| skipped += 1);
        assert_eq!(skipped, 2, "the key is left out");
    }

    #[test]
    fn the_walk_stops_at_its_depth() {
        let mut value = json!("deep deep deep");
        for _ in 0..(MAX_DEPTH + 5) {
            value = json!([value]);
        }
        let (mut texts, mut deep) = (0, 0);
        walk(&value, Keys::Skipped, &mut |f| match f {
            Found::Text(..) => texts += 1,
            Found::TooDeep(path) => {
                assert_eq!(path.len(), MAX_DEPTH + 1);
                deep += 1;
            }
        });
        assert_eq!((texts, deep), (0, 1));
    }
}
