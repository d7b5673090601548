//! A server's tools as programs see them: `tools/list` (every page, within bounds), each
//! tool's identifier, input schema, read-only mark and compiled output schema.

use super::McpServer;
use super::connection::ServerEvents;
use crate::tools::coercion::OutputSchema;
use crate::tools::{ToolDescriptor, ToolError};
use rmcp::model::PaginatedRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tracing::warn;

/// Pages of one `tools/list`: a server that keeps sending `nextCursor` is not listed forever.
const MAX_LIST_PAGES: usize = 100;

/// Tools of one server: more would only make an SDK no model can read, and each costs the
/// daemon memory.
const MAX_TOOLS: usize = 10_000;

/// A running server's tools; cloning it is cheap, so calls need not hold the connection lock.
#[derive(Debug, Clone)]
pub(super) struct Catalogue {
    pub(super) tools: Arc<[ServerTool]>,
    /// The same tools as programs see them, for `ToolSource::tools`.
    pub(super) descriptors: Arc<[ToolDescriptor]>,
}

/// One tool of a running server.
#[derive(Debug, Clone)]
pub(super) struct ServerTool {
    /// As programs see it (sanitised identifier).
    pub(super) descriptor: ToolDescriptor,
    /// The server's own name, which is what is sent.
    pub(super) original: String,
    /// Its `outputSchema`, compiled once per listing, when it has one that compiles: results
    /// are checked against it, so the SDK's output type is what a program receives.
    pub(super) output: Option<Arc<OutputSchema>>,
}

impl McpServer {
    /// `tools/list`, every page (at most [`MAX_LIST_PAGES`] of them and [`MAX_TOOLS`] tools),
    /// with each tool's output schema compiled.
    pub(super) async fn list_tools(
        &self,
        service: &RunningService<RoleClient, ServerEvents>,
    ) -> Result<Catalogue, ToolError> {
        let mut listed = Vec::new();
        let mut cursor = None;
        for page in 1.. {
            if page > MAX_LIST_PAGES {
                return Err(self.unavailable(format!(
                    "tools/list did not end after {MAX_LIST_PAGES} pages"
                )));
            }
            let result = service
                .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
                .await
                .map_err(|e| self.unavailable(format!("tools/list failed: {e}")))?;
            listed.extend(result.tools);
            if listed.len() > MAX_TOOLS {
                return Err(self.unavailable(format!("it lists more than {MAX_TOOLS} tools")));
            }
            cursor = result.next_cursor;
            if cursor.is_none() {
                break;
            }
        }
        let tools = identifiers(listed.iter().map(|t| t.name.to_string()))
            .into_iter()
            .zip(listed)
            .map(|(id, tool)| {
                let input_schema = Value::Object((*tool.input_schema).clone());
                // An output schema that does not compile is ignored (the result is typed
                // `unknown` and not checked) rather than failing the tool.
                let output_schema = tool
                    .output_schema
                    .as_ref()
                    .map(|s| Value::Object((**s).clone()));
                let output = match &output_schema {
                    Some(schema) => match OutputSchema::compile(schema) {
                        Ok(v) => Some(Arc::new(v)),
                        Err(e) => {
                            warn!(server = %self.config.name, tool = %tool.name, error = %e, "the tool's outputSchema is not valid JSON Schema; its results are typed unknown");
                            None
                        }
                    },
                    None => None,
                };
                ServerTool {
                    descriptor: ToolDescriptor {
                        name: id,
                        description: tool.description.as_deref().unwrap_or_default().to_owned(),
                        input_schema,
                        output_schema: output.as_ref().and(output_schema),
                        read_only: read_only(&tool),
                    },
                    output,
                    original: tool.name.to_string(),
                }
            })
            .collect::<Vec<_>>();
        let descriptors = tools.iter().map(|t| t.descriptor.clone()).collect();
        Ok(Catalogue {
            tools: tools.into(),
            descriptors,
        })
    }
}

/// Whether a listed tool only reads: its server says so with `annotations.readOnlyHint: true`.
/// Without the hint the MCP default holds (the tool may write). The hint is the server's word,
/// and the server is untrusted: a false `true` only lets a replay call that server's own tool
/// again, which the server could do to itself anyway.
fn read_only(tool: &rmcp::model::Tool) -> bool {
    tool.annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false)
}

/// Program-facing identifiers for a server's tool names, in the same order: characters that
/// cannot appear in a JavaScript identifier become `_`, a leading digit gets a `_` prefix, and
/// names that collide after that get `_2`, `_3`, … in the order of their original names (so
/// the result does not depend on the order the server lists them in). A name that already is
/// an identifier keeps it.
pub fn identifiers(names: impl Iterator<Item = String>) -> Vec<String> {
    let names: Vec<String> = names.collect();
    let base: Vec<String> = names.iter().map(|n| sanitize(n)).collect();
    // Originals that are valid identifiers own their name; others queue up in sorted order.
    let mut taken: HashMap<String, ()> = names
        .iter()
        .filter(|n| sanitize(n) == **n)
        .map(|n| (n.clone(), ()))
        .collect();
    let mut order: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, n) in names.iter().enumerate() {
        order.insert(n.as_str(), i);
    }
    let mut out = base.clone();
    for (original, &i) in &order {
        if sanitize(original) == *original {
            continue;
        }
        let mut candidate = base[i].clone();
        let mut k = 2;
        while taken.contains_key(&candidate) {
            candidate = format!("{}_{k}", base[i]);
            k += 1;
        }
        taken.insert(candidate.clone(), ());
        out[i] = candidate;
    }
    out
}

fn sanitize(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        identifiers(names.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn identifiers_are_sanitised_deterministically() {
        assert_eq!(
            ids(&["echo", "get-sum", "a.b", "9lives"]),
            ["echo", "get_sum", "a_b", "_9lives"]
        );
        // A valid name keeps its identifier; colliding sanitised names are numbered in the
        // order of their original names, whatever order the server lists them in.
        // ("get-x" sorts before "get.x": '-' is 0x2d, '.' is 0x2e.)
        assert_eq!(
            ids(&["get_x", "get-x", "get.x"]),
            ["get_x", "get_x_2", "get_x_3"]
        );
        assert_eq!(
            ids(&["get.x", "get-x", "get_x"]),
            ["get_x_3", "get_x_2", "get_x"]
        );
    }

    /// `readOnlyHint: true` marks a tool read-only; no hint, no annotations or `false` do not
    /// (the tools as a server lists them, so the wire names are checked too).
    #[test]
    fn read_only_follows_the_read_only_hint() {
        let listed = |extra: serde_json::Value| {
            let mut tool = serde_json::json!({"name": "t", "inputSchema": {"type": "object"}});
            if let (Some(tool), Some(extra)) = (tool.as_object_mut(), extra.as_object()) {
                tool.extend(extra.clone());
            }
            read_only(&serde_json::from_value::<rmcp::model::Tool>(tool).unwrap())
        };
        assert!(listed(
            serde_json::json!({"annotations": {"readOnlyHint": true}})
        ));
        assert!(listed(
            serde_json::json!({"annotations": {"readOnlyHint": true, "destructiveHint": false}})
        ));
        assert!(!listed(
            serde_json::json!({"annotations": {"readOnlyHint": false}})
        ));
        assert!(!listed(
            serde_json::json!({"annotations": {"idempotentHint": true}})
        ));
        assert!(!listed(serde_json::json!({"annotations": {}})));
        assert!(!listed(serde_json::json!({})));
    }
}
