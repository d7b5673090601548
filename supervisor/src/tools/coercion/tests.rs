//! Each rule, each refusal, and the walk's bounds.

use super::*;
use serde_json::json;

/// `value` coerced to `schema` as arguments: the value and `(pointer, from, to)` of each
/// coercion, or `None`.
/// A coercion as `(pointer, from, to)`.
type Move = (String, Value, Option<Value>);

fn run(schema: &Value, value: Value) -> Option<(Value, Vec<Move>)> {
    let validator = jsonschema::validator_for(schema).unwrap();
    coerce_valid(&validator, schema, &value, CoercionPlace::Arguments).map(|(v, cs)| {
        (
            v,
            cs.into_iter().map(|c| (c.pointer, c.from, c.to)).collect(),
        )
    })
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

fn coerced(schema: &Value, value: Value) -> Value {
    run(schema, value.clone())
        .unwrap_or_else(|| panic!("{value} was not coerced to {schema}"))
        .0
}

fn refused(schema: &Value, value: Value) {
    assert_eq!(
        run(schema, value.clone()),
        None,
        "{value} was coerced to {schema}"
    );
}

#[test]
fn numeric_strings_become_numbers_when_the_whole_string_is_a_plain_json_number() {
    let s = object(
        json!({"n": {"type": "number"}, "i": {"type": "integer"}}),
        &[],
    );
    assert_eq!(
        run(&s, json!({"n": "-1.5", "i": "100"})),
        Some((
            json!({"n": -1.5, "i": 100}),
            vec![
                ("/i".into(), json!("100"), Some(json!(100))),
                ("/n".into(), json!("-1.5"), Some(json!(-1.5))),
            ]
        ))
    );
    assert_eq!(coerced(&s, json!({"n": "100"})), json!({"n": 100}));
    assert_eq!(coerced(&s, json!({"n": "2e3"})), json!({"n": 2000.0}));
    assert_eq!(coerced(&s, json!({"n": "0.1"})), json!({"n": 0.1}));
    assert_eq!(coerced(&s, json!({"i": "-0"})), json!({"i": 0}));
    assert_eq!(
        coerced(&s, json!({"i": "18446744073709551615"})),
        json!({"i": 18446744073709551615u64})
    );
    for bad in [
        "12abc",
        "",
        " 1",
        "1 ",
        "+1",
        "007",
        "0x10",
        "1e999",
        "1e-999",
        "NaN",
        "Infinity",
        "1.",
        ".5",
        "1e",
        "--1",
        "1_000",
        "１２",
        "0.1234567890123456",
        "184467440737095516150",
    ] {
        refused(&s, json!({ "n": bad }));
    }
    // Integers: digits only, within 64 bits.
    for bad in ["1.5", "1.0", "1e3", "99999999999999999999"] {
        refused(&s, json!({ "i": bad }));
    }
}

#[test]
fn only_exact_true_and_false_become_booleans() {
    let s = object(json!({"b": {"type": "boolean"}}), &[]);
    assert_eq!(
        run(&s, json!({"b": "true"})),
        Some((
            json!({"b": true}),
            vec![("/b".into(), json!("true"), Some(json!(true)))]
        ))
    );
    assert_eq!(coerced(&s, json!({"b": "false"})), json!({"b": false}));
    for bad in ["True", "TRUE", "yes", "1", "0", "", " true", "on"] {
        refused(&s, json!({ "b": bad }));
    }
    refused(&s, json!({"b": 1}));
}

#[test]
fn numbers_and_booleans_become_strings_that_still_fit_the_pattern() {
    let s = object(
        json!({"s": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}),
        &[],
    );
    assert_eq!(
        run(&s, json!({"s": 5})),
        Some((
            json!({"s": "5"}),
            vec![("/s".into(), json!(5), Some(json!("5")))]
        ))
    );
    assert_eq!(coerced(&s, json!({"s": 1.5})), json!({"s": "1.5"}));
    assert_eq!(coerced(&s, json!({"s": true})), json!({"s": "true"}));
    assert_eq!(coerced(&s, json!({"zip": 12345})), json!({"zip": "12345"}));
    // A pattern the coerced string misses: nothing is coerced.
    refused(&s, json!({"zip": 123}));
    // Objects and arrays are not scalars.
    refused(&s, json!({"s": {"a": 1}}));
    refused(&s, json!({"s": [1]}));
}

#[test]
fn a_scalar_becomes_a_one_element_array_whose_item_is_coerced_too() {
    let s = object(
        json!({"tags": {"type": "array", "items": {"type": "string"}}, "ns": {"type": "array", "items": {"type": "number"}}}),
        &[],
    );
    assert_eq!(
        run(&s, json!({"tags": "a"})),
        Some((
            json!({"tags": ["a"]}),
            vec![("/tags".into(), json!("a"), Some(json!(["a"])))]
        ))
    );
    assert_eq!(
        run(&s, json!({"ns": "5"})),
        Some((
            json!({"ns": [5]}),
            vec![
                ("/ns".into(), json!("5"), Some(json!(["5"]))),
                ("/ns/0".into(), json!("5"), Some(json!(5))),
            ]
        ))
    );
    // Items that would not take it after all, and objects, are refused.
    refused(&s, json!({"ns": "x"}));
    refused(&s, json!({"tags": {"a": 1}}));
    // Elements of a real array are coerced in place.
    assert_eq!(coerced(&s, json!({"ns": ["1", 2]})), json!({"ns": [1, 2]}));
}

#[test]
fn null_for_an_optional_property_is_omitted_and_never_for_a_required_one() {
    let s = object(
        json!({"a": {"type": "string"}, "b": {"type": "number"}, "c": {"type": ["string", "null"]}}),
        &["a"],
    );
    assert_eq!(
        run(&s, json!({"a": "x", "b": null})),
        Some((json!({"a": "x"}), vec![("/b".into(), Value::Null, None)]))
    );
    refused(&s, json!({"a": null}));
    // `c` takes null: nothing to do (and the arguments were valid).
    refused(&s, json!({"a": "x", "c": null}));
    // A property the schema does not declare is not the rule's business.
    refused(&s, json!({"a": "x", "zzz": null}));
}

#[test]
fn enum_members_match_ignoring_case_only_when_exactly_one_does() {
    let s = object(
        json!({"color": {"type": "string", "enum": ["red", "green"]}, "odd": {"enum": ["a", "A", "b"]}}),
        &[],
    );
    assert_eq!(
        run(&s, json!({"color": "RED"})),
        Some((
            json!({"color": "red"}),
            vec![("/color".into(), json!("RED"), Some(json!("red")))]
        ))
    );
    assert_eq!(coerced(&s, json!({"odd": "B"})), json!({"odd": "b"}));
    refused(&s, json!({"odd": "a "}));
    refused(&s, json!({"color": "blue"}));
    // Two members match "a" ignoring case: ambiguous (and "a" is itself a member anyway).
    refused(&s, json!({"odd": "a"}));
    let two = object(json!({"x": {"enum": ["Ab", "aB"]}}), &[]);
    refused(&two, json!({"x": "ab"}));
}

#[test]
fn const_values_are_never_coerced() {
    let s = object(
        json!({"k": {"const": "Fixed"}, "n": {"type": "number", "const": 1}}),
        &[],
    );
    refused(&s, json!({"k": "fixed"}));
    refused(&s, json!({"n": "1"}));
}

#[test]
fn pattern_mismatches_stay_errors() {
    let s = object(
        json!({"code": {"type": "string", "pattern": "^[A-Z]{3}$"}}),
        &[],
    );
    refused(&s, json!({"code": "abc"}));
    refused(&s, json!({"code": 123}));
}

#[test]
fn dates_are_rewritten_to_the_named_format_only_when_nothing_is_invented_or_lost() {
    let s = object(
        json!({"at": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"}}),
        &[],
    );
    assert_eq!(
        run(&s, json!({"at": "2026-11-20 10:00:00Z"})),
        Some((
            json!({"at": "2026-11-20T10:00:00Z"}),
            vec![(
                "/at".into(),
                json!("2026-11-20 10:00:00Z"),
                Some(json!("2026-11-20T10:00:00Z"))
            )]
        ))
    );
    assert_eq!(
        coerced(&s, json!({"at": "2026-11-20 10:00:00.250+02:00"})),
        json!({"at": "2026-11-20T10:00:00.250+02:00"})
    );
    assert_eq!(
        coerced(&s, json!({"at": "2026-11-20T10:00:00+0200"})),
        json!({"at": "2026-11-20T10:00:00+02:00"})
    );
    assert_eq!(
        coerced(&s, json!({"day": "2026-11-20T00:00:00Z"})),
        json!({"day": "2026-11-20"})
    );
    assert_eq!(
        coerced(&s, json!({"day": "2026-11-20T00:00:00.000+00:00"})),
        json!({"day": "2026-11-20"})
    );
    for (key, bad) in [
        // A date alone, or a date-time without its zone: the time or zone would be invented.
        ("at", "2026-11-20"),
        ("at", "2026-11-20T10:00:00"),
        ("at", "2026-11-20 10:00:00"),
        ("at", "20 Nov 2026"),
        ("at", "2026-11-20 25:00:00Z"),
        ("at", "2026-11-20 10:00:00+0€"),
        // Not midnight, or midnight elsewhere: the time (or the UTC date) would be lost.
        ("day", "2026-11-20T10:00:00Z"),
        ("day", "2026-11-20T00:00:00+02:00"),
        ("day", "2026-11-20T00:00:00.5Z"),
        ("day", "11/20/2026"),
    ] {
        assert_eq!(
            coerce(&s, &json!({ key: bad }), CoercionPlace::Arguments),
            None,
            "{bad}"
        );
    }
    // Already in the format: nothing to do.
    assert_eq!(
        coerce(
            &s,
            &json!({"at": "2026-11-20T10:00:00Z", "day": "2026-11-20"}),
            CoercionPlace::Arguments
        ),
        None
    );
    assert!(names_date_formats(&s));
    assert!(!names_date_formats(&object(
        json!({"a": {"type": "string"}}),
        &[]
    )));
}

#[test]
fn refs_within_the_document_are_followed() {
    let s = json!({
        "type": "object",
        "properties": {"item": {"$ref": "#/$defs/Item"}, "list": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "$defs": {"Item": {"type": "object", "properties": {"qty": {"type": "integer"}}}}
    });
    assert_eq!(
        run(&s, json!({"item": {"qty": "3"}, "list": [{"qty": "4"}]})),
        Some((
            json!({"item": {"qty": 3}, "list": [{"qty": 4}]}),
            vec![
                ("/item/qty".into(), json!("3"), Some(json!(3))),
                ("/list/0/qty".into(), json!("4"), Some(json!(4))),
            ]
        ))
    );
    // A remote one is not.
    let remote =
        json!({"type": "object", "properties": {"n": {"$ref": "https://example.invalid/n.json"}}});
    assert_eq!(
        coerce(&remote, &json!({"n": "1"}), CoercionPlace::Arguments),
        None
    );
}

#[test]
fn unions_are_coerced_only_to_the_one_branch_that_can_take_the_value() {
    // Pydantic's Optional[int]: the number branch is the only one "5" can reach.
    let optional = object(
        json!({"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}),
        &[],
    );
    assert_eq!(coerced(&optional, json!({"n": "5"})), json!({"n": 5}));
    // A branch that takes the value as it is is walked into.
    let nested = object(
        json!({"o": {"anyOf": [{"type": "object", "properties": {"n": {"type": "number"}}}, {"type": "null"}]}}),
        &[],
    );
    assert_eq!(
        coerced(&nested, json!({"o": {"n": "2"}})),
        json!({"o": {"n": 2}})
    );
    // "5" could become 5 or true? No: but 5 could become "5" or [5]: two branches, ambiguous.
    let two = object(
        json!({"v": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}]}}),
        &[],
    );
    refused(&two, json!({"v": 5}));
    // One type list with two ways: `"5"` or `[5]`.
    let list = object(
        json!({"v": {"type": ["string", "array"], "items": {"type": "number"}}}),
        &[],
    );
    refused(&list, json!({"v": 5}));
    let strings_or_bools = object(
        json!({"v": {"anyOf": [{"type": "number"}, {"type": "boolean"}]}}),
        &[],
    );
    assert_eq!(
        coerced(&strings_or_bools, json!({"v": "true"})),
        json!({"v": true})
    );
}

#[test]
fn pointers_escape_tilde_and_slash() {
    let s = json!({"type": "object", "properties": {"a/b~c": {"type": "number"}}});
    let (_, cs) = run(&s, json!({"a/b~c": "1"})).unwrap();
    assert_eq!(cs[0].0, "/a~1b~0c");
}

#[test]
fn all_or_nothing_when_one_value_cannot_be_coerced() {
    let s = object(
        json!({"a": {"type": "number"}, "b": {"type": "number"}}),
        &[],
    );
    refused(&s, json!({"a": "1", "b": "12abc"}));
}

#[test]
fn valid_values_and_off_schemas_are_left_alone() {
    let s = object(json!({"a": {"type": "number"}}), &[]);
    assert_eq!(coerce(&s, &json!({"a": 1}), CoercionPlace::Arguments), None);
    assert_eq!(
        coerce(&json!(true), &json!({"a": "1"}), CoercionPlace::Arguments),
        None
    );
    assert_eq!(
        coerce(&json!({}), &json!("1"), CoercionPlace::Arguments),
        None
    );
}

#[test]
fn hostile_schemas_and_values_are_bounded_and_never_panic() {
    // A $ref cycle.
    let cycle = json!({"$ref": "#", "type": "object", "properties": {"a": {"$ref": "#"}}});
    let mut deep = json!("1");
    for _ in 0..100 {
        deep = json!({ "a": deep });
    }
    let _ = coerce(&cycle, &deep, CoercionPlace::Arguments);
    let self_ref = json!({"$ref": "#"});
    assert_eq!(
        coerce(&self_ref, &json!("1"), CoercionPlace::Arguments),
        None
    );
    // Nested unions (by `$ref`, so the schema stays small): each level tries every branch,
    // and `takes` looks into every branch; the visit bound stops both.
    let mut defs = serde_json::Map::new();
    defs.insert("u0".into(), json!({"type": "number"}));
    for i in 1..=40 {
        let below = format!("#/$defs/u{}", i - 1);
        defs.insert(
            format!("u{i}"),
            json!({"anyOf": [
                {"type": "array", "items": {"$ref": below}},
                {"anyOf": [{"$ref": below}, {"$ref": below}]},
                {"type": "object", "properties": {"x": {"$ref": below}}},
            ]}),
        );
    }
    let union = json!({"$ref": "#/$defs/u40", "$defs": defs});
    let mut value = json!("1");
    for _ in 0..30 {
        value = json!([value]);
    }
    let started = std::time::Instant::now();
    let _ = coerce(&union, &value, CoercionPlace::Arguments);
    let _ = coerce(&union, &json!("x"), CoercionPlace::Arguments);
    let _ = coerce(&union, &json!({"x": {"x": "1"}}), CoercionPlace::Arguments);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Many coercions are no near miss.
    let s = json!({"type": "array", "items": {"type": "number"}});
    let many = Value::Array(
        (0..MAX_COERCIONS + 1)
            .map(|i| json!(i.to_string()))
            .collect(),
    );
    assert_eq!(coerce(&s, &many, CoercionPlace::Arguments), None);
    let enough = Value::Array((0..MAX_COERCIONS).map(|i| json!(i.to_string())).collect());
    assert!(coerce(&s, &enough, CoercionPlace::Arguments).is_some());
    // Odd schema values.
    for schema in [
        json!({"type": 5}),
        json!({"enum": 3}),
        json!({"anyOf": "x"}),
        json!({"$ref": 1}),
        json!({"$ref": "#/%zz"}),
        json!({"properties": []}),
        json!({"required": "a", "properties": {"a": {"type": "number"}}}),
    ] {
        let _ = coerce(
            &schema,
            &json!({"a": null, "b": "1"}),
            CoercionPlace::Arguments,
        );
    }
}
