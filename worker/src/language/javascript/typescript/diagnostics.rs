//! Syntax errors for the agent: oxc's diagnostics (or a message of ours) with a 1-based line
//! and UTF-16 column in the code the agent sent.

use super::positions::LineIndex;
use airlock_proto::{ErrorKind, ExecError};

pub(super) fn syntax_error(message: impl Into<String>, line: u32, column: u32) -> ExecError {
    ExecError {
        kind: ErrorKind::Syntax,
        name: Some("SyntaxError".to_owned()),
        message: message.into(),
        line: Some(line),
        column: Some(column),
        stack: None,
        explanation: None,
    }
}

pub(super) fn syntax_error_from_diagnostics(
    diagnostics: Vec<oxc::diagnostics::OxcDiagnostic>,
    lines: &LineIndex,
) -> ExecError {
    let count = diagnostics.len();
    let Some(first) = diagnostics.into_iter().next() else {
        return ExecError::new(ErrorKind::Syntax, "the program does not parse");
    };
    // The primary label marks the error site; without one, the last label does (oxc lists
    // "first declared here" before "redeclared here").
    let label = first
        .labels
        .iter()
        .find(|l| l.primary())
        .or_else(|| first.labels.last());
    let mut message = first.message.to_string();
    if let Some(text) = label.filter(|l| l.primary()).and_then(|l| l.label())
        && !text.is_empty()
        && !message.contains(text)
    {
        message.push_str(" (");
        message.push_str(text);
        message.push(')');
    }
    for other in first.labels.iter().filter(|l| Some(*l) != label) {
        if let Some(text) = other.label().filter(|t| !t.is_empty()) {
            let (line, column) = lines.position(other.offset());
            message.push_str(&format!("; {text}: line {line}, column {column}"));
        }
    }
    if let Some(help) = &first.help {
        message.push_str("; ");
        message.push_str(help);
    }
    if count > 1 {
        let more = count - 1;
        let s = if more == 1 { "" } else { "s" };
        message.push_str(&format!(" [and {more} more syntax error{s}]"));
    }
    let mut err = ExecError::new(ErrorKind::Syntax, message);
    err.name = Some("SyntaxError".to_owned());
    if let Some(label) = label {
        let (line, column) = lines.position(label.offset());
        err.line = Some(line);
        err.column = Some(column);
    }
    err
}
