//! The output budget: what one execution gives the agent (its error, result, stdout and
//! stderr), counted in OpenAI's `cl100k_base` tokens (`tiktoken-rs`, ranks compiled into the
//! binary, loaded once on first use) and cut at `max_output_tokens` with a note that says how
//! much was cut and how to get it.
//!
//! The budget is spent in a fixed order, each part keeping what fits in what the parts before
//! it left: the error's message, its stack, the result (as the JSON text the agent gets),
//! stdout, stderr. The error comes first because it says why the program failed; the result
//! before the console because it is what the program was written to produce. The notes
//! themselves are not counted. Nothing cut is kept: the full value lives only as long as the
//! execution, unless the program stores it.

use crate::agent_api::ExecutionError;
use serde_json::Value;
use tiktoken_rs::CoreBPE;

/// What the agent is told to do about a cut.
const WHAT_TO_DO: &str = "keep the full value with store.set(key, value) in a session and read it in pieces, or return a narrower selection";

/// The tokenizer, loaded on first use (a few tens of milliseconds; [`warm`] does it early).
fn tokenizer() -> &'static CoreBPE {
    tiktoken_rs::cl100k_base_singleton()
}

/// Loads the tokenizer now, so the first execution does not pay for it.
pub fn warm() {
    let _ = tokenizer();
}

/// `cl100k_base` tokens of `text`.
#[cfg(test)]
fn count(text: &str) -> u64 {
    tokenizer().encode_ordinary(text).len() as u64
}

/// Output larger than this (bytes of text and result JSON) is counted with the runtime told
/// that its thread is busy.
const LARGE_BYTES: usize = 64 << 10;

/// What the budget did to one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Spent {
    /// Tokens the agent gets (the notes not counted).
    pub(super) output_tokens: u64,
    /// Tokens cut.
    pub(super) cut_tokens: u64,
}

/// Parts up to this many bytes are counted whole, exactly. A longer part is counted only as
/// far as its cut (a prefix of about `room` tokens): what lies past the cut is estimated from
/// the kept part's bytes per token and called "about" in the note. Counting 8 MB whole took
/// seconds of the daemon's CPU for each such response; the cut costs what the budget is.
const COUNTED_BYTES: usize = 256 << 10;

/// Tokens counted past `room` before a prefix's cut is trusted: the tokenizer's pieces at
/// the end of a prefix may split differently from the whole text's.
const PREFIX_MARGIN: u64 = 64;

/// `text` cut to at most `room` tokens. A cut falls on a token boundary, moved back to a
/// character boundary if the token splits one.
fn cut_text(text: &str, room: u64) -> Cut<'_> {
    if text.len() <= COUNTED_BYTES {
        let tokens = tokenizer().encode_ordinary(text);
        let total = tokens.len() as u64;
        if total <= room {
            return Cut::whole(text, total);
        }
        let kept = prefix_of_tokens(text, &tokens, room);
        return Cut {
            kept,
            kept_tokens: room,
            cut_tokens: total - room,
            estimated: false,
        };
    }
    // Every cl100k token is at least one byte: a prefix of `room` × 4 bytes (about one
    // token's worth each, in English) and doubling until it holds `room` tokens and a margin.
    let mut len = usize::try_from(room)
        .unwrap_or(usize::MAX)
        .saturating_mul(4)
        .max(4096);
    let kept = loop {
        let end = floor_char_boundary(text, len.min(text.len()));
        let prefix = &text[..end];
        let tokens = tokenizer().encode_ordinary(prefix);
        if end == text.len() && tokens.len() as u64 <= room {
            return Cut::whole(text, tokens.len() as u64);
        }
        if tokens.len() as u64 >= room.saturating_add(PREFIX_MARGIN) || end == text.len() {
            break prefix_of_tokens(prefix, &tokens, room);
        }
        len = len.saturating_mul(2);
    };
    // The kept text counted on its own (what the agent gets), cut again in the rare case
    // that its own tokens are more than `room`.
    let mut kept = kept;
    let mut kept_tokens = tokenizer().encode_ordinary(kept);
    for _ in 0..3 {
        if kept_tokens.len() as u64 <= room {
            break;
        }
        kept = prefix_of_tokens(kept, &kept_tokens, room);
        kept_tokens = tokenizer().encode_ordinary(kept);
    }
    let kept_count = kept_tokens.len() as u64;
    let rest = (text.len() - kept.len()) as u64;
    // Bytes per token of the kept part, at least one token per four bytes of the rest.
    let cut_tokens = match kept.len() as u64 {
        0 => rest.div_ceil(4),
        bytes => (rest.saturating_mul(kept_count.max(1))).div_ceil(bytes),
    };
    Cut {
        kept,
        kept_tokens: kept_count,
        cut_tokens: cut_tokens.max(1),
        estimated: true,
    }
}

/// One part cut: what is kept, its tokens, the tokens cut (estimated past
/// [`COUNTED_BYTES`]).
struct Cut<'t> {
    kept: &'t str,
    kept_tokens: u64,
    cut_tokens: u64,
    estimated: bool,
}

