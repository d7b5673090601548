//! How tool calls leave the sandbox: the [`ToolSource`] trait and the [`ToolRegistry`] that
//! routes `namespace.tool` names to sources.
//!
//! Every call from a worker is resolved here, after the principal's policy check, and before
//! anything is sent anywhere. Real sources (MCP, OpenAPI, GraphQL) implement the trait in
//! later modules; tests inject in-process sources through [`ToolRegistry::register`].

pub mod arguments;
pub mod catalogue;
pub mod sources;

use crate::agent_api::{ExecutionEvent, Redaction, RedactionPlace};
use crate::secrets::scanner::SecretScanner;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// A boxed future, so `ToolSource` can be used as a trait object.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'a>>;

/// The answer to [`ToolSource::tools`].
/// Shared, so that looking a tool up on every call costs no copy of the catalogue.
pub type ToolsFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Arc<[ToolDescriptor]>, ToolError>> + Send + 'a>>;

/// One tool as the catalogue knows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolDescriptor {
    /// Name within its namespace, as programs write it (`tools.<namespace>.<name>`).
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// JSON Schema of the value a successful call resolves to, when the source knows it (an
    /// MCP tool's `outputSchema`, an OpenAPI operation's success response, a GraphQL
    /// field's default selection). Sources declare it only when the program really gets
    /// a value of that shape; the SDK types the result `unknown` otherwise.
    pub output_schema: Option<Value>,
}

/// What a call knows about its caller, for sources that care (audit, per-principal auth).
#[derive(Debug, Clone)]
pub struct CallContext {
    pub execution_id: String,
    pub principal: String,
    /// Position of this call within its execution (1-based, call order).
    pub call_id: u32,
    /// Where the source reports the call's progress (MCP progress notifications).
    pub progress: ToolProgress,
}

/// Progress of one tool call, streamed to the agent as `tool_progress` events when it asked
/// for a stream, and dropped otherwise. A progress message is the tool's own text going
/// straight to the agent, so it passes the secret scanner first, like the call's result; what
/// the scanner replaced is kept for the call's `redactions` in the trace.
#[derive(Debug, Clone, Default)]
pub struct ToolProgress {
    events: Option<tokio::sync::mpsc::Sender<ExecutionEvent>>,
    call_id: u32,
    tool: String,
    scanner: Option<SecretScanner>,
    redactions: Arc<Mutex<Vec<Redaction>>>,
}

impl ToolProgress {
    pub fn new(
        events: Option<tokio::sync::mpsc::Sender<ExecutionEvent>>,
        call_id: u32,
        tool: String,
        scanner: Option<SecretScanner>,
    ) -> Self {
        ToolProgress {
            events,
            call_id,
            tool,
            scanner,
            redactions: Arc::default(),
        }
    }

    /// Whether anybody listens (so a source need not ask its server for progress at all).
    pub fn wanted(&self) -> bool {
        self.events.is_some()
    }

    /// Reports one step. Waits while the agent's stream is full rather than drop the event:
    /// the stream is bounded, and a slow reader slows only its own execution.
    pub async fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(events) = &self.events else {
            return;
        };
        let message = match (message, &self.scanner) {
            (Some(text), Some(scanner)) => {
                let (clean, findings) = scanner.scan_text(&text);
                if findings.is_empty() {
                    Some(text)
                } else {
                    let clean = clean.into_owned();
                    let mut kept = self.redactions.lock().unwrap_or_else(|e| e.into_inner());
                    kept.extend(
                        findings
                            .iter()
                            .map(|f| Redaction::of(f, RedactionPlace::Progress)),
                    );
                    Some(clean)
                }
            }
            (message, _) => message,
        };
        let _ = events
            .send(ExecutionEvent::ToolProgress {
                id: self.call_id,
                tool: self.tool.clone(),
                progress,
                total,
                message,
            })
            .await;
    }

    /// What the scanner replaced in this call's progress messages so far (taken: a second
    /// call returns only later ones).
    pub fn take_redactions(&self) -> Vec<Redaction> {
        std::mem::take(&mut *self.redactions.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// A provider of tools under one namespace.
pub trait ToolSource: Send + Sync + 'static {
    /// The namespace programs use: `tools.<namespace>.<tool>()`.
    fn namespace(&self) -> &str;
    /// The tools this source offers now. May start the source (a lazily started server), so
    /// it can fail, with an error that says why the source is unavailable.
    fn tools(&self) -> ToolsFuture<'_>;
    /// Performs one call. `args` is the JSON object the program passed.
    fn call<'a>(&'a self, tool: &'a str, args: Value, ctx: &'a CallContext) -> ToolFuture<'a>;

    /// Whether the source's tool list can change while it runs (an MCP server that announces
    /// `tools/list_changed`), so a tool missing now may exist later.
    fn tools_may_change(&self) -> bool {
        false
    }

    /// Whether the daemon should start this source when it starts (instead of on first use).
    fn starts_eagerly(&self) -> bool {
        false
    }

    /// Releases what the source holds (child processes, connections) when the daemon stops.
    fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }
}

