//! Checking a tool call's arguments against the tool's `inputSchema` before anything is sent,
//! with errors a program's author can act on: which argument, what was expected, what was
//! given, and the closest known names for unknown properties.
//!
//! Schemas come from tool servers, which are not trusted to be well-formed: a schema that does
//! not compile fails only the calls of its own tool, and remote `$ref`s are never fetched (the
//! `jsonschema` crate is built without its HTTP and file resolvers).

use crate::agent_api::{Coercion, CoercionPlace};
use crate::sdk::tool_search::{parameters, short_type};
use crate::tools::coercion;
use crate::tools::naming::closest;
use crate::tools::{ToolError, ToolErrorCode};
use airlock_policy::CoercePolicy;
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;

/// How many problems one error message lists.
const MAX_REPORTED: usize = 3;

/// A compiled `inputSchema`.
#[derive(Debug)]
pub struct ArgumentSchema {
    validator: Result<jsonschema::Validator, coercion::SchemaError>,
    /// Top-level property names with their declared types, for hints.
    properties: Vec<(String, String)>,
    /// `{ a: number, b?: string }`, as the SDK's search shows it.
    signature: String,
    /// The schema itself, for coercion ([`super::coercion`]).
    schema: Value,
    /// It names a `date` or `date-time` format: valid arguments are walked too, since the
    /// validator does not assert formats.
    dates: bool,
}

impl ArgumentSchema {
    pub fn compile(schema: &Value) -> ArgumentSchema {
        let validator = coercion::validator(schema);
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(name, s)| (name.clone(), short_type(s)))
                    .collect()
            })
            .unwrap_or_default();
        ArgumentSchema {
            validator,
            properties,
            signature: parameters(schema),
            dates: coercion::names_date_formats(schema),
            schema: schema.clone(),
        }
    }

    /// `{ a: number, b?: string }`, as a hint of what the tool takes.
    pub fn signature(&self) -> &str {
        &self.signature
    }

    /// The arguments a call sends: `args` when they satisfy the schema, else (when `coerce`
    /// is `safe`) `args` coerced to it with the coercions made, else the `invalid_arguments`
    /// error of `args` as they came. With `safe`, arguments that satisfy a schema naming a date
    /// format are walked for the date rule too.
    pub fn check_coercing(
        &self,
        tool: &str,
        args: Value,
        coerce: CoercePolicy,
    ) -> Result<(Value, Vec<Coercion>), ToolError> {
        let checked = self.check(tool, &args);
        if !coerce.is_safe() || (checked.is_ok() && !self.dates) {
            return checked.map(|()| (args, Vec::new()));
        }
        match (self.coerce(&args, CoercionPlace::Arguments), checked) {
            (Some((coerced, coercions)), _) => Ok((coerced, coercions)),
            (None, Ok(())) => Ok((args, Vec::new())),
            (None, Err(mut e)) => {
                e.hint = e.hint.map(|hint| {
                    format!("{hint}; pass each argument as the type shown (the daemon coerces only unambiguous near misses such as \"100\" for a number)")
                });
                Err(e)
            }
        }
    }

    /// `value` coerced to the schema (`coercion::coerce_valid`), when that is needed and
    /// helps; `None` otherwise (and for a schema that does not compile).
    pub fn coerce(&self, value: &Value, place: CoercionPlace) -> Option<(Value, Vec<Coercion>)> {
        let validator = self.validator.as_ref().ok()?;
        coercion::coerce_valid(validator, &self.schema, value, place)
    }

    /// `Ok` when `args` satisfy the schema; otherwise an `invalid_arguments` error for `tool`.
    pub fn check(&self, tool: &str, args: &Value) -> Result<(), ToolError> {
        let validator = match &self.validator {
            Ok(v) => v,
            Err(e) => {
                return Err(ToolError::new(ToolErrorCode::InvalidSchema,
                    format!("the tool server's input schema for `{tool}` is not valid JSON Schema ({e}), so calls to it cannot be checked and are refused"),
                )
                .with_hint("this is a problem of the tool server; the operator should report it"));
            }
        };
        let problems: Vec<String> = validator
            .iter_errors(args)
            .take(MAX_REPORTED + 1)
            .map(|e| self.describe(&e))
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        let shown = problems
            .iter()
            .take(MAX_REPORTED)
            .cloned()
            .collect::<Vec<_>>();
        let more = if problems.len() > MAX_REPORTED {
            "; and more"
        } else {
            ""
        };
        Err(ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!("invalid arguments for {tool}: {}{more}", shown.join("; ")),
        )
        .with_hint(format!("{tool} takes {}", self.signature)))
    }

    fn describe(&self, error: &jsonschema::ValidationError<'_>) -> String {
        let path = error.instance_path().to_string();
        let at = if path.is_empty() {
            "the arguments".to_owned()
        } else {
            format!("`{}`", path.trim_start_matches('/').replace('/', "."))
        };
        match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                let ty = self
                    .properties
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, t)| format!(" ({t})"))
                    .unwrap_or_default();
                format!("missing required argument `{name}`{ty}")
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
                .iter()
                .map(|name| {
                    let near = closest(name, self.properties.iter().map(|(n, _)| n.as_str()), 1);
                    match near.first() {
                        Some(n) => format!("unknown argument `{name}` (did you mean `{n}`?)"),
                        None => format!("unknown argument `{name}`"),
                    }
                })
                .collect::<Vec<_>>()
                .join("; "),
            _ => {
                let given = short(error.instance());
                format!("{at}: {error} (got {given})")
            }
        }
    }
}

