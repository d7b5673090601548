//! The learned-types benchmark: what learning costs per tool result, in µs per KB of the
//! result's JSON text. Per result the call pipeline infers its shape and, for a tool with a
//! declared output schema, compares it with that schema (`Observation::of`, outside any
//! lock), then merges the shape into the tool's learned type (`LearnedTypes::record`, under
//! the lock; its cost follows the size of the learned type, not of the result). For the
//! comparison the declared schema is the result's own learned type, so it walks all of it.
//! Measured on realistic results of four sizes (1 KB to 1 MB): GitHub's example
//! responses from `@octokit/openapi` (as in the secret-scanner benchmark), or, without the
//! npm peers installed, a generated list of issue-like objects (it says which).
//!
//! Run: `cargo bench -p airlock-tests --bench learned_types` (`AIRLOCK_BENCH_QUICK=1` for a
//! shorter run).

// Benchmark code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_supervisor::learned_types::shape::Shape;
use airlock_supervisor::learned_types::{LearnedTypes, Observation, ToolContract};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const KB: usize = 1024;

/// Results of about `bytes` of JSON each: GitHub's example responses, or generated issues.
fn realistic(bytes: usize) -> (Value, &'static str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mcp-peers/node_modules/@octokit/openapi/generated/api.github.com.json");
    let mut items = Vec::new();
    let mut size = 0;
    let source = match std::fs::read_to_string(&path) {
        Ok(text) => {
            let doc: Value = serde_json::from_str(&text).unwrap();
            let examples = doc["components"]["examples"].as_object().unwrap();
            'fill: loop {
                for example in examples.values() {
                    let value = example.get("value").cloned().unwrap_or(Value::Null);
                    let len = serde_json::to_string(&value).unwrap().len();
                    if size > 0 && size + len > bytes * 2 {
                        continue;
                    }
                    size += len;
                    items.push(value);
                    if size >= bytes {
                        break 'fill;
                    }
                }
            }
            "GitHub REST example responses"
        }
        Err(_) => {
            let mut n = 0u64;
            while size < bytes {
                let item = json!({
                    "id": n, "number": n,
                    "url": format!("https://api.github.com/repos/octo/hello/issues/{n}"),
                    "title": format!("Issue {n}"),
                    "created_at": "2026-11-20T10:00:00Z",
                    "closed_at": if n.is_multiple_of(3) { Value::Null } else { json!("2026-11-21T10:00:00Z") },
                    "user": { "login": format!("user{n}"), "id": n * 7, "site_admin": false },
                    "labels": [{ "name": "bug", "color": "d73a4a" }],
                    "score": 0.5,
                });
                size += serde_json::to_string(&item).unwrap().len();
                items.push(item);
                n += 1;
            }
            "generated issue list (@octokit/openapi is not installed)"
        }
    };
    (Value::Array(items), source)
}

/// The best time of `f` over runs filling `budget` (at least 5 runs).
fn best(budget: Duration, mut f: impl FnMut() -> Duration) -> Duration {
    let started = Instant::now();
    let mut best = Duration::MAX;
    let mut runs = 0;
    while runs < 5 || started.elapsed() < budget {
        best = best.min(f());
        runs += 1;
    }
    best
}

fn main() {
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let budget = Duration::from_millis(if quick { 200 } else { 1500 });
    let undeclared = ToolContract::of(&json!({"type": "object"}), None);
    for size in [KB, 16 * KB, 256 * KB, 1024 * KB] {
        let (value, source) = realistic(size);
        // A declared schema the result fits everywhere (its own learned type), so the
        // comparison walks all of it: the worst case.
        let declared = ToolContract::of(
            &json!({"type": "object"}),
            Some(&Shape::of(&value).to_schema()),
        );
        assert_eq!(
            Observation::of(&value, &declared).contradiction,
            Some(None),
            "the result fits its own learned type"
        );
        let bytes = serde_json::to_string(&value).unwrap().len();
        let kb = bytes as f64 / KB as f64;
        let types = LearnedTypes::in_memory();
        // Warm: the tool's learned type already holds this shape, as after its first call.
        types.record(
            "local",
            "bench",
            "t",
            &undeclared,
            Observation::of(&value, &undeclared),
        );
        let infer = best(budget, || {
            let started = Instant::now();
            std::hint::black_box(Observation::of(std::hint::black_box(&value), &undeclared));
            started.elapsed()
        });
        let infer_and_check = best(budget, || {
            let started = Instant::now();
            std::hint::black_box(Observation::of(std::hint::black_box(&value), &declared));
            started.elapsed()
        });
        let observation = Observation::of(&value, &undeclared);
        let merge = best(budget, || {
            let o = observation.clone();
            let started = Instant::now();
            types.record("local", "bench", "t", &undeclared, o);
            started.elapsed()
        });
        let per_kb = |d: Duration| d.as_secs_f64() * 1e6 / kb;
        println!(
            "{:>7.1} KB result ({source}): infer {:>6.2} µs/KB, infer + declared-schema check {:>6.2} µs/KB, merge {:>6.1} µs per result; learning in all {:>6.2} µs/KB",
            kb,
            per_kb(infer),
            per_kb(infer_and_check),
            merge.as_secs_f64() * 1e6,
            per_kb(infer + merge),
        );
    }
}
