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
pub(super) const LARGE_BYTES: usize = 64 << 10;

/// The length of `value`'s JSON text, without keeping the text.
pub(super) fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// What the budget did to one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Spent {
    /// Tokens the agent gets (the notes not counted).
    pub(super) output_tokens: u64,
    /// Tokens cut.
    pub(super) cut_tokens: u64,
}

/// `text` cut to at most `room` tokens: the text kept, its tokens and how many were cut. A cut
/// falls on a token boundary, moved back to a character boundary if the token splits one.
fn cut_text(text: &str, room: u64) -> (&str, u64, u64) {
    let tokens = tokenizer().encode_ordinary(text);
    let total = tokens.len() as u64;
    if total <= room {
        return (text, total, 0);
    }
    let keep = usize::try_from(room).unwrap_or(usize::MAX);
    let bytes = tokenizer()
        .decode_bytes(&tokens[..keep])
        .map_or(0, |b| b.len());
    // The decoded tokens are a prefix of the text's bytes; a token may end inside a
    // character, so the cut moves back to the last character boundary.
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], room, total - room)
}

/// One part's note.
fn note(part: &str, cut: u64, total: u64, budget: u64) -> String {
    format!(
        "[airlock: {cut} of {total} tokens of the {part} were cut at the output budget ({budget} cl100k tokens, max_output_tokens): {WHAT_TO_DO}]"
    )
}

/// Cuts one text part to what is left of the budget, with its note; `None` when it fits.
fn spend_text(text: &mut String, part: &str, left: &mut u64, budget: u64) -> (Spent, bool) {
    let (kept, kept_tokens, cut) = cut_text(text, *left);
    *left -= kept_tokens;
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
    out.push_str(&note(part, cut, kept_tokens + cut, budget));
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
    if !result.is_null() {
        // The result as the agent gets it: its JSON text. Cut, it is no longer JSON, so the
        // agent gets the kept text as a string, the note at its end.
        let mut text = result.to_string();
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
    fn json_len_is_the_texts() {
        let v = json!({"a": [1, "x", null], "b": "é"});
        assert_eq!(json_len(&v), v.to_string().len());
    }

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
        let big: Vec<String> = (0..20_000).map(|i| format!("item number {i}")).collect();
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
    /// quadratic path (tiktoken merges pieces this long with a heap).
    #[test]
    fn a_megabyte_without_a_space_is_counted_quickly() {
        let word = "a".repeat(1 << 20);
        let started = std::time::Instant::now();
        let (kept, tokens, cut) = cut_text(&word, 10_000);
        let took = started.elapsed();
        assert_eq!(tokens, 10_000);
        assert!(cut > 0 && kept.len() < word.len());
        eprintln!("1 MiB of one letter: {took:?} (debug build)");
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    }

    #[test]
    fn a_cut_inside_a_character_moves_back_to_its_start() {
        // Characters of several bytes are often split across tokens.
        let text = "日本語のテキスト".repeat(50);
        for room in 1..40 {
            let (kept, _, _) = cut_text(&text, room);
            assert!(text.starts_with(kept));
        }
    }
}
