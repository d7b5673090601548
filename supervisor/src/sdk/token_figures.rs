//! Token figures for `airlock sdk stats`: what describing a catalogue costs a model in a
//! classic tool-calling prompt, against what code mode costs up front (the SDK's entry point).
//!
//! Counted with OpenAI's `cl100k_base` encoding (`tiktoken-rs`, whose ranks are compiled into
//! the binary: nothing is downloaded). The classic figure is the token count of the JSON text of
//! an OpenAI Chat Completions `tools` array, serialised compactly, one entry per tool:
//! `{"type":"function","function":{"name":"<namespace>__<tool>","description":…,"parameters":<input schema>}}`.
//! Providers render that array into their own prompt format, which adds some tokens per tool,
//! so the figure is a lower bound of what a classic prompt carries. The entry point is the
//! SDK's `README.md`, counted as is.
//!
//! The daemon counts with the same tokenizer for the output budget
//! ([`crate::execution::budget`]).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One tool definition as `GET /v1/tools` answers it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolDefinition {
    pub namespace: String,
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// The figures `airlock sdk stats` prints.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TokenFigures {
    pub tokenizer: &'static str,
    pub tools: usize,
    /// Tokens of the classic `tools` array (see the module documentation).
    pub definitions_tokens: usize,
    /// Tokens of the SDK's `README.md`.
    pub entry_point_tokens: usize,
    /// `100 × (1 − entry point / definitions)`, two decimals; 0 for an empty catalogue.
    pub reduction_percent: f64,
}

/// Why the figures could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum TokenFiguresError {
    #[error("cannot load the cl100k_base tokenizer: {0}")]
    Tokenizer(String),
}

/// The classic prompt's `tools` array for `definitions`, in the order given.
pub(crate) fn classic_tools_array(definitions: &[ToolDefinition]) -> Value {
    Value::Array(
        definitions
            .iter()
            .map(|d| {
                json!({
                    "type": "function",
                    "function": {
                        // Function names allow `[a-zA-Z0-9_-]` only, so no dot.
                        "name": format!("{}__{}", d.namespace, d.name),
                        "description": d.description,
                        "parameters": d.input_schema,
                    }
                })
            })
            .collect(),
    )
}

/// Counts both sides.
pub fn measure(
    definitions: &[ToolDefinition],
    entry_point: &str,
) -> Result<TokenFigures, TokenFiguresError> {
    let bpe =
        tiktoken_rs::cl100k_base().map_err(|e| TokenFiguresError::Tokenizer(e.to_string()))?;
    let classic = classic_tools_array(definitions).to_string();
    let definitions_tokens = bpe.encode_ordinary(&classic).len();
    let entry_point_tokens = bpe.encode_ordinary(entry_point).len();
    let reduction_percent = if definitions_tokens == 0 {
        0.0
    } else {
        let ratio = entry_point_tokens as f64 / definitions_tokens as f64;
        ((1.0 - ratio) * 10_000.0).round() / 100.0
    };
    Ok(TokenFigures {
        tokenizer: "cl100k_base",
        tools: definitions.len(),
        definitions_tokens,
        entry_point_tokens,
        reduction_percent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_with_cl100k() {
        let definitions = vec![ToolDefinition {
            namespace: "everything".into(),
            name: "echo".into(),
            description: "Echoes back the input.".into(),
            input_schema: json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
        }];
        assert_eq!(
            classic_tools_array(&definitions).to_string(),
            r#"[{"function":{"description":"Echoes back the input.","name":"everything__echo","parameters":{"properties":{"message":{"type":"string"}},"required":["message"],"type":"object"}},"type":"function"}]"#
        );
        // "hello world" is two tokens in cl100k_base ([15339, 1917]).
        let figures = measure(&definitions, "hello world").unwrap();
        assert_eq!(figures.entry_point_tokens, 2);
        assert!(figures.definitions_tokens > 20, "{figures:?}");
        let expected = 100.0 * (1.0 - 2.0 / figures.definitions_tokens as f64);
        assert!(
            (figures.reduction_percent - expected).abs() < 0.01,
            "{figures:?}"
        );
        assert_eq!(measure(&[], "x").unwrap().reduction_percent, 0.0);
    }
}
