//! What the trace shows of each call's result: the scanned result the program got, shortened
//! so a failure can be explained without running the program again, and bounded so a trace of
//! many large results stays small.
//!
//! The value is the one the worker received (already redacted and scanned), never the tool's
//! raw answer. Long strings are cut, long arrays keep their first items, deep levels become a
//! marker, and a marker string says what was left out; `result_truncated` says the value is
//! not the whole result. Once an execution's previews reach [`TRACE_RESULTS_BYTES`], later
//! calls show no result at all (still marked truncated).

use serde_json::{Map, Value};

/// The most JSON text one call's preview may take.
pub const PREVIEW_BYTES: usize = 4 * 1024;
/// The most JSON text the previews of one execution's calls may take together.
pub const TRACE_RESULTS_BYTES: usize = 256 * 1024;
/// Results of at most this much JSON text are parsed for a preview; a larger one is shown as
/// its size only (parsing 16 MiB to show 4 KiB is not worth the time on the response path).
const MAX_PARSED_BYTES: usize = 1024 * 1024;
/// Characters kept of a long string.
const STRING_CHARS: usize = 200;
/// Items kept of a long array, and properties of a large object.
const ITEMS: usize = 10;
/// Levels kept; deeper objects and arrays become a marker.
const DEPTH: usize = 6;

/// The preview of one result's JSON text, and whether it is less than the whole result.
/// `budget` is what the execution's previews may still take; it is reduced by this one.
pub fn preview(text: &str, budget: &mut usize) -> (Option<Value>, bool) {
    if *budget == 0 {
        return (None, true);
    }
    if text.len() > MAX_PARSED_BYTES {
        let note = Value::String(format!(
            "… {} bytes of JSON, too large to show in the trace",
            text.len()
        ));
        return (Some(note), true);
    }
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return (None, true);
    };
    let (mut shown, mut cut) = if text.len() <= PREVIEW_BYTES {
        (value, false)
    } else {
        let mut cut = false;
        (shorten(&value, 0, &mut cut), cut)
    };
    // A value still over the preview's size (many medium strings, say) is cut harder: fewer
    // levels until it fits, at worst its type and size.
    let mut size = serde_json::to_string(&shown).map_or(usize::MAX, |s| s.len());
    let mut depth = DEPTH;
    while size > PREVIEW_BYTES.min(*budget) && depth > 0 {
        depth -= 1;
        shown = shorten_to(&shown, 0, depth);
        cut = true;
        size = serde_json::to_string(&shown).map_or(usize::MAX, |s| s.len());
    }
    if size > *budget {
        *budget = 0;
        return (None, true);
    }
    *budget -= size;
    (Some(shown), cut)
}

/// `value` with long strings, long arrays, large objects and deep levels cut.
fn shorten(value: &Value, depth: usize, cut: &mut bool) -> Value {
    match value {
        Value::String(s) => match s.char_indices().nth(STRING_CHARS) {
            Some((at, _)) => {
                *cut = true;
                Value::String(format!("{}… ({} chars)", &s[..at], s.chars().count()))
            }
            None => value.clone(),
        },
        Value::Array(items) => {
            if depth >= DEPTH {
                *cut = true;
                return Value::String(format!("[… {} items]", items.len()));
            }
            let mut out: Vec<Value> = items
                .iter()
                .take(ITEMS)
                .map(|v| shorten(v, depth + 1, cut))
                .collect();
            if items.len() > ITEMS {
                *cut = true;
                out.push(Value::String(format!(
                    "… {} more items",
                    items.len() - ITEMS
                )));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            if depth >= DEPTH {
                *cut = true;
                return Value::String(format!("{{… {} keys}}", map.len()));
            }
            let mut out = Map::new();
            for (k, v) in map.iter().take(ITEMS * 3) {
                out.insert(k.clone(), shorten(v, depth + 1, cut));
            }
            if map.len() > ITEMS * 3 {
                *cut = true;
                out.insert(
                    "…".to_owned(),
                    Value::String(format!("{} more keys", map.len() - ITEMS * 3)),
                );
            }
            Value::Object(out)
        }
        _ => value.clone(),
    }
}

/// `value` (already shortened) with levels past `max` replaced by markers.
fn shorten_to(value: &Value, depth: usize, max: usize) -> Value {
    match value {
        Value::Array(items) if depth >= max => Value::String(format!("[… {} items]", items.len())),
        Value::Object(map) if depth >= max => Value::String(format!("{{… {} keys}}", map.len())),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| shorten_to(v, depth + 1, max))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), shorten_to(v, depth + 1, max)))
                .collect(),
        ),
        _ => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn small_results_are_shown_whole() {
        let mut budget = TRACE_RESULTS_BYTES;
        let text = r#"{"entities":[{"name":"a"}],"relations":[]}"#;
        let (shown, cut) = preview(text, &mut budget);
        assert_eq!(
            shown,
            Some(json!({ "entities": [{ "name": "a" }], "relations": [] }))
        );
        assert!(!cut);
        assert_eq!(budget, TRACE_RESULTS_BYTES - text.len());
    }

    #[test]
    fn large_results_are_cut_and_marked() {
        let mut budget = TRACE_RESULTS_BYTES;
        let items: Vec<Value> = (0..100)
            .map(|i| json!({ "id": i, "text": "x".repeat(500) }))
            .collect();
        let text = serde_json::to_string(&json!({ "items": items })).unwrap_or_default();
        let (shown, cut) = preview(&text, &mut budget);
        assert!(cut);
        let shown = shown.unwrap_or_default();
        let rendered = shown.to_string();
        assert!(rendered.len() <= PREVIEW_BYTES, "{}", rendered.len());
        assert_eq!(shown["items"][0]["id"], 0);
        assert!(rendered.contains("… 90 more items"), "{rendered}");
        assert!(rendered.contains("(500 chars)"), "{rendered}");
    }

    #[test]
    fn a_deep_result_keeps_its_top_levels() {
        let mut deep = json!("leaf");
        for _ in 0..50 {
            deep = json!({ "next": deep, "pad": "y".repeat(150) });
        }
        let text = deep.to_string();
        let mut budget = TRACE_RESULTS_BYTES;
        let (shown, cut) = preview(&text, &mut budget);
        assert!(cut);
        let shown = shown.unwrap_or_default();
        assert!(shown["next"].is_object());
        assert!(shown.to_string().len() <= PREVIEW_BYTES);
    }

    #[test]
    fn the_execution_budget_bounds_all_previews() {
        let text = serde_json::to_string(&json!({ "s": "z".repeat(3000) })).unwrap_or_default();
        let mut budget = 10_000;
        let mut whole = 0;
        for _ in 0..10 {
            let (shown, cut) = preview(&text, &mut budget);
            if shown.is_some() && !cut {
                whole += 1;
            }
        }
        assert_eq!(
            whole, 3,
            "three previews of ~3 KB fit in 10 KB; later ones are markers"
        );
        assert!(budget < 10_000 - 3 * text.len());
        let mut empty = 0;
        assert_eq!(preview(&text, &mut empty), (None, true));
        // Oversized and unparsable text never fail the trace.
        let mut budget = TRACE_RESULTS_BYTES;
        assert_eq!(preview("{not json", &mut budget), (None, true));
        let big = format!("\"{}\"", "q".repeat(MAX_PARSED_BYTES));
        let (note, cut) = preview(&big, &mut budget);
        assert!(cut && note.is_some_and(|n| n.as_str().is_some_and(|s| s.contains("bytes"))));
    }
}
