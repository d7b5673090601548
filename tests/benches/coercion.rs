//! The coercion benchmark: what stage 6 of the call pipeline (the arguments against the
//! tool's input schema, `ArgumentSchema::check_coercing`) costs per call with `coerce = "safe"`
//! against `"off"`, for arguments that are valid, that are near misses the daemon coerces, and
//! that it refuses; and what a result that breaks its output schema trivially costs to mend.
//! The schema is a realistic tool's (ten properties: numbers, an enum, an array, a nested
//! object behind a `$ref`, optional ones), compiled once as the registry does.
//!
//! Run: `cargo bench -p airlock-tests --bench coercion` (`AIRLOCK_BENCH_QUICK=1` for a shorter
//! run). Prints the median ns per call of each case.

// Benchmark code: a panic with the value is the clearest failure report.
#![allow(clippy::unwrap_used)]

use airlock_policy::CoercePolicy;
use airlock_supervisor::tools::arguments::ArgumentSchema;
use airlock_supervisor::tools::coercion::{OutputSchema, mend_result};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn schema(dates: bool) -> Value {
    let due = if dates {
        json!({"type": "string", "format": "date"})
    } else {
        json!({"type": "string"})
    };
    json!({
        "type": "object",
        "properties": {
            "repo": {"type": "string"},
            "title": {"type": "string", "maxLength": 200},
            "body": {"type": "string"},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5},
            "estimate": {"type": "number"},
            "state": {"type": "string", "enum": ["open", "closed", "draft"]},
            "labels": {"type": "array", "items": {"type": "string"}},
            "assignee": {"$ref": "#/$defs/User"},
            "draft": {"type": "boolean"},
            "due": due
        },
        "required": ["repo", "title"],
        "additionalProperties": false,
        "$defs": {"User": {"type": "object", "properties": {"login": {"type": "string"}, "id": {"type": "integer"}}, "required": ["login"]}}
    })
}

fn valid() -> Value {
    json!({
        "repo": "acme/widgets", "title": "Fix the flux capacitor", "body": "It leaks.",
        "priority": 2, "estimate": 1.5, "state": "open", "labels": ["bug", "p2"],
        "assignee": {"login": "ada", "id": 7}, "draft": false, "due": "2026-11-20"
    })
}

/// Four near misses: a numeric string, an enum's case, a scalar for the array, a boolean
/// string, and a null optional.
fn near_miss() -> Value {
    json!({
        "repo": "acme/widgets", "title": "Fix the flux capacitor", "body": "It leaks.",
        "priority": "2", "estimate": 1.5, "state": "OPEN", "labels": "bug",
        "assignee": {"login": "ada", "id": "7"}, "draft": "false", "due": null
    })
}

fn refused() -> Value {
    json!({
        "repo": "acme/widgets", "title": "Fix the flux capacitor", "priority": "2abc",
        "state": "open"
    })
}

/// Median ns of `f` over rounds of `batch` calls within `budget`.
fn median_ns(budget: Duration, mut f: impl FnMut()) -> f64 {
    let batch = 200;
    let mut samples = Vec::new();
    let started = Instant::now();
    while started.elapsed() < budget || samples.len() < 5 {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        samples.push(t.elapsed().as_nanos() as f64 / batch as f64);
    }
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    samples[samples.len() / 2]
}

fn main() {
    let quick = std::env::var_os("AIRLOCK_BENCH_QUICK").is_some();
    let budget = Duration::from_millis(if quick { 300 } else { 2000 });
    let plain = ArgumentSchema::compile(&schema(false));
    let dated = ArgumentSchema::compile(&schema(true));
    let case = |schema: &ArgumentSchema, args: &Value, coerce: CoercePolicy| {
        median_ns(budget, || {
            let _ = std::hint::black_box(schema.check_coercing(
                "issues.create",
                std::hint::black_box(args.clone()),
                coerce,
            ));
        })
    };
    // Sanity: the cases do what they say.
    let (_, made) = plain
        .check_coercing("issues.create", near_miss(), CoercePolicy::Safe)
        .unwrap();
    assert_eq!(made.len(), 6, "{made:?}");
    assert!(
        plain
            .check_coercing("issues.create", refused(), CoercePolicy::Safe)
            .is_err()
    );
    let prebuilt = valid();
    let clone_only = median_ns(budget, || {
        std::hint::black_box(std::hint::black_box(&prebuilt).clone());
    });
    println!("per call (median ns; each includes cloning the arguments, {clone_only:.0} ns):");
    let rows = [
        (
            "valid, coerce = off (today's check)",
            case(&plain, &valid(), CoercePolicy::Off),
        ),
        (
            "valid, coerce = safe",
            case(&plain, &valid(), CoercePolicy::Safe),
        ),
        (
            "valid, coerce = safe, schema names a date format",
            case(&dated, &valid(), CoercePolicy::Safe),
        ),
        (
            "near miss (6 coercions), coerce = off: refused",
            case(&plain, &near_miss(), CoercePolicy::Off),
        ),
        (
            "near miss (6 coercions), coerce = safe: coerced",
            case(&plain, &near_miss(), CoercePolicy::Safe),
        ),
        (
            "not coercible, coerce = off: refused",
            case(&plain, &refused(), CoercePolicy::Off),
        ),
        (
            "not coercible, coerce = safe: refused",
            case(&plain, &refused(), CoercePolicy::Safe),
        ),
    ];
    for (name, ns) in rows {
        println!("  {name:<52} {ns:>8.0} ns");
    }
    // Results: an OpenAPI/GraphQL-style result checked and mended in the source.
    let output = OutputSchema::compile(&schema(false)).unwrap();
    let mend = |value: &Value| {
        median_ns(budget, || {
            std::hint::black_box(mend_result(
                Some(&output),
                std::hint::black_box(value.clone()),
                CoercePolicy::Safe,
            ));
        })
    };
    println!(
        "  {:<52} {:>8.0} ns",
        "result, valid (checked only)",
        mend(&valid())
    );
    println!(
        "  {:<52} {:>8.0} ns",
        "result, near miss: coerced",
        mend(&near_miss())
    );
}
