//! What the trace shows of each call's result: the scanned result the program got, shortened
//! so a failure can be explained without running the program again, and bounded so a trace of
//! many large results stays small (it is read by a model). Only a failed execution's response
//! shows them (`response.rs`).
//!
//! The value is the one the worker received (already redacted and scanned), never the tool's
//! raw answer. Long strings are cut, long arrays keep their first items, deep levels become a
//! marker, and a marker string says what was left out; `result_truncated` says the value is
//! not the whole result. Once an execution's previews reach [`TRACE_RESULTS_BYTES`], later
//! calls show no result at all (still marked truncated).

use serde_json::{Map, Value};

/// The most JSON text one call's preview may take.
pub const PREVIEW_BYTES: usize = 2 * 1024;
/// The most JSON text the previews of one execution's calls may take together.
pub const TRACE_RESULTS_BYTES: usize = 32 * 1024;
/// Results of at most this much JSON text are parsed for a preview; a larger one is shown as
/// its size only (parsing 16 MiB to show 4 KiB is not worth the time on the response path).
const MAX_PARSED_BYTES: usize = 1024 * 1024;
/// How much of a value a preview keeps: characters of a string, items of an array (and three
/// times as many properties of an object), levels.
#[derive(Debug, Clone, Copy)]
struct Cut {
    chars: usize,
    items: usize,
    depth: usize,
}

/// The cuts tried in turn until the preview fits: the first keeps most, the last little more
/// than the top level's keys.
const CUTS: [Cut; 5] = [
    Cut {
        chars: 200,
        items: 10,
        depth: 6,
    },
    Cut {
        chars: 80,
        items: 5,
        depth: 5,
    },
    Cut {
        chars: 40,
        items: 3,
        depth: 4,
    },
    Cut {
        chars: 16,
        items: 2,
        depth: 3,
    },
    Cut {
        chars: 8,
        items: 1,
        depth: 1,
    },
];

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
    let room = PREVIEW_BYTES.min(*budget);
    if text.len() <= room {
        *budget -= text.len();
        return (Some(value), false);
    }
    for cut in CUTS {
        let mut cut_anything = false;
        let shown = shorten(&value, 0, cut, &mut cut_anything);
        let size = serde_json::to_string(&shown).map_or(usize::MAX, |s| s.len());
        if size <= room {
            *budget -= size;
            return (Some(shown), cut_anything);
        }
    }
    // Not even the smallest cut fits what is left: later calls show none, and no longer pay
    // for parsing their results.
    *budget = 0;
    (None, true)
}

/// `value` with long strings, long arrays, large objects and deep levels cut as `cut` says;
/// a marker string says what was left out.
fn shorten(value: &Value, depth: usize, cut: Cut, cut_anything: &mut bool) -> Value {
    match value {
        Value::String(s) => match s.char_indices().nth(cut.chars) {
            Some((at, _)) => {
                *cut_anything = true;
                Value::String(format!("{}… ({} chars)", &s[..at], s.chars().count()))
            }
            None => value.clone(),
        },
        Value::Array(items) => {
            if depth >= cut.depth {
                *cut_anything = true;
                return Value::String(format!("[… {} items]", items.len()));
            }
            let mut out: Vec<Value> = items
                .iter()
                .take(cut.items)
                .map(|v| shorten(v, depth + 1, cut, cut_anything))
                .collect();
            if items.len() > cut.items {
                *cut_anything = true;
                out.push(Value::String(format!(
                    "… {} more items",
                    items.len() - cut.items
                )));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            if depth >= cut.depth {
                *cut_anything = true;
                return Value::String(format!("{{… {} keys}}", map.len()));
            }
            let keep = cut.items * 3;
            let mut out = Map::new();
            for (k, v) in map.iter().take(keep) {
                out.insert(k.clone(), shorten(v, depth + 1, cut, cut_anything));
            }
            if map.len() > keep {
                *cut_anything = true;
                out.insert(
                    "…".to_owned(),
                    Value::String(format!("{} more keys", map.len() - keep)),
                );
            }
            Value::Object(out)
        }
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
        assert!(rendered.contains("more items"), "{rendered}");
        assert!(rendered.contains("(500 chars)"), "{rendered}");
        assert_eq!(budget, TRACE_RESULTS_BYTES - rendered.len());
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
        let text = serde_json::to_string(&json!({ "s": "z".repeat(1500) })).unwrap_or_default();
        let mut budget = 5_000;
        let mut whole = 0;
        let mut total = 0;
        for _ in 0..10 {
            let (shown, cut) = preview(&text, &mut budget);
            if let Some(shown) = shown {
                total += shown.to_string().len();
                whole += usize::from(!cut);
            }
        }
        assert_eq!(
            whole, 3,
            "three whole previews of 1.5 KB fit in 5 KB; then cut ones"
        );
        assert!(total <= 5_000, "{total}");
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