/// A failed tool call as the program sees it (a `ToolError` in JavaScript).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// Stable machine-readable code: `unknown_tool`, `denied`, `invalid_arguments`,
    /// `upstream_error`, `result_too_large`, `tool_call_limit`, …
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl ToolError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        ToolError {
            code: code.to_owned(),
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// All tool sources of a daemon, by namespace.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    sources: BTreeMap<String, Arc<dyn ToolSource>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("namespaces", &self.sources.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a source; a later source with the same namespace replaces the earlier one.
    pub fn register(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.insert(source.namespace().to_owned(), source);
    }

    pub fn sources(&self) -> impl Iterator<Item = &Arc<dyn ToolSource>> {
        self.sources.values()
    }

    pub fn namespaces(&self) -> impl Iterator<Item = &str> {
        self.sources.keys().map(String::as_str)
    }

    /// Resolves `namespace.tool` to its source and the tool's name there, or a `ToolError`
    /// that suggests near names.
    pub async fn resolve(
        &self,
        full_name: &str,
    ) -> Result<(Arc<dyn ToolSource>, String), ToolError> {
        let Some((namespace, tool)) = full_name.split_once('.') else {
            return Err(ToolError::new(
                "unknown_tool",
                format!("`{full_name}` is not a tool name"),
            )
            .with_hint("call tools as tools.<server>.<tool>(args)"));
        };
        let Some(source) = self.sources.get(namespace) else {
            let known: Vec<&str> = self.namespaces().collect();
            let mut err = ToolError::new(
                "unknown_tool",
                format!(
                    "there is no tool server named `{namespace}` (called as tools.{full_name})"
                ),
            );
            err.hint = Some(
                match closest(namespace, known.iter().copied(), 3).as_slice() {
                    [] if known.is_empty() => {
                        "no tool servers are configured on this daemon".to_owned()
                    }
                    [] => format!("available servers: {}", known.join(", ")),
                    near => format!("did you mean {}?", quote_list(near, "tools.", "")),
                },
            );
            return Err(err);
        };
        let tools = source.tools().await?;
        if !tools.iter().any(|t| t.name == tool) {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            let near = closest(tool, names.iter().copied(), 3);
            let mut err = ToolError::new(
                "unknown_tool",
                format!("server `{namespace}` has no tool named `{tool}`"),
            );
            err.hint = Some(if near.is_empty() {
                format!("tools on `{namespace}`: {}", names.join(", "))
            } else {
                format!(
                    "did you mean {}?",
                    quote_list(&near, &format!("tools.{namespace}."), "")
                )
            });
            return Err(err);
        }
        Ok((source.clone(), tool.to_owned()))
    }
}

/// `tools.a() or tools.b()`: each name with `prefix` and `suffix`, joined with "or".
pub fn quote_list(names: &[&str], prefix: &str, suffix: &str) -> String {
    names
        .iter()
        .map(|n| format!("{prefix}{n}{suffix}"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Up to `n` candidates closest to `wanted` by edit distance, nearest first, skipping ones so
/// far away that suggesting them would only confuse.
pub fn closest<'a>(
    wanted: &str,
    candidates: impl Iterator<Item = &'a str>,
    n: usize,
) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = candidates
        .map(|c| (edit_distance(&wanted.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= (wanted.len().max(c.len()) / 3).max(2))
        .collect();
    scored.sort();
    scored.into_iter().take(n).map(|(_, c)| c).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl ToolSource for Fixed {
        fn namespace(&self) -> &str {
            "github"
        }
        fn tools(&self) -> ToolsFuture<'_> {
            Box::pin(async {
                Ok(["search_issues", "create_issue", "get_repo"]
                    .iter()
                    .map(|n| ToolDescriptor {
                        name: (*n).into(),
                        description: String::new(),
                        input_schema: serde_json::json!({"type": "object"}),
                        output_schema: None,
                    })
                    .collect::<Vec<_>>()
                    .into())
            })
        }
        fn call<'a>(&'a self, _: &'a str, args: Value, _: &'a CallContext) -> ToolFuture<'a> {
            Box::pin(async move { Ok(args) })
        }
    }

    fn registry() -> ToolRegistry {
        let mut r = ToolRegistry::new();
        r.register(Arc::new(Fixed));
        r
    }

    fn resolve(r: &ToolRegistry, name: &str) -> Result<(Arc<dyn ToolSource>, String), ToolError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(r.resolve(name))
    }

    #[test]
    fn resolves_known_tools() {
        let r = registry();
        let (_, tool) = resolve(&r, "github.get_repo").unwrap();
        assert_eq!(tool, "get_repo");
    }

    #[test]
    fn unknown_tool_suggests_the_nearest_names() {
        let err = resolve(&registry(), "github.search_issue").err().unwrap();
        assert_eq!(err.code, "unknown_tool");
        assert_eq!(
            err.hint.as_deref(),
            Some("did you mean tools.github.search_issues?")
        );
    }

    #[test]
    fn unknown_namespace_suggests_servers() {
        let err = resolve(&registry(), "gthub.get_repo").err().unwrap();
        assert!(err.message.contains("`gthub`"), "{}", err.message);
        assert_eq!(err.hint.as_deref(), Some("did you mean tools.github?"));
        let err = resolve(&ToolRegistry::new(), "x.y").err().unwrap();
        assert_eq!(
            err.hint.as_deref(),
            Some("no tool servers are configured on this daemon")
        );
    }

    #[test]
    fn edit_distance_basics() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