/// A value shortened for an error message.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sum_schema() -> ArgumentSchema {
        ArgumentSchema::compile(&json!({
            "type": "object",
            "properties": { "a": { "type": "number" }, "b": { "type": "number" }, "label": { "type": "string" } },
            "required": ["a", "b"],
            "additionalProperties": false
        }))
    }

    #[test]
    fn valid_arguments_pass() {
        sum_schema()
            .check("m.sum", &json!({"a": 1, "b": 2}))
            .unwrap();
    }

    #[test]
    fn errors_say_which_argument_what_was_expected_and_what_was_given() {
        let e = sum_schema()
            .check("m.sum", &json!({"a": "two", "b": 2}))
            .unwrap_err();
        assert_eq!(e.code.as_str(), "invalid_arguments");
        assert!(e.message.contains("`a`"), "{}", e.message);
        assert!(e.message.contains("number"), "{}", e.message);
        assert!(e.message.contains("\"two\""), "{}", e.message);
        assert_eq!(
            e.hint.as_deref(),
            Some("m.sum takes { a: number, b: number, label?: string }")
        );
    }

    #[test]
    fn missing_and_unknown_properties_are_named_with_suggestions() {
        let e = sum_schema()
            .check("m.sum", &json!({"a": 1, "lable": "x"}))
            .unwrap_err();
        assert!(
            e.message.contains("missing required argument `b` (number)"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains("unknown argument `lable` (did you mean `label`?)"),
            "{}",
            e.message
        );
    }

    #[test]
    fn near_misses_are_coerced_when_the_policy_says_safe_and_refused_when_off() {
        let s = sum_schema();
        let (args, coercions) = s
            .check_coercing("m.sum", json!({"a": "1", "b": 2}), CoercePolicy::Safe)
            .unwrap();
        assert_eq!(args, json!({"a": 1, "b": 2}));
        assert_eq!(coercions.len(), 1);
        let e = s
            .check_coercing("m.sum", json!({"a": "1", "b": 2}), CoercePolicy::Off)
            .unwrap_err();
        assert_eq!(e.code.as_str(), "invalid_arguments");
        assert_eq!(
            e.hint.as_deref(),
            Some("m.sum takes { a: number, b: number, label?: string }")
        );
        // What cannot be coerced keeps its error, which says what the schema wants.
        let e = s
            .check_coercing("m.sum", json!({"a": "12abc", "b": 2}), CoercePolicy::Safe)
            .unwrap_err();
        assert!(e.message.contains("\"12abc\""), "{}", e.message);
        assert!(e.message.contains("number"), "{}", e.message);
        assert!(e.hint.unwrap().contains("a: number"));
        // Valid arguments pass untouched.
        let (args, coercions) = s
            .check_coercing("m.sum", json!({"a": 1, "b": 2}), CoercePolicy::Safe)
            .unwrap();
        assert_eq!((args, coercions.len()), (json!({"a": 1, "b": 2}), 0));
    }

    #[test]
    fn a_broken_schema_fails_only_its_own_calls() {
        let s = ArgumentSchema::compile(&json!({"type": 12}));
        let e = s.check("m.broken", &json!({})).unwrap_err();
        assert_eq!(e.code.as_str(), "invalid_schema");
    }

    #[test]
    fn remote_refs_are_not_fetched() {
        let s = ArgumentSchema::compile(&json!({"$ref": "https://example.invalid/schema.json"}));
        assert!(s.check("m.remote", &json!({})).is_err());
    }
}