impl<'t> Cut<'t> {
    fn whole(text: &'t str, tokens: u64) -> Self {
        Cut {
            kept: text,
            kept_tokens: tokens,
            cut_tokens: 0,
            estimated: false,
        }
    }
}

/// The prefix of `text` that the first `room` of its `tokens` decode to, moved back to a
/// character boundary (a token may end inside a character).
fn prefix_of_tokens<'t>(text: &'t str, tokens: &[u32], room: u64) -> &'t str {
    let keep = usize::try_from(room)
        .unwrap_or(usize::MAX)
        .min(tokens.len());
    let bytes = tokenizer()
        .decode_bytes(&tokens[..keep])
        .map_or(0, |b| b.len());
    &text[..floor_char_boundary(text, bytes.min(text.len()))]
}

/// The largest character boundary of `text` at or before `at`.
fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// One part's note.
fn note(part: &str, cut: u64, total: u64, budget: u64, estimated: bool) -> String {
    let about = if estimated { "about " } else { "" };
    format!(
        "[airlock: {about}{cut} of {about}{total} tokens of the {part} were cut at the output budget ({budget} cl100k tokens, max_output_tokens): {WHAT_TO_DO}]"
    )
}

/// Cuts one text part to what is left of the budget, with its note; `None` when it fits.
fn spend_text(text: &mut String, part: &str, left: &mut u64, budget: u64) -> (Spent, bool) {
    let Cut {
        kept,
        kept_tokens,
        cut_tokens: cut,
        estimated,
    } = cut_text(text, *left);
    *left = left.saturating_sub(kept_tokens);
    if cut == 0 {
        return (
            Spent {
                output_tokens: kept_tokens,
                cut_tokens: 0,
            },
            false,
        );
    }
    let mut out = kept.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&note(part, cut, kept_tokens + cut, budget, estimated));
    out.push('\n');
    *text = out;
    (
        Spent {
            output_tokens: kept_tokens,
            cut_tokens: cut,
        },
        true,
    )
}

/// Applies the budget of `budget` tokens to a response's parts, in the documented order; the
/// parts cut, by name, for the response's warning.
pub(super) fn apply(
    budget: u64,
    error: Option<&mut ExecutionError>,
    result: &mut Value,
    stdout: &mut String,
    stderr: &mut String,
) -> (Spent, Vec<&'static str>) {
    // The result as the agent gets it: its JSON text, made once, for the size and the count.
    let result_text = (!result.is_null()).then(|| result.to_string());
    let bytes = stdout.len() + stderr.len() + result_text.as_ref().map_or(0, String::len);
    let count = || spend(budget, error, result, result_text, stdout, stderr);
    // Counting takes a runtime thread for a while on large output (parts over COUNTED_BYTES
    // are counted only as far as their cut, but a cut may still be most of a MiB): the runtime
    // is told, so that its other tasks move elsewhere.
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if bytes > LARGE_BYTES && multi_thread {
        tokio::task::block_in_place(count)
    } else {
        count()
    }
}

/// [`apply`], with the result's JSON text made.
fn spend(
    budget: u64,
    error: Option<&mut ExecutionError>,
    result: &mut Value,
    result_text: Option<String>,
    stdout: &mut String,
    stderr: &mut String,
) -> (Spent, Vec<&'static str>) {
    let mut left = budget;
    let mut spent = Spent::default();
    let mut cut_parts = Vec::new();
    let mut add = |s: Spent, cut: bool, part: &'static str, parts: &mut Vec<&'static str>| {
        spent.output_tokens += s.output_tokens;
        spent.cut_tokens += s.cut_tokens;
        if cut {
            parts.push(part);
        }
    };
    if let Some(error) = error {
        let (s, cut) = spend_text(&mut error.message, "error message", &mut left, budget);
        add(s, cut, "error message", &mut cut_parts);
        if let Some(stack) = error.stack.as_mut() {
            let (s, cut) = spend_text(stack, "error stack", &mut left, budget);
            add(s, cut, "error stack", &mut cut_parts);
        }
    }
    if let Some(mut text) = result_text {
        // Cut, the result is no longer JSON, so the agent gets the kept text as a string, the
        // note at its end.
        let (s, cut) = spend_text(&mut text, "result", &mut left, budget);
        add(s, cut, "result", &mut cut_parts);
        if cut {
            *result = Value::String(text);
        }
    }
    let (s, cut) = spend_text(stdout, "stdout", &mut left, budget);
    add(s, cut, "stdout", &mut cut_parts);
    let (s, cut) = spend_text(stderr, "stderr", &mut left, budget);
    add(s, cut, "stderr", &mut cut_parts);
    (spent, cut_parts)
}

