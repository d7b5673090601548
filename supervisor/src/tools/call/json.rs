//! JSON text from the engine that serde_json refuses, and the errors that say why.

use crate::tools::{ToolError, ToolErrorCode};
use serde_json::Value;

pub(super) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// JSON text from the engine that serde_json refuses although the engine wrote it correctly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonLimit {
    /// Nested deeper than serde_json's 128 levels (the limit keeps the daemon's own stack
    /// safe from a hostile worker, so it stays).
    Depth,
    /// A lone UTF-16 surrogate (`\ud800`): valid in JavaScript strings and JSON text, but it
    /// has no UTF-8 form.
    LoneSurrogate,
}

impl JsonLimit {
    /// Classifies a serde_json error message (serde_json has no public error code for these).
    pub fn of(message: &str) -> Option<JsonLimit> {
        if message.starts_with("recursion limit exceeded") {
            Some(JsonLimit::Depth)
        } else if message.contains("surrogate")
            || message.starts_with("unexpected end of hex escape")
        {
            Some(JsonLimit::LoneSurrogate)
        } else {
            None
        }
    }
}

/// The error for `what` (arguments or result) whose JSON text serde_json refused with `reason`.
pub fn unreadable_json_error(what: &str, reason: &str) -> ToolError {
    match JsonLimit::of(reason) {
        Some(JsonLimit::Depth) => ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!("{what}: JSON nested more than 128 levels deep"),
        )
        .with_hint("flatten the data (an array of records instead of a chain of nested objects)"),
        Some(JsonLimit::LoneSurrogate) => ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!(
                "{what}: a string with a lone UTF-16 surrogate, which has no UTF-8 form ({reason})"
            ),
        )
        .with_hint("repair such strings with s.toWellFormed() (lone surrogates become U+FFFD)"),
        None => ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!("{what}: not valid JSON ({reason})"),
        )
        .with_hint("pass plain data: objects, arrays, strings, numbers, booleans and null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_json_refusals_of_engine_json_are_recognised() {
        // Pins serde_json's messages: if they change, JsonLimit::of must follow.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for (text, expected) in [
            (deep.as_str(), Some(JsonLimit::Depth)),
            (r#""\ud800""#, Some(JsonLimit::LoneSurrogate)),
            (r#""\udc00""#, Some(JsonLimit::LoneSurrogate)),
            (r#"{"s":"a\ud800b"}"#, Some(JsonLimit::LoneSurrogate)),
            ("{\"a\":", None),
            ("nonsense", None),
        ] {
            let e = serde_json::from_str::<Value>(text).unwrap_err();
            assert_eq!(JsonLimit::of(&e.to_string()), expected, "{text}: {e}");
        }
    }
}