/// The response's warning about what was cut.
pub(super) fn warning(budget: u64, spent: Spent, parts: &[&str]) -> Option<String> {
    (spent.cut_tokens > 0).then(|| {
        format!(
            "{} tokens of the {} were cut at the output budget ({budget} cl100k tokens; see stats.cut_tokens): {WHAT_TO_DO}",
            spent.cut_tokens,
            parts.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_api::ExecutionErrorKind;
    use serde_json::json;

    #[test]
    fn counts_with_cl100k() {
        // "hello world" is two tokens in cl100k_base ([15339, 1917]).
        assert_eq!(count("hello world"), 2);
        assert_eq!(count(""), 0);
    }

    #[test]
    fn what_fits_is_unchanged() {
        let mut result = json!({"a": [1, 2, 3]});
        let (mut out, mut err) = ("hello\n".to_owned(), String::new());
        let (spent, parts) = apply(100, None, &mut result, &mut out, &mut err);
        assert_eq!(result, json!({"a": [1, 2, 3]}));
        assert_eq!(out, "hello\n");
        assert_eq!(spent.cut_tokens, 0);
        assert_eq!(
            spent.output_tokens,
            count(r#"{"a":[1,2,3]}"#) + count("hello\n")
        );
        assert!(parts.is_empty());
        assert!(warning(100, spent, &parts).is_none());
    }

    #[test]
    fn a_large_result_is_cut_to_the_budget_with_a_note() {
        let big: Vec<String> = (0..10_000).map(|i| format!("item number {i}")).collect();
        let mut result = json!(big);
        let full = count(&result.to_string());
        let (mut out, mut err) = ("printed\n".to_owned(), String::new());
        let (spent, parts) = apply(1000, None, &mut result, &mut out, &mut err);
        let text = result.as_str().expect("a cut result is a string");
        assert!(
            text.starts_with(r#"["item number 0","item number 1""#),
            "{text:.80}"
        );
        assert!(
            text.contains(&format!(
                "{} of {full} tokens of the result were cut",
                full - 1000
            )),
            "{text}"
        );
        assert!(text.contains("store.set"), "{text}");
        assert_eq!(spent.output_tokens, 1000);
        // Nothing was left for stdout.
        assert_eq!(spent.cut_tokens, full - 1000 + count("printed\n"));
        assert!(out.starts_with("[airlock: "), "{out}");
        assert_eq!(parts, ["result", "stdout"]);
        let warning = warning(1000, spent, &parts).unwrap();
        assert!(
            warning.contains("of the result, stdout were cut"),
            "{warning}"
        );
    }

    #[test]
    fn the_error_comes_first_then_result_then_stdout_then_stderr() {
        let mut error = ExecutionError::new(ExecutionErrorKind::Runtime, "boom");
        let mut result = Value::Null;
        let mut out = "x ".repeat(500);
        let mut err = "y ".repeat(500);
        let (spent, parts) = apply(300, Some(&mut error), &mut result, &mut out, &mut err);
        assert_eq!(error.message, "boom");
        assert_eq!(spent.output_tokens, 300);
        assert_eq!(parts, ["stdout", "stderr"]);
        assert!(out.contains("tokens of the stdout were cut"), "{out}");
        assert!(err.starts_with("[airlock: "), "{err}");
        assert!(err.contains("tokens of the stderr were cut"), "{err}");
    }

    /// One 1 MiB word is one piece for the tokenizer's pre-split: it must not take the
    /// quadratic path (tiktoken merges pieces this long with a heap), and it is counted only
    /// as far as its cut.
    #[test]
    fn a_megabyte_without_a_space_is_counted_quickly() {
        let word = "a".repeat(1 << 20);
        let started = std::time::Instant::now();
        let c = cut_text(&word, 10_000);
        let took = started.elapsed();
        assert_eq!(c.kept_tokens, 10_000);
        assert!(c.cut_tokens > 0 && c.kept.len() < word.len());
        eprintln!("1 MiB of one letter: {took:?} (debug build)");
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    }

    /// A part longer than [`COUNTED_BYTES`] is counted as far as its cut: 8 MB of one letter
    /// (a test's result that took seconds to count whole) is cut to the budget exactly, and
    /// the rest is estimated.
    #[test]
    fn a_long_part_is_counted_only_to_its_cut() {
        for text in ["x".repeat(8_000_000), "word ".repeat(1_600_000)] {
            let started = std::time::Instant::now();
            let c = cut_text(&text, 10_000);
            let took = started.elapsed();
            assert!(
                c.kept_tokens <= 10_000 && c.kept_tokens > 9_000,
                "{}",
                c.kept_tokens
            );
            assert_eq!(count(c.kept), c.kept_tokens);
            assert!(c.estimated);
            assert!(c.cut_tokens > 0);
            eprintln!("8 MB part cut at 10,000 tokens in {took:?} (debug build)");
            assert!(took < std::time::Duration::from_secs(5), "{took:?}");
        }
        // Words of one token each: the estimate is near the truth.
        let text = "word ".repeat(1_600_000);
        let c = cut_text(&text, 10_000);
        let truth = count(&text) - c.kept_tokens;
        let off = c.cut_tokens.abs_diff(truth) as f64 / truth as f64;
        assert!(off < 0.05, "estimated {} against {truth}", c.cut_tokens);
    }

    #[test]
    fn a_cut_inside_a_character_moves_back_to_its_start() {
        // Characters of several bytes are often split across tokens.
        let text = "日本語のテキスト".repeat(50);
        for room in 1..40 {
            let kept = cut_text(&text, room).kept;
            assert!(text.starts_with(kept));
        }
    }
}
